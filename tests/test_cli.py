"""The command line: end to end in a subprocess, errors, and atomic outputs."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cli
from jaxlagrange._listing import LISTING


ROOT = Path(__file__).resolve().parents[1]


def _jaxlagrange(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    return subprocess.run(
        [sys.executable, "-m", "jaxlagrange", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_run_default_end_to_end(tmp_path):
    # No config: the embedded chaotic double pendulum, written to --out.
    out = tmp_path / "result"
    proc = _jaxlagrange("run", "--out", str(out), "--progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "100.00%|" in proc.stderr  # diffrax's tqdm bar, asked for in a log
    expected = {
        "trajectory.npz",
        "summary.json",
        "coordinates.png",
        "phase.png",
        "energy.png",
        "motion.png",
        "motion.gif",
    }
    # No temporary files left; the index of the commands' sets stays.
    assert {p.name for p in out.iterdir()} == expected
    with np.load(out / "trajectory.npz") as data:
        assert set(data.files) == {"ts", "q", "qd", "energy"}
        assert data["ts"].shape == (2001,) and data["q"].shape == (2001, 2)
        assert data["qd"].shape == (2001, 2) and data["q"].dtype == np.float64
        assert all(np.all(np.isfinite(data[k])) for k in data.files)
        assert np.allclose(data["ts"], np.linspace(0.0, 20.0, 2001))
        energy = data["energy"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["system"] == "double_pendulum"
    assert summary["coordinates"] == ["θ₁", "θ₂"]
    assert summary["params"] == {"g": 9.81, "l1": 1.0, "l2": 1.0, "m1": 1.0, "m2": 1.0}
    assert summary["initial"] == {"q": [2.0, 2.5], "qd": [0.0, 0.0]}
    assert summary["simulate"]["rtol"] == 1e-10 and summary["simulate"]["t1"] == 20.0
    assert summary["result"] == "successful" and summary["t_final"] == 20.0
    assert summary["stats"]["num_steps"] > 100
    assert summary["wall_time_s"]["run"] > 0
    assert summary["versions"]["jaxlagrange"] == "0.1.0"
    drift = summary["energy"]
    assert drift["conserved"] is True
    assert drift["max_abs_drift"] == pytest.approx(np.max(np.abs(energy - energy[0])))
    # The chaotic double pendulum at rtol = atol = 1e-10 keeps its energy to 1e-7.
    assert 0 < drift["max_rel_drift"] < 1e-7
    for name in expected - {"trajectory.npz", "summary.json", "motion.gif"}:
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "motion.gif").read_bytes()[:6] == b"GIF89a"


def test_bad_config_in_a_subprocess(tmp_path):
    (tmp_path / "bad.toml").write_text(
        "[system]\nname = 'kepler'\n[simulate]\nrtol = -1"
    )
    proc = _jaxlagrange("run", "bad.toml", cwd=tmp_path)
    assert proc.returncode == 1
    assert (
        proc.stderr
        == "jaxlagrange run: error: bad.toml: [simulate] rtol: must be > 0, got -1\n"
    )
    assert not (tmp_path / "out").exists()


def _main(capsys, *argv):
    status = _cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "[system]\nname = 'kepler'\nmu = 2",
            "unknown key 'mu' in [system]; valid keys: ",
        ),
        ("[system]\nname = 'kepplr'", "[system] name: unknown system 'kepplr'; known "),
        (
            "[system]\nname = 'kepler'\n[simulate]\nsolver = 'Foo'",
            "unknown solver 'Foo'",
        ),
        ("[system]\nname = 'kepler'\n[initial]\nq = [1.0]", "[initial] q must have 2 "),
        (
            "[system]\nname = 'kepler'\n[simulate]\nt1 = -3.0",
            "t1 must be greater than t0",
        ),
        (
            "[system]\nname = 'kepler'\n[simulate]\nt1 = '3'",
            "t1: must be a finite number",
        ),
    ],
)
def test_bad_configs(tmp_path, capsys, text, match):
    (tmp_path / "bad.toml").write_text(text)
    status, out, err = _main(capsys, "run", str(tmp_path / "bad.toml"), "--quiet")
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("jaxlagrange run: error: ")
    assert match in err and "Traceback" not in err
    assert out == ""


def test_an_output_directory_it_cannot_use_is_named(tmp_path, monkeypatch):
    from jaxlagrange._cli._output import CLIError, output_dir

    (tmp_path / "file").write_text("")
    with pytest.raises(CLIError, match=r"^output directory '.*file' is an existing"):
        output_dir(tmp_path / "file")
    with pytest.raises(
        CLIError, match=r"^cannot create output directory '.*file/x': Not a directory"
    ):
        output_dir(tmp_path / "file" / "x")

    def refused(directory):  # (as root, a mode does not refuse it)
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr("jaxlagrange._cli._output._probe", refused)
    with pytest.raises(
        CLIError, match=r"^output directory '.*out' is not writable: Read-only file"
    ):
        output_dir(tmp_path / "out")


def test_usage_errors(tmp_path, capsys):
    status, _, err = _main(capsys, "run", str(tmp_path / "none.toml"))
    assert status == 1
    assert (
        err
        == f"jaxlagrange run: error: {tmp_path / 'none.toml'}: no such config file\n"
    )
    with pytest.raises(SystemExit) as info:
        _cli.main(["walk"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "invalid choice: 'walk'" in err
    (tmp_path / "file").write_text("")
    status, _, err = _main(capsys, "run", "--out", str(tmp_path / "file"))
    assert status == 1
    assert "output directory" in err and "is an existing file" in err


def test_failed_simulation_writes_nothing(tmp_path, capsys):
    config = tmp_path / "short.toml"
    config.write_text(
        "[system]\nname = 'pendulum'\n[simulate]\nt1 = 5.0\nmax_steps = 4\n"
        f"[output]\ndir = '{tmp_path / 'out'}'"
    )
    status, _, err = _main(capsys, "run", str(config), "--quiet")
    assert status == 1
    assert err.startswith(
        "jaxlagrange run: error: simulation of 'pendulum' failed at t = "
    )
    assert "raise [simulate] max_steps (now 4)" in err and err.count("\n") == 1
    assert list((tmp_path / "out").iterdir()) == []


def test_show_config(capsys):
    status, out, _ = _main(capsys, "run", "--show-config")
    assert status == 0 and out == _cli._config.DEFAULT_CONFIG


def test_output_bytes():
    import io

    data = np.load(io.BytesIO(_cli.npz_bytes(ts=np.arange(3.0), q=np.ones((3, 2)))))
    assert np.array_equal(data["ts"], np.arange(3.0)) and data["q"].shape == (3, 2)
    text = _cli.json_bytes({"a": np.float64(1.5), "b": np.arange(2), "c": float("nan")})
    assert json.loads(text) == {"a": 1.5, "b": [0, 1], "c": None}


@pytest.fixture
def constrained_pendulum():
    # A pendulum in Cartesian coordinates on the circle x² + y² = 1: a registered
    # system with one holonomic constraint, removed from the registry afterwards.
    import jax.numpy as jnp

    import jaxlagrange as jl
    from jaxlagrange.systems import _registry

    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) - 9.81 * q[1]

    def circle(q, t):
        return jnp.array([q @ q - 1.0])

    @jl.systems.register("test_cartesian_pendulum")
    def factory(params=None, *, q0=None, qd0=None):
        system = jl.LagrangianSystem(lagrangian, holonomic=circle)
        q0 = jnp.array([0.6, -0.8]) if q0 is None else jnp.asarray(q0)
        qd0 = jnp.zeros(2) if qd0 is None else jnp.asarray(qd0)
        return jl.systems.ReadySystem(
            system, q0, qd0, "test_cartesian_pendulum", ("x", "y")
        )

    yield "test_cartesian_pendulum"
    del _registry._REGISTRY["test_cartesian_pendulum"]


def test_run_saves_multipliers_of_constrained_systems(
    tmp_path, capsys, constrained_pendulum
):
    config = tmp_path / "constrained.toml"
    config.write_text(
        f"[system]\nname = '{constrained_pendulum}'\n[simulate]\nt1 = 0.5\nsaves = 11\n"
        "[output]\nplots = false"
    )
    status, _, err = _main(
        capsys, "run", str(config), "--out", str(tmp_path / "o"), "--quiet"
    )
    assert status == 0, err
    assert {p.name for p in (tmp_path / "o").iterdir()} == {
        "trajectory.npz",
        "summary.json",
    }
    with np.load(tmp_path / "o" / "trajectory.npz") as data:
        assert data["multipliers"].shape == (11, 1)
        # Released from rest at angle α below the horizontal (sin α = 0.8), the
        # constraint force Gᵀλ = 2λ q balances gravity along the rod: 2λ = −g sin α.
        assert data["multipliers"][0, 0] == pytest.approx(-0.5 * 9.81 * 0.8, rel=1e-10)
        assert np.all(np.isfinite(data["multipliers"]))


def test_systems_listing(capsys):
    status, out, _ = _main(capsys, "systems", "spring_chain")
    assert status == 0
    assert out.splitlines() == [
        "spring_chain: n equal masses in a line, joined by equal springs between "
        "two walls",
        "  coordinates: x₁, x₂, x₃, x₄, x₅",
        "  params:",
        "    k = 1  stiffness of each spring (N/m)",
        "    m = 1  mass of each body (kg)",
        "  options:     n = 5",
        "  initial:     q = [0.5, 0, 0, 0, 0], qd = [0, 0, 0, 0, 0]",
    ]
    status, out, err = _main(capsys, "systems", "kepler", "foo")
    assert status == 1 and out == ""
    assert err.startswith(
        "jaxlagrange systems: error: unknown system 'foo'; known systems: "
    )


def test_systems_listing_describes_every_param_of_every_system(capsys):
    # Issue 29: the listing named params without saying what they are.
    status, out, _ = _main(capsys, "systems")
    assert status == 0
    assert (
        "    eps = 0  softening length ε of the potential −μm/√(r² + ε²), 0 for none"
        in out.splitlines()
    )
    for name in jl.systems.names():
        summary, meanings = jl.systems.describe(name)
        assert summary and f"{name}: {summary}" in out.splitlines()
        params = jl.systems.get(name)().system.params
        missing = sorted(set(params) - set(meanings))
        assert not missing, f"{name}: params without a description: {missing}"


def test_the_stored_listing_is_the_factories():
    # `jaxlagrange systems` prints a stored listing (it imports no JAX): it must
    # be what the factories say. If not, run `python tools/systems_listing.py`.
    tool = Path(__file__).parents[1] / "tools" / "systems_listing.py"
    spec = importlib.util.spec_from_file_location("systems_listing", tool)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert LISTING.read_text(encoding="utf-8") == module.listing()


def test_systems_lists_without_importing_jax():
    # Issue 56: listing the names took 0.8 s, importing JAX.
    code = (
        "import sys, runpy; sys.argv = ['jaxlagrange', 'systems', 'kepler']\n"
        "try:\n    runpy.run_module('jaxlagrange', run_name='__main__')\n"
        "except SystemExit as e:\n    print(e.code, 'jax' in sys.modules)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert done.stdout.endswith("\n0 False\n")
    assert done.stdout.startswith("kepler: ") and "  params:" in done.stdout
    # The package's names are there, imported at first use.
    names = sorted(k for k in vars(jl._api) if not k.startswith("_"))
    assert jl.__all__ == names and set(names) <= set(dir(jl))
    assert all(getattr(jl, k) is getattr(jl._api, k) for k in names)
    with pytest.raises(AttributeError, match="has no attribute 'simulat'"):
        _ = jl.simulat


def test_debug_shows_the_exception(tmp_path):
    with pytest.raises(_cli.ConfigError, match=r"no such config file"):
        _cli.main(["--debug", "run", str(tmp_path / "none.toml")])


def test_run_reports_the_events_of_a_bouncing_ball(tmp_path, capsys):
    config = tmp_path / "ball.toml"
    config.write_text(
        "[system]\nname = 'bouncing_ball'\nparams = { e = 0.8 }\n"
        "[initial]\nq = [1.0]\nqd = [0.0]\n[simulate]\nt1 = 1.5\nsaves = 11\n"
    )
    status, _, err = _main(
        capsys,
        "run",
        str(config),
        "--out",
        str(tmp_path / "out"),
        "--quiet",
        "--no-plots",
    )
    assert status == 0, err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    g = 9.81
    first = np.sqrt(2 / g)  # falls 1 m, rebounds at 0.8 of the impact speed
    second = first + 2 * 0.8 * np.sqrt(2 * g) / g
    assert [e["kind"] for e in summary["events"]] == ["impact", "impact"]
    assert [e["constraint"] for e in summary["events"]] == [0, 0]
    np.testing.assert_allclose(
        [e["t"] for e in summary["events"]], [first, second], rtol=1e-8
    )
    with np.load(tmp_path / "out" / "trajectory.npz") as arrays:
        np.testing.assert_allclose(arrays["event_ts"], [first, second], rtol=1e-8)
        np.testing.assert_array_equal(arrays["event_kind"], [1, 1])


def test_second_run_loads_the_compiled_solve_from_the_cache(tmp_path):
    # JAX's persistent compilation cache, on in a directory of the test's own:
    # the first run writes the traced solve (programs/, `_programs`) and its
    # compiled program, the second loads both (no new entries, the same
    # result). Only a program without host callbacks can be kept or loaded, so
    # this also checks that the run's solve has none.
    cache = tmp_path / "cache"
    env = {**os.environ, "JAXLAGRANGE_CACHE_DIR": str(cache)}
    args = ("run", "configs/pendulum.toml", "--quiet", "--no-plots")
    entries, results, times = [], [], []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlagrange", *args, "--out", str(tmp_path / "o")],
            cwd=ROOT,
            env={**env, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        entries.append(sorted(str(p.relative_to(cache)) for p in cache.rglob("*")))
        results.append(np.load(tmp_path / "o" / "trajectory.npz")["q"])
        summary = json.loads((tmp_path / "o" / "summary.json").read_text())
        times.append(summary["wall_time_s"])
    assert len([name for name in entries[0] if name.endswith(".jlx")]) == 1
    assert any(name.startswith("jit_call") for name in entries[0])
    assert entries[1] == entries[0]
    np.testing.assert_array_equal(results[1], results[0])
    # The second run neither traces nor compiles: it loads both.
    assert times[0]["trace"] > 0 and times[0]["kept_program_load"] == 0
    assert times[1]["trace"] == 0 and times[1]["kept_program_load"] > 0
    assert times[1]["compile"] == 0 and times[1]["cache_load"] > 0


def test_progress_shows_on_a_terminal_or_when_asked(monkeypatch):
    from jaxlagrange._cli._common import show_progress

    class Args:
        quiet, progress = False, False

    args = Args()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    assert not show_progress(args)
    args.progress = True
    assert show_progress(args)
    args.quiet = True
    assert not show_progress(args)
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    args.quiet, args.progress = False, False
    assert show_progress(args)


def test_errors_as_values_leaves_no_traces_behind():
    # Inside, equinox's checks trace as NaN values (cacheable programs); what
    # was traced inside must not serve a call outside, which has to raise.
    import equinox as eqx
    import jax.numpy as jnp

    from jaxlagrange._cli._common import errors_as_values

    check = eqx.filter_jit(lambda x: eqx.error_if(x, x < 0, "negative input"))
    with errors_as_values():
        assert jnp.isnan(check(jnp.array(-1.0)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="negative input"):
        check(jnp.array(-1.0))
    assert check(jnp.array(2.0)) == 2.0
