"""The guarded step-size controller, and the diagnosis of a stopped solve.

diffrax's adaptive controllers shrink a step whose state is NaN, so a right-hand
side that goes NaN would creep towards the bad point until "maximum number of
steps reached" (a constant step carries the NaN to t1). The guard around every
controller rejects non-finite steps, stops the solve once the step cannot
shrink, and records the failed step in a `Stop`. `diagnosed` (`name_causes` for
a batch) later names the cause by probing the dynamics along that step, in a
small program compiled only after a failure (a host callback under `lax.cond`
when traced), so the solve itself holds no probes.
"""

import dataclasses
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from equinox.internal import unvmap_any

from ._constraints import dynamics
from ._custom_types import Array, BoolScalar
from ._errors import traced
from ._results import code_of, item_of
from ._trajectory import RESULTS


def all_finite(tree) -> BoolScalar:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]
    return jnp.stack(leaves).all() if leaves else jnp.array(True)


class _GuardState(NamedTuple):
    inner: Any  # the wrapped controller's state
    resolution: Array  # the smallest step that still advances t meaningfully
    failed_dt: Array  # size of the step that stopped the solve (0: none)
    failed_finite: BoolScalar  # whether that step's state was finite


class _AbstractGuard(diffrax.AbstractStepSizeController):
    """Rejects non-finite steps and stops the solve when the step cannot shrink."""

    controller: eqx.AbstractVar[diffrax.AbstractStepSizeController]

    def wrap(self, direction):
        return type(self)(self.controller.wrap(direction))

    def init(self, terms, t0, t1, y0, dt0, args, func, error_order):
        tnext, inner = self.controller.init(
            terms, t0, t1, y0, dt0, args, func, error_order
        )
        span = jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        dtype = jnp.result_type(tnext)
        resolution = 16 * jnp.finfo(dtype).eps * span.astype(dtype)
        state = _GuardState(inner, resolution, jnp.zeros((), dtype), jnp.array(True))
        return tnext, state

    def adapt_step_size(
        self, t0, t1, y0, y1_candidate, args, y_error, error_order, controller_state
    ):
        inner, resolution, failed_dt, failed_finite = controller_state
        keep, next_t0, next_t1, made_jump, inner, result = (
            self.controller.adapt_step_size(
                t0, t1, y0, y1_candidate, args, y_error, error_order, inner
            )
        )
        finite = all_finite(y1_candidate)
        keep = keep & finite
        # An adaptive controller has already shrunk the step of a non-finite state
        # (diffrax turns its NaN error into inf); a fixed one must not advance.
        dt = next_t1 - next_t0
        next_t0 = jnp.where(finite, next_t0, t0)
        next_t1 = next_t0 + dt
        # (After an accepted step a tiny one is no collapse: a `jump_ts` may ask
        # for one ulp up to a jump.)
        adaptive = isinstance(self, _AdaptiveGuard)
        stuck = (dt <= resolution) & ~keep if adaptive else ~finite
        failed_dt = jnp.where(stuck, t1 - t0, failed_dt)
        failed_finite = jnp.where(stuck, finite, failed_finite)
        result = diffrax.RESULTS.where(stuck, diffrax.RESULTS.dt_min_reached, result)
        state = _GuardState(inner, resolution, failed_dt, failed_finite)
        return keep, next_t0, next_t1, made_jump, state, result


class _FixedGuard(_AbstractGuard):
    controller: diffrax.AbstractStepSizeController


class AdaptiveWrapper(diffrax.AbstractAdaptiveStepSizeController):
    """An adaptive controller around another, with its tolerances and norm."""

    # Implicit solvers read the tolerances and norm from the controller they get.

    controller: eqx.AbstractVar[diffrax.AbstractAdaptiveStepSizeController]

    @property
    def rtol(self):
        return self.controller.rtol

    @property
    def atol(self):
        return self.controller.atol

    @property
    def norm(self):
        return self.controller.norm


class _AdaptiveGuard(_AbstractGuard, AdaptiveWrapper):
    controller: diffrax.AbstractAdaptiveStepSizeController


def guard_for(controller: diffrax.AbstractStepSizeController) -> _AbstractGuard:
    if isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
        return _AdaptiveGuard(controller)
    return _FixedGuard(controller)


# Where along the failed step (as fractions of it) the dynamics are probed.
_PROBES = (0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0, 1.25, 1.5)


class Stop(NamedTuple):
    """Where a solve stopped, for `_diagnose`; `stopped` False: it did not."""

    stopped: BoolScalar  # the guard stopped the solve (the step could not shrink)
    q: Array  # the last accepted state, and its time
    qd: Array
    t: Array
    failed_dt: Array  # the size of the failed step
    failed_finite: BoolScalar  # whether that step's state was finite
    active: Array | None = None  # the contacts (None: all constraints)
    modes: Any = None  # their friction modes (None: no friction)


def provisional(failed_finite) -> RESULTS:
    """The code of a stopped solve before `_diagnose` looks at the dynamics."""
    return RESULTS.where(
        failed_finite, RESULTS.step_size_collapsed, RESULTS.non_finite_state
    )


class Failure(eqx.Module):
    """What `_diagnose` needs besides the `Stop`: the system and the start."""

    system: Any
    q0: Array
    qd0: Array
    t0: Array
    baumgarte: Any
    stop: Stop


def _diagnose(failure: Failure) -> RESULTS:
    """Name the cause of a stopped solve from the probes along the failed step."""
    system, stop = failure.system, failure.stop
    q, qd, t, dt = stop.q, stop.qd, stop.t, stop.failed_dt
    active, modes, baumgarte = stop.active, stop.modes, failure.baumgarte
    strategy = system.mass_strategy
    factor, f = strategy.terms(system, q, qd, t)
    qdd, _ = factor.solve(f)
    start = strategy.factor(system, failure.q0, failure.qd0, failure.t0)
    nearly_singular = factor.nearly_singular(start, qdd)
    # The probes follow the step to first order (constraint forces left out).
    s = jnp.asarray(_PROBES, q.dtype) * dt
    qs = q + s[:, None] * qd
    qds = qd + s[:, None] * qdd

    def probe(q, qd, t):
        return dynamics(
            system, q, qd, t, active=active, baumgarte=baumgarte, modes=modes
        )

    probes = jax.vmap(probe)(qs, qds, t + s)
    nonfinite = ~(
        jnp.all(jnp.isfinite(probes.accelerations), axis=1)
        & jnp.all(jnp.isfinite(qs), axis=1)
        & jnp.all(jnp.isfinite(qds), axis=1)
    )
    # The first bad probe along the step; at one probe, singular mass comes first.
    bad = probes.singular_mass | probes.singular_constraints | nonfinite
    first = jnp.argmax(bad)

    result = provisional(stop.failed_finite)
    result = RESULTS.where(nearly_singular, RESULTS.singular_mass_matrix, result)
    result = RESULTS.where(nonfinite[first], RESULTS.non_finite_state, result)
    result = RESULTS.where(
        probes.singular_constraints[first], RESULTS.redundant_constraints, result
    )
    return RESULTS.where(
        probes.singular_mass[first], RESULTS.singular_mass_matrix, result
    )


# Compiled on the first failure of an eager `simulate`, not with every solve.
_diagnose_on_host = eqx.filter_jit(_diagnose)

# The stopped members of a traced solve, stacked (padded to a power of two).
_diagnose_stacked = eqx.filter_jit(eqx.filter_vmap(lambda failure: _diagnose(failure)))


def _padded(index: np.ndarray) -> np.ndarray:
    """The stopped members' `index`, padded to a power of two by repeating the first."""
    # So that the diagnosis of a batch compiles for few sizes.
    size = 1 << (index.size - 1).bit_length()
    return np.concatenate([index, np.repeat(index[:1], size - index.size)])


def _traced_cause(failure: Failure) -> RESULTS:
    """The cause inside the caller's program, by a host callback on the CPU."""
    # The cause is an integer code: keep autodiff from tracing through it.
    failure = no_gradient(failure)
    dynamic, static = eqx.partition(failure, eqx.is_array)
    leaves, treedef = jtu.tree_flatten(dynamic)
    ndims = [jnp.ndim(x) for x in leaves]  # a member's, inside `vmap`
    stopped = failure.stop.stopped
    codes = code_of(provisional(failure.stop.failed_finite))

    def on_host(stopped, codes, *leaves):
        return _host_causes(stopped, codes, leaves, ndims, treedef, static)

    def named():
        shape = jax.ShapeDtypeStruct(jnp.shape(codes), codes.dtype)
        return jax.pure_callback(
            on_host, shape, stopped, codes, *leaves, vmap_method="expand_dims"
        )

    # `unvmap_any`: under `vmap` the cond stays a cond, run only after a failure;
    # the diagnosis is compiled on demand, so the program holds no probes.
    return item_of(jax.lax.cond(unvmap_any(stopped), named, lambda: codes))


def _host_causes(stopped, codes, leaves, ndims, treedef, static) -> np.ndarray:
    """`_traced_cause`'s callback: `codes` with the stopped members' causes named."""
    # The arguments carry the batch's leading axes (size 1 where not batched).
    leading = [
        np.shape(x)[: np.ndim(x) - d] for x, d in zip(leaves, ndims, strict=True)
    ]
    batch = np.broadcast_shapes(np.shape(stopped), np.shape(codes), *leading)
    named = np.array(np.broadcast_to(codes, batch)).reshape(-1)
    index = np.flatnonzero(np.broadcast_to(stopped, batch))
    if index.size:
        rows = _padded(index)

        def take(x, d):
            member = np.shape(x)[np.ndim(x) - d :]
            return np.broadcast_to(x, batch + member).reshape((-1, *member))[rows]

        stacked = [take(x, d) for x, d in zip(leaves, ndims, strict=True)]
        failures = eqx.combine(jtu.tree_unflatten(treedef, stacked), static)
        with jax.default_device(jax.local_devices(backend="cpu")[0]):
            causes = code_of(_diagnose_stacked(failures))
        named[index] = np.asarray(causes)[: index.size]
    return named.reshape(batch)


def diagnosed(traj, failure: Failure | None):
    """`traj` with the cause of a stopped solve named (see the module docstring)."""
    if failure is None:
        return traj
    stopped = failure.stop.stopped
    if traced(stopped):
        cause = _traced_cause(failure)
    elif bool(stopped):
        cause = _diagnose_on_host(failure)
    else:
        return traj
    result = RESULTS.where(stopped, cause, traj.result)
    return eqx.tree_at(lambda tr: tr.result, traj, result)


def select(flag, a, b):
    """`jnp.where(flag, ·, ·)` leaf by leaf over two pytrees of one structure."""
    return jtu.tree_map(lambda x, y: jnp.where(flag, x, y), a, b)


def no_gradient(tree):
    """`tree` with `jax.lax.stop_gradient` on its array leaves."""
    stop = lambda x: jax.lax.stop_gradient(x) if eqx.is_array(x) else x  # noqa: E731
    return jtu.tree_map(stop, tree)


def without_system(failure: Failure | None) -> Failure | None:
    """`failure` without its system, all arrays: a batch member's for `name_causes`."""
    return None if failure is None else dataclasses.replace(failure, system=None)


@eqx.filter_jit
def _diagnose_members(system_of, shared, inputs, failures: Failure):
    # Compiled only when a member stopped: once per system and padded count.
    def cause(inputs, failure):
        return _diagnose(dataclasses.replace(failure, system=system_of(shared, inputs)))

    return code_of(jax.vmap(cause)(inputs, failures))


def name_causes(codes, failures: Failure | None, system_of, shared, inputs):
    """The integer result `codes` of a batch, the causes of stopped members named."""
    # Eager, the batch's own program holds no diagnosis: a second small program,
    # compiled on the first failure, diagnoses the stopped members. Traced, a host
    # callback in the caller's program does, as in `simulate`.
    if failures is None:
        return codes
    stopped = failures.stop.stopped
    if traced(codes, failures, shared, inputs):

        def one(inputs, failure):
            failure = dataclasses.replace(failure, system=system_of(shared, inputs))
            return code_of(_traced_cause(failure))

        return jnp.where(stopped, jax.vmap(one)(inputs, failures), codes)
    index = np.flatnonzero(np.asarray(stopped))
    if index.size == 0:
        return codes
    rows = _padded(index)
    take = lambda x: jnp.asarray(np.asarray(x)[rows]) if eqx.is_array(x) else x  # noqa: E731
    causes = _diagnose_members(
        system_of, shared, jtu.tree_map(take, inputs), jtu.tree_map(take, failures)
    )
    named = np.array(codes)
    named[index] = np.asarray(causes)[: index.size]
    return jnp.asarray(named)
