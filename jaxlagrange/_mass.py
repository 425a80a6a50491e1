"""Mass solves with a lineax solver: dense, or matrix-free for large systems.

`LagrangianSystem(..., mass_solver=None)` keeps the unrolled/LAPACK Cholesky of
`_linalg.py`. With a lineax solver, M q̈ = f goes through `lineax.linear_solve`:

- an iterative solver (`lineax.CG`, `GMRES`, `BiCGStab`, `NormalCG`, `LSMR`) works
  matrix-free: M v is a Hessian-vector product of L in q̇ (forward over reverse,
  `jax.linearize` of ∂L/∂q̇ once per state, so each product replays only the
  tangent half), and M is never formed. A chain whose Lagrangian couples
  neighbours costs O(n) per product, and CG needs few products when M is well
  conditioned (a multiple of the identity: one);
- any other lineax solver (`lineax.Cholesky()`, `LU()`, ...) gets the
  materialized M, formed as in the dense path.

The forcing term is one gradient in q and one JVP of ∂L/∂q̇ along (q̇, 0, 1).
A solve that does not converge, or returns a non-finite value from a finite
right-hand side, raises the `singular` flag, so that the public functions and
`simulate` report a singular mass matrix by name. CG detects a singular or
indefinite M only through such a breakdown (and a non-positive q̈·f); the dense
factorization checks every pivot.

`lineax.CG` is run by `conjugate_gradient` below, with the solver's `rtol`,
`atol`, `norm`, `max_steps` and the preconditioner, under
`jax.lax.custom_linear_solve` (so gradients go through the solve implicitly).
It is lineax's iteration without what costs most under `vmap` when M is cheap to
apply: lineax's CG starts with a product M·0, stops only when the last step is
also small in q̈-space (one more product), and branches every iteration to
recompute the residual every tenth. On the cavity (B = 64 states, 129
coordinates) this solve takes about half the time of `lineax.linear_solve`'s.
The other iterative solvers go through `lineax.linear_solve`.
"""

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx

from ._custom_types import Array, BoolScalar


_ITERATIVE = (lx.CG, lx.GMRES, lx.BiCGStab, lx.LSMR)
_BAD_PRECONDITIONER = (
    "`mass_preconditioner` returned a diagonal that is not positive and finite (a "
    "zero, negative, NaN or inf entry): it must approximate the diagonal of the "
    "mass matrix, whose entries are positive."
)
SPD_TAGS = (lx.symmetric_tag, lx.positive_semidefinite_tag)


def is_matrix_free(solver: lx.AbstractLinearSolver | None) -> bool:
    """Whether `solver` works with M v products only (an iterative lineax solver)."""
    if isinstance(solver, lx.Normal):  # e.g. lineax.NormalCG(...)
        return is_matrix_free(solver.inner_solver)
    return isinstance(solver, _ITERATIVE)


def forcing(system, q: Array, qd: Array, t: Array) -> Array:
    """f = ∂L/∂q − (∂p/∂q) q̇ − ∂p/∂t + Q: ∇_q L, and one JVP of p along (q̇, 0, 1).

    Cheaper than one JVP of the whole ∇L (as `_eom._terms` takes, where the n
    mass-matrix tangents share its primal): that one also carries the tangent of
    ∂L/∂q, which the forcing does not need.
    """
    dldq = jax.grad(system._lagrangian, argnums=0)(q, qd, t)

    def momenta(q, qd, t):
        return jax.grad(system._lagrangian, argnums=1)(q, qd, t)

    tangents = (qd, jnp.zeros_like(qd), jnp.ones_like(t))
    _, dp = jax.jvp(momenta, (q, qd, t), tangents)
    f = dldq - dp
    force = system._force(q, qd, t)
    return f if force is None else f + force


def mass_operator(system, q: Array, qd: Array, t: Array) -> lx.AbstractLinearOperator:
    """M as a lineax operator tagged symmetric positive semidefinite.

    Matrix-free (Hessian-vector products) for an iterative `mass_solver`,
    materialized otherwise.
    """

    def momenta(v):
        return jax.grad(system._lagrangian, argnums=1)(q, v, t)

    if is_matrix_free(system.mass_solver):
        _, product = jax.linearize(momenta, qd)
        structure = jax.ShapeDtypeStruct(q.shape, q.dtype)
        return lx.FunctionLinearOperator(product, structure, tags=SPD_TAGS)
    mass = jax.jacfwd(momenta)(qd)
    return lx.MatrixLinearOperator(0.5 * (mass + mass.T), tags=SPD_TAGS)


def _preconditioner(system, q, qd, t) -> dict[str, Any]:
    """lineax `options`: the user's preconditioner for an iterative solver, if any."""
    if system.mass_preconditioner is None or not is_matrix_free(system.mass_solver):
        return {}
    out = system._call(system.mass_preconditioner, q, qd, t)
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
    if diagonal.shape != q.shape:
        raise ValueError(
            "`mass_preconditioner` must return the diagonal of the mass matrix, "
            f"shape {q.shape} (the shape of q), or a lineax operator, but it "
            f"returned shape {diagonal.shape}."
        )
    # Its inverse preconditions CG, which needs it positive definite: a zero,
    # negative or NaN entry would stop CG as if M were singular.
    bad = ~jnp.all(jnp.isfinite(diagonal) & (diagonal > 0))
    diagonal = eqx.error_if(diagonal, bad, _BAD_PRECONDITIONER)
    inverse = lx.DiagonalLinearOperator(1 / diagonal)
    return {"preconditioner": lx.TaggedLinearOperator(inverse, SPD_TAGS)}


def conjugate_gradient(
    matvec: Callable[[Array], Array],
    b: Array,
    solver: lx.CG,
    preconditioner: lx.AbstractLinearOperator | None = None,
) -> tuple[Array, BoolScalar]:
    """x = A⁻¹b for a symmetric positive definite A given by `matvec`, by CG.

    Preconditioned conjugate gradients from x₀ = 0. It stops when the residual r
    passes lineax's test `solver.norm(r / (atol + rtol |b|)) ≤ 1`, when r·z = 0
    (solved exactly), when pᵀAp ≤ 0 (A is not positive definite along p), or
    after `solver.max_steps` products (default 10 n, as lineax and SciPy).
    Differentiable in b and in whatever `matvec` closes over, by
    `jax.lax.custom_linear_solve` (A is symmetric: the transposed solve is this
    one).

    **Returns:** x, and whether the solve failed (r does not pass the test).
    """
    max_steps = 10 * b.size if solver.max_steps is None else solver.max_steps
    precondition = (lambda r: r) if preconditioner is None else preconditioner.mv

    def solve(matvec, b):
        scale = solver.atol + solver.rtol * jnp.abs(b)

        def unconverged(r):
            return solver.norm(r / scale) > 1

        def going(r, gamma, step):  # as a float: see below
            go = (gamma > 0) & unconverged(r) & (step < max_steps)
            return go.astype(b.dtype)

        def body(carry):
            x, r, p, gamma, step, _ = carry
            ap = matvec(p)
            curvature = jnp.dot(p, ap)
            # A breakdown ends the loop (γ = 0) with r unconverged. Whether to go
            # on is computed here, once per step, and carried as a float: the
            # loop's test then costs nothing, and a boolean in the carry of a
            # batched loop costs as much as the rest of a cheap step.
            positive = curvature > 0
            alpha = jnp.where(positive, gamma / curvature, 0.0)
            x = x + alpha * p
            r = r - alpha * ap
            z = precondition(r)
            gamma_next = jnp.where(positive, jnp.dot(r, z), 0.0)
            p = z + jnp.where(positive, gamma_next / gamma, 0.0) * p
            step = step + 1
            return x, r, p, gamma_next, step, going(r, gamma_next, step)

        z = precondition(b)
        gamma = jnp.dot(b, z)
        carry = (jnp.zeros_like(b), b, z, gamma, 0, going(b, gamma, 0))
        if max_steps > 0:
            # Every solve with b ≠ 0 takes a first step (with b = 0 it changes
            # nothing): outside the loop it costs no loop overhead, a fifth of
            # the cavity's solve under `vmap`.
            carry = body(carry)
        x, r, *_ = jax.lax.while_loop(lambda carry: carry[-1] > 0, body, carry)
        return x, unconverged(r)

    return jax.lax.custom_linear_solve(matvec, b, solve, symmetric=True, has_aux=True)


class MassSolve:
    """M⁻¹ at one state: the operator, the solver's state (a factor) and options."""

    def __init__(self, system, q: Array, qd: Array, t: Array):
        self.solver = system.mass_solver
        self.operator = mass_operator(system, q, qd, t)
        self.options = _preconditioner(system, q, qd, t)
        own_cg = isinstance(self.solver, lx.CG)
        self.state = None if own_cg else self.solver.init(self.operator, self.options)

    def __call__(self, b: Array) -> tuple[Array, BoolScalar]:
        """x = M⁻¹b and whether the solve failed (then x is meaningless)."""
        return checked_solve(
            self.operator, b, self.solver, options=self.options, state=self.state
        )


def checked_solve(
    operator: lx.AbstractLinearOperator,
    b: Array,
    solver: lx.AbstractLinearSolver,
    **kwargs,
) -> tuple[Array, BoolScalar]:
    """x = A⁻¹b with the library's flag instead of an exception.

    `lineax.CG` runs as `conjugate_gradient`, whose own stop test flags a
    breakdown or a step limit. Any other solver goes through
    `lineax.linear_solve`, flagged when lineax reports a failure, or when a
    finite `b` gives a non-finite or (for an SPD operator) non-positive x·b. A
    non-finite `b` is never flagged: it propagates (as NaN) to be reported as
    non-finite dynamics, not as a singular matrix.
    """
    if isinstance(solver, lx.CG):
        options = kwargs.get("options") or {}
        preconditioner = options.get("preconditioner")
        # A non-finite b makes the residual test NaN, which is not a failure.
        return conjugate_gradient(operator.mv, b, solver, preconditioner)
    solution = lx.linear_solve(operator, b, solver, throw=False, **kwargs)
    x = solution.value
    failed = solution.result != lx.RESULTS.successful
    failed = failed | ~jnp.all(jnp.isfinite(x))
    failed = failed | (jnp.any(b != 0) & ~(jnp.dot(x, b) > 0))
    singular = failed & jnp.all(jnp.isfinite(b))
    return jnp.where(singular, jnp.zeros_like(x), x), singular


def linear_rows(rows: Callable[[Array], Array], like: Array):
    """C v and Cᵀλ for a linear map v ↦ C v = rows(v), C never formed.

    `rows` is linearized once (so each product replays only its linear part),
    and transposed by `jax.linear_transpose`.
    """
    _, rows_of = jax.linearize(rows, jnp.zeros_like(like))
    transpose = jax.linear_transpose(rows_of, like)

    def forces_of(lam: Array) -> Array:
        return transpose(lam)[0]

    return rows_of, forces_of


def schur_solve(
    solve: MassSolve,
    rows_of: Callable[[Array], Array],
    forces_of: Callable[[Array], Array],
    residual: Array,
    mask: Array | None = None,
) -> tuple[Array, BoolScalar]:
    """λ with (C M⁻¹ Cᵀ) λ = residual, and whether the Schur complement is singular.

    C v = `rows_of(v)`, Cᵀλ = `forces_of(λ)`; each product of the Schur
    complement S takes one mass solve. An iterative `mass_solver` applies S
    matrix-free, any other gets it formed. Rows outside `mask` exert no force
    and are the identity (their λ = residual, zero where the caller zeroes the
    residual).
    """

    def product(lam):
        if mask is None:
            return rows_of(solve(forces_of(lam))[0])
        y, _ = solve(forces_of(jnp.where(mask, lam, 0.0)))
        return jnp.where(mask, rows_of(y), lam)

    structure = jax.ShapeDtypeStruct(residual.shape, residual.dtype)
    schur = lx.FunctionLinearOperator(product, structure, tags=SPD_TAGS)
    if not is_matrix_free(solve.solver):
        schur = lx.MatrixLinearOperator(schur.as_matrix(), tags=SPD_TAGS)
    return checked_solve(schur, residual, solve.solver)


def min_norm_correction(
    solve: MassSolve, rows: Callable[[Array], Array], residual: Array, like: Array
) -> tuple[Array, BoolScalar, BoolScalar]:
    """Δ = −M⁻¹Cᵀ(CM⁻¹Cᵀ)⁻¹ r, the smallest correction in M's norm with C Δ = −r.

    C v = `rows(v)` (linear in v), M⁻¹ by `solve`: neither M nor C is formed.

    **Returns:** Δ, whether a mass solve failed, whether C M⁻¹ Cᵀ is singular.
    """
    rows_of, forces_of = linear_rows(rows, like)
    lam, singular_schur = schur_solve(solve, rows_of, forces_of, residual)
    delta, singular_mass = solve(forces_of(lam))
    return -delta, singular_mass, singular_schur


def lineax_unconstrained(system, q: Array, qd: Array, t: Array):
    """q̈ = M⁻¹f with the system's lineax `mass_solver`, and the `singular` flag."""
    return MassSolve(system, q, qd, t)(forcing(system, q, qd, t))


def check_mass_solver(solver: Any, preconditioner: Callable | None) -> None:
    """The trace-time checks of `mass_solver` and `mass_preconditioner`."""
    if solver is not None and not isinstance(solver, lx.AbstractLinearSolver):
        raise ValueError(
            "`mass_solver` must be None (dense Cholesky) or a lineax solver such as "
            f"lineax.CG(rtol=1e-10, atol=1e-10) or lineax.Cholesky(), got {solver!r}."
        )
    if preconditioner is not None and not callable(preconditioner):
        raise ValueError(
            "`mass_preconditioner` must be a function (q, qd, t[, params]) returning "
            f"the diagonal of M or a lineax operator, got {type(preconditioner)}."
        )
