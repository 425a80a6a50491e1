"""`simulate_sweep`: `sweep` over initial states and params of `simulate`, and
the command line's member."""

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np

from .._cache import cached
from .._custom_types import Array, Params
from .._options import GivenOptions, checked_options
from .._results import code_of
from .._system import USER_FUNCTIONS, LagrangianSystem
from .._trajectory import Trajectory
from ._identity import code_digest, describe, physics_digest
from ._inputs import batch_size, override
from ._member import AbstractMember, swept_params
from ._sweep import dtype_of, stream


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


class SimulateSweepMember(AbstractMember):
    """A member of `simulate_sweep`: what `observe` keeps (default `q`, `qd`)."""

    system: LagrangianSystem
    options: GivenOptions
    observe: Callable | None = eqx.field(static=True)
    defer: bool = eqx.field(static=True, default=False)
    trusted: tuple | None = eqx.field(static=True, default=None)

    def outputs(self, traj, system, row):
        out = (
            {"q": traj.q, "qd": traj.qd} if self.observe is None else self.observe(traj)
        )
        if not isinstance(out, Mapping) or not {"result", "t_final"}.isdisjoint(out):
            got = list(out) if isinstance(out, Mapping) else type(out)
            raise ValueError(
                "`observe` must return a dict of arrays keyed by name, without the "
                f"reserved keys 'result' and 't_final', got {got}."
            )
        return {**out, "result": code_of(traj.result), "t_final": traj.t_final}


@cached
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
    options = checked_options("simulate_sweep", simulate_options)
    # Arrays (memmaps, Zarr arrays) stay as they are, read chunk by chunk.
    q0, qd0 = (x if hasattr(x, "shape") else np.asarray(x) for x in (q0, qd0))
    flat = {} if params is None else _flatten_params(params)
    flat = {k: v if hasattr(v, "shape") else np.asarray(v) for k, v in flat.items()}
    size = batch_size(system, q0, qd0, None if params is None else flat)
    if params is not None:
        # Shapes and keys only: checked on the first member.
        first = {f"params/{k}": np.asarray(v[:1]) for k, v in flat.items()}
        first = swept_params(first)
        override(system.params, first, 1)
    n = q0.shape[-1]
    dtype = np.result_type(dtype_of(q0), dtype_of(qd0), float)
    inputs = {
        name: x if x.ndim == 2 else np.broadcast_to(np.asarray(x, dtype), (size, n))
        for name, x in (("q0", q0), ("qd0", qd0))
    }
    inputs |= {f"params/{k}": v for k, v in flat.items()}
    fn = SimulateSweepMember(system, options, observe)
    attrs = {
        "kind": "simulate_sweep",
        "system": describe(system),
        "simulate_options": {
            k: describe(getattr(options, k)) for k in sorted(simulate_options)
        },
        "observe": describe(observe),
        # What the functions compute, and their code: a script edited between
        # two runs, or a value its functions read from elsewhere, is a new sweep.
        "physics": physics_digest(system, n, dtype),
        "code": code_digest(
            [*(getattr(system, name) for name in USER_FUNCTIONS), observe]
        ),
    }
    return stream(
        fn, inputs, store, chunk_size, devices, progress, attrs, backend, block_size
    )


_LYAPUNOV_OPTIONS = ("t0", "t1", "solver", "rtol", "atol", "max_steps")


class SweepMember(AbstractMember):
    """One member of `jaxlagrange sweep`: `simulate`, and maybe Lyapunov exponents."""

    # Non-array parts compare by value: two sweeps of one config share one compile.
    system: LagrangianSystem
    options: GivenOptions
    lyapunov: bool = eqx.field(static=True)
    defer: bool = eqx.field(static=True, default=False)
    trusted: tuple | None = eqx.field(static=True, default=None)

    def outputs(self, traj, system, row):
        from .._eom import energy_unchecked as energy
        from .._lyapunov import finite_time_lyapunov

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
            kwargs = {k: getattr(self.options, k) for k in _LYAPUNOV_OPTIONS}
            out["lyapunov"] = finite_time_lyapunov(
                system, row.q0, row.qd0, **kwargs, throw=False
            )
        return out

    def kernel_refusal(self):
        if not self.lyapunov:
            return None
        return (
            "`lyapunov` is not supported by backend='kernel' (the exponent "
            "integrates the tangent flow beside each member): use "
            "backend='vmap' or 'auto'."
        )
