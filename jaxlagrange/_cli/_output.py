"""Outputs written atomically: single files, and whole output sets."""

import contextlib
import errno
import fcntl
import io
import json
import math
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .. import __version__


class CLIError(Exception):
    """A user error of the command line; its message is printed as one line."""


_INTERRUPTED = threading.Event()


@contextlib.contextmanager
def interrupts_kept() -> Iterator[None]:
    """Keep a Ctrl-C that Python swallowed, for `write_output_set` to raise."""
    # A KeyboardInterrupt in a garbage-collection callback (JAX's, during a trace)
    # is printed as "Exception ignored" and lost, and the run went on to write.
    # SIGINT also sets a flag, and the swallowed one is not printed.
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _INTERRUPTED.clear()

    def handler(signum, frame):
        _INTERRUPTED.set()
        raise KeyboardInterrupt

    def hook(unraisable):
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            previous_hook(unraisable)

    previous, previous_hook = signal.signal(signal.SIGINT, handler), sys.unraisablehook
    sys.unraisablehook = hook
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        sys.unraisablehook = previous_hook


def raise_if_interrupted() -> None:
    """Raise the KeyboardInterrupt of a Ctrl-C that Python swallowed."""
    if _INTERRUPTED.is_set():
        raise KeyboardInterrupt


def npz_bytes(**arrays: Any) -> bytes:
    """The bytes of an `.npz` file holding `arrays`."""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    return buffer.getvalue()


def json_bytes(obj: Any) -> bytes:
    """Pretty JSON (NaN/inf are not JSON: they become null)."""
    return (json.dumps(_jsonable(obj), indent=2, ensure_ascii=False) + "\n").encode()


def png_bytes(fig: Any, dpi: int = 130) -> bytes:
    """The bytes of a PNG of the matplotlib figure `fig`."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def file_name(name: str) -> str:
    """`name` (a system's, set by a model file) as one plain file name, never a path."""
    return (
        re.sub(r"[^\w.+-]+", "_", str(name), flags=re.ASCII).strip("._")[:100]
        or "system"
    )


def output_dir(path: str | Path) -> Path:
    """Create the output directory `path` (and its parents); a clear error if not."""
    # Called before any computation, so a bad directory is refused at once.
    path = Path(path)
    name = f"output directory {str(path)!r}"
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        why = f"{name} is an existing file"
    except OSError as e:
        why = f"cannot create {name}: {e.strerror}"
    else:
        try:  # os.access does not see every reason (read-only mounts, quotas, ACLs)
            _probe(path)
            return path
        except OSError as e:
            why = f"{name} is not writable: {e.strerror}"
    raise CLIError(why)


def _probe(directory: Path) -> None:
    """Create and remove a file in `directory` (an unnamed one where possible)."""
    try:
        os.close(os.open(directory, os.O_TMPFILE | os.O_WRONLY, 0o600))
        return
    except (AttributeError, IsADirectoryError):  # no O_TMPFILE here
        pass
    except OSError as e:
        if e.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise
    fd, probe = tempfile.mkstemp(dir=directory, prefix=".jaxlagrange-probe-")
    os.close(fd)
    os.unlink(probe)


_STAGING = ".jaxlagrange-staging-"
_COMMIT = ".jaxlagrange-commit-"
_REMOVE = ".jaxlagrange-remove.json"  # in a commit folder: the old set's leftovers
# The names of each command's files in an output directory (besides
# `summary.json`): a command's set replaces the files of these names that it
# does not write again; no other file is ever removed.
OUTPUTS = {
    "run": r"trajectory\.npz|(coordinates|phase|energy|motion|configuration)\.png"
    r"|motion\.gif",
    "fit": r"params\.json|losses\.csv|fit\.npz|(fit|loss)\.png",
    "sweep": r"map_(lyapunov|final_q\d+)\.png",
}
_ANY_OUTPUT = "|".join(f"({names})" for names in OUTPUTS.values())


def write_output_set(
    directory: str | Path, files: Mapping[str, bytes], *, outputs: str
) -> Path:
    """Write `files` into `directory` as one set, listed by its `summary.json`."""
    owned = re.compile(outputs)
    stray = [n for n in files if n != "summary.json" and not owned.fullmatch(n)]
    if stray:  # a new output must join its command's `OUTPUTS`
        raise ValueError(f"{stray[0]!r} is not one of the outputs {outputs!r}")
    raise_if_interrupted()
    # The directory is written into, never renamed (a link, `.` or a mount point).
    directory = output_dir(directory)
    with _locked(directory):
        _finish_interrupted(directory)
        # Made and locked under the directory's lock, which every cleanup holds:
        # while we live, no other run removes it.
        staging = Path(tempfile.mkdtemp(prefix=_STAGING, dir=directory))
        fd = os.open(staging, os.O_RDONLY)
        _flock(fd, blocking=True)
    try:
        for name, data in files.items():
            _write_synced(staging / name, data)
        raise_if_interrupted()
        with _locked(directory):
            _finish_interrupted(directory)
            leftovers = sorted(
                p.name
                for p in directory.iterdir()
                if owned.fullmatch(p.name) and p.name not in files
            )
            _write_synced(staging / _REMOVE, json.dumps(leftovers).encode())
            _fsync(staging)
            commit = directory / f"{_COMMIT}{staging.name[len(_STAGING) :]}"
            # The commit. A run killed before it leaves a staging folder, which the next
            # run removes; one killed after it a commit folder, which the next run
            # finishes. Of concurrent runs the last to commit wins.
            os.rename(staging, commit)
            _fsync(directory)
            _apply(directory, commit, owned)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # only if never committed
        os.close(fd)
    return directory


def _apply(directory: Path, commit: Path, owned: re.Pattern) -> None:
    """Move a committed set into place; safe to repeat after an interruption."""
    # `summary.json` leaves first and comes back last: one present lists a whole set.
    summary = commit / "summary.json"
    if summary.exists():
        (directory / "summary.json").unlink(missing_ok=True)
    for item in sorted(commit.iterdir()):
        if item.name not in ("summary.json", _REMOVE):
            os.replace(item, directory / item.name)
    try:
        leftovers = json.loads((commit / _REMOVE).read_text())
    except (OSError, ValueError):
        leftovers = []
    for name in map(str, leftovers):  # (the list is a file in the user's directory)
        path = directory / name
        if owned.fullmatch(name) and path.parent == directory and path.is_file():
            if not path.is_symlink():  # a file of the old set (never a folder)
                path.unlink(missing_ok=True)
    if summary.exists():
        _fsync(directory)
        os.replace(summary, directory / "summary.json")
    _fsync(directory)
    shutil.rmtree(commit, ignore_errors=True)


def _finish_interrupted(directory: Path) -> None:
    """Finish killed runs' commits, remove their staging folders; leave live runs'."""
    for item in sorted(directory.iterdir()):
        committed = item.name.startswith(_COMMIT)
        if not (committed or item.name.startswith(_STAGING)) or not item.is_dir():
            continue
        try:
            fd = os.open(item, os.O_RDONLY)
        except OSError:
            continue  # gone meanwhile
        try:
            if not _flock(fd, blocking=False):
                continue  # its run is still going
            if committed:  # (a killed run's command is not known)
                _apply(directory, item, re.compile(_ANY_OUTPUT))
            else:
                shutil.rmtree(item, ignore_errors=True)
        finally:
            os.close(fd)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """An exclusive lock on `directory` itself (no lock file left behind)."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        _flock(fd, blocking=True)
        yield
    finally:
        os.close(fd)  # drops the lock


def _flock(fd: int, *, blocking: bool) -> bool:
    """Lock `fd`; False if another holds it, True on a file system without locks."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    except OSError:
        return True
    return True


def _write_synced(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _fsync(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system syncs directories
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def run_id() -> dict[str, Any]:
    """What names this run in its summary: when, and which process."""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime())
    return {"id": f"{stamp}Z-{os.getpid()}", "finished_utc": stamp}


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # NumPy and JAX arrays
        return _jsonable(np.asarray(obj).tolist())
    return None if isinstance(obj, float) and not math.isfinite(obj) else obj


def write_with_summary(
    out, files: Mapping[str, bytes], summary: dict[str, Any], also=()
) -> None:
    """`write_output_set` of `files` and a `summary.json` listing them and `also`."""
    summary["versions"] = {"jaxlagrange": __version__, "jax": jax.__version__}
    summary["files"] = sorted([*files, "summary.json", *also])
    files = {**files, "summary.json": json_bytes(summary)}
    write_output_set(out, files, outputs=OUTPUTS[summary["command"]])
