"""`simulate`: the public entry point; checks its arguments, then dispatches.

The solve itself: `_segment` (one smooth diffrax solve, the whole of it for a
system without unilateral constraints), `_hybrid` (segments between the events
of unilateral constraints), `_guard` (the step-size guard and the diagnosis of
failures), `_trajectory` (the returned `Trajectory` and its result codes).
"""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._coefficients import checked_values
from ._custom_types import Array, ArrayLike, Float, ScalarLike, VectorLike
from ._errors import forward_mode_hint
from ._guard import Failure, _all_finite, diagnosed
from ._hybrid import hybrid_solve
from ._initial_state import check_initial_state
from ._options import SimulateOptions, check_max_events
from ._projection import ProjectedSolver, has_equality_constraints
from ._segment import smooth_solve
from ._system import LagrangianSystem
from ._trajectory import (
    RESULTS as RESULTS,
    Trajectory,
    _known,
    raise_on_failure,
)
from ._validate import (
    as_real,
    check_affine,
    check_output_size,
    check_precision,
    default_tolerance,
)
from ._variational import VariationalMidpoint, variational_simulate


def check_tolerance(name: str, value) -> Array:
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


def check_times(t0, t1, saveat, dtype) -> tuple[Array, Array, Array]:
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


def simulate(
    system: LagrangianSystem,
    q0: VectorLike,
    qd0: VectorLike,
    *,
    t0: ScalarLike = 0.0,
    t1: ScalarLike,
    saveat: Float[ArrayLike, " T"] | None = None,
    solver: diffrax.AbstractSolver | VariationalMidpoint | None = None,
    rtol: ScalarLike | None = None,
    atol: ScalarLike | None = None,
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
    - `solver`: any diffrax ODE solver. The default, `diffrax.Tsit5()`, reached
        each error from 1e-4 to 1e-10 fastest on the double pendulum (Dopri8 took
        2-4× longer); `diffrax.Dopri8()` pays where q̈ is costly and the error
        tight (the free rigid body to 1e-8: 1.7× faster), an implicit
        `diffrax.Kvaerno5()` on stiff systems (`benchmarks/bench_solvers.py`).
    - `rtol`, `atol`: tolerances of the default adaptive step-size controller
        `diffrax.PIDController(rtol, atol)`, positive. Default 1e-8 in float64
        (`jax.config.update("jax_enable_x64", True)`, recommended), and 1e-5 in
        JAX's default float32, whose precision cannot meet 1e-8.
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
        41 rebounds, 42 impacts with the last, plastic one). With events, `max_steps` applies to each solve between two events.
    - `throw`: raise on failure. With `throw=False` check `Trajectory.result`; under
        `vmap` every member then has its own result and `t_final`. (Naming the
        cause of a failure probes the dynamics along the failed step: a host
        callback that runs only after a member has stopped, for that member; no
        probes are compiled into the program.)

    **Returns:** a `Trajectory`.

    **Raises:**

    - `ValueError` at trace time for wrong shapes (`q0` and `qd0` must be 1-D of the
        same shape, `saveat` 1-D), and for values known at trace time: t1 ≤ t0,
        `saveat` not increasing or outside [t0, t1], non-positive `rtol`/`atol`,
        a non-finite initial state (with `throw=True`), and an initial state off
        the constraint manifold: a position correction or velocity correction
        (see `jl.project_initial_state`) larger than √eps (1 + max |q0|) or
        √eps (1 + max |qd0|), h(q0, t0) < 0 for a unilateral constraint,
        redundant constraints or a singular mass matrix at t0, and a `slip` or
        `nonholonomic` function that is not affine in qd at t0.
    - With `throw=True`, an error (also under `jax.jit`, `vmap` and `grad`) naming
        a non-finite param, and `friction`, `static_friction` or `restitution`
        out of its range.
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
    traj, failure, max_events = simulate_checked(
        system,
        q0,
        qd0,
        t0=t0,
        t1=t1,
        saveat=saveat,
        solver=solver,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        adjoint=adjoint,
        baumgarte=baumgarte,
        progress_meter=progress_meter,
        max_events=max_events,
        throw=throw,
    )
    traj = diagnosed(traj, failure)
    if throw:
        return raise_on_failure(traj, max_steps, t1, max_events)
    return traj


def simulate_checked(
    system,
    q0,
    qd0,
    *,
    t0=0.0,
    t1,
    saveat=None,
    solver=None,
    rtol=None,
    atol=None,
    dt0=None,
    stepsize_controller=None,
    max_steps=100_000,
    adjoint=None,
    baumgarte=None,
    progress_meter=None,
    max_events=64,
    throw=True,
) -> tuple[Trajectory, Failure | None, int | None]:
    """`simulate` without naming the cause of a stopped solve.

    Returns the trajectory (a stopped solve with its provisional code), what
    `_guard.diagnosed` needs to name the cause (None: nothing can stop), and
    `max_events` as checked (None without unilateral constraints). The command
    line compiles this and diagnoses a failure afterwards, on demand.
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
    t0, t1, ts = check_times(t0, t1, saveat, dtype)
    rtol = check_tolerance("rtol", default_tolerance(dtype) if rtol is None else rtol)
    atol = check_tolerance("atol", default_tolerance(dtype) if atol is None else atol)
    check_precision("rtol", rtol, dtype)
    check_output_size(ts.shape[0], q0.shape[0], 0, dtype)

    known = (_known(q0_in), _known(qd0_in))
    if throw and known[0] is not None and known[1] is not None:
        if not (np.all(np.isfinite(known[0])) and np.all(np.isfinite(known[1]))):
            raise ValueError(_NON_FINITE_INITIAL)
    elif throw:
        q0 = eqx.error_if(q0, ~_all_finite((q0, qd0)), _NON_FINITE_INITIAL)
    if throw:
        # Finite params, friction and restitution in range (with throw=False a
        # member of a batch with bad params fails on its own, by its result).
        system = checked_values(system)
    if dt0 is not None:
        dt0 = as_real("dt0", dt0).astype(dtype)
    if baumgarte is not None:
        baumgarte = tuple(jnp.asarray(gain, dtype) for gain in baumgarte)
    if variational:
        q0, dt0 = _check_variational(
            system, q0, qd0, t0, dt0, stepsize_controller, baumgarte
        )
        traj = variational_simulate(system, q0, qd0, t0, t1, ts, solver, dt0, max_steps)
        return traj, None, None
    solver = diffrax.Tsit5() if solver is None else solver
    if system.has_constraints:
        q0 = check_initial_state(system, q0, qd0, t0)
    for name in ("nonholonomic", "slip"):
        if getattr(system, name) is not None:
            fn = getattr(system, "_" + name)
            q0 = check_affine(name, fn, q0, qd0, t0, q0)
    if baumgarte is None and has_equality_constraints(system):
        solver = ProjectedSolver(solver)
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
    adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
    if progress_meter is None:
        progress_meter = diffrax.NoProgressMeter()
    hybrid = system.unilateral is not None
    options = SimulateOptions(
        solver=solver,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        progress_meter=progress_meter,
        dt0=dt0,
        baumgarte=baumgarte,
        rest=atol if hybrid else None,
        max_steps=max_steps,
        max_events=check_max_events(max_events) if hybrid else None,
        t1_only=saveat is None,
    )
    solve = hybrid_solve if options.hybrid else smooth_solve
    with forward_mode_hint("simulate"):
        traj, stop = solve(system, q0, qd0, t0, t1, ts, options)
    failure = Failure(system, q0, qd0, t0, baumgarte, stop)
    return traj, failure, options.max_events


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
    message = "`dt0` must be positive and finite, got {}."
    if known is not None and not (np.isfinite(known) and known > 0):
        raise ValueError(message.format(float(known)))
    if known is None:
        bad = ~(jnp.isfinite(dt0) & (dt0 > 0))
        dt0 = eqx.error_if(dt0, bad, message.format("a value that is not"))
    if system.has_constraints:
        q0 = check_initial_state(system, q0, qd0, t0)
    return q0, dt0
