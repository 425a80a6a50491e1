"""`jaxlagrange sweep`: the run sections plus [sweep]."""

from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

from .._ensemble._backend import BACKENDS
from .._errors import first_error
from .._validate import over_memory
from ..systems._registry import check_physical
from ._schema import ConfigError, Key, at_least, check_table, one_of, reasons
from .run import RUN_SCHEMA


SWEEP_SAMPLINGS = ("grid", "random")

SWEEP_SCHEMA: dict[str, dict[str, Key]] = {
    **{k: v for k, v in RUN_SCHEMA.items() if k not in ("run", "output")},
    # (No animation: a sweep draws none.)
    "output": {k: v for k, v in RUN_SCHEMA["output"].items() if k != "animation"},
    # A sweep keeps few saves per member by default: t0 and t1.
    "simulate": {**RUN_SCHEMA["simulate"], "saves": Key(int, 2, at_least(2))},
    "sweep": {
        "sampling": Key(str, "grid", one_of(SWEEP_SAMPLINGS)),
        "axes": Key("table"),
        "size": Key(int, None, at_least(1)),
        "chunk_size": Key(int, 4096, at_least(1)),
        "seed": Key(int, None),  # random sampling's (default 0)
        "lyapunov": Key(bool, False),
        "device": RUN_SCHEMA["run"]["device"],
        "backend": Key(str, "auto", one_of(BACKENDS)),
    },
}
"""The schema of `jaxlagrange sweep` configs: `[sweep]` with its axes (docs/cli.md)."""

_AXIS = {"min": Key(float), "max": Key(float)}
_AXIS_KEYS = {"grid": {**_AXIS, "num": Key(int, check=at_least(1))}, "random": _AXIS}


def _axis_targets(ready) -> tuple[set[str], str]:
    """Every valid axis name (`q[0]`, `l1`, `body_mass[2]`) and the list errors name."""
    params = ready.system.params or {}
    shapes = {k: np.shape(params[k]) for k in sorted(params)}
    coordinates = [f"{x}[{i}]" for x in ("q", "qd") for i in range(ready.q0.shape[0])]
    names = set(coordinates) | {
        f"{k}{list(i)}".replace("[]", "").replace(" ", "")
        for k, s in shapes.items()
        for i in np.ndindex(s)
    }
    listed = coordinates + [
        f"{k}[{', '.join(f'0..{d - 1}' for d in s)}]" if s else k
        for k, s in shapes.items()
    ]
    return names, ", ".join(listed)


def axis_input(name: str) -> tuple[str, tuple[int, ...]]:
    """The input an axis sets (`q0`, `qd0` or `params/<key>`) and its entry."""
    key, _, index = name.partition("[")
    entry = tuple(int(i) for i in index.rstrip("]").split(",")) if index else ()
    return {"q": "q0", "qd": "qd0"}.get(key, f"params/{key}"), entry


def _check_domain(config, ready, name: str, axis, where: str) -> None:
    """Apply `run`'s checks of a ready system's param at both ends of an axis."""
    check = getattr(ready, "check_params", None)  # a loaded MuJoCo model's rules
    user = config["system"]["name"] is None
    if check is None and (user or name not in (ready.system.params or {})):
        # Coordinates; a user's system's params: their valid values are its affair.
        return
    # Both ends suffice: the valid values of every param are an interval.
    key, entry = axis_input(name)
    for end in ("min", "max"):
        value = float(axis[end])
        with reasons(f"{where}: {end} = {value!r} is outside the valid values"):
            if check is None:
                check_physical(ready.name, name, jnp.asarray(value))
            elif key.startswith("params/"):
                params = dict(ready.system.params)
                params[key[7:]] = params[key[7:]].at[entry].set(value)
                check(params)


def sweep_axes(config: Mapping[str, Any], ready) -> tuple[dict[str, Any], tuple]:
    """The values of each axis, one per member in C order, and the grid's shape."""
    source, section = config["source"], config["sweep"]
    sampling, axes = section["sampling"], section["axes"]
    where = f"{source}: [sweep.axes]"
    if not axes:
        raise ConfigError(f"{where} is empty; give at least one axis")
    targets, listed = _axis_targets(ready)
    keys = _AXIS_KEYS[sampling]
    named = {}  # each axis by its name without white space, as the rest reads it
    checked = {}
    for given, axis in axes.items():
        name = "".join(given.split())
        if name not in targets or name in named:
            problem = (
                f"axes {named.get(name)!r} and {given!r} are both {name}"
                if name in named
                else f"unknown axis {given!r}; valid axes for system {ready.name!r}: "
                f"{listed}"
            )
            raise ConfigError(f"{where}: {problem}")
        named[name] = given
        like = f" like {{ {' = .., '.join(keys)} = .. }}"
        axis = checked[name] = check_table(
            axis, keys, source, f"[sweep.axes] {name}", like
        )
        if not axis["max"] >= axis["min"]:
            raise ConfigError(
                f"{where} {name}: max must be >= min, got min = {axis['min']!r} and "
                f"max = {axis['max']!r}"
            )
        _check_domain(config, ready, name, axis, f"{where} {name}")
    axes, size, grid = checked, section["size"], sampling == "grid"
    refusals = [
        (
            grid and size is not None,
            "size is for random sampling; a grid's size is "
            "the product of its axes' num",
        ),
        (
            grid and section["seed"] is not None,
            "seed is for random sampling; a grid has none",
        ),
        (not grid and size is None, "size is required for random sampling"),
    ]
    refusals = [(bad, f"{source}: [sweep] {m}") for bad, m in refusals]
    first_error(None, refusals, error=ConfigError)
    if grid:
        size = int(np.prod([a["num"] for a in axes.values()]))
    # Per member: q0, qd0, and a value per axis (at most one per coordinate and
    # param), 8 bytes each; twice, for the copies made on the way.
    needed = 2 * size * 8 * (4 * ready.q0.shape[0] + 8)
    if (over := over_memory(needed)) is not None:
        raise ConfigError(
            f"{source}: [sweep.axes] {size} members would need "
            f"{needed / 2**30:.1f} GiB for their initial states alone, {over}: "
            "sweep fewer members (or split the sweep)"
        )
    if grid:
        grids = np.meshgrid(
            *(np.linspace(a["min"], a["max"], a["num"]) for a in axes.values()),
            indexing="ij",
        )
        shape = grids[0].shape
        return {name: g.ravel() for name, g in zip(axes, grids, strict=True)}, shape
    rng = np.random.default_rng(0 if section["seed"] is None else section["seed"])
    values = {name: rng.uniform(a["min"], a["max"], size) for name, a in axes.items()}
    return values, (size,)
