"""`python -m jaxlagrange` and the `jaxlagrange` script: the command line."""

import os
import sys


def main() -> int:
    """`_cli.main`; `jaxlagrange systems [NAME ...]` of known names answered fast."""
    # The stored listing (`_listing`), printed before anything imports JAX.
    args = sys.argv[1:]
    if args[:1] == ["systems"]:
        from ._listing import blocks

        known = blocks()
        if all(name in known for name in args[1:]):
            try:
                print("".join(known[name] for name in args[1:] or known), end="")
                sys.stdout.flush()
            except BrokenPipeError:  # `jaxlagrange systems | head`
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    from ._cli import main as cli

    return cli()


if __name__ == "__main__":
    sys.exit(main())
