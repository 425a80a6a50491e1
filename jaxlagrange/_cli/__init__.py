"""The `jaxlagrange` command line (docs/cli.md); configs are TOML (`_config`).

Each subcommand is a module with `add_arguments(parser)` and `command(args) ->
int`, listed in `_COMMANDS`; `_common` holds their shared skeleton (devices,
compiling, writing outputs with a summary). A user error is a `CLIError` (or
`ConfigError`), which `main` prints as one line on stderr with exit status 1
(`--debug` shows the traceback); so is a `SystemExit` from a user's file.
Outputs are written into the output directory as one set (`_output`)."""

import argparse
import sys
import traceback
import warnings
from typing import Any, NoReturn

from .. import _config as _config
from .._config import ConfigError as ConfigError
from .._errors import one_line
from . import fit, run, sweep, systems
from ._common import compilation_cache, stdout_to_devnull
from ._output import (
    CLIError as CLIError,
    interrupts_kept,
    json_bytes as json_bytes,
    npz_bytes as npz_bytes,
)
from .fit import load_observations as load_observations


_COMMANDS: dict[str, tuple[str, Any]] = {
    "run": ("simulate a system from a TOML config", run),
    "systems": ("list the ready systems, their params and options", systems),
    "sweep": (
        "simulate a grid or random sample of initial states and params to a Zarr store",
        sweep,
    ),
    "fit": ("fit a system's params to observed trajectories (.npz or .csv)", fit),
}
"""The help and the module of each subcommand."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # One line, like every other error of the command line.
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="jaxlagrange", description="Differentiable Lagrangian mechanics in JAX."
    )
    parser.add_argument(
        "--debug", action="store_true", help="show tracebacks of errors"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="no persistent compilation cache (default: on, in JAXLAGRANGE_CACHE_DIR "
        "or ~/.cache/jaxlagrange/xla)",
    )
    subparsers = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    for name, (help, module) in _COMMANDS.items():
        sub = subparsers.add_parser(name, help=help, description=help)
        module.add_arguments(sub)
        sub.set_defaults(handler=module.command)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the command line with `argv` (default `sys.argv[1:]`); the exit status."""
    args = _parser().parse_args(argv)
    if not args.no_cache:
        compilation_cache()
    try:
        with interrupts_kept(), warnings.catch_warnings():
            warnings.showwarning = _warning_line(args.command)
            return args.handler(args)
    except KeyboardInterrupt:
        print("jaxlagrange: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `jaxlagrange systems | head`: all it had to say
        stdout_to_devnull()
        return 0
    except BaseException as e:
        if args.debug:
            raise
        message = one_line(e)
        if not isinstance(e, (CLIError, ConfigError)):
            if isinstance(e, Exception):
                message = f"{type(e).__name__}: {message}"
            else:  # SystemExit, GeneratorExit: from a user's file
                message = _raised_by(e)
            message += " (run with --debug for the traceback)"
        print(f"jaxlagrange {args.command}: error: {message}", file=sys.stderr)
        return 1


def _warning_line(command: str):
    """`warnings.showwarning` as one line on stderr, without the source line."""
    return lambda message, *args, **kwargs: print(
        f"jaxlagrange {command}: warning: {' '.join(str(message).split())}",
        file=sys.stderr,
        flush=True,
    )


def _raised_by(error: BaseException) -> str:
    """`error` and where it was raised: the file, function and line."""
    what = one_line(error, typed=True)
    frames = traceback.extract_tb(error.__traceback__)
    if not frames:
        return what
    last = frames[-1]
    return (
        f"{what} raised in {last.filename!r}, function {last.name!r} "
        f"(line {last.lineno})"
    )
