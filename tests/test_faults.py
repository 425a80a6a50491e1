"""Fault injection: a sweep killed at random moments resumes to the same store.

Each case starts `jaxlagrange sweep` in a subprocess, kills it with SIGKILL after
a random delay (seeded: while it imports, compiles, creates the store or writes
chunks), then resumes it in this process and compares every array with an
uninterrupted run. The default set kills at 4 points; `pytest -m slow` at 24.
"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import zarr

from jaxlagrange._cli import main


ROOT = Path(__file__).resolve().parents[1]

CONFIG = """\
[system]
name = "double_pendulum"

[simulate]
t1 = 2.0
saves = 3

[sweep]
sampling = "grid"
chunk_size = 8

[sweep.axes]
"q[0]" = { min = -3.0, max = 3.0, num = 12 }
"g" = { min = 5.0, max = 15.0, num = 10 }
"""


def _killed(*args: str, after: float) -> None:
    """Run `python -m jaxlagrange ARGS` and SIGKILL it `after` seconds in."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    process = subprocess.Popen(
        [sys.executable, "-m", "jaxlagrange", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(after)
    process.send_signal(signal.SIGKILL)
    process.wait()


def _arrays(store: Path) -> dict[str, np.ndarray]:
    group = zarr.open_group(store, mode="r")
    out = {}
    for kind in ("inputs", "outputs", "inputs/params"):
        for name, a in group[kind].arrays():
            out[f"{kind}/{name}"] = a[...]
    return out


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("faults")
    config = tmp / "sweep.toml"
    config.write_text(CONFIG)
    assert main(["sweep", str(config), "--out", str(tmp / "whole"), "--quiet"]) == 0
    return config, _arrays(tmp / "whole" / "sweep.zarr")


def _kill_and_resume(setup, tmp_path, seed):
    config, reference = setup
    out = tmp_path / f"killed-{seed}"
    delay = np.random.default_rng(seed).uniform(0.2, 8.0)
    _killed(
        "sweep", str(config), "--out", str(out), "--quiet", "--no-plots", after=delay
    )
    assert main(["sweep", str(config), "--out", str(out), "--quiet", "--no-plots"]) == 0
    store = out / "sweep.zarr"
    manifest = json.loads((store / "zarr.json").read_text())["attributes"]["manifest"]
    assert manifest["complete"] and len(manifest["checksums"]) == 15
    resumed = _arrays(store)
    assert resumed.keys() == reference.keys()
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)
    assert not list(store.rglob("*.partial"))
    assert not (out / ".sweep.zarr.creating").exists()


@pytest.mark.parametrize("seed", range(4))
def test_killed_sweep_resumes_identically(setup, tmp_path, seed):
    _kill_and_resume(setup, tmp_path, seed)


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(4, 28))
def test_killed_sweep_resumes_identically_many(setup, tmp_path, seed):
    _kill_and_resume(setup, tmp_path, seed)


RUN_CONFIG = """\
[system]
name = "pendulum"

[initial]
q = [1.0]
qd = [0.0]

[simulate]
t1 = {t1}
saves = 101
"""


def _consistent(out: Path, t1: float | None = None) -> float:
    """The directory holds exactly one run's set of files; returns its t1."""
    summary = json.loads((out / "summary.json").read_text())
    # A killed run's staging folder waits, hidden, for the next run to remove it.
    names = {
        p.name for p in out.iterdir() if not p.name.startswith(".jaxlagrange-")
    } - {"notes.txt"}
    assert names == set(summary["files"]), (names, summary["files"])
    with np.load(out / "trajectory.npz") as arrays:
        assert arrays["ts"][-1] == summary["simulate"]["t1"]
    assert (out / "notes.txt").read_text() == "mine"  # the user's file survives
    return summary["simulate"]["t1"]


@pytest.mark.parametrize("seed", range(3))
def test_killed_run_leaves_one_consistent_set(tmp_path, seed):
    out = tmp_path / "out"
    first, second = tmp_path / "first.toml", tmp_path / "second.toml"
    first.write_text(RUN_CONFIG.format(t1=5.0))
    second.write_text(RUN_CONFIG.format(t1=7.0))
    assert main(["run", str(first), "--out", str(out), "--quiet"]) == 0
    (out / "notes.txt").write_text("mine")
    delay = np.random.default_rng(100 + seed).uniform(0.5, 7.0)
    _killed("run", str(second), "--out", str(out), "--quiet", after=delay)
    # Killed while moving its files in, the run leaves no summary.json and its
    # committed folder, which the next run finishes first (and then writes its
    # own set). Either way: one whole set, old or new.
    if not (out / "summary.json").exists():
        assert list(out.glob(".jaxlagrange-commit-*/"))
        assert main(["run", str(first), "--out", str(out), "--quiet"]) == 0
    assert _consistent(out) in (5.0, 7.0)
    assert main(["run", str(second), "--out", str(out), "--quiet"]) == 0
    assert _consistent(out) == 7.0
    assert list(out.glob(".jaxlagrange-*")) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "first.toml",
        "out",
        "second.toml",
    ]
