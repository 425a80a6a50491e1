"""`simulate`: the public entry point; checks its arguments, then dispatches to
`_segment` (one smooth diffrax solve) or `_hybrid` (segments between events)."""

import dataclasses

import diffrax
import equinox as eqx

from ._cache import cached
from ._coefficients import checked_coefficients, checked_values
from ._custom_types import ArrayLike, Float, ScalarLike, VectorLike
from ._eom import unread_velocities
from ._errors import first_error, forward_mode_hint, known
from ._guard import Failure, diagnosed
from ._hybrid import hybrid_solve
from ._initial_state import check_initial_state, start_result
from ._integrators import AbstractLagrangianSolver, VariationalMidpoint
from ._options import MAX_STEPS, GivenOptions
from ._results import code_of
from ._segment import smooth_solve
from ._system import LagrangianSystem, as_coordinates, check_system
from ._trajectory import RESULTS as RESULTS, Trajectory, raise_on_failure
from ._validate import array_module


_NON_FINITE_INITIAL = (
    "The initial state (q0, qd0) contains a non-finite value (NaN or inf)."
)

_SINGULAR = int(code_of(RESULTS.singular_mass_matrix))
# `simulate`'s keywords that are `GivenOptions` fields (all but `throw`).
_OPTIONS = {field.name for field in dataclasses.fields(GivenOptions)}


@cached
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
    max_steps: int = MAX_STEPS,
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
    - `solver`: any diffrax ODE solver. The default, `diffrax.Tsit5()`, is the
        fastest at most tolerances; `diffrax.Dopri8()` pays where q̈ is costly and
        the error tight, an implicit `diffrax.Kvaerno5()` on stiff systems.
    - `rtol`, `atol`: tolerances of the default adaptive step-size controller
        `diffrax.PIDController(rtol, atol)`, positive. Default 1e-8 in float64
        (`jax.config.update("jax_enable_x64", True)`, recommended), and 1e-5 in
        JAX's default float32, whose precision cannot meet 1e-8.
    - `dt0`: initial step (None: chosen automatically); required with a constant
        step size, e.g. `stepsize_controller=diffrax.ConstantStepSize()`.
    - `stepsize_controller`: replaces the default `diffrax.PIDController(rtol, atol)`
        (which steps to the switch times of any `jl.ZeroOrderHold` among the
        params).
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
        energy error is the solver's alone, as in minimal coordinates.
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
        `vmap` every member then has its own result and `t_final`.

    **Returns:** a `Trajectory`.

    **Raises:**

    - `ValueError` at trace time for wrong shapes (`q0` and `qd0` must be 1-D of the
        same shape, `saveat` 1-D), and for values known at trace time: t1 ≤ t0,
        `saveat` not increasing or outside [t0, t1], non-positive `rtol`/`atol`,
        a `slip` or `nonholonomic` function that is not affine in qd at t0, and
        with `throw=True` a non-finite initial state and one off the constraint
        manifold: a position correction or velocity correction (see
        `jl.project_initial_state`) larger than √eps (1 + max |q0|) or
        √eps (1 + max |qd0|), h(q0, t0) < 0 for a unilateral constraint,
        redundant constraints or a singular mass matrix at t0 (with `throw=False`
        its `result`).
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
    given = {name: value for name, value in locals().items() if name in _OPTIONS}
    options = GivenOptions(**given)
    traj, failure, max_events = simulate_checked(system, q0, qd0, options, throw=throw)
    traj = diagnosed(traj, failure)
    if not throw:
        return traj
    detail = ""
    if failure is not None and known(code_of(traj.result)) == _SINGULAR:
        if unread := unread_velocities(system, failure.q0, failure.qd0, failure.t0):
            detail = (
                f" L does not depend on q̇{unread} at the start: does q0 have more "
                "entries than the coordinates L reads?"
            )
    return raise_on_failure(traj, max_steps, t1, max_events, detail)


def simulate_checked(
    system,
    q0,
    qd0,
    options: GivenOptions,
    *,
    throw: bool = True,
    trusted_times: bool = False,
) -> tuple[Trajectory, Failure | None, int | None]:
    """`simulate` without naming the cause of a stopped solve (`_guard` does, later)."""
    # Batches and the command line compile this and diagnose a failure
    # afterwards, on demand.
    check_system(system)
    q0, qd0 = as_coordinates(q0, qd0, where="q0")
    (t0, t1, ts), checked = options.checked(
        system, q0.dtype, trusted_times=trusted_times
    )
    if throw:
        xp = array_module(q0, qd0)  # NumPy where known: no small eager compile
        bad = ~(xp.all(xp.isfinite(q0)) & xp.all(xp.isfinite(qd0)))
        q0 = first_error(q0, [(bad, _NON_FINITE_INITIAL)], error=ValueError)
        # Finite params, friction and restitution in range (with throw=False a
        # member of a batch with non-finite params fails on its own, by its result).
        system = checked_values(system)
    else:
        system = checked_coefficients(system)
    if isinstance(checked.solver, AbstractLagrangianSolver):
        controller = options.stepsize_controller  # as given: it takes none
        traj = checked.solver.simulate(system, q0, qd0, t0, t1, ts, checked, controller)
        return traj.recording(system), None, None
    start = None
    if system.has_constraints and throw:
        q0 = check_initial_state(system, q0, qd0, t0)
    elif system.has_constraints:  # (a batch's member fails on its own)
        start = start_result(system, q0, qd0, t0)
    q0 = system.constraints.check_affine(q0, qd0, t0)
    solve = hybrid_solve if checked.hybrid else smooth_solve
    with forward_mode_hint("simulate"):
        traj, stop = solve(system, q0, qd0, t0, t1, ts, checked)
    if start is not None:  # the cause of a bad start's failure, not to be diagnosed
        bad = start != RESULTS.successful
        traj = eqx.tree_at(
            lambda tr: tr.result, traj, RESULTS.where(bad, start, traj.result)
        )
        stop = stop._replace(stopped=stop.stopped & ~bad)
    failure = Failure(system, q0, qd0, t0, checked.baumgarte, stop)
    return traj.recording(system), failure, checked.max_events
