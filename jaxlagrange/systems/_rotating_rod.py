"""A bead on a straight frictionless rod turning at a constant rate (rheonomic)."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, origin_and_q, register


_DEFAULTS = {"m": 1.0, "omega": 1.0}


def _lagrangian(q, qd, t, params):
    return 0.5 * params["m"] * (qd[0] ** 2 + qd[1] ** 2)


def _on_rod(q, t, params):
    angle = params["omega"] * t
    # The signed distance from the rod, which points along (cos ωt, sin ωt).
    return jnp.stack([q[1] * jnp.cos(angle) - q[0] * jnp.sin(angle)])


@register("rotating_rod", units=("m", "m"), point_names=("axis", "bead"))
def rotating_rod(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A bead of mass `m` sliding on a rod that turns at the rate `omega` (no gravity).

    In Cartesian coordinates of the horizontal plane, with the time-dependent
    (rheonomic) holonomic constraint that keeps the bead on the rod,

        L = ½ m (ẋ² + ẏ²),    g(q, t) = y cos ωt − x sin ωt = 0.

    Released co-rotating at r₀ with no radial velocity, the bead slides out as
    r = r₀ cosh ωt (Cline, ch. 6, example 6.8.5, with θ̇ = ω imposed). |∇g| = 1,
    so the multiplier is the force of the rod on the bead along the normal
    (−sin ωt, cos ωt): λ = 2 m ω ṙ = 2 m r₀ ω² sinh ωt, the Coriolis force. The
    rod does work: the energy ½ m r₀² ω² cosh 2ωt grows.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "omega": 1.0}`.
    - `q0`, `qd0`: initial (x, y) and (ẋ, ẏ); default r₀ = 1 on the x-axis moving
        with the rod, (ẋ, ẏ) = (0, ω r₀).

    **Returns:** a `ReadySystem` with coordinates `("x", "y")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.rotating_rod({"omega": 2.0})
    traj = jl.simulate(system, q0, qd0, t1=1.0)  # |q| = cosh 2
    ```
    """
    params = merge_params("rotating_rod", _DEFAULTS, params)
    q0, qd0 = initial_state("rotating_rod", q0, qd0, [1.0, 0.0], [0.0, params["omega"]])
    system = LagrangianSystem(_lagrangian, params=params, holonomic=_on_rod)
    return ReadySystem(system, q0, qd0, "rotating_rod", ("x", "y"), points=origin_and_q)
