"""Type aliases shared by the public signatures."""

from collections.abc import Callable
from typing import Any

from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree


Params = PyTree[Any]
Scalar = Float[Array, ""]
ScalarLike = Float[ArrayLike, ""]
Vector = Float[Array, " n"]
VectorLike = Float[ArrayLike, " n"]
Matrix = Float[Array, "n n"]
BoolScalar = Bool[Array, ""]
UserFunction = Callable[..., Any]

__all__ = [
    "Array",
    "ArrayLike",
    "BoolScalar",
    "Float",
    "Int",
    "Matrix",
    "Params",
    "Scalar",
    "ScalarLike",
    "UserFunction",
    "Vector",
    "VectorLike",
]
