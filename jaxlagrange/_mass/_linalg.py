"""Factor and solve the SPD mass matrix, with a singularity flag (and, for
friction's non-symmetric Schur complement, any square matrix: `lu_solve`).

For small n the factorizations are unrolled into scalar arithmetic: under `vmap`
XLA fuses them with the rest of the equations of motion into one loop, where a
LAPACK call would be one batched custom call per state. Past `UNROLL_MAX` the
LAPACK routines win.

`spd_solve` (the unconstrained path) uses LDLᵀ, which needs no square root and one
reciprocal per pivot; `cholesky` gives the factor that the constrained path reuses.
Every quotient by a pivot d is written s * (1.0 / d), so that the scalar form
(`_scalar.py`) computes 1/d once for the factor and all its solves (a divide
per entry was a loop of its own on the CPU).

A factorization never produces NaN: a pivot that is not clearly positive raises
the `singular` flag, so the caller decides how to report it (an `eqx.error_if` in
the public functions, a result code in `simulate`).
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._custom_types import Array, BoolScalar


UNROLL_MAX = 6


class Cholesky(NamedTuple):
    factor: Array  # lower triangular, M = factor @ factor.T
    singular: BoolScalar  # a pivot was not positive (relative to its diagonal)


def _pivot_tolerance(n: int, dtype) -> float:
    return 8 * n * float(jnp.finfo(dtype).eps)


def cholesky(matrix: Array, unroll: int = UNROLL_MAX) -> Cholesky:
    """Lower Cholesky factor of a symmetric matrix, flagging non-positive pivots.

    Unrolled into scalar arithmetic up to n = `unroll`, LAPACK past it.
    """
    n = matrix.shape[0]
    tol = _pivot_tolerance(n, matrix.dtype)
    if n <= unroll:
        rows = [[None] * n for _ in range(n)]
        singular = jnp.array(False)
        for j in range(n):
            pivot = matrix[j, j] - sum(rows[j][k] ** 2 for k in range(j))
            bad = ~(pivot > tol * jnp.abs(matrix[j, j]))
            singular = singular | bad
            d = jnp.sqrt(jnp.where(bad, 1.0, pivot))
            rows[j][j] = d
            for i in range(j + 1, n):
                s = matrix[i, j] - sum(rows[i][k] * rows[j][k] for k in range(j))
                rows[i][j] = s * (1.0 / d)
        zero = jnp.zeros((), matrix.dtype)
        lower = [[rows[i][j] if j <= i else zero for j in range(n)] for i in range(n)]
        return Cholesky(jnp.stack([jnp.stack(row) for row in lower]), singular)
    factor = jnp.linalg.cholesky(matrix)
    diag = jnp.diagonal(factor)
    pivots = diag**2
    singular = ~jnp.all(jnp.isfinite(factor)) | jnp.any(
        ~(pivots > tol * jnp.abs(jnp.diagonal(matrix)))
    )
    factor = jnp.where(singular, jnp.eye(n, dtype=matrix.dtype), factor)
    return Cholesky(factor, singular)


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
    """Solve `matrix @ x = b`, (n, n) and (n,), for symmetric positive definite `matrix`.

    Reads one triangle. Returns `x` and the `singular` flag; where it is raised, `x`
    is finite but meaningless.
    """
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
    """Solve `matrix @ x = b`, (n, n) and (n,), for any square `matrix`.

    Gaussian elimination with partial pivoting (the row of the largest |entry|,
    the first of equals, as LAPACK), unrolled up to n = `unroll`; LAPACK past
    it. A singular `matrix` gives a non-finite `x`, as `jnp.linalg.solve`.
    """
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
