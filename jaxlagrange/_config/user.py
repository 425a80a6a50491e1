"""Systems from the user's own Python file: `[system] file` and `function`.

`make(**params)` returns a `jl.LagrangianSystem` or a `jl.systems.ReadySystem`;
the file may also define the figures' labels and `positions` (docs/cli.md, "Your
own system"). Every problem with the file (missing, not importable, no such
function, a function that raises or returns something else, one that reads past
q) is one `ConfigError` line naming the file and the function."""

import contextlib
import importlib.util
import inspect
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp

from .. import systems as _systems
from .._errors import one_line
from .._system import LagrangianSystem
from ._schema import ConfigError


def _module(path: Path, where: str):
    """Import the file at `path` as a fresh module."""
    name = f"jaxlagrange_user_{abs(hash(str(path)))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ConfigError(f"{where}: cannot import it as Python (use a .py file)")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # for dataclasses and pickling inside the file
    # As `python file.py` does: the modules beside the file import, from any
    # working directory and from the installed `jaxlagrange` script, also when
    # `make()` or the system's functions import them later.
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    with _raising(f"{where}: importing it"):
        try:
            spec.loader.exec_module(module)
        except SyntaxError as e:
            raise ConfigError(
                f"{where}: syntax error at line {e.lineno}: {e.msg}"
            ) from None
    return module


@contextlib.contextmanager
def _raising(what: str):
    """Raise what the file's code raises in the block as one `ConfigError` line."""
    try:
        yield
    except (KeyboardInterrupt, ConfigError):
        raise
    except BaseException as e:  # SystemExit too: one line, not an exit
        raise ConfigError(f"{what} raised {one_line(e, typed=True)}") from None


def beside(config: Mapping[str, Any], name: str) -> Path:
    """The file `name` relative to the config's directory (the default's: here)."""
    source = config["source"]
    return (Path.cwd() if source == "default config" else Path(source).parent) / name


def system_file(config: Mapping[str, Any]) -> Path | None:
    """The path of the Python file a config's `[system] file` names, or None."""
    name = config["system"]["file"]
    return None if name is None else beside(config, name)


def _read_past(fn, args, fits: str, who: str, advice: str, own=lambda error: None):
    """`fn(*args)` under JAX's index checks; a `ConfigError` if it reads past q."""
    from jax.experimental import checkify

    try:
        # JAX clamps an index past the end of an array: the run would go on wrong.
        error, out = jax.jit(checkify.checkify(fn, errors=checkify.index_checks))(*args)
    except Exception as e:
        return own(e)
    if message := error.get():
        first = message.strip().splitlines()[0].strip()
        raise ConfigError(f"{fits}, but {who} reads past them ({first}); {advice}")
    return out


def _check_coordinates(system, q0, qd0, where: str, file: str, made: str, advice: str):
    """Check that the system's functions fit q0's n coordinates."""

    # A coordinate that L never depends on (zero mass row and derivatives at q0
    # and at a second state) means n is larger than the system's.
    def used(q, qd):
        def lagrangian(q, qd):
            return system.L(q, qd, jnp.zeros((), q.dtype))

        mass = jax.hessian(lagrangian, argnums=1)(q, qd)
        dq, dqd = jax.grad(lagrangian, argnums=(0, 1))(q, qd)
        return (
            (mass != 0).any(axis=0) | (mass != 0).any(axis=1) | (dq != 0) | (dqd != 0)
        )

    def check(q, qd):
        t = jnp.zeros((), q.dtype)
        for f in (system.L, system.Q, *(k.residual for k in system.constraints.all)):
            f(q, qd, t)  # each traced, so that its errors are named
        return used(q, qd) | used(q + 0.37, qd + 0.29)

    def named(e):  # a wrong output shape or dtype, named by `_system`
        if not isinstance(e, ValueError):
            return None
        raised = one_line(e, typed=True)
        raise ConfigError(
            f"{where}, but the system of {file!r} unpacks q into another number "
            f"of coordinates ({raised}); {advice}"
            if "values to unpack" in str(e)  # q unpacked into more or fewer names
            else f"{made}: the system it returns: {raised}"
        ) from None

    # One compiled program: far faster than running it op by op.
    system_of = f"the system of {file!r}"
    used_coordinates = _read_past(check, (q0, qd0), where, system_of, advice, named)
    if used_coordinates is None:
        return
    unused = [int(i) for i in jnp.flatnonzero(~used_coordinates)]
    if unused:
        raise ConfigError(
            f"{where}, but the Lagrangian of {file!r} does not depend on coordinate "
            f"{', '.join(map(str, unused))} (counting from 0); {advice}"
        )


def user_system(config: Mapping[str, Any]) -> "_systems.ReadySystem":
    """The `ReadySystem` of a config whose `[system]` names a `file`."""
    source, section = config["source"], config["system"]
    path = beside(config, section["file"])
    function = section["function"]
    where = f"{source}: [system] file {section['file']!r}"
    if section["options"]:
        raise ConfigError(
            f"{source}: [system] options apply to ready systems; pass the settings "
            f"of {function}() in {section['file']!r} as params"
        )
    if not path.is_file():
        raise ConfigError(f"{where}: no such file ({path})")
    module = _module(path, where)
    where = f"{where}, function {function!r}"
    make = getattr(module, function, None)
    if not callable(make):
        defined = sorted(
            k
            for k, v in vars(module).items()
            if inspect.isfunction(v) and v.__module__ == module.__name__
        )
        raise ConfigError(
            f"{where}: no such function in the file (it defines: "
            f"{', '.join(defined) or 'no functions'})"
        )
    params = dict(section["params"])
    call = ", ".join(f"{k}={v!r}" for k, v in params.items())
    with _raising(f"{where}: {function}({call})"):
        made = make(**params)
    if isinstance(made, _systems.ReadySystem):
        system, q0, qd0 = made
        coordinates, points = made.coordinates, made.points
        labels = {k: getattr(made, k) for k in _FILE_LABELS[1:]}
    elif isinstance(made, LagrangianSystem):
        system, q0, qd0, coordinates, points, labels = made, None, None, None, None, {}
    else:
        raise ConfigError(
            f"{where}: returned {type(made).__name__}, not a jl.LagrangianSystem"
        )
    initial = config["initial"]
    q0 = initial["q"] if initial["q"] is not None else q0
    qd0 = initial["qd"] if initial["qd"] is not None else qd0
    if q0 is None or qd0 is None:
        why = (
            f"are needed for the system of {section['file']!r} (a LagrangianSystem "
            "has no default state)"
        )
    else:
        q0, qd0 = jnp.asarray(q0, float), jnp.asarray(qd0, float)
        why = (
            "must be lists of the same length, got "
            f"{q0.shape[0] if q0.ndim == 1 else q0.shape} and "
            f"{qd0.shape[0] if qd0.ndim == 1 else qd0.shape} entries"
            if q0.ndim != 1 or q0.shape[0] == 0 or qd0.shape != q0.shape
            else None
        )
    if why:
        raise ConfigError(f"{source}: [initial] q and qd {why}")
    n = q0.shape[0]
    data = initial.get("data")  # fit: the data file whose first sample is q0
    origin = (
        f"the data file {data!r} gives"
        if data is not None
        else "[initial] q and qd give"
        if initial["q"] is not None or initial["qd"] is not None
        else f"the initial state of {function}() gives"
    )
    fits = f"{source}: {origin} {n} coordinate(s)"
    per = "column of q" if data is not None else "entry"
    advice = f"give one {per} per coordinate of the system"
    _check_coordinates(system, q0, qd0, fits, section["file"], where, advice)
    # The file's labels for the figures, over those of a ReadySystem make() gave.
    labels |= {k: getattr(module, k) for k in _FILE_LABELS if hasattr(module, k)}
    labels["coordinates"] = (
        labels.get("coordinates") or coordinates or [f"q{i}" for i in range(n)]
    )
    for key in ("coordinates", "units"):
        labels[key] = _label_list(labels, key, n, "coordinate", where)
    labels["length_unit"] = _label(labels.get("length_unit"), "length_unit", where)
    positions = getattr(module, "positions", None)
    if callable(positions):
        # The system's full params: the defaults of make() and the config's.
        full = {
            k: p.default
            for k, p in inspect.signature(make).parameters.items()
            if p.default is not inspect.Parameter.empty
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        }
        full.update(params)

        def points(q, t, system_params, _positions=positions):
            del t, system_params
            return _positions(q, **full)

        # No coordinate read past q0's n; its own errors are named where the
        # plots are drawn.
        who = f"`positions` in {section['file']!r}"
        _read_past(lambda q: jnp.asarray(points(q, 0, 0)), (q0,), fits, who, advice)
        k = _check_points(points, q0, f"{source}: [system] file {section['file']!r}")
        labels["point_names"] = _label_list(labels, "point_names", k, "point", where)
    return _systems.ReadySystem(system, q0, qd0, path.stem, points=points, **labels)


_FILE_LABELS = ("coordinates", "units", "point_names", "length_unit")


def _label_list(labels, key: str, n: int, what: str, where: str):
    """`labels[key]` as `n` strings (one per coordinate or point), or None."""
    labels = labels.get(key)
    if labels is None:
        return None
    if not isinstance(labels, (list, tuple)):  # (a dict's keys are no labels)
        problem = f"must be a list of labels, one per {what}, got {labels!r}"
    elif len(labels) != n:
        problem = f"has {len(labels)} labels for {n} {what}s"
    else:
        return tuple(_label(x, key, where) for x in labels)
    raise ConfigError(f"{where}: `{key}` {problem}")


def _label(label, key: str, where: str):
    """`label` checked: a string matplotlib can draw (or None, a unit not known)."""
    problem = None
    if label is None and key in ("units", "length_unit"):
        return None
    if not isinstance(label, str):
        problem = f"must hold strings, got {type(label).__name__} {label!r}"
    elif "$" in label:  # matplotlib's mathtext, parsed now rather than when drawn
        from matplotlib.mathtext import MathTextParser

        try:
            MathTextParser("path").parse(label)
        except ValueError as e:
            why = str(e).strip().splitlines()[-1].split(": ", 1)[-1]
            problem = f"label {label!r} is not one matplotlib can draw: {why}"
    if problem:
        raise ConfigError(f"{where}: `{key}` {problem}")
    return label


def _check_points(points, q0, where: str) -> int:
    """Evaluate `positions` once at q0 (a broken one fails now, not after the run)."""
    with _raising(f"{where}, function 'positions': positions(q0)"):
        shape = jnp.shape(jnp.asarray(points(q0, 0.0, None)))
    if len(shape) != 2 or shape[-1] not in (2, 3):
        raise ConfigError(
            f"{where}, function 'positions': must return shape (k, 2) or (k, 3) "
            f"for one state, got shape {shape}"
        )
    return shape[0]
