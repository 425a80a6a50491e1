"""`first_error`: several failure checks as one, each condition written next to
its message; `forward_mode_hint`: JAX's error for forward mode through a
reverse-mode solve, with the option that allows it."""

import contextlib
from collections.abc import Iterable, Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from equinox.internal import unvmap_max

from ._custom_types import ArrayLike, Bool


def first_error(x, checks: Iterable[tuple[Bool[ArrayLike, "..."], str]]):
    """`x`, with an error (also under `jax.jit`) whose message is that of the first
    condition in `checks` that holds.

    `checks` are `(condition, message)` pairs in priority order: a condition holds
    where any of its elements is true. One `eqx.branched_error_if` checks them all
    (one branch, also under `vmap`, where the message is that of the first
    condition that holds for any member). As with `eqx.error_if`, use the returned
    value, or the check is dead code.
    """
    checks = list(checks)
    if not checks:
        return x
    if not any(isinstance(c, jax.core.Tracer) for c, _ in checks):
        # Known values (an eager call): read them with NumPy rather than compile
        # a small program per operation. A failure takes the path below, so that
        # the error is equinox's, as under `jax.jit`.
        if not any(np.any(np.asarray(c)) for c, _ in checks):
            return x
    # Under vmap the message is that of the largest index in the batch: the first
    # condition gets the largest, a member without a failure 0. The index is
    # reduced over the batch once, here (`unvmap_max`), and the predicate read
    # off it: one reduction over the batch rather than one for the predicate and
    # one for the index.
    index = jnp.zeros((), jnp.int32)
    for i, (condition, _) in reversed(list(enumerate(checks))):
        index = jnp.where(jnp.any(condition), len(checks) - i, index)
    index = unvmap_max(index)
    messages = ["", *(message for _, message in reversed(checks))]
    return eqx.branched_error_if(x, index > 0, index, messages)


@contextlib.contextmanager
def forward_mode_hint(where: str) -> Iterator[None]:
    """Re-raise JAX's bare "can't apply forward-mode autodiff (jvp) to a
    custom_vjp function" (`jax.jvp`, `jax.jacfwd` through a solve whose adjoint
    is reverse mode only), naming the `adjoint` that supports forward mode."""
    try:
        yield
    except TypeError as error:
        if "forward-mode autodiff" not in str(error):
            raise
        raise TypeError(
            f"{error} `{where}` is differentiated in reverse mode (`jax.grad`) by "
            "its default adjoint: for `jax.jvp` or `jax.jacfwd` pass "
            "`adjoint=diffrax.ForwardMode()` (or `diffrax.DirectAdjoint()`)."
        ) from None
