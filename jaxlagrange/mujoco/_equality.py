"""Equality constraints held exactly as holonomic rows g(q) = 0, with MuJoCo's
`mj_instantiateEquality` semantics on the compiled `eq_data`:

- connect (3 rows): the point `eq_data[0:3]` of body 1 and `eq_data[3:6]` of
  body 2 (or the two sites) coincide, p₁ − p₂ in the world frame;
- weld (6 rows): the point `eq_data[3:6]` (relpos) of body 1 and the anchor
  `eq_data[0:3]` of body 2 coincide, and R₂ᵀ R₁ R_rel = I (relquat
  `eq_data[6:10]`; for sites, their frames): the rows ¼ vee(E − Eᵀ) of
  E = R₂ᵀ R₁ R_rel, MuJoCo's Im(q̄₂ ⊗ q₁ ⊗ q_rel) to first order (none when
  `torquescale` is 0);
- joint (1 row): q_a − qpos0_a = Σₖ eq_dataₖ (q_b − qpos0_b)ᵏ, k = 0 … 4 (only
  eq_data₀ without a second joint).

Only the constraints active at the start (`eq_active0`) are held.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from .. import rigid
from ._model import _disabled


CONNECT, WELD, JOINT = 0, 1, 2  # mujoco.mjtEq


class Equality(NamedTuple):
    kind: int
    bodies: tuple[int, int]  # connect, weld: the two bodies (0: the world)
    points: np.ndarray  # (2, 3): the two points, each in its body's frame
    frames: np.ndarray | None  # weld: (2, 3, 3), the frames to align
    joints: tuple[int, int]  # joint: qpos addresses of joint1, joint2 (−1: none)
    ref: np.ndarray  # joint: qpos0 at both
    poly: np.ndarray  # joint: eq_data[:5]


def read(m) -> tuple[Equality, ...]:
    """The active connect, weld and joint equalities (none when disabled)."""
    import mujoco

    if _disabled(m, "EQUALITY") or _disabled(m, "CONSTRAINT"):
        return ()
    out = []
    for i in range(m.neq):
        kind, data = int(m.eq_type[i]), np.asarray(m.eq_data[i], float)
        ids = int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
        if not m.eq_active0[i] or kind not in (CONNECT, WELD, JOINT):
            continue
        if kind == JOINT:
            joints = tuple(int(m.jnt_qposadr[j]) if j >= 0 else -1 for j in ids)
            ref = np.array([m.qpos0[a] if a >= 0 else 0.0 for a in joints])
            out.append(Equality(kind, (0, 0), None, None, joints, ref, data[:5]))
            continue
        if m.eq_objtype[i] == mujoco.mjtObj.mjOBJ_SITE:
            bodies = tuple(int(m.site_bodyid[s]) for s in ids)
            points = m.site_pos[list(ids)]
            frames = np.stack([_matrix(m.site_quat[s]) for s in ids])
        elif kind == CONNECT:
            bodies, points, frames = ids, data[:6].reshape(2, 3), None
        else:  # weld: relpos on body 1, the anchor on body 2
            bodies, points = ids, data[[3, 4, 5, 0, 1, 2]].reshape(2, 3)
            frames = np.stack([_matrix(data[6:10]), np.eye(3)])
        if kind == WELD and data[10] == 0:  # torquescale 0: position only
            kind = CONNECT
        points = np.array(points)
        out.append(Equality(kind, bodies, points, frames, (-1, -1), None, None))
    return tuple(out)


def _matrix(quat) -> np.ndarray:
    quat = np.asarray(quat, float)
    return np.asarray(rigid.quaternion_to_matrix(quat / np.linalg.norm(quat)))


def residuals(equalities: tuple[Equality, ...], x, r, q):
    """g(q), given the bodies' frames x (nbody, 3) and r (nbody, 3, 3) at q."""
    rows = []
    for e in equalities:
        if e.kind == JOINT:
            a, b = e.joints
            d = q[b] - e.ref[1] if b >= 0 else 0.0
            value = e.poly[0] + sum(c * d**k for k, c in enumerate(e.poly[1:], 1))
            rows.append(jnp.reshape(q[a] - e.ref[0] - value, 1))
            continue
        (b1, b2), (p1, p2) = e.bodies, e.points
        rows.append(x[b1] + r[b1] @ p1 - x[b2] - r[b2] @ p2)
        if e.kind == WELD:
            E = (r[b2] @ e.frames[1]).T @ r[b1] @ e.frames[0]
            vee = [E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]]
            rows.append(0.25 * jnp.stack(vee))
    return jnp.concatenate(rows)
