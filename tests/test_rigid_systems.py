"""The rigid-body ready systems (issue 31): the heavy top and the free rigid
body against their closed forms, Euler's equations and finite differences.

Compiling a rigid body's simulation takes 10-40 s on a loaded 2-core machine,
so each system is compiled once (module fixtures reused by several checks,
varying only traced values: initial state, t1, params).
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.integrate import solve_ivp

import jaxlagrange as jl


def _quaternion(p, t):
    return jl.rigid.quaternion_to_matrix(p)


# The heavy top.

TOP = {"m": 1.0, "l": 0.5, "I1": 0.35, "I3": 0.2, "g": 9.81}
TOP_TOL = 1e-12


@pytest.fixture(scope="module")
def top_run():
    """θ, the states and the top at 101 times in [0, t1], one compilation."""
    top = jl.systems.heavy_top().system

    def run(q0, qd0, t1, params=None):
        system = top if params is None else jl.systems.heavy_top(params).system
        saveat = jnp.linspace(0.0, t1, 101)
        return jl.simulate(system, q0, qd0, t1=t1, saveat=saveat, rtol=TOP_TOL,
                           atol=TOP_TOL, max_steps=100_000)  # fmt: skip

    return top, run


def _precession_rate(theta, omega3, p=TOP):
    """The slow root Ω of I₁ Ω² cos θ − I₃ ω₃ Ω + m g l = 0."""
    a, b, c = p["I1"] * np.cos(theta), -p["I3"] * omega3, p["m"] * p["g"] * p["l"]
    return (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)


def test_heavy_top_steady_precession(top_run):
    top, run = top_run
    theta, omega3 = 0.5, 20.0
    rate = _precession_rate(theta, omega3)
    q0 = jnp.array([0.0, theta, 0.0])
    qd0 = jnp.array([rate, 0.0, omega3 - rate * np.cos(theta)])
    traj = run(q0, qd0, 2.0)
    # θ stays put (measured 3e-12) and φ turns at the constant rate Ω.
    assert np.max(np.abs(traj.q[:, 1] - theta)) < 1e-9
    np.testing.assert_allclose(traj.q[:, 0], rate * np.asarray(traj.ts), atol=1e-9)
    # A rate 1 % off the root nutates: the test can tell.
    off = run(q0, qd0.at[0].multiply(1.01), 2.0)
    assert np.max(np.abs(off.q[:, 1] - theta)) > 1e-5


def test_heavy_top_conserves_energy_and_cyclic_momenta(top_run):
    top, run = top_run
    ready = jl.systems.heavy_top()
    traj = run(ready.q0, ready.qd0, 3.0)
    energy = jax.vmap(lambda q, qd: jl.energy(top, q, qd, 0.0))(traj.q, traj.qd)
    momenta = jax.vmap(lambda q, qd: jl.momenta(top, q, qd, 0.0))(traj.q, traj.qd)
    # It nutates (θ moves by 0.09 rad) while E, p_φ and p_ψ = I₃ ω₃ stay
    # (measured drifts below 1e-10 relative at rtol = atol = 1e-12).
    assert np.ptp(np.asarray(traj.q[:, 1])) > 0.05
    assert np.max(np.abs(energy - energy[0])) < 1e-9 * np.abs(energy[0])
    for i in (0, 2):
        assert np.max(np.abs(momenta[:, i] - momenta[0, i])) < 1e-9 * np.abs(
            momenta[0, 2]
        )
    omega3 = ready.qd0[2] + ready.qd0[0] * np.cos(ready.q0[1])
    np.testing.assert_allclose(momenta[0, 2], TOP["I3"] * omega3, rtol=1e-14)


def _xyz_top(params):
    """The same top in XYZ angles, regular at upright (θ = 0 is singular in ZXZ)."""

    def rotation(q, t):
        return jl.rigid.euler_to_matrix(q, "XYZ")

    def lagrangian(q, qd, t, p):
        centre = lambda q, t: p["l"] * rotation(q, t)[:, 2]  # noqa: E731
        transverse = p["I1"] - p["m"] * p["l"] ** 2
        moments = jnp.stack([transverse, transverse, p["I3"]])
        kinetic = jl.rigid.kinetic_energy(p["m"], moments, centre, rotation, q, qd, t)
        return kinetic - p["m"] * p["g"] * centre(q, t)[2]

    return jl.LagrangianSystem(lagrangian, params=params)


def _sorted(z):
    """Complex numbers by imaginary, then real part (rounded: roundoff ties)."""
    z = np.asarray(z, complex)
    return z[np.lexsort((np.round(z.real, 6), np.round(z.imag, 6)))]


def test_sleeping_top_stability_threshold_from_linearize():
    system = _xyz_top({k: jnp.asarray(v) for k, v in TOP.items()})
    threshold = np.sqrt(4 * TOP["I1"] * TOP["m"] * TOP["g"] * TOP["l"]) / TOP["I3"]
    factors = np.array([0.5, 0.9, 0.99, 1.01, 1.1, 2.0])

    @jax.jit
    @jax.vmap
    def eigenvalues(omega3):
        lin = jl.linearize(system, jnp.zeros(3), jnp.array([0.0, 0.0, 1.0]) * omega3)
        return jnp.linalg.eigvals(lin.A)

    found = np.asarray(eigenvalues(jnp.asarray(factors * threshold)))
    i1, i3, mgl = TOP["I1"], TOP["I3"], TOP["m"] * TOP["g"] * TOP["l"]
    for factor, eig in zip(factors, found, strict=True):
        omega3 = factor * threshold
        # I₁ λ² − i I₃ ω₃ λ − m g l = 0 and its conjugate, and 0, 0 for the spin.
        root = np.sqrt(complex(4 * i1 * mgl - (i3 * omega3) ** 2))
        lam = (1j * i3 * omega3 + np.array([root, -root])) / (2 * i1)
        expected = np.concatenate([lam, np.conj(lam), [0.0, 0.0]])
        np.testing.assert_allclose(_sorted(eig), _sorted(expected), atol=1e-9)
        stable = np.max(eig.real) < 1e-9
        assert stable == (i3**2 * omega3**2 > 4 * i1 * mgl), (factor, eig)


def test_heavy_top_gradient_matches_finite_differences(top_run):
    _, run = top_run
    q0, t1 = jnp.array([0.0, 0.4, 0.0]), 0.5

    def theta_end(x):
        i3, spin = x
        params = {**TOP, "I3": i3}
        return run(q0, jnp.array([0.0, 0.0, spin]), t1, params).q[-1, 1]

    x = jnp.array([TOP["I3"], 15.0])
    grad = jax.grad(theta_end)(x)
    step = 1e-5
    fd = [
        (theta_end(x.at[i].add(step)) - theta_end(x.at[i].add(-step))) / (2 * step)
        for i in range(2)
    ]
    np.testing.assert_allclose(grad, fd, rtol=1e-6)
    assert np.all(np.abs(np.asarray(fd)) > 1e-3)


# The free rigid body.

BODY = (1.0, 2.0, 3.0)
OMEGA0 = np.array([0.01, 2.0, 0.0])  # near the intermediate axis: it flips
BODY_TOL = 1e-11


def _euler_equations(t1, saves):
    """ω of I ω̇ = (I ω) × ω, integrated by SciPy's DOP853 at rtol = 1e-13."""
    inertia = np.array(BODY)

    def rhs(t, w):
        return np.cross(inertia * w, w) / inertia

    done = solve_ivp(rhs, (0.0, t1), OMEGA0, method="DOP853", t_eval=saves,
                     rtol=1e-13, atol=1e-14)  # fmt: skip
    return done.y.T


@pytest.fixture(scope="module")
def body_run():
    ready = jl.systems.free_rigid_body()
    p0 = jnp.array([1.0, 0.0, 0.0, 0.0])
    pd0 = jnp.concatenate([jnp.zeros(1), 0.5 * jnp.asarray(OMEGA0)])

    def run(t1, solver=None, dt0=None):
        saveat = jnp.linspace(0.0, t1, 241)
        return jl.simulate(ready.system, p0, pd0, t1=t1, saveat=saveat, rtol=BODY_TOL,
                           atol=BODY_TOL, solver=solver, dt0=dt0,
                           max_steps=1_000_000)  # fmt: skip

    def omega(traj):
        return jax.vmap(lambda p, pd: jl.rigid.angular_velocity(_quaternion, p, pd))(
            traj.q, traj.qd
        )

    return ready, run, omega


def test_free_body_matches_eulers_equations_through_a_flip(body_run):
    ready, run, omega = body_run
    traj = run(12.0)
    got = np.asarray(omega(traj))
    expected = _euler_equations(12.0, np.asarray(traj.ts))
    # The spin about the intermediate axis turns over (ω₂ from 2 to about −2).
    assert expected[:, 1].min() < -1.9 and got[:, 1].min() < -1.9
    # Measured 1.5e-8; the flip amplifies errors about 1000-fold.
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-7)
    # It passes smoothly through the orientations where Euler angles are singular:
    # R₃₃ = cos θ of ZXZ reaches ±1 (the start is the identity; a half turn about
    # the intermediate axis brings R₃₃ to −1).
    r33 = np.asarray(jax.vmap(jl.rigid.quaternion_to_matrix)(traj.q)[:, 2, 2])
    assert r33[0] == 1.0 and r33.min() < -0.999


def test_free_body_conserves_energy_and_angular_momentum(body_run):
    ready, run, omega = body_run
    w = np.asarray(omega(run(12.0)))
    inertia = np.array(BODY)
    energy = 0.5 * np.sum(inertia * w * w, axis=1)
    momentum = np.linalg.norm(inertia * w, axis=1)
    assert np.max(np.abs(energy / energy[0] - 1)) < 1e-9
    assert np.max(np.abs(momentum / momentum[0] - 1)) < 1e-9
    energies = jax.vmap(lambda q, qd: jl.energy(ready.system, q, qd, 0.0))
    traj = run(12.0)
    np.testing.assert_allclose(energies(traj.q, traj.qd), energy[0], rtol=1e-9)


def test_free_body_stays_a_unit_quaternion(body_run):
    # No constraint: the norm term decouples |p|, which moves as a free particle
    # and so drifts only by the solver's error in d|p|/dt (measured 1.3e-7 over
    # 200 s at a tolerance of 1e-10, 5.5e-10 at 1e-12).
    _, run, _ = body_run
    long = run(200.0)
    assert np.max(np.abs(np.sum(np.asarray(long.q) ** 2, axis=1) - 1)) < 1e-8
    # The variational integrator keeps it to the Newton solve's roundoff (before
    # its stopping rule was scaled, every step failed: implicit_step_failed).
    midpoint = run(4.0, solver=jl.VariationalMidpoint(), dt0=0.01)
    assert np.max(np.abs(np.sum(np.asarray(midpoint.q) ** 2, axis=1) - 1)) < 1e-12
    assert np.all(np.isfinite(np.asarray(midpoint.q)))


def test_free_body_mass_matrix_regular_at_euler_singular_orientations():
    ready = jl.systems.free_rigid_body()
    # The identity (θ = 0 of ZXZ) and a half turn about x (θ = π): M has the
    # eigenvalues 4 I₁, 4 I₂, 4 I₃ and 4 J, J the mean moment, at any orientation.
    for p in ([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]):
        m = jl.mass_matrix(ready.system, jnp.array(p), jnp.zeros(4), 0.0)
        np.testing.assert_allclose(
            np.linalg.eigvalsh(m), [4.0, 8.0, 8.0, 12.0], rtol=1e-14
        )
