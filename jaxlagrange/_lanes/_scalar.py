"""One state's equations of motion as scalar code: `scalar_form(fn, *args)`
evaluates `fn` by the lane evaluator with lanes of shape (), so that under
`vmap` XLA compiles one loop over the batch, with no pads and slices of (n,)
arrays cutting it apart (docs/performance.md). `_eom.scalar_where_small` uses
it for q̈ up to the dense strategy's `unroll`, constrained or not.

Primitives with no scalar form (a loop whose length depends on the state, a
custom derivative rule, a `cond` on a traced predicate, ...) are bound as they
are, on operands assembled into arrays, keeping their semantics and derivative
rules. A program too large to write out, or one that does not collapse when
written out, is left to the caller's array form (None).
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .._errors import traced
from ._evaluator import CALLS, Evaluator
from ._known import UnsupportedPrimitiveError, const_array, is_const, object_array


# The most scalar operations `scalar_form` writes out (the size of the traced
# program, counted in elements); a larger program keeps its array form.
MAX_SCALAR_OPS = 20_000

# The scalar form is kept when it emits at most this fraction of the array
# program's element operations (and at most `MAX_EMITTED` operations). The
# equations of physical systems collapse when written out (the tangent basis
# folds away, sin and cos are shared): 0.04-0.27 of the array program on the
# ready systems, 2-4x faster under vmap. A learned Lagrangian (an MLP, dense
# weights) does not: 0.4 of it for a width-8 MLP and 1.7 for width 32, 1.6x and
# 25x slower than its batched matrix products, and slow to compile.
MAX_EMITTED_FRACTION = 0.35
MAX_EMITTED = 8_000


class _TooLarge(Exception):
    pass


# Bound whole: their derivative rules (custom_jvp, custom_vjp) or their size
# (loops) are theirs to keep.
_BOUND = frozenset(
    """custom_jvp_call custom_vjp_call custom_vjp_call_jaxpr custom_lin while scan
    platform_index""".split()
)


def _elements(x) -> np.ndarray:
    """An array as an object array of its scalars (NumPy scalars if known)."""
    if not traced(x):
        return const_array(np.asarray(x))
    x = jnp.asarray(x)
    return object_array(x.shape, lambda index: x[index] if x.ndim else x)


def _assemble(elements: np.ndarray, aval) -> jax.Array:
    """The inverse of `_elements`, for a value of shape and dtype `aval`."""
    if elements.size == 0:
        return jnp.zeros(aval.shape, aval.dtype)
    flat = [jnp.asarray(e, aval.dtype) for e in elements.flat]
    if not aval.shape:
        return flat[0]
    return jnp.stack(flat).reshape(aval.shape)


class _ScalarEvaluator(Evaluator):
    """The lane evaluator on scalars, binding what has no scalar form as is."""

    def __init__(self, budget: int):
        super().__init__(())
        self.budget = budget  # operations emitted before giving up
        self.emitted = 0  # by `bound`; those of `apply` are the memo's entries

    def eqn(self, eqn, operands):
        if self.emitted + len(self.memo) > self.budget:
            raise _TooLarge
        name = eqn.primitive.name
        known = all(is_const(e) for o in operands for e in o.flat)
        if name in _BOUND and not known:
            return self.bound(eqn, operands)
        if name == "cond" and not is_const(operands[0].flat[0]):
            # Both branches and a select would differentiate the branch not
            # taken too (NaN gradients of a guarded sqrt): keep the cond.
            return self.bound(eqn, operands)
        try:
            return super().eqn(eqn, operands)
        except (UnsupportedPrimitiveError, ValueError, TypeError):
            # No scalar form (or params the lane evaluator does not take): the
            # primitive as it is, which only the kernel cannot do.
            return self.bound(eqn, operands)

    def platform_branch(self, platforms):
        # Scalar code runs where XLA compiles it: a branch for a named platform
        # may be the one, so the choice is left to XLA (bound); a default beside
        # Pallas's Mosaic branch only (jnp.diag's) is the one.
        if any(p is not None and set(p) != {"mosaic"} for p in platforms):
            raise UnsupportedPrimitiveError("platform-dependent code")
        return super().platform_branch(platforms)

    def bound(self, eqn, operands):
        arrays = [
            _assemble(o, v.aval) for o, v in zip(operands, eqn.invars, strict=True)
        ]
        # The primitive's own work is not counted: it is the array form's.
        self.emitted += sum(o.size for o in operands) + sum(
            int(np.prod(v.aval.shape)) for v in eqn.outvars
        )
        outs = eqn.primitive.bind(*arrays, **eqn.primitive.get_bind_params(eqn.params))
        if not eqn.primitive.multiple_results:
            outs = [outs]
        return [_elements(o) for o in outs]


def _size(jaxpr) -> int:
    """Scalar operations of a jaxpr written out (calls inlined, loops bound)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += sum(int(np.prod(v.aval.shape)) for v in eqn.outvars)
        if eqn.primitive.name in _BOUND:
            continue
        inner = [eqn.params.get(k) for k in CALLS] + [*eqn.params.get("branches", ())]
        total += sum(_size(getattr(j, "jaxpr", j)) for j in inner if j is not None)
    return total


def scalar_form(fn: Callable, *args: Any) -> Any:
    """`fn(*args)` for one state, evaluated as scalar code; None if too large."""
    # Equal to rounding only: sums may be associated differently.
    flat, tree = jax.tree.flatten(args)

    def flat_fn(*flat):
        return fn(*jax.tree.unflatten(tree, flat))

    closed, out_shape = jax.make_jaxpr(flat_fn, return_shape=True)(*flat)
    size = _size(closed.jaxpr)
    if size > MAX_SCALAR_OPS:
        return None
    evaluator = _ScalarEvaluator(min(MAX_EMITTED, int(MAX_EMITTED_FRACTION * size)))
    try:
        outs = evaluator.eval_jaxpr(
            closed.jaxpr,
            [_elements(c) for c in closed.consts],
            [_elements(x) for x in flat],
        )
    except _TooLarge:
        return None  # what was emitted is unused, and dropped as dead code
    out_leaves, out_tree = jax.tree.flatten(out_shape)
    arrays = [_assemble(o, s) for o, s in zip(outs, out_leaves, strict=True)]
    return jax.tree.unflatten(out_tree, arrays)
