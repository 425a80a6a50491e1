"""A two-process `jax.distributed` run on localhost equals a one-process run."""

import importlib.util
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest


ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "distributed_two_process.py"


def _example():
    spec = importlib.util.spec_from_file_location("distributed_example", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(
    "jax_cpu_collectives_implementation" not in jax.config.values,
    reason="this JAX has no CPU collectives (gloo) for multi-process CPU runs",
)
@pytest.mark.skipif(
    sys.platform == "win32", reason="JAX's CPU collectives do not run on Windows"
)
def test_two_processes_equal_one(tmp_path):
    out = tmp_path / "two.npz"
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # Both processes saw all 4 devices (2 each) and got the whole result.
    assert done.stdout.count("2 local of 4 devices") == 2, done.stdout
    two = np.load(out)
    one = _example().simulate(devices=jax.devices()[:1])
    assert two["q"].shape == (10, 5, 2)
    np.testing.assert_allclose(two["q"], one.q, rtol=0, atol=1e-13)
    np.testing.assert_allclose(two["qd"], one.qd, rtol=0, atol=1e-13)
