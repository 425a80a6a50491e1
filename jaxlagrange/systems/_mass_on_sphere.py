"""A point mass sliding on a smooth sphere, free to leave it."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "R": 1.0, "g": 9.81}


def _lagrangian(q, qd, t, params):
    m, g = params["m"], params["g"]
    r, theta = q
    kinetic = 0.5 * m * (qd[0] ** 2 + r**2 * qd[1] ** 2)
    return kinetic - m * g * r * jnp.cos(theta)


def _outside(q, t, params):
    # Linear in r: smooth on the sphere, unlike |x| - R in Cartesian coordinates.
    return jnp.array([q[0] - params["R"]])


def _points(q, t, params):
    """The sphere's centre and the mass, θ from the upward vertical."""
    r, theta = q
    mass = r * jnp.stack([jnp.sin(theta), jnp.cos(theta)])
    return jnp.stack([jnp.zeros_like(mass), mass])


@register("mass_on_sphere", units=("m", "rad"), point_names=("centre", "mass"))
def mass_on_sphere(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A point mass `m` sliding without friction on top of a fixed sphere of radius `R`.

    In polar coordinates (r, θ) in a vertical plane through the centre, θ from the
    upward vertical,

        L = ½ m (ṙ² + r² θ̇²) − m g r cos θ,    h = r − R ≥ 0.

    The multiplier of h is the normal force: on the sphere, after starting from
    rest at θ₀, λ = m g (3 cos θ − 2 cos θ₀), and the mass leaves the sphere (a
    release event) where cos θ = ⅔ cos θ₀; afterwards it falls freely (a
    parabola), and an impact brings it back if it meets the sphere again.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "R": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (r, θ) and (ṙ, θ̇); default on the sphere at θ = 0.1 rad
        from rest.

    **Returns:** a `ReadySystem` with coordinates `("r", "θ")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.mass_on_sphere()
    traj = jl.simulate(system, q0, qd0, t1=2.0)
    traj.event_ts[0]  # when it leaves the sphere
    ```
    """
    params = merge_params("mass_on_sphere", _DEFAULTS, params)
    q0, qd0 = initial_state("mass_on_sphere", q0, qd0, [params["R"], 0.1], [0.0, 0.0])
    system = LagrangianSystem(_lagrangian, params=params, unilateral=_outside)
    return ReadySystem(system, q0, qd0, "mass_on_sphere", ("r", "θ"), points=_points)
