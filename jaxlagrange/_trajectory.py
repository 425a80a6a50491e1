"""`Trajectory`, the result codes of `simulate`, the event kinds, failure messages."""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array, Float, Int


EVENT_RELEASE = 0
"""`Trajectory.event_kind` of a contact letting go (its multiplier reached zero)."""

EVENT_IMPACT = 1
"""`Trajectory.event_kind` of a free unilateral constraint hitting h = 0."""

EVENT_STICK = 2
"""`Trajectory.event_kind` of a slipping contact that stops slipping and sticks."""

EVENT_SLIP = 3
"""`Trajectory.event_kind` of a contact that starts slipping (static friction
exceeded, or a stopped slip that static friction cannot hold)."""


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's result codes, and the ones jaxlagrange detects itself."""

    singular_mass_matrix = (
        "The mass matrix ∂²L/∂qd² became singular or indefinite during the solve: "
        "the Lagrangian is not strictly convex in qd there (or an iterative "
        "`mass_solver` did not converge within its max_steps)."
    )
    redundant_constraints = (
        "The constraint Jacobian became rank-deficient during the solve: the "
        "constraints are redundant or degenerate there."
    )
    non_finite_state = (
        "The state or the equations of motion became non-finite (NaN or inf) during "
        "the solve, e.g. a square root or logarithm of a negative number in a user "
        "function."
    )
    step_size_collapsed = (
        "The step size collapsed to the resolution of t before t1: the solution "
        "blows up or is not smooth there."
    )
    max_events_reached = (
        "The maximum number of events (releases, impacts, sticks and slips at "
        "unilateral constraints) was reached before t1. Raise it with "
        "`jl.simulate(..., max_events=...)`."
    )
    implicit_step_failed = (
        "The implicit solve of a variational integrator step did not converge: "
        "take a smaller `dt0`, or raise the solver's `max_iterations`."
    )


class Trajectory(eqx.Module):
    """A solution of `simulate`.

    **Attributes:**

    - `ts`: the save times, shape (T,).
    - `q`, `qd`: coordinates and velocities at `ts`, shape (T, n).
    - `multipliers`: Lagrange multipliers at `ts`, shape (T, m + k + u)
        (holonomic, nonholonomic, unilateral; (T, 0) without constraints).
    - `result`: a `jaxlagrange.RESULTS` code; `RESULTS.successful` on success.
    - `t_final`: the time the solve reached (t1 on success; on failure the last
        accepted time, and t0 for a non-finite initial state).
    - `stats`: diffrax's statistics (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`, `max_steps`), summed over the segments between
        events.
    - `event_ts`: the times of the events, shape (E,) with E = `max_events` for a
        system with unilateral constraints and E = 0 without; `inf` in the unused
        slots.
    - `event_constraint`: which unilateral constraint each event concerns, an
        index 0 ≤ i < u into the output of `system.unilateral` (-1 where unused).
    - `event_kind`: `jl.EVENT_RELEASE` (the contact's multiplier reached zero and
        it lets go), `jl.EVENT_IMPACT` (a free constraint reached h = 0 moving
        inwards), `jl.EVENT_STICK` (a slipping contact stopped and static friction
        holds it) or `jl.EVENT_SLIP` (a contact starts slipping), -1 where unused.
    - `num_events`: how many event slots are used.
    - `friction`: the friction force along the slip direction at each contact,
        shape (T, u) for a system with `slip` (λ_T while sticking, −μ_k λ_N sign(s)
        while slipping, 0 when not in contact); shape (T, 0) without `slip`.

    Velocities jump at impacts: a save time equal to an event time holds the state
    just before the event.

    After a failure the save times that were not reached hold `inf`, as in diffrax.
    """

    ts: Float[Array, " T"]
    q: Float[Array, "T n"]
    qd: Float[Array, "T n"]
    multipliers: Float[Array, "T c"]
    result: RESULTS
    t_final: Float[Array, ""]
    stats: dict[str, Any]
    event_ts: Float[Array, " E"]
    event_constraint: Int[Array, " E"]
    event_kind: Int[Array, " E"]
    num_events: Int[Array, ""]
    friction: Float[Array, "T u"]


def without_events(ts, q, qd, multipliers, result, t_final, stats) -> Trajectory:
    """A `Trajectory` of a solve without unilateral constraints (no event slots)."""
    no_events = jnp.zeros((0,), int)
    return Trajectory(
        ts,
        q,
        qd,
        multipliers,
        result,
        t_final,
        stats,
        event_ts=jnp.zeros((0,), ts.dtype),
        event_constraint=no_events,
        event_kind=no_events,
        num_events=jnp.zeros((), int),
        friction=jnp.zeros((q.shape[0], 0), q.dtype),
    )


def _known(x) -> np.ndarray | None:
    """`x` as a NumPy array if its value is known at trace time, else None."""
    return None if isinstance(x, jax.core.Tracer) else np.asarray(x)


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
            f"The maximum number of events ({max_events}: releases, impacts, sticks "
            "and slips at unilateral constraints) was reached before t1. Raise it "
            "with "
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
