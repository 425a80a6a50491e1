"""Type aliases shared by the public signatures."""

from collections.abc import Callable, Sequence
from typing import Any

from jaxtyping import (
    Array as Array,
    ArrayLike as ArrayLike,
    Bool as Bool,
    Float as Float,
    Int as Int,
    PyTree,
)


Params = PyTree[Any]
Scalar = Float[Array, ""]
# Inputs are read through `jnp.asarray`: a Python int time or a list state is
# accepted as well as float arrays (checked with `--jaxtyping-packages`).
ScalarLike = Float[ArrayLike, ""] | int
Vector = Float[Array, " n"]
VectorLike = Float[ArrayLike, " n"] | Sequence[ScalarLike]
Matrix = Float[Array, "n n"]
BoolScalar = Bool[Array, ""]
UserFunction = Callable[..., Any]
