"""`jaxlagrange fit`: an end-to-end fit from generated data, data files, errors."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cli, _config


ROOT = Path(__file__).resolve().parents[1]

CONFIG = """\
[system]
name = "pendulum"
params = { l = 1.4 }

[fit]
data = "data.npz"
steps = 30
optimizer = "lbfgs"
trainable = ["l"]
positive = ["l"]

[simulate]
rtol = 1e-10
atol = 1e-10
"""


def _pendulum_data():
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0}, q0=[1.0])
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = jl.simulate(system, q0, qd0, t1=2.0, saveat=ts, rtol=1e-11, atol=1e-11)
    return np.asarray(ts), np.asarray(traj.q), np.asarray(traj.qd)


TS, Q, QD = _pendulum_data()


def _main(capsys, *argv):
    status = _cli.main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_fit_end_to_end(tmp_path, capsys):
    np.savez(tmp_path / "data.npz", ts=TS, q=Q, qd=QD)
    (tmp_path / "fit.toml").write_text(CONFIG)
    out = tmp_path / "result"
    status, stdout, err = _main(
        capsys, "fit", str(tmp_path / "fit.toml"), "--out", str(out), "--progress"
    )
    assert status == 0, err
    assert "30/30" in err and "loss=" in err  # the tqdm bar over the steps
    expected = {
        "params.json",
        "summary.json",
        "losses.csv",
        "fit.npz",
        "fit.png",
        "loss.png",
    }
    # No temporary files left; the index of the commands' sets stays.
    assert {p.name for p in out.iterdir()} == expected
    params = json.loads((out / "params.json").read_text())
    assert set(params) == {"m", "l", "g", "m_stderr", "l_stderr", "g_stderr"}
    assert params["l"] == pytest.approx(2.0, rel=1e-6)
    assert params["m"] == 1.0 and params["g"] == 9.81
    # Held params have no standard error (issue 29: it was a fake 0.0).
    assert params["m_stderr"] is None and params["g_stderr"] is None
    assert 0.0 <= params["l_stderr"] < 1e-4
    losses = np.loadtxt(out / "losses.csv", delimiter=",", skiprows=1)
    assert losses.shape == (30, 2) and np.all(losses[:, 0] == np.arange(30))
    assert losses[0, 1] > 1e3 * losses[-1, 1]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["initial_params"]["l"] == 1.4
    assert summary["loss"]["final"] < 1e-12
    with np.load(out / "fit.npz") as arrays:
        np.testing.assert_allclose(arrays["q_fit_0"], Q, atol=1e-6)
        np.testing.assert_array_equal(arrays["q_0"], Q)
    for name in ("fit.png", "loss.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_fit_default_levenberg_marquardt(tmp_path, capsys):
    # The default optimizer: Levenberg–Marquardt, a few steps to rounding level.
    np.savez(tmp_path / "data.npz", ts=TS, q=Q, qd=QD)
    config = CONFIG.replace('steps = 30\noptimizer = "lbfgs"\n', "")
    (tmp_path / "fit.toml").write_text(config)
    out = tmp_path / "result"
    status, stdout, err = _main(
        capsys, "fit", str(tmp_path / "fit.toml"), "--out", str(out), "--progress"
    )
    assert status == 0, err
    assert "LevenbergMarquardt ran" in stdout
    params = json.loads((out / "params.json").read_text())
    assert params["l"] == pytest.approx(2.0, rel=1e-8)
    assert 0.0 <= params["l_stderr"] < 1e-6  # noise-free data: rounding level
    summary = json.loads((out / "summary.json").read_text())
    assert summary["converged"] is True and summary["solver_steps"] < 30


def test_a_failed_replay_of_the_fitted_system_is_reported(tmp_path, capsys):
    # Each of 4 segments fits within max_steps; the whole span, replayed for
    # fit.npz, does not: q_fit_0 ends in inf, which was written without a word.
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0}, q0=[1.0])
    full = jl.simulate(system, q0, qd0, t1=2.0, rtol=1e-10, atol=1e-10)
    max_steps = int(full.stats["num_steps"]) // 2
    np.savez(tmp_path / "data.npz", ts=TS, q=Q, qd=QD)
    config = CONFIG.replace('steps = 30\noptimizer = "lbfgs"\n', "segments = 4\n")
    (tmp_path / "fit.toml").write_text(config + f"max_steps = {max_steps}\n")
    out = tmp_path / "result"
    status, _, err = _main(
        capsys, "fit", str(tmp_path / "fit.toml"), "--out", str(out), "--no-plots"
    )
    assert status == 0, err
    stopped = (
        r"the fitted system's motion over data 0's times stopped at t = [01]\.\d+ "
    )
    assert re.search(stopped + r"\(max_steps_reached\): q_fit_0 in fit.npz is inf", err)
    summary = json.loads((out / "summary.json").read_text())
    assert re.match(stopped, summary["quality"]["warnings"][-1])
    with np.load(out / "fit.npz") as arrays:
        assert np.isinf(arrays["q_fit_0"][-1]).all()


def test_csv_data_matches_npz(tmp_path):
    header = "t,q0,qd0"
    np.savetxt(
        tmp_path / "data.csv",
        np.column_stack([TS, Q, QD]),
        delimiter=",",
        header=header,
        comments="",
    )
    obs = _cli.load_observations(tmp_path / "data.csv", 1, 0.1)
    np.testing.assert_array_equal(obs.ts, TS)
    np.testing.assert_array_equal(obs.q, Q)
    np.testing.assert_array_equal(obs.qd, QD)
    assert float(obs.sigma) == 0.1
    np.savetxt(
        tmp_path / "q_only.csv",
        np.column_stack([TS, Q]),
        delimiter=",",
        header="t,q0",
        comments="",
    )
    assert _cli.load_observations(tmp_path / "q_only.csv", 1, None).qd is None


@pytest.mark.parametrize(
    "config, data, match",
    [
        (CONFIG + "rate = 2\n", None, "unknown key 'rate' in [simulate]; valid keys: "),
        (
            CONFIG.replace('trainable = ["l"]', 'trainable = ["length"]'),
            None,
            "[fit] trainable: unknown param 'length' for system 'pendulum'; valid "
            "params: g, l, m",
        ),
        (
            CONFIG.replace(
                'optimizer = "lbfgs"', 'optimizer = "lbfgs"\nlearning_rate = 0.1'
            ),
            None,
            "[fit] learning_rate is for optimizer = 'adam'",
        ),
        (
            CONFIG.replace('positive = ["l"]', 'positive = ["l"]\nsigma_qd = 0.1'),
            dict(ts=TS, q=Q, qd=QD),
            "data.npz: `sigma_qd` is the noise of the observed velocities `qd` beside "
            "that of `q`: it needs `qd` and `sigma`.",
        ),
        # Settings that do nothing where they are (they were taken silently).
        (
            CONFIG.replace(
                'optimizer = "lbfgs"', 'optimizer = "lbfgs"\njacobian = "forward"'
            ),
            None,
            "[fit] jacobian is for optimizer = 'lm' or 'gauss_newton'; 'lbfgs' takes "
            "reverse-mode derivatives",
        ),
        (
            CONFIG.replace("steps = 30\n", "segments = 1\ncontinuity_weight = 10.0\n"),
            None,
            "[fit] continuity_weight weighs the gaps between shooting segments; "
            "with segments = 1 there are none",
        ),
        (
            CONFIG.replace('positive = ["l"]', 'positive = ["l", "g"]'),
            None,
            "[fit] positive: 'g' is not trainable",
        ),
        (
            CONFIG + "[output]\nanimation = false\n",
            None,
            "unknown key 'animation' in [output]",
        ),
        (
            CONFIG.replace('optimizer = "lbfgs"', 'optimizer = "sgd"'),
            None,
            "[fit] optimizer: must be one of lm, gauss_newton, dogleg, bfgs, lbfgs, adam, got 'sgd'",
        ),
        (
            CONFIG.replace('data = "data.npz"', "data = 3"),
            None,
            "[fit] data: must be a path",
        ),
        (CONFIG.replace('data = "data.npz"\n', ""), None, "[fit] data is required"),
        (CONFIG, None, "data.npz: no such data file"),
        (
            CONFIG.replace('data = "data.npz"', 'data = ["a.npz", "b.npz"]')
            + "[initial]\nq = [1.0]\n",
            None,
            "[initial] is the initial state of one data file, but [fit] data names 2",
        ),
        (CONFIG, dict(ts=TS, qd=QD), "data.npz: no array 'q'; a data file holds ts, q"),
        (
            CONFIG,
            dict(ts=TS, q=np.where(np.arange(41)[:, None] == 5, np.nan, Q)),
            "data.npz: `q` contains a non-finite value (NaN or inf) at index (5, 0).",
        ),
        (CONFIG, dict(ts=TS[::-1], q=Q), "data.npz: `ts` must be strictly increasing"),
        (CONFIG, dict(ts=TS[:-1], q=Q), "`q` has 41 rows but `ts` has 40 times"),
        (
            CONFIG,
            dict(ts=TS, q=np.ones((41, 2))),
            "q has 2 coordinates, but the system has 1",
        ),
        (
            CONFIG.replace("steps = 30", "steps = 30\nsegments = 50"),
            dict(ts=TS, q=Q),
            "[fit] `segments` must be an integer from 1 to 40",
        ),
        (  # in the config's words: [initial] q, not data[0]'s q0
            CONFIG.replace('"pendulum"', '"cartesian_pendulum"')
            .replace("params = { l = 1.4 }", "params = { l = 1.0 }")
            .replace('["l"]\npositive = ["l"]', '["g"]\nfit_initial_state = false')
            + "[initial]\nq = [1.0, 1.0]\n",
            dict(ts=TS, q=np.stack([np.sin(Q[:, 0]), -np.cos(Q[:, 0])], axis=1)),
            "[initial] q is off the holonomic constraints, which no fitted param "
            "moves: it is 0.354 from them. Give an [initial] q on them, or fit it "
            "([fit] fit_initial_state = true).",
        ),
    ],
)
def test_bad_fit_configs(tmp_path, capsys, config, data, match):
    (tmp_path / "fit.toml").write_text(config)
    if data is not None:
        np.savez(tmp_path / "data.npz", **data)
    out_dir = tmp_path / "out"
    status, out, err = _main(
        capsys, "fit", str(tmp_path / "fit.toml"), "--quiet", "--out", str(out_dir)
    )
    assert status == 1
    assert err.count("\n") == 1 and err.startswith("jaxlagrange fit: error: ")
    assert match in err and "Traceback" not in err
    assert not out_dir.exists() or not any(out_dir.iterdir())  # nothing written


def test_bad_fit_in_a_subprocess(tmp_path):
    (tmp_path / "fit.toml").write_text(CONFIG.replace("steps = 30", "steps = 0"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"}
    proc = subprocess.run(
        [sys.executable, "-m", "jaxlagrange", "fit", "fit.toml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1
    assert proc.stderr == (
        "jaxlagrange fit: error: fit.toml: [fit] steps: must be >= 1, got 0\n"
    )


def test_example_fit_config():
    # configs/fit_pendulum.toml reads the output of `jaxlagrange run configs/pendulum.toml`.
    path = ROOT / "configs" / "fit_pendulum.toml"
    config = _config.load(path, _config.FIT_SCHEMA)
    ready = _config.ready_system(config)
    kwargs = _config.fit_kwargs(config, ready)
    assert ready.name == "pendulum" and float(ready.system.params["l"]) == 1.4
    assert kwargs["trainable"] == {"l"} and kwargs["segments"] == 10
    assert kwargs["adjoint"] is None  # jl.fit's default
    (data,) = _config.data_paths(config)
    assert data.resolve() == ROOT / "out" / "pendulum" / "trajectory.npz"
    run = _config.load(ROOT / "configs" / "pendulum.toml")
    assert run["output"]["dir"] is None  # so `run` writes out/pendulum


def test_second_fit_loads_its_traced_programs(tmp_path):
    # The fit's solve and the fitted trajectory's simulate are kept (programs/)
    # with their compiled programs: a second run adds no entry and gives the
    # same result.
    np.savez(tmp_path / "data.npz", ts=TS, q=Q, qd=QD)
    config = CONFIG.replace('steps = 30\noptimizer = "lbfgs"\n', "")
    (tmp_path / "fit.toml").write_text(config)
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
        "JAXLAGRANGE_CACHE_DIR": str(cache),
    }
    entries, params = [], []
    for _ in range(2):
        proc = subprocess.run(
            [sys.executable, "-m", "jaxlagrange", "fit", "fit.toml", "--no-plots"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert proc.returncode == 0, proc.stderr
        entries.append(sorted(str(p.relative_to(cache)) for p in cache.rglob("*")))
        params.append(
            json.loads((tmp_path / "out" / "fit_pendulum" / "params.json").read_text())
        )
    assert len([name for name in entries[0] if name.endswith(".jlx")]) == 2
    assert entries[1] == entries[0]
    assert params[1] == params[0] and params[0]["l"] == pytest.approx(2.0, rel=1e-8)


def test_the_default_fit_of_noisy_data_is_honest(tmp_path, capsys):
    # Without [initial], the data's first (noisy) sample was the held initial
    # state: l came out 7.5 standard errors off. Now it is fitted by default.
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0}, q0=[1.0])
    ts = jnp.linspace(0.0, 3.0, 31)
    traj = jl.simulate(system, q0, qd0, t1=3.0, saveat=ts, rtol=1e-11, atol=1e-11)
    noise = np.random.default_rng(3).normal(0.0, 0.01, (2, *traj.q.shape))
    q, qd = np.asarray(traj.q) + noise[0], np.asarray(traj.qd) + noise[1]
    np.savez(tmp_path / "data.npz", ts=np.asarray(ts), q=q, qd=qd)
    config = CONFIG.replace('steps = 30\noptimizer = "lbfgs"\n', "sigma = 0.01\n")
    (tmp_path / "fit.toml").write_text(config.replace("l = 1.4", "l = 1.6"))
    out = tmp_path / "result"
    status, _, err = _main(capsys, "fit", str(tmp_path / "fit.toml"), "--out", str(out))
    assert status == 0, err
    params = json.loads((out / "params.json").read_text())
    assert abs(params["l"] - 2.0) < 3 * params["l_stderr"], params
