"""What `simulate` hands down to its solves: its options, and the vector field's args.

`simulate` checks its keyword arguments and builds one `SimulateOptions`, which
the smooth solve (`_segment`) and the hybrid one (`_hybrid`) take as they are,
as diffrax's `diffeqsolve` takes its options by keyword. Each diffrax solve of
the equations of motion gets its args as one `VectorFieldArgs`.
"""

from typing import Any

import diffrax
import equinox as eqx
import numpy as np

from ._custom_types import Array
from ._system import LagrangianSystem


def check_max_events(max_events) -> int:
    """`max_events` as an int, or a `ValueError` naming it."""
    if (
        isinstance(max_events, bool)
        or not isinstance(max_events, (int, np.integer))
        or max_events < 1
    ):
        raise ValueError(
            f"`max_events` must be a positive int (the most events "
            f"before t1), got {max_events!r}."
        )
    return int(max_events)


class SimulateOptions(eqx.Module):
    """`simulate`'s options as checked, built once and handed to the solves.

    The Python choices are static fields, so they key the jit cache as before.
    The diffrax objects are ordinary fields: `eqx.filter_jit` keeps their
    non-array leaves static and traces their arrays (a `PIDController` holds the
    checked tolerances as arrays, which a static field could not hash).
    """

    solver: diffrax.AbstractSolver  # wrapped in `ProjectedSolver` where it projects
    # The user's or the default PIDController; each solve wraps it in `guard_for`.
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    progress_meter: diffrax.AbstractProgressMeter
    dt0: Array | None
    baumgarte: tuple[Array, Array] | None  # None: projection (or unconstrained)
    # With unilateral constraints, `atol`: a rebound that would rise less than
    # this (in the units of h) is made plastic. None without them.
    rest: Array | None
    max_steps: int = eqx.field(static=True)  # per solve between two events
    max_events: int | None = eqx.field(static=True)  # None: no unilateral constraints
    t1_only: bool = eqx.field(static=True)  # no `saveat`: save t1 only

    @property
    def hybrid(self) -> bool:
        """Whether the solve is hybrid: segments between the events of contacts."""
        return self.max_events is not None


class VectorFieldArgs(eqx.Module):
    """The args of a diffrax solve of the equations of motion (`_segment._vector_field`).

    `ProjectedSolver.step` projects a step of a solve with these args and a flat
    state [q; q̇], and no other (the backward solve of `diffrax.BacksolveAdjoint`
    has these args but an augmented tuple state).
    """

    system: LagrangianSystem
    baumgarte: tuple[Array, Array] | None = None
    active: Array | None = None  # (u,) bool: the contacts (None: all unilateral)
    modes: Any = None  # `_constraints.Modes` of the contacts (None: no friction)
    # For the event functions of a hybrid segment (`_event_functions`), else None:
    start: Array | None = None  # the segment's start time
    initial: Array | None = None  # (u,) the normal event values at the start
    initial_slip: Array | None = None  # the tangential ones (with friction)
