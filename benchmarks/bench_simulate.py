"""Benchmarks of `jl.simulate` on the double pendulum, float64 on CPU.

    python benchmarks/bench_simulate.py [--quick]

Prints each row of issue 13's table, every ratio measured in this one run
against the best reasonable hand-written reference: the double-pendulum q̈
written out with a flat state y = [q; q̇] and four transcendentals (sin q₁,
sin q₂, sin Δ, cos Δ), integrated by `diffrax.diffeqsolve` with the same solver
(Tsit5), controller (PID, rtol = atol = 1e-8), initial states and 11 save times
on [0, 10]:

1. batched run time, B = 256: `jl.simulate` / hand-written (target ≤ 1.15×),
   with the params traced and with the constants written into L, compile
   time beside;
2. `jl.accelerations` / hand-written q̈ under jit(vmap), B = 4096 (≤ 1.3×);
3. per trajectory against SymPy `LagrangesMethod` + `lambdify` + SciPy
   `solve_ivp(method="DOP853")` at the same tolerances (≥ 300×);
4. first call (trace + compile + run), each in a fresh process (≤ 1.3×): a
   `jax.jit(jax.vmap(jl.simulate))` (which carries the diagnosis of failures
   in its program, to name them under the caller's jit) and `jl.simulate_batch`
   (which names them afterwards, by a program compiled only on a failure);
5. gradient of a trajectory loss / forward run, jl and hand-written (≤ 3×);
6. compile time of `simulate` (trace + lower + compile, apart from run time) for
   the double pendulum, a constrained system (`cartesian_pendulum`) and
   unilateral ones (`bouncing_ball`, `mass_on_sphere`);
7. the compiled programs: fusions, transcendental ops, while loops.

Run times are medians (and minima) over interleaved calls of already compiled
functions; the machine may be shared, so the medians are the figures to quote.
"""

import argparse
import os
import re
import subprocess
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

from bench_eom import (  # noqa: E402
    compile_timed,
    double_pendulum_ratio,
    run_times,
)

import jaxlagrange as jl  # noqa: E402


M1, M2, L1, L2, G = 1.0, 1.0, 1.0, 1.0, 9.81
T1 = 10.0
SAVES = 11
RTOL = 1e-8
BATCH = 256


def lagrangian(q, qd, t, params):
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    kinetic = (
        0.5 * (m1 + m2) * l1**2 * qd[0] ** 2
        + 0.5 * m2 * l2**2 * qd[1] ** 2
        + m2 * l1 * l2 * qd[0] * qd[1] * jnp.cos(q[0] - q[1])
    )
    potential = -(m1 + m2) * g * l1 * jnp.cos(q[0]) - m2 * g * l2 * jnp.cos(q[1])
    return kinetic - potential


PARAMS = dict(m1=M1, m2=M2, l1=L1, l2=L2, g=G)
SYSTEM = jl.LagrangianSystem(lagrangian, params=PARAMS)


def hand_qdd(q1, q2, w1, w2, params):
    """The double-pendulum q̈ by hand: M q̈ = f solved by Cramer's rule."""
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    d = q1 - q2
    s, c = jnp.sin(d), jnp.cos(d)
    a11 = (m1 + m2) * l1**2
    a12 = m2 * l1 * l2 * c
    a22 = m2 * l2**2
    f1 = -m2 * l1 * l2 * s * w2**2 - (m1 + m2) * g * l1 * jnp.sin(q1)
    f2 = m2 * l1 * l2 * s * w1**2 - m2 * g * l2 * jnp.sin(q2)
    det = a11 * a22 - a12 * a12
    return (a22 * f1 - a12 * f2) / det, (a11 * f2 - a12 * f1) / det


def hand_written(t, y, params):
    """The vector field of y = [q₁, q₂, q̇₁, q̇₂], four transcendentals."""
    q1, q2, w1, w2 = y
    a1, a2 = hand_qdd(q1, q2, w1, w2, params)
    return jnp.stack([w1, w2, a1, a2])


SAVE_TS = np.linspace(0.0, T1, SAVES)


def initial_states(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q0 = rng.uniform(-2.0, 2.0, (batch, 2))
    qd0 = rng.uniform(-1.0, 1.0, (batch, 2))
    return jnp.asarray(q0), jnp.asarray(qd0)


def make_jl(solver=None, rtol=RTOL, system=SYSTEM):
    solver = diffrax.Tsit5() if solver is None else solver

    def one(params, q0, qd0):
        s = (
            system
            if params is None
            else eqx.tree_at(lambda s: s.params, system, params)
        )
        traj = jl.simulate(
            s,
            q0,
            qd0,
            t1=T1,
            saveat=jnp.asarray(SAVE_TS),
            solver=solver,
            rtol=rtol,
            atol=rtol,
        )
        return traj.q, traj.qd, traj.stats["num_steps"]

    return one


def make_jl_batch():
    """`jl.simulate_batch` of the same problem, batched by itself (not under an
    outer jit, where its program would be the caller's)."""

    def run(params, q0, qd0):
        system = eqx.tree_at(lambda s: s.params, SYSTEM, params)
        traj = jl.simulate_batch(
            system,
            q0,
            qd0,
            t1=T1,
            saveat=jnp.asarray(SAVE_TS),
            rtol=RTOL,
            atol=RTOL,
        )
        return traj.q, traj.qd, traj.stats["num_steps"]

    return run


CONSTANT_SYSTEM = jl.LagrangianSystem(lambda q, qd, t: lagrangian(q, qd, t, PARAMS))


def make_jl_constants():
    """`make_jl` for the double pendulum with its constants written into L (the
    params argument is ignored)."""
    inner = make_jl(system=CONSTANT_SYSTEM)

    def one(params, q0, qd0):
        del params
        return inner(None, q0, qd0)

    return one


def make_hand_constants():
    """`make_hand` with the constants known at trace time."""
    inner = make_hand()

    def one(params, q0, qd0):
        del params
        return inner(PARAMS, q0, qd0)

    return one


def make_hand(solver=None, rtol=RTOL):
    solver = diffrax.Tsit5() if solver is None else solver

    def one(params, q0, qd0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(hand_written),
            solver,
            t0=0.0,
            t1=T1,
            dt0=None,
            y0=jnp.concatenate([q0, qd0]),
            args=params,
            saveat=diffrax.SaveAt(ts=jnp.asarray(SAVE_TS)),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol),
            max_steps=100_000,
        )
        return sol.ys[:, :2], sol.ys[:, 2:], sol.stats["num_steps"]

    return one


def batched(fn):
    return jax.vmap(fn, in_axes=(None, 0, 0))


def sympy_rhs():
    import sympy
    from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

    q1, q2 = dynamicsymbols("q1 q2")
    w1, w2 = dynamicsymbols("q1 q2", 1)
    kinetic = (
        sympy.Rational(1, 2) * (M1 + M2) * L1**2 * w1**2
        + sympy.Rational(1, 2) * M2 * L2**2 * w2**2
        + M2 * L1 * L2 * w1 * w2 * sympy.cos(q1 - q2)
    )
    potential = -(M1 + M2) * G * L1 * sympy.cos(q1) - M2 * G * L2 * sympy.cos(q2)
    method = LagrangesMethod(kinetic - potential, [q1, q2])
    method.form_lagranges_equations()
    state = [q1, q2, w1, w2]
    mass = sympy.lambdify(state, method.mass_matrix_full, "numpy")
    forcing = sympy.lambdify(state, method.forcing_full, "numpy")

    def rhs(t, y):
        return np.linalg.solve(mass(*y), forcing(*y)).ravel()

    return rhs


def scipy_solve(rhs, q0, qd0, rtol):
    import scipy.integrate

    y0 = np.concatenate([q0, qd0])
    sol = scipy.integrate.solve_ivp(
        rhs, (0.0, T1), y0, method="DOP853", rtol=rtol, atol=rtol, t_eval=SAVE_TS
    )
    return sol.y[:, -1], sol.nfev


_TRANSCENDENTAL = ("sine", "cosine", "tan", "exponential", "log", "power", "atan2")


def hlo_counts(compiled) -> str:
    text = compiled.as_text()
    fusions = len(re.findall(r"= \S+ fusion\(", text))
    transcendental = sum(
        len(re.findall(rf"= \S+ {op}\(", text)) for op in _TRANSCENDENTAL
    )
    loops = len(re.findall(r"\bwhile\(", text))
    return (
        f"{fusions:4d} fusions {transcendental:3d} transcendental {loops:2d} while, "
        f"{len(text) // 1000:4d} kB of HLO"
    )


_FIRST_CALL = """
import sys, time
sys.path[:0] = {paths!r}
import jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")
jax.block_until_ready(jax.jit(lambda x: x + 1)(jnp.ones(3)))  # backend up
import bench_simulate as b
q0, qd0 = b.initial_states(b.BATCH)
fn = b.make_jl_batch() if {which!r} == "jl_batch" else jax.jit(b.batched(b.make_{which}()))
start = time.perf_counter()
jax.block_until_ready(fn(b.PARAMS, q0, qd0))
print(time.perf_counter() - start)
"""


def first_call(which: str) -> float:
    """Trace + compile + run of the first call, in a fresh process."""
    here = os.path.dirname(os.path.abspath(__file__))
    code = _FIRST_CALL.format(paths=[os.path.join(here, ".."), here], which=which)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    return float(out.stdout.strip().splitlines()[-1])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and runs")
    options = parser.parse_args()
    repeats = 5 if options.quick else 15
    n_scipy = 3 if options.quick else 10
    n_first = 1 if options.quick else 3
    print(f"jax {jax.__version__}, diffrax {diffrax.__version__}, {jax.devices()[0]}")
    print(
        f"double pendulum, B = {BATCH}, Tsit5, rtol = atol = {RTOL:g}, t = {T1:g}, "
        f"{SAVES} saves; medians over {repeats} interleaved runs\n"
    )

    q0, qd0 = initial_states(BATCH)
    args = (PARAMS, q0, qd0)
    jl_batch, jl_compile = compile_timed(batched(make_jl()), *args)
    hand_batch, hand_compile = compile_timed(batched(make_hand()), *args)
    q_jl, _, steps_jl = jl_batch(*args)
    q_hand, _, steps_hand = hand_batch(*args)
    same_steps = float(np.mean(np.asarray(steps_jl) == np.asarray(steps_hand)))

    # A trajectory loss, differentiated with respect to the params (reverse mode).
    def loss(make):
        def value(params, q0, qd0):
            q, qd, _ = batched(make())(params, q0, qd0)
            return jnp.sum(q**2) + jnp.sum(qd**2)

        return jax.grad(value)

    jl_const, jl_const_compile = compile_timed(batched(make_jl_constants()), *args)
    hand_const, hand_const_compile = compile_timed(
        batched(make_hand_constants()), *args
    )
    jl_grad, jl_grad_compile = compile_timed(loss(make_jl), *args)
    hand_grad, hand_grad_compile = compile_timed(loss(make_hand), *args)
    g_jl, g_hand = jl_grad(*args), hand_grad(*args)

    times = run_times(
        {
            "jl": (jl_batch, args),
            "hand": (hand_batch, args),
            "jl constants": (jl_const, args),
            "hand constants": (hand_const, args),
            "jl grad": (jl_grad, args),
            "hand grad": (hand_grad, args),
        },
        repeats,
    )
    jl_min, jl_run = times["jl"]
    hand_min, hand_run = times["hand"]
    print("1. batched simulate vs hand-written q̈ (flat state, 4 transcendentals)")
    print(
        f"   mean steps jl {np.mean(steps_jl):.1f}  hand {np.mean(steps_hand):.1f} "
        f"(identical for {100 * same_steps:.0f}% of members)"
    )
    print(
        f"   run time   jl {jl_run * 1e3:7.1f} ms (min {jl_min * 1e3:.1f})   hand "
        f"{hand_run * 1e3:7.1f} ms (min {hand_min * 1e3:.1f})   ratio "
        f"{jl_run / hand_run:.2f}x median, {jl_min / hand_min:.2f}x min "
        "(target <= 1.15x)"
    )
    print(f"   compile    jl {jl_compile:7.2f} s   hand {hand_compile:7.2f} s")
    (jc_min, jc_run), (hc_min, hc_run) = times["jl constants"], times["hand constants"]
    print("   with the constants written into L (and into the hand-written q̈):")
    print(
        f"   run time   jl {jc_run * 1e3:7.1f} ms (min {jc_min * 1e3:.1f})   hand "
        f"{hc_run * 1e3:7.1f} ms (min {hc_min * 1e3:.1f})   ratio "
        f"{jc_run / hc_run:.2f}x median, {jc_min / hc_min:.2f}x min (target <= 1.15x)"
    )
    print(
        f"   compile    jl {jl_const_compile:7.2f} s   hand {hand_const_compile:7.2f} s"
    )

    ratio, detail = double_pendulum_ratio(4096, 30 if options.quick else 100)
    print("\n2. jl.accelerations vs hand-written q̈, jit(vmap), B = 4096")
    print(f"   {detail}   ratio {ratio:.2f}x median (target <= 1.3x)")

    start = time.perf_counter()
    rhs = sympy_rhs()
    derive = time.perf_counter() - start
    rhs(0.0, np.zeros(4))
    scipy_times, errors = [], []
    for i in range(n_scipy):
        start = time.perf_counter()
        y, _ = scipy_solve(rhs, np.asarray(q0[i]), np.asarray(qd0[i]), RTOL)
        scipy_times.append(time.perf_counter() - start)
        errors.append(np.max(np.abs(y[:2] - np.asarray(q_hand[i, -1]))))
    scipy_time = float(np.median(scipy_times))
    per_trajectory = jl_run / BATCH
    print("\n3. per trajectory vs SymPy LagrangesMethod + lambdify + solve_ivp(DOP853)")
    print(
        f"   SymPy derivation + lambdify {derive:.2f} s (once); SciPy "
        f"{scipy_time * 1e3:.1f} ms/trajectory (median of {n_scipy})"
    )
    print(
        f"   jl batched {per_trajectory * 1e6:.1f} us/trajectory   speed-up "
        f"{scipy_time / per_trajectory:.0f}x   (target >= 300x)"
    )
    print(
        f"   (SciPy vs diffrax final angles: median |dq| {np.median(errors):.1e}; "
        "chaotic members differ more)"
    )

    firsts = {"jl": [], "jl_batch": [], "hand": []}
    for _ in range(n_first):
        for which in firsts:
            firsts[which].append(first_call(which))
    first_jl, first_batch, first_hand = (
        float(np.median(firsts[k])) for k in ("jl", "jl_batch", "hand")
    )
    print("\n4. first call (trace + compile + run), batched, fresh process each")
    print(
        f"   jax.jit(jax.vmap(jl.simulate)) {first_jl:.2f} s, jl.simulate_batch "
        f"{first_batch:.2f} s, hand {first_hand:.2f} s: ratios "
        f"{first_jl / first_hand:.2f}x and {first_batch / first_hand:.2f}x "
        f"(median of {n_first}; target <= 1.3x)"
    )
    print(
        f"   compile alone (this process): jl {jl_compile:.2f} s, hand "
        f"{hand_compile:.2f} s"
    )

    print("\n5. gradient of sum(q² + q̇²) at the saves w.r.t. the params / forward")
    print(
        f"   jl   {times['jl grad'][1] * 1e3:7.1f} ms  "
        f"{times['jl grad'][1] / jl_run:.2f}x forward (target <= 3x); compile "
        f"{jl_grad_compile:.2f} s"
    )
    print(
        f"   hand {times['hand grad'][1] * 1e3:7.1f} ms  "
        f"{times['hand grad'][1] / hand_run:.2f}x forward; compile "
        f"{hand_grad_compile:.2f} s"
    )
    print(
        f"   jl grad / hand grad {times['jl grad'][1] / times['hand grad'][1]:.2f}x; "
        f"max |grad jl - grad hand| (g) {abs(float(g_jl['g'] - g_hand['g'])):.1e} "
        f"of {abs(float(g_hand['g'])):.1e}"
    )

    print("\n6. compile time of simulate (trace + lower + compile), one trajectory")
    for name in (
        "double_pendulum",
        "cartesian_pendulum",
        "bouncing_ball",
        "mass_on_sphere",
    ):
        system, s_q0, s_qd0 = jl.systems.make(name)

        def one(system, q0, qd0):
            return jl.simulate(system, q0, qd0, t1=1.0, saveat=jnp.linspace(0, 1, 11))

        start = time.perf_counter()
        lowered = jax.jit(one).lower(system, s_q0, s_qd0)
        traced = time.perf_counter() - start
        compiled = lowered.compile()
        total = time.perf_counter() - start
        _, run = run_times({name: (compiled, (system, s_q0, s_qd0))}, 3)[name]
        print(
            f"   {name:20s} trace+lower {traced:5.2f} s  compile "
            f"{total - traced:5.2f} s  run {run * 1e3:7.2f} ms  "
            f"{hlo_counts(compiled)}"
        )

    print("\n7. compiled batched programs")
    print(f"   jl   {hlo_counts(jl_batch)}")
    print(f"   hand {hlo_counts(hand_batch)}")


if __name__ == "__main__":
    main()
