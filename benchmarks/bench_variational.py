"""Cost per step of `jl.VariationalMidpoint` against diffrax's Tsit5 and RK4.

    python benchmarks/bench_variational.py [--quick]

The double pendulum (both arms horizontal from rest), fixed step h = 0.01,
20 000 steps, float64 on the CPU, all through `jl.simulate` with the same
Lagrangian: one trajectory and a batch of B = 64 under `jax.vmap`. Compile time
(trace + compile of the first call) is printed beside the run time (best of
several calls of the compiled function). The variational step solves two small
implicit systems by Newton's method (2–3 iterations each), so it costs a few
explicit stages' worth; what it buys is the bounded energy error of
`experiments/variational.py`.
"""

import argparse
import os
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

import jaxlagrange as jl  # noqa: E402


class RK4(diffrax.AbstractERK):
    """The classical fourth-order Runge–Kutta method."""

    tableau = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    steps = 2_000 if args.quick else 20_000
    h = 0.01
    t1 = steps * h
    system, _, _ = jl.systems.double_pendulum()
    fixed = {"stepsize_controller": diffrax.ConstantStepSize()}
    solvers = {
        "VariationalMidpoint": (jl.VariationalMidpoint(), {}),
        "VariationalMidpoint(order=4)": (jl.VariationalMidpoint(order=4), {}),
        "Tsit5 (fixed h)": (diffrax.Tsit5(), fixed),
        "RK4 (fixed h)": (RK4(), fixed),
    }
    q0 = jnp.array([np.pi / 2, np.pi / 2])
    batch = q0 + 0.01 * jnp.arange(64.0)[:, None]
    print(f"double pendulum, h = {h}, {steps} steps, float64 CPU")
    print(
        f"{'solver':30s} {'compile (s)':>11s} {'B=1 µs/step':>12s} "
        f"{'B=64 µs/step/traj':>18s} {'vs Tsit5 (B=1)':>15s}"
    )
    rows = {}
    for name, (solver, options) in solvers.items():

        def run(q0, solver=solver, options=options):
            traj = jl.simulate(
                system,
                q0,
                jnp.zeros(2),
                t1=t1,
                dt0=h,
                solver=solver,
                max_steps=steps + 10,
                **options,
            )
            return traj.q[-1]

        single = eqx.filter_jit(run)
        batched = eqx.filter_jit(jax.vmap(run))
        start = time.perf_counter()
        single(q0).block_until_ready()
        compile_s = time.perf_counter() - start
        batched(batch).block_until_ready()
        times1, times64 = [], []
        for _ in range(3 if args.quick else 5):
            start = time.perf_counter()
            single(q0).block_until_ready()
            times1.append(time.perf_counter() - start)
            start = time.perf_counter()
            batched(batch).block_until_ready()
            times64.append(time.perf_counter() - start)
        rows[name] = (
            compile_s,
            min(times1) / steps * 1e6,
            min(times64) / steps / 64 * 1e6,
        )
    base = rows["Tsit5 (fixed h)"][1]
    for name, (compile_s, one, many) in rows.items():
        print(
            f"{name:30s} {compile_s:11.2f} {one:12.2f} {many:18.3f} {one / base:14.2f}×"
        )


if __name__ == "__main__":
    main()
