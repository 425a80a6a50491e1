"""`jaxlagrange systems`: list the ready systems (the stored listing, `_listing`)."""

import argparse

from .._listing import blocks
from ._output import CLIError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", metavar="NAME", help="only these systems")


def command(args: argparse.Namespace) -> int:
    known = blocks()
    for name in args.names:
        if name not in known:
            raise CLIError(
                f"unknown system {name!r}; known systems: {', '.join(known)}"
            )
    print("".join(known[name] for name in args.names or known), end="")
    return 0
