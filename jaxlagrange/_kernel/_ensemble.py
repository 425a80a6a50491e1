"""`simulate` for a whole batch in the fused kernel: which systems and options it
takes (`check_supported`), the traced vector field, and the `Trajectory`."""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._constraints import dynamics
from .._errors import first_error
from .._initial_state import start_result
from .._lanes import LaneFunction, UnsupportedPrimitiveError
from .._mass import DenseCholesky
from .._options import GivenOptions, check_times, check_tolerance, tolerances
from .._projection import project_state
from .._results import SUCCESSFUL, code_of, item_of
from .._system import LagrangianSystem
from .._trajectory import Trajectory, without_events
from ._tsit5 import Controller, KernelProblem, run


DEFAULT_BLOCK_SIZE = 128

# The unrolled factorizations of the dense mass strategy keep the traced vector
# field free of LAPACK calls; past this size the code grows too large for a kernel.
_MAX_UNROLL = 32

# A right-hand side of up to this many equations is written out in each of the
# six stages of a step; a larger one is evaluated in a loop over the stages,
# which keeps the program (and its compile time) six times smaller.
_UNROLL_STAGES = 400


class KernelUnsupported(ValueError):
    """What `backend="kernel"` does not support (`backend="vmap"` does)."""


_REFUSED = "backend='kernel' does not support {}; backend='vmap' supports it."


def _pid_defaults(controller) -> bool:
    return (
        (controller.pcoeff, controller.icoeff, controller.dcoeff) == (0, 1, 0)
        and (controller.dtmin, controller.dtmax, controller.error_order) == (None,) * 3
        and controller.norm is optx.rms_norm
    )


def check_supported(system: LagrangianSystem, options: GivenOptions) -> Controller:
    """The kernel's controller, or a `ValueError` naming what it does not support."""
    solver, meter = options.solver, options.progress_meter
    controller, dt0 = options.stepsize_controller, options.dt0
    constant = type(controller) is diffrax.ConstantStepSize
    pid = type(controller) is diffrax.PIDController
    unsupported = [
        (
            bool(system.constraints.one_sided),
            "unilateral constraints (`unilateral`, contacts, impacts)",
        ),
        (system.constraints.friction is not None, "friction (`slip`)"),
        (
            not isinstance(system.mass_strategy, DenseCholesky),
            "an iterative or lineax `mass_solver`",
        ),
        (
            solver is not None and type(solver) is not diffrax.Tsit5,
            f"`solver={type(solver).__name__}()` (it integrates with Tsit5 only)",
        ),
        (
            meter is not None and type(meter) is not diffrax.NoProgressMeter,
            f"`progress_meter={type(meter).__name__}()`",
        ),
        (
            pid and not _pid_defaults(controller),
            "a `stepsize_controller` PIDController with pcoeff, dcoeff, dtmin, "
            "dtmax, error_order or norm changed from their defaults",
        ),
        (
            controller is not None and not (constant or pid),
            f"`stepsize_controller={type(controller).__name__}(...)`",
        ),
    ]
    refused = [(c, _REFUSED.format(what)) for c, what in unsupported]
    first_error(None, refused, error=KernelUnsupported)
    if constant and dt0 is None:
        raise ValueError(
            "`dt0` is required with a constant step size "
            "(`stepsize_controller=diffrax.ConstantStepSize()`)."
        )
    if not pid:
        return Controller(adaptive=not constant)
    return Controller(
        adaptive=True,
        safety=float(controller.safety),
        factormin=float(controller.factormin),
        factormax=float(controller.factormax),
    )


def _with_params(system, tree, leaves):
    if tree is None:
        return system
    # The leaves are the params' arrays; what is no array is the system's own.
    return system.with_params(
        eqx.combine(jax.tree.unflatten(tree, leaves), system.params)
    )


def _problem(system, n, leaves, tree, dtype, num_saves, controller, options, block):
    baumgarte = options.baumgarte
    num_gains = 0 if baumgarte is None else 2
    projected = baumgarte is None and bool(system.constraints.bilateral)

    def member(fn):
        def f(t, y, leaves, gains=None):
            gains = None if gains is None else (gains[0], gains[1])
            return fn(_with_params(system, tree, leaves), t, y, gains)

        return f

    def rhs(sys, t, y, gains):
        dyn = dynamics(sys, y[:n], y[n:], t, baumgarte=gains)
        singular = dyn.singular_mass | dyn.singular_constraints
        qdd = jnp.where(singular, jnp.nan, dyn.accelerations)
        return (
            jnp.concatenate([y[n:], qdd]),
            dyn.singular_mass,
            dyn.singular_constraints,
        )

    example = (
        jnp.zeros((), dtype),
        jnp.zeros((2 * n,), dtype),
        [jnp.zeros(jnp.shape(leaf), dtype) for leaf in leaves],
    )
    if num_gains:
        example = (*example, jnp.zeros((2,), dtype))
    constraints = 0 if not system.has_constraints else 3 * n
    if n > _MAX_UNROLL:
        raise UnsupportedPrimitiveError(
            f"backend='kernel' does not support systems of more than {_MAX_UNROLL} "
            "coordinates; backend='vmap' supports them."
        )
    # The dense solve unrolled (no library calls), not written out as scalars:
    # `LaneFunction` writes the whole right-hand side out lane by lane.
    unroll = max(system.mass_strategy.unroll, n + constraints)
    system = system.with_mass_strategy(DenseCholesky(unroll, scalar=False))
    rhs_fn = LaneFunction(member(rhs), *example)
    project_fn = None
    if projected:
        project_fn = LaneFunction(
            member(lambda sys, t, y, gains: project_state(sys, y, t)), *example
        )
    return KernelProblem(
        rhs=rhs_fn,
        project=project_fn,
        n=n,
        num_params=sum(int(np.prod(jnp.shape(leaf))) for leaf in leaves),
        param_shapes=tuple(tuple(jnp.shape(leaf)) for leaf in leaves),
        num_gains=num_gains,
        num_saves=num_saves,
        controller=controller,
        max_steps=int(options.max_steps),
        has_dt0=options.dt0 is not None,
        block=block,
        unroll=len(rhs_fn.jaxpr.eqns) <= _UNROLL_STAGES,
    )


def simulate_kernel(
    system: LagrangianSystem,
    q0: jax.Array,
    qd0: jax.Array,
    params: Any,
    options: GivenOptions,
    *,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Trajectory:
    """A vmapped `simulate` over the rows of `q0`, `qd0` and `params`, by the kernel."""
    controller = check_supported(system, options)
    size, n = q0.shape
    dtype = jnp.result_type(q0.dtype, qd0.dtype, float)
    q0, qd0 = q0.astype(dtype), qd0.astype(dtype)
    t0, t1, ts = check_times(options.t0, options.t1, options.saveat, dtype)
    rtol, atol = tolerances(options, dtype)  # as `simulate` checks them
    if options.stepsize_controller is not None and controller.adaptive:
        rtol = jnp.asarray(options.stepsize_controller.rtol)
        atol = jnp.asarray(options.stepsize_controller.atol)
    leaves, tree = ([], None) if params is None else jax.tree.flatten(params)
    leaves = [jnp.asarray(leaf, dtype) for leaf in leaves]
    batched = jnp.concatenate(
        [leaf.reshape(size, -1) for leaf in leaves] or [jnp.zeros((size, 0))], axis=1
    ).astype(dtype)
    leaves = [leaf[0] for leaf in leaves]
    start = None
    if system.has_constraints:  # (a member that cannot start fails on its own)
        start = jax.vmap(
            lambda q, qd, p: code_of(
                start_result(_with_params(system, tree, p), q, qd, t0)
            )
        )(q0, qd0, [] if tree is None else jax.tree.leaves(params))
    problem = _problem(
        system, n, leaves, tree, dtype, ts.shape[0], controller, options, block_size
    )
    dt0 = options.dt0
    dt0 = jnp.zeros((), dtype) if dt0 is None else check_tolerance("dt0", dt0)
    dt0 = dt0.astype(dtype)
    span = jnp.maximum(jnp.abs(t0), jnp.abs(t1))
    resolution = 16 * jnp.finfo(dtype).eps * span
    baumgarte = options.baumgarte
    gains = [] if baumgarte is None else [jnp.asarray(g, dtype) for g in baumgarte]
    scalars = jnp.stack(
        [t0, t1, rtol.astype(dtype), atol.astype(dtype), dt0, resolution, *gains]
    )
    scalars = jnp.concatenate([scalars, ts])
    ys, t_final, codes = run(
        problem, jnp.concatenate([q0, qd0], axis=1), batched, scalars
    )
    if start is not None:
        result = jnp.where(start == SUCCESSFUL, codes[0], start.astype(codes[0].dtype))
        codes = (result, *codes[1:])
    return _trajectory(system, tree, params, ys, t_final, codes, ts, t0, options)


def _trajectory(system, tree, params, ys, t_final, codes, ts, t0, options):
    size, _, n2 = ys.shape
    n = n2 // 2
    dtype = ys.dtype
    reached = jnp.all(jnp.isfinite(ys), axis=2)
    saved_ts = jnp.where(reached, ts[None], jnp.inf)
    q, qd = ys[..., :n], ys[..., n:]
    if system.has_constraints:

        def multipliers(q, qd, t, leaves):
            sys = _with_params(system, tree, leaves)
            return dynamics(sys, q, qd, t, baumgarte=options.baumgarte).multipliers

        leaves = [] if tree is None else jax.tree.leaves(params)
        lam = jax.vmap(
            jax.vmap(multipliers, in_axes=(0, 0, 0, None)), in_axes=(0, 0, 0, 0)
        )(
            jnp.where(reached[..., None], q, 0.0),
            jnp.where(reached[..., None], qd, 0.0),
            jnp.where(reached, saved_ts, t0),
            leaves,
        )
        lam = jnp.where(reached[..., None], lam, jnp.inf)
    else:
        lam = jnp.zeros((size, ts.shape[0], 0), dtype)
    result = item_of(codes[0])
    integer = jnp.asarray(0).dtype
    stats = {
        "max_steps": jnp.full((size,), int(options.max_steps), integer),
        "num_accepted_steps": codes[2].astype(integer),
        "num_rejected_steps": codes[3].astype(integer),
        "num_steps": codes[1].astype(integer),
    }
    traj = jax.vmap(without_events)(saved_ts, q, qd, lam, result, t_final, stats)
    return traj.recording(system)
