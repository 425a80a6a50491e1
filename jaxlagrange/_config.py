"""Strict TOML configs, translated into the public calls a Python user makes.

A run config has four sections, every key optional except `[system] name`:

```toml
[system]
name = "spring_chain"          # a name from jl.systems.names()
params = { k = 2.0 }           # overrides of the system's default params
options = { n = 8 }            # structural options of the factory (n, modes, ...)

[initial]                      # default: the system's own initial state
q = [0.5, 0, 0, 0, 0, 0, 0, 0]
qd = [0, 0, 0, 0, 0, 0, 0, 0]

[simulate]
t0 = 0.0
t1 = 20.0
saves = 1001                   # number of equally spaced save times in [t0, t1]
solver = "Tsit5"               # a diffrax solver name, see SOLVERS
rtol = 1e-8
atol = 1e-8
max_steps = 100000

[output]
dir = "out/spring_chain"       # default: out/<system name>; --out overrides it
plots = true
```

`load` checks a file against a schema (a dict of sections, each a dict of `Key`s)
and returns the document with defaults filled in; `ready_system` and
`simulate_kwargs` turn a checked document into the arguments of
`jl.systems.make` and `jl.simulate`. Other subcommands add their own sections by
passing a larger schema to `load`. Every problem is a `ConfigError` whose message
is one line naming the file, the section and the key.
"""

import dataclasses
import functools
import inspect
import math
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import diffrax
import jax.numpy as jnp

from . import systems as _systems


class ConfigError(ValueError):
    """A mistake in a config file; the message is one line naming the culprit."""


_REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a config section.

    - `kind`: `float` (ints accepted), `int`, `bool`, `str`, `"vector"` (a list of
        numbers), `"table"` (a TOML table), `"numbers"` (a table of numbers or
        nested lists of numbers) or `"any"` (left to `check`).
    - `default`: the value when the key is absent (omit it for a required key).
    - `check`: `value -> None | str`, a value check returning what is wrong.
    """

    kind: Any
    default: Any = _REQUIRED
    check: Callable[[Any], str | None] | None = None


def _positive(x):
    return None if x > 0 else f"must be > 0, got {x!r}"


def _at_least(n):
    return lambda x: None if x >= n else f"must be >= {n}, got {x!r}"


SOLVERS = (
    "Tsit5",
    "Dopri5",
    "Dopri8",
    "Bosh3",
    "Heun",
    "Midpoint",
    "Ralston",
    "ImplicitEuler",
    "Kvaerno3",
    "Kvaerno4",
    "Kvaerno5",
)
"""The diffrax solvers a config may name (adaptive ODE solvers)."""


def _known_solver(name):
    if name in SOLVERS:
        return None
    return f"unknown solver {name!r}; known solvers: {', '.join(SOLVERS)}"


def _known_system(name):
    if name in _systems.names():
        return None
    return f"unknown system {name!r}; known systems: {', '.join(_systems.names())}"


RUN_SCHEMA: dict[str, dict[str, Key]] = {
    "system": {
        "name": Key(str, check=_known_system),
        "params": Key("numbers", {}),
        "options": Key("table", {}),
    },
    "initial": {
        "q": Key("vector", None),
        "qd": Key("vector", None),
    },
    "simulate": {
        "t0": Key(float, 0.0),
        "t1": Key(float, 10.0),
        "saves": Key(int, 1001, _at_least(2)),
        "solver": Key(str, "Tsit5", _known_solver),
        "rtol": Key(float, 1e-8, _positive),
        "atol": Key(float, 1e-8, _positive),
        "max_steps": Key(int, 100_000, _at_least(1)),
    },
    "output": {
        "dir": Key(str, None),
        "plots": Key(bool, True),
    },
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


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_numbers(x):
    """A number or a (nested) list of numbers."""
    if isinstance(x, list):
        return all(_is_numbers(y) for y in x)
    return _is_number(x)


def _type_error(kind, value) -> str | None:
    if kind is float:
        ok = _is_number(value) and math.isfinite(value)
        expected = "a finite number"
    elif kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        expected = "an integer"
    elif kind is bool:
        ok = isinstance(value, bool)
        expected = "true or false"
    elif kind is str:
        ok = isinstance(value, str)
        expected = "a string"
    elif kind == "vector":
        ok = isinstance(value, list) and all(
            _is_number(x) and math.isfinite(x) for x in value
        )
        expected = "a list of finite numbers"
    elif kind == "table":
        ok = isinstance(value, dict)
        expected = "a table"
    elif kind == "numbers":
        if not isinstance(value, dict):
            return f"must be a table, got {_toml_type(value)}"
        for k, v in value.items():
            if not _is_numbers(v):
                return (
                    f"{k!r} must be a number or a list of numbers, got {_toml_type(v)}"
                )
        return None
    elif kind == "any":  # checked by the key's `check`
        return None
    else:
        raise AssertionError(kind)
    return None if ok else f"must be {expected}, got {_toml_type(value)} {value!r}"


def _toml_type(value) -> str:
    for kind, name in (
        (bool, "a boolean"),
        (int, "an integer"),
        (float, "a float"),
        (str, "a string"),
        (list, "an array"),
        (dict, "a table"),
    ):
        if isinstance(value, kind):
            return name
    return type(value).__name__


def _valid(names) -> str:
    return ", ".join(sorted(names))


def check(
    document: Mapping[str, Any],
    schema: Mapping[str, Mapping[str, Key]] = RUN_SCHEMA,
    source: str = "config",
) -> dict[str, dict[str, Any]]:
    """Check a parsed TOML document against `schema`; returns it with defaults.

    **Raises:** `ConfigError` for an unknown section or key (listing the valid
    ones), a missing required key, a value of the wrong type or a bad value.
    """
    out = {}
    for section in document:
        if section not in schema:
            raise ConfigError(
                f"{source}: unknown section [{section}]; valid sections: "
                f"{_valid(f'[{s}]' for s in schema)}"
            )
    for section, keys in schema.items():
        given = document.get(section, {})
        if not isinstance(given, dict):
            raise ConfigError(f"{source}: [{section}] must be a table")
        for key in given:
            if key not in keys:
                raise ConfigError(
                    f"{source}: unknown key {key!r} in [{section}]; valid keys: "
                    f"{_valid(keys)}"
                )
        values = {}
        for key, spec in keys.items():
            where = f"{source}: [{section}] {key}"
            if key not in given:
                if spec.default is _REQUIRED:
                    raise ConfigError(f"{where} is required")
                values[key] = spec.default
                continue
            value = given[key]
            problem = _type_error(spec.kind, value)
            if problem is None and spec.check is not None:
                problem = spec.check(value)
            if problem is not None:
                raise ConfigError(f"{where}: {problem}")
            values[key] = float(value) if spec.kind is float else value
        out[section] = values
    return out


def load(
    path: str | Path | None,
    schema: Mapping[str, Mapping[str, Key]] = RUN_SCHEMA,
    default: str = DEFAULT_CONFIG,
) -> dict[str, dict[str, Any]]:
    """Read and check the TOML file `path` (None: the text `default`).

    **Returns:** the checked document with defaults filled in (see `check`).

    **Raises:** `ConfigError` for a missing or unreadable file, invalid TOML, or
    anything `check` rejects.
    """
    if path is None:
        source, text = "default config", default
    else:
        source = str(path)
        try:
            text = Path(path).read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"{source}: no such config file") from None
        except IsADirectoryError:
            raise ConfigError(f"{source}: is a directory, not a config file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"{source}: cannot read: {e}") from None
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{source}: invalid TOML: {e}") from None
    config = check(document, schema, source)
    config["source"] = source  # pyright: ignore[reportArgumentType]
    return config


def factory_options(factory) -> dict[str, Any]:
    """The structural options of a ready-system factory and their defaults: its
    keyword-only arguments other than `q0` and `qd0` (e.g. `n`, `modes`)."""
    return {
        p.name: p.default
        for p in inspect.signature(factory).parameters.values()
        if p.kind is inspect.Parameter.KEYWORD_ONLY and p.name not in ("q0", "qd0")
    }


def _options(config, factory) -> dict[str, Any]:
    """`[system] options`, checked against the factory's keyword-only arguments."""
    source, name = config["source"], config["system"]["name"]
    valid = factory_options(factory)
    options = config["system"]["options"]
    for key, value in options.items():
        if key not in valid:
            listing = _valid(valid) if valid else "none"
            raise ConfigError(
                f"{source}: [system] options: unknown option {key!r} for system "
                f"{name!r}; valid options: {listing}"
            )
        default = valid[key]
        if default is not None and default is not inspect.Parameter.empty:
            problem = _type_error(type(default), value)
            if problem is not None:
                raise ConfigError(f"{source}: [system] options: {key}: {problem}")
    return dict(options)


def ready_system(config: Mapping[str, Any]) -> "_systems.ReadySystem":
    """The `ReadySystem` of a checked config: `jl.systems.make(name, ...)`.

    **Raises:** `ConfigError` naming the key for unknown params or options, and
    initial states of the wrong length.
    """
    source, section = config["source"], config["system"]
    name = section["name"]
    factory = _systems.get(name)
    options = _options(config, factory)
    try:
        default = factory(**options)
    except ValueError as e:
        raise ConfigError(f"{source}: [system] options: {e}") from None
    n = default.q0.shape[0]
    initial = config["initial"]
    for key in ("q", "qd"):
        value = initial[key]
        if value is not None and len(value) != n:
            raise ConfigError(
                f"{source}: [initial] {key} must have {n} entries for system "
                f"{name!r} ({', '.join(default.coordinates)}), got {len(value)}"
            )
    try:
        return factory(
            section["params"] or None, q0=initial["q"], qd0=initial["qd"], **options
        )
    except ValueError as e:
        raise ConfigError(f"{source}: [system] params: {e}") from None


def solver(name: str) -> diffrax.AbstractSolver:
    """The diffrax solver called `name` (one of `SOLVERS`), built with its defaults."""
    problem = _known_solver(name)
    if problem is not None:
        raise ConfigError(problem)
    return getattr(diffrax, name)()


def simulate_kwargs(config: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments of `jl.simulate` from a checked config's `[simulate]`.

    **Raises:** `ConfigError` if t1 <= t0.
    """
    section = config["simulate"]
    t0, t1 = section["t0"], section["t1"]
    if not t1 > t0:
        raise ConfigError(
            f"{config['source']}: [simulate] t1 must be greater than t0, got "
            f"t0 = {t0!r} and t1 = {t1!r}"
        )
    return dict(
        t0=t0,
        t1=t1,
        saveat=jnp.linspace(t0, t1, section["saves"]),
        solver=solver(section["solver"]),
        rtol=section["rtol"],
        atol=section["atol"],
        max_steps=section["max_steps"],
    )


# `jaxlagrange sweep`: the run sections plus [sweep].

SWEEP_SAMPLINGS = ("grid", "random")

SWEEP_SCHEMA: dict[str, dict[str, Key]] = {
    **RUN_SCHEMA,
    # A sweep keeps few saves per member by default: t0 and t1.
    "simulate": {**RUN_SCHEMA["simulate"], "saves": Key(int, 2, _at_least(2))},
    "sweep": {
        "sampling": Key(
            str,
            "grid",
            lambda s: (
                None
                if s in SWEEP_SAMPLINGS
                else f"must be one of {', '.join(SWEEP_SAMPLINGS)}, got {s!r}"
            ),
        ),
        "axes": Key("table"),
        "size": Key(int, None, _at_least(1)),
        "chunk_size": Key(int, 4096, _at_least(1)),
        "seed": Key(int, 0),
        "lyapunov": Key(bool, False),
    },
}
"""The schema of `jaxlagrange sweep` configs: `[sweep]` with its axes, e.g.

```toml
[sweep]
sampling = "grid"              # or "random": `size` uniform samples, from `seed`
chunk_size = 4096              # members per chunk written to the store
lyapunov = true                # also the finite-time Lyapunov exponent per member

[sweep.axes]                   # q[i], qd[i] (initial state) or a param name
"q[0]" = { min = -3.14159, max = 3.14159, num = 512 }
"q[1]" = { min = -3.14159, max = 3.14159, num = 512 }
```
"""

_AXIS_KEYS = {"grid": ("min", "max", "num"), "random": ("min", "max")}


def _axis_targets(ready) -> list[str]:
    n = ready.q0.shape[0]
    return (
        [f"q[{i}]" for i in range(n)]
        + [f"qd[{i}]" for i in range(n)]
        + sorted(ready.system.params or {})
    )


def sweep_axes(config: Mapping[str, Any], ready) -> tuple[dict[str, Any], tuple]:
    """The sampled values of each axis of a checked sweep config.

    **Returns:** `(values, grid_shape)`: `values` maps each axis name to a NumPy
    array of one value per member (grids flattened in C order, the first axis
    slowest); `grid_shape` is the grid's shape, or `(size,)` for random sampling.

    **Raises:** `ConfigError` naming the axis for an unknown target, a missing or
    unknown key, or a bad range.
    """
    import numpy as np

    source, section = config["source"], config["sweep"]
    sampling, axes = section["sampling"], section["axes"]
    where = f"{source}: [sweep.axes]"
    if not axes:
        raise ConfigError(f"{where} is empty; give at least one axis")
    targets = _axis_targets(ready)
    params = ready.system.params or {}
    keys = _AXIS_KEYS[sampling]
    for name, axis in axes.items():
        if name not in targets:
            raise ConfigError(
                f"{where}: unknown axis {name!r}; valid axes for system "
                f"{ready.name!r}: {', '.join(targets)}"
            )
        if name in params and jnp.shape(params[name]) != ():
            raise ConfigError(f"{where}: {name!r} is not a scalar parameter")
        if not isinstance(axis, dict):
            raise ConfigError(
                f"{where} {name}: must be a table like {{ {' = .., '.join(keys)} = .. }}"
            )
        for key in axis:
            if key not in keys:
                raise ConfigError(
                    f"{where} {name}: unknown key {key!r} for {sampling} sampling; "
                    f"valid keys: {', '.join(keys)}"
                )
        for key in keys:
            if key not in axis:
                raise ConfigError(f"{where} {name}: {key} is required")
            kind = int if key == "num" else float
            problem = _type_error(kind, axis[key])
            if problem is None and key == "num":
                problem = _at_least(1)(axis[key])
            if problem is not None:
                raise ConfigError(f"{where} {name}: {key} {problem}")
        if not axis["max"] >= axis["min"]:
            raise ConfigError(
                f"{where} {name}: max must be >= min, got min = {axis['min']!r} and "
                f"max = {axis['max']!r}"
            )
    size = section["size"]
    if sampling == "grid":
        if size is not None:
            raise ConfigError(
                f"{source}: [sweep] size is for random sampling; a grid's size is the "
                "product of its axes' num"
            )
        grids = np.meshgrid(
            *(np.linspace(a["min"], a["max"], a["num"]) for a in axes.values()),
            indexing="ij",
        )
        shape = grids[0].shape
        return {name: g.ravel() for name, g in zip(axes, grids, strict=True)}, shape
    if size is None:
        raise ConfigError(f"{source}: [sweep] size is required for random sampling")
    rng = np.random.default_rng(section["seed"])
    values = {name: rng.uniform(a["min"], a["max"], size) for name, a in axes.items()}
    return values, (size,)


# `jaxlagrange fit`: a system (its params are the starting guess), the solver
# settings, and [fit].

FIT_OPTIMIZERS = ("lm", "gauss_newton", "dogleg", "bfgs", "lbfgs", "adam")
FIT_JACOBIANS = ("auto", "forward", "reverse")
FIT_ADJOINTS = ("recursive_checkpoint", "backsolve")


def _one_of(options):
    return lambda s: (
        None if s in options else f"must be one of {', '.join(options)}, got {s!r}"
    )


def _names(x):
    if isinstance(x, list) and all(isinstance(s, str) for s in x):
        return None
    return f"must be a list of param names, got {_toml_type(x)} {x!r}"


def _paths(x):
    if isinstance(x, str) or (
        isinstance(x, list) and x and all(isinstance(s, str) for s in x)
    ):
        return None
    return f"must be a path or a list of paths, got {_toml_type(x)} {x!r}"


FIT_SCHEMA: dict[str, dict[str, Key]] = {
    "system": RUN_SCHEMA["system"],
    # The initial state of the (single) data file, instead of its first sample.
    "initial": RUN_SCHEMA["initial"],
    "simulate": {
        k: RUN_SCHEMA["simulate"][k] for k in ("solver", "rtol", "atol", "max_steps")
    },
    "fit": {
        "data": Key("any", check=_paths),
        "steps": Key(int, 500, _at_least(1)),
        "optimizer": Key(str, "lm", _one_of(FIT_OPTIMIZERS)),
        "jacobian": Key(str, "auto", _one_of(FIT_JACOBIANS)),
        "learning_rate": Key(float, None, _positive),
        "trainable": Key("any", None, _names),
        "positive": Key("any", [], _names),
        "fit_initial_state": Key(bool, False),
        "segments": Key(int, 1, _at_least(1)),
        "continuity_weight": Key(float, 1.0, _positive),
        "sigma": Key(float, None, _positive),
        "adjoint": Key(str, "recursive_checkpoint", _one_of(FIT_ADJOINTS)),
    },
    "output": RUN_SCHEMA["output"],
}
"""The schema of `jaxlagrange fit` configs, e.g.

```toml
[system]
name = "pendulum"
params = { l = 1.4 }           # the starting guess

[initial]                      # optional: the initial state (default: the data's)
qd = [0.0]

[fit]
data = "pendulum_data.npz"     # .npz (ts, q[, qd]) or .csv (t, q0.., qd0..); or a
                               # list of files; relative to the config's directory
steps = 100                    # the most solver steps (optimizer steps for optax)
optimizer = "lm"               # Levenberg–Marquardt (default), "gauss_newton",
                               # "dogleg", "bfgs" (optimistix); "lbfgs", "adam"
                               # (optax; adam with learning_rate, default 1e-2)
jacobian = "auto"              # or "forward", "reverse" (optimistix solvers)
trainable = ["l"]              # default: every param
positive = ["l"]               # fitted as logarithms
fit_initial_state = false
segments = 1                   # multiple shooting segments
continuity_weight = 1.0
sigma = 0.01                   # noise scale of the data (default 1)
adjoint = "recursive_checkpoint"   # or "backsolve"
```
"""


@functools.cache
def _optimizer(name: str, rate: float | None):
    # One object per setting: `jl.fit` compiles its step once per optimizer, so
    # fits with the same settings in one process reuse the compiled step.
    import optax
    import optimistix as optx

    tol = dict(rtol=1e-10, atol=1e-10)
    solvers = {
        "lm": lambda: optx.LevenbergMarquardt(**tol),
        "gauss_newton": lambda: optx.GaussNewton(**tol),
        "dogleg": lambda: optx.Dogleg(**tol),
        "bfgs": lambda: optx.BFGS(**tol),
        "lbfgs": optax.lbfgs,
        "adam": lambda: optax.adam(1e-2 if rate is None else rate),
    }
    return solvers[name]()


def fit_kwargs(config: Mapping[str, Any], ready) -> dict[str, Any]:
    """The keyword arguments of `jl.fit` (without `data`) from a checked fit config.

    **Raises:** `ConfigError` naming the key for unknown param names and a
    learning rate given to L-BFGS.
    """
    source, section = config["source"], config["fit"]
    params = ready.system.params or {}
    for key in ("trainable", "positive"):
        names = section[key] or []
        unknown = [name for name in names if name not in params]
        if unknown:
            raise ConfigError(
                f"{source}: [fit] {key}: unknown param {unknown[0]!r} for system "
                f"{ready.name!r}; valid params: {_valid(params)}"
            )
    rate = section["learning_rate"]
    if section["optimizer"] != "adam" and rate is not None:
        raise ConfigError(
            f"{source}: [fit] learning_rate is for optimizer = 'adam'; "
            f"{section['optimizer']!r} chooses its own steps"
        )
    optimizer = _optimizer(section["optimizer"], rate)
    simulate = config["simulate"]
    # "recursive_checkpoint" is jl.fit's default (None).
    adjoint = {"recursive_checkpoint": None, "backsolve": diffrax.BacksolveAdjoint()}[
        section["adjoint"]
    ]
    trainable = section["trainable"]
    return dict(
        optimizer=optimizer,
        jacobian=section["jacobian"],
        steps=section["steps"],
        trainable=None if trainable is None else set(trainable),
        positive=set(section["positive"]),
        fit_initial_state=section["fit_initial_state"],
        segments=section["segments"],
        continuity_weight=section["continuity_weight"],
        adjoint=adjoint,
        solver=solver(simulate["solver"]),
        rtol=simulate["rtol"],
        atol=simulate["atol"],
        max_steps=simulate["max_steps"],
    )


def data_paths(config: Mapping[str, Any]) -> list[Path]:
    """The data files of a checked fit config, relative to the config's directory.

    **Raises:** `ConfigError` if `[initial]` is given with several data files.
    """
    data = config["fit"]["data"]
    base = Path(config["source"]).parent
    paths = [base / p for p in ([data] if isinstance(data, str) else data)]
    initial = config["initial"]
    if len(paths) > 1 and (initial["q"] is not None or initial["qd"] is not None):
        raise ConfigError(
            f"{config['source']}: [initial] is the initial state of one data file, "
            f"but [fit] data names {len(paths)}"
        )
    return paths
