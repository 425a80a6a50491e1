"""A vertical coin rolling without slipping on a plane (nonholonomic)."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "R": 0.5, "g": 9.81, "alpha": 0.0}


def _lagrangian(q, qd, t, params):
    m, radius, g, alpha = (params[k] for k in ("m", "R", "g", "alpha"))
    # A uniform disk: ½ m R² about its axle, ¼ m R² about a diameter.
    kinetic = (
        0.5 * m * (qd[0] ** 2 + qd[1] ** 2)
        + 0.125 * m * radius**2 * qd[2] ** 2
        + 0.25 * m * radius**2 * qd[3] ** 2
    )
    return kinetic + m * g * jnp.sin(alpha) * q[0]


def _rolls(q, qd, t, params):
    radius, heading = params["R"], q[2]
    return qd[:2] - radius * jnp.stack([jnp.cos(heading), jnp.sin(heading)]) * qd[3]


def _points(q, t, params):
    """The coin's contact point on the plane."""
    return q[None, :2]


@register("rolling_coin", units=("m", "m", "rad", "rad"), point_names=("contact",))
def rolling_coin(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A vertical uniform disk (mass `m`, radius `R`) rolling without slipping.

    The contact point is at (x, y) on the plane, θ is the heading of the disk and
    φ the angle it has turned about its axle. The disk stays vertical (a knife
    edge); the plane may be tilted by `alpha` about the y-axis, so that gravity
    pulls along +x:

        L = ½ m (ẋ² + ẏ²) + ⅛ m R² θ̇² + ¼ m R² φ̇² + m g sin α · x,

    with the two nonholonomic rolling constraints

        ẋ − R cos θ φ̇ = 0,    ẏ − R sin θ φ̇ = 0.

    Nothing turns the heading, so θ̇ = Ω stays constant. On a level plane the speed
    v = R φ̇ is constant too and the coin runs on a circle of radius v/Ω:
    x = (v/Ω) sin Ωt, y = (v/Ω)(1 − cos Ωt) from the default start. On the tilted
    plane v = v₀ + (k/Ω) sin Ωt with k = ⅔ g sin α, and
    x = (v₀/Ω) sin Ωt + k sin²Ωt / (2Ω²),
    y = (v₀/Ω)(1 − cos Ωt) + k (Ωt − ½ sin 2Ωt) / (2Ω²): it drifts sideways, not
    down the slope.

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m": 1.0, "R": 0.5, "g": 9.81, "alpha": 0.0}`.
    - `q0`, `qd0`: initial (x, y, θ, φ) and their rates; default at the origin
        heading along +x with θ̇ = 1 rad/s and φ̇ = 2 rad/s (ẋ = R φ̇), a circle of
        radius R φ̇ / θ̇ = 1.

    **Returns:** a `ReadySystem` with coordinates `("x", "y", "θ", "φ")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.rolling_coin()
    traj = jl.simulate(system, q0, qd0, t1=6.0, saveat=jnp.linspace(0, 6, 61))
    ```
    """
    params = merge_params("rolling_coin", _DEFAULTS, params)
    q0, qd0 = initial_state(
        "rolling_coin", q0, qd0, [0.0] * 4, [2.0 * params["R"], 0.0, 1.0, 2.0]
    )
    system = LagrangianSystem(_lagrangian, params=params, nonholonomic=_rolls)
    return ReadySystem(
        system, q0, qd0, "rolling_coin", ("x", "y", "θ", "φ"), points=_points
    )
