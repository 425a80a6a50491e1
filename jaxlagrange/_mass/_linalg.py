"""Factor and solve the SPD mass matrix, with a singularity flag (and, for
friction's non-symmetric Schur complement, any square matrix: `lu_solve`).

Up to `UNROLL_MAX` the factorizations are unrolled into scalar arithmetic, which
XLA fuses with the rest of q̈ under `vmap`; past it LAPACK wins. `spd_solve`
(unconstrained) is LDLᵀ, with no square root; `cholesky` gives the factor the
constrained path reuses. A quotient by a pivot d is written s * (1.0 / d), so
that the scalar form computes 1/d once for the factor and all its solves. A
factorization never produces NaN: a pivot that is not clearly positive raises
the `singular` flag, and the caller reports it.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._custom_types import Array, BoolScalar


UNROLL_MAX = 6


class Cholesky(NamedTuple):
    factor: Array  # lower triangular, M = factor @ factor.T
    singular: BoolScalar  # a pivot was not positive (relative to its diagonal)
    # With `drop`: the rows dropped as dependent on earlier ones (None without).
    dropped: Array | None = None


def _pivot_tolerance(n: int, dtype) -> float:
    return 8 * n * float(jnp.finfo(dtype).eps)


def cholesky(matrix: Array, unroll: int = UNROLL_MAX, drop: bool = False) -> Cholesky:
    """Lower Cholesky factor of a symmetric matrix, flagging non-positive pivots."""
    # `drop` (a semidefinite matrix): a row whose pivot is below √eps of its
    # diagonal (dependent on the rows before it) is replaced by the identity's.
    n = matrix.shape[0]
    tol = float(jnp.finfo(matrix.dtype).eps) ** 0.5 if drop else None
    tol = _pivot_tolerance(n, matrix.dtype) if tol is None else tol
    if drop and n > unroll:
        return _dropping_cholesky(matrix, tol)
    if n <= unroll:
        rows = [[None] * n for _ in range(n)]
        singular, dropped = jnp.array(False), []
        for j in range(n):
            pivot = matrix[j, j] - sum(rows[j][k] ** 2 for k in range(j))
            bad = ~(pivot > tol * jnp.abs(matrix[j, j]))
            singular = singular | bad
            d = jnp.sqrt(jnp.where(bad, 1.0, pivot))
            rows[j][j] = d
            if drop:
                dropped.append(bad)
                rows[j][:j] = [jnp.where(bad, 0.0, x) for x in rows[j][:j]]
            for i in range(j + 1, n):
                s = matrix[i, j] - sum(rows[i][k] * rows[j][k] for k in range(j))
                rows[i][j] = (
                    jnp.where(bad, 0.0, s * (1.0 / d)) if drop else s * (1.0 / d)
                )
        zero = jnp.zeros((), matrix.dtype)
        lower = [[rows[i][j] if j <= i else zero for j in range(n)] for i in range(n)]
        factor = jnp.stack([jnp.stack(row) for row in lower])
        return Cholesky(factor, singular, jnp.stack(dropped) if drop else None)
    factor = jnp.linalg.cholesky(matrix)
    diag = jnp.diagonal(factor)
    pivots = diag**2
    singular = ~jnp.all(jnp.isfinite(factor)) | jnp.any(
        ~(pivots > tol * jnp.abs(jnp.diagonal(matrix)))
    )
    factor = jnp.where(singular, jnp.eye(n, dtype=matrix.dtype), factor)
    return Cholesky(factor, singular)


def _dropping_cholesky(matrix: Array, tol: float) -> Cholesky:
    """`cholesky(..., drop=True)` past the unrolling: a loop over the columns."""
    n, index = matrix.shape[0], jnp.arange(matrix.shape[0])

    def column(j, carry):
        lower, dropped = carry
        row = lower[j]  # its entries left of j so far
        pivot = matrix[j, j] - row @ row
        bad = ~(pivot > tol * jnp.abs(matrix[j, j]))
        d = jnp.sqrt(jnp.where(bad, 1.0, pivot))
        below = jnp.where((index > j) & ~bad, (matrix[:, j] - lower @ row) / d, 0.0)
        lower = lower.at[:, j].set(jnp.where(index == j, d, below))
        lower = lower.at[j].set(jnp.where(bad & (index < j), 0.0, lower[j]))
        return lower, dropped.at[j].set(bad)

    init = (jnp.zeros_like(matrix), jnp.zeros((n,), bool))
    lower, dropped = jax.lax.fori_loop(0, n, column, init)
    return Cholesky(lower, jnp.any(dropped), dropped)


def _least_norm(
    matrix: Array, b: Array, unroll: int, least: bool = True
) -> tuple[Array, BoolScalar]:
    """x of `min_norm_solve`, and whether a row was dropped (rank-deficient)."""
    n, dtype = matrix.shape[0], matrix.dtype
    chol = cholesky(matrix, unroll, drop=True)
    dropped = chol.dropped
    x = cho_solve(chol.factor, jnp.where(dropped, 0.0, b), unroll)
    # Without `least`: x = 0 on the dropped rows (where only Cᵀx matters, as in a
    # projection's step).
    if not least:
        return x, chol.singular
    # The null space is spanned by n_j = e_j − S̃⁻¹ s_j for the dropped j (s_j its
    # column on the kept rows); x less its component there is the least-norm x. A
    # rational function of the entries at a fixed rank: differentiable, no
    # eigenvalues.
    eye = jnp.eye(n, dtype=dtype)
    kept = cho_solve(chol.factor, jnp.where(dropped[:, None], 0.0, matrix), unroll)
    basis = jnp.where(dropped[None, :], eye - kept, 0.0)
    gram = basis.T @ basis + jnp.where(dropped, 0.0, eye)
    x = x - basis @ cho_solve(cholesky(gram, unroll).factor, basis.T @ x, unroll)
    return x, chol.singular


def _inconsistent(matrix: Array, x: Array, b: Array) -> BoolScalar:
    """Whether `matrix @ x = b` misses by more than √eps of the terms' scale."""
    size = jnp.max(jnp.abs(b)) + jnp.max(jnp.abs(matrix)) * jnp.max(jnp.abs(x))
    residual = jnp.max(jnp.abs(matrix @ x - b))
    tol = float(jnp.finfo(matrix.dtype).eps) ** 0.5
    return ~(residual <= tol * size) & jnp.all(jnp.isfinite(b))


def min_norm_solve(
    matrix: Array, b: Array, unroll: int = UNROLL_MAX, least: bool = True
) -> tuple[Array, BoolScalar]:
    """Least-norm x of `matrix @ x = b` for PSD `matrix`, and an inconsistency flag."""
    x, _ = _least_norm(matrix, b, unroll, least)
    return x, _inconsistent(matrix, x, b)


def min_norm_lu_solve(
    matrix: Array, b: Array, unroll: int = UNROLL_MAX
) -> tuple[Array, BoolScalar]:
    """`min_norm_solve` for any square `matrix`: LU where regular, else x = Aᵀμ."""
    # (AAᵀ)μ = b least-norm, refined once. The LU never sees a singular matrix,
    # so no NaN reaches a derivative.
    normal = matrix @ matrix.T
    mu, deficient = _least_norm(normal, b, unroll)
    x = matrix.T @ mu
    x = x + matrix.T @ _least_norm(normal, b - matrix @ x, unroll)[0]
    eye = jnp.eye(matrix.shape[0], dtype=matrix.dtype)
    lu = lu_solve(jnp.where(deficient, eye, matrix), b, unroll)
    x = jnp.where(deficient, x, lu)
    return x, _inconsistent(matrix, x, b)


def solve_lower(factor: Array, b: Array, unroll: int = UNROLL_MAX) -> Array:
    """Solve `factor @ x = b` for lower-triangular `factor`; `b` is (n,) or (n, k)."""
    n = factor.shape[0]
    if n <= unroll:
        b2, xs = b.reshape(n, -1), []
        for i in range(n):
            s = b2[i] - sum(factor[i, k] * xs[k] for k in range(i))
            xs.append(s * (1.0 / factor[i, i]))
        return jnp.stack(xs).reshape(b.shape)
    return jax.scipy.linalg.solve_triangular(factor, b, lower=True)


def solve_upper_t(factor: Array, b: Array, unroll: int = UNROLL_MAX) -> Array:
    """Solve `factor.T @ x = b` for lower-triangular `factor`."""
    n = factor.shape[0]
    if n <= unroll:
        b2, xs = b.reshape(n, -1), [None] * n
        for i in reversed(range(n)):
            s = b2[i] - sum(factor[k, i] * xs[k] for k in range(i + 1, n))
            xs[i] = s * (1.0 / factor[i, i])
        return jnp.stack(xs).reshape(b.shape)
    return jax.scipy.linalg.solve_triangular(factor, b, lower=True, trans="T")


def cho_solve(factor: Array, b: Array, unroll: int = UNROLL_MAX) -> Array:
    """Solve `M x = b` given the lower Cholesky factor of M."""
    return solve_upper_t(factor, solve_lower(factor, b, unroll), unroll)


def spd_solve(
    matrix: Array, b: Array, unroll: int = UNROLL_MAX
) -> tuple[Array, BoolScalar]:
    """Solve `matrix @ x = b` for SPD `matrix` (reads one triangle), and a flag."""
    # Where `singular` is raised, x is finite but meaningless.
    n = matrix.shape[0]
    if n > unroll:
        chol = cholesky(matrix, unroll)
        return cho_solve(chol.factor, b, unroll), chol.singular
    tol = _pivot_tolerance(n, matrix.dtype)
    # M = U D Uᵀ with U unit lower triangular; w[i][j] = U[i][j] D[j].
    unit = [[None] * n for _ in range(n)]
    w = [[None] * n for _ in range(n)]
    inverse_pivots = []
    for j in range(n):
        pivot = matrix[j, j] - sum(w[j][k] * unit[j][k] for k in range(j))
        good = pivot > tol * jnp.abs(matrix[j, j])
        # A bad pivot becomes 1/inf = 0, so the flag is read off the reciprocals
        # (which a fused loop keeps) instead of recomputing the pivots.
        inverse = 1 / jnp.where(good, pivot, jnp.inf)
        inverse_pivots.append(inverse)
        for i in range(j + 1, n):
            w[i][j] = matrix[i, j] - sum(w[i][k] * unit[j][k] for k in range(j))
            unit[i][j] = w[i][j] * inverse
    y = []
    for i in range(n):
        y.append(b[i] - sum(unit[i][k] * y[k] for k in range(i)))
    x = [None] * n
    for i in reversed(range(n)):
        x[i] = y[i] * inverse_pivots[i] - sum(
            unit[k][i] * x[k] for k in range(i + 1, n)
        )
    singular = inverse_pivots[0] == 0
    for inverse in inverse_pivots[1:]:
        singular = singular | (inverse == 0)
    return jnp.stack(x), singular


def lu_solve(matrix: Array, b: Array, unroll: int = UNROLL_MAX) -> Array:
    """Solve `matrix @ x = b` for any square `matrix`, by LU with partial pivoting."""
    # Pivot: the row of the largest |entry|, the first of equals, as LAPACK. A
    # singular `matrix` gives a non-finite x, as `jnp.linalg.solve`.
    n = matrix.shape[0]
    if n > unroll:
        return jnp.linalg.solve(matrix, b)
    rows = [[matrix[i, j] for j in range(n)] + [b[i]] for i in range(n)]
    for k in range(n):
        for i in range(k + 1, n):
            # Row k keeps the largest |a_ik| seen so far (the others' order is
            # immaterial: each is eliminated by its own multiplier).
            swap = jnp.abs(rows[i][k]) > jnp.abs(rows[k][k])
            pairs = list(zip(rows[k][k:], rows[i][k:], strict=True))
            rows[k][k:] = [jnp.where(swap, y, x) for x, y in pairs]
            rows[i][k:] = [jnp.where(swap, x, y) for x, y in pairs]
        for i in range(k + 1, n):
            factor = rows[i][k] / rows[k][k]
            rows[i] = [
                None if j <= k else rows[i][j] - factor * rows[k][j]
                for j in range(n + 1)
            ]
    x = [None] * n
    for i in reversed(range(n)):
        s = rows[i][n] - sum(rows[i][j] * x[j] for j in range(i + 1, n))
        x[i] = s / rows[i][i]
    return jnp.stack(x)
