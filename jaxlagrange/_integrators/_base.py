import abc

import equinox as eqx

from .._custom_types import Array
from .._trajectory import Trajectory


class AbstractLagrangianSolver(eqx.Module):
    """A `simulate(..., solver=...)` integrating the system's own discrete equations."""

    # `jl.simulate` checks the arguments every solve shares, this what it supports.
    @abc.abstractmethod
    def simulate(
        self, system, q0: Array, qd0: Array, t0, t1, ts, options, stepsize_controller
    ) -> Trajectory:
        """The trajectory from (q0, qd0) at t0 to t1, saved at `ts`; `options`: the
        checked ones (`_options.CheckedOptions`), `stepsize_controller` as given."""
