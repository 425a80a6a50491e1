"""The fused ensemble kernel (`simulate_batch(..., backend="kernel")`), issue 26.

    python benchmarks/bench_kernel.py          # CPU: interpret mode, agreement only
    python benchmarks/bench_kernel.py --gpu    # GPU: the issue's table (~5 min, H200)
    JAXLAGRANGE_BENCH_TINY=1 python benchmarks/bench_kernel.py --gpu   # dry run

`JAXLAGRANGE_BENCH_TINY=1` makes `--gpu` a dry run on any machine (on a CPU
the kernels run in Pallas's interpret mode): batches of at most 16 members and
t = 0 ... 0.2, every table and variant, to catch errors before a GPU is lent.

The problem (issue 26): the double pendulum from its Lagrangian (unit masses and
lengths, g = 9.81), t = 0 ... 10, Tsit5, rtol = atol = 1e-8, the final state
saved; members start at rest at angles drawn uniformly from [-2, 2] (seed 0).

`--gpu` prints, after compilation (best of `--repeats` runs, compile time in its
own column):

1. B = 16 384 and B = 1 048 576, float64: `simulate_batch(backend="vmap")`,
   `jax.vmap` of hand-written diffrax code, `simulate_batch(backend="kernel")`,
   and the reference fused kernel with a hand-written q̈ (the same Pallas Tsit5
   loop as the library's, its right-hand side written out instead of traced from
   L: the ratio kernel / reference is the cost of the generated q̈); the speedup
   over the vmapped hand-written diffrax code and steps per second (all steps,
   accepted and rejected, of all members, per second of wall time);
2. the same in float32 (rtol = atol = 1e-5: 1e-8 is below float32's precision);
3. time against B from 1 to 4M for the kernel (and the vmapped hand-written
   diffrax code up to 1M);
4. bigger states, kernel against `simulate_batch(backend="vmap")` at B = 16 384:
   a 10-link pendulum chain from L and the cavity at N = 8 modes (dense mass
   solve), t = 0 ... 1.

Without `--gpu` the CPU part runs the kernel in Pallas's interpret mode on a few
members and prints its agreement with the vmap backend and the step counts
(interpret mode is an exact emulator, not a fast path: its times mean nothing),
then times the double pendulum's q̈ at B = 4096 under jax.jit on the CPU three
ways: `jl.accelerations` vmapped, the traced q̈ on lane vectors, the hand-written
q̈ vmapped (issue 26's "the same generated q̈ on the CPU"; on 2026-12-04, on the
loaded 2-core machine: 2.9×, 2.1× and 1×, three runs).
"""

import argparse
import os
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402


jax.config.update("jax_enable_x64", True)

import jaxlagrange as jl  # noqa: E402
from jaxlagrange._kernel._ensemble import simulate_kernel  # noqa: E402
from jaxlagrange._kernel._tsit5 import Controller, KernelProblem, run  # noqa: E402
from jaxlagrange._options import GivenOptions  # noqa: E402


TINY = os.environ.get("JAXLAGRANGE_BENCH_TINY") == "1"
T1, TOL, G = 0.2 if TINY else 10.0, 1e-8, 9.81


def sizes(*batches):
    """The batch sizes, at most 16 in a dry run."""
    return sorted({min(b, 16) for b in batches}) if TINY else list(batches)


def double_pendulum_lagrangian(q, qd, t):
    (a, b), (wa, wb) = q, qd
    kinetic = wa**2 + 0.5 * wb**2 + wa * wb * jnp.cos(a - b)
    potential = -2 * G * jnp.cos(a) - G * jnp.cos(b)
    return kinetic - potential


SYSTEM = jl.LagrangianSystem(double_pendulum_lagrangian)


def hand_qdd(a, b, wa, wb):
    """q̈ of the same double pendulum, written out (elementwise: lanes or arrays)."""
    d = a - b
    s, c = jnp.sin(d), jnp.cos(d)
    den = 2.0 - c**2
    aa = (-(wb**2) * s - wa**2 * s * c - 2 * G * jnp.sin(a) + G * jnp.sin(b) * c) / den
    bb = (
        2 * wa**2 * s + wb**2 * s * c + 2 * G * jnp.sin(a) * c - 2 * G * jnp.sin(b)
    ) / den
    return aa, bb


def inputs(batch, dtype=np.float64):
    rng = np.random.default_rng(0)
    q0 = rng.uniform(-2.0, 2.0, (batch, 2)).astype(dtype)
    return jnp.asarray(q0), jnp.zeros((batch, 2), dtype)


# The variants, each a function of (q0, qd0) returning the final (q, q̇) and the
# total number of steps.


def ours(backend, tol=TOL, system=SYSTEM, t1=T1):
    def fn(q0, qd0):
        traj = jl.simulate_batch(
            system, q0, qd0, t1=t1, rtol=tol, atol=tol, backend=backend, throw=False
        )
        return traj.q[:, -1], traj.qd[:, -1], jnp.sum(traj.stats["num_steps"])

    return fn


def hand_diffrax(tol=TOL):
    def field(t, y, args):
        a, b, wa, wb = y
        aa, bb = hand_qdd(a, b, wa, wb)
        return jnp.stack([wa, wb, aa, bb])

    def one(q0, qd0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field),
            diffrax.Tsit5(),
            t0=0.0,
            t1=T1,
            dt0=None,
            y0=jnp.concatenate([q0, qd0]),
            stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
            max_steps=100_000,
            throw=False,
        )
        return sol.ys[-1, :2], sol.ys[-1, 2:], sol.stats["num_steps"]

    def fn(q0, qd0):
        q, qd, steps = jax.vmap(one)(q0, qd0)
        return q, qd, jnp.sum(steps)

    return fn


class _HandRHS:
    """The reference kernel's right-hand side: q̈ written out, on lanes."""

    def __call__(self, t, y, leaves):
        a, b, wa, wb = y.flat
        aa, bb = hand_qdd(a, b, wa, wb)
        out = np.empty((4,), dtype=object)
        for i, value in enumerate((wa, wb, aa, bb)):
            out[i] = value
        false = np.zeros((), dtype=object)
        false[()] = np.bool_(False)
        return out, false, false


def hand_kernel(tol=TOL, block=128):
    """The reference: the same Pallas Tsit5 loop with the hand-written q̈."""

    def fn(q0, qd0):
        dtype = q0.dtype
        problem = KernelProblem(
            rhs=_HandRHS(),
            project=None,
            n=2,
            num_params=0,
            param_shapes=(),
            num_gains=0,
            num_saves=1,
            controller=Controller(adaptive=True),
            max_steps=100_000,
            has_dt0=False,
            block=block,
        )
        span = jnp.asarray(T1, dtype)
        scalars = jnp.array(
            [0.0, T1, tol, tol, 0.0, 16 * jnp.finfo(dtype).eps * span, T1], dtype
        )
        ys, _, codes = run(
            problem,
            jnp.concatenate([q0, qd0], axis=1),
            jnp.zeros((q0.shape[0], 0), dtype),
            scalars,
        )
        return ys[:, -1, :2], ys[:, -1, 2:], jnp.sum(codes[1])

    return fn


def compile_timed(fn, *args):
    jitted = jax.jit(fn)
    start = time.perf_counter()
    jitted.lower(*args).compile()  # fills the jitted function's cache
    seconds = time.perf_counter() - start
    jax.block_until_ready(jitted(*args))
    return jitted, seconds


def best_time(fn, args, repeats):
    times = []
    out = None
    for _ in range(repeats):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times), out


def _ms(seconds):
    return f"{seconds * 1e3:9.1f} ms" if seconds < 10 else f"{seconds:9.2f} s "


def table(batches, variants, repeats, dtype, reference="hand diffrax"):
    print(
        f"| B | variant | compile | run | steps/s | × {reference} | final-state "
        "diff. vs it |"
    )
    print("|---|---|---|---|---|---|---|")
    # The reference first: each row is printed as soon as it is measured, so a
    # run cut short by a time limit still leaves the rows before.
    order = sorted(variants, key=lambda name: name != reference)
    for batch in batches:
        args = inputs(batch, dtype)
        ref = None
        for name in order:
            fn, compile_s = compile_timed(variants[name](), *args)
            run_s, (q, _, steps) = best_time(fn, args, repeats)
            if name == reference:
                ref = (run_s, q)
            ratio = diff = ""
            if ref is not None:
                ratio = f"{ref[0] / run_s:.1f}×"
                # Chaotic members diverge between two correct integrators: the
                # median, not the max, says whether they integrate the same thing.
                diff = f"median {float(jnp.median(jnp.abs(q - ref[1]))):.1e}"
            print(
                f"| {batch:,} | {name} | {compile_s:.1f} s | {_ms(run_s)} | "
                f"{float(steps) / run_s:.2e} | {ratio} | {diff} |",
                flush=True,
            )


def chain_lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    vx = jnp.cumsum(length * jnp.cos(q) * qd)
    vy = jnp.cumsum(length * jnp.sin(q) * qd)
    height = -jnp.cumsum(length * jnp.cos(q))
    return 0.5 * m * jnp.sum(vx**2 + vy**2) - m * g * jnp.sum(height)


def bigger_states(batch, repeats):
    chain = jl.LagrangianSystem(
        chain_lagrangian, params={"m": 1.0, "l": 0.1, "g": 9.81}
    )
    cavity, cq0, cqd0 = jl.systems.cavity(modes=8)
    cavity = cavity.with_mass_solver(None)
    rng = np.random.default_rng(0)
    cases = {
        "10-link pendulum chain": (
            chain,
            jnp.asarray(rng.uniform(-0.5, 0.5, (batch, 10))),
            jnp.zeros((batch, 10)),
        ),
        "cavity, N = 8": (
            cavity,
            cq0 * (1 + 0.01 * jnp.asarray(rng.uniform(-1, 1, (batch, 9)))),
            jnp.broadcast_to(cqd0, (batch, 9)),
        ),
    }
    print("| system | B | backend | compile | run | steps/s | kernel speedup |")
    print("|---|---|---|---|---|---|---|")
    for name, (system, q0, qd0) in cases.items():
        times = {}
        for backend in ("vmap", "kernel"):
            fn, compile_s = compile_timed(
                ours(backend, system=system, t1=min(1.0, T1)), q0, qd0
            )
            run_s, (_, _, steps) = best_time(fn, (q0, qd0), repeats)
            times[backend] = run_s
            speedup = f"{times['vmap'] / run_s:.1f}×" if backend == "kernel" else ""
            print(
                f"| {name} | {batch:,} | {backend} | {compile_s:.1f} s | {_ms(run_s)} | "
                f"{float(steps) / run_s:.2e} | {speedup} |",
                flush=True,
            )


def gpu(repeats):
    print(f"devices: {jax.devices()}")
    variants = {
        "simulate_batch vmap": lambda: ours("vmap"),
        "hand diffrax": hand_diffrax,
        "simulate_batch kernel": lambda: ours("kernel"),
        "hand kernel": hand_kernel,
    }
    print("\n1. float64, rtol = atol = 1e-8")
    table(sizes(16_384, 1_048_576), variants, repeats, np.float64)
    print("\n2. float32, rtol = atol = 1e-5")
    f32 = {
        "simulate_batch vmap": lambda: ours("vmap", 1e-5),
        "hand diffrax": lambda: hand_diffrax(1e-5),
        "simulate_batch kernel": lambda: ours("kernel", 1e-5),
        "hand kernel": lambda: hand_kernel(1e-5),
    }
    table(sizes(16_384, 1_048_576), f32, repeats, np.float32)
    print("\n3. time against B, float64")
    table(
        sizes(1, 16, 256, 4096, 65_536, 262_144, 1_048_576),
        {"hand diffrax": hand_diffrax, "simulate_batch kernel": lambda: ours("kernel")},
        repeats,
        np.float64,
    )
    table(
        sizes(4_194_304),
        {"simulate_batch kernel": lambda: ours("kernel"), "hand kernel": hand_kernel},
        1,
        np.float64,
        reference="hand kernel",
    )
    print("\n4. bigger states, float64, t = 0 ... 1, rtol = atol = 1e-8")
    bigger_states(sizes(16_384)[0], repeats)


def cpu():
    batch = 6
    q0, qd0 = inputs(batch)
    options = dict(t1=1.0, rtol=1e-10, atol=1e-10)
    start = time.perf_counter()
    kernel = jax.block_until_ready(
        simulate_kernel(SYSTEM, q0, qd0, None, GivenOptions(**options), block_size=4)
    )
    seconds = time.perf_counter() - start
    vmap = jl.simulate_batch(SYSTEM, q0, qd0, backend="vmap", throw=False, **options)
    print(
        f"CPU, interpret mode: B = {batch}, t = 0 ... 1, rtol = atol = 1e-10 "
        f"(trace + compile + run {seconds:.1f} s)"
    )
    print(
        f"  max |q_kernel - q_vmap|   = {float(jnp.max(jnp.abs(kernel.q - vmap.q))):.1e}"
    )
    print(
        f"  max |q̇_kernel - q̇_vmap|   = {float(jnp.max(jnp.abs(kernel.qd - vmap.qd))):.1e}"
    )
    print(
        f"  steps kernel / vmap       = {kernel.stats['num_steps'].tolist()} / "
        f"{vmap.stats['num_steps'].tolist()}"
    )
    hand = jax.jit(hand_kernel(1e-10, block=4))
    q, _, _ = hand(q0, qd0)
    diffrax_q, _, _ = jax.jit(hand_diffrax(1e-10))(q0, qd0)
    print(
        f"  the reference kernel (hand q̈) vs hand diffrax at t = 10: median "
        f"|Δq| = {float(jnp.median(jnp.abs(q - diffrax_q))):.1e}"
    )


def lanes_on_cpu(batch=4096, repeats=30):
    """Issue 26's "the same generated q̈ on the CPU": q̈ of the double pendulum
    (constants in L) for a batch under jax.jit, three ways: `jl.accelerations`
    vmapped, the traced q̈ evaluated on (B,) lane vectors (what the kernel runs),
    and the hand-written q̈ vmapped. Medians of interleaved runs."""
    from jaxlagrange._constraints import dynamics
    from jaxlagrange._lanes import LaneFunction, from_lanes, to_lanes

    rng = np.random.default_rng(1)
    q = jnp.asarray(rng.uniform(-2, 2, (batch, 2)))
    qd = jnp.asarray(rng.uniform(-1, 1, (batch, 2)))
    traced = LaneFunction(
        lambda q, qd: dynamics(SYSTEM, q, qd, jnp.zeros(())).accelerations,
        q[0],
        qd[0],
    )
    variants = {
        "jl.accelerations": jax.jit(
            jax.vmap(lambda q, qd: jl.accelerations(SYSTEM, q, qd, 0.0))
        ),
        "lanes": jax.jit(
            lambda q, qd: from_lanes(traced(to_lanes(q), to_lanes(qd)), batch, q.dtype)
        ),
        "hand": jax.jit(jax.vmap(lambda q, qd: jnp.stack(hand_qdd(*q, *qd)))),
    }
    outs = {k: jax.block_until_ready(f(q, qd)) for k, f in variants.items()}
    times = {k: [] for k in variants}
    for _ in range(repeats):
        for k, f in variants.items():
            start = time.perf_counter()
            jax.block_until_ready(f(q, qd))
            times[k].append(time.perf_counter() - start)
    hand = float(np.median(times["hand"]))
    print(
        f"q̈ of the double pendulum, B = {batch}, jit on the CPU (median of {repeats}):"
    )
    for k in variants:
        t = float(np.median(times[k]))
        diff = float(jnp.max(jnp.abs(outs[k] - outs["hand"])))
        print(
            f"  {k:18s} {t * 1e6:8.1f} µs  {t / hand:5.2f}× hand   max |Δ| {diff:.1e}"
        )


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gpu", action="store_true", help="the GPU table")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.gpu:
        if jax.default_backend() != "gpu" and not TINY:
            sys.exit(
                "--gpu needs a GPU (jax.default_backend() is "
                f"{jax.default_backend()!r})."
            )
        gpu(args.repeats)
    else:
        cpu()
        lanes_on_cpu()


if __name__ == "__main__":
    main()
