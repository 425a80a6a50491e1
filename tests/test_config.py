"""The strict TOML config layer: every mistake is one line naming the culprit."""

import tomllib
from pathlib import Path

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _config
from jaxlagrange._config import ConfigError


def _load(tmp_path, text):
    path = tmp_path / "run.toml"
    path.write_text(text)
    config = _config.load(path)
    return config, _config.ready_system(config), _config.simulate_kwargs(config)


def test_default_config():
    config = _config.load(None)
    assert config["source"] == "default config"
    assert config["system"] == {
        "name": "double_pendulum",
        "file": None,
        "mujoco": None,
        "function": "make",
        "params": {},
        "options": {},
    }
    ready = _config.ready_system(config)
    assert ready.name == "double_pendulum"
    kwargs = _config.simulate_kwargs(config)
    assert kwargs["t1"] == 20.0 and kwargs["rtol"] == 1e-10
    assert kwargs["saveat"].shape == (2001,)
    assert isinstance(kwargs["solver"], diffrax.Tsit5)


def test_translates_into_the_public_calls(tmp_path):
    config, ready, kwargs = _load(
        tmp_path,
        """
        [system]
        name = "spring_chain"
        params = { k = 2.5 }
        options = { n = 3 }
        [initial]
        q = [0.1, 0, -0.1]
        [simulate]
        t0 = 1
        t1 = 4.0
        saves = 7
        solver = "Dopri8"
        rtol = 1e-9
        atol = 1e-12
        max_steps = 500
        [output]
        dir = "somewhere"
        plots = false
        """,
    )
    expected = jl.systems.make(
        "spring_chain", params={"k": 2.5}, n=3, q0=[0.1, 0.0, -0.1]
    )
    assert ready.coordinates == expected.coordinates
    assert jnp.array_equal(ready.q0, expected.q0)
    assert jnp.array_equal(ready.qd0, jnp.zeros(3))
    assert {k: float(v) for k, v in ready.system.params.items()} == {"k": 2.5, "m": 1.0}
    assert jax.tree_util.tree_all(
        jax.tree_util.tree_map(
            jnp.array_equal, ready.system.params, expected.system.params
        )
    )
    assert isinstance(kwargs.pop("solver"), diffrax.Dopri8)
    assert np.allclose(kwargs.pop("saveat"), np.linspace(1.0, 4.0, 7))
    assert kwargs == dict(t0=1.0, t1=4.0, rtol=1e-9, atol=1e-12, max_steps=500)
    assert config["output"] == {"dir": "somewhere", "plots": False, "animation": True}


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "[sytem]\nname = 'pendulum'",
            r"unknown section \[sytem\]; valid sections: "
            r"\[initial\], \[output\], \[run\], \[simulate\], \[system\]",
        ),
        (
            "[system]\nname = 'pendulum'\nfoo = 1",
            r"unknown key 'foo' in \[system\]; "
            r"valid keys: file, function, mujoco, name, options, params",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nrtool = 1e-6",
            r"unknown key "
            r"'rtool' in \[simulate\]; valid keys: atol, max_steps, rtol, saves, solver",
        ),
        ("system = 3", r"\[system\] must be a table"),
        (
            "[system]\nname = 'pendulm'",
            r"\[system\] name: unknown system 'pendulm'; "
            r"known systems: .*double_pendulum.*",
        ),
        ("[system]\nname = 3", r"\[system\] name: must be a string, got an integer 3"),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nt1 = 'ten'",
            r"\[simulate\] t1: must be a finite number, got a string 'ten'",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nt1 = inf",
            r"\[simulate\] t1: must be a finite number, got a float inf",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nrtol = 0.0",
            r"\[simulate\] rtol: must be > 0, got 0.0",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\natol = -1e-8",
            r"\[simulate\] atol: must be > 0, got -1e-08",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nsaves = 1",
            r"\[simulate\] saves: must be >= 2, got 1",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nsaves = 10.0",
            r"\[simulate\] saves: must be an integer, got a float 10.0",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nsolver = 'RK45'",
            r"\[simulate\] solver: unknown solver 'RK45'; known solvers: Tsit5, Dopri5, ",
        ),
        (
            "[system]\nname = 'pendulum'\n[output]\nplots = 'yes'",
            r"\[output\] plots: must be true or false, got a string 'yes'",
        ),
        (
            "[system]\nname = 'pendulum'\n[initial]\nq = [1, 'a']",
            r"\[initial\] q: must be a list of finite numbers",
        ),
        (
            "[system]\nname = 'pendulum'\nparams = { m = 'heavy' }",
            r"\[system\] params: 'm' must be a number or a list of numbers, got a string",
        ),
        (
            "[system]\nname = 'pendulum'\nparams = 2",
            r"\[system\] params: must be a table",
        ),
    ],
)
def test_check_errors(tmp_path, text, match):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=match) as info:
        _config.load(path)
    message = str(info.value)
    assert message.startswith(str(path) + ": ")
    assert "\n" not in message


@pytest.mark.parametrize(
    "text, match",
    [
        (
            "[system]\nname = 'double_pendulum'\n[initial]\nq = [1.0, 2.0, 3.0]",
            r"\[initial\] q must have 2 entries for system 'double_pendulum' \(θ₁, θ₂\), "
            r"got 3",
        ),
        (
            "[system]\nname = 'pendulum'\n[initial]\nqd = []",
            r"\[initial\] qd must have 1 entries for system 'pendulum' \(θ\), got 0",
        ),
        (
            "[system]\nname = 'pendulum'\nparams = { mass = 2 }",
            r"\[system\] params: Unknown parameter 'mass' for system 'pendulum'; valid "
            r"parameters: g, l, m",
        ),
        (
            "[system]\nname = 'charged_particle'\nparams = { B = [1, 2] }",
            r"\[system\] params: Parameter 'B' of system 'charged_particle' must have "
            r"shape \(3,\), got \(2,\)",
        ),
        (
            "[system]\nname = 'pendulum'\noptions = { n = 3 }",
            r"unknown key 'n' in \[system\] options; valid keys: none",
        ),
        (
            "[system]\nname = 'spring_chain'\noptions = { m = 3 }",
            r"unknown key 'm' in \[system\] options; valid keys: n$",
        ),
        (
            "[system]\nname = 'spring_chain'\noptions = { n = 2.5 }",
            r"\[system\] options n: must be an integer, got a float 2.5",
        ),
        (
            "[system]\nname = 'spring_chain'\noptions = { n = 0 }",
            r"\[system\] options: `n` must be a positive int \(the number of masses\)",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nt0 = 2.0\nt1 = 1.0",
            r"\[simulate\] t1 must be greater than t0, got t0 = 2.0 and t1 = 1.0",
        ),
        (
            "[system]\nname = 'pendulum'\n[simulate]\nt1 = -1.0",
            r"\[simulate\] t1 must be greater than t0, got t0 = 0.0 and t1 = -1.0",
        ),
    ],
)
def test_translation_errors(tmp_path, text, match):
    with pytest.raises(ConfigError, match=match) as info:
        _load(tmp_path, text)
    assert "\n" not in str(info.value)


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"missing.toml: no such config file"):
        _config.load(tmp_path / "missing.toml")
    with pytest.raises(ConfigError, match=r"is a directory, not a config file"):
        _config.load(tmp_path)
    path = tmp_path / "broken.toml"
    path.write_text("[system\nname = 'pendulum'")
    with pytest.raises(ConfigError, match=r"broken.toml: invalid TOML: .*line 1"):
        _config.load(path)
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(ConfigError, match=r"broken.toml: cannot read: .*codec"):
        _config.load(path)


def test_extra_sections_for_other_subcommands(tmp_path):
    schema = {
        **_config.RUN_SCHEMA,
        "fit": {"steps": _config.Key(int, 100, lambda x: None if x > 0 else "> 0")},
    }
    path = tmp_path / "fit.toml"
    path.write_text("[system]\nname = 'pendulum'\n[fit]\nsteps = 7")
    assert _config.load(path, schema)["fit"] == {"steps": 7}
    path.write_text("[system]\nname = 'pendulum'\n[fit]\nstep = 7")
    with pytest.raises(
        ConfigError, match=r"unknown key 'step' in \[fit\]; valid keys: steps"
    ):
        _config.load(path, schema)
    with pytest.raises(ConfigError, match=r"unknown section \[fit\]"):
        _config.load(path)


def _run_configs():
    # The configs of `jaxlagrange run`; other subcommands' configs add sections.
    paths = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.toml"))
    return [
        p for p in paths if set(tomllib.loads(p.read_text())) <= set(_config.RUN_SCHEMA)
    ]


@pytest.mark.parametrize("path", _run_configs(), ids=lambda p: p.name)
def test_example_configs(path):
    config = _config.load(path)
    ready = _config.ready_system(config)
    kwargs = _config.simulate_kwargs(config)
    system = config["system"]
    assert ready.name == (system["name"] or Path(system["file"]).stem)
    assert kwargs["saveat"].shape == (config["simulate"]["saves"],)
