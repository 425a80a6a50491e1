"""Trace, compile and run time of representative programs, against another checkout.

    python benchmarks/bench_compile.py [--against PATH] [--rounds 2]
    python benchmarks/bench_compile.py --models [chain2 chain16 hopper ...]

`--models`: for MuJoCo models loaded by `jl.mujoco.load` (hinge chains of n
links, MJCF generated here, and the dm_control cartpole, hopper, cheetah and
humanoid with contacts and limits off), each in fresh processes with a fresh
persistent cache: the first `jl.accelerations` (wall seconds, and JAX's trace,
lowering and XLA compile seconds), the first `jl.simulate` to t = 0.1, their
second calls, the same first calls in a second process (served by the cache),
MJX's `jax.jit(mjx.step)` compile on the same model, and one q̈'s cost (inside
a compiled loop of 100) against MuJoCo's `mj_forward`; then the log–log slope of the chains' first q̈ in n.

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


_MODEL_CHILD = r"""
import collections, sys, time, warnings
import jax, jax.numpy as jnp, mujoco, numpy as np
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")
stages = collections.defaultdict(float)
jax.monitoring.register_event_duration_secs_listener(
    lambda event, duration, **kw: stages.__setitem__(
        event.rsplit("/", 1)[-1], stages[event.rsplit("/", 1)[-1]] + duration))
import jaxlagrange as jl
warnings.simplefilter("ignore")
name, mjx_too = sys.argv[1], sys.argv[2] == "1"
if name.startswith("chain"):
    n, body = int(name[5:]), ""
    for i in range(n):
        body += (f'<body pos="0 0 {-0.3 if i else 0}"><joint type="hinge" '
                 'axis="0 1 0"/><geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>')
    m = mujoco.MjModel.from_xml_string(f"<mujoco><worldbody>{body}{'</body>' * n}"
                                       "</worldbody></mujoco>")
else:
    m = mujoco.MjModel.from_xml_path(f"tests/data/dm_control_suite/{name}.xml")
m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_LIMIT
system, q0, qd0 = jl.mujoco.load(m)
# (projected: a free or ball joint's quaternion keeps its norm)
q0, qd0 = jl.project_initial_state(system, q0, qd0 + 0.1, 0.0)
def timed(fn):
    stages.clear()
    start = time.perf_counter()
    jax.block_until_ready(fn())
    return time.perf_counter() - start, dict(stages)
acc = lambda: jl.accelerations(system, q0, qd0, 0.0)
sim = lambda: jl.simulate(system, q0, qd0, t1=0.1).q
a1, st = timed(acc)
a2, _ = timed(acc)
s1, _ = timed(sim)
s2, _ = timed(sim)
row = [a1, st.get("jaxpr_trace_duration", 0), st.get("jaxpr_to_mlir_module_duration", 0),
       st.get("backend_compile_duration", 0), a2, s1, s2]
if mjx_too:
    from jaxlagrange._constraints import dynamics
    data = mujoco.MjData(m)
    mujoco.mj_forward(m, data)
    start = time.process_time()
    for _ in range(1000):
        mujoco.mj_forward(m, data)
    forward = (time.process_time() - start) / 1000
    # q̈ inside one compiled loop (each state from the last, so nothing is
    # hoisted): the cost per evaluation, without dispatch and error checks.
    def steps(q, v):
        def step(_, state):
            q, v = state
            a = dynamics(system, q, v, jnp.zeros(())).accelerations
            return q + 1e-6 * v, v + 1e-6 * a
        return jax.lax.fori_loop(0, 100, step, (q, v))
    qdd = jax.jit(steps)
    jax.block_until_ready(qdd(q0, qd0))
    times = []
    for _ in range(10):
        start = time.process_time()
        jax.block_until_ready(qdd(q0, qd0))
        times.append((time.process_time() - start) / 100)
    from mujoco import mjx
    m.opt.enableflags &= ~int(mujoco.mjtEnableBit.mjENBL_ENERGY)  # (MJX refuses it)
    mx, dx = mjx.put_model(m), mjx.put_data(m, data)
    start = time.perf_counter()
    jax.jit(mjx.step).lower(mx, dx).compile()
    row += [time.perf_counter() - start, np.median(times) * 1e6, forward * 1e6]
print("|".join([name, str(q0.shape[0])] + [f"{x:.4g}" for x in row]))
"""

_MODELS = ["chain2", "chain4", "chain8", "chain16", "chain32", "chain64",
           "cartpole", "hopper", "cheetah", "humanoid"]


def _models(names: list[str]) -> None:
    import tempfile

    import numpy as np

    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    print("wall seconds on this machine (say how loaded it was); q̈ and")
    print("mj_forward: µs of process CPU time per call; 2nd process: the cache")
    head = ("model", "nq", "q̈ 1st", "trace", "lower", "XLA", "q̈ 2nd", "sim 1st",
            "sim 2nd", "2nd proc q̈", "2nd proc sim", "MJX step", "q̈ µs", "mj_fwd µs",
            "ratio")
    print(" ".join(f"{h:>12s}" for h in head))
    firsts = {}
    for name in names:
        with tempfile.TemporaryDirectory() as cache:
            env = dict(os.environ, JAXLAGRANGE_CACHE_DIR=cache, PYTHONPATH=here)
            rows = []
            for mjx_too in ("1", "0"):
                out = subprocess.run(
                    [sys.executable, "-c", _MODEL_CHILD, name, mjx_too],
                    capture_output=True, text=True, env=env, cwd=here, check=True,
                )
                rows.append(out.stdout.strip().splitlines()[-1].split("|"))
        first, second = rows
        cells = first[:9] + [second[2], second[7]] + first[9:]
        if len(first) > 9:
            cells.append(f"{float(first[10]) / float(first[11]):.3g}x")
        print(" ".join(f"{c:>12s}" for c in cells))
        if name.startswith("chain"):
            firsts[int(name[5:])] = float(first[2])
    large = sorted(n for n in firsts if n >= 8)
    if len(large) >= 2:
        slope = np.polyfit(np.log(large), np.log([firsts[n] for n in large]), 1)[0]
        print(f"log–log slope of the chains' first q̈ from {large[0]} to {large[-1]}"
              f" links: {slope:.2f}")


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
    parser.add_argument("--models", nargs="*", help="the model table (default all)")
    options = parser.parse_args()
    if options.models is not None:
        _models(options.models or _MODELS)
        return
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
