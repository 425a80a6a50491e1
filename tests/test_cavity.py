"""The moving-mirror cavity (moving-mirror-cavity.txt) against its equations of motion."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl
from jaxlagrange.systems._cavity import _coupling


def _residuals(params, q, qd, qdd):
    """The two stated equations of motion, (08a) and (08b)."""
    m, k, q_eq = params["m"], params["k"], params["q_eq"]
    x, xd, xdd = q[0], qd[0], qdd[0]
    field, rate, accel = q[1:], qd[1:], qdd[1:]
    n = field.shape[0]
    G = _coupling(n)
    omega2 = (np.arange(1, n + 1) * np.pi / x) ** 2
    phi = xd / x
    phi_dot = xdd / x - xd**2 / x**2
    field_eq = (
        accel
        + omega2 * field
        - 2 * phi * G @ rate
        - phi_dot * G @ field
        + phi**2 * G @ G @ field
    )
    mirror_eq = (
        m * xdd
        + k * (x - q_eq)
        - (omega2 * field) @ field / x
        + (omega2 * field) @ (G @ field) / x
    )
    return field_eq, mirror_eq, np.abs(omega2 * field).max() + np.abs(accel).max()


def test_coupling_matrix():
    G = _coupling(4)
    assert G[0, 1] == pytest.approx(-2 * 1 * 2 / (4 - 1))
    assert G[1, 2] == pytest.approx(-2 * 2 * 3 / (9 - 4))
    assert G[0, 2] == pytest.approx(2 * 1 * 3 / (9 - 1))
    np.testing.assert_array_equal(G, -G.T)
    np.testing.assert_array_equal(np.diag(G), 0.0)


@pytest.mark.parametrize("modes", [10, 16])
def test_equations_of_motion(modes):
    params = {"m": 2.5, "k": 3.0, "q_eq": 1.2}
    system, q0, qd0 = jl.systems.make("cavity", modes=modes, params=params)
    assert q0.shape == qd0.shape == (modes + 1,)
    rng = np.random.default_rng(modes)
    count = 8
    x = rng.uniform(0.7, 1.5, count)
    field = 0.3 * rng.normal(size=(count, modes)) / np.arange(1, modes + 1)
    q = np.concatenate([x[:, None], field], axis=1)
    qd = 0.5 * rng.normal(size=(count, modes + 1))
    qdd = jax.jit(jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None)))(
        system, q, qd, 0.0
    )
    for i in range(count):
        field_eq, mirror_eq, scale = _residuals(
            params, np.asarray(q[i]), np.asarray(qd[i]), np.asarray(qdd[i])
        )
        np.testing.assert_allclose(field_eq, 0.0, atol=1e-11 * scale)
        np.testing.assert_allclose(mirror_eq, 0.0, atol=1e-11 * scale)


def test_mass_matrix_and_energy():
    """M = [[m + |GQ|²/q², −(GQ)ᵀ/q], [−GQ/q, I]] and h = T + ½|ΩQ|² + V by hand."""
    system, _, _ = jl.systems.make("cavity", modes=10)
    rng = np.random.default_rng(3)
    q = np.concatenate([[0.9], 0.2 * rng.normal(size=10)])
    qd = 0.3 * rng.normal(size=11)
    x, xd, field, rate = q[0], qd[0], np.asarray(q[1:]), np.asarray(qd[1:])
    gq = _coupling(10) @ field
    mass = np.eye(11)
    mass[0, 0] = 1.0 + gq @ gq / x**2
    mass[0, 1:] = mass[1:, 0] = -gq / x
    np.testing.assert_allclose(jl.mass_matrix(system, q, qd, 0.0), mass, atol=1e-12)
    # L is a quadratic form in the velocities plus −(field and spring energy), so
    # h = T + ½|ΩQ|² + V.
    drift = xd / x * gq - rate
    omega = np.arange(1, 11) * np.pi / x
    h = 0.5 * drift @ drift + 0.5 * xd**2 + 0.5 * np.sum((omega * field) ** 2)
    h += 0.5 * (x - 1.0) ** 2
    np.testing.assert_allclose(jl.energy(system, q, qd, 0.0), h, rtol=1e-12)


def test_energy_is_an_integral_of_the_flow():
    """dh/dt = ∂h/∂q·q̇ + ∂h/∂q̇·q̈ vanishes with q̈ from `accelerations`."""
    system, _, _ = jl.systems.make("cavity", modes=12)
    rng = np.random.default_rng(7)
    q = jnp.asarray(np.concatenate([[1.1], 0.2 * rng.normal(size=12)]))
    qd = jnp.asarray(0.4 * rng.normal(size=13))
    qdd = jl.accelerations(system, q, qd, 0.0)
    h, rate = jax.jvp(lambda q, qd: jl.energy(system, q, qd, 0.0), (q, qd), (qd, qdd))
    power = jnp.abs(jax.grad(jl.energy, argnums=2)(system, q, qd, 0.0) * qdd).sum()
    assert power > 1.0  # the terms are large, and cancel:
    np.testing.assert_allclose(rate, 0.0, atol=1e-12 * power)


def test_bad_modes():
    with pytest.raises(
        ValueError,
        match="`modes` must be a positive int \\(the field modes of system 'cavity'\\)",
    ):
        jl.systems.make("cavity", modes=0)
    with pytest.raises(
        ValueError, match=r"`q0` for system 'cavity' must have shape \(11,\)"
    ):
        jl.systems.make("cavity", modes=10, q0=jnp.zeros(3))
