"""Geom contacts of loaded MuJoCo models: the pairs MuJoCo's filter collides, h
equal to `mj_collision`'s distance, slips equal to MuJoCo's contact-frame
velocities, μ mixed as MuJoCo mixes it, and landings with exact event times."""

import warnings
from pathlib import Path

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
        h = np.asarray(system.unilateral(q, 0.0, system.params))
        slip = np.asarray(system.slip(q, qd, 0.0, system.params))
        # The slip as a vector: along the tangents of each row (u, 2, 3).
        tangents = _contacts._witnesses(contacts, *_system._frames(tree, q))[-1]
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
