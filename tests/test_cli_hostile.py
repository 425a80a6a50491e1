"""Hostile inputs at the command line (the fifth probe, issue 56): model names
that try to choose where files go, what a loaded model leaves out, sweep stores
edited on disk, axis names with spaces, data and labels of the wrong kind."""

import json

import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cli
from jaxlagrange._cli._output import file_name


FALLING = """<mujoco model="{name}"><worldbody><geom type="plane" size="1 1 .1"/>
  <body pos="0 0 1"><joint name="drop" type="slide" axis="0 0 1"/>
  <geom type="sphere" size=".1"/></body></worldbody></mujoco>"""


@pytest.mark.parametrize(
    "name, expected",
    [
        ("../../escaped", "escaped"),
        ("/tmp/absolute", "tmp_absolute"),
        ("..", "system"),
        ("", "system"),
        ("a b/c\\d", "a_b_c_d"),
        ("double_pendulum", "double_pendulum"),
    ],
)
def test_file_name_never_leaves_its_folder(name, expected):
    assert file_name(name) == expected
    assert "/" not in file_name(name) and file_name(name) not in ("", ".", "..")


@pytest.mark.parametrize("name", ["../../escaped", "/ABSOLUTE/escaped"])
def test_model_name_never_chooses_where_files_go(tmp_path, monkeypatch, capsys, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    # A user's own results where "../../escaped" from out/ points.
    victim = tmp_path / "a" / "escaped"
    victim.mkdir()
    (victim / "trajectory.npz").write_bytes(b"the user's own")
    (victim / "energy.png").write_bytes(b"the user's figure")
    name = name.replace("/ABSOLUTE", str(victim.parent))
    (work / "m.xml").write_text(FALLING.format(name=name))
    (work / "c.toml").write_text(
        '[system]\nmujoco = "m.xml"\n[simulate]\nt1 = 0.1\nsaves = 3\n'
    )
    monkeypatch.chdir(work)
    assert _cli.main(["run", "c.toml", "--quiet", "--no-plots"]) == 0
    assert (victim / "trajectory.npz").read_bytes() == b"the user's own"
    assert (victim / "energy.png").read_bytes() == b"the user's figure"
    (made,) = (work / "out").iterdir()
    assert made.name.endswith("escaped") and "/" not in made.name
    summary = json.loads((made / "summary.json").read_text())
    # What the model has that is not imported is carried, not only warned of,
    # and the warning is one clean line.
    assert summary["result"] == "successful"
    assert summary["not_imported"] == ["contacts"]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "UserWarning" not in err
    assert err.startswith("jaxlagrange run: warning: MuJoCo model") and "contacts" in err


def test_not_imported_is_carried_on_the_system_and_trajectory():
    with pytest.warns(UserWarning, match="not imported .*: contacts"):
        ready = jl.mujoco.load(FALLING.format(name="ball"))
    assert ready.system.not_imported == ("contacts",)
    traj = jl.simulate(*ready, t1=0.1)
    assert traj.not_imported == ("contacts",)
    batch = jl.simulate_batch(ready.system, ready.q0[None], ready.qd0[None], t1=0.1)
    assert batch.not_imported == ("contacts",)
    pendulum = jl.systems.pendulum()
    assert jl.simulate(*pendulum, t1=0.1).not_imported == ()
