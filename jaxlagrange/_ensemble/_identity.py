"""What identifies a sweep of `simulate_sweep` in its store: descriptions of its
options and a digest of its functions' code."""

import hashlib
import re
import types
from collections.abc import Sequence
from typing import Any

import equinox as eqx
import jax
import numpy as np


def describe(x: Any) -> Any:
    """A JSON-able description of an option, stable across runs (no addresses)."""
    if eqx.is_array(x) or isinstance(x, np.ndarray):
        return np.asarray(x).tolist()
    if callable(x) and not isinstance(x, eqx.Module):
        return f"{getattr(x, '__module__', '')}.{getattr(x, '__qualname__', repr(x))}"
    if isinstance(x, (int, float, str, bool)) or x is None:
        return x
    return eqx.tree_pformat(x, short_arrays=False)


def code_digest(fns: Sequence[Any]) -> str:
    """A SHA-256 of functions' code and the values they read: an edit changes it."""
    h = hashlib.sha256()

    def code(c) -> None:
        h.update(c.co_code)
        h.update(repr((c.co_names, c.co_varnames, c.co_freevars)).encode())
        for const in c.co_consts:
            if isinstance(const, types.CodeType):
                code(const)
            else:
                h.update(stable(const).encode())

    def stable(const) -> str:
        # The repr of a frozenset (`x in {"a", "b"}`) follows the string hash
        # seed of the process: sorted, it is the same in every process.
        if isinstance(const, frozenset):
            return f"frozenset({sorted(stable(x) for x in const)})"
        if isinstance(const, tuple):
            return f"({', '.join(stable(x) for x in const)},)"
        return repr(const)

    def value(x, depth=0) -> None:
        if isinstance(x, (int, float, complex, str, bool, type(None))):
            h.update(repr(x).encode())
        elif eqx.is_array(x) or isinstance(x, np.ndarray):
            h.update(np.asarray(x).tobytes())
        elif isinstance(x, (types.FunctionType, types.MethodType)) and depth < 4:
            fn(x, depth + 1)

    def fn(f, depth=0) -> None:
        f = getattr(f, "__func__", f)
        c = getattr(f, "__code__", None)
        if c is None:
            h.update(type(f).__qualname__.encode())
            return
        code(c)
        for cell in f.__closure__ or ():
            try:
                value(cell.cell_contents, depth)
            except ValueError:  # an empty cell
                pass
        module = getattr(f, "__globals__", {})
        for name in c.co_names:  # module-level constants it reads, e.g. G
            if name in module:
                value(module[name], depth)

    for f in fns:
        if f is not None:
            fn(f)
        h.update(b"|")
    return h.hexdigest()


def physics_digest(system, n: int, dtype) -> str:
    """A SHA-256 of what the system's functions compute: their jaxprs and constants."""
    # Unlike `code_digest`, it sees every value that reaches the functions, however
    # they get it (a data file, a module's constant, an environment variable): one
    # digest, the same equations of motion for any params.
    h = hashlib.sha256()
    params, static = eqx.partition(system.params, eqx.is_array)
    dtype = jax.dtypes.canonicalize_dtype(dtype)
    q = jax.ShapeDtypeStruct((n,), dtype)
    spec = {"q": q, "qd": q, "t": jax.ShapeDtypeStruct((), dtype)}
    # Each evaluated function once (the system's L and Q, its constraint kinds),
    # labelled as the method that evaluated it before the kinds had an owner.
    traced_fns = [("_lagrangian", lambda s: s.L, ("q", "qd", "t"))]
    if system.force is not None or system.dissipation is not None:
        traced_fns.append(("_force", lambda s: s.Q, ("q", "qd", "t")))
    for i, kind in enumerate(system.constraints.all):
        names = ("q", "t") if kind.positional else ("q", "qd", "t")
        select = lambda s, i=i: s.constraints.all[i]  # noqa: E731
        traced_fns.append((f"_{kind.name}", select, names))
    for method, select, names in traced_fns:

        def traced(params, *args, select=select):
            return select(system.with_params(eqx.combine(params, static)))(*args)

        closed = jax.make_jaxpr(traced)(params, *(spec[k] for k in names))
        h.update(method.encode())
        h.update(re.sub(r" at 0x[0-9a-fA-F]+", "", str(closed.jaxpr)).encode())
        for const in closed.consts:
            h.update(np.asarray(const).tobytes())
    return h.hexdigest()
