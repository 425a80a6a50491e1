"""Bad arguments are named before anything runs."""

import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import jaxlagrange as jl
import jaxlagrange._validate as validate


PENDULUM, Q0, QD0 = jl.systems.pendulum()


@pytest.mark.no_typecheck  # wrong inputs on purpose
@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(t1="10"), r"`t1` must be a number or an array of numbers, got str '10'"),
        (dict(t1=None), r"`t1` must be a number or an array of numbers, got NoneType"),
        (dict(t1=1.0, t0="0"), r"`t0` must be a number"),
        (dict(t1=1.0, rtol="1e-6"), r"`rtol` must be a number or an array of numbers"),
        (dict(t1=1.0, atol="tight"), r"`atol` must be a number"),
        (dict(t1=1.0, saveat=["a", "b"]), r"`saveat` must be a number"),
        (dict(t1=1.0, dt0="0.1"), r"`dt0` must be a number"),
        (dict(t1=1.0, q0=["a"]), r"`q0` must be a number or an array of numbers"),
        (dict(t1=1.0, qd0=[1j]), r"`qd0` must be real, got dtype complex"),
    ],
)
def test_non_numbers_are_named(kwargs, match):
    q0, qd0 = kwargs.pop("q0", Q0), kwargs.pop("qd0", QD0)
    with pytest.raises(ValueError, match=match):
        jl.simulate(PENDULUM, q0, qd0, **kwargs)


def test_no_coordinates():
    free = jl.LagrangianSystem(lambda q, qd, t: 0.5 * jnp.sum(qd**2))
    with pytest.raises(ValueError, match=r"`q0` must be a 1-D array of at least one"):
        jl.simulate(free, jnp.zeros(0), jnp.zeros(0), t1=1.0)


def test_max_events_zero():
    ball, q0, qd0 = jl.systems.bouncing_ball()
    with pytest.raises(ValueError, match=r"`max_events` must be a positive int"):
        jl.simulate(ball, q0, qd0, t1=2.0, max_events=0)


@pytest.mark.parametrize("e", [1.5, -0.1, [0.5, 2.0]])
def test_restitution_outside_unit_interval(e):
    with pytest.raises(ValueError, match=r"`restitution` must lie in \[0, 1\]"):
        jl.LagrangianSystem(
            lambda q, qd, t: 0.5 * jnp.sum(qd**2),
            unilateral=lambda q, t: q,
            restitution=e,
        )


def test_with_params_converts_and_checks_as_the_constructor():
    def lagrangian(q, qd, t, params):
        return 0.5 * params["m"] * jnp.sum(qd**2)

    ball = jl.LagrangianSystem(
        lagrangian, {"m": 1.0, "e": 0.5}, unilateral=lambda q, t, p: q, restitution="e"
    )
    heavier = ball.with_params({"m": 2, "e": 0.25})
    assert isinstance(heavier.params["m"], jax.Array)  # a differentiable leaf
    assert float(heavier.coefficient("restitution")) == 0.25
    assert float(ball.params["m"]) == 1.0  # unchanged
    with pytest.raises(ValueError, match=r"`restitution` must lie in \[0, 1\]"):
        ball.with_params({"m": 1.0, "e": 1.5})
    with pytest.raises(ValueError, match=r"names the param 'e', which the system's"):
        ball.with_params({"m": 1.0})
    # Traced values are left to the solves that read them.
    bouncy = jax.jit(lambda e: ball.with_params({"m": 1.0, "e": e}).params["e"])
    assert float(bouncy(1.5)) == 1.5
    # Also where there were no params.
    free = jl.LagrangianSystem(lambda q, qd, t: 0.5 * jnp.sum(qd**2))
    assert float(free.with_params({"k": 3.0}).params["k"]) == 3.0


@pytest.mark.parametrize("value", [1j, 1])
def test_lagrangian_must_be_real_floating(value):
    bad = jl.LagrangianSystem(lambda q, qd, t: value * jnp.sum(qd**2).astype(int))
    with pytest.raises(ValueError, match=r"`lagrangian` must return a real floating"):
        jl.accelerations(bad, jnp.ones(1), jnp.ones(1), 0.0)


def test_float32_tolerance_below_precision():
    q0, qd0 = Q0.astype(jnp.float32), QD0.astype(jnp.float32)
    with pytest.raises(
        ValueError,
        match=r"`rtol` = 1e-12 is below the precision of "
        r"float32 .* enable float64",
    ):
        jl.simulate(PENDULUM, q0, qd0, t1=1.0, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match=r"below the precision of float64"):
        jl.simulate(PENDULUM, Q0, QD0, t1=1.0, rtol=1e-16)


def test_output_larger_than_memory(monkeypatch, tmp_path, capsys):
    # The command line refuses save arrays that cannot fit in memory (XLA would
    # abort); `simulate` keeps its own bounds only, and probes no memory limits
    # on each call.
    from jaxlagrange._cli import main

    monkeypatch.setattr(validate, "physical_memory", lambda: 2**20)
    config = tmp_path / "big.toml"
    config.write_text('[system]\nname = "pendulum"\n[simulate]\nt1 = 1.0\nsaves = 100000\n')
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "saves = 100000 is too many" in err and "more than this machine's" in err
    monkeypatch.setattr(validate, "memory_limits", lambda: pytest.fail("probed"))
    jl.simulate(PENDULUM, Q0, QD0, t1=1.0, saveat=jnp.linspace(0, 1, 100_000))


@pytest.mark.parametrize(
    "name, params, match",
    [
        (
            "pendulum",
            {"l": -1.0},
            r"Parameter 'l' of system 'pendulum' must be positive",
        ),
        ("double_pendulum", {"m2": 0.0}, r"Parameter 'm2' .* must be positive"),
        ("bouncing_ball", {"e": 1.2}, r"Parameter 'e' .* must lie in \[0, 1\]"),
        ("spring_chain", {"k": -2.0}, r"Parameter 'k' .* must be positive"),
    ],
)
def test_ready_systems_refuse_unphysical_params(name, params, match):
    with pytest.raises(ValueError, match=match):
        jl.systems.make(name, params=params)


# Non-finite results at a finite state are named by the function that made them.


def _root_lagrangian(q, qd, t):
    return 0.5 * qd @ qd - jnp.sqrt(q[0])  # not finite for q < 0


def test_non_finite_accelerations_at_a_finite_state():
    system = jl.LagrangianSystem(_root_lagrangian)
    q, qd = jnp.array([-1.0]), jnp.array([0.0])
    for fn in (jl.accelerations, eqx.filter_jit(jl.accelerations)):
        with pytest.raises(eqx.EquinoxRuntimeError, match="jl.accelerations is not"):
            fn(system, q, qd, 0.0)
    with pytest.raises(eqx.EquinoxRuntimeError, match="jl.energy is not finite"):
        eqx.filter_jit(jl.energy)(system, q, qd, 0.0)
    with pytest.raises(eqx.EquinoxRuntimeError, match="contains a non-finite value"):
        jl.energy(system, jnp.array([jnp.nan]), qd, 0.0)
    # Where it is finite, nothing is in the way.
    assert jnp.isfinite(jl.energy(system, jnp.array([1.0]), qd, 0.0))


def test_non_finite_momenta_and_mass_matrix_are_named():
    # M = √q is not finite for q < 0; p = √q q̇ with it. Like `energy`, the two
    # name a non-finite state and a non-finite result at a finite state.
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * jnp.sqrt(q[0]) * qd[0] ** 2)
    qd = jnp.array([1.0])
    for name in ("momenta", "mass_matrix"):
        fn = getattr(jl, name)
        for call in (fn, eqx.filter_jit(fn)):
            with pytest.raises(eqx.EquinoxRuntimeError, match=f"jl.{name} is not"):
                call(system, jnp.array([-1.0]), qd, 0.0)
            with pytest.raises(
                eqx.EquinoxRuntimeError, match="contains a non-finite value"
            ):
                call(system, jnp.array([jnp.nan]), qd, 0.0)
        assert jnp.all(jnp.isfinite(fn(system, jnp.array([4.0]), qd, 0.0)))


def test_garbage_data_file_is_named(tmp_path):
    from jaxlagrange._cli import CLIError, load_observations

    path = tmp_path / "data.npz"
    path.write_bytes(b"certainly not a NumPy archive")
    with pytest.raises(CLIError, match=r"data.npz: not a valid data file \(not a"):
        load_observations(path, 1, None)


def test_corrupted_store_metadata_is_named(tmp_path):
    xs = jnp.linspace(0.0, 1.0, 4)
    jl.sweep(lambda x: {"y": 2 * x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    (tmp_path / "s" / "zarr.json").write_text('{"zarr_format": 3, "attrib')
    with pytest.raises(
        ValueError, match=r"zarr.json' \(with its manifest\) is corrupt"
    ):
        jl.sweep(lambda x: {"y": 2 * x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    with pytest.raises(ValueError, match=r"remove the store directory"):
        jl.open_store(tmp_path / "s")


def test_a_second_writer_is_refused_while_the_first_runs(tmp_path):
    import os

    from jaxlagrange._ensemble._store import _acquire

    xs = jnp.linspace(0.0, 1.0, 4)
    held = _acquire(tmp_path / "s")  # another sweep holding the store
    try:
        with pytest.raises(
            ValueError,
            match=r"is being written by another sweep "
            rf"\(process {os.getpid()}@",
        ):
            jl.sweep(lambda x: {"y": x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    finally:
        os.close(held)
    group = jl.sweep(lambda x: {"y": x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    assert jnp.allclose(group["outputs/y"][:], xs)


def test_interrupted_creation_leaves_no_store(tmp_path, monkeypatch):
    import jaxlagrange._ensemble._store as store

    xs = jnp.linspace(0.0, 1.0, 4)

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(store.os, "rename", interrupted)
    with pytest.raises(KeyboardInterrupt):
        jl.sweep(lambda x: {"y": x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    assert not (tmp_path / "s" / "zarr.json").exists()
    monkeypatch.undo()
    # The rerun creates it anew (over the leftover staging directory).
    group = jl.sweep(lambda x: {"y": x["x"]}, {"x": xs}, tmp_path / "s", progress=False)
    assert jnp.allclose(group["outputs/y"][:], xs)
    assert not (tmp_path / ".s.creating").exists()


@pytest.mark.parametrize("damage", ["delete", "truncate", "flip"])
def test_damaged_chunks_are_named_and_recomputed(tmp_path, damage, capsys):
    xs = jnp.linspace(0.0, 1.0, 6)

    def run():
        return jl.sweep(
            lambda x: {"y": 3 * x["x"]},
            {"x": xs},
            tmp_path / "s",
            chunk_size=2,
            progress=False,
        )

    run()
    chunk = sorted((tmp_path / "s" / "outputs" / "y").rglob("1"))[-1]
    data = chunk.read_bytes()
    if damage == "delete":
        chunk.unlink()
    elif damage == "truncate":
        chunk.write_bytes(data[: len(data) // 2])
    else:
        chunk.write_bytes(data[:-1] + bytes([data[-1] ^ 0xFF]))
    with pytest.raises(
        ValueError,
        match=r"1 chunk\(s\) that are missing, truncated "
        r"or altered on disk: \[1\]",
    ):
        jl.open_store(tmp_path / "s")
    group = run()  # the resume recomputes it, and says so
    assert (
        "failed their checksum and are computed again: [1]" in capsys.readouterr().err
    )
    assert jnp.allclose(group["outputs/y"][:], 3 * xs)


def test_neural_lagrangian_features_must_give_a_vector():
    with pytest.raises(
        ValueError,
        match=r"`features` must return a 1-D array for q of shape \(2,\), but it "
        r"returned shape \(2, 2\)\.",
    ):
        jl.neural_lagrangian(
            2, key=jax.random.key(0), features=lambda q: jnp.outer(q, q)
        )
