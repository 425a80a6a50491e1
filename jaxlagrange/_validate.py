"""Argument checks shared by the entry points: one place, one wording."""

import contextlib
import os

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from ._custom_types import Array, ArrayLike
from ._errors import first_error, known as known, traced


try:
    import resource
except ImportError:  # not on Windows
    resource = None


def as_real(name: str, value) -> Array:
    """`value` as a JAX array of real numbers, or a `ValueError` naming `name`."""
    array = None
    if value is not None and not isinstance(value, (str, bytes)):
        with contextlib.suppress(TypeError, ValueError):
            array = jnp.asarray(value)
    if array is None:
        why = f"a number or an array of numbers, got {type(value).__name__} {value!r}"
    elif not (
        jnp.issubdtype(array.dtype, jnp.floating)
        or jnp.issubdtype(array.dtype, jnp.integer)
    ):
        why = f"real, got dtype {array.dtype}"
    else:
        return array
    raise ValueError(f"`{name}` must be {why}.")


def default_tolerance(dtype) -> float:
    """The default `rtol` and `atol` of a solve in `dtype`."""
    dtype = jnp.dtype(dtype)
    if dtype.itemsize >= 8:
        return 1e-8
    if dtype.itemsize == 4:
        return 1e-5  # float32's eps, 1.2e-7, cannot meet 1e-8
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


# The memory limit of this process's cgroup (v2, then v1), as a container sees it.
_CGROUP_FILES = (
    "/sys/fs/cgroup/memory.max",
    "/sys/fs/cgroup/memory/memory.limit_in_bytes",
)


def _cgroup_limit() -> int | None:
    for path in _CGROUP_FILES:
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            return int(text)
    return None


def _address_space_limit() -> int | None:
    if resource is None:
        return None
    try:
        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ValueError, OSError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else int(soft)


def memory_limits() -> list[tuple[int, str]]:
    """The limits on this process's memory in bytes, each with what sets it."""
    limits = [
        (_address_space_limit(), "the process's address-space limit (ulimit -v)"),
        (_cgroup_limit(), "the container's memory limit (cgroup)"),
        (physical_memory(), "this machine's memory"),
    ]
    return [(int(value), what) for value, what in limits if value is not None]


def over_memory(needed: int | float | np.number) -> str | None:
    """ "more than <what limits it> of <its size> GiB" if `needed` bytes don't fit."""
    value, what = min(memory_limits(), default=(np.inf, ""))
    return f"more than {what} of {value / 2**30:.1f} GiB" if needed > value else None


def check_output_size(saves: int, n: int, constraints: int, dtype) -> None:
    """Refuse save arrays that cannot fit in memory (XLA would abort)."""
    needed = saves * (2 * n + constraints + 1) * jnp.dtype(dtype).itemsize
    over = over_memory(needed)
    if saves >= 2**31 or over is not None:
        have = "" if over is None else f", {over}"
        raise ValueError(
            f"`saveat` has {saves} times: the trajectory alone would need "
            f"{needed / 2**30:.1f} GiB{have}. Save fewer times."
        )


def check_finite(named: dict[str, Array], x):
    """`x` (any pytree), with an error naming the first non-finite one of `named`."""
    # Attach it to a function's output: its inputs may not reach the output (a
    # linear system's Jacobian does not depend on where it is taken).
    xp = array_module(named)
    message = "`{}` is not finite (it holds NaN or inf){{}}."
    checks = [
        (~xp.isfinite(v), (message.format(k), lambda v=v: f": {v}"))
        for k, v in named.items()
    ]
    return first_error(x, checks, error=ValueError)


def array_module(*xs):
    """NumPy for values known at trace time, jax.numpy if a leaf of `xs` is traced."""
    # Eagerly, every jax.numpy operation is a small compile of its own.
    return jnp if traced(xs) else np


def param_flags(params) -> tuple[list[ArrayLike], list[str]]:
    """Per floating param leaf: whether it is not finite, and a message naming it."""
    flags, messages = [], []
    for path, leaf in jtu.tree_flatten_with_path(params)[0]:
        # Python floats too: `eqx.tree_at` can put one in without conversion.
        if eqx.is_inexact_array(leaf) or isinstance(leaf, (float, np.floating)):
            xp = array_module(leaf)
            flags.append(~xp.all(xp.isfinite(leaf)))
            messages.append(
                f"params{jtu.keystr(path)} is not finite (it holds NaN or inf): give "
                "the system finite params."
            )
    return flags, messages


def check_finite_params(params, x):
    """`x`, with an error (also under `jax.jit`) naming a non-finite param leaf."""
    return first_error(x, zip(*param_flags(params), strict=True))


def check_affine(name: str, fn, q: Array, qd: Array, t: Array, x: Array) -> Array:
    """`x`, with an error naming `name` unless `fn` is affine in q̇ at (q, t)."""
    # Steps d = ±(1 + |q̇|) along two directions: a kink such as |q̇| at q̇ = 0 is
    # caught too.
    n = q.shape[0]
    scale = 1 + jnp.max(jnp.abs(qd))
    pattern = jnp.where(jnp.arange(n) % 2 == 0, 1.0, -0.5).astype(q.dtype)
    ones = jnp.ones(n, q.dtype)
    steps = scale * jnp.stack([ones, -ones, pattern, -pattern])
    value = fn(q, qd, t)
    jac = jax.jacfwd(fn, argnums=1)(q, qd, t)

    def error(d):
        predicted = value + jac @ d
        return jnp.abs(fn(q, qd + d, t) - predicted) / (1 + jnp.abs(predicted))

    worst = jnp.max(jax.vmap(error)(steps), initial=0.0)
    bad = ~(worst <= jnp.sqrt(jnp.finfo(q.dtype).eps))
    message = (
        f"`{name}` must be affine in qd ({name}(q, qd, t) = A(q, t) qd + b(q, t)), "
        f"but at the initial state {name}(q0, qd0 + d) differs from "
        f"{name}(q0, qd0) + (∂{name}/∂qd) d by more than √eps{{}} (relative): "
        f"the equations use ∂{name}/∂qd as a constant direction."
    )
    detail = lambda: f": {float(worst):.3g}"  # noqa: E731
    return first_error(x, [(bad, (message, detail))], error=ValueError)


def check_callable(name: str, fn, signature: str) -> None:
    if not callable(fn):
        raise ValueError(
            f"`{name}` must be a function {signature}, got {type(fn).__name__}."
        )


def returned(name: str, out, ok: bool, what: str, detail: str = ""):
    """`out`, the user's function `name`'s output, or a `ValueError` unless `ok`."""
    if not ok:
        raise ValueError(
            f"`{name}` must return {what}, but it returned shape {out.shape}{detail}."
        )
    return out


def positive_int(name: str, value, what: str = "") -> int:
    """`value` as an int, or a `ValueError` naming it."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"`{name}` must be a positive int{what}, got {value!r}.")
    return int(value)
