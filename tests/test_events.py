"""Unilateral constraints in time: releases and impacts against closed forms.

References: the textbook chapter's mass sliding off a smooth sphere (leaves at
cos θ = ⅔ cos θ₀), the solid sphere rolling on a spherical shell (cos θ = 10/17
cos θ₀) and impulsive forces (M Δq̇ = P, velocities jump, coordinates do not).

Every `simulate` call of one system shares one saveat shape and the default
options, so each system is compiled once.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from helpers import cartesian_pendulum

import jaxlagrange as jl


G = 9.81
TOL = 1e-10


def _time_to(theta0, theta1, rate2):
    """∫ dθ/θ̇ from rest at θ₀, with θ̇² = rate2 (cos θ₀ − cos θ) on the surface.

    The 1/√(θ − θ₀) singularity at the start is taken by quad's weight, and
    cos θ₀ − cos θ = 2 sin((θ + θ₀)/2) sin((θ − θ₀)/2) avoids the cancellation.
    """

    def smooth(theta):
        d = theta - theta0
        if d == 0:
            return np.sqrt(1 / (rate2 * np.sin(theta0)))
        drop = 2 * np.sin((theta + theta0) / 2) * np.sin(d / 2)
        return np.sqrt(d / (rate2 * drop))

    value, _ = scipy.integrate.quad(
        smooth, theta0, theta1, weight="alg", wvar=(-0.5, 0.0), epsabs=0, epsrel=1e-13
    )
    return value


def test_mass_slides_off_sphere():
    m, radius, theta0 = 1.5, 2.0, 0.3
    system, q0, qd0 = jl.systems.mass_on_sphere(
        {"m": m, "R": radius}, q0=[radius, theta0]
    )
    # The closed forms: it leaves at cos θ = ⅔ cos θ₀, after the time of the
    # quadrature of θ̇² = (2g/R)(cos θ₀ − cos θ).
    theta_off = np.arccos(2 / 3 * np.cos(theta0))
    t_off = _time_to(theta0, theta_off, 2 * G / radius)
    ts = np.sort(np.r_[np.linspace(0.0, 1.2, 25), t_off])
    traj = jl.simulate(system, q0, qd0, t1=1.2, saveat=ts, rtol=TOL, atol=TOL)

    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_RELEASE
    assert int(traj.event_constraint[0]) == 0
    np.testing.assert_allclose(traj.event_ts[0], t_off, rtol=0, atol=1e-8)
    i = int(np.argmax(ts == t_off))
    np.testing.assert_allclose(traj.q[i], [radius, theta_off], atol=1e-8)

    # On the sphere the multiplier of h = r − R is the normal force.
    r, theta = np.asarray(traj.q).T
    on = ts < t_off
    np.testing.assert_allclose(r[on], radius, rtol=0, atol=1e-9)
    normal = m * G * (3 * np.cos(theta[on]) - 2 * np.cos(theta0))
    np.testing.assert_allclose(traj.multipliers[on, 0], normal, rtol=0, atol=1e-8)
    assert np.all(traj.multipliers[on, 0] > 0)

    # Afterwards: no force, and the free-fall parabola from the release state.
    after = ts > t_off
    assert np.all(traj.multipliers[after] == 0)
    speed = np.sqrt(2 * G * radius * (np.cos(theta0) - np.cos(theta_off)))
    x0, z0 = radius * np.sin(theta_off), radius * np.cos(theta_off)
    vx, vz = speed * np.cos(theta_off), -speed * np.sin(theta_off)
    tau = ts[after] - t_off
    x, z = x0 + vx * tau, z0 + vz * tau - 0.5 * G * tau**2
    np.testing.assert_allclose(r[after] * np.sin(theta[after]), x, atol=1e-7)
    np.testing.assert_allclose(r[after] * np.cos(theta[after]), z, atol=1e-7)
    assert r[-1] > radius + 0.5  # it has left the sphere for good


def test_release_time_differentiates_in_the_radius_of_a_ready_sphere():
    # The time of release scales as √(R/g): ∂t/∂R = t/(2R). The ready system
    # built inside the differentiated function (its default q0 holds R) failed
    # with a TracerArrayConversionError.
    def release(radius):
        system, q0, qd0 = jl.systems.mass_on_sphere(
            {"R": radius}, q0=jnp.stack([radius, 0.3]), qd0=jnp.zeros(2)
        )
        traj = jl.simulate(system, q0, qd0, t1=1.5, rtol=TOL, atol=TOL, max_events=4)
        return traj.event_ts[0]

    t, grad = jax.value_and_grad(release)(2.0)
    np.testing.assert_allclose(grad, t / 4.0, rtol=1e-7)


def test_mass_from_the_top_leaves_at_48_degrees():
    # From rest (almost) at the top: the textbook's cos θ = ⅔. The same system
    # structure and saveat shape as above: no new compilation. (Closer to the
    # unstable top, atol would dominate the error of θ, which grows like e^(t√(g/R)).)
    theta0 = 1e-3
    system, q0, qd0 = jl.systems.mass_on_sphere(q0=[1.0, theta0])
    t_off = _time_to(theta0, np.arccos(2 / 3 * np.cos(theta0)), 2 * G)
    ts = np.sort(np.r_[np.linspace(0.0, 6.0, 25), t_off])
    traj = jl.simulate(system, q0, qd0, t1=6.0, saveat=ts, rtol=TOL, atol=TOL)
    assert int(traj.num_events) == 1
    np.testing.assert_allclose(traj.event_ts[0], t_off, rtol=1e-7)
    i = int(np.argmax(ts == t_off))
    assert np.degrees(traj.q[i, 1]) == pytest.approx(48.19, abs=0.005)


def _rolling(q, qd, t, params):
    m, a = params["m"], params["a"]
    r, theta, _ = q
    inertia = 0.4 * m * a**2
    kinetic = 0.5 * m * (qd[0] ** 2 + r**2 * qd[1] ** 2) + 0.5 * inertia * qd[2] ** 2
    return kinetic - m * G * r * jnp.cos(theta)


def _rolls(q, t, params):
    # The chapter's g₂ = a(φ − θ) − Rθ, φ measured from the vertical.
    return jnp.array([params["a"] * (q[2] - q[1]) - params["R"] * q[1]])


def _on_shell(q, t, params):
    return jnp.array([q[0] - params["R"] - params["a"]])


def test_rolling_sphere_leaves_shell():
    radius, a, theta0 = 1.0, 0.25, 0.2
    system = jl.LagrangianSystem(
        _rolling,
        params={"m": 2.0, "a": a, "R": radius},
        holonomic=_rolls,
        unilateral=_on_shell,
    )
    # Rolling stores 2/7 of the kinetic energy in rotation: (7/10) v² = g (R + a)
    # (cos θ₀ − cos θ), and the normal force vanishes at cos θ = (10/17) cos θ₀.
    theta_off = np.arccos(10 / 17 * np.cos(theta0))
    t_off = _time_to(theta0, theta_off, 10 * G / (7 * (radius + a)))
    ts = np.sort(np.r_[np.linspace(0.0, 1.0, 10), t_off])
    q0 = jnp.array([radius + a, theta0, theta0 * (radius + a) / a])
    traj = jl.simulate(system, q0, jnp.zeros(3), t1=1.0, saveat=ts, rtol=TOL, atol=TOL)
    assert int(traj.event_kind[0]) == jl.EVENT_RELEASE
    np.testing.assert_allclose(traj.event_ts[0], t_off, rtol=0, atol=1e-8)
    i = int(np.argmax(ts == t_off))
    np.testing.assert_allclose(traj.q[i, 1], theta_off, atol=1e-8)
    np.testing.assert_allclose(traj.multipliers[i, 1], 0.0, atol=1e-6)
    assert np.all(traj.multipliers[ts < t_off, 1] > 0)
    assert np.all(traj.multipliers[ts > t_off, 1] == 0)


BALL_TS = np.linspace(0.0, 2.0, 41)


def _ball(e, y0=1.0, t1=2.0, **kwargs):
    system, q0, qd0 = jl.systems.bouncing_ball({"e": e}, q0=[y0])
    ts = BALL_TS * t1 / 2.0
    return jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=TOL, atol=TOL, **kwargs)


def test_a_contact_leaving_from_within_its_tolerance_below_zero_flies():
    # A ball 5e-9 below the floor (within the tolerance of a start) moving up at
    # v: a row that an impulse elsewhere releases this way (the dm_control
    # hopper's pelvis at 2.79 s, 7.6e-7 m down, lifted at 2.7e-3 m/s). Its h is
    # negative for 5e-9/v after the start: h/(t − t_s) set off a landing at once,
    # which held the ball (or, faster than the plastic speed, released it to
    # land again at the same instant, 400 times). It lands as it falls back to
    # its starting depth, after the flight 2v/g.
    ball = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - G * q[0], unilateral=lambda q, t: q[:1]
    )
    for v in (1e-4, 3e-4):
        traj = jl.simulate(
            ball, jnp.array([-5e-9]), jnp.array([v]), t1=1e-3, rtol=TOL, atol=TOL
        )
        assert traj.result == jl.RESULTS.successful
        assert int(traj.num_events) == 1
        np.testing.assert_allclose(traj.event_ts[0], 2 * v / G, rtol=1e-8)
        np.testing.assert_allclose(traj.q[-1], [-5e-9], rtol=0, atol=1e-15)


def _bounce_times(e, y0, count):
    first = np.sqrt(2 * y0 / G)
    flights = 2 * first * e ** np.arange(1, count)
    return first + np.r_[0.0, np.cumsum(flights)]


def test_bouncing_ball_restitution_and_rest():
    e, y0 = 0.5, 1.0
    traj = _ball(e, y0)
    count = int(traj.num_events)
    # The chatter ends with the first rebound that would rise less than atol:
    # v₀ eᵏ ≤ √(2 g atol) with v₀ = √(2 g y₀).
    rest_count = np.ceil(np.log(np.sqrt(2 * G * TOL / (2 * G * y0))) / np.log(e))
    assert count == rest_count == 17
    assert np.all(traj.event_kind[:count] == jl.EVENT_IMPACT)
    assert np.all(traj.event_constraint[:count] == 0)
    np.testing.assert_allclose(
        traj.event_ts[:count], _bounce_times(e, y0, count), rtol=0, atol=1e-9
    )
    assert np.all(np.isinf(traj.event_ts[count:]))
    # Between bounces the energy is e^(2k) of the initial one after k bounces, so
    # each rebound speed is e times the impact speed.
    energy = 0.5 * traj.qd[:, 0] ** 2 + G * traj.q[:, 0]
    bounces = np.searchsorted(np.asarray(traj.event_ts[:count]), BALL_TS)
    flying = bounces < count
    np.testing.assert_allclose(
        energy[flying], G * y0 * e ** (2.0 * bounces[flying]), rtol=1e-8
    )
    # At rest on the floor just before the Zeno time √(2y₀/g)(1 + 2e/(1 − e)),
    # pushed by a multiplier of m g; in flight the multiplier is 0.
    zeno = np.sqrt(2 * y0 / G) * (1 + 2 * e / (1 - e))
    assert zeno - 1e-4 < traj.event_ts[count - 1] < zeno
    rest = ~flying
    assert rest.sum() > 10
    np.testing.assert_allclose(traj.q[rest, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.qd[rest, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.multipliers[rest, 0], G, rtol=1e-12)
    assert np.all(traj.multipliers[flying, 0] == 0)


def test_elastic_ball_conserves_energy():
    traj = _ball(1.0, 1.0)
    count = int(traj.num_events)
    first = np.sqrt(2 / G)
    assert count == 2  # at t₀ and 3t₀ before t1 = 2
    np.testing.assert_allclose(
        traj.event_ts[:count], first * np.array([1, 3]), rtol=0, atol=1e-9
    )
    energy = 0.5 * traj.qd[:, 0] ** 2 + G * traj.q[:, 0]
    # Measured drift 1e-15; bound: tolerance-level errors at each impact.
    np.testing.assert_allclose(energy, G, rtol=1e-9)
    # The height is the periodic parabola.
    phase = np.mod(BALL_TS + first, 2 * first) - first
    np.testing.assert_allclose(traj.q[:, 0], 1 - 0.5 * G * phase**2, atol=1e-9)


def test_max_events():
    # An elastic ball bounces every 0.9 s: more than 64 events by t = 80.
    with pytest.raises(
        eqx.EquinoxRuntimeError, match=r"maximum number of events \(64.*max_events"
    ):
        _ball(1.0, 1.0, t1=80.0)
    traj = _ball(1.0, 1.0, t1=80.0, throw=False)
    assert traj.result == jl.RESULTS.max_events_reached
    assert int(traj.num_events) == 64
    # Stopped at the 65th bounce, the first one without room.
    assert float(traj.t_final) == pytest.approx(np.sqrt(2 / G) * 129, abs=1e-6)
    with pytest.raises(ValueError, match=r"`max_events` must be a positive int"):
        _ball(1.0, max_events=-1)
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd[0] ** 2,
        unilateral=lambda q, t: q,
        restitution=jnp.ones(2),
    )
    with pytest.raises(ValueError, match=r"`restitution` must be a scalar .*\(1,\)"):
        jl.simulate(system, jnp.ones(1), jnp.zeros(1), t1=1.0)


def test_no_unilateral_constraints_no_events():
    # Shapes only (tracing, no compilation): E = 0 without unilateral constraints.
    system, q0, qd0 = jl.systems.pendulum()
    traj = jax.eval_shape(lambda: jl.simulate(system, q0, qd0, t1=0.1))
    assert traj.event_ts.shape == traj.event_kind.shape == (0,)
    assert traj.event_constraint.shape == (0,) and traj.num_events.shape == ()
    ball = jax.eval_shape(lambda: _ball(0.5, max_events=5))
    assert ball.event_ts.shape == ball.event_kind.shape == (5,)


def test_plastic_ball_stays_on_the_floor():
    traj = _ball(0.0, 1.0)
    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_IMPACT
    landed = BALL_TS > np.sqrt(2 / G)
    np.testing.assert_allclose(traj.q[landed, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.qd[landed, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.multipliers[landed, 0], G, rtol=1e-12)


def _drift(q, qd, t):
    return 0.5 * qd[0] ** 2


def _walls(q, t):
    return jnp.array([q[0], 1.0 - q[0]])


def test_particle_between_two_walls():
    # Free flight between walls at 0 and 1, restitution 1 on the left one and 0.5
    # on the right one: each right-wall bounce halves the speed.
    system = jl.LagrangianSystem(
        _drift, unilateral=_walls, restitution=jnp.array([1.0, 0.5])
    )
    ts = 0.1 + 0.5 * np.arange(14)  # none at an event time
    traj = jl.simulate(
        system,
        jnp.array([0.5]),
        jnp.array([1.0]),
        t1=7.0,
        saveat=ts,
        rtol=TOL,
        atol=TOL,
    )
    # Right wall at 0.5 (speed 1 → 0.5), left at 2.5, right at 4.5 (0.5 → 0.25).
    assert int(traj.num_events) == 3
    np.testing.assert_allclose(traj.event_ts[:3], [0.5, 2.5, 4.5], atol=1e-9)
    assert list(np.asarray(traj.event_constraint[:3])) == [1, 0, 1]
    assert np.all(traj.event_kind[:3] == jl.EVENT_IMPACT)
    speed = np.select([ts < 0.5, ts < 4.5], [1.0, 0.5], 0.25)
    direction = np.select([ts < 0.5, ts < 2.5, ts < 4.5], [1.0, -1.0, 1.0], -1.0)
    np.testing.assert_allclose(traj.qd[:, 0], speed * direction, rtol=1e-9)
    assert np.all(traj.multipliers == 0)


def test_batch_and_jit_equal_a_loop():
    heights = jnp.array([0.5, 1.0, 2.0])
    system, _, qd0 = jl.systems.bouncing_ball({"e": 0.7})

    @jax.jit
    def run(heights):
        return jl.simulate_batch(
            system, heights[:, None], qd0, t1=2.0, saveat=BALL_TS, rtol=TOL, atol=TOL
        )

    batched = run(heights)
    for i, y0 in enumerate(heights):
        single = _ball(0.7, float(y0))
        assert int(batched.num_events[i]) == int(single.num_events) >= 2
        for name in ("ts", "q", "qd", "multipliers", "event_ts", "event_kind"):
            np.testing.assert_allclose(
                getattr(batched, name)[i],
                getattr(single, name),
                rtol=1e-12,
                atol=1e-12,
            )


def test_gradient_through_impacts():
    # The height at t = 0.8, after one bounce, against finite differences with
    # respect to the drop height and the coefficient of restitution.
    def height(y0, e):
        system, _, qd0 = jl.systems.bouncing_ball({"e": e})
        traj = jl.simulate(
            system, y0[None], qd0, t1=2.0, saveat=BALL_TS, rtol=TOL, atol=TOL
        )
        return traj.q[16, 0]

    y0, e = jnp.array(1.0), jnp.array(0.6)
    grads = jax.jit(jax.grad(height, argnums=(0, 1)))(y0, e)
    # Closed form: y(t) = v₁τ − ½gτ² with v₁ = e√(2gy₀), τ = t − √(2y₀/g).
    t = BALL_TS[16]
    first = np.sqrt(2 * float(y0) / G)
    v1, tau = float(e) * G * first, t - first
    dtau = -first / (2 * float(y0))
    dy0 = float(e) * G * first / (2 * float(y0)) * tau + (v1 - G * tau) * dtau
    de = G * first * tau
    np.testing.assert_allclose(grads, [dy0, de], rtol=1e-7)


def _free(q, qd, t, params):
    return 0.5 * params["m"] * jnp.sum(qd**2)


def test_apply_impulse_free_particle():
    particle = jl.LagrangianSystem(_free, params={"m": 2.5})
    qd = jnp.array([1.0, -2.0, 0.5])
    impulse = jnp.array([0.5, 1.0, -3.0])
    after = jl.apply_impulse(particle, jnp.zeros(3), qd, 0.0, impulse)
    np.testing.assert_allclose(after, qd + impulse / 2.5, rtol=1e-14)


def test_apply_impulse_keeps_the_pendulum_on_its_circle():
    m, length, alpha, omega = 1.5, 2.0, 0.4, 0.8
    pendulum = cartesian_pendulum(length, m)
    # At angle α from the downward vertical, swinging at θ̇ = ω.
    tangent = np.array([np.cos(alpha), np.sin(alpha)])
    q = length * np.array([np.sin(alpha), -np.cos(alpha)])
    qd = length * omega * tangent
    impulse = np.array([3.0, -1.2])
    after = jl.apply_impulse(pendulum, q, qd, 0.0, impulse)
    # Minimal coordinates: m l² Δθ̇ = P·∂r/∂θ, the generalized impulse on θ.
    omega_after = omega + impulse @ (length * tangent) / (m * length**2)
    np.testing.assert_allclose(after, length * omega_after * tangent, rtol=1e-13)
    np.testing.assert_allclose(q @ after, 0.0, atol=1e-13)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_apply_impulse_errors():
    particle = jl.LagrangianSystem(_free, params={"m": 1.0})
    with pytest.raises(ValueError, match=r"`impulse` must have shape \(3,\).*\(2,\)"):
        jl.apply_impulse(particle, jnp.zeros(3), jnp.zeros(3), 0.0, jnp.ones(2))
    flat = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2)
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"mass matrix"):
        eqx.filter_jit(jl.apply_impulse)(
            flat, jnp.zeros(2), jnp.zeros(2), 0.0, jnp.ones(2)
        )


def test_restitution_read_from_a_param_follows_it():
    # The ready bouncing ball reads e from its params (restitution="e"): a batch
    # over e, and a fit of e, change the bounces. It copied e into a leaf at
    # construction, so a batch or sweep over e gave every member the same
    # motion and a fit left e at its guess.
    ball, q0, qd0 = jl.systems.bouncing_ball({"e": 0.8})
    e = jnp.array([0.5, 0.9])
    traj = jl.simulate_batch(ball, q0, qd0, params={"e": e}, t1=1.3, max_events=16)
    # Dropped from y0 = 1: the first bounce at T = √(2/g), the second 2eT later.
    first = np.sqrt(2 / 9.81)
    np.testing.assert_allclose(traj.event_ts[:, 0], first, rtol=1e-8)
    np.testing.assert_allclose(traj.event_ts[:, 1], first * (1 + 2 * e), rtol=1e-8)
    ts = jnp.linspace(0.0, 1.5, 31)
    data = jl.simulate(ball, q0, qd0, t1=1.5, saveat=ts, rtol=1e-11, atol=1e-11)
    guess = {**ball.params, "e": 0.7}
    fitted = jl.fit(
        ball,
        jl.Observations(ts, data.q),
        params=guess,
        trainable={"e"},
        positive={"e"},
        rtol=1e-11,
        atol=1e-11,
    )
    assert float(fitted.params["e"]) == pytest.approx(0.8, abs=1e-8)
    with pytest.raises(ValueError, match=r"`restitution` names the param 'f', which"):
        jl.LagrangianSystem(
            lambda q, qd, t, p: 0.5 * qd @ qd,
            params={"e": 0.5},
            unilateral=lambda q, t, p: q,
            restitution="f",
        )
