"""Actuators as MuJoCo's `mj_fwdActuation` drives them: gain·ctrl + bias, both
affine in the length ℓ (gear·qpos of a hinge or slide, gear·L of a tendon) and
ℓ̇, ctrl and force clipped to their ranges, applied as gear·force."""

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
    single = m.actuator_ctrlnum[a] == m.actuator_outnum[a] == 1
    if not single or m.actuator_delay[a] or m.actuator_plugin[a] >= 0:
        return "several inputs or outputs, delays or plugins"
    joint = kind in JOINTS and m.jnt_type[target] in (HINGE, SLIDE)
    if joint or (kind == TENDON and target in tendons.imported):
        return None
    return "site, body, slider-crank, ball, free or wrapping-tendon transmissions"


def _active(m) -> list[int]:
    """The actuators MuJoCo applies: actuation on, their group not disabled."""
    on, group = not _model.disabled(m, "ACTUATION"), m.actuator_group
    off = [0 <= g <= 30 and m.opt.disableactuator >> g & 1 for g in group]
    return [a for a in range(m.nactuator) if on and not off[a]]


def read(m, tendons) -> Actuators:
    ids = np.array([a for a in _active(m) if _reason(m, a, tendons) is None], int)
    kind, target = m.actuator_trntype[ids], m.actuator_trnid[ids, 0]
    joint = m.jnt_qposadr[np.where(kind == TENDON, 0, target)]
    source = np.where(kind == TENDON, m.nq + target, joint)
    ctrl = m.actuator_ctrladr[ids]
    clamp = m.actuator_ctrllimited[ctrl] & (not _model.disabled(m, "CLAMPCTRL"))
    inf, gear = np.array([-np.inf, np.inf]), m.actuator_gear[m.actuator_outadr[ids], 0]
    gain = np.where(m.actuator_gaintype[ids, None] == AFFINE, 1.0, [1.0, 0, 0])
    bias = np.where(m.actuator_biastype[ids, None] == AFFINE, np.ones(3), 0.0)
    ctrl_range = np.where(clamp[:, None], m.actuator_ctrlrange[ctrl], inf)
    limited = m.actuator_forcelimited[ids, None]
    force_range = np.where(limited, m.actuator_forcerange[ids], inf)
    return Actuators(ids, ctrl, source, gear, gain, bias, ctrl_range, force_range)


def forces(actuators: Actuators, ctrl, position, rate, params):
    """The actuators' generalized forces along (q, tendon lengths), driven by `ctrl`."""
    a, source, gear = actuators.ids, actuators.source, actuators.gear
    length, velocity = gear * position[source], gear * rate[source]
    terms = jnp.stack([jnp.ones_like(length), length, velocity], -1)
    gain = jnp.sum(params["actuator_gainprm"][a] * actuators.gain * terms, -1)
    bias = jnp.sum(params["actuator_biasprm"][a] * actuators.bias * terms, -1)
    u = jnp.clip(ctrl[actuators.ctrl], *actuators.ctrlrange.T)
    force = jnp.clip(gain * u + bias, *actuators.forcerange.T)
    return jnp.zeros_like(position).at[source].add(gear * force)


def default_params(m, actuators: Actuators) -> dict[str, np.ndarray]:
    """The actuators' gain and bias params (3 columns) and `ctrl` (zeros), if any."""
    if not actuators.ids.size:
        return {}
    gain, bias = m.actuator_gainprm[:, :3], m.actuator_biasprm[:, :3]
    return {"actuator_gainprm": gain, "actuator_biasprm": bias, "ctrl": np.zeros(m.nu)}


def not_imported(m, tendons) -> list[str]:
    """The actuators left out, by why, and the actuator force ranges of joints."""
    left = defaultdict(list)
    for a in _active(m):
        reason = _reason(m, a, tendons)
        if reason:
            left[f"actuators with {reason}"].append(_model.name_of(m, "ACTUATOR", a))
    ranged = (("JOINT", m.jnt_actfrclimited), ("TENDON", m.tendon_actfrclimited))
    for kind, limited in ranged if _active(m) else ():
        names = [_model.name_of(m, kind, i) for i in np.flatnonzero(limited)]
        left["actuator force ranges of joints and tendons"] += names
    return [f"{k} ({', '.join(names)})" for k, names in left.items() if names]
