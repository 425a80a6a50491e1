"""Helpers shared by the subcommands."""

import argparse
import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax

from .. import _config, _programs
from .._cache import cache_directory as cache_directory
from .._ensemble._identity import physics_digest
from .._guard import Failure, diagnosed
from .._options import GivenOptions
from .._results import code_of, item_of
from .._simulate import simulate_checked
from .._trajectory import Trajectory, result_message
from ._output import CLIError, file_name, output_dir, write_with_summary


def add_command_arguments(
    parser, config, *, out: str, progress: str, device: str, nargs=None, epilog=None
) -> None:
    """Add a subcommand's arguments, and the `epilog` that lists its outputs."""
    if epilog is not None:
        parser.epilog = epilog
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
    parser.add_argument("config", nargs=nargs, help=config)
    parser.add_argument(
        "--out",
        metavar="DIR",
        help=f"output directory (default: [output] dir, else {out})",
    )
    parser.add_argument("--no-plots", action="store_true", help="write no PNG plots")
    parser.add_argument(
        "--quiet", action="store_true", help=f"no {progress} and no messages"
    )
    parser.add_argument(
        "--progress",
        action="store_true",
        help=f"show the {progress} also when stderr is not a terminal (e.g. in logs)",
    )
    parser.add_argument(
        "--device",
        choices=_config.DEVICES,
        default=None,
        help=f"where to compute (default: the config's, else auto: {device})",
    )


def configured(schema, section: str, *, batched: bool):
    """Make a subcommand's `command(args)` of `body(args, config, devices)`."""

    def decorate(body):
        @functools.wraps(body)
        def command(args) -> int:
            jax.config.update("jax_enable_x64", True)
            config = _config.load(args.config, schema)
            requested = args.device or config[section]["device"]
            if on_the_cpu(requested, batched=batched):
                start_only_the_cpu()
            check_backends()
            devices = choose_devices(requested, batched=batched)
            with jax.default_device(devices[0]):
                return body(args, config, devices)

        return command

    return decorate


def output_directory(args, config, default: str) -> Path:
    """`--out`, else `[output] dir`, else `out/<default>`: created, checked."""
    chosen = args.out or config["output"]["dir"]
    # A plain file name: a model's name never chooses where files go.
    return output_dir(chosen or Path("out", file_name(default)))


def plots(args, config) -> bool:
    """Whether PNG plots are wanted: by the config, and not refused by `--no-plots`."""
    return config["output"]["plots"] and not args.no_plots


def write_outputs(args, config, out, files, summary, line: str, figures) -> dict:
    """Write the result and say `line`; then, with plots, add the `figures()` drawn."""
    # The result first: a figure that fails to draw costs no data.
    write_with_summary(out, files, summary)
    say(args, line)
    if not plots(args, config):
        return {}
    drawn = figures()
    write_with_summary(out, {**files, **drawn}, summary)
    return drawn


def show_progress(args) -> bool:
    """A progress bar on a terminal, in logs only when asked, never when quiet."""
    return not args.quiet and (args.progress or sys.stderr.isatty())


def compilation_cache() -> Path | None:
    """Turn on JAX's persistent compilation cache; its directory, or None (off)."""
    path = cache_directory()
    if path is None:
        # JAX may have taken JAX_COMPILATION_CACHE_DIR from the environment.
        if jax.config.jax_compilation_cache_dir:
            jax.config.update("jax_enable_compilation_cache", False)
        return None
    jax.config.update("jax_compilation_cache_dir", str(path))
    # The solves and fits compile in seconds; the eager scalar ops around them
    # (10-50 ms, more on a loaded machine) are not worth a file each, and
    # caching them only when a run happens to be slow made the entries vary.
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.3)
    return path


def kept_programs(config: Mapping[str, Any] | None, ready=None):
    """`_programs.kept_programs` keyed by all the program depends on; else a no-op."""
    directory = jax.config.jax_compilation_cache_dir
    if config is None or not directory or not jax.config.jax_enable_compilation_cache:
        return _programs.kept_programs(None, "")
    try:
        # A change to the config, a local source or the physics traces anew. Call this
        # once the user's modules are imported: only imported ones are read.
        context = json.dumps(config, sort_keys=True, default=repr) + _local_sources()
        path = _config.system_file(config)
        if path is not None:
            context += path.read_text()
        if ready is not None:
            context += physics_digest(ready.system, ready.q0.shape[0], ready.q0.dtype)
    except Exception:  # a source or a system that cannot be read: trace as usual
        return _programs.kept_programs(None, "")
    return _programs.kept_programs(Path(directory), context)


def _local_sources() -> str:
    """The paths and contents of the imported modules outside the Python install."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix}
    installed = tuple(
        os.path.join(p, "") for p in prefixes | {os.path.realpath(p) for p in prefixes}
    )
    digest = hashlib.sha256()
    files = set()
    for module in list(sys.modules.values()):
        file = getattr(module, "__file__", None)
        if file and file.endswith(".py") and not file.startswith(installed):
            files.add(os.path.realpath(file))
    for path in sorted(p for p in files if not p.startswith(installed)):
        digest.update(path.encode() + b"\0" + Path(path).read_bytes())
    return digest.hexdigest()


def simulate_program(**kwargs):
    """`simulate_checked`, plain containers out: `_programs` cannot store Modules."""
    # Nothing here is differentiated: diffrax's forward-mode adjoint is one plain
    # loop, traced in 0.15 s less than the checkpointed one.
    kwargs = {"adjoint": diffrax.ForwardMode(), **kwargs}

    def program(system, q0, qd0, **more):
        options = GivenOptions(**{**kwargs, **more})
        traj, failure = simulate_checked(system, q0, qd0, options, throw=False)[:2]
        fields = {
            f.name: getattr(traj, f.name)
            for f in dataclasses.fields(traj)
            if not f.metadata.get("static")  # (`trajectory_from` sets those)
        }
        fields["result"] = code_of(traj.result)
        if failure is None:
            return fields, None
        start = (failure.q0, failure.qd0, failure.t0, failure.baumgarte)
        return fields, (*start, failure.stop)

    return program


def trajectory_from(system, out):
    """The `Trajectory` of a `simulate_program`'s output, its failure named."""
    fields, failure = out
    traj = Trajectory(**{**fields, "result": item_of(fields["result"])})
    traj = traj.recording(system)
    return traj if failure is None else diagnosed(traj, Failure(system, *failure))


@contextlib.contextmanager
def errors_as_values() -> Iterator[None]:
    """Trace equinox's runtime checks as NaN outputs instead of host callbacks."""
    import equinox._errors as errors

    # A program with a host callback (in its cache key, different in each process)
    # is never loaded from JAX's persistent cache. The CLI checks its inputs
    # eagerly and reads failures from `Trajectory.result` and non-finite outputs.
    # JAX's caches outlive the setting: cleared on entry, so nothing traced here
    # has callbacks, and on exit, so nothing traced here serves a call that raises.
    old = errors.EQX_ON_ERROR
    jax.clear_caches()
    errors.EQX_ON_ERROR = "nan"
    try:
        yield
    finally:
        errors.EQX_ON_ERROR = old
        jax.clear_caches()


def say(args, message: str) -> None:
    if not args.quiet:
        try:
            print(message, flush=True)
        except BrokenPipeError:  # `jaxlagrange run | head -1`: the work goes on
            stdout_to_devnull()


def stdout_to_devnull() -> None:
    """Send what is still printed to stdout (and its flush at exit) nowhere."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def result_line(result) -> str:
    # In NumPy: an eager JAX comparison is one more small program to compile.
    return result_message(result) or "successful"


class Timing(NamedTuple):
    """Where a compiled solve's wall time went, in seconds."""

    trace: float  # Python tracing and lowering to StableHLO, or loading it (`kept`)
    compile: float  # XLA compilation, or loading the program from the cache
    cached: bool  # whether `compile` was a load from the persistent cache
    run: float
    kept: bool = False  # whether `trace` was a load of the kept program

    def line(self) -> str:
        """`+ 0.81 s trace, 1.62 s compile` (or a kept program load, a cache load)."""
        what = "cache load" if self.cached else "compile"
        first = "kept program load" if self.kept else "trace"
        return f"+ {self.trace:.2f} s {first}, {self.compile:.2f} s {what}"

    def summary(self) -> dict[str, Any]:
        """The `wall_time_s` entries of `summary.json`."""
        return {
            "trace": 0.0 if self.kept else self.trace,
            "kept_program_load": self.trace if self.kept else 0.0,
            "compile": 0.0 if self.cached else self.compile,
            "cache_load": self.compile if self.cached else 0.0,
            "run": self.run,
            "total": self.trace + self.compile + self.run,
        }


_HITS = [0]  # the programs this process loaded from JAX's persistent cache


@functools.cache
def _listen_for_hits() -> None:
    def count(event: str, **kwargs) -> None:
        if event == "/jax/compilation_cache/cache_hits":
            _HITS[0] += 1

    jax.monitoring.register_event_listener(count)


def timed_run(name: str, program, ready, config) -> tuple[Any, Timing]:
    """`program(*ready)` compiled ahead of time (`kept_programs`), run and timed."""
    _listen_for_hits()
    start = time.perf_counter()
    with errors_as_values(), kept_programs(config, ready):
        lowered, loaded = _programs.lower(name, program, *ready)
        traced, hits = time.perf_counter(), _HITS[0]
        compiled = lowered.compile()
    compiled_at = time.perf_counter()
    flat = jax.tree_util.tree_leaves(eqx.filter(tuple(ready), eqx.is_array))
    out = jax.block_until_ready(compiled(*flat))
    run = time.perf_counter() - compiled_at
    cached = _HITS[0] > hits
    return out, Timing(traced - start, compiled_at - traced, cached, run, loaded)


def _available(platform: str) -> list:
    try:
        return list(jax.devices(platform))
    except RuntimeError:  # no such backend (no GPU, or JAX_PLATFORMS excludes it)
        return []


def check_backends() -> None:
    """Raise a `CLIError` naming `JAX_PLATFORMS` when JAX cannot start its platforms."""
    try:
        # JAX's own error is a bare AssertionError (`JAX_PLATFORMS=cuda` without CUDA).
        jax.devices()
    except (RuntimeError, AssertionError) as error:
        platforms = jax.config.jax_platforms
        detail = f": {error}" if str(error) else ""
        raise CLIError(
            f"JAX could not start the platforms JAX_PLATFORMS={platforms!r} names"
            f"{detail}. Unset JAX_PLATFORMS, or name one this machine has, such as "
            "cpu"
            if platforms
            else f"JAX could not start a backend{detail}"
        ) from None


def choose_devices(requested: str, *, batched: bool, available=_available) -> list:
    """The devices a subcommand computes on (`available` is faked in tests)."""
    # `auto`: single solves on one CPU (a small solve's many short steps run fastest
    # there; on a GPU each step is several kernel launches), batched work on the GPUs.
    cpus = available("cpu")[:1]
    if on_the_cpu(requested, batched=batched) and cpus:
        return cpus
    gpus = [] if requested == "cpu" else available("gpu")
    if requested != "auto" and not (cpus if requested == "cpu" else gpus):
        why, other = (
            ("has no CPU backend here (JAX_PLATFORMS excludes it?)", "gpu")
            if requested == "cpu"
            else ("sees no GPU here", "cpu")
        )
        raise CLIError(
            f'--device {requested} (or device = "{requested}"): JAX {why}; use '
            f"--device {other} or auto"
        )
    if gpus:
        return gpus if batched else gpus[:1]
    return cpus


def on_the_cpu(requested: str, *, batched: bool) -> bool:
    """Whether `choose_devices` puts the command on the CPU whatever JAX has."""
    return requested == "cpu" or (requested == "auto" and not batched)


def start_only_the_cpu() -> bool:
    """Start only JAX's CPU backend unless started or chosen (`JAX_PLATFORMS`)."""
    try:
        from jax._src.xla_bridge import backends_are_initialized

        started = backends_are_initialized()
    except ImportError:  # JAX moved it: leave the platforms alone
        return False
    if started or jax.config.jax_platforms:
        return False
    # Else JAX starts every backend: on a GPU machine, seconds of CUDA start-up
    # and most of the GPU's memory, for a command on the CPU.
    jax.config.update("jax_platforms", "cpu")
    return True


def device_name(devices) -> str:
    """`cpu`, `gpu`, or `4 × gpu`, for the console and summary.json."""
    platform = devices[0].platform
    return platform if len(devices) == 1 else f"{len(devices)} × {platform}"
