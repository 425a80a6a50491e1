"""The event functions of the hybrid solve and the root finder of event times.

Each unilateral constraint has one event function, positive while nothing
happens: its multiplier while in contact, its h while free; with friction, one
more per contact for the end of its sticking or slipping (`_friction`). The
solve's single event function is the least of them (an exact 0 taken as +inf),
so that of several events within one solver step the earliest is located,
whichever it is.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

from . import _friction
from ._constraints import contact_tolerance, dynamics
from ._custom_types import Array
from ._guard import AdaptiveWrapper, select
from ._projection import VectorFieldArgs
from ._segment import split


def event_values(
    t, y, args: VectorFieldArgs, offset: int, *, divided: bool = True
) -> Array:
    """The event functions, positive while nothing happens: (u,), or (2u,) with
    friction (the normal ones, then the tangential ones of `_friction`).

    Normal: λ in contact, else h (plus its depth below zero at t_s, from
    `initial_conditions`). A free constraint's h is divided by the time
    since the segment start t_s: the sign is unchanged, but the root at t_s of a
    constraint that starts at h ≈ 0 (just released or bounced) is divided out.
    Otherwise a rounding error h(t_s) ≲ 0 would hide a short flight that one
    solver step jumps over. `divided=False`: h itself (and the slip itself), the
    smooth functions that `EventWatch` extrapolates.
    """
    system, active, modes, start = args.system, args.active, args.modes, args.start
    q, qd = split(y)
    dyn = dynamics(
        system, q, qd, t, active=active, baumgarte=args.baumgarte, modes=modes
    )
    h = system.constraints.gaps(q, t) + args.depth
    if divided:
        later = t > start
        h = jnp.where(later, h / jnp.where(later, t - start, 1.0), args.initial)
    normal = dyn.multipliers[offset:]
    values = jnp.where(active, normal, h)
    if system.constraints.friction is not None:
        tangential = _friction.friction_values(
            args, q, qd, t, normal, dyn.friction, divided
        )
        values = jnp.concatenate([values, tangential])
    return values.astype(y.dtype)  # (float64 params: event times in t's dtype)


def event_condition(offset: int):
    """The one event function: the least of `event_values` (module docstring)."""

    def condition(t, y, args, **kwargs):
        del kwargs
        values = event_values(t, y, args, offset)
        # An exact ±0 (λ_N of an unloaded limit in free fall, its μ_s λ_N − |λ_T|
        # at μ = 0) can't trigger (> 0 to ≤ 0) and would hide all others.
        values = jnp.where(values == 0, jnp.inf, values)
        # In the default float: diffrax pairs it with a Python 0.0 in a `cond`.
        return jnp.min(values).astype(float)

    return condition


def _first_dip(ta, va, tb, vb, tc, vc) -> Array:
    """The earliest time in (tb, tc) where the parabola through the three points
    (tᵢ, vᵢ) of an event function dips below zero though vb and vc are positive
    (its vertex); +inf where none does. Per component of v, then the least."""
    d_ab = (vb - va) / (tb - ta)
    d_bc = (vc - vb) / (tc - tb)
    d2 = (d_bc - d_ab) / (tc - ta)  # half the second derivative
    vertex = 0.5 * (tb + tc) - d_bc / (2 * d2)
    lowest = vb + (vertex - tb) * (d_bc + d2 * (vertex - tc))
    dip = (vb > 0) & (vc > 0) & (d2 > 0) & (vertex > tb) & (vertex < tc)
    dip = dip & (lowest < 0)
    return jnp.min(jnp.where(dip, vertex, jnp.inf), initial=jnp.inf)


class _WatchState(NamedTuple):
    inner: Any  # the wrapped controller's state
    t_before: Array  # the start of the last accepted step (nan before the first)
    before: Array  # the event functions there
    start: Array  # the event functions at the start of the current step


class EventWatch(AdaptiveWrapper):
    """An adaptive controller that also watches the event functions.

    diffrax finds an event where the event function changes sign between the
    ends of a step. A function that crosses zero and comes back within one step
    goes unseen: a ball that touches the ceiling between two long steps of an
    exact (polynomial) flight, a contact force that is negative for an instant,
    a slip that reverses and resumes. Those are the steps a high-order solver
    makes longest. This controller fits a parabola to each event function
    (`event_values(..., divided=False)`) through the ends of the last accepted
    step and the end of the proposed one; where it dips below zero inside the
    proposed step, the step is rejected and the next one ends at the dip, so that
    the sign change falls between two step ends and the root finder locates it.
    Exact for event functions that are quadratic in t; otherwise a heuristic that
    catches dips wider than a step's curvature shows.
    """

    controller: diffrax.AbstractAdaptiveStepSizeController
    offset: int = eqx.field(static=True)

    def wrap(self, direction):
        return EventWatch(self.controller.wrap(direction), self.offset)

    def _values(self, t, y, args) -> Array:
        values = event_values(t, y, args, self.offset, divided=False)
        return jax.lax.stop_gradient(values)

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, inner = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        start = self._values(t0, y0, args)
        nan = jnp.full_like(start, jnp.nan)
        t_before = jnp.full_like(jnp.asarray(t0, start.dtype), jnp.nan)
        return tnext, _WatchState(inner, t_before, nan, start)

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        state = controller_state
        keep, next_t0, next_t1, made_jump, inner, result = (
            self.controller.adapt_step_size(
                t0, t1, y0, y1_candidate, args, y_error, error_order, state.inner
            )
        )
        end = self._values(t1, y1_candidate, args)
        ta, tb, tc = jax.lax.stop_gradient((state.t_before, t0, t1))
        dip_at = _first_dip(ta, state.before, tb, state.start, tc, end)
        dip = keep & (dip_at < t1)
        keep = keep & ~dip
        next_t0 = jnp.where(dip, t0, next_t0)
        next_t1 = jnp.where(dip, dip_at, next_t1)
        made_jump = made_jump & ~dip
        # A dip rejects a step the controller accepted: keep its state as it was.
        inner = select(dip, state.inner, inner)
        accepted = _WatchState(inner, t0, state.start, end)
        rejected = _WatchState(inner, state.t_before, state.before, state.start)
        new = select(keep, accepted, rejected)
        return keep, next_t0, next_t1, made_jump, new, result


def initial_conditions(system, q, qd, t) -> tuple[Array, Array]:
    """The free event functions at the segment start (h, or ḣ ≥ 0 where h ≈ 0),
    and the depth of each row below zero there, which `event_values` adds to h:
    a row released within its tolerance below zero (an impulse elsewhere lifts
    it, slowly) lands when it falls back to that depth, not at once."""
    h, rate = jax.jvp(system.constraints.gaps, (q, t), (qd, jnp.ones_like(t)))
    # A released row's ḣ of −1e-22 (rounding) would make the least event function
    # negative from the start, and no later sign change could be seen: the
    # dm_control hopper's hip then passed its limit unseen. As 0 (counted as
    # +inf at the start), a row that does sink triggers at the next step end.
    start = jnp.where(h > contact_tolerance(q.dtype), h, jnp.maximum(rate, 0.0))
    return start, jnp.maximum(-h, 0.0)


class _TimeNewton(optx.AbstractRootFinder):
    """Newton's method for an event time, safeguarded by bisection.

    The last solver step [lower, upper] brackets the root (the event function
    changed sign over it); each iterate narrows the bracket, and a Newton step
    that leaves it is replaced by the midpoint, so the iteration cannot stall
    at a clipped end of the step. Converged when the step in t is small:
    `optx.Newton` also asks |c| < atol of the event function c, which has the
    units of a force or a length, not a time.
    """

    rtol: float
    atol: float
    norm: Callable = optx.max_norm

    def _sum_of_values(self, fn, t, args):
        f, aux = fn(t, args)
        # diffrax passes one value per event function, zero but the triggered one.
        return sum(jax.tree_util.tree_leaves(f)), aux

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        lower = jnp.asarray(options.get("lower"), y.dtype)
        upper = jnp.asarray(options.get("upper"), y.dtype)
        positive = self._sum_of_values(fn, lower, args)[0] > 0
        return lower, upper, positive, jnp.full_like(y, jnp.inf), jnp.array(False)

    def step(self, fn, y, args, options, state, tags):
        lower, upper, positive, _, _ = state
        (f, aux), (df, _) = jax.jvp(
            lambda t: self._sum_of_values(fn, t, args), (y,), (jnp.ones_like(y),)
        )
        below = (f > 0) == positive  # y is on the side of `lower`
        lower = jnp.where(below, y, lower)
        upper = jnp.where(below, upper, y)
        newton = y - f / df
        inside = jnp.isfinite(newton) & (newton > lower) & (newton < upper)
        new = jnp.where(inside, newton, 0.5 * (lower + upper))
        new = jnp.where(f == 0, y, new)
        return new, (lower, upper, positive, new - y, inside | (f == 0)), aux

    def terminate(self, fn, y, args, options, state, tags):
        lower, upper, _, step, newton = state
        # Ended by a small Newton step, whose next error is quadratically smaller,
        # or by a bracket down to rounding.
        small = newton & (jnp.abs(step) <= self.atol + self.rtol * jnp.abs(y))
        eps = jnp.finfo(y.dtype).eps
        tight = upper - lower <= 8 * eps * jnp.maximum(jnp.abs(upper), 1.0)
        return small | tight, optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return y, aux, {}


def event_root_finder(dtype) -> optx.AbstractRootFinder:
    # Newton converges quadratically, so the event time ends far more accurate
    # than this tolerance on its last step.
    tol = float(jnp.finfo(dtype).eps) ** (2 / 3)
    return _TimeNewton(rtol=tol, atol=tol)
