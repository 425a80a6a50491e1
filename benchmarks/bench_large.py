"""Large systems: dense Cholesky against matrix-free CG (`mass_solver`), float64.

    python benchmarks/bench_large.py [--quick | --gpu]

All ratios are against hand-written references measured in the same run:

1. The moving-mirror cavity q̈ under jit(vmap) over B = 64 states, N modes:
   the paper's hand-coded equations (08a/08b: two N × N products, G Q and
   G(2φQ̇ − φ²GQ), written on rows, Q Gᵀ, which XLA runs faster under vmap)
   against `jl.accelerations` with the default dense solve and with
   `mass_solver=lineax.CG(rtol=1e-10, atol=1e-10)`. Two timings: one compiled
   call (the issue's measure; it includes a call's dispatch, ~20–50 µs, on
   both sides), and 20 evaluations chained inside one compiled loop, per
   evaluation, each at a state moved by the last, of the hand-coded q̈ and of
   `simulate`'s own vector field with CG: the cost inside an integrator, where
   the call's dispatch vanishes.
2. Fixed-step `simulate` (Tsit5, 20 steps of 0.1 ms) of a spring chain and of a
   pendulum chain (angles, a dense M applied in O(n) by cumulative sums), n = 10,
   100, 1000, 10 000: time per step, and the log-log slope between n = 100 and
   1000. References, integrated by the same solver on a flat state y = [q; q̇]
   (as `simulate` integrates): the spring chain's q̈ = (k/m)(x₊ − 2x + x₋) by
   hand; the pendulum chain's M(θ) q̈ = f assembled by hand (M_ij = m l²
   (n − max(i, j)) cos(θᵢ − θⱼ)) and solved by `jnp.linalg.solve`.
3. The spring chain's fixed-step simulate under `vmap` over 64 trajectories
   (`--gpu`: also 1024), against the hand-written reference of 2.

Compile time (trace + lower + compile) is printed beside the best run time of
the compiled function, called through `jax.jit` as a user's code calls it.
`--gpu` runs on the GPU (float64): the cavity at B = 64 and 4096, and 3.
"""

import argparse
import functools as ft
import os
import sys


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import lineax as lx  # noqa: E402

import jaxlagrange as jl  # noqa: E402
from jaxlagrange._projection import VectorFieldArgs  # noqa: E402
from jaxlagrange._segment import _vector_field  # noqa: E402
from jaxlagrange.systems._cavity import _coupling  # noqa: E402


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_eom import compile_timed, run_times  # noqa: E402


# After bench_eom's import, which picks the CPU; `--gpu` is read here, before
# anything touches a device (argparse in `main` documents it).
jax.config.update("jax_platform_name", "gpu" if "--gpu" in sys.argv[1:] else "cpu")


CG = lx.CG(rtol=1e-10, atol=1e-10)
# The pendulum chain's M has a condition number ~1e6 at n = 1000: CG stalls
# short of 1e-10 in rounding (then flags the solve), so it gets 1e-8.
CG_PENDULUM = lx.CG(rtol=1e-8, atol=1e-8)


def _best(variants: dict, repeats: int) -> dict:
    """The best wall time of each compiled (fn, args), the calls interleaved."""
    return {name: best for name, (best, _) in run_times(variants, repeats).items()}


# 1. The cavity.


def cavity_by_hand(q, qd, coupling, params):
    """Equations 08a/08b: m q̈ = −V′ + ⟨Ω²Q, Q − GQ⟩/q, then Q̈ from 08a."""
    x, xd, field, rate = q[0], qd[0], q[1:], qd[1:]
    modes = field.shape[0]
    omega2 = (jnp.arange(1, modes + 1, dtype=q.dtype) * jnp.pi / x) ** 2
    phi = xd / x
    gq = field @ coupling.T  # G Q as a row: under vmap one (B, N) × (N, N) product
    w = omega2 * field
    xdd = (-params["k"] * (x - params["q_eq"]) + w @ (field - gq) / x) / params["m"]
    phi_rate = xdd / x - phi**2
    fdd = -w + (2 * phi * rate - phi**2 * gq) @ coupling.T + phi_rate * gq
    return jnp.concatenate([xdd[None], fdd])


CHAINED = 20


def chained(fn):
    """`CHAINED` evaluations of fn(q, qd) in one compiled loop, each at a state
    moved by the last result, as an integrator's stages are. Both q and q̇ move:
    with q fixed, XLA hoists what depends on q alone (the hand-coded G Q) out of
    the loop."""

    def run(q, qd):
        def body(i, carry):
            q, qd, total = carry
            qdd = fn(q, qd)
            return q + 1e-9 * qd, qd + 1e-9 * qdd, total + qdd

        return jax.lax.fori_loop(0, CHAINED, body, (q, qd, jnp.zeros_like(qd)))[2]

    return run


def cavity_variants(system, coupling, dense):
    def hand(q, qd):
        return jax.vmap(cavity_by_hand, (0, 0, None, None))(
            q, qd, coupling, system.params
        )

    def batched(system):
        return lambda q, qd: jax.vmap(jl.accelerations, (None, 0, 0, None))(
            system, q, qd, 0.0
        )

    fns = {"hand": hand, "CG": batched(system.with_mass_solver(CG))}
    if dense:
        fns["dense"] = batched(system.with_mass_solver(None))
    return fns


def in_simulate(system):
    """q̈ as `simulate` evaluates it at each solver stage: its vector field on the
    flat state y = [q; q̇] (the same solve, with the failure flags turned into a
    NaN for the step-size guard instead of `jl.accelerations`' runtime error)."""
    args = VectorFieldArgs(system)

    def one(q, qd):
        y = jnp.concatenate([q, qd])
        return _vector_field(jnp.zeros((), q.dtype), y, args)[q.shape[0] :]

    return jax.vmap(one)


def cavity(modes_list, batch, repeats, dense_max):
    print(f"\n1. Cavity q̈, jit(vmap) over B = {batch} states (N modes, n = N + 1)")
    print(
        f"   {'':>4s} {'one compiled call':^35s}  "
        f"{f'in a loop of {CHAINED}, per evaluation':^28s}"
    )
    print(
        f"   {'N':>4s} {'hand':>8s} {'dense':>6s} {'CG':>8s} {'ratio':>5s}  "
        f"{'hand':>8s} {'CG':>8s} {'ratio':>5s}  {'|CG−hand|':>9s}  "
        f"compile hand/dense/CG"
    )
    ratios = {}
    for modes in modes_list:
        system, q0, _ = jl.systems.make("cavity", modes=modes)
        rng = np.random.default_rng(modes)
        q = np.tile(np.asarray(q0), (batch, 1))
        q[:, 0] = rng.uniform(0.8, 1.2, batch)
        q[:, 1:] = 0.1 * rng.normal(size=(batch, modes)) / np.arange(1, modes + 1)
        q = jnp.asarray(q)
        qd = jnp.asarray(0.1 * rng.normal(size=(batch, modes + 1)))
        coupling = jnp.asarray(_coupling(modes))
        fns = cavity_variants(system, coupling, modes <= dense_max)
        compiled, compile_s = {}, {}
        for name, fn in fns.items():
            compiled[name], compile_s[name] = compile_timed(fn, q, qd)
        in_loop = {"hand": fns["hand"], "CG": in_simulate(system.with_mass_solver(CG))}
        looped = {k: compile_timed(chained(fn), q, qd)[0] for k, fn in in_loop.items()}
        error = float(jnp.max(jnp.abs(compiled["CG"](q, qd) - compiled["hand"](q, qd))))
        reps = max(5, repeats // (1 + modes // 64))
        call = _best({k: (c, (q, qd)) for k, c in compiled.items()}, reps)
        loop = _best({k: (c, (q, qd)) for k, c in looped.items()}, max(3, reps // 4))
        loop = {k: v / CHAINED for k, v in loop.items()}
        ratios[modes] = (call["CG"] / call["hand"], loop["CG"] / loop["hand"])
        dense = call.get("dense", np.nan) / call["hand"]
        print(
            f"   {modes:4d} {call['hand'] * 1e6:6.0f}us {dense:5.1f}x "
            f"{call['CG'] * 1e6:6.0f}us {ratios[modes][0]:5.2f}  "
            f"{loop['hand'] * 1e6:6.1f}us {loop['CG'] * 1e6:6.1f}us "
            f"{ratios[modes][1]:5.2f}  {error:9.1e}  {compile_s['hand']:.2f}/"
            f"{compile_s.get('dense', np.nan):.2f}/{compile_s['CG']:.2f} s"
        )
    return ratios


# 2. Chains under a fixed-step simulate.

# 0.1 ms: the pendulum chain of n = 1000 links of length 1/n has modes near
# n √g ≈ 3000 rad/s, which 1 ms steps of Tsit5 do not resolve (the hand-written
# equations blow up too).
STEPS, DT = 20, 1e-4


def spring_by_hand(q, qd, params):
    stretch = jnp.diff(jnp.pad(q, 1))
    return params["k"] / params["m"] * jnp.diff(stretch)


def pendulum_lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    vx = jnp.cumsum(length * jnp.cos(q) * qd)
    vy = jnp.cumsum(length * jnp.sin(q) * qd)
    height = -jnp.cumsum(length * jnp.cos(q))
    return 0.5 * m * jnp.sum(vx**2 + vy**2) - m * g * jnp.sum(height)


def pendulum_diagonal(q, qd, t, params):
    """diag M = m l² (n − i): the Jacobi preconditioner, exact at every state."""
    return params["m"] * params["l"] ** 2 * jnp.arange(q.shape[0], 0, -1.0)


def pendulum_by_hand(q, qd, params):
    m, length, g = params["m"], params["l"], params["g"]
    n = q.shape[0]
    below = n - jnp.maximum(jnp.arange(n)[:, None], jnp.arange(n)[None, :])
    s, c = jnp.sin(q), jnp.cos(q)
    cos_diff = c[:, None] * c[None, :] + s[:, None] * s[None, :]
    sin_diff = s[:, None] * c[None, :] - c[:, None] * s[None, :]  # sin(θi − θj)
    mass = m * length**2 * below * cos_diff
    weight = jnp.arange(n, 0, -1.0)
    force = -m * length**2 * (below * sin_diff) @ qd**2 - m * g * length * weight * s
    return jnp.linalg.solve(mass, force)


def fixed_step(rhs, q0, qd0):
    """The hand-written reference: a flat state y = [q; q̇], as `simulate`'s."""
    n = q0.shape[0]

    def vector_field(t, y, args):
        q, qd = y[:n], y[n:]
        return jnp.concatenate([qd, rhs(q, qd)])

    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(vector_field),
        diffrax.Tsit5(),
        0.0,
        STEPS * DT,
        DT,
        jnp.concatenate([q0, qd0]),
        saveat=diffrax.SaveAt(t1=True),
        max_steps=STEPS,
    )
    return sol.ys[-1, :n]


def library_step(system, q0, qd0):
    traj = jl.simulate(
        system,
        q0,
        qd0,
        t1=STEPS * DT,
        solver=diffrax.Tsit5(),
        dt0=DT,
        stepsize_controller=diffrax.ConstantStepSize(),
        max_steps=STEPS,
    )
    return traj.q[-1]


def _step_cells(times, compile_s, keys) -> str:
    """Per-step time (compile time) of each key, or a dash where it did not run."""
    cells = []
    for key in keys:
        if key in times:
            us = times[key] / STEPS * 1e6
            cells.append(f"{us:9.1f}us ({compile_s[key]:4.1f}s)")
        else:
            cells.append(f"{'—':>18s}")
    return " ".join(cells)


def chains(sizes, repeats, dense_max, hand_max, cg_max):
    print(
        f"\n2. Fixed-step simulate (Tsit5, {STEPS} steps): time per step, "
        f"compile time in brackets"
    )
    slopes = {}
    for name in ("spring chain", "pendulum chain"):
        print(f"   {name}")
        print(
            f"   {'n':>6s} {'hand':>18s} {'dense':>18s} {'CG':>18s} {'CG+Jacobi':>18s}"
        )
        per_step = {}
        for n in sizes:
            if name == "spring chain":
                system, q0, qd0 = jl.systems.spring_chain(n=n)
                hand = lambda q0, qd0, s=system: fixed_step(  # noqa: E731
                    lambda q, qd: spring_by_hand(q, qd, s.params), q0, qd0
                )
                jacobi, solver = None, CG
            else:
                params = {"m": 1.0, "l": 1.0 / n, "g": 9.81}
                system = jl.LagrangianSystem(pendulum_lagrangian, params=params)
                q0 = jnp.asarray(np.random.default_rng(n).uniform(-0.5, 0.5, n))
                qd0 = jnp.zeros(n)
                hand = lambda q0, qd0, s=system: fixed_step(  # noqa: E731
                    lambda q, qd: pendulum_by_hand(q, qd, s.params), q0, qd0
                )
                jacobi, solver = pendulum_diagonal, CG_PENDULUM
            fns = {}
            if n <= hand_max[name]:
                fns["hand"] = hand
            if n <= dense_max[name]:
                s_dense = system.with_mass_solver(None)
                fns["dense"] = lambda q0, qd0, s=s_dense: library_step(s, q0, qd0)
            if n <= cg_max[name]:
                s_cg = system.with_mass_solver(solver)
                fns["CG"] = lambda q0, qd0, s=s_cg: library_step(s, q0, qd0)
            if jacobi is not None and n <= cg_max[name]:
                s_jacobi = system.with_mass_solver(solver, jacobi)
                fns["CG+Jacobi"] = lambda q0, qd0, s=s_jacobi: library_step(s, q0, qd0)
            compiled, compile_s = {}, {}
            for key, fn in fns.items():
                compiled[key], compile_s[key] = compile_timed(fn, q0, qd0)
            reps = max(2, repeats // (1 + n // 100))
            times = _best({k: (c, (q0, qd0)) for k, c in compiled.items()}, reps)
            per_step[n] = {k: v / STEPS for k, v in times.items()}
            cells = _step_cells(times, compile_s, ("hand", "dense", "CG", "CG+Jacobi"))
            print(f"   {n:6d} {cells}")
        if 100 in per_step and 1000 in per_step:
            for key in ("hand", "dense", "CG", "CG+Jacobi"):
                if key in per_step[100] and key in per_step[1000]:
                    slope = np.log10(per_step[1000][key] / per_step[100][key])
                    slopes[(name, key)] = slope
                    print(f"   log-log slope n = 100 → 1000, {key}: {slope:.2f}")
    return slopes


# 3. Batched chains: many trajectories of one chain under `vmap`.


def batched_chains(sizes, batch, repeats, dense_max):
    """Fixed-step simulate of `batch` spring chains of n bodies under `vmap`."""
    print(
        f"\n3. Spring chains, {batch} trajectories under vmap, fixed-step Tsit5 "
        f"({STEPS} steps): time per step of the batch, compile time in brackets"
    )
    print(f"   {'n':>6s} {'hand':>18s} {'dense':>18s} {'CG':>18s} {'CG/hand':>8s}")
    ratios = {}
    for n in sizes:
        system, q0, qd0 = jl.systems.spring_chain(n=n)
        rng = np.random.default_rng(n)
        q0 = jnp.asarray(q0 + 0.01 * rng.normal(size=(batch, n)))
        qd0 = jnp.asarray(np.broadcast_to(qd0, (batch, n)))

        def hand(q0, qd0, p=system.params):
            return fixed_step(lambda q, qd: spring_by_hand(q, qd, p), q0, qd0)

        fns = {"hand": hand}
        if n <= dense_max:
            fns["dense"] = ft.partial(library_step, system.with_mass_solver(None))
        fns["CG"] = ft.partial(library_step, system.with_mass_solver(CG))
        compiled, compile_s = {}, {}
        for key, fn in fns.items():
            compiled[key], compile_s[key] = compile_timed(jax.vmap(fn), q0, qd0)
        cg, hand = compiled["CG"](q0, qd0), compiled["hand"](q0, qd0)
        error = float(jnp.max(jnp.abs(cg - hand)))
        times = _best({k: (c, (q0, qd0)) for k, c in compiled.items()}, repeats)
        ratios[n] = times["CG"] / times["hand"]
        cells = _step_cells(times, compile_s, ("hand", "dense", "CG"))
        print(f"   {n:6d} {cells} {ratios[n]:8.2f}  |CG−hand| {error:.1e}")
    return ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats and sizes")
    parser.add_argument(
        "--gpu",
        action="store_true",
        help="run on the GPU: the cavity at B = 64 and 4096, batched chains",
    )
    args = parser.parse_args()
    if args.gpu and jax.devices()[0].platform != "gpu":
        sys.exit(f"--gpu: JAX found no GPU, only {jax.devices()}")
    print(
        f"jax {jax.__version__}, {jax.devices()[0].device_kind}, "
        f"{os.cpu_count()} CPUs visible, float64"
    )
    if args.gpu:
        for batch in (64, 4096):
            cavity([16, 128, 512], batch=batch, repeats=50, dense_max=128)
        batched_chains([1000, 10_000], batch=64, repeats=10, dense_max=1000)
        batched_chains([1000], batch=1024, repeats=10, dense_max=0)
    elif args.quick:
        cavity([16, 128], batch=64, repeats=20, dense_max=128)
        chains(
            [10, 100, 1000],
            repeats=5,
            dense_max={"spring chain": 100, "pendulum chain": 100},
            hand_max={"spring chain": 1000, "pendulum chain": 100},
            cg_max={"spring chain": 1000, "pendulum chain": 100},
        )
        batched_chains([1000], batch=64, repeats=3, dense_max=0)
    else:
        cavity([4, 16, 64, 128, 256, 512], batch=64, repeats=50, dense_max=128)
        chains(
            [10, 100, 1000, 10_000],
            repeats=10,
            dense_max={"spring chain": 1000, "pendulum chain": 1000},
            hand_max={"spring chain": 10_000, "pendulum chain": 1000},
            # CG needs ~n iterations on the pendulum chain (O(n²) per step) and at
            # n = 1000 fails to converge during the solve: it stops at 100.
            cg_max={"spring chain": 10_000, "pendulum chain": 100},
        )
        batched_chains([100, 1000], batch=64, repeats=5, dense_max=100)


if __name__ == "__main__":
    main()
