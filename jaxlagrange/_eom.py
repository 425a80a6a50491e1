"""Mass matrix, forcing term, momenta and energy of a `LagrangianSystem`.

With p(q, q̇, t) = ∂L/∂q̇, Lagrange's equations read M q̈ = f with

    M = ∂p/∂q̇,    f = ∂L/∂q − (∂p/∂q) q̇ − ∂p/∂t + Q.

The velocity-product and explicit-time term (∂p/∂q) q̇ + ∂p/∂t is one
Jacobian-vector product of p along (q̇, 1); the columns of M are its products
along the unit directions in q̇. No mixed Hessian is ever formed.

For small n (up to `_UNROLL_MAX`) every entry is its own forward-mode derivative
of L with respect to scalar coordinates, e.g. M_ij = ∂/∂q̇_j (∂L/∂q̇_i). Under
`vmap` this keeps the whole equation of motion elementwise over the batch, so XLA
compiles it (with the unrolled solve of `_linalg`) into one loop that computes
each sine and cosine of L once; reverse mode would route the gradient through the
transposes of the user's indexing, which XLA materializes as padded arrays.
For larger n it is one `vmap` of the n + 1 products over ∇L.
"""

import functools
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ._custom_types import (
    Array,
    BoolScalar,
    Matrix,
    Scalar,
    ScalarLike,
    Vector,
    VectorLike,
)
from ._linalg import _UNROLL_MAX, spd_solve
from ._system import LagrangianSystem, _as_state


class _Terms(NamedTuple):
    mass: Array  # M = ∂²L/∂q̇², (n, n); exact in its lower triangle
    forcing: Array  # f, (n,): everything but the constraint forces


def _derivative(fn, x: Array) -> Array:
    return jax.jvp(fn, (x,), (jnp.ones_like(x),))[1]


def _put(xs: list, i: int, x) -> list:
    return xs[:i] + [x] + xs[i + 1 :]


def _entries(
    system: LagrangianSystem, q: Array, qd: Array, t: Array
) -> tuple[list[list[Array]], list[Array]]:
    """Small n: the entries of M (rows of scalars) and of f (without Q)."""
    n = q.shape[0]
    qs = [q[i] for i in range(n)]
    qds = [qd[i] for i in range(n)]
    one = jnp.ones((), q.dtype)

    def lagrangian(qs, qds, t):
        return system._lagrangian(jnp.stack(qs), jnp.stack(qds), t)

    def momentum(i, qs, qds, t):
        return _derivative(lambda x: lagrangian(qs, _put(qds, i, x), t), qds[i])

    def mass(i, j):  # M_ij = ∂p_i/∂q̇_j
        return _derivative(lambda y: momentum(i, qs, _put(qds, j, y), t), qds[j])

    def forcing(i):  # ∂L/∂q_i − (∂p_i/∂q) q̇ − ∂p_i/∂t
        dldq = _derivative(lambda x: lagrangian(_put(qs, i, x), qds, t), qs[i])
        _, rate = jax.jvp(lambda qs, t: momentum(i, qs, qds, t), (qs, t), (qds, one))
        return dldq - rate

    lower = {(i, j): mass(i, j) for i in range(n) for j in range(i + 1)}
    rows = [[lower[max(i, j), min(i, j)] for j in range(n)] for i in range(n)]
    return rows, [forcing(i) for i in range(n)]


def _vector_terms(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> _Terms:
    n = q.shape[0]
    dtype = q.dtype

    def gradient(q, qd, t):
        return jax.grad(system._lagrangian, argnums=(0, 1))(q, qd, t)

    # n + 1 tangent directions: (0, e_i, 0) for the mass matrix, (q̇, 0, 1) for f.
    tq = jnp.concatenate([jnp.zeros((n, n), dtype), qd[None]])
    tqd = jnp.concatenate([jnp.eye(n, dtype=dtype), jnp.zeros((1, n), dtype)])
    tt = jnp.concatenate([jnp.zeros(n, dtype), jnp.ones(1, dtype)])

    def push(tq, tqd, tt):
        return jax.jvp(gradient, (q, qd, t), (tq, tqd, tt))

    (dldq, _), (_, dp) = jax.vmap(push, out_axes=(None, 0))(tq, tqd, tt)
    # Row i of dp is ∂p/∂q̇_i; M is symmetric, and the solvers read one triangle.
    return _Terms(dp[:n], dldq - dp[n])


def _terms(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> _Terms:
    """M and f at a state (f includes the generalized and the Rayleigh forces)."""
    if q.shape[0] <= _UNROLL_MAX:
        rows, forcing = _entries(system, q, qd, t)
        terms = _Terms(jnp.stack([jnp.stack(row) for row in rows]), jnp.stack(forcing))
    else:
        terms = _vector_terms(system, q, qd, t)
    force = system._force(q, qd, t)
    if force is None:
        return terms
    return terms._replace(forcing=terms.forcing + force)


def _unconstrained(
    system: LagrangianSystem, q: Array, qd: Array, t: Array
) -> tuple[Array, BoolScalar]:
    """q̈ = M⁻¹f without constraints, and whether M is singular or indefinite."""
    if q.shape[0] > _UNROLL_MAX:
        terms = _terms(system, q, qd, t)
        return spd_solve(terms.mass, terms.forcing)
    # Scalars all the way into the unrolled solve: no stacking and slicing back.
    rows, forcing = _entries(system, q, qd, t)
    force = system._force(q, qd, t)
    if force is not None:
        forcing = [f + force[i] for i, f in enumerate(forcing)]
    return spd_solve(rows, forcing)


def _on_state(fn):
    """Check and convert the state, then call `fn` compiled (eager calls are fast)."""
    compiled = eqx.filter_jit(fn)

    @functools.wraps(fn)
    def wrapper(system, q, qd, t):
        return compiled(system, *_as_state(q, qd, t))

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
    Lagrangian's output are wrong.

    **Example:**

    ```python
    M = jl.mass_matrix(system, q, qd, 0.0)
    ```
    """

    def momenta_of(qd):
        return jax.grad(system._lagrangian, argnums=1)(q, qd, t)

    mass = jax.jacfwd(momenta_of)(qd)
    return 0.5 * (mass + mass.T)


@_on_state
def momenta(
    system: LagrangianSystem, q: VectorLike, qd: VectorLike, t: ScalarLike
) -> Vector:
    """The generalized (canonical) momenta p = ∂L/∂q̇.

    **Arguments:** as for [`jaxlagrange.mass_matrix`][].

    **Returns:** p, shape (n,). For a charge in a magnetic field this is the
    canonical momentum m v + e A, not the kinetic one.

    **Example:**

    ```python
    p = jl.momenta(system, q, qd, 0.0)
    ```
    """
    return jax.grad(system._lagrangian, argnums=1)(q, qd, t)


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

    **Example:**

    ```python
    h = jl.energy(system, q, qd, 0.0)
    ```
    """
    lagrangian, p = jax.value_and_grad(system._lagrangian, argnums=1)(q, qd, t)
    return jnp.dot(qd, p) - lagrangian


_SINGULAR_MASS = (
    "The mass matrix ∂²L/∂qd² is singular or not positive definite at this state: "
    "the Lagrangian must be strictly convex in qd (for L = T − V, a kinetic energy "
    "T = ½ qdᵀ M(q) qd with M positive definite)."
)
_NON_FINITE_STATE = "The state (q, qd, t) contains a non-finite value (NaN or inf)."


def _finite(q: Array, qd: Array, t: Array) -> BoolScalar:
    return jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qd)) & jnp.isfinite(t)


def _check_finite(x: Array, q: Array, qd: Array, t: Array) -> Array:
    return eqx.error_if(x, ~_finite(q, qd, t), _NON_FINITE_STATE)
