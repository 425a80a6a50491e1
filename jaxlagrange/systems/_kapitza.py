"""Kapitza's pendulum: a pendulum whose pivot oscillates vertically."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "l": 1.0, "g": 9.81, "a": 0.1, "omega": 100.0}


def _lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    a, omega = params["a"], params["omega"]
    theta, theta_dot = q[0], qd[0]
    # The bob: x = l sin θ, y = a cos ωt − l cos θ (y up, pivot at (0, a cos ωt)).
    x_dot = length * jnp.cos(theta) * theta_dot
    y_dot = -a * omega * jnp.sin(omega * t) + length * jnp.sin(theta) * theta_dot
    y = a * jnp.cos(omega * t) - length * jnp.cos(theta)
    return 0.5 * m * (x_dot**2 + y_dot**2) - m * g * y


def _points(q, t, params):
    """The vibrating pivot (0, a cos ωt) and the bob."""
    pivot = jnp.stack([jnp.zeros_like(t), params["a"] * jnp.cos(params["omega"] * t)])
    bob = pivot + params["l"] * jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])
    return jnp.stack([pivot, bob])


@register("kapitza", units=("rad",), point_names=("pivot", "bob"))
def kapitza(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A pendulum of length `l` whose pivot moves as y = a cos ωt.

    With θ from the downward vertical, the bob at (l sin θ, a cos ωt − l cos θ):

        L = ½ m (l² θ̇² − 2 a ω l sin ωt sin θ θ̇ + a² ω² sin² ωt)
            − m g (a cos ωt − l cos θ),

    so θ̈ = −(g − a ω² cos ωt) sin θ / l. For a fast drive, a²ω² > 2 g l, the
    inverted position θ = π is stable (Kapitza). L depends on t: the energy is
    not conserved.

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m": 1.0, "l": 1.0, "g": 9.81, "a": 0.1, "omega": 100.0}`
        (a²ω²/(2gl) ≈ 5: the inverted pendulum is stable).
    - `q0`, `qd0`: initial (θ,) and (θ̇,); default θ = π − 0.3, at rest: it
        oscillates slowly about the upright position.

    **Returns:** a `ReadySystem` with coordinates `("θ",)`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.kapitza({"omega": 200.0})
    traj = jl.simulate(system, q0, qd0, t1=5.0)
    ```
    """
    params = merge_params("kapitza", _DEFAULTS, params)
    q0, qd0 = initial_state("kapitza", q0, qd0, [jnp.pi - 0.3], [0.0])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(system, q0, qd0, "kapitza", ("θ",), points=_points)
