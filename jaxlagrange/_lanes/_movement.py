"""Data movement on object arrays of lanes, resolved at trace time: NumPy
rearrangements of the object array, the primitive applied to the elements' ids,
and where each update of a scatter at known indices lands."""

import math
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.lax import GatherScatterMode

from ._known import (
    UnsupportedPrimitiveError,
    eager,
    is_const,
    known_values,
    object_array,
)


# Pure data movement: outputs that are copies of the data operands (all of a
# concatenation's, the first two of a pad or update, else the first); the other
# operands are indices, needed at trace time.
MOVEMENT = frozenset(
    """broadcast_in_dim reshape squeeze expand_dims transpose rev slice pad concatenate
    stack split tile unstack gather dynamic_slice dynamic_update_slice""".split()
)


def _fill_value(value, dtype) -> np.generic:
    """What a gather reads out of bounds: `value`, or `jax.lax.gather`'s default."""
    dtype = np.dtype(dtype)
    if value is None:
        if np.issubdtype(dtype, np.inexact):
            value = np.nan
        elif np.issubdtype(dtype, np.signedinteger):
            value = np.iinfo(dtype).min
        elif np.issubdtype(dtype, np.unsignedinteger):
            value = np.iinfo(dtype).max
        else:
            value = True
    return np.asarray(value, dtype)[()]


def numpy_movement(name, operands, params) -> list[np.ndarray] | None:
    """The common data-movement primitives on object arrays, or None."""
    x = operands[0]
    if name == "broadcast_in_dim":
        shape, dims = params["shape"], params["broadcast_dimensions"]
        expanded = [1] * len(shape)
        for i, d in enumerate(dims):
            expanded[d] = x.shape[i]
        return [np.broadcast_to(x.reshape(expanded), shape).copy()]
    if name == "reshape":
        if params.get("dimensions") is not None:
            return None
        return [x.reshape(params["new_sizes"])]
    if name == "squeeze":
        return [np.squeeze(x, tuple(params["dimensions"]))]
    if name == "expand_dims":
        return [np.expand_dims(x, params["dimensions"])]
    if name == "transpose":
        return [np.transpose(x, params["permutation"])]
    if name == "rev":
        return [np.flip(x, params["dimensions"]).copy()]
    if name == "slice":
        starts, limits = params["start_indices"], params["limit_indices"]
        strides = params["strides"] or (1,) * x.ndim
        return [x[tuple(map(slice, starts, limits, strides))]]
    if name == "concatenate":
        return [np.concatenate(operands, axis=params["dimension"])]
    if name == "stack":
        return [np.stack(operands, axis=params["axis"])]
    if name == "unstack":
        moved = np.moveaxis(x, params["axis"], 0)
        return [moved[i, ...].copy() for i in range(moved.shape[0])]
    if name == "tile":
        return [np.tile(x, params["reps"])]
    if name == "split":
        cuts = np.cumsum(params["sizes"])[:-1]
        return list(np.split(x, cuts, axis=params["axis"]))
    if name == "pad":
        config = params["padding_config"]
        if any(lo < 0 or hi < 0 for lo, hi, _ in config):
            return None
        (value,) = operands[1].flat
        shape = [
            lo + hi + s + max(s - 1, 0) * interior
            for (lo, hi, interior), s in zip(config, x.shape, strict=True)
        ]
        out = np.empty(shape, dtype=object)
        out.fill(value)
        index = tuple(
            slice(lo, lo + s + max(s - 1, 0) * interior, interior + 1)
            for (lo, _, interior), s in zip(config, x.shape, strict=True)
        )
        out[index] = x
        return [out]
    return None


def move(prim, operands, params, dtype) -> list[np.ndarray]:
    """Data movement applied to the elements' ids (`dtype`: the data's)."""
    moved = numpy_movement(prim.name, operands, params)
    if moved is not None:
        return moved
    data = [0]
    if prim.name in ("concatenate", "stack"):
        data = range(len(operands))
    elif prim.name in ("pad", "dynamic_update_slice"):
        data = [0, 1]
    pool: list[Any] = []
    id_args = []
    for i, o in enumerate(operands):
        if i in data:
            ids = np.arange(len(pool), len(pool) + o.size, dtype=np.int64)
            pool.extend(o.flat)
            id_args.append(ids.reshape(o.shape))
        else:
            if not all(is_const(e) for e in o.flat):
                raise _state_dependent(prim.name)
            id_args.append(known_values(o))
    if prim.name == "pad":
        id_args[1] = np.asarray(id_args[1], np.int64)
    if prim.name == "gather" and params["mode"] == GatherScatterMode.FILL_OR_DROP:
        # An index out of bounds reads the fill value: id -1, the pool's last.
        pool.append(_fill_value(params["fill_value"], dtype))
        params = {**params, "fill_value": -1}
    out = eager(prim, id_args, params)
    outs = out if prim.multiple_results else [out]
    return [object_array(ids.shape, lambda k, ids=ids: pool[ids[k]]) for ids in outs]


def _state_dependent(name: str) -> UnsupportedPrimitiveError:
    return UnsupportedPrimitiveError(
        f"The fused ensemble kernel needs the indices of {name!r} at trace time; "
        "here they depend on the state or params."
    )


# Scatters: how an update combines with the operand's element (None: replaces it).
SCATTERS = {
    "scatter": None,
    "scatter-add": jax.lax.add_p,
    "scatter-sub": jax.lax.sub_p,
    "scatter-mul": jax.lax.mul_p,
    "scatter-min": jax.lax.min_p,
    "scatter-max": jax.lax.max_p,
}


def scatter_targets(name, operand_shape, indices, updates_shape, params) -> np.ndarray:
    """Where each scatter update lands in the operand, flat (-1: out of bounds)."""
    if not all(is_const(e) for e in indices.flat):
        raise _state_dependent(name)
    if name == "scatter" and params.get("update_jaxpr") is not None:
        # `scatter_apply`: a function applied at the indices, not a replacement.
        raise UnsupportedPrimitiveError(
            "The fused ensemble kernel cannot evaluate a scatter that applies a "
            "function ('scatter' with an update_jaxpr)."
        )
    size = math.prod(updates_shape)
    indices = known_values(indices)

    def lands(one_hot):
        return jax.lax.scatter_add(
            jnp.zeros(operand_shape, jnp.int32),
            jnp.asarray(indices),
            one_hot,
            params["dimension_numbers"],
            indices_are_sorted=params["indices_are_sorted"],
            unique_indices=params["unique_indices"],
            mode=params["mode"],
        )

    one_hots = np.eye(size, dtype=np.int32).reshape(size, *updates_shape)
    with jax.ensure_compile_time_eval():
        hits = np.asarray(jax.vmap(lands)(jnp.asarray(one_hots))).reshape(size, -1)
    targets = np.full(size, -1, np.int64)
    rows, cols = np.nonzero(hits)
    targets[rows] = cols
    return targets
