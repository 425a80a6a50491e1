"""How a batch of members is solved: a vmap of `simulate`, or the fused kernel
(`backend_for` turns the name a user gives into one `AbstractBackend`)."""

import abc
from collections.abc import Sequence
from typing import Any, ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Params
from .._errors import forward_mode_hint, traced
from .._guard import name_causes
from .._kernel._ensemble import (
    DEFAULT_BLOCK_SIZE,
    KernelUnsupported,
    check_supported,
    simulate_kernel,
)
from .._lanes import UnsupportedPrimitiveError
from .._results import code_of
from .._trajectory import RESULTS
from ._inputs import merge
from ._member import AbstractMember, Rows
from ._sharding import devices_of, sharded_map


BACKENDS = ("auto", "vmap", "kernel")

COLLAPSED = int(code_of(RESULTS.step_size_collapsed))


def apply(row, fn):
    return fn(row)


class AbstractBackend(eqx.Module):
    """Solves every member of a batch (`run`); `name` is what a store records."""

    name: ClassVar[str]

    @abc.abstractmethod
    def run(self, member: AbstractMember, rows: Rows, size: int, devices) -> Any:
        """The outputs of `member` for each of the `size` rows, split over `devices`."""


class VmapBackend(AbstractBackend):
    """A vmap of `simulate`, sharded over the devices (`_sharding`)."""

    name: ClassVar[str] = "vmap"

    def run(self, member, rows, size, devices):
        member = member.checked_first(rows)
        out, failures = sharded_map(apply, rows, member.deferring(), size, devices)
        system_of = type(member).system_for  # the stopped members' causes named
        codes = name_causes(member.codes(out), failures, system_of, member, rows)
        return member.with_codes(out, codes)


class KernelBackend(AbstractBackend):
    """The fused ensemble kernel (`_kernel/`), one lane a member; vmap's derivatives."""

    name: ClassVar[str] = "kernel"
    block_size: int = DEFAULT_BLOCK_SIZE

    def run(self, member, rows, size, devices):
        share = _KernelShare(self.block_size, _forward(member))
        with forward_mode_hint("simulate_batch(backend='kernel')"):
            out = sharded_map(apply, rows, member, size, devices, share)
        return _collapsed_again(member, out, rows, devices)


def _forward(member: AbstractMember) -> bool:
    return isinstance(member.options.adjoint, diffrax.ForwardMode)


def _collapsed_again(member, out, rows, devices):
    """Solve the kernel's members whose step collapsed again, on the vmap path."""
    # A solve that runs into a singular M collapses its step just short of it, where
    # no kernel stage sees M singular: the vmap path's diagnosis names the cause.
    # Eagerly only: under the caller's `jit` the kernel's codes stand.
    codes = member.codes(out)
    if traced(codes):
        return out
    index = np.flatnonzero(np.asarray(codes) == COLLAPSED)
    if index.size == 0:
        return out
    again_rows = jax.tree.map(lambda x: jnp.asarray(x)[index], rows)
    again = VmapBackend().run(member, again_rows, index.size, devices)
    return jax.tree.map(lambda a, b: jnp.asarray(a).at[index].set(b), out, again)


class _KernelShare(eqx.Module):
    """A device's share of the batch in the fused kernel."""

    block_size: int = eqx.field(static=True)
    forward: bool = eqx.field(static=True)  # differentiated in forward mode

    def __call__(self, rows: Rows, member: AbstractMember):
        system = member.system
        params = None
        if system.has_params:
            params = broadcast_params(system.params, rows.params, rows.q0.shape[0])
        traj = simulate_kernel(
            system,
            rows.q0,
            rows.qd0,
            params,
            member.options,
            block_size=self.block_size,
        )

        def outputs(traj, row):
            return member.outputs(traj, member.system_for(row), row)

        return jax.vmap(outputs)(traj, rows)


def broadcast_params(base: Params, new: Params, size: int) -> Params:
    """Every member's params, (batch, *shape) leaves: `base` broadcast, `new` put in."""

    def broadcast(x):
        # An MLP's activation: the kernel takes it from the system's params.
        if not eqx.is_array_like(x):
            return None
        return jnp.broadcast_to(jnp.asarray(x), (size, *jnp.shape(x)))

    broadcast = jax.tree.map(broadcast, base)
    return broadcast if new is None else merge(broadcast, new)


def _kernel_is_faster(devices: Sequence[jax.Device]) -> bool:
    # On a CPU the kernel runs in Pallas's interpret mode: exact but slow.
    return {d.platform for d in devices} <= {"gpu", "cuda", "rocm"}


def backend_for(
    backend: str,
    block_size: int | None,
    member: AbstractMember,
    rows: Rows,
    devices,
    *,
    follow: str | None = None,
) -> AbstractBackend:
    """The backend that the name `backend` gives for `member` on `devices`."""
    if not isinstance(backend, str) or backend not in BACKENDS:
        raise ValueError(
            f"`backend` must be one of {', '.join(map(repr, BACKENDS))}, got "
            f"{backend!r}."
        )
    if block_size is None:
        block_size = DEFAULT_BLOCK_SIZE
    elif (
        isinstance(block_size, bool)
        or not isinstance(block_size, (int, np.integer))
        or block_size < 1
        or block_size & (block_size - 1)
    ):
        raise ValueError(
            f"`block_size` must be a positive power of two, got {block_size!r}."
        )
    if backend == "vmap":
        return VmapBackend()
    kernel = KernelBackend(int(block_size))
    if backend == "kernel":
        refusal = member.kernel_refusal()
        if refusal is not None:
            raise KernelUnsupported(refusal)
        check_supported(member.system, member.options)
        return kernel
    faster = follow != "vmap" and _kernel_is_faster(devices_of(devices))
    if not faster or member.kernel_refusal() is not None:
        return VmapBackend()
    try:
        check_supported(member.system, member.options)
        share = _KernelShare(block_size, _forward(member))
        # Its lanes must evaluate the system (`rows` may be shapes).
        eqx.filter_eval_shape(share, rows, member)
    except (KernelUnsupported, UnsupportedPrimitiveError):
        return VmapBackend()
    return kernel
