"""Hostile inputs at the command line (the fifth probe, issue 56): model names
that try to choose where files go, what a loaded model leaves out, sweep stores
edited on disk, axis names with spaces, data and labels of the wrong kind."""

import json

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cli
from jaxlagrange._cli._output import file_name


FALLING = """<mujoco model="{name}"><worldbody><geom type="plane" size="1 1 .1"/>
  <body pos="0 0 1"><joint name="drop" type="slide" axis="0 0 1"/>
  <geom name="can" type="cylinder" size=".1 .1"/></body></worldbody></mujoco>"""
# The plane–cylinder pair is a contact jaxlagrange does not import.
MISSING = "contacts of plane–cylinder geoms (geom 0/can)"


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
    assert summary["not_imported"] == [MISSING]
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "UserWarning" not in err
    assert err.startswith("jaxlagrange run: warning: MuJoCo model")
    assert "contacts" in err


def test_not_imported_is_carried_on_the_system_and_trajectory():
    with pytest.warns(UserWarning, match="not imported .*: contacts of plane–cylinder"):
        ready = jl.mujoco.load(FALLING.format(name="ball"))
    assert ready.system.not_imported == (MISSING,)
    traj = jl.simulate(*ready, t1=0.1)
    assert traj.not_imported == (MISSING,)
    batch = jl.simulate_batch(ready.system, ready.q0[None], ready.qd0[None], t1=0.1)
    assert batch.not_imported == (MISSING,)
    pendulum = jl.systems.pendulum()
    assert jl.simulate(*pendulum, t1=0.1).not_imported == ()


def test_not_imported_is_carried_by_every_path_that_builds_a_trajectory(tmp_path):
    # diffrax, the variational integrator, batches on the vmap path and in the
    # fused kernel, and a sweep's members (its observe sees their trajectory).
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0]),
        params={"g": 9.81},
        not_imported=("tendons", "contacts"),
    )
    q0, qd0, missing = jnp.array([0.3]), jnp.zeros(1), ("tendons", "contacts")
    assert jl.simulate(system, q0, qd0, t1=0.1).not_imported == missing
    variational = jl.simulate(
        system, q0, qd0, t1=0.1, dt0=0.05, solver=jl.VariationalMidpoint()
    )
    assert variational.not_imported == missing
    batch = dict(t1=0.1, params={"g": jnp.array([9.0, 10.0])})
    for backend in ("vmap", "kernel"):
        traj = jl.simulate_batch(
            system, q0, qd0, backend=backend, block_size=2, **batch
        )
        assert traj.not_imported == missing, backend
        assert traj.q.shape[0] == 2
    seen = []

    def observe(traj):
        seen.append(traj.not_imported)
        return {"q": traj.q}

    store = tmp_path / "s.zarr"
    jl.simulate_sweep(
        system, q0, qd0, store=store, observe=observe, progress=False, **batch
    )
    assert seen and set(seen) == {missing}
    assert "tendons" in jl.open_store(store).attrs["system"]


def _doubling(inputs, store):
    attrs = {"kind": "doubling"}
    fn = lambda x: {"y": 2 * x["x"]}  # noqa: E731
    return jl.sweep(fn, inputs, store, chunk_size=4, progress=False, attrs=attrs)


def _edited_store(tmp_path, edit):
    """A finished 16-member store, its zarr.json file `edit`ed in place."""
    import jax.numpy as jnp

    store = tmp_path / "s.zarr"
    inputs = {"x": jnp.arange(16.0)}
    _doubling(inputs, store)
    jl.open_store(store)  # sound as written
    meta = store / edit[0] / "zarr.json"
    document = json.loads(meta.read_text())
    edit[1](document)
    meta.write_text(json.dumps(document))
    return store, inputs


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            ("", lambda d: d["attributes"].update(kind="tripling")),
            "its root attribute 'kind' was edited",
        ),
        (("", lambda d: d["attributes"].pop("manifest")), "it has lost its manifest"),
        (
            ("outputs/y", lambda d: d.update(shape=[32])),
            r"its array 'outputs/y' was edited \(shape, dtype, chunks: recorded "
            r"\[\[16\]",
        ),
    ],
)
def test_a_store_whose_description_was_edited_is_refused(tmp_path, edit, message):
    store, inputs = _edited_store(tmp_path, edit)
    with pytest.raises(ValueError, match=f"sweep store '{store}'.*{message}"):
        jl.open_store(store)
    with pytest.raises(ValueError, match=f"sweep store '{store}'.*{message}"):
        _doubling(inputs, store)


def _sweep_config(tmp_path, axes: str):
    from jaxlagrange import _config

    path = tmp_path / "s.toml"
    path.write_text(f'[system]\nname = "pendulum"\n[sweep.axes]\n{axes}')
    config = _config.load(path, _config.SWEEP_SCHEMA)
    return config, _config.ready_system(config)


def test_axis_names_are_read_without_white_space(tmp_path):
    from jaxlagrange import _config

    axes = '"g " = { min = 1.0, max = 2.0, num = 2 }\n'
    axes += '"q [0]" = { min = 0.1, max = 0.2, num = 3 }\n'
    values, shape = _config.sweep_axes(*_sweep_config(tmp_path, axes))
    assert list(values) == ["g", "q[0]"] and shape == (2, 3)
    np.testing.assert_array_equal(values["g"], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0])
    assert _config.axis_input("q[0]") == ("q0", (0,))


def test_two_spellings_of_one_axis_are_refused(tmp_path):
    from jaxlagrange import _config

    axes = '"q[0]" = { min = 0.1, max = 0.2, num = 2 }\n'
    axes += '"q[ 0]" = { min = 0.3, max = 0.4, num = 2 }\n'
    with pytest.raises(
        _config.ConfigError, match=r"axes 'q\[0\]' and 'q\[ 0\]' are both q\[0\]"
    ):
        _config.sweep_axes(*_sweep_config(tmp_path, axes))


def test_a_csv_with_extra_coordinates_is_refused_like_an_npz(tmp_path):
    from jaxlagrange._cli import CLIError, load_observations

    ts = np.linspace(0.0, 1.0, 5)
    rows = np.stack([ts, np.cos(ts), np.sin(ts)], axis=1)
    for suffix in (".csv", ".npz"):
        path = tmp_path / f"d{suffix}"
        if suffix == ".csv":
            np.savetxt(path, rows, delimiter=",", header="t,q0,q1", comments="")
        else:
            np.savez(path, ts=ts, q=rows[:, 1:])
        with pytest.raises(
            CLIError,
            match=rf"d\{suffix}: q has 2 coordinates, but the system has 1 \(θ\)",
        ):
            load_observations(path, 1, None, coordinates=("θ",))
        assert load_observations(path, None, None).q.shape == (5, 2)


def test_a_kept_program_entry_that_is_a_named_pipe_does_not_hang(tmp_path):
    import os
    import signal

    import jax.numpy as jnp

    from jaxlagrange import _programs

    def fn(x):
        return jnp.sin(x)

    x = jnp.arange(3.0)
    with _programs.kept_programs(tmp_path, "context"):
        _programs.call("f", fn, x)
    (entry,) = (tmp_path / "programs").iterdir()
    entry.unlink()
    os.mkfifo(entry)

    def hung(signum, frame):
        raise TimeoutError("reading the named pipe hung")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    try:
        with _programs.kept_programs(tmp_path, "context"):
            out = _programs.call("f", fn, x)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    np.testing.assert_allclose(out, np.sin(np.arange(3.0)), rtol=1e-15)
    assert entry.is_file()  # replaced by the program traced anew


SWING = """\
import jax.numpy as jnp
import jaxlagrange as jl

def make(g=9.81):
    return jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0]),
        params={"g": g},
    )

def positions(q, **params):
    return jnp.stack([jnp.zeros(2), jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])])
"""


@pytest.mark.parametrize(
    "labels, message",
    [
        (
            r'coordinates = ["$\\notacommand$"]',
            r"`coordinates` label '\$\\\\notacommand\$' is not one matplotlib can "
            r"draw: Unknown symbol: \\notacommand",
        ),
        ('length_unit = ["m"]', r"`length_unit` must hold strings, got list \['m'\]"),
        ('units = {"rad": 1}', r"`units` must be a list of labels, one per coordinate"),
        ('point_names = ["pivot", 2]', r"`point_names` must hold strings, got int 2"),
    ],
)
def test_labels_of_a_users_file_are_checked(tmp_path, labels, message):
    from jaxlagrange import _config

    (tmp_path / "swing.py").write_text(SWING + labels + "\n")
    (tmp_path / "c.toml").write_text(
        "[system]\nfile = 'swing.py'\n[initial]\nq = [0.0]\nqd = [0.1]\n"
    )
    where = rf"{tmp_path}/c.toml: \[system\] file 'swing.py', function 'make': "
    with pytest.raises(_config.ConfigError, match=where + message):
        _config.ready_system(_config.load(tmp_path / "c.toml"))


def test_an_unknown_unit_is_none_not_the_text_none(tmp_path):
    from jaxlagrange import _config

    (tmp_path / "swing.py").write_text(SWING + "units = [None]\nlength_unit = None\n")
    (tmp_path / "c.toml").write_text(
        "[system]\nfile = 'swing.py'\n[initial]\nq = [0.0]\nqd = [0.1]\n"
    )
    ready = _config.ready_system(_config.load(tmp_path / "c.toml"))
    assert ready.units == (None,) and ready.length_unit is None


ARM = """<mujoco model="arm"><worldbody>
  <body name="upper"><joint name="shoulder" type="hinge" axis="0 1 0"/>
    <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/>
    <body name="slider" pos="0 0 -1"><joint name="reach" type="slide" axis="0 0 1"/>
      <geom type="sphere" size="0.1"/>
      <body name="ball"><joint name="wrist" type="ball"/>
        <geom type="sphere" size="0.05" pos="0.1 0 0"/></body></body></body>
  </worldbody></mujoco>"""


def test_a_loaded_model_labels_its_figures_from_its_joints():
    ready = jl.mujoco.load(ARM)
    wrist = ("wrist.w", "wrist.x", "wrist.y", "wrist.z")
    assert ready.coordinates == ("shoulder", "reach", *wrist)
    assert ready.units == ("rad", "m", "1", "1", "1", "1")
    joints = ("joint shoulder", "joint reach", "joint wrist")
    assert ready.point_names == ("upper", "slider", "ball", *joints)
    assert ready.length_unit == "m"
    units = dict(ready.param_units)
    assert units["body_mass"] == "kg" and units["gravity"] == "m/s²"
    from jaxlagrange.plotting import _axis_name

    labels = (ready.coordinates, ready.units, units)
    assert _axis_name("body_mass[1]", *labels) == "body_mass[1] [kg]"
    assert _axis_name("qd[1]", *labels) == "dreach/dt [m/s]"


def test_sweep_maps_are_cyclic_only_for_angles():
    from jaxlagrange._cli.sweep import _colour_map

    units = ("rad", "m")
    assert _colour_map("final_q0", units) == "twilight"
    assert _colour_map("final_q1", units) == "viridis"
    assert _colour_map("final_q0", None) == "viridis"
    assert _colour_map("lyapunov", units) == "magma"
