"""The labels of a loaded model's figures: each coordinate's unit by its joint's
type, the bodies' names, and the units of the params."""

from ._model import BALL, FREE, HINGE, SLIDE, name_of


_UNITS = {HINGE: ("rad",), SLIDE: ("m",), BALL: ("1",) * 4}
_UNITS[FREE] = ("m",) * 3 + _UNITS[BALL]
PARAM_UNITS = {"body_mass": "kg", "body_inertia": "kg m²", "body_ipos": "m"}
PARAM_UNITS |= {"body_iquat": "1", "gravity": "m/s²", "geom_friction": "1"}


def labels(m) -> dict:
    """`units`, `point_names`, `length_unit`, `param_units` and `links` of the
    model `m`: its points are the bodies' centres of mass, then their anchors
    (the first joint's); each body is drawn from its anchor to its centre, and
    from its parent's centre to its anchor."""
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
    return dict(
        units=tuple(u for k in m.jnt_type for u in _UNITS[int(k)]),
        point_names=(*bodies, *anchors),
        length_unit="m",
        param_units=tuple(PARAM_UNITS.items()),
        links=tuple((int(i), int(j)) for i, j in links),
    )
