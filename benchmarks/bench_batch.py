"""Throughput of `jl.simulate_batch` for the double pendulum on CPU.

    python benchmarks/bench_batch.py [--quick]

Reports, after compilation (each timing is the best of `--repeats` runs):

1. trajectories per second against the batch size (1 ... 16384): flat past
   ~256 on a CPU, where `simulate_batch` solves more than 512 members one chunk
   of at most 512 after another (a plain vmap, as the hand-written reference and
   `vmap(simulate)` are, slows per member as its loop's buffers outgrow the
   cache: 1.2-1.4x from 1024 to 4096-16384 members);
2. the per-trajectory cost at the largest batch against the hand-written
   double-pendulum EOM integrated by the same diffrax solver, vmapped;
3. memory per trajectory (XLA's compiled temporary + output buffers / batch);
4. scaling over 1, 2 and 4 (fake) CPU devices, in a subprocess with
   `XLA_FLAGS=--xla_force_host_platform_device_count=4`.

All members start from rest at angles drawn uniformly from [-2, 2] (seed 0), and
run to t1 = 10 with Tsit5 at rtol = atol = 1e-8, saving the final state only.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _jitted import Jitted  # noqa: E402


T1, RTOL = 10.0, 1e-8


def _setup():
    import jax

    jax.config.update("jax_enable_x64", True)


def _inputs(batch):
    import numpy as np

    rng = np.random.default_rng(0)
    return rng.uniform(-2.0, 2.0, (batch, 2)), np.zeros((batch, 2))


def _system():
    import jaxlagrange as jl

    system, _, _ = jl.systems.make("double_pendulum")
    return system


def _ours(devices=None):
    import jax
    import jax.numpy as jnp

    import jaxlagrange as jl

    system = _system()

    def run(q0, qd0):
        traj = jl.simulate_batch(
            system, q0, qd0, t1=T1, rtol=RTOL, atol=RTOL, devices=devices, throw=False
        )
        return traj.q[:, -1], traj.qd[:, -1]

    return jax.jit(run), jnp


def _plain_vmap():
    """`jax.vmap` of `jl.simulate` itself: what `simulate_batch` adds is the rest."""
    import jax

    import jaxlagrange as jl

    system = _system()

    def one(q0, qd0):
        traj = jl.simulate(system, q0, qd0, t1=T1, rtol=RTOL, atol=RTOL, throw=False)
        return traj.q[-1], traj.qd[-1]

    return jax.jit(jax.vmap(one))


def _hand_written():
    """The double pendulum's q̈ written out (unit masses and lengths, g = 9.81)."""
    import diffrax
    import jax
    import jax.numpy as jnp

    g = 9.81

    def field(t, y, args):
        (a, b), (wa, wb) = y
        d = a - b
        s, c = jnp.sin(d), jnp.cos(d)
        den = 2.0 - c**2
        aa = (
            -(wb**2) * s - wa**2 * s * c - 2 * g * jnp.sin(a) + g * jnp.sin(b) * c
        ) / den
        bb = (
            2 * wa**2 * s + wb**2 * s * c + 2 * g * jnp.sin(a) * c - 2 * g * jnp.sin(b)
        ) / den
        return jnp.stack([wa, wb]), jnp.stack([aa, bb])

    def one(q0, qd0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            t0=0.0,
            t1=T1,
            dt0=None,
            y0=(q0, qd0),
            stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=RTOL),
            max_steps=100_000,
            throw=False,
        )
        return sol.ys[0][-1], sol.ys[1][-1]

    return jax.jit(jax.vmap(one))


def _compile(fn, args):
    import jax

    compiled = fn.lower(*args).compile()  # fills the jitted fn's cache too
    jax.block_until_ready(fn(*args))
    return Jitted(fn, compiled)


def _best(compiled_fns, args, repeats):
    """Best-of-`repeats` seconds of each compiled function, run in interleaved
    rounds so that a busy machine slows them alike."""
    import jax

    best = [float("inf")] * len(compiled_fns)
    for _ in range(repeats):
        for i, fn in enumerate(compiled_fns):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def _time(fn, args, repeats):
    compiled = _compile(fn, args)
    return _best([compiled], args, repeats)[0], compiled


def _memory(compiled, batch):
    try:
        stats = compiled.memory_analysis()
        total = stats.temp_size_in_bytes + stats.output_size_in_bytes
        return total / batch
    except Exception:  # not every backend reports it
        return float("nan")


def throughput(sizes, repeats):
    import jax.numpy as jnp

    ours, _ = _ours()
    hand = _hand_written()
    plain = _plain_vmap()
    rows = []
    for batch in sizes:
        q0, qd0 = (jnp.asarray(x) for x in _inputs(batch))
        compiled = _compile(ours, (q0, qd0))
        compare = batch == sizes[-1] or batch == 1
        fns = [compiled]
        if compare:
            fns += [_compile(hand, (q0, qd0)), _compile(plain, (q0, qd0))]
        seconds, *others = _best(fns, (q0, qd0), repeats)
        row = {
            "batch": batch,
            "seconds": seconds,
            "traj_per_s": batch / seconds,
            "bytes_per_traj": _memory(compiled, batch),
        }
        if compare:
            hand_seconds, plain_seconds = others
            row["hand_seconds"] = hand_seconds
            row["ratio_vs_hand"] = seconds / hand_seconds
            row["ratio_vs_vmap_simulate"] = seconds / plain_seconds
            # Same answers, to the solver's tolerance.
            a, b = ours(q0, qd0), hand(q0, qd0)
            row["max_abs_diff_vs_hand"] = float(jnp.max(jnp.abs(a[0] - b[0])))
        rows.append(row)
        print(json.dumps(row), flush=True)
    return rows


def scaling(batch, repeats):
    """Run in a subprocess with 4 fake CPU devices."""
    import jax
    import jax.numpy as jnp

    devices = jax.devices()
    q0, qd0 = (jnp.asarray(x) for x in _inputs(batch))
    rows = []
    for count in (1, 2, 4):
        fn, _ = _ours(devices[:count])
        seconds, _ = _time(fn, (q0, qd0), repeats)
        rows.append(
            {
                "devices": count,
                "batch": batch,
                "seconds": seconds,
                "traj_per_s": batch / seconds,
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small batches only")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling-only", type=int, metavar="BATCH")
    parser.add_argument("--out", help="write the results as JSON here")
    parser.add_argument(
        "--no-scaling",
        action="store_true",
        help="leave out the scaling over fake CPU devices (e.g. on a GPU)",
    )
    args = parser.parse_args(argv)
    _setup()
    if args.scaling_only:
        scaling(args.scaling_only, args.repeats)
        return
    sizes = [1, 16, 256, 1024] if args.quick else [1, 4, 16, 64, 256, 1024, 4096, 16384]
    repeats = 1 if args.quick else args.repeats
    import jax

    print(
        f"# jax {jax.__version__}, {jax.devices()[0].device_kind}, "
        f"{os.cpu_count()} CPU cores; double pendulum to t1 = {T1}, rtol = {RTOL}"
    )
    print("# throughput against batch size")
    rows = throughput(sizes, repeats)
    big = rows[-1]
    print(
        f"# largest batch {big['batch']}: {big['traj_per_s']:.0f} trajectories/s, "
        f"{1e3 * big['seconds'] / big['batch']:.3f} ms each, "
        f"{big['ratio_vs_hand']:.2f}x the hand-written EOM "
        f"({big['ratio_vs_vmap_simulate']:.2f}x vmap(simulate)), "
        f"{big['bytes_per_traj'] / 1024:.1f} KiB per trajectory"
    )
    scale = []
    if not args.no_scaling:
        scale = _scaling_subprocess(256 if args.quick else 4096, repeats)
    if args.out:
        Path(args.out).write_text(
            json.dumps({"throughput": rows, "scaling": scale}, indent=1)
        )


def _scaling_subprocess(batch, repeats):
    print("# scaling over fake CPU devices")
    env = dict(
        os.environ,
        XLA_FLAGS="--xla_force_host_platform_device_count=4",
        JAX_PLATFORMS="cpu",
    )
    done = subprocess.run(
        [
            sys.executable,
            __file__,
            "--scaling-only",
            str(batch),
            "--repeats",
            str(repeats),
        ],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    print(done.stdout, end="")
    return [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]


if __name__ == "__main__":
    main()
