"""Traced programs kept on disk between runs of the command line (`jax.export`).

Inside `kept_programs(directory, context)` the calls routed through `call` (or
`lower`) are kept as serialized `jax.export.Exported` programs, keyed by all that
determines them (docs/cli.md lists it). An entry is a checked header and the
bytes of `Exported.serialize()`, nothing unpickled; one that does not match is
traced anew and replaced, so the store can only skip work, never change a result.
Outside `kept_programs` (every library call) `call` is `fn(*args)`.
"""

import contextlib
import contextvars
import functools
import hashlib
import os
import re
import stat
import struct
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.tree_util as jtu

from ._guard import Stop


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
    """`fn(*args)`, traced once and kept inside `kept_programs`."""
    # The key holds `name`, `fn`'s code and the static part of `args`, not the
    # values `fn` closes over: `name` and the store's context must determine them.
    if _STORE.get() is None:
        return fn(*args)
    lowered, _ = lower(name, fn, *args)
    return lowered.compile()(*jtu.tree_leaves(eqx.filter(args, eqx.is_array)))


def lower(name: str, fn: Callable, *args: Any):
    """`fn(*args)` lowered on its flat array args, and whether it was in the store."""
    dynamic, static = eqx.partition(args, eqx.is_array)
    flat, tree = jtu.tree_flatten(dynamic)

    def flat_fn(*leaves):
        return fn(*eqx.combine(jtu.tree_unflatten(tree, leaves), static))

    store = _STORE.get()
    if store is None:
        return jax.jit(flat_fn).lower(*flat), False
    return store.lower(name, fn, flat_fn, static, flat)


_ANY_CALL = [jax.export.DisabledSafetyCheck.custom_call("ALL")]
# A named tuple in an output structure is stored by this name (the command
# line's solves return a failure's `Stop`).
jax.export.register_namedtuple_serialization(Stop, serialized_name="jaxlagrange.Stop")
# An entry: this header, then the bytes of `Exported.serialize()`.
_MAGIC, _VERSION = b"JLXPROG\0", 1
_HEADER = struct.Struct("<8sI32sQ32s")  # magic, version, key, length, sha256


class _Store(NamedTuple):
    directory: Path  # the compilation cache's: entries go in its `programs/`
    context: str

    def lower(self, name, fn, flat_fn, static, flat):
        """`lower` of the kept program, written if not there (or not sound)."""
        key = self._key(name, fn, static, flat)
        path = self.directory / "programs" / f"{key.hex()}.jlx"
        payload = _read_entry(path, key)
        if payload is not None:
            try:  # where damaged StableHLO fails ("Failed to deserialize")
                exported = jax.export.deserialize(bytearray(payload))
                return jax.jit(exported.call).lower(*flat), True
            except Exception:
                pass  # traced anew below, and replaced
        try:
            # LAPACK's custom calls have no compatibility guarantee across jaxlib
            # versions; a kept program is only loaded by the same versions.
            exported = jax.export.export(jax.jit(flat_fn), disabled_checks=_ANY_CALL)(
                *flat
            )
        except Exception:  # host callbacks, unserializable custom calls, ...
            return jax.jit(flat_fn).lower(*flat), False
        try:
            payload = bytes(exported.serialize())
        except Exception:
            pass  # e.g. equinox Modules out, whose structures JAX cannot store
        else:
            digest = hashlib.sha256(payload).digest()
            header = _HEADER.pack(_MAGIC, _VERSION, key, len(payload), digest)
            _write_atomically(path, header + payload)
        return jax.jit(exported.call).lower(*flat), False

    def _key(self, name, fn, static, flat) -> bytes:
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
        return hashlib.sha256("\0".join(parts).encode()).digest()


def _read_entry(path: Path, key: bytes) -> bytes | None:
    """The payload of the entry at `path` if sound and kept under `key`, else None."""
    try:
        # Non-blocking: a named pipe put there opens at once (and is refused).
        with open(path, "rb", opener=lambda p, f: os.open(p, f | os.O_NONBLOCK)) as f:
            # Only the user's own regular file, and no one else's to write.
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                return None
            if st.st_uid != os.geteuid() or st.st_mode & 0o022:
                return None
            data = f.read()
    except OSError:
        return None
    if len(data) < _HEADER.size:
        return None
    magic, version, kept_key, length, digest = _HEADER.unpack_from(data)
    payload = data[_HEADER.size :]
    if (magic, version, kept_key, length) != (_MAGIC, _VERSION, key, len(payload)):
        return None
    return payload if hashlib.sha256(payload).digest() == digest else None


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
    digest = hashlib.sha256()  # of this package's source
    root = Path(__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    device = jax.devices()[0]
    return "|".join(
        [
            *versions,
            f"x64={jax.config.jax_enable_x64}",
            f"{device.platform}:{device.device_kind}",
            digest.hexdigest(),
        ]
    )


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
