"""`jaxlagrange run`: simulate one trajectory from a config, with plots."""

import argparse
import time
import warnings
from collections.abc import Mapping
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config, plotting
from .._eom import energy_unchecked
from .._errors import one_line
from .._initial_state import PROJECT_HINT, check_initial_state
from .._trajectory import EVENT_IMPACT, EVENT_NAMES, result_name
from . import _common
from ._gif_worker import GifWorker
from ._output import CLIError, npz_bytes, png_bytes, run_id


_RUN_EPILOG = """\
outputs (written atomically into the output directory):
  trajectory.npz     ts (T,), q and qd (T, n), energy (T,), multipliers (T, m)
                     for constrained systems; event_ts, event_constraint and
                     event_kind (0 release, 1 impact, 2 stick, 3 slip) with
                     unilateral ones
  summary.json       system, params, initial state, solver settings, result,
                     energy drift, solver statistics, events, wall time,
                     versions
  coordinates.png    the coordinates against time
  phase.png          velocity against coordinate, coloured by time
  energy.png         the energy error (or the energy, when not conserved)
  motion.png         the paths of the bodies in physical space (systems with
                     positions: every ready system, and user systems that
                     define positions)
  motion.gif         the motion, animated (off with --no-animation or
                     [output] animation = false)
  configuration.png  without positions: the path in the plane of the first two
                     coordinates (n >= 2)

progress: the compiled solve is cached on disk (JAXLAGRANGE_CACHE_DIR, default
~/.cache/jaxlagrange/xla), so a second run of a config skips compilation;
--progress shows a bar over the solve's time span, whose callback keeps that
one program out of the cache.

example configs: configs/*.toml; the default: jaxlagrange run --show-config
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    _common.add_command_arguments(
        parser,
        "a TOML config (default: the embedded double-pendulum config)",
        out="out/<system name>",
        progress="progress bar of the solve",
        device="the CPU",
        nargs="?",
        epilog=_RUN_EPILOG,
    )
    parser.add_argument(
        "--no-animation", action="store_true", help="write no motion.gif"
    )
    parser.add_argument(
        "--show-config",
        action="store_true",
        help="print the embedded default config and exit",
    )


def _energy_along(system, ts, q, qd):
    """The Jacobi integral along (ts, q, qd); whether L and constraints are t-free."""

    def time_derivatives(q, qd, t):
        parts = [jax.grad(system.L, argnums=2)(q, qd, t)[None]]
        parts += system.constraints.time_derivatives(q, qd, t)
        return jnp.concatenate(parts)

    energies = jax.vmap(energy_unchecked, in_axes=(None, 0, 0, 0))(system, q, qd, ts)
    return energies, jnp.all(jax.vmap(time_derivatives)(q, qd, ts) == 0)


def _conserved(system, autonomous, traj) -> bool:
    """Whether the Jacobi integral is conserved along `traj`."""
    given = (system.force, system.dissipation, system.constraints.friction)
    forced = any(x is not None for x in given)
    if system.constraints.one_sided and traj.event_kind is not None:
        kinds = np.asarray(traj.event_kind)[: int(np.asarray(traj.num_events))]
        inelastic = not bool(np.all(np.asarray(system.coefficient("restitution")) == 1))
        forced = forced or (inelastic and bool(np.any(kinds == EVENT_IMPACT)))
    return bool(autonomous) and not forced


def solve(ready, kwargs: Mapping[str, Any], args, config):
    """`jl.simulate(*ready, **kwargs)`, compiled ahead of time and timed."""
    progress = args.progress and not args.quiet  # (only when asked: see the epilog)
    if ready.system.has_constraints:
        # Eagerly, for a one-line error (under the compiled run it is a runtime one).
        t0 = jnp.asarray(kwargs.get("t0", 0.0), ready.q0.dtype)
        try:
            check_initial_state(ready.system, ready.q0, ready.qd0, t0)
        except ValueError as e:
            # (The Python call it advises is not the config's way.)
            hint = "Give an [initial] q and qd on the constraints."
            message = str(e).replace(PROJECT_HINT, hint)
            raise CLIError(f"[initial] state of {ready.name!r}: {message}") from None
    meter = diffrax.TqdmProgressMeter() if progress else diffrax.NoProgressMeter()
    solve_only = _common.simulate_program(**kwargs, progress_meter=meter)

    def program(system, q0, qd0):
        fields, failure = solve_only(system, q0, qd0)
        energy = _energy_along(system, fields["ts"], fields["q"], fields["qd"])
        return fields, failure, energy

    kept = None if progress else config  # (a progress bar's callback: not kept)
    out, timing = _common.timed_run("run.solve", program, ready, kept)
    traj = _common.trajectory_from(ready.system, out[:2])
    # Checked in NumPy: an eager JAX comparison is one more small compile.
    name = result_name(traj)
    failed = f"failed at t = {float(traj.t_final):.6g} (t1 = {float(kwargs['t1']):.6g})"
    if name == "max_steps_reached":
        why = (
            f"{failed}: the maximum number of solver steps was reached; raise "
            f"[simulate] max_steps (now {kwargs['max_steps']}) or loosen rtol/atol"
        )
    elif name != "successful":
        why = f"{failed}: {_common.result_line(traj.result).rstrip('.')}"
    elif not all(
        np.all(np.isfinite(np.asarray(x)))
        for x in (traj.ts, traj.q, traj.qd, traj.multipliers)
    ):
        why = (
            "returned a non-finite state (NaN or inf) without a failure code; run "
            "it from Python with jl.simulate to see why"
        )
    else:
        return traj, timing, out[2]
    raise CLIError(f"simulation of {ready.name!r} {why}")


def _events(traj, arrays) -> list[dict[str, Any]]:
    """The events on `traj`, for JSON; their arrays go into `arrays`."""
    keys = ("event_ts", "event_constraint", "event_kind")
    arrays.update({k: getattr(traj, k)[: int(traj.num_events)] for k in keys})
    return [
        {"t": float(t), "constraint": int(i), "kind": EVENT_NAMES[int(k)]}
        for t, i, k in zip(*(arrays[k] for k in keys), strict=True)
    ]


def _figures(ready, traj, energies, conserved: bool, worker, summary):
    """The PNGs (and motion.gif, drawn by `worker` if any) of `jaxlagrange run`."""
    start = time.perf_counter()
    title, labels, units = f"{ready.name}: ", ready.coordinates, ready.units
    q, ts, style = traj.q, traj.ts, {"units": units}
    figures = {
        "coordinates.png": plotting.coordinates(
            ts, q, labels, title=title + "coordinates against time", **style
        ),
        "phase.png": plotting.phase_portrait(
            q, traj.qd, labels, ts=ts, title=title + "phase portrait", **style
        ),
        "energy.png": plotting.energy(
            ts, energies, conserved=conserved, unit=units and "J"
        ),
    }
    positions = None if ready.points is None else _positions(ready, traj)
    if ready.points is None and ready.q0.shape[0] >= 2:
        figures["configuration.png"] = plotting.configuration(q, labels, ts=ts, **style)
    if positions is not None:
        style = {"unit": ready.length_unit, "links": ready.links}
        names = ready.point_names
        figures["motion.png"] = plotting.motion(
            positions, title=title + "paths of the bodies", names=names, **style
        )
        gif = (np.asarray(ts), positions)
        style |= {"title": ready.name, "time_unit": units and "s"}
        if worker is not None:
            worker.start(*gif, **style)
    files = {name: png_bytes(fig) for name, fig in figures.items()}
    if positions is not None and worker is not None:
        files["motion.gif"] = worker.result() or plotting.animation(*gif, **style)
    summary["wall_time_s"]["figures"] = time.perf_counter() - start
    return files


def _positions(ready, traj) -> np.ndarray | None:
    """The system's points along the trajectory, (T, k, d); None (a warning) if bad."""
    try:
        # One compiled program: run eagerly, each of its operations was one
        # small compile (0.35 s against 0.06 s for the double pendulum).
        along = eqx.filter_jit(lambda ready, q, t: ready.positions(q, t))
        positions = np.asarray(along(ready, traj.q, traj.ts), dtype=float)
    except Exception as e:
        why = f"failed: {one_line(e)}"
    else:
        if positions.ndim != 3 or positions.shape[-1] not in (2, 3):
            why = (
                "must return shape (k, 2) or (k, 3) for one state, got shape "
                f"{positions.shape[1:]}"
            )
        elif np.any(bad := ~np.all(np.isfinite(positions), axis=(1, 2))):
            t = float(np.asarray(traj.ts)[np.argmax(bad)])
            why = f"returned a non-finite value (NaN or inf) at t = {t:.6g}"
        else:
            return positions
    what = f"positions of {ready.name!r} {why}"  # (one line, by `main`)
    warnings.warn(f"{what}; motion.png and motion.gif are not drawn", stacklevel=1)
    return None


def command(args: argparse.Namespace) -> int:
    if args.show_config:
        print(_config.DEFAULT_CONFIG, end="")
        return 0
    return _command(args)


# Everything, the solve and the energy along it, on the chosen device.
@_common.configured(_config.RUN_SCHEMA, "run", batched=False)
def _command(args: argparse.Namespace, config, devices) -> int:
    ready = _config.ready_system(config)
    kwargs = _config.simulate_kwargs(config)
    out = _common.output_directory(args, config, ready.name)
    worker = None
    animation = _common.plots(args, config) and config["output"]["animation"]
    if animation and not args.no_animation and ready.points is not None:
        # The GIF is drawn by a worker process, which starts now. matplotlib
        # is imported when the figures are drawn, on this thread: imported by
        # a second thread beside the solve, it can deadlock (its extension's
        # static initialisers let go of the GIL inside the dynamic loader's
        # lock, which the main thread, holding the GIL, then waits for).
        worker = GifWorker()
    try:
        _common.say(
            args,
            f"jaxlagrange run: {ready.name}, t = {kwargs['t0']} .. {kwargs['t1']} on "
            f"{devices[0].platform}",
        )
        traj, timing, (energies, autonomous) = solve(ready, kwargs, args, config)
        conserved = _conserved(ready.system, autonomous, traj)
        energies = np.asarray(energies)
        e0 = float(energies[0])
        drift = float(np.max(np.abs(energies - e0)))
        relative = drift / abs(e0) if e0 != 0 else None

        arrays = {"ts": traj.ts, "q": traj.q, "qd": traj.qd, "energy": energies}
        if ready.system.has_constraints:
            arrays["multipliers"] = traj.multipliers
        events = {}
        if ready.system.constraints.one_sided:
            events["events"] = _events(traj, arrays)
        summary = {
            "command": "run",
            "system": ready.name,
            "coordinates": list(ready.coordinates),
            "params": ready.system.params,
            "options": config["system"]["options"],
            "initial": {"q": ready.q0, "qd": ready.qd0},
            "simulate": dict(config["simulate"]),
            "result": _common.result_line(traj.result),
            "not_imported": list(ready.system.not_imported),
            "t_final": float(traj.t_final),
            "energy": {
                "conserved": conserved,
                "initial": e0,
                "final": float(energies[-1]),
                "max_abs_drift": drift,
                "max_rel_drift": relative,
            },
            "stats": {k: int(np.asarray(v)) for k, v in traj.stats.items()},
            **events,
            "device": devices[0].platform,
            "wall_time_s": timing.summary(),
            "config": config["source"],
            "run": run_id(),
        }
        if conserved and relative is not None:
            drift_text = f"relative energy drift {relative:.2e}"
        else:
            drift_text = f"energy change {drift:.2e}"
        line = (
            f"{summary['stats']['num_steps']} steps in {timing.run:.2f} s "
            f"({timing.line()}), {drift_text}; wrote {out}/"
        )
        files = {"trajectory.npz": npz_bytes(**arrays)}

        def figures():
            return _figures(ready, traj, energies, conserved, worker, summary)

        drawn = _common.write_outputs(args, config, out, files, summary, line, figures)
        if drawn:
            seconds = summary["wall_time_s"]["figures"]
            _common.say(args, f"{len(drawn)} figures in {seconds:.2f} s")
    finally:
        if worker is not None:
            worker.close()
    return 0
