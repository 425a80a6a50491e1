"""One member of an ensemble: `simulate` from its row of the batched inputs; each
kind of ensemble's member class says what a member keeps (`outputs`)."""

import abc
import dataclasses
from collections.abc import Mapping
from typing import Any

import equinox as eqx

from .._guard import diagnosed, without_system
from .._options import GivenOptions
from .._simulate import simulate_checked
from .._system import LagrangianSystem
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

    def __call__(self, row: Rows):
        system = self.system_for(row)
        traj, failure, _ = simulate_checked(
            system, row.q0, row.qd0, self.options, throw=False
        )
        if self.defer:
            return self.outputs(traj, system, row), without_system(failure)
        return self.outputs(diagnosed(traj, failure), system, row)
