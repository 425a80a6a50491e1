"""`first_error`: several failure checks as one, each condition written next to
its message."""

from collections.abc import Iterable

import equinox as eqx
import jax.numpy as jnp

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
    failed = jnp.stack([jnp.any(condition) for condition, _ in checks])
    any_failed = jnp.any(failed)
    # Under vmap `branched_error_if` raises the message of the largest index in
    # the batch: the first condition gets the largest, a member without a
    # failure the least.
    index = jnp.where(any_failed, len(checks) - 1 - jnp.argmax(failed), 0)
    messages = [message for _, message in reversed(checks)]
    return eqx.branched_error_if(x, any_failed, index, messages)
