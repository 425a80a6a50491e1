"""`jaxlagrange fit`: a system (its params are the starting guess), the solver
settings, and [fit]."""

import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import diffrax
import optax
import optimistix as optx

from .._errors import first_error
from ._schema import (
    ConfigError,
    Key,
    at_least,
    one_of,
    positive_or_reason,
    toml_type,
    valid_names,
)
from .run import RUN_SCHEMA, solver_settings
from .user import beside


FIT_OPTIMIZERS = ("lm", "gauss_newton", "dogleg", "bfgs", "lbfgs", "adam")
FIT_JACOBIANS = ("auto", "forward", "reverse")
FIT_ADJOINTS = ("recursive_checkpoint", "backsolve")


def _must(test, what: str):
    """A check that `test(x)` holds, else "must be {what}, got {type} {x}"."""
    return lambda x: None if test(x) else f"must be {what}, got {toml_type(x)} {x!r}"


def _strings(x) -> bool:
    return isinstance(x, list) and all(isinstance(s, str) for s in x)


_names = _must(_strings, "a list of param names")
_segments = _must(
    lambda x: x == "auto" or type(x) is int and x >= 1, '"auto" or an integer >= 1'
)
_paths = _must(
    lambda x: isinstance(x, str) or _strings(x) and x, "a path or a list of paths"
)


FIT_SCHEMA: dict[str, dict[str, Key]] = {
    "system": RUN_SCHEMA["system"],
    # The initial state of the (single) data file, instead of its first sample.
    "initial": RUN_SCHEMA["initial"],
    "simulate": {
        k: RUN_SCHEMA["simulate"][k] for k in ("solver", "rtol", "atol", "max_steps")
    },
    "fit": {
        "data": Key("any", check=_paths),
        "steps": Key(int, 500, at_least(1)),
        "optimizer": Key(str, "lm", one_of(FIT_OPTIMIZERS)),
        "jacobian": Key(str, "auto", one_of(FIT_JACOBIANS)),
        "learning_rate": Key(float, None, positive_or_reason),
        "trainable": Key("any", None, _names),
        "positive": Key("any", [], _names),
        # Absent: fitted unless [initial] gives both q and qd (`jl.fit`'s rule).
        "fit_initial_state": Key(bool, None),
        "segments": Key("any", "auto", _segments),
        "continuity_weight": Key(float, 1.0, positive_or_reason),
        "sigma": Key(float, None, positive_or_reason),
        "sigma_qd": Key(float, None, positive_or_reason),
        "starts": Key("numbers", {}),
        "adjoint": Key(str, "recursive_checkpoint", one_of(FIT_ADJOINTS)),
        "device": RUN_SCHEMA["run"]["device"],
    },
    # (No animation: a fit draws none.)
    "output": {k: v for k, v in RUN_SCHEMA["output"].items() if k != "animation"},
}
"""The schema of `jaxlagrange fit` configs (every key shown in docs/cli.md)."""


@functools.cache
def _optimizer(name: str, rate: float | None):
    # One object per setting: `jl.fit` compiles its step once per optimizer, so
    # fits with the same settings in one process reuse the compiled step.
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
    """The keyword arguments of `jl.fit` (without `data`) from a checked fit config."""
    source, section = config["source"], config["fit"]
    params = ready.system.params or {}
    starts = section["starts"]
    # The first that holds is refused; settings that would do nothing included.
    refusals = [
        (
            True,
            f"{key}: unknown param {unknown[0]!r} for system {ready.name!r}; valid "
            f"params: {valid_names(params)}",
        )
        for key in ("trainable", "positive", "starts")
        if (unknown := [name for name in section[key] or [] if name not in params])
    ]
    rate, optimizer = section["learning_rate"], section["optimizer"]
    trainable, positive = section["trainable"], section["positive"]
    held = ", ".join(repr(n) for n in positive if n not in (trainable or positive))
    refusals += [
        (
            optimizer != "adam" and rate is not None,
            f"learning_rate is for optimizer = 'adam'; {optimizer!r} chooses its own "
            "steps",
        ),
        (
            optimizer not in ("lm", "gauss_newton") and section["jacobian"] != "auto",
            "jacobian is for optimizer = 'lm' or 'gauss_newton'; "
            f"{optimizer!r} takes reverse-mode derivatives",
        ),
        (
            section["segments"] == 1 and section["continuity_weight"] != 1.0,
            "continuity_weight weighs the gaps between shooting segments; with "
            "segments = 1 there are none",
        ),
        (
            bool(held),
            f"positive: {held} is not trainable (positive params are fitted as "
            "logarithms); add it to trainable, or remove it",
        ),
    ]
    refusals += [
        (True, f"starts: {name} must be a non-empty list of starting values, got {v!r}")
        for name, v in starts.items()
        if not (isinstance(v, list) and v) or any(isinstance(x, list) for x in v)
    ]
    lengths = {k: len(v) for k, v in starts.items() if isinstance(v, list)}
    refusals.append(
        (
            len(set(lengths.values())) > 1,
            "starts: every param needs the same number of starting values, got "
            f"{lengths}",
        )
    )
    refusals = [(bad, f"{source}: [fit] {m}") for bad, m in refusals]
    first_error(None, refusals, error=ConfigError)
    # "recursive_checkpoint" is jl.fit's default (None).
    adjoint = diffrax.BacksolveAdjoint() if section["adjoint"] == "backsolve" else None
    given = ("jacobian", "steps", "fit_initial_state", "segments", "continuity_weight")
    return dict(
        **{key: section[key] for key in given},
        **solver_settings(config["simulate"]),
        optimizer=_optimizer(optimizer, rate),
        trainable=None if trainable is None else set(trainable),
        positive=set(positive),
        adjoint=adjoint,
        starts={k: [float(x) for x in v] for k, v in starts.items()} or None,
    )


def data_paths(config: Mapping[str, Any]) -> list[Path]:
    """The data files of a checked fit config, relative to the config's directory."""
    data = config["fit"]["data"]
    paths = [beside(config, p) for p in ([data] if isinstance(data, str) else data)]
    initial = config["initial"]
    if len(paths) > 1 and (initial["q"] is not None or initial["qd"] is not None):
        raise ConfigError(
            f"{config['source']}: [initial] is the initial state of one data file, "
            f"but [fit] data names {len(paths)}"
        )
    return paths
