"""`simulate`: integrate a `LagrangianSystem` with diffrax, and `Trajectory`.

Failures are named by their cause. diffrax's adaptive controllers reject a step
whose state is NaN and shrink the step, so a right-hand side that goes NaN (a
singular mass matrix, the square root of a negative number) would otherwise
creep towards the bad point until "maximum number of steps reached", and a
constant step size would carry the NaN silently to t1. Every step size
controller is therefore wrapped in `_Guard`, which rejects non-finite steps,
stops the solve once the step can no longer shrink (or, with a fixed step, at
once), and remembers the failed step; `_diagnose` then probes the dynamics
along that step to say why it failed.
"""

from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._constraints import _dynamics
from ._custom_types import Array, BoolScalar, Float, ScalarLike, VectorLike
from ._eom import _terms
from ._linalg import cho_solve, cholesky
from ._projection import ProjectedSolver, check_initial_state, has_equality_constraints
from ._system import LagrangianSystem
from ._trajectory import RESULTS as RESULTS, Trajectory as Trajectory
from ._validate import as_real, check_output_size, check_precision
from ._variational import VariationalMidpoint, variational_simulate


def _vector_field(t, y, args):
    # `active`: the unilateral constraints in contact (None: all of them).
    system, baumgarte, active = args
    q, qd = y
    dyn = _dynamics(system, q, qd, t, active=active, baumgarte=baumgarte)
    bad = dyn.singular_mass | dyn.singular_constraints
    # A NaN step is rejected by `_Guard`; the cause is found by `_diagnose`.
    qdd = jnp.where(bad, jnp.nan, dyn.accelerations)
    return qd, qdd


def _all_finite(tree) -> BoolScalar:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]
    return jnp.stack(leaves).all() if leaves else jnp.array(True)


class _GuardState(NamedTuple):
    inner: Any  # the wrapped controller's state
    resolution: Array  # the smallest step that still advances t meaningfully
    failed_dt: Array  # size of the step that stopped the solve (0: none)
    failed_finite: BoolScalar  # whether that step's state was finite


class _AbstractGuard(diffrax.AbstractStepSizeController):
    """Rejects non-finite steps and stops the solve when the step cannot shrink."""

    controller: eqx.AbstractVar[diffrax.AbstractStepSizeController]

    def wrap(self, direction):
        return type(self)(self.controller.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, inner = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        span = jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        dtype = jnp.result_type(tnext)
        resolution = 16 * jnp.finfo(dtype).eps * span.astype(dtype)
        state = _GuardState(inner, resolution, jnp.zeros((), dtype), jnp.array(True))
        return tnext, state

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        inner, resolution, failed_dt, failed_finite = controller_state
        keep, next_t0, next_t1, made_jump, inner, result = (
            self.controller.adapt_step_size(
                t0, t1, y0, y1_candidate, args, y_error, error_order, inner
            )
        )
        finite = _all_finite(y1_candidate)
        keep = keep & finite
        # An adaptive controller has already shrunk the step of a non-finite state
        # (diffrax turns its NaN error into inf); a fixed one must not advance.
        dt = next_t1 - next_t0
        next_t0 = jnp.where(finite, next_t0, t0)
        next_t1 = next_t0 + dt
        if isinstance(self, _AdaptiveGuard):
            stuck = dt <= resolution
        else:
            stuck = ~finite
        failed_dt = jnp.where(stuck, t1 - t0, failed_dt)
        failed_finite = jnp.where(stuck, finite, failed_finite)
        result = diffrax.RESULTS.where(stuck, diffrax.RESULTS.dt_min_reached, result)
        state = _GuardState(inner, resolution, failed_dt, failed_finite)
        return keep, next_t0, next_t1, made_jump, state, result


class _FixedGuard(_AbstractGuard):
    controller: diffrax.AbstractStepSizeController


class _AdaptiveGuard(_AbstractGuard, diffrax.AbstractAdaptiveStepSizeController):
    controller: diffrax.AbstractAdaptiveStepSizeController

    # Implicit solvers read the tolerances of an adaptive controller.
    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm


def _guard(controller: diffrax.AbstractStepSizeController) -> _AbstractGuard:
    if isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
        return _AdaptiveGuard(controller)
    return _FixedGuard(controller)


# Where along the failed step (as fractions of it) the dynamics are probed.
_PROBES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5)


def _diagnose(
    system, y0, t0, y, t, guard: _GuardState, baumgarte, active=None
) -> RESULTS:
    """Name the cause of a stopped solve from the probes along the failed step.

    `y0`, `t0` is the initial state, `y`, `t` the last accepted one.
    """
    (q0, qd0), (q, qd), dt = y0, y, guard.failed_dt
    terms = jax.vmap(lambda q, qd, t: _terms(system, q, qd, t))(
        jnp.stack([q0, q]), jnp.stack([qd0, qd]), jnp.stack([t0, t])
    )
    factor = cholesky(terms.mass[1]).factor
    # A solution that blows up at a singular M stops just short of it, where a
    # pivot of M has fallen below eps^(1/4) of that diagonal entry at t0.
    ratios = jnp.diagonal(factor) ** 2 / jnp.abs(jnp.diagonal(terms.mass[0]))
    nearly_singular = ~jnp.all(ratios > jnp.finfo(q.dtype).eps ** 0.25)
    # The probes follow the step to first order (constraint forces left out).
    s = jnp.asarray(_PROBES, q.dtype) * dt
    qs = q + s[:, None] * qd
    qds = qd + s[:, None] * cho_solve(factor, terms.forcing[1])

    def probe(q, qd, t):
        return _dynamics(system, q, qd, t, active=active, baumgarte=baumgarte)

    probes = jax.vmap(probe)(qs, qds, t + s)
    nonfinite = ~(
        jnp.all(jnp.isfinite(probes.accelerations), axis=1)
        & jnp.all(jnp.isfinite(qs), axis=1)
        & jnp.all(jnp.isfinite(qds), axis=1)
    )
    # The first bad probe along the step; at one probe, singular mass comes first.
    bad = probes.singular_mass | probes.singular_constraints | nonfinite
    first = jnp.argmax(bad)

    result = RESULTS.where(
        guard.failed_finite, RESULTS.step_size_collapsed, RESULTS.non_finite_state
    )
    result = RESULTS.where(nearly_singular, RESULTS.singular_mass_matrix, result)
    result = RESULTS.where(nonfinite[first], RESULTS.non_finite_state, result)
    result = RESULTS.where(
        probes.singular_constraints[first], RESULTS.redundant_constraints, result
    )
    return RESULTS.where(
        probes.singular_mass[first], RESULTS.singular_mass_matrix, result
    )


def _no_gradient(*trees):
    stop = lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x  # noqa: E731
    return jtu.tree_map(stop, trees)


def _known(x) -> np.ndarray | None:
    """`x` as a NumPy array if its value is known at trace time, else None."""
    return None if isinstance(x, jax.core.Tracer) else np.asarray(x)


def _check_tolerance(name: str, value) -> Array:
    value = as_real(name, value)
    known = _known(value)
    if value.shape != () or not (
        jnp.issubdtype(value.dtype, jnp.floating)
        or jnp.issubdtype(value.dtype, jnp.integer)
    ):
        raise ValueError(
            f"`{name}` must be a positive scalar, got shape {value.shape} and "
            f"dtype {value.dtype}."
        )
    message = f"`{name}` must be positive and finite, got {{}}."
    if known is not None:
        if not (np.isfinite(known) and known > 0):
            raise ValueError(message.format(float(known)))
        return value
    bad = ~(jnp.isfinite(value) & (value > 0))
    return eqx.error_if(value, bad, message.format("a value that is not"))


def _check_times(t0, t1, saveat, dtype) -> tuple[Array, Array, Array]:
    t0, t1 = as_real("t0", t0), as_real("t1", t1)
    if saveat is not None:
        saveat = as_real("saveat", saveat)
    a, b = _known(t0), _known(t1)
    s = b[None] if saveat is None and b is not None else _known(saveat)
    for name, t in (("t0", t0), ("t1", t1)):
        if t.shape != ():
            raise ValueError(f"`{name}` must be a scalar, got shape {t.shape}.")
    t0 = t0.astype(dtype)
    t1 = t1.astype(dtype)
    if saveat is None:
        ts = t1[None]
    else:
        ts = jnp.asarray(saveat)
        if ts.ndim != 1 or ts.shape[0] == 0:
            raise ValueError(
                "`saveat` must be a non-empty 1-D array of times, got shape "
                f"{ts.shape}."
            )
        ts = ts.astype(dtype)

    order = "`t1` must be greater than `t0`, got t0 = {} and t1 = {}."
    increasing = "`saveat` must be strictly increasing{}."
    inside = "`saveat` must lie in [t0, t1] = [{}, {}]{}."
    if a is not None and b is not None and s is not None:
        a, b = float(a), float(b)
        if not (np.isfinite(a) and np.isfinite(b) and b > a):
            raise ValueError(order.format(a, b))
        if np.any(np.diff(s) <= 0):
            i = int(np.argmax(np.diff(s) <= 0))
            raise ValueError(
                increasing.format(
                    f", but saveat[{i}] = {s[i]} and saveat[{i + 1}] = {s[i + 1]}"
                )
            )
        if np.any((s < a) | (s > b)) or not np.all(np.isfinite(s)):
            i = int(np.argmax((s < a) | (s > b) | ~np.isfinite(s)))
            raise ValueError(inside.format(a, b, f", but saveat[{i}] = {s[i]}"))
        return t0, t1, ts
    t1 = eqx.error_if(t1, ~(t1 > t0), order.format("t0", "a value not greater"))
    ts = eqx.error_if(ts, jnp.any(ts[1:] <= ts[:-1]), increasing.format(""))
    ts = eqx.error_if(ts, jnp.any((ts < t0) | (ts > t1)), inside.format("t0", "t1", ""))
    return t0, t1, ts


def _as_initial_state(q0, qd0) -> tuple[Array, Array]:
    q0 = as_real("q0", q0)
    qd0 = as_real("qd0", qd0)
    if q0.ndim != 1 or q0.shape[0] == 0:
        raise ValueError(
            "`q0` must be a 1-D array of at least one coordinate, got shape "
            f"{q0.shape}."
        )
    if qd0.shape != q0.shape:
        raise ValueError(
            "`q0` and `qd0` must have the same shape, got q0 "
            f"{q0.shape} and qd0 {qd0.shape}."
        )
    dtype = jnp.result_type(q0.dtype, qd0.dtype, float)
    if not jnp.issubdtype(dtype, jnp.floating):
        raise ValueError(f"`q0` and `qd0` must be real, got dtype {dtype}.")
    return q0.astype(dtype), qd0.astype(dtype)


_NON_FINITE_INITIAL = (
    "The initial state (q0, qd0) contains a non-finite value (NaN or inf)."
)


_THROW_FALSE = (
    "`jl.simulate(..., throw=False)` returns the trajectory up to the failure, "
    "with `Trajectory.result` and `Trajectory.t_final`, the time reached."
)


def _messages(max_steps: int, max_events: int | None = None) -> list[str]:
    """The message of each result code, indexed by its value.

    `max_events` (None: not known) goes into the message of too many events."""
    messages = list(RESULTS._index_to_message)  # pyright: ignore
    steps = RESULTS.max_steps_reached._value  # pyright: ignore
    messages[int(steps)] = (
        f"The maximum number of solver steps ({max_steps}) was reached before t1. "
        "Raise it with `jl.simulate(..., max_steps=...)`, or loosen `rtol`/`atol`."
    )
    events = RESULTS.max_events_reached._value  # pyright: ignore
    if max_events is not None:
        messages[int(events)] = (
            f"The maximum number of events ({max_events}: releases, impacts, "
            "sticks and slips at unilateral constraints) was reached before t1. Raise it with "
            "`jl.simulate(..., max_events=...)`."
        )
    return messages


def _raise_on_failure(
    traj: Trajectory, max_steps: int, t1: Array, max_events: int | None = None
) -> Trajectory:
    code = _known(traj.result._value)  # pyright: ignore
    failed = traj.result != RESULTS.successful
    messages = _messages(max_steps, max_events)
    if code is None:
        # Under jit or vmap: a runtime error, without the time reached.
        messages = [m + "\n" + _THROW_FALSE if m else m for m in messages]
        return eqx.branched_error_if(traj, failed, traj.result._value, messages)  # pyright: ignore
    if code != RESULTS.successful._value:  # pyright: ignore
        raise eqx.EquinoxRuntimeError(
            f"jl.simulate stopped at t = {float(traj.t_final)!r} before t1 = "
            f"{float(t1)!r}: {messages[int(code)]}\n{_THROW_FALSE}"
        )
    return traj


def simulate(
    system: LagrangianSystem,
    q0: VectorLike,
    qd0: VectorLike,
    *,
    t0: ScalarLike = 0.0,
    t1: ScalarLike,
    saveat: Float[Array, " T"] | None = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: ScalarLike = 1e-8,
    atol: ScalarLike = 1e-8,
    dt0: ScalarLike | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    max_steps: int = 100_000,
    adjoint: diffrax.AbstractAdjoint | None = None,
    baumgarte: tuple[ScalarLike, ScalarLike] | None = None,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
    max_events: int = 64,
    throw: bool = True,
) -> Trajectory:
    """Integrate the equations of motion from (q0, qd0) at t0 to t1.

    `simulate` is a pure function of its array arguments: it can be `jax.jit`-ed,
    `jax.vmap`-ed (over initial states, times or the system's params) and
    differentiated with `jax.grad` with respect to the params and the initial state.

    Unilateral constraints h(q, t) ≥ 0 make the motion hybrid: a constraint in
    contact (initially: those with h ≈ 0, ḣ ≈ 0 and λ ≥ 0 at t0) acts as a
    holonomic one until its multiplier falls through zero, when it is *released*;
    a free one that reaches h = 0 moving inwards makes an *impact*, a velocity
    jump with the system's coefficient of restitution (see `jl.apply_impulse`),
    after which it is in contact if it did not rebound. Both events are located by root finding and
    reported on the `Trajectory` (`event_ts`, `event_constraint`, `event_kind`,
    `num_events`). The solve is then a sequence of diffrax solves between events,
    at most `max_events + 1` of them, which keeps every shape static under `jit`
    and `vmap` and is differentiable (the event times too). A system without
    unilateral constraints takes a single diffrax solve. Start with h(q0, t0) ≥ 0:
    an event is a crossing of h from positive to zero.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q0`, `qd0`: initial coordinates and velocities, shape (n,).
    - `t0`, `t1`: start and end time, t1 > t0.
    - `saveat`: strictly increasing 1-D array of times in [t0, t1] to save at
        (None: t1 only).
    - `solver`: any diffrax ODE solver. The default, `diffrax.Tsit5()`, took the
        least wall time on the benchmarked systems at rtol 1e-8 (see
        `benchmarks/bench_simulate.py`); for rtol ≲ 1e-10 prefer `diffrax.Dopri8()`.
    - `rtol`, `atol`: tolerances of the default adaptive step-size controller
        `diffrax.PIDController(rtol, atol)`, positive.
    - `dt0`: initial step (None: chosen automatically); required with a constant
        step size, e.g. `stepsize_controller=diffrax.ConstantStepSize()`.
    - `stepsize_controller`: replaces the default `diffrax.PIDController(rtol, atol)`.
    - `max_steps`: the most steps the solver may take.
    - `adjoint`: how to differentiate. The default,
        `diffrax.RecursiveCheckpointAdjoint()`, differentiates the solver's own
        operations (exact gradients of the computed trajectory, memory O(log steps)
        checkpoints). `diffrax.BacksolveAdjoint()` solves the adjoint ODE backwards
        (O(1) memory, gradients only as accurate as that solve);
        `diffrax.DirectAdjoint()` also supports forward-mode `jax.jvp`/`jax.jacfwd`.
    - `baumgarte`: how a constrained solve stays on its manifold. None (the
        default): after every step, and at every saved time, the state is projected
        back onto g = 0, ġ = 0 and a = 0 (Gauss–Newton in the mass-matrix metric,
        see `jl.project_initial_state`); no gains, no time scale to choose, residuals
        at rounding level. A pair of gains (α, β), in 1/time, replaces the
        projection by Baumgarte stabilization, which adds −2α ċ − β² c to the
        constraint rows (−α a for nonholonomic ones) so that drift decays on a time
        1/α; pick α ≈ β a few times the system's highest frequency but well below
        1/(step size), or the problem turns stiff. `(0.0, 0.0)` turns drift
        control off. Unconstrained systems ignore it. With the projection the
        energy error is the solver's alone, as in minimal coordinates: a Cartesian
        pendulum over 200 s (94 periods) stays within 1e-15 of g = 0 and ġ = 0,
        with a relative energy drift of 2e-6 at the default rtol = atol = 1e-8
        and of 2e-8 at 1e-10 (`tests/test_constraints.py`).
    - `progress_meter`: a diffrax progress meter for long runs, e.g.
        `diffrax.TextProgressMeter()` (`diffrax.TqdmProgressMeter()` needs the
        `tqdm` package).
    - `max_events`: the most events (releases, impacts, sticks and slips), for
        systems with unilateral constraints; reaching it before t1 fails with
        `RESULTS.max_events_reached`. A bouncing contact with restitution e < 1
        makes infinitely many bounces in finite time; a rebound that would rise
        less than `atol` (in the units of h) is made plastic, so it comes to rest
        in contact after finitely many (a ball dropped from 1 m with e = 0.8:
        41). With events, `max_steps` applies to each solve between two events.
    - `throw`: raise on failure. With `throw=False` check `Trajectory.result`; under
        `vmap` every member then has its own result and `t_final`.

    **Returns:** a `Trajectory`.

    **Raises:**

    - `ValueError` at trace time for wrong shapes (`q0` and `qd0` must be 1-D of the
        same shape, `saveat` 1-D), and for values known at trace time: t1 ≤ t0,
        `saveat` not increasing or outside [t0, t1], non-positive `rtol`/`atol`,
        a non-finite initial state (with `throw=True`), and an initial state off
        the constraint manifold: a position correction or velocity correction
        (see `jl.project_initial_state`) larger than √eps (1 + max |q0|) or
        √eps (1 + max |qd0|), h(q0, t0) < 0 for a unilateral constraint,
        redundant constraints or a singular mass matrix at t0.
    - Under `jax.jit` the same value checks as runtime errors
        (`equinox.EquinoxRuntimeError`).
    - With `throw=True`, a runtime error naming the failure: the maximum number of
        steps reached (and how to raise it), a singular mass matrix, redundant
        constraints, a non-finite state, a collapsed step size, too many events.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    def lagrangian(q, qd, t, params):
        return 0.5 * qd[0] ** 2 + params["g"] * jnp.cos(q[0])

    pendulum = jl.LagrangianSystem(lagrangian, params={"g": 9.81})
    traj = jl.simulate(
        pendulum, jnp.array([1.0]), jnp.array([0.0]), t1=10.0,
        saveat=jnp.linspace(0.0, 10.0, 101),
    )
    traj.q.shape  # (101, 1)
    ```
    """
    if not isinstance(system, LagrangianSystem):
        raise ValueError(
            f"`system` must be a jaxlagrange.LagrangianSystem, got {type(system).__name__}."
        )
    if (
        isinstance(max_steps, bool)
        or not isinstance(max_steps, (int, np.integer))
        or max_steps < 1
    ):
        raise ValueError(f"`max_steps` must be a positive int, got {max_steps!r}.")
    max_steps = int(max_steps)
    variational = isinstance(solver, VariationalMidpoint)
    if solver is not None and not (
        variational or isinstance(solver, diffrax.AbstractSolver)
    ):
        raise ValueError(
            "`solver` must be a diffrax solver or jl.VariationalMidpoint(), got "
            f"{type(solver).__name__}."
        )
    if progress_meter is not None and not isinstance(
        progress_meter, diffrax.AbstractProgressMeter
    ):
        raise ValueError(
            "`progress_meter` must be a diffrax progress meter such as "
            f"diffrax.TextProgressMeter(), got {type(progress_meter).__name__}."
        )
    q0_in, qd0_in = q0, qd0
    q0, qd0 = _as_initial_state(q0, qd0)
    dtype = q0.dtype
    t0, t1, ts = _check_times(t0, t1, saveat, dtype)
    rtol = _check_tolerance("rtol", rtol)
    atol = _check_tolerance("atol", atol)
    check_precision("rtol", rtol, dtype)
    check_output_size(ts.shape[0], q0.shape[0], 0, dtype)

    known = (_known(q0_in), _known(qd0_in))
    if throw and known[0] is not None and known[1] is not None:
        if not (np.all(np.isfinite(known[0])) and np.all(np.isfinite(known[1]))):
            raise ValueError(_NON_FINITE_INITIAL)
    elif throw:
        q0 = eqx.error_if(q0, ~_all_finite((q0, qd0)), _NON_FINITE_INITIAL)
    if dt0 is not None:
        dt0 = as_real("dt0", dt0).astype(dtype)
    if baumgarte is not None:
        baumgarte = tuple(jnp.asarray(gain, dtype) for gain in baumgarte)
    if variational:
        q0 = _check_variational(
            system, q0, qd0, t0, dt0, stepsize_controller, baumgarte
        )
        traj = variational_simulate(system, q0, qd0, t0, t1, ts, solver, dt0, max_steps)
        return _raise_on_failure(traj, max_steps, t1) if throw else traj
    solver = diffrax.Tsit5() if solver is None else solver
    if system.has_constraints:
        q0 = check_initial_state(system, q0, qd0, t0)
        if baumgarte is None and has_equality_constraints(system):
            solver = ProjectedSolver(solver)
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
    adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
    if progress_meter is None:
        progress_meter = diffrax.NoProgressMeter()
    args = (
        system,
        q0,
        qd0,
        t0,
        t1,
        ts,
        solver,
        dt0,
        stepsize_controller,
        max_steps,
        adjoint,
        baumgarte,
        progress_meter,
    )
    if system.unilateral is not None:
        # Imported here: `_events` builds on this module.
        from ._events import _check_max_events, _hybrid_solve

        max_events = _check_max_events(max_events)
        traj = _hybrid_solve(*args, max_events, atol)
        return _raise_on_failure(traj, max_steps, t1, max_events) if throw else traj
    traj = _solve(*args, saveat is None)
    return _raise_on_failure(traj, max_steps, t1) if throw else traj


@eqx.filter_jit
def _solve(
    system,
    q0,
    qd0,
    t0,
    t1,
    ts,
    solver,
    dt0,
    stepsize_controller,
    max_steps,
    adjoint,
    baumgarte,
    progress_meter,
    t1_only,
) -> Trajectory:
    dtype = q0.dtype
    finite = _all_finite((q0, qd0))
    # A non-finite initial state is integrated as zeros and reported afterwards.
    q0 = jnp.where(finite, q0, 0.0)
    qd0 = jnp.where(finite, qd0, 0.0)

    args = (system, baumgarte, None)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=(q0, qd0),
        args=args,
        saveat=diffrax.SaveAt(
            ts=None if t1_only else ts, t1=True, controller_state=True
        ),
        stepsize_controller=_guard(stepsize_controller),
        adjoint=adjoint,
        max_steps=max_steps,
        progress_meter=progress_meter,
        throw=False,
    )
    inf = jnp.array(jnp.inf, dtype)
    if t1_only:
        # Saving at `ts` interpolates on every step (a quarter of the run time of
        # a small system), so t1 alone is saved through `SaveAt(t1=True)`.
        last = 0
        reached = sol.ts == t1
        saved_ts, (q, qd) = sol.ts, sol.ys
    else:
        # The final state follows the save times that were reached.
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        reached = jnp.arange(ts.shape[0]) < last
        saved_ts, (q, qd) = sol.ts[:-1], (y[:-1] for y in sol.ys)
    t_final = sol.ts[last]
    q_final, qd_final = (y[last] for y in sol.ys)
    saved_ts = jnp.where(reached, saved_ts, inf)
    q, qd = (jnp.where(reached[:, None], y, inf) for y in (q, qd))
    result = RESULTS.promote(sol.result)
    guard = sol.controller_state
    stopped = (result == RESULTS.dt_min_reached) & (guard.failed_dt != 0)
    # The diagnosis is an integer code: keep autodiff from tracing through it.
    diagnosed = _diagnose(
        *_no_gradient(
            system, (q0, qd0), t0, (q_final, qd_final), t_final, guard, baumgarte
        )
    )
    result = RESULTS.where(stopped, diagnosed, result)
    result = RESULTS.where(finite, result, RESULTS.non_finite_state)
    t_final = jnp.where(finite, t_final, t0)
    reached = reached & finite
    saved_ts = jnp.where(reached, saved_ts, inf)
    q, qd = (jnp.where(reached[:, None], y, inf) for y in (q, qd))
    if system.has_constraints:
        dyn = jax.vmap(
            lambda q, qd, t: _dynamics(system, q, qd, t, baumgarte=baumgarte)
        )(
            jnp.where(reached[:, None], q, 0.0),
            jnp.where(reached[:, None], qd, 0.0),
            jnp.where(reached, saved_ts, t0),
        )
        multipliers = jnp.where(reached[:, None], dyn.multipliers, jnp.inf)
    else:
        multipliers = jnp.zeros((ts.shape[0], 0), dtype)
    stats = dict(sol.stats)
    no_events = jnp.zeros((0,), int)
    traj = Trajectory(
        saved_ts,
        q,
        qd,
        multipliers,
        result,
        t_final,
        stats,
        event_ts=jnp.zeros((0,), dtype),
        event_constraint=no_events,
        event_kind=no_events,
        num_events=jnp.zeros((), int),
        friction=jnp.zeros((q.shape[0], 0), dtype),
    )
    return traj


def _check_variational(system, q0, qd0, t0, dt0, stepsize_controller, baumgarte):
    for name, value in (
        ("nonholonomic", system.nonholonomic),
        ("unilateral", system.unilateral),
    ):
        if value is not None:
            raise ValueError(
                f"jl.VariationalMidpoint does not support {name} constraints yet; "
                "use a diffrax solver (the default) for this system."
            )
    if dt0 is None:
        raise ValueError(
            "jl.VariationalMidpoint takes fixed steps: pass the step size `dt0`."
        )
    if stepsize_controller is not None or baumgarte is not None:
        raise ValueError(
            "jl.VariationalMidpoint takes fixed steps of size `dt0` and keeps the "
            "constraints exactly: `stepsize_controller` and `baumgarte` do not apply."
        )
    known = _known(dt0)
    if known is not None and not (np.isfinite(known) and known > 0):
        raise ValueError(f"`dt0` must be positive and finite, got {float(known)}.")
    if system.has_constraints:
        q0 = check_initial_state(system, q0, qd0, t0)
    return q0
