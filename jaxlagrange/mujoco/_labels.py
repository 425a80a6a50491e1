"""The labels of a loaded model's coordinates and figures: each coordinate's name
and unit by its joint, the bodies' names, and the units of the params."""

from ._model import BALL, FREE, HINGE, SLIDE, name_of


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
    links += [
        (m.body_parentid[b] - 1, k + b - 1)
        for b in range(1, m.nbody)
        if m.body_parentid[b]
    ]
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
