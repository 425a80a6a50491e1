"""Tendons and actuators of `jl.mujoco.load` against MuJoCo itself: q̈ equals
qacc (contacts, limits and equalities off), the tendon lengths `ten_length`, the
spring, damper and actuator forces `qfrc_spring`, `qfrc_damper` and
`qfrc_actuator` term by term; tendon equalities and limits hold exactly."""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest
from test_mujoco import SUITE, _compare, _model, _random_state

import jaxlagrange as jl


D = mujoco.mjtDisableBit

# Hinges and slides with every tendon and actuator kind: a fixed tendon with a
# dead band, a spatial one through a world site and two sites of one body, one
# with a pulley; stiffness, damping, armature; motor, position (kp, kv), velocity
# and affine general actuators on joints and tendons, clipped ctrl and forces.
TENDONS = """
<mujoco model="tendons">
  <option gravity="0.2 -0.1 -9.81">{flags}</option>
  <worldbody>
    <site name="anchor" pos="0.3 0.2 0.5"/>
    <site name="hook" pos="-0.2 0 0.4"/>
    <body name="a" pos="0 0 0.1" euler="10 20 0">
      <joint name="h1" type="hinge" axis="0 1 0.2" pos="0 0 0.1" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 -0.3" size="0.04"/>
      <site name="a1" pos="0.15 0.02 -0.15"/>
      <site name="a2" pos="0.3 0 -0.3"/>
      <body name="b" pos="0.3 0 -0.3">
        <joint name="s1" type="slide" axis="1 0.3 0" damping="0.2" ref="0.05"/>
        <joint name="h2" type="hinge" axis="0 1 0" pos="0.02 0 0"/>
        <geom type="box" size="0.05 0.1 0.05" pos="0.05 0 -0.05"/>
        <site name="b1" pos="0.1 0.05 -0.1"/>
      </body>
    </body>
    <body name="c" pos="0.5 0 0">
      <joint name="s2" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.05"/>
      <site name="c1" pos="0 0.1 0"/>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fixed" stiffness="3" springlength="0.1 0.3" damping="0.4" armature="0.05">
      <joint joint="h1" coef="0.5"/><joint joint="s1" coef="-1.2"/>
      <joint joint="h2" coef="0.3"/>
    </fixed>
    <spatial name="rope" stiffness="5" damping="0.3" armature="0.02" springlength="0.4">
      <site site="anchor"/><site site="a1"/><site site="a2"/><site site="b1"/>
    </spatial>
    <spatial name="pulley" stiffness="2" damping="0.1">
      <site site="hook"/><site site="a1"/>
      <pulley divisor="2"/>
      <site site="c1"/><site site="b1"/>
    </spatial>
  </tendon>
  <actuator>
    <motor joint="h1" gear="2" ctrlrange="-1 1"/>
    <position joint="s1" kp="20" kv="2" ctrlrange="-0.5 0.5"/>
    <velocity joint="h2" kv="3" forcerange="-0.2 0.2"/>
    <general tendon="rope" gaintype="affine" gainprm="2 0.5 -0.3" biastype="affine"
             biasprm="0.1 -4 -0.5" gear="1.5" ctrlrange="-2 2"/>
    <motor tendon="pulley" gear="-0.8" forcerange="-0.5 0.3"/>
    <motor tendon="fixed" gear="1.3"/>
    <general joint="s2" gaintype="affine" gainprm="1 2 0.5" gear="0.7"/>
  </actuator>
</mujoco>
"""

# A spatial tendon from the world through a ball-jointed body to a free body
# (quaternion coordinates), driven by an affine actuator. No armature: MuJoCo
# keeps of a tendon's a·JᵀJ only the entries its mass matrix's tree sparsity
# holds (a dof and its ancestors), while ½ a L̇² couples the two trees here.
CORD = """
<mujoco model="cord">
  <option>{flags}</option>
  <worldbody>
    <site name="top" pos="0.2 0.1 0.3"/>
    <body name="arm">
      <joint name="ball" type="ball" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.1 0 -0.4" size="0.04"/>
      <site name="tip" pos="0.1 0 -0.4"/>
    </body>
    <body name="box" pos="1 0 0">
      <freejoint/>
      <geom type="box" size="0.1 0.05 0.02"/>
      <site name="corner" pos="0.1 0.05 0.02"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="cord" stiffness="10" damping="0.5" springlength="0.2">
      <site site="top"/><site site="tip"/><site site="corner"/>
    </spatial>
  </tendon>
  <actuator>
    <general tendon="cord" gaintype="affine" gainprm="1 0.5 0.2" biastype="affine"
             biasprm="0 -1 -0.3" ctrlrange="-1 1"/>
  </actuator>
</mujoco>
"""


def _with_ctrl(system, ctrl):
    return eqx.tree_at(lambda s: s.params["ctrl"], system, jnp.asarray(ctrl))


@pytest.mark.parametrize("xml", [TENDONS, CORD], ids=["tendons", "cord"])
def test_accelerations_equal_qacc_with_clipped_controls(xml):
    # Controls up to 3× their ranges: MuJoCo clips ctrl, then the force.
    assert _compare(_model(xml), ctrl_scale=3.0) < 1e-9


def test_forces_lengths_and_mass_matrix_term_by_term():
    m = _model(TENDONS, gravity=1)
    ready = jl.mujoco.load(m)
    system = ready.system
    d = mujoco.MjData(m)
    rng = np.random.default_rng(5)
    clipped = np.zeros(2, int)  # states with clipped controls, with clipped forces
    spring = jax.jit(jax.grad(system.lagrangian))
    damper = jax.jit(jax.grad(system.dissipation, argnums=1))
    mass_matrix = jax.jit(jl.mass_matrix)
    for _ in range(3):
        d.qpos[:], d.qvel[:] = _random_state(m, ready.layout, rng)
        d.ctrl[:] = rng.uniform(-3, 3, size=m.nu)
        mujoco.mj_forward(m, d)
        q, qd = jnp.asarray(d.qpos), jnp.asarray(d.qvel)  # hinges and slides
        params = {**system.params, "ctrl": jnp.asarray(d.ctrl)}
        np.testing.assert_allclose(ready.tendon_lengths(q), d.ten_length, atol=1e-14)
        np.testing.assert_allclose(
            ready.tendon_velocities(q, qd), d.ten_velocity, atol=1e-14
        )
        # Springs: ∂L/∂q at rest (no gravity); dampers: −∂D/∂q̇; actuators: the force.
        at_rest = spring(q, jnp.zeros_like(qd), 0.0, params)
        np.testing.assert_allclose(at_rest, d.qfrc_spring, rtol=1e-12, atol=1e-12)
        damping = -damper(q, qd, 0.0, params)
        np.testing.assert_allclose(damping, d.qfrc_damper, rtol=1e-12, atol=1e-12)
        actuator = system.force(q, qd, 0.0, params)
        np.testing.assert_allclose(actuator, d.qfrc_actuator, rtol=1e-12, atol=1e-12)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)  # with the tendons' armature a JᵀJ
        M = mass_matrix(system, q, qd, 0.0)
        np.testing.assert_allclose(M, full, rtol=1e-12, atol=1e-12)
        low, high = m.actuator_ctrlrange[m.actuator_ctrllimited].T
        ctrl = d.ctrl[m.actuator_ctrllimited]
        clipped[0] += np.any((ctrl < low) | (ctrl > high))
        force = d.actuator_force[m.actuator_forcelimited]  # clipped by MuJoCo
        clipped[1] += np.any(np.isin(force, m.actuator_forcerange[m.actuator_forcelimited]))
    assert np.all(clipped > 0)


def test_tendon_params_and_gradients():
    m = _model(TENDONS)
    m.opt.disableflags |= D.mjDSBL_CLAMPCTRL  # ctrl outside its range acts whole
    ready = jl.mujoco.load(m, params={"tendon_stiffness": [1.0, 2.0, 4.0]})
    assert ready.system.params["tendon_lengthspring"].shape == (3, 2)
    assert ready.system.params["actuator_gainprm"].shape == (7, 3)
    m.tendon_stiffness[:] = [1.0, 2.0, 4.0]
    assert _compare(m, ready, states=1, ctrl_scale=3.0) < 1e-9
    q, qd = ready.q0 + 0.3, jnp.full(4, 0.5)
    system = _with_ctrl(ready.system, [0.5, 0.1, 0.3, -1.0, 0.2, 0.4, -0.3])

    @jax.jit
    def qdd(stiffness, bias):
        params = {**system.params, "tendon_stiffness": stiffness}
        params["actuator_biasprm"] = bias
        moved = eqx.tree_at(lambda s: s.params, system, params)
        return jnp.sum(jl.accelerations(moved, q, qd, 0.0) ** 2)

    args = [system.params["tendon_stiffness"], system.params["actuator_biasprm"]]
    grads = jax.jit(jax.grad(qdd, argnums=(0, 1)))(*args)
    h = 1e-6
    for which, index in ((0, (1,)), (1, (3, 1))):
        step = [jnp.zeros_like(a) for a in args]
        step[which] = step[which].at[index].set(h)
        up = qdd(*(a + s for a, s in zip(args, step, strict=True)))
        down = qdd(*(a - s for a, s in zip(args, step, strict=True)))
        np.testing.assert_allclose(grads[which][index], (up - down) / (2 * h), rtol=1e-6)


COUPLED = """
<mujoco model="coupled">
  <option>{flags}</option>
  <worldbody>
    <site name="top" pos="0 0 0.5"/>
    <body name="a">
      <joint name="a" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
      <site name="a" pos="0.4 0 0"/>
    </body>
    <body name="b" pos="1 0 0">
      <joint name="b" type="slide" axis="1 0 0"/>
      <joint name="c" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.03"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="rope"><site site="top"/><site site="a"/></spatial>
    <fixed name="pair"><joint joint="b" coef="1"/><joint joint="c" coef="0.5"/></fixed>
  </tendon>
  <equality><tendon tendon1="rope" tendon2="pair" polycoef="0.01 0.8 0.3 0 0"/></equality>
</mujoco>
"""


def test_tendon_equality_holds_exactly():
    m = _model(COUPLED)
    ready = jl.mujoco.load(m)
    system, q0, qd0 = ready
    assert system.holonomic is not None and system.unilateral is None
    # On the constraint (L_rope − L0 = 0.01 + 0.8x + 0.3x², x = L_pair − L0):
    # slide b to x, and move it at the rate that follows the rope's.
    np.testing.assert_allclose(ready.tendon_lengths(q0), m.tendon_length0)
    x = (-0.8 + np.sqrt(0.64 - 4 * 0.3 * 0.01)) / 0.6  # −0.01 = 0.8x + 0.3x²
    start = q0.at[1].set(x)
    rope_rate = ready.tendon_velocities(start, jnp.array([1.0, 0.0, 0.0]))[0]
    qd = jnp.array([1.0, rope_rate / (0.8 + 0.6 * x), 0.0])
    traj = jl.simulate(system, start, qd, t1=5.0, saveat=jnp.linspace(0, 5.0, 51))
    assert traj.result == jl.RESULTS.successful
    shift = ready.tendon_lengths(traj.q) - m.tendon_length0
    residual = shift[:, 0] - 0.01 - 0.8 * shift[:, 1] - 0.3 * shift[:, 1] ** 2
    assert np.max(np.abs(residual)) <= 1e-8
    assert np.ptp(traj.q[:, 0]) > 0.1  # it moved


def test_a_limited_tendon_holds():
    xml = """
<mujoco model="leash">
  <worldbody>
    <site name="post"/>
    <body name="dog" pos="0.5 0 0">
      <joint name="x" type="slide" axis="1 0 0"/>
      <geom type="sphere" size="0.05" mass="1"/>
      <site name="collar"/>
    </body>
  </worldbody>
  <tendon><spatial name="leash" limited="true" range="0 0.8">
    <site site="post"/><site site="collar"/></spatial></tendon>
  <actuator><motor joint="x"/></actuator>
</mujoco>"""
    ready = jl.mujoco.load(xml, params={"ctrl": [2.0]})  # pulled away from the post
    traj = jl.simulate(ready.system, ready.q0, ready.qd0, t1=2.0)
    assert traj.result == jl.RESULTS.successful
    lengths = ready.tendon_lengths(traj.q)[:, 0]
    assert np.max(lengths) <= 0.8 + 1e-8 and abs(lengths[-1] - 0.8) < 1e-8
    # The upper row (the second) pulls back with the push: λ = 2 N, ≥ 0.
    np.testing.assert_allclose(traj.multipliers[-1], [0.0, 2.0], atol=1e-6)


def test_warning_names_what_is_left_out_and_ctrl_keeps_mujocos_shape():
    xml = """
<mujoco model="extras">
  <option><flag contact="disable"/></option>
  <worldbody>
    <body name="a">
      <joint name="j" type="hinge" axis="0 1 0"/>
      <geom name="wheel" type="cylinder" size="0.1 0.05"/>
      <site name="s1" pos="0.2 0 0"/><site name="side" pos="0 0 0.3"/>
    </body>
    <body name="b" pos="1 0 0">
      <joint name="k" type="slide"/>
      <geom type="sphere" size="0.1"/>
      <site name="s2"/>
    </body>
  </worldbody>
  <tendon>
    <spatial name="wrapped"><site site="s1"/><geom geom="wheel" sidesite="side"/>
      <site site="s2"/></spatial>
    <fixed name="rub" frictionloss="0.1"><joint joint="k" coef="1"/></fixed>
  </tendon>
  <actuator>
    <position name="slow" joint="j" kp="1" timeconst="0.1"/>
    <motor name="on_wrapped" tendon="wrapped"/>
    <motor name="site" site="s1" gear="1 0 0 0 0 0"/>
    <motor name="plain" joint="k"/>
  </actuator>
</mujoco>"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ready = jl.mujoco.load(xml)
    (warning,) = caught
    message = str(warning.message)
    for part in (
        "tendons wrapping geoms, with their limits, equalities and actuators (wrapped)",
        "tendon friction loss (rub)",
        "actuators with activation dynamics (slow)",
        "wrapping-tendon transmissions (on_wrapped, site)",
    ):
        assert part in message
    # ctrl is MuJoCo's (nu,): ctrl[3] drives the one imported actuator.
    system = ready.system
    assert system.params["ctrl"].shape == (4,)
    q = ready.q0
    force = system.force(q, q, 0.0, {**system.params, "ctrl": jnp.array([5.0, 5, 5, 2])})
    np.testing.assert_allclose(force, [0.0, 2.0])
    assert np.isnan(ready.tendon_lengths(q)[0]) and ready.tendon_lengths(q)[1] == 0.0


def test_no_ctrl_where_no_imported_actuator_reads_it():
    xml = """
<mujoco><worldbody><body><joint name="j" type="hinge"/><geom size="0.1"/></body>
</worldbody><actuator><position joint="j" kp="1" timeconst="0.1"/></actuator></mujoco>"""
    with pytest.warns(UserWarning, match="actuators with activation dynamics"):
        ready = jl.mujoco.load(xml)
    assert not {"ctrl", "actuator_gainprm", "actuator_biasprm"} & set(ready.system.params)
    assert ready.system.force is None
    with pytest.raises(ValueError, match="Unknown parameter 'ctrl'"):
        jl.mujoco.load(xml, params={"ctrl": [1.0]})


@pytest.mark.parametrize(
    "name", ["point_mass", "manipulator", "ball_in_cup", "quadruped"]
)
def test_dm_control_suite_tendons_and_actuators(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its compiler warnings to the cwd
    m = mujoco.MjModel.from_xml_path(str(SUITE / f"{name}.xml"))
    m.opt.disableflags |= D.mjDSBL_CONTACT | D.mjDSBL_LIMIT | D.mjDSBL_EQUALITY
    if name == "quadruped":  # its actuators have activation dynamics (named)
        m.opt.disableflags |= D.mjDSBL_ACTUATION
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ready = jl.mujoco.load(m)
    assert ready.system.params["tendon_armature"].shape == (m.ntendon,)
    assert _compare(m, ready, states=2, ctrl_scale=2.0) < 1e-9
    d = mujoco.MjData(m)
    d.qpos[:] = _random_state(m, ready.layout, np.random.default_rng(6))[0]
    mujoco.mj_forward(m, d)
    np.testing.assert_allclose(ready.tendon_lengths(d.qpos), d.ten_length, atol=1e-12)
