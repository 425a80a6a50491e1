"""Coulomb friction at unilateral contacts: stick, slip, roll, fly.

Closed forms (sliding ball and disk, block on an incline, the chapter's 6.9.2),
the chapter's 6.9.3 and 6.9.4 against hand-derived equations of motion
integrated by SciPy (`friction_references.py`), several contacts and two events
in one step, an impact that leaves a contact slipping, gradients through
stick/slip events against closed forms and finite differences, and every error
message of the friction arguments.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from friction_references import sphere_on_sphere, wheel_and_body
from friction_systems import (
    RHO,
    WHEEL,
    A,
    R,
    _across,
    _along,
    _incline_lagrangian,
    ball,
    block,
    sphere,
    wheel,
)
from helpers import falling_lagrangian, free_lagrangian
from scipy.optimize import brentq

import jaxlagrange as jl


G = 9.81
TOL = 1e-10


def _sim(system, q0, qd0, t1, saveat, max_events=4):
    return jl.simulate(
        system,
        q0,
        qd0,
        t1=t1,
        saveat=jnp.asarray(saveat, float),
        rtol=TOL,
        atol=TOL,
        max_events=max_events,
    )


@pytest.mark.parametrize("k, ratio, speed", [(0.4, 2 / 7, 5 / 7), (0.5, 1 / 3, 2 / 3)])
def test_sliding_ball_and_disk_roll(k, ratio, speed):
    # Thrown sliding at v₀ without spin: friction μ m g slows it and spins it
    # up until it rolls, at t* = 2v₀/(7μg) (solid sphere, k = 2/5) or v₀/(3μg)
    # (disk, k = 1/2), then with 5v₀/7 or 2v₀/3; rolling on a level floor
    # needs no friction.
    mu, v0, r = 0.3, 2.0, 0.1
    t_star = ratio * v0 / (mu * G)
    traj = _sim(ball(k, mu, r), [0.0, r, 0.0], [v0, 0.0, 0.0], 1.0, [0.5 * t_star, 1.0])
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_STICK
    assert int(traj.event_constraint[0]) == 0
    np.testing.assert_allclose(traj.event_ts[0], t_star, rtol=1e-9)
    np.testing.assert_allclose(traj.qd[1, 0], speed * v0, rtol=1e-9)
    np.testing.assert_allclose(traj.qd[1, 2], -speed * v0 / r, rtol=1e-9)
    distance = v0 * t_star - 0.5 * mu * G * t_star**2
    np.testing.assert_allclose(
        traj.q[1, 0], distance + speed * v0 * (1.0 - t_star), rtol=1e-9
    )
    # The friction force: −μ N while sliding, 0 rolling; N = m g throughout.
    np.testing.assert_allclose(traj.friction[:, 0], [-mu * G, 0.0], atol=1e-9)
    np.testing.assert_allclose(traj.multipliers[:, 0], G, rtol=1e-12)


def test_dropped_spinning_ball_impact_then_slips_then_rolls():
    # Dropped from height y₀ moving at v₀: a plastic impact (frictionless
    # impulse) leaves it on the floor sliding, then it rolls 2v₀/(7μg) later.
    mu, v0, r, y0 = 0.3, 2.0, 0.1, 0.1
    fall = np.sqrt(2 * y0 / G)
    t_star = 2 * v0 / (7 * mu * G)
    traj = _sim(ball(0.4, mu, r), [0.0, r + y0, 0.0], [v0, 0.0, 0.0], 1.0, [0.1, 1.0])
    assert traj.result == jl.RESULTS.successful
    kinds = np.asarray(traj.event_kind[: int(traj.num_events)])
    np.testing.assert_array_equal(kinds, [jl.EVENT_IMPACT, jl.EVENT_STICK])
    np.testing.assert_allclose(traj.event_ts[:2], [fall, fall + t_star], rtol=1e-9)
    np.testing.assert_allclose(traj.qd[1], [5 * v0 / 7, 0, -50 * v0 / 7], atol=1e-8)
    # Dropped already spinning at the rolling rate: it lands sticking and rolls on.
    traj = _sim(
        ball(0.4, mu, r), [0.0, r + y0, 0.0], [v0, 0.0, -v0 / r], 1.0, [0.1, 1.0]
    )
    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_IMPACT
    np.testing.assert_allclose(traj.qd[1], [v0, 0, -v0 / r], atol=1e-8)
    np.testing.assert_allclose(traj.friction[1], 0.0, atol=1e-9)


def test_a_float32_state_stays_float32_beside_float64_params():
    # The ball's r and k are float64 params (x64) and enter s: its friction
    # forces, and the slip directions read from them, keep a float32 state's
    # dtype through the impact and the stick.
    system, t1 = ball(0.4, 0.3), 0.6
    q0, qd0, ts = jnp.array([0.0, 0.2, 0.0]), jnp.array([1.0, 0.0, 0.0]), [0.3, t1]
    ref = jl.simulate(system, q0, qd0, t1=t1, saveat=jnp.array(ts))
    q32, qd32 = q0.astype(jnp.float32), qd0.astype(jnp.float32)
    traj = jl.simulate(system, q32, qd32, t1=t1, saveat=jnp.array(ts, jnp.float32))
    assert traj.result == ref.result == jl.RESULTS.successful
    assert traj.q.dtype == traj.qd.dtype == traj.friction.dtype == jnp.float32
    kinds = np.asarray(traj.event_kind[: int(traj.num_events)])
    np.testing.assert_array_equal(kinds, [jl.EVENT_IMPACT, jl.EVENT_STICK])
    np.testing.assert_allclose(traj.q, ref.q, atol=1e-4)
    np.testing.assert_allclose(traj.qd, ref.qd, atol=1e-4)


def _INCLINE(system, v0):
    return _sim(system, jnp.zeros(2), jnp.array([v0, 0.0]), 1.0, [0.5, 1.0])


def test_block_on_incline_stays_or_slides():
    alpha, mu_k = 0.4, 0.3
    sin, cos = np.sin(alpha), np.cos(alpha)
    # μ_s ≥ tan α = 0.423: it stays, held by static friction m g sin α.
    stays = _INCLINE(block(mu_k, 0.45), 0.0)
    assert int(stays.num_events) == 0
    np.testing.assert_allclose(stays.q, 0.0, atol=1e-12)
    np.testing.assert_allclose(stays.friction[:, 0], -G * sin, rtol=1e-12)
    # μ_s < tan α: it slides from t0 with g (sin α − μ_k cos α).
    slides = _INCLINE(block(mu_k, 0.42), 0.0)
    assert int(slides.num_events) == 0
    accel = G * (sin - mu_k * cos)
    np.testing.assert_allclose(slides.q[:, 0], 0.5 * accel * slides.ts**2, rtol=1e-9)
    np.testing.assert_allclose(slides.friction[:, 0], -mu_k * G * cos, rtol=1e-12)


def test_block_pushed_up_the_incline_stops_and_sticks_or_slides_back():
    alpha, mu_k, v0 = 0.4, 0.3, -2.0
    sin, cos = np.sin(alpha), np.cos(alpha)
    decel = G * (sin + mu_k * cos)
    t_stop, top = -v0 / decel, -(v0**2) / (2 * decel)
    stuck = _INCLINE(block(mu_k, 0.45), v0)
    assert int(stuck.num_events) == 1
    assert int(stuck.event_kind[0]) == jl.EVENT_STICK
    np.testing.assert_allclose(stuck.event_ts[0], t_stop, rtol=1e-9)
    np.testing.assert_allclose(stuck.q[:, 0], top, rtol=1e-9)
    np.testing.assert_allclose(stuck.qd[:, 0], 0.0, atol=1e-9)
    # Static friction too weak to hold it: it slides back down.
    back = _INCLINE(block(mu_k, 0.42), v0)
    assert int(back.num_events) == 1
    assert int(back.event_kind[0]) == jl.EVENT_SLIP
    np.testing.assert_allclose(back.event_ts[0], t_stop, rtol=1e-9)
    down = G * (sin - mu_k * cos)
    tau = back.ts - t_stop
    np.testing.assert_allclose(back.q[:, 0], top + 0.5 * down * tau**2, rtol=1e-9)
    np.testing.assert_allclose(back.friction[:, 0], -mu_k * G * cos, rtol=1e-12)


@pytest.mark.slow
def test_gradients_through_slip_and_stick():
    # x(T) after the ball rolls: the sliding distance d = 12v₀²/(49μg) plus
    # 5v₀/7 (T − t*), t* = 2v₀/(7μg); and the rolling spin φ̇ = −5v₀/(7r).
    T = 1.0

    def final(mu, v0, r):
        system = ball(0.4, mu, r)
        traj = _sim(system, jnp.array([0.0, r, 0.0]), jnp.stack([v0, 0.0, 0.0]), T, [T])
        return jnp.stack([traj.q[0, 0], traj.qd[0, 2]])

    mu, v0, r = 0.3, 2.0, 0.1
    args = (jnp.array(mu), jnp.array(v0), jnp.array(r))
    jac = np.asarray(jax.jit(jax.jacrev(final, argnums=(0, 1, 2)))(*args))
    t_star = 2 * v0 / (7 * mu * G)
    d = 12 * v0**2 / (49 * mu * G)
    dx_dmu = -d / mu + 5 * v0 / 7 * t_star / mu
    dx_dv0 = 2 * d / v0 + 5 / 7 * (T - t_star) - 5 * v0 / 7 * t_star / v0
    np.testing.assert_allclose(jac[0], [dx_dmu, 0.0], atol=1e-8)
    np.testing.assert_allclose(jac[1], [dx_dv0, -5 / (7 * r)], rtol=1e-8)
    np.testing.assert_allclose(jac[2], [0.0, 5 * v0 / (7 * r**2)], rtol=1e-8, atol=1e-8)
    # And against central differences.
    step = 1e-6
    for i in range(3):
        plus = [float(a) for a in args]
        minus = list(plus)
        plus[i] += step
        minus[i] -= step
        fd = (np.asarray(final(*plus)) - np.asarray(final(*minus))) / (2 * step)
        np.testing.assert_allclose(jac[i], fd, rtol=1e-5, atol=1e-6)


def test_gradient_through_stick_on_incline():
    # Pushed up at v₀, the block stops at d = v₀²/(2g(sin α + μ cos α)) and
    # sticks: ∂d/∂μ, ∂d/∂α, ∂d/∂v₀ in closed form.
    def stop(mu, alpha, v0):
        system = block(mu, 0.45, alpha)
        traj = _sim(system, jnp.zeros(2), jnp.stack([-v0, 0.0]), 1.0, [0.5, 1.0])
        return -traj.q[1, 0]

    mu, alpha, v0 = 0.3, 0.4, 2.0
    grads = jax.jit(jax.grad(stop, argnums=(0, 1, 2)))(mu, alpha, v0)
    den = np.sin(alpha) + mu * np.cos(alpha)
    d = v0**2 / (2 * G * den)
    expected = [
        -d * np.cos(alpha) / den,
        -d * (np.cos(alpha) - mu * np.sin(alpha)) / den,
        2 * d / v0,
    ]
    np.testing.assert_allclose(grads, expected, rtol=1e-8)
    step = 1e-6
    for i, grad in enumerate(grads):
        plus, minus = [mu, alpha, v0], [mu, alpha, v0]
        plus[i] += step
        minus[i] -= step
        fd = (float(stop(*plus)) - float(stop(*minus))) / (2 * step)
        np.testing.assert_allclose(grad, fd, rtol=1e-6)


# Several contacts: two blocks on a level floor, q = (x₁, y₁, x₂, y₂).


def _two_blocks_lagrangian(q, qd, t):
    return 0.5 * jnp.sum(qd**2) - G * (q[1] + q[3])


_TWO_BLOCKS = jl.LagrangianSystem(
    _two_blocks_lagrangian,
    unilateral=lambda q, t: q[1::2],
    slip=lambda q, qd, t: qd[::2],
    friction=jnp.array([0.2, 0.4]),
    static_friction=0.5,
)


@pytest.mark.parametrize("v2", [1.0, 2.0 * (1 + 1e-7), 2.0])
def test_two_contacts_stop_in_turn_in_one_step_or_together(v2):
    # Each stops at vᵢ/(μᵢ g) and sticks. With v₂ = 2(1 + 1e-7) the two stops are
    # 1e-7 apart, within one solver step; with v₂ = 2 simultaneous.
    v = np.array([1.0, v2])
    mu = np.array([0.2, 0.4])
    stops = v / (mu * G)
    traj = _sim(_TWO_BLOCKS, jnp.zeros(4), jnp.array([v[0], 0, v[1], 0]), 1.0, [1.0])
    assert traj.result == jl.RESULTS.successful
    count = int(traj.num_events)
    kinds = np.asarray(traj.event_kind[:count])
    rows = np.asarray(traj.event_constraint[:count])
    assert np.all(kinds == jl.EVENT_STICK)
    if v2 == 2.0:
        # One event settles both contacts (the other's slip stopped with it).
        assert count == 1
        np.testing.assert_allclose(traj.event_ts[0], stops[0], rtol=1e-9)
    else:
        assert count == 2
        order = np.argsort(stops)
        np.testing.assert_array_equal(rows, order)
        np.testing.assert_allclose(traj.event_ts[:2], stops[order], rtol=1e-9)
    np.testing.assert_allclose(traj.q[0, ::2], v**2 / (2 * mu * G), rtol=1e-9)
    np.testing.assert_allclose(traj.friction[0], 0.0, atol=1e-12)


_THETA0 = 1e-3
_SPHERE_Q0 = jnp.array([RHO * np.sin(_THETA0), RHO * np.cos(_THETA0), 0.0])


def _sphere_events(system, t1, saveat):
    return _sim(system, _SPHERE_Q0, jnp.zeros(3), t1, saveat)


def test_sphere_on_sphere_slips_then_flies_off():
    # 6.9.2: rolling needs μ = 2 sin θ/(17 cos θ − 10 cos θ₀); with μ = 1 it
    # slips at 47.54°, then (6.9.3, F = μ_k N) flies off when N = 0: against the
    # SciPy reference, angle, rates and times.
    mu_k, mu_s = 0.8, 1.0
    slip_angle = brentq(
        lambda th: 2 * np.sin(th) - mu_s * (17 * np.cos(th) - 10 * np.cos(_THETA0)),
        0.5,
        1.0,
    )
    assert abs(np.degrees(slip_angle) - 47.54) < 0.005
    reference = sphere_on_sphere(mu_k, mu_s, _THETA0, R=R, a=A, g=G)
    assert [kind for kind, *_ in reference] == ["slip", "release"]
    times = np.array([event[1] for event in reference])
    # Saved at the events, and just before the slip (a save at an event time
    # holds the state before that event only if it is not after the event).
    saves = np.concatenate([[times[0] - 1e-9], times])
    traj = _sphere_events(sphere(mu_k, mu_s), times[1] + 0.01, saves)
    assert traj.result == jl.RESULTS.successful
    kinds = np.asarray(traj.event_kind[:2])
    np.testing.assert_array_equal(kinds, [jl.EVENT_SLIP, jl.EVENT_RELEASE])
    np.testing.assert_allclose(traj.event_ts[:2], times, rtol=1e-9)
    theta = np.arctan2(traj.q[:, 0], traj.q[:, 1])
    np.testing.assert_allclose(theta[1], slip_angle, rtol=1e-9)
    for i, (_, _, th, thd, omega) in enumerate(reference, start=1):
        rho = np.hypot(traj.q[i, 0], traj.q[i, 1])
        rate = (traj.qd[i, 0] * traj.q[i, 1] - traj.qd[i, 1] * traj.q[i, 0]) / rho**2
        np.testing.assert_allclose(
            [theta[i], rate, traj.qd[i, 2]], [th, thd, omega], rtol=1e-8
        )
    # At the slip the friction is at its static limit μ_s N (holding back).
    np.testing.assert_allclose(
        traj.friction[0, 0], -mu_s * traj.multipliers[0, 0], rtol=1e-7
    )
    np.testing.assert_allclose(
        traj.friction[1, 0], -mu_k * traj.multipliers[1, 0], rtol=1e-12
    )


def test_rolling_sphere_leaves_at_ten_seventeenths():
    # With μ = 1e6 it rolls until N ≈ 0: the release is at cos θ = (10/17) cos θ₀
    # up to O(1/μ) (it slips an instant before).
    traj = _sphere_events(sphere(1e6, 1e6), 3.05, jnp.array([2.8, 2.9, 3.0]))
    count = int(traj.num_events)
    release = np.flatnonzero(np.asarray(traj.event_kind[:count]) == jl.EVENT_RELEASE)
    t_release = float(traj.event_ts[release[0]])
    again = _sphere_events(sphere(1e6, 1e6), 3.05, jnp.array([2.8, 2.9, t_release]))
    cos = again.q[2, 1] / np.hypot(again.q[2, 0], again.q[2, 1])
    np.testing.assert_allclose(cos, 10 / 17 * np.cos(_THETA0), rtol=1e-6)


def test_body_on_rolling_wheel_sticks_slips_flies():
    mu_k, mu_s, v0 = 0.3, 0.4, 1.0
    reference, stick_forces, _ = wheel_and_body(mu_k, mu_s, v0, **WHEEL, g=G)
    assert [kind for kind, *_ in reference] == ["slip", "release"]
    times = np.array([event[1] for event in reference])
    q0 = jnp.array([0.0, 0.0, WHEEL["R"], 0.0])
    qd0 = jnp.array([v0, v0 / WHEEL["R"], 0.0, v0 / WHEEL["R"]])
    saves = np.concatenate([[times[0] - 1e-9], times])
    traj = _sim(wheel(mu_k, mu_s), q0, qd0, times[1] + 0.05, saves)
    assert traj.result == jl.RESULTS.successful
    kinds = np.asarray(traj.event_kind[:2])
    np.testing.assert_array_equal(kinds, [jl.EVENT_SLIP, jl.EVENT_RELEASE])
    np.testing.assert_allclose(traj.event_ts[:2], times, rtol=1e-9)
    for i, (_, _, (th, thd, x, xd), _) in enumerate(reference, start=1):
        np.testing.assert_allclose(traj.q[i, [3, 0]], [th, x], rtol=1e-8)
        np.testing.assert_allclose(traj.qd[i, [3, 0]], [thd, xd], rtol=1e-8)
    # Just before the slip: the friction at its limit μ_s N, as in the reference.
    _, normal, friction, _ = stick_forces(reference[0][2])
    np.testing.assert_allclose(traj.multipliers[0, 1], normal, rtol=1e-7)
    np.testing.assert_allclose(traj.friction[0, 0], friction, rtol=1e-7)
    np.testing.assert_allclose(abs(friction), mu_s * normal, rtol=1e-9)


# Bad input.


def _h(q, t):
    return q[:1]


def _s(q, qd, t):
    return qd[1:2]


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(slip=_s, friction=0.3), "`slip` needs `unilateral`"),
        (dict(unilateral=_h, slip=_s), "`slip` needs `friction`"),
        (dict(unilateral=_h, friction=0.3), "`friction` needs `slip`"),
        (
            dict(unilateral=_h, slip=_s, friction=-0.1),
            r"`friction` must be finite and non-negative, got -0.1",
        ),
        (
            dict(unilateral=_h, slip=_s, friction=0.3, static_friction=0.2),
            r"`static_friction` must be at least `friction` \(μ_s ≥ μ_k\)",
        ),
        (
            dict(unilateral=_h, slip=_s, friction=0.3, static_friction=np.inf),
            r"`static_friction` must be finite and non-negative",
        ),
        (
            dict(unilateral=_h, slip=_s, friction=["rough"]),
            "`friction` must be a number or a 1-D array",
        ),
        (
            dict(unilateral=_h, slip=_s, friction="mu"),
            r"`friction` names the param 'mu', which the system's params do not "
            r"have \(they are: \[\]\)",
        ),
        (
            dict(unilateral=_h, slip=_s, friction=0.3, static_friction="mu_s"),
            r"`static_friction` names the param 'mu_s'",
        ),
        (
            dict(
                unilateral=_h, slip=_s, friction=[0.1, 0.2], static_friction=[0.3] * 3
            ),
            r"`static_friction` \(shape \(3,\)\) and `friction` \(shape \(2,\)\)",
        ),
        (
            dict(unilateral=_h, slip=lambda q, t: q[:1], friction=0.3),
            r"`slip` must take \(q, qd, t\)",
        ),
    ],
)
def test_bad_friction_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jl.LagrangianSystem(free_lagrangian, **kwargs)


def test_bad_slip_output_and_friction_shape():
    q0, qd0 = jnp.array([0.0, 0.0]), jnp.array([0.0, 1.0])
    wrong = jl.LagrangianSystem(
        free_lagrangian, unilateral=_h, slip=lambda q, qd, t: qd, friction=0.3
    )
    with pytest.raises(
        ValueError,
        match=r"`slip` must return one slip velocity .* shape \(1,\), but it returned shape \(2,\)",
    ):
        jl.simulate(wrong, q0, qd0, t1=0.1)
    per_contact = jl.LagrangianSystem(
        free_lagrangian, unilateral=_h, slip=_s, friction=jnp.array([0.1, 0.2])
    )
    with pytest.raises(
        ValueError,
        match=r"`friction` must be a scalar or have one entry per unilateral constraint, shape \(1,\), got shape \(2,\)",
    ):
        jl.simulate(per_contact, q0, qd0, t1=0.1)


TWO = jnp.array([0.05, 0.1])


def test_friction_read_from_params_follows_them():
    # `friction="mu"` and `static_friction="mu_s"` read the coefficients from the
    # params: a batch over them, and a gradient in them, change the motion.
    system = jl.LagrangianSystem(
        _incline_lagrangian,
        params={"alpha": 0.4, "mu": 0.3, "mu_s": 0.45},
        unilateral=_across,
        slip=_along,
        friction="mu",
        static_friction="mu_s",
    )
    alpha, sin, cos = 0.4, np.sin(0.4), np.cos(0.4)
    ts = jnp.array([0.5, 1.0])
    # μ_s = 0.45 ≥ tan α holds the block; μ_s = 0.42 does not: it slides.
    traj = jl.simulate_batch(
        system,
        jnp.zeros(2),
        jnp.zeros(2),
        params={"mu_s": jnp.array([0.45, 0.42])},
        t1=1.0,
        saveat=ts,
        rtol=1e-10,
        atol=1e-10,
    )
    np.testing.assert_allclose(traj.q[0, :, 0], 0.0, atol=1e-12)
    accel = G * (sin - 0.3 * cos)
    np.testing.assert_allclose(traj.q[1, :, 0], 0.5 * accel * ts**2, rtol=1e-9)

    def slid(params):
        sliding = eqx.tree_at(lambda s: s.params, system, params)
        out = _sim(sliding, jnp.zeros(2), jnp.zeros(2), 1.0, [1.0])
        return out.q[0, 0]

    grad = jax.grad(slid)({"alpha": 0.4, "mu": 0.3, "mu_s": 0.42})
    np.testing.assert_allclose(grad["mu"], -0.5 * G * cos, rtol=1e-8)
    np.testing.assert_allclose(grad["mu_s"], 0.0, atol=1e-12)
    assert system.friction is None and system.friction_param == "mu"
    # Named kinetic friction: static friction follows it by default.
    kinetic_only = jl.LagrangianSystem(
        _incline_lagrangian,
        params={"alpha": alpha, "mu": 0.3},
        unilateral=_across,
        slip=_along,
        friction="mu",
    )
    assert kinetic_only.static_friction_param == "mu"


def test_friction_is_a_differentiable_leaf_and_zero_without_slip():
    system = block(0.3, 0.45)
    leaves = eqx.filter(system, eqx.is_inexact_array)
    assert float(leaves.friction) == 0.3
    assert float(leaves.static_friction) == 0.45
    plain = jl.LagrangianSystem(free_lagrangian, unilateral=_h)
    traj = jl.simulate(
        plain, jnp.array([0.0, 0.0]), jnp.array([0.0, 1.0]), t1=0.1, saveat=TWO
    )
    # One column per contact, as with `slip` (DESIGN: shape (T, u)), all zero.
    np.testing.assert_array_equal(traj.friction, np.zeros((2, 1)))


def test_accelerations_take_the_friction_mode_of_the_state():
    # Sliding (s = v₀ > 0): ẍ = −μ g and φ̈ = −μ g r m/I; rolling (s = 0) on a
    # level floor: no acceleration, no friction. The normal force is m g.
    mu, r = 0.3, 0.1
    system = ball(0.4, mu, r)
    q = jnp.array([0.0, r, 0.0])
    sliding = jl.accelerations(system, q, jnp.array([2.0, 0.0, 0.0]), 0.0)
    np.testing.assert_allclose(sliding, [-mu * G, 0.0, -mu * G / (0.4 * r)], rtol=1e-12)
    rolling = jl.accelerations(system, q, jnp.array([2.0, 0.0, -20.0]), 0.0)
    np.testing.assert_allclose(rolling, 0.0, atol=1e-12)
    lam = jl.multipliers(system, q, jnp.array([2.0, 0.0, 0.0]), 0.0)
    np.testing.assert_allclose(lam, [G], rtol=1e-12)


# Repeated stick–slip: a block on a level floor pushed by A sin ωt.

_PUSH, _OMEGA = 4.0, 2 * np.pi


def _push(q, qd, t):
    return jnp.stack([_PUSH * jnp.sin(_OMEGA * t), jnp.zeros_like(t)])


_PUSHED = jl.LagrangianSystem(
    falling_lagrangian,
    force=_push,
    unilateral=lambda q, t: q[1:],
    slip=lambda q, qd, t: qd[:1],
    friction=0.25,
    static_friction=0.3,
)


def _stick_slip_events(mu_k, mu_s, t1):
    """The events by hand: sticking ends where |A sin ωt| = μ_s g (it slips
    along the push); slipping with σ has ẍ = A sin ωt − σ μ_k g, so
    v(t) = (A/ω)(cos ωt_s − cos ωt) − σ μ_k g (t − t_s), and ends where v = 0
    (it sticks if |A sin ωt| ≤ μ_s g there, else slips back)."""

    def push(t):
        return _PUSH * np.sin(_OMEGA * t)

    events, t, sigma = [], 0.0, 0.0
    grid = np.linspace(0.0, t1, 4001)
    while True:
        if sigma == 0.0:
            f = mu_s * G - np.abs(push(grid))
        else:
            start = t

            def velocity(s, start=start, sigma=sigma):
                return (_PUSH / _OMEGA) * (
                    np.cos(_OMEGA * start) - np.cos(_OMEGA * s)
                ) - sigma * mu_k * G * (s - start)

            f = sigma * velocity(grid)
        later = grid > t + 1e-9
        crossing = np.flatnonzero(later[1:] & (f[1:] <= 0) & (f[:-1] > 0))
        if sigma != 0.0:
            crossing = np.flatnonzero(later[1:] & (f[1:] <= 0))
        if not len(crossing):
            return events
        i = crossing[0]
        lo, hi = max(grid[i], t + 1e-9), grid[i + 1]
        if sigma == 0.0:
            t = brentq(lambda s: mu_s * G - abs(push(s)), lo, hi, xtol=1e-14)
            sigma = np.sign(push(t))
            events.append((t, jl.EVENT_SLIP))
        else:
            t = brentq(velocity, lo, hi, xtol=1e-14)
            sigma = 0.0 if abs(push(t)) <= mu_s * G else np.sign(push(t))
            events.append((t, jl.EVENT_STICK if sigma == 0.0 else jl.EVENT_SLIP))


def test_repeated_stick_slip_does_not_chatter():
    # Driven back and forth, the block slips and sticks twice per period: every
    # event against the hand solution, and few solver steps (no chattering
    # around s = 0).
    t1 = 2.0
    reference = _stick_slip_events(0.25, 0.3, t1)
    kinds = [kind for _, kind in reference]
    assert kinds == [jl.EVENT_SLIP, jl.EVENT_STICK] * 3 + [jl.EVENT_SLIP]
    # While it sticks the state stands still and the solver's steps grow long:
    # the friction limit, reached and left again within one of them, is found by
    # `EventWatch` (with the default controller: before it, the block stuck to
    # t1, 0 events of 7, unless dtmax bounded the step).
    traj = jl.simulate(
        _PUSHED,
        jnp.zeros(2),
        jnp.zeros(2),
        t1=t1,
        saveat=jnp.array([t1]),
        rtol=TOL,
        atol=TOL,
        max_events=12,
    )
    assert traj.result == jl.RESULTS.successful
    count = int(traj.num_events)
    assert count == len(reference)
    times, kinds = zip(*reference, strict=True)
    np.testing.assert_array_equal(traj.event_kind[:count], kinds)
    np.testing.assert_allclose(traj.event_ts[:count], times, rtol=1e-9)
    # A few steps around each event (116 in all): no chattering.
    assert int(traj.stats["num_steps"]) < 200
