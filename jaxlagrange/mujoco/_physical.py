"""The masses and inertias MuJoCo's compiler accepts, checked on the loaded params
and, where they are traced (a sweep, a fit, a batch), in the Lagrangian."""

from typing import NamedTuple

import numpy as np

from .._errors import first_error
from ._model import _name


class Bodies(NamedTuple):
    model: str
    names: tuple[str, ...]  # one per body, the world's first
    moving: np.ndarray  # (nbody, nbody): row b, the bodies welded to b if b has dofs


def read(m, model: str) -> Bodies:
    names = tuple(_name(m, "BODY", b) for b in range(m.nbody))
    moving = [(m.body_weldid == b) * bool(m.body_dofnum[b]) for b in range(m.nbody)]
    return Bodies(model, names, np.array(moving, float))


def check(bodies: Bodies, mass, inertia):
    """`mass`, with an error naming the first impossible entry: a
    negative mass or moment, a body with dofs whose mass (with the bodies welded
    to it) is not positive, principal moments with A + B < C. A `ValueError` at
    once when the values are known, else `eqx.branched_error_if`."""
    a, b, c = inertia[:, 0], inertia[:, 1], inertia[:, 2]
    slack = 1e-12 * (a + b + c)
    triangle = (a + b < c - slack) | (b + c < a - slack) | (a + c < b - slack)
    checks = [
        (mass < 0, "a mass cannot be negative", "body_mass", mass),
        (
            (bodies.moving @ mass <= 0) & bodies.moving.any(1),
            "a body that moves needs a positive mass (with the bodies welded to "
            "it; MuJoCo's compiler rule)",
            "body_mass",
            mass,
        ),
        (inertia < 0, "a moment of inertia cannot be negative", "body_inertia", inertia),
        (
            triangle,
            "principal moments of inertia must satisfy the triangle inequality "
            "A + B >= C",
            "body_inertia",
            inertia,
        ),
    ]

    def entry(bad, key, values):
        i = int(np.flatnonzero(np.asarray(bad).reshape(len(bad), -1).any(1))[0])
        value = np.round(np.asarray(values)[i], 12).tolist()
        return f": {key}[{i}] (body {bodies.names[i]!r}) is {value}"

    where = f"MuJoCo model {bodies.model!r}: "
    checks = [
        (bad, (where + text + "{}.", lambda bad=bad, k=key, v=v: entry(bad, k, v)))
        for bad, text, key, v in checks
    ]
    return first_error(mass, checks, error=ValueError)
