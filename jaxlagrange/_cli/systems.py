"""`jaxlagrange systems`: list the ready systems."""

import argparse
from typing import Any

import numpy as np

from .. import _config
from ._output import CLIError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these systems")


def _format_value(x: Any) -> str:
    x = np.asarray(x)
    return (
        f"{x.item():g}" if x.ndim == 0 else "[" + ", ".join(f"{v:g}" for v in x) + "]"
    )


def command(args: argparse.Namespace) -> int:
    from .. import systems

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
        summary, meanings = systems.describe(name)
        print(f"{name}: {summary}" if summary else name)
        print(f"  coordinates: {', '.join(ready.coordinates)}")
        print("  params:")
        values = {k: _format_value(v) for k, v in params.items()}
        width = max((len(f"{k} = {v}") for k, v in values.items()), default=0)
        for key, value in values.items():
            text = f"{key} = {value}"
            meaning = meanings.get(key, "")
            print(f"    {text:<{width}}  {meaning}".rstrip())
        if options:
            shown = ", ".join(f"{k} = {v!r}" for k, v in options.items())
            print(f"  options:     {shown}")
        print(
            f"  initial:     q = {_format_value(ready.q0)}, qd = {_format_value(ready.qd0)}"
        )
    return 0
