"""A chain of masses joined by springs between two fixed walls."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from .._validate import positive_int
from ._registry import (
    ReadySystem,
    default_mass_solver,
    initial_state,
    merge_params,
    register,
)


_DEFAULTS = {"m": 1.0, "k": 1.0}
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")


def _lagrangian(q, qd, t, params):
    m, k = params["m"], params["k"]
    stretch = jnp.diff(jnp.pad(q, 1))  # the walls are fixed at displacement 0
    return 0.5 * m * jnp.sum(qd**2) - 0.5 * k * jnp.sum(stretch**2)


def _points(q, t, params):
    """The two walls and the masses, at unit spacing plus their displacements."""
    n = q.shape[0]
    x = jnp.concatenate(
        [jnp.zeros(1, q.dtype), jnp.arange(1, n + 1) + q, jnp.full(1, n + 1.0, q.dtype)]
    )
    return jnp.stack([x, jnp.zeros_like(x)], axis=-1)


def _point_names(n):
    return ("wall", *(f"mass {i}" for i in range(1, n + 1)), "wall")


@register("spring_chain", units=lambda n: ("m",) * n, point_names=_point_names)
def spring_chain(params=None, *, q0=None, qd0=None, n: int = 5) -> ReadySystem:
    """`n` equal masses `m` in a line, joined to each other and to two fixed walls
    by `n + 1` equal springs of stiffness `k`.

    With displacements x₁ … xₙ from equilibrium (and x₀ = xₙ₊₁ = 0 the walls),

        L = ½ m Σᵢ ẋᵢ² − ½ k Σᵢ₌₀ⁿ (xᵢ₊₁ − xᵢ)².

    Its normal modes have frequencies ωⱼ = 2 sqrt(k/m) sin(jπ / (2(n + 1))),
    j = 1 … n, and shapes sin(ijπ / (n + 1)).

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "k": 1.0}`.
    - `q0`, `qd0`: initial displacements and velocities, shape (n,); default the
        first mass displaced by 0.5 and all at rest (every mode excited).
    - `n`: the number of masses, at least 1.

    From 16 coordinates on, the system solves M q̈ = f by matrix-free conjugate
    gradients (`system.mass_solver` is `lineax.CG(rtol=1e-12, atol=1e-12)`;
    `system.with_mass_solver(None)` gives the dense solve), which costs a few
    cheap Hessian-vector products instead of an O(n³) factorization.

    **Returns:** a `ReadySystem` with coordinates `("x₁", …, "xₙ")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.spring_chain(n=8, params={"k": 2.0})
    traj = jl.simulate(system, q0, qd0, t1=30.0)
    ```
    """
    n = positive_int("n", n, " (the number of masses)")
    params = merge_params("spring_chain", _DEFAULTS, params)
    default_q0 = jnp.zeros(n).at[0].set(0.5)
    q0, qd0 = initial_state("spring_chain", q0, qd0, default_q0, jnp.zeros(n))
    system = LagrangianSystem(
        _lagrangian, params=params, mass_solver=default_mass_solver(n)
    )
    labels = tuple(f"x{i}".translate(_SUBSCRIPTS) for i in range(1, n + 1))
    return ReadySystem(system, q0, qd0, "spring_chain", labels, points=_points)
