"""The masses and inertias MuJoCo's compiler accepts, checked on a loaded model's
params and on the ends of a sweep's axes."""

from typing import NamedTuple

import numpy as np

from .._errors import first_error
from ._model import name_of


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


def read(m, model: str) -> Bodies:
    names = tuple(name_of(m, "BODY", b) for b in range(m.nbody))
    moving = [(m.body_weldid == b) * bool(m.body_dofnum[b]) for b in range(m.nbody)]
    return Bodies(model, names, np.array(moving, float))


def check(bodies: Bodies, params) -> None:
    """A `ValueError` naming the first impossible entry of `params`: a negative
    mass or moment, a body with dofs whose mass (with the bodies welded to it) is
    not positive, principal moments with A + B < C."""
    mass, inertia = (np.asarray(params[k]) for k in ("body_mass", "body_inertia"))
    triangle = 2 * inertia.max(1) > inertia.sum(1) * (1 + 1e-12)  # A + B < C
    moving = (bodies.moving @ mass <= 0) & bodies.moving.any(1)
    keys = ("body_mass",) * 2 + ("body_inertia",) * 2
    checks = zip((mass < 0, moving, inertia < 0, triangle), keys, _RULES, strict=True)

    def entry(bad, key):  # the first bad entry
        i = int(np.flatnonzero(bad.reshape(len(bad), -1).any(1))[0])
        value = np.round((mass if key == "body_mass" else inertia)[i], 12)
        return f": {key}[{i}] (body {bodies.names[i]!r}) is {value.tolist()}"

    where = f"MuJoCo model {bodies.model!r}: "
    checks = [
        (bad, (where + text + "{}.", lambda bad=bad, key=key: entry(bad, key)))
        for bad, key, text in checks
    ]
    first_error(mass, checks, error=ValueError)
