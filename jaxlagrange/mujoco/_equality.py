"""Equality constraints as holonomic rows g(q) = 0 on the compiled `eq_data`, as
MuJoCo's `mj_instantiateEquality`: connect p₁ − p₂ (3 rows), weld p₁ − p₂ and
¼ vee(E − Eᵀ), E = R₂ᵀ R₁ R_rel (6; Im(q̄₂ ⊗ q₁ ⊗ q_rel) to first order), joint
q_a − qpos0_a − Σₖ eq_dataₖ (q_b − qpos0_b)ᵏ (1). Only those in `eq_active0`.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ._model import enabled, quat_matrix


CONNECT, WELD, JOINT = 0, 1, 2  # mujoco.mjtEq


class Equality(NamedTuple):
    kind: int
    ids: tuple[int, int]  # the bodies (0: the world), or joints' qpos addresses
    data: tuple  # the points (2, 3) [and frames (2, 3, 3)], or qpos0s and poly


def read(m) -> tuple[Equality, ...]:
    """The active connect, weld and joint equalities (none when disabled)."""
    if not enabled(m, "EQUALITY"):
        return ()
    out = []
    for i in np.flatnonzero(m.eq_active0 & (m.eq_type <= JOINT)):
        kind, data = int(m.eq_type[i]), np.asarray(m.eq_data[i], float)
        ids = int(m.eq_obj1id[i]), int(m.eq_obj2id[i])
        if kind == JOINT:
            ids = tuple(int(m.jnt_qposadr[j]) if j >= 0 else -1 for j in ids)
            ref = np.array([m.qpos0[a] for a in ids])  # (an unused last one for −1)
            out.append(Equality(kind, ids, (ref, data[:5])))
            continue
        if m.eq_objtype[i] == 6:  # mujoco.mjtObj.mjOBJ_SITE
            points, quats = m.site_pos[list(ids)], m.site_quat[list(ids)]
            ids = tuple(int(m.site_bodyid[s]) for s in ids)
        elif kind == CONNECT:
            points, quats = data[:6].reshape(2, 3), np.eye(1, 4).repeat(2, 0)
        else:  # weld: relpos on body 1, the anchor on body 2; relquat
            points = data[[3, 4, 5, 0, 1, 2]].reshape(2, 3)
            quats = [data[6:10], [1, 0, 0, 0]]
        if kind == WELD and data[10] == 0:  # torquescale 0: position only
            kind = CONNECT
        frames = [quat_matrix(p / np.linalg.norm(p)) for p in np.asarray(quats, float)]
        out.append(Equality(kind, ids, (np.array(points), frames)))
    return tuple(out)


def residuals(equalities: tuple[Equality, ...], x, r, q):
    """g(q), given the bodies' frames x (nbody, 3) and r (nbody, 3, 3) at q."""
    rows = []
    for kind, (a, b), data in equalities:
        if kind == JOINT:
            (ref_a, ref_b), poly = data
            d = q[b] - ref_b if b >= 0 else 0.0
            value = poly[0] + sum(c * d**k for k, c in enumerate(poly[1:], 1))
            rows.append(jnp.reshape(q[a] - ref_a - value, 1))
            continue
        (p, s), frames = data
        rows.append(x[a] + r[a] @ p - x[b] - r[b] @ s)
        if kind == WELD:
            E = (r[b] @ frames[1]).T @ r[a] @ frames[0]
            vee = [E[2, 1] - E[1, 2], E[0, 2] - E[2, 0], E[1, 0] - E[0, 1]]
            rows.append(0.25 * jnp.stack(vee))
    return jnp.concatenate(rows)
