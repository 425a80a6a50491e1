"""Identification of loaded MuJoCo models: held controls, consistent inertial
params, several experiments, identifiability. The spring–mass and arm cases
port `mujoco.sysid`'s own integration tests (mujoco/sysid/tests), with data
from MuJoCo's RK4 at a small step (the continuous motion)."""

import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl


mujoco = pytest.importorskip("mujoco")

SPRING_MASS = """<mujoco model="spring_mass"><option timestep="0.001" integrator="RK4">
<flag contact="disable"/></option><worldbody><body name="ball" pos="0 0 0.1">
<inertial pos="0 0 0" mass="1.0" diaginertia="0.001 0.001 0.001"/>
<joint name="slide" type="slide" axis="1 0 0" stiffness="100" damping="5.0"/>
<geom type="sphere" size="0.05"/></body></worldbody>
<actuator><motor name="push" joint="slide"/></actuator></mujoco>"""

# mujoco.sysid's 5-link arm (its joint ranges left out: limits are another matter).
_LINKS = [
    ("0 0 0.1", "0 0 0.05", 1.0, "0.01 0.01 0.005", "0 0 1", 0.5, 1.0),
    ("0 0 0.1", "0 0 0.05", 0.8, "0.008 0.008 0.004", "0 1 0", 0.4, 0.8),
    ("0 0 0.1", "0 0 0.05", 0.6, "0.006 0.006 0.003", "0 1 0", 0.3, 0.6),
    ("0 0 0.1", "0 0 0.04", 0.4, "0.004 0.004 0.002", "0 0 1", 0.2, 0.4),
    ("0 0 0.08", "0 0 0.03", 0.2, "0.002 0.002 0.001", "0 1 0", 0.1, 0.2),
]
ARMATURE = np.array([link[5] for link in _LINKS])


def _arm(links) -> str:
    body = ""
    for i, (pos, ipos, mass, inertia, axis, armature, damping) in reversed(
        list(enumerate(links, 1))
    ):
        body = (
            f'<body name="link{i}" pos="{pos}"><inertial pos="{ipos}" mass="{mass}" '
            f'diaginertia="{inertia}"/><joint name="joint{i}" axis="{axis}" '
            f'armature="{armature}" damping="{damping}"/>{body}</body>'
        )
    motors = "".join(f'<motor joint="joint{i}"/>' for i in range(1, len(links) + 1))
    return (
        '<mujoco model="arm"><option timestep="0.001" integrator="RK4">'
        f'<flag contact="disable"/></option><worldbody>{body}</worldbody>'
        f"<actuator>{motors}</actuator></mujoco>"
    )


ARM5 = _arm(_LINKS)
# A 3-link arm with full inertia tensors off its joint axes.
ARM3 = """<mujoco model="arm3"><option timestep="0.001" integrator="RK4">
<flag contact="disable"/></option><worldbody>
<body name="link1"><joint name="j1" axis="0 0 1" damping="0.1"/>
 <inertial pos="0.1 0.01 0" mass="1.0" fullinertia="0.01 0.012 0.008 0.001 0 0.0005"/>
 <body name="link2" pos="0.2 0 0"><joint name="j2" axis="0 1 0" damping="0.1"/>
  <inertial pos="0.1 0 0.01" mass="0.8" fullinertia="0.006 0.009 0.007 0 0.0008 0"/>
  <body name="link3" pos="0.2 0 0"><joint name="j3" axis="1 0 0" damping="0.1"/>
   <inertial pos="0.05 0.02 0.03" mass="0.5"
     fullinertia="0.004 0.003 0.005 0.0003 0.0002 0.0001"/>
</body></body></body></worldbody>
<actuator><motor joint="j1"/><motor joint="j2"/><motor joint="j3"/></actuator>
</mujoco>"""


def _load(xml):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (nothing here is left out)
        return jl.mujoco.load(xml)


def _record(xml, ctrl, hold, qpos=None):
    """MuJoCo's RK4 rollout, `ctrl` row k held over `hold` steps; the states at
    the switch times, and those times."""
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    if qpos is not None:
        d.qpos[:] = qpos
    q, qd = [d.qpos.copy()], [d.qvel.copy()]
    for row in ctrl[:-1]:
        d.ctrl[:] = row
        for _ in range(hold):
            mujoco.mj_step(m, d)
        q.append(d.qpos.copy())
        qd.append(d.qvel.copy())
    ts = np.arange(len(ctrl)) * hold * m.opt.timestep
    return ts, np.array(q), np.array(qd)


def _sines(ts, amplitudes, seed=0):
    rng = np.random.default_rng(seed)
    f, phase = rng.uniform(0.4, 1.5, len(amplitudes)), rng.uniform(0, 6, len(amplitudes))
    return np.asarray(amplitudes) * np.sin(2 * np.pi * f * ts[:, None] + phase)


def test_a_held_control_series_drives_the_model_as_mujoco_does():
    ts = np.arange(101) * 0.01
    ctrl = (5 * np.sin(2 * np.pi * 1.5 * ts) + 3 * np.sin(2 * np.pi * 3.7 * ts))[:, None]
    _, q, qd = _record(SPRING_MASS, ctrl, 10)
    system, q0, qd0 = _load(SPRING_MASS)
    hold = jl.ZeroOrderHold(ts, ctrl)
    pushed = eqx.tree_at(lambda s: s.params["ctrl"], system, hold)
    traj = jl.simulate(pushed, q0, qd0, t1=ts[-1], saveat=ts, rtol=1e-11, atol=1e-11)
    # MuJoCo's RK4 at 1 ms against the adaptive solve that stops at each switch.
    np.testing.assert_allclose(traj.q, q, atol=1e-10)
    np.testing.assert_allclose(traj.qd, qd, atol=1e-9)
    assert float(hold(0.015)[0]) == ctrl[1, 0] and float(hold(0.02)[0]) == ctrl[2, 0]
    with pytest.raises(ValueError, match=r"ZeroOrderHold needs `ts` of shape \(T,\)"):
        jl.ZeroOrderHold(ts, ctrl[:-1])
    with pytest.raises(ValueError, match=r"`ctrl` must have shape \(101, nu\)"):
        jl.Observations(ts, q, qd, ctrl=ctrl[:-1])
    data = jl.Observations(ts, q, qd, ctrl=np.zeros((101, 2)))
    with pytest.raises(ValueError, match=r"has 'ctrl' of shape \(1,\)"):
        jl.fit(system, data, trainable={"body_mass"})
    data = jl.Observations(ts, q, qd, ctrl=ctrl)
    with pytest.raises(ValueError, match=r"`trainable` names 'ctrl'"):
        jl.fit(system, data, trainable={"ctrl"})


def test_spring_mass_mass_from_two_to_one():
    """mujoco.sysid's test_spring_mass_recover_mass, 1e-4, with the callback
    seeing every iterate stay positive."""
    ts = np.arange(201) * 0.01
    ctrl = (5 * np.sin(2 * np.pi * 1.5 * ts) + 3 * np.sin(2 * np.pi * 3.7 * ts))[:, None]
    ts, q, qd = _record(SPRING_MASS, ctrl, 10)
    system, _, _ = _load(SPRING_MASS)
    data = jl.Observations(ts, q, qd, ctrl=ctrl, q0=q[0], qd0=qd[0])
    guess = {**system.params, "body_mass": jnp.array([0.0, 2.0])}
    masses = []
    result = jl.fit(
        system,
        data,
        params=guess,
        trainable={"body_mass"},
        callback=lambda p: masses.append(np.asarray(p["body_mass"])),
    )
    assert abs(float(result.params["body_mass"][1]) - 1.0) < 1e-4
    assert result.unidentifiable == []  # the world's mass is no unknown
    assert len(masses) >= result.steps and all(m[1] > 0 for m in masses)


def _arm_data(seed, sigma, duration=1.0):
    ts = np.arange(int(duration * 100) + 1) * 0.01
    ctrl = _sines(ts, [5.0, 4.0, 3.0, 2.0, 1.0])
    ts, q, qd = _record(ARM5, ctrl, 10)
    rng = np.random.default_rng(seed)
    noisy = q + sigma * rng.normal(size=q.shape), qd + sigma * rng.normal(size=q.shape)
    return jl.Observations(ts, *noisy, ctrl=ctrl, q0=q[0], qd0=qd[0], sigma=sigma)


def _armatures(data):
    system, _, _ = _load(ARM5)
    guess = {**system.params, "dof_armature": jnp.full(5, 0.01)}
    return jl.fit(system, data, params=guess, trainable={"dof_armature"})


def test_arm_armatures_and_their_intervals():
    """mujoco.sysid's test_arm_recover_armature (1e-3 here from noisy data; the
    noise-free fit to 1e-6), and the true values inside the 95% intervals."""
    exact = _armatures(_arm_data(0, 1e-8))
    np.testing.assert_allclose(exact.params["dof_armature"], ARMATURE, atol=1e-6)
    inside = []
    for seed in (1, 2):
        result = _armatures(_arm_data(seed, 1e-3))
        error = np.abs(np.asarray(result.params["dof_armature"]) - ARMATURE)
        assert np.all(error < 1e-3)
        inside += list(error < 1.96 * np.asarray(result.stderr["dof_armature"]))
        assert 0.5 < result.chi2_red < 1.5
    assert np.mean(inside) >= 0.8


@pytest.mark.slow
def test_arm_interval_coverage():
    inside = []
    for seed in range(3, 23):
        result = _armatures(_arm_data(seed, 1e-3))
        error = np.abs(np.asarray(result.params["dof_armature"]) - ARMATURE)
        inside += list(error < 1.96 * np.asarray(result.stderr["dof_armature"]))
    assert 0.88 <= np.mean(inside) <= 0.99  # about 95%: not inflated


def test_a_sliding_body_determines_its_mass_alone(tmp_path):
    """Full inertial params of the spring–mass: every iterate consistent, the
    mass recovered, the nine params a slide cannot see named, the file saved."""
    ts = np.arange(101) * 0.01
    ctrl = (5 * np.sin(2 * np.pi * 1.5 * ts) + 3 * np.sin(2 * np.pi * 3.7 * ts))[:, None]
    ts, q, qd = _record(SPRING_MASS, ctrl, 10)
    system, _, _ = _load(SPRING_MASS)
    data = jl.Observations(ts, q, qd, ctrl=ctrl, q0=q[0], qd0=qd[0])
    guess = {**system.params, "body_mass": jnp.array([0.0, 1.6])}
    seen = []
    inertial = {"body_mass", "body_ipos", "body_inertia", "body_iquat"}
    with pytest.warns(UserWarning, match=r"param mc_x\[1\], .* does not change"):
        result = jl.fit(
            system, data, params=guess, trainable=inertial, callback=seen.append
        )
    assert len(seen) >= result.steps and all(p["body_mass"][1] > 0 for p in seen)
    assert abs(float(result.params["body_mass"][1]) - 1.0) < 1e-6
    named = {n for d in result.unidentifiable for n in d}
    assert named == {f"{x}[1]" for x in _STANDARD[1:]}
    assert np.isinf(result.stderr["body_ipos"][1]).all()
    assert np.isfinite(result.stderr["body_mass"][1])
    assert result.covariance.shape == (10, 10)
    path = jl.mujoco.save(SPRING_MASS, tmp_path / "fitted.xml", result.params)
    fitted = mujoco.MjModel.from_xml_path(str(path))
    np.testing.assert_allclose(fitted.body_mass, result.params["body_mass"], rtol=1e-9)
    np.testing.assert_allclose(fitted.dof_damping, [5.0])
    with pytest.raises(ValueError, match=r"`consistent` must be None, True or False"):
        jl.fit(system, data, consistent="yes")
    with pytest.raises(ValueError, match=r"True needs a loaded model's params"):
        jl.fit(jl.systems.pendulum().system, data, consistent=True)


def test_a_saved_model_reads_back_every_digit(tmp_path):
    """`jl.mujoco.save` writes float64 values whole (MuJoCo's own XML writer
    keeps 6 digits): the model read back has the saved params exactly, and
    MuJoCo's qacc equals the fitted system's."""
    system, _, _ = _load(ARM3)
    rng = np.random.default_rng(0)
    params = dict(system.params)
    for key in ("body_mass", "body_ipos", "body_inertia", "dof_armature", "dof_damping"):
        params[key] = params[key] * (1 + 0.1 * rng.uniform(size=params[key].shape))
    path = jl.mujoco.save(ARM3, tmp_path / "saved.xml", params)
    saved = mujoco.MjModel.from_xml_path(str(path))
    np.testing.assert_array_equal(saved.body_mass, params["body_mass"])
    np.testing.assert_array_equal(saved.dof_damping, params["dof_damping"])
    d = mujoco.MjData(saved)
    d.qpos[:], d.qvel[:] = [0.3, -0.5, 0.8], [1.0, 0.5, -1.0]
    mujoco.mj_forward(saved, d)
    fitted = eqx.tree_at(lambda s: s.params, system, params)
    qdd = jl.accelerations(fitted, d.qpos.copy(), d.qvel.copy(), 0.0)
    np.testing.assert_allclose(d.qacc, qdd, rtol=1e-12)


_STANDARD = ("m", "mc_x", "mc_y", "mc_z", "I_xx", "I_yy", "I_zz", "I_xy", "I_xz", "I_yz")


@pytest.mark.slow
def test_full_inertial_params_stay_consistent_from_several_experiments(tmp_path):
    system, _, _ = _load(ARM3)
    data = []
    for seed in range(3):
        ts = np.arange(51) * 0.01
        ctrl = _sines(ts, [2.0, 1.5, 0.5], seed)
        qpos = np.random.default_rng(seed).uniform(-1, 1, 3)
        ts, q, qd = _record(ARM3, ctrl, 10, qpos)
        data.append(jl.Observations(ts, q, qd, ctrl=ctrl, q0=q[0], qd0=qd[0]))
    guess = dict(system.params)
    guess["body_mass"] = guess["body_mass"] * 1.3
    guess["body_inertia"] = guess["body_inertia"] * 0.7
    seen = []
    inertial = {"body_mass", "body_ipos", "body_inertia", "body_iquat"}
    result = jl.fit(system, data, params=guess, trainable=inertial, callback=seen.append)
    assert len(seen) >= result.steps
    for p in seen:  # every iterate: m > 0, principal moments > 0, triangle
        moments = np.sort(np.asarray(p["body_inertia"])[1:], axis=1)
        assert np.all(np.asarray(p["body_mass"])[1:] > 0) and np.all(moments > 0)
        assert np.all(moments[:, 0] + moments[:, 1] >= moments[:, 2])
    # The motion is reproduced; what it cannot tell is named, with an inf error.
    assert result.chi2_red is None and result.rms < 1e-8
    assert result.unidentifiable
    named = {n for d in result.unidentifiable for n in d}
    assert "m[1]" in named or "mc_z[1]" in named  # link 1 turns about z only
    # The model file written back has the fitted dynamics.
    path = jl.mujoco.save(ARM3, tmp_path / "fitted.xml", result.params)
    fitted = mujoco.MjModel.from_xml_path(str(path))
    np.testing.assert_allclose(fitted.body_mass, result.params["body_mass"], rtol=1e-6)
    d = mujoco.MjData(fitted)
    d.qpos[:], d.qvel[:] = [0.3, -0.5, 0.8], [1.0, 0.5, -1.0]
    mujoco.mj_forward(fitted, d)
    qdd = jl.accelerations(result.system, d.qpos.copy(), d.qvel.copy(), 0.0)
    np.testing.assert_allclose(d.qacc, qdd, rtol=1e-6, atol=1e-9)


def test_params_that_enter_as_a_product_are_named_under_noise():
    """Probe 5 of issue 56: with noise the normal matrix is not exactly
    singular, yet the data do not determine m and l apart."""
    lagrangian = lambda q, qd, t, p: (  # noqa: E731
        0.5 * qd[0] ** 2 + p["m"] * p["l"] * 9.81 * jnp.cos(q[0])
    )
    true = jl.LagrangianSystem(lagrangian, {"m": 2.0, "l": 0.5})
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = jl.simulate(true, jnp.array([1.0]), jnp.array([0.0]), t1=2.0, saveat=ts)
    for seed in range(3):
        noise = 1e-3 * np.random.default_rng(seed).normal(size=traj.q.shape)
        data = jl.Observations(ts, traj.q + noise, sigma=1e-3)
        with pytest.warns(UserWarning, match=r"do not determine the combination"):
            result = jl.fit(true, data, params={"m": 1.5, "l": 0.7})
        assert np.isinf(float(result.stderr["m"])) and np.isinf(float(result.stderr["l"]))


def test_a_sigma_too_large_is_named():
    """Probe 9 of issue 56: sigma = 1e300 underflows 1/sigma²."""
    ts = np.linspace(0.0, 1.0, 5)
    with pytest.raises(ValueError, match=r"`sigma` = 1e\+300 is so large that 1/sigma²"):
        jl.Observations(ts, np.zeros((5, 1)), sigma=1e300)
