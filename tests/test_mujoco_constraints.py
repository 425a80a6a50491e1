"""Joint limits and equality constraints of loaded MuJoCo models, held exactly;
the loader's inputs (bytes, assets, dm_control's wrapper, strict) and its refusal
of impossible masses and inertias; every dm_control suite model with joints."""

import warnings
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxlagrange as jl


SUITE = Path(__file__).parent / "data" / "dm_control_suite"
# Their first q̈ compiles for a minute or more on a loaded 2-core machine.
SLOW = {"cheetah", "fish", "hopper", "humanoid", "humanoid_CMU", "manipulator"}
SLOW |= {"quadruped", "stacker", "walker"}

# A rotor about z with a spring pulling it towards springref = 1, past its upper
# limit 0.3: θ(t) = 1 − 1.5 cos(ω t) from θ = −0.5 at rest, ω² = k / I.
ROTOR = """
<mujoco model="rotor">
  <compiler angle="radian"/>
  <option gravity="0 0 0"/>
  <worldbody>
    <body name="rotor">
      <joint name="hinge" type="hinge" axis="0 0 1" limited="true" range="-1 0.3"
             stiffness="{k}" springref="1"/>
      <inertial pos="0 0 0" mass="1" diaginertia="0.1 0.1 {inertia}"/>
    </body>
  </worldbody>
</mujoco>
"""

# A block on a limited slide along x, pushed by a motor into its upper limit.
SLIDER = """
<mujoco model="slider">
  <option gravity="0 0 -9.81"/>
  <worldbody>
    <body name="block">
      <joint name="rail" type="slide" axis="1 0 0" limited="true" range="-0.5 0.2"/>
      <geom type="box" size="0.1 0.1 0.1" mass="2"/>
    </body>
  </worldbody>
  <actuator><motor joint="rail" gear="1"/></actuator>
</mujoco>
"""

# A planar four-bar: crank, coupler and rocker on hinges about y, the rocker's tip
# connected to a fixed point on the ground (one redundant out-of-plane row).
FOUR_BAR = """
<mujoco model="four-bar">
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="crank">
      <joint name="a" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.02" mass="0.3"/>
      <body name="coupler" pos="0.4 0 0">
        <joint name="b" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.6 0 0.5" size="0.02" mass="0.4"/>
        <body name="rocker" pos="0.6 0 0.5">
          <joint name="c" type="hinge" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.02" mass="0.3"/>
        </body>
      </body>
    </body>
  </worldbody>
  <equality>
    <connect name="loop" body1="rocker" body2="world" anchor="0 0 -0.5"/>
  </equality>
</mujoco>
"""

# A box welded to a pendulum (both with their own joints), and two hinges coupled
# by a polynomial.
WELD_JOINT = """
<mujoco model="weld and joint">
  <compiler angle="radian"/>
  <default><geom contype="0" conaffinity="0"/><equality solref="{tau} 1"/></default>
  <worldbody>
    <body name="arm" pos="0 0 1">
      <joint name="swing" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03" mass="0.5"/>
    </body>
    <body name="box" pos="0.1 0 0.45" euler="0 0.3 0">
      <freejoint name="loose"/>
      <geom type="box" size="0.05 0.04 0.03" mass="0.2"/>
    </body>
    <body name="p" pos="1 0 1">
      <joint name="j1" type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0.1 -0.4" size="0.03"/>
    </body>
    <body name="r" pos="2 0 1">
      <joint name="j2" type="hinge" axis="0 1 0" ref="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 -0.4" size="0.03"/>
    </body>
  </worldbody>
  <equality>
    <weld name="glue" body1="box" body2="arm"/>
    <joint name="gear" joint1="j1" joint2="j2" polycoef="0 0.5 0.3 0 0"/>
  </equality>
</mujoco>
"""


def _load(xml, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing of these models is left out
        return jl.mujoco.load(xml, **kwargs)


def test_a_rotor_stops_on_its_limit_or_bounces_with_restitution():
    k, inertia = 2.0, 0.1
    ready = _load(ROTOR.format(k=k, inertia=inertia))
    assert ready.system.params["restitution"] == 0.0
    omega = np.sqrt(k / inertia)
    hit = np.arccos(0.7 / 1.5) / omega  # of the free swing
    speed = 1.5 * omega * np.sin(omega * (hit - 1e-7))  # just before it
    ts = jnp.array([hit - 1e-7, hit + 1e-7, 3.0])
    simulate = jl.simulate  # one compile: the same system but for a param's value
    plastic = None
    for e in (0.0, 0.5):
        system = eqx.tree_at(
            lambda s: s.params["restitution"], ready.system, jnp.asarray(e)
        )
        t1 = 3.0 if e == 0 else hit + 2e-7  # one bounce
        traj = simulate(
            system,
            jnp.array([-0.5]),
            ready.qd0,
            t1=t1,
            saveat=ts.at[2].set(t1),
            rtol=1e-12,
            atol=1e-12,
        )
        assert traj.result == jl.RESULTS.successful
        assert abs(float(traj.event_ts[0]) - hit) < 1e-9
        assert int(traj.event_kind[0]) == jl.EVENT_IMPACT
        assert int(traj.event_constraint[0]) == 1  # the upper row of `hinge`
        np.testing.assert_allclose(traj.qd[0], [speed], rtol=1e-8)
        # Thrown back at −e times the speed (the spring changes it by ~1e-7 ω²).
        np.testing.assert_allclose(traj.qd[1], [-e * speed], atol=1e-5)
        plastic = traj if e == 0 else plastic
    # Plastic: at rest on the limit, which holds the spring's torque k (1 − 0.3).
    np.testing.assert_allclose(plastic.q[-1], [0.3], atol=1e-10)
    np.testing.assert_allclose(plastic.qd[-1], [0.0], atol=1e-10)
    np.testing.assert_allclose(plastic.multipliers[-1], [0.0, k * 0.7], atol=1e-8)


def test_a_limited_slide_holds_against_a_motor_and_mujoco_approaches_it():
    ready = _load(SLIDER)
    system = eqx.tree_at(lambda s: s.params["ctrl"], ready.system, jnp.array([3.0]))
    traj = jl.simulate(
        system, jnp.array([0.0]), ready.qd0, t1=2.0, rtol=1e-10, atol=1e-10
    )
    assert traj.result == jl.RESULTS.successful
    # x(t) = 3/4 t² reaches 0.2 at t = √(0.8/3), then rests on the limit.
    np.testing.assert_allclose(traj.event_ts[0], np.sqrt(0.8 / 3), rtol=1e-8)
    np.testing.assert_allclose(traj.q[-1], [0.2], atol=1e-10)
    np.testing.assert_allclose(traj.multipliers[-1], [0.0, 3.0], atol=1e-8)
    # At rest on the limit our q̈ = 0 and λ = 3 N; MuJoCo's soft limit lets the
    # block accelerate at (1 − d) times the free 1.5 m/s², d the impedance of
    # solimp = (d, d, w): its qacc approaches ours monotonically as d → 1.
    qacc, force = [], []
    for d in (0.9, 0.99, 0.999, 0.9999):
        xml = SLIDER.replace('0.2"/>', f'0.2" solimplimit="{d} {d} 0.001"/>')
        m = mujoco.MjModel.from_xml_string(xml)
        data = mujoco.MjData(m)
        data.qpos[:], data.ctrl[:] = 0.2 + 1e-12, 3.0  # (just past: active)
        mujoco.mj_forward(m, data)
        qacc.append(abs(float(data.qacc[0])))
        force.append(float(data.efc_force[0]))
        np.testing.assert_allclose(qacc[-1], (1 - d) * 1.5, rtol=0, atol=1e-8)
    assert all(np.diff(qacc) < 0) and qacc[-1] < 2e-4
    assert all(np.diff(np.abs(np.array(force) - 3.0)) < 0)  # λ → 3 N


def test_limits_and_equalities_are_disabled_by_flags():
    for flag in ("limit", "constraint"):
        xml = SLIDER.replace('-9.81"/>', f'-9.81"><flag {flag}="disable"/></option>')
        ready = _load(xml)
        assert ready.system.unilateral is None
        assert "restitution" not in ready.system.params
    flag = '<option><flag equality="disable"/></option><worldbody>'
    xml = FOUR_BAR.replace("<worldbody>", flag)
    assert _load(xml).system.holonomic is None


def test_a_four_bar_closed_by_connect_holds_its_loop():
    system, q0, qd0 = _load(FOUR_BAR)
    assert system.holonomic(q0, 0.0, system.params).shape == (3,)
    q0, qd0 = jl.project_initial_state(system, q0, jnp.array([1.0, 0.0, 0.0]))
    traj = jl.simulate(system, q0, qd0, t1=5.0, rtol=1e-10, atol=1e-10)
    assert traj.result == jl.RESULTS.successful
    residual = jax.vmap(lambda q: system.holonomic(q, 0.0, system.params))(traj.q)
    assert np.max(np.abs(residual)) <= 1e-8


def test_a_weld_and_a_joint_polynomial_hold_and_mujoco_approaches_them():
    ready = _load(WELD_JOINT.format(tau=0.02))
    system = ready.system
    # 1 quaternion norm, 6 weld rows, 1 joint row; the model's pose satisfies them.
    g = system.holonomic(ready.q0, 0.0, system.params)
    assert g.shape == (8,)
    assert np.max(np.abs(g)) < 1e-12
    q0 = ready.q0.at[0].set(0.4)  # swing, carrying the box with it
    q0, qd0 = jl.project_initial_state(system, q0, ready.qd0.at[-1].set(1.0))
    ts = jnp.linspace(0.0, 5.0, 11)
    traj = jl.simulate(system, q0, qd0, t1=5.0, saveat=ts, rtol=1e-11, atol=1e-11)
    assert traj.result == jl.RESULTS.successful
    residual = jax.vmap(lambda q: system.holonomic(q, 0.0, system.params))(traj.q)
    assert np.max(np.abs(residual)) <= 1e-8
    # The box rides on the arm: MuJoCo's own weld error (its eq_data) vanishes.
    m = mujoco.MjModel.from_xml_string(WELD_JOINT.format(tau=0.02))
    d = mujoco.MjData(m)
    d.qpos[:] = traj.q[-1]
    mujoco.mj_forward(m, d)
    arm, box = m.body("arm").id, m.body("box").id
    anchor = d.xpos[arm] + d.xmat[arm].reshape(3, 3) @ m.eq_data[0, :3]
    relpos = d.xpos[box] + d.xmat[box].reshape(3, 3) @ m.eq_data[0, 3:6]
    np.testing.assert_allclose(relpos, anchor, atol=1e-8)
    # j1 − 0 = 0.5 (j2 − 0.2) + 0.3 (j2 − 0.2)² along the whole trajectory.
    j1, j2 = traj.q[:, 8], traj.q[:, 9]
    np.testing.assert_allclose(j1, 0.5 * (j2 - 0.2) + 0.3 * (j2 - 0.2) ** 2, atol=1e-8)
    assert np.ptp(j2) > 0.1  # it did move
    # MuJoCo's soft equalities are spring-dampers of time constant τ (solref):
    # its trajectory's distance from the exact one at t = 0.5 falls as τ².
    errors = []
    for tau in (0.02, 0.01):
        m = mujoco.MjModel.from_xml_string(WELD_JOINT.format(tau=tau))
        m.opt.timestep, m.opt.integrator = 1e-4, mujoco.mjtIntegrator.mjINT_RK4
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:] = ready.to_mujoco(q0, qd0)
        for _ in range(5000):
            mujoco.mj_step(m, d)
        errors.append(np.max(np.abs(d.qpos - traj.q[1])))
    assert 2.5 < errors[0] / errors[1] < 6  # ≈ 4: second order in τ


HANGING = """
<mujoco model="hanging box">
  <worldbody>
    <body name="box" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.2" mass="1" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <equality><connect body1="box" body2="world" anchor="0 0 0.3" {solimp}/></equality>
</mujoco>
"""


def test_at_rest_on_a_connect_mujocos_qacc_approaches_ours_as_solimp_nears_1():
    # A box hangs at rest from a point 0.3 above its centre: our q̈ = 0 and the
    # connect holds its weight, λ = m g. MuJoCo's soft connect of impedance d
    # (solimp = (d, d, w)) lets it fall at (1 − d) g, its force (1 − d) short.
    system, q0, qd0 = _load(HANGING.format(solimp=""))
    np.testing.assert_allclose(jl.accelerations(system, q0, qd0, 0.0), 0.0, atol=1e-14)
    held = jl.multipliers(system, q0, qd0, 0.0)[1:]  # after the quaternion's row
    np.testing.assert_allclose(held, [0.0, 0.0, 9.81], atol=1e-12)
    qacc = []
    for d in (0.9, 0.99, 0.999, 0.9999):
        xml = HANGING.format(solimp=f'solimp="{d} {d} 0.001"')
        m = mujoco.MjModel.from_xml_string(xml)
        data = mujoco.MjData(m)
        mujoco.mj_forward(m, data)
        qacc.append(np.max(np.abs(data.qacc)))
        np.testing.assert_allclose(qacc[-1], (1 - d) * 9.81, rtol=1e-6)
        np.testing.assert_allclose(data.efc_force, d * held, atol=1e-9)
    assert all(np.diff(qacc) < 0)


def test_hopper_default_pose_is_moved_onto_its_knee_limit():
    moved = r"default pose moved onto its joint limits: joint 'knee' from 0 to 0\.08727"
    with pytest.warns(UserWarning, match=moved):
        ready = jl.mujoco.load(SUITE / "hopper.xml")
    knee = ready.coordinates.index("knee")
    assert float(ready.q0[knee]) == pytest.approx(np.radians(5), abs=1e-12)


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(p.stem, marks=[pytest.mark.slow] * (p.stem in SLOW))
        for p in sorted(SUITE.glob("*.xml"))
        if p.stem != "lqr"  # no joints
    ],
)
def test_every_suite_model_with_joints_loads(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its compiler warnings to the cwd
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        system, q0, qd0 = jl.mujoco.load(SUITE / f"{name}.xml")
    qdd = jax.jit(jl.accelerations)(system, q0, qd0, 0.0)
    assert np.all(np.isfinite(qdd))


def test_sources_bytes_bom_assets_and_wrapper(tmp_path):
    mesh_free = SLIDER.replace("<worldbody>", '<include file="extra.xml"/><worldbody>')
    extra = b'<mujoco><option timestep="0.005"/></mujoco>'
    ready = _load(mesh_free.encode(), assets={"extra.xml": extra})
    assert ready.coordinates == ("rail",)
    _load("\ufeff" + SLIDER)
    _load(b"\xef\xbb\xbf" + SLIDER.encode())

    class Wrapper:  # dm_control's physics.model: the MjModel in `.ptr`
        ptr = mujoco.MjModel.from_xml_string(SLIDER)

    assert _load(Wrapper()).coordinates == ("rail",)


def test_strict_raises_what_is_not_imported():
    xml = SLIDER.replace('<option gravity="0 0 -9.81"', '<option density="1.2"')
    fluid = r"'slider': not imported .*: fluid forces .*\(strict=True\)"
    with pytest.raises(ValueError, match=fluid):
        jl.mujoco.load(xml, strict=True)


def test_errors():
    malformed = "<mujoco><worldbody><body></worldbody></mujoco>"
    with pytest.raises(ValueError, match="load the MJCF string:\nXML parse error"):
        jl.mujoco.load(malformed)
    with pytest.raises(ValueError, match="`source` must be a path .* got int"):
        jl.mujoco.load(3)
    block = r"\[1\] \(body 'block'\) is"
    for params, match in [
        ({"body_mass": [0.0, -0.4]}, "a mass cannot be negative: body_mass" + block),
        ({"body_mass": [0.0, 0.0]}, "needs a positive mass .*: body_mass" + block),
        (
            {"body_inertia": [[0, 0, 0], [0.1, -0.1, 0.1]]},
            "inertia cannot be negative: body_inertia" + block + r" \[0.1, -0.1, 0",
        ),
        (
            {"body_inertia": [[0, 0, 0], [0.1, 0.1, 0.3]]},
            r"triangle inequality A \+ B >= C: body_inertia" + block,
        ),
    ]:
        with pytest.raises(ValueError, match=match):
            jl.mujoco.load(SLIDER, params=params)
    with pytest.raises(ValueError, match="`restitution` must lie in"):
        jl.mujoco.load(SLIDER, params={"restitution": 1.5})
    system, q0, qd0 = jl.mujoco.load(SLIDER)
    below = r"The deepest row: the upper limit of joint 'rail', h = -0\.1"
    with pytest.raises(ValueError, match=r"constraint surface\. " + below):
        jl.simulate(system, jnp.array([0.3]), qd0, t1=1.0)


def test_a_sweep_over_an_impossible_mass_is_refused(tmp_path, capsys):
    from jaxlagrange import _cli

    (tmp_path / "slider.xml").write_text(SLIDER)
    config = (
        '[system]\nmujoco = "slider.xml"\n[initial]\nq = [0.0]\n[simulate]\nt1 = 0.5\n'
        '[sweep]\n[sweep.axes]\n"body_mass[1]" = { min = -0.4, max = 1, num = 2 }\n'
    )
    (tmp_path / "sweep.toml").write_text(config)
    args = ["sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "out")]
    assert _cli.main([*args, "--quiet"]) != 0
    assert (
        "body_mass[1]: min = -0.4 is outside the valid values: MuJoCo model 'slider': "
        "a mass cannot be negative: body_mass[1] (body 'block') is -0.4"
    ) in capsys.readouterr().err


ARM = """<mujoco model="arm"><worldbody>
  <body name="upper" pos="0 0 1"><joint name="shoulder" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03" mass="1"/>
    <body name="lower" pos="0.5 0 0"><joint name="elbow" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03" mass="0.5"/>
    </body></body></worldbody></mujoco>"""


@pytest.mark.parametrize(
    "key, value, match",
    [
        ("body_mass", 0.0, r"needs a positive mass .*body_mass\[2\] \(body 'lower'\)"),
        ("body_mass", -0.5, r"cannot be negative: body_mass\[2\] \(body 'lower'\)"),
        ("body_inertia", [1e-3, 1e-3, 1.0], r"A \+ B >= C: body_inertia\[2\]"),
    ],
)
def test_a_batch_with_an_impossible_member_is_refused(key, value, match):
    # Issue 53: these members ran (the zero mass and A + B < C successfully, on
    # wrong physics), the negative mass blamed on the Lagrangian.
    ready = _load(ARM)
    params = {key: jnp.stack([ready.system.params[key]] * 3).at[1, 2].set(value)}
    member = r"^Member 1 of the batch: MuJoCo model 'arm': .*"
    with pytest.raises(ValueError, match=member + match):
        jl.simulate_batch(*ready, params=params, t1=0.1, throw=False)
    # One system with such params: refused by `simulate` where they are known.
    system = eqx.tree_at(lambda s: s.params[key], ready.system, params[key][1])
    with pytest.raises(ValueError, match=r"^MuJoCo model 'arm': .*" + match):
        jl.simulate(system, ready.q0, ready.qd0, t1=0.1)


def test_an_impossible_member_under_a_users_vmap_is_an_error():
    ready = _load(ARM)

    def final(mass):
        system = eqx.tree_at(lambda s: s.params["body_mass"], ready.system, mass)
        return jl.simulate(system, ready.q0, ready.qd0, t1=0.01).q[-1]

    masses = jnp.stack([ready.system.params["body_mass"]] * 2)
    assert np.all(np.isfinite(jax.vmap(final)(masses)))
    with pytest.raises(Exception, match=r"a body that moves needs a positive mass"):
        jax.vmap(final)(masses.at[1, 2].set(0.0))


def test_an_impossible_member_in_a_batch_under_a_users_jit_is_an_error():
    ready = _load(ARM)

    @jax.jit
    def final(masses):
        batch = jl.simulate_batch(*ready, params={"body_mass": masses}, t1=0.01)
        return batch.q[:, -1]

    masses = jnp.stack([ready.system.params["body_mass"]] * 2)
    assert np.all(np.isfinite(final(masses)))
    with pytest.raises(Exception, match=r"cannot be negative"):
        final(masses.at[1, 2].set(-0.5))


def test_limit_rows_equal_mujoco_distances():
    """At a pose past every limit, the rows below zero are MuJoCo's efc_pos of
    its limit constraints (a ball joint's: its range minus the rotation angle)."""
    xml = """
<mujoco model="limits">
  <compiler angle="radian"/>
  <option><flag contact="disable"/></option>
  <worldbody>
    <body name="a">
      <joint name="h" type="hinge" axis="0 1 0" limited="true" range="-0.5 0.4"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.03"/>
      <body name="b" pos="0 0 -0.5">
        <joint name="s" type="slide" axis="1 0 0" limited="true" range="-0.1 0.2"
               ref="0.05"/>
        <joint name="ball" type="ball" limited="true" range="0 0.6"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.03"/>
      </body>
    </body>
  </worldbody>
</mujoco>"""
    ready = _load(xml)
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    axis = np.array([0.3, -0.5, 0.8]) / np.linalg.norm([0.3, -0.5, 0.8])
    quat = np.concatenate([[np.cos(0.45)], np.sin(0.45) * axis])  # turned 0.9
    for qpos in ([-0.7, 0.3, *quat], [0.6, -0.2, *-quat]):
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        system = ready.system
        h = np.asarray(system.unilateral(jnp.asarray(qpos), 0.0, system.params))
        np.testing.assert_allclose(np.sort(h[h < 0]), np.sort(d.efc_pos), atol=1e-12)
        assert d.efc_pos.size == 3


def test_equality_rows_equal_mujoco_residuals():
    """At random poses, the connect (body and site), joint and weld position rows
    are MuJoCo's efc_pos; the weld's orientation rows w·v of E's quaternion
    (w, v) are its v (scaled by w: the same zeros)."""
    xml = """
<mujoco model="equalities">
  <compiler angle="radian"/>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <body name="a" pos="0 0 1">
      <joint name="ha" type="hinge" axis="0 1 0" ref="0.2"/>
      <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
      <site name="sa" pos="0.5 0 0" euler="0.3 -0.2 0.1"/>
      <body name="b" pos="0.5 0 0">
        <joint name="hb" type="hinge" axis="0 0.6 0.8"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
      </body>
    </body>
    <body name="c" pos="1 0.2 1" euler="0.1 0 0.4">
      <freejoint name="free"/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="sc" pos="0.05 0 0.02" euler="0.1 0.2 0.3"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="b" body2="c" anchor="0.1 0 0.05"/>
    <connect site1="sa" site2="sc"/>
    <weld body1="c" body2="a" anchor="0.1 0.2 0"/>
    <weld site1="sc" site2="sa"/>
    <joint joint1="hb" joint2="ha" polycoef="0.1 0.5 0.3 0.2 0.1"/>
  </equality>
</mujoco>"""
    ready = _load(xml)
    system = ready.system
    m = mujoco.MjModel.from_xml_string(xml)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(0)
    for _ in range(2):
        qpos = m.qpos0 + 0.3 * rng.normal(size=m.nq)
        qpos[5:9] /= np.linalg.norm(qpos[5:9])
        d.qpos[:] = qpos
        mujoco.mj_forward(m, d)
        theirs = d.efc_pos[d.efc_type == mujoco.mjtConstraint.mjCNSTR_EQUALITY]
        ours = np.asarray(system.holonomic(jnp.asarray(qpos), 0.0, system.params))[1:]
        assert ours.shape == theirs.shape == (3 + 3 + 6 + 6 + 1,)
        exact = np.r_[0:9, 12:15, 18]
        np.testing.assert_allclose(ours[exact], theirs[exact], atol=1e-12)
        for rows in (slice(9, 12), slice(15, 18)):
            v = theirs[rows]
            w = np.sqrt(1 - v @ v)
            np.testing.assert_allclose(np.abs(ours[rows]), w * np.abs(v), atol=1e-12)
