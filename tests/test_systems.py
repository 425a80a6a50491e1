"""The ready systems against closed forms and conservation laws."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special

import jaxlagrange as jl


def _states(n, count=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-2, 2, (count, n)), rng.uniform(-2, 2, (count, n))


@jax.jit
def _accelerations(system, qs, qds, ts):
    return jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0))(system, qs, qds, ts)


_acceleration = jax.jit(jl.accelerations)
_mass_matrix = jax.jit(jl.mass_matrix)


def simulate_checked(ready, t1, saves=2, tol=1e-11, **kwargs):
    system, q0, qd0 = ready
    ts = jnp.linspace(0.0, t1, saves)
    return jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=tol, atol=tol, **kwargs)


def test_registry_lists_every_system():
    expected = {
        "bouncing_ball",
        "cartesian_double_pendulum",
        "cartesian_pendulum",
        "cavity",
        "charged_particle",
        "double_pendulum",
        "kapitza",
        "kepler",
        "mass_on_sphere",
        "pendulum",
        "rolling_coin",
        "rolling_disk",
        "rotating_rod",
        "spherical_pendulum",
        "spring_chain",
    }
    assert expected <= set(jl.systems.names())
    for name in expected:
        ready = jl.systems.make(name)
        assert ready.name == name
        assert len(ready.coordinates) == ready.q0.shape[0] == ready.qd0.shape[0]


def test_registry_errors():
    with pytest.raises(
        ValueError, match=r"Unknown system 'pendulm'; known systems: .*pendulum"
    ):
        jl.systems.make("pendulm")
    with pytest.raises(
        ValueError,
        match=r"Unknown parameter 'mass' for system 'pendulum'; valid parameters: g, l, m",
    ):
        jl.systems.pendulum({"mass": 2.0})
    with pytest.raises(
        ValueError,
        match=r"Parameter 'B' of system 'charged_particle' must have shape \(3,\), got \(2,\)",
    ):
        jl.systems.charged_particle({"B": [0.0, 1.0]})
    with pytest.raises(
        ValueError,
        match=r"Parameter 'l' of system 'pendulum' must be a number or an array of "
        r"numbers, got str 'long'\.$",
    ):
        jl.systems.pendulum({"l": "long"})
    with pytest.raises(
        ValueError,
        match=r"`q0` for system 'double_pendulum' must have shape \(2,\), got \(3,\)",
    ):
        jl.systems.double_pendulum(q0=[0.1, 0.2, 0.3])
    with pytest.raises(
        ValueError, match=r"`n` must be a positive int \(the number of masses\), got 0"
    ):
        jl.systems.spring_chain(n=0)
    with pytest.raises(ValueError, match=r"already registered"):
        jl.systems.register("pendulum")(jl.systems.pendulum)


def test_pendulum_acceleration():
    params = {"m": 0.7, "l": 1.3, "g": 9.81}
    ready = jl.systems.pendulum(params, q0=[2.5], qd0=[0.0])
    qs, qds = _states(1)
    qdd = _accelerations(ready.system, qs, qds, np.zeros(5))
    assert jnp.allclose(qdd, -9.81 / 1.3 * np.sin(qs), rtol=1e-12, atol=1e-12)


@pytest.mark.slow
def test_pendulum_exact_period():
    ready = jl.systems.pendulum({"l": 1.3}, q0=[2.5], qd0=[0.0])
    # A large swing (2.5 rad): the period is 4 sqrt(l/g) K(sin²(θ₀/2)), not 2π sqrt(l/g).
    period = 4 * np.sqrt(1.3 / 9.81) * scipy.special.ellipk(np.sin(1.25) ** 2)
    traj = simulate_checked(ready, period)
    assert jnp.allclose(traj.q[-1], 2.5, atol=1e-8)
    assert jnp.allclose(traj.qd[-1], 0.0, atol=1e-7)


def test_double_pendulum_against_hand_written_equations():
    params = {"m1": 1.3, "m2": 0.6, "l1": 0.9, "l2": 1.4, "g": 9.81}
    system = jl.systems.double_pendulum(params).system
    m1, m2, l1, l2, g = params.values()
    qs, qds = _states(2)
    qdd = _accelerations(system, qs, qds, np.zeros(5))
    for (th1, th2), (w1, w2), got in zip(qs, qds, qdd, strict=True):
        d = th1 - th2
        mass = np.array(
            [
                [(m1 + m2) * l1**2, m2 * l1 * l2 * np.cos(d)],
                [m2 * l1 * l2 * np.cos(d), m2 * l2**2],
            ]
        )
        rhs = np.array(
            [
                -m2 * l1 * l2 * np.sin(d) * w2**2 - (m1 + m2) * g * l1 * np.sin(th1),
                m2 * l1 * l2 * np.sin(d) * w1**2 - m2 * g * l2 * np.sin(th2),
            ]
        )
        assert np.allclose(got, np.linalg.solve(mass, rhs), rtol=1e-12, atol=1e-12)
        q, qd = np.array([th1, th2]), np.array([w1, w2])
        assert jnp.allclose(_mass_matrix(system, q, qd, 0.0), mass, rtol=1e-14)


@pytest.mark.slow
def test_double_pendulum_default_is_chaotic():
    # A 1e-9 change of the default initial state grows a million-fold by t = 15.
    system, q0, qd0 = jl.systems.double_pendulum()
    ends = [
        jl.simulate(system, q, qd0, t1=15.0, rtol=1e-11, atol=1e-11).q[-1]
        for q in (q0, q0 + jnp.array([1e-9, 0.0]))
    ]
    assert jnp.max(jnp.abs(ends[0] - ends[1])) > 1e-3


def test_spherical_pendulum_equations_and_conical_orbit():
    g, length = 9.81, 0.8
    system = jl.systems.spherical_pendulum({"l": length}).system
    qs, qds = _states(2)
    qdd = _accelerations(system, qs, qds, np.zeros(5))
    theta, theta_dot, phi_dot = qs[:, 0], qds[:, 0], qds[:, 1]
    expected = np.stack(
        [
            np.sin(theta) * np.cos(theta) * phi_dot**2 - g / length * np.sin(theta),
            -2 * theta_dot * phi_dot / np.tan(theta),
        ],
        axis=1,
    )
    assert np.allclose(qdd, expected, rtol=1e-11, atol=1e-11)
    # A conical pendulum, φ̇² = g / (l cos θ), is an equilibrium of θ.
    rate = np.sqrt(g / (length * np.cos(0.6)))
    qdd = _acceleration(system, jnp.array([0.6, 0.1]), jnp.array([0.0, rate]), 0.0)
    assert jnp.allclose(qdd, 0.0, atol=1e-13)


def test_kepler_period_energy_angular_momentum():
    # The force: r̈ = −μ r / |r|³.
    qs, qds = _states(2)
    qdd = _accelerations(jl.systems.kepler({"mu": 1.5}).system, qs, qds, np.zeros(5))
    norm = np.linalg.norm(qs, axis=1, keepdims=True)
    assert np.allclose(qdd, -1.5 * qs / norm**3, rtol=1e-12)
    # The default orbit: periapsis r = 1 at speed sqrt(1.5), μ = 1, so by vis-viva
    # a = 2 (e = 0.5), and the orbit closes after a period 2π a^{3/2}.
    ready = jl.systems.kepler()
    system, q0, qd0 = ready
    period = 2 * np.pi * 2**1.5
    traj = simulate_checked(ready, period, saves=201)
    assert jnp.allclose(traj.q[-1], q0, atol=1e-8)
    assert jnp.allclose(traj.qd[-1], qd0, atol=1e-8)
    assert jnp.max(jnp.linalg.norm(traj.q, axis=1)) == pytest.approx(3.0, abs=1e-4)
    h = jax.jit(jax.vmap(jl.energy, (None, 0, 0, 0)))(system, traj.q, traj.qd, traj.ts)
    ang = traj.q[:, 0] * traj.qd[:, 1] - traj.q[:, 1] * traj.qd[:, 0]
    assert h[0] == pytest.approx(-0.25, rel=1e-14)
    assert jnp.max(jnp.abs(h - h[0])) < 1e-9
    assert jnp.max(jnp.abs(ang - ang[0])) < 1e-9


def test_kepler_differentiable_at_the_origin():
    system = jl.systems.kepler().system
    zero = jnp.zeros(2)

    def loss(q, params):
        s = jl.LagrangianSystem(system.lagrangian, params=params)
        return jl.energy(s, q, jnp.ones(2), 0.0) + jnp.sum(
            jl.accelerations(s, q, zero, 0.0)
        )

    grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(zero, system.params)
    assert all(jnp.all(jnp.isfinite(g)) for g in jax.tree_util.tree_leaves(grads))
    # Softened, the force is finite and smooth through r = 0: r̈ = −μ r / (r² + ε²)^{3/2}.
    soft = jl.systems.kepler({"eps": 0.1}).system
    q = jnp.array([0.03, -0.02])
    expected = -q / (jnp.sum(q**2) + 0.01) ** 1.5
    assert jnp.allclose(_acceleration(soft, q, zero, 0.0), expected, rtol=1e-12)


def _chain_frequencies(n, m, k):
    return 2 * np.sqrt(k / m) * np.sin(np.arange(1, n + 1) * np.pi / (2 * (n + 1)))


def test_spring_chain_normal_modes():
    n, m, k = 4, 0.5, 2.0
    ready = jl.systems.spring_chain({"m": m, "k": k}, n=n)
    assert ready.coordinates == ("x₁", "x₂", "x₃", "x₄")
    system = ready.system
    zero = jnp.zeros(n)
    # The EOM are linear, M q̈ = −K q: read K off the accelerations of unit states.
    mass = _mass_matrix(system, zero, zero, 0.0)
    stiffness = (
        -mass @ _accelerations(system, np.eye(n), np.zeros((n, n)), np.zeros(n)).T
    )
    omega = np.sqrt(np.sort(np.linalg.eigvals(np.linalg.solve(mass, stiffness)).real))
    assert np.allclose(omega, _chain_frequencies(n, m, k), rtol=1e-12)
    assert np.allclose(mass, m * np.eye(n), rtol=1e-14)


@pytest.mark.slow
def test_spring_chain_stays_in_a_normal_mode():
    n, m, k = 4, 0.5, 2.0
    # Started in mode 2, x(t) = A cos(ω₂ t) sin(2iπ/(n+1)).
    shape = np.sin(2 * np.arange(1, n + 1) * np.pi / (n + 1))
    mode = jl.systems.spring_chain(
        {"m": m, "k": k}, n=n, q0=0.3 * shape, qd0=np.zeros(n)
    )
    traj = simulate_checked(mode, 10.0, saves=41)
    omega = _chain_frequencies(n, m, k)[1]
    closed = 0.3 * np.cos(omega * np.asarray(traj.ts))[:, None] * shape
    assert np.allclose(traj.q, closed, atol=1e-8)


def test_charged_particle_lorentz_force_cyclotron_and_drift():
    params = {"m": 2.0, "charge": 1.5, "B": [0.3, -0.4, 1.2], "E": [0.2, 0.1, -0.3]}
    system = jl.systems.charged_particle(params).system
    b, e = np.array(params["B"]), np.array(params["E"])
    qs, qds = _states(3)
    qdd = _accelerations(system, qs, qds, np.zeros(5))
    assert np.allclose(qdd, 1.5 / 2.0 * (e + np.cross(qds, b)), rtol=1e-12)
    # The EOM are linear: the state matrix has eigenvalues ±i ω, ω = |q| |B| / m the
    # cyclotron frequency, and four zeros (translations and motion along B).
    zero = jnp.zeros(3)
    jac_q, jac_qd = jax.jit(jax.jacfwd(jl.accelerations, argnums=(1, 2)))(
        system, zero, zero, 0.0
    )
    state = np.block([[np.zeros((3, 3)), np.eye(3)], [jac_q, jac_qd]])
    eigenvalues = np.linalg.eigvals(state)
    omega = 1.5 * np.linalg.norm(b) / 2.0
    assert np.allclose(np.sort(np.abs(eigenvalues.imag))[-2:], omega, rtol=1e-12)
    assert np.allclose(eigenvalues.real, 0.0, atol=1e-12)
    # The E × B drift: with E ⊥ B, moving at E × B / B² is force-free.
    e_perp = e - np.dot(e, b) / np.dot(b, b) * b
    crossed = jl.systems.charged_particle({**params, "E": e_perp}).system
    drift = np.cross(e_perp, b) / np.dot(b, b)
    assert jnp.allclose(_acceleration(crossed, zero, drift, 0.0), 0.0, atol=1e-14)


@pytest.mark.slow
def test_charged_particle_gyration_period():
    # B = 4 ẑ, E = 0.2 x̂: gyration at ω = qB/m = 3 about a guiding centre drifting
    # at E × B / B² = (0, −0.05, 0). Over one period the gyration cancels; half a
    # period on, the velocity is reflected about the drift velocity.
    fields = {"m": 2.0, "charge": 1.5, "B": [0.0, 0.0, 4.0], "E": [0.2, 0.0, 0.0]}
    ready = jl.systems.charged_particle(fields, qd0=[0.3, -0.7, 0.1])
    period = 2 * np.pi / 3.0
    traj = simulate_checked(ready, period, saves=3)
    drift = np.array([0.0, -0.05, 0.0])
    shift = traj.q[-1] - traj.q[0]
    assert jnp.allclose(shift, period * (drift + np.array([0.0, 0.0, 0.1])), atol=1e-9)
    assert jnp.allclose(traj.qd[-1], traj.qd[0], atol=1e-9)
    half, start = traj.qd[1, :2] - drift[:2], traj.qd[0, :2] - drift[:2]
    assert jnp.allclose(half, -start, atol=1e-9)


def test_kapitza_equation_and_stable_inverted_pendulum():
    params = {"m": 0.4, "l": 0.7, "g": 9.81, "a": 0.05, "omega": 30.0}
    system = jl.systems.kapitza(params).system
    qs, qds = _states(1)
    ts = np.array([0.0, 0.3, 1.7, 2.2, 5.0])
    qdd = _accelerations(system, qs, qds, ts)
    expected = -(9.81 - 0.05 * 30.0**2 * np.cos(30.0 * ts))[:, None] * np.sin(qs) / 0.7
    assert np.allclose(qdd, expected, rtol=1e-12)
    # A fast drive (a²ω² / (2gl) ≈ 5) holds it upright; a slow one (≈ 0.05) does not.
    fast = simulate_checked(jl.systems.kapitza(), 3.0, saves=301, tol=1e-9)
    assert jnp.max(jnp.abs(fast.q[:, 0] - jnp.pi)) < 0.35
    slow = simulate_checked(
        jl.systems.kapitza({"omega": 10.0}), 3.0, saves=301, tol=1e-9
    )
    assert jnp.max(jnp.abs(slow.q[:, 0] - jnp.pi)) > 1.5


@pytest.mark.parametrize(
    "name",
    ["cartesian_pendulum", "whipple_bicycle", "bouncing_ball", "mass_on_sphere"],
)
def test_a_float32_state_stays_float32_beside_float64_params(name):
    # Under x64 the ready systems' params are float64; a float32 state (the GPU's
    # choice) must keep its dtype through projections, events and impacts.
    system, q0, qd0 = jl.systems.make(name)
    q32, qd32 = q0.astype(jnp.float32), qd0.astype(jnp.float32)
    traj = jl.simulate(system, q32, qd32, t1=0.3, saveat=jnp.linspace(0, 0.3, 4))
    ref = jl.simulate(system, q0, qd0, t1=0.3, saveat=jnp.linspace(0, 0.3, 4))
    assert traj.q.dtype == traj.qd.dtype == jnp.float32
    np.testing.assert_allclose(traj.q, ref.q, atol=2e-3)
