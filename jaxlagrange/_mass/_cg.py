"""`mass_solver=lineax.CG(...)`: jaxlagrange's own conjugate gradients, with the
given solver's `rtol`, `atol`, `norm`, `max_steps` and the system's
`mass_preconditioner`, under `jax.lax.custom_linear_solve`, without what costs
most in lineax's under `vmap` (docs/large_systems.md). It also solves the
Schur complement C M⁻¹ Cᵀ, matrix-free.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import lineax as lx

from .._custom_types import Array, BoolScalar
from ._lineax import LineaxFactor, LineaxMass


def conjugate_gradient(
    matvec: Callable[[Array], Array],
    b: Array,
    solver: lx.CG,
    preconditioner: lx.AbstractLinearOperator | None = None,
) -> tuple[Array, BoolScalar]:
    """x = A⁻¹b for a symmetric positive definite A given by `matvec`, by CG."""
    # 10 n products by default, as lineax and SciPy.
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
            # nothing): outside the loop it costs no loop overhead.
            carry = body(carry)
        x, r, *_ = jax.lax.while_loop(lambda carry: carry[-1] > 0, body, carry)
        # A NaN residual passes the test: from a finite b it is a breakdown
        # (an exactly singular A, where rounding gives pᵀAp a tiny positive
        # value); from a non-finite b it propagates, reported as non-finite
        # dynamics.
        breakdown = ~jnp.all(jnp.isfinite(x)) & jnp.all(jnp.isfinite(b))
        return x, unconverged(r) | breakdown

    # A is symmetric: the transposed solve (for gradients) is this one.
    return jax.lax.custom_linear_solve(matvec, b, solve, symmetric=True, has_aux=True)


class CGFactor(LineaxFactor):
    """M at a state, solved by `conjugate_gradient` (no factorization)."""

    def init_state(self):
        return None

    def solve_operator(self, operator, b, options, state=None):
        del state
        preconditioner = options.get("preconditioner")
        # A non-finite b makes the residual test NaN, which is not a failure.
        return conjugate_gradient(operator.mv, b, self.solver, preconditioner)


class ConjugateGradientMass(LineaxMass):
    """`lineax.CG` as the mass solver, run by `conjugate_gradient` (see above)."""

    factor_cls = CGFactor
