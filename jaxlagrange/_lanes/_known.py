"""Values known at trace time (NumPy scalars in object arrays), evaluated by NumPy
or eagerly and folded; and the evaluator's error, `UnsupportedPrimitiveError`."""

from collections.abc import Callable
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


def object_array(shape, element: Callable) -> np.ndarray:
    """An object array of `shape` holding `element(index)` at each index."""
    out = np.empty(shape, dtype=object)
    for index in np.ndindex(shape):
        out[index] = element(index)
    return out


def const_array(value, dtype=None) -> np.ndarray:
    """A value known at trace time as an object array of NumPy scalars."""
    value = np.asarray(value, dtype=dtype)
    return object_array(value.shape, value.__getitem__)


def known_values(o: np.ndarray, dtype=None) -> np.ndarray:
    """A known object array as a NumPy array (by default of its first element's dtype)."""
    if not o.size:
        return np.zeros(o.shape, np.int64 if dtype is None else dtype)
    dtype = np.asarray(o.flat[0]).dtype if dtype is None else dtype
    return np.asarray(list(o.flat), dtype=dtype).reshape(o.shape)


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
    "div": np.divide,
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
    bitwise = name in ("and", "or", "not") and dtype != np.bool_
    truncating = name == "div" and not np.issubdtype(dtype, np.floating)
    with np.errstate(all="ignore"):
        if name in _NUMPY and not (bitwise or truncating):
            return np.asarray(_NUMPY[name](*values)).astype(dtype)
        if name == "integer_pow":
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


def known(prim, values, params, dtype):
    """A primitive of known values: by NumPy where it can, else eagerly."""
    out = numpy_elementwise(prim.name, values, params, dtype)
    return eager(prim, values, params) if out is None else out


def dtype_of(element, default):
    if element is None:
        return np.dtype(default)
    return np.asarray(element).dtype if is_const(element) else np.dtype(element.dtype)


def fold(name: str, elements) -> Any:
    """x·1, x + 0, x − 0, x·0 and a select with a known predicate, or None."""
    if name in ("mul", "add", "add_any", "sub", "div") and len(elements) == 2:
        a, b = elements
        ka, kb = is_const(a), is_const(b)
        const, lane = (a, b) if ka else (b, a)
        if ka == kb or np.asarray(const).dtype != lane.dtype:
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
