"""Joint limits as unilateral constraints h ≥ 0, as MuJoCo's `mj_instantiateLimit`
reads them: a limited hinge or slide gives q − lo and hi − q (`jnt_range`, in qpos
units), a limited ball joint max(range) − its rotation angle."""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from ._model import BALL, enabled, name_of


class Limits(NamedTuple):
    address: np.ndarray  # qpos address of each hinge or slide row
    sign: np.ndarray  # +1: q − lo ≥ 0, −1: hi − q ≥ 0
    bound: np.ndarray  # lo or hi
    balls: np.ndarray  # qpos addresses of the limited ball joints' quaternions
    cones: np.ndarray  # their largest rotation angles
    names: tuple[str, ...]  # one per row: "the lower limit of joint 'knee'"


def read(m) -> Limits | None:
    """The model's active joint limits (None: none, or disabled)."""
    if not enabled(m, "LIMIT"):
        return None
    lines = [j for j in range(m.njnt) if m.jnt_limited[j] and m.jnt_type[j] > BALL]
    balls = [j for j in range(m.njnt) if m.jnt_limited[j] and m.jnt_type[j] == BALL]
    if not lines and not balls:
        return None
    names = [repr(name_of(m, "JOINT", j)) for j in lines + balls]
    sides = [f"the {s} limit of joint {n}" for n in names for s in ("lower", "upper")]
    cones = [f"the cone of joint {n}" for n in names[len(lines) :]]
    return Limits(
        np.repeat(m.jnt_qposadr[lines], 2),
        np.tile([1.0, -1.0], len(lines)),
        np.asarray(m.jnt_range[lines], float).reshape(-1),
        np.asarray(m.jnt_qposadr[balls], int),
        np.max(m.jnt_range[balls], axis=1) if balls else np.zeros(0),
        (*sides[: 2 * len(lines)], *cones),
    )


def rows(limits: Limits, q):
    """h(q) ≥ 0: the hinge and slide rows, then one per limited ball joint."""
    h = limits.sign * (q[limits.address] - limits.bound)
    if not limits.balls.size:
        return h
    p = q[limits.balls[:, None] + np.arange(4)]
    s = jnp.sum(p[:, 1:] ** 2, -1)
    # |v| with a zero gradient at v = 0 (no rotation: far from any cone).
    v = jnp.where(s > 0, jnp.sqrt(jnp.where(s > 0, s, 1.0)), 0.0)
    return jnp.concatenate([h, limits.cones - 2 * jnp.arctan2(v, jnp.abs(p[:, 0]))])


def onto(limits: Limits | None, qpos0: np.ndarray) -> tuple[np.ndarray, list[str]]:
    """qpos0 with each hinge and slide outside its range moved onto the nearer limit."""
    q0, moved = np.array(qpos0, float), []
    # E.g. the hopper's knee, whose qpos0 of 0 is outside its range: 0 → 5°.
    for i in range(0, len(limits.address), 2) if limits else ():
        a, (lo, hi) = limits.address[i], limits.bound[i : i + 2]
        if not lo <= q0[a] <= hi:
            joint = limits.names[i].removeprefix("the lower limit of ")
            moved.append(f"{joint} from {q0[a]:.4g} to {np.clip(q0[a], lo, hi):.4g}")
            q0[a] = np.clip(q0[a], lo, hi)
    return q0, moved
