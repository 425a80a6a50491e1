"""Solving with the mass matrix: one strategy per system (see `_strategy.py`)."""

import lineax as lx

from ._cg import ConjugateGradientMass as ConjugateGradientMass
from ._dense import DenseCholesky as DenseCholesky
from ._linalg import (
    cho_solve as cho_solve,
    cholesky as cholesky,
    solve_lower as solve_lower,
    solve_upper_t as solve_upper_t,
)
from ._lineax import LineaxMass as LineaxMass
from ._strategy import (
    AbstractMassFactor as AbstractMassFactor,
    AbstractMassStrategy as AbstractMassStrategy,
    Rows as Rows,
    check_mass_solver as check_mass_solver,
)
from ._terms import forcing as forcing, momenta_of as momenta_of, terms as terms


def mass_strategy(solver: lx.AbstractLinearSolver | None) -> AbstractMassStrategy:
    """The strategy for a `mass_solver`, chosen once (None: dense Cholesky)."""
    if solver is None:
        return DenseCholesky()
    if isinstance(solver, lx.CG):
        return ConjugateGradientMass(solver)
    return LineaxMass(solver)
