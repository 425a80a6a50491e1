"""How M q̈ = f is solved: one strategy object per system, chosen once.

`LagrangianSystem(mass_solver=...)` turns its `mass_solver` into a strategy
(`mass_strategy`), and every module that solves with the mass matrix M (the
equations of motion, constraints, friction, impulses, projection, the failure
diagnosis, linearize and the variational integrator) goes through it:

    factor = system.mass_strategy.factor(system, q, qd, t)     # M at a state
    factor, f = system.mass_strategy.terms(system, q, qd, t)  # M and f together
    x, failed = factor.solve(b)                                # M⁻¹b
    kkt = factor.constrain(rows, f)                            # with C q̈ = target
    lam, singular = kkt.multipliers(target, mask)              # (C M⁻¹ Dᵀ) λ = ...
    qdd, failed = kkt.solution(lam)                            # M⁻¹(f + Dᵀλ)

As in lineax, a factor is made once per state (`init`) and solves many times.
The constrained solve is the Schur complement of the KKT system

    M x = f + Dᵀλ,    C x = target    ⇒    (C M⁻¹ Dᵀ) λ = target − C M⁻¹ f,

with D = C but for the slipping rows of Coulomb friction; rows outside `mask`
exert no force (λ = 0). It serves the equations of motion (f the forcing), an
impulse (f the applied impulse, target the wanted rates) and the projections
(f = 0: the correction of least M-norm).

The strategies: `DenseCholesky` (`mass_solver=None`, `_dense.py`), `LineaxMass`
(a lineax solver as given, `_lineax.py`) and `ConjugateGradientMass`
(`lineax.CG`, matrix-free, `_cg.py`).
"""

import abc
from collections.abc import Callable
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx

from .._custom_types import Array, BoolScalar
from .._validate import check_callable
from ._terms import forcing


class Rows(NamedTuple):
    """A constraint matrix C: the linear map v ↦ C v, and C itself if formed."""

    apply: Callable[[Array], Array]
    matrix: Array | None = None


def as_matrix(rows: Rows, n: int, dtype) -> Array:
    """C, (c, n)."""
    if rows.matrix is not None:
        return rows.matrix
    return jax.jacfwd(rows.apply)(jnp.zeros((n,), dtype))


class AbstractConstrained(eqx.Module):
    """The KKT system M x = f + Dᵀλ, C x = target at one state, M factored."""

    @abc.abstractmethod
    def multipliers(
        self, target: Array, mask: Array | None = None, least: bool = True
    ) -> tuple[Array, BoolScalar]:
        """λ (zero outside `mask`), and whether the system has no solution."""
        # Least-norm where C M⁻¹ Dᵀ is singular, as with redundant rows; without
        # `least` any solution, where only Dᵀλ is used.

    @abc.abstractmethod
    def solution(self, lam: Array) -> tuple[Array, BoolScalar]:
        """x = M⁻¹(f + Dᵀλ), and whether a mass solve failed (here or before)."""


class AbstractMassFactor(eqx.Module):
    """M at one state, ready to solve with."""

    # Raised when the factorization found M singular or indefinite; a solver
    # that does not factor flags each failed solve instead.
    singular: eqx.AbstractVar[BoolScalar]

    @abc.abstractmethod
    def solve(self, b: Array) -> tuple[Array, BoolScalar]:
        """x = M⁻¹b for b of shape (n,), and whether the solve failed."""
        # A non-finite b is never flagged: it propagates, to be reported as
        # non-finite dynamics and not as a singular M.

    @abc.abstractmethod
    def constrain(
        self, rows: Rows, f: Array | None = None, directions: Rows | None = None
    ) -> AbstractConstrained:
        """The KKT system: rows C, forcing f (None: 0), force directions D (None: C)."""

    @abc.abstractmethod
    def nearly_singular(
        self, start: "AbstractMassFactor", direction: Array
    ) -> BoolScalar:
        """Whether M has fallen below eps^(1/4) of M at `start` along the runaway q̈."""
        # The failure diagnosis: a solution that blows up at a singular M stops
        # just short of it.


class AbstractMassStrategy(eqx.Module):
    """Makes the factors of M for a system (see the module docstring)."""

    @abc.abstractmethod
    def factor(self, system, q: Array, qd: Array, t: Array) -> AbstractMassFactor:
        """M at a state."""

    def terms(
        self, system, q: Array, qd: Array, t: Array
    ) -> tuple[AbstractMassFactor, Array]:
        """M and the forcing f at a state."""
        return self.factor(system, q, qd, t), forcing(system, q, qd, t)

    def accelerations(
        self, system, q: Array, qd: Array, t: Array
    ) -> tuple[Array, BoolScalar]:
        """Unconstrained q̈ = M⁻¹f, and whether M is singular or the solve failed."""
        factor, f = self.terms(system, q, qd, t)
        x, failed = factor.solve(f)
        return x, factor.singular | failed


def check_mass_solver(solver: Any, preconditioner: Callable | None) -> None:
    """The trace-time checks of `mass_solver` and `mass_preconditioner`."""
    if solver is not None and not isinstance(solver, lx.AbstractLinearSolver):
        raise ValueError(
            "`mass_solver` must be None (dense Cholesky) or a lineax solver such as "
            f"lineax.CG(rtol=1e-10, atol=1e-10) or lineax.Cholesky(), got {solver!r}."
        )
    if preconditioner is not None:
        what = "(q, qd, t[, params]) returning the diagonal of M or a lineax operator"
        check_callable("mass_preconditioner", preconditioner, what)
