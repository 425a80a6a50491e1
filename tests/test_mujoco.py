"""`jl.mujoco.load` against MuJoCo itself: q̈ equals MuJoCo's qacc (contacts and
limits disabled) at random states for every joint type and feature, M equals
`mj_fullM` where the coordinates coincide, trajectories follow MuJoCo's RK4, and
gradients match finite differences."""

import json
import subprocess
import sys
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
D = mujoco.mjtDisableBit

# Hinges and a slide with everything MuJoCo gives them: off-axis joints and
# anchors, rotated bodies and inertial frames (boxes placed off the body
# origin), ref, springref, stiffness, damping, armature and motors.
CHAIN = """
<mujoco model="chain">
  <option gravity="0.3 -0.5 -9.81">{flags}</option>
  <worldbody>
    <body name="a" pos="0.1 0.2 0.3" quat="0.9 0.1 0.3 0.2">
      <joint name="h1" type="hinge" axis="0.3 0.4 1" pos="0.05 0 0.1" ref="0.2"
             damping="0.3" armature="0.1" stiffness="2" springref="0.4"/>
      <geom type="box" size="0.1 0.2 0.3" pos="0.1 0.05 -0.2" euler="10 20 30"/>
      <body name="b" pos="0 0 -0.5" euler="0 30 0">
        <joint name="s1" type="slide" axis="1 0.2 0" pos="0 0.1 0" damping="0.2"
               armature="0.05" stiffness="1" ref="0.1"/>
        <joint name="h2" type="hinge" axis="0 1 0" pos="0.1 0 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.2 0.1 -0.4" size="0.05"/>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor joint="h1" gear="2"/>
    <motor joint="s1" gear="0.5"/>
  </actuator>
</mujoco>
"""

# A ball joint (offset anchor, damping, armature) carrying a hinge, and a free
# body (off-centre, rotated inertial frame) carrying a slide.
BALL_FREE = """
<mujoco model="ball and free">
  <option gravity="0 0 -9.81">{flags}</option>
  <worldbody>
    <body name="c" pos="0.2 0.1 -0.4" quat="0.8 0.2 -0.3 0.1">
      <joint name="ball" type="ball" pos="0 0 0.05" damping="0.1" armature="0.02"/>
      <geom type="box" size="0.05 0.1 0.15" pos="0.02 0 -0.1" euler="5 -10 40"/>
      <body name="d" pos="0 0 -0.3">
        <joint name="h" type="hinge" axis="1 0 0" damping="0.05" ref="-0.3"/>
        <geom type="capsule" fromto="0 0 0 0 0.1 -0.2" size="0.03"/>
      </body>
    </body>
    <body name="f" pos="1 0 0">
      <freejoint name="free"/>
      <geom type="ellipsoid" size="0.1 0.2 0.3" pos="0.03 0.01 0" euler="20 0 10"/>
      <body name="g" pos="0.2 0 0">
        <joint name="s" type="slide" axis="0 0.6 0.8" stiffness="3"/>
        <geom type="sphere" size="0.05" pos="0 0.02 0"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""

# A two-link arm (a double pendulum) with damping and a motor at the shoulder.
ARM = """
<mujoco model="arm">
  <worldbody>
    <body name="upper">
      <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05" mass="1"/>
      <body name="lower" pos="0 0 -1">
        <joint name="elbow" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05" mass="0.5"/>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="shoulder" gear="1"/></actuator>
</mujoco>
"""


def _model(xml, **flags):
    text = " ".join(f'{k}="disable"' for k in flags)
    return mujoco.MjModel.from_xml_string(
        xml.format(flags=f'<flag contact="disable" limit="disable" {text}/>')
    )


def _random_state(m, layout, rng):
    qpos = m.qpos0 + 0.5 * rng.normal(size=m.nq)
    for kind, a, _ in layout:
        if kind in (mujoco.mjtJoint.mjJNT_BALL, mujoco.mjtJoint.mjJNT_FREE):
            a += 3 * (kind == mujoco.mjtJoint.mjJNT_FREE)
            qpos[a : a + 4] /= np.linalg.norm(qpos[a : a + 4])
    return qpos, rng.normal(size=m.nv)


def _qacc(ready, q, qd, qdd):
    """MuJoCo's qacc from q̈: for a quaternion, ω̇ = 2 Im(p̄ ⊗ p̈) (the derivative
    of ω = 2 Im(p̄ ⊗ ṗ), as Im(ṗ̄ ⊗ ṗ) = 0)."""
    return np.asarray(ready.to_mujoco(q, qdd)[1])


def _compare(m, ready=None, states=3, seed=0, ctrl_scale=1.0):
    """The largest relative difference of q̈ and qacc at random states."""
    if ready is None:
        ready = jl.mujoco.load(m)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(seed)
    accelerations = jax.jit(jl.accelerations)
    worst = 0.0
    for _ in range(states):
        qpos, qvel = _random_state(m, ready.layout, rng)
        system = ready.system
        d.qpos[:], d.qvel[:] = qpos, qvel
        if "ctrl" in system.params:
            d.ctrl[:] = ctrl_scale * rng.uniform(-1, 1, size=m.nu)
            system = eqx.tree_at(
                lambda s: s.params["ctrl"], system, jnp.asarray(d.ctrl.copy())
            )
        mujoco.mj_forward(m, d)
        q, qd = ready.from_mujoco(qpos, qvel)
        qdd = accelerations(system, q, qd, 0.0)
        error = np.max(np.abs(_qacc(ready, q, qd, qdd) - d.qacc))
        worst = max(worst, error / np.max(np.abs(d.qacc)))
    return worst


def test_importing_jaxlagrange_does_not_import_mujoco():
    code = "import sys, jaxlagrange; print('mujoco' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("xml", [CHAIN, BALL_FREE], ids=["chain", "ball_free"])
def test_accelerations_equal_mujoco_qacc(xml):
    assert _compare(_model(xml)) < 1e-9


@pytest.mark.parametrize(
    "flags", [("gravity", "damper"), ("spring", "actuation")], ids="+".join
)
def test_disable_flags_remove_terms_and_params(flags):
    m = _model(CHAIN, **dict.fromkeys(flags, 1))
    ready = jl.mujoco.load(m)
    names = {"gravity": "gravity", "damper": "dof_damping"}
    names.update(spring="jnt_stiffness", actuation="ctrl")
    for flag in flags:
        assert names[flag] not in ready.system.params
    assert _compare(m, ready) < 1e-9


def test_no_actuators_no_ctrl():
    ready = jl.mujoco.load(_model(BALL_FREE))
    assert set(ready.system.params) == {
        "body_mass",
        "body_inertia",
        "body_ipos",
        "body_iquat",
        "dof_armature",
        "dof_damping",
        "jnt_stiffness",
        "gravity",
    }
    assert ready.system.params["body_inertia"].shape == (5, 3)


def test_params_override_the_model():
    m = _model(CHAIN)
    mass = np.array(m.body_mass) * [1, 2.0, 0.5]
    ready = jl.mujoco.load(m, params={"body_mass": mass, "gravity": [0, 0, -3.0]})
    m.body_mass[:] = mass
    m.opt.gravity[:] = [0, 0, -3.0]
    mujoco.mj_setConst(m, mujoco.MjData(m))
    assert _compare(m, ready) < 1e-9


def test_mass_matrix_equals_mj_fullM_for_hinges_and_slides():
    m = _model(CHAIN)
    ready = jl.mujoco.load(m)
    d = mujoco.MjData(m)
    rng = np.random.default_rng(1)
    for _ in range(2):
        d.qpos[:] = _random_state(m, ready.layout, rng)[0]
        mujoco.mj_forward(m, d)
        full = np.zeros((m.nv, m.nv))
        mujoco.mj_fullM(m, d, full)
        M = jl.mass_matrix(ready.system, jnp.asarray(d.qpos), jnp.zeros(m.nq), 0.0)
        np.testing.assert_allclose(M, full, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["cartpole", "acrobot", "cheetah", "humanoid"])
def test_dm_control_suite_models(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its compiler warnings to the cwd
    m = mujoco.MjModel.from_xml_path(str(SUITE / f"{name}.xml"))
    m.opt.disableflags |= D.mjDSBL_CONTACT | D.mjDSBL_LIMIT
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # all imported, ctrl ranges included
        ready = jl.mujoco.load(m)
    assert _compare(m, ready, states=2, ctrl_scale=2.0) < 1e-9


def test_positions_are_the_bodies_centres_of_mass_then_their_anchors():
    m = _model(BALL_FREE)
    ready = jl.mujoco.load(m)
    d = mujoco.MjData(m)
    d.qpos[:] = _random_state(m, ready.layout, np.random.default_rng(2))[0]
    mujoco.mj_kinematics(m, d)
    k = m.nbody - 1
    positions = ready.positions(d.qpos)
    np.testing.assert_allclose(positions[:k], d.xipos[1:], atol=1e-14)
    # Each body's first joint's anchor (ball, hinge, free, slide here).
    first = m.body_jntadr[1:]
    np.testing.assert_allclose(positions[k:], d.xanchor[first], atol=1e-14)
    assert ready.point_names == ("c", "d", "f", "g") + tuple(
        f"joint {n}" for n in ("ball", "h", "free", "s")
    )
    # Drawn from each anchor to its body's centre, and from the parent's centre.
    assert ready.links == ((4, 0), (5, 1), (6, 2), (7, 3), (0, 5), (2, 7))
    assert ready.positions(jnp.stack([d.qpos] * 3)).shape == (3, 2 * k, 3)


def test_state_conversions_round_trip():
    m = _model(BALL_FREE)
    ready = jl.mujoco.load(m)
    rng = np.random.default_rng(3)
    qpos, qvel = _random_state(m, ready.layout, rng)
    q, qd = ready.from_mujoco(qpos, qvel)
    back_qpos, back_qvel = ready.to_mujoco(q, qd)
    np.testing.assert_array_equal(back_qpos, qpos)
    np.testing.assert_allclose(back_qvel, qvel, rtol=1e-14, atol=1e-14)
    # On the constraint's tangent space (p·ṗ = 0), and a batch converts alike.
    for a in (0, 8):
        assert abs(float(q[a : a + 4] @ qd[a : a + 4])) < 1e-15
    batch = ready.from_mujoco(np.stack([qpos, qpos]), np.stack([qvel, -qvel]))
    np.testing.assert_allclose(batch[1][1], -qd, atol=1e-15)
    # ṗ is MuJoCo's finite-difference rate: mj_integratePos over a tiny step.
    dt = 1e-7
    moved = qpos.copy()
    mujoco.mj_integratePos(m, moved, qvel, dt)
    np.testing.assert_allclose((moved - qpos) / dt, qd, atol=1e-6)


def test_trajectory_follows_mujoco_rk4():
    m = _model(BALL_FREE)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    m.opt.timestep = 1e-3
    ready = jl.mujoco.load(m)
    d = mujoco.MjData(m)
    d.qpos[:], d.qvel[:] = _random_state(m, ready.layout, np.random.default_rng(4))
    q0, qd0 = ready.from_mujoco(d.qpos.copy(), d.qvel.copy())
    for _ in range(500):
        mujoco.mj_step(m, d)
    traj = jl.simulate(ready.system, q0, qd0, t1=0.5, rtol=1e-12, atol=1e-12)
    qpos, qvel = ready.to_mujoco(traj.q[-1], traj.qd[-1])
    np.testing.assert_allclose(qpos, d.qpos, atol=1e-9)
    np.testing.assert_allclose(qvel, d.qvel, atol=1e-8)


def test_gradient_of_a_loss_matches_finite_differences():
    system, q0, qd0 = jl.mujoco.load(ARM)
    q0 = q0 + jnp.array([0.5, -0.3])

    def loss(mass, damping):
        params = {**system.params, "body_mass": mass, "dof_damping": damping}
        sys = eqx.tree_at(lambda s: s.params, system, params)
        traj = jl.simulate(sys, q0, qd0, t1=1.0, rtol=1e-11, atol=1e-11)
        return jnp.sum(traj.q[-1] ** 2)

    mass, damping = system.params["body_mass"], system.params["dof_damping"]
    grads = jax.grad(loss, argnums=(0, 1))(mass, damping)
    h = 1e-5
    for which, (x, g) in enumerate(zip((mass, damping), grads, strict=True)):
        i = 2 if which == 0 else 1  # the lower link's mass, the elbow's damping
        e = jnp.zeros_like(x).at[i].set(h)
        args = [mass, damping]
        args[which] = x + e
        up = loss(*args)
        args[which] = x - e
        fd = (up - loss(*args)) / (2 * h)
        np.testing.assert_allclose(g[i], fd, rtol=1e-5)


def test_a_urdf_file_loads(tmp_path):
    urdf = tmp_path / "arm.urdf"
    urdf.write_text(
        """<robot name="arm">
  <link name="base"/>
  <link name="upper"><inertial><origin xyz="0 0 -0.5"/><mass value="1.5"/>
    <inertia ixx="0.1" iyy="0.1" izz="0.01" ixy="0" ixz="0" iyz="0"/></inertial></link>
  <joint name="shoulder" type="continuous"><parent link="base"/><child link="upper"/>
    <axis xyz="0 1 0"/></joint>
</robot>"""
    )
    ready = jl.mujoco.load(urdf)
    assert ready.coordinates == ("shoulder",)
    m = mujoco.MjModel.from_xml_path(str(urdf))
    m.opt.disableflags |= D.mjDSBL_CONTACT | D.mjDSBL_LIMIT
    assert _compare(m, ready) < 1e-9


def test_one_warning_names_everything_not_imported():
    xml = """
<mujoco model="extras">
  <option density="1.2"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="a" pos="0 0 1">
      <joint name="j" type="hinge" limited="true" range="-1 1" frictionloss="0.1"/>
      <geom type="sphere" size="0.1"/>
      <site name="s1"/>
    </body>
    <body name="b" pos="1 0 1">
      <joint name="k" type="slide"/>
      <geom type="cylinder" size="0.1 0.1"/>
      <site name="s2"/>
    </body>
  </worldbody>
  <tendon><spatial name="t"><site site="s1"/><site site="s2"/></spatial></tendon>
  <equality><joint joint1="j" joint2="k"/></equality>
  <actuator><position joint="k" kp="10"/></actuator>
</mujoco>"""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jl.mujoco.load(xml)
    assert len(caught) == 1
    message = str(caught[0].message)
    for part in (
        "'extras'",
        "contacts of plane–cylinder geoms (geom 0/geom 2)",
        "fluid forces",
        "joint friction loss",
    ):
        assert part in message


def test_no_warning_for_a_model_within_the_contract():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jl.mujoco.load(_model(CHAIN))


def test_errors(tmp_path):
    with pytest.raises(ValueError, match="No MuJoCo model file at '.*missing.xml'"):
        jl.mujoco.load(tmp_path / "missing.xml")
    with pytest.raises(ValueError, match="MuJoCo cannot load the MJCF string:\nXML"):
        jl.mujoco.load("<mujoco><worldbody><body><joint type='bad'/></body>")
    bad = tmp_path / "bad.xml"
    bad.write_text("<mujoco><worldbody><geom type='nonsense'/></worldbody></mujoco>")
    with pytest.raises(ValueError, match="MuJoCo cannot load '.*bad.xml':\nXML Error"):
        jl.mujoco.load(bad)
    with pytest.raises(ValueError, match="`source` must be a path .* got int"):
        jl.mujoco.load(3)
    with pytest.raises(ValueError, match="'still' has no joints"):
        jl.mujoco.load(
            '<mujoco model="still"><worldbody><body><geom size="1"/></body>'
            "</worldbody></mujoco>"
        )
    m = _model(BALL_FREE)
    with pytest.raises(ValueError, match="Unknown parameter 'mass' .* valid param"):
        jl.mujoco.load(m, params={"mass": 1.0})
    with pytest.raises(
        ValueError, match=r"Parameter 'gravity' .* must have shape \(3,\), got \(2,\)"
    ):
        jl.mujoco.load(m, params={"gravity": [0.0, 1.0]})
    armature = np.array(m.dof_armature)
    armature[1] = 0.5
    with pytest.raises(
        ValueError, match=r"`dof_armature` of the angular dofs 0..2 of joint 'ball'"
    ):
        jl.mujoco.load(m, params={"dof_armature": armature})
    armature = np.array(m.dof_armature)
    armature[8] = 0.5  # the free joint's second angular dof
    with pytest.raises(ValueError, match="angular dofs 7..9 of joint 'free'"):
        jl.mujoco.load(m, params={"dof_armature": armature})


def test_command_line_runs_a_mujoco_file(tmp_path):
    from jaxlagrange import _cli

    (tmp_path / "arm.xml").write_text(ARM)
    run = (
        '[system]\nmujoco = "arm.xml"\nparams = { dof_damping = [0.3, 0.05] }\n'
        "[initial]\nq = [1.0, -0.5]\n[simulate]\nt1 = 2.0\nsaves = 41\n"
    )
    (tmp_path / "run.toml").write_text(run)
    out = tmp_path / "run"
    args = ["run", str(tmp_path / "run.toml"), "--out", str(out), "--quiet"]
    assert _cli.main(args) == 0
    assert {"trajectory.npz", "motion.gif"} <= {p.name for p in out.iterdir()}
    ready = jl.mujoco.load(ARM, params={"dof_damping": [0.3, 0.05]})
    expected = jl.simulate(
        ready.system, jnp.array([1.0, -0.5]), ready.qd0, t1=2.0, rtol=1e-8, atol=1e-8
    )
    with np.load(out / "trajectory.npz") as arrays:
        np.testing.assert_allclose(arrays["q"][-1], expected.q[-1], atol=1e-6)


@pytest.mark.slow
def test_command_line_sweeps_and_fits_a_mujoco_file(tmp_path, capsys):
    from jaxlagrange import _cli

    test_command_line_runs_a_mujoco_file(tmp_path)
    run = (tmp_path / "run.toml").read_text()
    ready = jl.mujoco.load(ARM, params={"dof_damping": [0.3, 0.05]})
    expected = jl.simulate(
        ready.system, jnp.array([1.0, -0.5]), ready.qd0, t1=2.0, rtol=1e-8, atol=1e-8
    )
    # An axis over one entry of an array param: a joint's damping.
    sweep = run.replace("saves = 41", "saves = 2") + (
        '[sweep]\n[sweep.axes]\n"q[0]" = { min = 0.5, max = 1.0, num = 2 }\n'
        '"dof_damping[0]" = { min = 0.1, max = 0.3, num = 2 }\n'
    )
    (tmp_path / "sweep.toml").write_text(sweep)
    out = tmp_path / "sweep"
    args = ["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"]
    assert _cli.main(args) == 0
    group = jl.open_store(out / "sweep.zarr")
    q = np.asarray(group["outputs/q"]).reshape(4, 2, 2)
    np.testing.assert_allclose(q[3, -1], expected.q[-1], atol=1e-6)
    assert not np.allclose(q[2, -1], q[3, -1], atol=1e-3)  # the damping matters
    bad = sweep.replace("dof_damping[0]", "dof_damping[2]")
    (tmp_path / "sweep.toml").write_text(bad)
    assert _cli.main(args) == 1
    assert (
        "unknown axis 'dof_damping[2]'; valid axes for system 'arm': q[0], q[1], "
        "qd[0], qd[1], actuator_biasprm[0..0, 0..2], actuator_gainprm[0..0, 0..2], "
        "body_inertia[0..2, 0..2], body_ipos[0..2, 0..2], body_iquat[0..2, 0..3], "
        "body_mass[0..2], ctrl[0..0], dof_armature[0..1], dof_damping[0..1], "
        "gravity[0..2], jnt_stiffness[0..1]"
    ) in capsys.readouterr().err

    fit = (
        '[system]\nmujoco = "arm.xml"\nparams = { dof_damping = [0.2, 0.1] }\n'
        '[fit]\ndata = "run/trajectory.npz"\ntrainable = ["dof_damping"]\n'
        "[simulate]\nrtol = 1e-10\natol = 1e-10\n"
    )
    (tmp_path / "fit.toml").write_text(fit)
    out = tmp_path / "fit"
    args = ["fit", str(tmp_path / "fit.toml"), "--out", str(out), "--quiet"]
    assert _cli.main(args) == 0
    params = json.loads((out / "params.json").read_text())
    np.testing.assert_allclose(params["dof_damping"], [0.3, 0.05], rtol=1e-3)


def test_command_line_errors_name_the_mujoco_key(tmp_path, capsys):
    from jaxlagrange import _cli

    (tmp_path / "a.toml").write_text('[system]\nmujoco = "nowhere.xml"\n')
    assert _cli.main(["run", str(tmp_path / "a.toml"), "--quiet"]) != 0
    err = capsys.readouterr().err
    assert "[system] mujoco 'nowhere.xml': No MuJoCo model file" in err
    (tmp_path / "arm.xml").write_text(ARM)
    (tmp_path / "b.toml").write_text(
        '[system]\nmujoco = "arm.xml"\nname = "pendulum"\n'
    )
    assert _cli.main(["run", str(tmp_path / "b.toml"), "--quiet"]) != 0
    assert "exactly one of `name`" in capsys.readouterr().err
    (tmp_path / "c.toml").write_text(
        '[system]\nmujoco = "arm.xml"\n[initial]\nq = [1.0]\n'
    )
    assert _cli.main(["run", str(tmp_path / "c.toml"), "--quiet"]) != 0
    assert "[initial] q must have 2 entries for 'arm.xml'" in capsys.readouterr().err


def test_ensembles_with_per_member_params_on_both_backends():
    ready = jl.mujoco.load(ARM, params={"ctrl": [0.3]})
    q0 = jnp.array([[0.5, 0.1], [0.3, -0.2]])
    damping = jnp.array([[0.1, 0.05], [0.2, 0.1]])
    params = {k: jnp.stack([v, v]) for k, v in ready.system.params.items()}
    params["dof_damping"] = damping
    finals = {}
    for backend in ("vmap", "kernel"):
        qd0 = jnp.zeros_like(q0)
        traj = jl.simulate_batch(
            ready.system, q0, qd0, params=params, backend=backend, t1=1.0
        )
        finals[backend] = traj.q[:, -1]
    np.testing.assert_allclose(finals["kernel"], finals["vmap"], atol=1e-9)
    one = jl.mujoco.load(ARM, params={"ctrl": [0.3], "dof_damping": damping[1]})
    alone = jl.simulate(one.system, q0[1], jnp.zeros(2), t1=1.0)
    np.testing.assert_allclose(finals["vmap"][1], alone.q[-1], atol=1e-12)


@pytest.mark.parametrize("name", ["chain", "ball_free", "quadruped"])
def test_jumped_walk_equals_the_unrolled_one(name, monkeypatch):
    # Frames, their Jacobian and a reverse-mode gradient, on slides, hinges with
    # qpos0 ≠ 0, balls and free joints; the unrolled walk is the reference.
    from jaxlagrange.mujoco import _model as model, _system

    if name == "quadruped":
        m = mujoco.MjModel.from_xml_path(str(SUITE / "quadruped.xml"))
    else:
        m = _model({"chain": CHAIN, "ball_free": BALL_FREE}[name])
    tree = model.tree(m)
    layout = tuple((j.kind, j.q, j.v) for b in tree.bodies for j in b.joints)
    q = jnp.asarray(_random_state(m, layout, np.random.default_rng(3))[0])

    def walks(q):
        monkeypatch.setattr(_system, "JUMP_FROM", 10**6)
        unrolled = _system._frames(tree, q)
        monkeypatch.setattr(_system, "JUMP_FROM", 0)
        return unrolled, _system._frames(tree, q)

    (x, r), (y, s) = walks(q)
    assert x.shape == y.shape == (m.nbody, 3) and r.shape == s.shape
    np.testing.assert_allclose(y, x, rtol=0, atol=1e-14)
    np.testing.assert_allclose(s, r, rtol=0, atol=1e-14)
    (ja, jb), (jc, jd) = jax.jacfwd(walks)(q)
    np.testing.assert_allclose(jc, ja, rtol=0, atol=1e-13)
    np.testing.assert_allclose(jd, jb, rtol=0, atol=1e-13)

    def loss(q, which):
        (x, r) = walks(q)[which]
        return jnp.sum(jnp.sin(x)) + jnp.sum(r * r[::-1])

    np.testing.assert_allclose(
        jax.grad(loss)(q, 1), jax.grad(loss)(q, 0), rtol=0, atol=1e-12
    )


@pytest.mark.parametrize("jump", [False, True], ids=["unrolled", "jumped"])
@pytest.mark.parametrize("xml", [CHAIN, BALL_FREE], ids=["chain", "ball_free"])
def test_the_trees_kane_terms_equal_autodiff_of_its_lagrangian(xml, jump, monkeypatch):
    # M and f of the bodies by Kane's equations (`tree_terms`) against the autodiff
    # of the same L, off the unit quaternions, with a full inertia tensor per body.
    import copy

    from jaxlagrange._mass import _terms
    from jaxlagrange.mujoco import _system

    monkeypatch.setattr(_system, "JUMP_FROM", 0 if jump else 10**6)
    m = _model(xml)
    ready = jl.mujoco.load(m)
    qpos, qvel = _random_state(m, ready.layout, np.random.default_rng(5))
    q, qd = ready.from_mujoco(1.3 * qpos, qvel)
    qd = qd + 0.2 * q  # a rate along each quaternion, too
    rng = np.random.default_rng(6)
    a = rng.normal(size=(m.nbody, 3, 3))
    full = np.einsum("bij,bkj->bik", a, a) + np.eye(3)  # symmetric positive definite
    kane = ready.system.with_params({**ready.system.params, "body_inertia": full})
    autodiff = copy.copy(kane)
    object.__setattr__(autodiff, "lagrangian", lambda *args: kane.lagrangian(*args))
    t = jnp.zeros(())
    (mass, f), (mass_ad, f_ad) = (_terms.terms(s, q, qd, t) for s in (kane, autodiff))
    np.testing.assert_allclose(mass, mass_ad, rtol=0, atol=1e-13 * np.abs(mass_ad).max())
    np.testing.assert_allclose(f, f_ad, rtol=0, atol=1e-13 * np.abs(f_ad).max())
    np.testing.assert_allclose(_terms.mass(kane, q, qd, t), mass, atol=1e-13)
    np.testing.assert_allclose(_terms.forcing(kane, q, qd, t), f, atol=1e-12)


@pytest.mark.parametrize("xml", [CHAIN, BALL_FREE], ids=["chain", "ball_free"])
def test_accelerations_by_the_jumped_walk_equal_mujoco_qacc(xml, monkeypatch):
    from jaxlagrange.mujoco import _system

    monkeypatch.setattr(_system, "JUMP_FROM", 0)
    assert _compare(_model(xml)) < 1e-9


def test_the_jumped_walk_grows_with_the_log_of_the_tree():
    # The program (the frames' Jacobian, traced) of a 128-link chain is at most
    # 1.5 times that of a 16-link one: ⌈log₂ depth⌉ rounds, 7 against 4.
    from jaxlagrange.mujoco import _model as model, _system

    def size(n):
        links = "".join(
            '<body pos="0 0 -0.3"><joint axis="0 1 0"/><geom size="0.1"/>'
            for _ in range(n)
        )
        m = mujoco.MjModel.from_xml_string(
            f"<mujoco><worldbody>{links}{'</body>' * n}</worldbody></mujoco>"
        )
        tree = model.tree(m)
        jacobian = jax.jacfwd(lambda q: _system._frames(tree, q))
        return len(jax.make_jaxpr(jacobian)(jnp.zeros(n)).eqns)

    small, large = size(16), size(128)
    assert small < large < 1.5 * small
