"""One smooth diffrax solve: the equations of motion from a start time to t1.

A system without unilateral constraints is one such segment; with them,
`_hybrid` chains segments between events. Both end in `finish`, which builds
the `Trajectory` from what was saved.
"""

from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import dynamics, per_contact
from ._custom_types import Array
from ._guard import Stop, all_finite, guard_for, provisional
from ._options import CheckedOptions
from ._projection import VectorFieldArgs
from ._results import promote
from ._trajectory import RESULTS, Trajectory, without_events


def split(y: Array) -> tuple[Array, Array]:
    """(q, q̇) from the integrated state y = [q; q̇]."""
    n = y.shape[-1] // 2
    return y[..., :n], y[..., n:]


def _vector_field(t, y, args: VectorFieldArgs):
    # The state is one flat vector y = [q; q̇]: diffrax's step, error norm and
    # interpolation are then single array operations instead of one per leaf.
    (q, qd), a = split(y), args
    dyn = _jit_dynamics(
        a.system, q, qd, t, active=a.active, baumgarte=a.baumgarte, modes=a.modes
    )
    bad = dyn.singular_mass | dyn.singular_constraints
    # A NaN step is rejected by the guard; the cause is found by `diagnosed`.
    qdd = jnp.where(bad, jnp.nan, dyn.accelerations)
    return jnp.concatenate([qd, qdd])


# Traced once for the four places diffrax traces it, and the multipliers at the
# saves (`filter_jit`: params may hold functions, e.g. a neural Lagrangian's).
_jit_dynamics = eqx.filter_jit(dynamics)
_jit_vector_field = eqx.filter_jit(_vector_field)


class Segment(NamedTuple):
    ts: Array  # (T,) the save times; only those `reached` are meaningful
    q: Array  # (T, n)
    qd: Array  # (T, n)
    reached: Array  # (T,) bool: the save times the segment reached
    t_end: Array  # where the segment stopped: t1, an event, or a failure
    q_end: Array
    qd_end: Array
    result: RESULTS  # diffrax's, with a stopped solve's provisional code
    stats: dict[str, Any]
    event_mask: Any
    stopped: Array  # the guard stopped the solve: `diagnosed` names the cause
    failed_dt: Array
    failed_finite: Array


def solve_segment(
    args: VectorFieldArgs,
    y0: tuple[Array, Array],
    start: Array,
    t1: Array,
    ts: Array | None,
    options: CheckedOptions,
    event: diffrax.Event | None = None,
) -> Segment:
    """Integrate from `y0` = (q, qd) at `start` to t1, or to the first event."""
    # ts None: t1 only, no interpolating on every step (a quarter of a small run).
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_jit_vector_field),
        options.solver,
        t0=start,
        t1=t1,
        dt0=options.dt0,
        y0=jnp.concatenate(y0),
        args=args,
        saveat=diffrax.SaveAt(ts=ts, t1=True, controller_state=True),
        stepsize_controller=guard_for(options.stepsize_controller),
        adjoint=options.adjoint,
        event=event,
        max_steps=options.max_steps,
        progress_meter=options.progress_meter,
        throw=False,
    )
    if ts is None:
        last = 0
        reached = sol.ts == t1
        saved_ts, (q, qd) = sol.ts, split(sol.ys)
    else:
        # The end of the segment follows the save times that were reached.
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        reached = jnp.arange(ts.shape[0]) < last
        saved_ts, (q, qd) = sol.ts[:-1], split(sol.ys[:-1])
    t_end = sol.ts[last]
    q_end, qd_end = split(sol.ys[last])
    result = promote(sol.result)
    guard = sol.controller_state
    stopped = (result == RESULTS.dt_min_reached) & (guard.failed_dt != 0)
    result = RESULTS.where(stopped, provisional(guard.failed_finite), result)
    end = (t_end, q_end, qd_end, result, dict(sol.stats), sol.event_mask)
    failed = (stopped, guard.failed_dt, guard.failed_finite)
    return Segment(saved_ts, q, qd, reached, *end, *failed)


class SavedStates(NamedTuple):
    """The states at the save times, as a solve fills them in."""

    ts: Array  # (T,); only those `filled` are meaningful
    q: Array  # (T, n)
    qd: Array  # (T, n)
    filled: Array  # (T,) bool
    actives: Array | None  # (T, u): the contacts at each save time (None: all)
    modes: Any  # (T, u) each: their friction modes (None: no contacts)


def masked_start(q0, qd0) -> tuple[Array, Array, Array]:
    """Whether the start is finite, and the state to integrate (else zeros)."""
    finite = all_finite((q0, qd0))
    return finite, jnp.where(finite, q0, 0.0), jnp.where(finite, qd0, 0.0)


def _saved_forces(system, baumgarte, t0, saved: SavedStates, reached):
    """The multipliers (and friction forces, None without friction) at the save times."""

    def at(q, qd, t, active, modes):
        dyn = _jit_dynamics(
            system, q, qd, t, active=active, baumgarte=baumgarte, modes=modes
        )
        return dyn.multipliers, dyn.friction

    lam, friction = jax.vmap(at)(
        jnp.where(reached[:, None], saved.q, 0.0),
        jnp.where(reached[:, None], saved.qd, 0.0),
        jnp.where(reached, saved.ts, t0),
        saved.actives,
        saved.modes,
    )
    if friction is not None:
        friction = jnp.where(per_contact(reached, friction), friction, jnp.inf)
    return jnp.where(reached[:, None], lam, jnp.inf), friction


def finish(
    system,
    t0,
    finite,
    saved: SavedStates,
    result,
    t_end,
    stats,
    stop: Stop,
    baumgarte,
    events: dict[str, Array] | None = None,
) -> tuple[Trajectory, Stop]:
    """The `Trajectory` of a solve (`events` None: smooth), and its `Stop`."""
    dtype = saved.q.dtype
    inf = jnp.array(jnp.inf, dtype)
    result = RESULTS.where(finite, result, RESULTS.non_finite_state)
    t_final = jnp.where(finite, t_end, t0)
    reached = saved.filled & finite
    saved = saved._replace(
        ts=jnp.where(reached, saved.ts, inf),
        q=jnp.where(reached[:, None], saved.q, inf),
        qd=jnp.where(reached[:, None], saved.qd, inf),
    )
    stop = stop._replace(stopped=stop.stopped & finite)
    if events is None and not system.has_constraints:
        lam, friction = jnp.zeros((saved.ts.shape[0], 0), dtype), None
    else:
        lam, friction = _saved_forces(system, baumgarte, t0, saved, reached)
    fields = (saved.ts, saved.q, saved.qd, lam, result, t_final, stats)
    if events is None:
        return without_events(*fields), stop
    if friction is None:
        friction = jnp.zeros(saved.actives.shape, dtype)  # contacts without slip
    return Trajectory(*fields, **events, friction=friction), stop


@eqx.filter_jit
def smooth_solve(
    system, q0, qd0, t0, t1, ts, options: CheckedOptions
) -> tuple[Trajectory, Stop]:
    """`simulate` for a system without unilateral constraints: one segment."""
    finite, q0, qd0 = masked_start(q0, qd0)
    args = VectorFieldArgs(system, options.baumgarte)
    seg = solve_segment(
        args, (q0, qd0), t0, t1, None if options.t1_only else ts, options
    )
    saved = SavedStates(seg.ts, seg.q, seg.qd, seg.reached, None, None)
    ends = (seg.q_end, seg.qd_end, seg.t_end)
    stop = Stop(seg.stopped, *ends, seg.failed_dt, seg.failed_finite)
    result, gains = seg.result, options.baumgarte
    return finish(system, t0, finite, saved, result, seg.t_end, seg.stats, stop, gains)
