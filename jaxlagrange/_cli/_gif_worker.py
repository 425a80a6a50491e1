"""`motion.gif` rendered in a second process, beside the PNGs of the first.

The GIF is half of `run`'s figure time. A worker started with the run imports
matplotlib while the main process compiles the solve, then draws the GIF while
the main process draws the PNGs. It loads `_plotting_motion.py` by its path,
without importing JAX. Any failure of the worker falls back to drawing in process.
"""

import pickle
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any


_SCRIPT = r"""
import importlib.util, pickle, sys
spec = importlib.util.spec_from_file_location("_jaxlagrange_motion", sys.argv[1])
plotting = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plotting)
import matplotlib.backends.backend_agg, matplotlib.figure, PIL.Image
try:
    args, kwargs = pickle.load(sys.stdin.buffer)
except EOFError:
    sys.exit(0)  # not needed after all
sys.stdout.buffer.write(plotting.animation(*args, **kwargs))
"""


class GifWorker:
    """A process that draws one `plotting.animation` when `render` is called."""

    def __init__(self):
        path = Path(__file__).resolve().parents[1] / "_plotting_motion.py"
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-c", _SCRIPT, str(path)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        except OSError:
            self._proc = None
        self._thread = None
        self._result: list[Any] = []

    def start(self, *args, **kwargs) -> None:
        """Send the worker its `plotting.animation(*args, **kwargs)`."""
        if self._proc is None:
            return
        data = pickle.dumps((args, kwargs))
        # communicate in a thread: the pipes are full duplex only with a reader.
        self._thread = threading.Thread(
            target=lambda: self._result.append(self._proc.communicate(data)),
            daemon=True,
        )
        self._thread.start()

    def result(self) -> bytes | None:
        """The GIF's bytes, or None if the worker failed (draw it in process)."""
        if self._thread is None:
            return None
        self._thread.join()
        if self._proc.returncode != 0 or not self._result:
            return None
        return self._result[0][0]

    def close(self) -> None:
        """End a worker that was not given work (EOF on its input)."""
        if self._proc is not None and self._thread is None:
            try:
                self._proc.communicate(b"", timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self._proc.kill()
