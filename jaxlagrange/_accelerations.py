"""The public accelerations, multipliers and constraint forces: the KKT solve of
`_constraints.dynamics` at one state (contacts and friction modes settled first),
checked also under `jax.jit`."""

import equinox as eqx
import jax.numpy as jnp

from ._cache import cached
from ._coefficients import checked_values
from ._constraints import Dynamics, contact_set, dynamics
from ._custom_types import Array, Float, ScalarLike, Vector, VectorLike
from ._eom import NON_FINITE_DYNAMICS, NON_FINITE_STATE, is_finite_state
from ._errors import first_error
from ._friction import contact_modes
from ._system import LagrangianSystem, as_state


def _checked(system, q, qd, t) -> Dynamics:
    return _checked_dynamics(system, *as_state(q, qd, t))


@eqx.filter_jit
def _checked_dynamics(system, q, qd, t) -> Dynamics:
    system = checked_values(system)
    active = modes = None
    if system.constraints.friction is not None:
        active, modes = contact_modes(system, q, qd, t)
    elif system.constraints.one_sided:
        active = contact_set(system, q, qd, t)
    dyn = dynamics(system, q, qd, t, active=active, modes=modes)
    # min(q̈, +inf) is q̈ (NaN included): it ties q̈'s layout under vmap to q's,
    # (batch, n). Without it XLA passes q̈ to the check below as (n, batch) and
    # writes it one coordinate at a time, computing what the coordinates share
    # (sin(q₁ − q₂), M's pivots) once for each.
    qdd = jnp.minimum(dyn.accelerations, q * 0 + jnp.inf)
    # The most basic failure names the error (also the most basic in a batch).
    qdd, lam = first_error(
        (qdd, dyn.multipliers),
        [
            (~is_finite_state(q, qd, t), NON_FINITE_STATE),
            *dyn.undefined(),
            (~jnp.isfinite(qdd), NON_FINITE_DYNAMICS.format("accelerations")),
        ],
    )
    return dyn._replace(accelerations=qdd, multipliers=lam)


@cached
def accelerations(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Vector:
    """The generalized accelerations q̈, constraint forces included.

    Solves d/dt ∂L/∂q̇ − ∂L/∂q = Q + Gᵀλ + Aᵀμ together with the constraints
    (holonomic, nonholonomic, and the unilateral ones in contact at this state;
    with `slip`, each contact sticking where s ≈ 0 and static friction holds it,
    else slipping with the kinetic friction).

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q`, `qd`: coordinates and velocities, 1-D arrays of the same shape (n,).
    - `t`: the time, a scalar.

    **Returns:** q̈, shape (n,).

    **Raises:** `ValueError` at trace time for wrong shapes; under `jax.jit` too, an
    error when the mass matrix is singular or indefinite, when the constraints are
    redundant, when the state is not finite, naming a non-finite param, and when
    `friction`, `static_friction` or `restitution` is out of its range.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) - 0.5 * jnp.sum(q**2)

    oscillator = jl.LagrangianSystem(lagrangian)
    jl.accelerations(oscillator, jnp.array([1.0, 2.0]), jnp.zeros(2), 0.0)  # -q
    ```
    """
    return _checked(system, q, qd, t).accelerations


def multipliers(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Float[Array, " c"]:
    """The Lagrange multipliers, in the order holonomic, nonholonomic, unilateral.

    **Arguments:** as for [`jaxlagrange.accelerations`][].

    **Returns:** shape (m + k + u,); a unilateral constraint that is not in contact
    has multiplier 0. With the sign convention `d/dt ∂L/∂q̇ − ∂L/∂q = Q + Cᵀλ`, a
    unilateral multiplier is ≥ 0 while it pushes.

    **Example:**

    ```python
    lam = jl.multipliers(system, q, qd, 0.0)
    ```
    """
    return _checked(system, q, qd, t).multipliers


def constraint_force(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Vector:
    """The generalized force the constraints exert, Cᵀλ.

    **Arguments:** as for [`jaxlagrange.accelerations`][].

    **Returns:** shape (n,); zeros for a system without constraints.

    **Example:**

    ```python
    force = jl.constraint_force(system, q, qd, 0.0)
    ```
    """
    dyn = _checked(system, q, qd, t)
    if dyn.constraint_matrix is None:
        return jnp.zeros_like(dyn.accelerations)
    return dyn.constraint_matrix.T @ dyn.multipliers
