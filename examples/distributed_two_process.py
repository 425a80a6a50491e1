"""Run `jl.simulate_batch` across two processes with JAX's distributed runtime.

Two processes on this machine stand in for two hosts: each initializes
`jax.distributed` against a coordinator on localhost, owns two CPU devices, and
the batch of double pendulums is split over all four. Every process gets the
whole result back; process 0 prints a summary and saves it.

    python examples/distributed_two_process.py [--out result.npz]

On a real cluster run the worker part (`worker`) once per host with the
coordinator's address, the number of processes and each process's id, or let
`jax.distributed.initialize()` detect them (SLURM, Open MPI, Kubernetes, TPU).
"""

import argparse
import os
import socket
import subprocess
import sys


def double_pendulum():
    import jax.numpy as jnp

    import jaxlagrange as jl

    def lagrangian(q, qd, t, params):
        (a, b), (wa, wb) = q, qd
        g = params["g"]
        kinetic = wa**2 + 0.5 * wb**2 + wa * wb * jnp.cos(a - b)
        potential = -2 * g * jnp.cos(a) - g * jnp.cos(b)
        return kinetic - potential

    return jl.LagrangianSystem(lagrangian, params={"g": 9.81})


def inputs(batch=10):
    import numpy as np

    a = np.linspace(0.2, 2.8, batch)
    return (
        np.stack([a, -0.5 * a], axis=1),
        np.zeros(2),
        {"g": np.linspace(9, 11, batch)},
    )


def simulate(devices=None):
    import jax.numpy as jnp

    import jaxlagrange as jl

    q0, qd0, params = inputs()
    return jl.simulate_batch(
        double_pendulum(),
        q0,
        qd0,
        params=params,
        devices=devices,
        t1=2.0,
        saveat=jnp.linspace(0.0, 2.0, 5),
    )


def worker(coordinator, num_processes, process_id, out):
    import jax

    jax.config.update("jax_enable_x64", True)
    # CPU collectives (here: gathering the result to every process) go over gloo.
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, num_processes, process_id)
    import numpy as np

    traj = simulate()  # over jax.devices(): the devices of every process
    print(
        f"process {jax.process_index()}/{jax.process_count()}: "
        f"{len(jax.local_devices())} local of {len(jax.devices())} devices, "
        f"q(t1)[0] = {np.asarray(traj.q[0, -1])}",
        flush=True,
    )
    if jax.process_index() == 0 and out:
        np.savez(out, q=np.asarray(traj.q), qd=np.asarray(traj.qd))
    jax.distributed.shutdown()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="", help="save process 0's result (.npz)")
    parser.add_argument("--worker", nargs=3, metavar=("COORD", "N", "ID"))
    args = parser.parse_args(argv)
    if args.worker:
        coordinator, n, pid = args.worker
        return worker(coordinator, int(n), int(pid), args.out)
    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    env["JAX_PLATFORMS"] = "cpu"
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(here), env.get("PYTHONPATH", "")]
    )
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--out",
                args.out if pid == 0 else "",
                "--worker",
                f"localhost:{port}",
                "2",
                str(pid),
            ],
            env=env,
        )
        for pid in range(2)
    ]
    codes = [p.wait(timeout=300) for p in procs]
    if any(codes):
        sys.exit(f"a worker failed with exit codes {codes}")


if __name__ == "__main__":
    main()
