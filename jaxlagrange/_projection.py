"""Projection onto the constraint manifold g = 0, ġ = G q̇ + ∂g/∂t = 0,
a = A q̇ + a₀ = 0 (drift control, and the initial state of `_initial_state.py`).

Both projections use the metric of the mass matrix M (independent of the units
of the coordinates) and are the KKT system of the equations of motion with
f = 0, solved by the system's mass strategy (`_mass`): positions by Gauss–Newton
steps of minimum M-norm, Δq = −M⁻¹Gᵀ(GM⁻¹Gᵀ)⁻¹ g; velocities by the correction
of least kinetic energy, Δq̇ = −M⁻¹Cᵀ(CM⁻¹Cᵀ)⁻¹ r with C = [G; A], r = [ġ; a],
exact in one step. Unilateral constraints h ≥ 0 are left alone.

`ProjectedSolver` is drift control in `simulate`: coordinate projection after
every step and at every save (Hairer, Lubich & Wanner, *Geometric Numerical
Integration*, IV.4), with no gains to tune and the solver's order unchanged,
since the correction is of the size of the local error.
"""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import velocity_rates, velocity_rows
from ._custom_types import Array, BoolScalar, ScalarLike
from ._mass import Rows
from ._system import LagrangianSystem


class Metric:
    """M at one state, the metric of both projections (the system's mass factor)."""

    def __init__(self, system: LagrangianSystem, q: Array, qd: Array, t: Array):
        self.factor = system.mass_strategy.factor(system, q, qd, t)
        self.singular = self.factor.singular

    def _correction(self, rows, residual) -> tuple[Array, BoolScalar, BoolScalar]:
        kkt = self.factor.constrain(Rows(rows))
        # The step M⁻¹Cᵀλ is the same for every λ: no least-norm correction.
        lam, singular = kkt.multipliers(-residual, least=False)
        delta, failed = kkt.solution(lam)
        return delta, failed, singular & ~failed

    def position_correction(self, system, q, t) -> tuple[Array, BoolScalar, BoolScalar]:
        """Gauss–Newton's Δq; whether a mass solve failed; whether G M⁻¹Gᵀ is singular."""

        positions = system.constraints.positions

        def rows(v):  # G v
            return jax.jvp(lambda q: positions(q, t), (q,), (v,))[1]

        return self._correction(rows, positions(q, t))

    def velocity_correction(
        self, system, q, qd, t
    ) -> tuple[Array, BoolScalar, BoolScalar]:
        """Δq̇ of least kinetic energy onto ġ = 0, a = 0, and the two flags."""
        residual = velocity_rates(system, q, qd, t, one_sided=False)  # [ġ; a]
        rows = velocity_rows(system, q, qd, t, one_sided=False)  # v ↦ [G; A] v
        return self._correction(rows, residual)


def project(
    system: LagrangianSystem, q: Array, qd: Array, t: Array, iterations: int
) -> tuple[Array, Array, BoolScalar]:
    """(q, q̇) projected onto the manifold, and whether a projection was singular."""
    # M is factored once, here: within Gauss–Newton it only sets the metric, so
    # the iteration still converges to a point on g = 0. Where a solve is singular
    # the state is left unchanged (the equations of motion name that failure).
    metric = Metric(system, q, qd, t)
    singular = metric.singular
    if system.constraints.positional:

        def newton(_, carry):
            q, singular = carry
            dq, bad_mass, bad = metric.position_correction(system, q, t)
            bad = bad | bad_mass | singular
            return jnp.where(bad, q, q + dq.astype(q.dtype)), bad

        if iterations == 1:
            q, singular = newton(0, (q, singular))
        else:
            q, singular = jax.lax.fori_loop(0, iterations, newton, (q, singular))
    dqd, bad_mass, bad = metric.velocity_correction(system, q, qd, t)
    singular = singular | bad_mass | bad
    qd = jnp.where(singular, qd, qd + dqd.astype(qd.dtype))
    return q, qd, singular


# A step of the solver ends within its local error ε of the manifold, where one
# Gauss–Newton step leaves a residual O(ε²): rounding level.
_STEP_ITERATIONS = 1


class _ProjectedInterpolation(diffrax.AbstractLocalInterpolation):
    t0: ScalarLike
    t1: ScalarLike
    inner: diffrax.AbstractLocalInterpolation
    system: LagrangianSystem

    def evaluate(self, t0, t1=None, left=True):
        if t1 is not None:
            return self.evaluate(t1, left=left) - self.evaluate(t0, left=left)
        return _jit_project_state(self.system, self.inner.evaluate(t0, left=left), t0)


def project_state(system: LagrangianSystem, y, t):
    # y = [q; q̇], the flat state of `simulate`.
    n = y.shape[0] // 2
    q, qd = y[:n], y[n:]
    q, qd, _ = project(system, q, qd, jnp.asarray(t, q.dtype), _STEP_ITERATIONS)
    return jnp.concatenate([q, qd])


# Traced once for each of diffrax's traces of the step and the interpolation.
_jit_project_state = eqx.filter_jit(project_state)


# The key under which a step hands the system to its interpolation.
_SYSTEM = "jaxlagrange_system"


class VectorFieldArgs(eqx.Module):
    """The args of a diffrax solve of the equations of motion (`_segment._vector_field`)."""

    system: LagrangianSystem
    baumgarte: tuple[Array, Array] | None = None
    active: Array | None = None  # (u,) bool: the contacts (None: all unilateral)
    modes: Any = None  # `_constraints.Modes` of the contacts (None: no friction)
    # For the event functions of a hybrid segment (`_event_functions`), else None:
    start: Array | None = None  # the segment's start time
    initial: Array | None = None  # (u,) the normal event values at the start
    depth: Array | None = None  # (u,) and each row's depth below zero there
    slip_offset: Array | None = None  # (u,) `_friction.slip_offset` (with friction)


class ProjectedSolver(diffrax.AbstractWrappedSolver):
    """Wraps a diffrax solver of the state [q; q̇]: every step ends on the manifold."""

    solver: diffrax.AbstractSolver

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        inner_cls = self.solver.interpolation_cls

        def build(*, t0, t1, **dense_info):
            system = dense_info.pop(_SYSTEM, None)
            inner = inner_cls(t0=t0, t1=t1, **dense_info)
            if system is None:
                return inner
            return _ProjectedInterpolation(t0, t1, inner, system)

        return build

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    def __getattr__(self, name):
        # `isinstance` checks see the wrapped solver (`AbstractWrappedSolver`), so
        # diffrax then reads (and `eqx.tree_at`s) that solver's fields through the
        # wrapper: `root_finder` of implicit solvers, `scan_kind` of Runge–Kutta.
        if name.startswith("__") or name == "solver":
            raise AttributeError(name)
        return getattr(self.solver, name)

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        # The system comes from the args, never stored on the solver: its params
        # must stay differentiable inputs of the solve (`diffrax.BacksolveAdjoint`
        # requires it). Only the motion is projected, not the adjoint's tuple state.
        # The inner first-same-as-last stage is kept: it was evaluated within the
        # local error of the projected end, an O(h · error) perturbation.
        if isinstance(args, VectorFieldArgs) and eqx.is_array(y1) and y1.ndim == 1:
            system = args.system
            y1 = _jit_project_state(system, y1, t1)
            dense_info = dict(dense_info, **{_SYSTEM: system})
        return y1, y_error, dense_info, solver_state, result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)
