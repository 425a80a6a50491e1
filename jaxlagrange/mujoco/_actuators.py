"""Actuators as MuJoCo's `mj_fwdActuation` drives them: ctrl clipped to
`ctrlrange`, then force = gain·ctrl + bias with gain = g₀ + g₁ℓ + g₂ℓ̇ and
bias = b₀ + b₁ℓ + b₂ℓ̇ (ℓ = gear·qpos of a hinge or slide, or gear·length of a
tendon), clipped to `forcerange`, and applied as gear·force along the
transmission (the tendon's length gradient)."""

from collections import defaultdict
from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _model
from ._model import HINGE, SLIDE


JOINTS, TENDON = (0, 1), 3  # mujoco.mjtTrn: joint, joint in parent; tendon
AFFINE = 1  # mujoco.mjtGain / mjtBias: fixed gain 0, no bias 0, affine 1


class Actuators(NamedTuple):
    ids: np.ndarray  # the imported actuators
    ctrl: np.ndarray  # their ctrl addresses
    source: np.ndarray  # index into (q, tendon lengths): qpos address or nq + tendon
    gear: np.ndarray
    gain: np.ndarray  # (k, 3) masks of the gainprm and biasprm columns read
    bias: np.ndarray
    ctrlrange: np.ndarray  # (k, 2), ±inf where not clipped
    forcerange: np.ndarray


def _reason(m, a: int, tendons) -> str | None:
    """Why actuator `a` is not imported, or None where it is."""
    kind, target = int(m.actuator_trntype[a]), int(m.actuator_trnid[a, 0])
    if m.actuator_dyntype[a]:
        return "activation dynamics"
    if m.actuator_gaintype[a] > AFFINE or m.actuator_biastype[a] > AFFINE:
        return "muscle, DC-motor, PID, SO(3) or user gain or bias"
    if m.actuator_ctrlnum[a] != 1 or m.actuator_outnum[a] != 1 or m.actuator_delay[a]:
        return "several inputs or outputs, or delays"
    if m.actuator_plugin[a] >= 0:
        return "plugins"
    if kind in JOINTS and m.jnt_type[target] in (HINGE, SLIDE):
        return None
    if kind == TENDON and target in tendons.imported:
        return None
    return "site, body, slider-crank, ball or free joint or geom-wrapping tendon transmission"


def _active(m) -> list[int]:
    """The actuators MuJoCo applies: actuation on, their group not disabled."""
    on, group = not _model._disabled(m, "ACTUATION"), m.actuator_group
    off = [0 <= g <= 30 and m.opt.disableactuator >> g & 1 for g in group]
    return [a for a in range(m.nactuator) if on and not off[a]]


def read(m, tendons) -> Actuators:
    ids = np.array([a for a in _active(m) if _reason(m, a, tendons) is None], int)
    kind, target = m.actuator_trntype[ids], m.actuator_trnid[ids, 0]
    source = np.where(kind == TENDON, m.nq + target, m.jnt_qposadr[target])
    ctrl = m.actuator_ctrladr[ids]
    clamp = m.actuator_ctrllimited[ctrl] & (not _model._disabled(m, "CLAMPCTRL"))
    unbounded = np.array([-np.inf, np.inf])
    return Actuators(
        ids,
        ctrl,
        source,
        m.actuator_gear[m.actuator_outadr[ids], 0],
        np.where(m.actuator_gaintype[ids, None] == AFFINE, 1.0, [1.0, 0, 0]),
        np.where(m.actuator_biastype[ids, None] == AFFINE, np.ones(3), 0.0),
        np.where(clamp[:, None], m.actuator_ctrlrange[ctrl], unbounded),
        np.where(m.actuator_forcelimited[ids, None], m.actuator_forcerange[ids], unbounded),
    )


def forces(actuators: Actuators, ctrl, position, rate, params):
    """The generalized forces along (q, tendon lengths) of the actuators driven by
    `ctrl` (nu,), at `position` = (q, L) moving at `rate` = (q̇, L̇)."""
    a, source, gear = actuators.ids, actuators.source, actuators.gear
    length, velocity = gear * position[source], gear * rate[source]
    terms = jnp.stack([jnp.ones_like(length), length, velocity], -1)
    gain = jnp.sum(params["actuator_gainprm"][a] * actuators.gain * terms, -1)
    bias = jnp.sum(params["actuator_biasprm"][a] * actuators.bias * terms, -1)
    u = jnp.clip(ctrl[actuators.ctrl], *actuators.ctrlrange.T)
    force = jnp.clip(gain * u + bias, *actuators.forcerange.T)
    return jnp.zeros_like(position).at[source].add(gear * force)


def default_params(m, actuators: Actuators) -> dict[str, np.ndarray]:
    """`actuator_gainprm`, `actuator_biasprm` (their first 3 columns) and
    `ctrl` (zeros), where an actuator is imported."""
    if not actuators.ids.size:
        return {}
    gain, bias = m.actuator_gainprm[:, :3], m.actuator_biasprm[:, :3]
    return {"actuator_gainprm": gain, "actuator_biasprm": bias, "ctrl": np.zeros(m.nu)}


def not_imported(m, tendons) -> list[str]:
    """The actuators left out, grouped by why, and the joints' and tendons'
    actuator force ranges."""
    left = defaultdict(list)
    for a in _active(m):
        reason = _reason(m, a, tendons)
        if reason:
            left[f"actuators with {reason}"].append(_model._name(m, "ACTUATOR", a))
    for kind, limited in (("JOINT", m.jnt_actfrclimited), ("TENDON", m.tendon_actfrclimited)):
        for i in np.flatnonzero(limited) if _active(m) else ():
            left["actuator force ranges of joints and tendons"].append(_model._name(m, kind, i))
    return [f"{phrase} ({', '.join(names)})" for phrase, names in left.items()]
