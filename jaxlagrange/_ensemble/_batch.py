"""`simulate_batch`: ensembles of `simulate`, vmapped or in the fused kernel, and
sharded across devices."""

from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._cache import cached
from .._custom_types import Array, Params
from .._errors import traced
from .._initial_state import initial_checks, residuals, tolerance
from .._options import GivenOptions, checked_options
from .._results import code_of, item_of
from .._system import LagrangianSystem
from .._trajectory import Trajectory, raise_if_failed
from ._backend import backend_for, broadcast_params
from ._inputs import as_arrays, batch_size, override
from ._member import AbstractMember, Rows


class BatchMember(AbstractMember):
    """A member of `simulate_batch`: its whole trajectory."""

    system: LagrangianSystem
    options: GivenOptions
    defer: bool = eqx.field(static=True, default=False)
    trusted: tuple | None = eqx.field(static=True, default=None)

    def outputs(self, traj, system, row):
        return traj

    def codes(self, out):
        return code_of(out.result)

    def with_codes(self, out, codes):
        return eqx.tree_at(lambda tr: tr.result, out, item_of(codes))


@cached
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
    options or params keys, the option values `simulate` refuses (named with their
    values), and a member that cannot start (off the constraints), named by its
    index, with `throw=True`; with `throw=False` such a member fails on its own
    (`RESULTS.inconsistent_initial_state`) and the others are solved.

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
    options = checked_options("simulate_batch", simulate_options)
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    if params is not None:
        params = as_arrays(system.params, params)
    size = batch_size(system, q0, qd0, params)
    if params is not None:
        params = override(system.params, params, size)
        check = getattr(system.lagrangian, "check_params", None)
        if check is not None:  # a loaded model's masses; traced (in a user's
            # jit): an error when the program runs, tied to the given leaves
            checked = check(broadcast_params(system.params, params, size))
            params = {k: checked[k] for k in params} if traced(params) else params
    n = q0.shape[-1]
    rows = Rows(
        jnp.broadcast_to(q0, (size, n)), jnp.broadcast_to(qd0, (size, n)), params
    )
    member = BatchMember(system, options)
    if throw:
        bad, message = bad_starts(member, rows)
        if message:
            raise ValueError(
                f"`simulate_batch`: member {int(np.argmax(bad))} ({int(bad.sum())} of "
                f"{bad.size} members) cannot start: {message}"
            )
    chosen = backend_for(backend, block_size, member, rows, devices)
    traj = chosen.run(member, rows, size, devices)
    return raise_if_failed(traj) if throw else traj


@eqx.filter_jit
def _start_residuals(member: AbstractMember, rows: Rows, t0):
    def one(row):
        return residuals(member.system_for(row), row.q0, row.qd0, t0)

    return jax.vmap(one)(rows)


def bad_starts(member: AbstractMember, rows: Rows) -> tuple[np.ndarray, str]:
    """The members that cannot start (off the constraints, singular), why the first."""
    # Under a trace nothing is known: the batch gives each member its result.
    if not member.system.has_constraints or traced(member, rows):
        return np.zeros(0, bool), ""
    t0 = jnp.asarray(member.options.t0, rows.q0.dtype)
    r = jax.tree.map(np.asarray, _start_residuals(member, rows, t0))
    tol = tolerance(rows.q0.dtype)
    flags = [np.asarray(failed) for failed, _ in initial_checks(r, tol, known=False)]
    bad = np.logical_or.reduce(flags)
    if not bad.any():
        return bad, ""
    one = jax.tree.map(lambda x: x[int(np.argmax(bad))], r)
    return bad, next(m for f, m in initial_checks(one, tol, known=True) if f)
