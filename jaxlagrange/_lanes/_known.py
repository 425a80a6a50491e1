"""Values known at trace time, for the lane evaluator: NumPy scalars in object arrays.

What the lane evaluator computes without emitting any operation: constants
(literals, iotas, the tangent basis of the mass matrix), evaluated by NumPy or
eagerly, and the folding of x·1, x + 0 and x·0. (Data movement is `_movement`.)
Also the evaluator's error, `UnsupportedPrimitiveError`.
"""

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class UnsupportedPrimitiveError(ValueError):
    """The traced equations have no lane-wise form: `"auto"` falls back to vmap."""

    def __init__(self, message: str):
        super().__init__(f"{message} Use backend='vmap', which supports it.")


def is_const(x) -> bool:
    return isinstance(x, (np.generic, np.ndarray))


def const_array(value, dtype=None) -> np.ndarray:
    """A value known at trace time as an object array of NumPy scalars."""
    value = np.asarray(value, dtype=dtype)
    out = np.empty(value.shape, dtype=object)
    for index in np.ndindex(value.shape):
        out[index] = value[index]
    return out


def eager(prim, args, params):
    with jax.ensure_compile_time_eval():
        out = prim.bind(*[jnp.asarray(a) for a in args], **params)
    if prim.multiple_results:
        return [np.asarray(o) for o in out]
    return np.asarray(out)


_NUMPY = {
    "add": np.add,
    "add_any": np.add,
    "sub": np.subtract,
    "mul": np.multiply,
    "neg": np.negative,
    "max": np.maximum,
    "min": np.minimum,
    "abs": np.abs,
    "sqrt": np.sqrt,
    "sin": np.sin,
    "cos": np.cos,
    "exp": np.exp,
    "log": np.log,
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
    "and": np.logical_and,
    "or": np.logical_or,
    "not": np.logical_not,
    "square": np.square,
}


def numpy_elementwise(name, values, params, dtype):
    """A known elementwise result by NumPy (no XLA compilation), or None."""
    if name in _NUMPY and not (name in ("and", "or", "not") and dtype != np.bool_):
        with np.errstate(all="ignore"):
            return np.asarray(_NUMPY[name](*values)).astype(dtype)
    if name == "div" and np.issubdtype(dtype, np.floating):
        with np.errstate(all="ignore"):
            return np.asarray(np.divide(*values)).astype(dtype)
    if name == "integer_pow":
        with np.errstate(all="ignore"):
            return np.asarray(values[0] ** params["y"]).astype(dtype)
    if name == "convert_element_type":
        return np.asarray(values[0]).astype(params["new_dtype"])
    if name == "select_n":
        return np.asarray(np.choose(np.asarray(values[0], int), values[1:])).astype(
            dtype
        )
    if name == "iota":
        shape, dimension = params["shape"], params["dimension"]
        out = np.arange(shape[dimension], dtype=params["dtype"])
        out = out.reshape([-1 if i == dimension else 1 for i in range(len(shape))])
        return np.broadcast_to(out, shape)
    return None


def dtype_of(element, default):
    if element is None:
        return np.dtype(default)
    return np.asarray(element).dtype if is_const(element) else np.dtype(element.dtype)


def fold(name: str, elements) -> Any:
    """x·1, x + 0, x − 0, x·0 and a select with a known predicate, or None."""
    if name in ("mul", "add", "add_any", "sub", "div") and len(elements) == 2:
        a, b = elements
        ka, kb = is_const(a), is_const(b)
        lane = b if ka else a
        const = a if ka else b
        if ka == kb:
            return None
        if np.asarray(const).dtype != lane.dtype:
            return None
        if name == "mul" and const == 1:
            return lane
        if name == "mul" and const == 0:
            return const
        if name in ("add", "add_any") and const == 0:
            return lane
        if name in ("sub", "div") and kb and const == (0 if name == "sub" else 1):
            return lane
    if name == "select_n" and is_const(elements[0]):
        return elements[1 + int(elements[0])]
    return None
