"""The checks of a system's coefficients: friction, static friction, restitution.

At construction on known values (`check_friction`, from `__check_init__`), and
as flags tied to the leaves for traced ones (`checked_values`, under `jax.jit`,
`vmap` and `grad`).
"""

from typing import Any

import equinox as eqx
import numpy as np

from ._custom_types import ArrayLike
from ._errors import first_error
from ._validate import array_module, known, param_flags


def _known_values(x) -> np.ndarray | None:
    """`x` as a NumPy array, or None under tracing (values unknown)."""
    return known(x)


def check_friction(system: Any) -> None:
    """The trace-time checks of `slip`, `friction` and `static_friction`."""
    if not system.has_friction:
        if system._friction() is not None:
            raise ValueError(
                "`friction` needs `slip` (the slip velocity at each contact), got "
                "slip=None."
            )
        return
    if not system.has_contacts:
        raise ValueError(
            "`slip` needs `unilateral` (friction acts at unilateral contacts), got "
            "unilateral=None."
        )
    if system._friction() is None:
        raise ValueError(
            "`slip` needs `friction`, the kinetic friction coefficient (a scalar or "
            "one per unilateral constraint)."
        )
    for name in ("friction", "static_friction"):
        values = _known_values(system._coefficient(name))
        if values is None:
            continue
        if not np.issubdtype(values.dtype, np.number) or values.ndim > 1:
            raise ValueError(
                f"`{name}` must be a number or a 1-D array (one per unilateral "
                f"constraint), got {values!r}."
            )
        if not np.all(np.isfinite(values) & (values >= 0)):
            raise ValueError(f"`{name}` must be finite and non-negative, got {values}.")
    kinetic = _known_values(system._friction())
    static = _known_values(system._static_friction())
    if kinetic is not None and static is not None:
        if kinetic.shape and static.shape and kinetic.shape != static.shape:
            raise ValueError(
                f"`static_friction` (shape {static.shape}) and `friction` (shape "
                f"{kinetic.shape}) must have the same shape."
            )
        if not np.all(static >= kinetic):
            raise ValueError(
                f"`static_friction` must be at least `friction` (μ_s ≥ μ_k), got "
                f"static_friction={static} below friction={kinetic}."
            )


def _coefficient_flags(system: Any) -> tuple[list[ArrayLike], list[str]]:
    """The checks of `friction`, `static_friction` and `restitution` that
    `__check_init__` makes on known values, as flags (for traced values)."""
    flags, messages = [], []
    kinetic, static = system._friction(), system._static_friction()
    xp = array_module(kinetic, static, system._restitution())
    if system.has_friction:
        kinetic, static = xp.asarray(kinetic), xp.asarray(static)
        for name, mu in (("friction", kinetic), ("static_friction", static)):
            flags.append(~xp.all(xp.isfinite(mu) & (mu >= 0)))
            messages.append(
                f"`{name}` must be finite and non-negative, got a value that is not."
            )
        flags.append(~xp.all(static >= kinetic))
        messages.append(
            "`static_friction` must be at least `friction` (μ_s ≥ μ_k), got a value "
            "below it."
        )
    e = xp.asarray(system._restitution())
    flags.append(~xp.all((e >= 0) & (e <= 1)))
    messages.append(
        "`restitution` must lie in [0, 1] (0: plastic, 1: elastic), got a value that "
        "does not."
    )
    return flags, messages


def checked_values(system: Any) -> Any:
    """The system with a check (also under `jax.jit`, `vmap` and `grad`) on its
    values, tied to its leaves: every param finite, and the friction and
    restitution coefficients in their ranges. A non-finite param is named (it would
    otherwise surface as a singular mass matrix or a non-finite q̈)."""
    flags, messages = param_flags(system.params)
    more_flags, more_messages = _coefficient_flags(system)
    flags, messages = flags + more_flags, messages + more_messages
    if not flags:
        return system
    dynamic, static = eqx.partition(system, eqx.is_array)
    return eqx.combine(first_error(dynamic, zip(flags, messages, strict=True)), static)
