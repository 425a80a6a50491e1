"""The `jaxlagrange` command line.

    jaxlagrange run [CONFIG.toml] [--out DIR] [--quiet] [--no-plots] [--show-config]
    jaxlagrange sweep CONFIG.toml [--out DIR] [--quiet] [--no-plots]
    jaxlagrange systems [NAME ...]
    jaxlagrange fit CONFIG.toml [--out DIR] [--quiet] [--no-plots]

`run` simulates the system of a TOML config (see `jaxlagrange._config`; without
one, the embedded default: a chaotic double pendulum) and writes, into `--out`
(default: `[output] dir`, else `out/<system name>` under the current directory),
`trajectory.npz` (`ts`, `q`, `qd`, `energy`, and `multipliers` for constrained
systems), `summary.json` and PNG plots. The simulation runs in float64. `sweep`
runs a chunked, resumable ensemble into a Zarr store (see `jaxlagrange._sweep`).
`fit` fits the params of a system to observed trajectories with `jl.fit` and
writes the fitted params, the loss history and plots.

Each subcommand is a pair of small functions, `_<name>_arguments(parser)` and
`_<name>(args) -> int`, listed in `_COMMANDS`. A subcommand raises `CLIError` (or
`ConfigError`) for a user error; `main` prints it as one line on stderr and exits
with status 1, never a traceback (`jaxlagrange --debug ...` shows it). Outputs are
first rendered in memory, then each is written atomically with `write_outputs`.
"""

import argparse
import io
import json
import math
import os
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from . import _config
from ._config import ConfigError


class CLIError(Exception):
    """A user error of the command line; its message is printed as one line."""


# Atomic outputs.


def atomic_write(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and `os.replace`.

    A reader (or a crash) sees either the old file or the complete new one, never
    a partial file under the final name; the temporary file is removed on failure.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes it private (0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def npz_bytes(**arrays: Any) -> bytes:
    """The bytes of an `.npz` file holding `arrays`."""
    buffer = io.BytesIO()
    np.savez(buffer, **{k: np.asarray(v) for k, v in arrays.items()})
    return buffer.getvalue()


def json_bytes(obj: Any) -> bytes:
    """Pretty JSON (NaN/inf are not JSON: they become null)."""
    return (json.dumps(_jsonable(obj), indent=2, ensure_ascii=False) + "\n").encode()


def png_bytes(fig: Any, dpi: int = 130) -> bytes:
    """The bytes of a PNG of the matplotlib figure `fig`."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()


def output_dir(path: str | Path) -> Path:
    """Create the output directory `path` (and its parents); a clear error if not."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CLIError(f"output directory {str(path)!r} is an existing file") from None
    except OSError as e:
        raise CLIError(
            f"cannot create output directory {str(path)!r}: {e.strerror}"
        ) from None
    if not os.access(path, os.W_OK):
        raise CLIError(f"output directory {str(path)!r} is not writable")
    return path


def write_outputs(directory: str | Path, files: Mapping[str, bytes]) -> list[Path]:
    """Write each `name: bytes` of `files` atomically into `directory`."""
    directory = output_dir(directory)
    written = []
    for name, data in files.items():
        atomic_write(directory / name, data)
        written.append(directory / name)
    return written


def write_output_set(directory: str | Path, files: Mapping[str, bytes]) -> Path:
    """Write `files` into `directory` as one set: all old outputs or all new ones.

    The new files are written into a staging directory beside it, which takes
    the directory's place by two renames; the files there that no jaxlagrange
    run wrote (not listed in the old `summary.json`) are then carried over. A run
    killed between the renames leaves the old set whole beside the directory,
    and the next run puts it back (or finishes the carrying) before anything else.
    """
    directory = Path(directory)
    parent = output_dir(directory.parent)
    old = parent / f".{directory.name}.old"
    _recover(directory, old)
    for stale in parent.glob(f".{directory.name}.staging-*"):
        shutil.rmtree(stale, ignore_errors=True)
    if directory.exists() and not directory.is_dir():
        raise CLIError(f"output directory {str(directory)!r} is an existing file")
    staging = parent / f".{directory.name}.staging-{os.getpid()}"
    staging.mkdir()
    try:
        for name, data in files.items():
            (staging / name).write_bytes(data)
        if directory.exists():
            os.rename(directory, old)
        os.rename(staging, directory)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _recover(directory, old)
    return directory


def _run_id() -> dict[str, Any]:
    """What names this run in its summary: when, and which process."""
    now = time.time()
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now))
    return {"id": f"{stamp}Z-{os.getpid()}", "finished_utc": stamp}


def _recover(directory: Path, old: Path) -> None:
    """Finish an interrupted swap: restore the old set, or carry its user files."""
    if not old.exists():
        return
    if not directory.exists():
        os.rename(old, directory)
        return
    try:
        produced = set(json.loads((old / "summary.json").read_text())["files"])
    except (OSError, ValueError, KeyError, TypeError):
        produced = set()
    for item in old.iterdir():
        if item.name not in produced and not (directory / item.name).exists():
            os.rename(item, directory / item.name)  # the user's own files
    shutil.rmtree(old, ignore_errors=True)


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):  # NumPy and JAX arrays
        return _jsonable(np.asarray(obj).tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    return obj


# Shared helpers of the subcommands.


def _enable_x64() -> None:
    import jax

    jax.config.update("jax_enable_x64", True)


def _progress_meter(quiet: bool):
    import diffrax

    if quiet:
        return diffrax.NoProgressMeter()
    return diffrax.TextProgressMeter(minimum_increase=0.1)


def _say(args, message: str) -> None:
    if not args.quiet:
        print(message, flush=True)


def _result_message(result) -> str:
    from ._trajectory import RESULTS

    return "successful" if result == RESULTS.successful else RESULTS[result]


def _stats(stats: Mapping[str, Any]) -> dict[str, int]:
    return {k: int(np.asarray(v)) for k, v in stats.items()}


def _energy_along(system, ts, q, qd):
    """The Jacobi integral along (ts, q, qd), and whether it is conserved there.

    It is not when there are forces or dissipation, inelastic impacts (a
    restitution below 1), nor when L or a constraint depends on t explicitly
    somewhere on the trajectory.
    """
    import equinox as eqx
    import jax
    import jax.numpy as jnp

    from ._eom import _energy as energy

    def time_derivatives(q, qd, t):
        parts = [jax.grad(system._lagrangian, argnums=2)(q, qd, t)[None]]
        if system.holonomic is not None:
            parts.append(jax.jacfwd(system._holonomic, argnums=1)(q, t))
        if system.nonholonomic is not None:
            parts.append(jax.jacfwd(system._nonholonomic, argnums=2)(q, qd, t))
        return jnp.concatenate(parts)

    @eqx.filter_jit
    def along(ts, q, qd):
        energies = jax.vmap(energy, in_axes=(None, 0, 0, 0))(system, q, qd, ts)
        rates = jax.vmap(time_derivatives)(q, qd, ts)
        return energies, jnp.all(rates == 0)

    energies, autonomous = along(ts, q, qd)
    forced = system.force is not None or system.dissipation is not None
    if system.unilateral is not None:
        forced = forced or not bool(jnp.all(jnp.asarray(system.restitution) == 1))
    return energies, bool(autonomous) and not forced


# `jaxlagrange run`.


_RUN_EPILOG = """\
outputs (written atomically into the output directory):
  trajectory.npz     ts (T,), q and qd (T, n), energy (T,), multipliers (T, m)
                     for constrained systems; event_ts, event_constraint and
                     event_kind (0 release, 1 impact) with unilateral ones
  summary.json       system, params, initial state, solver settings, result,
                     energy drift, solver statistics, events, wall time,
                     versions
  coordinates.png    the coordinates against time
  phase.png          velocity against coordinate, coloured by time
  energy.png         the energy error (or the energy, when not conserved)
  configuration.png  the path in the plane of the first two coordinates (n >= 2)

example configs: configs/*.toml; the default: jaxlagrange run --show-config
"""


def _run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _RUN_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument(
        "config",
        nargs="?",
        help="a TOML config (default: the embedded double-pendulum config)",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default: [output] dir, else out/<system name>)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument(
        "--quiet", action="store_true", help="no progress meter or messages"
    )
    parser.add_argument(
        "--show-config",
        action="store_true",
        help="print the embedded default config and exit",
    )


def solve(ready, kwargs: Mapping[str, Any], *, quiet: bool = False):
    """`jl.simulate(*ready, **kwargs)`, compiled ahead of time and timed.

    **Returns:** `(trajectory, compile_s, run_s)`.

    **Raises:** `CLIError` naming the failure and the time reached.
    """
    import equinox as eqx
    import jax

    from ._simulate import simulate
    from ._trajectory import RESULTS

    if ready.system.has_constraints:
        # Eagerly, for a one-line error (under the compiled run it is a runtime one).
        import jax.numpy as jnp

        from ._projection import check_initial_state

        t0 = jnp.asarray(kwargs.get("t0", 0.0), ready.q0.dtype)
        try:
            check_initial_state(ready.system, ready.q0, ready.qd0, t0)
        except ValueError as e:
            raise CLIError(f"[initial] state of {ready.name!r}: {e}") from None
    meter = _progress_meter(quiet)
    run = eqx.filter_jit(
        lambda system, q0, qd0: simulate(
            system, q0, qd0, **kwargs, progress_meter=meter, throw=False
        )
    )
    start = time.perf_counter()
    compiled = run.lower(*ready).compile()
    compile_s = time.perf_counter() - start
    traj = jax.block_until_ready(compiled(*ready))
    run_s = time.perf_counter() - start - compile_s
    if traj.result != RESULTS.successful:
        if traj.result == RESULTS.max_steps_reached:
            message = (
                "the maximum number of solver steps was reached; raise [simulate] "
                f"max_steps (now {kwargs['max_steps']}) or loosen rtol/atol"
            )
        else:
            message = _result_message(traj.result).rstrip(".")
        raise CLIError(
            f"simulation of {ready.name!r} failed at t = {float(traj.t_final):.6g} "
            f"(t1 = {float(kwargs['t1']):.6g}): {message}"
        )
    return traj, compile_s, run_s


def _events(traj) -> list[dict[str, Any]]:
    """The releases and impacts of unilateral constraints on `traj`, for JSON."""
    from ._trajectory import EVENT_IMPACT

    used = int(traj.num_events)
    return [
        {
            "t": float(t),
            "constraint": int(i),
            "kind": "impact" if int(k) == EVENT_IMPACT else "release",
        }
        for t, i, k in zip(
            traj.event_ts[:used],
            traj.event_constraint[:used],
            traj.event_kind[:used],
            strict=True,
        )
    ]


def _figures(ready, traj, energies, conserved: bool) -> dict[str, bytes]:
    """The PNGs of `jaxlagrange run`, rendered in memory."""
    from . import plotting

    title, labels = f"{ready.name}: ", ready.coordinates
    figures = {
        "coordinates.png": plotting.coordinates(
            traj.ts, traj.q, labels, title=title + "coordinates against time"
        ),
        "phase.png": plotting.phase_portrait(
            traj.q, traj.qd, labels, ts=traj.ts, title=title + "phase portrait"
        ),
        "energy.png": plotting.energy(traj.ts, energies, conserved=conserved),
    }
    if ready.q0.shape[0] >= 2:
        figures["configuration.png"] = plotting.configuration(
            traj.q, labels, ts=traj.ts
        )
    return {name: png_bytes(fig) for name, fig in figures.items()}


def _run(args: argparse.Namespace) -> int:
    if args.show_config:
        print(_config.DEFAULT_CONFIG, end="")
        return 0
    _enable_x64()
    import jax

    from . import __version__

    config = _config.load(args.config)
    ready = _config.ready_system(config)
    kwargs = _config.simulate_kwargs(config)
    out = args.out or config["output"]["dir"] or os.path.join("out", ready.name)
    out = output_dir(out)
    plots = config["output"]["plots"] and not args.no_plots

    _say(args, f"jaxlagrange run: {ready.name}, t = {kwargs['t0']} .. {kwargs['t1']}")
    traj, compile_s, run_s = solve(ready, kwargs, quiet=args.quiet)
    energies, conserved = _energy_along(ready.system, traj.ts, traj.q, traj.qd)
    energies = np.asarray(energies)
    e0 = float(energies[0])
    drift = float(np.max(np.abs(energies - e0)))
    relative = drift / abs(e0) if e0 != 0 else None

    arrays = {"ts": traj.ts, "q": traj.q, "qd": traj.qd, "energy": energies}
    if ready.system.has_constraints:
        arrays["multipliers"] = traj.multipliers
    events = {}
    if ready.system.unilateral is not None:
        events["events"] = _events(traj)
        used = int(traj.num_events)
        arrays["event_ts"] = traj.event_ts[:used]
        arrays["event_constraint"] = traj.event_constraint[:used]
        arrays["event_kind"] = traj.event_kind[:used]
    files = {"trajectory.npz": npz_bytes(**arrays)}
    if plots:
        files.update(_figures(ready, traj, energies, conserved))
    summary = {
        "system": ready.name,
        "coordinates": list(ready.coordinates),
        "params": ready.system.params,
        "options": config["system"]["options"],
        "initial": {"q": ready.q0, "qd": ready.qd0},
        "simulate": dict(config["simulate"]),
        "result": _result_message(traj.result),
        "t_final": float(traj.t_final),
        "energy": {
            "conserved": conserved,
            "initial": e0,
            "final": float(energies[-1]),
            "max_abs_drift": drift,
            "max_rel_drift": relative,
        },
        "stats": _stats(traj.stats),
        **events,
        "wall_time_s": {"compile": compile_s, "run": run_s, "total": compile_s + run_s},
        "config": config["source"],
        "run": _run_id(),
        "versions": {"jaxlagrange": __version__, "jax": jax.__version__},
        "files": sorted([*files, "summary.json"]),
    }
    files["summary.json"] = json_bytes(summary)
    write_output_set(out, files)
    if conserved and relative is not None:
        drift_text = f"relative energy drift {relative:.2e}"
    else:
        drift_text = f"energy change {drift:.2e}"
    _say(
        args,
        f"{summary['stats']['num_steps']} steps in {run_s:.2f} s "
        f"(+ {compile_s:.2f} s compile), {drift_text}; wrote {out}/",
    )
    return 0


# `jaxlagrange systems`.


def _systems_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these systems")


def _format_value(x: Any) -> str:
    x = np.asarray(x)
    return (
        f"{x.item():g}" if x.ndim == 0 else "[" + ", ".join(f"{v:g}" for v in x) + "]"
    )


def _systems(args: argparse.Namespace) -> int:
    from . import systems

    for name in args.names:
        if name not in systems.names():
            raise CLIError(
                f"unknown system {name!r}; known systems: {', '.join(systems.names())}"
            )
    for name in args.names or systems.names():
        factory = systems.get(name)
        ready = factory()
        options = _config.factory_options(factory)
        params = ready.system.params or {}
        print(name)
        print(f"  coordinates: {', '.join(ready.coordinates)}")
        print(
            "  params:      "
            + ", ".join(f"{k} = {_format_value(v)}" for k, v in params.items())
        )
        if options:
            shown = ", ".join(f"{k} = {v!r}" for k, v in options.items())
            print(f"  options:     {shown}")
        print(
            f"  initial:     q = {_format_value(ready.q0)}, qd = {_format_value(ready.qd0)}"
        )
    return 0


# `jaxlagrange sweep`.


def _sweep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", help="a TOML config with a [sweep] section")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default: [output] dir, else out/sweep_<system name>)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument(
        "--quiet", action="store_true", help="no progress bar or messages"
    )


def _sweep(args: argparse.Namespace) -> int:
    _enable_x64()
    import jax

    from . import __version__, plotting
    from ._sweep import _SweepMember, sweep

    config = _config.load(args.config, _config.SWEEP_SCHEMA)
    ready = _config.ready_system(config)
    kwargs = _config.simulate_kwargs(config)
    values, grid_shape = _config.sweep_axes(config, ready)
    section = config["sweep"]
    out = (
        args.out
        or config["output"]["dir"]
        or os.path.join("out", f"sweep_{ready.name}")
    )
    out = output_dir(out)
    size = int(np.prod(grid_shape))
    n = ready.q0.shape[0]
    q0 = np.tile(np.asarray(ready.q0), (size, 1))
    qd0 = np.tile(np.asarray(ready.qd0), (size, 1))
    swept_params = []
    inputs = {"q0": q0, "qd0": qd0}
    for name, v in values.items():
        if name.startswith("qd["):
            qd0[:, int(name[3:-1])] = v
        elif name.startswith("q["):
            q0[:, int(name[2:-1])] = v
        else:
            swept_params.append(name)
            inputs[f"params/{name}"] = v
    member = _SweepMember(ready.system, swept_params, kwargs, section["lyapunov"])
    attrs = {
        "kind": "jaxlagrange sweep",
        "system": ready.name,
        "coordinates": list(ready.coordinates),
        "config": {k: config[k] for k in ("system", "initial", "simulate", "sweep")},
        "grid_shape": list(grid_shape),
        "axes": list(values),
    }
    store = out / "sweep.zarr"
    _say(
        args,
        f"jaxlagrange sweep: {ready.name}, {size} members ({section['sampling']} "
        f"{' x '.join(map(str, grid_shape))}) on {len(jax.devices())} device(s), "
        f"t = {kwargs['t0']} .. {kwargs['t1']} -> {store}",
    )
    start = time.perf_counter()
    try:
        group = sweep(
            member,
            inputs,
            store,
            chunk_size=section["chunk_size"],
            progress=not args.quiet,
            attrs=attrs,
        )
    except ValueError as e:
        if "holds a different sweep" in str(e) or "is not a sweep store" in str(e):
            raise CLIError(str(e)) from None
        raise
    wall = time.perf_counter() - start
    result = group["outputs/result"][:]
    failed = result != 0
    outputs = {"q": group["outputs/q"][:, -1], "qd": group["outputs/qd"][:, -1]}
    maps = {}
    if section["lyapunov"]:
        maps["lyapunov"] = (
            group["outputs/lyapunov"][:],
            "finite-time Lyapunov exponent λ",
        )
    for i in range(n):
        label = ready.coordinates[i] if i < len(ready.coordinates) else f"q{i}"
        maps[f"final_q{i}"] = (outputs["q"][:, i], f"{label} at t1 = {kwargs['t1']:g}")
    files = {}
    if config["output"]["plots"] and not args.no_plots:
        for name, (v, label) in maps.items():
            v = np.where(failed, np.nan, v)
            fig = plotting.sweep_map(
                values,
                v,
                grid_shape=grid_shape if section["sampling"] == "grid" else None,
                label=label,
                title=f"{ready.name}: {label}",
                cmap="magma" if name == "lyapunov" else "twilight",
            )
            files[f"map_{name}.png"] = png_bytes(fig)
    summary = {
        "system": ready.name,
        "members": size,
        "sampling": section["sampling"],
        "grid_shape": list(grid_shape),
        "axes": {
            name: {"min": float(v.min()), "max": float(v.max())}
            for name, v in values.items()
        },
        "chunks": group.attrs["manifest"]["num_chunks"],
        "failed": int(failed.sum()),
        "first_failed": [int(i) for i in np.flatnonzero(failed)[:10]],
        "store": str(store),
        "wall_time_s": wall,
        "members_per_s": size / wall,
        "devices": len(jax.devices()),
        "config": config["source"],
        "versions": {"jaxlagrange": __version__, "jax": jax.__version__},
        "files": sorted([*files, "summary.json", "sweep.zarr"]),
    }
    if section["lyapunov"]:
        lam = maps["lyapunov"][0][~failed]
        summary["lyapunov"] = {
            "min": float(lam.min()) if lam.size else None,
            "max": float(lam.max()) if lam.size else None,
            "mean": float(lam.mean()) if lam.size else None,
        }
    files["summary.json"] = json_bytes(summary)
    write_outputs(out, files)
    _say(
        args,
        f"{size} members in {wall:.1f} s, {int(failed.sum())} failed; wrote {out}/",
    )
    return 0


# `jaxlagrange fit`.


_FIT_EPILOG = """\
data files: .npz with arrays ts (T,), q (T, n) and optionally qd (T, n), e.g. the
trajectory.npz of `jaxlagrange run`; or .csv with a header row `t,q0,..,qd0,..`
(the qd columns optional).

outputs (written atomically into the output directory):
  params.json        the fitted params
  summary.json       system, starting and fitted params, loss, initial states,
                     settings, wall time, versions
  losses.csv         the loss at each optimizer step
  fit.npz            per data file i: ts_i, q_i (observed), q_fit_i (the fitted
                     system simulated from the fitted initial state)
  fit.png            observed against fitted trajectory (first data file)
  loss.png           the loss history

example: configs/fit_pendulum.toml
"""


def _fit_arguments(parser: argparse.ArgumentParser) -> None:
    parser.epilog = _FIT_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", help="a TOML config with a [fit] section")
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="output directory (default: [output] dir, else out/fit_<system name>)",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument("--quiet", action="store_true", help="no progress messages")


def load_observations(
    path: Path, n: int, sigma: float | None, q0: Any = None, qd0: Any = None
):
    """A `jl.Observations` from an `.npz` or `.csv` file of `n` coordinates, with
    the noise scale `sigma` and the initial state `q0`, `qd0` (None: the data's).

    **Raises:** `CLIError` naming the file for a missing or unreadable file, missing
    arrays or columns, and data that `Observations` rejects.
    """
    from ._fit_loss import Observations

    name = str(path)
    if not path.is_file():
        raise CLIError(f"{name}: no such data file")
    try:
        if path.suffix == ".npz":
            if not zipfile.is_zipfile(path):
                raise CLIError(
                    f"{name}: not a valid data file (not a NumPy .npz archive); a "
                    "data file holds the arrays ts, q and optionally qd"
                )
            with np.load(path) as archive:
                arrays = {k: archive[k] for k in archive.files}
            for key in ("ts", "q"):
                if key not in arrays:
                    raise CLIError(
                        f"{name}: no array {key!r}; a data file holds ts, q and "
                        f"optionally qd (it has {', '.join(arrays) or 'none'})"
                    )
            ts, q, qd = arrays["ts"], arrays["q"], arrays.get("qd")
        elif path.suffix == ".csv":
            table = np.genfromtxt(path, delimiter=",", names=True, dtype=float)
            columns = table.dtype.names or ()
            needed = ["t", *(f"q{i}" for i in range(n))]
            missing = [c for c in needed if c not in columns]
            if missing:
                raise CLIError(
                    f"{name}: no column {missing[0]!r}; the header must be "
                    f"{','.join(needed)}[,qd0,..] (it is {','.join(columns)})"
                )
            table = np.atleast_1d(table)
            ts = table["t"]
            q = np.stack([table[f"q{i}"] for i in range(n)], axis=1)
            velocity = [f"qd{i}" for i in range(n)]
            qd = (
                np.stack([table[c] for c in velocity], axis=1)
                if all(c in columns for c in velocity)
                else None
            )
        else:
            raise CLIError(f"{name}: unknown data format; use .npz or .csv")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CLIError(
            f"{name}: not a valid data file, cannot read it: {_one_line(e)}"
        ) from None
    if np.ndim(q) == 2 and np.shape(q)[1] != n:
        raise CLIError(
            f"{name}: q has {np.shape(q)[1]} coordinates, but the system has {n}"
        )
    try:
        return Observations(ts, q, qd, q0=q0, qd0=qd0, sigma=sigma)
    except ValueError as e:
        raise CLIError(f"{name}: {_one_line(e)}") from None


def _with_stderr(params, stderr):
    """`{"l": 2.0, "l_stderr": 3e-9, ...}` for dict params; else both side by side."""
    if isinstance(params, dict):
        out = {}
        for key, value in params.items():
            out[key] = value
            out[f"{key}_stderr"] = stderr[key]
        return out
    return {"params": params, "stderr": stderr}


def _fit(args: argparse.Namespace) -> int:
    _enable_x64()
    import jax

    from . import __version__
    from ._fit import fit
    from ._simulate import simulate

    config = _config.load(args.config, _config.FIT_SCHEMA)
    ready = _config.ready_system(config)
    kwargs = _config.fit_kwargs(config, ready)
    n = ready.q0.shape[0]
    paths = _config.data_paths(config)
    initial, sigma = config["initial"], config["fit"]["sigma"]
    data = [load_observations(p, n, sigma, initial["q"], initial["qd"]) for p in paths]
    out = (
        args.out or config["output"]["dir"] or os.path.join("out", f"fit_{ready.name}")
    )
    out = output_dir(out)
    plots = config["output"]["plots"] and not args.no_plots

    _say(
        args,
        f"jaxlagrange fit: {ready.name} to {len(data)} observed trajectory(ies), "
        f"optimizer {config['fit']['optimizer']} (at most {kwargs['steps']} steps)",
    )
    start = time.perf_counter()
    try:
        result = fit(ready.system, data, progress=not args.quiet, **kwargs)
    except FloatingPointError as e:
        raise CLIError(_one_line(e)) from None
    except ValueError as e:
        raise ConfigError(f"{config['source']}: [fit] {_one_line(e)}") from None
    fit_s = time.perf_counter() - start

    arrays = {}
    for i, (obs, q0, qd0) in enumerate(zip(data, result.q0, result.qd0, strict=True)):
        traj = simulate(
            result.system,
            q0,
            qd0,
            t0=obs.ts[0],
            t1=obs.ts[-1],
            saveat=obs.ts,
            solver=kwargs["solver"],
            rtol=kwargs["rtol"],
            atol=kwargs["atol"],
            max_steps=kwargs["max_steps"],
            throw=False,
        )
        arrays.update({f"ts_{i}": obs.ts, f"q_{i}": obs.q, f"q_fit_{i}": traj.q})
    losses = "step,loss\n" + "".join(
        f"{k},{loss!r}\n" for k, loss in enumerate(result.losses.tolist())
    )
    files = {
        "params.json": json_bytes(_with_stderr(result.params, result.stderr)),
        "losses.csv": losses.encode(),
        "fit.npz": npz_bytes(**arrays),
    }
    if plots:
        from . import plotting

        files["fit.png"] = png_bytes(
            plotting.fit_comparison(
                arrays["ts_0"],
                arrays["q_0"],
                arrays["q_fit_0"],
                ready.coordinates,
                title=f"{ready.name}: observed ({paths[0].name}) and fitted",
            )
        )
        files["loss.png"] = png_bytes(plotting.losses(result.losses))
    summary = {
        "system": ready.name,
        "data": [str(p) for p in paths],
        "initial_params": ready.system.params,
        "params": result.params,
        "loss": {"initial": float(result.losses[0]), "final": result.loss},
        "stderr": result.stderr,
        "converged": result.converged,
        "solver_steps": result.steps,
        "initial_state": {"q": result.q0, "qd": result.qd0},
        "fit": dict(config["fit"]),
        "simulate": dict(config["simulate"]),
        "wall_time_s": fit_s,
        "config": config["source"],
        "run": _run_id(),
        "versions": {"jaxlagrange": __version__, "jax": jax.__version__},
        "files": sorted([*files, "summary.json"]),
    }
    files["summary.json"] = json_bytes(summary)
    write_output_set(out, files)
    _say(
        args,
        f"loss {result.losses[0]:.3e} -> {result.loss:.3e} in {fit_s:.1f} s; "
        f"wrote {out}/",
    )
    return 0


# The parser and the entry point.

_COMMANDS: list[
    tuple[str, str, Callable[[argparse.ArgumentParser], None], Callable[..., int]]
] = [
    ("run", "simulate a system from a TOML config", _run_arguments, _run),
    (
        "systems",
        "list the ready systems, their params and options",
        _systems_arguments,
        _systems,
    ),
    (
        "sweep",
        "simulate a grid or random sample of initial states and params to a Zarr store",
        _sweep_arguments,
        _sweep,
    ),
    (
        "fit",
        "fit a system's params to observed trajectories (.npz or .csv)",
        _fit_arguments,
        _fit,
    ),
]
"""(name, help, add_arguments, handler) of each subcommand."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other error of the command line.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jaxlagrange",
        description="Differentiable Lagrangian mechanics in JAX.",
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors"
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    for name, help, add_arguments, handler in _COMMANDS:
        sub = subparsers.add_parser(name, help=help, description=help)
        add_arguments(sub)
        sub.set_defaults(handler=handler)
    return parser


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); the exit status."""
    args = _parser().parse_args(argv)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("jaxlagrange: interrupted", file=sys.stderr)
        return 130
    except (CLIError, ConfigError) as e:
        if args.debug:
            raise
        print(f"jaxlagrange {args.command}: error: {_one_line(e)}", file=sys.stderr)
        return 1
    except Exception as e:
        if args.debug:
            raise
        print(
            f"jaxlagrange {args.command}: error: {type(e).__name__}: {_one_line(e)} "
            "(run with --debug for the traceback)",
            file=sys.stderr,
        )
        return 1
