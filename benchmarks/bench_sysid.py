"""jl.fit against mujoco.sysid on the same data and start, in one run.

Data: MuJoCo's RK4 at 0.1 ms (the continuous motion to ~1e-12), controls
held 10 ms, sampled every 10 ms. Problems:

- `armature`: mujoco.sysid's 5-link arm (its test_arm_recover_armature),
  the five armatures from 0.01; mujoco.sysid fits with the arm's own model
  (implicitfast, 2 ms), jl.fit with the continuous motion.
- `inertial`: the 3-link arm of tests/test_identification.py, the ten
  inertial params of each body (30), jl.fit consistent (mujoco.sysid is not
  run on it here).
- `experiments`: the armature fit from 1, 2, 4, … experiments (jl.fit
  batches them as one vmapped solve).

Accuracy is the largest error against the truth; times are wall seconds of
the first fit (jl.fit: compile included) and of a warm one (the armature
comparison: the best of three).

    PYTHONPATH=. python benchmarks/bench_sysid.py [--quick] [--max-experiments 64]
        [--noise 1e-3]
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


jax.config.update("jax_enable_x64", True)
sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))

import mujoco  # noqa: E402

# `mujoco.sysid` (the `mujoco[sysid]` extra: scipy, tabulate; its report needs
# plotly, whose absence empties the package): its parts, imported directly.
from mujoco.sysid._src.optimize import optimize  # noqa: E402
from mujoco.sysid._src.parameter import Parameter, ParameterDict  # noqa: E402
from mujoco.sysid._src.residual import build_residual_fn  # noqa: E402
from mujoco.sysid._src.timeseries import TimeSeries  # noqa: E402
from mujoco.sysid._src.trajectory import ModelSequences, create_initial_state  # noqa: E402
from test_identification import ARM3, ARM5, ARMATURE  # noqa: E402

import jaxlagrange as jl  # noqa: E402


HOLD, DT = 10e-3, 1e-4


def record(xml, ctrl, qpos=None):
    """RK4 at DT of `xml`, ctrl rows held HOLD: times, qpos, qvel."""
    m = mujoco.MjModel.from_xml_string(
        xml.replace(
            'timestep="0.001" integrator="RK4"', f'timestep="{DT}" integrator="RK4"'
        )
    )
    d = mujoco.MjData(m)
    if qpos is not None:
        d.qpos[:] = qpos
    q, qd, steps = [d.qpos.copy()], [d.qvel.copy()], round(HOLD / DT)
    for row in ctrl[:-1]:
        d.ctrl[:] = row
        for _ in range(steps):
            mujoco.mj_step(m, d)
        q.append(d.qpos.copy())
        qd.append(d.qvel.copy())
    return np.arange(len(ctrl)) * HOLD, np.array(q), np.array(qd)


def sines(ts, amplitudes, seed):
    rng = np.random.default_rng(seed)
    n = len(amplitudes)
    f, phase = rng.uniform(0.4, 1.5, n), rng.uniform(0, 6, n)
    return np.asarray(amplitudes) * np.sin(2 * np.pi * f * ts[:, None] + phase)


def experiments(xml, amplitudes, count, duration):
    out = []
    for seed in range(count):
        ts = np.arange(round(duration / HOLD) + 1) * HOLD
        ctrl = sines(ts, amplitudes, seed)
        nq = len(amplitudes)
        qpos = (
            np.random.default_rng(100 + seed).uniform(-0.5, 0.5, nq) if seed else None
        )
        out.append((ctrl, *record(xml, ctrl, qpos)))
    return out


def timed(fn):
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def noisy(runs, sigma):
    """`runs` with Gaussian noise σ on q and q̇ (the initial states kept)."""
    rng = np.random.default_rng(7)
    blur = lambda x: x + sigma * rng.standard_normal(x.shape)  # noqa: E731
    return [(c, ts, blur(q), blur(qd), q[0], qd[0]) for c, ts, q, qd in runs]


def jl_fit(xml, runs, guess, trainable, sigma=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, _, _ = jl.mujoco.load(xml)
    if len(runs[0]) == 4:  # noise-free: the data's own initial states
        runs = [(c, ts, q, qd, q[0], qd[0]) for c, ts, q, qd in runs]
    data = [
        jl.Observations(ts, q, qd, ctrl=c, q0=q0, qd0=qd0, sigma=sigma)
        for c, ts, q, qd, q0, qd0 in runs
    ]
    params = {**system.params, **guess}

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return jl.fit(system, data, params=params, trainable=trainable)

    return run


def sysid_fit(xml, runs, parameters):
    """mujoco.sysid on the same runs (its model as `xml` says: fixed step)."""
    spec = mujoco.MjSpec.from_string(xml)
    for j in spec.joints:  # the sensors it compares: joint positions, velocities
        spec.add_sensor(
            type=mujoco.mjtSensor.mjSENS_JOINTPOS,
            objname=j.name,
            objtype=mujoco.mjtObj.mjOBJ_JOINT,
            name=f"{j.name}_pos",
        )
    for j in spec.joints:
        spec.add_sensor(
            type=mujoco.mjtSensor.mjSENS_JOINTVEL,
            objname=j.name,
            objtype=mujoco.mjtObj.mjOBJ_JOINT,
            name=f"{j.name}_vel",
        )
    model = spec.compile()
    sequences = []
    for i, (ctrl, ts, q, qd, q0, qd0) in enumerate(runs):
        state = create_initial_state(model, q0, qd0, np.zeros(model.na))
        sensors = TimeSeries.from_names(ts, np.concatenate([q, qd], 1), model)
        # Its controls on its own step, held (it interpolates them linearly).
        dt = model.opt.timestep
        fine = np.arange(round(ts[-1] / dt) + 1) * dt
        held = ctrl[np.minimum((fine / HOLD + 1e-9).astype(int), len(ctrl) - 1)]
        sequences.append(
            ModelSequences(
                f"run{i}", spec, f"run{i}", state, TimeSeries(fine, held), sensors
            )
        )

    def run():
        params = ParameterDict()
        for p in parameters():
            params.add(p)
        residual = build_residual_fn(models_sequences=sequences)
        out, _ = optimize(
            initial_params=params, residual_fn=residual, optimizer="mujoco"
        )
        return out

    return run


def armature_parameters(start=0.01):
    for i in range(1, 6):
        p = Parameter(
            f"joint{i}_armature",
            nominal=ARMATURE[i - 1],
            min_value=0.001,
            max_value=1.0,
            modifier=lambda s, p, n=f"joint{i}": setattr(
                s.joint(n), "armature", p.value[0]
            ),
        )
        p.value[:] = start
        yield p


def compare(name, jl_run, sysid_run, truth, read_jl, read_sysid):
    rows = []
    for tool, run, read in (
        ("jl.fit", jl_run, read_jl),
        ("mujoco.sysid", sysid_run, read_sysid),
    ):
        first, t_first = timed(run)
        t_warm = min(timed(run)[1] for _ in range(3))  # a loaded machine: the best
        error = np.max(np.abs(read(first) - truth))
        rows.append((tool, error, t_first, t_warm))
    print(f"\n{name}: max error against the truth, wall time first / warm [s]")
    for tool, error, t1, t2 in rows:
        print(f"  {tool:13s} error {error:.2e}   first {t1:7.2f}   warm {t2:7.2f}")
    (_, e_jl, _, w_jl), (_, e_sy, _, w_sy) = rows
    print(
        f"  ratios: error sysid/jl {e_sy / e_jl:.3g}, warm time jl/sysid {w_jl / w_sy:.3g}"
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="1 s of data, no inertial")
    parser.add_argument("--max-experiments", type=int, default=64)
    parser.add_argument(
        "--noise", type=float, help="σ of noise on the armature data (given to jl.fit)"
    )
    args = parser.parse_args()
    duration = 1.0 if args.quick else 2.0
    print(
        f"jax {jax.__version__}, mujoco {mujoco.__version__}, {jax.devices()[0]}; "
        "the machine may be shared: times are wall clock"
    )
    # mujoco.sysid's model of the arm: its own test's options (implicitfast, 2 ms).
    sysid_arm = ARM5.replace(
        'timestep="0.001" integrator="RK4"',
        'timestep="0.002" integrator="implicitfast"',
    )
    runs = experiments(ARM5, [5.0, 4.0, 3.0, 2.0, 1.0], 1, duration)
    runs = noisy(runs, args.noise or 0.0)
    guess = {"dof_armature": jnp.full(5, 0.01)}
    noise = f", noise σ {args.noise:g}" if args.noise else ""
    compare(
        f"armature (5 params, 1 experiment{noise})",
        jl_fit(ARM5, runs, guess, {"dof_armature"}, args.noise),
        sysid_fit(sysid_arm, runs, armature_parameters),
        ARMATURE,
        lambda r: np.asarray(r.params["dof_armature"]),
        lambda p: np.array([p[f"joint{i}_armature"].value[0] for i in range(1, 6)]),
    )
    print("\nexperiments: jl.fit wall time first / warm [s] (armatures)")
    count = 1
    while count <= args.max_experiments:
        many = experiments(ARM5, [5.0, 4.0, 3.0, 2.0, 1.0], count, duration)
        run = jl_fit(ARM5, many, {"dof_armature": jnp.full(5, 0.01)}, {"dof_armature"})
        result, t1 = timed(run)
        _, t2 = timed(run)
        error = np.max(np.abs(np.asarray(result.params["dof_armature"]) - ARMATURE))
        print(
            f"  {count:3d} experiments: first {t1:7.2f}  warm {t2:7.2f}  error {error:.1e}"
        )
        count *= 2
    if args.quick:
        return
    runs = experiments(ARM3, [2.0, 1.5, 0.5], 3, duration)
    truth = mujoco.MjModel.from_xml_string(ARM3)
    jl_run = jl_fit(
        ARM3,
        runs,
        {"body_mass": truth.body_mass * 1.3},
        {"body_mass", "body_ipos", "body_inertia", "body_iquat"},
    )
    result, t1 = timed(jl_run)
    _, t2 = timed(jl_run)
    d = mujoco.MjData(truth)
    d.qpos[:], d.qvel[:] = [0.3, -0.5, 0.8], [1.0, 0.5, -1.0]
    mujoco.mj_forward(truth, d)
    fitted = jl.accelerations(result.system, d.qpos.copy(), d.qvel.copy(), 0.0)
    print(
        "\ninertial (30 params, 3 experiments): jl.fit consistent (mujoco.sysid: not run)"
    )
    print(
        f"  first {t1:.2f}  warm {t2:.2f}  q̈ error at a test state "
        f"{np.max(np.abs(np.asarray(fitted) - d.qacc)):.1e}; "
        f"unidentifiable directions named: {len(result.unidentifiable)}"
    )


if __name__ == "__main__":
    main()
