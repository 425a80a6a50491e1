"""Progress bars of long host-side loops (sweep chunks, optimizer steps)."""

import sys


def progress_bar(total: int, *, done: int = 0, enabled: bool = True, unit: str):
    """A tqdm bar on stderr: count, rate and time left (a no-op unless `enabled`)."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        initial=done,
        disable=not enabled,
        unit=unit,
        file=sys.stderr,
        dynamic_ncols=True,
        smoothing=0.1,
    )
