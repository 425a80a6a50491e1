"""One smooth diffrax solve: the equations of motion from a start time to t1.

A system without unilateral constraints is one such segment; with them,
`_hybrid` chains segments between events.
"""

from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import _dynamics
from ._custom_types import Array
from ._guard import _all_finite, _guard, _provisional, _Stop
from ._trajectory import RESULTS, Trajectory, without_events


def _split(y: Array) -> tuple[Array, Array]:
    """(q, q̇) from the integrated state y = [q; q̇]."""
    n = y.shape[-1] // 2
    return y[..., :n], y[..., n:]


def _vector_field(t, y, args):
    # The state is one flat vector y = [q; q̇]: diffrax's step, error norm and
    # interpolation are then single array operations instead of one per leaf.
    # `active`: the unilateral constraints in contact (None: all of them), `modes`
    # their friction modes (None: no friction). Event functions get further
    # arguments after these four.
    system, baumgarte, active, modes = args[:4]
    q, qd = _split(y)
    dyn = _dynamics(system, q, qd, t, active=active, baumgarte=baumgarte, modes=modes)
    bad = dyn.singular_mass | dyn.singular_constraints
    # A NaN step is rejected by the guard; the cause is found by `_diagnosed`.
    qdd = jnp.where(bad, jnp.nan, dyn.accelerations)
    return jnp.concatenate([qd, qdd])


class _Segment(NamedTuple):
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
    stopped: Array  # the guard stopped the solve: `_diagnosed` names the cause
    failed_dt: Array
    failed_finite: Array


def _solve_segment(
    system,
    y0: tuple[Array, Array],
    start: Array,
    t1: Array,
    ts: Array | None,
    *,
    solver,
    dt0,
    stepsize_controller,
    max_steps: int,
    adjoint,
    baumgarte,
    progress_meter,
    active: Array | None = None,
    modes=None,
    event: diffrax.Event | None = None,
    event_args: tuple = (),
) -> _Segment:
    """Integrate from `y0` = (q, qd) at `start` to t1, or to the first event.

    `ts` are the save times (None: t1 only, which avoids interpolating on every
    step, a quarter of the run time of a small system).
    """
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=start,
        t1=t1,
        dt0=dt0,
        y0=jnp.concatenate(y0),
        args=(system, baumgarte, active, modes, *event_args),
        saveat=diffrax.SaveAt(ts=ts, t1=True, controller_state=True),
        stepsize_controller=_guard(stepsize_controller),
        adjoint=adjoint,
        event=event,
        max_steps=max_steps,
        progress_meter=progress_meter,
        throw=False,
    )
    if ts is None:
        last = 0
        reached = sol.ts == t1
        saved_ts, (q, qd) = sol.ts, _split(sol.ys)
    else:
        # The end of the segment follows the save times that were reached.
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        reached = jnp.arange(ts.shape[0]) < last
        saved_ts, (q, qd) = sol.ts[:-1], _split(sol.ys[:-1])
    t_end = sol.ts[last]
    q_end, qd_end = _split(sol.ys[last])
    result = RESULTS.promote(sol.result)
    guard = sol.controller_state
    stopped = (result == RESULTS.dt_min_reached) & (guard.failed_dt != 0)
    result = RESULTS.where(stopped, _provisional(guard.failed_finite), result)
    return _Segment(
        saved_ts,
        q,
        qd,
        reached,
        t_end,
        q_end,
        qd_end,
        result,
        dict(sol.stats),
        sol.event_mask,
        stopped,
        guard.failed_dt,
        guard.failed_finite,
    )


@eqx.filter_jit
def _smooth_solve(
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
) -> tuple[Trajectory, _Stop]:
    """`simulate` for a system without unilateral constraints: one segment.

    Returns the trajectory (a stopped solve with its provisional code) and where
    it stopped, for `_diagnosed`.
    """
    dtype = q0.dtype
    finite = _all_finite((q0, qd0))
    # A non-finite initial state is integrated as zeros and reported afterwards.
    q0 = jnp.where(finite, q0, 0.0)
    qd0 = jnp.where(finite, qd0, 0.0)
    seg = _solve_segment(
        system,
        (q0, qd0),
        t0,
        t1,
        None if t1_only else ts,
        solver=solver,
        dt0=dt0,
        stepsize_controller=stepsize_controller,
        max_steps=max_steps,
        adjoint=adjoint,
        baumgarte=baumgarte,
        progress_meter=progress_meter,
    )
    inf = jnp.array(jnp.inf, dtype)
    result = RESULTS.where(finite, seg.result, RESULTS.non_finite_state)
    t_final = jnp.where(finite, seg.t_end, t0)
    reached = seg.reached & finite
    saved_ts = jnp.where(reached, seg.ts, inf)
    q, qd = (jnp.where(reached[:, None], y, inf) for y in (seg.q, seg.qd))
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
    traj = without_events(saved_ts, q, qd, multipliers, result, t_final, seg.stats)
    stop = _Stop(
        seg.stopped & finite,
        seg.q_end,
        seg.qd_end,
        seg.t_end,
        seg.failed_dt,
        seg.failed_finite,
        None,
        None,
    )
    return traj, stop
