"""The dense strategy (`mass_solver=None`): M formed and factored by Cholesky.

M and f come from one forward pass (`_terms.terms`). With M = LLᵀ, Y = L⁻¹Cᵀ,
W = L⁻¹Dᵀ and z = L⁻¹f, the KKT system of `_strategy` reads

    (YᵀW) λ = target − Yᵀz,    x = L⁻ᵀ(z + Wλ),

so M is factored once and the small Schur complement YᵀW is factored by
Cholesky (D = C: YᵀY, symmetric positive semidefinite) or LU (friction).
Redundant rows (rank-deficient C: a box flat on four corners) make YᵀY
singular; λ is then its least-norm solution (`min_norm_solve`), q̈ being the
same for every solution, and only an inconsistent system is flagged. The
unconstrained q̈ takes LDLᵀ (`spd_solve`): no square root.
"""

import equinox as eqx
import jax.numpy as jnp

from .._custom_types import Array, BoolScalar
from ._linalg import (
    UNROLL_MAX,
    cho_solve,
    cholesky,
    min_norm_lu_solve,
    min_norm_solve,
    solve_lower,
    solve_upper_t,
    spd_solve,
)
from ._strategy import (
    AbstractConstrained,
    AbstractMassFactor,
    AbstractMassStrategy,
    as_matrix,
)
from ._terms import mass, terms


class DenseConstrained(AbstractConstrained):
    lower: Array  # L
    y: Array  # L⁻¹Cᵀ, (n, c)
    w: Array  # L⁻¹Dᵀ
    z: Array | None  # L⁻¹f (None: f = 0)
    schur: Array  # YᵀW = C M⁻¹ Dᵀ, (c, c)
    free: Array  # Yᵀz = C M⁻¹ f
    symmetric: bool = eqx.field(static=True)
    unroll: int = eqx.field(static=True)

    def multipliers(self, target, mask=None, least=True):
        residual = target - self.free
        schur = self.schur
        if mask is not None:
            # Inactive rows become λ_i = 0.
            both = mask[:, None] & mask[None, :]
            schur = jnp.where(both, schur, jnp.eye(mask.shape[0], dtype=schur.dtype))
            residual = jnp.where(mask, residual, 0.0)
        if self.symmetric:
            lam, singular = min_norm_solve(schur, residual, self.unroll, least)
        else:
            lam, singular = min_norm_lu_solve(schur, residual, self.unroll)
        if mask is not None:
            lam = jnp.where(mask, lam, 0.0)
        return lam, singular

    def solution(self, lam):
        wl = self.w @ lam
        rhs = wl if self.z is None else self.z + wl
        return solve_upper_t(self.lower, rhs, self.unroll), jnp.array(False)


class DenseFactor(AbstractMassFactor):
    matrix: Array  # M (one triangle is read)
    lower: Array  # L, M = LLᵀ (the identity where M is singular past the unrolling)
    singular: BoolScalar
    unroll: int = eqx.field(static=True)

    def __init__(self, matrix: Array, unroll: int):
        chol = cholesky(matrix, unroll)
        self.matrix, self.lower, self.singular = matrix, chol.factor, chol.singular
        self.unroll = unroll

    def solve(self, b: Array) -> tuple[Array, BoolScalar]:
        return cho_solve(self.lower, b, self.unroll), jnp.array(False)

    def constrain(self, rows, f=None, directions=None) -> DenseConstrained:
        n, dtype = self.lower.shape[0], self.lower.dtype
        y = solve_lower(self.lower, as_matrix(rows, n, dtype).T, self.unroll)
        if directions is None:
            w = y
        else:
            w = solve_lower(self.lower, as_matrix(directions, n, dtype).T, self.unroll)
        if f is None:
            z, free = None, jnp.zeros(y.shape[1], dtype)
        else:
            z = solve_lower(self.lower, f, self.unroll)
            free = y.T @ z
        return DenseConstrained(
            self.lower, y, w, z, y.T @ w, free, directions is None, self.unroll
        )

    def nearly_singular(self, start, direction):
        del direction
        # A pivot of M has fallen below eps^(1/4) of that diagonal entry at start.
        pivots = jnp.diagonal(self.lower) ** 2
        ratios = pivots / jnp.abs(jnp.diagonal(start.matrix))
        return ~jnp.all(ratios > jnp.finfo(ratios.dtype).eps ** 0.25)


class DenseCholesky(AbstractMassStrategy):
    """M formed (with f, in one pass) and factored by Cholesky."""

    # Scalar code up to n = `unroll`: under `vmap` XLA fuses it with the rest of
    # the equations into one loop, where LAPACK is one batched call per state.
    unroll: int = eqx.field(static=True, default=UNROLL_MAX)
    # q̈ as scalar code throughout (`_eom.scalar_where_small`); the ensemble
    # kernel, which writes out lane by lane, turns it off.
    scalar: bool = eqx.field(static=True, default=True)

    def factor(self, system, q, qd, t) -> DenseFactor:
        return DenseFactor(mass(system, q, qd, t), self.unroll)

    def terms(self, system, q, qd, t) -> tuple[DenseFactor, Array]:
        out = terms(system, q, qd, t)
        return DenseFactor(out.mass, self.unroll), out.forcing

    def accelerations(self, system, q, qd, t) -> tuple[Array, BoolScalar]:
        out = terms(system, q, qd, t)
        return spd_solve(out.mass, out.forcing, self.unroll)
