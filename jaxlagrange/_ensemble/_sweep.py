"""`sweep`: batches larger than memory, streamed to a Zarr store (`simulate_sweep`
in `_sweep_simulate.py`)."""

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._batch import COLLAPSED, sharded_map
from .._custom_types import Array
from .._lanes import UnsupportedPrimitiveError
from .._progress import progress_bar
from ._store import ChunkedStore, open_store, stored_attributes
from ._store_verify import MANIFEST


def _barrier(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def _pad_rows(x: np.ndarray, rows: int) -> np.ndarray:
    # The last chunk is padded to the chunk size (repeating its first member), so
    # that every chunk has one shape and compiles once.
    if x.shape[0] == rows:
        return x
    return np.concatenate([x, np.repeat(x[:1], rows - x.shape[0], axis=0)])


def _apply(member, fn):
    return fn(member)


def sweep(
    fn: Callable[[dict[str, Array]], dict[str, Array]],
    inputs: Mapping[str, Any],
    store: str | os.PathLike,
    *,
    chunk_size: int = 1024,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
    attrs: Mapping[str, Any] | None = None,
):
    """Map `fn` over a batch of inputs chunk by chunk, streaming the outputs to disk.

    Each chunk of `chunk_size` members is computed as one `jax.vmap` of `fn`, split
    across `devices` (as in `simulate_batch`), and written to a Zarr v3 directory
    store: `inputs/<name>` and `outputs/<name>`, each an array with the batch axis
    first, chunked along it. The manifest (in the root's `zarr.json`) lists the
    completed chunks with the SHA-256 of each chunk's inputs and outputs and is
    replaced atomically after each chunk; each chunk file is written under a
    temporary name and renamed (every chunk, also one whose members all failed).
    Calling `sweep` again on the same store (after an interruption) computes only
    the chunks that are missing, or that fail their checksum.

    With several processes (`jax.distributed.initialize`), every process calls
    `sweep` with the same arguments; they compute each chunk together and process
    0 writes the store, which must be on a file system all of them see.

    **Arguments:**

    - `fn`: `fn(member_inputs) -> dict[str, array]`, a JAX function of one member's
        inputs (a dict like `inputs`, without the batch axis).
    - `inputs`: dict of arrays with a common leading batch axis; anything that
        slices like a NumPy array (a `np.memmap`, a Zarr array) works, so the
        inputs need not fit in memory either.
    - `store`: the store directory; created if absent, resumed if it holds this
        sweep.
    - `chunk_size`: members per chunk (per call to the devices).
    - `devices`: as in `simulate_batch` (default: all devices).
    - `progress`: show a progress bar on stderr.
    - `attrs`: JSON-able description of the sweep, stored on the root group and
        part of the identity checked on resume.

    **Returns:** the store, opened read-only as a `zarr.Group`
    (`group["outputs/q"][...]`).

    **Raises:** `ValueError` for inconsistent inputs, a bad chunk size, a store
    being written by another sweep, or a store that holds a different sweep
    (naming what differs).

    **Example:**

    ```python
    def fn(x):
        return {"y": jnp.sin(x["x"]) ** 2}

    group = jl.sweep(fn, {"x": np.linspace(0, 1, 10_000)}, "out.zarr", chunk_size=1000)
    group["outputs/y"].shape  # (10000,)
    ```
    """
    if (
        not isinstance(chunk_size, int)
        or isinstance(chunk_size, bool)
        or chunk_size < 1
    ):
        raise ValueError(
            f"`chunk_size` must be a positive integer, got {chunk_size!r}."
        )
    if not inputs:
        raise ValueError("`inputs` is empty.")
    sizes = {name: x.shape[0] if np.ndim(x) else None for name, x in inputs.items()}
    if None in sizes.values() or len(set(sizes.values())) != 1:
        listed = ", ".join(f"{k} {v}" for k, v in sizes.items())
        raise ValueError(f"`inputs` must share one leading batch axis, got: {listed}.")
    (size,) = set(sizes.values())
    if size == 0:
        raise ValueError("The batch is empty (batch size 0).")
    chunk_size = min(chunk_size, size)
    member = {
        name: jax.ShapeDtypeStruct(x.shape[1:], dtype_of(x))
        for name, x in inputs.items()
    }
    # A member that can defer naming the causes of failed solves returns, beside
    # its outputs, where each stopped; they are named after the chunk, by
    # `fn.named` (see `_guard.name_causes`), so its program holds no diagnosis.
    deferring = fn.deferring() if hasattr(fn, "deferring") else None
    if deferring is None:
        shapes = jax.eval_shape(fn, member)
    else:
        shapes = jax.eval_shape(deferring, member)[0]
    if not isinstance(shapes, Mapping) or not all(isinstance(k, str) for k in shapes):
        raise ValueError(
            f"`fn` must return a dict of arrays keyed by name, got {type(shapes)}."
        )
    outputs = {k: (tuple(v.shape), v.dtype) for k, v in shapes.items()}
    attrs = dict(attrs or {})
    attrs["outputs"] = {k: [list(s), np.dtype(d).str] for k, (s, d) in outputs.items()}
    # The fused ensemble kernel where the backend picks it; an option it does not
    # support (backend="kernel") is an error before the store is touched.
    kernel = fn.batch_kernel(devices) if hasattr(fn, "batch_kernel") else None
    if kernel is not None and getattr(fn, "backend", None) == "auto":
        # "auto" falls back to vmap where the kernel's lanes cannot evaluate the
        # system (a primitive they do not have), as in `simulate_batch`.
        chunk = {
            name: jax.ShapeDtypeStruct((chunk_size, *x.shape), x.dtype)
            for name, x in member.items()
        }
        try:
            eqx.filter_eval_shape(kernel, chunk, fn)
        except UnsupportedPrimitiveError:
            kernel = None
    if hasattr(fn, "batch_kernel"):
        kernel = _backend_of(store, fn, kernel, attrs)
    writer = jax.process_index() == 0
    kwargs = dict(
        size=size, chunk_size=chunk_size, inputs=inputs, outputs=outputs, attrs=attrs
    )
    if writer:
        chunked = ChunkedStore(store, writer=True, **kwargs)
    _barrier("jaxlagrange.sweep.open")
    if not writer:
        chunked = ChunkedStore(store, writer=False, **kwargs)
    missing = chunked.missing()
    bar = progress_bar(
        chunked.num_chunks,
        done=chunked.num_chunks - len(missing),
        enabled=progress and writer,
        unit="chunk",
    )
    if progress and writer and len(missing) < chunked.num_chunks:
        print(
            f"sweep: resuming {str(store)!r}: {chunked.num_chunks - len(missing)} of "
            f"{chunked.num_chunks} chunks already done, computing {len(missing)}.",
            file=sys.stderr,
            flush=True,
        )
    try:
        for chunk in missing:
            start, stop = chunked.bounds(chunk)
            batched = {
                name: jnp.asarray(_pad_rows(np.asarray(x[start:stop]), chunk_size))
                for name, x in inputs.items()
            }
            if kernel is None and deferring is not None:
                out = sharded_map(_apply, batched, deferring, chunk_size, devices)
                out = fn.named(*out, batched)
            else:
                out = sharded_map(_apply, batched, fn, chunk_size, devices, kernel)
            out = {k: np.asarray(v)[: stop - start] for k, v in out.items()}
            if kernel is not None and deferring is not None:
                out = _collapsed_again(out, batched, fn, deferring, devices)
            chunked.write(chunk, out)
            bar.update()
        chunked.finish()
    finally:
        bar.close()
        chunked.close()
    _barrier("jaxlagrange.sweep.close")
    return open_store(store)


def _backend_of(store, fn, kernel, attrs):
    """The kernel (None: vmap) a resumed store keeps, recorded in `attrs`.

    The integrator is part of what a store holds: the kernel's Tsit5 and
    diffrax's take other steps, and a chaotic member's motions part, so a sweep
    resumed with the other would mix the two. "auto" follows a store computed
    with vmap (on a GPU too); a store computed in the kernel, met where "auto"
    gives vmap (on a CPU, where the kernel is slow), is refused naming the
    backend to resume it with. A store written before backends were recorded
    is resumed as it was.
    """
    used = "vmap" if kernel is None else "kernel"
    stored = stored_attributes(store)
    if stored is None or MANIFEST not in stored:
        attrs["backend"] = used
        return kernel
    before = stored.get("backend")
    if before is None:
        return kernel
    if before == "vmap" and getattr(fn, "backend", None) == "auto":
        kernel, used = None, "vmap"
    if before != used:
        raise ValueError(
            f"The store {str(store)!r} was computed with backend={before!r}, and this "
            f"sweep would take backend={used!r}: the two integrators take other steps, "
            f"so their members would mix. Resume it with backend={before!r} (in a "
            f'config: [sweep] backend = "{before}"), or choose another output '
            "directory."
        )
    attrs["backend"] = used
    return kernel


def _collapsed_again(out, batched, fn, deferring, devices):
    """The kernel's members whose step collapsed, computed again on the vmap path,
    whose diagnosis names the cause (`_batch._collapsed_again`)."""
    index = np.flatnonzero(out["result"] == COLLAPSED)
    if index.size == 0:
        return out
    rows = {k: v[index] for k, v in batched.items()}
    again = sharded_map(_apply, rows, deferring, index.size, devices)
    again = fn.named(*again, rows)
    out = {k: v.copy() for k, v in out.items()}
    for k, v in again.items():
        out[k][index] = np.asarray(v)
    return out


def dtype_of(x) -> np.dtype:
    dtype = np.dtype(x.dtype)
    if np.issubdtype(dtype, np.floating) and not jax.config.read("jax_enable_x64"):
        return np.dtype(np.float32)
    return dtype
