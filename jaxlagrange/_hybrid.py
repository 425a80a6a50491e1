"""The hybrid solve of unilateral constraints: segments between release and impact events.

A unilateral constraint h(q, t) ≥ 0 is holonomic while it is in contact and its
multiplier pushes (λ ≥ 0); it is free otherwise. `simulate` integrates such a
system segment by segment, each segment one `diffrax.diffeqsolve` with the set
of contacts held fixed, ended by the first event:

- a *release*: the multiplier of a contact falls through zero (root-found on
  λ(t), so the release time is exact to the root finder's tolerance); the motion
  goes on free of that constraint with unchanged velocities;
- an *impact*: a free constraint reaches h = 0 moving inwards (root-found on
  h(t)); the velocities jump by an impulse (`_impulse`), and the constraint is in
  contact afterwards if the rebound is zero and its multiplier then pushes.
  Every other free constraint at h ≈ 0 (√eps) moving inwards lands in the same
  impulse (a flat foot, a box dropped flat), one the impulse would drive
  inwards joins it, and one it leaves separating too slowly to rise above
  `atol` is held (`_complementarity`); redundant rows share it by least norm.

The events are down-crossings of the event functions (`_event_functions`): λᵢ
while in contact, hᵢ while free, the earliest located.

Chatter: a ball bouncing with e < 1 makes infinitely many bounces in finite
time. A rebound that would rise less than `atol` (in the units of h, under the
free ḧ at the impact: slower than √(2 |ḧ| atol), 4.4e-4 m/s for g = 9.81 and
atol = 1e-8; the solver does not resolve lower flights) or that is slower than
√eps is taken as plastic, so the ball comes to rest in contact after finitely
many bounces, about log(√(2 g atol)/v₀)/log e of them; `max_events` bounds the
count in any case. A held row that an impact lifts (a bar rocking on its ends)
is judged by its ḧ without contacts, its own being 0 while held. A constraint
found below h = 0 by more than √eps + 100 atol at the end of a segment (a
missed contact) ends the solve with `RESULTS.contact_penetration`, never a
success.

After an event all contacts are settled together (`_friction.settle`, the
complementarity problem of `_complementarity`): contacts that release at the
same instant go in one event, and a touching row that would sink joins. With
`slip`, the contacts have Coulomb friction, and sticking and slipping are
modes too (`_friction.py`).

The loop over segments is a `lax.scan` of fixed length `max_events + 1` (each
finished segment a no-op), so shapes are static under `jit` and `vmap`, and it
can be differentiated in forward and reverse mode.
"""

import functools
from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from . import _friction
from ._coefficients import coefficient
from ._constraints import (
    Modes,
    contact_set,
    contact_tolerance,
    dynamics,
    gap_rates,
    num_bilateral,
    num_unilateral,
    per_contact,
)
from ._custom_types import Array, BoolScalar
from ._event_functions import (
    EventWatch,
    event_condition,
    event_root_finder,
    event_values,
    initial_conditions,
)
from ._guard import Stop, select
from ._impulse import impulse_jump
from ._options import CheckedOptions
from ._projection import VectorFieldArgs
from ._segment import SavedStates, Segment, finish, masked_start, solve_segment
from ._system import LagrangianSystem
from ._trajectory import (
    EVENT_IMPACT,
    EVENT_RELEASE,
    EVENT_SLIP,
    EVENT_STICK,
    RESULTS,
    Trajectory,
)


_STATS = ("num_steps", "num_accepted_steps", "num_rejected_steps")


class _Events(NamedTuple):
    """The events so far, named as on the `Trajectory`."""

    event_ts: Array  # (E,)
    event_constraint: Array  # (E,)
    event_kind: Array  # (E,)
    num_events: Array


class _Carry(NamedTuple):
    t: Array
    q: Array
    qd: Array
    active: Array  # (u,) bool: the contacts
    modes: Modes  # their friction modes (unused without `slip`)
    done: BoolScalar
    result: RESULTS
    saved: SavedStates  # the states at the save times, with their contacts and modes
    events: _Events
    stats: Array  # (3,) steps, accepted, rejected
    stopped: BoolScalar  # the guard stopped the last segment (see `_guard.Stop`)
    failed_dt: Array
    failed_finite: BoolScalar


class _Context(NamedTuple):
    """What every segment of one hybrid solve shares."""

    system: LagrangianSystem
    t1: Array
    ts: Array  # (T,) the save times
    options: CheckedOptions
    event: diffrax.Event
    restitution: Array  # (u,)
    offset: int  # the number of bilateral multipliers before the unilateral ones


def _landing(system, q, qd, t, qdd, free, active, onehot, restitution, rest):
    """The contacts an impact takes (the impacting row and every free row at
    h ≈ 0 moving inwards), their rebound rates −e ḣ⁻ (0 where plastic, as the
    module docstring says), the rows near enough (h ≈ 0) to be taken if the
    impulse drives them inwards, and each row's plastic speed: a rebound or
    separation no faster rises less than `rest` (or is below √eps).
    `qdd`: the accelerations before the impact; `free`: those without contacts."""
    tol = contact_tolerance(q.dtype)
    h, hd, hdd = gap_rates(system, q, qd, t, qdd)
    # A held row has ḧ = 0; if the impulse lifts it, it falls back as if free
    # (the hopper's torso and foot rocking: each impact lifting the other).
    hdd = jnp.where(active, gap_rates(system, q, qd, t, free)[2], hdd)
    near = ~active & (h <= tol)
    landing = onehot | (near & (hd < 0))
    rebound = -restitution * hd
    plastic = jnp.maximum(jnp.sqrt(2 * jnp.maximum(-hdd, 0.0) * rest), tol)
    low = rebound <= plastic
    return landing, jnp.where(low | ~landing, 0.0, rebound), near, plastic


def _penetrating(system, q, t, rest) -> BoolScalar:
    """Whether a unilateral constraint is violated by more than its tolerance
    (√eps + 100 `rest`, in the units of h): a sunk contact is no success."""
    tol = contact_tolerance(q.dtype) + 100 * rest
    return jnp.any(system.constraints.gaps(q, t) < -tol)


def _jump(system, q, qd, t, active, modes, index, restitution, options):
    """q̇, the contacts and modes after event `index`, its row and kind, and failure."""
    rest, tolerances = options.rest, options.tolerances
    u = active.shape[0]
    row = index % u
    onehot = jnp.arange(u) == row
    # Other contacts whose slip stopped at this instant too are tried as sticking.
    modes = _friction.stop_slips(system, q, qd, t, modes, onehot, tolerances)
    # One evaluation of the dynamics before the jump serves the impact and the
    # friction switch, one without contacts the plastic speeds, and one `settle`
    # the event's kind, chosen before it runs: each is a copy of the dynamics in
    # the compiled program.
    dyn = dynamics(system, q, qd, t, active=active, modes=modes)
    free = dynamics(system, q, qd, t, active=jnp.zeros_like(active)).accelerations
    # Release: the contact lets go, velocities unchanged.
    is_release = active[row]
    trial = (active & ~onehot, modes)
    # Impact: the landing rows rebound, the other contacts keep ḣ = 0. The
    # impulse is frictionless; the modes afterwards follow the slip velocities.
    landing, target, near, plastic = _landing(
        system, q, qd, t, dyn.accelerations, free, active, onehot, restitution, rest
    )
    impact = impulse_jump(
        system, q, qd, t, jnp.zeros_like(q), active | landing, target, near, plastic
    )
    bounced = landing & (target > 0)
    after = _friction.slip_modes(system, q, impact.velocities, t, tolerances)
    trial = select(is_release, trial, (impact.contact & ~bounced, after))
    qd_next = jnp.where(is_release, qd, impact.velocities)
    kind = jnp.where(is_release, EVENT_RELEASE, EVENT_IMPACT)
    bad = ~is_release & (impact.singular_mass | impact.singular_constraints)
    is_switch = index >= u
    if system.constraints.friction is not None:
        # A friction switch: stick to slip, or slip to stick (or slip on).
        switched = _friction.switch(
            system, q, qd, t, modes, onehot, dyn.friction, tolerances
        )
        qd_next = jnp.where(is_switch, qd, qd_next)
        trial = select(is_switch, (active, switched), trial)
        bad = bad & ~is_switch
    active_next, modes_next = _friction.settle(
        system, q, qd_next, t, *trial, tolerances
    )
    sticks = active_next[row] & modes_next.stick[row]
    kind = jnp.where(is_switch, jnp.where(sticks, EVENT_STICK, EVENT_SLIP), kind)
    return qd_next, active_next, modes_next, row, kind, bad


def _context(system, q0, qd0, t0, t1, ts, options: CheckedOptions) -> _Context:
    """The event function, the restitution and the multipliers' layout."""
    dtype = q0.dtype
    u = num_unilateral(system, q0, t0)
    offset = num_bilateral(system, q0, qd0, t0)
    event = diffrax.Event(
        event_condition(offset), root_finder=event_root_finder(dtype), direction=False
    )
    restitution = coefficient(system, "restitution", u, dtype)
    controller = options.stepsize_controller
    if isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
        # Events that come and go within one long step (`EventWatch`).
        watched = EventWatch(controller, offset)
        options = eqx.tree_at(lambda o: o.stepsize_controller, options, watched)
    return _Context(system, t1, ts, options, event, restitution, offset)


def _initial_carry(ctx: _Context, q0, qd0, t0, num_ts: int) -> _Carry:
    """The carry before the first segment: the contacts at t0, nothing saved yet."""
    system, max_events = ctx.system, ctx.options.max_events
    dtype, n, u = q0.dtype, q0.shape[0], ctx.restitution.shape[0]
    inf = jnp.array(jnp.inf, dtype)
    if system.constraints.friction is None:
        active0, modes0 = contact_set(system, q0, qd0, t0), _friction.no_modes(u, dtype)
    else:
        active0, modes0 = _friction.contact_modes(system, q0, qd0, t0)
    saved = SavedStates(
        ts=jnp.full((num_ts,), inf),
        q=jnp.full((num_ts, n), inf),
        qd=jnp.full((num_ts, n), inf),
        filled=jnp.zeros((num_ts,), bool),
        actives=jnp.zeros((num_ts, u), bool),
        modes=jax.tree.map(lambda x: jnp.zeros((num_ts, *x.shape), x.dtype), modes0),
    )
    unused = -jnp.ones((max_events,), int)
    events = _Events(jnp.full((max_events,), inf), unused, unused, jnp.zeros((), int))
    return _Carry(
        t=t0,
        q=q0,
        qd=qd0,
        active=active0,
        modes=modes0,
        done=jnp.array(False),
        result=RESULTS.where(jnp.array(True), RESULTS.successful, RESULTS.successful),
        saved=saved,
        events=events,
        stats=jnp.zeros((3,), int),
        stopped=jnp.array(False),
        failed_dt=jnp.zeros((), dtype),
        failed_finite=jnp.array(True),
    )


def _segment_args(ctx: _Context, carry: _Carry, start: Array) -> VectorFieldArgs:
    """The vector field's and event functions' args of the segment from `start`."""
    system, q, qd, modes = ctx.system, carry.q, carry.qd, carry.modes
    offset = _friction.slip_offset(system, q, qd, start, modes, ctx.options.tolerances)
    given = (system, ctx.options.baumgarte, carry.active, modes, start)
    return VectorFieldArgs(*given, *initial_conditions(system, q, qd, start), offset)


def _save(carry: _Carry, seg: Segment) -> SavedStates:
    """The save times that this segment reached first, filled in."""
    old = carry.saved
    new = seg.reached & ~old.filled & ~carry.done
    return SavedStates(
        ts=jnp.where(new, seg.ts, old.ts),
        q=jnp.where(new[:, None], seg.q, old.q),
        qd=jnp.where(new[:, None], seg.qd, old.qd),
        filled=old.filled | new,
        actives=jnp.where(new[:, None], carry.active, old.actives),
        modes=jax.tree.map(
            lambda x, y: jnp.where(per_contact(new, y), x, y), carry.modes, old.modes
        ),
    )


def _record(events: _Events, record, t, row, kind, max_events: int) -> _Events:
    # Out of range (no event, or no room): the write is dropped.
    slot = jnp.where(record, events.num_events, max_events)
    return _Events(
        events.event_ts.at[slot].set(t, mode="drop"),
        events.event_constraint.at[slot].set(row, mode="drop"),
        events.event_kind.at[slot].set(kind, mode="drop"),
        events.num_events + record.astype(events.num_events.dtype),
    )


def _event(ctx: _Context, carry: _Carry, seg: Segment, args: VectorFieldArgs):
    """A segment's end as an event: result, recorded, the state after, row, kind."""
    is_event = seg.result == RESULTS.event_occurred
    result = RESULTS.where(is_event, RESULTS.successful, seg.result)
    # The event is the one of the event functions that reached zero, not one
    # held at exactly 0 since the segment start (`event_condition`).
    # Both ends in one loop: one copy of the dynamics in the program, not two.
    ends = (
        jnp.stack([seg.t_end, args.start]),
        jnp.stack(
            [jnp.concatenate(y) for y in ((seg.q_end, seg.qd_end), (carry.q, carry.qd))]
        ),
    )
    values, at_start = jax.lax.map(
        lambda end: event_values(*end, args, ctx.offset), ends
    )
    held = (at_start == 0) & (values == 0)
    index = jnp.argmin(jnp.where(held, jnp.inf, values))
    state = (seg.q_end, seg.qd_end, seg.t_end, carry.active, carry.modes)
    jump = _jump(ctx.system, *state, index, ctx.restitution, ctx.options)
    qd_next, active_next, modes_next, row, kind, bad = jump
    room = carry.events.num_events < ctx.options.max_events
    result = RESULTS.where(is_event & ~room, RESULTS.max_events_reached, result)
    result = RESULTS.where(is_event & room & bad, RESULTS.redundant_constraints, result)
    sunk = _penetrating(ctx.system, seg.q_end, seg.t_end, ctx.options.rest)
    result = RESULTS.where(
        (result == RESULTS.successful) & sunk, RESULTS.contact_penetration, result
    )
    record = is_event & room & ~carry.done
    return result, record, (qd_next, active_next, modes_next), row, kind


def _step(ctx: _Context, carry: _Carry) -> _Carry:
    """One segment, from the carry's state to t1 or to its first event, and the jump."""
    # A finished member of a vmapped batch runs this too: make it trivial.
    start = jnp.where(carry.done, ctx.t1, carry.t)
    args = _segment_args(ctx, carry, start)
    y0 = (carry.q, carry.qd)
    ts = jnp.clip(ctx.ts, start, ctx.t1)
    seg = solve_segment(args, y0, start, ctx.t1, ts, ctx.options, ctx.event)
    result, record, after, row, kind = _event(ctx, carry, seg, args)
    qd_next, active_next, modes_next = after
    go_on = record & (result == RESULTS.successful)
    keep = carry.done
    pick = functools.partial(select, keep)
    stats = jnp.stack([seg.stats[k] for k in _STATS])
    events = _record(carry.events, record, seg.t_end, row, kind, ctx.options.max_events)
    return _Carry(
        t=pick(carry.t, seg.t_end),
        q=pick(carry.q, seg.q_end),
        qd=pick(carry.qd, jnp.where(go_on, qd_next, seg.qd_end)),
        active=pick(carry.active, jnp.where(go_on, active_next, carry.active)),
        modes=pick(carry.modes, select(go_on, modes_next, carry.modes)),
        done=carry.done | ~go_on,
        result=RESULTS.where(keep, carry.result, result),
        saved=_save(carry, seg),
        events=events,
        stats=carry.stats + jnp.where(keep, 0, stats),
        stopped=pick(carry.stopped, seg.stopped),
        failed_dt=pick(carry.failed_dt, seg.failed_dt),
        failed_finite=pick(carry.failed_finite, seg.failed_finite),
    )


@eqx.filter_jit
def hybrid_solve(
    system, q0, qd0, t0, t1, ts, options: CheckedOptions
) -> tuple[Trajectory, Stop]:
    """`simulate` for a system with unilateral constraints: segments between events."""
    ctx = _context(system, q0, qd0, t0, t1, ts, options)
    finite, q0, qd0 = masked_start(q0, qd0)
    init = _initial_carry(ctx, q0, qd0, t0, ts.shape[0])

    def body(carry, _):
        step = functools.partial(_step, ctx)
        return jax.lax.cond(carry.done, lambda c: c, step, carry), None

    final, _ = jax.lax.scan(body, init, None, length=options.max_events + 1)
    stats = dict(zip(_STATS, final.stats, strict=True), max_steps=options.max_steps)
    # A failed segment leaves the carry at its last accepted state and contacts.
    stop = Stop(*(getattr(final, name) for name in Stop._fields))
    ends = (final.saved, final.result, final.t, stats, stop, options.baumgarte)
    return finish(system, t0, finite, *ends, final.events._asdict())
