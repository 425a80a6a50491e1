"""`Trajectory`, the result of `simulate`, and the result codes `RESULTS`."""

from typing import Any

import diffrax
import equinox as eqx

from ._custom_types import Array, Float, Int


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's result codes, and the ones jaxlagrange detects itself."""

    singular_mass_matrix = (
        "The mass matrix ∂²L/∂qd² became singular or indefinite during the solve: "
        "the Lagrangian is not strictly convex in qd there."
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
    implicit_step_failed = (
        "The implicit solve of a variational integrator step did not converge: "
        "take a smaller `dt0`, or raise the solver's `max_iterations`."
    )
    max_events_reached = (
        "The maximum number of events (releases, impacts, sticks and slips at "
        "unilateral constraints) was reached before t1. Raise it with "
        "`jl.simulate(..., max_events=...)`."
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
