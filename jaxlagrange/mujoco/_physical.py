"""The masses and inertias MuJoCo's compiler accepts, checked on a loaded model's
params and on the ends of a sweep's axes."""

from typing import NamedTuple

import numpy as np

from .._errors import first_error
from .._validate import array_module
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


def check(bodies: Bodies, params, member: str = ""):
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
            check(bodies, one, f"Member {i} of the batch: ")
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
