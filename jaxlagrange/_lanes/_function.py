"""A traced function evaluated on lane vectors: `LaneFunction`, and the lanes of
a batched array (`to_lanes`) and back (`from_lanes`)."""

from collections.abc import Callable, Iterable

import jax
import jax.numpy as jnp
import numpy as np

from ._evaluator import Evaluator
from ._known import const_array, is_const, object_array


class LaneFunction:
    """`fn` traced once (one member), then evaluated lane by lane on object arrays."""

    def __init__(self, fn: Callable, *example_args):
        closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*example_args)
        self.jaxpr = closed.jaxpr
        self.consts = [np.asarray(c) for c in closed.consts]
        self.in_tree = jax.tree.structure(example_args)
        self.out_shape = out_shape
        self.out_tree = jax.tree.structure(out_shape)

    def __call__(self, *lane_args):
        leaves = self.in_tree.flatten_up_to(lane_args)
        (first,) = [e for leaf in leaves for e in leaf.flat if not is_const(e)][:1]
        outs = Evaluator(first.shape).eval_jaxpr(
            self.jaxpr, [const_array(c) for c in self.consts], leaves
        )
        return jax.tree.unflatten(self.out_tree, outs)


def to_lanes(x: jax.Array) -> np.ndarray:
    """(block, *shape) array → object array of shape `shape` of (block,) lanes."""
    return object_array(x.shape[1:], lambda index: x[(slice(None), *index)])


def lanes_of(elements: Iterable, block: int, dtype) -> list[jax.Array]:
    """Each element as a (block,) lane of `dtype` (a known one broadcast)."""
    return [
        jnp.full((block,), e, dtype) if is_const(e) else e.astype(dtype)
        for e in elements
    ]


def from_lanes(lanes: np.ndarray, block: int, dtype) -> jax.Array:
    """The inverse of `to_lanes` (known elements are broadcast)."""
    if not lanes.size:
        return jnp.zeros((block, *lanes.shape), dtype)
    flat = lanes_of(lanes.flat, block, dtype)
    return jnp.stack(flat, axis=-1).reshape(block, *lanes.shape)
