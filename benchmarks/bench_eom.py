"""Benchmarks of the equations of motion, float64 on CPU.

    python benchmarks/bench_eom.py [--quick] [--states 4096]

All ratios are measured in the same run, on the same machine:

1. `jl.accelerations` for the double pendulum under `jit(vmap)` over 4096 states
   against the hand-written q̈ in JAX (M q̈ = f by Cramer's rule, four
   transcendentals: the best reasonable hand-written version; target ≤ 1.3×,
   issue 26), twice: with the params traced (passed through `jit` as the
   system's leaves) and with the constants written into L (and into the
   hand-written code); also the same equations without the value checks
   (singular mass matrix, non-finite state), to show what the checks cost;
   each row with its compile time (trace + lower + compile) and its compiled
   HLO: fusions in the entry computation, transcendental ops (sine, cosine,
   ...) and divides in the whole module;
2. scaling with the number of coordinates on the moving-mirror cavity, N modes and
   N + 1 coordinates, N = 4 ... 128: time per call of one state and of a batch,
   and per state.

Run times are the best (and the median) of repeated calls of an already compiled
function, the variants interleaved so that they share the machine's state.
"""

import argparse
import os
import re
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

import jaxlagrange as jl  # noqa: E402
from jaxlagrange._constraints import dynamics  # noqa: E402


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _jitted import Jitted  # noqa: E402


PARAMS = {"m1": 1.0, "m2": 1.0, "l1": 1.0, "l2": 1.0, "g": 9.81}


def lagrangian(q, qd, t, params):
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    kinetic = (
        0.5 * (m1 + m2) * l1**2 * qd[0] ** 2
        + 0.5 * m2 * l2**2 * qd[1] ** 2
        + m2 * l1 * l2 * qd[0] * qd[1] * jnp.cos(q[0] - q[1])
    )
    potential = -(m1 + m2) * g * l1 * jnp.cos(q[0]) - m2 * g * l2 * jnp.cos(q[1])
    return kinetic - potential


def hand_accelerations(q, qd, params):
    """q̈ by hand: M q̈ = f by Cramer's rule, four transcendentals."""
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    (q1, q2), (w1, w2) = q, qd
    d = q1 - q2
    s, c = jnp.sin(d), jnp.cos(d)
    a11 = (m1 + m2) * l1**2
    a12 = m2 * l1 * l2 * c
    a22 = m2 * l2**2
    f1 = -m2 * l1 * l2 * s * w2**2 - (m1 + m2) * g * l1 * jnp.sin(q1)
    f2 = m2 * l1 * l2 * s * w1**2 - m2 * g * l2 * jnp.sin(q2)
    det = a11 * a22 - a12 * a12
    return jnp.stack([(a22 * f1 - a12 * f2) / det, (a11 * f2 - a12 * f1) / det])


_TRANSCENDENTAL = ("sine", "cosine", "tan", "exponential", "log", "power", "atan2")


def hlo_stats(compiled) -> str:
    text = compiled.as_text()
    entry = text[text.index("\nENTRY") :]
    fusions = entry.count(" fusion(")
    transcendental = sum(
        len(re.findall(rf"= \S+ {op}\(", text)) for op in _TRANSCENDENTAL
    )
    divides = len(re.findall(r"= \S+ divide\(", text))
    sqrt = len(re.findall(r"= \S+ (?:sqrt|rsqrt)\(", text))
    custom = len(re.findall(r"custom-call\(", entry))
    return (
        f"{fusions:3d} fusions, {transcendental:2d} transcendental, {divides:2d} divide, "
        f"{sqrt} sqrt, {custom} custom-call"
    )


def compile_timed(fn, *args):
    """jax.jit(fn), compiled ahead for args (as a `Jitted`), and the seconds
    that took (trace + lower + compile)."""
    jitted = jax.jit(fn)
    start = time.perf_counter()
    compiled = jitted.lower(*args).compile()  # fills jitted's cache too
    return Jitted(jitted, compiled), time.perf_counter() - start


def run_times(variants: dict, repeats: int) -> dict:
    """Best and median wall time of each compiled (fn, args), interleaved."""
    for fn, args in variants.values():
        jax.block_until_ready(fn(*args))
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, (fn, args) in variants.items():
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[name].append(time.perf_counter() - start)
    return {name: (min(ts), float(np.median(ts))) for name, ts in times.items()}


def lagrangian_constants(q, qd, t):
    """The double pendulum with its constants written into L."""
    return lagrangian(q, qd, t, PARAMS)


def double_pendulum(states: int, repeats: int) -> tuple[float, str]:
    """Row 1 with the params traced, then with the constants in L; returns the
    median ratio with traced params."""
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.uniform(-np.pi, np.pi, (states, 2)))
    qd = jnp.asarray(rng.uniform(-3.0, 3.0, (states, 2)))
    t = jnp.zeros(states)

    def library(system, q, qd, t):
        return jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0))(system, q, qd, t)

    def unchecked(system, q, qd, t):
        def one(q, qd, t):
            return dynamics(system, q, qd, t).accelerations

        return jax.vmap(one)(q, qd, t)

    def traced_hand(system, q, qd, t):
        return jax.vmap(hand_accelerations, in_axes=(0, 0, None))(q, qd, system.params)

    def constant_hand(system, q, qd, t):
        return jax.vmap(hand_accelerations, in_axes=(0, 0, None))(q, qd, PARAMS)

    cases = [
        ("traced params", jl.LagrangianSystem(lagrangian, params=PARAMS), traced_hand),
        ("constants in L", jl.LagrangianSystem(lagrangian_constants), constant_hand),
    ]
    ratios = {}
    for label, system, hand in cases:
        args = (system, q, qd, t)
        compiled, compile_time = {}, {}
        for name, fn in [("hand", hand), ("jl", library), ("jl unchecked", unchecked)]:
            compiled[name], compile_time[name] = compile_timed(fn, *args)
        error = np.abs(np.asarray(compiled["jl"](*args) - compiled["hand"](*args)))
        times = run_times({name: (c, args) for name, c in compiled.items()}, repeats)
        best_hand, median_hand = times["hand"]

        print(
            f"\n1. Double pendulum, {label}, jit(vmap) over {states} states "
            f"(float64, CPU, median of {repeats} interleaved calls)"
        )
        print(f"   max |jl − hand| = {error.max():.1e}")
        print(
            f"   {'':13s} {'best':>9s} {'median':>9s} {'per state':>10s} "
            f"{'ratio best':>10s} {'ratio median':>12s}  compile  HLO"
        )
        for name, (best, median) in times.items():
            print(
                f"   {name:13s} {best * 1e6:7.0f}us {median * 1e6:7.0f}us "
                f"{median / states * 1e9:8.1f}ns {best / best_hand:10.2f} "
                f"{median / median_hand:12.2f}  {compile_time[name]:5.2f}s  "
                f"{hlo_stats(compiled[name])}"
            )
        ratios[label] = (times["jl"][1] / median_hand, times, median_hand)
    ratio, times, median_hand = ratios["traced params"]
    detail = (
        f"jl {times['jl'][1] * 1e6:.0f} us, hand {median_hand * 1e6:.0f} us (median "
        f"of {repeats}), jl unchecked {times['jl unchecked'][1] * 1e6:.0f} us; "
        f"constants in L {ratios['constants in L'][0]:.2f}x"
    )
    return ratio, detail


def double_pendulum_ratio(states: int, repeats: int) -> tuple[float, str]:
    """Row 2 of issue 13's table, for `bench_simulate.py` (prints nothing)."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return double_pendulum(states, repeats)


def cavity(modes_list, batch: int, repeats: int) -> None:
    print(
        f"\n2. Moving-mirror cavity, n = N + 1 coordinates: one state (jit) and "
        f"jit(vmap) over {batch} states"
    )
    print(
        f"   {'N':>4s} {'compile':>8s} {'one state':>10s} {'batch':>10s} "
        f"{'per state':>10s}  HLO of the batch"
    )
    for modes in modes_list:
        system, q0, qd0 = jl.systems.make("cavity", modes=modes)
        system = system.with_mass_solver(None)  # the dense path's scaling
        rng = np.random.default_rng(modes)
        q = np.tile(np.asarray(q0), (batch, 1))
        q[:, 0] = rng.uniform(0.8, 1.2, batch)
        q[:, 1:] = 0.1 * rng.normal(size=(batch, modes)) / np.arange(1, modes + 1)
        q = jnp.asarray(q)
        qd = jnp.asarray(0.1 * rng.normal(size=(batch, modes + 1)))

        def one(system, q, qd):
            return jl.accelerations(system, q, qd, 0.0)

        def batched(system, q, qd):
            return jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None))(
                system, q, qd, 0.0
            )

        single, _ = compile_timed(one, system, q[0], qd[0])
        many, compile_time = compile_timed(batched, system, q, qd)
        reps = max(3, repeats // (1 + modes // 16))
        times = run_times(
            {"one": (single, (system, q[0], qd[0])), "batch": (many, (system, q, qd))},
            reps,
        )
        print(
            f"   {modes:4d} {compile_time:7.2f}s {times['one'][0] * 1e6:8.1f}us "
            f"{times['batch'][0] * 1e3:8.2f}ms {times['batch'][0] / batch * 1e6:8.2f}us"
            f"  {hlo_stats(many)}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    parser.add_argument("--states", type=int, default=4096)
    args = parser.parse_args()
    print(
        f"jax {jax.__version__}, {jax.devices()[0].platform}, "
        f"{os.cpu_count()} CPUs visible, XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}"
    )
    repeats = 30 if args.quick else 200
    double_pendulum(args.states, repeats)
    modes = [4, 8, 16, 32] if args.quick else [4, 8, 16, 32, 64, 128]
    cavity(modes, batch=64 if args.quick else 256, repeats=repeats // 2)


if __name__ == "__main__":
    main()
