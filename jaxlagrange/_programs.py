"""Traced programs kept on disk between runs of the command line (`jax.export`).

JAX's persistent compilation cache spares a repeated `jaxlagrange run` or `fit`
XLA's compile, but not Python's trace and lowering of the program, which it
needs to compute the cache key: 0.6 s of CPU for the default `run`, 2.4 s for
`configs/fit_pendulum.toml`. Inside `kept_programs(directory, context)` the
calls routed through `call` (or `lower`) are kept as serialized
`jax.export.Exported` programs, keyed by everything that determines them:

- `context`, the command line's description of the run (the resolved config,
  the source of the user's system file and local modules, and what the
  system's functions compute, `_ensemble._identity.physics_digest`);
- the program's name and code, and the static (non-array) part of its
  arguments, with object addresses removed from their text (the values the
  program closes over are the caller's to put in the name or the context);
- the shapes and dtypes of its array arguments;
- the source of this package, the versions of JAX and the libraries it traces
  through, `jax_enable_x64`, and the platform.

A kept program is loaded and called instead of traced: its lowering to XLA is
served by the compilation cache as before. Anything that goes wrong on the way
(a program with host callbacks, which `jax.export` refuses, an output whose
structure cannot be stored, an unreadable entry) falls back to the plain trace,
so the store can never change a result, only skip work. The directory is the
compilation cache's, which the command line only uses when it is the user's own
(`_cli._common.cache_directory`): entries are loaded with `pickle`, as JAX
loads compiled programs from the same place.

Outside `kept_programs` (every library call) `call` is `fn(*args)`.
"""

import contextlib
import contextvars
import functools
import hashlib
import os
import pickle
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import equinox as eqx
import jax
import jax.tree_util as jtu


_STORE: contextvars.ContextVar["_Store | None"] = contextvars.ContextVar(
    "jaxlagrange_kept_programs", default=None
)


@contextlib.contextmanager
def kept_programs(directory: Path | None, context: str) -> Iterator[None]:
    """Keep the programs of `call` and `lower` in `directory` (None: no-op)."""
    if directory is None:
        yield
        return
    token = _STORE.set(_Store(Path(directory), context))
    try:
        yield
    finally:
        _STORE.reset(token)


def call(name: str, fn: Callable, *args: Any) -> Any:
    """`fn(*args)`, traced once and kept inside `kept_programs`.

    The key holds `name`, `fn`'s code and the static part of `args`, but not the
    values `fn` closes over: `name` and the store's context must determine them.
    """
    if _STORE.get() is None:
        return fn(*args)
    compiled, unflatten = lower(name, fn, *args)
    flat = jtu.tree_leaves(eqx.filter(args, eqx.is_array))
    return unflatten(compiled.compile()(*flat))


def lower(name: str, fn: Callable, *args: Any):
    """`(lowered, unflatten)`: `fn(*args)` lowered with its array arguments as
    the flat inputs (`jtu.tree_leaves` of `eqx.filter(args, eqx.is_array)`), and
    the function that rebuilds its output from the flat outputs. Loaded from the
    store inside `kept_programs` when it is there."""
    dynamic, static = eqx.partition(args, eqx.is_array)
    flat, tree = jtu.tree_flatten(dynamic)
    out_tree = []

    def flat_fn(*leaves):
        out = fn(*eqx.combine(jtu.tree_unflatten(tree, leaves), static))
        out_leaves, structure = jtu.tree_flatten(out)
        out_tree.append(structure)
        return out_leaves

    store = _STORE.get()
    if store is not None:
        kept = store.load_or_export(name, fn, flat_fn, static, flat, out_tree)
        if kept is not None:
            exported, structure = kept
            lowered = jax.jit(exported.call).lower(*flat)
            return lowered, functools.partial(jtu.tree_unflatten, structure)
    lowered = jax.jit(flat_fn).lower(*flat)
    return lowered, lambda out: jtu.tree_unflatten(out_tree[-1], out)


_ANY_CALL = [jax.export.DisabledSafetyCheck.custom_call("ALL")]


class _Store:
    def __init__(self, directory: Path, context: str):
        self.directory = directory / "programs"
        self.context = context

    def load_or_export(self, name, fn, flat_fn, static, flat, out_tree):
        """The kept `(Exported, output structure)`, exported and written if it
        is not there yet (used, but not written, if its output structure cannot
        be stored); None if it cannot be exported."""
        path = self.directory / f"{self._key(name, fn, static, flat)}.jlx"
        try:
            with open(path, "rb") as f:
                # Unpickled only if it is the user's own and no one else's to write.
                st = os.fstat(f.fileno())
                if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                    raise PermissionError(path)
                entry = pickle.load(f)
            return jax.export.deserialize(bytearray(entry["exported"])), entry["tree"]
        except Exception:  # absent, unreadable or stale: export it again
            pass
        try:
            # LAPACK's custom calls have no compatibility guarantee across jaxlib
            # versions; a kept program is only loaded by the same versions.
            exported = jax.export.export(jax.jit(flat_fn), disabled_checks=_ANY_CALL)(
                *flat
            )
        except Exception:
            return None  # host callbacks, unserializable custom calls, ...
        structure = out_tree[-1]
        try:
            if pickle.loads(pickle.dumps(structure)) == structure:
                blob = {"exported": exported.serialize(), "tree": structure}
                _write_atomically(path, pickle.dumps(blob))
        except Exception:
            pass  # e.g. equinox Modules, whose structures do not pickle: not kept
        return exported, structure

    def _key(self, name, fn, static, flat) -> str:
        leaves, structure = jtu.tree_flatten(static)
        parts = [
            self.context,
            name,
            _describe(fn),
            _environment(),
            _without_addresses(str(structure)),
            *(_describe(leaf) for leaf in leaves),
            *(f"{x.shape}{x.dtype}{getattr(x, 'weak_type', '')}" for x in flat),
        ]
        return hashlib.sha256("\0".join(parts).encode()).hexdigest()


def _describe(leaf) -> str:
    code = getattr(leaf, "__code__", None)
    text = _without_addresses(repr(leaf))
    if code is not None:  # a function: its name, bytecode and constants
        text += f"{leaf.__module__}.{leaf.__qualname__}{code.co_code.hex()}"
        text += _without_addresses(repr(code.co_consts))
    return text


def _without_addresses(text: str) -> str:
    return re.sub(r" at 0x[0-9a-fA-F]+", "", text)


@functools.cache
def _environment() -> str:
    import importlib.metadata

    versions = []
    for package in ("jax", "jaxlib", "diffrax", "equinox", "lineax", "optimistix"):
        try:
            versions.append(f"{package}={importlib.metadata.version(package)}")
        except importlib.metadata.PackageNotFoundError:
            versions.append(f"{package}=?")
    device = jax.devices()[0]
    return "|".join(
        [
            *versions,
            f"x64={jax.config.jax_enable_x64}",
            f"{device.platform}:{device.device_kind}",
            _package_digest(),
        ]
    )


def _package_digest() -> str:
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _write_atomically(path: Path, data: bytes) -> None:
    tmp = None
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
        tmp = None
    except OSError:
        pass  # a full or read-only disk: the run goes on without keeping it
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
