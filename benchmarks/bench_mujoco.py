"""A double pendulum from MJCF: jaxlagrange against MuJoCo at equal accuracy.

    python benchmarks/bench_mujoco.py [--quick]

Both integrate the same model (`jl.mujoco.load` of the MJCF below; the two agree
to rounding) from rest at (1.0, 0.5) rad over t = 0 … 10 s. The reference final
state comes from jaxlagrange with Dopri8 at rtol = atol = 1e-14. Each side then takes the
cheapest setting whose final-state error (max over q and q̇) is at most 1e-6:

- jaxlagrange: adaptive Tsit5, the loosest rtol = atol from 1e-5, 1e-6, …;
- MuJoCo: RK4 (`mujoco.rollout`, in C), the largest step 10 s / N, N growing
  by 25%.

Then it times, best of `--repeats`:

1. one trajectory (jaxlagrange `jl.simulate` on the CPU against one MuJoCo
   rollout on one thread);
2. an ensemble of B = 1024 members from angles drawn in [0.3, 0.7] (seed 0):
   `jl.simulate_batch` (vmap backend) against `mujoco.rollout` on all CPU
   threads, at the same settings (checked: the ensemble's worst error), and
   against MJX (`mujoco-mjx`: `jax.vmap` of `mjx.step` with RK4 at MuJoCo's
   step count, compiled for the CPU) where it imports.

Compile times are printed beside run times.
"""

import argparse
import os
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

T1, TARGET = 10.0, 1e-6

MJCF = """
<mujoco model="double pendulum">
  <option gravity="0 0 -9.81"><flag contact="disable"/></option>
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05" mass="1"/>
      <body name="lower" pos="0 0 -1">
        <joint name="elbow" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05" mass="1"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


def _best(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def _ours(ready, q0, qd0, tol, batch, solver=None):
    """(compile s, final q, final qd, run fn) of jaxlagrange at rtol = atol = tol."""
    import jax

    import jaxlagrange as jl

    options = dict(t1=T1, rtol=tol, atol=tol, solver=solver, max_steps=1_000_000)

    def one(q0, qd0):
        traj = jl.simulate(ready.system, q0, qd0, **options)
        return traj.q[-1], traj.qd[-1]

    def ensemble(q0, qd0):  # as a user runs one: chunked on the CPU
        traj = jl.simulate_batch(ready.system, q0, qd0, backend="vmap", **options)
        return traj.q[:, -1], traj.qd[:, -1]

    fn = jax.jit(ensemble if batch else one)
    start = time.perf_counter()
    compiled = fn.lower(q0, qd0).compile()
    compile_s = time.perf_counter() - start
    q, qd = jax.block_until_ready(compiled(q0, qd0))
    return compile_s, q, qd, lambda: jax.block_until_ready(compiled(q0, qd0))


def _mujoco(model, q0, qd0, steps, nthread):
    """(final qpos, final qvel, run fn) of MuJoCo's RK4 with `steps` steps."""
    import mujoco
    import numpy as np
    from mujoco import rollout

    model.opt.timestep = T1 / steps
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    state0 = np.zeros((len(q0), mujoco.mj_stateSize(model, spec)))
    state0[:, 1 : 1 + model.nq] = q0
    state0[:, 1 + model.nq : 1 + model.nq + model.nv] = qd0
    chunk = max(1, min(steps, 2_000_000 // len(q0)))  # bounds the state output
    pool = rollout.Rollout(nthread=nthread if nthread > 1 else 0)

    def run():
        state, done = state0, 0
        while done < steps:
            n = min(chunk, steps - done)
            out, _ = pool.rollout(model, datas, state, nstep=n)
            state, done = out[:, -1], done + n
        return state

    state = run()
    qpos = state[:, 1 : 1 + model.nq]
    return qpos, state[:, 1 + model.nq : 1 + model.nq + model.nv], run


def _mjx(model, q0, qd0, steps):
    """(compile s, final qpos, final qvel, run fn) of MJX's RK4, `steps` steps,
    vmapped over the members and compiled by XLA for the CPU."""
    import jax
    import jax.numpy as jnp
    from mujoco import mjx

    model.opt.timestep = T1 / steps
    mx = mjx.put_model(model)

    def one(q, qd):
        data = mjx.make_data(mx).replace(qpos=q, qvel=qd)
        data = jax.lax.fori_loop(0, steps, lambda _, d: mjx.step(mx, d), data)
        return data.qpos, data.qvel

    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    start = time.perf_counter()
    compiled = jax.jit(jax.vmap(one)).lower(q0, qd0).compile()
    compile_s = time.perf_counter() - start
    q, qd = jax.block_until_ready(compiled(q0, qd0))
    return compile_s, q, qd, lambda: jax.block_until_ready(compiled(q0, qd0))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="B = 64, 1 repeat")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import mujoco
    import numpy as np
    from diffrax import Dopri8

    import jaxlagrange as jl

    repeats = 1 if args.quick else args.repeats
    batch = 64 if args.quick else 1024
    ready = jl.mujoco.load(MJCF)
    model = mujoco.MjModel.from_xml_string(MJCF)
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    rng = np.random.default_rng(0)
    starts = {
        "one": np.array([[1.0, 0.5]]),
        "ensemble": rng.uniform(0.3, 0.7, (batch, 2)),
    }
    print(
        f"jaxlagrange {jl.__version__}, jax {jax.__version__}, MuJoCo "
        f"{mujoco.__version__}, {os.cpu_count()} CPU threads, float64, "
        f"t = 0 … {T1}, final-state error ≤ {TARGET:g}"
    )
    rows, errors = [], {}
    for label, q0 in starts.items():
        qd0 = np.zeros_like(q0)
        exact = _ours(ready, jnp.asarray(q0), jnp.asarray(qd0), 1e-14, True, Dopri8())
        reference = np.concatenate([exact[1], exact[2]], -1)

        def error(q, qd, reference=reference):
            return np.abs(np.concatenate([q, qd], -1) - reference).max()

        errors[label] = error

        for tol in 10.0 ** -np.arange(5, 13):
            ours = _ours(ready, jnp.asarray(q0), jnp.asarray(qd0), tol, True)
            if error(ours[1], ours[2]) <= TARGET:
                break
        ours_error = error(ours[1], ours[2])
        if label == "one":  # a single trajectory is simulated unbatched
            ours = _ours(ready, jnp.asarray(q0[0]), jnp.asarray(qd0[0]), tol, False)
        threads = 1 if label == "one" else os.cpu_count()
        steps = 250
        while True:
            qpos, qvel, run = _mujoco(model, q0, qd0, steps, threads)
            if error(qpos, qvel) <= TARGET or steps > 10_000_000:
                break
            steps = int(steps * 1.25)
        ours_s = _best(ours[3], repeats)
        theirs_s = _best(run, repeats)
        rows.append(
            (
                label,
                len(q0),
                tol,
                ours_error,
                ours[0],
                ours_s,
                steps,
                error(qpos, qvel),
                theirs_s,
            )
        )
    print(
        f"{'':9} {'B':>5} | {'jl rtol':>7} {'error':>8} {'compile':>8} {'run':>9}"
        f" | {'RK4 steps':>9} {'error':>8} {'run':>9} | {'speed-up':>8}"
    )
    for label, b, tol, e1, c, t1, n, e2, t2 in rows:
        print(
            f"{label:9} {b:5d} | {tol:7.0e} {e1:8.1e} {c:7.2f}s {t1:8.4f}s"
            f" | {n:9d} {e2:8.1e} {t2:8.4f}s | {t2 / t1:7.1f}×"
        )
    try:
        import mujoco.mjx  # noqa: F401
    except ImportError:
        print("MJX: not installed (pip install mujoco-mjx), not timed")
        return
    # MJX on the CPU, the ensemble, at MuJoCo's RK4 step count (the same method).
    label, b, tol, _, _, ours_s, steps, _, _ = rows[-1]
    q0 = starts[label]
    compile_s, qpos, qvel, run = _mjx(model, q0, np.zeros_like(q0), steps)
    mjx_s = _best(run, repeats)
    e = errors[label](qpos, qvel)
    print(
        f"MJX {mujoco.__version__}, RK4, {steps} steps, B = {b}: error {e:.1e}, "
        f"compile {compile_s:.2f}s, run {mjx_s:.4f}s; jaxlagrange "
        f"{mjx_s / ours_s:.1f}× faster"
    )


if __name__ == "__main__":
    main()
