"""Error against run time of diffrax's solvers in `jl.simulate`, float64 on CPU.

    python benchmarks/bench_solvers.py [--rounds 3] [--quick]

For each system, each solver and each rtol (= atol) it prints the steps, the
error at t1 against a reference (Dopri8 at rtol 1e-13) and the run time of the
compiled `simulate` (median of `--rounds`, process CPU time, so that a shared
machine disturbs it less), and then, for each error level, which solver reached
it fastest. The systems:

- the double pendulum (non-stiff, chaotic; t1 = 10, q0 = (1.2, 0.4)):
  Tsit5, Dopri5, Dopri8;
- the free rigid body through a Dzhanibekov flip (unit quaternion with its
  constraint and projection; t1 = 20): Tsit5, Dopri5, Dopri8;
- a stiff chain: three unit masses on soft springs (k = 1) between two walls,
  the first two joined by a dashpot c = 1e4 (R = ½ c (ẋ₂ − ẋ₁)²), a mode that
  decays at ~2e4 /s beside oscillations of ~1 rad/s (t1 = 10): Tsit5, Dopri8
  and the implicit Kvaerno5.
"""

import argparse
import os
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

from _jitted import median_cpu_time  # noqa: E402

import jaxlagrange as jl  # noqa: E402


def _chain_lagrangian(q, qd, t, params):
    x = jnp.concatenate([jnp.zeros(1), q, jnp.zeros(1)])  # the walls at 0
    return 0.5 * jnp.sum(qd**2) - 0.5 * params["k"] * jnp.sum(jnp.diff(x) ** 2)


def _dashpot(q, qd, t, params):
    return 0.5 * params["c"] * (qd[1] - qd[0]) ** 2


def systems():
    pendulum, _, _ = jl.systems.double_pendulum()
    body, p0, pd0 = jl.systems.free_rigid_body()
    chain = jl.LagrangianSystem(
        _chain_lagrangian, params={"k": 1.0, "c": 1e4}, dissipation=_dashpot
    )
    non_stiff = (diffrax.Tsit5, diffrax.Dopri5, diffrax.Dopri8)
    return {
        "double pendulum": (
            pendulum, jnp.array([1.2, 0.4]), jnp.zeros(2), 10.0, non_stiff,
        ),
        "free rigid body": (body, p0, pd0, 20.0, non_stiff),
        "stiff chain (dashpot c = 1e4)": (
            chain, jnp.array([0.5, 0.0, -0.3]), jnp.zeros(3), 10.0,
            (diffrax.Tsit5, diffrax.Dopri8, diffrax.Kvaerno5),
        ),
    }  # fmt: skip


def program(system, q0, qd0, t1, solver, rtol):
    def run():
        traj = jl.simulate(system, q0, qd0, t1=t1, solver=solver, rtol=rtol,
                           atol=rtol, max_steps=1_000_000)  # fmt: skip
        return jnp.concatenate([traj.q[-1], traj.qd[-1]]), traj.stats["num_steps"]

    start = time.process_time()
    compiled = jax.jit(run).lower().compile()
    return compiled, time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="rtol 1e-6 and 1e-9")
    args = parser.parse_args()
    rtols = (1e-6, 1e-9) if args.quick else (1e-6, 1e-8, 1e-10, 1e-12)
    print(f"uptime: {os.popen('uptime').read().strip()}")
    for name, (system, q0, qd0, t1, solvers) in systems().items():
        reference, _ = program(system, q0, qd0, t1, diffrax.Dopri8(), 1e-13)
        y_ref = np.asarray(reference()[0])
        print(f"\n{name}, t1 = {t1:g} (error: max |y(t1) − y_ref(t1)|)")
        rows = []
        for solver_cls in solvers:
            for rtol in rtols:
                compiled, compile_s = program(system, q0, qd0, t1, solver_cls(), rtol)
                y, steps = compiled()
                error = float(np.max(np.abs(np.asarray(y) - y_ref)))
                run_s = median_cpu_time(compiled, args.rounds)
                rows.append((solver_cls.__name__, rtol, error, run_s))
                print(f"  {solver_cls.__name__:9s} rtol {rtol:7.0e}  {int(steps):7d} "
                      f"steps  error {error:8.1e}  run {run_s * 1e3:8.2f} ms  "
                      f"(compile {compile_s:.1f} s)")  # fmt: skip
        print("  fastest to each error:")
        for level in (1e-4, 1e-6, 1e-8, 1e-10):
            reached = [r for r in rows if r[2] <= level]
            if reached:
                best = min(reached, key=lambda r: r[3])
                print(f"    ≤ {level:.0e}: {best[0]} (rtol {best[1]:.0e}, "
                      f"{best[3] * 1e3:.2f} ms)")  # fmt: skip


if __name__ == "__main__":
    main()
