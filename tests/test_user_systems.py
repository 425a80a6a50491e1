"""Systems of the user's own file at the command line: run, sweep and fit from a
config, and every problem with the file as one line naming it."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cli, _config
from jaxlagrange._config import ConfigError


ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "configs" / "elastic_pendulum.py"


def _write(tmp_path, toml, name="user.toml"):
    shutil.copy(EXAMPLE, tmp_path / "elastic_pendulum.py")
    path = tmp_path / name
    path.write_text(toml)
    return path


RUN = """\
[system]
file = "elastic_pendulum.py"
params = { k = 30.0 }

[initial]
q = [1.2, 0.6]
qd = [0.0, 0.0]

[simulate]
t1 = 2.0
saves = 201
"""


def test_example_is_the_closed_form_elastic_pendulum():
    # The example file's system: its accelerations against the hand-derived
    # r̈ = r θ̇² − k/m (r − l0) + g cos θ, θ̈ = −(2 ṙ θ̇ + g sin θ)/r.
    config = _config.load(ROOT / "configs" / "elastic_pendulum.toml")
    ready = _config.ready_system(config)
    assert ready.name == "elastic_pendulum" and ready.coordinates == ("r", "θ")
    q, qd = np.array([1.3, 0.7]), np.array([0.4, -1.1])
    qdd = jl.accelerations(ready.system, q, qd, 0.0)
    r, th, rd, thd, k, g = 1.3, 0.7, 0.4, -1.1, 40.0, 9.81
    expected = [
        r * thd**2 - k * (r - 1.0) + g * np.cos(th),
        -(2 * rd * thd + g * np.sin(th)) / r,
    ]
    assert np.allclose(qdd, expected, rtol=1e-12, atol=1e-12)
    assert np.allclose(ready.positions(q), [[0, 0], [r * np.sin(th), -r * np.cos(th)]])


def test_run_from_a_user_file(tmp_path, capsys):
    config = _write(tmp_path, RUN)
    out = tmp_path / "out"
    assert _cli.main(["run", str(config), "--out", str(out), "--quiet"]) == 0
    names = {p.name for p in out.iterdir()}
    assert {"trajectory.npz", "motion.png", "motion.gif", "summary.json"} <= names
    summary = json.loads((out / "summary.json").read_text())
    assert summary["system"] == "elastic_pendulum"
    assert summary["coordinates"] == ["r", "θ"]
    assert summary["params"]["k"] == 30.0 and summary["params"]["g"] == 9.81
    assert summary["energy"]["conserved"] and summary["energy"]["max_rel_drift"] < 1e-6


def test_a_user_file_imports_the_modules_beside_it(tmp_path, monkeypatch):
    # As `python file.py` does, from any working directory: it imported only
    # from the file's own directory, and only under `python -m`.
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "spring_constants.py").write_text("K = 4.0\n")
    (folder / "oscillator.py").write_text(
        "import jaxlagrange as jl\nimport spring_constants\n\n"
        "def make():\n"
        "    return jl.LagrangianSystem(\n"
        "        lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * spring_constants.K * q[0] ** 2\n"
        "    )\n"
    )
    (folder / "run.toml").write_text(
        '[system]\nfile = "oscillator.py"\n[initial]\nq = [1.0]\nqd = [0.0]\n'
        "[simulate]\nt1 = 1.0\nsaves = 2\n"
    )
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "out"
    assert _cli.main(["run", "configs/run.toml", "--out", str(out), "--quiet"]) == 0
    with np.load(out / "trajectory.npz") as arrays:
        np.testing.assert_allclose(arrays["q"][-1, 0], np.cos(2.0), rtol=1e-6)


def test_sweep_and_fit_from_a_user_file(tmp_path, capsys):
    # Data from the file's system with k = 30; a sweep over k; then fit k back
    # from a start 20% off.
    data = tmp_path / "data"
    assert (
        _cli.main(
            [
                "run",
                str(_write(tmp_path, RUN)),
                "--out",
                str(data),
                "--quiet",
                "--no-plots",
            ]
        )
        == 0
    )
    sweep = RUN.replace("saves = 201", "saves = 2") + (
        '\n[sweep]\nsampling = "grid"\nchunk_size = 4\n'
        "[sweep.axes]\nk = { min = 20.0, max = 40.0, num = 3 }\n"
        '"q[1]" = { min = 0.2, max = 0.6, num = 2 }\n'
    )
    out = tmp_path / "sweep"
    config = _write(tmp_path, sweep, "sweep.toml")
    assert _cli.main(["sweep", str(config), "--out", str(out), "--quiet"]) == 0
    group = jl.open_store(out / "sweep.zarr")
    assert group["outputs/result"].shape == (6,) and not np.any(
        group["outputs/result"][:]
    )
    assert np.allclose(group["inputs/params/k"][:], [20, 20, 30, 30, 40, 40])

    fit = (
        RUN.replace("k = 30.0", "k = 24.0")
        .replace(
            "[simulate]",
            '[fit]\ndata = "data/trajectory.npz"\ntrainable = ["k"]\n'
            'positive = ["k"]\n\n[simulate]\nrtol = 1e-10\natol = 1e-10',
        )
        .replace("t1 = 2.0\nsaves = 201\n", "")
    )
    out = tmp_path / "fit"
    config = _write(tmp_path, fit, "fit.toml")
    assert _cli.main(["fit", str(config), "--out", str(out), "--quiet"]) == 0
    params = json.loads((out / "params.json").read_text())
    assert params["k"] == pytest.approx(30.0, rel=1e-6)


@pytest.mark.parametrize(
    "file_text, system, match",
    [
        (None, 'file = "missing.py"', r"file 'missing.py': no such file"),
        ("def make(:\n", 'file = "bad.py"', r"file 'bad.py': syntax error at line 1"),
        (
            "import no_such_module_here\n",
            'file = "bad.py"',
            r"file 'bad.py': importing it raised ModuleNotFoundError",
        ),
        (
            "def build(): pass\n",
            'file = "bad.py"',
            r"file 'bad.py', function 'make': no such function in the file "
            r"\(it defines: build\)",
        ),
        (
            "def make(k=1.0):\n    raise RuntimeError('no good')\n",
            'file = "bad.py"\nparams = { k = 2.0 }',
            r"function 'make': make\(k=2.0\) raised RuntimeError: no good",
        ),
        (
            "def make():\n    return 42\n",
            'file = "bad.py"',
            r"function 'make': returned int, not a jl.LagrangianSystem",
        ),
        (
            "def other():\n    pass\n",
            'file = "bad.py"\nfunction = "nope"',
            r"function 'nope': no such function",
        ),
        (
            "import jaxlagrange as jl\ncoordinates = 5\n"
            "def make():\n"
            "    return jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd)\n",
            'file = "bad.py"',
            r"`coordinates` must be a list of labels, one per coordinate, got 5",
        ),
        (
            "import jaxlagrange as jl\n"
            "def make():\n"
            "    return jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd * qd)\n",
            'file = "bad.py"',
            r"file 'bad.py', function 'make': the system it returns: ValueError: "
            r"`lagrangian` must return a scalar",
        ),
        (None, 'name = "pendulum"\nfile = "x.py"', r"needs exactly one of `name`"),
        (None, "params = { k = 1.0 }", r"needs exactly one of `name`"),
        (
            None,
            'file = "elastic_pendulum.py"\noptions = { n = 2 }',
            r"\[system\] options apply to ready systems",
        ),
    ],
)
def test_user_file_errors(tmp_path, file_text, system, match):
    shutil.copy(EXAMPLE, tmp_path / "elastic_pendulum.py")
    if file_text is not None:
        (tmp_path / "bad.py").write_text(file_text)
    path = tmp_path / "run.toml"
    path.write_text(f"[system]\n{system}\n[initial]\nq = [1.0, 0.0]\nqd = [0.0, 0.0]\n")
    config = _config.load(path)
    with pytest.raises(ConfigError, match=match) as info:
        _config.ready_system(config)
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_user_file_needs_an_initial_state(tmp_path):
    path = _write(tmp_path, '[system]\nfile = "elastic_pendulum.py"\n')
    with pytest.raises(ConfigError, match=r"\[initial\] q and qd are needed"):
        _config.ready_system(_config.load(path))
    path.write_text(RUN.replace("q = [1.2, 0.6]", "q = [1.2]"))
    with pytest.raises(ConfigError, match=r"must be lists of the same length"):
        _config.ready_system(_config.load(path))


def test_user_file_error_at_the_command_line(tmp_path, capsys):
    path = tmp_path / "run.toml"
    path.write_text('[system]\nfile = "nowhere.py"\n')
    assert _cli.main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("jaxlagrange run: error: ") and "nowhere.py" in err
    assert err.count("\n") == 1 and "Traceback" not in err


SPRING = """\
import json, pathlib
import jaxlagrange as jl

def make(k=1.0):
    # A coefficient read from a file beside the system file.
    c = json.loads((pathlib.Path(__file__).parent / "coef.json").read_text())["c"]

    def lagrangian(q, qd, t, params):
        return 0.5 * qd[0] ** 2 - 0.5 * c * params["k"] * q[0] ** 2

    return jl.LagrangianSystem(lagrangian, params={"k": k})
"""

SPRING_SWEEP = """\
[system]
file = "spring.py"

[initial]
q = [1.0]
qd = [0.0]

[simulate]
t1 = 1.0
saves = 2

[sweep]
chunk_size = 2

[sweep.axes]
k = { min = 1.0, max = 2.0, num = 4 }
"""


def test_a_sweep_is_not_resumed_with_other_physics(tmp_path, capsys, monkeypatch):
    # What the system computes is part of the store's identity, however its
    # functions get their values: here from a data file that `make()` reads,
    # which the file's own hash does not see. Before, the second sweep reused
    # (or, interrupted, finished) the store made with c = 1.
    (tmp_path / "spring.py").write_text(SPRING)
    (tmp_path / "coef.json").write_text('{"c": 1.0}')
    (tmp_path / "sweep.toml").write_text(SPRING_SWEEP)
    out = tmp_path / "out"
    command = ["sweep", str(tmp_path / "sweep.toml"), "--out", str(out), "--quiet"]
    assert _cli.main(command) == 0
    capsys.readouterr()
    # The same sweep from another directory is the same sweep.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["members_computed"] == 4
    monkeypatch.chdir(tmp_path)
    assert _cli.main(["sweep", "sweep.toml", "--out", "out", "--quiet"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["members_computed"] == 0 and summary["members_per_s"] == 0
    (tmp_path / "coef.json").write_text('{"c": 4.0}')
    assert _cli.main(command) == 1
    err = capsys.readouterr().err
    assert "holds a different sweep: the system computes something else" in err
    assert err.count("\n") == 1


def test_kept_programs_follow_what_the_system_computes(tmp_path):
    # The traced programs of `run` and `fit` are keyed by what the system's
    # functions compute: a coefficient read by `make()` from a data file changes
    # the key (the program of c = 1 served c = 4 before), the params' values do
    # not (they are the program's inputs).
    import types

    import jax

    from jaxlagrange import _programs
    from jaxlagrange._cli._common import kept_programs

    def ready(c, k=1.0):
        system = jl.LagrangianSystem(
            lambda q, qd, t, p: 0.5 * qd[0] ** 2 - 0.5 * c * p["k"] * q[0] ** 2,
            params={"k": k},
        )
        return types.SimpleNamespace(system=system, q0=np.zeros(1))

    config = {"system": {"file": None}, "source": "x"}
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "cache"))
    try:
        contexts = []
        for c, k in ((1.0, 1.0), (1.0, 3.0), (4.0, 1.0)):
            with kept_programs(config, ready(c, k)):
                contexts.append(_programs._STORE.get().context)
    finally:
        jax.config.update("jax_compilation_cache_dir", None)
    assert contexts[0] == contexts[1] != contexts[2]
