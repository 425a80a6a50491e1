"""The event functions of the hybrid solve and the root finder of event times.

Each unilateral constraint has one event function, positive while nothing
happens: its multiplier while in contact, its h while free; with friction, one
more per contact for the end of its sticking or slipping (`_friction`). The
solve's single event function is the least of them, so that of several events
within one solver step the earliest is located, whichever it is.
"""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import optimistix as optx

from . import _friction
from ._constraints import contact_tolerance, dynamics
from ._custom_types import Array
from ._options import VectorFieldArgs
from ._segment import split


def event_values(t, y, args: VectorFieldArgs, offset: int) -> Array:
    """The event functions, positive while nothing happens: (u,), or (2u,) with
    friction (the normal ones, then the tangential ones of `_friction`).

    Normal: λ in contact, else h. A free constraint's h is divided by the time
    since the segment start t_s: the sign is unchanged, but the root at t_s of a
    constraint that starts at h ≈ 0 (just released or bounced) is divided out.
    Otherwise a rounding error h(t_s) ≲ 0 would hide a short flight that one
    solver step jumps over.
    """
    system, active, modes, start = args.system, args.active, args.modes, args.start
    q, qd = split(y)
    dyn = dynamics(
        system, q, qd, t, active=active, baumgarte=args.baumgarte, modes=modes
    )
    h = system._unilateral(q, t)
    later = t > start
    flight = h / jnp.where(later, t - start, 1.0)
    normal = dyn.multipliers[offset:]
    values = jnp.where(active, normal, jnp.where(later, flight, args.initial))
    if system.slip is None:
        return values
    tangential = _friction.friction_values(
        system, q, qd, t, active, modes, normal, dyn.friction, start, args.initial_slip
    )
    return jnp.concatenate([values, tangential])


def event_condition(offset: int):
    """The one event function: the least of `event_values`.

    Its first root is the first root of any of them, so that of two events in
    one solver step the earlier is located, whichever constraint it concerns.
    """

    def condition(t, y, args, **kwargs):
        del kwargs
        return jnp.min(event_values(t, y, args, offset))

    return condition


def initial_slip_of(system, q, qd, t, modes) -> Array:
    if system.slip is None:
        return jnp.zeros(modes.direction.shape, q.dtype)
    return _friction.initial_slip(system, q, qd, t, modes)


def initial_conditions(system, q, qd, t) -> Array:
    """The free event functions at the segment start: h, or ḣ where h ≈ 0."""
    h, rate = jax.jvp(system._unilateral, (q, t), (qd, jnp.ones_like(t)))
    return jnp.where(h > contact_tolerance(q.dtype), h, rate)


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
