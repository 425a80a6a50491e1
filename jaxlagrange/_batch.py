"""`simulate_batch`: ensembles of `simulate`, vmapped and sharded across devices."""

from collections.abc import Callable, Sequence
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._batch_inputs import (
    as_arrays,
    batch_size,
    check_options,
    check_state,
    joined_options,
    merge,
    override,
    split_options,
)
from ._custom_types import Array, Params
from ._errors import forward_mode_hint, traced
from ._guard import name_causes, without_system
from ._kernel._backend import check_backend, choose_kernel
from ._lanes import UnsupportedPrimitiveError
from ._results import code_of, item_of
from ._simulate import simulate, simulate_checked
from ._system import LagrangianSystem
from ._trajectory import RESULTS, Trajectory, raise_if_failed


_AXIS = "batch"


# Sharding: the batch axis is split over a 1-D mesh of devices with `shard_map`, so
# each device runs its own vmapped solve (its own while loop) with no communication.


def devices_of(devices: Sequence[jax.Device] | None) -> tuple[jax.Device, ...]:
    devices = tuple(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` is empty.")
    for d in devices:
        if not isinstance(d, jax.Device):
            raise ValueError(f"`devices` must be JAX devices, got {d!r}.")
    if len(set(devices)) != len(devices):
        raise ValueError(f"`devices` lists a device twice: {list(devices)}.")
    return devices


def _pad(x: Array, pad: int) -> Array:
    # Padding repeats member 0, a valid member, so the padding cannot fail.
    return x if pad == 0 else jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)])


def _global(x: Any, sharding: NamedSharding) -> Any:
    # Across hosts, every process holds the whole (small) input; each device takes
    # its slice of it. This builds the global array without communication.
    if not eqx.is_array(x):
        return x
    x = np.asarray(x)
    return jax.make_array_from_callback(x.shape, sharding, lambda index: x[index])


def sharded_map(
    fn: Callable[[Any, Any], Any],
    batched: Any,
    shared: Any,
    size: int,
    devices: Sequence[jax.Device] | None,
    kernel: Callable[[Any, Any], Any] | None = None,
) -> Any:
    """`vmap(fn, in_axes=(0, None))(batched, shared)`, split over `devices`.

    The batch is padded to a multiple of the number of devices and the padding is
    stripped from the result. With devices in several processes (after
    `jax.distributed.initialize`) every process returns the whole result.
    `kernel(batched, shared)`, if given, computes each device's share in one call
    instead of the `vmap` (gradients still go through the vmapped `fn`).
    """
    devices = devices_of(devices)
    count = len(devices)
    pad = (-size) % count
    multiprocess = len({d.process_index for d in devices}) > 1
    mesh = Mesh(np.asarray(devices), (_AXIS,))
    if multiprocess:
        replicated = NamedSharding(mesh, PartitionSpec())
        batched = jax.tree.map(lambda x: _global(x, replicated), batched)
        shared = jax.tree.map(lambda x: _global(x, replicated), shared)
    batched_dyn, batched_static = eqx.partition(batched, eqx.is_array)
    shared_dyn, shared_static = eqx.partition(shared, eqx.is_array)
    out = _run(
        batched_dyn,
        shared_dyn,
        fn=fn,
        static=(batched_static, shared_static),
        mesh=mesh,
        pad=pad,
        gather=multiprocess,
        kernel=kernel,
    )
    if multiprocess:
        out = jax.tree.map(lambda x: jnp.asarray(x.addressable_data(0)), out)
    if pad == 0:
        return out  # still split over the devices
    # (Stripping the padding gathers the result: a batch that is a multiple of the
    # number of devices keeps it split.)
    return jax.tree.map(lambda x: x[:size], out)


@eqx.filter_jit
def _run(batched_dyn, shared_dyn, *, fn, static, mesh, pad, gather, kernel=None):
    batched_dyn = jax.tree.map(lambda x: _pad(x, pad), batched_dyn)
    dyn = (batched_dyn, shared_dyn)
    if mesh.size == 1:
        out = _local(dyn, fn, static, kernel)
    else:
        out = _shard_mapped(dyn, fn, static, mesh, kernel)
    if gather:
        replicated = NamedSharding(mesh, PartitionSpec())
        out = jax.lax.with_sharding_constraint(out, replicated)
    return out


def _local(dyn, fn, static, kernel=None):
    """The vmapped `fn` on one device's share of the batch (or `kernel`'s)."""
    if kernel is not None:
        if _forward_mode(fn):
            return _kernel_forward(dyn, fn=fn, static=static, kernel=kernel)
        return _kernel_local(dyn, fn, static, kernel)
    (batched_dyn, shared_dyn), (batched_static, shared_static) = dyn, static
    batched = eqx.combine(batched_dyn, batched_static)
    shared = eqx.combine(shared_dyn, shared_static)
    return jax.vmap(fn, in_axes=(0, None))(batched, shared)


# The kernel computes the forward pass; its derivatives are the vmapped `fn`'s:
# the reverse pass recomputes each member's solve on the vmap path.
@eqx.filter_custom_vjp
def _kernel_local(dyn, fn, static, kernel):
    (batched_dyn, shared_dyn), (batched_static, shared_static) = dyn, static
    batched = eqx.combine(batched_dyn, batched_static)
    shared = eqx.combine(shared_dyn, shared_static)
    return kernel(batched, shared)


@_kernel_local.def_fwd
def _kernel_local_fwd(perturbed, dyn, fn, static, kernel):
    del perturbed
    return _kernel_local.fn(dyn, fn, static, kernel), None


@_kernel_local.def_bwd
def _kernel_local_bwd(residuals, cotangents, perturbed, dyn, fn, static, kernel):
    del residuals, perturbed
    out = jax.eval_shape(lambda: _kernel_local.fn(dyn, fn, static, kernel))
    return _member_vjp(out, cotangents, dyn, fn, static, lambda tree: tree)


def _forward_mode(fn) -> bool:
    """Whether the batch's `simulate` options ask for `diffrax.ForwardMode`."""
    options = dict(getattr(fn, "static_options", ()))
    return isinstance(options.get("adjoint"), diffrax.ForwardMode)


# With `adjoint=diffrax.ForwardMode()` (as on the vmap path, which is then
# differentiable in forward mode only): the kernel's forward pass, and the
# tangents of the vmapped `fn`.
@eqx.filter_custom_jvp
def _kernel_forward(dyn, *, fn, static, kernel):
    return _kernel_local.fn(dyn, fn, static, kernel)


@_kernel_forward.def_jvp
def _kernel_forward_jvp(primals, tangents, *, fn, static, kernel):
    (dyn,), (tangent,) = primals, tangents
    out = _kernel_local.fn(dyn, fn, static, kernel)
    _, out_tangent = eqx.filter_jvp(
        lambda dyn: _local(dyn, fn, static), (dyn,), (tangent,)
    )
    return out, out_tangent


def _local_vjp(dyn, cotangents, fn, static):
    """Per-member gradients on one device's share: batched ones, and the shared
    inputs' per-member contributions (summed over the batch by the caller)."""
    (batched_dyn, shared_dyn), (batched_static, shared_static) = dyn, static

    def member(batched_dyn, cotangent):
        def f(dyn):
            batched_dyn, shared_dyn = dyn
            batched = eqx.combine(batched_dyn, batched_static)
            shared = eqx.combine(shared_dyn, shared_static)
            return fn(batched, shared)

        _, vjp = eqx.filter_vjp(f, (batched_dyn, shared_dyn))
        (grad,) = vjp(cotangent)
        return grad

    return jax.vmap(member)(batched_dyn, cotangents)


def _specs(tree, spec):
    return jax.tree.map(lambda _: spec, tree)


# JAX cannot differentiate diffrax's checkpointed while loop inside `shard_map`
# (equinox's closure conversion sees the per-device shapes), so the reverse pass
# recomputes each member's solve and pulls its cotangent back as a `vmap` of
# `filter_vjp`, split over the same devices by sharding constraints (GSPMD).
@eqx.filter_custom_vjp
def _shard_mapped(dyn, fn, static, mesh, kernel=None):
    batch, shared = PartitionSpec(_AXIS), PartitionSpec()
    in_specs = (_specs(dyn[0], batch), _specs(dyn[1], shared))
    return jax.shard_map(
        lambda dyn: _local(dyn, fn, static, kernel),
        mesh=mesh,
        in_specs=(in_specs,),
        out_specs=batch,
        check_vma=False,
    )(dyn)


@_shard_mapped.def_fwd
def _shard_mapped_fwd(perturbed, dyn, fn, static, mesh, kernel=None):
    del perturbed
    return _shard_mapped.fn(dyn, fn, static, mesh, kernel), None


@_shard_mapped.def_bwd
def _shard_mapped_bwd(residuals, cotangents, perturbed, dyn, fn, static, mesh, kernel):
    del residuals, perturbed
    out = jax.eval_shape(lambda: _shard_mapped.fn(dyn, fn, static, mesh, kernel))
    batch = NamedSharding(mesh, PartitionSpec(_AXIS))
    constrain = lambda tree: jax.tree.map(  # noqa: E731
        lambda x: jax.lax.with_sharding_constraint(x, batch), tree
    )
    return _member_vjp(out, cotangents, dyn, fn, static, constrain)


def _member_vjp(out, cotangents, dyn, fn, static, constrain):
    """The gradients of the batched solve, member by member on the vmap path."""
    # Symbolic zeros (None) of inexact outputs become zeros; others stay None
    # (also those of outputs that are None, such as a member's unused `Stop` fields).
    cotangents = jax.tree.map(
        lambda o, c: (
            jnp.zeros(o.shape, o.dtype)
            if c is None and o is not None and jnp.issubdtype(o.dtype, jnp.inexact)
            else c
        ),
        out,
        cotangents,
        is_leaf=lambda x: x is None,
    )
    batched_dyn, shared_dyn = dyn
    grad_batched, grad_shared = constrain(
        _local_vjp(
            (constrain(batched_dyn), shared_dyn), constrain(cotangents), fn, static
        )
    )
    grad_shared = jax.tree.map(lambda g: jnp.sum(g, axis=0), grad_shared)
    return grad_batched, grad_shared


def simulate_batch(
    system: LagrangianSystem,
    q0: Array,
    qd0: Array,
    *,
    params: Params = None,
    devices: Sequence[jax.Device] | None = None,
    throw: bool = True,
    backend: str = "auto",
    block_size: int | None = None,
    **simulate_options: Any,
) -> Trajectory:
    """`simulate` a batch of initial states and/or params in one call.

    Built on `jax.vmap` of `simulate` (`backend="vmap"`) or on a fused ensemble
    kernel (`backend="kernel"`), with the batch split across devices by
    `jax.shard_map` over a one-axis `jax.sharding.Mesh`: each device integrates its
    share independently. The batch is padded to a multiple of the number of devices
    and the padding removed from the result, which equals the unsharded run's.
    jit-, grad- and vmap-compatible, like `simulate`.

    With several processes (`jax.distributed.initialize` called first in each),
    `jax.devices()` lists the devices of all of them; every process must call
    `simulate_batch` with the same inputs, each computes its devices' share, and
    every process gets the whole result back.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q0`, `qd0`: initial states, shape (batch, n), or (n,) for one state shared
        by all members.
    - `params`: batched params: the system's params pytree (or, for dict params, a
        dict with some of its keys) with a leading batch axis on every leaf; these
        replace the system's params per member. None: all members use
        `system.params`.
    - `devices`: the devices to split the batch over (default `jax.devices()`: all
        of them, in all processes).
    - `throw`: raise if any member fails. With `throw=False` every member carries
        its own `result`; `jl.failed(traj)` says which members failed.
    - `backend`: `"vmap"`, a `jax.vmap` of `simulate`; `"kernel"`, one Pallas
        kernel that integrates every member in its own lane (Tsit5 with its own
        step size and stopping; the equations of motion traced from the system
        and evaluated lane by lane; on the CPU it runs in Pallas's interpret mode,
        slow but exact); `"auto"` (default): the kernel on a GPU when the system
        and options allow it, else vmap. The kernel supports holonomic and
        nonholonomic constraints (with the same projection or Baumgarte gains),
        forces, dissipation, time dependence and params, with the default solver
        (Tsit5) and step-size control, or `diffrax.ConstantStepSize()` with
        `dt0`; save times are hit by clipping steps to them. Anything else is a
        `ValueError` with `backend="kernel"`. Derivatives through the kernel are
        computed on the vmap path: reverse mode, and with
        `adjoint=diffrax.ForwardMode()` on one device, forward mode.
    - `block_size`: members per kernel program, a power of two (default 128);
        the vmap path does not use it.
    - `**simulate_options`: the keyword options of `simulate` (`t1`, `saveat`,
        `solver`, `rtol`, ...), the same for every member. An unknown option is an
        error.

    **Returns:** a `Trajectory` whose every array has a leading batch axis:
    `traj.q` has shape (batch, T, n), `traj.result` shape (batch,). Its arrays stay
    split over the devices when the batch is a multiple of their number (else the
    padding is stripped and the result gathered).

    **Raises:** `ValueError` for inconsistent batch sizes or shapes, unknown
    options or params keys; with `throw=True`, an error naming the cause if a member
    fails.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    def lagrangian(q, qd, t, params):
        return 0.5 * qd[0] ** 2 + params["g"] * jnp.cos(q[0])

    pendulum = jl.LagrangianSystem(lagrangian, params={"g": 9.81})
    q0 = jnp.linspace(0.1, 3.0, 64)[:, None]  # 64 amplitudes
    traj = jl.simulate_batch(pendulum, q0, jnp.zeros(1), t1=5.0)
    traj.q.shape  # (64, 1, 1)
    ```
    """
    check_options(simulate_options, "simulate_batch")
    block_size = check_backend(backend, block_size)
    q0 = check_state(jnp.asarray(q0), "q0")
    qd0 = check_state(jnp.asarray(qd0), "qd0")
    if params is not None and not system.has_params:
        raise ValueError("`params` was given but the system has no params.")
    if params is not None:
        params = as_arrays(system.params, params)
    size = batch_size(q0, qd0, params)
    if params is not None:
        params = override(system.params, params, size)
    if q0.shape[-1] != qd0.shape[-1]:
        raise ValueError(
            f"q0 and qd0 must have the same number of coordinates, got q0 {q0.shape} "
            f"and qd0 {qd0.shape}."
        )
    batched = {
        "q0": q0 if q0.ndim == 2 else None,
        "qd0": qd0 if qd0.ndim == 2 else None,
    }
    batched["params"] = params
    shared = (system, q0 if q0.ndim == 1 else None, qd0 if qd0.ndim == 1 else None)
    dyn_options, static_options = split_options(simulate_options)
    shared = (shared, dyn_options)
    # Without the kernel, each member's solve returns its provisional code and
    # where it stopped; the causes are named afterwards (`_named`).
    deferred = _Member(static_options, defer=True)
    kernel = choose_kernel(
        backend, system, simulate_options, devices_of(devices), block_size
    )
    if kernel is None:
        out = sharded_map(deferred, batched, shared, size, devices)
        traj = _named(out, batched, system)
    else:
        # The kernel names its causes itself; `fn` gives its gradients.
        fn = _Member(static_options)
        if backend == "kernel":
            with forward_mode_hint("simulate_batch(backend='kernel')"):
                traj = sharded_map(
                    fn, batched, shared, size, devices, kernel(static_options)
                )
            traj = _collapsed_again(traj, batched, shared, deferred, system, devices)
        else:
            try:
                with forward_mode_hint("simulate_batch(backend='kernel')"):
                    traj = sharded_map(
                        fn, batched, shared, size, devices, kernel(static_options)
                    )
                traj = _collapsed_again(
                    traj, batched, shared, deferred, system, devices
                )
            except UnsupportedPrimitiveError:
                out = sharded_map(deferred, batched, shared, size, devices)
                traj = _named(out, batched, system)
    return raise_if_failed(traj) if throw else traj


# The code of a kernel member solved again on the vmap path (`_collapsed_again`).
COLLAPSED = int(code_of(RESULTS.step_size_collapsed))


def _collapsed_again(traj, batched, shared, deferred, system, devices) -> Trajectory:
    """The kernel's members whose step collapsed, solved again on the vmap path.

    The kernel names a singular mass matrix or redundant constraints where one
    of its stages met them; a solution that runs into a singular M (M → 0 as
    q → q*) collapses its step just short of it, where no stage sees M singular
    yet. The vmap path's diagnosis names such a cause from the dynamics along the
    failed step: those members (few, after a failure only) are solved again
    there, and their rows and codes are the vmap path's, as `backend` promises.
    Eagerly only: under the caller's `jit` the kernel's codes stand.
    """
    codes = code_of(traj.result)
    if traced(codes):
        return traj
    index = np.flatnonzero(np.asarray(codes) == COLLAPSED)
    if index.size == 0:
        return traj
    rows = jax.tree.map(lambda x: jnp.asarray(x)[index], batched)
    out = sharded_map(deferred, rows, shared, index.size, devices)
    again = _named(out, rows, system)
    return jax.tree.map(lambda a, b: jnp.asarray(a).at[index].set(b), traj, again)


def _member_system(system: LagrangianSystem, params) -> LagrangianSystem:
    """The system of a member with batched `params` (None: the system's own)."""
    if params is None:
        return system
    params = merge(system.params, params)
    return eqx.tree_at(lambda s: s.params, system, params)


def _named(out, batched, system) -> Trajectory:
    """The batch's trajectory, with the causes of its stopped members named."""
    traj, failures = out
    codes = name_causes(
        code_of(traj.result), failures, _member_system, system, batched["params"]
    )
    return eqx.tree_at(lambda tr: tr.result, traj, item_of(codes))


class _Member(eqx.Module):
    """One member of a batch: `simulate` with its initial state and params.

    `defer`: return the trajectory with a stopped solve's provisional code, and
    where it stopped (`_guard.without_system`), for `_guard.name_causes`.
    """

    static_options: Any = eqx.field(static=True)
    defer: bool = eqx.field(static=True, default=False)

    def __call__(self, batched, shared):
        (system, q0, qd0), dyn_options = shared
        options = joined_options(dyn_options, self.static_options)
        q0 = batched["q0"] if batched["q0"] is not None else q0
        qd0 = batched["qd0"] if batched["qd0"] is not None else qd0
        system = _member_system(system, batched["params"])
        if not self.defer:
            return simulate(system, q0, qd0, throw=False, **options)
        traj, failure, _ = simulate_checked(system, q0, qd0, throw=False, **options)
        return traj, without_system(failure)
