"""The strict schema checker: `Key`s of sections, `check`, and `ConfigError`."""

import contextlib
import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any


class ConfigError(ValueError):
    """A mistake in a config file; the message is one line naming the culprit."""


_REQUIRED = object()


@dataclasses.dataclass(frozen=True)
class Key:
    """One key of a config section: its kind, its default and a value check."""

    # float (ints too), int, bool, str, "vector" (a list of numbers), "table", "numbers"
    # (a table of numbers or nested lists of them) or "any" (left to `check`)
    kind: Any
    default: Any = _REQUIRED  # omitted: a required key
    check: Callable[[Any], str | None] | None = None  # what is wrong, or None


def positive_or_reason(x):
    return None if x > 0 else f"must be > 0, got {x!r}"


def at_least(n):
    return lambda x: None if x >= n else f"must be >= {n}, got {x!r}"


def one_of(options):
    return lambda s: (
        None if s in options else f"must be one of {', '.join(options)}, got {s!r}"
    )


def known(what: str, names: Callable[[], Any]):
    """A check that a value is one of `names()` (e.g. the ready systems)."""
    return lambda name: (
        None
        if name in names()
        else f"unknown {what} {name!r}; known {what}s: {', '.join(names())}"
    )


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_finite(x):
    return _is_number(x) and math.isfinite(x)


def _nested(x, test):
    """`test` of the number `x`, or of every number in a (nested) list `x`."""
    return all(_nested(y, test) for y in x) if isinstance(x, list) else test(x)


_KINDS = {  # kind: (test, what it must be)
    float: (_is_finite, "a finite number"),
    int: (lambda x: isinstance(x, int) and not isinstance(x, bool), "an integer"),
    bool: (lambda x: isinstance(x, bool), "true or false"),
    str: (lambda x: isinstance(x, str), "a string"),
    "vector": (
        lambda x: isinstance(x, list) and all(_is_finite(y) for y in x),
        "a list of finite numbers",
    ),
    "table": (lambda x: isinstance(x, dict), "a table"),
}


def type_error(kind, value) -> str | None:
    if kind == "any":  # checked by the key's `check`
        return None
    if kind == "numbers":
        if not isinstance(value, dict):
            return f"must be a table, got {toml_type(value)}"
        for k, v in value.items():
            if not _nested(v, _is_number):
                return (
                    f"{k!r} must be a number or a list of numbers, got {toml_type(v)}"
                )
            if not _nested(v, math.isfinite):  # TOML has nan and inf
                return f"{k!r} must be a finite number (or a list of them), got {v!r}"
        return None
    ok, expected = _KINDS[kind]
    if not ok(value):
        return f"must be {expected}, got {toml_type(value)} {value!r}"
    if kind is int and not -(2**63) <= value < 2**63:  # (JAX's largest: int64)
        return f"must be an integer from -2**63 to 2**63 - 1, got {value!r}"
    return None


_TOML_TYPES = {
    bool: "a boolean",
    int: "an integer",
    float: "a float",
    str: "a string",
    list: "an array",
    dict: "a table",
}


def toml_type(value) -> str:
    return next(
        (name for kind, name in _TOML_TYPES.items() if isinstance(value, kind)),
        type(value).__name__,
    )


def valid_names(names) -> str:
    return ", ".join(sorted(names)) or "none"


@contextlib.contextmanager
def reasons(where: str):
    """Turn a library's `ValueError` in the block into one line "{where}: {reason}"."""
    try:
        yield
    except ValueError as e:
        raise ConfigError(f"{where}: {str(e).rstrip('.')}") from None


def check(
    document: Mapping[str, Any],
    schema: Mapping[str, Mapping[str, Key]],
    source: str = "config",
) -> dict[str, dict[str, Any]]:
    """Check a parsed TOML document against `schema`; returns it with defaults."""
    if unknown := [section for section in document if section not in schema]:
        raise ConfigError(
            f"{source}: unknown section [{unknown[0]}]; valid sections: "
            f"{valid_names(f'[{s}]' for s in schema)}"
        )
    return {
        section: check_table(document.get(section, {}), keys, source, f"[{section}]")
        for section, keys in schema.items()
    }


def check_table(
    given: Any, keys: Mapping[str, Key], source: str, table: str, like: str = ""
) -> dict[str, Any]:
    """The values of the TOML table `table` of `source`, with defaults, checked."""
    if not isinstance(given, dict):
        raise ConfigError(f"{source}: {table} must be a table{like}")
    if unknown := [key for key in given if key not in keys]:
        raise ConfigError(
            f"{source}: unknown key {unknown[0]!r} in {table}; valid keys: "
            f"{valid_names(keys)}"
        )
    values = {}
    for key, spec in keys.items():
        where = f"{source}: {table} {key}"
        if key not in given:
            if spec.default is _REQUIRED:
                raise ConfigError(f"{where} is required")
            values[key] = spec.default
            continue
        value = given[key]
        problem = type_error(spec.kind, value) or (spec.check and spec.check(value))
        if problem:
            raise ConfigError(f"{where}: {problem}")
        values[key] = float(value) if spec.kind is float else value
    return values
