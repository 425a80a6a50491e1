"""JAX's persistent compilation cache for the library's own programs (see
docs/performance.md, "Compiled programs kept on disk").

`cached` points JAX at the directory (a thread-local JAX config state) only
while a public function runs; nothing is set at import, and the user's own
cache directory (or the cache disabled) wins. But JAX opens its cache once per
process and then consults it for every compile: after a library call, a user's
own programs are looked up in it too, and written to it where they compile for
a second or more. The directory must be the user's alone (`_unsafe_cache`): JAX
runs what it loads. A reader that meets an entry still being written compiles
instead (JAX warns).

JAX does not store a program that holds a host callback, which every traced
`eqx.error_if` is. The library checks its inputs before its programs run, so
while one traces, `trusted_diffrax_checks` gives diffrax's repeats of them
(`_REPEATED`) equinox's "nan" mode, which has no callback; a batch or sweep
names the checks it made where it began (`made_checks`) and `trusted_checks`
gives those the same mode.
"""

import contextlib
import functools
import os
import stat
import sys
import threading
import warnings
from pathlib import Path

import jax
import numpy as np
from jax._src import config as jax_config  # the config's thread-local contexts


def cache_directory() -> Path | None:
    """The directory of the persistent compilation cache, checked; None: off."""
    directory = os.environ.get(
        "JAXLAGRANGE_CACHE_DIR", os.environ.get("JAX_COMPILATION_CACHE_DIR")
    )
    chosen = directory is not None
    if directory is None:
        home = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        directory = os.path.join(home, "jaxlagrange", "xla")
    if not directory:
        return None
    path = Path(directory).expanduser()
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(mode=0o700)
    except OSError as e:
        # A cache is an optimization: never fail a run for it, but say so when
        # the user chose the directory.
        problem = chosen and f"it cannot be created ({e.strerror})"
    else:
        problem = _unsafe_cache(path)
        if problem:
            problem += (
                "; JAX runs the programs stored in it, so it must be yours alone (a "
                "directory of mode 0700: set JAXLAGRANGE_CACHE_DIR, or --no-cache)"
            )
    if problem:
        print(
            f"jaxlagrange: warning: not using the compilation cache {str(path)!r}: "
            f"{problem}",
            file=sys.stderr,
            flush=True,
        )
    return None if problem is not None else path


def _unsafe_cache(path: Path) -> str | None:
    """What makes the cache `path` unsafe to load programs from, or None."""
    uid = os.geteuid()
    try:
        st = path.stat()
        if not stat.S_ISDIR(st.st_mode):
            return "it is not a directory"
        if st.st_uid != uid:
            return f"it belongs to user id {st.st_uid}, not to you ({uid})"
        if st.st_mode & 0o022:
            return f"it is writable by others (mode {oct(st.st_mode & 0o7777)})"
        group_enters = st.st_mode & 0o010
        with os.scandir(path) as entries:
            for entry in entries:
                est = entry.stat(follow_symlinks=False)
                if entry.is_symlink():
                    return f"its entry {entry.name!r} is a symbolic link"
                if est.st_uid != uid:
                    return (
                        f"its entry {entry.name!r} belongs to user id {est.st_uid}, "
                        f"not to you ({uid})"
                    )
                if est.st_mode & 0o002 or (group_enters and est.st_mode & 0o020):
                    return (
                        f"its entry {entry.name!r} is writable by others (mode "
                        f"{oct(est.st_mode & 0o7777)})"
                    )
    except OSError as e:
        return f"it cannot be checked ({e.strerror})"
    return None


# Programs that compile faster are not worth a file each.
MIN_COMPILE_SECONDS = 1.0


@functools.cache
def _checked(environment: tuple) -> Path | None:
    del environment  # the key: checked (and warned about) once per setting
    return cache_directory()


def _directory() -> Path | None:
    names = ("JAXLAGRANGE_CACHE_DIR", "JAX_COMPILATION_CACHE_DIR", "XDG_CACHE_HOME")
    return _checked(tuple(os.environ.get(name) for name in names))


def cached(fn):
    """`fn` with its compiles served by the persistent cache (see above)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        _note_long_compile(fn.__name__, args)
        config = jax.config
        user_chose = config.jax_compilation_cache_dir is not None
        path = None if user_chose else _directory()
        with trusted_diffrax_checks():
            if path is None or not config.jax_enable_compilation_cache:
                return fn(*args, **kwargs)
            with (
                jax_config.compilation_cache_dir(str(path)),
                jax_config.persistent_cache_min_compile_time_secs(MIN_COMPILE_SECONDS),
            ):
                return fn(*args, **kwargs)

    return wrapper


# The messages of diffrax's checks that repeat the library's own.
_REPEATED = ("saveat.ts must ", "Must have (t1 - t0) * dt0 >= 0")
# This thread's `on` (diffrax's repeats trusted), `made` (the messages of the
# checks made already) and `seen` (where the messages of traced checks go).
_trusting = threading.local()


@contextlib.contextmanager
def _trusting_as(name: str, value, default):
    """`_trusting.<name>` set to `value` in this thread for the block."""
    _wrap_equinox_checks()
    before = getattr(_trusting, name, default)
    setattr(_trusting, name, value)
    try:
        yield value
    finally:
        setattr(_trusting, name, before)


def trusted_diffrax_checks() -> contextlib.AbstractContextManager[bool]:
    """In this thread, diffrax's repeated checks (`_REPEATED`) traced without callbacks."""
    return _trusting_as("on", True, False)


def made_checks() -> contextlib.AbstractContextManager[list]:
    """The messages (a tuple a check) of the checks traced in this thread in the block."""
    return _trusting_as("seen", [], None)


def trusted_checks(made: tuple) -> contextlib.AbstractContextManager[tuple]:
    """In this thread, the checks with the messages `made` traced without callbacks."""
    # For the checks that the caller made already on the values these repeat.
    return _trusting_as("made", made, ())


@functools.cache
def _wrap_equinox_checks() -> None:
    # Once per process. Elsewhere (another thread, another message, a user's own
    # diffrax call) every check keeps its mode; were equinox to move this
    # function, the checks would stay callbacks and only the cache would miss.
    from equinox import _errors

    impl = getattr(_errors, "branched_error_if_impl_jit", None)
    if impl is None:
        return

    def checked(x, pred, index, msgs, *, on_error):
        messages = tuple(map(str, msgs))
        seen = getattr(_trusting, "seen", None)
        if seen is not None and messages not in seen:
            seen.append(messages)
        repeated = getattr(_trusting, "on", False) and all(
            m.startswith(_REPEATED) for m in messages
        )
        if on_error == "default" and (
            repeated or messages in getattr(_trusting, "made", ())
        ):
            on_error = "nan"
        return impl(x, pred, index, msgs, on_error=on_error)

    _errors.branched_error_if_impl_jit = checked


# From this many coordinates, a first call compiles for tens of seconds or more
# on a CPU (a 28-coordinate humanoid: about a minute): `cached` says so first.
LONG_COMPILE_SIZE = 24
_noted: set = set()


def _note_long_compile(name: str, args: tuple) -> None:
    """One warning per function and problem size before a long first compile."""
    # Not under a user's trace: there their program compiles, not this one.
    q = args[1] if len(args) > 1 else None
    if not isinstance(q, np.ndarray | jax.Array) or isinstance(q, jax.core.Tracer):
        return
    n = q.shape[-1] if q.ndim else q.size  # (a batch's q0: one row a member)
    if n < LONG_COMPILE_SIZE or (name, n) in _noted:
        return
    _noted.add((name, n))
    warnings.warn(
        f"jl.{name}: the first call for {n} coordinates compiles its program, "
        "which may take minutes on a CPU; later calls with the same shapes reuse "
        "it, and the persistent compilation cache serves the next process.",
        stacklevel=3,
    )
