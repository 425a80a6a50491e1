"""Compiled programs reused: a second call traces nothing, a second process
loads XLA's program from the persistent cache (`jaxlagrange/_cache.py`)."""

import os
import subprocess
import sys
import textwrap
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange import _cache


def _counting_pendulum():
    traces = []

    def lagrangian(q, qd, t):
        traces.append(1)  # a Python side effect: runs once per trace
        return 0.5 * qd @ qd + jnp.cos(q[0]) + 0.1 * jnp.cos(q[1] - q[0])

    return jl.LagrangianSystem(lagrangian), traces


class _programs:
    """The programs JAX traces or compiles inside the block (by name), from its
    monitoring events; shape evaluations (equinox's `_fn`) aside."""

    def __enter__(self):
        self.names = []
        jax.monitoring.register_event_duration_secs_listener(self._listen)
        return self.names

    def _listen(self, event, duration, **kwargs):
        if event.endswith(("/jaxpr_trace_duration", "/backend_compile_duration")):
            if kwargs.get("fun_name") != "_fn":
                self.names.append(kwargs.get("fun_name"))

    def __exit__(self, *exc):
        jax.monitoring.unregister_event_duration_listener(self._listen)


def test_a_second_simulate_linearize_and_equilibrium_trace_nothing():
    system, traces = _counting_pendulum()
    q, qd = jnp.array([0.3, 0.1]), jnp.zeros(2)
    q2, qd2 = jnp.array([0.4, 0.2]), jnp.array([0.2, -0.1])
    for call in (
        lambda q, qd: jl.simulate(system, q, qd, t1=0.2),
        lambda q, qd: jl.linearize(system, q, qd),
        lambda q, qd: jl.equilibrium(system, q),
    ):
        with _programs() as first:
            call(q, qd)
        with _programs() as second:
            call(q2, qd2)
        assert first and second == [] and len(traces) > 0


def test_a_contact_model_traces_its_dynamics_few_times():
    # Each trace of L is part of a copy of the dynamics that XLA compiles: a
    # contact model with friction traces it 17 times (one the free fall that
    # judges a lifted row's rise), not 21 as when the impact, the friction
    # switch, each kind of event's settle and each end's event values had a copy
    # of their own (`_hybrid._jump`, `_hybrid._event`).
    traces = []

    def lagrangian(q, qd, t):
        traces.append(1)
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2) + 0.02 * qd[2] ** 2 - 9.81 * q[1]

    system = jl.LagrangianSystem(
        lagrangian,
        unilateral=lambda q, t: q[1:2] - 0.1,
        slip=lambda q, qd, t: qd[:1] + 0.1 * qd[2:],
        friction=0.3,
    )

    def run(q0, qd0):
        return jl.simulate(system, q0, qd0, t1=1.0, max_events=8, throw=False).q

    jax.jit(run).lower(jnp.array([0.0, 0.1, 0.0]), jnp.array([1.0, 0.0, 0.0]))
    assert len(traces) <= 17


def test_a_second_fit_traces_nothing():
    """The same fit with the same callback again: a fresh closure of the callback
    per call was a new static argument, which traced and compiled the solve
    again (seconds to minutes for a loaded model)."""

    def lagrangian(q, qd, t, params):
        return 0.5 * qd @ qd - 0.5 * params["k"] * q @ q

    system = jl.LagrangianSystem(lagrangian, {"k": 2.0})
    ts = jnp.linspace(0.0, 0.5, 11)
    traj = jl.simulate(system, jnp.array([0.3]), jnp.zeros(1), t1=0.5, saveat=ts)
    data = jl.Observations(ts, traj.q, traj.qd, q0=traj.q[0], qd0=traj.qd[0])
    seen = []
    with _programs() as first:
        jl.fit(system, data, params={"k": 1.5}, callback=seen.append)
    with _programs() as second:
        result = jl.fit(system, data, params={"k": 1.5}, callback=seen.append)
    assert "solve_and_decode" in first and second == []
    assert len(seen) > 0 and abs(float(result.params["k"]) - 2.0) < 1e-6


def test_the_cache_is_scoped_to_library_calls(monkeypatch, tmp_path):
    monkeypatch.setenv("JAXLAGRANGE_CACHE_DIR", str(tmp_path / "xla"))
    probe = _cache.cached(lambda: jax.config.jax_compilation_cache_dir)
    assert probe() == str(tmp_path / "xla")
    assert (tmp_path / "xla").stat().st_mode & 0o777 == 0o700
    assert jax.config.jax_compilation_cache_dir is None  # outside: untouched
    monkeypatch.setenv("JAXLAGRANGE_CACHE_DIR", "")
    assert probe() is None  # off
    monkeypatch.setenv("JAXLAGRANGE_CACHE_DIR", str(tmp_path / "xla"))
    with _user_dir(tmp_path):
        assert probe() == str(tmp_path / "mine")  # the user's choice wins


def test_a_long_first_compile_is_announced_once():
    n = _cache.LONG_COMPILE_SIZE
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd - 0.5 * q @ q)
    q = jnp.linspace(0.0, 1.0, n)
    with pytest.warns(UserWarning, match=f"first call for {n} coordinates compiles"):
        jl.accelerations(system, q, q, 0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jl.accelerations(system, q + 1, q, 0.0)  # the same shapes: no note
        jl.accelerations(system, q[:-1], q[:-1], 0.0)  # small: no note


class _user_dir:
    def __init__(self, tmp_path):
        from jax._src import config

        self.context = config.compilation_cache_dir(str(tmp_path / "mine"))

    def __enter__(self):
        self.context.__enter__()

    def __exit__(self, *exc):
        self.context.__exit__(*exc)


_CHILD = textwrap.dedent(
    """
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    import jaxlagrange as jl
    from jaxlagrange import _cache
    _cache.MIN_COMPILE_SECONDS = 0.0
    hits = []
    jax.monitoring.register_event_listener(
        lambda event, **kw: hits.append(event) if event.endswith("cache_hits") else None
    )
    system, q0, qd0 = jl.systems.double_pendulum()
    jl.accelerations(system, q0, qd0, 0.0).block_until_ready()
    print("hits", len(hits))
    """
)


def _in_fresh_process(script: str, tmp_path) -> str:
    """`script`'s output, run in a new process with the cache in `tmp_path`."""
    env = dict(os.environ, JAXLAGRANGE_CACHE_DIR=str(tmp_path / "xla"))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join(
        [os.path.dirname(os.path.dirname(jl.__file__)), env.get("PYTHONPATH", "")]
    )
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_a_second_process_loads_the_compiled_programs(tmp_path):
    def run():
        return int(_in_fresh_process(_CHILD, tmp_path).split()[-1])

    assert run() == 0
    assert any((tmp_path / "xla").iterdir())
    assert run() > 0


# A fresh process's preamble: x64, every program cached whatever its compile time
# (a fast machine compiles these in < 1 s), and `hits` the programs the
# persistent cache served.
_CACHE_HITS = textwrap.dedent(
    """
    import logging
    import jax, jax.numpy as jnp
    jax.config.update("jax_enable_x64", True)
    import jaxlagrange as jl
    from jaxlagrange import _cache
    _cache.MIN_COMPILE_SECONDS = 0.0
    hits = []

    class Hits(logging.Handler):
        def emit(self, record):
            if "cache hit for" in (message := record.getMessage()):
                hits.append(message.split("'")[1])

    logger = logging.getLogger("jax._src.compiler")
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Hits())
    """
)


_SOLVES = _CACHE_HITS + textwrap.dedent(
    """
    ts = jnp.linspace(0.0, 0.5, 6)
    system, q0, qd0 = jl.systems.double_pendulum()
    jl.simulate(system, q0, qd0, t1=0.5, saveat=ts)
    box = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * (qd[0] ** 2 + qd[1] ** 2) + 0.02 * qd[2] ** 2 - 9.81 * q[1],
        unilateral=lambda q, t: q[1:2],
        slip=lambda q, qd, t: qd[:1] + 0.1 * qd[2:],
        friction=0.3,
        restitution=0.5,
    )
    q0, qd0 = jnp.array([0.0, 0.2, 0.0]), jnp.array([1.0, 0.0, 0.0])
    jl.simulate(box, q0, qd0, t1=0.5, saveat=ts, max_events=8)
    print(" ".join(sorted(name for name in hits if name.endswith("_solve"))))
    """
)


def test_a_second_process_loads_the_saving_and_contact_solves(tmp_path):
    # diffrax's checks of the save times and the contact coefficients' checks were
    # host callbacks inside these programs, which JAX's cache does not store: each
    # process compiled a contact model again (minutes for a loaded robot).
    def run():
        return _in_fresh_process(_SOLVES, tmp_path).strip().splitlines()[-1:]

    assert run() == []
    assert run() == ["jit_hybrid_solve jit_smooth_solve"]


def test_a_reloaded_model_traces_nothing_again():
    """Loading the same model again gives equal functions: its simulate (and a
    fit's solve) is not traced and compiled anew; other params are its own."""
    pytest.importorskip("mujoco")
    xml = """<mujoco><worldbody><body><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05" mass="1"/>
      </body></worldbody></mujoco>"""
    first = jl.mujoco.load(xml)
    with _programs() as traced:
        jl.simulate(first.system, first.q0 + 0.3, first.qd0, t1=0.2)
    heavy = jl.mujoco.load(xml, params={"body_mass": jnp.array([0.0, 3.0])})
    with _programs() as again:
        traj = jl.simulate(heavy.system, heavy.q0 + 0.3, heavy.qd0, t1=0.2)
    assert traced and again == [] and heavy.system.lagrangian is first.system.lagrangian
    assert float(heavy.system.params["body_mass"][1]) == 3.0
    assert float(first.system.params["body_mass"][1]) == 1.0
    assert bool(jnp.isfinite(traj.q).all())


_BATCH = _CACHE_HITS + textwrap.dedent(
    """
    system, q0, qd0 = jl.systems.bouncing_ball()
    traj = jl.simulate_batch(
        system, q0, qd0, params={"e": jnp.array([0.5, 0.6, 0.7, 0.8])}, t1=1.0,
        saveat=jnp.linspace(0.0, 1.0, 6), backend="vmap",
    )
    assert traj.q.shape == (4, 6, 1)
    print(" ".join(name for name in hits if name == "jit__run"))
    """
)


def test_a_second_process_loads_a_batchs_solve(tmp_path):
    # The batch's program held host callbacks (diffrax's checks of the save times,
    # the library's of the times and of each member's restitution), and
    # `simulate_batch` did not use the cache: each process compiled it again.
    def run():
        return _in_fresh_process(_BATCH, tmp_path).strip().splitlines()[-1:]

    assert run() == []
    assert run() == ["jit__run"]


def test_a_batch_checks_each_members_slip_where_it_begins():
    # Checked before the batch's program runs (so that it holds no host callback
    # for it): one member whose slip is not affine in q̇ still fails the batch.
    def slip(q, qd, t):
        return qd[:1] + q[:1] * qd[:1] ** 2  # affine in q̇ where q[0] = 0 only

    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 9.81 * q[1],
        unilateral=lambda q, t: q[1:],
        slip=slip,
        friction=0.3,
    )
    q0 = jnp.array([[0.0, 0.5], [0.3, 0.5], [0.0, 0.6]])
    qd0 = jnp.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]])
    for throw in (True, False):
        with pytest.raises(RuntimeError, match="`slip` must be affine in qd"):
            jl.simulate_batch(system, q0, qd0, t1=0.1, backend="vmap", throw=throw)
    # The others fall freely: y = y0 - g t² / 2.
    traj = jl.simulate_batch(system, q0[::2], qd0[::2], t1=0.1, backend="vmap")
    np.testing.assert_allclose(traj.q[:, -1, 1], q0[::2, 1] - 0.5 * 9.81 * 0.01)
