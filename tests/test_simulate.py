"""`simulate` against closed forms and conservation laws; jit, vmap and grad."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import (
    double_pendulum,
    falling_lagrangian,
    oscillator_lagrangian,
    pendulum_lagrangian,
    rayleigh,
)

import jaxlagrange as jl


DOUBLE_PENDULUM = double_pendulum()


def test_chaotic_double_pendulum_conserves_energy():
    # Both arms far above the horizontal: chaotic (the Lyapunov time is ~1).
    q0, qd0 = jnp.array([2.0, 2.5]), jnp.zeros(2)
    ts = jnp.linspace(0.0, 50.0, 501)
    traj = jl.simulate(
        DOUBLE_PENDULUM, q0, qd0, t1=50.0, saveat=ts, rtol=1e-10, atol=1e-10
    )
    energy = jax.vmap(jl.energy, in_axes=(None, 0, 0, 0))(
        DOUBLE_PENDULUM, traj.q, traj.qd, traj.ts
    )
    drift = np.max(np.abs(energy - energy[0])) / abs(energy[0])
    # Measured: 6.9e-9 with the default Tsit5 at rtol = atol = 1e-10.
    assert drift < 1e-8
    # The motion is chaotic, not a small oscillation: the outer arm flips over.
    assert np.max(np.abs(traj.q[:, 1])) > np.pi


def _kepler(q, qd, t, params):
    return 0.5 * jnp.sum(qd**2) + params["mu"] / jnp.sqrt(jnp.sum(q**2))


def test_kepler_orbit_period_and_angular_momentum():
    mu, a, e = 1.0, 1.0, 0.6
    kepler = jl.LagrangianSystem(_kepler, params={"mu": mu})
    period = 2 * np.pi * np.sqrt(a**3 / mu)
    perihelion, speed = a * (1 - e), np.sqrt(mu * (1 + e) / (a * (1 - e)))
    q0, qd0 = jnp.array([perihelion, 0.0]), jnp.array([0.0, speed])
    ts = jnp.linspace(0.0, period, 201)
    traj = jl.simulate(kepler, q0, qd0, t1=period, saveat=ts, rtol=1e-11, atol=1e-11)
    # After one period (closed form 2π√(a³/μ)) the orbit closes; at half of it the
    # body is at aphelion a(1 + e).
    np.testing.assert_allclose(traj.q[-1], q0, atol=1e-8)
    np.testing.assert_allclose(traj.qd[-1], qd0, atol=1e-8)
    np.testing.assert_allclose(traj.q[100], [-a * (1 + e), 0.0], atol=1e-8)
    # Not a period before: the orbit has not closed at 0.99 T.
    assert np.linalg.norm(traj.q[-3] - q0) > 1e-3
    angular = traj.q[:, 0] * traj.qd[:, 1] - traj.q[:, 1] * traj.qd[:, 0]
    np.testing.assert_allclose(angular, perihelion * speed, rtol=1e-10)


def test_damped_oscillator_closed_form():
    m, k, c = 1.5, 6.0, 0.6
    oscillator = jl.LagrangianSystem(
        oscillator_lagrangian, params=dict(m=m, k=k, c=c), dissipation=rayleigh
    )
    gamma, w0 = c / (2 * m), np.sqrt(k / m)
    wd = np.sqrt(w0**2 - gamma**2)
    ts = np.linspace(0.0, 10.0, 101)
    traj = jl.simulate(
        oscillator,
        jnp.array([1.0]),
        jnp.array([0.0]),
        t1=10.0,
        saveat=ts,
        rtol=1e-11,
        atol=1e-11,
    )
    decay = np.exp(-gamma * ts)
    q = decay * (np.cos(wd * ts) + gamma / wd * np.sin(wd * ts))
    qd = -decay * w0**2 / wd * np.sin(wd * ts)
    np.testing.assert_allclose(traj.q[:, 0], q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(traj.qd[:, 0], qd, rtol=0, atol=1e-9)


def _on_circle(q, t):
    return jnp.array([jnp.sum(q**2) - 1.0])


def test_constrained_pendulum_multipliers_are_the_tension():
    pendulum = jl.LagrangianSystem(falling_lagrangian, holonomic=_on_circle)
    theta = 1.2
    q0, qd0 = jnp.array([np.sin(theta), -np.cos(theta)]), jnp.zeros(2)
    traj = jl.simulate(
        pendulum,
        q0,
        qd0,
        t1=5.0,
        saveat=jnp.linspace(0.0, 5.0, 51),
        rtol=1e-10,
        atol=1e-10,
        baumgarte=(10.0, 10.0),
    )
    assert traj.multipliers.shape == (51, 1)
    # Gᵀλ = 2λq; the inward tension N = m v²/l − m g y/l = −2λl (m = l = 1).
    tension = jnp.sum(traj.qd**2, axis=1) - 9.81 * traj.q[:, 1]
    np.testing.assert_allclose(-2 * traj.multipliers[:, 0], tension, rtol=1e-7)
    np.testing.assert_allclose(jnp.sum(traj.q**2, axis=1), 1.0, atol=1e-9)


def test_vmap_equals_a_loop_under_jit():
    q0 = jnp.array([[0.1, 0.2], [1.0, -0.5], [2.0, 2.5], [-0.3, 0.0]])
    qd0 = jnp.array([[0.0, 0.0], [0.5, 0.0], [0.0, -1.0], [1.0, 1.0]])
    t1 = jnp.array([3.0, 2.0, 2.5, 1.0])

    @jax.jit
    def run(q0, qd0, t1):
        # The times are traced too: t1 and the save times depend on the input.
        ts = jnp.linspace(0.0, 1.0, 7) * t1
        return jl.simulate(DOUBLE_PENDULUM, q0, qd0, t1=t1, saveat=ts)

    batched = jax.vmap(run)(q0, qd0, t1)
    for i in range(q0.shape[0]):
        single = run(q0[i], qd0[i], t1[i])
        np.testing.assert_allclose(batched.q[i], single.q, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(batched.qd[i], single.qd, rtol=1e-10, atol=1e-12)
        assert single.t_final == t1[i] and single.ts[-1] == t1[i]
    np.testing.assert_array_equal(batched.q[:, 0], q0)
    np.testing.assert_array_equal(batched.t_final, t1)
    np.testing.assert_array_equal(batched.result == jl.RESULTS.successful, True)


_ts = jnp.linspace(0.0, 3.0, 31)


def _loss(params, q0, adjoint=None):
    system = jl.LagrangianSystem(pendulum_lagrangian, params=params)
    traj = jl.simulate(
        system,
        q0,
        jnp.array([0.3]),
        t1=3.0,
        saveat=_ts,
        rtol=1e-12,
        atol=1e-12,
        adjoint=adjoint,
    )
    return jnp.sum(traj.q**2) + 0.1 * jnp.sum(traj.qd**2)


def _central_difference(f, x, h):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_grad_matches_finite_differences():
    params = {"g": jnp.array(9.81), "l": jnp.array(1.3)}
    q0 = jnp.array([0.8])
    # One compilation serves both the gradient and the loss values.
    value_and_grad = jax.jit(jax.value_and_grad(_loss, argnums=(0, 1)))
    _, (grad_params, grad_q0) = value_and_grad(params, q0)

    def loss(params, q0):
        return value_and_grad(params, q0)[0]

    for name in params:
        fd = _central_difference(
            lambda x, name=name: loss({**params, name: x}, q0), params[name], 1e-5
        )
        np.testing.assert_allclose(grad_params[name], fd, rtol=1e-6)
    fd = _central_difference(lambda x: loss(params, x), q0, 1e-5)
    np.testing.assert_allclose(grad_q0, fd, rtol=1e-6)
    # The gradients are not trivially small.
    assert abs(grad_params["g"]) > 1e-2 and abs(grad_q0[0]) > 1e-1


@pytest.mark.slow
@pytest.mark.parametrize(
    "adjoint",
    [diffrax.BacksolveAdjoint(), diffrax.DirectAdjoint()],
    ids=["backsolve", "direct"],
)
def test_other_adjoints_agree(adjoint):
    params = {"g": jnp.array(9.81), "l": jnp.array(1.3)}
    q0 = jnp.array([0.8])
    reference = jax.jit(jax.grad(_loss))(params, q0)
    other = jax.jit(jax.grad(lambda p, q: _loss(p, q, adjoint)))(params, q0)
    for name in params:
        np.testing.assert_allclose(other[name], reference[name], rtol=1e-6)


def test_progress_meter(capfd):
    system = jl.LagrangianSystem(oscillator_lagrangian, params=dict(m=1.0, k=1.0))
    traj = jl.simulate(
        system,
        jnp.array([1.0]),
        jnp.zeros(1),
        t1=1.0,
        progress_meter=diffrax.TextProgressMeter(),
    )
    jax.block_until_ready(traj)
    out = capfd.readouterr().out
    assert "0.00%" in out and "100.00%" in out
