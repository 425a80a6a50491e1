"""The labels of a loaded model's figures: units from the joint types (hinge
rad, slide m, quaternion components 1), the bodies' names, the params' units."""

from ._model import BALL, FREE, HINGE, SLIDE, _name


_QPOS = {HINGE: ("rad",), SLIDE: ("m",), BALL: ("1",) * 4, FREE: ("m",) * 3 + ("1",) * 4}
_ANGULAR = {HINGE: "a", SLIDE: "l", BALL: "aaa", FREE: "lllaaa"}  # per dof
_PER_DOF = {  # a param over dofs: its unit on a linear and on an angular dof
    "dof_armature": ("kg", "kg m²"),
    "dof_damping": ("N s/m", "N m s/rad"),
    "dof_frictionloss": ("N", "N m"),
}
PARAM_UNITS = {
    "body_mass": "kg",
    "body_inertia": "kg m²",
    "body_ipos": "m",
    "body_iquat": "1",
    "gravity": "m/s²",
    "geom_friction": "1",
    "restitution": "1",
}
"""The units of a loaded model's params that have one for every entry."""


def labels(m) -> dict:
    """`units`, `point_names`, `length_unit` and `param_units` of a `ReadySystem`
    of the model `m` (params over dofs and joints get a unit per entry)."""
    kinds = [int(k) for k in m.jnt_type]
    units = tuple(u for k in kinds for u in _QPOS[k])
    dofs = "".join(_ANGULAR[k] for k in kinds)
    entries = {
        f"{key}[{i}]": pair[kind == "a"]
        for key, pair in _PER_DOF.items()
        for i, kind in enumerate(dofs)
    }
    stiffness = {HINGE: "N m/rad", SLIDE: "N/m"}
    entries |= {
        f"jnt_stiffness[{j}]": stiffness[k] for j, k in enumerate(kinds) if k in stiffness
    }
    return dict(
        units=units,
        point_names=tuple(_name(m, "BODY", b) for b in range(1, m.nbody)),
        length_unit="m",
        param_units=tuple((PARAM_UNITS | entries).items()),
    )

