"""A lineax `mass_solver`, used as given (docs/large_systems.md): an iterative
one matrix-free on M (M v a Hessian-vector product of L in q̇, by one
`jax.linearize` of ∂L/∂q̇ per state; C and Cᵀ by JVPs of the constraints and
their transpose; C M⁻¹ Cᵀ solved matrix-free by the same solver), any other on
the formed M, factored once per state, with the formed Schur complement solved
least-norm as the dense strategy's. Friction's C M⁻¹ Dᵀ is formed and solved by
`min_norm_lu_solve`. A solve that fails (no convergence, a non-finite x, or a
non-positive x·b from a finite b) raises the failure flag, by which a singular
M is reported; an iterative solve sees a singular M only through such a
breakdown.
"""

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx

from .._custom_types import Array, BoolScalar
from .._validate import returned
from ._linalg import min_norm_lu_solve, min_norm_solve
from ._strategy import AbstractConstrained, AbstractMassFactor, AbstractMassStrategy
from ._terms import mass, momenta_of


_ITERATIVE = (lx.CG, lx.GMRES, lx.BiCGStab, lx.LSMR)
_BAD_PRECONDITIONER = (
    "`mass_preconditioner` returned a diagonal that is not positive and finite (a "
    "zero, negative, NaN or inf entry): it must approximate the diagonal of the "
    "mass matrix, whose entries are positive."
)
SPD_TAGS = (lx.symmetric_tag, lx.positive_semidefinite_tag)


def is_matrix_free(solver: lx.AbstractLinearSolver) -> bool:
    """Whether `solver` works with M v products only (an iterative lineax solver)."""
    if isinstance(solver, lx.Normal):  # e.g. lineax.NormalCG(...)
        return is_matrix_free(solver.inner_solver)
    return isinstance(solver, _ITERATIVE)


def mass_operator(
    system, q: Array, qd: Array, t: Array, matrix_free: bool
) -> lx.AbstractLinearOperator:
    """M as a lineax operator tagged symmetric positive semidefinite."""
    if matrix_free:
        _, product = jax.linearize(momenta_of(system, q, t), qd)
        structure = jax.ShapeDtypeStruct(q.shape, q.dtype)
        return lx.FunctionLinearOperator(product, structure, tags=SPD_TAGS)
    matrix = mass(system, q, qd, t)
    return lx.MatrixLinearOperator(0.5 * (matrix + matrix.T), tags=SPD_TAGS)


def _preconditioner(system, q, qd, t) -> dict[str, Any]:
    """lineax `options`: the user's preconditioner for an iterative solver, if any."""
    if system.mass_preconditioner is None:
        return {}
    out = system.call(system.mass_preconditioner, q, qd, t)
    if isinstance(out, lx.AbstractLinearOperator):
        shapes = [
            jax.tree.leaves(structure)[0].shape
            for structure in (out.in_structure(), out.out_structure())
        ]
        if any(shape != q.shape for shape in shapes):
            raise ValueError(
                "`mass_preconditioner` must return a lineax operator on vectors of "
                f"shape {q.shape} (the shape of q), but it returned one from shape "
                f"{shapes[0]} to shape {shapes[1]}."
            )
        return {"preconditioner": out}
    diagonal = jnp.asarray(out, q.dtype)
    what = f"the diagonal of M, shape {q.shape} (the shape of q), or a lineax operator"
    returned("mass_preconditioner", diagonal, diagonal.shape == q.shape, what)
    # Its inverse preconditions CG, which needs it positive definite: a zero,
    # negative or NaN entry would stop CG as if M were singular.
    bad = ~jnp.all(jnp.isfinite(diagonal) & (diagonal > 0))
    diagonal = eqx.error_if(diagonal, bad, _BAD_PRECONDITIONER)
    inverse = lx.DiagonalLinearOperator(1 / diagonal)
    return {"preconditioner": lx.TaggedLinearOperator(inverse, SPD_TAGS)}


def checked_solve(
    operator: lx.AbstractLinearOperator,
    b: Array,
    solver: lx.AbstractLinearSolver,
    iterative: bool = False,
    **kwargs,
) -> tuple[Array, BoolScalar]:
    """x = A⁻¹b with the library's flag instead of an exception."""
    # A non-finite b is never flagged: it propagates (as NaN), to be reported as
    # non-finite dynamics, not as a singular matrix.
    solution = lx.linear_solve(operator, b, solver, throw=False, **kwargs)
    x = solution.value
    failed = solution.result != lx.RESULTS.successful
    failed = failed | ~jnp.all(jnp.isfinite(x))
    # bᵀA⁻¹b > 0, unless b is below the solver's atol (then x = 0).
    failed = failed | (~(jnp.dot(x, b) > 0) & jnp.any(x != 0))
    # For b = 0 (a projection already on the manifold) x = 0, where an iterative
    # solver may break down (GMRES: a zero Krylov basis) and cannot tell a
    # singular A anyway; a direct one still flags it (a NaN from a bad pivot).
    # Only a non-finite x is replaced there: x's tangent must flow through.
    zero = jnp.all(b == 0) if iterative else jnp.array(False)
    singular = failed & ~zero & jnp.all(jnp.isfinite(b))
    replace = singular | (zero & ~jnp.all(jnp.isfinite(x)))
    return jnp.where(replace, jnp.zeros_like(x), x), singular


def linear_rows(rows: Callable[[Array], Array], like: Array):
    """C v and Cᵀλ for a linear map v ↦ C v = rows(v), C never formed."""
    # Linearized once, so each product replays only its linear part.
    _, rows_of = jax.linearize(rows, jnp.zeros_like(like))
    transpose = jax.linear_transpose(rows_of, like)
    return rows_of, lambda lam: transpose(lam)[0]


class OperatorConstrained(AbstractConstrained):
    """The KKT system with M as a lineax operator: C and Dᵀ applied, not formed."""

    factor: "LineaxFactor"
    rows_of: Callable[[Array], Array]  # v ↦ C v
    forces_of: Callable[[Array], Array]  # λ ↦ Dᵀλ
    f: Array | None
    z: Array  # M⁻¹f
    failed: BoolScalar
    symmetric: bool = eqx.field(static=True)

    def multipliers(self, target, mask=None, least=True):
        residual = target - self.rows_of(self.z)
        if mask is not None:
            residual = jnp.where(mask, residual, 0.0)

        def product(lam):
            if mask is None:
                return self.rows_of(self.factor.solve(self.forces_of(lam))[0])
            y, _ = self.factor.solve(self.forces_of(jnp.where(mask, lam, 0.0)))
            return jnp.where(mask, self.rows_of(y), lam)

        structure = jax.ShapeDtypeStruct(residual.shape, residual.dtype)
        tags = SPD_TAGS if self.symmetric else ()
        schur = lx.FunctionLinearOperator(product, structure, tags=tags)
        lam, singular = self.factor.solve_schur(schur, residual, self.symmetric, least)
        if mask is not None:
            lam = jnp.where(mask, lam, 0.0)
        return lam, singular & ~self.failed

    def solution(self, lam):
        forces = self.forces_of(lam)
        x, failed = self.factor.solve(forces if self.f is None else self.f + forces)
        return x, failed | self.failed


class LineaxFactor(AbstractMassFactor):
    """M at a state as a lineax operator, with the solver's state (its factor)."""

    operator: lx.AbstractLinearOperator
    solver: lx.AbstractLinearSolver = eqx.field(static=True)
    matrix_free: bool = eqx.field(static=True)
    options: dict[str, Any]
    state: Any
    singular: BoolScalar

    def __init__(self, solver, matrix_free, operator, options):
        self.solver, self.matrix_free = solver, matrix_free
        self.operator, self.options = operator, options
        self.state = self.init_state()
        self.singular = jnp.array(False)  # each solve flags its own failure

    def init_state(self) -> Any:
        return self.solver.init(self.operator, self.options)

    def solve_operator(self, operator, b, options, state=None):
        """x = A⁻¹b by the solver, and whether it failed."""
        kwargs = {} if state is None else {"state": state}
        return checked_solve(
            operator, b, self.solver, self.matrix_free, options=options, **kwargs
        )

    def solve(self, b):
        return self.solve_operator(self.operator, b, self.options, self.state)

    def solve_schur(self, schur, residual, symmetric, least=True):
        """λ solving S λ = residual (least-norm), and whether it has no solution."""
        # CG from λ₀ = 0 stays in the range of S: its λ is the least-norm one.
        if symmetric and self.matrix_free:
            return self.solve_operator(schur, residual, {})
        if symmetric:
            return min_norm_solve(schur.as_matrix(), residual, least=least)
        return min_norm_lu_solve(schur.as_matrix(), residual)

    def constrain(self, rows, f=None, directions=None):
        structure = self.operator.in_structure()
        like = jnp.zeros(structure.shape, structure.dtype)
        rows_of, forces_of = linear_rows(rows.apply, like)
        if directions is not None:
            _, forces_of = linear_rows(directions.apply, like)
        z, failed = (like, jnp.array(False)) if f is None else self.solve(f)
        return OperatorConstrained(
            self, rows_of, forces_of, f, z, failed, directions is None
        )

    def nearly_singular(self, start, direction):
        # No pivots (M may never be formed), but a solution that blows up at a
        # singular M runs into M's soft direction, along which q̈ grows. There M's
        # Rayleigh quotient has fallen below eps^(1/4) of its value at start.
        v = direction / jnp.linalg.norm(direction)
        now = jnp.dot(v, self.operator.mv(v))
        before = jnp.dot(v, start.operator.mv(v))
        soft = now <= jnp.finfo(v.dtype).eps ** 0.25 * jnp.abs(before)
        return jnp.isfinite(now) & jnp.isfinite(before) & soft


class LineaxMass(AbstractMassStrategy):
    """A lineax `mass_solver` used as given (see the module docstring)."""

    solver: lx.AbstractLinearSolver = eqx.field(static=True)
    matrix_free: bool = eqx.field(static=True)
    factor_cls: ClassVar[type[LineaxFactor]] = LineaxFactor

    def __init__(self, solver: lx.AbstractLinearSolver):
        self.solver, self.matrix_free = solver, is_matrix_free(solver)

    def factor(self, system, q, qd, t) -> LineaxFactor:
        operator = mass_operator(system, q, qd, t, self.matrix_free)
        options = _preconditioner(system, q, qd, t) if self.matrix_free else {}
        return self.factor_cls(self.solver, self.matrix_free, operator, options)
