"""Benchmarks of `jl.simulate` on the double pendulum, float64 on CPU.

    python benchmarks/bench_simulate.py [--quick]

All ratios are measured in the same run, on the same machine:

1. batched `jl.simulate` (B = 256, Tsit5, rtol = atol = 1e-8, t = 10) against the
   hand-written double-pendulum q̈ integrated by `diffrax.diffeqsolve` directly, with
   the same solver, controller and initial states (target ≤ 1.3×);
2. per-trajectory time against SymPy `LagrangesMethod` + `lambdify` + SciPy
   `solve_ivp(method="DOP853")` at the same tolerances (target ≥ 200×), both from
   the batched run (run time / B) and for one trajectory on its own;
3. compile time of the first call (trace + lower + compile), jl against the
   hand-written diffrax version;
4. the default solver: Tsit5 against Dopri8 at rtol 1e-8, 1e-9, 1e-10 (steps and
   wall time, batched);
5. the compiled vector field: fusions and transcendental ops in the HLO.

Compile time is kept apart from run time: every run time is the best of several
calls of an already compiled function.
"""

import argparse
import os
import re
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

import jaxlagrange as jl  # noqa: E402


M1, M2, L1, L2, G = 1.0, 1.0, 1.0, 1.0, 9.81
T1 = 10.0


def lagrangian(q, qd, t, params):
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    kinetic = (
        0.5 * (m1 + m2) * l1**2 * qd[0] ** 2
        + 0.5 * m2 * l2**2 * qd[1] ** 2
        + m2 * l1 * l2 * qd[0] * qd[1] * jnp.cos(q[0] - q[1])
    )
    potential = -(m1 + m2) * g * l1 * jnp.cos(q[0]) - m2 * g * l2 * jnp.cos(q[1])
    return kinetic - potential


SYSTEM = jl.LagrangianSystem(lagrangian, params=dict(m1=M1, m2=M2, l1=L1, l2=L2, g=G))


def hand_written(t, y, args):
    """The textbook double-pendulum equations of motion, angles from the vertical."""
    (q1, q2), (w1, w2) = y
    d = q1 - q2
    sd, cd = jnp.sin(d), jnp.cos(d)
    den = 2 * M1 + M2 - M2 * jnp.cos(2 * d)
    a1 = (
        -G * (2 * M1 + M2) * jnp.sin(q1)
        - M2 * G * jnp.sin(q1 - 2 * q2)
        - 2 * sd * M2 * (w2**2 * L2 + w1**2 * L1 * cd)
    ) / (L1 * den)
    a2 = (
        2
        * sd
        * (w1**2 * L1 * (M1 + M2) + G * (M1 + M2) * jnp.cos(q1) + w2**2 * L2 * M2 * cd)
    ) / (L2 * den)
    return jnp.stack([w1, w2]), jnp.stack([a1, a2])


def initial_states(batch: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    q0 = rng.uniform(-2.0, 2.0, (batch, 2))
    qd0 = rng.uniform(-1.0, 1.0, (batch, 2))
    return jnp.asarray(q0), jnp.asarray(qd0)


def make_jl(solver, rtol, t1=T1):
    def one(q0, qd0):
        traj = jl.simulate(SYSTEM, q0, qd0, t1=t1, solver=solver, rtol=rtol, atol=rtol)
        return traj.q[-1], traj.qd[-1], traj.stats["num_steps"]

    return one


def make_hand(solver, rtol, t1=T1):
    def one(q0, qd0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(hand_written),
            solver,
            t0=0.0,
            t1=t1,
            dt0=None,
            y0=(q0, qd0),
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol),
            max_steps=100_000,
        )
        q, qd = sol.ys
        return q[-1], qd[-1], sol.stats["num_steps"]

    return one


def compile_time(fn, *args):
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def run_time(compiled, *args, repeats):
    jax.block_until_ready(compiled(*args))
    best = np.inf
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.perf_counter() - start)
    return best


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
        rhs, (0.0, T1), y0, method="DOP853", rtol=rtol, atol=rtol
    )
    return sol.y[:, -1], sol.nfev


def hlo_counts(fn, *args):
    text = jax.jit(fn).lower(*args).compile().as_text()
    fusions = len(re.findall(r"^\s*(?:ROOT )?\S+ = \S+ fusion\(", text, re.M))
    transcendental = len(re.findall(r"\b(?:sine|cosine|tan|exponential|log)\(", text))
    return fusions, transcendental


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and runs")
    options = parser.parse_args()
    batch = 256
    repeats = 3 if options.quick else 10
    n_scipy = 3 if options.quick else 10
    rtol = 1e-8
    print(f"jax {jax.__version__}, diffrax {diffrax.__version__}, {jax.devices()[0]}")
    print(f"double pendulum, B = {batch}, Tsit5, rtol = atol = {rtol:g}, t = {T1:g}\n")

    q0, qd0 = initial_states(batch)
    tsit5 = diffrax.Tsit5()
    jl_batch, jl_compile = compile_time(jax.vmap(make_jl(tsit5, rtol)), q0, qd0)
    hand_batch, hand_compile = compile_time(jax.vmap(make_hand(tsit5, rtol)), q0, qd0)
    q_jl, qd_jl, steps_jl = jl_batch(q0, qd0)
    q_hand, qd_hand, steps_hand = hand_batch(q0, qd0)
    # The same equations: the step counts agree; chaos amplifies round-off, so the
    # final states agree only for the regular members.
    same_steps = float(np.mean(np.asarray(steps_jl) == np.asarray(steps_hand)))
    jl_run = run_time(jl_batch, q0, qd0, repeats=repeats)
    hand_run = run_time(hand_batch, q0, qd0, repeats=repeats)

    print("1. batched simulate vs hand-written EOM in diffrax")
    print(
        f"   mean steps  jl {np.mean(steps_jl):.1f}   hand {np.mean(steps_hand):.1f}"
        f"   (identical step count for {100 * same_steps:.0f}% of members)"
    )
    print(
        f"   run time    jl {jl_run * 1e3:8.1f} ms   hand {hand_run * 1e3:8.1f} ms"
        f"   ratio {jl_run / hand_run:.2f}x   (target <= 1.3x)"
    )

    single, _ = compile_time(make_jl(tsit5, rtol), q0[0], qd0[0])
    single_run = run_time(single, q0[0], qd0[0], repeats=repeats)
    hand_single, _ = compile_time(make_hand(tsit5, rtol), q0[0], qd0[0])
    hand_single_run = run_time(hand_single, q0[0], qd0[0], repeats=repeats)
    print(
        f"   single trajectory  jl {single_run * 1e3:.2f} ms   hand "
        f"{hand_single_run * 1e3:.2f} ms   ratio {single_run / hand_single_run:.2f}x"
    )

    start = time.perf_counter()
    rhs = sympy_rhs()
    derive = time.perf_counter() - start
    rhs(0.0, np.zeros(4))
    times, errors = [], []
    for i in range(n_scipy):
        start = time.perf_counter()
        y, _ = scipy_solve(rhs, np.asarray(q0[i]), np.asarray(qd0[i]), rtol)
        times.append(time.perf_counter() - start)
        errors.append(np.max(np.abs(y[:2] - np.asarray(q_hand[i]))))
    scipy_time = float(np.median(times))
    per_trajectory = jl_run / batch
    print("\n2. per trajectory vs SymPy LagrangesMethod + lambdify + solve_ivp(DOP853)")
    print(f"   SymPy derivation + lambdify {derive:.2f} s (once)")
    print(f"   SciPy {scipy_time * 1e3:.1f} ms/trajectory (median of {n_scipy})")
    print(
        f"   jl batched {per_trajectory * 1e6:.1f} us/trajectory   speed-up "
        f"{scipy_time / per_trajectory:.0f}x   (target >= 200x)"
    )
    print(
        f"   jl single  {single_run * 1e3:.2f} ms/trajectory   speed-up "
        f"{scipy_time / single_run:.0f}x"
    )
    print(
        f"   (SciPy vs diffrax final angles: median |dq| {np.median(errors):.1e}; "
        "chaotic members differ more)"
    )

    print("\n3. compile time of the first call (trace + lower + compile), batched")
    print(
        f"   jl {jl_compile:.2f} s   hand {hand_compile:.2f} s   ratio "
        f"{jl_compile / hand_compile:.2f}x"
    )

    print("\n4. default solver (jl, batched): mean steps and run time")
    for tol in (1e-8, 1e-9, 1e-10):
        row = []
        for solver in (diffrax.Tsit5(), diffrax.Dopri8()):
            fn, _ = compile_time(jax.vmap(make_jl(solver, tol)), q0, qd0)
            steps = float(np.mean(fn(q0, qd0)[2]))
            row.append(
                (
                    type(solver).__name__,
                    steps,
                    run_time(fn, q0, qd0, repeats=max(2, repeats // 3)),
                )
            )
        cells = "   ".join(
            f"{name} {steps:7.1f} steps {wall * 1e3:7.1f} ms"
            for name, steps, wall in row
        )
        print(f"   rtol {tol:g}:  {cells}")

    print("\n5. compiled vector field under vmap (B = 256): fusions, transcendentals")
    from jaxlagrange._segment import _vector_field

    y = (q0, qd0)
    t = jnp.zeros(batch)
    jl_vf = jax.vmap(lambda t, y: _vector_field(t, y, (SYSTEM, None, None)))
    hand_vf = jax.vmap(lambda t, y: hand_written(t, y, None))
    for name, fn in (("jl", jl_vf), ("hand", hand_vf)):
        fusions, trans = hlo_counts(fn, t, y)
        compiled = jax.jit(fn).lower(t, y).compile()
        wall = run_time(compiled, t, y, repeats=20)
        print(
            f"   {name:5s} fusions {fusions:3d}   transcendental ops {trans:3d}   "
            f"{wall * 1e6:7.1f} us per call"
        )


if __name__ == "__main__":
    main()
