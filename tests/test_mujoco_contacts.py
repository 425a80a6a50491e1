"""Geom contacts of loaded MuJoCo models: the pairs MuJoCo's filter collides, h
equal to `mj_collision`'s distance, slips equal to MuJoCo's contact-frame
velocities, μ mixed as MuJoCo mixes it, and landings with exact event times."""

import warnings
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import mujoco
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange.mujoco import _contacts, _model, _system


SUITE = Path(__file__).parent / "data" / "dm_control_suite"

# Every supported pair type, on free bodies over a tilted plane; a large margin
# makes MuJoCo report every pair (its `dist` does not depend on the margin), and
# the elliptic cone makes its contact Jacobian rows the contact frame's axes.
SHAPES = """
<mujoco model="shapes">
  <option cone="elliptic" jacobian="dense"/>
  <default><geom margin="100"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" euler="10 -5 0"/>
    <body name="a"><freejoint/><geom name="ball" type="sphere" size=".1"/></body>
    <body name="b"><freejoint/><geom name="cap" type="capsule" size=".1 .3"/></body>
    <body name="c"><freejoint/>
      <geom name="box" type="box" size=".1 .2 .3" pos=".1 0 0" euler="5 0 10"/></body>
    <body name="d"><freejoint/>
      <geom name="cap2" type="capsule" size=".05 .2" pos=".1 0 0" euler="10 20 30"/>
      <geom name="ball2" type="sphere" size=".07" pos="0 -.1 .1"/></body>
  </worldbody>
</mujoco>
"""


def _names(m, geoms):
    return "/".join(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in geoms)


def _load(xml_or_model):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return jl.mujoco.load(xml_or_model)


def _random_free_state(m, rng):
    qpos, qvel = m.qpos0.copy(), rng.normal(size=m.nv)
    for j in range(m.njnt):
        a = m.jnt_qposadr[j]
        qpos[a : a + 3] = rng.uniform(-0.5, 0.5, 3)
        p = rng.normal(size=4)
        qpos[a + 3 : a + 7] = p / np.linalg.norm(p)
    return qpos, qvel


def test_distances_and_slips_equal_mujocos():
    m = mujoco.MjModel.from_xml_string(SHAPES)
    ready = _load(m)
    system = ready.system
    contacts, tree = _contacts.read(m)[0], _model.tree(m)
    d = mujoco.MjData(m)

    @jax.jit
    def evaluate(q, qd):  # h, the slips, and their tangents (u, 2, 3) as vectors
        tangents = _contacts._witnesses(contacts, *_system._frames(tree, q))[-1]
        h = system.unilateral(q, 0.0, system.params)
        return h, system.slip(q, qd, 0.0, system.params), tangents

    rng = np.random.default_rng(0)
    pairs = {lab.rsplit(" ", 1)[0] for lab in ready.contacts}
    assert pairs == {
        "floor/ball", "floor/cap", "floor/box", "floor/cap2", "floor/ball2",
        "ball/cap", "ball/cap2", "ball/ball2", "ball2/cap", "cap/cap2",
    }  # fmt: skip
    assert len(ready.contacts) == 1 + 2 + 8 + 2 + 1 + 5
    for _ in range(4):
        qpos, qvel = _random_free_state(m, rng)
        d.qpos[:], d.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, d)
        q, qd = ready.from_mujoco(qpos, qvel)
        h, slip, tangents = map(np.asarray, evaluate(q, qd))
        theirs = {}
        for c in d.contact[: d.ncon]:
            g = sorted(c.geom, key=lambda g: (m.geom_type[g], g))
            if _names(m, g) not in pairs:
                continue  # box–sphere and box–capsule: named in the warning
            J = d.efc_J.reshape(-1, m.nv)[c.efc_address : c.efc_address + 3] @ qvel
            v = J[1] * c.frame[3:6] + J[2] * c.frame[6:9]
            key = _names(m, g)
            if c.dist < theirs.get(key, (np.inf,))[0]:
                theirs[key] = (c.dist, v)
        assert set(theirs) == pairs
        for key, (dist, v) in theirs.items():
            rows = [i for i, lab in enumerate(ready.contacts) if lab.split()[0] == key]
            i = rows[int(np.argmin(h[rows]))]
            assert abs(h[i] - dist) < 1e-12, key
            np.testing.assert_allclose(slip[i] @ tangents[i], v, atol=1e-12)


# Contype/conaffinity, `<exclude>`, a `<pair>` (with its own friction) between
# geoms the bits keep apart, parent and child, and a weld body.
FILTERS = """
<mujoco model="filters">
  <option>{flags}</option>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="a" pos="0 0 1"><freejoint/>
      <geom name="a" type="sphere" size=".1"/>
      <body name="b"><joint type="hinge"/><geom name="b" type="capsule" size=".1 .2"/>
        <body name="c"><joint type="hinge"/><geom name="c" type="sphere" size=".1"/>
          <body name="welded"><geom name="w" type="sphere" size=".1"/></body>
        </body>
      </body>
    </body>
    <body name="d" pos="1 0 1"><freejoint/>
      <geom name="d" type="sphere" size=".1" contype="2" conaffinity="2"/></body>
    <body name="e" pos="2 0 1"><freejoint/>
      <geom name="e" type="capsule" size=".1 .2" contype="0" conaffinity="2"/></body>
  </worldbody>
  <contact>
    <exclude body1="a" body2="c"/>
    <pair geom1="d" geom2="floor" friction="0.3 0.005 0.0001"/>
  </contact>
</mujoco>
"""


def _mujoco_pairs(m) -> set[tuple[int, int]]:
    """The geom pairs MuJoCo's collision reports when every geom overlaps every
    other: bodies, geoms and joint anchors at the origin, a large margin."""
    m.body_pos[:], m.geom_pos[:], m.jnt_pos[:] = 0, 0, 0
    m.geom_margin[:], m.pair_margin[:] = 100, 100
    m.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MIDPHASE  # its boxes: no margin
    d = mujoco.MjData(m)
    found = set()
    for k in range(3):
        d.qpos[:] = m.qpos0
        rng = np.random.default_rng(k)
        for j in range(m.njnt):  # free bodies at the origin, hinges turned
            a = m.jnt_qposadr[j]
            if m.jnt_type[j] == 0:
                d.qpos[a : a + 3] = 0
            if m.jnt_type[j] == 3:
                d.qpos[a] += rng.normal()
        mujoco.mj_forward(m, d)
        found |= {tuple(sorted(map(int, c.geom))) for c in d.contact[: d.ncon]}
    return found


@pytest.mark.parametrize("flags", ["", '<flag filterparent="disable"/>'])
def test_pair_filter_matches_mujocos(flags):
    m = mujoco.MjModel.from_xml_string(FILTERS.format(flags=flags))
    pairs = {(a, b) for a, b, _ in _contacts.pairs(m)}
    assert pairs == _mujoco_pairs(m)
    names = {_names(m, p) for p in pairs}
    # The <pair> joins d to the floor though their bits do not match; a and c
    # are excluded; b with a (and c with b) only without the parent filter.
    assert "floor/d" in names and "a/c" not in names and "floor/e" not in names
    assert ("a/b" in names) == bool(flags) and "d/e" in names


@pytest.mark.parametrize(
    "name", ["hopper", "cheetah", "walker", "humanoid", "humanoid_CMU", "quadruped"]
)
def test_pair_filter_matches_mujocos_on_dm_control(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its compiler warnings to the cwd
    m = mujoco.MjModel.from_xml_path(str(SUITE / f"{name}.xml"))
    pairs = {(a, b) for a, b, _ in _contacts.pairs(m)}
    floor = {_names(m, p) for p in pairs if m.geom_type[p[0]] == 0}
    assert pairs == _mujoco_pairs(m)
    legs = {
        "hopper": "torso nose pelvis thigh calf foot",
        "cheetah": "torso head bthigh bshin bfoot fthigh fshin ffoot",
        "walker": "torso right_thigh right_leg right_foot left_thigh left_leg "
        "left_foot",
    }
    if name in legs:
        ground = "ground" if name == "cheetah" else "floor"
        assert floor == {f"{ground}/{g}" for g in legs[name].split()}


def test_warning_names_other_pairs_and_flags_remove_contacts():
    xml = """
<mujoco model="mixed">
  <option>{flags}</option>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="a" pos="0 0 1"><freejoint/>
      <geom name="ball" type="sphere" size=".1"/></body>
    <body name="b" pos="1 0 1"><freejoint/>
      <geom name="can" type="cylinder" size=".1 .1"/></body>
    <body name="c" pos="2 0 1"><freejoint/>
      <geom name="egg" type="ellipsoid" size=".1 .1 .2" condim="4"/></body>
  </worldbody>
</mujoco>"""
    with pytest.warns(UserWarning) as caught:
        ready = jl.mujoco.load(xml.format(flags=""))
    message = str(caught[0].message)
    for part in (
        "contacts of plane–cylinder geoms (floor/can)",
        "contacts of plane–ellipsoid geoms (floor/egg)",
        "contacts of sphere–cylinder geoms (ball/can)",
        "contacts of ellipsoid–cylinder geoms (egg/can)",
    ):
        assert part in message
    assert ready.contacts == ("floor/ball",)
    assert {"geom_friction", "restitution"} <= set(ready.system.params)
    for flag in ("contact", "constraint"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing left to name
            ready = jl.mujoco.load(xml.format(flags=f'<flag {flag}="disable"/>'))
        assert ready.contacts == () and ready.system.unilateral is None
        assert "geom_friction" not in ready.system.params
    # Torsional and rolling friction (condim 4 and 6) are named.
    spinning = xml.format(flags="").replace('size=".1"/>', 'size=".1" condim="6"/>')
    with pytest.warns(UserWarning, match=r"torsional and rolling friction \(floor/"):
        jl.mujoco.load(spinning)


MIX = """
<mujoco model="mix">
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="0.4"/>
    <body name="a" pos="0 0 1"><freejoint/>
      <geom name="a" type="sphere" size=".1" friction="0.7"/></body>
    <body name="b" pos="1 0 1"><freejoint/>
      <geom name="b" type="sphere" size=".1" friction="0.9" priority="1"
            condim="1"/></body>
    <body name="c" pos="2 0 1"><freejoint/>
      <geom name="c" type="capsule" size=".1 .1" friction="0.2"/></body>
    <body name="d" pos="3 0 1"><freejoint/>
      <geom name="d" type="sphere" size=".1" friction="0.1" condim="1"/></body>
  </worldbody>
  <contact><pair geom1="c" geom2="floor" friction="0.6"/></contact>
</mujoco>"""


def test_friction_is_mujocos_mix_and_differentiable():
    ready = _load(MIX)
    system = ready.system
    mu = dict(
        zip(ready.contacts, np.asarray(system.coefficient("friction")), strict=True)
    )
    # The larger μ; the higher priority's condim (1: frictionless) and μ; the
    # <pair>'s μ; the larger condim (3, the floor's, though d has 1).
    assert mu["floor/a"] == 0.7 and mu["floor/b"] == 0.0 and mu["a/b"] == 0.0
    assert mu["floor/c 0"] == mu["floor/c 1"] == 0.6 and mu["floor/d"] == 0.4
    assert mu["a/c"] == 0.7 and mu["a/d"] == 0.7 and mu["d/c"] == 0.2
    assert system.restitution_param == "restitution"

    def total(friction):  # the sum of μ over the rows
        params = {**system.params, "geom_friction": friction}
        changed = eqx.tree_at(lambda s: s.params, system, params)
        return jnp.sum(changed.coefficient("friction"))

    grad = jax.grad(total)(system.params["geom_friction"])
    # Each mixed row's μ is its larger geom's: the floor's once, a's three times.
    expected = np.zeros((5, 3))
    expected[[0, 1, 3], 0] = 1, 3, 1
    np.testing.assert_array_equal(grad, expected)


def test_capsule_distance_is_continuous_with_finite_gradients_when_parallel():
    xml = """
<mujoco><worldbody>
  <body name="a"><freejoint/><geom type="capsule" size=".1 .5" euler="0 90 0"/></body>
  <body name="b" pos="0.2 0 0.5"><freejoint/>
    <geom type="capsule" size=".05 .3" euler="0 90 0"/></body>
</worldbody></mujoco>"""
    system, q0, _ = _load(xml)

    @jax.jit
    def h(q):
        return system.unilateral(q, 0.0, system.params)[0]

    assert abs(h(q0) - (0.5 - 0.15)) < 1e-15  # parallel, overlapping: 0.5 apart
    e = jnp.zeros(14).at[10].set(1e-7)  # b turned about y, out of parallel
    assert abs(h(q0 + e) - h(q0)) < 1e-7 and abs(h(q0 - e) - h(q0)) < 1e-7
    grad = jax.jit(jax.grad(h))(q0)
    assert np.all(np.isfinite(grad))
    np.testing.assert_allclose(grad[7:10], [0, 0, 1], atol=1e-15)  # b's position
    # At a generic state, the gradient is the finite differences'.
    q = q0 + jnp.asarray(np.random.default_rng(0).normal(size=14)) * 0.2
    fd = [(h(q + dq) - h(q - dq)) / 2e-6 for dq in 1e-6 * jnp.eye(14)]
    np.testing.assert_allclose(jax.jit(jax.grad(h))(q), fd, atol=1e-8)


BALL = """
<mujoco model="ball">
  <default><geom condim="{condim}"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1"/>
    <body name="ball" pos="0 0 {z}">
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1"/>
    </body>
  </worldbody>
</mujoco>"""


def test_a_dropped_sphere_lands_at_the_free_fall_time_and_rests():
    drop = 1.0
    system, q0, qd0 = _load(BALL.format(z=0.1 + drop, condim=1))
    assert system.slip is None  # frictionless
    ts = jnp.linspace(0.0, 0.8, 17)
    traj = jl.simulate(system, q0, qd0, t1=0.8, saveat=ts, rtol=1e-10, atol=1e-10)
    assert int(traj.num_events) == 1 and int(traj.event_kind[0]) == jl.EVENT_IMPACT
    landing = np.sqrt(2 * drop / 9.81)
    np.testing.assert_allclose(traj.event_ts[0], landing, rtol=0, atol=1e-8)
    fall = 0.5 * 9.81 * np.minimum(ts, landing) ** 2  # q: the slide from 1.1 m
    np.testing.assert_allclose(traj.q[:, 0], -np.minimum(fall, drop), atol=1e-9)
    assert float(jnp.min(traj.q[:, 0])) >= -drop - 1e-12  # never below the floor
    # At rest, the floor carries the weight: λ = m g.
    mass = float(system.params["body_mass"][1])
    np.testing.assert_allclose(traj.multipliers[-1], [mass * 9.81], rtol=1e-9)


def _with(system, **params):
    return eqx.tree_at(lambda s: s.params, system, {**system.params, **params})


def test_a_ball_with_e_half_bounces_to_e_2k_h_and_comes_to_rest():
    drop, e, g = 0.2, 0.5, 9.81
    system, q0, qd0 = _load(BALL.format(z=0.1 + drop, condim=1))
    system = _with(system, restitution=jnp.asarray(e))
    ts = jnp.linspace(0.7, 1.0, 7)  # after the bounces' Zeno time, 0.606 s
    traj = jl.simulate(system, q0, qd0, t1=1.0, saveat=ts, rtol=1e-10, atol=1e-10)
    assert traj.result == jl.RESULTS.successful
    count = int(traj.num_events)
    assert 5 < count < 40  # log(√(2 g atol)/v₀)/log e ≈ 12 bounces, then at rest
    assert np.all(np.asarray(traj.event_kind[:count]) == jl.EVENT_IMPACT)
    times = np.asarray(traj.event_ts[:count])
    np.testing.assert_allclose(times[0], np.sqrt(2 * drop / g), atol=1e-9)
    # The apex of flight k (between impacts k and k + 1) is g τ²/8 = e^(2k) h.
    k = np.arange(1, 6)
    apexes = g * np.diff(times)[:5] ** 2 / 8
    np.testing.assert_allclose(apexes, drop * e ** (2 * k), rtol=1e-7)
    zeno = np.sqrt(2 * drop / g) * (1 + e) / (1 - e)
    assert zeno - 1e-3 < times[-1] < zeno
    np.testing.assert_allclose(traj.q[:, 0], -drop, atol=1e-10)  # on the floor
    np.testing.assert_allclose(traj.qd[:, 0], 0, atol=1e-10)
    mass = float(system.params["body_mass"][1])
    np.testing.assert_allclose(traj.multipliers[:, 0], mass * g, rtol=1e-9)


FORWARD = {"adjoint": diffrax.ForwardMode()}  # for jax.jacfwd through the solve


def _check_against_central_differences(final, p, step=1e-5):
    """jacfwd of `final` at p is finite and equals its central differences to
    1e-5 of each column's largest entry (at least 1e-2: a column that is all
    but zero is held to 1e-7, above the differences' noise)."""
    jac, value = jax.jit(jax.jacfwd(lambda p: (final(p),) * 2, has_aux=True))(p)
    jac = np.asarray(jac)
    steps = step * jnp.eye(p.shape[0])
    both = jax.jit(jax.vmap(final))(jnp.concatenate([p + steps, p - steps]))
    fd = np.asarray(both[: p.shape[0]] - both[p.shape[0] :]).T / (2 * step)
    assert np.all(np.isfinite(jac))
    for i in range(p.shape[0]):
        scale = max(np.abs(fd[:, i]).max(), 1e-2)
        np.testing.assert_allclose(jac[:, i], fd[:, i], rtol=0, atol=1e-5 * scale)
    return value, jac


def test_gradients_through_a_landing_and_a_bounce():
    # A ball dropped 0.2 m with e = 0.5 is in its first rebound at t1 = 0.3 s;
    # the final slide and its rate against the drop, q̇0, e and the mass.
    system, q0, qd0 = _load(BALL.format(z=0.3, condim=1))

    def final(p):  # (the rise over the 0.2 m drop, q̇0, e, the ball's mass)
        mass = system.params["body_mass"].at[1].set(p[3])
        changed = _with(system, restitution=p[2], body_mass=mass)
        start = q0 + p[:1], qd0 + p[1:2]
        traj = jl.simulate(changed, *start, t1=0.3, rtol=1e-12, atol=1e-12, **FORWARD)
        return jnp.concatenate([traj.q[-1], traj.qd[-1]])

    p = jnp.array([0.0, 0.1, 0.5, 2.0])
    value, jac = _check_against_central_differences(final, p)
    # Closed form: the impact speed v = √(u² + 2gh) at (u + v)/g, then e v up.
    g, h, u, e = 9.81, 0.2, 0.1, 0.5
    v = np.sqrt(u**2 + 2 * g * h)
    tau = 0.3 - (u + v) / g
    expected = [-h + e * v * tau - g * tau**2 / 2, e * v - g * tau]
    np.testing.assert_allclose(value, expected, rtol=1e-9)
    np.testing.assert_allclose(jac[:, 2], [v * tau, v], rtol=1e-7)  # ∂/∂e
    np.testing.assert_allclose(jac[:, 3], 0, atol=1e-12)  # mass: no part in it


# A box's four corners and a flat foot's two caps touch at once (redundant rows,
# solved minimum-norm by the core of branch w5A), and friction in 3-D is the
# core's friction disc (slip of shape (u, 2), branch w5G): these tests run
# where both are in.
def _core_has(feature: str) -> bool:
    from jaxlagrange import _results

    if feature == "min-norm":
        return hasattr(_results.RESULTS, "contact_penetration")
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd,
        unilateral=lambda q, t: q[:1],
        slip=lambda q, qd, t: qd[1:3][None],
        friction=0.5,
    )
    try:
        system.constraints.friction(jnp.zeros(3), jnp.zeros(3), 0.0)
    except ValueError:
        return False
    return True


needs_min_norm = pytest.mark.skipif(
    not _core_has("min-norm"),
    reason="needs the core's minimum-norm redundant contacts (branch w5A)",
)
needs_disc = pytest.mark.skipif(
    not (_core_has("disc") and _core_has("min-norm")),
    reason="needs the core's 3-D friction disc (w5G) and minimum-norm rows (w5A)",
)


BOX = """
<mujoco model="box">
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="{mu}"/>
    <body name="box" pos="0 0 .1"><freejoint/>
      <geom name="box" type="box" size=".2 .15 .1" friction="{mu}"/></body>
  </worldbody>
</mujoco>"""


@needs_disc
def test_a_box_flat_on_the_floor_rests_with_its_weight_shared():
    system, q0, qd0 = _load(BOX.format(mu=0.5))
    traj = jl.simulate(system, q0, qd0, t1=0.2, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(traj.q[-1], q0, atol=1e-12)
    weight = float(system.params["body_mass"][1]) * 9.81
    normal = np.asarray(traj.multipliers[-1, 1:])  # after the quaternion's row
    np.testing.assert_allclose(normal[::2].sum(), weight, rtol=1e-10)  # z = −0.1
    np.testing.assert_allclose(normal[1::2], 0, atol=1e-12)  # the top corners


@needs_disc
def test_a_box_pushed_on_the_floor_stops_after_v0_over_mu_g():
    mu, v0, g = 0.5, 1.0, 9.81
    system, q0, qd0 = _load(BOX.format(mu=mu))
    stop = v0 / (mu * g)
    ts = jnp.array([0.5 * stop, 1.5 * stop])
    traj = jl.simulate(
        system, q0, qd0.at[0].set(v0), t1=1.5 * stop, saveat=ts, rtol=1e-10, atol=1e-10
    )
    t = 0.5 * stop
    np.testing.assert_allclose(traj.q[0, 0], v0 * t - 0.5 * mu * g * t**2, atol=1e-8)
    np.testing.assert_allclose(traj.q[1, 0], v0**2 / (2 * mu * g), atol=1e-8)
    np.testing.assert_allclose(traj.qd[1], 0, atol=1e-8)
    count = int(traj.num_events)
    stick = np.asarray(traj.event_kind[:count]) == jl.EVENT_STICK
    times = np.asarray(traj.event_ts[:count])
    np.testing.assert_allclose(times[stick], stop, atol=1e-8)


INCLINE = """
<mujoco model="incline">
  <worldbody>
    <geom name="slope" type="plane" size="5 5 .1" euler="0 {angle} 0" friction="{mu}"/>
    <body name="ball" pos="{x} 0 {z}"><freejoint/>
      <geom name="ball" type="sphere" size="0.1" friction="{mu}"/></body>
  </worldbody>
</mujoco>"""


@needs_disc
@pytest.mark.parametrize("mu", [0.2, 0.05])
def test_a_sphere_on_an_incline_rolls_or_slips(mu):
    theta, g, t1 = 0.3, 9.81, 0.4
    normal = np.array([np.sin(theta), 0, np.cos(theta)])  # the slope's, tilted by θ
    x, _, z = 0.1 * normal
    xml = INCLINE.format(angle=np.degrees(theta), mu=mu, x=x, z=z)
    system, q0, qd0 = _load(xml)
    traj = jl.simulate(system, q0, qd0, t1=t1, rtol=1e-10, atol=1e-10)
    downhill = np.array([np.cos(theta), 0, -np.sin(theta)])
    rolls = mu >= 2 / 7 * np.tan(theta)
    a = 5 / 7 * g * np.sin(theta) if rolls else g * (np.sin(theta) - mu * np.cos(theta))
    moved = np.asarray(traj.q[-1, :3] - q0[:3])
    np.testing.assert_allclose(moved, 0.5 * a * t1**2 * downhill, atol=1e-8)


SLIDER = """
<mujoco model="slider">
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="0.5"/>
    <body name="ball" pos="0 0 .15">
      <joint name="x" type="slide" axis="1 0 0"/>
      <joint name="z" type="slide" axis="0 0 1"/>
      <geom name="ball" type="sphere" size="0.1" friction="0.3"/></body>
  </worldbody>
</mujoco>"""


@pytest.mark.slow  # 220 s on the loaded machine (jacfwd of a 3-D disc)
@needs_disc
def test_gradients_through_a_landing_and_a_slide_to_rest():
    # A ball on two slides (no rolling), thrown at v = 1 m/s, lands (plastic)
    # after 5 cm at τ = √(2h/g), slides at μ = 0.5 (the floor's, the larger)
    # and stops after v/(μg): x = v τ + v²/(2μg) at t1, against the drop, v,
    # the floor's μ and the mass (no part in it).
    system, q0, qd0 = _load(SLIDER)

    def final(p):  # (the rise over the drop, the throw, μ, the ball's mass)
        friction = system.params["geom_friction"].at[0, 0].set(p[2])
        mass = system.params["body_mass"].at[1].set(p[3])
        changed = _with(system, geom_friction=friction, body_mass=mass)
        start = q0.at[1].add(p[0]), qd0.at[0].set(p[1])
        options = dict(t1=0.4, rtol=1e-12, atol=1e-12, **FORWARD)
        traj = jl.simulate(changed, *start, **options)
        return jnp.concatenate([traj.q[-1], traj.qd[-1]])

    g, h, v, mu = 9.81, 0.05, 1.0, 0.5
    p = jnp.array([0.0, v, mu, float(system.params["body_mass"][1])])
    value, jac = _check_against_central_differences(final, p)
    tau = np.sqrt(2 * h / g)
    np.testing.assert_allclose(
        value, [v * tau + v**2 / (2 * mu * g), -h, 0, 0], atol=1e-9
    )
    expected = [v / (g * tau), tau + v / (mu * g), -(v**2) / (2 * mu**2 * g), 0]
    np.testing.assert_allclose(jac[0], expected, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(jac[1:], 0, atol=1e-9)  # at rest on the floor


ROLLING = """
<mujoco model="rolling">
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" friction="0.6"/>
    <body name="ball" pos="0 0 .15"><freejoint/>
      <geom name="ball" type="sphere" size="0.1" friction="0.3"/></body>
  </worldbody>
</mujoco>"""


@pytest.mark.slow  # its jacfwd traces and compiles for over 10 minutes
@needs_disc
def test_gradients_through_a_landing_a_slide_and_sticking():
    # A solid ball thrown at 1 m/s lands (plastic) after 5 cm, slips at μ = 0.6
    # (the floor's, the larger) and rolls from 2 v/(7 μ g) after: the states in
    # the slip (0.12 s) and rolling (0.25 s) against the drop, the throw, the
    # floor's μ and the mass (the ball's inertia kept: I/(m r²) changes).
    system, q0, qd0 = _load(ROLLING)

    def final(p):  # (the rise over the drop, the throw, μ, the ball's mass)
        friction = system.params["geom_friction"].at[0, 0].set(p[2])
        mass = system.params["body_mass"].at[1].set(p[3])
        changed = _with(system, geom_friction=friction, body_mass=mass)
        start = q0.at[2].add(p[0]), qd0.at[0].set(p[1])
        ts = jnp.array([0.12, 0.25])
        options = dict(t1=0.25, saveat=ts, rtol=1e-12, atol=1e-12, **FORWARD)
        traj = jl.simulate(changed, *start, **options)
        return jnp.concatenate([traj.q.ravel(), traj.qd.ravel()])

    mass = float(system.params["body_mass"][1])
    p = jnp.array([0.0, 1.0, 0.6, mass])
    value, jac = _check_against_central_differences(final, p)
    assert np.abs(jac[:, 2:]).max(0).min() > 1e-3  # μ and the mass matter
    # Closed form: rolling at v/(1 + I/(m r²)) = 5 v/7 at the default mass.
    np.testing.assert_allclose(value[14 + 7], 5 / 7, rtol=1e-9)


def _hopper_drop(t1, tmp_path, monkeypatch, max_events=64):
    monkeypatch.chdir(tmp_path)  # MuJoCo writes its compiler warnings to the cwd
    ready = _load(SUITE / "hopper.xml")
    system, q0, qd0 = ready
    n = len(ready.contacts)  # the contact rows come first, then the joint limits
    h0 = system.unilateral(q0, 0.0, system.params)[:n]
    # The knee moved onto its limit (5°) tilts the foot: its toe is lowest.
    knee = np.radians(5)
    toe = 0.38 - 0.32 * np.cos(knee) - 0.17 * np.sin(knee)
    assert float(h0.min()) == pytest.approx(toe, abs=1e-12)
    ts = jnp.linspace(0.0, t1, 31)
    traj = jl.simulate(
        system, q0, qd0, t1=t1, saveat=ts, rtol=1e-8, atol=1e-8, max_events=max_events
    )
    h = jax.vmap(lambda q: system.unilateral(q, 0.0, system.params))(traj.q)
    assert float(h[:, :n].min()) >= -1e-6
    # In free fall the joints do not move: the toe lands first, after √(2h/g).
    count = int(traj.num_events)
    impacts = np.asarray(traj.event_kind[:count]) == jl.EVENT_IMPACT
    rows = np.asarray(traj.event_constraint[:count])[impacts]
    times = np.asarray(traj.event_ts[:count])[impacts]
    assert rows[0] == int(np.argmin(h0))
    assert ready.contacts[rows[0]].startswith("floor/foot")
    np.testing.assert_allclose(times[0], np.sqrt(2 * toe / 9.81), atol=1e-7)
    return traj


@pytest.mark.slow
@needs_disc
def test_the_dm_control_hopper_lands_on_its_foot(tmp_path, monkeypatch):
    _hopper_drop(0.1, tmp_path, monkeypatch)  # the toe lands at 0.0973 s


@pytest.mark.slow
@needs_disc
def test_the_dm_control_hopper_dropped_settles(tmp_path, monkeypatch):
    # About 700 events: the foot, torso and limits land, rock and slip.
    traj = _hopper_drop(3.0, tmp_path, monkeypatch, max_events=1024)
    np.testing.assert_allclose(traj.qd[-1], 0, atol=1e-6)  # at rest
    # Joint damping and plastic impacts: the energy never rises between saves.
    system = _load(SUITE / "hopper.xml").system
    energy = jax.vmap(lambda q, qd: jl.energy(system, q, qd, 0.0))(traj.q, traj.qd)
    assert float(jnp.max(jnp.diff(energy))) <= 1e-6
    # The torso (at z = 1 + rootz) rests within 1 cm of MuJoCo's 0.06518 m
    # (mj_step at its 5 ms step, 3 s; its soft contacts sink 0.1 mm).
    assert abs(1 + float(traj.q[-1, 1]) - 0.06518) < 0.01


@pytest.mark.slow
@needs_disc
def test_the_dm_control_hopper_takes_its_knee_and_ankle_limits_with_its_foot(
    tmp_path, monkeypatch
):
    # From 0.65 s the foot, the knee's and the ankle's limits land within µs:
    # each plastic impact left another row separating at ~1e-6 m/s, which
    # landed again at once, until `max_events` ran out at 0.7244 s. The rows
    # held together (`_complementarity`), 34 events reach 0.73 s.
    traj = _hopper_drop(0.73, tmp_path, monkeypatch)
    count = int(traj.num_events)
    times = np.asarray(traj.event_ts[:count])
    assert count <= 40
    assert np.sum(np.abs(times - 0.6537) < 1e-3) <= 6
