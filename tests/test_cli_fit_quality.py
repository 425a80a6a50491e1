"""A user's system file at the command line, as a newcomer writes one (issue 29):
a bead on a spinning hoop whose `positions` reads a param that only `make()`'s
defaults hold, fitted from data without `[initial]`, from a poor start (the fit
says it is poor) and from several starts (it recovers ω = 6)."""

import json

import jax.numpy as jnp
import numpy as np
import pytest
from helpers import hoop

import jaxlagrange as jl
from jaxlagrange import _cli, _config


HOOP = """\
import jax.numpy as jnp
import jaxlagrange as jl


def make(R=0.5, omega=6.0, g=9.81):
    def lagrangian(q, qd, t, p):
        spin = p["omega"] ** 2 * jnp.sin(q[0]) ** 2
        kinetic = 0.5 * p["R"] ** 2 * (qd[0] ** 2 + spin)
        return kinetic + p["g"] * p["R"] * jnp.cos(q[0])

    return jl.LagrangianSystem(lagrangian, params={"R": R, "omega": omega, "g": g})


coordinates = ["theta"]


def positions(q, **params):
    R = params["R"]
    return jnp.array([[0.0, 0.0], [R * jnp.sin(q[0]), -R * jnp.cos(q[0])]])
"""

FIT = """\
[system]
file = "hoop.py"
params = {{ omega = 4.5 }}

[fit]
data = "data.npz"
trainable = ["omega"]
positive = ["omega"]
{extra}
"""


def _main(capsys, *argv):
    status = _cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


@pytest.fixture
def hoop_dir(tmp_path):
    (tmp_path / "hoop.py").write_text(HOOP)
    return tmp_path


def test_positions_get_the_defaults_of_make(hoop_dir):
    # Issue 29: positions got only the config's params: "failed: 'R'" after the
    # whole solve.
    document = {
        "system": {"file": "hoop.py", "params": {"omega": 5.0}},
        "initial": {"q": [0.5], "qd": [0.0]},
    }
    config = _config.check(document, _config.RUN_SCHEMA, str(hoop_dir / "run.toml"))
    config["source"] = str(hoop_dir / "run.toml")
    ready = _config.ready_system(config)
    points = np.asarray(ready.positions(ready.q0))
    expected = [0.5 * np.sin(0.5), -0.5 * np.cos(0.5)]  # R = 0.5, make()'s default
    np.testing.assert_allclose(points[1], expected, rtol=1e-12)


def test_a_broken_positions_is_named_before_the_solve_and_leaves_nothing(
    hoop_dir, capsys
):
    (hoop_dir / "hoop.py").write_text(HOOP.replace('params["R"]', 'params["radius"]'))
    (hoop_dir / "run.toml").write_text(
        '[system]\nfile = "hoop.py"\n[initial]\nq = [0.5]\nqd = [0.0]\n'
    )
    out = hoop_dir / "out"
    status, _, err = _main(capsys, "run", str(hoop_dir / "run.toml"), "--out", str(out))
    assert status == 1
    assert "function 'positions': positions(q0) raised KeyError: 'radius'" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_positions_of_the_wrong_shape_is_named(hoop_dir, capsys):
    (hoop_dir / "hoop.py").write_text(
        HOOP.replace(
            "return jnp.array([[0.0, 0.0], [R", "return jnp.array([0.0, R"
        ).replace("jnp.cos(q[0])]])", "jnp.cos(q[0])])")
    )
    (hoop_dir / "run.toml").write_text(
        '[system]\nfile = "hoop.py"\n[initial]\nq = [0.5]\nqd = [0.0]\n'
    )
    out = str(hoop_dir / "out")
    status, _, err = _main(capsys, "run", str(hoop_dir / "run.toml"), "--out", out)
    assert status == 1
    assert "must return shape (k, 2) or (k, 3) for one state, got shape (3,)" in err


@pytest.fixture
def hoop_data(hoop_dir):
    system = hoop(R=0.5, omega=6.0, g=9.81)  # the system of HOOP's make()
    ts = jnp.linspace(0.0, 3.0, 151)
    traj = jl.simulate(system, jnp.array([0.3]), jnp.array([0.0]), t1=3.0, saveat=ts)
    np.savez(hoop_dir / "data.npz", ts=ts, q=traj.q, qd=traj.qd)
    return hoop_dir


def _outputs(out):
    summary = json.loads((out / "summary.json").read_text())
    params = json.loads((out / "params.json").read_text())
    losses = (out / "losses.csv").read_text().strip().splitlines()
    return summary, params, losses


def test_hoop_fit_without_initial_reports_a_poor_fit_then_recovers_from_starts(
    hoop_data, capsys
):
    config = hoop_data / "fit.toml"
    # Held at the data's state (by default it is fitted: the data may be noisy).
    # One shot over the whole data (by default the segments follow its
    # oscillations, issue 56).
    config.write_text(FIT.format(extra="fit_initial_state = false\nsegments = 1"))
    out = hoop_data / "poor"
    status, stdout, err = _main(
        capsys, "fit", str(config), "--out", str(out), "--no-plots"
    )
    # Issue 30 item 11: without [initial] the fit starts from the data's state
    # (it used to refuse to run, and [initial] then replaced the data's).
    # Issue 56: a poor fit has an exit status of its own, its outputs written.
    assert status == 3, err
    summary, params, losses = _outputs(out)
    assert summary["initial_state"]["q"] == [pytest.approx([0.3], abs=1e-12)]
    assert summary["initial_state"]["qd"] == [pytest.approx([0.0], abs=1e-12)]
    # Issue 29: the poor local minimum is reported as such.
    assert "warning: jl.fit: poor fit" in err and "starts" in err
    assert "POOR FIT" in stdout
    assert summary["quality"]["poor_fit"] is True
    assert summary["quality"]["rms"] > 0.05 * summary["quality"]["data_scale"]
    assert abs(params["omega"] - 6.0) > 0.5
    # Held params have no standard error; one loss row per solver step.
    assert params["R_stderr"] is None and params["g_stderr"] is None
    assert params["omega_stderr"] > 0
    assert summary["stderr"]["R"] is None
    assert losses[0] == "step,loss" and len(losses) == summary["solver_steps"] + 1

    config.write_text(FIT.format(extra="starts = { omega = [4.5, 5.5, 6.5, 7.5] }"))
    out = hoop_data / "starts"
    status, stdout, err = _main(
        capsys, "fit", str(config), "--out", str(out), "--no-plots"
    )
    assert status == 0, err
    summary, params, _ = _outputs(out)
    assert params["omega"] == pytest.approx(6.0, abs=1e-8)
    assert summary["quality"]["poor_fit"] is False and "warning" not in err
    assert len(summary["start_losses"]) == 4


def test_hoop_fit_from_a_poor_start_recovers_with_the_default_segments(
    hoop_data, capsys
):
    # Issue 56: the segments follow the data's oscillations by default, where
    # a single shot from the same start ends in a poor local minimum (above).
    config = hoop_data / "fit.toml"
    config.write_text(FIT.format(extra="fit_initial_state = false"))
    out = hoop_data / "auto"
    status, stdout, err = _main(
        capsys, "fit", str(config), "--out", str(out), "--no-plots"
    )
    assert status == 0, err
    summary, params, _ = _outputs(out)
    assert summary["segments"] > 1 and "(auto)" in stdout
    assert params["omega"] == pytest.approx(6.0, rel=1e-4)
    assert summary["quality"]["poor_fit"] is False


@pytest.mark.parametrize(
    "extra, match",
    [
        ("starts = { w = [1.0] }", "starts: unknown param 'w'"),
        (
            "starts = { omega = [1.0], R = [1.0, 2.0] }",
            "same number of starting values",
        ),
        ("starts = { omega = 5.0 }", "must be a non-empty list"),
    ],
)
def test_bad_starts_in_the_config_are_named(hoop_data, capsys, extra, match):
    config = hoop_data / "fit.toml"
    config.write_text(FIT.format(extra=extra))
    out = str(hoop_data / "out")
    status, _, err = _main(capsys, "fit", str(config), "--out", out, "--no-plots")
    assert status == 1 and match in err
