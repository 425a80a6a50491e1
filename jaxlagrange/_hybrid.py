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

The events are down-crossings of one function per unilateral constraint, λᵢ
while in contact and hᵢ while free, so a constraint that starts a segment at
h ≈ 0 (just released, or just bounced) does not trigger at once.

Impacts use the impulses of `_impulse` (M Δq̇ = CᵀΛ with the rebound as
the impacting row's target rate).

Chatter: a ball bouncing with e < 1 makes infinitely many bounces in finite
time. A rebound that would rise less than `atol` (in the units of h, under the
free ḧ at the impact; the solver does not resolve lower flights) or that is
slower than √eps is taken as plastic, so the ball comes to rest in contact after
finitely many bounces, about log(√(2 g atol)/v₀)/log e of them; `max_events`
bounds the count in any case.

The event function of the solve is the least of the per-constraint ones, so
of several events within one solver step the earliest is located, and after an
event all contacts are settled together (`_friction.settle`): contacts that
release at the same instant go in one event. With `slip`, the contacts have
Coulomb friction, and sticking and slipping are modes too (`_friction.py`).

The loop over segments is a `lax.scan` of fixed length `max_events + 1` (each
finished segment a no-op), so shapes are static under `jit` and `vmap`, and it
can be differentiated in forward and reverse mode.
"""

from typing import NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from . import _friction
from ._constraints import (
    Modes,
    _contact_tolerance,
    _dynamics,
    _num_bilateral,
    _num_unilateral,
    contact_set,
)
from ._custom_types import Array, BoolScalar
from ._event_functions import (
    _condition,
    _event_values,
    _initial_conditions,
    _initial_slip,
    _root_finder,
)
from ._guard import _all_finite, _Stop
from ._impulse import _impulse
from ._segment import _solve_segment
from ._system import LagrangianSystem
from ._trajectory import (
    EVENT_IMPACT,
    EVENT_RELEASE,
    EVENT_SLIP,
    EVENT_STICK,
    RESULTS,
    Trajectory,
)


def _settle(system, q, qd, t, candidates: Array, modes: Modes):
    """The candidates whose multipliers push, and the friction modes they settle to."""
    return _friction.settle(system, q, qd, t, candidates, modes)


def _restitution(system: LagrangianSystem, u: int, dtype) -> Array:
    e = jnp.asarray(system.restitution, dtype)
    if e.shape not in ((), (u,)):
        raise ValueError(
            "`restitution` must be a scalar or have one entry per unilateral "
            f"constraint, shape ({u},), got shape {e.shape}."
        )
    return jnp.broadcast_to(e, (u,))


def _check_max_events(max_events) -> int:
    if (
        isinstance(max_events, bool)
        or not isinstance(max_events, (int, np.integer))
        or max_events < 1
    ):
        raise ValueError(
            f"`max_events` must be a positive int (the most events "
            f"before t1), got {max_events!r}."
        )
    return int(max_events)


class _Carry(NamedTuple):
    t: Array
    q: Array
    qd: Array
    active: Array  # (u,) bool: the contacts
    modes: Modes  # their friction modes (unused without `slip`)
    done: BoolScalar
    result: RESULTS
    ts: Array  # (T,) the save times, as they are filled
    qs: Array  # (T, n)
    qds: Array  # (T, n)
    actives: Array  # (T, u): the contacts at each save time
    modes_saved: Modes  # (T, u) each: their modes
    filled: Array  # (T,) bool
    event_ts: Array  # (E,)
    event_constraint: Array  # (E,)
    event_kind: Array  # (E,)
    num_events: Array
    stats: Array  # (3,) steps, accepted, rejected
    stopped: BoolScalar  # the guard stopped the last segment (see `_guard._Stop`)
    failed_dt: Array
    failed_finite: BoolScalar


def _rebound(system, q, qd, t, active, modes, row, restitution, rest):
    """The rebound rate −e ḣ⁻ of an impact, or 0 where the bounce would be too low.

    A flight rising less than `rest` (in the units of h) under the free ḧ is not
    resolved by the solver, so it ends the chatter with a plastic impact.
    """
    one = jnp.ones_like(t)

    def rate(q, qd, t):
        return jax.jvp(system._unilateral, (q, t), (qd, one))[1]

    qdd = _dynamics(system, q, qd, t, active=active, modes=modes).accelerations
    hd, hdd = (x[row] for x in jax.jvp(rate, (q, qd, t), (qd, qdd, one)))
    rebound = -restitution[row] * hd
    pull = jnp.maximum(-hdd, 0.0)
    low = (rebound <= _contact_tolerance(q.dtype)) | (rebound**2 <= 2 * pull * rest)
    return jnp.where(low, 0.0, rebound)


def _select(flag, a, b):
    return jax.tree_util.tree_map(lambda x, y: jnp.where(flag, x, y), a, b)


def _jump(system, q, qd, t, active, modes, index, restitution, rest):
    """The state just after event `index` of `_event_values`.

    Returns the velocities, the contacts and their modes afterwards, the event's
    constraint and kind, and whether an impulse failed.
    """
    u = active.shape[0]
    row = index % u
    onehot = jnp.arange(u) == row
    # Other contacts whose slip stopped at this instant too are tried as sticking.
    modes = _friction.stop_slips(system, q, qd, t, modes, onehot)
    # Release: the contact lets go, velocities unchanged.
    released = _settle(system, q, qd, t, active & ~onehot, modes)
    # Impact: the impacting row rebounds, the other contacts keep ḣ = 0. The
    # impulse is frictionless; the modes afterwards follow the slip velocities.
    rebound = _rebound(system, q, qd, t, active, modes, row, restitution, rest)
    target = jnp.where(onehot, rebound, 0.0)
    impact = _impulse(system, q, qd, t, jnp.zeros_like(q), active | onehot, target)
    bounced = onehot & (rebound > 0)
    after = _friction.slip_modes(system, q, impact.velocities, t)
    contacts = _settle(
        system, q, impact.velocities, t, impact.contact & ~bounced, after
    )
    is_release = active[row]
    qd_next = jnp.where(is_release, qd, impact.velocities)
    state = _select(is_release, released, contacts)
    kind = jnp.where(is_release, EVENT_RELEASE, EVENT_IMPACT)
    bad = ~is_release & (impact.singular_mass | impact.singular_constraints)
    if system.slip is not None:
        # A friction switch: a sticking contact slips against its friction force;
        # a slipping one whose slip stopped is tried as sticking.
        friction = _dynamics(system, q, qd, t, active=active, modes=modes).friction
        stuck = modes.stick[row]
        trial = Modes(
            jnp.where(onehot, ~stuck, modes.stick),
            jnp.where(
                onehot,
                jnp.where(stuck, -jnp.sign(friction), 0.0),
                modes.direction,
            ),
        )
        switched = _settle(system, q, qd, t, active, trial)
        sticks = switched[0][row] & switched[1].stick[row]
        is_switch = index >= u
        qd_next = jnp.where(is_switch, qd, qd_next)
        state = _select(is_switch, switched, state)
        kind = jnp.where(is_switch, jnp.where(sticks, EVENT_STICK, EVENT_SLIP), kind)
        bad = bad & ~is_switch
    active_next, modes_next = state
    return qd_next, active_next, modes_next, row, kind, bad


@eqx.filter_jit
def _hybrid_solve(
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
    max_events,
    rest,
) -> tuple[Trajectory, _Stop]:
    """`simulate` for a system with unilateral constraints: segments between events.

    Returns the trajectory and where its last segment stopped, as `_smooth_solve`.
    """
    dtype = q0.dtype
    n = q0.shape[0]
    u = _num_unilateral(system, q0, t0)
    restitution = _restitution(system, u, dtype)
    offset = _num_bilateral(system, q0, qd0, t0)
    finite = _all_finite((q0, qd0))
    # A non-finite initial state is integrated as zeros and reported afterwards.
    q0 = jnp.where(finite, q0, 0.0)
    qd0 = jnp.where(finite, qd0, 0.0)
    num_ts = ts.shape[0]
    inf = jnp.array(jnp.inf, dtype)

    event = diffrax.Event(
        _condition(offset),
        root_finder=_root_finder(dtype),
        direction=False,
    )

    def segment(carry: _Carry) -> _Carry:
        # A finished member of a vmapped batch runs this too: make it trivial.
        start = jnp.where(carry.done, t1, carry.t)
        event_args = (
            start,
            _initial_conditions(system, carry.q, carry.qd, start),
            _initial_slip(system, carry.q, carry.qd, start, carry.modes),
        )
        seg = _solve_segment(
            system,
            (carry.q, carry.qd),
            start,
            t1,
            jnp.clip(ts, start, t1),
            solver=solver,
            dt0=dt0,
            stepsize_controller=stepsize_controller,
            max_steps=max_steps,
            adjoint=adjoint,
            baumgarte=baumgarte,
            progress_meter=progress_meter,
            active=carry.active,
            modes=carry.modes,
            event=event,
            event_args=event_args,
        )
        t_end, q_end, qd_end, result = seg.t_end, seg.q_end, seg.qd_end, seg.result
        new = seg.reached & ~carry.filled & ~carry.done
        ts_out = jnp.where(new, seg.ts, carry.ts)
        qs = jnp.where(new[:, None], seg.q, carry.qs)
        qds = jnp.where(new[:, None], seg.qd, carry.qds)
        actives = jnp.where(new[:, None], carry.active, carry.actives)
        modes_saved = _select(new[:, None], carry.modes, carry.modes_saved)
        filled = carry.filled | new

        is_event = result == RESULTS.event_occurred
        result = RESULTS.where(is_event, RESULTS.successful, result)

        # The event is the one of the event functions that reached zero.
        args = (system, baumgarte, carry.active, carry.modes, *event_args)
        index = jnp.argmin(
            _event_values(t_end, jnp.concatenate([q_end, qd_end]), args, offset)
        )
        jump = _jump(
            system,
            q_end,
            qd_end,
            t_end,
            carry.active,
            carry.modes,
            index,
            restitution,
            rest,
        )
        qd_next, active_next, modes_next, row, kind, bad = jump
        room = carry.num_events < max_events
        result = RESULTS.where(is_event & ~room, RESULTS.max_events_reached, result)
        result = RESULTS.where(
            is_event & room & bad, RESULTS.redundant_constraints, result
        )
        record = is_event & room & ~carry.done
        # Out of range (no event, or no room): the write is dropped.
        slot = jnp.where(record, carry.num_events, max_events)
        event_ts = carry.event_ts.at[slot].set(t_end, mode="drop")
        event_constraint = carry.event_constraint.at[slot].set(row, mode="drop")
        event_kind = carry.event_kind.at[slot].set(kind, mode="drop")
        go_on = record & (result == RESULTS.successful)
        stats = jnp.stack(
            [
                seg.stats["num_steps"],
                seg.stats["num_accepted_steps"],
                seg.stats["num_rejected_steps"],
            ]
        )
        keep = carry.done

        def pick(old, new):
            return jnp.where(keep, old, new)

        return _Carry(
            t=pick(carry.t, t_end),
            q=pick(carry.q, q_end),
            qd=pick(carry.qd, jnp.where(go_on, qd_next, qd_end)),
            active=pick(carry.active, jnp.where(go_on, active_next, carry.active)),
            modes=_select(keep, carry.modes, _select(go_on, modes_next, carry.modes)),
            done=carry.done | ~go_on,
            result=RESULTS.where(keep, carry.result, result),
            ts=ts_out,
            qs=qs,
            qds=qds,
            actives=actives,
            modes_saved=modes_saved,
            filled=filled,
            event_ts=event_ts,
            event_constraint=event_constraint,
            event_kind=event_kind,
            num_events=carry.num_events + record.astype(carry.num_events.dtype),
            stats=carry.stats + jnp.where(keep, 0, stats),
            stopped=pick(carry.stopped, seg.stopped),
            failed_dt=pick(carry.failed_dt, seg.failed_dt),
            failed_finite=pick(carry.failed_finite, seg.failed_finite),
        )

    def body(carry, _):
        return jax.lax.cond(carry.done, lambda c: c, segment, carry), None

    unused = -jnp.ones((max_events,), int)
    if system.slip is None:
        active0, modes0 = contact_set(system, q0, qd0, t0), _friction.no_modes(u, dtype)
    else:
        active0, modes0 = _friction.contact_modes(system, q0, qd0, t0)
    init = _Carry(
        t=t0,
        q=q0,
        qd=qd0,
        active=active0,
        modes=modes0,
        done=jnp.array(False),
        result=RESULTS.where(jnp.array(True), RESULTS.successful, RESULTS.successful),
        ts=jnp.full((num_ts,), inf),
        qs=jnp.full((num_ts, n), inf),
        qds=jnp.full((num_ts, n), inf),
        actives=jnp.zeros((num_ts, u), bool),
        modes_saved=Modes(jnp.zeros((num_ts, u), bool), jnp.zeros((num_ts, u), dtype)),
        filled=jnp.zeros((num_ts,), bool),
        event_ts=jnp.full((max_events,), inf),
        event_constraint=unused,
        event_kind=unused,
        num_events=jnp.zeros((), int),
        stats=jnp.zeros((3,), int),
        stopped=jnp.array(False),
        failed_dt=jnp.zeros((), dtype),
        failed_finite=jnp.array(True),
    )
    final, _ = jax.lax.scan(body, init, None, length=max_events + 1)

    result = RESULTS.where(finite, final.result, RESULTS.non_finite_state)
    t_final = jnp.where(finite, final.t, t0)
    reached = final.filled & finite
    saved_ts = jnp.where(reached, final.ts, inf)
    q, qd = (jnp.where(reached[:, None], y, inf) for y in (final.qs, final.qds))

    def multipliers(q, qd, t, active, modes):
        dyn = _dynamics(
            system, q, qd, t, active=active, baumgarte=baumgarte, modes=modes
        )
        friction = jnp.zeros((0,), dtype) if dyn.friction is None else dyn.friction
        return dyn.multipliers, friction

    lam, friction = jax.vmap(multipliers)(
        jnp.where(reached[:, None], q, 0.0),
        jnp.where(reached[:, None], qd, 0.0),
        jnp.where(reached, saved_ts, t0),
        final.actives,
        final.modes_saved,
    )
    lam = jnp.where(reached[:, None], lam, jnp.inf)
    friction = jnp.where(reached[:, None], friction, jnp.inf)
    steps, accepted, rejected = final.stats
    stats = {
        "num_steps": steps,
        "num_accepted_steps": accepted,
        "num_rejected_steps": rejected,
        "max_steps": max_steps,
    }
    traj = Trajectory(
        saved_ts,
        q,
        qd,
        lam,
        result,
        t_final,
        stats,
        event_ts=final.event_ts,
        event_constraint=final.event_constraint,
        event_kind=final.event_kind,
        num_events=final.num_events,
        friction=friction,
    )
    # A failed segment leaves the carry at its last accepted state and contacts.
    stop = _Stop(
        final.stopped & finite,
        final.q,
        final.qd,
        final.t,
        final.failed_dt,
        final.failed_finite,
        final.active,
        final.modes,
    )
    return traj, stop
