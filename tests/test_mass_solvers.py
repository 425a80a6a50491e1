"""Every solve with the mass matrix, crossed over the `mass_solver`s.

Each case computes one quantity with `mass_solver=None` (the dense unrolled
Cholesky, the reference) and with `lineax.Cholesky()`, `lineax.LU()` and
`lineax.CG(rtol=1e-12, atol=1e-12)`, and checks that they agree: to 1e-10 for
the direct solvers and 1e-8 for CG. The reference itself is checked against a
closed form where there is one, and always for being far from zero, so that an
agreement of two zeros cannot pass. Cases that a path does not support yet are
xfail (not strict), with the reason; `test_mass_solver_used.py` checks that each
path solves with the user's solver. Small systems and short spans, for CI's two
cores: the cases that simulate run one solver unless `-m slow`.
"""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from friction_systems import WHEEL, ball, block, wheel
from helpers import (
    MASS_SOLVERS,
    G,
    cartesian_chain,
    cartesian_pendulum,
    chain_state,
    degenerating_lagrangian,
    off_chain_state,
    pendulum_chain,
    pendulum_state,
)

import jaxlagrange as jl


SOLVERS = MASS_SOLVERS
TOLERANCE = {"cholesky": 1e-10, "lu": 1e-10, "cg": 1e-8}


@pytest.fixture(params=list(SOLVERS))
def solver(request):
    """The name of a `mass_solver` to cross with the dense reference."""
    return request.param


def quick_with(default):
    """The solvers for a case that simulates: `default` in the quick set, the
    others marked slow (each solver compiles the whole solve again)."""
    slow = pytest.mark.slow
    return [pytest.param(n, marks=() if n == default else slow) for n in SOLVERS]


def with_solver(system, name):
    return system.with_mass_solver(SOLVERS[name])


def assert_matches(name, other, dense, *, scale=1.0):
    """`other` equals `dense` to the solver's tolerance (relative to `scale`)."""
    np.testing.assert_allclose(
        np.asarray(other), np.asarray(dense), rtol=0, atol=TOLERANCE[name] * scale
    )


def assert_nontrivial(x, least=1e-2):
    assert np.max(np.abs(np.asarray(x))) > least


def state_functions(system, q, qd, t, name):
    """q̈ and the multipliers with the dense solve and with `name`'s, checked."""
    crossed = with_solver(system, name)
    for fn in (jl.accelerations, jl.multipliers):
        dense = fn(system, q, qd, t)
        assert_matches(
            name, fn(crossed, q, qd, t), dense, scale=1 + np.abs(dense).max(initial=0.0)
        )
    return jl.accelerations(system, q, qd, t), jl.multipliers(system, q, qd, t)


# The equations of motion.


def test_unconstrained(solver):
    # The double pendulum (a dense 2 × 2 M) and a chain of four pendulums.
    system, _, _ = jl.systems.double_pendulum()
    qdd, _ = state_functions(
        system, jnp.array([0.7, -1.2]), jnp.array([0.4, 1.1]), 0.0, solver
    )
    assert_nontrivial(qdd, 1.0)
    rng = np.random.default_rng(0)
    q, qd = jnp.asarray(0.5 * rng.normal(size=4)), jnp.asarray(rng.normal(size=4))
    qdd, _ = state_functions(pendulum_chain(4), q, qd, 0.3, solver)
    assert_nontrivial(qdd, 1.0)


def test_holonomic(solver):
    # The Cartesian pendulum against its closed form: q̈ tangent −g sin θ plus
    # the centripetal l θ̇², and λ from m l θ̇² + m g cos θ = −2 l λ (g = |q|² − l²).
    length, theta, omega = 2.0, 0.4, 0.8
    q, qd = pendulum_state(theta, omega, length)
    qdd, lam = state_functions(cartesian_pendulum(length), q, qd, 0.0, solver)
    tangent = jnp.array([jnp.cos(theta), jnp.sin(theta)])
    expected = -G * jnp.sin(theta) * tangent - length * omega**2 * q / length
    np.testing.assert_allclose(qdd, expected, atol=1e-12)
    tension = length * omega**2 + G * jnp.cos(theta)
    np.testing.assert_allclose(lam, [-tension / (2 * length)], rtol=1e-12)
    # A chain of three links: three constraints on six coordinates.
    q, qd = chain_state(3, 3)
    qdd, lam = state_functions(cartesian_chain(3), q, qd, 0.0, solver)
    assert_nontrivial(lam, 1.0)


def test_nonholonomic(solver):
    # The disk rolling down an incline: ẍ = ⅔ g sin α, λ = −m g sin α / 3.
    alpha = 0.3
    system, q0, qd0 = jl.systems.rolling_disk({"alpha": alpha}, rolling="nonholonomic")
    qdd, lam = state_functions(system, q0, qd0 + jnp.array([0.5, 1.0]), 0.0, solver)
    np.testing.assert_allclose(qdd[0], 2 / 3 * G * np.sin(alpha), rtol=1e-12)
    assert_nontrivial(lam, 0.1)


def test_unilateral_active_set(solver):
    # A mass on top of a sphere (R = 1) at θ: in contact while the normal force
    # m g cos θ − m θ̇² is positive, released (multiplier 0) when it would pull.
    system, _, _ = jl.systems.mass_on_sphere()
    q = jnp.array([1.0, 0.5])
    _, lam = state_functions(system, q, jnp.array([0.0, 1.0]), 0.0, solver)
    np.testing.assert_allclose(lam, [G * np.cos(0.5) - 1.0], rtol=1e-12)
    qdd, lam = state_functions(system, q, jnp.array([0.0, 3.0]), 0.0, solver)
    np.testing.assert_array_equal(lam, [0.0])
    np.testing.assert_allclose(qdd[0], 9.0 - G * np.cos(0.5), rtol=1e-12)


# Friction (systems of `friction_systems.py`).


def test_friction_stick_and_slip(solver):
    # A block on an incline of α = 0.4 at rest: static friction μ_s = 0.6 >
    # tan α holds it (q̈ = 0, friction force −g sin α); with μ_s = μ_k = 0.2 it
    # slides, ẍ = g (sin α − μ cos α).
    alpha, q, qd = 0.4, jnp.zeros(2), jnp.zeros(2)
    qdd, lam = state_functions(block(0.5, 0.6, alpha), q, qd, 0.0, solver)
    np.testing.assert_allclose(qdd, [0.0, 0.0], atol=1e-12)
    np.testing.assert_allclose(lam, [G * np.cos(alpha)], rtol=1e-12)
    qdd, _ = state_functions(block(0.2, 0.2, alpha), q, qd, 0.0, solver)
    expected = G * (np.sin(alpha) - 0.2 * np.cos(alpha))
    np.testing.assert_allclose(qdd[0], expected, rtol=1e-12)
    # A ball sliding without spin (slip) and one rolling (stick).
    r = 0.1
    q = jnp.array([0.0, r, 0.0])
    qdd, _ = state_functions(ball(0.4, 0.3, r), q, jnp.array([2.0, 0, 0]), 0.0, solver)
    np.testing.assert_allclose(qdd[0], -0.3 * G, rtol=1e-12)
    qdd, _ = state_functions(
        ball(0.4, 0.3, r), q, jnp.array([2.0, 0, -2.0 / r]), 0.0, solver
    )
    np.testing.assert_allclose(qdd, 0.0, atol=1e-12)


_WHEEL = wheel(0.5, 0.8)  # once: its functions are new lambdas at each call


def test_friction_with_a_holonomic_constraint(solver):
    # The chapter's 6.9.4: a body on the rim of a rolling wheel, x = R φ
    # holonomic, held by friction where its slip r θ̇ − R φ̇ is 0 (stick) and
    # sliding on the rim where it is not (slip).
    radius = WHEEL["R"]
    q = jnp.array([0.0, 0.0, radius, 0.3])
    slip_rates = []
    for rate in (0.5, 1.0):  # stick, slip
        qd = jnp.array([0.5 * radius, 0.5, 0.0, rate])
        qdd, lam = state_functions(_WHEEL, q, qd, 0.0, solver)
        assert_nontrivial(lam, 0.1)
        slip_rates.append(q[2] * qdd[3] + qd[2] * qd[3] - radius * qdd[1])
    np.testing.assert_allclose(slip_rates[0], 0.0, atol=1e-12)  # it sticks
    assert abs(slip_rates[1]) > 1.0  # it slides


@pytest.mark.parametrize("solver", quick_with("lu"))
def test_friction_along_a_simulation(solver):
    # The sliding ball rolls from t* = 2v₀/(7μg) on: the stick event and the
    # friction force before it.
    mu, v0, r = 0.3, 2.0, 0.1
    t_star = 2 * v0 / (7 * mu * G)
    kwargs = dict(t1=0.5, saveat=jnp.array([0.5 * t_star, 0.5]), rtol=1e-10, atol=1e-10)
    q0, qd0 = jnp.array([0.0, r, 0.0]), jnp.array([v0, 0.0, 0.0])
    dense = jl.simulate(ball(0.4, mu, r), q0, qd0, **kwargs)
    other = jl.simulate(with_solver(ball(0.4, mu, r), solver), q0, qd0, **kwargs)
    np.testing.assert_allclose(dense.event_ts[0], t_star, rtol=1e-9)
    assert int(other.num_events) == int(dense.num_events) == 1
    assert_matches(solver, other.event_ts[0], dense.event_ts[0])
    assert_matches(solver, other.qd, dense.qd, scale=v0 / r)
    assert_matches(solver, other.friction, dense.friction, scale=G)


# Impulses.


def test_impulse_with_a_holonomic_constraint(solver):
    # A push on the Cartesian pendulum keeps only its tangential part, divided by m.
    m, length, theta, omega = 1.5, 2.0, 0.4, 0.8
    system = cartesian_pendulum(length, m)
    q, qd = pendulum_state(theta, omega, length)
    tangent = jnp.array([jnp.cos(theta), jnp.sin(theta)])
    impulse = jnp.array([1.0, 0.7])
    dense = jl.apply_impulse(system, q, qd, 0.0, impulse)
    expected = qd + (tangent @ impulse) / m * tangent
    np.testing.assert_allclose(dense, expected, atol=1e-12)
    other = jl.apply_impulse(with_solver(system, solver), q, qd, 0.0, impulse)
    assert_matches(solver, other, dense)
    q, qd = chain_state(3, 4)
    impulse = jnp.linspace(-1.0, 1.0, 6)
    dense = jl.apply_impulse(cartesian_chain(3), q, qd, 0.0, impulse)
    other = jl.apply_impulse(
        with_solver(cartesian_chain(3), solver), q, qd, 0.0, impulse
    )
    assert_nontrivial(dense - qd, 0.1)
    assert_matches(solver, other, dense, scale=5.0)


def test_impulse_at_a_contact(solver):
    # A ball resting on the floor, pushed down and sideways: the contact takes
    # the normal part (plastic), the sideways part moves it (frictionless here).
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * 2.0 * jnp.sum(qd**2) - 2.0 * G * q[1],
        unilateral=lambda q, t: q[1:],
    )
    q, qd = jnp.array([0.0, 0.0]), jnp.array([0.3, 0.0])
    impulse = jnp.array([1.0, -3.0])
    dense = jl.apply_impulse(system, q, qd, 0.0, impulse)
    np.testing.assert_allclose(dense, [0.8, 0.0], atol=1e-12)
    other = jl.apply_impulse(with_solver(system, solver), q, qd, 0.0, impulse)
    assert_matches(solver, other, dense)


# Projection.


def test_project_initial_state(solver):
    # A Cartesian chain off its manifold in position and velocity.
    system = cartesian_chain(3)
    q_off, qd_off = off_chain_state(3, 10)
    dense = jl.project_initial_state(system, q_off, qd_off, 0.0)
    other = jl.project_initial_state(with_solver(system, solver), q_off, qd_off, 0.0)
    assert_nontrivial(dense[0] - q_off, 1e-4)
    assert_nontrivial(dense[1] - qd_off, 1e-3)
    for x, y in zip(other, dense, strict=True):
        assert_matches(solver, x, y, scale=5.0)


@pytest.mark.parametrize("solver", quick_with("lu"))
def test_projected_simulate(solver):
    # The Cartesian pendulum for half a period with the default projection,
    # constant steps so that both take the same steps.
    system = cartesian_pendulum(1.0)
    q0, qd0 = pendulum_state(1.0, 0.0)
    steps = dict(dt0=0.01, stepsize_controller=diffrax.ConstantStepSize())
    saveat = jnp.linspace(0.0, 1.0, 5)
    dense = jl.simulate(system, q0, qd0, t1=1.0, saveat=saveat, **steps)
    other = jl.simulate(
        with_solver(system, solver), q0, qd0, t1=1.0, saveat=saveat, **steps
    )
    np.testing.assert_allclose(jnp.sum(dense.q**2, axis=1), 1.0, atol=1e-14)
    assert_nontrivial(dense.q[-1] - q0, 0.5)
    assert_matches(solver, other.q, dense.q)
    assert_matches(solver, other.qd, dense.qd, scale=5.0)
    assert_matches(solver, other.multipliers, dense.multipliers, scale=10.0)


# Events.


@pytest.mark.parametrize("solver", quick_with("lu"))
def test_bounce(solver):
    # Dropped from 1 m with e = 0.8: lands at √(2/g), rebounds at 0.8 √(2g).
    system, q0, qd0 = jl.systems.bouncing_ball({"e": 0.8})
    kwargs = dict(t1=0.7, saveat=jnp.array([0.7]), rtol=1e-10, atol=1e-10)
    dense = jl.simulate(system, q0, qd0, **kwargs)
    other = jl.simulate(with_solver(system, solver), q0, qd0, **kwargs)
    fall = np.sqrt(2 / G)
    np.testing.assert_allclose(dense.event_ts[0], fall, rtol=1e-9)
    rebound = 0.8 * np.sqrt(2 * G)
    np.testing.assert_allclose(dense.qd[0, 0], rebound - G * (0.7 - fall), rtol=1e-8)
    assert int(other.num_events) == int(dense.num_events) == 1
    assert_matches(solver, other.event_ts[:1], dense.event_ts[:1])
    assert_matches(solver, other.q, dense.q)
    assert_matches(solver, other.qd, dense.qd, scale=5.0)


# The failure diagnosis.


def xfail_for(request, solver, names, reason):
    """Mark this case xfail (not strict) for the solvers in `names`."""
    if solver in names:
        request.applymarker(pytest.mark.xfail(strict=False, reason=reason))


@pytest.mark.parametrize("q0", [1.0, 1.5])
def test_singular_mass_is_raised(solver, q0, request):
    # M = diag(1, 1 − q₀): singular at q₀ = 1, indefinite beyond.
    system = with_solver(jl.LagrangianSystem(degenerating_lagrangian), solver)
    with pytest.raises(Exception, match="mass matrix .* singular or not positive"):
        jl.accelerations(system, jnp.array([q0, 0.0]), jnp.array([1.0, 0.3]), 0.0)


@pytest.mark.parametrize("solver", quick_with("cholesky"))
def test_singular_mass_is_named(solver, request):
    # From q₀ = 0 at q̇₀ = (1, 0), M turns singular at t = 1: the result names
    # it, with the time reached, for every solver.
    xfail_for(
        request,
        solver,
        ("lu", "cg"),
        "here f = 0 along the motion, so q̈ = M⁻¹0 = 0 whatever M is: LU and CG "
        "never see M's definiteness (only the factorizations that check their "
        "pivots, dense and lineax Cholesky, do); the run goes on to t1",
    )
    system = jl.LagrangianSystem(degenerating_lagrangian)
    q0, qd0 = jnp.zeros(2), jnp.array([1.0, 0.0])
    dense = jl.simulate(system, q0, qd0, t1=3.0, throw=False)
    other = jl.simulate(with_solver(system, solver), q0, qd0, t1=3.0, throw=False)
    assert dense.result == jl.RESULTS.singular_mass_matrix
    assert abs(float(dense.t_final) - 1.0) < 1e-9
    assert other.result == jl.RESULTS.singular_mass_matrix
    assert abs(float(other.t_final) - 1.0) < 1e-6


# Linearization.


def test_linearize(solver):
    # The double pendulum hanging at rest: A = [[0, I], [−M⁻¹K, 0]]; and
    # swinging, where the velocity terms enter.
    system, _, _ = jl.systems.double_pendulum({"l1": 1.5, "l2": 1.5})
    crossed = with_solver(system, solver)
    for q, qd in [(jnp.zeros(2), jnp.zeros(2)), (jnp.array([0.3, -0.2]), jnp.ones(2))]:
        dense = jl.linearize(system, q, qd, 0.0)
        other = jl.linearize(crossed, q, qd, 0.0)
        assert_nontrivial(dense.A, 1.0)
        assert_matches(solver, other.A, dense.A, scale=10.0)
    # With a holonomic constraint, in the coordinates x of the Cartesian pendulum.
    system = cartesian_pendulum(2.0)
    q, qd = pendulum_state(0.0, 0.0, 2.0)
    dense = jl.linearize(system, q, qd, 0.0, coordinates=[0], velocities=[0])
    other = jl.linearize(
        with_solver(system, solver), q, qd, 0.0, coordinates=[0], velocities=[0]
    )
    np.testing.assert_allclose(dense.A, [[0.0, 1.0], [-G / 2.0, 0.0]], atol=1e-10)
    assert_matches(solver, other.A, dense.A, scale=10.0)


def test_normal_modes(solver):
    # The double pendulum (l = 1.5): ω² = g/l (2 ∓ √2); the Cartesian pendulum
    # on its rod: ω² = g/l.
    system, _, _ = jl.systems.double_pendulum({"l1": 1.5, "l2": 1.5})
    omega2, modes = jl.normal_modes(with_solver(system, solver), jnp.zeros(2))
    expected = G / 1.5 * np.array([2 - np.sqrt(2), 2 + np.sqrt(2)])
    assert_matches(solver, omega2, expected, scale=10.0)
    dense_omega2, dense_modes = jl.normal_modes(system, jnp.zeros(2))
    assert_matches(solver, jnp.abs(modes), jnp.abs(dense_modes))
    system = cartesian_pendulum(2.0)
    q, _ = pendulum_state(0.0, 0.0, 2.0)
    omega2, _ = jl.normal_modes(with_solver(system, solver), q)
    assert_matches(solver, omega2, [G / 2.0], scale=10.0)
