"""Which backend `simulate_batch` uses, and the kernel's call on a batch."""

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Params
from .._kernel._ensemble import DEFAULT_BLOCK_SIZE, check_supported, simulate_kernel


BACKENDS = ("auto", "vmap", "kernel")


def check_backend(backend: str, block_size: int | None) -> int:
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(
            f"`backend` must be one of {', '.join(map(repr, BACKENDS))}, got "
            f"{backend!r}."
        )
    if block_size is None:
        return DEFAULT_BLOCK_SIZE
    valid = isinstance(block_size, (int, np.integer)) and not isinstance(
        block_size, bool
    )
    if not valid or block_size < 1 or block_size & (block_size - 1):
        raise ValueError(
            f"`block_size` must be a positive power of two, got {block_size!r}."
        )
    return int(block_size)


def choose_kernel(backend, system, options, devices, block_size):
    """The kernel's batch function (a factory of it), or None for the vmap path."""
    if backend == "vmap":
        return None
    platforms = {d.platform for d in devices}
    on_gpu = platforms <= {"gpu", "cuda", "rocm"}
    if backend == "auto":
        if not on_gpu:
            return None
        try:
            check_supported(system, options)
        except ValueError:
            return None
    else:
        check_supported(system, options)
    return lambda static_options: KernelBatch(static_options, block_size, not on_gpu)


class KernelBatch(eqx.Module):
    """A device's share of the batch in the fused kernel."""

    static_options: Any = eqx.field(static=True)
    block_size: int = eqx.field(static=True)
    interpret: bool = eqx.field(static=True)

    def __call__(self, batched, shared):
        (system, q0, qd0), dyn_options = shared
        options = dict(eqx.combine(dyn_options, self.static_options))
        (size,) = {x.shape[0] for x in jax.tree.leaves(batched)}
        q0 = batched["q0"] if batched["q0"] is not None else q0
        qd0 = batched["qd0"] if batched["qd0"] is not None else qd0
        q0 = jnp.broadcast_to(q0, (size, q0.shape[-1]))
        qd0 = jnp.broadcast_to(qd0, (size, qd0.shape[-1]))
        params = None
        if system.has_params:
            params = broadcast_params(system.params, batched["params"], size)
        return simulate_kernel(
            system,
            q0,
            qd0,
            params,
            options,
            block_size=self.block_size,
            interpret=self.interpret,
        )


def broadcast_params(base: Params, new: Params, size: int) -> Params:
    """Every member's params, (batch, *shape) leaves: `base` with `new` put in.

    A leaf that is no array (an MLP's activation function) is None here: the
    kernel takes it from the system's params (`_ensemble._with_params`)."""
    if isinstance(new, Mapping) and isinstance(base, Mapping):
        return {k: broadcast_params(v, new.get(k), size) for k, v in base.items()}
    if new is not None:
        return new

    def broadcast(x):
        if not eqx.is_array_like(x):
            return None
        return jnp.broadcast_to(jnp.asarray(x), (size, *jnp.shape(x)))

    return jax.tree.map(broadcast, base)
