"""Reading an `MjModel`: the source, the kinematic tree as NumPy constants, the
default params, and the one warning that names what is not imported."""

import os
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np


HINGE, SLIDE, BALL, FREE = 3, 2, 1, 0  # mujoco.mjtJoint


class Joint(NamedTuple):
    """One joint, with its addresses in qpos (`q`) and qvel (`v`)."""

    id: int
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


class Tree(NamedTuple):
    """What the Lagrangian needs of the model, as constants."""

    bodies: tuple[Body, ...]  # bodies 1 … nbody − 1 (the world is fixed)
    gravity: bool
    spring: bool
    damper: bool
    qpos_spring: np.ndarray
    norm_inertia: tuple[float, ...]  # per ball/free joint, see `_system`
    motors: tuple[tuple[int, int, float], ...]  # (actuator, qpos address, gain·gear)


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
    w, x, y, z = np.asarray(p, float) / np.linalg.norm(p)
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def _disabled(m, flag: str) -> bool:
    import mujoco

    return bool(m.opt.disableflags & int(getattr(mujoco.mjtDisableBit, flag)))


def _name(m, kind: str, i: int) -> str:
    import mujoco

    name = mujoco.mj_id2name(m, getattr(mujoco.mjtObj, f"mjOBJ_{kind}"), i)
    return name or f"{kind.lower()} {i}"


def model_name(m) -> str:
    return bytes(m.names).split(b"\0", 1)[0].decode() or "mujoco"


def coordinates(m) -> tuple[str, ...]:
    """One label per qpos entry, from the joint names."""
    labels = []
    for j in range(m.njnt):
        name = _name(m, "JOINT", j)
        parts = {
            HINGE: [""],
            SLIDE: [""],
            BALL: ["w", "x", "y", "z"],
            FREE: ["x", "y", "z", "qw", "qx", "qy", "qz"],
        }[int(m.jnt_type[j])]
        labels += [f"{name}.{p}" if p else name for p in parts]
    return tuple(labels)


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


def _contacts(m) -> bool:
    """Whether two geoms of different bodies may collide (MuJoCo's filters: the
    contype/conaffinity bits, one weld group, parent and child, exclusions)."""
    if m.npair:
        return True
    body, weld = m.geom_bodyid, m.body_weldid[m.geom_bodyid]
    parent = m.body_weldid[m.body_parentid[m.body_weldid]]
    excluded = {
        tuple(sorted((int(s >> 16), int(s & 0xFFFF)))) for s in m.exclude_signature
    }
    filterparent = not _disabled(m, "mjDSBL_FILTERPARENT")
    for i in range(m.ngeom):
        for k in range(i + 1, m.ngeom):
            a, b = int(weld[i]), int(weld[k])
            if a == b or not (
                m.geom_contype[i] & m.geom_conaffinity[k]
                or m.geom_contype[k] & m.geom_conaffinity[i]
            ):
                continue
            if filterparent and (parent[a] == b or parent[b] == a) and a and b:
                continue
            if tuple(sorted((int(body[i]), int(body[k])))) in excluded:
                continue
            return True
    return False


def not_imported(m) -> list[str]:
    """What the model has that the Lagrangian leaves out, one phrase each."""
    missing = []
    if not _disabled(m, "mjDSBL_CONTACT") and _contacts(m):
        missing.append("contacts")
    limited = [_name(m, "JOINT", j) for j in range(m.njnt) if m.jnt_limited[j]]
    if limited and not _disabled(m, "mjDSBL_LIMIT"):
        missing.append(f"joint limits ({', '.join(limited)})")
    if m.ntendon:
        missing.append(f"tendons ({m.ntendon})")
    if m.neq and not _disabled(m, "mjDSBL_EQUALITY"):
        missing.append(f"equality constraints ({m.neq})")
    if m.opt.density or m.opt.viscosity or np.any(m.opt.wind):
        missing.append("fluid forces (opt.density, viscosity, wind)")
    others = [
        _name(m, "ACTUATOR", a) for a in range(m.nu) if not _motor(m, a)
    ]
    if others and not _disabled(m, "mjDSBL_ACTUATION"):
        missing.append(
            f"actuators other than motors on hinges and slides ({', '.join(others)})"
        )
    ranged = [
        _name(m, "ACTUATOR", a)
        for a in range(m.nu)
        if m.actuator_ctrllimited[a] or m.actuator_forcelimited[a]
    ]
    if ranged and not _disabled(m, "mjDSBL_ACTUATION"):
        missing.append(f"actuator ctrl and force ranges ({', '.join(ranged)})")
    if np.any(m.dof_frictionloss) and not _disabled(m, "mjDSBL_FRICTIONLOSS"):
        missing.append("joint friction loss")
    if np.any(m.body_gravcomp):
        missing.append("gravity compensation")
    sprung = [
        _name(m, "JOINT", j)
        for j in range(m.njnt)
        if m.jnt_type[j] in (BALL, FREE) and m.jnt_stiffness[j]
    ]
    if sprung and not _disabled(m, "mjDSBL_SPRING"):
        missing.append(f"stiffness of ball and free joints ({', '.join(sprung)})")
    if np.any(m.jnt_stiffnesspoly) or np.any(m.dof_dampingpoly):
        missing.append("nonlinear joint stiffness or damping")
    if np.any(m.actuator_damping) or np.any(m.actuator_armature):
        missing.append("actuator damping and armature")
    return missing


def warn_not_imported(m) -> None:
    missing = not_imported(m)
    if missing:
        warnings.warn(
            f"MuJoCo model {model_name(m)!r}: not imported (absent from the "
            f"Lagrangian): {'; '.join(missing)}.",
            stacklevel=3,
        )


def tree(m) -> Tree:
    bodies = []
    for b in range(1, m.nbody):
        start, count = int(m.body_jntadr[b]), int(m.body_jntnum[b])
        joints = tuple(
            Joint(
                j,
                int(m.jnt_type[j]),
                int(m.jnt_qposadr[j]),
                int(m.jnt_dofadr[j]),
                np.array(m.jnt_pos[j]),
                np.array(m.jnt_axis[j]),
                float(m.qpos0[m.jnt_qposadr[j]]),
            )
            for j in range(start, start + max(count, 0))
        )
        bodies.append(
            Body(
                int(m.body_parentid[b]),
                np.array(m.body_pos[b]),
                _quat_matrix(m.body_quat[b]),
                _quat_matrix(m.body_iquat[b]),
                joints,
            )
        )
    # The inertia given to a quaternion's norm direction: M's diagonal at qpos0
    # for its angular dofs (it changes only the multiplier, so any size of the
    # body's moments keeps M well conditioned).
    norm = tuple(
        float(np.mean(m.dof_M0[j.v + 3 * (j.kind == FREE) :][:3]))
        for b in bodies
        for j in b.joints
        if j.kind in (BALL, FREE)
    )
    motors = tuple(
        (
            a,
            int(m.jnt_qposadr[m.actuator_trnid[a, 0]]),
            float(m.actuator_gear[a, 0] * m.actuator_gainprm[a, 0]),
        )
        for a in range(m.nu)
        if _motor(m, a)
    )
    return Tree(
        tuple(bodies),
        not _disabled(m, "mjDSBL_GRAVITY"),
        not _disabled(m, "mjDSBL_SPRING"),
        not _disabled(m, "mjDSBL_DAMPER"),
        np.array(m.qpos_spring),
        norm,
        motors if not _disabled(m, "mjDSBL_ACTUATION") else (),
    )


def default_params(m, tree: Tree) -> dict[str, np.ndarray]:
    """The params named after the MjModel fields; those a disable flag turns off
    (or, for `ctrl`, a model without actuators) are absent."""
    params = {
        "body_mass": m.body_mass,
        "body_inertia": m.body_inertia,
        "body_ipos": m.body_ipos,
        "dof_armature": m.dof_armature,
    }
    if tree.damper:
        params["dof_damping"] = m.dof_damping
    if tree.spring:
        params["jnt_stiffness"] = m.jnt_stiffness
    if tree.gravity:
        params["gravity"] = m.opt.gravity
    if m.nu and not _disabled(m, "mjDSBL_ACTUATION"):
        params["ctrl"] = np.zeros(m.nu)
    return {k: np.array(v, dtype=float) for k, v in params.items()}
