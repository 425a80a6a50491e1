"""`Trajectory`, the event kinds, a result's name and message, failure messages."""

import dataclasses
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array, ArrayLike, Bool, Float, Int, ScalarLike
from ._errors import known, traced
from ._results import MESSAGES, NAMES, RESULTS as RESULTS, SUCCESSFUL, code_of


EVENT_RELEASE = 0
"""`Trajectory.event_kind` of a contact letting go (its multiplier reached zero)."""

EVENT_IMPACT = 1
"""`Trajectory.event_kind` of a free unilateral constraint hitting h = 0."""

EVENT_STICK = 2
"""`Trajectory.event_kind` of a slipping contact that stops slipping and sticks."""

EVENT_SLIP = 3
"""`Trajectory.event_kind` of a contact that starts slipping (static friction
exceeded, or a stopped slip that static friction cannot hold)."""

EVENT_NAMES = ("release", "impact", "stick", "slip")  # indexed by the codes


class Trajectory(eqx.Module):
    """A solution of `simulate`.

    **Attributes:**

    - `ts`: the save times, shape (T,).
    - `q`, `qd`: coordinates and velocities at `ts`, shape (T, n).
    - `multipliers`: Lagrange multipliers at `ts`, shape (T, m + k + u)
        (holonomic, nonholonomic, unilateral; (T, 0) without constraints).
    - `result`: a `jaxlagrange.RESULTS` item; `RESULTS.successful` on success.
        Compare it with `==` (`traj.result == jl.RESULTS.singular_mass_matrix`,
        also batched); `jl.result_name(traj)` and `jl.result_message(traj)` read
        its name and message.
    - `t_final`: the time the solve reached (t1 on success; on failure the last
        accepted time, and t0 for a non-finite initial state).
    - `stats`: diffrax's statistics (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`, `max_steps`), summed over the segments between
        events.
    - `event_ts`: the times of the events, shape (E,) with E = `max_events` for a
        system with unilateral constraints and E = 0 without; `inf` in the unused
        slots.
    - `event_constraint`: which unilateral constraint each event concerns, an
        index 0 ≤ i < u into the output of `system.unilateral` (-1 where unused).
    - `event_kind`: `jl.EVENT_RELEASE` (the contact's multiplier reached zero and
        it lets go), `jl.EVENT_IMPACT` (a free constraint reached h = 0 moving
        inwards), `jl.EVENT_STICK` (a slipping contact stopped and static friction
        holds it) or `jl.EVENT_SLIP` (a contact starts slipping), -1 where unused.
    - `num_events`: how many event slots are used.
    - `friction`: the friction force along the slip direction at each contact,
        shape (T, u) (λ_T while sticking, −μ_k λ_N sign(s) while slipping, 0 when
        not in contact, and 0 throughout for contacts without `slip`); shape
        (T, u, 2) for a `slip` of shape (u, 2), the force in its tangent basis
        (−μ_k λ_N s/|s| slipping); shape (T, 0) without unilateral constraints.
    - `not_imported`: what the system's model has that its equations leave out
        (`LagrangianSystem.not_imported`, e.g. "contacts" of a loaded MuJoCo
        model); empty when nothing is missing. A successful result is the
        motion of the equations, not of what is listed here.

    Velocities jump at impacts: a save time equal to an event time holds the state
    just before the event.

    After a failure the save times that were not reached hold `inf`, as in diffrax.
    """

    ts: Float[Array, " T"]
    q: Float[Array, "T n"]
    qd: Float[Array, "T n"]
    multipliers: Float[Array, "T c"]
    result: RESULTS
    t_final: Float[Array, ""]
    stats: dict[str, Any]
    event_ts: Float[Array, " E"]
    event_constraint: Int[Array, " E"]
    event_kind: Int[Array, " E"]
    num_events: Int[Array, ""]
    friction: Float[Array, "T u *tangent"]
    not_imported: tuple[str, ...] = eqx.field(static=True, default=())

    def recording(self, system) -> "Trajectory":
        """This trajectory with the `not_imported` record of `system`."""
        missing = getattr(system, "not_imported", ())
        return dataclasses.replace(self, not_imported=missing) if missing else self


def without_events(ts, q, qd, multipliers, result, t_final, stats) -> Trajectory:
    """A `Trajectory` of a solve without unilateral constraints (no event slots)."""
    solved = (ts, q, qd, multipliers, result, t_final, stats)
    no_events = jnp.zeros((0,), int)
    return Trajectory(
        *solved,
        event_ts=jnp.zeros((0,), ts.dtype),
        event_constraint=no_events,
        event_kind=no_events,
        num_events=jnp.zeros((), int),
        friction=jnp.zeros((q.shape[0], 0), q.dtype),
    )


_THROW_FALSE = (
    "`jl.simulate(..., throw=False)` returns the trajectory up to the failure, "
    "with `Trajectory.result` and `Trajectory.t_final`, the time reached."
)


def result_messages(max_steps: int, max_events: int | None = None) -> list[str]:
    """The message of each result code, by value, with the limits filled in."""
    messages = list(MESSAGES)
    messages[int(code_of(RESULTS.max_steps_reached))] = (
        f"The maximum number of solver steps ({max_steps}) was reached before t1. "
        "Raise it with `jl.simulate(..., max_steps=...)`, or loosen `rtol`/`atol`."
    )
    if max_events is not None:
        messages[int(code_of(RESULTS.max_events_reached))] = (
            f"The maximum number of events ({max_events}: releases, impacts, sticks "
            "and slips at unilateral constraints) was reached before t1. Raise it "
            "with `jl.simulate(..., max_events=...)`."
        )
    return messages


def raise_on_failure(
    traj: Trajectory,
    max_steps: int,
    t1: ScalarLike,
    max_events: int | None = None,
    detail: str = "",
) -> Trajectory:
    code = known(code_of(traj.result))
    messages = result_messages(max_steps, max_events)
    if code is None:
        # Under jit or vmap: a runtime error, without the time reached.
        messages = [m + "\n" + _THROW_FALSE if m else m for m in messages]
        failed = traj.result != RESULTS.successful
        return eqx.branched_error_if(traj, failed, code_of(traj.result), messages)
    if code != SUCCESSFUL:
        raise eqx.EquinoxRuntimeError(
            f"jl.simulate stopped at t = {float(traj.t_final)!r} before t1 = "
            f"{float(t1)!r}: {messages[int(code)]}{detail}\n{_THROW_FALSE}"
        )
    return traj


def _result_codes(result, where: str, table=None) -> np.ndarray:
    """A result's `RESULTS` codes in NumPy (nothing compiled), or `table`'s entries."""
    if isinstance(result, Trajectory):
        result = result.result
    if isinstance(result, RESULTS):
        result = code_of(result)
    if isinstance(result, eqx.Module):
        why = (
            " takes a `jl.Trajectory`, a `jl.RESULTS` item or integer result codes, "
            f"got {result!r}"
        )
    elif traced(result):
        why = (
            " reads a result after the solve, not under `jax.jit`, `jax.vmap` or "
            "`jax.grad`: there compare items with `==`, e.g. "
            "`traj.result == jl.RESULTS.successful`"
        )
    elif not np.issubdtype((codes := np.asarray(result)).dtype, np.integer):
        why = f": result codes must be integers, got dtype {codes.dtype}"
    elif np.any(bad := (codes < 0) | (codes >= len(RESULTS))):
        why = (
            f": {codes[bad].ravel()[0]} is not a `jl.RESULTS` code (they are 0 to "
            f"{len(RESULTS) - 1})"
        )
    elif table is None:
        return codes
    else:
        found = np.asarray(table)[codes]
        return str(found) if found.ndim == 0 else found
    raise ValueError(f"`{where}`{why}.")


def result_name(
    result: Trajectory | RESULTS | Int[ArrayLike, "*batch"],
) -> str | np.ndarray:
    """The name of a result, e.g. `"successful"` or `"singular_mass_matrix"`: the
    name of its member of `jl.RESULTS`.

    **Arguments:**

    - `result`: a `Trajectory` (its `result`), a `jl.RESULTS` item, or integer
        result codes, as `simulate_sweep` stores them under `outputs/result`.
        Batched ones too (`simulate_batch`, `jax.vmap`). Read after the solve,
        not under `jax.jit`: there compare with `==` instead.

    **Returns:** a `str` for one result; for a batch, a NumPy array of `str` with
    the batch shape.

    **Raises:** `ValueError` for anything else, for an integer that is not a code,
    and under `jax.jit`, `jax.vmap` or `jax.grad`.

    **Example:**

    ```python
    traj = jl.simulate_batch(system, q0s, qd0s, t1=10.0, throw=False)
    names = jl.result_name(traj)  # e.g. array(['successful', 'singular_mass_matrix'])
    print(names[jl.failed(traj)])
    ```
    """
    return _result_codes(result, "jl.result_name", NAMES)


def result_message(
    result: Trajectory | RESULTS | Int[ArrayLike, "*batch"],
) -> str | np.ndarray:
    """The message that explains a result (`""` for success), as `simulate`
    raises it with `throw=True`.

    **Arguments:** as for [`jaxlagrange.result_name`][].

    **Returns:** a `str` for one result; for a batch, a NumPy array of `str` with
    the batch shape.

    **Raises:** as for [`jaxlagrange.result_name`][].

    **Example:**

    ```python
    traj = jl.simulate(system, q0, qd0, t1=10.0, throw=False)
    if jl.failed(traj):
        print(jl.result_message(traj))
    ```
    """
    return _result_codes(result, "jl.result_message", MESSAGES)


def failed(
    result: Trajectory | RESULTS | Int[ArrayLike, "*batch"],
) -> Bool[Array, " *batch"]:
    """Which members of a (batched) trajectory failed.

    **Arguments:**

    - `result`: what `result_name` takes: a `Trajectory`, e.g. from
        `simulate_batch(..., throw=False)` (also under `jax.jit`), a `jl.RESULTS`
        item, or integer result codes (`simulate_sweep`'s `outputs/result`).

    **Returns:** a boolean array with the batch shape: True where the solve
    did not succeed. `jl.result_name(traj)[i]` names why (e.g.
    `"singular_mass_matrix"`) and `jl.result_message(traj)[i]` explains it;
    `traj.result == jl.RESULTS.singular_mass_matrix` tells one cause apart, also
    under `jax.jit`.

    **Raises:** `ValueError` as `result_name`, for anything else.

    **Example:**

    ```python
    traj = jl.simulate_batch(system, q0s, qd0s, t1=10.0, throw=False)
    bad = jl.failed(traj)
    print(f"{int(bad.sum())} of {bad.size} failed, e.g. member {int(bad.argmax())}")
    print(jl.result_name(traj)[bad])  # e.g. ['singular_mass_matrix']
    ```
    """
    result = result.result if isinstance(result, Trajectory) else result
    if isinstance(result, RESULTS):
        return result != RESULTS.successful
    return _result_codes(result, "jl.failed") != SUCCESSFUL


def raise_if_failed(traj: Trajectory) -> Trajectory:
    """`traj`, with an error for the failed members of a batch (`throw=True`)."""
    # Error messages are static, so the message is chosen by the first failure's
    # result code; `jl.failed` finds the members.
    messages = [
        f"`simulate_batch`: a member failed: {message} Pass `throw=False` and use "
        "`jl.failed(traj)` to see which members failed."
        for message in MESSAGES
    ]
    codes = code_of(traj.result)
    if traced(codes):
        bad = failed(traj)
        code = codes[jnp.argmax(bad)]
        # Under jit the check must feed every output, or it is dead code.
        return eqx.branched_error_if(traj, jnp.any(bad), code, messages)
    # Run eagerly, the codes are read on the host (each eager JAX operation on
    # them would compile a small program on its first use) and it raises at once.
    codes = np.asarray(codes).reshape(-1)
    bad = codes != SUCCESSFUL
    if bad.any():
        # The error a compiled check raises (`eqx.EquinoxRuntimeError`), naming
        # the failed members (the first few), their causes and where they stopped.
        index = np.flatnonzero(bad)
        t_final = np.asarray(traj.t_final).reshape(-1)
        listed = ", ".join(
            f"{i} ({NAMES[codes[i]]} at t = {t_final[i]:.6g})" for i in index[:5]
        )
        more = f" and {index.size - 5} more" if index.size > 5 else ""
        raise eqx.EquinoxRuntimeError(
            f"`simulate_batch`: {index.size} of {codes.size} members failed: "
            f"{'member' if index.size == 1 else 'members'} {listed}{more}. The "
            f"first: {MESSAGES[codes[index[0]]]} Pass "
            "`throw=False` and use `jl.failed(traj)` to see which members failed."
        )
    return traj
