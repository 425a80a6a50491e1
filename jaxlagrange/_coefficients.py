"""The checks of a system's coefficients: friction, static friction, restitution.

At construction on known values (`check_friction`, from `__check_init__`), and
where a call begins on the values it reads (`checked_values`,
`checked_coefficients`, also under `jax.jit`, `vmap` and `grad`): a batch,
sweep or fit over a coefficient named as a param.
"""

from typing import Any

import equinox as eqx
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array
from ._errors import first_error, known, traced
from ._validate import array_module, param_flags


def check_friction(system: Any) -> None:
    """The trace-time checks of `slip`, `friction` and `static_friction`."""
    slip, unilateral = system.constraints.friction, system.constraints.one_sided
    friction = system.friction_param or system.friction  # (not evaluated)
    needs = [
        (
            slip is None and friction is not None,
            "`friction` needs `slip` (the slip velocity at each contact), got "
            "slip=None.",
        ),
        (
            slip is not None and not unilateral,
            "`slip` needs `unilateral` (friction acts at unilateral contacts), got "
            "unilateral=None.",
        ),
        (
            slip is not None and friction is None,
            "`slip` needs `friction`, the kinetic friction coefficient (a scalar or "
            "one per unilateral constraint).",
        ),
    ]
    first_error(None, needs, error=ValueError)
    if slip is None:
        return
    for name in ("friction", "static_friction"):
        values = known_coefficient(system, name)
        if values is None:
            continue
        if not np.issubdtype(values.dtype, np.number) or values.ndim > 1:
            raise ValueError(
                f"`{name}` must be a number or a 1-D array (one per unilateral "
                f"constraint), got {values!r}."
            )
        if not np.all(np.isfinite(values) & (values >= 0)):
            raise ValueError(f"`{name}` must be finite and non-negative, got {values}.")
    kinetic = known_coefficient(system, "friction")
    static = known_coefficient(system, "static_friction")
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


def known_coefficient(system: Any, name: str) -> np.ndarray | None:
    """The value of the coefficient `name` if known at trace time, else None."""
    # Not evaluated with traced params: it would put dead operations into the
    # traced program (e.g. `physics_digest`'s).
    return None if traced(system.params) else known(system.coefficient(name))


def coefficient(system: Any, name: str, u: int, dtype) -> Array:
    """The coefficient `name`, shape (u,) (checked where a call begins)."""
    value = jnp.asarray(system.coefficient(name), dtype)
    if value.shape not in ((), (u,)):
        raise ValueError(
            f"`{name}` must be a scalar or have one entry per unilateral "
            f"constraint, shape ({u},), got shape {value.shape}."
        )
    return jnp.broadcast_to(value, (u,))


def friction_coefficients(system: Any, u: int, dtype) -> tuple[Array, Array]:
    """μ_k and μ_s, shape (u,) each (checked where a call begins)."""
    kinetic, static = (coefficient(system, name, u, dtype) for name in _FRICTION)
    return kinetic, static


_FRICTION = ("friction", "static_friction")
_GOT = ", got a value that is not."
_RESTITUTION = "`restitution` must lie in [0, 1] (0: plastic, 1: elastic)" + _GOT


def _coefficient_checks(system: Any) -> list:
    """The ranges of the coefficients a solve reads, as (condition, message) pairs."""
    if not system.constraints.one_sided:
        return []
    names = ["restitution"]
    if system.constraints.friction is not None:
        names += _FRICTION
    values = {name: system.coefficient(name) for name in names}
    checks = []
    for name, value in values.items():
        xp = array_module(value)
        value = xp.asarray(value)
        bad = ~(xp.isfinite(value) & (value >= 0))
        if name == "restitution":
            checks.append((bad | (value > 1), _RESTITUTION))
        else:
            checks.append((bad, f"`{name}` must be finite and non-negative{_GOT}"))
    if "friction" in values:
        below = (
            "`static_friction` must be at least `friction` (μ_s ≥ μ_k), got a value "
            "below it."
        )
        checks.append((values["static_friction"] < values["friction"], below))
    return checks


def checked_coefficients(system: Any) -> Any:
    """The system with its coefficients' range checks (also under `jax.jit`) tied on."""
    # Once where a call begins, not in each evaluation of the dynamics: a check
    # inside the solve is a host callback, and JAX caches no program that holds one.
    return _tied(system, _coefficient_checks(system))


def _tied(system: Any, checks: list) -> Any:
    if not checks:
        return system
    dynamic, static = eqx.partition(system, eqx.is_array)
    return eqx.combine(first_error(dynamic, checks), static)


def checked_values(system: Any) -> Any:
    """The system with its params' checks (also under `jax.jit`) tied to its leaves."""
    check = getattr(system.lagrangian, "check_params", None)
    if check is not None:
        # The same params with their checks tied on: not `with_params`, whose
        # constructor checks held for these values already, and would read a
        # loaded model's friction mix again on every eager call.
        system = eqx.tree_at(lambda s: s.params, system, check(system.params))
    # A non-finite param is named: it would otherwise surface as a singular mass
    # matrix or a non-finite q̈.
    flags, messages = param_flags(system.params)
    checks = [*zip(flags, messages, strict=True), *_coefficient_checks(system)]
    return _tied(system, checks)
