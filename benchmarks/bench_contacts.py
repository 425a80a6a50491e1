"""A box sliding to rest on the floor, from MJCF: jaxlagrange against MuJoCo.

    python benchmarks/bench_contacts.py [--repeats N] [--hopper]

A 0.4 × 0.3 × 0.2 m box (MuJoCo's mass from its volume) rests flat on a plane,
μ = 0.5 (MuJoCo's mix: the larger of the two geoms'), pushed along x at
v₀ = 1 m/s. The exact solution: it slides until v₀/(μg) = 0.204 s and stops at
x = v₀²/(2μg) = 0.1019 m, resting at z = 0.1 m. The final state at t = 0.5 s
is compared with it (the error: max over the position x, z and the velocity).

- jaxlagrange (`jl.mujoco.load` of the MJCF: four corner contacts, a friction
  disc, exact stick/slip events): the loosest rtol = atol from 1e-5, 1e-6, …
  whose final-state error is at most 1e-6 (compiled once: the tolerance is
  traced).
- MuJoCo (`mj_step` through `mujoco.rollout`, in C, one thread: its default
  Euler integrator and soft contacts, elliptic cones): the largest step 0.5 s / N, N doubling from 250, that reaches the
  same error, or the smallest step tried (2e-6 s) where none does: soft contacts
  penetrate and creep, so the error has a floor that a smaller step does not
  remove.

Warm run times are the best of `--repeats` back-to-back calls; jaxlagrange's
compile time is printed beside them (MuJoCo compiles nothing). `--hopper` also
drops the dm_control hopper from its default pose for 3 s (compile alone takes
minutes) and prints its resting root height beside MuJoCo's.
"""

import argparse
import os
import sys
import time
import warnings
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench_mujoco import _best  # noqa: E402  (best of back-to-back calls)


T1, TARGET, MU, V0, G = 0.5, 1e-6, 0.5, 1.0, 9.81

MJCF = f"""
<mujoco model="sliding box">
  <option cone="elliptic"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="{MU}"/>
    <body name="box" pos="0 0 .1"><freejoint/>
      <geom name="box" type="box" size=".2 .15 .1" friction="{MU}"/></body>
  </worldbody>
</mujoco>
"""


def _error(qpos, qvel):
    """The final state's error against the exact stop (x, z and the velocities)."""
    import numpy as np

    exact_x = V0**2 / (2 * MU * G)
    return max(abs(qpos[0] - exact_x), abs(qpos[2] - 0.1), np.abs(qvel).max())


def _ours(ready, t1=T1, push=V0, saveat=None):
    """(compile s, run at a tolerance): jaxlagrange compiled once, the tolerance
    rtol = atol a traced argument; the run returns (final qpos, final qvel) and
    raises where the solve fails."""
    import jax
    import jax.numpy as jnp

    import jaxlagrange as jl

    system, q0, qd0 = ready
    qd0 = qd0.at[0].set(push)

    def one(q0, qd0, tol):
        options = dict(t1=t1, rtol=tol, atol=tol, saveat=saveat, throw=False)
        traj = jl.simulate(system, q0, qd0, max_events=256, **options)
        return traj.q[-1], traj.qd[-1], traj.result

    start = time.perf_counter()
    compiled = jax.jit(one).lower(q0, qd0, jnp.asarray(1e-8)).compile()
    compile_s = time.perf_counter() - start

    def run(tol):
        q, qd, result = jax.block_until_ready(compiled(q0, qd0, jnp.asarray(tol)))
        if result != jl.RESULTS.successful:
            raise RuntimeError(f"jaxlagrange failed at tol = {tol:g}: {result}")
        return q, qd

    return compile_s, run


def _mujoco(model, steps, t1=T1, push=V0):
    """(final qpos, final qvel, run fn) of MuJoCo's `mj_step` (`mujoco.rollout`,
    in C, one thread) with `steps` steps to t1."""
    import mujoco
    import numpy as np
    from mujoco import rollout

    model.opt.timestep = t1 / steps
    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros((1, mujoco.mj_stateSize(model, spec)))
    mujoco.mj_getState(model, data, state0[0], spec)
    state0[0, 1 + model.nq] = push  # qvel[0]

    def run():
        out, _ = rollout.rollout(model, data, state0, nstep=steps)
        return out[0, -1]

    state = run()
    return state[1 : 1 + model.nq], state[1 + model.nq : 1 + model.nq + model.nv], run


def _hopper(repeats):
    """The dm_control hopper dropped from its default pose for 3 s."""
    import jax.numpy as jnp
    import mujoco

    import jaxlagrange as jl

    path = ROOT / "tests" / "data" / "dm_control_suite" / "hopper.xml"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = jl.mujoco.load(str(path))
    compile_s, run = _ours(ready, t1=3.0, push=0.0, saveat=jnp.array([3.0]))
    q, qd = run(1e-8)
    run_s = _best(lambda: run(1e-8), repeats)
    model = mujoco.MjModel.from_xml_path(str(path))
    steps = int(round(3.0 / model.opt.timestep))
    qpos, _, theirs = _mujoco(model, steps, t1=3.0, push=0.0)
    theirs_s = _best(theirs, repeats)
    # The torso's height: it sits at z = 1 + rootz (rootx, rootz, rooty, ...).
    print(
        f"hopper, 3 s drop: jaxlagrange rtol = atol = 1e-8: torso z "
        f"{1 + float(q[1]):.5f} m (|q̇| {float(abs(qd).max()):.1e}), compile "
        f"{compile_s:.1f}s, run {run_s:.3f}s | MuJoCo mj_step at its {steps} steps: "
        f"torso z {1 + qpos[1]:.5f} m, run {theirs_s:.4f}s | run-time ratio "
        f"{run_s / theirs_s:.0f}"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--hopper", action="store_true", help="also the hopper drop")
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import mujoco
    import numpy as np

    import jaxlagrange as jl

    print(
        f"jaxlagrange {jl.__version__}, jax {jax.__version__}, MuJoCo "
        f"{mujoco.__version__}, {os.cpu_count()} CPU threads, float64, one "
        f"trajectory, t = 0 … {T1} s, target final-state error ≤ {TARGET:g}"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = jl.mujoco.load(MJCF)
    compile_s, ours = _ours(ready)
    for tol in 10.0 ** -np.arange(5, 13):
        ours_error = _error(*ours(tol))
        if ours_error <= TARGET:
            break
    model = mujoco.MjModel.from_xml_string(MJCF)
    steps, tried = 250, []
    while True:
        qpos, qvel, run = _mujoco(model, steps)
        tried.append((steps, _error(qpos, qvel)))
        if tried[-1][1] <= TARGET or T1 / steps <= 2e-6:
            break
        steps *= 2
    print(
        "MuJoCo mj_step: step → error: "
        + ", ".join(f"{T1 / n:.0e} s → {e:.1e}" for n, e in tried)
    )
    ours_s = _best(lambda: ours(tol), args.repeats)
    theirs_s = _best(run, args.repeats)
    print(
        f"{'':11} | {'setting':>16} {'error':>8} {'compile':>8} {'run':>9}\n"
        f"{'jaxlagrange':11} | {f'rtol=atol={tol:.0e}':>16} {ours_error:8.1e}"
        f" {compile_s:7.2f}s {ours_s:8.4f}s\n"
        f"{'MuJoCo':11} | {f'dt={T1 / steps:.0e} s':>16} {tried[-1][1]:8.1e}"
        f" {'-':>8} {theirs_s:8.4f}s\n"
        f"run-time ratio MuJoCo/jaxlagrange: {theirs_s / ours_s:.2f}; compile/run"
        f" of jaxlagrange: {compile_s / ours_s:.0f}"
    )
    if args.hopper:
        _hopper(args.repeats)


if __name__ == "__main__":
    main()
