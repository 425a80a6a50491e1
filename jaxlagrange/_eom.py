"""Mass matrix, momenta and energy of a `LagrangianSystem`, and its q̈.

With p(q, q̇, t) = ∂L/∂q̇, Lagrange's equations read M q̈ = f with

    M = ∂p/∂q̇,    f = ∂L/∂q − (∂p/∂q) q̇ − ∂p/∂t + Q.

How M and f are formed and solved is the system's mass strategy (`_mass`);
whether one state's q̈ is written out as scalar code is decided here, once
(`scalar_where_small`).
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import (
    Array,
    BoolScalar,
    Matrix,
    Scalar,
    ScalarLike,
    Vector,
    VectorLike,
)
from ._lanes._scalar import scalar_form
from ._mass import DenseCholesky, momenta_of
from ._system import LagrangianSystem, as_state


def unconstrained(
    system: LagrangianSystem, q: Array, qd: Array, t: Array
) -> tuple[Array, BoolScalar]:
    """q̈ = M⁻¹f without constraints, and whether M is singular or indefinite."""
    return scalar_where_small(_accelerations, system, q, qd, t)


def _accelerations(system, q, qd, t):
    return system.mass_strategy.accelerations(system, q, qd, t)


def scalar_where_small(fn, system: LagrangianSystem, q: Array, qd: Array, t, *args):
    """`fn(system, q, qd, t, *args)` as scalar code where small, else in array form."""
    # Scalar code (`_lanes/_scalar.py`) is the small systems' hot path under `vmap`.
    strategy = system.mass_strategy
    if (
        isinstance(strategy, DenseCholesky)
        and strategy.scalar
        and q.shape[0] <= strategy.unroll
    ):
        # The system's params (traced or not) enter the jaxpr as constants.
        out = scalar_form(functools.partial(fn, system), q, qd, t, *args)
        if out is not None:
            return out
    return fn(system, q, qd, t, *args)


def _on_state(fn):
    """Check and convert the state, then call `fn` compiled (eager calls are fast)."""
    compiled = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def wrapper(system, q, qd, t):
        return compiled(system, *as_state(q, qd, t))

    return wrapper


@_on_state
def mass_matrix(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Matrix:
    """The generalized mass matrix M = ∂²L/∂q̇² at a state.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q`, `qd`: coordinates and velocities, 1-D arrays of the same shape (n,).
    - `t`: the time, a scalar.

    **Returns:** the symmetric (n, n) matrix M.

    **Raises:** `ValueError` when the shapes of `q`, `qd`, `t` or of the
    Lagrangian's output are wrong; an error (also under `jax.jit`) naming a
    non-finite state, or a non-finite M at a finite state.

    **Example:**

    ```python
    M = jl.mass_matrix(system, q, qd, 0.0)
    ```
    """

    mass = jax.jacfwd(momenta_of(system, q, t))(qd)
    return _checked(0.5 * (mass + mass.T), q, qd, t, "mass_matrix")


def unread_velocities(system: LagrangianSystem, q, qd, t) -> list[int]:
    """The velocities L does not depend on at a state (zero rows of M)."""
    try:
        mass = np.asarray(mass_matrix(system, q, qd, t))
    except (ValueError, TypeError, IndexError, eqx.EquinoxRuntimeError):
        return []
    return np.flatnonzero(np.all(mass == 0, axis=1)).tolist()


@_on_state
def momenta(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Vector:
    """The generalized (canonical) momenta p = ∂L/∂q̇.

    **Arguments:** as for [`jaxlagrange.mass_matrix`][].

    **Returns:** p, shape (n,). For a charge in a magnetic field this is the
    canonical momentum m v + e A, not the kinetic one.

    **Raises:** as [`jaxlagrange.mass_matrix`][], for a non-finite p.

    **Example:**

    ```python
    p = jl.momenta(system, q, qd, 0.0)
    ```
    """
    p = jax.grad(system.L, argnums=1)(q, qd, t)
    return _checked(p, q, qd, t, "momenta")


@_on_state
def energy(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Scalar:
    """The Jacobi integral h = q̇·p − L.

    It is the total energy T + V when L = T − V with T quadratic in q̇, and it is
    conserved whenever L does not depend on t explicitly and there are no
    non-conservative forces (scleronomic constraints do no work).

    **Arguments:** as for [`jaxlagrange.mass_matrix`][].

    **Returns:** the scalar h.

    **Raises:** an error (also under `jax.jit`) naming a non-finite state, or a
    non-finite h at a finite state (a user function that is not finite there).

    **Example:**

    ```python
    h = jl.energy(system, q, qd, 0.0)
    ```
    """
    return _checked(energy_unchecked(system, q, qd, t), q, qd, t, "energy")


def energy_unchecked(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> Array:
    """The Jacobi integral without checks (for trajectories that may hold inf)."""
    lagrangian, p = jax.value_and_grad(system.L, argnums=1)(q, qd, t)
    return jnp.dot(qd, p) - lagrangian


SINGULAR_MASS = (
    "The mass matrix ∂²L/∂qd² is singular or not positive definite at this state: "
    "the Lagrangian must be strictly convex in qd (for L = T − V, a kinetic energy "
    "T = ½ qdᵀ M(q) qd with M positive definite). With an iterative `mass_solver` "
    "(lineax.CG) it may instead mean that the solve did not converge within the "
    "solver's max_steps."
)
NON_FINITE_STATE = "The state (q, qd, t) contains a non-finite value (NaN or inf)."
NON_FINITE_DYNAMICS = (
    "jl.{} is not finite (NaN or inf) at this finite state: a user function (the "
    "Lagrangian, force, dissipation or a constraint) or its derivative is not finite "
    "there, e.g. the square root or logarithm of a negative number."
)


def is_finite_state(q: Array, qd: Array, t: Array) -> BoolScalar:
    return jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qd)) & jnp.isfinite(t)


def _checked(x: Array, q: Array, qd: Array, t: Array, name: str) -> Array:
    """`x`, with errors (also under `jit`) for a non-finite state or `x`."""
    finite = is_finite_state(q, qd, t)
    x = eqx.error_if(x, ~finite, NON_FINITE_STATE)
    bad = finite & ~jnp.all(jnp.isfinite(x))
    return eqx.error_if(x, bad, NON_FINITE_DYNAMICS.format(name))
