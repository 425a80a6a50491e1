"""Nothing lost, nothing mixed: sweep stores (checksums of failed chunks, the
store's identity, incomplete stores, lock files) and the command line's output
directories (links, `.`, other file systems, concurrent runs)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import zarr

import jaxlagrange as jl
from jaxlagrange._cli import main
from jaxlagrange._ensemble._store import ChunkedStore


ROOT = Path(__file__).resolve().parents[1]


def _sqrt(member):
    # NaN with the sign bit set for x < 0 (what XLA's sqrt gives on the CPU).
    return {"y": jnp.sqrt(member["x"])}


def _manifest(store: Path) -> dict:
    return json.loads((store / "zarr.json").read_text())["attributes"]["manifest"]


# 1. A chunk whose members all fail.


def test_a_chunk_of_failed_members_is_stored_and_checks(tmp_path, capsys):
    x = np.array([-1.0, -2.0, 1.0, 4.0])
    assert np.signbit(np.asarray(jnp.sqrt(jnp.asarray(x))))[0]
    store = tmp_path / "s.zarr"
    group = jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=False)
    y = group["outputs/y"][:]
    assert np.isnan(y[:2]).all() and np.array_equal(y[2:], [1.0, 2.0])
    # Every chunk is a file, the all-NaN one included.
    assert sorted(p.name for p in (store / "outputs" / "y" / "c").iterdir()) == [
        "0",
        "1",
    ]
    # A rerun computes nothing and finds nothing altered.
    jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=True)
    err = capsys.readouterr().err
    assert "2 of 2 chunks already done, computing 0" in err
    assert "checksum" not in err
    jl.open_store(store)


def test_simulate_sweep_records_failed_members_by_result_code(tmp_path):
    def lagrangian(q, qd, t):
        return 0.5 * qd @ qd - jnp.sqrt(q[0])

    def observe(traj):
        # NaN (sign bit set) exactly for the members that failed at t0.
        return {"q": traj.q, "root": jnp.sqrt(traj.t_final - 0.25)}

    system = jl.LagrangianSystem(lagrangian)
    q0 = np.array([[-1.0], [-2.0], [1.0], [2.0]])
    kwargs = dict(
        store=tmp_path / "s.zarr",
        observe=observe,
        chunk_size=2,
        progress=False,
        t1=0.5,
        saveat=jnp.linspace(0.0, 0.5, 3),
    )
    group = jl.simulate_sweep(system, q0, np.zeros(1), **kwargs)
    result = group["outputs/result"][:]
    assert (result[:2] == jl.RESULTS.non_finite_state._value).all()
    assert (result[2:] == 0).all()
    assert not np.isfinite(group["outputs/q"][:2]).any()
    assert np.isnan(group["outputs/root"][:2]).all()
    np.testing.assert_allclose(group["outputs/root"][2:], 0.5, rtol=1e-12)
    jl.open_store(tmp_path / "s.zarr")
    jl.simulate_sweep(system, q0, np.zeros(1), **kwargs)  # nothing to recompute


ROOT_FILE = """\
import jax.numpy as jnp
import jaxlagrange as jl


def make():
    return jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 - jnp.sqrt(q[0]))
"""

ROOT_SWEEP = """\
[system]
file = "root.py"

[initial]
q = [1.0]
qd = [0.0]

[simulate]
t1 = 0.5

[sweep]
chunk_size = 2

[sweep.axes]
"q[0]" = { min = -2.0, max = 2.0, num = 4 }
"""


def test_a_cli_sweep_whose_chunk_all_fails_finishes(tmp_path, capsys):
    (tmp_path / "root.py").write_text(ROOT_FILE)
    config = tmp_path / "sweep.toml"
    config.write_text(ROOT_SWEEP)
    out = tmp_path / "out"
    for _ in range(2):  # the rerun finds the store whole
        args = ["sweep", str(config), "--out", str(out), "--no-plots", "--progress"]
        assert main(args) == 0
        err = capsys.readouterr().err
        assert "checksum" not in err
    assert "2 of 2 chunks already done, computing 0" in err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["failed"] == 2 and summary["first_failed"] == [0, 1]
    assert summary["failed_by_result"] == {"non_finite_state": 2}
    group = jl.open_store(out / "sweep.zarr")
    np.testing.assert_array_equal(
        group["outputs/result"][:2], jl.RESULTS.non_finite_state._value
    )


# 2. The store's identity: stored inputs, and the user's system file.


def test_tampered_inputs_are_detected_and_recomputed(tmp_path, capsys):
    x = np.arange(6.0)
    store = tmp_path / "s.zarr"
    jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=False)
    zarr.open_group(store, mode="r+")["inputs/x"][2] = 9.0  # chunk 1
    with pytest.raises(ValueError, match=r"1 chunk\(s\).*: \[1\]"):
        jl.open_store(store)
    # The resume rewrites the inputs it was given and recomputes their chunk.
    group = jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=False)
    assert "computed again: [1]" in capsys.readouterr().err
    np.testing.assert_array_equal(group["inputs/x"][:], x)
    np.testing.assert_array_equal(group["outputs/y"][:], np.sqrt(x))


SYSTEM_FILE = """\
import jaxlagrange as jl


def make(g={g}):
    return jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 + g * q[0])
"""

USER_SWEEP = """\
[system]
file = "falling.py"

[initial]
q = [0.0]
qd = [0.0]

[simulate]
t1 = 1.0

[sweep]
chunk_size = 2

[sweep.axes]
"qd[0]" = {{ min = 0.0, max = 1.0, num = {num} }}
"""


def test_a_refused_resume_names_the_param_or_setting_that_changed(tmp_path, capsys):
    # It blamed "a module its file imports" for a ready system's [system]
    # params, and said "config" for a changed rtol.
    text = (
        '[system]\nname = "pendulum"\n{params}[simulate]\nt1 = 0.5\n{rtol}'
        '[sweep]\n[sweep.axes]\n"q[0]" = {{ min = 0.1, max = 0.2, num = 2 }}\n'
    )
    config, out = tmp_path / "sweep.toml", str(tmp_path / "out")
    config.write_text(text.format(params="", rtol=""))
    assert main(["sweep", str(config), "--out", out, "--quiet", "--no-plots"]) == 0
    for params, rtol, message in (
        (
            "params = { l = 2.0 }\n",
            "",
            "the system's params differ: l (stored 1.0, now 2.0)",
        ),
        (
            "",
            "rtol = 1e-10\n",
            "it differs in: config.simulate.rtol (stored 1e-08, now 1e-10)",
        ),
    ):
        capsys.readouterr()
        config.write_text(text.format(params=params, rtol=rtol))
        assert main(["sweep", str(config), "--out", out, "--quiet"]) == 1
        assert message in capsys.readouterr().err


def test_a_store_of_an_earlier_version_is_resumed(tmp_path, capsys, monkeypatch):
    # A store written before the backend and the params by name were recorded
    # (its params one text, no backend) was refused, its message a dump of the
    # params over several lines.
    from jaxlagrange._cli import sweep as sweep_command
    from jaxlagrange._ensemble import _sweep
    from jaxlagrange._ensemble._backend import VmapBackend
    from jaxlagrange._ensemble._identity import describe

    config, out = tmp_path / "sweep.toml", str(tmp_path / "out")
    config.write_text(
        '[system]\nname = "pendulum"\n[simulate]\nt1 = 0.5\n[sweep]\nchunk_size = 1\n'
        '[sweep.axes]\n"q[0]" = { min = 0.1, max = 0.2, num = 2 }\n'
    )
    command = ["sweep", str(config), "--out", out, "--no-plots"]
    with monkeypatch.context() as patch:  # as it was written before
        patch.setattr(_sweep, "_backend_of", lambda *args: VmapBackend())
        patch.setattr(sweep_command, "_described_params", describe)
        assert main([*command, "--quiet"]) == 0
    assert main([*command, "--quiet"]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["members_computed"] == 0  # resumed: nothing left to compute
    attrs = zarr.open_group(tmp_path / "out" / "sweep.zarr").attrs
    assert "backend" not in attrs and isinstance(attrs["params"], str)


def test_editing_the_system_file_refuses_the_resume(tmp_path, capsys):
    (tmp_path / "falling.py").write_text(SYSTEM_FILE.format(g=9.81))
    config = tmp_path / "sweep.toml"
    config.write_text(USER_SWEEP.format(num=4))
    out = tmp_path / "out"
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) == 0
    q = zarr.open_group(out / "sweep.zarr")["outputs/q"][:, -1, 0]
    np.testing.assert_allclose(q, np.linspace(0, 1, 4) + 9.81 / 2, rtol=1e-10)
    capsys.readouterr()
    (tmp_path / "falling.py").write_text(SYSTEM_FILE.format(g=19.62))
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "holds a different sweep" in err
    assert "falling.py" in err and "changed" in err


# 3. Incomplete stores, and chunks whose files are gone.


def _interrupted(tmp_path) -> Path:
    """A store of 3 chunks of which only chunk 0 was written."""
    x = np.arange(6.0)
    store = tmp_path / "s.zarr"
    chunked = ChunkedStore(
        store,
        size=6,
        chunk_size=2,
        inputs={"x": x},
        outputs={"y": ((), np.float64)},
        attrs={},
    )
    chunked.write(0, {"y": np.sqrt(x[:2])})
    chunked.close()
    return store


def test_open_store_says_an_interrupted_store_is_incomplete(tmp_path):
    store = _interrupted(tmp_path)
    with pytest.raises(
        ValueError,
        match=r"is incomplete: 2 of 3 chunk\(s\) were never computed: \[1, 2\].*"
        r"rerun the sweep",
    ):
        jl.open_store(store)
    group = jl.open_store(store, allow_incomplete=True)
    assert np.isnan(group["outputs/y"][2:]).all()


def test_a_listed_chunk_whose_files_are_gone_is_recomputed(tmp_path, capsys):
    x = np.arange(6.0)
    store = tmp_path / "s.zarr"
    jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=False)
    # As in a store written before checksums were kept.
    group = zarr.open_group(store, mode="r+")
    manifest = dict(group.attrs["manifest"])
    manifest.pop("checksums")
    manifest.pop("input_checksums", None)
    group.attrs["manifest"] = manifest
    (store / "outputs" / "y" / "c" / "1").unlink()
    with pytest.raises(ValueError, match=r"missing.*: \[1\]"):
        jl.open_store(store)
    group = jl.sweep(_sqrt, {"x": x}, store, chunk_size=2, progress=False)
    assert "computed again: [1]" in capsys.readouterr().err
    np.testing.assert_array_equal(group["outputs/y"][:], np.sqrt(x))


# Issue 29: a finished sweep leaves no lock file; a running one still holds it.


def test_a_finished_sweep_removes_its_lock_file(tmp_path, monkeypatch):
    store = tmp_path / "s.zarr"
    chunked = ChunkedStore(
        store,
        size=2,
        chunk_size=2,
        inputs={"x": np.ones(2)},
        outputs={"y": ((), np.float64)},
        attrs={},
    )
    lock = tmp_path / ".s.zarr.lock"
    assert lock.exists()
    with pytest.raises(ValueError, match="is being written by another sweep"):
        ChunkedStore(
            store,
            size=2,
            chunk_size=2,
            inputs={"x": np.ones(2)},
            outputs={"y": ((), np.float64)},
            attrs={},
        )
    chunked.write(0, {"y": np.ones(2)})
    chunked.finish()
    assert not lock.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.zarr"]
    jl.open_store(store)
    # A sweep that stops on an error (here, writing its first chunk) removes it
    # too.

    def write(self, chunk, values):
        assert lock.with_name(".t.zarr.lock").exists()
        raise RuntimeError("stopped")

    monkeypatch.setattr(ChunkedStore, "write", write)
    with pytest.raises(RuntimeError, match="stopped"):
        jl.sweep(lambda x: {"y": x["x"]}, {"x": np.ones(4)}, tmp_path / "t.zarr")
    assert not lock.with_name(".t.zarr.lock").exists()


# 4. Output directories: written into, wherever they lead.

RUN = """\
[system]
name = "pendulum"

[initial]
q = [{q}]
qd = [0.0]

[simulate]
t1 = 1.0
saves = 11
"""


def _consistent(out: Path, q0: float) -> None:
    """`out` holds one whole set of a run from q0, and the user's file."""
    summary = json.loads((out / "summary.json").read_text())
    names = {p.name for p in out.iterdir()} - {"notes.txt"}
    assert names == set(summary["files"]), (names, summary["files"])
    with np.load(out / "trajectory.npz") as arrays:
        assert arrays["q"][0, 0] == summary["initial"]["q"][0] == q0
    assert (out / "notes.txt").read_text() == "mine"


def _run(config: Path, q0: float, out: str) -> int:
    config.write_text(RUN.format(q=q0))
    return main(["run", str(config), "--out", out, "--quiet", "--no-plots"])


def test_out_through_a_symlink_to_another_file_system(tmp_path):
    shm = Path("/dev/shm")
    if not shm.is_dir() or os.stat(shm).st_dev == os.stat(tmp_path).st_dev:
        pytest.skip("needs /dev/shm on another file system")
    target = Path(__import__("tempfile").mkdtemp(dir=shm))
    try:
        (target / "notes.txt").write_text("mine")
        link = tmp_path / "out"
        link.symlink_to(target, target_is_directory=True)
        config = tmp_path / "run.toml"
        for q0 in (0.5, 0.25):  # the second run replaces the first's set
            assert _run(config, q0, str(link)) == 0
            assert link.is_symlink() and os.readlink(link) == str(target)
            _consistent(target, q0)
        assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "run.toml"]
    finally:
        __import__("shutil").rmtree(target, ignore_errors=True)


def test_out_is_the_current_directory(tmp_path, monkeypatch):
    here = tmp_path / "here"
    here.mkdir()
    (here / "notes.txt").write_text("mine")
    monkeypatch.chdir(here)
    config = tmp_path / "run.toml"
    for q0 in (0.5, 0.25):
        assert _run(config, q0, ".") == 0
        _consistent(here, q0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["here", "run.toml"]


def test_an_out_that_cannot_be_made_is_refused_before_computing(tmp_path, capsys):
    (tmp_path / "file").write_text("")
    config = tmp_path / "run.toml"
    config.write_text(RUN.format(q=0.5))
    assert main(["run", str(config), "--out", str(tmp_path / "file" / "x")]) == 1
    err = capsys.readouterr()
    assert err.out == ""  # nothing computed: not even the banner
    assert "output directory" in err.err and "file/x" in err.err


TXT = r"[a-d]\.txt"  # the outputs of the sets written here


def test_an_interrupted_commit_is_finished_by_the_next_run(tmp_path, monkeypatch):
    from jaxlagrange._cli import _output

    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")

    def files(q0, extra):
        names = ["a.txt", *extra, "summary.json"]
        summary = json.dumps({"files": names, "q0": q0}).encode()
        return {**{n: f"{q0}".encode() for n in names[:-1]}, "summary.json": summary}

    _output.write_output_set(out, files(1, ["b.txt"]), outputs=TXT)
    real = os.replace
    calls = []

    def interrupted(src, dst):
        calls.append(dst)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(src, dst)

    monkeypatch.setattr(_output.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _output.write_output_set(out, files(2, ["c.txt"]), outputs=TXT)
    monkeypatch.undo()
    # Mid-swap there is no summary.json: no set is claimed whole.
    assert not (out / "summary.json").exists()
    # Any later write into the directory first finishes the interrupted one.
    _output.write_output_set(out, files(3, ["d.txt"]), outputs=TXT)
    assert sorted(p.name for p in out.iterdir()) == [
        "a.txt",
        "d.txt",
        "notes.txt",
        "summary.json",
    ]
    assert json.loads((out / "summary.json").read_text())["q0"] == 3


# 5. Concurrent runs into one directory: each set whole, the last one wins.

WRITER = """\
import json, sys
from jaxlagrange._cli._output import write_output_set

out, tag = sys.argv[1], sys.argv[2]
for i in range(40):
    names = [f"{tag}{j}.txt" for j in range(5)] + ["common.txt"]
    body = f"{tag}-{i}".encode()
    files = {n: body for n in names}
    summary = {"files": names + ["summary.json"], "id": f"{tag}-{i}"}
    files["summary.json"] = json.dumps(summary).encode()
    write_output_set(out, files, outputs=r"[ab]\\d\\.txt|common\\.txt")
"""


def test_concurrent_writers_leave_one_whole_set(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    script = tmp_path / "writer.py"
    script.write_text(WRITER)
    env = dict(os.environ, PYTHONPATH=str(ROOT), JAX_PLATFORMS="cpu")
    procs = [
        subprocess.Popen(
            [sys.executable, str(script), str(out), tag],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in ("a", "b")
    ]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    summary = json.loads((out / "summary.json").read_text())
    assert summary["id"] in ("a-39", "b-39")
    assert {p.name for p in out.iterdir()} == {*summary["files"], "notes.txt"}
    for name in summary["files"][:-1]:
        assert (out / name).read_text() == summary["id"]


# 12. Sweep axes stay in the param's valid domain, as `run` checks it.


@pytest.mark.parametrize(
    "axis, message",
    [
        (
            '"l1" = { min = -1.0, max = 2.0, num = 3 }',
            r"\[sweep.axes\] l1: min = -1.0 is outside the valid values: Parameter "
            r"'l1' of system 'double_pendulum' must be positive",
        ),
        (
            '"m2" = { min = 0.0, max = 1.0, num = 3 }',
            r"\[sweep.axes\] m2: min = 0.0 is outside the valid values",
        ),
    ],
)
def test_sweep_axes_are_checked_like_run_params(tmp_path, capsys, axis, message):
    config = tmp_path / "sweep.toml"
    config.write_text(
        f'[system]\nname = "double_pendulum"\n[sweep]\n[sweep.axes]\n{axis}\n'
    )
    out = tmp_path / "out"
    assert main(["sweep", str(config), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert __import__("re").search(message, err), err
    assert not (out / "sweep.zarr").exists()


def test_random_axes_are_checked_too(tmp_path):
    from jaxlagrange import _config

    config = tmp_path / "sweep.toml"
    config.write_text(
        '[system]\nname = "bouncing_ball"\n[sweep]\nsampling = "random"\nsize = 4\n'
        '[sweep.axes]\n"e" = { min = 0.5, max = 1.5 }\n'
    )
    config = _config.load(config, _config.SWEEP_SCHEMA)
    with pytest.raises(
        _config.ConfigError, match=r"e: max = 1.5 is outside the valid values.*\[0, 1\]"
    ):
        _config.sweep_axes(config, _config.ready_system(config))


# 20 (part). Non-finite params in a config are refused, naming the param.


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "[1.0, nan]"])
def test_non_finite_params_are_refused(tmp_path, value):
    from jaxlagrange import _config

    (tmp_path / "falling.py").write_text(SYSTEM_FILE.format(g=9.81))
    config = tmp_path / "run.toml"
    config.write_text(
        f'[system]\nfile = "falling.py"\nparams = {{ g = {value} }}\n'
        "[initial]\nq = [0.0]\nqd = [0.0]\n"
    )
    with pytest.raises(
        _config.ConfigError, match=r"\[system\] params: 'g' must be a finite number"
    ):
        _config.load(config)


# 10. A user system's number of coordinates must fit its Lagrangian.

TWO_SPRINGS = """\
import jaxlagrange as jl


def make(k=4.0):
    def lagrangian(q, qd, t):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2) - 0.5 * k * (q[0] ** 2 + q[1] ** 2)

    return jl.LagrangianSystem(lagrangian)


def positions(q, k=4.0):
    return [[q[0], 0.0], [q[1], 1.0]]
"""

ONE_SPRING_READ_TWICE = """\
import jaxlagrange as jl


def make():
    return jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * q[0] ** 2)
"""


def _user(tmp_path, source, q, qd):
    from jaxlagrange import _config

    (tmp_path / "springs.py").write_text(source)
    path = tmp_path / "run.toml"
    path.write_text(f'[system]\nfile = "springs.py"\n[initial]\nq = {q}\nqd = {qd}\n')
    return _config.ready_system(_config.load(path))


def test_too_few_coordinates_for_the_lagrangian_are_named(tmp_path):
    from jaxlagrange._config import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"run.toml: \[initial\] q and qd give 1 coordinate\(s\), but the system "
        r"of 'springs.py' reads past them \(.*index 1 is out of bounds.*\)",
    ) as info:
        _user(tmp_path, TWO_SPRINGS, "[0.1]", "[0.0]")
    assert "\n" not in str(info.value)
    ready = _user(tmp_path, TWO_SPRINGS, "[0.1, 0.2]", "[0.0, 0.0]")
    np.testing.assert_allclose(
        jl.accelerations(ready.system, ready.q0, ready.qd0, 0.0), [-0.4, -0.8]
    )


def test_coordinates_the_lagrangian_ignores_are_named(tmp_path):
    from jaxlagrange._config import ConfigError

    with pytest.raises(
        ConfigError,
        match=r"\[initial\] q and qd give 2 coordinate\(s\), but the Lagrangian of "
        r"'springs.py' does not depend on coordinate 1",
    ):
        _user(tmp_path, ONE_SPRING_READ_TWICE, "[0.1, 0.2]", "[0.0, 0.0]")


def test_positions_reading_past_the_coordinates_are_named(tmp_path):
    from jaxlagrange._config import ConfigError

    source = TWO_SPRINGS.replace("[q[1], 1.0]", "[q[2], 1.0]")
    with pytest.raises(
        ConfigError,
        match=r"give 2 coordinate\(s\), but `positions` in 'springs.py' reads past "
        r"them \(.*index 2 is out of bounds",
    ):
        _user(tmp_path, source, "[0.1, 0.2]", "[0.0, 0.0]")


# 18. SystemExit (and the like) in a user's file: one line, exit status 1.

EXITING = """\
import sys
import jaxlagrange as jl
{top}

def make():
    {in_make}

    def lagrangian(q, qd, t):
        {in_lagrangian}
        return 0.5 * qd[0] ** 2 - 0.5 * q[0] ** 2

    return jl.LagrangianSystem(lagrangian)
"""


@pytest.mark.parametrize(
    "where, message",
    [
        ("top", r"\[system\] file 'exiting.py': importing it raised SystemExit: 3"),
        (
            "in_make",
            r"\[system\] file 'exiting.py', function 'make': make\(\) raised "
            r"SystemExit: 3",
        ),
        (
            "in_lagrangian",
            r"SystemExit: 3 raised in .*exiting.py', function 'lagrangian' \(line 9\)",
        ),
    ],
)
def test_system_exit_in_a_user_file(tmp_path, capsys, where, message):
    code = {k: "pass" for k in ("in_make", "in_lagrangian")} | {"top": ""}
    code[where] = "sys.exit(3)"
    (tmp_path / "exiting.py").write_text(EXITING.format(**code))
    config = tmp_path / "run.toml"
    config.write_text(
        '[system]\nfile = "exiting.py"\n[initial]\nq = [0.1]\nqd = [0.0]\n'
        "[simulate]\nt1 = 0.1\nsaves = 2\n"
    )
    out = tmp_path / "out"
    status = main(["run", str(config), "--out", str(out), "--quiet", "--no-plots"])
    err = capsys.readouterr().err
    assert status == 1 and err.count("\n") == 1, err
    assert err.startswith("jaxlagrange run: error: ")
    assert __import__("re").search(message, err), err


# 21. The compilation cache runs what is stored in it: only a cache of our own.


@pytest.fixture
def cache_env(monkeypatch, tmp_path):
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    monkeypatch.delenv("JAXLAGRANGE_CACHE_DIR")
    return monkeypatch


def test_the_cache_directory_is_made_private(cache_env, tmp_path):
    from jaxlagrange._cli._common import cache_directory

    path = cache_directory()
    assert path == tmp_path / "xdg" / "jaxlagrange" / "xla"
    assert path.stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize(
    "damage, message",
    [
        ("dir_mode", r"it is writable by others \(mode 0o777\)"),
        ("dir_owner", r"it belongs to user id 12345, not to you"),
        ("entry_mode", r"its entry 'jit_f-cache' is writable by others"),
        ("entry_owner", r"its entry 'jit_f-cache' belongs to user id 12345"),
    ],
)
def test_a_cache_others_can_write_is_refused(
    cache_env, tmp_path, capsys, damage, message
):
    from jaxlagrange._cli._common import cache_directory

    cache = tmp_path / "shared"
    cache.mkdir(mode=0o700)
    entry = cache / "jit_f-cache"
    entry.write_bytes(b"program")
    entry.chmod(0o644)
    if damage == "dir_mode":
        cache.chmod(0o777)
    elif damage == "entry_mode":
        entry.chmod(0o666)
    elif os.geteuid() != 0:
        pytest.skip("changing an owner needs root")
    elif damage == "dir_owner":
        os.chown(cache, 12345, -1)
    else:
        os.chown(entry, 12345, -1)
    cache_env.setenv("JAXLAGRANGE_CACHE_DIR", str(cache))
    assert cache_directory() is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not using the compilation cache" in err
    assert __import__("re").search(message, err), err
    # A cache of one's own is used.
    os.chown(cache, os.geteuid(), -1)
    os.chown(entry, os.geteuid(), -1)
    cache.chmod(0o700)
    entry.chmod(0o644)
    assert cache_directory() == cache
    assert capsys.readouterr().err == ""


def test_docs_say_the_cache_and_a_system_file_run_code():
    text = (ROOT / "docs" / "cli.md").read_text()
    assert "The cache executes the programs stored in it" in text
    assert "runs that file" in text


def test_a_second_sweep_into_a_busy_directory_is_told_plainly(tmp_path, capsys):
    config = tmp_path / "sweep.toml"
    (tmp_path / "falling.py").write_text(SYSTEM_FILE.format(g=9.81))
    config.write_text(USER_SWEEP.format(num=4))
    out = tmp_path / "out"
    out.mkdir()
    held = ChunkedStore(
        out / "sweep.zarr",
        size=1,
        chunk_size=1,
        inputs={"x": np.ones(1)},
        outputs={"y": ((), np.float64)},
        attrs={},
    )
    try:
        assert main(["sweep", str(config), "--out", str(out), "--quiet"]) == 1
    finally:
        held.close()
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("jaxlagrange sweep: error: The store ")
    assert "is being written by another sweep (process " in err


def test_simulate_sweep_refuses_a_resume_after_the_lagrangian_was_edited(tmp_path):
    def make(source):
        namespace = {"jnp": jnp}
        exec(source, namespace)  # as a script edited between two runs
        return jl.LagrangianSystem(namespace["lagrangian"])

    before = "def lagrangian(q, qd, t):\n    return 0.5 * qd @ qd - 9.81 * q[0]\n"
    after = before.replace("9.81", "19.62")
    kwargs = dict(
        store=tmp_path / "s.zarr", chunk_size=2, progress=False, t1=0.5, saveat=[0.5]
    )
    q0 = np.zeros((4, 1))
    jl.simulate_sweep(make(before), q0, np.zeros(1), **kwargs)
    jl.simulate_sweep(make(before), q0, np.zeros(1), **kwargs)  # the same: resumed
    message = r"holds a different sweep \(it differs in: code, physics\)"
    with pytest.raises(ValueError, match=message):
        jl.simulate_sweep(make(after), q0, np.zeros(1), **kwargs)
    # A module-level constant the Lagrangian reads is part of its code.
    constant = "G = {}\ndef lagrangian(q, qd, t):\n    return 0.5 * qd @ qd - G * q[0]"
    kwargs["store"] = tmp_path / "t.zarr"
    jl.simulate_sweep(make(constant.format(9.81)), q0, np.zeros(1), **kwargs)
    with pytest.raises(ValueError, match=message):
        jl.simulate_sweep(make(constant.format(19.62)), q0, np.zeros(1), **kwargs)


def test_a_fit_into_the_directory_of_its_data_keeps_the_data(tmp_path, capsys):
    # The run's set (trajectory.npz among it) and the fit's are sets of two
    # commands: the fit replaces only a fit's files. Before, the fit removed
    # trajectory.npz, its own input, as a leftover of the previous set.
    config = tmp_path / "run.toml"
    config.write_text('[system]\nname = "pendulum"\n[simulate]\nt1 = 1.0\nsaves = 21\n')
    data = tmp_path / "data"
    assert main(["run", str(config), "--out", str(data), "--quiet"]) == 0
    fit = tmp_path / "fit.toml"
    fit.write_text(
        '[system]\nname = "pendulum"\nparams = { l = 1.5 }\n'
        '[fit]\ndata = "data/trajectory.npz"\ntrainable = ["l"]\n'
    )
    for _ in range(2):  # again: its data are still there
        command = ["fit", str(fit), "--out", str(data), "--quiet", "--no-plots"]
        assert main(command) == 0, capsys.readouterr().err
    names = {p.name for p in data.iterdir()}
    assert {"trajectory.npz", "params.json", "summary.json"} <= names
    assert json.loads((data / "summary.json").read_text())["command"] == "fit"
    # A run again, without figures: its first set's figures go, though the
    # fit's summary had replaced the one that listed them (they stayed, drawn
    # for the first run's motion, beside the new trajectory.npz); the fit's
    # files stay.
    command = ["run", str(config), "--out", str(data), "--quiet", "--no-plots"]
    assert main(command) == 0
    names = {p.name for p in data.iterdir()}
    assert not {"motion.png", "coordinates.png"} & names
    assert {"trajectory.npz", "params.json", "fit.npz", "losses.csv"} <= names


def test_a_hidden_sibling_of_the_output_is_left_alone(tmp_path, capsys):
    # `.out.old` beside `out` is the user's (an earlier version renamed the
    # output aside under that name, and a run merged it back and removed it).
    old = tmp_path / ".out.old"
    old.mkdir()
    (old / "notes.txt").write_text("mine")
    config = tmp_path / "run.toml"
    config.write_text('[system]\nname = "pendulum"\n[simulate]\nt1 = 0.5\n')
    out = tmp_path / "out"
    assert main(["run", str(config), "--out", str(out), "--quiet", "--no-plots"]) == 0
    assert (old / "notes.txt").read_text() == "mine"
    assert not (out / "notes.txt").exists()


def test_a_store_that_lost_an_array_is_refused_before_anything_is_rewritten(
    tmp_path, capsys
):
    # Before, the resume marked every chunk bad, rewrote the manifest with none
    # completed, then failed with KeyError: 'outputs/energy', for good.
    import shutil

    config = tmp_path / "sweep.toml"
    config.write_text(
        '[system]\nname = "pendulum"\n[simulate]\nt1 = 0.5\nsaves = 2\n'
        "[sweep]\nchunk_size = 2\n[sweep.axes]\n"
        '"q[0]" = { min = 0.1, max = 0.4, num = 4 }\n'
    )
    out = tmp_path / "out"
    command = ["sweep", str(config), "--out", str(out), "--quiet", "--no-plots"]
    assert main(command) == 0
    store = out / "sweep.zarr"
    manifest = json.loads((store / "zarr.json").read_text())["attributes"]
    shutil.rmtree(store / "outputs" / "energy")
    assert main(command) == 1
    err = capsys.readouterr().err
    assert "has lost its array 'outputs/energy'" in err and err.count("\n") == 1
    assert json.loads((store / "zarr.json").read_text())["attributes"] == manifest


def test_open_store_on_the_output_directory_points_to_the_store(tmp_path):
    (tmp_path / "out" / "sweep.zarr").mkdir(parents=True)
    (tmp_path / "out" / "sweep.zarr" / "zarr.json").write_text("{}")
    with pytest.raises(
        ValueError, match=r"is not a sweep store: the command line's output"
    ):
        jl.open_store(tmp_path / "out")
    with pytest.raises(ValueError, match=r"is not a sweep store \(a store is a"):
        jl.open_store(tmp_path)


def test_a_ctrl_c_that_python_swallowed_stops_the_outputs(tmp_path):
    # A KeyboardInterrupt raised in a garbage-collection callback (JAX's, during
    # a trace) is "ignored" by Python: the run went on and wrote its outputs,
    # exit 0. The command line's SIGINT handler also sets a flag, which the
    # writing of the outputs checks.
    import gc
    import signal

    from jaxlagrange._cli import _output

    fired, before = [], signal.getsignal(signal.SIGINT)  # (ignored in a nohup job)

    def callback(phase, info):
        if phase == "start" and not fired:
            fired.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            sum(range(10))  # the handler runs here, inside the callback

    with _output.interrupts_kept():
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        assert fired
        with pytest.raises(KeyboardInterrupt):
            _output.write_output_set(tmp_path / "out", {"a.txt": b"a"}, outputs=TXT)
    assert not (tmp_path / "out" / "a.txt").exists()
    assert signal.getsignal(signal.SIGINT) is before  # restored


def test_small_user_errors_name_what_is_wrong(tmp_path, capsys):
    # A config with a byte-order mark runs; a grid too large for memory names
    # [sweep.axes]; a file in the store's place is named (each gave a bare
    # Python error before), and a refused sweep leaves no lock file.
    bom = tmp_path / "bom.toml"
    bom.write_bytes(b"\xef\xbb\xbf" + b'[system]\nname = "pendulum"\n')
    command = ["run", str(bom), "--out", str(tmp_path / "o"), "--quiet", "--no-plots"]
    assert main(command) == 0
    huge = tmp_path / "huge.toml"
    huge.write_text(
        '[system]\nname = "pendulum"\n[sweep.axes]\n'
        '"q[0]" = { min = 0.0, max = 1.0, num = 100000 }\n'
        '"qd[0]" = { min = 0.0, max = 1.0, num = 100000 }\n'
    )
    assert main(["sweep", str(huge), "--out", str(tmp_path / "h"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "[sweep.axes] 10000000000 members would need" in err
    out = tmp_path / "f"
    out.mkdir()
    (out / "sweep.zarr").write_text("x")
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        '[system]\nname = "pendulum"\n[sweep.axes]\n'
        '"q[0]" = { min = 0.0, max = 1.0, num = 2 }\n'
    )
    assert main(["sweep", str(sweep), "--out", str(out), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "sweep.zarr' exists and is not a sweep store" in err
    assert sorted(p.name for p in out.iterdir()) == ["sweep.zarr"]


def test_a_cache_that_cannot_be_made_is_named(cache_env, tmp_path, capsys):
    # JAXLAGRANGE_CACHE_DIR below a file: the run goes on without the cache,
    # and says so (it went on silently).
    from jaxlagrange._cli._common import cache_directory

    (tmp_path / "afile").write_text("")
    cache_env.setenv("JAXLAGRANGE_CACHE_DIR", str(tmp_path / "afile" / "sub"))
    assert cache_directory() is None
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "not using the compilation cache" in err and "cannot be created" in err
