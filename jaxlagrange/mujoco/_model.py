"""Reading an `MjModel`: the source, the kinematic tree as NumPy constants, the
default params, and the one warning that names what is not imported."""

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import rigid


HINGE, SLIDE, BALL, FREE = 3, 2, 1, 0  # mujoco.mjtJoint


class Joint(NamedTuple):  # with its addresses in qpos (`q`) and qvel (`v`)
    kind: int
    q: int
    v: int
    pos: np.ndarray
    axis: np.ndarray
    qpos0: float


class Body(NamedTuple):
    parent: int
    pos: np.ndarray
    rot: np.ndarray  # body_quat as a matrix
    irot: np.ndarray  # body_iquat as a matrix
    joints: tuple[Joint, ...]


class Tree(NamedTuple):  # what the Lagrangian needs of the model, as constants
    bodies: tuple[Body, ...]  # bodies 1 … nbody − 1 (the world is fixed)
    gravity: bool
    spring: bool
    damper: bool
    qpos_spring: np.ndarray
    norm_inertia: tuple[float, ...]  # per ball/free joint, see `_system`
    motors: tuple[np.ndarray, ...]  # actuators, their qpos addresses, gain·gear


def read_source(source: Any):
    """An `MjModel` from a path, an MJCF string or an `MjModel`, as `load` takes."""
    import mujoco

    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, str) and source.lstrip().startswith("<"):
        what, read = "the MJCF string", mujoco.MjModel.from_xml_string
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"No MuJoCo model file at {str(path)!r}.")
        what, read, source = f"{str(path)!r}", mujoco.MjModel.from_xml_path, str(path)
    else:
        raise ValueError(
            "`source` must be a path to an MJCF or URDF file, an MJCF string or a "
            f"mujoco.MjModel, got {type(source).__name__}."
        )
    try:
        return read(source)
    except ValueError as e:  # MuJoCo's compiler and parser errors
        message = " ".join(str(e).split())
        raise ValueError(f"MuJoCo rejects the model {what}: {message}") from None


def _quat_matrix(p) -> np.ndarray:
    return np.asarray(rigid.quaternion_to_matrix(np.asarray(p, float)))


def _disabled(m, flag: str) -> bool:
    import mujoco

    return bool(m.opt.disableflags & getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}"))


def _name(m, kind: str, i: int) -> str:
    import mujoco

    name = mujoco.mj_id2name(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), i)
    return name or f"{kind.lower()} {i}"


def model_name(m) -> str:
    return bytes(m.names).split(b"\0", 1)[0].decode() or "mujoco"


def coordinates(m) -> tuple[str, ...]:
    """One label per qpos entry, from the joint names."""
    parts = {HINGE: [""], SLIDE: [""], BALL: list("wxyz")}
    parts[FREE] = ["x", "y", "z", "qw", "qx", "qy", "qz"]
    return tuple(
        f"{_name(m, 'JOINT', j)}{'.' * bool(p)}{p}"
        for j in range(m.njnt)
        for p in parts[int(m.jnt_type[j])]
    )


def _motor(m, a: int) -> bool:
    """A fixed-gain force on one hinge or slide: no bias, no activation."""
    import mujoco

    joint = int(m.actuator_trnid[a, 0])
    return (
        m.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
        and m.jnt_type[joint] in (HINGE, SLIDE)
        and m.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        and m.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        and m.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_NONE
    )


def not_imported(m) -> list[str]:
    """What the model has that the Lagrangian leaves out, one phrase each."""

    def listed(kind, ids):
        return ", ".join(_name(m, kind, i) for i in ids)

    on = {k: not _disabled(m, k) for k in ("ACTUATION", "LIMIT", "SPRING")}
    limited = [j for j in range(m.njnt) if m.jnt_limited[j]]
    sprung = [j for j in range(m.njnt) if m.jnt_type[j] <= BALL and m.jnt_stiffness[j]]
    others = [a for a in range(m.nu) if not _motor(m, a)]
    limits = m.actuator_ctrllimited + m.actuator_forcelimited
    ranged = [a for a in range(m.nu) if limits[a]]
    checks = [
        (limited and on["LIMIT"], f"joint limits ({listed('JOINT', limited)})"),
        (m.ntendon, f"tendons ({m.ntendon})"),
        (m.neq and not _disabled(m, "EQUALITY"), f"equality constraints ({m.neq})"),
        (
            m.opt.density or m.opt.viscosity or np.any(m.opt.wind),
            "fluid forces (opt.density, viscosity, wind)",
        ),
        (
            others and on["ACTUATION"],
            "actuators other than motors on hinges and slides "
            f"({listed('ACTUATOR', others)})",
        ),
        (
            ranged and on["ACTUATION"],
            f"ctrl and force ranges (not clamped: {listed('ACTUATOR', ranged)})",
        ),
        (
            np.any(m.dof_frictionloss) and not _disabled(m, "FRICTIONLOSS"),
            "joint friction loss",
        ),
        (np.any(m.body_gravcomp), "gravity compensation"),
        (
            sprung and on["SPRING"],
            f"stiffness of ball and free joints ({listed('JOINT', sprung)})",
        ),
        (
            np.any(m.jnt_stiffnesspoly) or np.any(m.dof_dampingpoly),
            "nonlinear joint stiffness or damping",
        ),
        (
            np.any(m.actuator_damping) or np.any(m.actuator_armature),
            "actuator damping and armature",
        ),
    ]
    return [phrase for condition, phrase in checks if condition]


def tree(m) -> Tree:
    bodies = []
    for b in range(1, m.nbody):
        ids = range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b])
        joints = tuple(
            Joint(
                *(int(x[j]) for x in (m.jnt_type, m.jnt_qposadr, m.jnt_dofadr)),
                np.array(m.jnt_pos[j]),
                np.array(m.jnt_axis[j]),
                float(m.qpos0[m.jnt_qposadr[j]]),
            )
            for j in ids
        )
        rot, irot = (_quat_matrix(x[b]) for x in (m.body_quat, m.body_iquat))
        parent, pos = int(m.body_parentid[b]), np.array(m.body_pos[b])
        bodies.append(Body(parent, pos, rot, irot, joints))
    # The inertia given to a quaternion's norm direction: M's diagonal at qpos0
    # for its angular dofs (it changes only the multiplier, so any size of the
    # body's moments keeps M well conditioned).
    norm = tuple(
        float(np.mean(m.dof_M0[j.v + 3 * (j.kind == FREE) :][:3]))
        for b in bodies
        for j in b.joints
        if j.kind in (BALL, FREE)
    )
    actuation = not _disabled(m, "ACTUATION")
    motors = [a for a in range(m.nu) if actuation and _motor(m, a)]
    joints = m.actuator_trnid[motors, 0]
    gains = m.actuator_gear[motors, 0] * m.actuator_gainprm[motors, 0]
    motors = (np.array(motors, int), np.array(m.jnt_qposadr[joints], int), gains)
    return Tree(
        tuple(bodies),
        not _disabled(m, "GRAVITY"),
        not _disabled(m, "SPRING"),
        not _disabled(m, "DAMPER"),
        np.array(m.qpos_spring),
        norm,
        motors,
    )


def default_params(m, tree: Tree) -> dict[str, np.ndarray]:
    """The params named after the MjModel fields; those a disable flag turns off
    (or, for `ctrl`, a model without actuators) are absent."""
    params = {"body_mass": m.body_mass, "body_inertia": m.body_inertia}
    params.update(body_ipos=m.body_ipos, dof_armature=m.dof_armature)
    for on, key, value in (
        (tree.damper, "dof_damping", m.dof_damping),
        (tree.spring, "jnt_stiffness", m.jnt_stiffness),
        (tree.gravity, "gravity", m.opt.gravity),
        (m.nu and not _disabled(m, "ACTUATION"), "ctrl", np.zeros(m.nu)),
    ):
        if on:
            params[key] = value
    return {k: np.array(v, dtype=float) for k, v in params.items()}
