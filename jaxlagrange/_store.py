"""A resumable chunked store on disk: a Zarr v3 directory store plus a manifest.

Layout of a store directory:

```
zarr.json              the root group; attrs: what the sweep was, and the manifest
inputs/<name>/...      the per-member inputs, batch axis first
outputs/<name>/...     the per-member outputs, batch axis first
```

Every array is chunked along the batch axis only, with the sweep's chunk size, so
one chunk of the sweep is one file per array (`outputs/q/c/3/0/0`). Zarr's local
store writes every file, `zarr.json` included, to a temporary name and renames it
into place (zarr >= 3.1.3). The manifest (the root attribute `"manifest"`: the
completed chunks) is rewritten after a chunk's files are all in place, so a chunk
is either listed and complete, or not listed and computed again on resume.
"""

import fcntl
import hashlib
import json
import os
import shutil
import socket
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


_MANIFEST = "manifest"
_FORMAT = "jaxlagrange-sweep/1"


def _zarr():
    # Imported on first use: most sessions never write a sweep store.
    import zarr

    return zarr


def _acquire(path: Path) -> int:
    """An exclusive lock on `path` for this process, or a `ValueError` naming the
    process that holds it. The lock file sits beside the store."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = path.with_name(f".{path.name}.lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise ValueError(
            f"The store {str(path)!r} is being written by another sweep (process "
            f"{holder}); wait for it to finish, or choose another output directory."
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}@{socket.gethostname()}".encode(), 0)
    return fd


def _open(zarr, path: Path, mode: str):
    """Open the store's root group, naming a corrupted metadata file."""
    try:
        return zarr.open_group(path, mode=mode)
    except ValueError as e:  # json.JSONDecodeError is one
        raise ValueError(
            f"The sweep store's metadata {str(path / 'zarr.json')!r} (with its "
            f"manifest) is corrupted and cannot be read ({str(e).splitlines()[0]}); "
            "remove the store directory to run the sweep again."
        ) from None


def fingerprint(arrays: Mapping[str, Any], chunk_size: int, attrs: Any) -> str:
    """A hash of the inputs and the sweep's description, to refuse a wrong resume."""
    h = hashlib.sha256()
    h.update(json.dumps(attrs, sort_keys=True, default=repr).encode())
    h.update(str(chunk_size).encode())
    for name in sorted(arrays):
        x = arrays[name]
        h.update(f"{name}{tuple(x.shape)}{np.dtype(x.dtype).str}".encode())
        for start in range(0, x.shape[0], chunk_size):
            h.update(np.ascontiguousarray(x[start : start + chunk_size]).tobytes())
    return h.hexdigest()


class ChunkedStore:
    """A Zarr store filled chunk by chunk along a batch axis, resumable."""

    def __init__(
        self,
        path: str | os.PathLike,
        *,
        size: int,
        chunk_size: int,
        inputs: Mapping[str, Any],
        outputs: Mapping[str, tuple[tuple[int, ...], Any]],
        attrs: Mapping[str, Any],
        writer: bool = True,
    ):
        """Open the store at `path`, creating it if needed.

        `inputs` are arrays (anything sliceable) with leading axis `size`;
        `outputs` maps each output name to its per-member (shape, dtype). A store
        made by a different sweep (other inputs, sizes or attrs) is refused.
        Only the `writer` process touches the disk.
        """
        self.path = Path(path)
        self._lock = None
        # One writer at a time: a second sweep on this store is refused while the
        # first runs (the lock goes with its process, so a killed one leaves none).
        self._lock = _acquire(self.path) if writer else None
        try:
            self._setup(size, chunk_size, inputs, outputs, attrs, writer)
        except BaseException:
            self.close()
            raise

    def _setup(self, size, chunk_size, inputs, outputs, attrs, writer) -> None:
        zarr = _zarr()
        self.size = size
        self.chunk_size = chunk_size
        self.num_chunks = -(-size // chunk_size)
        self.writer = writer
        self.key = fingerprint(inputs, chunk_size, dict(attrs))
        existing = None
        if (self.path / "zarr.json").exists():
            existing = _open(zarr, self.path, "r+" if writer else "r")
        if existing is not None and _MANIFEST in existing.attrs:
            self.manifest = dict(existing.attrs[_MANIFEST])
            if self.manifest.get("fingerprint") != self.key:
                raise ValueError(
                    f"The store {str(self.path)!r} holds a different sweep (other "
                    "inputs, sizes or settings); remove it or choose another output "
                    "directory."
                )
            self.group = existing
            if writer:
                self._remove_temporaries()
                bad = bad_chunks(existing, self.manifest, self.bounds)
                if bad:
                    # Computed again, never trusted: a chunk damaged on disk.
                    print(
                        f"sweep: {len(bad)} stored chunk(s) of {str(self.path)!r} "
                        f"failed their checksum and are computed again: {bad}",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.manifest["completed"] = sorted(self.completed - set(bad))
                    self.manifest.pop("complete", None)
                    self._write_manifest()
            return
        if self.path.exists() and any(self.path.iterdir()):
            raise ValueError(
                f"{str(self.path)!r} exists and is not a sweep store; remove it or "
                "choose another output directory."
            )
        self.manifest = {
            "format": _FORMAT,
            "fingerprint": self.key,
            "size": size,
            "chunk_size": chunk_size,
            "num_chunks": self.num_chunks,
            "completed": [],
        }
        if not writer:
            # Other processes wait for the writer to create the store.
            self.group = None
            return
        # Made whole in a temporary directory beside it, then renamed into place:
        # an interrupted creation leaves no half-made store under the final name.
        staging = self.path.with_name(f".{self.path.name}.creating")
        shutil.rmtree(staging, ignore_errors=True)  # a creation killed earlier
        staging.mkdir(parents=True)
        group = zarr.open_group(
            staging, mode="w", zarr_format=3, attributes=dict(attrs)
        )
        for name, x in inputs.items():
            a = group.create_array(
                f"inputs/{name}",
                shape=tuple(x.shape),
                chunks=(chunk_size, *x.shape[1:]),
                dtype=np.dtype(x.dtype),
            )
            for start in range(0, size, chunk_size):
                a[start : start + chunk_size] = np.asarray(
                    x[start : start + chunk_size]
                )
        for name, (shape, dtype) in outputs.items():
            group.create_array(
                f"outputs/{name}",
                shape=(size, *shape),
                chunks=(chunk_size, *shape),
                dtype=np.dtype(dtype),
                fill_value=_fill(dtype),
            )
        group.attrs[_MANIFEST] = self.manifest
        if self.path.exists():
            self.path.rmdir()  # empty, checked above
        os.rename(staging, self.path)
        self.group = zarr.open_group(self.path, mode="r+")

    @property
    def completed(self) -> set[int]:
        return set(self.manifest["completed"])

    def missing(self) -> list[int]:
        done = self.completed
        return [k for k in range(self.num_chunks) if k not in done]

    def bounds(self, chunk: int) -> tuple[int, int]:
        start = chunk * self.chunk_size
        return start, min(start + self.chunk_size, self.size)

    def write(self, chunk: int, outputs: Mapping[str, np.ndarray]) -> None:
        """Write one chunk of every output, then mark it complete."""
        if not self.writer:
            return
        start, stop = self.bounds(chunk)
        for name, value in outputs.items():
            self.group[f"outputs/{name}"][start:stop] = value
        self.manifest["completed"] = sorted(self.completed | {chunk})
        sums = dict(self.manifest.get("checksums", {}))
        sums[str(chunk)] = _checksum(outputs)
        self.manifest["checksums"] = sums
        self._write_manifest()

    def finish(self) -> None:
        if self.writer and not self.missing():
            self.manifest["complete"] = True
            self._write_manifest()
        self.close()

    def close(self) -> None:
        """Release the writer's lock (also done when the process ends)."""
        if self._lock is not None:
            os.close(self._lock)  # closing the descriptor drops the flock
            self._lock = None

    def __del__(self):
        self.close()

    def _write_manifest(self) -> None:
        self.group.attrs[_MANIFEST] = self.manifest

    def _remove_temporaries(self) -> None:
        # Left by a process killed mid-write.
        for p in self.path.rglob("*.partial"):
            if p.is_file():
                p.unlink(missing_ok=True)


def _fill(dtype) -> Any:
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if np.issubdtype(dtype, np.integer):
        return -1
    return 0


def _checksum(outputs: Mapping[str, Any]) -> str:
    h = hashlib.sha256()
    for name in sorted(outputs):
        value = np.ascontiguousarray(np.asarray(outputs[name]))
        h.update(f"{name}{value.shape}{value.dtype.str}".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def bad_chunks(group, manifest: Mapping[str, Any], bounds) -> list[int]:
    """The completed chunks whose stored outputs do not match their checksum."""
    sums = manifest.get("checksums", {})
    names = [name for name in group["outputs"].array_keys()] if sums else []
    bad = []
    for chunk in manifest.get("completed", []):
        expected = sums.get(str(chunk))
        if expected is None:
            continue  # a store written before checksums were kept
        start, stop = bounds(chunk)
        try:
            values = {n: group[f"outputs/{n}"][start:stop] for n in names}
            ok = _checksum(values) == expected
        except Exception:  # a truncated or undecodable chunk file
            ok = False
        if not ok:
            bad.append(chunk)
    return bad


def open_store(path: str | os.PathLike, *, verify: bool = True):
    """Open a sweep store read-only as a `zarr.Group`.

    **Arguments:**

    - `path`: the store's directory.
    - `verify`: check every completed chunk against the checksum recorded when
        it was written (a full read of the outputs).

    **Raises:** `ValueError` naming the chunks that are missing, truncated or
    altered on disk (rerun the sweep to recompute them), and naming corrupted
    metadata.
    """
    group = _open(_zarr(), Path(path), "r")
    manifest = group.attrs.get(_MANIFEST)
    if verify and manifest is not None:
        size, chunk_size = manifest["size"], manifest["chunk_size"]

        def bounds(chunk):
            return chunk * chunk_size, min((chunk + 1) * chunk_size, size)

        bad = bad_chunks(group, manifest, bounds)
        if bad:
            raise ValueError(
                f"The sweep store {str(path)!r} has {len(bad)} chunk(s) that are "
                f"missing, truncated or altered on disk: {bad} (of chunk_size "
                f"{chunk_size}); run the sweep again to recompute them."
            )
    return group
