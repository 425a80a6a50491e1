"""Trace, compile and run time of representative programs, against another checkout.

    python benchmarks/bench_compile.py [--against PATH] [--rounds 2]

Each program is lowered, compiled and run (best of 5) in a fresh process per
checkout and round, pinned to one core (`taskset -c 1` where available, XLA's
Eigen pool off) and timed in process CPU seconds, so that a loaded machine
disturbs the comparison less. `--against` names another checkout of the
project (e.g. `git worktree add /tmp/base <rev>`); its rounds interleave with
this one's. Also printed: the lines of the optimized HLO (load-independent).

The programs (float64, CPU): the projected Cartesian pendulum and the double
pendulum, `jax.vmap(simulate)` over 64 states to t = 5, and the double
pendulum's `simulate_batch` of the same 64 states, called eagerly (its own
program, which diagnoses failed members afterwards); the bouncing ball
(events); the Cartesian pendulum's `accelerations` over 64 states; the cavity
(N = 32, `lineax.CG`) `accelerations` over 64 states; a 200-mass spring chain
(`lineax.CG`), 20 constant steps.
"""

import argparse
import os
import shutil
import subprocess
import sys


_CHILD = r"""
import sys, time
sys.path.insert(0, sys.argv[1])
import diffrax, jax, jax.numpy as jnp
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")
import jaxlagrange as jl
B = 64
spread = 1 + 0.01 * jnp.arange(B)[:, None]
cp, q0, _ = jl.systems.cartesian_pendulum()
th = 0.5 + 0.01 * jnp.arange(B)
cq = jnp.linalg.norm(q0) * jnp.stack([jnp.sin(th), -jnp.cos(th)], 1)
dp, p0, pd0 = jl.systems.double_pendulum()
ball, b0, bd0 = jl.systems.bouncing_ball()
cav, c0, cd0 = jl.systems.cavity(modes=32)
chain, h0, hd0 = jl.systems.spring_chain(n=200)
batched = lambda x: jnp.broadcast_to(x, (B,) + x.shape) * spread
cases = {
    "Cartesian pendulum, vmap simulate": (
        lambda q, v: jax.vmap(lambda a, b: jl.simulate(cp, a, b, t1=5.0).q)(q, v),
        (cq, jnp.zeros_like(cq)),
    ),
    "double pendulum, vmap simulate": (
        lambda q, v: jax.vmap(lambda a, b: jl.simulate(dp, a, b, t1=5.0).q)(q, v),
        (batched(p0), batched(pd0)),
    ),
    "bouncing ball, simulate": (
        lambda q, v: jl.simulate(ball, q, v, t1=3.0).q, (b0, bd0)
    ),
    "Cartesian pendulum, vmap accelerations": (
        lambda q, v: jax.vmap(lambda a, b: jl.accelerations(cp, a, b, 0.0))(q, v),
        (cq, jnp.ones_like(cq)),
    ),
    "cavity N=32 CG, vmap accelerations": (
        lambda q, v: jax.vmap(lambda a, b: jl.accelerations(cav, a, b, 0.0))(q, v),
        (batched(c0), batched(cd0 + 0.1)),
    ),
    "spring chain n=200 CG, 20 steps": (
        lambda q, v: jl.simulate(
            chain, q, v, t1=0.002, dt0=1e-4,
            stepsize_controller=diffrax.ConstantStepSize(),
        ).q,
        (h0, hd0),
    ),
}
for name, (fn, args) in cases.items():
    c0 = time.process_time()
    lowered = jax.jit(fn).lower(*args)
    c1 = time.process_time()
    compiled = lowered.compile()
    c2 = time.process_time()
    lines = compiled.as_text().count("\n")
    jax.block_until_ready(compiled(*args))
    best = float("inf")
    for _ in range(5):
        r0 = time.process_time()
        jax.block_until_ready(compiled(*args))
        best = min(best, time.process_time() - r0)
    print(f"{name}|{c1 - c0:.2f}|{c2 - c1:.2f}|{lines}|{best * 1e3:.3f}")

# `simulate_batch` called eagerly compiles its own program (`_sharding._run`), which
# a `jax.jit` around it would not show: that program is timed where it is built.
from jaxlagrange._ensemble import _sharding
run = _sharding._run
stages = {}
def timed(*args, **kwargs):
    c0 = time.process_time()
    lowered = run.lower(*args, **kwargs)
    c1 = time.process_time()
    compiled = lowered.compile()
    c2 = time.process_time()
    stages.update(trace=c1 - c0, compile=c2 - c1, call=(compiled, args, kwargs))
    return compiled(*args, **kwargs)
_sharding._run = timed
jax.block_until_ready(jl.simulate_batch(dp, batched(p0), batched(pd0), t1=5.0))
_sharding._run = run
compiled, args, kwargs = stages["call"]
lines = compiled.compiled.as_text().count("\n")
best = float("inf")
for _ in range(5):
    r0 = time.process_time()
    jax.block_until_ready(compiled(*args, **kwargs))
    best = min(best, time.process_time() - r0)
print(
    f"double pendulum, simulate_batch|{stages['trace']:.2f}|{stages['compile']:.2f}"
    f"|{lines}|{best * 1e3:.3f}"
)
"""


def _run(tree: str) -> dict[str, tuple[str, ...]]:
    env = dict(os.environ, XLA_FLAGS="--xla_cpu_multi_thread_eigen=false")
    command = [sys.executable, "-c", _CHILD, tree]
    if shutil.which("taskset") and len(os.sched_getaffinity(0)) > 1:
        command = ["taskset", "-c", "1", *command]
    out = subprocess.run(command, capture_output=True, text=True, env=env, check=True)
    rows = [line.split("|") for line in out.stdout.splitlines() if "|" in line]
    return {row[0]: tuple(row[1:]) for row in rows}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", help="another checkout of the project")
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    trees = {"this": here}
    if options.against:
        trees["against"] = os.path.abspath(options.against)
    results = {name: [] for name in trees}
    for _ in range(options.rounds):
        for name, tree in trees.items():
            results[name].append(_run(tree))
    print(
        f"{'program':40s} {'tree':8s} {'trace+lower s':>14s} {'compile s':>10s}"
        f" {'HLO lines':>10s} {'run ms':>9s}"
    )
    for case in results["this"][0]:
        for name in trees:
            for rnd in results[name]:
                trace, compile_, lines, run = rnd[case]
                print(
                    f"{case:40s} {name:8s} {trace:>14s} {compile_:>10s}"
                    f" {lines:>10s} {run:>9s}"
                )


if __name__ == "__main__":
    main()
