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

Every chunk is written, even one equal to the fill value (which zarr skips: a
chunk of failed members, NaN with the sign bit set, would read back as +NaN).
The manifest holds a SHA-256 of each chunk's inputs and outputs (every NaN hashed
as +NaN), checked on resume and by `open_store`; a chunk that fails its
checksum, or whose files are gone, is computed again on resume.
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

from ._store_verify import (
    CHECKSUM_FORM,
    MANIFEST,
    StoreRefused,
    array_names,
    bad_chunks,
    changed_entries as changed_entries,
    check_description,
    checksum,
    description,
    import_zarr,
    open_root,
    open_store as open_store,
)


_FORMAT = "jaxlagrange-sweep/1"


def _lock_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.lock")


def _acquire(path: Path) -> int:
    """An exclusive lock on `path` for this process, or a refusal naming its holder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = _lock_path(path)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
            os.close(fd)
            raise StoreRefused(
                f"The store {str(path)!r} is being written by another sweep (process "
                f"{holder or 'unknown'}); wait for it to finish, or choose another "
                "output directory."
            ) from None
        try:
            # A sweep unlinks the lock file while still holding it: lock the new one.
            current = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            current = False
        if current:
            break
        os.close(fd)  # removed by the sweep that held it: lock the new file
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}@{socket.gethostname()}".encode(), 0)
    return fd


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
        """Open the store at `path`, creating it; refuse one of a different sweep."""
        self.path = Path(path)
        self._lock = None
        self._lock_file = _lock_path(self.path)
        # One writer at a time: a second sweep on this store is refused while the
        # first runs (the lock goes with its process, so a killed one leaves none).
        self._lock = _acquire(self.path) if writer else None
        try:
            self._setup(size, chunk_size, inputs, outputs, attrs, writer)
        except BaseException:
            self.close()  # refused: no lock file left behind
            raise

    def _setup(self, size, chunk_size, inputs, outputs, attrs, writer) -> None:
        zarr = import_zarr()
        self.size = size
        self.chunk_size = chunk_size
        self.num_chunks = -(-size // chunk_size)
        self.writer = writer
        self.key = fingerprint(inputs, chunk_size, dict(attrs))
        if (self.path / "zarr.json").exists():
            existing = open_root(zarr, self.path, "r+" if writer else "r")
            check_description(existing, self.path, existing.attrs.get(MANIFEST))
            self.manifest = dict(existing.attrs[MANIFEST])
            if self.manifest.get("fingerprint") != self.key:
                raise StoreRefused(
                    f"The store {str(self.path)!r} holds a different sweep "
                    f"({_difference(existing, attrs, inputs, chunk_size)}); remove it "
                    "or choose another output directory."
                )
            self.group = existing
            if writer:
                for p in self.path.rglob("*.partial"):  # a process killed mid-write
                    if p.is_file():
                        p.unlink(missing_ok=True)
                bad = set(bad_chunks(existing, self.manifest, self.bounds))
                # The given inputs are the sweep's (its fingerprint): rewritten where
                # a chunk is bad, or has no input checksum (written before they were).
                recorded = self.manifest.get("input_checksums", {})
                chunks = range(self.num_chunks)
                rewrite = bad | {k for k in chunks if str(k) not in recorded}
                for chunk in sorted(rewrite):
                    self._write_inputs(inputs, chunk)
                if bad:
                    print(
                        f"sweep: {len(bad)} stored chunk(s) of {str(self.path)!r} "
                        f"failed their checksum and are computed again: {sorted(bad)}",
                        file=sys.stderr,
                        flush=True,
                    )
                    self.manifest["completed"] = sorted(self.completed - bad)
                    sums = self.manifest.get("checksums", {})
                    sums = {k: v for k, v in sums.items() if int(k) not in bad}
                    self.manifest["checksums"] = sums
                    self.manifest.pop("complete", None)
                if rewrite:
                    self._write_manifest()
            return
        if self.path.exists() and (not self.path.is_dir() or any(self.path.iterdir())):
            raise StoreRefused(
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
            "checksum_form": CHECKSUM_FORM,
            "input_checksums": {},
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
        arrays = {
            f"inputs/{k}": (x.shape[1:], x.dtype, None) for k, x in inputs.items()
        }
        arrays |= {f"outputs/{k}": (s, d, _fill(d)) for k, (s, d) in outputs.items()}
        for path, (shape, dtype, fill) in arrays.items():
            group.create_array(
                path,
                shape=(size, *shape),
                chunks=(chunk_size, *shape),
                dtype=np.dtype(dtype),
                fill_value=fill,  # None: zarr's default
            )
        self.group = group
        for chunk in range(self.num_chunks):
            self._write_inputs(inputs, chunk)
        self.manifest["description"] = description(group)
        group.attrs[MANIFEST] = self.manifest
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

    def _write_inputs(self, inputs: Mapping[str, Any], chunk: int) -> None:
        """Write one chunk of every input, in its array's dtype, and its checksum."""
        start, stop = self.bounds(chunk)
        values = {
            name: np.asarray(x[start:stop]).astype(
                self.group[f"inputs/{name}"].dtype, copy=False
            )
            for name, x in inputs.items()
        }
        with _every_chunk():
            for name, value in values.items():
                self.group[f"inputs/{name}"][start:stop] = value
        self.manifest.setdefault("input_checksums", {})[str(chunk)] = checksum(values)

    def write(self, chunk: int, outputs: Mapping[str, np.ndarray]) -> None:
        """Write one chunk of every output, then mark it complete."""
        if not self.writer:
            return
        start, stop = self.bounds(chunk)
        with _every_chunk():
            for name, value in outputs.items():
                self.group[f"outputs/{name}"][start:stop] = value
        self.manifest["completed"] = sorted(self.completed | {chunk})
        canonical = self.manifest.get("checksum_form") == CHECKSUM_FORM
        sums = self.manifest.setdefault("checksums", {})
        sums[str(chunk)] = checksum(outputs, canonical)
        self._write_manifest()

    def finish(self) -> None:
        """Mark a store whose chunks are all written complete, and close it."""
        if self.writer and not self.missing():
            self.manifest["complete"] = True
            self._write_manifest()
        self.close()

    def close(self) -> None:
        """Release the writer's lock, removing its file while holding the lock."""
        if self._lock is not None:
            # `_acquire` then locks a new one; a killed process leaves it unlocked.
            self._lock_file.unlink(missing_ok=True)
            os.close(self._lock)  # closing the descriptor drops the flock
            self._lock = None

    def __del__(self):
        self.close()

    def _write_manifest(self) -> None:
        self.group.attrs[MANIFEST] = self.manifest


def _fill(dtype) -> Any:
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    return -1 if np.issubdtype(dtype, np.integer) else 0


def _every_chunk():
    # Chunks equal to the fill value are written too (the setting is read when
    # an array is opened, so the arrays are opened inside it).
    return import_zarr().config.set({"array.write_empty_chunks": True})


def stored_attributes(store: str | os.PathLike) -> dict | None:
    """The store's attributes, read without opening it (None: absent or unreadable)."""
    try:
        attrs = json.loads((Path(store) / "zarr.json").read_text())["attributes"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return attrs if isinstance(attrs, dict) else None


def _difference(group, attrs: Mapping[str, Any], inputs, chunk_size: int) -> str:
    """What differs between a store's sweep and this one, in words."""
    new = json.loads(json.dumps(dict(attrs), default=repr))
    old = {k: v for k, v in group.attrs.items() if k != MANIFEST}
    changes = list(changed_entries(old, new))
    if changes:
        return "it differs in: " + ", ".join(
            f"{path} (stored {a!r}, now {b!r})"
            if len(repr(a)) + len(repr(b)) <= 80
            else path
            for path, a, b in changes
        )
    stored_chunk = dict(group.attrs[MANIFEST]).get("chunk_size")
    if stored_chunk != chunk_size:
        return f"it differs in: chunk_size (stored {stored_chunk}, now {chunk_size})"
    changed = []
    for name in sorted(set(inputs) | set(array_names(group["inputs"]))):
        if name not in inputs or name not in group["inputs"]:
            changed.append(name)
            continue
        x, old_x = inputs[name], group[f"inputs/{name}"]
        if tuple(x.shape) != tuple(old_x.shape) or np.dtype(x.dtype) != old_x.dtype:
            changed.append(f"{name} (stored {old_x.shape}, now {tuple(x.shape)})")
            continue
        for start in range(0, x.shape[0], chunk_size):
            stop = start + chunk_size
            if not np.array_equal(np.asarray(x[start:stop]), old_x[start:stop]):
                changed.append(name)
                break
    return f"its inputs differ: {', '.join(changed)}" if changed else "other inputs"
