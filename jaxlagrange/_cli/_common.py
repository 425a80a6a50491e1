"""Helpers shared by the subcommands."""

from collections.abc import Mapping
from typing import Any

import numpy as np


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
    from .._trajectory import RESULTS

    return "successful" if result == RESULTS.successful else RESULTS[result]


def _stats(stats: Mapping[str, Any]) -> dict[str, int]:
    return {k: int(np.asarray(v)) for k, v in stats.items()}


def _one_line(error: BaseException) -> str:
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
