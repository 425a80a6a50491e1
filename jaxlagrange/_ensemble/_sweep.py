"""`sweep`: batches larger than memory, streamed to a Zarr store (`simulate_sweep`
in `_sweep_simulate.py`)."""

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Array
from .._progress import progress_bar
from .._validate import positive_int
from ._backend import apply, backend_for
from ._inputs import one_size
from ._member import AbstractMember, Rows
from ._sharding import pad_rows, sharded_map
from ._store import ChunkedStore, open_store, stored_attributes
from ._store_verify import MANIFEST, StoreRefused


def _barrier(name: str) -> None:
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


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
    return stream(fn, inputs, store, chunk_size, devices, progress, attrs)


def stream(
    fn: Callable | AbstractMember,
    inputs: Mapping[str, Any],
    store: str | os.PathLike,
    chunk_size: int = 1024,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
    attrs: Mapping[str, Any] | None = None,
    backend: str | None = None,
    block_size: int | None = None,
):
    """`sweep` of a function `fn`, or of a library member solved by `backend`."""
    chunk_size = positive_int("chunk_size", chunk_size)
    if not inputs:
        raise ValueError("`inputs` is empty.")
    sizes = {name: x.shape[0] if np.ndim(x) else None for name, x in inputs.items()}
    size = one_size(sizes, "`inputs` must share one leading batch axis, got")
    chunk_size = min(chunk_size, size)
    member = {
        name: jax.ShapeDtypeStruct(x.shape[1:], dtype_of(x))
        for name, x in inputs.items()
    }
    attrs = dict(attrs or {})
    if backend is None:
        shapes = jax.eval_shape(fn, member)

        def compute(batched):
            return sharded_map(apply, batched, fn, chunk_size, devices)

    else:
        shapes = jax.eval_shape(fn.deferring(), Rows.of(member))[0]
        # An option the kernel does not support (backend="kernel") is an error
        # before the store is touched.
        chosen = _backend_of(
            store, fn, backend, block_size, member, chunk_size, devices, attrs
        )

        def compute(batched):
            return chosen.run(fn, Rows.of(batched), chunk_size, devices)

    if not isinstance(shapes, Mapping) or not all(isinstance(k, str) for k in shapes):
        raise ValueError(
            f"`fn` must return a dict of arrays keyed by name, got {type(shapes)}."
        )
    outputs = {k: (tuple(v.shape), v.dtype) for k, v in shapes.items()}
    attrs["outputs"] = {k: [list(s), np.dtype(d).str] for k, (s, d) in outputs.items()}
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
            # The last chunk is padded to the chunk size: one shape, one compile.
            pad = chunk_size - (stop - start)
            batched = {
                name: pad_rows(jnp.asarray(np.asarray(x[start:stop])), pad)
                for name, x in inputs.items()
            }
            out = compute(batched)
            out = {k: np.asarray(v)[: stop - start] for k, v in out.items()}
            chunked.write(chunk, out)
            bar.update()
        chunked.finish()
    finally:
        bar.close()
        chunked.close()
    _barrier("jaxlagrange.sweep.close")
    return open_store(store)


def _backend_of(store, member, backend, block_size, shapes, chunk_size, devices, attrs):
    """The backend a sweep takes (put in `attrs`): the one a resumed store keeps."""
    stored = stored_attributes(store)
    new = stored is None or MANIFEST not in stored
    before = None if new else stored.get("backend")
    chunk = {
        name: jax.ShapeDtypeStruct((chunk_size, *x.shape), x.dtype)
        for name, x in shapes.items()
    }
    chosen = backend_for(
        backend, block_size, member, Rows.of(chunk), devices, follow=before
    )
    # A store written before backends were recorded: resumed as it was.
    if not new and before is None:
        return chosen
    if before is not None and before != chosen.name:
        raise StoreRefused(
            f"The store {str(store)!r} was computed with backend={before!r}, and this "
            f"sweep would take backend={chosen.name!r}: the two integrators take "
            "other steps, so their members would mix. Resume it with "
            f'backend={before!r} (in a config: [sweep] backend = "{before}"), or '
            "choose another output directory."
        )
    attrs["backend"] = chosen.name
    return chosen


def dtype_of(x) -> np.dtype:
    dtype = np.dtype(x.dtype)
    if np.issubdtype(dtype, np.floating) and not jax.config.read("jax_enable_x64"):
        return np.dtype(np.float32)
    return dtype
