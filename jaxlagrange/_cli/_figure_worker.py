"""Figures rendered in a second process, beside the main process's own.

A worker process started with the command imports NumPy, matplotlib and Pillow,
and draws a first small figure (loading the fonts), while the main process
traces, compiles and solves. Once the results are known the main process hands
it some figures (`submit`) and draws the others itself: `run` gives it
`motion.gif`, about half of its figure time, and the phase portrait. On two
cores the figures then cost about the longer of the two shares rather than
their sum.

The worker loads `plotting.py` as part of a package of its own whose folder is
this package's: neither the package's `__init__` nor JAX is imported there.
Whatever the worker does not deliver (it failed, or could not start) is drawn
in process (`drawn`), so a worker can only save time.
"""

import pickle
import subprocess
import sys
from pathlib import Path

from ._output import PNG_DPI, png_bytes


_SCRIPT = r"""
import importlib, io, pickle, sys, types
package = types.ModuleType("_jaxlagrange_figures")
package.__path__ = [sys.argv[1]]
sys.modules[package.__name__] = package
plotting = importlib.import_module("_jaxlagrange_figures.plotting")
import matplotlib.backends.backend_agg, PIL.Image

def png(fig):
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=int(sys.argv[2]))
    return buffer.getvalue()

png(plotting.losses([1.0, 0.5]))  # loads the fonts and the renderer meanwhile
drawn = {}
while True:
    try:
        name, function, args, kwargs = pickle.load(sys.stdin.buffer)
    except EOFError:
        break
    out = getattr(plotting, function)(*args, **kwargs)
    drawn[name] = out if isinstance(out, bytes) else png(out)
pickle.dump(drawn, sys.stdout.buffer)
"""


class FigureWorker:
    """A process that draws the `plotting` figures handed to it by `submit`."""

    def __init__(self):
        folder = Path(__file__).resolve().parents[1]
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SCRIPT, str(folder), str(PNG_DPI)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError:
            self._proc = None

    def submit(
        self, name: str, function: str, args: tuple = (), kwargs: dict | None = None
    ) -> None:
        """Have the worker draw the file `name`: `plotting.<function>(*args,
        **kwargs)`, a figure (saved as a PNG) or bytes (`animation`'s GIF).
        The arguments must be NumPy arrays and plain Python values."""
        if self._proc is None:
            return
        try:
            pickle.dump((name, function, args, kwargs or {}), self._proc.stdin)
            self._proc.stdin.flush()
        except OSError:  # the worker has ended: its figures are drawn in process
            pass

    def results(self) -> dict[str, bytes]:
        """The files drawn, by name: none if the worker failed."""
        if self._proc is None:
            return {}
        proc, self._proc = self._proc, None
        try:
            out, _ = proc.communicate(timeout=600)
            return pickle.loads(out) if proc.returncode == 0 else {}
        except Exception:
            proc.kill()
            proc.wait()
            return {}

    def close(self) -> None:
        """End a worker whose results are not wanted."""
        if self._proc is None:
            return
        proc, self._proc = self._proc, None
        try:
            proc.stdin.close()
            proc.kill()
            proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass


def drawn(worker: FigureWorker | None, figures: dict[str, tuple]) -> dict[str, bytes]:
    """The files of `figures` (`{name: (plotting function, args, kwargs)}`)
    submitted to `worker`: its results, and those it did not deliver drawn
    here."""
    files = worker.results() if worker is not None else {}
    for name in figures:
        if name not in files:
            from .. import plotting

            function, args, kwargs = figures[name]
            out = getattr(plotting, function)(*args, **kwargs)
            files[name] = out if isinstance(out, bytes) else png_bytes(out)
    return {name: files[name] for name in figures}
