"""`simulate_sweep`: `sweep` over initial states and params of `simulate`."""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np

from ._batch import devices_of
from ._inputs import (
    batch_size,
    check_options,
    check_state,
    joined_options,
    merge,
    override,
    split_options,
)
from .._custom_types import Array, Params
from .._guard import name_causes, without_system
from ._backend import broadcast_params, check_backend, choose_kernel
from .._kernel._ensemble import simulate_kernel
from .._results import code_of
from .._simulate import simulate, simulate_checked
from ._sweep import dtype_of, sweep
from ._identity import (
    SYSTEM_FUNCTIONS,
    _describe,
    code_digest,
    physics_digest,
)
from .._system import LagrangianSystem
from .._trajectory import Trajectory


def _flatten_params(params: Params) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise ValueError(
            "`simulate_sweep` takes `params` as a dict (of dicts) of arrays, got "
            f"{type(params).__name__}; use `sweep` for other pytrees."
        )
    flat = {}
    for key, value in params.items():
        if "/" in str(key):
            raise ValueError(
                f"`params` has the key {key!r}: a sweep's store nests keys with '/', "
                "so a key may not contain it."
            )
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


def _solve(member, system, q0, qd0, **options):
    """`simulate(..., throw=False)`; for a `defer`-ing member, the trajectory with
    a stopped solve's provisional code, and where it stopped (`named`)."""
    if not member.defer:
        return simulate(system, q0, qd0, throw=False, **options), None
    traj, failure, _ = simulate_checked(system, q0, qd0, throw=False, **options)
    return traj, without_system(failure)


def _named(member, out, failures, batched):
    """A chunk's outputs, with the causes of its stopped solves named."""
    codes = name_causes(
        out["result"], failures, type(member).system_for, member, batched
    )
    return {**out, "result": codes}


class _SimulateMember(eqx.Module):
    system: LagrangianSystem
    options: Any
    static_options: Any = eqx.field(static=True)
    observe: Callable | None = eqx.field(static=True)
    defer: bool = eqx.field(static=True, default=False)
    backend: str = eqx.field(static=True, default="auto")
    block_size: int = eqx.field(static=True, default=128)

    def system_for(self, member: dict[str, Array]) -> LagrangianSystem:
        system = self.system
        params = {
            k[len("params/") :]: v
            for k, v in member.items()
            if k != "q0" and k != "qd0"
        }
        if params:
            params = merge(system.params, _unflatten_params(params))
            system = eqx.tree_at(lambda s: s.params, system, params)
        return system

    def __call__(self, member: dict[str, Array]):
        system = self.system_for(member)
        options = joined_options(self.options, self.static_options)
        traj, failure = _solve(self, system, member["q0"], member["qd0"], **options)
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
        out = {**out, "result": code_of(traj.result), "t_final": traj.t_final}
        return (out, failure) if self.defer else out

    # `sweep` runs the member deferring the causes of stopped solves (`_named`).
    def deferring(self):
        return _SimulateMember(
            self.system,
            self.options,
            self.static_options,
            self.observe,
            True,
            self.backend,
            self.block_size,
        )

    def named(self, out, failures, batched):
        return _named(self, out, failures, batched)

    # The fused kernel's share of the work (`_SweepKernel`).
    def kernel_options(self) -> dict[str, Any]:
        return joined_options(self.options, self.static_options)

    def batch_kernel(self, devices):
        return _kernel_for(
            self.system, self.kernel_options(), devices, self.backend, self.block_size
        )

    def kernel_outputs(self, traj: Trajectory, params) -> dict[str, Array]:
        del params
        if self.observe is None:
            return {"q": traj.q, "qd": traj.qd}
        return jax.vmap(self.observe)(traj)


def _kernel_for(system, options, devices, backend="auto", block_size=128):
    """The sweep's `_SweepKernel` where `backend` picks the kernel, else None."""
    kernel = choose_kernel(backend, system, options, devices_of(devices), block_size)
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
    backend: str = "auto",
    block_size: int | None = None,
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

    - `system`, `q0`, `qd0`, `params`, `devices`, `backend`, `block_size`,
        `**simulate_options`: as in `simulate_batch`; batched inputs may be NumPy
        memmaps or Zarr arrays. `params` must be a dict (of dicts) of arrays.
        `backend="auto"` (default) integrates each chunk in the fused kernel on a
        GPU when the system and options allow it, else with `jax.vmap`; `"vmap"`
        and `"kernel"` choose. The store records the backend used (its
        `backend` attribute): the two integrators take other steps, so a sweep
        is resumed with the same one (`"auto"` follows a store computed with
        vmap; one computed in the kernel needs `"kernel"` where `"auto"` would
        take vmap).
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
    block_size = check_backend(backend, block_size)
    # Arrays (memmaps, Zarr arrays) stay as they are, read chunk by chunk.
    q0, qd0 = (
        np.asarray(q0) if np.ndim(q0) < 2 or not hasattr(q0, "shape") else q0,
        np.asarray(qd0) if np.ndim(qd0) < 2 or not hasattr(qd0, "shape") else qd0,
    )
    check_state(q0, "q0")
    check_state(qd0, "qd0")
    if params is not None and not system.has_params:
        raise ValueError("`params` was given but the system has no params.")
    flat = {} if params is None else _flatten_params(params)
    flat = {k: v if hasattr(v, "shape") else np.asarray(v) for k, v in flat.items()}
    size = batch_size(
        jax.ShapeDtypeStruct(q0.shape, q0.dtype),
        jax.ShapeDtypeStruct(qd0.shape, qd0.dtype),
        {
            k: jax.ShapeDtypeStruct(np.shape(v), np.dtype(v.dtype))
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
    dtype = np.result_type(dtype_of(q0), dtype_of(qd0), float)
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
    fn = _SimulateMember(
        system,
        dyn_options,
        static_options,
        observe,
        backend=backend,
        block_size=block_size,
    )
    attrs = {
        "kind": "simulate_sweep",
        "system": _describe(system),
        "simulate_options": {
            k: _describe(v)
            for k, v in joined_options(dyn_options, static_options).items()
        },
        "observe": _describe(observe),
        # What the functions compute, and their code: a script edited between
        # two runs, or a value its functions read from elsewhere, is a new sweep.
        "physics": physics_digest(system, n, dtype),
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
    defer: bool = eqx.field(static=True)
    backend: str = eqx.field(static=True)

    def __init__(
        self,
        system,
        swept_params,
        simulate_kwargs,
        lyapunov,
        defer=False,
        backend="auto",
    ):
        self.system = system
        self.saveat = simulate_kwargs["saveat"]
        self.options = tuple(
            sorted((k, v) for k, v in simulate_kwargs.items() if k != "saveat")
        )
        self.swept_params = tuple(swept_params)
        self.lyapunov = lyapunov
        self.defer = defer
        self.backend = backend

    def system_for(self, inputs: dict[str, Array]) -> LagrangianSystem:
        system = self.system
        if self.swept_params:
            params = dict(system.params)
            params.update({k: inputs[f"params/{k}"] for k in self.swept_params})
            system = eqx.tree_at(lambda s: s.params, system, params)
        return system

    def __call__(self, inputs: dict[str, Array]):
        from ._eom import energy_unchecked as energy
        from ._lyapunov import finite_time_lyapunov

        system = self.system_for(inputs)
        q0, qd0 = inputs["q0"], inputs["qd0"]
        options = dict(self.options)
        traj, failure = _solve(self, system, q0, qd0, saveat=self.saveat, **options)
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
        return (out, failure) if self.defer else out

    def deferring(self):
        kwargs = {**dict(self.options), "saveat": self.saveat}
        return SweepMember(
            self.system, self.swept_params, kwargs, self.lyapunov, True, self.backend
        )

    def named(self, out, failures, batched):
        return _named(self, out, failures, batched)

    def kernel_options(self):
        return {**dict(self.options), "saveat": self.saveat}

    def batch_kernel(self, devices):
        if self.lyapunov:
            if self.backend == "kernel":
                raise ValueError(
                    "`lyapunov` is not supported by backend='kernel' (the exponent "
                    "integrates the tangent flow beside each member): use "
                    "backend='vmap' or 'auto'."
                )
            return None
        return _kernel_for(self.system, self.kernel_options(), devices, self.backend)

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
