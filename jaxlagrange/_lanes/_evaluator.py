"""The lane evaluator: a jaxpr evaluated with each value an object array of lanes,
each primitive applied element by element (common subexpressions emitted once,
known values folded) or written out; what has no such form is an
`UnsupportedPrimitiveError`, which a subclass may bind instead (the scalar form).
"""

import functools
import itertools
import math
from collections.abc import Sequence
from typing import Any

import jax
import jax.extend.core as jcore
import jax.numpy as jnp
import numpy as np

from ._known import (
    UnsupportedPrimitiveError,
    const_array,
    dtype_of,
    fold,
    is_const,
    known,
    known_values,
    object_array,
)
from ._movement import MOVEMENT, SCATTERS, move, numpy_movement, scatter_targets


# Primitives applied element by element (their operands all have one shape).
_ELEMENTWISE = frozenset(
    """abs acos acosh add add_any and asin asinh atan atan2 atanh cbrt ceil clamp
    convert_element_type copysign cos cosh digamma div eq erf erf_inv erfc exp exp2
    expm1 floor ge gt imag integer_pow is_finite le lgamma log log1p logistic lt max
    min mul ne neg nextafter not or pow real reduce_precision rem round rsqrt
    select_n sign sin sinh sqrt square sub tan tanh xor copy copy_p
    stop_gradient optimization_barrier""".split()
)

# The params that hold a called jaxpr.
CALLS = ("jaxpr", "call_jaxpr", "fun_jaxpr")

_CUMULATIVE = {
    "cumsum": jax.lax.add_p,
    "cumprod": jax.lax.mul_p,
    "cummax": jax.lax.max_p,
    "cummin": jax.lax.min_p,
}

# The params of a primitive the evaluator binds itself (the products and sums of
# dot_general, reductions and cumulative operations): those a traced jaxpr has.
# `mul`'s transpose rule reads its `out_dtype` (a `jax.grad` of the scalar
# form), and equal params let such a product share the memo with the jaxpr's.
_OWN_PARAMS = {"mul": {"out_dtype": None}}


_REDUCTIONS = {
    "reduce_sum": jax.lax.add_p,
    "reduce_max": jax.lax.max_p,
    "reduce_min": jax.lax.min_p,
    "reduce_prod": jax.lax.mul_p,
    "reduce_and": jax.lax.and_p,
    "reduce_or": jax.lax.or_p,
}


class Evaluator:
    def __init__(self, lane_shape: tuple[int, ...]):
        self.lane_shape = lane_shape
        # Common subexpressions: reverse and forward mode recompute the same
        # sin(q₁ − q₂) and products; each is computed once per evaluation.
        self.memo: dict = {}
        self.alive: list = []  # the memo's operands, so that their ids stay unique

    # One element: a NumPy scalar (known) or a lane array.
    def lane(self, x):
        if is_const(x):
            dtype = np.asarray(x).dtype
            key = ("full", dtype.str, x.item())
            if key not in self.memo:
                self.memo[key] = jnp.full(self.lane_shape, x, dtype)
            return self.memo[key]
        return x

    def _key(self, prim, elements, params):
        def element(e):
            if is_const(e):
                return ("c", np.asarray(e).dtype.str, np.asarray(e).item())
            return ("l", id(e))

        key = (prim.name, tuple(sorted(params.items())), tuple(map(element, elements)))
        try:
            hash(key)
        except TypeError:
            return None
        return key

    def apply(self, prim, elements: Sequence[Any], params) -> Any:
        folded = fold(prim.name, elements)
        if folded is not None:
            return folded
        if all(is_const(e) for e in elements):
            compare = ("eq", "ne", "lt", "le", "gt", "ge", "is_finite")
            dtype = np.bool_ if prim.name in compare else np.asarray(elements[-1]).dtype
            return known(prim, elements, params, dtype)[()]
        key = self._key(prim, elements, params)
        if key is not None and key in self.memo:
            return self.memo[key]
        out = prim.bind(*map(self.lane, elements), **params)
        if key is not None:
            self.memo[key] = out
            self.alive.append(elements)
        return out

    def elementwise(self, prim, operands: list[np.ndarray], params) -> np.ndarray:
        shape = np.broadcast_shapes(*[o.shape for o in operands])
        operands = [np.broadcast_to(o, shape) for o in operands]
        return object_array(
            shape, lambda index: self.apply(prim, [o[index] for o in operands], params)
        )

    def binary(self, prim, a, b):
        return self.apply(prim, [a, b], _OWN_PARAMS.get(prim.name, {}))

    def eval_closed(self, closed: jcore.ClosedJaxpr, args) -> list[np.ndarray]:
        return self.eval_jaxpr(closed.jaxpr, closed.consts, args)

    def eval_jaxpr(self, jaxpr: jcore.Jaxpr, consts, args) -> list[np.ndarray]:
        env: dict[Any, np.ndarray] = {}

        def read(v):
            if isinstance(v, jcore.Literal):
                return const_array(v.val, v.aval.dtype)
            return env[v]

        env.update(zip(jaxpr.constvars, map(const_array, consts), strict=True))
        env.update(zip(jaxpr.invars, args, strict=True))
        for eqn in jaxpr.eqns:
            outs = self.eqn(eqn, [read(v) for v in eqn.invars])
            for v, o in zip(eqn.outvars, outs, strict=True):
                if not isinstance(v, jcore.DropVar):
                    env[v] = o
        return [read(v) for v in jaxpr.outvars]

    def eqn(self, eqn, operands: list[np.ndarray]) -> list[np.ndarray]:
        prim, params = eqn.primitive, eqn.params
        name = prim.name
        all_known = all(is_const(e) for o in operands for e in o.flat)
        all_known = all_known and name != "platform_index"
        if all_known and not any(k in params for k in CALLS + ("branches",)):
            moved = numpy_movement(name, operands, params) if name in MOVEMENT else None
            if moved is not None:
                return moved
            vals = [
                known_values(o, v.aval.dtype)
                for o, v in zip(operands, eqn.invars, strict=True)
            ]
            dtype = eqn.outvars[0].aval.dtype if len(eqn.outvars) == 1 else None
            out = known(prim, vals, params, dtype)
            outs = out if prim.multiple_results else [out]
            return [const_array(o) for o in outs]
        if name in _ELEMENTWISE:
            return [self.elementwise(prim, operands, params)]
        if name in MOVEMENT:
            return move(prim, operands, params, eqn.invars[0].aval.dtype)
        if name in SCATTERS:
            return [self.scatter(name, *operands, params)]
        if name == "platform_index":
            return [const_array(self.platform_branch(params["platforms"]), np.int32)]
        if name in _REDUCTIONS:
            return [self.reduce(_REDUCTIONS[name], operands[0], params["axes"])]
        if name == "dot_general":
            return [self.dot_general(operands[0], operands[1], params)]
        if name in _CUMULATIVE:
            return [self.cumulative(_CUMULATIVE[name], operands[0], params)]
        control = {"cond": self.cond, "while": self.while_loop, "scan": self.scan}
        if name in control:
            return control[name](operands, params)
        for key in CALLS:
            if key in params:
                inner = params[key]
                if isinstance(inner, jcore.ClosedJaxpr):
                    return self.eval_closed(inner, operands)
                return self.eval_jaxpr(inner, [], operands)
        raise UnsupportedPrimitiveError(
            f"The fused ensemble kernel cannot evaluate the primitive {name!r} lane "
            "by lane (it appears in the equations of motion or the constraint "
            "projection of this system)."
        )

    def scatter(self, name, operand, indices, updates, params):
        targets = scatter_targets(name, operand.shape, indices, updates.shape, params)
        combine = SCATTERS[name]
        out = operand.copy().reshape(-1)
        for target, update in zip(targets, updates.flat, strict=True):
            if target >= 0:
                out[target] = (
                    update
                    if combine is None
                    else self.binary(combine, out[target], update)
                )
        return out.reshape(operand.shape)

    def platform_branch(self, platforms) -> int:
        # `lax.platform_dependent` (jnp.diag's diagonal, for one): its branches
        # compute the same; the default is the one for code that is neither
        # Mosaic's nor any named platform's, as lane code is.
        if None not in platforms:
            raise UnsupportedPrimitiveError(
                "The fused ensemble kernel cannot evaluate platform-dependent code "
                f"with no default branch (branches for {platforms})."
            )
        return platforms.index(None)

    def reduce(self, prim, operand, axes):
        moved = np.moveaxis(operand, tuple(axes), tuple(range(len(axes))))
        flat = moved.reshape((-1, *moved.shape[len(axes) :]))
        chain = functools.partial(self.binary, prim)
        return object_array(
            flat.shape[1:],
            lambda index: functools.reduce(chain, flat[(slice(None), *index)]),
        )

    def cumulative(self, prim, operand, params):
        moved = np.moveaxis(operand, params["axis"], 0)
        order = list(range(moved.shape[0]))[:: -1 if params["reverse"] else 1]
        out = moved.copy()
        own = _OWN_PARAMS.get(prim.name, {})
        for before, i in itertools.pairwise(order):
            out[i, ...] = self.elementwise(prim, [out[before, ...], moved[i, ...]], own)
        return np.moveaxis(out, 0, params["axis"])

    def dot_general(self, lhs, rhs, params):
        (lc, rc), (lb, rb) = params["dimension_numbers"]
        lf = [d for d in range(lhs.ndim) if d not in lc and d not in lb]
        rf = [d for d in range(rhs.ndim) if d not in rc and d not in rb]
        a = np.transpose(lhs, (*lb, *lf, *lc))
        b = np.transpose(rhs, (*rb, *rc, *rf))
        nb = math.prod(lhs.shape[d] for d in lb)
        nk = math.prod(lhs.shape[d] for d in lc)
        ni = math.prod(lhs.shape[d] for d in lf)
        nj = math.prod(rhs.shape[d] for d in rf)
        a = a.reshape(nb, ni, nk)
        b = b.reshape(nb, nk, nj)
        out = np.empty((nb, ni, nj), dtype=object)
        dtype = params.get("preferred_element_type")
        mul = functools.partial(self.binary, jax.lax.mul_p)
        add = functools.partial(self.binary, jax.lax.add_p)
        for bi in range(nb):
            for i in range(ni):
                for j in range(nj):
                    acc = None
                    for k in range(nk):
                        term = mul(a[bi, i, k], b[bi, k, j])
                        if not (is_const(term) and term == 0):
                            acc = term if acc is None else add(acc, term)
                    if acc is None:
                        acc = np.zeros(
                            (), dtype_of(a[bi, i, 0] if nk else None, dtype)
                        )[()]
                    out[bi, i, j] = acc
        shape = (
            *[lhs.shape[d] for d in lb],
            *[lhs.shape[d] for d in lf],
            *[rhs.shape[d] for d in rf],
        )
        out = out.reshape(shape)
        if dtype is not None and any(dtype_of(e, None) != dtype for e in out.flat):
            new = {"new_dtype": dtype, "weak_type": False, "sharding": None}
            out = self.elementwise(jax.lax.convert_element_type_p, [out], new)
        return out

    def cond(self, operands, params):
        index, *args = operands
        branches = params["branches"]
        (idx,) = index.flat
        if is_const(idx):
            return self.eval_closed(branches[int(idx)], args)
        results = [self.eval_closed(b, args) for b in branches]
        return [
            object_array(
                out.shape,
                lambda i, k=k: self.apply(
                    jax.lax.select_n_p, [idx, *[r[k][i] for r in results]], {}
                ),
            )
            for k, out in enumerate(results[0])
        ]

    def while_loop(self, operands, params):
        cn, bn = params["cond_nconsts"], params["body_nconsts"]
        cconsts, bconsts = operands[:cn], operands[cn : cn + bn]
        carry = operands[cn + bn :]
        for _ in range(100_000):
            (pred,) = self.eval_closed(params["cond_jaxpr"], [*cconsts, *carry])
            (p,) = pred.flat
            if not is_const(p):
                raise UnsupportedPrimitiveError(
                    "The fused ensemble kernel cannot evaluate a 'while' loop whose "
                    "stopping test depends on the state or params (e.g. an iterative "
                    "`mass_solver`)."
                )
            if not bool(p):
                return carry
            carry = self.eval_closed(params["body_jaxpr"], [*bconsts, *carry])
        raise UnsupportedPrimitiveError("A 'while' loop ran over 100 000 iterations.")

    def scan(self, operands, params):
        nc, ncarry = params["num_consts"], params["num_carry"]
        consts, carry = operands[:nc], operands[nc : nc + ncarry]
        xs = operands[nc + ncarry :]
        body = params["jaxpr"]
        length = params["length"]
        steps = range(length - 1, -1, -1) if params["reverse"] else range(length)
        ys_steps = {}
        for i in steps:
            out = self.eval_closed(body, [*consts, *carry, *[x[i, ...] for x in xs]])
            carry, ys_steps[i] = out[:ncarry], out[ncarry:]
        ys = [
            object_array(
                (length, *v.aval.shape), lambda i, k=k: ys_steps[i[0]][k][i[1:]]
            )
            for k, v in enumerate(body.jaxpr.outvars[ncarry:])
        ]
        return [*carry, *ys]
