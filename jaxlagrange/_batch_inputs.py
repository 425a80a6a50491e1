"""The inputs of a batch: `simulate`'s options, batched params and states, and the
batch size they agree on (shared by `simulate_batch` and the sweeps)."""

import inspect
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array, Params
from ._errors import traced
from ._simulate import check_times, check_tolerance, simulate


# Options of `simulate` that `simulate_batch` forwards; `throw` is handled here.
def _simulate_options() -> tuple[str, ...]:
    parameters = inspect.signature(simulate).parameters.values()
    return tuple(
        p.name
        for p in parameters
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name != "throw"
    )


def check_options(options: Mapping[str, Any], where: str) -> None:
    """Unknown options, a missing `t1`, and the known times and tolerances that
    `simulate` would refuse: named with their values here, before anything is
    compiled (or a sweep's store made). Traced ones are checked in the program."""
    valid = _simulate_options()
    for key in options:
        if key not in valid:
            raise ValueError(
                f"`{where}` got an unknown option {key!r}; the options of "
                f"`simulate` are: {', '.join(valid)}."
            )
    if "t1" not in options:
        raise ValueError(f"`{where}` needs `t1`, the end time (as `simulate` does).")
    saveat = options.get("saveat")
    check_times(
        options.get("t0", 0.0),
        options["t1"],
        jnp.asarray(saveat) if isinstance(saveat, list) else saveat,
        jnp.result_type(float),
    )
    for name in ("rtol", "atol"):
        if options.get(name) is not None:
            check_tolerance(name, options[name])


def split_options(simulate_options: Mapping[str, Any]) -> tuple[Any, Any]:
    """`simulate`'s options as a sorted tuple of (name, value) pairs, split into
    its arrays and the rest, which is static (hashed for the compilation cache).

    Lists (e.g. `saveat=[...]`) become arrays. `joined_options` undoes it.
    """
    options = tuple(
        sorted(
            (k, jnp.asarray(v) if isinstance(v, list) else v)
            for k, v in simulate_options.items()
        )
    )
    return eqx.partition(options, eqx.is_array)


def joined_options(dyn_options, static_options) -> dict[str, Any]:
    """The keyword options of `simulate`, from the two parts of `split_options`."""
    return dict(eqx.combine(dyn_options, static_options))


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
    """`new` with each list or tuple that stands for an array leaf of `base` made
    an array (`params={"g": [9.8, 1.6]}`), rather than read as a pytree."""
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


def batch_size(q0: Array, qd0: Array, params: Params) -> int:
    sizes = {}
    if q0.ndim == 2:
        sizes["q0"] = q0.shape[0]
    if qd0.ndim == 2:
        sizes["qd0"] = qd0.shape[0]
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
    if len(set(sizes.values())) > 1:
        listed = ", ".join(f"{k} {v}" for k, v in sizes.items())
        raise ValueError(f"The batch sizes disagree: {listed}.")
    (size,) = set(sizes.values())
    if size == 0:
        raise ValueError("The batch is empty (batch size 0).")
    return size


def check_state(x: Array, name: str) -> Array:
    if x.ndim not in (1, 2):
        raise ValueError(
            f"`{name}` must have shape (n,) or (batch, n), got shape {x.shape}."
        )
    return x
