"""`simulate`'s options as given (`GivenOptions`, which checks them) and as
checked (`CheckedOptions`, which the smooth and hybrid solves take)."""

import dataclasses
from collections.abc import Mapping
from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array
from ._errors import first_error, known
from ._hold import switch_times
from ._integrators import AbstractLagrangianSolver
from ._projection import ProjectedSolver
from ._system import LagrangianSystem
from ._validate import (
    array_module,
    as_real,
    check_precision,
    default_tolerance,
    positive_int,
)


# The most steps of a solve (between two events), unless `max_steps` says otherwise.
MAX_STEPS = 100_000


class GivenOptions(eqx.Module):
    """`simulate`'s keyword options as given (None: the default)."""

    # A new option of `simulate` is a field here and a keyword there.
    t0: Any = 0.0
    t1: Any = None
    saveat: Any = None
    solver: Any = None
    rtol: Any = None
    atol: Any = None
    dt0: Any = None
    stepsize_controller: Any = None
    max_steps: int = MAX_STEPS
    adjoint: Any = None
    baumgarte: Any = None
    progress_meter: Any = None
    max_events: int = 64

    def __check_init__(self):
        positive_int("max_steps", self.max_steps)
        solver, meter = self.solver, self.progress_meter
        solvers = (AbstractLagrangianSolver, diffrax.AbstractSolver)
        checks = [
            (
                solver is not None and not isinstance(solver, solvers),
                "`solver` must be a diffrax solver or jl.VariationalMidpoint(), got "
                f"{type(solver).__name__}.",
            ),
            (
                meter is not None
                and not isinstance(meter, diffrax.AbstractProgressMeter),
                "`progress_meter` must be a diffrax progress meter such as "
                f"diffrax.TextProgressMeter(), got {type(meter).__name__}.",
            ),
        ]
        first_error(None, checks, error=ValueError)

    def checked(
        self, system: LagrangianSystem, dtype, *, trusted_times: bool = False
    ) -> tuple[tuple[Array, Array, Array], "CheckedOptions"]:
        """t0, t1, the save times in `dtype`, and the options checked for `system`."""
        # `trusted_times`: the caller checked their values (a fit's observations).
        times = check_times(self.t0, self.t1, self.saveat, dtype, trusted_times)
        rtol, atol = tolerances(self, dtype)
        if times[2].shape[0] >= 2**31:  # (memory is the caller's: the CLI checks it)
            raise ValueError(
                f"`saveat` has {times[2].shape[0]} times, more than 2**31."
            )
        dt0 = (
            None if self.dt0 is None else check_tolerance("dt0", self.dt0).astype(dtype)
        )
        baumgarte = self.baumgarte
        if baumgarte is not None:
            baumgarte = tuple(jnp.asarray(gain, dtype) for gain in baumgarte)
        solver, controller = self.solver, self.stepsize_controller
        adjoint = self.adjoint
        if adjoint is None:
            adjoint = diffrax.RecursiveCheckpointAdjoint()
        meter = self.progress_meter
        lagrangian = isinstance(solver, AbstractLagrangianSolver)
        solver = diffrax.Tsit5() if solver is None else solver
        if not lagrangian and baumgarte is None and system.constraints.bilateral:
            solver = ProjectedSolver(solver)
        if controller is None:
            controller = diffrax.PIDController(rtol=rtol, atol=atol)
            # Held controls switch discontinuously: step to each switch and restart.
            if (jumps := switch_times(system.params)) is not None:
                controller = diffrax.ClipStepSizeController(
                    controller, jump_ts=jumps.astype(dtype)
                )
        hybrid = bool(system.constraints.one_sided) and not lagrangian
        events = " (the most events before t1)"
        return times, CheckedOptions(
            solver=solver,
            stepsize_controller=controller,
            adjoint=adjoint,
            progress_meter=diffrax.NoProgressMeter() if meter is None else meter,
            dt0=dt0,
            baumgarte=baumgarte,
            rest=atol if hybrid else None,
            tolerances=(rtol, atol) if hybrid else None,
            max_steps=int(self.max_steps),
            max_events=positive_int("max_events", self.max_events, events)
            if hybrid
            else None,
            t1_only=self.saveat is None,
        )


def checked_options(where: str, given: Mapping[str, Any]) -> GivenOptions:
    """`simulate`'s options by name as `GivenOptions`, its mistakes refused."""
    # Refused before anything is compiled (or a sweep's store made); traced values
    # are checked in the program.
    names = [field.name for field in dataclasses.fields(GivenOptions)]
    unknown = next((key for key in given if key not in names), None)
    checks = [
        (
            unknown is not None,
            f"`{where}` got an unknown option {unknown!r}; the options of "
            f"`simulate` are: {', '.join(names)}.",
        ),
        (
            "t1" not in given,
            f"`{where}` needs `t1`, the end time (as `simulate` does).",
        ),
    ]
    first_error(None, checks, error=ValueError)
    options = GivenOptions(
        **{k: jnp.asarray(v) if isinstance(v, list) else v for k, v in given.items()}
    )
    check_times(options.t0, options.t1, options.saveat, jnp.result_type(float))
    for name in ("rtol", "atol", "dt0"):
        if getattr(options, name) is not None:
            check_tolerance(name, getattr(options, name))
    return options


def check_times(
    t0, t1, saveat, dtype, trusted: bool = False
) -> tuple[Array, Array, Array]:
    """`t0`, `t1` and the save times (t1 alone without `saveat`) in `dtype`, checked."""
    t0, t1 = as_real("t0", t0), as_real("t1", t1)
    ts = None if saveat is None else as_real("saveat", saveat)
    shapes = [
        *(
            (t.shape != (), f"`{n}` must be a scalar, got shape {t.shape}.")
            for n, t in (("t0", t0), ("t1", t1))
        ),
        (
            ts is not None and (ts.ndim != 1 or ts.shape[0] == 0),
            "`saveat` must be a non-empty 1-D array of times, got shape "
            f"{None if ts is None else ts.shape}.",
        ),
    ]
    first_error(None, shapes, error=ValueError)
    t0, t1 = t0.astype(dtype), t1.astype(dtype)
    ts = t1[None] if ts is None else ts.astype(dtype)
    if trusted:  # (checked in the program, they would be its host callbacks)
        return t0, t1, ts

    # NumPy where the times are known (no small eager compiles); `first_error`
    # raises at once then, with the offending values in the message.
    xp = array_module(t0, t1, ts)
    a, b, s = xp.asarray(t0), xp.asarray(t1), xp.asarray(ts)
    unordered, outside = s[1:] <= s[:-1], (s < a) | (s > b) | ~xp.isfinite(s)

    def at(bad):
        i = int(np.argmax(bad))
        after = f" and saveat[{i + 1}] = {s[i + 1]}" if bad is unordered else ""
        return f", but saveat[{i}] = {s[i]}{after}"

    order = ~(xp.isfinite(a) & xp.isfinite(b) & (b > a))
    got = lambda: f", got t0 = {float(a)} and t1 = {float(b)}"  # noqa: E731
    span = lambda: f" = [{float(a)}, {float(b)}]{at(outside)}"  # noqa: E731
    # Each check on what the solve uses: without `saveat` it saves at t1 only.
    t1 = first_error(
        t1, [(order, ("`t1` must be greater than `t0`{}.", got))], error=ValueError
    )
    checks = [
        (unordered, ("`saveat` must be strictly increasing{}.", lambda: at(unordered))),
        (outside, ("`saveat` must lie in [t0, t1]{}.", span)),
    ]
    ts = first_error(ts, checks, error=ValueError)
    return t0, t1, ts


def check_tolerance(name: str, given) -> Array:
    """A solver tolerance (or step), checked: a positive finite scalar."""
    value = as_real(name, given)
    if value.shape != ():  # (`as_real` refused any other dtype)
        raise ValueError(
            f"`{name}` must be a positive scalar, got shape {value.shape} and "
            f"dtype {value.dtype}."
        )
    # NumPy where the value is known, also inside a program (a fit's): a check
    # traced there would be its host callback.
    v = value if (plain := known(given)) is None else plain
    xp = array_module(v)
    bad = ~(xp.isfinite(xp.asarray(v)) & (xp.asarray(v) > 0))
    got = lambda: f", got {float(v)}"  # noqa: E731
    message = (f"`{name}` must be positive and finite{{}}.", got)
    return first_error(value, [(bad, message)], error=ValueError)


def tolerances(options: GivenOptions, dtype) -> tuple[Array, Array]:
    """`rtol` and `atol` as checked; None: the precision's default."""
    default = default_tolerance(dtype)
    rtol = check_tolerance("rtol", default if options.rtol is None else options.rtol)
    atol = check_tolerance("atol", default if options.atol is None else options.atol)
    check_precision("rtol", rtol, dtype)
    return rtol, atol


class CheckedOptions(eqx.Module):
    """`simulate`'s options as checked, built once and handed to the solves."""

    # Python choices are static fields (they key the jit cache); diffrax objects
    # are ordinary ones, their arrays traced: a `PIDController` holds the checked
    # tolerances as arrays, which a static field could not hash.
    # A diffrax solver (wrapped in `ProjectedSolver` where it projects), or an
    # `AbstractLagrangianSolver` (`jl.VariationalMidpoint()`) as given.
    solver: eqx.Module
    # The user's or the default PIDController; each solve wraps it in `guard_for`.
    stepsize_controller: diffrax.AbstractStepSizeController
    adjoint: diffrax.AbstractAdjoint
    progress_meter: diffrax.AbstractProgressMeter
    dt0: Array | None
    baumgarte: tuple[Array, Array] | None  # None: projection (or unconstrained)
    # With unilateral constraints, `atol`: a rebound that would rise less than
    # this (in the units of h) is made plastic. None without them.
    rest: Array | None
    # With them, the solver's (rtol, atol): its resolution of a slip velocity
    # (`_friction.slip_resolution`). None without them.
    tolerances: tuple[Array, Array] | None
    max_steps: int = eqx.field(static=True)  # per solve between two events
    max_events: int | None = eqx.field(static=True)  # None: no unilateral constraints
    t1_only: bool = eqx.field(static=True)  # no `saveat`: save t1 only

    @property
    def hybrid(self) -> bool:
        """Whether the solve is hybrid: segments between the events of contacts."""
        return self.max_events is not None
