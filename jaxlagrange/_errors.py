"""Checks written once: `first_error` raises at once when its conditions are
known at trace time and is an `eqx.branched_error_if` when they are traced;
`traced` and `known` are the package's one test for a traced value.
`forward_mode_hint`: JAX's error for forward mode through a reverse-mode solve,
with the option that allows it."""

import contextlib
from collections.abc import Iterator

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from equinox.internal import unvmap_max


def traced(*trees) -> bool:
    """Whether any leaf of `trees` is traced (its value unknown at trace time)."""
    return any(isinstance(x, jax.core.Tracer) for x in jtu.tree_leaves(trees))


def one_line(error: BaseException, *, typed: bool = False) -> str:
    """An error message's first line (else its type), after its type if `typed`."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    return f"{type(error).__name__}: {lines[0]}" if typed else lines[0]


def known(x) -> np.ndarray | None:
    """`x` as a NumPy array if its value is known at trace time, else None."""
    return None if traced(x) else np.asarray(x)


def first_error(x, checks, *, error: type[Exception] | None = None):
    """`x`, with an error (also under `jax.jit`): the first of `checks` that holds."""
    # `checks`: (condition, message) pairs in priority order. A message may be
    # (template, detail): `detail()` (which may read values) fills the `{}` when
    # the conditions are known, "" when traced. As with `eqx.error_if`, use the
    # returned value, or the check is dead code.
    checks = [(c, (m, None) if isinstance(m, str) else m) for c, m in checks]
    if not checks:
        return x
    if not traced([c for c, _ in checks]):
        # Known values (an eager call): read them with NumPy rather than compile
        # a small program per operation.
        holds = [np.any(np.asarray(c)) for c, _ in checks]
        if not any(holds):
            return x
        if error is not None:
            message, detail = checks[holds.index(True)][1]
            raise error(message if detail is None else message.format(detail()))
        # Else the path below, so that the error is equinox's, as under `jax.jit`.
    # Under vmap the message is that of the largest index in the batch: the first
    # condition gets the largest, a member without a failure 0. The index is
    # reduced over the batch once, here (`unvmap_max`), and the predicate read
    # off it: one reduction over the batch rather than one for the predicate and
    # one for the index.
    index = jnp.zeros((), jnp.int32)
    for i, (condition, _) in reversed(list(enumerate(checks))):
        index = jnp.where(jnp.any(condition), len(checks) - i, index)
    index = unvmap_max(index)
    messages = [m if d is None else m.format("") for _, (m, d) in checks]
    messages = ["", *reversed(messages)]
    return eqx.branched_error_if(x, index > 0, index, messages)


@contextlib.contextmanager
def forward_mode_hint(where: str) -> Iterator[None]:
    """Re-raise JAX's bare jvp-of-custom_vjp error naming a forward-mode `adjoint`."""
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
