"""Equations of motion against closed forms: q̈, M, p and the Jacobi integral."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import double_pendulum_lagrangian, pendulum_chain

import jaxlagrange as jl


# The jaxtyping annotations are checked here too (tests/conftest.py).
pytestmark = pytest.mark.typecheck


def _random_states(seed, n, count):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-2.0, 2.0, (count, n))
    qd = rng.uniform(-2.0, 2.0, (count, n))
    t = rng.uniform(0.0, 5.0, count)
    return q, qd, t


# Double pendulum: angles from the downward vertical.


DOUBLE_PENDULUM = {"m1": 1.3, "m2": 0.7, "l1": 1.1, "l2": 0.8, "g": 9.81}


def double_pendulum_accelerations(q, qd, p):
    """The textbook closed form."""
    m1, m2, l1, l2, g = p["m1"], p["m2"], p["l1"], p["l2"], p["g"]
    (t1, t2), (w1, w2) = q, qd
    d = t1 - t2
    den = 2 * m1 + m2 - m2 * jnp.cos(2 * d)
    a1 = (
        -g * (2 * m1 + m2) * jnp.sin(t1)
        - m2 * g * jnp.sin(t1 - 2 * t2)
        - 2 * jnp.sin(d) * m2 * (w2**2 * l2 + w1**2 * l1 * jnp.cos(d))
    ) / (l1 * den)
    a2 = (
        2
        * jnp.sin(d)
        * (
            w1**2 * l1 * (m1 + m2)
            + g * (m1 + m2) * jnp.cos(t1)
            + w2**2 * l2 * m2 * jnp.cos(d)
        )
    ) / (l2 * den)
    return jnp.stack([a1, a2])


def double_pendulum():
    return jl.LagrangianSystem(double_pendulum_lagrangian, params=DOUBLE_PENDULUM)


def test_double_pendulum_textbook():
    system = double_pendulum()
    params = system.params
    qs, qds, ts = _random_states(0, 2, 64)
    for q, qd, t in zip(qs, qds, ts, strict=True):
        expected = double_pendulum_accelerations(q, qd, params)
        np.testing.assert_allclose(
            jl.accelerations(system, q, qd, t), expected, rtol=1e-10, atol=1e-10
        )


def test_double_pendulum_mass_momenta_energy():
    system = double_pendulum()
    m1, m2, l1, l2, g = (DOUBLE_PENDULUM[k] for k in ("m1", "m2", "l1", "l2", "g"))
    q = jnp.array([0.4, -1.2])
    qd = jnp.array([0.9, -0.3])
    c = np.cos(q[0] - q[1])
    mass = np.array(
        [[(m1 + m2) * l1**2, m2 * l1 * l2 * c], [m2 * l1 * l2 * c, m2 * l2**2]]
    )
    np.testing.assert_allclose(jl.mass_matrix(system, q, qd, 0.0), mass, rtol=1e-12)
    np.testing.assert_allclose(jl.momenta(system, q, qd, 0.0), mass @ qd, rtol=1e-12)
    kinetic = 0.5 * qd @ mass @ qd
    potential = -(m1 + m2) * g * l1 * np.cos(q[0]) - m2 * g * l2 * np.cos(q[1])
    np.testing.assert_allclose(
        jl.energy(system, q, qd, 0.0), kinetic + potential, rtol=1e-12
    )


# General quadratic energy E = ½ẋᵀMẋ + ½xᵀKx + ẋᵀVx + Aẋ + Bx + C (constraint-functions.txt)
# taken as the Lagrangian: ½(M+Mᵀ)ẍ + (V−Vᵀ)ẋ − ½(K+Kᵀ)x − Bᵀ = 0.


def _quadratic(n, seed):
    rng = np.random.default_rng(seed)
    root = rng.normal(size=(n, n))
    skew = rng.normal(size=(n, n))
    # M is not symmetric: only its symmetric part, which is SPD, enters.
    M = root @ root.T / n + np.eye(n) + (skew - skew.T)
    return {
        "M": M,
        "K": rng.normal(size=(n, n)),
        "V": rng.normal(size=(n, n)),
        "A": rng.normal(size=n),
        "B": rng.normal(size=n),
        "C": np.asarray(0.7),
    }


def quadratic_lagrangian(x, xd, t, p):
    return (
        0.5 * xd @ p["M"] @ xd
        + 0.5 * x @ p["K"] @ x
        + xd @ p["V"] @ x
        + p["A"] @ xd
        + p["B"] @ x
        + p["C"]
    )


@pytest.mark.parametrize("n", [1, 2, 6, 7, 40])
def test_quadratic_energy(n):
    params = _quadratic(n, n)
    system = jl.LagrangianSystem(quadratic_lagrangian, params=params)
    M, K, V, B = params["M"], params["K"], params["V"], params["B"]
    x, xd, t = (a[0] for a in _random_states(100 + n, n, 1))
    xdd = jl.accelerations(system, x, xd, t)
    residual = 0.5 * (M + M.T) @ xdd + (V - V.T) @ xd - 0.5 * (K + K.T) @ x - B
    np.testing.assert_allclose(residual, 0.0, atol=1e-10)
    expected = np.linalg.solve(
        0.5 * (M + M.T), -(V - V.T) @ xd + 0.5 * (K + K.T) @ x + B
    )
    np.testing.assert_allclose(xdd, expected, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(
        jl.mass_matrix(system, x, xd, t), 0.5 * (M + M.T), rtol=1e-12, atol=1e-12
    )
    np.testing.assert_allclose(
        jl.momenta(system, x, xd, t),
        0.5 * (M + M.T) @ xd + V @ x + params["A"],
        atol=1e-12,
    )
    # h = ẋ·p − L: the terms linear in ẋ drop out.
    energy = 0.5 * xd @ M @ xd - 0.5 * x @ K @ x - params["B"] @ x - params["C"]
    np.testing.assert_allclose(jl.energy(system, x, xd, t), energy, rtol=1e-12)


# Pendulum on a vertically oscillating support y_s(t) = a cos ωt: explicit time
# dependence, where the ∂²L/∂θ̇∂t term matters. Exact: l θ̈ = −(g + ÿ_s) sin θ.


def test_pendulum_on_oscillating_support():
    m, length, g, a, omega = 0.8, 1.3, 9.81, 0.2, 7.0

    def lagrangian(q, qd, t):
        theta, thetad = q[0], qd[0]
        ys_dot = -a * omega * jnp.sin(omega * t)
        ys = a * jnp.cos(omega * t)
        x_dot = length * jnp.cos(theta) * thetad
        y_dot = ys_dot + length * jnp.sin(theta) * thetad
        y = ys - length * jnp.cos(theta)
        return 0.5 * m * (x_dot**2 + y_dot**2) - m * g * y

    system = jl.LagrangianSystem(lagrangian)
    qs, qds, ts = _random_states(0, 1, 16)
    for q, qd, t in zip(qs, qds, ts, strict=True):
        ys_ddot = -a * omega**2 * np.cos(omega * t)
        expected = -(g + ys_ddot) * np.sin(q[0]) / length
        np.testing.assert_allclose(
            jl.accelerations(system, q, qd, t)[0], expected, rtol=1e-10, atol=1e-10
        )
        # Jacobi integral: h = ½ m (l²θ̇² − ẏ_s²) − m g l cos θ + m g y_s.
        ys_dot = -a * omega * np.sin(omega * t)
        h = 0.5 * m * (length**2 * qd[0] ** 2 - ys_dot**2) + m * g * (
            a * np.cos(omega * t) - length * np.cos(q[0])
        )
        np.testing.assert_allclose(jl.energy(system, q, qd, t), h, rtol=1e-10)


# A charge in a non-uniform, time-dependent field, from U = e(Φ − A·v):
# m a = e(E + v × B) with E = −∇Φ − ∂A/∂t, B = ∇ × A, all written out by hand.

CHARGE = {
    "m": 1.7,
    "e": -0.6,
    "b": 0.9,
    "eps": 0.4,
    "w": 2.3,
    "k": 0.5,
    "kappa": 1.1,
    "E0": 0.8,
}


def _s(t, p):  # B_z / 2, time-dependent
    return p["b"] * (1 + p["eps"] * jnp.sin(p["w"] * t))


def vector_potential(r, t, p):
    x, y, _ = r
    s = _s(t, p)
    return jnp.stack([-y * s, x * s, p["k"] * x * y])


def scalar_potential(r, t, p):
    x, y, z = r
    return 0.5 * p["kappa"] * (x**2 - y**2) + p["E0"] * z * jnp.cos(p["w"] * t)


def charge_lagrangian(r, v, t, p):
    return 0.5 * p["m"] * v @ v - p["e"] * (
        scalar_potential(r, t, p) - vector_potential(r, t, p) @ v
    )


def test_lorentz_force():
    p = CHARGE
    system = jl.LagrangianSystem(charge_lagrangian, params=p)
    qs, qds, ts = _random_states(0, 3, 16)
    for r, v, t in zip(qs, qds, ts, strict=True):
        x, y, z = np.asarray(r)
        s = p["b"] * (1 + p["eps"] * np.sin(p["w"] * t))
        s_dot = p["b"] * p["eps"] * p["w"] * np.cos(p["w"] * t)
        electric = np.array(
            [
                -p["kappa"] * x + y * s_dot,
                p["kappa"] * y - x * s_dot,
                -p["E0"] * np.cos(p["w"] * t),
            ]
        )
        magnetic = np.array([p["k"] * x, -p["k"] * y, 2 * s])
        expected = p["e"] * (electric + np.cross(v, magnetic)) / p["m"]
        np.testing.assert_allclose(
            jl.accelerations(system, r, v, t), expected, rtol=1e-10, atol=1e-10
        )
        # Canonical momentum and energy.
        potential_a = np.array([-y * s, x * s, p["k"] * x * y])
        np.testing.assert_allclose(
            jl.momenta(system, r, v, t), p["m"] * v + p["e"] * potential_a, rtol=1e-12
        )
        phi = 0.5 * p["kappa"] * (x**2 - y**2) + p["E0"] * z * np.cos(p["w"] * t)
        np.testing.assert_allclose(
            jl.energy(system, r, v, t), 0.5 * p["m"] * v @ v + p["e"] * phi, rtol=1e-12
        )


# Damped (Rayleigh) and driven (generalized force) oscillators.


def oscillator_lagrangian(x, xd, t, p):
    return 0.5 * xd @ p["M"] @ xd - 0.5 * x @ p["K"] @ x


def test_damped_driven_oscillator():
    n = 3
    rng = np.random.default_rng(1)
    root = rng.normal(size=(n, n))
    params = {
        "M": jnp.diag(jnp.array([1.0, 2.0, 0.5])),
        "K": jnp.array([[2.0, -1.0, 0.0], [-1.0, 2.0, -1.0], [0.0, -1.0, 2.0]]),
        "C": root @ root.T,
        "F": rng.normal(size=n),
        "w": 1.7,
    }

    def rayleigh(x, xd, t, p):
        return 0.5 * xd @ p["C"] @ xd

    def drive(x, xd, t, p):
        return p["F"] * jnp.cos(p["w"] * t)

    damped = jl.LagrangianSystem(oscillator_lagrangian, params, dissipation=rayleigh)
    driven = jl.LagrangianSystem(oscillator_lagrangian, params, force=drive)
    both = jl.LagrangianSystem(
        oscillator_lagrangian, params, force=drive, dissipation=rayleigh
    )
    M, K, C, F = (np.asarray(params[k]) for k in "MKCF")
    qs, qds, ts = _random_states(0, n, 8)
    for x, xd, t in zip(qs, qds, ts, strict=True):
        x, xd, t = np.asarray(x), np.asarray(xd), float(t)
        drive_t = F * np.cos(1.7 * t)
        for system, rhs in [
            (damped, -K @ x - C @ xd),
            (driven, -K @ x + drive_t),
            (both, -K @ x - C @ xd + drive_t),
        ]:
            np.testing.assert_allclose(
                jl.accelerations(system, x, xd, t),
                np.linalg.solve(M, rhs),
                rtol=1e-10,
                atol=1e-12,
            )


def test_power_balance():
    """dh/dt = q̇·Q − q̇·∂R/∂q̇ − ∂L/∂t along the flow given by `accelerations`."""
    m, length, g, a, omega = 0.8, 1.3, 9.81, 0.2, 7.0

    def lagrangian(q, qd, t):  # the pendulum on an oscillating support, plus a spring
        ys_dot = -a * omega * jnp.sin(omega * t)
        x_dot = length * jnp.cos(q[0]) * qd[0]
        y_dot = ys_dot + length * jnp.sin(q[0]) * qd[0]
        y = a * jnp.cos(omega * t) - length * jnp.cos(q[0])
        spring = 0.5 * 3.0 * (q[1] - q[0]) ** 2
        return 0.5 * m * (x_dot**2 + y_dot**2) + 0.5 * qd[1] ** 2 - m * g * y - spring

    def rayleigh(q, qd, t):
        return 0.3 * qd[0] ** 2 + 0.1 * qd[0] * qd[1] + 0.2 * qd[1] ** 4

    def drive(q, qd, t):
        return jnp.array([jnp.sin(2 * t), 0.5 * jnp.cos(q[0])])

    system = jl.LagrangianSystem(lagrangian, force=drive, dissipation=rayleigh)
    qs, qds, ts = _random_states(0, 2, 4)
    for q, qd, t in zip(qs, qds, ts, strict=True):
        qdd = jl.accelerations(system, q, qd, t)
        _, rate = jax.jvp(
            lambda q, qd, t: jl.energy(system, q, qd, t), (q, qd, t), (qd, qdd, 1.0)
        )
        power = (
            qd @ drive(q, qd, t)
            - qd @ jax.grad(rayleigh, argnums=1)(q, qd, t)
            - jax.grad(lagrangian, argnums=2)(q, qd, t)
        )
        np.testing.assert_allclose(rate, power, rtol=1e-10, atol=1e-10)


# Many coordinates: a chain of 200 masses and springs with fixed ends.


def test_long_chain():
    n, m, k = 200, 0.5, 3.0

    def lagrangian(x, xd, t):
        stretch = jnp.diff(jnp.concatenate([jnp.zeros(1), x, jnp.zeros(1)]))
        return 0.5 * m * xd @ xd - 0.5 * k * stretch @ stretch

    system = jl.LagrangianSystem(lagrangian)
    x, xd, _ = (a[0] for a in _random_states(0, n, 1))
    padded = np.concatenate([[0.0], np.asarray(x), [0.0]])
    expected = k / m * (padded[2:] - 2 * padded[1:-1] + padded[:-2])
    np.testing.assert_allclose(
        jax.jit(jl.accelerations)(system, x, xd, 0.0), expected, rtol=1e-10, atol=1e-10
    )


@pytest.mark.parametrize("n", [3, 9])
def test_pendulum_chain_against_dense_formula(n):
    """M_ij = m_ij cos(θi − θj), with m_ij = Σ_{k ≥ max(i,j)} m_k; the forcing by hand."""
    # n pendula on one string, unit lengths: a configuration-dependent dense M.
    system = pendulum_chain(n, m=jnp.asarray(0.9), length=1.0, g=jnp.asarray(9.81))
    q, qd, _ = (np.asarray(a[0]) for a in _random_states(0, n, 1))
    idx = np.arange(n)
    tail = 0.9 * (n - np.maximum.outer(idx, idx))
    mass = tail * np.cos(np.subtract.outer(q, q))
    # ∂L/∂θi − (∂²L/∂θ̇i∂θ)θ̇ = −Σ_j m_ij sin(θi − θj) θ̇j² − g m_ii sin θi
    forcing = -(tail * np.sin(np.subtract.outer(q, q))) @ qd**2 - 9.81 * np.diag(
        tail
    ) * np.sin(q)
    np.testing.assert_allclose(jl.mass_matrix(system, q, qd, 0.0), mass, atol=1e-12)
    np.testing.assert_allclose(
        jl.accelerations(system, q, qd, 0.0),
        np.linalg.solve(mass, forcing),
        rtol=1e-10,
        atol=1e-10,
    )


# Transformations: grad w.r.t. params, jit/vmap, float32.


def test_grad_wrt_params_matches_finite_differences():
    system = double_pendulum()
    q = jnp.array([0.5, -0.8])
    qd = jnp.array([1.2, 0.4])

    @jax.jit
    def loss(params):
        s = jl.LagrangianSystem(double_pendulum_lagrangian, params=params)
        return jnp.sum(jnp.sin(jl.accelerations(s, q, qd, 0.0)))

    grads = jax.jit(jax.grad(loss))(system.params)
    closed = jax.grad(
        lambda p: jnp.sum(jnp.sin(double_pendulum_accelerations(q, qd, p)))
    )(system.params)
    for name, value in system.params.items():
        h = 1e-5
        up = dict(system.params, **{name: value + h})
        down = dict(system.params, **{name: value - h})
        fd = (loss(up) - loss(down)) / (2 * h)
        np.testing.assert_allclose(grads[name], fd, rtol=1e-7, atol=1e-9)
        np.testing.assert_allclose(grads[name], closed[name], rtol=1e-10)


def test_grad_through_system_pytree():
    """The system itself is a pytree: grad w.r.t. it gives grads for its params."""
    system = double_pendulum()
    q = jnp.array([0.5, -0.8])
    qd = jnp.array([1.2, 0.4])
    grads = jax.grad(lambda s: jl.accelerations(s, q, qd, 0.0)[1])(system)
    closed = jax.grad(lambda p: double_pendulum_accelerations(q, qd, p)[1])(
        system.params
    )
    for name in DOUBLE_PENDULUM:
        np.testing.assert_allclose(grads.params[name], closed[name], rtol=1e-10)


def test_jit_vmap_equivalence():
    system = double_pendulum()
    qs, qds, ts = _random_states(0, 2, 32)
    batched = jax.jit(jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0)))(
        system, qs, qds, ts
    )
    single = np.stack(
        [
            jl.accelerations(system, q, qd, t)
            for q, qd, t in zip(qs, qds, ts, strict=True)
        ]
    )
    np.testing.assert_allclose(batched, single, rtol=1e-13, atol=1e-13)
    for fn in (jl.mass_matrix, jl.momenta, jl.energy):
        batched = jax.vmap(jax.jit(fn), in_axes=(None, 0, 0, 0))(system, qs, qds, ts)
        single = np.stack(
            [fn(system, q, qd, t) for q, qd, t in zip(qs, qds, ts, strict=True)]
        )
        np.testing.assert_allclose(batched, single, rtol=1e-13, atol=1e-13)


def test_vmap_over_params():
    """A batch of systems: vmap over the params leaves of the system."""
    masses = jnp.array([0.5, 1.0, 2.0])
    q = jnp.array([0.5, -0.8])
    qd = jnp.array([1.2, 0.4])

    def at(m2):
        params = dict(DOUBLE_PENDULUM, m2=m2)
        return jl.accelerations(
            jl.LagrangianSystem(double_pendulum_lagrangian, params=params), q, qd, 0.0
        )

    expected = np.stack(
        [
            double_pendulum_accelerations(q, qd, dict(DOUBLE_PENDULUM, m2=m))
            for m in masses
        ]
    )
    np.testing.assert_allclose(jax.vmap(at)(masses), expected, rtol=1e-10)


@pytest.mark.parametrize("n", [2, 12])
def test_float32(n):
    with jax.enable_x64(False):
        params = jax.tree_util.tree_map(
            lambda x: jnp.asarray(x, jnp.float32),
            _quadratic(n, n),
        )
        system = jl.LagrangianSystem(quadratic_lagrangian, params=params)
        x = jnp.linspace(-1.0, 1.0, n, dtype=jnp.float32)
        xd = jnp.linspace(0.5, -0.5, n, dtype=jnp.float32)
        xdd = jax.jit(jl.accelerations)(system, x, xd, 0.0)
        energy = jl.energy(system, x, xd, 0.0)
        assert xdd.dtype == jnp.float32
        assert energy.dtype == jnp.float32
        assert jl.mass_matrix(system, x, xd, 0.0).dtype == jnp.float32
    M, K, V, B = (np.asarray(params[k], np.float64) for k in "MKVB")
    x, xd = np.asarray(x, np.float64), np.asarray(xd, np.float64)
    expected = np.linalg.solve(
        0.5 * (M + M.T), -(V - V.T) @ xd + 0.5 * (K + K.T) @ x + B
    )
    np.testing.assert_allclose(xdd, expected, rtol=1e-4, atol=1e-4)


def test_float32_double_pendulum():
    with jax.enable_x64(False):
        system = double_pendulum()
        q = jnp.array([0.5, -0.8], jnp.float32)
        qd = jnp.array([1.2, 0.4], jnp.float32)
        qdd = jax.jit(jl.accelerations)(system, q, qd, 0.0)
        assert qdd.dtype == jnp.float32
    expected = double_pendulum_accelerations(
        np.asarray(q, np.float64), np.asarray(qd, np.float64), DOUBLE_PENDULUM
    )
    np.testing.assert_allclose(qdd, expected, rtol=1e-5)
