"""The Kepler problem: a mass in an attractive inverse-square central force."""

import jax
import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, origin_and_q, register


_DEFAULTS = {"mu": 1.0, "m": 1.0, "eps": 0.0}


def _inverse_distance(q, eps):
    """1 / sqrt(|q|² + eps²), and 0 (with zero gradients, not NaN) where that is 0."""
    r2 = jnp.sum(q**2) + eps**2
    positive = r2 > 0
    # The double `where` keeps the untaken branch finite, so its gradient is not NaN.
    return jnp.where(positive, jax.lax.rsqrt(jnp.where(positive, r2, 1.0)), 0.0)


def _lagrangian(q, qd, t, params):
    mu, m = params["mu"], params["m"]
    return 0.5 * m * jnp.sum(qd**2) + m * mu * _inverse_distance(q, params["eps"])


@register("kepler", units=("m", "m"), point_names=("centre", "body"))
def kepler(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A mass `m` in the plane, attracted to the origin by the potential −μm/r.

        L = ½ m (ẋ² + ẏ²) + μ m / sqrt(x² + y² + ε²)

    Energy and angular momentum m (x ẏ − y ẋ) are conserved; a bound orbit is an
    ellipse with period 2π sqrt(a³/μ). The softening ε (default 0) regularizes
    close encounters. The Lagrangian stays differentiable (no NaN gradients) at
    r = 0, where its potential term is taken to be 0.

    **Arguments:**

    - `params`: overrides of the defaults `{"mu": 1.0, "m": 1.0, "eps": 0.0}`.
    - `q0`, `qd0`: initial (x, y) and (ẋ, ẏ). The default starts at periapsis
        r = 1 with speed sqrt(1.5): an ellipse of eccentricity 0.5, semi-major
        axis 2 and period 2π·2^{3/2} ≈ 17.77 (for μ = 1).

    **Returns:** a `ReadySystem` with coordinates `("x", "y")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.kepler()
    traj = jl.simulate(system, q0, qd0, t1=17.77, saveat=jnp.linspace(0, 17.77, 500))
    ```
    """
    params = merge_params("kepler", _DEFAULTS, params)
    q0, qd0 = initial_state("kepler", q0, qd0, [1.0, 0.0], [0.0, 1.5**0.5])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(system, q0, qd0, "kepler", ("x", "y"), points=origin_and_q)
