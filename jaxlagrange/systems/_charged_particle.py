"""A charged particle in uniform magnetic and electric fields."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "charge": 1.0, "B": (0.0, 0.0, 1.0), "E": (0.0, 0.0, 0.0)}


def _lagrangian(q, qd, t, params):
    m, charge, b, e = params["m"], params["charge"], params["B"], params["E"]
    vector_potential = 0.5 * jnp.cross(b, q)  # A = ½ B × r, so ∇ × A = B
    scalar_potential = -jnp.dot(e, q)  # φ = −E·r, so −∇φ = E
    kinetic = 0.5 * m * jnp.sum(qd**2)
    return kinetic + charge * (jnp.dot(qd, vector_potential) - scalar_potential)


def _points(q, t, params):
    """The charge."""
    return q[None]


@register("charged_particle", units=("m",) * 3, point_names=("charge",))
def charged_particle(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A point charge in uniform fields B and E: a velocity-dependent potential.

        L = ½ m |ṙ|² + e (ṙ·A − φ),   A = ½ B × r,   φ = −E·r

    gives the Lorentz force m r̈ = e (E + ṙ × B). The charge gyrates about B at
    the cyclotron frequency ω = |e| |B| / m and drifts with velocity E × B / |B|².

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "charge": 1.0,
        "B": (0.0, 0.0, 1.0), "E": (0.0, 0.0, 0.0)}` (B and E of shape (3,)).
    - `q0`, `qd0`: initial position and velocity, shape (3,). The default,
        r = (1, 0, 0) and ṙ = (0, −1, 0.2), is a helix about the z axis of
        radius 1.

    **Returns:** a `ReadySystem` with coordinates `("x", "y", "z")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.charged_particle({"E": [0.1, 0.0, 0.0]})
    traj = jl.simulate(system, q0, qd0, t1=50.0)
    ```
    """
    params = merge_params("charged_particle", _DEFAULTS, params)
    q0, qd0 = initial_state(
        "charged_particle", q0, qd0, [1.0, 0.0, 0.0], [0.0, -1.0, 0.2]
    )
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(
        system, q0, qd0, "charged_particle", ("x", "y", "z"), points=_points
    )
