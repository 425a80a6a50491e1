"""`jaxlagrange sweep`: a chunked, resumable ensemble into a Zarr store."""

import argparse
import hashlib
import time
from pathlib import Path

import numpy as np

from .. import _config, plotting
from .._config import ConfigError
from .._ensemble._batch import bad_starts
from .._ensemble._identity import describe, physics_digest
from .._ensemble._member import Rows
from .._ensemble._store import changed_entries, stored_attributes
from .._ensemble._store_verify import StoreRefused
from .._ensemble._sweep import stream
from .._ensemble._sweep_simulate import SweepMember
from .._kernel._ensemble import KernelUnsupported
from .._lanes import UnsupportedPrimitiveError
from .._options import GivenOptions
from .._results import NAMES
from . import _common
from ._output import CLIError, png_bytes, write_with_summary


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_command_arguments(
        parser,
        "a TOML config with a [sweep] section",
        out="out/sweep_<system name>",
        progress="progress bar",
        device="the GPUs when JAX has any, else the CPU",
    )


@_common.configured(_config.SWEEP_SCHEMA, "sweep", batched=True)
def command(args: argparse.Namespace, config, devices) -> int:
    ready = _config.ready_system(config)
    kwargs = _config.simulate_kwargs(config)
    values, grid_shape = _config.sweep_axes(config, ready)
    section = config["sweep"]
    out = _common.output_directory(args, config, f"sweep_{ready.name}")
    size = int(np.prod(grid_shape))
    inputs = {
        key: np.tile(np.asarray(x), (size, 1))
        for key, x in (("q0", ready.q0), ("qd0", ready.qd0))
    }
    params = ready.system.params or {}
    for name, v in values.items():  # (axes on entries of one param share its array)
        key, entry = _config.axis_input(name)
        if key not in inputs:
            default = np.asarray(params[key[len("params/") :]], dtype=float)
            inputs[key] = np.tile(default, (size,) + (1,) * default.ndim)
        inputs[key][(slice(None), *entry)] = v
    member = SweepMember(ready.system, GivenOptions(**kwargs), section["lyapunov"])
    if ready.system.has_constraints:
        _check_starts(member, inputs, ready.name, values)
    store = out / "sweep.zarr"
    stored = stored_attributes(store)
    attrs = _identity(config, ready, grid_shape, values, stored)
    _check_physics(store, stored, attrs)
    _common.say(
        args,
        f"jaxlagrange sweep: {ready.name}, {size} members ({section['sampling']} "
        f"{' x '.join(map(str, grid_shape))}) on {_common.device_name(devices)}, "
        f"t = {kwargs['t0']} .. {kwargs['t1']} -> {store}",
    )
    done_before = _members_done(stored, size)
    options = {k: section[k] for k in ("chunk_size", "backend")} | {"attrs": attrs}
    options["progress"] = _common.show_progress(args)
    start = time.perf_counter()
    try:
        # Members run with throw=False (failures are result codes in the store);
        # the checks as values keep the compiled chunk cacheable across runs.
        with _common.errors_as_values():
            group = stream(member, inputs, store, devices=devices, **options)
    except StoreRefused as e:
        raise CLIError(str(e)) from None
    except (KernelUnsupported, UnsupportedPrimitiveError) as e:
        raise ConfigError(f"{config['source']}: [sweep] {e}") from None
    wall = time.perf_counter() - start
    result = group["outputs/result"][:]
    failed = result != 0
    maps = _maps(group, ready, kwargs["t1"], section["lyapunov"])
    files = {}
    if _common.plots(args, config):
        files = _figures(maps, failed, values, grid_shape, ready, section)
    summary = {
        "command": "sweep",
        "system": ready.name,
        "members": size,
        "not_imported": list(ready.system.not_imported),
        # Those this run computed (the rest were in the store already).
        "members_computed": size - done_before,
        "sampling": section["sampling"],
        "grid_shape": list(grid_shape),
        "axes": {
            name: {"min": float(v.min()), "max": float(v.max())}
            for name, v in values.items()
        },
        "chunks": group.attrs["manifest"]["num_chunks"],
        "failed": int(failed.sum()),
        "failed_by_result": _failed_by_result(result),
        "first_failed": [int(i) for i in np.flatnonzero(failed)[:10]],
        "store": str(store),
        "wall_time_s": wall,
        "members_per_s": (size - done_before) / wall,
        "devices": len(devices),
        "device": devices[0].platform,
        "config": config["source"],
    }
    if section["lyapunov"]:
        summary["lyapunov"] = _stats(maps["lyapunov"][0][~failed])
    write_with_summary(out, files, summary, also=("sweep.zarr",))
    computed = (
        "all computed"
        if done_before == 0
        else "all in the store already"
        if done_before >= size
        else f"{size - done_before} computed, {done_before} in the store already"
    )
    _common.say(
        args,
        f"{size} members ({computed}) in {wall:.1f} s, {int(failed.sum())} failed; "
        f"wrote {out}/",
    )
    return 0


def _identity(config, ready, grid_shape, values, stored) -> dict:
    """The attributes that identify the sweep in its store; a resume must match them."""
    # A store written before the params were recorded by name holds them as
    # one text: kept so, it still resumes.
    legacy = stored is not None and isinstance(stored.get("params"), str)
    # The device is where, not what: it stays out of the store's identity (a
    # sweep may be resumed on another machine). So does the backend asked for;
    # `sweep` records the one used ("auto" resolves by the device).
    section = {
        k: v for k, v in config["sweep"].items() if k not in ("device", "backend")
    }
    attrs = {
        "kind": "jaxlagrange sweep",
        "system": ready.name,
        "coordinates": list(ready.coordinates),
        "config": {
            **{k: config[k] for k in ("system", "initial", "simulate")},
            # (seed: the one used, 0 unless given, as stores have it.)
            "sweep": {**section, "seed": config["sweep"]["seed"] or 0},
        },
        "grid_shape": list(grid_shape),
        "axes": list(values),
        # What the system computes, however its functions get their values (a
        # module the system file imports, a data file `make()` reads).
        "physics": physics_digest(ready.system, ready.q0.shape[0], ready.q0.dtype),
        # The values of its params, the config's and those `make()` chose.
        "params": (describe if legacy else _described_params)(ready.system.params),
    }
    path = _config.system_file(config)
    if path is not None:
        # The physics of a user's system is in its file: part of the identity,
        # by its path as the config gives it (the same from any directory).
        attrs["system_file"] = {
            "path": config["system"]["file"],
            "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        }
    return attrs


def _maps(group, ready, t1, lyapunov: bool) -> dict:
    """`{name: (value of each member, label)}`: Lyapunov exponent, final coordinates."""
    maps = {}
    if lyapunov:
        maps["lyapunov"] = (
            group["outputs/lyapunov"][:],
            "finite-time Lyapunov exponent λ" + (" [1/s]" if ready.units else ""),
        )
    q = group["outputs/q"][:, -1]
    for i in range(ready.q0.shape[0]):
        label = ready.coordinates[i] if i < len(ready.coordinates) else f"q{i}"
        unit = ready.units[i] if ready.units else None
        at = f"{label} at t1 = {t1:g}{' s' if unit else ''}"
        maps[f"final_q{i}"] = (q[:, i], plotting.with_unit(at, unit))
    return maps


def _figures(maps, failed, values, grid_shape, ready, section) -> dict[str, bytes]:
    """The PNG of each map, its failed members blank."""
    files = {}
    for name, (v, label) in maps.items():
        fig = plotting.sweep_map(
            values,
            np.where(failed, np.nan, v),
            grid_shape=grid_shape if section["sampling"] == "grid" else None,
            label=label,
            title=f"{ready.name}: {label}",
            cmap=_colour_map(name, ready.units),
            coordinates=ready.coordinates,
            units=ready.units,
            param_units=dict(ready.param_units or ()),
        )
        files[f"map_{name}.png"] = png_bytes(fig)
    return files


def _colour_map(name: str, units) -> str:
    """A cyclic colour map for the final value of an angle (in rad), only."""
    if name.startswith("final_q") and units and units[int(name[7:])] == "rad":
        return "twilight"
    return "magma" if name == "lyapunov" else "viridis"


def _stats(values: np.ndarray) -> dict[str, float | None]:
    """The min, max and mean of `values` (None where there are none)."""
    stats = {"min": np.min, "max": np.max, "mean": np.mean}
    return {k: float(f(values)) if values.size else None for k, f in stats.items()}


def _members_done(attrs: dict | None, size: int) -> int:
    """How many members the store (its `attrs`) holds already (0 without one)."""
    try:  # (no store: attrs is None, a TypeError)
        manifest = attrs["manifest"]
        chunk_size, done = int(manifest["chunk_size"]), manifest["completed"]
        return sum(min(chunk_size, size - c * chunk_size) for c in done)
    except (ValueError, KeyError, TypeError):
        return 0


def _check_physics(store: Path, attrs: dict | None, current: dict) -> None:
    """Refuse to resume a store whose system file or physics has changed since."""
    if attrs is None:
        return  # no store yet, or one the store itself will judge
    stored, now = attrs.get("system_file"), current.get("system_file")
    mix = "its results would mix two physics"
    if isinstance(stored, dict) and now and stored.get("sha256") != now["sha256"]:
        why = (
            f"the system file {stored.get('path')!r} changed since the store was "
            f"written ({mix})"
        )
    elif "params" in attrs and attrs["params"] != current["params"]:
        changes = ", ".join(
            f"{path} (stored {a}, now {b})"
            for path, a, b in changed_entries(attrs["params"], current["params"])
            if path  # (a store's params as one text: no names to give)
        )
        why = f"the system's params differ{': ' + changes if changes else ''} ({mix})"
    elif "physics" in attrs and attrs["physics"] != current["physics"]:
        where = (
            "a module its file imports, a file it reads or a value it takes from "
            "elsewhere changed"
            if now
            else "a value it takes from elsewhere, or jaxlagrange's own version of "
            "it, changed"
        )
        why = (
            "the system computes something else than when the store was written "
            f"({where}: {mix})"
        )
    else:
        return
    raise CLIError(
        f"the store {str(store)!r} holds a different sweep: {why}; remove the store "
        "or choose another --out"
    )


def _failed_by_result(result: np.ndarray) -> dict[str, int]:
    """How many members failed, by the name of their `jl.RESULTS` code."""
    codes, counts = np.unique(result[result != 0], return_counts=True)
    return {
        NAMES[code] if 0 <= code < len(NAMES) else f"code {code}": int(count)
        for code, count in zip(codes.tolist(), counts, strict=True)
    }


def _check_starts(member, inputs, name: str, values) -> None:
    """Refuse a grid whose members cannot start, naming the first."""
    off, message = bad_starts(member, Rows.of(inputs))
    if message:
        i = int(np.argmax(off))
        at = ", ".join(f"{axis} = {np.asarray(v)[i]:.6g}" for axis, v in values.items())
        why = (
            "a coordinate the constraints fix cannot be swept (sweep independent "
            "coordinates, or params)"
            if any(axis.startswith(("q[", "qd[")) for axis in values)
            else "the swept params move the constraints, and [initial] is on them at "
            "the config's values only"
        )
        raise CLIError(
            f"{int(off.sum())} of {off.size} members start off the constraints of "
            f"{name!r}, the first at {at}: {why}"
        )


def _described_params(params):
    """The params as nested JSON, so that a refused resume can name the one changed."""
    if isinstance(params, dict):
        return {str(k): _described_params(v) for k, v in params.items()}
    return describe(params)
