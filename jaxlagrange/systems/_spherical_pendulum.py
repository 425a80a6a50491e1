"""The spherical pendulum."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "l": 1.0, "g": 9.81}


def _lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    theta, _ = q
    kinetic = 0.5 * m * length**2 * (qd[0] ** 2 + jnp.sin(theta) ** 2 * qd[1] ** 2)
    return kinetic + m * g * length * jnp.cos(theta)


def _points(q, t, params):
    """The pivot and the bob in 3-D (z up)."""
    theta, phi = q
    bob = params["l"] * jnp.stack(
        [jnp.sin(theta) * jnp.cos(phi), jnp.sin(theta) * jnp.sin(phi), -jnp.cos(theta)]
    )
    return jnp.stack([jnp.zeros_like(bob), bob])


@register("spherical_pendulum", units=("rad",) * 2, point_names=("pivot", "bob"))
def spherical_pendulum(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A point mass on a massless rod of length `l`, free to swing in 3D.

    In spherical angles, θ from the downward vertical and φ the azimuth,

        L = ½ m l² (θ̇² + sin²θ φ̇²) + m g l cos θ.

    φ is cyclic, so p_φ = m l² sin²θ φ̇ is conserved. The mass matrix is singular
    at θ = 0 (the poles of the angles), which a solve reports as
    `RESULTS.singular_mass_matrix`: start with p_φ ≠ 0 to stay away from it.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "l": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (θ, φ) and (θ̇, φ̇); default θ = 1 rad, φ̇ = 3 rad/s,
        a precessing orbit between two latitudes.

    **Returns:** a `ReadySystem` with coordinates `("θ", "φ")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.spherical_pendulum()
    traj = jl.simulate(system, q0, qd0, t1=10.0)
    ```
    """
    params = merge_params("spherical_pendulum", _DEFAULTS, params)
    q0, qd0 = initial_state("spherical_pendulum", q0, qd0, [1.0, 0.0], [0.0, 3.0])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(
        system, q0, qd0, "spherical_pendulum", ("θ", "φ"), points=_points
    )
