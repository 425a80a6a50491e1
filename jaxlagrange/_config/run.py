"""The run sections ([system], [initial], [simulate], [output]) and `load`."""

import inspect
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import systems as _systems
from .._options import MAX_STEPS
from .._validate import check_output_size
from ._schema import (
    ConfigError,
    Key,
    at_least,
    check,
    check_table,
    known,
    one_of,
    positive_or_reason,
    reasons,
)
from .user import beside, user_system


SOLVERS = (
    *("Tsit5", "Dopri5", "Dopri8", "Bosh3", "Heun", "Midpoint", "Ralston"),  # explicit
    *("ImplicitEuler", "Kvaerno3", "Kvaerno4", "Kvaerno5"),  # implicit: stiff systems
)
"""The diffrax solvers a config may name (adaptive ODE solvers)."""

DEVICES = ("auto", "cpu", "gpu")
"""The choices of `device` in `[run]`, `[sweep]` and `[fit]`, and of `--device`."""


RUN_SCHEMA: dict[str, dict[str, Key]] = {
    "system": {
        "name": Key(str, None, known("system", _systems.names)),
        "file": Key(str, None),
        "mujoco": Key(str, None),  # an MJCF or URDF file, relative to the config
        "function": Key(str, "make"),
        "params": Key("numbers", {}),
        "options": Key("table", {}),
    },
    "initial": {"q": Key("vector", None), "qd": Key("vector", None)},
    "simulate": {
        "t0": Key(float, 0.0),
        "t1": Key(float, 10.0),
        "saves": Key(int, 1001, at_least(2)),
        "solver": Key(str, "Tsit5", known("solver", lambda: SOLVERS)),
        "rtol": Key(float, 1e-8, positive_or_reason),
        "atol": Key(float, 1e-8, positive_or_reason),
        "max_steps": Key(int, MAX_STEPS, at_least(1)),
    },
    "output": {
        "dir": Key(str, None),
        "plots": Key(bool, True),
        "animation": Key(bool, True),
    },
    "run": {"device": Key(str, "auto", one_of(DEVICES))},
}
"""The schema of `jaxlagrange run` configs."""


DEFAULT_CONFIG = """\
# The embedded default of `jaxlagrange run`: a chaotic double pendulum.
[system]
name = "double_pendulum"

[simulate]
t1 = 20.0
saves = 2001
rtol = 1e-10
atol = 1e-10
"""


def load(
    path: str | Path | None,
    schema: Mapping[str, Mapping[str, Key]] = RUN_SCHEMA,
    default: str = DEFAULT_CONFIG,
) -> dict[str, dict[str, Any]]:
    """The TOML file `path` (None: the text `default`) checked, defaults filled in."""
    source = "default config" if path is None else str(path)
    try:
        # utf-8-sig: a byte-order mark (some Windows editors save one) is not TOML.
        text = default if path is None else Path(path).read_text(encoding="utf-8-sig")
        document = tomllib.loads(text)
    except FileNotFoundError:
        why = "no such config file"
    except IsADirectoryError:
        why = "is a directory, not a config file"
    except (OSError, UnicodeDecodeError) as e:
        why = f"cannot read: {e}"
    except tomllib.TOMLDecodeError as e:
        why = f"invalid TOML: {e}"
    else:
        config = check(document, schema, source)
        config["source"] = source  # pyright: ignore[reportArgumentType]
        return config
    raise ConfigError(f"{source}: {why}")


def factory_options(factory) -> dict[str, Any]:
    """A ready-system factory's structural options (`n`, `modes`) and defaults."""
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in ("q0", "qd0")
    }


def _options(config, factory) -> dict[str, Any]:
    """`[system] options`, checked against the factory's keyword-only arguments."""
    given = config["system"]["options"]
    keys = {
        key: Key("any" if d is None or d is inspect.Parameter.empty else type(d), None)
        for key, d in factory_options(factory).items()
    }
    checked = check_table(given, keys, config["source"], "[system] options")
    return {key: checked[key] for key in given}


def ready_system(config: Mapping[str, Any]) -> "_systems.ReadySystem":
    """The `ReadySystem` of a checked config: a ready one, or the user's `file`."""
    source, section = config["source"], config["system"]
    name = section["name"]
    if sum(section[k] is not None for k in ("name", "file", "mujoco")) != 1:
        raise ConfigError(
            f"{source}: [system] needs exactly one of `name` (a ready system, see "
            "`jaxlagrange systems`), `file` (a Python file of your own) and `mujoco` "
            "(an MJCF or URDF file)"
        )
    if section["file"] is not None:
        return user_system(config)
    if section["mujoco"] is not None:
        return _mujoco_system(config)
    factory = _systems.get(name)
    options = _options(config, factory)
    with reasons(f"{source}: [system] options"):
        default = factory(**options)
    _check_initial(config, default, f"system {name!r}")
    initial = config["initial"]
    with reasons(f"{source}: [system] params"):
        return factory(
            section["params"] or None, q0=initial["q"], qd0=initial["qd"], **options
        )


def _mujoco_system(config: Mapping[str, Any]) -> "_systems.ReadySystem":
    """`jl.mujoco.load` of the config's `[system] mujoco` file with its params."""
    from .. import mujoco

    source, section = config["source"], config["system"]
    where = f"{source}: [system] mujoco {section['mujoco']!r}"
    try:
        with reasons(where):
            path = beside(config, section["mujoco"])
            ready = mujoco.load(path, params=section["params"] or None)
    except ImportError:
        raise ConfigError(f"{where}: needs `pip install jaxlagrange[mujoco]`") from None
    _check_initial(config, ready, repr(section["mujoco"]))
    initial = config["initial"]
    state = tuple(
        x if initial[k] is None else jnp.asarray(initial[k], x.dtype)
        for k, x in (("q", ready.q0), ("qd", ready.qd0))
    )
    return eqx.tree_at(lambda r: (r.q0, r.qd0), ready, state)


def _check_initial(config: Mapping[str, Any], ready, system: str) -> None:
    """That `[initial]` q and qd, where given, have one entry per coordinate."""
    n = ready.q0.shape[0]
    for key in ("q", "qd"):
        value = config["initial"][key]
        if value is not None and len(value) != n:
            raise ConfigError(
                f"{config['source']}: [initial] {key} must have {n} entries for "
                f"{system} ({', '.join(ready.coordinates)}), got {len(value)}"
            )


def solver_settings(section: Mapping[str, Any]) -> dict[str, Any]:
    """`solver` (the diffrax solver it names), `rtol`, `atol`, `max_steps`."""
    settings = {key: section[key] for key in ("rtol", "atol", "max_steps")}
    return {"solver": getattr(diffrax, section["solver"])(), **settings}


def simulate_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `jl.simulate` from a checked config's `[simulate]`."""
    section = config["simulate"]
    t0, t1 = section["t0"], section["t1"]
    if not t1 > t0:
        raise ConfigError(
            f"{config['source']}: [simulate] t1 must be greater than t0, got "
            f"t0 = {t0!r} and t1 = {t1!r}"
        )
    saves, dtype = section["saves"], jnp.result_type(float)
    # Before the save times are made (the array itself may not fit), for one
    # coordinate at least.
    with reasons(f"{config['source']}: [simulate] saves = {saves} is too many"):
        check_output_size(saves, 1, 0, dtype)
    saveat = jax.device_put(np.linspace(t0, t1, saves, dtype=dtype))
    return dict(t0=t0, t1=t1, saveat=saveat, **solver_settings(section))
