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
    tendons: Any = None  # `_tendons.Tendons` and `_actuators.Actuators`, set by load
    actuators: Any = None
    limits: Any = None  # `_limits.Limits` or None
    equalities: tuple = ()  # `_equality.Equality`s
    inertial: Any = None  # `_physical.Bodies`: what a mass or inertia may be


def read_source(source: Any, assets: dict[str, bytes] | None = None):
    """An `MjModel` from a path, MJCF text, an `MjModel` or dm_control's model."""
    import mujoco

    if isinstance(getattr(source, "ptr", None), mujoco.MjModel):
        source = source.ptr  # dm_control's wrapper of the MjModel
    if isinstance(source, mujoco.MjModel):
        return source
    if isinstance(source, bytes | bytearray):
        source = bytes(source).decode("utf-8-sig")
    if isinstance(source, str) and source.lstrip("\ufeff \t\r\n").startswith("<"):
        what, read = "the MJCF string", mujoco.MjModel.from_xml_string
        source = source.lstrip("\ufeff")
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        if not path.is_file():
            raise ValueError(f"No MuJoCo model file at {str(path)!r}.")
        what, read, source = f"{str(path)!r}", mujoco.MjModel.from_xml_path, str(path)
    else:
        raise ValueError(
            "`source` must be a path to an MJCF or URDF file, MJCF text (str or "
            "bytes), a mujoco.MjModel or dm_control's physics.model, got "
            f"{type(source).__name__}."
        )
    try:
        return read(source, assets)
    except ValueError as e:  # MuJoCo's compiler and parser errors, as it words them
        raise ValueError(f"MuJoCo cannot load {what}:\n{str(e).strip()}") from None


def quat_matrix(p) -> np.ndarray:
    return np.asarray(rigid.quaternion_to_matrix(np.asarray(p, float)))


def disabled(m, flag: str) -> bool:
    import mujoco

    return bool(m.opt.disableflags & getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag}"))


def enabled(m, kind: str) -> bool:
    """Whether the constraints of `kind` are on: neither they nor all are off."""
    return not disabled(m, kind) and not disabled(m, "CONSTRAINT")


def name_of(m, kind: str, i: int) -> str:
    import mujoco

    name = mujoco.mj_id2name(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), i)
    return name or f"{kind.lower()} {i}"


def model_name(m) -> str:
    return bytes(m.names).split(b"\0", 1)[0].decode() or "mujoco"


def not_imported(m) -> list[str]:
    """What the model has that the Lagrangian leaves out, one phrase each."""

    def listed(kind, ids):
        return ", ".join(name_of(m, kind, i) for i in ids)

    held = enabled(m, "EQUALITY")
    equalities = [  # the flex kinds of mujoco.mjtEq (tendons: `_tendons`)
        f"flex {name_of(m, 'EQUALITY', i)}"
        for i in range(m.neq)
        if m.eq_type[i] > 3 and m.eq_active0[i] and held
    ]
    sprung = [j for j in range(m.njnt) if m.jnt_type[j] <= BALL and m.jnt_stiffness[j]]
    fluid = m.opt.density or m.opt.viscosity or np.any(m.opt.wind)
    friction = np.any(m.dof_frictionloss) and not disabled(m, "FRICTIONLOSS")
    springs = sprung and not disabled(m, "SPRING")
    poly = np.any(m.jnt_stiffnesspoly) or np.any(m.dof_dampingpoly)
    geared = np.any(m.actuator_damping) or np.any(m.actuator_armature)
    checks = [
        (equalities, f"equality constraints ({', '.join(equalities)})"),
        (fluid, "fluid forces (opt.density, viscosity, wind)"),
        (friction, "joint friction loss"),
        (np.any(m.body_gravcomp), "gravity compensation"),
        (springs, f"stiffness of ball and free joints ({listed('JOINT', sprung)})"),
        (poly, "nonlinear joint stiffness or damping"),
        (geared, "actuator damping and armature"),
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
        rot, irot = (quat_matrix(x[b]) for x in (m.body_quat, m.body_iquat))
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
    return Tree(
        tuple(bodies),
        not disabled(m, "GRAVITY"),
        not disabled(m, "SPRING"),
        not disabled(m, "DAMPER"),
        np.array(m.qpos_spring),
        norm,
    )


def default_params(m, tree: Tree) -> dict[str, np.ndarray]:
    """The params named after the MjModel fields, but those a disable flag turns off."""
    params = {"body_mass": m.body_mass, "body_inertia": m.body_inertia}
    params.update(body_ipos=m.body_ipos, body_iquat=m.body_iquat)
    params.update(dof_armature=m.dof_armature)
    for on, key, value in (
        (tree.damper, "dof_damping", m.dof_damping),
        (tree.spring, "jnt_stiffness", m.jnt_stiffness),
        (tree.gravity, "gravity", m.opt.gravity),
        (tree.limits is not None or tree.tendons.limited.size, "restitution", 0.0),
    ):
        if on:
            params[key] = value
    return {k: np.array(v, dtype=float) for k, v in params.items()}
