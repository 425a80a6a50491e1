"""Helpers shared by the subcommands."""

import contextlib
import os
import stat
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np


def _enable_x64() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)


def _progress_meter(show: bool):
    """diffrax's tqdm bar over the solve's time span, or none."""
    import diffrax

    return diffrax.TqdmProgressMeter() if show else diffrax.NoProgressMeter()


def add_progress_arguments(parser, what: str) -> None:
    """`--quiet` and `--progress` of a subcommand."""
    parser.add_argument(
        "--quiet", action="store_true", help=f"no {what} and no messages"
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help=f"show the {what} also when stderr is not a terminal (e.g. in logs)",
    )


def show_progress(args) -> bool:
    """A progress bar on a terminal, in logs only when asked, never when quiet."""
    return not args.quiet and (args.progress or sys.stderr.isatty())


def cache_directory() -> Path | None:
    """The directory of the persistent compilation cache, checked; None: off.

    `JAXLAGRANGE_CACHE_DIR` names the directory (empty: no cache); without it,
    JAX's own `JAX_COMPILATION_CACHE_DIR` if set, else
    `$XDG_CACHE_HOME/jaxlagrange/xla` (default `~/.cache/jaxlagrange/xla`),
    created with mode 0700. JAX runs the programs stored in the cache, so a
    directory, or an entry in it, that is not the user's own or that others may
    write is refused with a warning (the run goes on without the cache).
    """
    directory = os.environ.get("JAXLAGRANGE_CACHE_DIR")
    if directory is None:
        directory = os.environ.get("JAX_COMPILATION_CACHE_DIR")
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
    except OSError:
        return None  # a cache is an optimization: never fail a run for it
    problem = _unsafe_cache(path)
    if problem is not None:
        print(
            f"jaxlagrange: warning: not using the compilation cache {str(path)!r}: "
            f"{problem}; JAX runs the programs stored in it, so it must be yours "
            "alone (a directory of mode 0700: set JAXLAGRANGE_CACHE_DIR, or "
            "--no-cache)",
            file=sys.stderr,
            flush=True,
        )
        return None
    return path


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


def compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache; its directory, or None (off).

    The directory is `cache_directory()`'s. A second run of the same config then
    loads its compiled programs instead of compiling them again.
    """
    import jax

    path = cache_directory()
    if path is None:
        # JAX may have taken JAX_COMPILATION_CACHE_DIR from the environment.
        if jax.config.jax_compilation_cache_dir:
            jax.config.update("jax_enable_compilation_cache", False)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.1)
    return path


@contextlib.contextmanager
def errors_as_values() -> Iterator[None]:
    """Trace equinox's runtime checks as NaN outputs instead of host callbacks.

    A program with a host callback is never loaded from JAX's persistent cache
    (the callback is part of its cache key, and differs between processes). The
    command line runs `simulate(..., throw=False)` on inputs it has checked
    eagerly, reads the failures from `Trajectory.result`, and checks the saved
    arrays for non-finite values, so inside it these checks can become values.

    JAX caches traced and compiled functions for the whole process, whatever
    the setting was when they were traced: the caches are cleared on entry (so
    that what is traced inside has no callbacks) and on exit (so that nothing
    traced inside serves a later call that should raise). A no-op if equinox no
    longer reads the setting from `equinox._errors.EQX_ON_ERROR`.
    """
    import jax

    try:
        import equinox._errors as errors
    except ImportError:
        yield
        return
    old = getattr(errors, "EQX_ON_ERROR", None)
    if old not in ("raise", "nan", "breakpoint", "off"):
        yield
        return
    jax.clear_caches()
    errors.EQX_ON_ERROR = "nan"
    try:
        yield
    finally:
        errors.EQX_ON_ERROR = old
        jax.clear_caches()


def _say(args, message: str) -> None:
    if not args.quiet:
        print(message, flush=True)


def _result_message(result) -> str:
    from .._trajectory import RESULTS

    return "successful" if result == RESULTS.successful else RESULTS[result]


def _stats(stats: Mapping[str, Any]) -> dict[str, int]:
    return {k: int(np.asarray(v)) for k, v in stats.items()}


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
