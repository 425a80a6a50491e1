"""A uniform disk rolling without slipping down an incline."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "R": 0.5, "g": 9.81, "alpha": 0.5}
_ROLLING = ("holonomic", "nonholonomic")


def _lagrangian(q, qd, t, params):
    m, radius, g, alpha = (params[k] for k in ("m", "R", "g", "alpha"))
    # I = ½ m R² for a uniform disk.
    kinetic = 0.5 * m * qd[0] ** 2 + 0.25 * m * radius**2 * qd[1] ** 2
    return kinetic + m * g * q[0] * jnp.sin(alpha)


def _rolls(q, t, params):
    return jnp.stack([q[0] - params["R"] * q[1]])


def _rolls_velocity(q, qd, t, params):
    return jnp.stack([qd[0] - params["R"] * qd[1]])


def _points(q, t, params):
    """The disk's centre and a point on its rim, the slope going down to the right."""
    y, phi = q
    radius, alpha = params["R"], params["alpha"]
    down = jnp.stack([jnp.cos(alpha), -jnp.sin(alpha)])
    normal = jnp.stack([jnp.sin(alpha), jnp.cos(alpha)])
    centre = y * down + radius * normal
    rim = centre + radius * (jnp.cos(phi) * normal + jnp.sin(phi) * down)
    return jnp.stack([centre, rim])


@register("rolling_disk", units=("m", "rad"), point_names=("centre", "rim"))
def rolling_disk(
    params=None, *, q0=None, qd0=None, rolling: str = "holonomic"
) -> ReadySystem:
    """A uniform disk (mass `m`, radius `R`) rolling down a plane inclined by `alpha`.

    With y the distance travelled down the slope and φ the angle turned,

        L = ½ m ẏ² + ½ I φ̇² + m g y sin α,    I = ½ m R²,

    and rolling without slipping is the holonomic constraint y − Rφ = 0 or,
    equivalently for the dynamics, the velocity constraint ẏ − Rφ̇ = 0 (choose with
    `rolling`). The closed forms (Cline, ch. 6, example 6.8.1) are
    ÿ = ⅔ g sin α and the friction multiplier λ = −m g sin α / 3: with
    `d/dt ∂L/∂q̇ − ∂L/∂q = λ ∂(y − Rφ)/∂q` the friction force on the disk,
    λ, points up the slope.

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m": 1.0, "R": 0.5, "g": 9.81, "alpha": 0.5}` (alpha in radians).
    - `q0`, `qd0`: initial (y, φ) and (ẏ, φ̇); default at rest at y = φ = 0.
    - `rolling`: `"holonomic"` (y − Rφ = 0) or `"nonholonomic"` (ẏ − Rφ̇ = 0).

    **Returns:** a `ReadySystem` with coordinates `("y", "φ")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.rolling_disk({"alpha": 0.3})
    traj = jl.simulate(system, q0, qd0, t1=2.0)  # traj.q[-1, 0] = ⅓ g sin α t²
    ```
    """
    if rolling not in _ROLLING:
        raise ValueError(
            f"`rolling` must be one of {', '.join(_ROLLING)}, got {rolling!r}."
        )
    params = merge_params("rolling_disk", _DEFAULTS, params)
    q0, qd0 = initial_state("rolling_disk", q0, qd0, [0.0, 0.0], [0.0, 0.0])
    constraint = {rolling: _rolls if rolling == "holonomic" else _rolls_velocity}
    system = LagrangianSystem(_lagrangian, params=params, **constraint)
    return ReadySystem(system, q0, qd0, "rolling_disk", ("y", "φ"), points=_points)
