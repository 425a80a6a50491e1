"""What `simulate` hands its solves: the options object and the vector field's args."""

import dataclasses

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import counting

import jaxlagrange as jl
from jaxlagrange import _segment
from jaxlagrange._options import CheckedOptions
from jaxlagrange._projection import ProjectedSolver, VectorFieldArgs
from jaxlagrange._segment import _vector_field


def _rod(y):
    system, _, _ = jl.systems.cartesian_pendulum()
    n = y.shape[0] // 2
    return system.holonomic(y[:n], 0.0, system.params)[0]


def _one_step(solver, term, y0, args, dt=0.1):
    t0, t1 = jnp.array(0.0), jnp.array(dt)
    state = solver.init(term, t0, t1, y0, args)
    return solver.step(term, t0, t1, y0, args, state, False)[0]


def test_projected_step_projects_the_motion_only():
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    # Moving along the rod's tangent at (sin 1, −cos 1).
    y0 = jnp.concatenate([q0, jnp.array([jnp.cos(1.0), jnp.sin(1.0)])])
    term = diffrax.ODETerm(_vector_field)
    args = VectorFieldArgs(system)
    free = _one_step(diffrax.Tsit5(), term, y0, args)
    projected = _one_step(ProjectedSolver(diffrax.Tsit5()), term, y0, args)
    # One Tsit5 step of 0.1 drifts off g = 0; the projection ends on it.
    assert abs(_rod(free)) > 1e-9
    assert abs(_rod(projected)) < 1e-13
    np.testing.assert_allclose(projected, free, atol=1e-5)
    # The backward solve of BacksolveAdjoint (these args, an augmented tuple
    # state) and a solve with other args are not the motion: the inner step.
    negate = diffrax.ODETerm(lambda t, y, args: jax.tree.map(jnp.negative, y))
    plain = _one_step(diffrax.Tsit5(), negate, (y0, y0), args)
    wrapped = _one_step(ProjectedSolver(diffrax.Tsit5()), negate, (y0, y0), args)
    jax.tree.map(np.testing.assert_array_equal, wrapped, plain)
    other = diffrax.ODETerm(lambda t, y, args: -y)
    plain = _one_step(diffrax.Tsit5(), other, y0, (system, None))
    wrapped = _one_step(ProjectedSolver(diffrax.Tsit5()), other, y0, (system, None))
    np.testing.assert_array_equal(wrapped, plain)


def test_vector_field_args_default_to_the_free_motion():
    system, q0, qd0 = jl.systems.double_pendulum()
    y = jnp.concatenate([q0, qd0 + 0.3])
    f = _vector_field(jnp.array(0.2), y, VectorFieldArgs(system))
    expected = jl.accelerations(system, q0, qd0 + 0.3, 0.2)
    np.testing.assert_array_equal(f[:2], qd0 + 0.3)
    np.testing.assert_allclose(f[2:], expected, rtol=1e-13)


def test_static_options_key_the_compilation_and_arrays_do_not(monkeypatch):
    # The solve is traced once per compilation; a second call with other times,
    # tolerances and state reuses it, another max_steps does not.
    traces = counting(monkeypatch, _segment, "solve_segment")
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0]),
        params={"g": 9.81},
    )

    def run(**kwargs):
        kwargs = {"t1": 1.0, "rtol": 1e-8, "atol": 1e-8, "max_steps": 4096, **kwargs}
        traj = jl.simulate(system, jnp.array([0.5]), jnp.zeros(1), **kwargs)
        return jax.block_until_ready(traj.q)

    run()
    first = len(traces)
    assert first > 0
    run(t1=0.7, rtol=1e-9, atol=1e-7)
    assert len(traces) == first
    run(max_steps=4097)
    assert len(traces) > first


def test_options_are_a_pytree_of_their_arrays():
    options = CheckedOptions(
        solver=diffrax.Tsit5(),
        stepsize_controller=diffrax.PIDController(
            rtol=jnp.array(1e-8), atol=jnp.array(1e-8)
        ),
        adjoint=diffrax.RecursiveCheckpointAdjoint(),
        progress_meter=diffrax.NoProgressMeter(),
        dt0=None,
        baumgarte=None,
        rest=None,
        tolerances=None,
        max_steps=12345,
        max_events=None,
        t1_only=True,
    )
    # The tolerances are its arrays; the Python choices are static.
    assert len(jax.tree.leaves(eqx.filter(options, eqx.is_array))) == 2
    assert 12345 not in jax.tree.leaves(options)
    assert not options.hybrid
    assert jax.tree.structure(options) != jax.tree.structure(
        dataclasses.replace(options, max_steps=12346)
    )


@pytest.mark.parametrize("max_events", [0, 2.0, True])
def test_max_events_must_be_a_positive_int(max_events):
    system, q0, qd0 = jl.systems.bouncing_ball()
    with pytest.raises(ValueError, match=r"`max_events` must be a positive int"):
        jl.simulate(system, q0, qd0, t1=1.0, max_events=max_events)


@pytest.mark.slow
def test_backsolve_gradient_through_the_projection():
    # BacksolveAdjoint's backward solve has the same args as the motion but an
    # augmented state, which must not be projected; its gradient matches the
    # default adjoint's (differentiating the computed solve).
    system, q0, qd0 = jl.systems.cartesian_pendulum()

    def final_x(g, adjoint):
        s = jl.LagrangianSystem(
            system.lagrangian,
            params={**system.params, "g": g},
            holonomic=system.holonomic,
        )
        traj = jl.simulate(s, q0, qd0, t1=0.5, rtol=1e-10, atol=1e-10, adjoint=adjoint)
        return traj.q[-1, 0]

    g = jnp.array(9.81)
    reference = jax.grad(final_x)(g, diffrax.RecursiveCheckpointAdjoint())
    backsolve = jax.grad(final_x)(g, diffrax.BacksolveAdjoint())
    assert abs(reference) > 1e-2
    np.testing.assert_allclose(backsolve, reference, rtol=1e-6)


class _Handed(Exception):
    pass


@pytest.mark.parametrize("name", ["cartesian_pendulum", "rolling_disk"])
def test_a_constrained_solve_is_projected_once(monkeypatch, name):
    # The solver was wrapped in ProjectedSolver once per entry of a loop over
    # ("nonholonomic", "slip"): twice, which projected every step twice and
    # broke implicit solvers (their tolerances never reached the inner solver).
    from jaxlagrange import _simulate

    handed = []

    def smooth_solve(system, q0, qd0, t0, t1, ts, options):
        handed.append(options)
        raise _Handed

    monkeypatch.setattr(_simulate, "smooth_solve", smooth_solve)
    system, q0, qd0 = getattr(jl.systems, name)()
    with pytest.raises(_Handed):
        jl.simulate(system, q0, qd0, t1=1.0)
    # (`isinstance` sees through the wrapper: compare the types.)
    solver = handed[0].solver
    assert type(solver) is ProjectedSolver
    assert type(solver.solver) is diffrax.Tsit5
    with pytest.raises(_Handed):
        jl.simulate(system, q0, qd0, t1=1.0, baumgarte=(1.0, 1.0))
    assert type(handed[1].solver) is diffrax.Tsit5
