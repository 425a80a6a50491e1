"""Constrained dynamics against the closed forms of the reference chapter.

D. Cline, *Variational Principles in Classical Mechanics*, ch. 6 (Lagrangian
dynamics), examples 6.8.1-6.8.7.

Sign convention (eq. 6.60): d/dt ∂L/∂q̇ − ∂L/∂q = Q + Σ λₖ ∂gₖ/∂q.

Each `simulate` of a new system compiles the solver, which dominates the run
time of this file: the tests share one compiled function per system.
"""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.special
from helpers import falling_lagrangian

import jaxlagrange as jl


G = 9.81


def _at(system, q, qd, t=0.0):
    q, qd = jnp.asarray(q, float), jnp.asarray(qd, float)
    return (
        np.asarray(jl.accelerations(system, q, qd, t)),
        np.asarray(jl.multipliers(system, q, qd, t)),
    )


# Accelerations and multipliers at a state.


@pytest.mark.parametrize("rolling", ["holonomic", "nonholonomic"])
def test_disk_rolling_down_an_incline(rolling):
    # Example 6.8.1: ÿ = ⅔ g sin α, and the friction multiplier λ = −m g sin α / 3
    # (eq. 6.60: m ÿ − m g sin α = λ, the friction points up the slope).
    params = {"m": 2.0, "R": 0.3, "alpha": 0.4}
    system, _, _ = jl.systems.rolling_disk(params, rolling=rolling)
    sin = np.sin(0.4)
    for y, speed in [(0.0, 0.0), (1.3, 2.0), (-0.7, -1.1)]:
        q, qd = [y, y / 0.3], [speed, speed / 0.3]
        qdd, lam = _at(system, q, qd)
        np.testing.assert_allclose(
            qdd, [2 / 3 * G * sin, 2 / 3 * G * sin / 0.3], rtol=1e-10
        )
        np.testing.assert_allclose(lam, [-2.0 * G * sin / 3], rtol=1e-10)
        force = jl.constraint_force(system, jnp.array(q), jnp.array(qd), 0.0)
        # Cᵀλ: the friction on y, and its torque −R λ = I φ̈ on φ.
        np.testing.assert_allclose(
            force, [-2 * G * sin / 3, 0.3 * 2 * G * sin / 3], rtol=1e-10
        )


def _string_over_inclines(q, qd, t, params):
    m1, m2, th1, th2 = params
    kinetic = 0.5 * m1 * qd[0] ** 2 + 0.5 * m2 * qd[1] ** 2
    # x₁, x₂: distances down each incline from the pulley at the apex.
    return kinetic + G * (m1 * q[0] * jnp.sin(th1) + m2 * q[1] * jnp.sin(th2))


def _string(q, t, params):
    return jnp.stack([q[0] + q[1] - 3.0])


@pytest.mark.parametrize(
    "m1, m2, th1, th2",
    [(1.0, 2.0, 0.7, 0.3), (3.0, 1.0, 0.2, 1.1), (2.0, 1.0, np.pi / 2, np.pi / 2)],
)
def test_two_masses_on_inclines_joined_by_a_string(m1, m2, th1, th2):
    # Example 6.8.2: (m₁ + m₂) ẍ₁ = g (m₁ sin θ₁ − m₂ sin θ₂); the last case is
    # Atwood's machine, (m₁ + m₂) ẍ₁ = g (m₁ − m₂). The string's tension
    # T = m₁m₂ g (sin θ₁ + sin θ₂)/(m₁ + m₂) pulls each mass up its slope: λ = −T.
    system = jl.LagrangianSystem(
        _string_over_inclines, params=(m1, m2, th1, th2), holonomic=_string
    )
    qdd, lam = _at(system, [1.0, 2.0], [0.5, -0.5])
    a1 = G * (m1 * np.sin(th1) - m2 * np.sin(th2)) / (m1 + m2)
    tension = m1 * m2 * G * (np.sin(th1) + np.sin(th2)) / (m1 + m2)
    np.testing.assert_allclose(qdd, [a1, -a1], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lam, [-tension], rtol=1e-10)


def _block_and_wedge(q, qd, t, params):
    m, big_m = params["m"], params["M"]
    # q = (x, y) of the block, X of the wedge on the frictionless floor.
    return 0.5 * m * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * big_m * qd[2] ** 2 - m * G * q[1]


def _on_slope(q, t, params):
    th = params["theta"]
    # The slope y = h − (x − X) tan θ, as a signed distance (unit gradient).
    return jnp.stack([(q[1] - 2.0) * jnp.cos(th) + (q[0] - q[2]) * jnp.sin(th)])


def test_block_on_a_movable_incline():
    # Example 6.8.3: ẍ' = g sin θ / (1 − m cos²θ / (m + M)) down the slope relative
    # to the wedge; momentum conservation gives the wedge Ẍ = −m cos θ ẍ' / (m + M);
    # the normal force is N = m M g cos θ / (M + m sin²θ) = λ.
    m, big_m, th = 1.5, 4.0, 0.6
    system = jl.LagrangianSystem(
        _block_and_wedge, params={"m": m, "M": big_m, "theta": th}, holonomic=_on_slope
    )
    q = [0.5, 2.0 - 0.5 * np.tan(th), 0.0]
    relative = 0.8 * np.array([np.cos(th), -np.sin(th)])
    qd = [relative[0] - 0.2, relative[1], -0.2]
    qdd, lam = _at(system, q, qd)
    slide = G * np.sin(th) / (1 - m * np.cos(th) ** 2 / (m + big_m))
    wedge = -m * np.cos(th) * slide / (m + big_m)
    along = (qdd[0] - qdd[2]) * np.cos(th) - qdd[1] * np.sin(th)
    np.testing.assert_allclose([along, qdd[2]], [slide, wedge], rtol=1e-10)
    normal = m * big_m * G * np.cos(th) / (big_m + m * np.sin(th) ** 2)
    np.testing.assert_allclose(lam, [normal], rtol=1e-10)


def _paraboloid_lagrangian(q, qd, t, params):
    rho = q[0]
    kinetic = 0.5 * params["m"] * (qd[0] ** 2 + rho**2 * qd[1] ** 2 + qd[2] ** 2)
    return kinetic - params["m"] * G * q[2]


def _paraboloid(q, t, params):
    return jnp.stack([q[0] ** 2 - params["a"] * q[2]])


_PARABOLOID = jl.LagrangianSystem(
    _paraboloid_lagrangian, params={"m": 2.0, "a": 0.5}, holonomic=_paraboloid
)


def _circular_orbit(rho0=0.8, a=0.5):
    q0 = jnp.array([rho0, 0.0, rho0**2 / a])
    return q0, jnp.array([0.0, np.sqrt(2 * G / a), 0.0])


def test_circular_orbit_on_a_paraboloid_multiplier():
    # Example 6.8.7, ρ² = a z in cylindrical (ρ, φ, z): a circular orbit needs
    # φ̇ = ω = √(2g/a) at any height; the z equation m z̈ + m g = −a λ gives
    # λ = −m g / a, and the constraint force λ ∂g/∂ρ = −m ρ ω² is centripetal.
    q0, qd0 = _circular_orbit()
    qdd, lam = _at(_PARABOLOID, q0, qd0)
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)
    np.testing.assert_allclose(lam, [-2.0 * G / 0.5], rtol=1e-10)
    force = jl.constraint_force(_PARABOLOID, q0, qd0, 0.0)
    np.testing.assert_allclose(force[0], -2.0 * 0.8 * 2 * G / 0.5, rtol=1e-10)


def test_cartesian_pendulum_matches_minimal_coordinates():
    # θ = atan2(x, −y): ẍ = l(θ̈ cos θ − θ̇² sin θ), ÿ = l(θ̈ sin θ + θ̇² cos θ).
    params = {"m": 1.5, "l": 0.7}
    system, _, _ = jl.systems.cartesian_pendulum(params)
    minimal, _, _ = jl.systems.pendulum(params)
    for theta, omega in [(0.3, 0.0), (2.5, -1.2), (-1.0, 3.0)]:
        s, c = np.sin(theta), np.cos(theta)
        q, qd = [0.7 * s, -0.7 * c], [0.7 * c * omega, 0.7 * s * omega]
        qdd, lam = _at(system, q, qd)
        alpha = float(
            jl.accelerations(minimal, jnp.array([theta]), jnp.array([omega]), 0.0)[0]
        )
        expected = 0.7 * np.array([alpha * c - omega**2 * s, alpha * s + omega**2 * c])
        np.testing.assert_allclose(qdd, expected, rtol=1e-10, atol=1e-12)
        tension = 1.5 * 0.7 * omega**2 + 1.5 * G * c
        np.testing.assert_allclose(lam, [-tension], rtol=1e-10)


def _bobs(th):
    x1, y1 = jnp.sin(th[0]), -jnp.cos(th[0])
    return jnp.stack([x1, y1, x1 + jnp.sin(th[1]), y1 - jnp.cos(th[1])])


def test_cartesian_double_pendulum_matches_minimal_coordinates():
    system, _, _ = jl.systems.cartesian_double_pendulum()
    minimal, _, _ = jl.systems.double_pendulum()
    th, om = jnp.array([0.4, -1.3]), jnp.array([1.1, -0.6])
    q, qd = jax.jvp(_bobs, (th,), (om,))
    qdd, _ = _at(system, q, qd)
    alpha = jl.accelerations(minimal, th, om, 0.0)

    # The Cartesian accelerations along the minimal path, d/dt (J θ̇).
    def velocity(th, om):
        return jax.jvp(_bobs, (th,), (om,))[1]

    expected = jax.jvp(velocity, (th, om), (om, alpha))[1]
    np.testing.assert_allclose(qdd, expected, rtol=1e-10, atol=1e-12)


# Simulations.


def _disk_y(alpha, q0, qd0):
    system, _, _ = jl.systems.rolling_disk({"alpha": alpha})
    traj = jl.simulate(
        system, q0, qd0, t1=1.5, saveat=jnp.array([0.5, 1.5]), rtol=1e-10, atol=1e-10
    )
    return traj.q[-1, 0], traj


# One compiled function for the trajectory, its gradient, the finite differences
# and the consistency check under jit.
_disk = eqx.filter_jit(jax.value_and_grad(_disk_y, has_aux=True))


def test_disk_trajectory_and_gradient_through_the_constraint():
    # y(t) = ⅓ g sin α t² from rest, so ∂y(t)/∂α = ⅓ g cos α t².
    alpha, zero = jnp.array(0.4), jnp.zeros(2)
    (y, traj), grad = _disk(alpha, zero, zero)
    expected = G * np.sin(0.4) / 3 * traj.ts**2
    np.testing.assert_allclose(traj.q[:, 0], expected, rtol=1e-8)
    np.testing.assert_allclose(traj.q[:, 0], 0.5 * traj.q[:, 1], rtol=1e-12)
    np.testing.assert_allclose(traj.multipliers, -G * np.sin(0.4) / 3, rtol=1e-8)
    h = 1e-5
    (plus, _), _ = _disk(alpha + h, zero, zero)
    (minus, _), _ = _disk(alpha - h, zero, zero)
    np.testing.assert_allclose(grad, (plus - minus) / (2 * h), rtol=1e-7)
    np.testing.assert_allclose(grad, G * np.cos(0.4) / 3 * 1.5**2, rtol=1e-8)


def test_simulate_refuses_an_inconsistent_state_under_jit():
    # y − Rφ = 0.01: off the manifold. Under jit the check is an `eqx.error_if`.
    alpha = jnp.array(0.4)
    with pytest.raises(
        Exception, match="off the constraint manifold.*project_initial_state"
    ):
        _disk(alpha, jnp.array([0.01, 0.0]), jnp.zeros(2))
    with pytest.raises(Exception, match="velocity constraints.*project_initial_state"):
        _disk(alpha, jnp.zeros(2), jnp.array([1.0, 0.0]))


def test_rotating_rod_slides_out_as_cosh():
    # Example 6.8.5 with θ̇ = ω imposed (rheonomic): r = r₀ cosh ωt and the rod
    # pushes with λ = 2 m ω ṙ = 2 m r₀ ω² sinh ωt along its normal.
    params = {"m": 1.3, "omega": 1.7}
    system, q0, qd0 = jl.systems.rotating_rod(params, q0=[0.6, 0.0], qd0=[0.0, 1.02])
    ts = jnp.linspace(0.0, 2.0, 21)
    traj = jl.simulate(system, q0, qd0, t1=2.0, saveat=ts, rtol=1e-10, atol=1e-10)
    w = 1.7 * np.asarray(ts)
    r = 0.6 * np.cosh(w)
    np.testing.assert_allclose(
        traj.q, np.stack([r * np.cos(w), r * np.sin(w)], 1), rtol=1e-8
    )
    np.testing.assert_allclose(
        traj.multipliers[:, 0],
        2 * 1.3 * 0.6 * 1.7**2 * np.sinh(w),
        rtol=1e-8,
        atol=1e-10,
    )


def test_circular_orbit_on_a_paraboloid_holds_for_30s():
    q0, qd0 = _circular_orbit()
    ts = jnp.linspace(0.0, 30.0, 301)
    traj = jl.simulate(_PARABOLOID, q0, qd0, t1=30.0, saveat=ts, rtol=1e-10, atol=1e-10)
    omega = np.sqrt(2 * G / 0.5)
    np.testing.assert_allclose(traj.q[:, 0], 0.8, rtol=1e-8)
    np.testing.assert_allclose(traj.q[:, 2], 0.8**2 / 0.5, rtol=1e-8)
    np.testing.assert_allclose(traj.q[:, 1], omega * ts, rtol=1e-8)
    np.testing.assert_allclose(traj.multipliers[:, 0], -2.0 * G / 0.5, rtol=1e-8)


def _coin_path(t, v0, omega, alpha):
    # See `jl.systems.rolling_coin`: k = ⅔ g sin α along +x.
    k = 2 / 3 * G * np.sin(alpha)
    w = omega * t
    x = v0 / omega * np.sin(w) + k * np.sin(w) ** 2 / (2 * omega**2)
    y = v0 / omega * (1 - np.cos(w)) + k * (w - 0.5 * np.sin(2 * w)) / (2 * omega**2)
    return np.stack([x, y], axis=-1)


_COIN_TS = jnp.linspace(0.0, 8.0, 41)


def _coin(alpha, qd0):
    system, q0, _ = jl.systems.rolling_coin({"alpha": alpha, "R": 0.5})
    return jl.simulate(system, q0, qd0, t1=8.0, saveat=_COIN_TS, rtol=1e-10, atol=1e-10)


def test_rolling_coin_closed_form_vmap_and_jit():
    # The knife edge / vertical coin: a circle on the level plane; on a tilted
    # plane it drifts across the slope, not down it.
    alphas = jnp.array([0.0, 0.3])
    qd0 = jnp.array([[1.0, 0.0, 1.3, 2.0], [0.6, 0.0, 0.9, 1.2]])
    batched = jax.jit(jax.vmap(_coin))(alphas, qd0)
    for i in range(2):
        single = _coin(alphas[i], qd0[i])  # eager, one member at a time
        np.testing.assert_allclose(batched.q[i], single.q, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(
            batched.multipliers[i], single.multipliers, rtol=1e-10, atol=1e-12
        )
        expected = _coin_path(
            np.asarray(_COIN_TS), float(qd0[i, 0]), float(qd0[i, 2]), float(alphas[i])
        )
        np.testing.assert_allclose(single.q[:, :2], expected, atol=1e-8)
        np.testing.assert_allclose(single.q[:, 2], qd0[i, 2] * _COIN_TS, atol=1e-9)


def test_cartesian_pendulum_long_run_stays_on_its_circle():
    # 200 s (~94 periods) with the default drift control (projection) at
    # rtol = atol = 1e-10: the Tsit5 energy error, not the constraint, sets the
    # drift (the same as in minimal coordinates).
    theta0, length = 1.0, 1.0
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    k = np.sin(theta0 / 2)
    period = 4 * np.sqrt(length / G) * scipy.special.ellipk(k**2)
    laps = np.arange(int(200 / period) + 1) * period
    ts = np.union1d(np.linspace(0.0, 200.0, 1001), laps)
    traj = jl.simulate(
        system,
        q0,
        qd0,
        t1=200.0,
        saveat=jnp.asarray(ts),
        rtol=1e-10,
        atol=1e-10,
        max_steps=50_000,
    )
    q, qd = np.asarray(traj.q), np.asarray(traj.qd)
    position = np.abs(np.sum(q**2, 1) - length**2) / (2 * length)
    velocity = np.abs(np.sum(q * qd, 1)) / length
    energy = 0.5 * np.sum(qd**2, 1) + G * q[:, 1]
    drift = np.max(np.abs(energy - energy[0])) / abs(energy[0])
    assert position.max() <= 1e-8 and velocity.max() <= 1e-7
    # Measured: 2.1e-8 (the minimal-coordinate pendulum: 1.5e-8).
    assert drift <= 1e-7
    # θ(t) = 2 arcsin(k sn(K − ω₀t, k²)) from rest at θ0.
    theta = np.arctan2(q[:, 0], -q[:, 1])
    sn, _, _, _ = scipy.special.ellipj(
        scipy.special.ellipk(k**2) - np.sqrt(G / length) * ts, k**2
    )
    np.testing.assert_allclose(theta, 2 * np.arcsin(k * sn), atol=1e-6)
    # After whole periods the bob is back at rest at θ0: its speed there is the
    # accumulated period error times g sin θ0 (measured: a relative period error
    # of 9e-10).
    at_laps = np.isin(ts, laps) & (ts > 0)
    lag = np.hypot(qd[at_laps, 0], qd[at_laps, 1]) / (G * np.sin(theta0))
    assert np.max(lag / ts[at_laps]) <= 1e-8


# Initial states.


def test_project_initial_state_onto_the_manifold():
    # Linear constraint: one step of least M-norm is exact. With M = diag(m, ½mR²)
    # and g = y − Rφ, Δ = −g (1/3, −2/(3R)); the same weights for the velocities.
    system, _, _ = jl.systems.rolling_disk({"R": 0.5})
    q, qd = jl.project_initial_state(
        system, jnp.array([0.3, 0.0]), jnp.array([1.0, 0.0])
    )
    np.testing.assert_allclose(q, [0.2, 0.4], rtol=1e-14)
    np.testing.assert_allclose(qd, [2 / 3, 4 / 3], rtol=1e-14)

    cases = [
        (
            jl.systems.cartesian_pendulum({"l": 2.0}).system,
            [1.0, -2.5],
            [0.7, 0.4],
            0.0,
        ),
        (jl.systems.rotating_rod({"omega": 2.0}).system, [0.9, 0.5], [0.1, 0.0], 0.7),
        (
            jl.systems.rolling_coin().system,
            [0.1, 0.2, 0.4, 0.0],
            [1.0, 0.3, 1.0, 0.5],
            0.0,
        ),
        (
            jl.systems.cartesian_double_pendulum().system,
            [0.8, -0.4, 1.5, -0.2],
            [1.0, 0.0, 0.0, 1.0],
            0.0,
        ),
    ]
    for system, q0, qd0, t0 in cases:
        q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
        with pytest.raises(ValueError, match="project_initial_state"):
            jl.simulate(system, q0, qd0, t0=t0, t1=t0 + 1.0)
        q, qd = jl.project_initial_state(system, q0, qd0, t0)
        one = jnp.ones(())
        if system.holonomic is not None:
            g, gd = jax.jvp(
                lambda q, t, system=system: system.holonomic(q, t, system.params),
                (q, jnp.asarray(t0)),
                (qd, one),
            )
            assert np.max(np.abs(g)) <= 1e-12 and np.max(np.abs(gd)) <= 1e-12
        if system.nonholonomic is not None:
            a = system.nonholonomic(q, qd, t0, system.params)
            assert np.max(np.abs(a)) <= 1e-12
        again = jl.project_initial_state(system, q, qd, t0)  # idempotent
        np.testing.assert_allclose(again[0], q, atol=1e-14)
        np.testing.assert_allclose(again[1], qd, atol=1e-14)
    # Under jit (and differentiable): the pendulum of length 2 from a radius 2.5.
    system = cases[0][0]

    def radius(scale):
        q, _ = jl.project_initial_state(
            system, scale * jnp.array([1.5, -2.0]), jnp.zeros(2)
        )
        return jnp.sqrt(q @ q)

    value, grad = jax.jit(jax.value_and_grad(radius))(1.0)
    np.testing.assert_allclose([value, grad], [2.0, 0.0], atol=1e-12)


def test_simulate_refuses_inconsistent_states_naming_the_residual():
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    with pytest.raises(
        ValueError, match=re.escape("max |g| = 0.05") + ".*project_initial_state"
    ):
        jl.simulate(system, 1.05 * q0, qd0, t1=1.0)
    with pytest.raises(
        ValueError, match=r"velocity constraints \(max \|dg/dt\| = 0.54"
    ):
        jl.simulate(system, q0, jnp.array([0.0, -1.0]), t1=1.0)
    coin, q0, qd0 = jl.systems.rolling_coin()
    with pytest.raises(ValueError, match=r"max \|a\| = 0.5"):
        jl.simulate(coin, q0, qd0.at[1].set(0.5), t1=1.0)


def _redundant(q, t):
    # The second row is twice the first: C has rank 1.
    return jnp.stack([q[0] ** 2 + q[1] ** 2 - 1.0, 2 * (q[0] ** 2 + q[1] ** 2 - 1.0)])


def test_redundant_constraints_are_solved_least_norm():
    # [g, 2g]: q̈ as with g alone, λ the least-norm split of its multiplier,
    # (1, 2)/5 of it; the projection takes the least-norm step.
    system = jl.LagrangianSystem(falling_lagrangian, holonomic=_redundant)
    single = jl.LagrangianSystem(
        falling_lagrangian, holonomic=lambda q, t: _redundant(q, t)[:1]
    )
    q, qd = jnp.array([0.6, -0.8]), jnp.array([0.8, 0.6])
    np.testing.assert_allclose(
        jl.accelerations(system, q, qd, 0.0),
        jl.accelerations(single, q, qd, 0.0),
        atol=1e-12,
    )
    lam = jl.multipliers(single, q, qd, 0.0)[0]
    np.testing.assert_allclose(
        jl.multipliers(system, q, qd, 0.0), [lam / 5, 2 * lam / 5], rtol=1e-12
    )
    q0, _ = jl.project_initial_state(system, 1.1 * q, jnp.zeros(2))
    np.testing.assert_allclose(q0, q, atol=1e-12)


def test_unilateral_constraints_are_inequalities():
    # h ≥ 0 is not projected; only a start below the surface is refused.
    def above_floor(q, t):
        return q[1:2] + 2.0

    system = jl.LagrangianSystem(falling_lagrangian, unilateral=above_floor)
    q, qd = jl.project_initial_state(
        system, jnp.array([0.0, 1.0]), jnp.array([0.0, 1.0])
    )
    np.testing.assert_array_equal(q, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"h\(q0, t0\) < 0"):
        jl.simulate(system, jnp.array([0.0, -2.5]), jnp.zeros(2), t1=1.0)


@pytest.mark.slow
def test_projection_with_other_adjoints_and_implicit_solvers():
    # The projection reads the system from the solve's args, so that
    # BacksolveAdjoint sees its params as inputs; implicit solvers get the
    # step-size controller's tolerances through the wrapper.
    import diffrax

    def final_y(alpha):
        system, q0, qd0 = jl.systems.rolling_disk({"alpha": alpha})
        traj = jl.simulate(
            system,
            q0,
            qd0,
            t1=1.0,
            adjoint=diffrax.BacksolveAdjoint(),
            solver=diffrax.Kvaerno5(),
            rtol=1e-10,
            atol=1e-10,
        )
        return traj.q[-1, 0]

    np.testing.assert_allclose(jax.grad(final_y)(0.4), G * np.cos(0.4) / 3, rtol=1e-7)


def test_cli_names_an_inconsistent_initial_state(tmp_path, capsys):
    from jaxlagrange import _cli

    config = tmp_path / "off.toml"
    config.write_text(
        "[system]\nname = 'cartesian_pendulum'\n[initial]\nq = [1.0, 1.0]\n"
        "[simulate]\nt1 = 1.0\n"
    )
    status = _cli.main(["run", str(config), "--out", str(tmp_path / "o"), "--quiet"])
    err = capsys.readouterr().err
    assert status != 0
    assert err.count("\n") == 1 and "Traceback" not in err
    assert re.search(
        r"\[initial\] state of 'cartesian_pendulum': .*off the constraint manifold"
        r".*max \|g\| = 0\.5\b",
        err,
    )
