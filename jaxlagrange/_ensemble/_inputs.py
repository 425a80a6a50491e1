"""The inputs of a batch: batched params and states, and the batch size they
agree on (shared by `simulate_batch` and the sweeps)."""

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Params
from .._errors import traced


def override(base: Params, new: Params, size: int, path: str = "params") -> Params:
    """Check that `new` batches `base` (or a sub-dict of it) along a leading axis."""
    if isinstance(new, Mapping) and isinstance(base, Mapping):
        out = {}
        for key, value in new.items():
            if key not in base:
                raise ValueError(
                    f"`{path}` has an unknown key {key!r}; the system's params are: "
                    f"{', '.join(map(str, base))}."
                )
            out[key] = override(base[key], value, size, f"{path}[{key!r}]")
        return out
    new = jax.tree.map(jnp.asarray, new)
    base_leaves, base_tree = jax.tree.flatten(base)
    new_leaves, new_tree = jax.tree.flatten(new)
    if new_tree != base_tree:
        raise ValueError(
            f"`{path}` must have the structure of the system's params, {base_tree}, "
            f"with a leading batch axis on every leaf; got {new_tree}."
        )
    for b, n in zip(base_leaves, new_leaves, strict=True):
        expected = (size, *jnp.shape(b))
        if n.shape != expected:
            raise ValueError(
                f"`{path}` leaves must have shape (batch, *shape of the system's "
                f"leaf) = {expected}, got {n.shape}."
            )
    return jax.tree.map(lambda b, n: n.astype(jnp.result_type(b, float)), base, new)


def as_arrays(base: Params, new: Params) -> Params:
    """`new` with lists and tuples that stand for array leaves of `base` made arrays."""
    if isinstance(new, Mapping) and isinstance(base, Mapping):
        return {k: as_arrays(base[k], v) if k in base else v for k, v in new.items()}
    if isinstance(new, (list, tuple)) and isinstance(
        base, (jax.Array, np.ndarray, np.generic, float, int)
    ):
        return jnp.asarray(new) if traced(new) else np.asarray(new)
    return new


def merge(base: Params, new: Params) -> Params:
    """One member's params: `base` with the leaves of `new` put in."""
    if isinstance(new, Mapping) and isinstance(base, Mapping):
        return {**base, **{k: merge(base[k], v) for k, v in new.items()}}
    return new


def batch_size(system, q0, qd0, params: Params) -> int:
    """The batch size the states (arrays or shapes) and batched params agree on."""
    for x, name in ((q0, "q0"), (qd0, "qd0")):
        if x.ndim not in (1, 2):
            raise ValueError(
                f"`{name}` must have shape (n,) or (batch, n), got shape {x.shape}."
            )
    if params is not None and not system.has_params:
        raise ValueError("`params` was given but the system has no params.")
    sizes = {name: x.shape[0] for x, name in ((q0, "q0"), (qd0, "qd0")) if x.ndim == 2}
    for path, leaf in jax.tree_util.tree_leaves_with_path(params):
        shape = leaf.shape if hasattr(leaf, "shape") else np.shape(leaf)
        if len(shape) == 0:
            raise ValueError(
                f"`params{jax.tree_util.keystr(path)}` is a scalar; batched params "
                "need a leading batch axis."
            )
        sizes[f"params{jax.tree_util.keystr(path)}"] = shape[0]
    if not sizes:
        raise ValueError(
            "`simulate_batch` got nothing batched: give q0 or qd0 of shape (batch, n), "
            "or `params` with a leading batch axis (for one system use `simulate`)."
        )
    size = one_size(sizes, "The batch sizes disagree")
    if q0.shape[-1] != qd0.shape[-1]:
        raise ValueError(
            f"q0 and qd0 must have the same number of coordinates, got q0 {q0.shape} "
            f"and qd0 {qd0.shape}."
        )
    return size


def one_size(sizes: dict[str, int | None], disagree: str) -> int:
    """The one batch size of the named `sizes` (None: no batch axis), else an error."""
    if None in sizes.values() or len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in sizes.items())
        raise ValueError(f"{disagree}: {listed}.")
    (size,) = set(sizes.values())
    if size == 0:
        raise ValueError("The batch is empty (batch size 0).")
    return size
