"""`jaxlagrange fit`: fit a system's params to observed trajectories."""

import argparse
import sys
import time
import warnings
import zipfile
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import _config, plotting
from .._config import ConfigError
from .._errors import first_error, one_line
from .._fit._loss import Observations
from .._fit._main import fit
from .._programs import call
from .._trajectory import failed, result_message, result_name
from . import _common
from ._output import CLIError, json_bytes, npz_bytes, png_bytes, run_id


POOR_FIT = 3
"""The exit status of a fit that ran and wrote its outputs, but fits poorly."""

# `jl.fit`'s refusal of a given initial position off the constraints.
_OFF_CONSTRAINTS = "the initial position of data[0] (its q0) is off"

_FIT_EPILOG = """\
data files: .npz with arrays ts (T,), q (T, n) and optionally qd (T, n), e.g. the
trajectory.npz of `jaxlagrange run`; or .csv with a header row `t,q0,..,qd0,..`
(the qd columns optional).

outputs (written atomically into the output directory):
  params.json        the fitted params, each with its standard error beside it
                     ("l": 2.0, "l_stderr": 3e-9; null for params held fixed)
  summary.json       system, starting and fitted params, loss, initial states,
                     fit quality (reduced chi-squared with sigma, RMS residual
                     and the data's spread, poor_fit and the warnings), the
                     solver's result, settings, wall time, versions
  losses.csv         the loss at each solver step
  fit.npz            per data file i: ts_i, q_i (observed), q_fit_i (the fitted
                     system simulated from the fitted initial state)
  fit.png            observed against fitted trajectory (first data file)
  loss.png           the loss history

exit status: 0 a good fit; 3 a poor fit, or one stopped early as hopeless
(solver: stalled) (outputs written, the warning says what to try); 1 an error.

example: configs/fit_pendulum.toml
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_command_arguments(
        parser,
        "a TOML config with a [fit] section",
        out="out/fit_<system name>",
        progress="progress bar",
        device="the CPU",
        epilog=_FIT_EPILOG,
    )


def load_observations(
    path: Path,
    n: int | None,
    sigma: float | None,
    q0: Any = None,
    qd0: Any = None,
    sigma_qd: float | None = None,
    coordinates: Any = None,
):
    """A `jl.Observations` from an `.npz` or `.csv` file of `n` coordinates."""
    name = str(path)
    checks = [
        (not path.is_file(), "no such data file"),
        (path.suffix not in (".npz", ".csv"), "unknown data format; use .npz or .csv"),
        (
            path.suffix == ".npz" and not zipfile.is_zipfile(path),
            "not a valid data file (not a NumPy .npz archive); a data file holds "
            "the arrays ts, q and optionally qd",
        ),
    ]
    first_error(None, [(c, f"{name}: {m}") for c, m in checks], error=CLIError)
    try:
        if path.suffix == ".npz":
            with np.load(path) as archive:
                arrays = {k: archive[k] for k in archive.files}
            for key in ("ts", "q"):
                if key not in arrays:
                    raise CLIError(
                        f"{name}: no array {key!r}; a data file holds ts, q and "
                        f"optionally qd (it has {', '.join(arrays) or 'none'})"
                    )
            ts, q, qd = arrays["ts"], arrays["q"], arrays.get("qd")
        else:
            table = np.genfromtxt(path, delimiter=",", names=True, dtype=float)
            columns = table.dtype.names or ()
            # Every q column, also those past the system's n (refused below).
            found = next(i for i in range(len(columns) + 1) if f"q{i}" not in columns)
            k = max(found, n or 1)
            needed = ["t", *(f"q{i}" for i in range(k))]
            missing = [c for c in needed if c not in columns]
            if missing:
                raise CLIError(
                    f"{name}: no column {missing[0]!r}; the header must be "
                    f"{','.join(needed)}[,qd0,..] (it is {','.join(columns)})"
                )
            table = np.atleast_1d(table)
            ts, q = table["t"], np.stack([table[f"q{i}"] for i in range(k)], axis=1)
            velocity = [f"qd{i}" for i in range(k)]
            given = all(c in columns for c in velocity)
            qd = np.stack([table[c] for c in velocity], axis=1) if given else None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise CLIError(
            f"{name}: not a valid data file, cannot read it: {one_line(e)}"
        ) from None
    if np.ndim(q) == 2 and n is not None and np.shape(q)[1] != n:
        names = f" ({', '.join(coordinates)})" if coordinates else ""
        raise CLIError(
            f"{name}: q has {np.shape(q)[1]} coordinates, but the system has {n}{names}"
        )
    try:
        return Observations(ts, q, qd, q0=q0, qd0=qd0, sigma=sigma, sigma_qd=sigma_qd)
    except ValueError as e:
        raise CLIError(f"{name}: {one_line(e)}") from None


def shooting_segments(data, samples: int = 8) -> int:
    """`[fit] segments = "auto"`: one per half oscillation of the fastest coordinate."""
    # Over many periods one shot's loss is rugged: a frequency a little off puts
    # the model out of phase. A crossing counts past a quarter of the spread.
    halves, most = 0, []
    for obs in data:
        ts, q = np.asarray(obs.ts), np.asarray(obs.q)
        basis = np.stack([ts - ts[0], np.ones_like(ts)], axis=1)
        wiggle = q - basis @ np.linalg.lstsq(basis, q, rcond=None)[0]
        side = np.sign(wiggle) * (np.abs(wiggle) > 0.25 * wiggle.std(axis=0))
        for column in side.T:
            signs = column[column != 0]
            halves = max(halves, np.count_nonzero(np.diff(signs)))
        most.append(max(1, (len(ts) - 1) // samples))
    return int(min(max(1, halves), min(most)))


def _with_stderr(params, stderr):
    """`{"l": 2.0, "l_stderr": 3e-9, ...}` for dict params; else both side by side."""
    if not isinstance(params, dict):
        return {"params": params, "stderr": stderr}
    out = {}
    for key, value in params.items():
        out |= {key: value, f"{key}_stderr": stderr[key]}
    return out


def _ready_system(config, paths, sigma):
    """The config's system, sized by the first data file when it has no `[initial]`."""
    initial = config["initial"]
    if config["system"]["file"] is None or (
        initial["q"] is not None and initial["qd"] is not None
    ):
        return _config.ready_system(config)
    # The fit starts from the data's observed state, never one the config invents.
    probe = load_observations(paths[0], None, sigma, initial["q"], initial["qd"])
    state = {
        "q": initial["q"] if initial["q"] is not None else probe.q[0].tolist(),
        "qd": initial["qd"] if initial["qd"] is not None else [0.0] * probe.q.shape[1],
        "data": str(paths[0]) if initial["q"] is None else None,
    }
    return _config.ready_system({**config, "initial": state})


@_common.configured(_config.FIT_SCHEMA, "fit", batched=False)
def command(args: argparse.Namespace, config, devices) -> int:
    paths = _config.data_paths(config)
    initial, sigma = config["initial"], config["fit"]["sigma"]
    ready = _ready_system(config, paths, sigma)
    kwargs = _config.fit_kwargs(config, ready)
    given = (initial["q"], initial["qd"], config["fit"]["sigma_qd"], ready.coordinates)
    data = [load_observations(p, ready.q0.shape[0], sigma, *given) for p in paths]
    out = _common.output_directory(args, config, f"fit_{ready.name}")
    if chosen := kwargs["segments"] == "auto":
        kwargs["segments"] = shooting_segments(data)
    _common.say(
        args,
        f"jaxlagrange fit: {ready.name} to {len(data)} observed trajectory(ies), "
        f"optimizer {config['fit']['optimizer']} (at most {kwargs['steps']} steps), "
        f"{kwargs['segments']} shooting segment(s){' (auto)' * chosen}",
    )
    start = time.perf_counter()
    result, notes = _fitted(args, config, ready, data, kwargs)
    fit_s = time.perf_counter() - start
    arrays = _fitted_motions(args, config, ready, data, result, kwargs, notes)
    losses = "step,loss\n" + "".join(
        f"{k},{loss!r}\n" for k, loss in enumerate(result.losses.tolist())
    )
    stderr, trainable = result.stderr, kwargs["trainable"]
    if isinstance(stderr, dict) and trainable is not None:  # held fixed: JSON null
        stderr = {k: (v if k in trainable else None) for k, v in stderr.items()}
    files = {
        "params.json": json_bytes(_with_stderr(result.params, stderr)),
        "losses.csv": losses.encode(),
        "fit.npz": npz_bytes(**arrays),
    }
    # The first solver step evaluates the starting guess (no step: its loss).
    initial_loss = float(result.losses[0]) if len(result.losses) else result.loss
    summary = {
        "command": "fit",
        "system": ready.name,
        "data": [str(p) for p in paths],
        "not_imported": list(ready.system.not_imported),
        "initial_params": ready.system.params,
        "params": result.params,
        "loss": {"initial": initial_loss, "final": result.loss},
        "stderr": stderr,
        "converged": result.converged,
        "solver_steps": result.steps,
        "segments": kwargs["segments"],
        "solver_result": result.solver_result,
        "quality": {
            **{k: getattr(result, k) for k in ("chi2_red", "rms", "data_scale")},
            "poor_fit": result.warning is not None,
            "warnings": notes,
        },
        "start_losses": result.start_losses,
        "initial_state": {"q": result.q0, "qd": result.qd0},
        "fit": dict(config["fit"]),
        "simulate": dict(config["simulate"]),
        "wall_time_s": fit_s,
        "config": config["source"],
        "run": run_id(),
    }
    chi2 = "" if result.chi2_red is None else f", reduced χ² {result.chi2_red:.3g}"
    line = (
        f"loss {initial_loss:.3e} -> {result.loss:.3e} (RMS residual "
        f"{result.rms:.3g}, data spread {result.data_scale:.3g}{chi2}) in "
        f"{result.steps} solver steps, {fit_s:.1f} s; solver: {result.solver_result}"
        f"{'; POOR FIT (see the warning)' if result.warning else ''}; wrote {out}/"
    )

    def figures():  # (matplotlib imported on the main thread: see `run._command`)
        observed = (arrays["ts_0"], arrays["q_0"], arrays["q_fit_0"], ready.coordinates)
        title = f"{ready.name}: observed ({paths[0].name}) and fitted"
        style = {"units": ready.units, "sigma": sigma, "title": title}
        drawn = {
            "fit.png": plotting.fit_comparison(*observed, **style),
            "loss.png": plotting.losses(result.losses),
        }
        return {name: png_bytes(fig) for name, fig in drawn.items()}

    _common.write_outputs(args, config, out, files, summary, line, figures)
    stalled = result.solver_result.startswith("stalled")
    return POOR_FIT if result.warning or stalled else 0


def _fitted(args, config, ready, data, kwargs):
    """`jl.fit` of the config, its errors in the config's words, and its warnings."""
    progress = _common.show_progress(args)
    try:
        # Runtime checks as values, so that the compiled fit can come from the
        # persistent cache; a failure shows as a non-finite loss, which `fit`
        # reports (FloatingPointError).
        with (
            _common.errors_as_values(),
            _common.kept_programs(config, ready),
            warnings.catch_warnings(record=True) as issued,
        ):
            warnings.simplefilter("always")
            result = fit(ready.system, data, progress=progress, **kwargs)
    except FloatingPointError as e:
        raise CLIError(one_line(e)) from None
    except ValueError as e:
        message = one_line(e)
        if message.startswith(_OFF_CONSTRAINTS):  # in the config's words
            message = message.replace(_OFF_CONSTRAINTS, "[initial] q is off").replace(
                "Give a q0 on them (project it with `jl.project_initial_state`), or "
                "fit it (`fit_initial_state`).",
                "Give an [initial] q on them, or fit it ([fit] fit_initial_state = "
                "true).",
            )
        else:
            message = f"[fit] {message}"
        raise ConfigError(f"{config['source']}: {message}") from None
    notes = [str(w.message) for w in issued if issubclass(w.category, UserWarning)]
    for note in notes:
        _warn(args, note)
    return result, notes


def _fitted_motions(args, config, ready, data, result, kwargs, notes):
    """The arrays of fit.npz: each data file's observed and fitted motion."""
    settings = ("solver", "rtol", "atol", "max_steps")
    program = _common.simulate_program(**{key: kwargs[key] for key in settings})

    def fitted_motion(system, q0, qd0, ts):
        return program(system, q0, qd0, t0=ts[0], t1=ts[-1], saveat=ts)

    arrays = {}
    # Checks as values here too, so that this solve comes from the cache. One
    # program serves every data file of the same length.
    with _common.errors_as_values(), _common.kept_programs(config, ready):
        starts = zip(data, result.q0, result.qd0, strict=True)
        for i, (obs, q0, qd0) in enumerate(starts):
            ts = jnp.asarray(obs.ts)
            motion = call("fit.simulate", fitted_motion, result.system, q0, qd0, ts)
            traj = _common.trajectory_from(result.system, motion)
            arrays.update({f"ts_{i}": obs.ts, f"q_{i}": obs.q, f"q_fit_{i}": traj.q})
            if bool(failed(traj)):
                # (The fit's own solves may succeed where this one, over the
                # whole span rather than a segment, does not.)
                notes.append(
                    f"the fitted system's motion over data {i}'s times stopped at "
                    f"t = {float(traj.t_final):.6g} ({result_name(traj)}): q_fit_{i} "
                    f"in fit.npz is inf after it. {result_message(traj)}"
                )
                _warn(args, notes[-1])
    return arrays


def _warn(args, note: str) -> None:
    if not args.quiet:
        print(f"jaxlagrange fit: warning: {note}", file=sys.stderr, flush=True)
