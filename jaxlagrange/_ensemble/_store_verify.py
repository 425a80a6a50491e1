"""Checking a sweep store: the checksums of its chunks, and `open_store`.

See `jaxlagrange._ensemble._store` for the layout and what the manifest records.
"""

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np


MANIFEST = "manifest"
# Checksums over the canonical form (all NaN as +NaN); stores without this key
# hashed the raw bytes, and may lack the files of chunks equal to the fill value.
CHECKSUM_FORM = "canonical-nan/1"


class StoreRefused(ValueError):
    """A directory a sweep cannot write into, or read as a store."""


def import_zarr():
    # Imported on first use: most sessions never write a sweep store.
    import zarr

    return zarr


def open_root(zarr, path: Path, mode: str):
    """Open the store's root group, naming a corrupted metadata file."""
    try:
        return zarr.open_group(path, mode=mode)
    except ValueError as e:  # json.JSONDecodeError is one
        raise ValueError(
            f"The sweep store's metadata {str(path / 'zarr.json')!r} (with its "
            f"manifest) is corrupted and cannot be read ({str(e).splitlines()[0]}); "
            "remove the store directory to run the sweep again."
        ) from None


def description(group) -> dict[str, Any]:
    """A store's metadata as its manifest records it: attribute digests, arrays."""
    kinds = [kind for kind in ("inputs", "outputs") if kind in group]
    arrays = [group[f"{k}/{name}"] for k in kinds for name in array_names(group[k])]
    attributes = {k: v for k, v in group.attrs.items() if k != MANIFEST}
    return {
        "attributes": {
            k: hashlib.sha256(json.dumps(v, sort_keys=True).encode()).hexdigest()
            for k, v in attributes.items()
        },
        "arrays": {
            a.path: [list(a.shape), str(a.dtype), list(a.chunks)] for a in arrays
        },
    }


def check_description(group, path: Path, manifest: Any) -> None:
    """Refuse a store whose manifest is gone or whose metadata differs from it."""
    if not isinstance(manifest, Mapping):
        edits = ["it has lost its manifest (which lists and checks its chunks)"]
    else:
        recorded = manifest.get("description")
        now = {} if recorded is None else description(group)
        edits = [
            f"its root attribute {entry[11:]!r} was edited"
            if entry.startswith("attributes.")
            else f"it has lost its array {entry[7:]!r}"
            if b is None
            else f"its array {entry[7:]!r} was edited (shape, dtype, chunks: "
            f"recorded {a}, now {b})"
            for entry, a, b in changed_entries(recorded or {}, now)
        ]
    if edits:
        raise StoreRefused(
            f"The sweep store {str(path)!r} is not as it was written: "
            f"{'; '.join(edits)}; remove the store directory to run the sweep again."
        )


def changed_entries(old: Any, new: Any, path: str = ""):
    """(path, old, new) of each entry that differs between two JSON-like values."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            where = f"{path}.{key}" if path else str(key)
            yield from changed_entries(old.get(key), new.get(key), where)
    elif old != new:
        yield path, old, new


def _canonical_nan(value: np.ndarray) -> np.ndarray:
    """`value` with every NaN (any sign, any payload) replaced by +NaN."""
    if np.issubdtype(value.dtype, np.floating):
        return np.where(np.isnan(value), np.array(np.nan, value.dtype), value)
    if np.issubdtype(value.dtype, np.complexfloating):
        out = np.empty_like(value)
        out.real, out.imag = _canonical_nan(value.real), _canonical_nan(value.imag)
        return out
    return value


def checksum(arrays: Mapping[Any, Any], canonical: bool = True) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        value = np.asarray(arrays[name])
        if canonical:
            value = _canonical_nan(value)
        value = np.ascontiguousarray(value)
        h.update(f"{name}{value.shape}{value.dtype.str}".encode())
        h.update(value.tobytes())
    return h.hexdigest()


def _files_missing(group, kind: str, name: str, chunk: int) -> bool:
    """Whether the store lacks the file of one chunk of the array `kind/name`."""
    array = group[f"{kind}/{name}"]
    if 0 in array.shape:
        return False
    key = array.metadata.encode_chunk_key((chunk,) + (0,) * (array.ndim - 1))
    root = getattr(group.store, "root", None)  # a local directory store
    return root is not None and not (Path(root) / kind / name / key).is_file()


def bad_chunks(group, manifest: Mapping[str, Any], bounds) -> list[int]:
    """The chunks failing their checksums: a completed chunk's outputs, any inputs."""
    sums = manifest.get("checksums", {})
    canonical = manifest.get("checksum_form") == CHECKSUM_FORM
    names = list(group["outputs"].array_keys())
    bad = set()
    for chunk in manifest.get("completed", []):
        expected = sums.get(str(chunk))
        start, stop = bounds(chunk)
        try:
            ok = not any(
                _files_missing(group, "outputs", n, chunk)
                for n in names
                if canonical or group[f"outputs/{n}"].fill_value != 0
            )
            if ok and expected is not None:  # None: written before checksums
                values = {n: group[f"outputs/{n}"][start:stop] for n in names}
                ok = checksum(values, canonical) == expected
        except Exception:  # a truncated or undecodable chunk file
            ok = False
        if not ok:
            bad.add(chunk)
    input_sums = manifest.get("input_checksums", {})
    if input_sums:
        input_names = array_names(group["inputs"])
        for chunk, expected in input_sums.items():
            start, stop = bounds(int(chunk))
            try:
                values = {n: group[f"inputs/{n}"][start:stop] for n in input_names}
                ok = checksum(values) == expected
            except Exception:
                ok = False
            if not ok:
                bad.add(int(chunk))
    return sorted(bad)


def array_names(group, prefix: str = "") -> list[str]:
    """The paths of the arrays in a Zarr group and its subgroups (`params/g`)."""
    names = [prefix + name for name in group.array_keys()]
    for name, sub in group.groups():
        names += array_names(sub, f"{prefix}{name}/")
    return names


def open_store(
    path: str | os.PathLike, *, verify: bool = True, allow_incomplete: bool = False
):
    """Open a sweep store read-only as a `zarr.Group`.

    **Arguments:**

    - `path`: the store's directory.
    - `verify`: check every chunk against the checksums recorded when it was
        written (a full read of the inputs and outputs).
    - `allow_incomplete`: open a store whose sweep was interrupted; its chunks
        never computed read as the outputs' fill value (NaN, or -1 for
        integers). By default such a store is refused.

    **Raises:** `ValueError` naming the chunks that are missing, truncated or
    altered on disk (rerun the sweep to recompute them), the chunks never
    computed of an incomplete store, and naming corrupted metadata.
    """
    path = Path(path)
    if not (path / "zarr.json").is_file():
        inside = path / "sweep.zarr"
        hint = (
            f": the command line's output directory holds its store in {str(inside)!r}"
            if (inside / "zarr.json").is_file()
            else " (a store is a directory with a zarr.json)"
        )
        raise StoreRefused(f"{str(path)!r} is not a sweep store{hint}.")
    group = open_root(import_zarr(), path, "r")
    manifest = group.attrs.get(MANIFEST)
    check_description(group, path, manifest)
    size, chunk_size = manifest["size"], manifest["chunk_size"]

    def bounds(chunk):
        return chunk * chunk_size, min((chunk + 1) * chunk_size, size)

    if verify:
        bad = bad_chunks(group, manifest, bounds)
        if bad:
            raise ValueError(
                f"The sweep store {str(path)!r} has {len(bad)} chunk(s) that are "
                f"missing, truncated or altered on disk: {_listing(bad)} (of "
                f"chunk_size {chunk_size}); run the sweep again to recompute them."
            )
    done = set(manifest.get("completed", []))
    missing = [k for k in range(manifest["num_chunks"]) if k not in done]
    if missing and not allow_incomplete:
        raise ValueError(
            f"The sweep store {str(path)!r} is incomplete: {len(missing)} of "
            f"{manifest['num_chunks']} chunk(s) were never computed: "
            f"{_listing(missing)} (of chunk_size {chunk_size}; the sweep was "
            "interrupted or is still running); rerun the sweep to finish it, or "
            "pass allow_incomplete=True to read the chunks computed so far."
        )
    return group


def _listing(chunks: list[int], most: int = 20) -> str:
    if len(chunks) <= most:
        return str(chunks)
    return f"{str(chunks[:most])[:-1]}, ... ({len(chunks) - most} more)]"
