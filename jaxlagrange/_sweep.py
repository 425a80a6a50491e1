"""`sweep` and `simulate_sweep`: batches larger than memory, streamed to a Zarr store."""

import os
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._batch import devices_of, sharded_map
from ._batch_inputs import (
    batch_size,
    check_options,
    check_state,
    joined_options,
    merge,
    override,
    split_options,
)
from ._custom_types import Array, Params
from ._kernel._backend import broadcast_params, choose_kernel
from ._kernel._ensemble import simulate_kernel
from ._progress import progress_bar
from ._results import code_of
from ._simulate import simulate
from ._store import ChunkedStore, open_store
from ._sweep_identity import SYSTEM_FUNCTIONS, _describe, code_digest
from ._system import LagrangianSystem
from ._trajectory import Trajectory


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
        name: jax.ShapeDtypeStruct(x.shape[1:], _dtype(x)) for name, x in inputs.items()
    }
    shapes = jax.eval_shape(fn, member)
    if not isinstance(shapes, Mapping) or not all(isinstance(k, str) for k in shapes):
        raise ValueError(
            f"`fn` must return a dict of arrays keyed by name, got {type(shapes)}."
        )
    outputs = {k: (tuple(v.shape), v.dtype) for k, v in shapes.items()}
    attrs = dict(attrs or {})
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
    # The fused ensemble kernel where `simulate_batch`'s backend "auto" picks it.
    kernel = fn.batch_kernel(devices) if hasattr(fn, "batch_kernel") else None
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
            out = sharded_map(_apply, batched, fn, chunk_size, devices, kernel)
            out = {k: np.asarray(v)[: stop - start] for k, v in out.items()}
            chunked.write(chunk, out)
            bar.update()
        chunked.finish()
    finally:
        bar.close()
        chunked.close()
    _barrier("jaxlagrange.sweep.close")
    return open_store(store)


def _dtype(x) -> np.dtype:
    dtype = np.dtype(x.dtype)
    if np.issubdtype(dtype, np.floating) and not jax.config.read("jax_enable_x64"):
        return np.dtype(np.float32)
    return dtype


def _flatten_params(params: Params) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise ValueError(
            "`simulate_sweep` takes `params` as a dict (of dicts) of arrays, got "
            f"{type(params).__name__}; use `sweep` for other pytrees."
        )
    flat = {}
    for key, value in params.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}/{k}": v for k, v in _flatten_params(value).items()})
        else:
            flat[str(key)] = value
    return flat


def _unflatten_params(flat: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path, value in flat.items():
        *parents, leaf = path.split("/")
        node = out
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return out


class _SimulateMember(eqx.Module):
    system: LagrangianSystem
    options: Any
    static_options: Any = eqx.field(static=True)
    observe: Callable | None = eqx.field(static=True)

    def __call__(self, member: dict[str, Array]) -> dict[str, Array]:
        system = self.system
        params = {
            k[len("params/") :]: v
            for k, v in member.items()
            if k != "q0" and k != "qd0"
        }
        if params:
            params = merge(system.params, _unflatten_params(params))
            system = eqx.tree_at(lambda s: s.params, system, params)
        options = joined_options(self.options, self.static_options)
        traj = simulate(system, member["q0"], member["qd0"], throw=False, **options)
        out = (
            {"q": traj.q, "qd": traj.qd} if self.observe is None else self.observe(traj)
        )
        if not isinstance(out, Mapping):
            raise ValueError(
                f"`observe` must return a dict of arrays keyed by name, got {type(out)}."
            )
        for reserved in ("result", "t_final"):
            if reserved in out:
                raise ValueError(
                    f"`observe` may not return the reserved key {reserved!r}."
                )
        return {**out, "result": code_of(traj.result), "t_final": traj.t_final}

    # The fused kernel's share of the work (`_SweepKernel`).
    def kernel_options(self) -> dict[str, Any]:
        return joined_options(self.options, self.static_options)

    def batch_kernel(self, devices):
        return _kernel_for(self.system, self.kernel_options(), devices)

    def kernel_outputs(self, traj: Trajectory, params) -> dict[str, Array]:
        del params
        if self.observe is None:
            return {"q": traj.q, "qd": traj.qd}
        return jax.vmap(self.observe)(traj)


def _kernel_for(system, options, devices):
    kernel = choose_kernel("auto", system, options, devices_of(devices), 128)
    return None if kernel is None else _SweepKernel(kernel(()))


class _SweepKernel(eqx.Module):
    """A chunk of a simulate sweep in the fused kernel; `member` is the sweep's
    per-member function (its system, options and outputs)."""

    batch: Any = eqx.field(static=True)  # a `KernelBatch`

    def __call__(self, batched, member):
        options = member.kernel_options()
        q0, qd0 = batched["q0"], batched["qd0"]
        swept = {k[len("params/") :]: v for k, v in batched.items() if "/" in k}
        system = member.system
        params = None
        if system.has_params:
            new = _unflatten_params(swept) if swept else None
            params = broadcast_params(system.params, new, q0.shape[0])
        traj = simulate_kernel(
            system,
            q0,
            qd0,
            params,
            options,
            block_size=self.batch.block_size,
            interpret=self.batch.interpret,
        )
        out = member.kernel_outputs(traj, params)
        return {**out, "result": code_of(traj.result), "t_final": traj.t_final}


def simulate_sweep(
    system: LagrangianSystem,
    q0: Any,
    qd0: Any,
    *,
    store: str | os.PathLike,
    params: Params = None,
    observe: Callable[[Trajectory], dict[str, Array]] | None = None,
    chunk_size: int = 1024,
    devices: Sequence[jax.Device] | None = None,
    progress: bool = True,
    **simulate_options: Any,
):
    """`simulate_batch` for batches larger than memory: chunked, streamed to disk.

    The arguments are those of `simulate_batch`, and the chunking, store and resume
    behaviour that of `sweep`. Per member the store holds `outputs/q` and
    `outputs/qd` (or whatever `observe` returns), `outputs/result` (the
    `jl.RESULTS` code, 0 on success, named by `jl.result_name`; failed members do
    not stop the sweep) and `outputs/t_final`; the inputs are under `inputs/q0`,
    `inputs/qd0` and `inputs/params/<key>`.

    **Arguments:**

    - `system`, `q0`, `qd0`, `params`, `devices`, `**simulate_options`: as in
        `simulate_batch`; batched inputs may be NumPy memmaps or Zarr arrays.
        `params` must be a dict (of dicts) of arrays.
    - `store`: the store directory.
    - `observe`: `observe(traj) -> dict[str, array]`, what to keep of each member's
        `Trajectory` (e.g. only the final energy); default `q` and `qd`.
    - `chunk_size`, `progress`: as in `sweep`.

    **Returns:** the store as a read-only `zarr.Group`.

    **Example:**

    ```python
    group = jl.simulate_sweep(pendulum, q0s, jnp.zeros(1), store="amp.zarr",
                              t1=10.0, chunk_size=4096)
    final = group["outputs/q"][:, -1]
    ```
    """
    check_options(simulate_options, "simulate_sweep")
    q0, qd0 = (
        np.asarray(q0) if np.ndim(q0) < 2 else q0,
        np.asarray(qd0) if np.ndim(qd0) < 2 else qd0,
    )
    check_state(q0, "q0")
    check_state(qd0, "qd0")
    if params is not None and not system.has_params:
        raise ValueError("`params` was given but the system has no params.")
    flat = {} if params is None else _flatten_params(params)
    size = batch_size(
        jax.ShapeDtypeStruct(q0.shape, q0.dtype),
        jax.ShapeDtypeStruct(qd0.shape, qd0.dtype),
        {
            k: jax.ShapeDtypeStruct(np.shape(v), np.asarray(v[:1]).dtype)
            for k, v in flat.items()
        },
    )
    if q0.shape[-1] != qd0.shape[-1]:
        raise ValueError(
            f"q0 and qd0 must have the same number of coordinates, got q0 {q0.shape} "
            f"and qd0 {qd0.shape}."
        )
    if params is not None:
        # Shapes and keys only: checked on the first member.
        first = jax.tree.map(lambda v: np.asarray(v[:1]), _unflatten_params(flat))
        override(system.params, first, 1)
    n = q0.shape[-1]
    dtype = np.result_type(_dtype(q0), _dtype(qd0), float)
    inputs = {
        "q0": q0
        if np.ndim(q0) == 2
        else np.broadcast_to(np.asarray(q0, dtype), (size, n)),
        "qd0": qd0
        if np.ndim(qd0) == 2
        else np.broadcast_to(np.asarray(qd0, dtype), (size, n)),
        **{f"params/{k}": v for k, v in flat.items()},
    }
    dyn_options, static_options = split_options(simulate_options)
    fn = _SimulateMember(system, dyn_options, static_options, observe)
    attrs = {
        "kind": "simulate_sweep",
        "system": _describe(system),
        "simulate_options": {
            k: _describe(v)
            for k, v in joined_options(dyn_options, static_options).items()
        },
        "observe": _describe(observe),
        # The functions' code: a script edited between two runs is a new sweep.
        "code": code_digest(
            [
                *(getattr(system, name) for name in SYSTEM_FUNCTIONS),
                observe,
            ]
        ),
    }
    return sweep(
        fn,
        inputs,
        store,
        chunk_size=chunk_size,
        devices=devices,
        progress=progress,
        attrs=attrs,
    )


class SweepMember(eqx.Module):
    """One member of `jaxlagrange sweep`: `simulate` (its energies) and optionally
    `finite_time_lyapunov`, with swept initial states and scalar params.

    A pytree whose non-array parts compare by value, so that two sweeps of one
    config in a process share one compilation.
    """

    system: LagrangianSystem
    saveat: Array
    options: tuple = eqx.field(static=True)
    swept_params: tuple = eqx.field(static=True)
    lyapunov: bool = eqx.field(static=True)

    def __init__(self, system, swept_params, simulate_kwargs, lyapunov):
        self.system = system
        self.saveat = simulate_kwargs["saveat"]
        self.options = tuple(
            sorted((k, v) for k, v in simulate_kwargs.items() if k != "saveat")
        )
        self.swept_params = tuple(swept_params)
        self.lyapunov = lyapunov

    def __call__(self, inputs: dict[str, Array]) -> dict[str, Array]:
        from ._eom import energy_unchecked as energy
        from ._lyapunov import finite_time_lyapunov

        system = self.system
        if self.swept_params:
            params = dict(system.params)
            params.update({k: inputs[f"params/{k}"] for k in self.swept_params})
            system = eqx.tree_at(lambda s: s.params, system, params)
        q0, qd0 = inputs["q0"], inputs["qd0"]
        options = dict(self.options)
        traj = simulate(system, q0, qd0, saveat=self.saveat, **options, throw=False)
        energies = jax.vmap(energy, in_axes=(None, 0, 0, 0))(
            system, traj.q, traj.qd, traj.ts
        )
        out = {
            "q": traj.q,
            "qd": traj.qd,
            "energy": energies,
            "result": code_of(traj.result),
            "t_final": traj.t_final,
        }
        if self.lyapunov:
            out["lyapunov"] = finite_time_lyapunov(
                system, q0, qd0, **options, throw=False
            )
        return out

    def kernel_options(self):
        return {**dict(self.options), "saveat": self.saveat}

    def batch_kernel(self, devices):
        if self.lyapunov:
            return None
        return _kernel_for(self.system, self.kernel_options(), devices)

    def kernel_outputs(self, traj: Trajectory, params) -> dict[str, Array]:
        from ._eom import energy_unchecked as energy

        def energies(q, qd, ts, params):
            system = self.system
            if params is not None:
                system = eqx.tree_at(lambda s: s.params, system, params)
            return jax.vmap(energy, in_axes=(None, 0, 0, 0))(system, q, qd, ts)

        return {
            "q": traj.q,
            "qd": traj.qd,
            "energy": jax.vmap(energies)(traj.q, traj.qd, traj.ts, params),
        }
