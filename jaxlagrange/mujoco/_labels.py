"""The labels of a loaded model's figures: each coordinate's unit by its joint's
type, the bodies' names, and the units of the params."""

from ._model import BALL, FREE, HINGE, SLIDE, name_of


_UNITS = {HINGE: ("rad",), SLIDE: ("m",), BALL: ("1",) * 4}
_UNITS[FREE] = ("m",) * 3 + _UNITS[BALL]
PARAM_UNITS = {"body_mass": "kg", "body_inertia": "kg m²", "body_ipos": "m"}
PARAM_UNITS |= {"body_iquat": "1", "gravity": "m/s²", "geom_friction": "1"}


def labels(m) -> dict:
    """`units`, `point_names`, `length_unit` and `param_units` of the model `m`."""
    return dict(
        units=tuple(u for k in m.jnt_type for u in _UNITS[int(k)]),
        point_names=tuple(name_of(m, "BODY", b) for b in range(1, m.nbody)),
        length_unit="m",
        param_units=tuple(PARAM_UNITS.items()),
    )
