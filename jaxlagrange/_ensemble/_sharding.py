"""Sharding: the batch axis is split over a 1-D mesh of devices with `shard_map`,
so each device runs its own vmapped solve (its own while loop) with no
communication; the fused kernel's forward pass takes the vmap's derivatives."""

from collections.abc import Callable, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .._custom_types import Array


_AXIS = "batch"


def devices_of(devices: Sequence[jax.Device] | None) -> tuple[jax.Device, ...]:
    devices = tuple(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("`devices` is empty.")
    devices_only = all(isinstance(d, jax.Device) for d in devices)
    if not devices_only or len(set(devices)) < len(devices):
        raise ValueError(
            f"`devices` must be distinct JAX devices, got {list(devices)}."
        )
    return devices


def pad_rows(x: Array, pad: int) -> Array:
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
    """`vmap(fn, in_axes=(0, None))(batched, shared)`, split over `devices`."""
    devices = devices_of(devices)
    pad = (-size) % len(devices)
    multiprocess = len({d.process_index for d in devices}) > 1
    mesh = Mesh(np.asarray(devices), (_AXIS,))
    if multiprocess:
        replicated = NamedSharding(mesh, PartitionSpec())
        batched, shared = jax.tree.map(
            lambda x: _global(x, replicated), (batched, shared)
        )
    dyn, static = eqx.partition((batched, shared), eqx.is_array)
    # `kernel`, if given, computes each device's share in one call; gradients still
    # go through the vmapped `fn` (in forward mode through `kernel.forward`).
    out = _run(
        dyn,
        fn=fn,
        static=static,
        mesh=mesh,
        pad=pad,
        gather=multiprocess,
        kernel=kernel,
    )
    if multiprocess:
        out = jax.tree.map(lambda x: jnp.asarray(x.addressable_data(0)), out)
    if pad == 0:
        return out  # still split over the devices (stripping gathers it)
    return jax.tree.map(lambda x: x[:size], out)


@eqx.filter_jit
def _run(dyn, *, fn, static, mesh, pad, gather, kernel=None):
    dyn = (jax.tree.map(lambda x: pad_rows(x, pad), dyn[0]), dyn[1])
    if mesh.size == 1 and (kernel is None or kernel.forward):
        out = _local(dyn, fn, static, kernel, _chunk(mesh))
    else:
        out = _mapped(dyn, fn, static, mesh, kernel)
    if gather:
        replicated = NamedSharding(mesh, PartitionSpec())
        out = jax.lax.with_sharding_constraint(out, replicated)
    return out


# On a CPU a vmapped solve's loop runs over (batch, ...) buffers that outgrow
# the cache past ~1000 members: per member 1.2-1.35x slower at 4096 than at 1024
# (benchmarks/bench_batch.py), for 3% more steps. One loop per chunk of at most
# `CPU_CHUNK` members, one after another, keeps the small batch's pace.
CPU_CHUNK = 512


def _chunk(mesh: Mesh) -> int | None:
    return CPU_CHUNK if {d.platform for d in mesh.devices.flat} == {"cpu"} else None


def _local(dyn, fn, static, kernel=None, chunk=None):
    """The vmapped `fn` on one device's share, in chunks of at most `chunk` members."""
    if kernel is None:
        batched, shared = dyn
        size = jax.tree.leaves(batched)[0].shape[0]
        if chunk is None or size <= chunk:
            return jax.vmap(fn, in_axes=(0, None))(*_joined(dyn, static))
        count = -(-size // chunk)
        chunk = -(-size // count)  # so fewer than `count` rows of padding

        def split(x):
            return pad_rows(x, count * chunk - size).reshape(count, chunk, *x.shape[1:])

        def solve(b):  # a vmap per chunk, one after another
            return jax.vmap(fn, in_axes=(0, None))(*_joined((b, shared), static))

        out = jax.lax.map(solve, jax.tree.map(split, batched))
        joined = lambda x: x.reshape(count * chunk, *x.shape[2:])[:size]  # noqa: E731
        return jax.tree.map(joined, out)
    if kernel.forward:
        return _kernel_forward(dyn, fn=fn, static=static, kernel=kernel)
    return kernel(*_joined(dyn, static))


def _joined(dyn, static):
    """(batched, shared) from their arrays and their static parts."""
    return tuple(eqx.combine(d, s) for d, s in zip(dyn, static, strict=True))


# With `adjoint=diffrax.ForwardMode()` (as on the vmap path, which is then
# differentiable in forward mode only): the kernel's forward pass, and the
# tangents of the vmapped `fn`.
@eqx.filter_custom_jvp
def _kernel_forward(dyn, *, fn, static, kernel):
    return kernel(*_joined(dyn, static))


@_kernel_forward.def_jvp
def _kernel_forward_jvp(primals, tangents, *, fn, static, kernel):
    (dyn,), (tangent,) = primals, tangents
    out = kernel(*_joined(dyn, static))
    _, out_tangent = eqx.filter_jvp(
        lambda dyn: _local(dyn, fn, static), (dyn,), (tangent,)
    )
    return out, out_tangent


# JAX cannot differentiate diffrax's checkpointed while loop inside `shard_map`
# (equinox's closure conversion sees the per-device shapes), nor the kernel, so
# the reverse pass recomputes each member's solve on the vmap path and pulls its
# cotangent back as a `vmap` of `filter_vjp`, split over the same devices by
# sharding constraints (GSPMD).
@eqx.filter_custom_vjp
def _mapped(dyn, fn, static, mesh, kernel=None):
    if mesh.size == 1:
        return _local(dyn, fn, static, kernel, _chunk(mesh))
    batch = PartitionSpec(_AXIS)
    in_specs = (
        jax.tree.map(lambda _: batch, dyn[0]),
        jax.tree.map(lambda _: PartitionSpec(), dyn[1]),
    )
    return jax.shard_map(
        lambda dyn: _local(dyn, fn, static, kernel, _chunk(mesh)),
        mesh=mesh,
        in_specs=(in_specs,),
        out_specs=batch,
        check_vma=False,
    )(dyn)


@_mapped.def_fwd
def _mapped_fwd(perturbed, dyn, fn, static, mesh, kernel=None):
    del perturbed
    return _mapped.fn(dyn, fn, static, mesh, kernel), None


@_mapped.def_bwd
def _mapped_bwd(residuals, cotangents, perturbed, dyn, fn, static, mesh, kernel):
    """The gradients of the batched solve, member by member on the vmap path."""
    del residuals, perturbed
    out = jax.eval_shape(lambda: _mapped.fn(dyn, fn, static, mesh, kernel))
    batch = NamedSharding(mesh, PartitionSpec(_AXIS))

    def constrain(tree):
        if mesh.size == 1:
            return tree
        return jax.tree.map(lambda x: jax.lax.with_sharding_constraint(x, batch), tree)

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

    def member(batched_dyn, cotangent):
        def f(dyn):
            return fn(*_joined(dyn, static))

        _, vjp = eqx.filter_vjp(f, (batched_dyn, shared_dyn))
        (grad,) = vjp(cotangent)
        return grad

    # Per member, so the shared inputs' gradients are summed over the batch.
    grads = jax.vmap(member)(constrain(batched_dyn), constrain(cotangents))
    grad_batched, grad_shared = constrain(grads)
    grad_shared = jax.tree.map(lambda g: jnp.sum(g, axis=0), grad_shared)
    return grad_batched, grad_shared
