"""Benchmarks of `jl.fit`, float64 on CPU.

    python benchmarks/bench_fit.py [--quick]

All ratios are measured in the same run, on the same machine:

1. the cost of one loss-and-gradient evaluation (`jax.value_and_grad` of
   `jl.fit_loss`) against one forward evaluation of the same loss, and against a
   plain `jax.vmap(jl.simulate)` of the same batch of solves, for each adjoint
   (the default `RecursiveCheckpointAdjoint()`, the same with 256 checkpoints,
   which never recomputes a segment of up to 256 steps, and `BacksolveAdjoint()`);
   target
   ≤ 4×. The batch: 10 s of a double pendulum at 201 times, cut into 20 shooting
   segments (20 solves of 0.5 s, vmapped), rtol = atol = 1e-8;
2. the wall time of fitting the damped pendulum (length and damping from 30% off,
   41 samples over 2 s, L-BFGS, 40 steps), compile time apart.

Compile time is kept apart from run time: every run time is the best of several
calls of an already compiled function.
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
import optax  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

import jaxlagrange as jl  # noqa: E402


def best_of(fn, *args, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def compiled(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def gradient_cost(repeats, t1, saves, segments):
    system, q0, qd0 = jl.systems.double_pendulum()
    ts = jnp.linspace(0.0, t1, saves)
    traj = jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=1e-10, atol=1e-10)
    data = jl.Observations(ts, traj.q, traj.qd)
    guess = {**system.params, "l1": 1.1, "m2": 0.9}

    def with_params(params):
        return eqx.tree_at(lambda s: s.params, system, params)

    # The same batch of solves as the loss: each segment from its data state.
    bounds = jnp.round(jnp.linspace(0, saves - 1, segments + 1)).astype(int)
    seg_ts = jnp.stack(
        [ts[a] + (ts[1] - ts[0]) * jnp.arange(bounds[1] + 1) for a in bounds[:-1]]
    )

    @jax.jit
    def forward_simulate(params):
        def one(q0, qd0, ts):
            return jl.simulate(
                with_params(params), q0, qd0, t0=ts[0], t1=ts[-1], saveat=ts
            ).q

        return jax.vmap(one)(traj.q[bounds[:-1]], traj.qd[bounds[:-1]], seg_ts)

    rows = []
    simulate_compile = compiled(forward_simulate, guess)
    simulate_s = best_of(forward_simulate, guess, repeats=repeats)
    for name, adjoint in (
        ("default: RecursiveCheckpointAdjoint()", None),
        (
            "RecursiveCheckpoint(checkpoints=256)",
            diffrax.RecursiveCheckpointAdjoint(checkpoints=256),
        ),
        ("BacksolveAdjoint", diffrax.BacksolveAdjoint()),
    ):

        def loss(params, adjoint=adjoint):
            return jl.fit_loss(
                with_params(params), data, segments=segments, adjoint=adjoint
            )

        value = jax.jit(loss)
        value_and_grad = jax.jit(jax.value_and_grad(loss))
        rows.append(
            {
                "adjoint": name,
                "forward_compile_s": compiled(value, guess),
                "grad_compile_s": compiled(value_and_grad, guess),
                "forward_s": best_of(value, guess, repeats=repeats),
                "grad_s": best_of(value_and_grad, guess, repeats=repeats),
            }
        )
    print(
        f"\n1. loss-and-gradient against forward: double pendulum, t = {t1}, "
        f"{saves} samples, {segments} segments (a batch of {segments} solves)"
    )
    print(
        f"   plain vmap(jl.simulate) of the same batch: {simulate_s * 1e3:.2f} ms "
        f"(compile {simulate_compile:.1f} s)"
    )
    print(
        f"   {'adjoint':<36}{'forward ms':>11}{'grad ms':>10}{'grad/fwd':>10}"
        f"{'grad/sim':>10}{'compile fwd/grad s':>20}"
    )
    for r in rows:
        print(
            f"   {r['adjoint']:<36}{r['forward_s'] * 1e3:>11.2f}"
            f"{r['grad_s'] * 1e3:>10.2f}{r['grad_s'] / r['forward_s']:>9.2f}×"
            f"{r['grad_s'] / simulate_s:>9.2f}×"
            f"{r['forward_compile_s']:>10.1f} / {r['grad_compile_s']:.1f}"
        )
    print("   target: grad/fwd ≤ 4×")
    return rows


def _damped_lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    return 0.5 * m * length**2 * qd[0] ** 2 + m * g * length * jnp.cos(q[0])


def _damping(q, qd, t, params):
    return 0.5 * params["c"] * qd[0] ** 2


def pendulum_fit(steps):
    true = {"m": 1.0, "l": 2.0, "g": 9.81, "c": 0.3}
    system = jl.LagrangianSystem(_damped_lagrangian, params=true, dissipation=_damping)
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = jl.simulate(
        system, jnp.array([1.2]), jnp.array([0.0]), t1=2.0, saveat=ts, rtol=1e-10
    )
    data = jl.Observations(ts, traj.q, traj.qd)
    optimizer = optax.lbfgs()

    def run():
        return jl.fit(
            system,
            data,
            params={**true, "l": 1.4, "c": 0.21},
            optimizer=optimizer,
            steps=steps,
            trainable={"l", "c"},
            positive={"l", "c"},
            rtol=1e-10,
            atol=1e-10,
        )

    start = time.perf_counter()
    run()
    first = time.perf_counter() - start
    start = time.perf_counter()
    result = run()  # the compiled step is reused
    again = time.perf_counter() - start
    errors = {k: abs(float(result.params[k]) / true[k] - 1) for k in ("l", "c")}
    print(
        f"\n2. fitting the damped pendulum (l, c from 30% off), L-BFGS, {steps} steps"
    )
    print(
        f"   wall time {again:.2f} s ({again / (steps + 1) * 1e3:.1f} ms per step), "
        f"compile {first - again:.1f} s; relative errors l {errors['l']:.1e}, "
        f"c {errors['c']:.1e}, final loss {result.loss:.1e}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    repeats = 3 if args.quick else 10
    print(f"jax {jax.__version__}, {jax.devices()[0].platform}, float64")
    gradient_cost(repeats, t1=10.0, saves=201, segments=20)
    pendulum_fit(steps=40)


if __name__ == "__main__":
    main()
