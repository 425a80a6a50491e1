"""Outputs written atomically: single files, and whole output sets."""

import io
import json
import math
import os
import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


class CLIError(Exception):
    """A user error of the command line; its message is printed as one line."""


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and `os.replace`.

    A reader (or a crash) sees either the old file or the complete new one, never
    a partial file under the final name; the temporary file is removed on failure.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private (0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


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


def output_dir(path: str | Path) -> Path:
    """Create the output directory `path` (and its parents); a clear error if not."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CLIError(f"output directory {str(path)!r} is an existing file") from None
    except OSError as e:
        raise CLIError(
            f"cannot create output directory {str(path)!r}: {e.strerror}"
        ) from None
    if not os.access(path, os.W_OK):
        raise CLIError(f"output directory {str(path)!r} is not writable")
    return path


def write_outputs(directory: str | Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write each `name: bytes` of `files` atomically into `directory`."""
    directory = output_dir(directory)
    written = []
    for name, data in files.items():
        atomic_write(directory / name, data)
        written.append(directory / name)
    return written


def write_output_set(directory: str | Path, files: Mapping[str, bytes]) -> Path:
    """Write `files` into `directory` as one set: all old outputs or all new ones.

    The new files are written into a staging directory beside it, which takes
    the directory's place by two renames; the files there that no jaxlagrange
    run wrote (not listed in the old `summary.json`) are then carried over. A run
    killed between the renames leaves the old set whole beside the directory,
    and the next run puts it back (or finishes the carrying) before anything else.
    """
    directory = Path(directory)
    parent = output_dir(directory.parent)
    old = parent / f".{directory.name}.old"
    _recover(directory, old)
    for stale in parent.glob(f".{directory.name}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if directory.exists() and not directory.is_dir():
        raise CLIError(f"output directory {str(directory)!r} is an existing file")
    staging = parent / f".{directory.name}.staging-{os.getpid()}"
    staging.mkdir()
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        if directory.exists():
            os.rename(directory, old)
        os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _recover(directory, old)
    return directory


def _run_id() -> dict[str, Any]:
    """What names this run in its summary: when, and which process."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return {"id": f"{stamp}Z-{os.getpid()}", "finished_utc": stamp}


def _recover(directory: Path, old: Path) -> None:
    """Finish an interrupted swap: restore the old set, or carry its user files."""
    if not old.exists():
        return
    if not directory.exists():
        os.rename(old, directory)
        return
    try:
        produced = set(json.loads((old / "summary.json").read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        produced = set()
    for item in old.iterdir():
        if item.name not in produced and not (directory / item.name).exists():
            os.rename(item, directory / item.name)  # the user's own files
    shutil.rmtree(old, ignore_errors=True)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # NumPy and JAX arrays
        return _jsonable(np.asarray(obj).tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj
