"""Cost of constraints: the double pendulum in Cartesian vs minimal coordinates.

    python benchmarks/bench_constraints.py [--quick] [--states 4096] [--batch 256]

float64 on CPU; every ratio is measured in the same run, on the same machine:

1. `jl.accelerations` under `jit(vmap)` over 4096 states: the Cartesian double
   pendulum (4 coordinates, 2 holonomic constraints: the KKT solve through the
   Schur complement) against the angle double pendulum (2 coordinates, no
   constraints), at the same physical states; compile time separately.
2. `jl.simulate` under `jit(vmap)` over a batch of 256 initial states to t1 = 10
   (rtol = atol = 1e-8, Tsit5): the Cartesian pendulum with the default drift
   control (projection after each step), with Baumgarte stabilization instead,
   and the angle pendulum. Wall time, solver steps, compile time.

Run times are the best (and the median) of repeated calls of an already compiled
function, the variants interleaved so that they share the machine's state.
"""

import argparse
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

from bench_eom import compile_timed, run_times  # noqa: E402

import jaxlagrange as jl  # noqa: E402


def positions(theta):
    """(x₁, y₁, x₂, y₂) of the unit double pendulum at angles θ."""
    x1, y1 = jnp.sin(theta[0]), -jnp.cos(theta[0])
    return jnp.stack([x1, y1, x1 + jnp.sin(theta[1]), y1 - jnp.cos(theta[1])])


def states(count, seed, spread=np.pi, speed=3.0):
    """Angle states and the same states in Cartesian coordinates."""
    rng = np.random.default_rng(seed)
    theta = jnp.asarray(rng.uniform(-spread, spread, (count, 2)))
    omega = jnp.asarray(rng.uniform(-speed, speed, (count, 2)))
    q, qd = jax.vmap(lambda th, om: jax.jvp(positions, (th,), (om,)))(theta, omega)
    return (theta, omega), (q, qd)


def table(times, compile_time, reference, per, unit=1e6, label="us", extra=None):
    best_ref, median_ref = times[reference]
    print(
        f"   {'':24s} {'best':>10s} {'median':>10s} {'per ' + per:>11s} "
        f"{'ratio best':>10s} {'ratio median':>12s}  compile"
        + ("" if extra is None else "  steps")
    )
    for name, (best, median) in times.items():
        print(
            f"   {name:24s} {best * unit:8.0f}{label} {median * unit:8.0f}{label} "
            f"{best / sizes[per] * 1e6:9.2f}us {best / best_ref:10.2f} "
            f"{median / median_ref:12.2f}  {compile_time[name]:6.2f}s"
            + ("" if extra is None else f"  {extra[name]}")
        )


sizes = {}


def accelerations(count: int, repeats: int) -> None:
    cartesian, _, _ = jl.systems.cartesian_double_pendulum()
    minimal, _, _ = jl.systems.double_pendulum()
    (theta, omega), (q, qd) = states(count, seed=0)
    t = jnp.zeros(count)

    def batched(system, q, qd, t):
        return jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0))(system, q, qd, t)

    variants = {
        "angles (n=2)": (minimal, theta, omega, t),
        "Cartesian (n=4, m=2)": (cartesian, q, qd, t),
    }
    compiled, compile_time = {}, {}
    for name, args in variants.items():
        compiled[name], compile_time[name] = compile_timed(batched, *args)
    # The same motion: the Cartesian q̈ is d/dt (J θ̇) along the angle solution.
    alpha = compiled["angles (n=2)"](*variants["angles (n=2)"])

    def velocity(th, om):
        return jax.jvp(positions, (th,), (om,))[1]

    expected = jax.vmap(lambda th, om, al: jax.jvp(velocity, (th, om), (om, al))[1])(
        theta, omega, alpha
    )
    got = compiled["Cartesian (n=4, m=2)"](*variants["Cartesian (n=4, m=2)"])
    error = float(jnp.max(jnp.abs(got - expected)))
    times = run_times(
        {name: (compiled[name], args) for name, args in variants.items()}, repeats
    )
    sizes["state"] = count
    print(f"\n1. jl.accelerations, jit(vmap) over {count} states (float64, CPU)")
    print(f"   max |q̈ Cartesian − d/dt(J θ̇)| = {error:.1e}")
    table(times, compile_time, "angles (n=2)", "state")


def simulations(batch: int, t1: float, repeats: int) -> None:
    cartesian, _, _ = jl.systems.cartesian_double_pendulum()
    minimal, _, _ = jl.systems.double_pendulum()
    # Moderate swings (|θ| ≤ 1, |θ̇| ≤ 1): comparable step counts in both coordinates.
    (theta, omega), (q, qd) = states(batch, seed=1, spread=1.0, speed=1.0)

    def run(system, q0, qd0, baumgarte=None):
        def one(q0, qd0):
            traj = jl.simulate(system, q0, qd0, t1=t1, baumgarte=baumgarte)
            return traj.q[-1], traj.stats["num_steps"]

        return jax.vmap(one)(q0, qd0)

    variants = {
        "angles (n=2)": (lambda a, b: run(minimal, a, b), (theta, omega)),
        "Cartesian, projection": (lambda a, b: run(cartesian, a, b), (q, qd)),
        "Cartesian, Baumgarte 10": (
            lambda a, b: run(cartesian, a, b, baumgarte=(10.0, 10.0)),
            (q, qd),
        ),
    }
    compiled, compile_time = {}, {}
    for name, (fn, args) in variants.items():
        compiled[name], compile_time[name] = compile_timed(fn, *args)
    steps, final = {}, {}
    for name, (_, args) in variants.items():
        final[name], n = compiled[name](*args)
        steps[name] = f"{float(jnp.mean(n)):.0f}"
    angles_q = jax.vmap(positions)(final["angles (n=2)"])
    agree = float(jnp.max(jnp.abs(final["Cartesian, projection"] - angles_q)))
    times = run_times(
        {name: (compiled[name], args) for name, (_, args) in variants.items()},
        repeats,
    )
    sizes["member"] = batch
    print(
        f"\n2. jl.simulate, jit(vmap) over {batch} initial states to t1 = {t1:g} "
        "(Tsit5, rtol = atol = 1e-8)"
    )
    print(f"   max |q(t1) Cartesian − positions(θ(t1))| = {agree:.1e}; steps: mean")
    table(times, compile_time, "angles (n=2)", "member", 1e3, "ms", extra=steps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--states", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--t1", type=float, default=10.0)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, "
        f"{os.cpu_count()} CPUs visible, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    accelerations(args.states, 30 if args.quick else 200)
    simulations(args.batch, args.t1, 2 if args.quick else 5)


if __name__ == "__main__":
    main()
