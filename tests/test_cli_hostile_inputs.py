"""The command line's hostile inputs: output directories whose hidden files or
copies lie, kept programs of other configs, integers past int64, data files of
the wrong size."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxlagrange._cli import main
from jaxlagrange._cli._output import OUTPUTS, write_output_set, write_with_summary


ROOT = Path(__file__).resolve().parents[1]

RUN = """\
[system]
name = "pendulum"
[simulate]
t1 = {t1}
saves = 21
[output]
animation = false
"""


def _run(tmp_path, out, *more, t1=1.0):
    config = tmp_path / "run.toml"
    config.write_text(RUN.format(t1=t1))
    return main(["run", str(config), "--out", str(out), "--quiet", *more])


# Output sets: only a command's own names are ever removed.


def test_a_planted_index_never_removes_the_users_files(tmp_path):
    out = tmp_path / "out"
    assert _run(tmp_path, out, "--no-plots") == 0
    for name in ("notes.txt", "phase.csv", "trajectory.npz.bak"):
        (out / name).write_text("mine")
    # Whatever lists them: an index of an earlier version, the summary of the
    # previous set, a commit folder that a killed run seems to have left.
    mine = ["notes.txt", "phase.csv", "trajectory.npz.bak", "../run.toml"]
    (out / ".jaxlagrange-sets.json").write_text(json.dumps({"run": mine}))
    summary = json.loads((out / "summary.json").read_text())
    (out / "summary.json").write_text(json.dumps({**summary, "files": mine}))
    planted = out / ".jaxlagrange-commit-x"
    planted.mkdir()
    (planted / ".jaxlagrange-remove.json").write_text(json.dumps(mine))
    assert _run(tmp_path, out, "--no-plots") == 0
    for name in ("notes.txt", "phase.csv", "trajectory.npz.bak"):
        assert (out / name).read_text() == "mine"
    assert (tmp_path / "run.toml").exists()
    assert json.loads((out / "summary.json").read_text())["files"] == [
        "summary.json",
        "trajectory.npz",
    ]


def test_a_set_writes_only_names_of_its_command(tmp_path):
    with pytest.raises(ValueError, match=r"'notes.txt' is not one of the outputs"):
        write_output_set(
            tmp_path, {"notes.txt": b"", "fit.png": b""}, outputs=OUTPUTS["fit"]
        )
    assert list(tmp_path.iterdir()) == []


def test_a_copied_folder_without_its_hidden_files_loses_no_set(tmp_path):
    # A run with figures, a fit into the same folder (its summary.json replaces
    # the run's), the folder copied with `cp out/*` (no hidden files), then a
    # run without figures into the copy: the first run's figures go, the fit's
    # files stay.
    out, copy = tmp_path / "out", tmp_path / "copy"
    assert _run(tmp_path, out) == 0
    # (The fit's set as `jaxlagrange fit` writes it: test_cli_fit runs one.)
    fitted = {"params.json": b"{}", "losses.csv": b"step,loss\n", "fit.npz": b""}
    write_with_summary(out, fitted, {"command": "fit"})
    copy.mkdir()
    for path in out.iterdir():
        if not path.name.startswith("."):
            shutil.copy(path, copy / path.name)
    figures = {p.name for p in copy.glob("*.png")}
    assert {"coordinates.png", "phase.png", "energy.png", "motion.png"} <= figures
    assert _run(tmp_path, copy, "--no-plots") == 0
    names = {p.name for p in copy.iterdir()}
    assert names == {
        "trajectory.npz",
        "summary.json",
        "params.json",
        "losses.csv",
        "fit.npz",
    }


# Config values that JAX cannot hold are named by their key.


@pytest.mark.parametrize(
    "section, key, value",
    [
        ("simulate", "max_steps", "99999999999999999999"),
        ("simulate", "saves", str(2**63)),
        ("simulate", "max_steps", str(-(2**63) - 1)),
    ],
)
def test_an_integer_past_int64_names_its_key(tmp_path, capsys, section, key, value):
    config = tmp_path / "run.toml"
    config.write_text(f'[system]\nname = "pendulum"\n[{section}]\n{key} = {value}\n')
    out = str(tmp_path / "out")
    assert main(["run", str(config), "--out", out, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"jaxlagrange run: error: {config}: [{section}] {key}: must be an integer "
        f"from -2**63 to 2**63 - 1, got {value}\n"
    )


# A fit's data file of the wrong size is named, with both sizes.

UNPACKS = """\
import jaxlagrange as jl

def make(k=1.0):
    def lagrangian(q, qd, t, params):
        x, y = q  # two coordinates
        return 0.5 * (qd @ qd) - 0.5 * params["k"] * (x**2 + y**2)
    return jl.LagrangianSystem(lagrangian, params={"k": k})
"""


@pytest.mark.parametrize(
    "columns, message",
    [
        (1, r"not enough values to unpack \(expected 2, got 1\)"),
        (3, r"too many values to unpack \(expected 2\)"),
    ],
)
def test_fit_data_of_the_wrong_size_is_named(tmp_path, capsys, columns, message):
    (tmp_path / "two.py").write_text(UNPACKS)
    ts = np.linspace(0.0, 1.0, 11)
    np.savez(tmp_path / "data.npz", ts=ts, q=np.cos(ts)[:, None].repeat(columns, 1))
    config = tmp_path / "fit.toml"
    config.write_text('[system]\nfile = "two.py"\n[fit]\ndata = "data.npz"\n')
    out = str(tmp_path / "out")
    assert main(["fit", str(config), "--out", out, "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    data = tmp_path / "data.npz"
    expected = (
        rf"error: {config}: the data file '{data}' gives {columns} coordinate\(s\), "
        r"but the system of 'two.py' unpacks q into another number of coordinates "
        rf"\(ValueError: `lagrangian` failed for q of length {columns} \({message}\): "
        r"check that q0 \(and qd0\) have the system's number of coordinates\.\); "
        "give one column of q per coordinate of the "
        "system"
    )
    assert re.search(expected, err), err
    assert "the system it returns" not in err


# Kept programs: one kept under another config's name is never run.


@pytest.mark.slow  # three processes; test_programs has the quick version
def test_a_kept_program_of_another_config_is_not_run(tmp_path):
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "JAXLAGRANGE_CACHE_DIR": str(cache),
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
    }

    def run(t1):
        config = tmp_path / f"t1_{t1}.toml"
        config.write_text(RUN.format(t1=t1))
        out = tmp_path / f"out_{t1}"
        command = ["run", str(config), "--out", str(out), "--quiet", "--no-plots"]
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlagrange", *command],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        with np.load(out / "trajectory.npz") as arrays:
            return arrays["ts"], arrays["q"]

    run(1.0)
    (one,) = (cache / "programs").iterdir()
    ts, q = run(2.0)
    (two,) = set((cache / "programs").iterdir()) - {one}
    shutil.copy(one, two)  # the t1 = 1 program under the t1 = 2 config's name
    again_ts, again_q = run(2.0)
    assert again_ts[-1] == ts[-1] == 2.0
    np.testing.assert_array_equal(again_q, q)
    assert two.read_bytes() != one.read_bytes()  # replaced
