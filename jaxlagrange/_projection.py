"""Projection onto the constraint manifold: initial states, and drift control.

The holonomic constraints g(q, t) = 0 and the velocity constraints

    ġ = G q̇ + ∂g/∂t = 0,    a = A q̇ + a₀ = 0

define the manifold on which a constrained motion lives. Both projections use
the metric of the mass matrix M = LLᵀ, so that they do not depend on the units
of the coordinates (a length and an angle side by side) and reuse M's Cholesky
factor, as the KKT solve does:

- positions, by Gauss–Newton steps of minimum M-norm,
  Δq = −M⁻¹Gᵀ(GM⁻¹Gᵀ)⁻¹ g;
- velocities, by the correction of least kinetic energy ½ Δq̇ᵀMΔq̇ that satisfies
  the (affine) velocity constraints, Δq̇ = −M⁻¹Cᵀ(CM⁻¹Cᵀ)⁻¹ r with C = [G; A]
  and r = [ġ; a]: exact in one step.

Unilateral constraints h ≥ 0 are inequalities and are left alone. Both
corrections are the KKT system of the equations of motion with f = 0, solved by
the system's mass strategy (`_mass`): with an iterative `mass_solver`
(lineax.CG) neither M nor the constraint Jacobian is formed.

Drift control in `simulate` is the same projection after every step
(`ProjectedSolver`, coordinate projection as in Hairer, Lubich & Wanner,
*Geometric Numerical Integration*, IV.4): the solver integrates the index-1
equations C q̈ = −b, and the state it hands to the next step, as well as every
saved (interpolated) state, is moved back onto the manifold. It has no gains
and no time scale, so it needs no tuning; it leaves the order of the solver
unchanged because the correction is of the size of the local error.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._constraints import velocity_rates, velocity_rows
from ._custom_types import Array, ArrayLike, BoolScalar, ScalarLike, Vector, VectorLike
from ._errors import first_error
from ._mass import Rows
from ._options import VectorFieldArgs
from ._system import LagrangianSystem, as_state


def has_equality_constraints(system: LagrangianSystem) -> bool:
    return system.holonomic is not None or system.nonholonomic is not None


class _Metric:
    """M at one state, the metric of both projections (the system's mass factor).

    A correction of least M-norm onto C Δ = −r is the KKT system of the
    equations of motion with f = 0: Δ = M⁻¹Cᵀλ with (C M⁻¹ Cᵀ) λ = −r.
    """

    def __init__(self, system: LagrangianSystem, q: Array, qd: Array, t: Array):
        self.factor = system.mass_strategy.factor(system, q, qd, t)
        self.singular = self.factor.singular

    def _correction(self, rows, residual) -> tuple[Array, BoolScalar, BoolScalar]:
        kkt = self.factor.constrain(Rows(rows))
        lam, singular = kkt.multipliers(-residual)
        delta, failed = kkt.solution(lam)
        return delta, failed, singular & ~failed

    def position_correction(self, system, q, t) -> tuple[Array, BoolScalar, BoolScalar]:
        """Gauss–Newton's Δq; whether a mass solve failed; whether G M⁻¹Gᵀ is singular."""

        def rows(v):  # G v
            return jax.jvp(lambda q: system._holonomic(q, t), (q,), (v,))[1]

        return self._correction(rows, system._holonomic(q, t))

    def velocity_correction(
        self, system, q, qd, t
    ) -> tuple[Array, BoolScalar, BoolScalar]:
        """Δq̇ of least kinetic energy onto ġ = 0, a = 0, and the two flags."""
        residual = velocity_rates(system, q, qd, t, unilateral=False)  # [ġ; a]
        rows = velocity_rows(system, q, qd, t, unilateral=False)  # v ↦ [G; A] v
        return self._correction(rows, residual)


def _project(
    system: LagrangianSystem, q: Array, qd: Array, t: Array, iterations: int
) -> tuple[Array, Array, BoolScalar]:
    """(q, q̇) projected onto the manifold, and whether a projection was singular.

    M is factored (or linearized, for a matrix-free solve) once, at the given
    state: within the Gauss–Newton iterations it only sets the metric, so the
    iteration still converges to a point on g = 0. Where M or the Schur
    complement is singular the state is returned unchanged (the equations of
    motion report that failure by name).
    """
    metric = _Metric(system, q, qd, t)
    singular = metric.singular
    if system.holonomic is not None:

        def newton(_, carry):
            q, singular = carry
            dq, bad_mass, bad = metric.position_correction(system, q, t)
            bad = bad | bad_mass | singular
            return jnp.where(bad, q, q + dq), bad

        if iterations == 1:
            q, singular = newton(0, (q, singular))
        else:
            q, singular = jax.lax.fori_loop(0, iterations, newton, (q, singular))
    dqd, bad_mass, bad = metric.velocity_correction(system, q, qd, t)
    singular = singular | bad_mass | bad
    qd = jnp.where(singular, qd, qd + dqd)
    return q, qd, singular


# A step of the solver ends within its local error ε of the manifold, where one
# Gauss–Newton step leaves a residual O(ε²): rounding level. (A second one costs
# compile time, the projection being traced into both the step and the
# interpolation, for no measurable gain.)
_STEP_ITERATIONS = 1


class _ProjectedInterpolation(diffrax.AbstractLocalInterpolation):
    t0: ScalarLike
    t1: ScalarLike
    inner: diffrax.AbstractLocalInterpolation
    system: LagrangianSystem

    def evaluate(self, t0, t1=None, left=True):
        if t1 is not None:
            return self.evaluate(t1, left=left) - self.evaluate(t0, left=left)
        return project_state(self.system, self.inner.evaluate(t0, left=left), t0)


def project_state(system: LagrangianSystem, y, t):
    # y = [q; q̇], the flat state of `simulate`.
    n = y.shape[0] // 2
    q, qd = y[:n], y[n:]
    q, qd, _ = _project(system, q, qd, jnp.asarray(t, q.dtype), _STEP_ITERATIONS)
    return jnp.concatenate([q, qd])


# The key under which a step hands the system to its interpolation.
_SYSTEM = "jaxlagrange_system"


class ProjectedSolver(diffrax.AbstractWrappedSolver):
    """Wraps a diffrax solver of the state [q; q̇]: every step ends on the manifold.

    The system is read from the solve's args (a `VectorFieldArgs`), never stored
    on the solver: its params must stay differentiable inputs of the solve (which
    `diffrax.BacksolveAdjoint` requires). The backward solve of that adjoint has
    the same args but an augmented tuple state; it is not projected.

    The inner solver's first-same-as-last stage is kept: it was evaluated at the
    unprojected end of the step, within the local error of the projected one, so
    the next step sees an O(h · local error) perturbation and no extra evaluation
    of the equations of motion is needed.
    """

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
        # Only the motion is projected: the backward solve of
        # `diffrax.BacksolveAdjoint` has these args too, but its state is a tuple.
        forward = (
            isinstance(args, VectorFieldArgs) and eqx.is_array(y1) and y1.ndim == 1
        )
        if forward:
            system = args.system
            y1 = project_state(system, y1, t1)
            dense_info = dict(dense_info, **{_SYSTEM: system})
        return y1, y_error, dense_info, solver_state, result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


# The initial state: projection, and the consistency check of `simulate`.

_INITIAL_ITERATIONS = 20


class _Residuals(eqx.Module):
    """How far an initial state is off its manifold, scaled to tolerance units."""

    position: Array  # max |Δq| of one Gauss–Newton step / (1 + max |q|)
    velocity: Array  # max |Δq̇| of the velocity projection / (1 + max |q̇|)
    penetration: Array  # deepest h < 0, as a distance in q, / (1 + max |q|)
    holonomic: Array  # max |g|, for the message
    holonomic_rate: Array  # max |ġ|
    nonholonomic: Array  # max |a|
    singular_mass: BoolScalar
    redundant: BoolScalar


def _max_abs(x: Array | None, dtype) -> Array:
    if x is None or x.size == 0:
        return jnp.zeros((), dtype)
    return jnp.max(jnp.abs(x))


def _residuals(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> _Residuals:
    dtype = q.dtype
    zero = jnp.zeros((), dtype)
    metric = _Metric(system, q, qd, t)
    singular_mass = metric.singular
    redundant = jnp.array(False)
    position = velocity = penetration = zero
    g = gd = a = None
    q_scale = 1 + _max_abs(q, dtype)
    qd_scale = 1 + _max_abs(qd, dtype)
    if system.holonomic is not None:
        g = system._holonomic(q, t)
        one = jnp.ones((), dtype)
        _, gd = jax.jvp(system._holonomic, (q, t), (qd, one))
        dq, bad_mass, bad = metric.position_correction(system, q, t)
        position = _max_abs(dq, dtype) / q_scale
        singular_mass = singular_mass | bad_mass
        redundant = redundant | bad
    if system.nonholonomic is not None:
        a = system._nonholonomic(q, qd, t)
    if has_equality_constraints(system):
        dqd, bad_mass, bad = metric.velocity_correction(system, q, qd, t)
        velocity = _max_abs(dqd, dtype) / qd_scale
        singular_mass = singular_mass | bad_mass
        redundant = redundant | bad
    if system.unilateral is not None:
        h = system._unilateral(q, t)
        if h.size:
            jac = jax.jacfwd(system._unilateral)(q, t)
            # −h/|∇h| is the depth below h = 0 to first order, in units of q.
            gradient = jnp.sqrt(jnp.sum(jac**2, axis=1))
            depth = jnp.where(h < 0, -h / jnp.where(gradient > 0, gradient, 1.0), 0.0)
            penetration = jnp.max(depth) / q_scale
    return _Residuals(
        position,
        velocity,
        penetration,
        _max_abs(g, dtype),
        _max_abs(gd, dtype),
        _max_abs(a, dtype),
        singular_mass,
        redundant,
    )


def _tolerance(dtype) -> float:
    return float(np.sqrt(np.finfo(dtype).eps))


_HINT = (
    "Project it first with `q0, qd0 = jl.project_initial_state(system, q0, qd0, t0)`."
)
_OFF_POSITION = (
    "The initial state is off the constraint manifold: the holonomic constraints "
    "g(q0, t0) = 0 are violated (max |g| = {g}). " + _HINT
)
_OFF_VELOCITY = (
    "The initial velocities violate the velocity constraints (max |dg/dt| = {gd}, "
    "max |a| = {a} for G qd + ∂g/∂t = 0 and a(q0, qd0, t0) = 0). " + _HINT
)
_PENETRATING = (
    "The initial state violates a unilateral constraint: h(q0, t0) < 0 (it must be "
    "h >= 0). Start on or above the constraint surface."
)
_REDUNDANT_AT_T0 = (
    "The constraints are redundant or degenerate at the initial state: the "
    "constraint Jacobian C = [∂g/∂q; ∂a/∂qd] is rank-deficient at t0 "
    "(RESULTS.redundant_constraints). Remove the redundant constraints."
)
_SINGULAR_MASS_AT_T0 = (
    "The mass matrix ∂²L/∂qd² is singular or not positive definite at the initial "
    "state (RESULTS.singular_mass_matrix)."
)


def _initial_checks(
    r: _Residuals, tol: float, known: bool
) -> list[tuple[ArrayLike, str]]:
    """The failures of an initial state, each with its message, first first.

    `known`: whether the residuals' values are known when the message is made
    (not under jit)."""
    if known:
        g, gd, a = (
            f"{float(x):.3g}" for x in (r.holonomic, r.holonomic_rate, r.nonholonomic)
        )
    else:
        g = gd = a = "(not known under jit)"
    return [
        (r.singular_mass, _SINGULAR_MASS_AT_T0),
        (r.redundant, _REDUNDANT_AT_T0),
        (r.position > tol, _OFF_POSITION.format(g=g)),
        (r.velocity > tol, _OFF_VELOCITY.format(gd=gd, a=a)),
        (r.penetration > tol, _PENETRATING),
    ]


_initial_residuals = eqx.filter_jit(_residuals)


def _is_known(tree) -> bool:
    return not any(
        isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(tree)
    )


def check_initial_state(
    system: LagrangianSystem, q0: Array, qd0: Array, t0: Array
) -> Array:
    """`q0`, with an error if (q0, qd0) is not on its constraint manifold at t0.

    Raises `ValueError` (with the residuals) when the values are known at trace
    time, else attaches an `eqx.error_if` to the returned `q0`.
    """
    if not system.has_constraints:
        return q0
    r = _initial_residuals(system, q0, qd0, t0)
    tol = _tolerance(q0.dtype)
    if _is_known((system, q0, qd0, t0, r)):
        # In NumPy: an eager JAX comparison is one more small program to compile.
        r = jax.tree.map(np.asarray, r)
        for failed, message in _initial_checks(r, tol, known=True):
            if failed:
                raise ValueError(message)
        return q0
    return first_error(q0, _initial_checks(r, tol, known=False))


@eqx.filter_jit
def _project_initial(system, q, qd, t):
    q, qd, singular = _project(system, q, qd, t, _INITIAL_ITERATIONS)
    r = _residuals(system, q, qd, t)
    tol = _tolerance(q.dtype)
    where = "jl.project_initial_state: "
    return first_error(
        (q, qd),
        [
            (r.singular_mass, where + _SINGULAR_MASS_AT_T0),
            (r.redundant, where + _REDUNDANT_AT_T0),
            (
                r.position > tol,
                where + "the Gauss–Newton iteration did not reach the manifold "
                "g(q, t0) = 0 from this q0; start closer to it, or check that "
                "g = 0 has a solution near q0.",
            ),
        ],
    )


def project_initial_state(
    system: LagrangianSystem, q0: VectorLike, qd0: VectorLike, t0: ScalarLike = 0.0
) -> tuple[Vector, Vector]:
    """Move an initial state onto the constraint manifold at t0.

    The positions are projected onto g(q, t0) = 0 by Gauss–Newton steps of least
    mass-matrix norm, Δq = −M⁻¹Gᵀ(GM⁻¹Gᵀ)⁻¹g (20 iterations; a converged iteration
    stays put), then the velocities onto G q̇ + ∂g/∂t = 0 and A q̇ + a₀ = 0 by the
    correction of least kinetic energy. The mass-matrix metric makes the result
    independent of the units of the coordinates. Unilateral constraints h ≥ 0 are
    inequalities and are not touched. Differentiable with respect to the state and
    the system's params.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q0`, `qd0`: the initial state, shape (n,).
    - `t0`: the initial time (rheonomic constraints depend on it).

    **Returns:** the projected `(q0, qd0)`.

    **Raises:** an error (also under `jax.jit`) when the iteration does not reach
    the manifold, when the constraints are redundant at the state, or when the mass
    matrix is singular there.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    system, _, _ = jl.systems.cartesian_pendulum()
    q0, qd0 = jl.project_initial_state(
        system, jnp.array([0.9, -0.5]), jnp.array([1.0, 1.0])
    )  # now |q0| = l and q0 · qd0 = 0
    traj = jl.simulate(system, q0, qd0, t1=10.0)
    ```
    """
    q0, qd0, t0 = as_state(q0, qd0, t0, where="q0")
    if not has_equality_constraints(system):
        return q0, qd0
    return _project_initial(system, q0, qd0, t0)
