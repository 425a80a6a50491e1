"""One member of an ensemble: `simulate` from its row of the batched inputs; each
kind of ensemble's member class says what a member keeps (`outputs`)."""

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .._cache import made_checks, trusted_checks
from .._coefficients import checked_coefficients
from .._errors import traced
from .._guard import diagnosed, without_system
from .._options import GivenOptions, check_times
from .._simulate import simulate_checked
from .._system import LagrangianSystem, as_coordinates
from .._trajectory import Trajectory
from ._inputs import merge


class Rows(eqx.Module):
    """Batched inputs: initial states, and params to put into the system's (or None)."""

    q0: Any
    qd0: Any
    params: Any = None

    @classmethod
    def of(cls, inputs: Mapping[str, Any]) -> "Rows":
        """A sweep's inputs: `q0`, `qd0` and `params/<key>/<key>...`."""
        return cls(inputs["q0"], inputs["qd0"], swept_params(inputs))


def swept_params(inputs: Mapping[str, Any]) -> dict[str, Any] | None:
    """The params of a sweep's inputs, `params/<key>/<key>...`, as nested dicts."""
    params: dict[str, Any] = {}
    for path, value in inputs.items():
        if path.startswith("params/"):
            *parents, leaf = path[len("params/") :].split("/")
            node = params
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
    return params or None


class AbstractMember(eqx.Module):
    """`simulate(..., throw=False)` of one row; `outputs` says what is kept."""

    system: eqx.AbstractVar[LagrangianSystem]
    options: eqx.AbstractVar[GivenOptions]
    # `defer`: also return where a stopped solve stopped, for the backend to name
    # its cause afterwards (`_guard`): the batch's program holds no diagnosis.
    defer: eqx.AbstractVar[bool]
    # `trusted`: what was checked where the call began, on the rows' values
    # (`checked_first`): the times, and the checks with these messages, traced in
    # the program without host callbacks (JAX caches no program that holds one).
    # None: the program checks everything (its inputs are traced).
    trusted: eqx.AbstractVar[tuple[tuple[str, ...], ...] | None]

    @abc.abstractmethod
    def outputs(self, traj: Trajectory, system: LagrangianSystem, row: Rows) -> Any:
        """What a member keeps of its trajectory (`traj.result` as it is)."""

    def kernel_refusal(self) -> str | None:
        """Why the fused kernel cannot compute these outputs (None: it can)."""
        return None

    def codes(self, out) -> Any:
        """The members' integer result codes in the outputs."""
        return out["result"]

    def with_codes(self, out, codes) -> Any:
        return {**out, "result": codes}

    def system_for(self, row: Rows) -> LagrangianSystem:
        if row.params is None:
            return self.system
        return self.system.with_params(merge(self.system.params, row.params))

    def deferring(self) -> "AbstractMember":
        return dataclasses.replace(self, defer=True)

    def checked_first(self, rows: Rows) -> "AbstractMember":
        """This member with its times and its coefficients checked on `rows` now."""
        if traced(self, rows):
            return self
        options = self.options
        dtype = jnp.result_type(rows.q0.dtype, rows.qd0.dtype, float)
        check_times(options.t0, options.t1, options.saveat, dtype)
        with made_checks() as made:  # the checks the program would trace
            eqx.filter_eval_shape(_checks, self, jax.tree.map(_first, rows))
        if made:  # one member out of range raises, with its message
            jax.block_until_ready(_checked(self, rows))
        return dataclasses.replace(self, trusted=tuple(made))

    def __call__(self, row: Rows):
        system = self.system_for(row)
        with trusted_checks(self.trusted or ()):
            traj, failure, _ = simulate_checked(
                system,
                row.q0,
                row.qd0,
                self.options,
                throw=False,
                trusted_times=self.trusted is not None,
            )
        if self.defer:
            return self.outputs(traj, system, row), without_system(failure)
        return self.outputs(diagnosed(traj, failure), system, row)


def _checks(member: AbstractMember, row: Rows) -> list:
    """The checks of a member's program on its row's values, as it makes them."""
    system = member.system_for(row)
    q0, qd0 = as_coordinates(row.q0, row.qd0, where="q0")
    options = member.options
    t0, _, _ = check_times(options.t0, options.t1, None, q0.dtype, trusted=True)
    checked = checked_coefficients(system), system.constraints.check_affine(q0, qd0, t0)
    # An entry of each checked array, which keeps each check in the program.
    return [
        jnp.ravel(x)[:1] for x in jax.tree.leaves(eqx.filter(checked, eqx.is_array))
    ]


@eqx.filter_jit
def _checked(member: AbstractMember, rows: Rows) -> list:
    return jax.vmap(lambda row: _checks(member, row))(rows)


def _first(x):
    return x[0]
