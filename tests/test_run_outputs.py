"""`jaxlagrange run`'s outputs: the result first, figures that name and pace things."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import jaxlagrange as jl
from jaxlagrange import _cli


ROOT = Path(__file__).resolve().parents[1]


pytest.importorskip("matplotlib")

TS = np.linspace(0.0, 10.0, 201)


def test_units_on_the_axes():
    q = np.stack([np.sin(TS), np.cos(TS)], axis=1)
    fig = jl.plotting.coordinates(TS, q, ("θ₁", "θ₂"), units=("rad", "rad"))
    ax = fig.axes[0]
    assert ax.get_ylabel() == "coordinate [rad]" and ax.get_xlabel() == "time t [s]"
    # Different units go beside each name.
    fig = jl.plotting.coordinates(TS, q, ("r", "θ"), units=("m", "rad"))
    texts = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert texts == ["r [m]", "θ [rad]"]
    fig = jl.plotting.phase_portrait(q, q, ("r", "θ"), units=("m", "rad"), ts=TS)
    assert fig.axes[1].get_xlabel() == "θ [rad]"
    assert fig.axes[1].get_ylabel() == "dθ/dt [rad/s]"
    with pytest.raises(ValueError, match=r"`units` must have one entry per coordinate"):
        jl.plotting.coordinates(TS, q, units=("m",))
    # Every ready system has a unit per coordinate and a name per drawn point.
    assert jl.systems.double_pendulum().units == ("rad", "rad")
    assert jl.systems.mass_on_sphere().units == ("m", "rad")
    for name in jl.systems.names():
        ready = jl.systems.make(name)
        assert len(ready.units) == len(ready.coordinates), name
        assert len(ready.point_names) == ready.positions(ready.q0).shape[0], name
    chain = jl.systems.spring_chain(n=3)
    assert chain.units == ("m",) * 3 and chain.point_names[1:-1] == (
        "mass 1",
        "mass 2",
        "mass 3",
    )
    assert jl.systems.cavity(modes=2).units == ("m", "√kg m", "√kg m")


def test_energy_time_sweep_and_fit_labels_have_units():
    energies = 16.024 + 1e-9 * TS
    ax = jl.plotting.energy(TS, energies, unit="J").axes[0]
    assert ax.get_xlabel() == "time t [s]" and "E(0) = 16.024 J" in ax.get_title()
    ax = jl.plotting.energy(TS, energies - 16.024, unit="J").axes[0]
    assert ax.get_ylabel() == "|E(t) − E(0)| [J]"
    ax = jl.plotting.energy(TS, energies, conserved=False, unit="J").axes[0]
    assert ax.get_ylabel() == "energy E(t) [J]"
    assert jl.plotting.energy(TS, energies).axes[0].get_xlabel() == "time t"
    # Sweep maps name the swept coordinates, velocities too.
    a, b = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(0, 1, 3), indexing="ij")
    fig = jl.plotting.sweep_map(
        {"q[0]": a.ravel(), "qd[1]": b.ravel()},
        a.ravel() * b.ravel(),
        grid_shape=a.shape,
        label="λ [1/s]",
        coordinates=("θ₁", "θ₂"),
        units=("rad", "rad"),
    )
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("θ₁ [rad]", "dθ₂/dt [rad/s]")
    assert fig.axes[1].get_ylabel() == "λ [1/s]"
    # The fit's residuals have units and a ±σ band (given, or their own spread).
    q = np.sin(TS)[:, None]
    noise = 0.01 * np.random.default_rng(0).standard_normal(q.shape)
    fig = jl.plotting.fit_comparison(
        TS, q + noise, q, ("θ",), units=("rad",), sigma=0.01
    )
    data, residuals = fig.axes[0], fig.axes[1]
    assert data.get_ylabel() == "θ [rad]" and residuals.get_ylabel() == "residual [rad]"
    assert residuals.get_xlabel() == "time t [s]"
    band = residuals.patches[0]
    assert np.allclose([band.get_y(), band.get_height()], [-0.01, 0.02])
    assert residuals.get_legend().get_texts()[0].get_text() == "±σ (noise)"
    fig = jl.plotting.fit_comparison(TS, q + noise, q, ("θ",))
    band = fig.axes[1].patches[0]
    assert np.isclose(band.get_height(), 2 * np.std(noise))


def test_motion_has_a_legend():
    ready = jl.systems.double_pendulum()
    q = np.stack([np.sin(TS), np.cos(TS)], axis=1)
    fig = jl.plotting.motion(ready.positions(q), unit="m")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.get_legend().get_texts()]
    # The pivot does not move: it has no path in the legend.
    assert texts == [
        "path of point 2",
        "path of point 3",
        "first configuration",
        "last configuration",
    ]
    assert ax.get_xlabel() == "x [m]"
    fig = jl.plotting.motion(ready.positions(q), names=["pivot", "bob 1", "bob 2"])
    assert fig.axes[0].get_legend().get_texts()[0].get_text() == "path of bob 1"
    with pytest.raises(ValueError, match=r"no finite configuration"):
        jl.plotting.motion(np.full((3, 2, 2), np.nan))


def _gif(ts, **kwargs):
    positions = np.stack([np.zeros_like(ts), np.sin(ts)], axis=1)[:, None, :]
    positions = np.concatenate([np.zeros_like(positions), positions], axis=1)
    return Image.open(io.BytesIO(jl.plotting.animation(ts, positions, **kwargs)))


def test_gif_plays_at_the_motion_pace():
    # 2 s of motion: 2 s of GIF at 20 frames per second, 41 frames of 400 px.
    image = _gif(np.linspace(0.0, 2.0, 401))
    assert image.n_frames == 41 and image.info["duration"] == 50
    assert image.size == (400, 400)
    # 40 s of motion: sped up to fit 10 s, and the title says so.
    ts = np.linspace(0.0, 40.0, 801)
    image = _gif(ts)
    assert image.n_frames == 201
    positions = np.zeros((801, 2, 2))
    positions[:, 1, 1] = np.sin(ts)
    # The title is drawn once, in the background: find it through the figure.
    import matplotlib.text

    seen = []
    draw = matplotlib.text.Text.draw

    def spy(self, renderer):
        seen.append(self.get_text())
        return draw(self, renderer)

    matplotlib.text.Text.draw = spy
    try:
        jl.plotting.animation(ts, positions, title="m")
    finally:
        matplotlib.text.Text.draw = draw
    assert "m (4× speed)" in seen
    with pytest.raises(ValueError, match=r"`max_seconds` must be positive"):
        _gif(ts, max_seconds=0.0)


USER_FILE = """\
import jax.numpy as jnp
import jaxlagrange as jl

def make(g=9.81):
    return jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0]),
        params={"g": g},
    )

def positions(q, **params):
    bob = jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])
    # NaN once the bob passes below the pivot's right: a broken user function.
    return jnp.stack([jnp.zeros(2), jnp.where(q[0] > 0.5, jnp.nan, bob)])
"""


def test_nan_positions_keep_the_trajectory(tmp_path, capsys):
    (tmp_path / "swing.py").write_text(USER_FILE)
    (tmp_path / "swing.toml").write_text(
        "[system]\nfile = 'swing.py'\nfunction = 'make'\n"
        "[initial]\nq = [0.0]\nqd = [3.0]\n[simulate]\nt1 = 2.0\nsaves = 101\n"
    )
    out = tmp_path / "out"
    status = _cli.main(["run", str(tmp_path / "swing.toml"), "--out", str(out)])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert (
        "jaxlagrange run: warning: positions of 'swing' returned a non-finite value "
        "(NaN or inf) at t = " in captured.err
    )
    assert "motion.png and motion.gif are not drawn" in captured.err
    names = {p.name for p in out.iterdir()}
    assert names == {
        "trajectory.npz",
        "summary.json",
        "coordinates.png",
        "phase.png",
        "energy.png",
    }
    assert set(json.loads((out / "summary.json").read_text())["files"]) == names
    with np.load(out / "trajectory.npz") as data:
        assert data["q"].shape == (101, 1) and np.all(np.isfinite(data["q"]))


def test_the_result_comes_before_the_figures(tmp_path, capsys, monkeypatch):
    out = tmp_path / "out"
    (tmp_path / "p.toml").write_text(
        "[system]\nname = 'pendulum'\n[simulate]\nt1 = 1.0\nsaves = 11\n"
    )
    seen = {}
    coordinates = jl.plotting.coordinates

    def spy(*args, **kwargs):
        seen["files"] = sorted(p.name for p in out.iterdir())
        seen["stdout"] = capsys.readouterr().out
        return coordinates(*args, **kwargs)

    monkeypatch.setattr(jl.plotting, "coordinates", spy)
    assert _cli.main(["run", str(tmp_path / "p.toml"), "--out", str(out)]) == 0
    assert seen["files"] == ["summary.json", "trajectory.npz"]
    assert "steps in" in seen["stdout"] and "wrote" in seen["stdout"]
    summary = json.loads((out / "summary.json").read_text())
    assert "motion.gif" in summary["files"] and summary["wall_time_s"]["figures"] > 0
    assert "figures in" in capsys.readouterr().out


class _Device:
    def __init__(self, platform, id):
        self.platform, self.id = platform, id


def _machine(gpus: int):
    devices = {
        "cpu": [_Device("cpu", 0)],
        "gpu": [_Device("gpu", i) for i in range(gpus)],
    }
    return lambda platform: devices[platform]


def test_device_choice():
    from jaxlagrange._cli._common import choose_devices, device_name, on_the_cpu

    gpu_machine, cpu_machine = _machine(2), _machine(0)
    assert on_the_cpu("auto", batched=False) and on_the_cpu("cpu", batched=True)
    assert not on_the_cpu("auto", batched=True) and not on_the_cpu("gpu", batched=False)
    # auto: one trajectory or a fit on the CPU, a sweep on every GPU.
    for machine in (gpu_machine, cpu_machine):
        (device,) = choose_devices("auto", batched=False, available=machine)
        assert device.platform == "cpu"
    sweep = choose_devices("auto", batched=True, available=gpu_machine)
    assert [d.platform for d in sweep] == ["gpu", "gpu"] and device_name(
        sweep
    ) == "2 × gpu"
    assert (
        choose_devices("auto", batched=True, available=cpu_machine)[0].platform == "cpu"
    )
    # Forced.
    assert (
        choose_devices("gpu", batched=False, available=gpu_machine)[0].platform == "gpu"
    )
    assert (
        choose_devices("cpu", batched=True, available=gpu_machine)[0].platform == "cpu"
    )
    with pytest.raises(_cli.CLIError, match=r"--device gpu .*JAX sees no GPU"):
        choose_devices("gpu", batched=True, available=cpu_machine)

    # JAX_PLATFORMS=cuda on a GPU machine: no CPU backend, so auto computes a
    # run on the GPU, and --device cpu is refused.
    def gpus_only(platform):
        return [] if platform == "cpu" else gpu_machine(platform)

    assert [
        d.platform for d in choose_devices("auto", batched=False, available=gpus_only)
    ] == ["gpu"]
    with pytest.raises(_cli.CLIError, match=r"--device cpu .*JAX has no CPU backend"):
        choose_devices("cpu", batched=False, available=gpus_only)


def test_platforms_jax_cannot_start_are_named(monkeypatch):
    # JAX_PLATFORMS=cuda on a machine without CUDA: JAX raises a bare
    # AssertionError; the command names JAX_PLATFORMS.
    import jax

    from jaxlagrange._cli._common import check_backends

    def fail():
        raise AssertionError

    monkeypatch.setattr(jax, "devices", fail)
    platforms = jax.config.jax_platforms
    jax.config.update("jax_platforms", "cuda")  # (read only at JAX's start)
    try:
        with pytest.raises(
            _cli.CLIError,
            match=r"JAX could not start the platforms JAX_PLATFORMS='cuda' names\. "
            r"Unset JAX_PLATFORMS, or name one this machine has, such as cpu$",
        ):
            check_backends()
    finally:
        jax.config.update("jax_platforms", platforms)
    env = {**os.environ, "JAX_PLATFORMS": "bogus", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-m", "jaxlagrange", "--no-cache", "run", "--no-plots"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1
    assert (
        "jaxlagrange run: error: JAX could not start the platforms "
        "JAX_PLATFORMS='bogus' names: Unable to initialize backend 'bogus'"
    ) in proc.stderr


_ONLY_THE_CPU = """
import jax
from jax._src.xla_bridge import backends_are_initialized
from jaxlagrange._cli._common import start_only_the_cpu
assert not backends_are_initialized()
print(start_only_the_cpu(), jax.config.jax_platforms)
print([d.platform for d in jax.devices()])
print(start_only_the_cpu())  # started already: left alone
"""


@pytest.mark.parametrize("platforms", [None, "cpu"])
def test_a_cpu_command_starts_only_the_cpu_backend(platforms):
    # On a GPU machine JAX would start CUDA too for a run on the CPU. The
    # user's own JAX_PLATFORMS is left as it is.
    env = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    if platforms is not None:
        env["JAX_PLATFORMS"] = platforms
    proc = subprocess.run(
        [sys.executable, "-c", _ONLY_THE_CPU],
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        check=True,
    )
    started = "True" if platforms is None else "False"
    assert proc.stdout.splitlines() == [f"{started} cpu", "['cpu']", "False"]


def test_each_command_starts_only_what_it_uses(monkeypatch, capsys):
    # run and fit compute on the CPU unless told otherwise; a sweep (batched)
    # or --device gpu leaves JAX to start what it has.
    from jaxlagrange._cli import _common

    calls = []

    def choose(requested, batched):
        calls.append((requested, batched))
        raise _cli.CLIError("recorded")  # no need to go on

    monkeypatch.setattr(_common, "start_only_the_cpu", lambda: calls.append("cpu"))
    monkeypatch.setattr(_common, "choose_devices", choose)
    configs = ROOT / "configs"
    commands = [
        ["run", str(configs / "pendulum.toml")],
        ["run", str(configs / "pendulum.toml"), "--device", "gpu"],
        ["fit", str(configs / "fit_pendulum.toml"), "--device", "cpu"],
        ["sweep", str(configs / "sweep_double_pendulum.toml")],
    ]
    for command in commands:
        assert _cli.main(["--no-cache", *command]) == 1
        assert "error: recorded" in capsys.readouterr().err
    assert calls == [
        "cpu",
        ("auto", False),
        ("gpu", False),
        "cpu",
        ("cpu", False),
        ("auto", True),
    ]


def test_device_option(tmp_path, capsys):
    import jax

    (tmp_path / "p.toml").write_text(
        "[system]\nname = 'pendulum'\n[simulate]\nt1 = 1.0\nsaves = 11\n"
        "[run]\ndevice = 'cpu'\n"
    )
    out = tmp_path / "out"
    assert (
        _cli.main(["run", str(tmp_path / "p.toml"), "--out", str(out), "--no-plots"])
        == 0
    )
    assert "on cpu" in capsys.readouterr().out
    assert json.loads((out / "summary.json").read_text())["device"] == "cpu"
    if not any(d.platform == "gpu" for d in jax.devices()):
        status = _cli.main(["run", str(tmp_path / "p.toml"), "--device", "gpu"])
        assert status == 1 and "JAX sees no GPU" in capsys.readouterr().err
    (tmp_path / "bad.toml").write_text(
        "[system]\nname = 'pendulum'\n[run]\ndevice = 'tpu'\n"
    )
    assert _cli.main(["run", str(tmp_path / "bad.toml")]) == 1
    assert (
        "[run] device: must be one of auto, cpu, gpu, got 'tpu'"
        in capsys.readouterr().err
    )


_IMPORTS_OFF_MAIN = """
import sys, threading
off_main = []

def hook(event, args):
    if event == "import" and threading.current_thread() is not threading.main_thread():
        off_main.append(args[0])

sys.addaudithook(hook)
from jaxlagrange._cli import main
assert main(["--no-cache", "run", sys.argv[1], "--out", sys.argv[2], "--quiet"]) == 0
print(sorted(set(off_main)))
"""


def test_run_imports_nothing_off_the_main_thread(tmp_path):
    # A second thread importing matplotlib beside the solve once hung a run for
    # good (an extension loaded by each thread: the dynamic loader's lock
    # against the GIL). The GIF's worker is a process; its pipe thread imports
    # nothing.
    config = tmp_path / "p.toml"
    config.write_text("[system]\nname = 'pendulum'\n[simulate]\nt1 = 1.0\n")
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORTS_OFF_MAIN, str(config), str(tmp_path / "o")],
        env={**os.environ, "PYTHONPATH": str(ROOT), "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == "[]"
    assert (tmp_path / "o" / "motion.gif").exists()


def test_gif_worker_draws_what_plotting_draws(monkeypatch):
    from jaxlagrange._cli import _gif_worker

    ts = np.linspace(0.0, 1.0, 51)
    positions = np.stack([np.zeros_like(ts), np.sin(ts)], axis=1)[:, None, :]
    positions = np.concatenate([np.zeros_like(positions), positions], axis=1)
    worker = _gif_worker.GifWorker()
    worker.start(ts, positions, title="swing")
    assert worker.result() == jl.plotting.animation(ts, positions, title="swing")
    # A worker given nothing to do ends when closed.
    idle = _gif_worker.GifWorker()
    idle.close()
    assert idle._proc.returncode == 0
    # A failing worker says so, and the caller draws in process.
    monkeypatch.setattr(_gif_worker, "_SCRIPT", "import sys; sys.exit(3)")
    broken = _gif_worker.GifWorker()
    broken.start(ts, positions)
    assert broken.result() is None


def test_output_into_a_closed_pipe_is_not_an_error():
    # `jaxlagrange systems | head -1`: a BrokenPipeError, exit 1 (and in `run`
    # the figures, drawn after the summary line, were lost).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [
            "bash",
            "-c",
            f"set -o pipefail; {sys.executable} -m jaxlagrange systems | head -1",
        ],
        env=env,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("bouncing_ball") and proc.stderr == ""


@pytest.mark.parametrize(
    "system, t1, conserved",
    [
        ("mass_on_sphere", 0.5, True),  # no impact (e < 1, but none happens)
        ("bouncing_ball", 1.0, False),  # inelastic impacts: energy is lost
    ],
)
def test_energy_is_conserved_unless_something_takes_it(tmp_path, system, t1, conserved):
    # It was "not conserved" whenever restitution < 1, impact or none; and a
    # contact with friction counted as conserving.
    config = tmp_path / "c.toml"
    config.write_text(f'[system]\nname = "{system}"\n[simulate]\nt1 = {t1}\n')
    out = tmp_path / "out"
    assert _cli.main(["run", str(config), "--out", str(out), "--no-plots"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["energy"]["conserved"] is conserved
    from jaxlagrange._cli.run import _conserved

    rough = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 9.81 * q[1],
        unilateral=lambda q, t: q[1:],
        slip=lambda q, qd, t: qd[:1],
        friction=0.3,
        restitution=1.0,
    )
    traj = jl.simulate(rough, jnp.zeros(2), jnp.array([1.0, 0.0]), t1=0.1)
    assert not _conserved(rough, True, traj)


def test_a_user_file_declares_units_and_point_names(tmp_path):
    from jaxlagrange import _config
    from jaxlagrange._config import ConfigError

    labels = 'units = ["rad"]\npoint_names = ["pivot", "bob"]\nlength_unit = "m"\n'
    (tmp_path / "swing.py").write_text(USER_FILE + labels)
    (tmp_path / "swing.toml").write_text(
        "[system]\nfile = 'swing.py'\n[initial]\nq = [0.0]\nqd = [0.1]\n"
    )
    ready = _config.ready_system(_config.load(tmp_path / "swing.toml"))
    assert (ready.units, ready.point_names, ready.length_unit) == (
        ("rad",),
        ("pivot", "bob"),
        "m",
    )
    (tmp_path / "swing.py").write_text(USER_FILE + 'units = ["rad", "m"]\n')
    with pytest.raises(ConfigError, match=r"`units` has 2 labels for 1 coordinates"):
        _config.ready_system(_config.load(tmp_path / "swing.toml"))
    (tmp_path / "swing.py").write_text(USER_FILE + 'point_names = ["bob"]\n')
    with pytest.raises(ConfigError, match=r"`point_names` has 1 labels for 2 points"):
        _config.ready_system(_config.load(tmp_path / "swing.toml"))
    (tmp_path / "swing.py").write_text(USER_FILE + 'units = "rad"\n')
    with pytest.raises(ConfigError, match=r"`units` must be a list of labels, one per"):
        _config.ready_system(_config.load(tmp_path / "swing.toml"))
