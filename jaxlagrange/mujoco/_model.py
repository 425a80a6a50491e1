"""Reading an `MjModel`: the source, the kinematic tree as NumPy constants, the
default params, the labels of its coordinates and figures, the masses and
inertias MuJoCo's compiler accepts, and what is not imported."""

import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .. import rigid
from .._errors import first_error
from .._validate import array_module


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
    inertial: Any = None  # `Bodies`: what a mass or inertia may be


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
    flex = m.eq_active0 * (m.eq_type > 3) * enabled(m, "EQUALITY")  # (tendons': 3)
    equalities = [f"flex {name_of(m, 'EQUALITY', i)}" for i in np.flatnonzero(flex)]
    sprung = [j for j in range(m.njnt) if m.jnt_type[j] <= BALL and m.jnt_stiffness[j]]
    sprung = [name_of(m, "JOINT", j) for j in sprung]
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
        (springs, f"stiffness of ball and free joints ({', '.join(sprung)})"),
        (poly, "nonlinear joint stiffness or damping"),
        (geared, "actuator damping and armature"),
    ]
    return [phrase for condition, phrase in checks if condition]


def tree(m) -> Tree:
    ints = (m.jnt_type.tolist(), m.jnt_qposadr.tolist(), m.jnt_dofadr.tolist())
    joints = [
        Joint(k, a, v, np.array(pos), np.array(axis), float(m.qpos0[a]))
        for k, a, v, pos, axis in zip(*ints, m.jnt_pos, m.jnt_axis, strict=True)
    ]
    bodies = []
    for b in range(1, m.nbody):
        a, n = m.body_jntadr[b], m.body_jntnum[b]  # (a = −1 where n = 0)
        rot, irot = (quat_matrix(x[b]) for x in (m.body_quat, m.body_iquat))
        parent, pos = int(m.body_parentid[b]), np.array(m.body_pos[b])
        bodies.append(Body(parent, pos, rot, irot, tuple(joints[a : a + n])))
    # The inertia given to a quaternion's norm direction: M's diagonal at qpos0
    # for its angular dofs (it changes only the multiplier, so any size of the
    # body's moments keeps M well conditioned).
    norm = tuple(
        float(np.mean(m.dof_M0[j.v + 3 * (j.kind == FREE) :][:3]))
        for j in joints
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
    fields = ("body_mass", "body_inertia", "body_ipos", "body_iquat", "dof_armature")
    params = {k: getattr(m, k) for k in fields}
    for on, key, value in (
        (tree.damper, "dof_damping", m.dof_damping),
        (tree.spring, "jnt_stiffness", m.jnt_stiffness),
        (tree.gravity, "gravity", m.opt.gravity),
        (tree.limits is not None or tree.tendons.limited.size, "restitution", 0.0),
    ):
        if on:
            params[key] = value
    return {k: np.array(v, dtype=float) for k, v in params.items()}


# Per qpos entry of a joint of each type: its name's suffix and its unit.
_PARTS = {HINGE: [("", "rad")], SLIDE: [("", "m")], BALL: [(p, "1") for p in "wxyz"]}
_PARTS[FREE] = [(p, "m") for p in "xyz"] + [("q" + p, "1") for p in "wxyz"]
PARAM_UNITS = {"body_mass": "kg", "body_inertia": "kg m²", "body_ipos": "m"}
PARAM_UNITS |= {"body_iquat": "1", "gravity": "m/s²", "geom_friction": "1"}


def labels(m) -> dict:
    """`coordinates`, `units`, `point_names` and the other figure labels of `m`."""
    # Points: the bodies' centres, then their anchors (first joint's); each body is
    # drawn from its anchor to its centre, and from its parent's centre to its anchor.
    bodies = [name_of(m, "BODY", b) for b in range(1, m.nbody)]
    k = len(bodies)
    anchors = [
        f"joint {name_of(m, 'JOINT', m.body_jntadr[b])}"
        if m.body_jntnum[b]
        else f"origin of {bodies[b - 1]}"
        for b in range(1, m.nbody)
    ]
    links = [(k + b, b) for b in range(k)]
    links += [(p - 1, k + b) for b, p in enumerate(m.body_parentid[1:]) if p]
    parts = [(j, *p) for j, t in enumerate(m.jnt_type) for p in _PARTS[int(t)]]
    return dict(
        coordinates=tuple(
            f"{name_of(m, 'JOINT', j)}{'.' * bool(p)}{p}" for j, p, _ in parts
        ),
        units=tuple(u for _, _, u in parts),
        point_names=(*bodies, *anchors),
        length_unit="m",
        param_units=tuple(PARAM_UNITS.items()),
        links=tuple((int(i), int(j)) for i, j in links),
    )


_RULES = (
    "a mass cannot be negative",
    "a body that moves needs a positive mass (with the bodies welded to it; "
    "MuJoCo's compiler rule)",
    "a moment of inertia cannot be negative",
    "principal moments of inertia must satisfy the triangle inequality A + B >= C",
)


class Bodies(NamedTuple):
    model: str
    names: tuple[str, ...]  # one per body, the world's first
    moving: np.ndarray  # (nbody, nbody): row b, the bodies welded to b if b has dofs


def inertial(m, model: str) -> Bodies:
    names = tuple(name_of(m, "BODY", b) for b in range(m.nbody))
    moving = [(m.body_weldid == b) * bool(m.body_dofnum[b]) for b in range(m.nbody)]
    return Bodies(model, names, np.array(moving, float))


def check_inertial(bodies: Bodies, params, member: str = ""):
    """`params`, with an error naming the first impossible entry (or batch member)."""
    xp = array_module(params["body_mass"], params["body_inertia"])
    mass, inertia = (xp.asarray(params[k]) for k in ("body_mass", "body_inertia"))
    if inertia.ndim > mass.ndim + 1:  # full tensors (a consistent fit's)
        inertia = xp.linalg.eigvalsh(inertia)
    triangle = 2 * inertia.max(-1) > inertia.sum(-1) * (1 + 1e-12)  # A + B < C
    moving = (mass @ bodies.moving.T <= 0) & bodies.moving.any(1)
    keys = ("body_mass",) * 2 + ("body_inertia",) * 2
    flags = (mass < 0, moving, (inertia < 0).any(-1), triangle)
    if mass.ndim == 2 and xp is np:  # a batch: its first impossible member
        for i in np.flatnonzero(np.any(flags, axis=(0, 2)))[:1]:
            one = {k: params[k][i] for k in ("body_mass", "body_inertia")}
            check_inertial(bodies, one, f"Member {i} of the batch: ")
        return params

    def entry(bad, key):  # the first bad entry
        i = int(np.flatnonzero(bad)[0])
        value = np.round((mass if key == "body_mass" else inertia)[i], 12)
        return f": {key}[{i}] (body {bodies.names[i]!r}) is {value.tolist()}"

    where = f"{member}MuJoCo model {bodies.model!r}: "
    checks = [
        (bad, (where + text + "{}.", lambda bad=bad, key=key: entry(bad, key)))
        for bad, key, text in zip(flags, keys, _RULES, strict=True)
    ]
    return first_error(params, checks, error=ValueError)
