"""Argument checks shared by the entry points: one place, one wording."""

import os

import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array


def as_real(name: str, value) -> Array:
    """`value` as a JAX array of real numbers, or a `ValueError` naming `name`."""
    if value is None or isinstance(value, (str, bytes)):
        raise ValueError(
            f"`{name}` must be a number or an array of numbers, got "
            f"{type(value).__name__} {value!r}."
        )
    try:
        array = jnp.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(
            f"`{name}` must be a number or an array of numbers, got {value!r}."
        ) from None
    if not (
        jnp.issubdtype(array.dtype, jnp.floating)
        or jnp.issubdtype(array.dtype, jnp.integer)
    ):
        raise ValueError(f"`{name}` must be real, got dtype {array.dtype}.")
    return array


def known(x) -> np.ndarray | None:
    """`x` as a NumPy array if its value is known at trace time, else None."""
    return None if isinstance(x, jax.core.Tracer) else np.asarray(x)


def default_tolerance(dtype) -> float:
    """The default `rtol` and `atol` of a solve in `dtype`: 1e-8 in float64, 1e-5
    in float32 (whose precision, eps = 1.2e-7, cannot meet 1e-8), 100 eps below."""
    dtype = jnp.dtype(dtype)
    if dtype.itemsize >= 8:
        return 1e-8
    if dtype.itemsize == 4:
        return 1e-5
    return 100 * float(jnp.finfo(dtype).eps)


def check_precision(name: str, value, dtype) -> None:
    """A relative tolerance the floating-point type can meet at all."""
    value = known(value)
    floor = 10 * float(jnp.finfo(dtype).eps)
    if value is not None and 0 < float(value) < floor:
        hint = (
            " or enable float64 (jax.config.update('jax_enable_x64', True))"
            if jnp.dtype(dtype).itemsize < 8
            else ""
        )
        raise ValueError(
            f"`{name}` = {float(value):g} is below the precision of {jnp.dtype(dtype)} "
            f"(eps = {float(jnp.finfo(dtype).eps):.2g}): no solver can meet it. Use "
            f"{name} ≥ {floor:.2g}{hint}."
        )


def physical_memory() -> int | None:
    """This machine's memory in bytes, where the OS says."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def check_output_size(saves: int, n: int, constraints: int, dtype) -> None:
    """Refuse save arrays that cannot fit in memory (XLA would abort)."""
    itemsize = jnp.dtype(dtype).itemsize
    needed = saves * (2 * n + constraints + 1) * itemsize
    memory = physical_memory()
    if saves >= 2**31 or (memory is not None and needed > memory):
        have = (
            ""
            if memory is None
            else f", more than this machine's {memory / 2**30:.1f} GiB"
        )
        raise ValueError(
            f"`saveat` has {saves} times: the trajectory alone would need "
            f"{needed / 2**30:.1f} GiB{have}. Save fewer times."
        )
