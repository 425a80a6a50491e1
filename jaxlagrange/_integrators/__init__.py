"""Integrators of a Lagrangian system's own discrete equations (not of its ODE,
which diffrax's solvers integrate): `_base.AbstractLagrangianSolver`, the
interface `simulate` calls, and one file per integrator."""

from ._base import AbstractLagrangianSolver as AbstractLagrangianSolver
from ._variational import VariationalMidpoint as VariationalMidpoint
