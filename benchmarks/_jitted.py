"""A jitted function as the benchmarks time it, and their CPU-time median."""

import time

import jax
import numpy as np


def median_cpu_time(fn, rounds: int) -> float:
    """The median process CPU time of `rounds` calls of `fn` (its outputs waited
    for): steadier than wall time on a shared machine."""
    times = []
    for _ in range(rounds):
        start = time.process_time()
        jax.block_until_ready(fn())
        times.append(time.process_time() - start)
    return float(np.median(times))


class Jitted:
    """A jitted function, called as a user's is, with its ahead-of-time
    `Compiled` (`as_text`, `memory_analysis`, ...) behind attribute access.

    Calls go to the jitted function, not to the `Compiled`: they take JAX's C++
    dispatch path. A `Compiled` whose program holds a host callback (Equinox's
    runtime error checks) is called through Python instead, which costs ~100 µs
    a call on CPU, a cost a user's jitted function does not pay."""

    def __init__(self, jitted, compiled):
        self._jitted, self._compiled = jitted, compiled

    def __call__(self, *args):
        return self._jitted(*args)

    def __getattr__(self, name):
        return getattr(self._compiled, name)
