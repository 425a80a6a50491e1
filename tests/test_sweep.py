"""Chunked sweeps to a Zarr store: resume after a kill, the Python API, bad configs."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import zarr
from helpers import counting, unit_pendulum

import jaxlagrange as jl  # noqa: E402
from jaxlagrange import _config  # noqa: E402
from jaxlagrange._cli import main  # noqa: E402


ROOT = Path(__file__).resolve().parents[1]

CONFIG = """\
[system]
name = "double_pendulum"

[simulate]
t1 = 4.0
saves = 3

[sweep]
sampling = "grid"
chunk_size = 8
lyapunov = true

[sweep.axes]
"q[0]" = { min = -3.0, max = 3.0, num = 12 }
"g" = { min = 5.0, max = 15.0, num = 10 }
"""


def _manifest(store: Path) -> dict | None:
    try:
        return json.loads((store / "zarr.json").read_text())["attributes"]["manifest"]
    except (FileNotFoundError, KeyError, json.JSONDecodeError):
        return None


def _cli(*args, **kwargs):
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    return subprocess.Popen(
        [sys.executable, "-m", "jaxlagrange", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def _arrays(store: Path) -> dict[str, np.ndarray]:
    group = zarr.open_group(store, mode="r")
    return {name: a[...] for name, a in group.arrays()} | {
        f"{kind}/{name}": a[...]
        for kind in ("inputs", "outputs", "inputs/params")
        for name, a in group[kind].arrays()
    }


def test_killed_sweep_resumes_to_the_same_store(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    config.write_text(CONFIG)
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    store = killed / "sweep.zarr"
    num_chunks = 15  # 120 members in chunks of 8

    # Kill the sweep once it has written some, but not all, of its chunks.
    process = _cli("sweep", str(config), "--out", str(killed), "--quiet")
    deadline = time.monotonic() + 120
    done = []
    while time.monotonic() < deadline and process.poll() is None:
        manifest = _manifest(store)
        if manifest and manifest["completed"]:
            done = manifest["completed"]
            break
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.communicate()
    assert process.returncode == -signal.SIGKILL, "the sweep ended before the kill"
    done = _manifest(store)["completed"]
    assert 0 < len(done) < num_chunks

    # The rerun computes exactly the missing chunks.
    assert (
        main(["sweep", str(config), "--out", str(killed), "--no-plots", "--progress"])
        == 0
    )
    err = capsys.readouterr().err
    assert (
        f"{len(done)} of {num_chunks} chunks already done, computing "
        f"{num_chunks - len(done)}." in err
    )
    # An uninterrupted run for reference (the same compiled code).
    assert main(["sweep", str(config), "--out", str(whole), "--quiet"]) == 0

    manifest = _manifest(store)
    assert manifest["completed"] == list(range(num_chunks)) and manifest["complete"]
    resumed, reference = _arrays(store), _arrays(whole / "sweep.zarr")
    assert resumed.keys() == reference.keys()
    for name in reference:
        np.testing.assert_array_equal(resumed[name], reference[name], err_msg=name)
    # One file per chunk per array, no temporary file left behind.
    assert not list(store.rglob("*.partial"))
    assert len(list((store / "outputs" / "lyapunov" / "c").iterdir())) == num_chunks
    assert (reference["outputs/result"] == 0).all()
    # The grid: q[0] slowest, g fastest; the outputs follow the inputs.
    np.testing.assert_allclose(
        reference["inputs/params/g"][:10], np.linspace(5, 15, 10)
    )
    np.testing.assert_allclose(reference["inputs/q0"][::10, 0], np.linspace(-3, 3, 12))
    summary = json.loads((whole / "summary.json").read_text())
    assert summary["members"] == 120 and summary["failed"] == 0
    assert (whole / "map_lyapunov.png").stat().st_size > 0

    # A store of another sweep is refused, in one line.
    config.write_text(CONFIG.replace("t1 = 4.0", "t1 = 3.0"))
    assert main(["sweep", str(config), "--out", str(whole), "--quiet"]) == 1


def test_simulate_sweep_equals_simulate_batch(tmp_path):
    pendulum = unit_pendulum()
    q0 = np.linspace(0.1, 3.0, 11)[:, None]
    g = np.linspace(5.0, 15.0, 11)
    saveat = jnp.linspace(0.0, 2.0, 5)
    group = jl.simulate_sweep(
        pendulum,
        q0,
        np.zeros(1),
        params={"g": g},
        store=tmp_path / "s.zarr",
        chunk_size=4,
        progress=False,
        t1=2.0,
        saveat=saveat,
    )
    traj = jl.simulate_batch(
        pendulum, q0, jnp.zeros(1), params={"g": g}, t1=2.0, saveat=saveat
    )
    np.testing.assert_allclose(group["outputs/q"][...], traj.q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(group["outputs/qd"][...], traj.qd, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(group["outputs/result"][...], 0)
    np.testing.assert_array_equal(group["inputs/params/g"][...], g)
    assert group["outputs/q"].chunks == (4, 5, 1)
    # Rerunning a complete sweep computes nothing and gives the same store.
    again = jl.simulate_sweep(
        pendulum,
        q0,
        np.zeros(1),
        params={"g": g},
        store=tmp_path / "s.zarr",
        chunk_size=4,
        progress=False,
        t1=2.0,
        saveat=saveat,
    )
    np.testing.assert_array_equal(again["outputs/q"][...], group["outputs/q"][...])
    with pytest.raises(ValueError, match="holds a different sweep"):
        jl.simulate_sweep(
            pendulum,
            q0,
            np.zeros(1),
            params={"g": g + 1},
            store=tmp_path / "s.zarr",
            chunk_size=4,
            progress=False,
            t1=2.0,
            saveat=saveat,
        )
    with pytest.raises(ValueError, match="exists and is not a sweep store"):
        jl.sweep(lambda x: {"y": x["x"]}, {"x": g}, tmp_path, progress=False)
    with pytest.raises(ValueError, match="`chunk_size` must be a positive int"):
        jl.sweep(lambda x: {"y": x["x"]}, {"x": g}, tmp_path / "t", chunk_size=0)
    with pytest.raises(
        ValueError, match="share one leading batch axis, got: x 11, z 3"
    ):
        jl.sweep(lambda x: x, {"x": g, "z": g[:3]}, tmp_path / "t")
    with pytest.raises(ValueError, match="must return a dict of arrays keyed by name"):
        jl.sweep(lambda x: x["x"], {"x": g}, tmp_path / "t")


def test_simulate_sweep_names_bad_inputs_before_its_store(tmp_path):
    pendulum = unit_pendulum()
    q0 = [[0.1], [0.2], [0.3]]  # lists, as simulate_batch takes them
    store = tmp_path / "s.zarr"

    def sweep(**kwargs):
        return jl.simulate_sweep(
            pendulum, q0, np.zeros(1), store=store, progress=False, **kwargs
        )

    for options, match in (
        (dict(t1=1.0, saveat=np.array([0.0, 2.0])), r"but saveat\[1\] = 2\.0"),
        (dict(t0=1.0, t1=0.5), r"got t0 = 1\.0 and t1 = 0\.5"),
        (dict(t1=1.0, params={"g": 9.81}), r"`params\['g'\]` is a scalar"),
        (dict(t1=1.0, params={"g/x": [1.0] * 3}), r"key 'g/x': a sweep's store"),
        (dict(), r"`simulate_sweep` needs `t1`"),
    ):
        with pytest.raises(ValueError, match=match):
            sweep(**options)
        assert not store.exists()  # a corrected call is not refused
    group = sweep(t1=1.0, params={"g": [9.81, 9.81, 1.0]})
    np.testing.assert_array_equal(group["inputs/params/g"][:], [9.81, 9.81, 1.0])
    # A resume with other inputs names what differs.
    with pytest.raises(ValueError, match=r"its inputs differ: params/g"):
        sweep(t1=1.0, params={"g": [9.81, 9.81, 2.0]})
    with pytest.raises(
        ValueError,
        match=r"it differs in: simulate_options\.t1 \(stored 1\.0, now 2\.0\)\); "
        r"remove it",
    ):
        sweep(t1=2.0, params={"g": [9.81, 9.81, 1.0]})


def _write(tmp_path, text):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    return str(path)


BASE = '[system]\nname = "double_pendulum"\n'


def test_a_sweep_of_a_coordinate_the_constraints_fix_is_refused(tmp_path, capsys):
    # x of a Cartesian pendulum: each member started off x² + y² = l² and failed
    # on its own, every one named non_finite_state.
    config = (
        '[system]\nname = "cartesian_pendulum"\n[simulate]\nt1 = 0.5\n'
        '[sweep]\n[sweep.axes]\n"q[0]" = { min = 0.0, max = 0.9, num = 4 }\n'
    )
    path = _write(tmp_path, config)
    assert main(["sweep", path, "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"jaxlagrange sweep: error: \d of 4 members start off the constraints of "
        r"'cartesian_pendulum', the first at q\[0\] = [\d.]+: a coordinate the "
        r"constraints fix cannot be swept \(sweep independent coordinates, or "
        r"params\)\n",
        err,
    )
    assert not (tmp_path / "out" / "sweep.zarr").exists()
    # A swept param that moves the constraints: the advice is not to sweep one.
    path = _write(tmp_path, config.replace('"q[0]"', "l").replace("0.0,", "0.5,"))
    assert main(["sweep", path, "--out", str(tmp_path / "out"), "--quiet"]) == 1
    assert capsys.readouterr().err.endswith(
        "the swept params move the constraints, and [initial] is on them at the "
        "config's values only\n"
    )


@pytest.mark.parametrize(
    "sweep, message",
    [
        (
            '[sweep]\nsampling = "grid"\nchunks = 4\n[sweep.axes]\n"q[0]" = { min = 0, max = 1, num = 2 }',
            "unknown key 'chunks' in [sweep]; valid keys: axes, backend, chunk_size, "
            "device, lyapunov, sampling, seed, size",
        ),
        ('[sweep]\nsampling = "grid"', "[sweep] axes is required"),
        (
            '[sweep]\nsampling = "lattice"\n[sweep.axes]',
            "[sweep] sampling: must be one of grid, random, got 'lattice'",
        ),
        ("[sweep]\n[sweep.axes]", "[sweep.axes] is empty"),
        (
            '[sweep]\n[sweep.axes]\n"q[2]" = { min = 0, max = 1, num = 2 }',
            "unknown axis 'q[2]'; valid axes for system 'double_pendulum': q[0], q[1], "
            "qd[0], qd[1], g, l1, l2, m1, m2",
        ),
        (
            '[sweep]\n[sweep.axes]\n"q[0]" = { min = 0, max = 1 }',
            "[sweep.axes] q[0] num is required",
        ),
        (
            '[sweep]\n[sweep.axes]\n"q[0]" = { min = 0, max = 1, num = 0 }',
            "[sweep.axes] q[0] num: must be >= 1, got 0",
        ),
        (
            '[sweep]\n[sweep.axes]\n"q[0]" = { min = 1, max = 0, num = 3 }',
            "[sweep.axes] q[0]: max must be >= min",
        ),
        (
            '[sweep]\n[sweep.axes]\n"q[0]" = { min = 0, max = 1, num = 2, step = 1 }',
            "unknown key 'step' in [sweep.axes] q[0]; valid keys: max, min, num",
        ),
        (
            '[sweep]\n[sweep.axes]\n"q[0]" = 1.0',
            "[sweep.axes] q[0] must be a table like { min = .., max = .., num = .. }",
        ),
        (
            '[sweep]\nsize = 10\n[sweep.axes]\n"q[0]" = { min = 0, max = 1, num = 2 }',
            "[sweep] size is for random sampling",
        ),
        (
            '[sweep]\nseed = 3\n[sweep.axes]\n"q[0]" = { min = 0, max = 1, num = 2 }',
            "[sweep] seed is for random sampling; a grid has none",
        ),
        (
            '[output]\nanimation = false\n[sweep]\n[sweep.axes]\n"g" = { min = 0, max = 1, num = 3 }',
            "unknown key 'animation' in [output]",
        ),
        (
            '[sweep]\nsampling = "random"\n[sweep.axes]\n"g" = { min = 0, max = 1 }',
            "[sweep] size is required for random sampling",
        ),
        (
            '[sweep]\nsampling = "random"\nsize = 4\n[sweep.axes]\n"g" = { min = 0, max = 1, num = 3 }',
            "unknown key 'num' in [sweep.axes] g; valid keys: max, min",
        ),
        (
            '[sweep]\nchunk_size = 0\n[sweep.axes]\n"g" = { min = 0, max = 1, num = 3 }',
            "[sweep] chunk_size: must be >= 1, got 0",
        ),
        (
            '[sweep]\nbackend = "gpu"\n[sweep.axes]\n"g" = { min = 0, max = 1, num = 3 }',
            "[sweep] backend: must be one of auto, vmap, kernel, got 'gpu'",
        ),
        (
            '[sweep]\n[sweep.axes]\n"g" = { min = "a", max = 1, num = 3 }',
            "[sweep.axes] g min: must be a finite number, got a string 'a'",
        ),
    ],
)
def test_bad_sweep_configs_are_one_line_errors(tmp_path, capsys, sweep, message):
    path = _write(tmp_path, BASE + sweep + "\n")
    assert main(["sweep", path, "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("jaxlagrange sweep: error: ")
    assert message in err
    assert not (tmp_path / "out" / "sweep.zarr").exists()


def test_random_sampling_is_seeded_and_in_range(tmp_path):
    text = (
        BASE + '[sweep]\nsampling = "random"\nsize = 1000\nseed = 3\n[sweep.axes]\n'
        '"g" = { min = 5, max = 6 }\n"qd[1]" = { min = -1, max = 1 }\n'
    )
    config = _config.load(_write(tmp_path, text), _config.SWEEP_SCHEMA)
    ready = _config.ready_system(config)
    values, shape = _config.sweep_axes(config, ready)
    again, _ = _config.sweep_axes(config, ready)
    assert shape == (1000,) and list(values) == ["g", "qd[1]"]
    np.testing.assert_array_equal(values["g"], again["g"])
    assert 5 <= values["g"].min() and values["g"].max() <= 6
    assert -1 <= values["qd[1]"].min() and values["qd[1]"].max() <= 1
    # Uniform: the mean within 4 standard errors of the midpoint.
    assert abs(values["qd[1]"].mean()) < 4 * (2 / np.sqrt(12)) / np.sqrt(1000)


def _mixed_lagrangian(q, qd, t, params):
    # M = 1 − q turns singular at q = 1; V = k (q + 1)^{3/2} is NaN below q = −1.
    return 0.5 * (1.0 - q[0]) * qd[0] ** 2 - params["k"] * (q[0] + 1.0) ** 1.5


def test_a_sweep_names_the_cause_of_each_failed_member(tmp_path, monkeypatch):
    from jaxlagrange import _guard
    from jaxlagrange._ensemble._sweep import stream
    from jaxlagrange._ensemble._sweep_simulate import SweepMember
    from jaxlagrange._options import GivenOptions

    calls = counting(monkeypatch, _guard, "_diagnose")
    # A new function: no compiled program of an earlier test can hide a trace.
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: _mixed_lagrangian(q, qd, t, p), params={"k": 0.0}
    )
    qd0 = np.array([[-0.5], [-0.5], [-0.5], [1.0], [-0.5]])
    k = np.array([0.0, 0.0, 40.0, 0.0, 0.0])
    names = ["successful"] * 2 + ["non_finite_state", "singular_mass_matrix"]
    names += ["successful"]
    saveat = jnp.linspace(0.0, 1.0, 3)
    # Chunks of 2: the first has no failure, and no diagnosis is traced for it.
    options = dict(chunk_size=2, progress=False, t1=1.0, saveat=saveat)
    first = jl.simulate_sweep(
        system,
        np.zeros((2, 1)),
        qd0[:2],
        params={"k": k[:2]},
        store=tmp_path / "ok.zarr",
        **options,
    )
    np.testing.assert_array_equal(first["outputs/result"][...], 0)
    assert calls == []
    group = jl.simulate_sweep(
        system,
        np.zeros((5, 1)),
        qd0,
        params={"k": k},
        store=tmp_path / "s.zarr",
        **options,
    )
    assert jl.result_name(group["outputs/result"][...]).tolist() == names
    assert len(calls) >= 1
    t_final = group["outputs/t_final"][...]
    assert 0.6 < t_final[3] < 0.7 and t_final[2] < 1.0
    # The command line's member (energies along the solve) alike.
    member = SweepMember(system, GivenOptions(t1=1.0, saveat=saveat), False)
    inputs = {"q0": np.zeros((5, 1)), "qd0": qd0, "params/k": k}
    cli = stream(
        member,
        inputs,
        tmp_path / "cli.zarr",
        chunk_size=2,
        progress=False,
        backend="auto",
    )
    assert jl.result_name(cli["outputs/result"][...]).tolist() == names
