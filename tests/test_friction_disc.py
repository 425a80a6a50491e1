"""3-D Coulomb friction: a `slip` of shape (u, 2), a friction disc per contact.

Closed forms (a block pushed in any horizontal direction stops after v₀/(μg)
at v₀²/(2μg); a solid sphere on an incline rolls at (5/7) g sin θ or slips at
g (sin θ − μ cos θ); a block on an incline held by static friction), a slip
whose direction turns under a side force against SciPy, jit/vmap, gradients
against closed forms and central differences, and the error messages.
"""

import functools

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import dense_and
from scipy.integrate import solve_ivp

import jaxlagrange as jl
from jaxlagrange._friction import contact_modes


G = 9.81
TOL = 1e-10
MU, V0, PHI = 0.3, 2.0, 0.7  # the block's friction, push speed and direction


def _sim(system, q0, qd0, t1, saveat, max_events=8):
    return jl.simulate(
        system,
        jnp.asarray(q0, float),
        jnp.asarray(qd0, float),
        t1=t1,
        saveat=jnp.asarray(saveat, float),
        rtol=TOL,
        atol=TOL,
        max_events=max_events,
    )


# A block (a point of mass 1) on the plane z = 0, q = (x, y, z), under gravity g
# along −z and a constant horizontal force F: on an incline of angle θ with x
# downhill, g = G cos θ and F = (G sin θ, 0).


def _block_lagrangian(q, qd, t, params):
    return 0.5 * jnp.sum(qd**2) - params["g"] * q[2] + params["F"] @ q[:2]


def _floor(q, t, params):
    return q[2:]


def _block_slip(q, qd, t, params):
    return qd[None, :2]


def block(mu=MU, mu_s=None, g=G, force=(0.0, 0.0)):
    params = {"g": jnp.asarray(g, float), "F": jnp.asarray(force, float)}
    return jl.LagrangianSystem(
        _block_lagrangian,
        params=params,
        unilateral=_floor,
        slip=_block_slip,
        friction=jnp.asarray(mu, float),
        static_friction=None if mu_s is None else jnp.asarray(mu_s, float),
    )


def _pushed(v0, phi=PHI):
    return [v0 * np.cos(phi), v0 * np.sin(phi), 0.0]


def test_block_pushed_in_any_direction_stops_along_it():
    t_stop, distance = V0 / (MU * G), V0**2 / (2 * MU * G)
    along = np.array([np.cos(PHI), np.sin(PHI)])
    traj = _sim(block(), np.zeros(3), _pushed(V0), 1.0, [0.2, 1.0])
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_STICK
    np.testing.assert_allclose(traj.event_ts[0], t_stop, rtol=1e-9)
    np.testing.assert_allclose(traj.q[1, :2], distance * along, rtol=1e-9)
    np.testing.assert_allclose(traj.qd[1], 0.0, atol=1e-9)
    # The friction force (T, u, 2): −μ g along the slip, then 0 at rest.
    assert traj.friction.shape == (2, 1, 2)
    np.testing.assert_allclose(traj.friction[0, 0], -MU * G * along, rtol=1e-12)
    np.testing.assert_allclose(traj.friction[1, 0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.multipliers[:, 0], G, rtol=1e-12)


def _sliding_ode(mu, force, v0):
    """m v̇ = F − μ m g v/|v| (m = 1), ẋ = v, for SciPy, until it stops."""

    def rhs(t, y):
        v = y[2:]
        return np.concatenate([v, force - mu * G * v / np.linalg.norm(v)])

    def stops(t, y):
        return np.linalg.norm(y[2:]) - 1e-9

    stops.terminal = True
    y0 = np.array([0.0, 0.0, *v0])
    return rhs, stops, y0


def test_slip_turning_under_a_side_force_follows_the_ode():
    # Pushed along x with a force F across (|F| < μ g): the slip turns towards F
    # and stops, approaching square to where it started, and sticks (μ_s g > |F|).
    force = np.array([0.0, 0.5 * MU * G])
    ts = np.array([0.1, 0.3, 0.5, 0.7, 1.5])
    traj = _sim(block(force=force), np.zeros(3), [V0, 0.0, 0.0], 1.5, ts)
    assert traj.result == jl.RESULTS.successful
    rhs, stops, y0 = _sliding_ode(MU, force, [V0, 0.0])
    ref = solve_ivp(
        rhs, (0.0, 1.5), y0, events=stops, rtol=1e-13, atol=1e-13, dense_output=True
    )
    t_stop = ref.t_events[0][0]
    assert ts[-2] < t_stop < ts[-1]
    sliding = ref.sol(ts[:-1])
    np.testing.assert_allclose(traj.q[:-1, :2], sliding[:2].T, atol=1e-7)
    np.testing.assert_allclose(traj.qd[:-1, :2], sliding[2:].T, atol=1e-7)
    np.testing.assert_allclose(traj.q[-1, :2], ref.y_events[0][0, :2], atol=1e-7)
    np.testing.assert_allclose(traj.qd[-1], 0.0, atol=1e-9)
    # Turns of 60° re-anchor the slip direction (EVENT_SLIP); then it sticks,
    # held by friction −F.
    n = int(traj.num_events)
    kinds = np.asarray(traj.event_kind[:n])
    assert np.all(kinds[:-1] == jl.EVENT_SLIP) and kinds[-1] == jl.EVENT_STICK
    np.testing.assert_allclose(traj.event_ts[n - 1], t_stop, atol=1e-7)
    np.testing.assert_allclose(traj.friction[-1, 0], -force, atol=1e-12)
    # While sliding, the friction is −μ g along the velocity.
    speed = np.linalg.norm(sliding[2:], axis=0)
    expected = -MU * G * sliding[2:].T / speed[:, None]
    np.testing.assert_allclose(traj.friction[:-1, 0], expected, atol=1e-7)


@pytest.mark.parametrize(
    "friction", [None, pytest.param("planar", marks=pytest.mark.slow)]
)
def test_a_row_resting_unloaded_hides_no_landing(friction):
    # A point dropped 0.1 m while another row, the first, touches unloaded (a
    # joint limit in free fall): its event values, λ_N = 0 and, with friction
    # μ = 0, μ_s λ_N − |λ_T| = 0, sit at 0 and must neither hide the landing
    # after √(2h/g) (else the point sinks: `contact_penetration`) nor be taken
    # for it where the floor's value ends at exactly 0 too. Frictionless in
    # CI; the planar friction row compiles longer. (A 3-D disc here, u = 2, runs
    # for minutes: XLA's CPU fusion of the unrolled 6-row Schur solve.)
    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) - G * q[0]

    def slip(q, qd, t):
        return jnp.stack([0.0 * qd[2], qd[2]])

    kwargs = (
        {} if friction is None else {"slip": slip, "friction": jnp.array([0.0, MU])}
    )
    system = jl.LagrangianSystem(lagrangian, unilateral=lambda q, t: q[1::-1], **kwargs)
    traj = _sim(system, [0.1, 0.0, 0.0], [0.0, 0.0, V0 / 4], 0.5, [0.5])
    assert traj.result == jl.RESULTS.successful
    landing = np.sqrt(0.2 / G)
    np.testing.assert_allclose(traj.event_ts[0], landing, atol=1e-9)
    assert int(traj.event_kind[0]) == jl.EVENT_IMPACT
    assert int(traj.event_constraint[0]) == 1
    np.testing.assert_allclose(traj.q[-1, :2], 0.0, atol=1e-10)
    v = V0 / 4  # frictionless: it slides on; else it stops after v²/(2 μ g)
    slide = 0.5 * v if friction is None else v * landing + v**2 / (2 * MU * G)
    np.testing.assert_allclose(traj.q[-1, 2], slide, atol=1e-9)
    assert int(traj.num_events) == (1 if friction is None else 2)


def test_block_on_incline_held_by_static_friction():
    theta = 0.4  # tan θ = 0.4228 < μ_s
    incline = block(0.3, 0.45, G * np.cos(theta), (G * np.sin(theta), 0.0))
    traj = _sim(incline, np.zeros(3), np.zeros(3), 1.0, [0.5, 1.0])
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 0
    np.testing.assert_allclose(traj.q, 0.0, atol=1e-12)
    expected = np.broadcast_to([-G * np.sin(theta), 0.0], (2, 2))
    np.testing.assert_allclose(traj.friction[:, 0], expected, atol=1e-12)


def _ramp_lagrangian(q, qd, t, params):  # a horizontal force k t growing from 0
    return 0.5 * jnp.sum(qd**2) - G * q[2] + t * params["k"] @ q[:2]


def test_growing_push_breaks_static_friction_and_slides_along_it():
    # F = k t along ψ: held until |F| = μ_s g at t_s (friction −F), then slips
    # along ψ, against λ_T, with v = k (t² − t_s²)/2 − μ_k g (t − t_s).
    mu_k, mu_s, t_s, psi = 0.3, 0.4, 0.5, 2.0
    along = np.array([np.cos(psi), np.sin(psi)])
    k = mu_s * G / t_s
    system = jl.LagrangianSystem(
        _ramp_lagrangian,
        params={"k": jnp.asarray(k * along)},
        unilateral=_floor,
        slip=_block_slip,
        friction=mu_k,
        static_friction=mu_s,
    )
    ts = np.array([0.25, 1.0])
    traj = _sim(system, np.zeros(3), np.zeros(3), 1.0, ts)
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 1
    assert int(traj.event_kind[0]) == jl.EVENT_SLIP
    np.testing.assert_allclose(traj.event_ts[0], t_s, rtol=1e-9)
    np.testing.assert_allclose(traj.q[0], 0.0, atol=1e-12)
    np.testing.assert_allclose(traj.friction[0, 0], -k * ts[0] * along, rtol=1e-9)
    t = ts[1]
    speed = k * (t**2 - t_s**2) / 2 - mu_k * G * (t - t_s)
    distance = k * (t**3 / 6 - t_s**2 * t / 2 + t_s**3 / 3)
    distance -= mu_k * G * (t - t_s) ** 2 / 2
    np.testing.assert_allclose(traj.qd[1, :2], speed * along, rtol=1e-9)
    np.testing.assert_allclose(traj.q[1, :2], distance * along, rtol=1e-9)
    np.testing.assert_allclose(traj.friction[1, 0], -mu_k * G * along, rtol=1e-9)


# A solid sphere (mass 1, radius A, I = 2/5 A²) on an incline of angle θ: q =
# (x, y, z, three rotation coordinates), x downhill, z normal to the slope; the
# rotation coordinates' rates are the angular velocity ω (a sphere's kinetic
# energy and equations depend on ω alone). The contact point, at −A ẑ from the
# centre, moves with v + ω × (−A ẑ) = (ẋ − A ω_y, ẏ + A ω_x).

A, THETA = 0.1, 0.4


def _sphere_lagrangian(q, qd, t):
    kinetic = 0.5 * jnp.sum(qd[:3] ** 2) + 0.2 * A**2 * jnp.sum(qd[3:] ** 2)
    return kinetic + G * (q[0] * jnp.sin(THETA) - q[2] * jnp.cos(THETA))


def _on_incline(q, t):
    return q[2:3] - A


def _contact_point(q, qd, t):
    return jnp.stack([qd[0] - A * qd[4], qd[1] + A * qd[3]])[None]


def _sphere(mu):
    return jl.LagrangianSystem(
        _sphere_lagrangian,
        unilateral=_on_incline,
        slip=_contact_point,
        friction=jnp.asarray(mu, float),
    )


@pytest.mark.parametrize("mu", [0.3, 0.1])  # (2/7) tan θ = 0.1208
def test_sphere_on_incline_rolls_or_slips(mu):
    vy = 0.5  # rolling across the slope as well
    q0 = [0.0, 0.0, A, 0.0, 0.0, 0.0]
    qd0 = [0.0, vy, 0.0, -vy / A, 0.0, 0.0]
    ts = np.array([0.25, 0.5])
    traj = _sim(_sphere(mu), q0, qd0, 0.5, ts)
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 0
    sin, cos = np.sin(THETA), np.cos(THETA)
    rolls = mu >= 2 / 7 * np.tan(THETA)
    accel = 5 / 7 * G * sin if rolls else G * (sin - mu * cos)
    np.testing.assert_allclose(traj.q[:, 0], 0.5 * accel * ts**2, rtol=1e-9)
    np.testing.assert_allclose(traj.q[:, 1], vy * ts, rtol=1e-9)
    np.testing.assert_allclose(traj.q[:, 2], A, atol=1e-12)
    friction = -2 / 7 * G * sin if rolls else -mu * G * cos
    expected = np.broadcast_to([friction, 0.0], (2, 2))
    np.testing.assert_allclose(traj.friction[:, 0], expected, atol=1e-9)
    if rolls:
        np.testing.assert_allclose(traj.qd[:, 4], accel * ts / A, rtol=1e-9)


def _contact_point_of(q, qd, t, params):  # `_contact_point`, its radius a param
    a = params["a"]
    return jnp.stack([qd[0] - a * qd[4], qd[1] + a * qd[3]])[None]


def test_a_float32_state_stays_float32_beside_float64_params():
    # The radius in s is a float64 param (x64): the friction forces and the
    # slip directions (u, 2) keep a float32 state's dtype. Thrown without
    # spin, the sphere slips, then rolls.
    system = jl.LagrangianSystem(
        lambda q, qd, t, params: _sphere_lagrangian(q, qd, t),  # a = A there
        params={"a": A},
        unilateral=lambda q, t, params: _on_incline(q, t),
        slip=_contact_point_of,
        friction=0.3,
    )
    q0, qd0 = jnp.array([0.0, 0.0, A, 0.0, 0.0, 0.0]), jnp.zeros(6).at[:2].set(1.0)
    t1, ts = 0.6, [0.1, 0.6]
    ref = jl.simulate(system, q0, qd0, t1=t1, saveat=jnp.array(ts))
    q32, qd32 = q0.astype(jnp.float32), qd0.astype(jnp.float32)
    traj = jl.simulate(system, q32, qd32, t1=t1, saveat=jnp.array(ts, jnp.float32))
    assert traj.result == ref.result == jl.RESULTS.successful
    assert traj.q.dtype == traj.qd.dtype == traj.friction.dtype == jnp.float32
    assert int(traj.event_kind[int(traj.num_events) - 1]) == jl.EVENT_STICK
    # The modes carried between events (not in the trajectory): d = s/|s| too.
    _, modes = contact_modes(system, q32, qd32, jnp.float32(0.0))
    assert modes.direction.dtype == jnp.float32
    # It sticks at |s| ≤ √eps, 3e-4 in float32: φ̇ differs by up to 3e-4/A.
    np.testing.assert_allclose(traj.q, ref.q, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(traj.qd, ref.qd, rtol=1e-3, atol=1e-4)


def test_a_slip_stopping_below_the_solvers_resolution_sticks_without_chatter():
    # The sphere thrown at (1, 1) without spin slips, its slip turning towards
    # downhill (never 60° from where it started), and sticks. Near the stop s/|s|
    # turns at a rate ~|ṡ|/|s| that the steps don't follow: the slip swung ±60°
    # about downhill and re-anchored (`EVENT_SLIP`) until |s| fell below √eps, 3
    # times in 3e-8 s at the default tolerances and 5 in the last 1e-6 s at 1e-6.
    # Below the solver's resolution of s it is tried as sticking, within the
    # solver's accuracy of the stop time (that of a run at 1e-12).
    def run(tol):
        q0, qd0 = jnp.array([0.0, 0.0, A, 0.0, 0.0, 0.0]), jnp.zeros(6).at[:2].set(1)
        return jl.simulate(_sphere(0.3), q0, qd0, t1=0.3, rtol=tol, atol=tol)

    fine = run(1e-12)
    assert int(fine.num_events) == 1 and int(fine.event_kind[0]) == jl.EVENT_STICK
    for tol in (1e-8, 1e-6):  # 1e-8: the default
        traj = run(tol)
        assert traj.result == jl.RESULTS.successful
        n = int(traj.num_events)
        assert int(traj.event_kind[n - 1]) == jl.EVENT_STICK
        stick = float(traj.event_ts[n - 1])
        assert abs(stick - float(fine.event_ts[0])) <= tol
        kinds, ts = np.asarray(traj.event_kind[:n]), np.asarray(traj.event_ts[:n])
        assert np.all(kinds[:-1] == jl.EVENT_SLIP)
        assert np.sum(ts[:-1] > stick - 1e-6) <= 2


def _pushed_sideways_lagrangian(q, qd, t, params):  # + a force k t along y
    return _sphere_lagrangian(q, qd, t) + params["k"] * t * q[1]


def test_a_stick_left_with_an_unresolved_slip_breaks_against_its_friction():
    # The sphere's slip stops (as above) with a residual s below the solver's
    # resolution, which sticking then keeps. A side force k t grows until the
    # disc can no longer hold it: at |a|/3.5 = μ g cos θ, a = (g sin θ, k t) the
    # contact point's acceleration without friction (1/m + A²/I = 3.5), it slips
    # against λ_T = −a/3.5, and then ṡ = a − 3.5 μ N s/|s|. Its anchor used to be
    # re-read from the residual s, noise pointing anywhere: the slip turned 60°
    # from it at once and re-anchored (the dm_control hopper did this 700 times
    # at one instant).
    k, mu, normal = 10.0, 0.3, G * np.cos(THETA)
    system = jl.LagrangianSystem(
        _pushed_sideways_lagrangian,
        params={"k": jnp.asarray(k)},
        unilateral=lambda q, t, params: _on_incline(q, t),
        slip=lambda q, qd, t, params: _contact_point(q, qd, t),
        friction=jnp.asarray(mu),
    )
    t_s = np.sqrt((3.5 * mu * normal) ** 2 - (G * np.sin(THETA)) ** 2) / k

    def slipping(t, y):  # s, then the velocities' and ω's rates
        friction = -mu * normal * y[:2] / np.linalg.norm(y[:2])
        a = np.array([G * np.sin(THETA), k * t])
        spin = np.array([friction[1], -friction[0]]) / (0.4 * A)
        return np.concatenate([a + 3.5 * friction, a + friction, spin])

    a = np.array([G * np.sin(THETA), k * t_s])
    start = np.concatenate([1e-14 * a / np.linalg.norm(a), np.zeros(4)])
    ode = solve_ivp(slipping, (t_s, 1.2), start, "Radau", rtol=1e-12, atol=1e-14)
    change = ode.y[2:, -1]  # of (ẋ, ẏ, ω_x, ω_y) over the slip
    q0, qd0 = jnp.array([0.0, 0.0, A, 0.0, 0.0, 0.0]), jnp.zeros(6).at[:2].set(1)
    for tol in (1e-12, 1e-8, 1e-6):  # 1e-8: the default
        saveat = jnp.array([t_s, 1.2])
        traj = jl.simulate(system, q0, qd0, t1=1.2, saveat=saveat, rtol=tol, atol=tol)
        n = int(traj.num_events)
        kinds = np.asarray(traj.event_kind[:n]).tolist()
        assert kinds[-2:] == [jl.EVENT_STICK, jl.EVENT_SLIP]
        assert kinds.count(jl.EVENT_SLIP) <= 1 + (tol > 1e-12) * 2  # above: ≤ 2
        np.testing.assert_allclose(traj.event_ts[n - 1], t_s, rtol=0, atol=tol)
        slip = np.asarray(traj.qd[1] - traj.qd[0])[[0, 1, 3, 4]]
        # The onset of a 3-D slip, where s/|s| is unresolved, is followed to
        # about 1e-3 of the change at the default tolerances (found, not fixed).
        np.testing.assert_allclose(slip, change, rtol=1e-7 if tol < 1e-8 else 3e-3)


def _stop_distance(mu, v0):
    qd0 = jnp.stack([v0 * np.cos(PHI), v0 * np.sin(PHI), 0.0])
    traj = _sim(block(mu), jnp.zeros(3), qd0, 1.0, [0.2, 1.0])  # compiled once
    return jnp.hypot(traj.q[1, 0], traj.q[1, 1])


def test_jit_vmap_equivalence():
    v0s = jnp.array([1.0, 1.5, 2.0])
    batched = jax.jit(jax.vmap(_stop_distance, in_axes=(None, 0)))(MU, v0s)
    single = [float(_stop_distance(MU, v0)) for v0 in v0s]
    np.testing.assert_allclose(batched, single, rtol=1e-12)
    np.testing.assert_allclose(batched, v0s**2 / (2 * MU * G), rtol=1e-9)


def test_gradient_of_sliding_distance():
    # The quick version of the one below: before the stop (at v₀/(μg) ≈ 0.68 s)
    # the block slides d(t) = v₀t − μgt²/2, so ∂d/∂μ = −gt²/2 and ∂d/∂v₀ = t;
    # the gradient is also checked against central differences. Forward mode
    # (its compile is a seventh of reverse mode's through the event loop; the
    # slow test below differentiates in reverse).
    t1 = 0.3

    def distance(mu, v0, adjoint=None):
        qd0 = jnp.stack([v0 * np.cos(PHI), v0 * np.sin(PHI), 0.0])
        traj = jl.simulate(
            block(mu), jnp.zeros(3), qd0, t1=t1, saveat=jnp.asarray([t1]),
            rtol=TOL, atol=TOL, max_events=2, adjoint=adjoint,
        )  # fmt: skip
        return jnp.hypot(traj.q[0, 0], traj.q[0, 1])

    forward_mode = functools.partial(distance, adjoint=diffrax.ForwardMode())
    grads = jax.jit(jax.jacfwd(forward_mode, argnums=(0, 1)))(MU, V0)
    np.testing.assert_allclose(grads, [-G * t1**2 / 2, t1], rtol=1e-8)
    forward, step = jax.jit(distance), 1e-5
    fd = (forward(MU + step, V0) - forward(MU - step, V0)) / (2 * step)
    np.testing.assert_allclose(grads[0], fd, rtol=1e-5)
    fd = (forward(MU, V0 + step) - forward(MU, V0 - step)) / (2 * step)
    np.testing.assert_allclose(grads[1], fd, rtol=1e-5)


@pytest.mark.slow  # 613 s in CI: test_gradient_of_sliding_distance is its quick form
def test_gradient_of_stopping_distance():
    grads = jax.jit(jax.grad(_stop_distance, argnums=(0, 1)))(MU, V0)
    distance = V0**2 / (2 * MU * G)
    np.testing.assert_allclose(grads, [-distance / MU, V0 / (MU * G)], rtol=1e-8)
    step = 1e-5
    for i, grad in enumerate(grads):
        plus, minus = [MU, V0], [MU, V0]
        plus[i] += step
        minus[i] -= step
        fd = (float(_stop_distance(*plus)) - float(_stop_distance(*minus))) / (2 * step)
        np.testing.assert_allclose(grad, fd, rtol=1e-5)


@pytest.mark.parametrize("solver", dense_and("cholesky", "cg"))
def test_accelerations_with_every_mass_solver(solver):
    # F = (2, 1): slipping along (1, 1), q̈ = F − μ_k g (1, 1)/√2; at rest the
    # static disc holds it (|F| < μ_s g): q̈ = 0.
    system = jl.LagrangianSystem(
        _block_lagrangian,
        params={"g": G, "F": jnp.array([2.0, 1.0])},
        unilateral=_floor,
        slip=_block_slip,
        friction=0.3,
        static_friction=0.5,
        mass_solver=solver,
    )
    slipping = jl.accelerations(system, jnp.zeros(3), jnp.array([1.0, 1.0, 0.0]), 0.0)
    expected = [2.0 - 0.3 * G / 2**0.5, 1.0 - 0.3 * G / 2**0.5, 0.0]
    np.testing.assert_allclose(slipping, expected, rtol=1e-10, atol=1e-12)
    at_rest = jl.accelerations(system, jnp.zeros(3), jnp.zeros(3), 0.0)
    np.testing.assert_allclose(at_rest, 0.0, atol=1e-10)


def test_slip_of_wrong_shape_and_kernel_refuse():
    def wrong(q, qd, t, params):
        return qd[None, :3]

    system = jl.LagrangianSystem(
        _block_lagrangian,
        params={"g": G, "F": jnp.zeros(2)},
        unilateral=_floor,
        slip=wrong,
        friction=MU,
    )
    with pytest.raises(
        ValueError,
        match=r"`slip` must return .* \(a tangent basis\): shape \(1, 2\) or shape "
        r"\(1,\), but it returned shape \(1, 3\)",
    ):
        jl.simulate(system, jnp.zeros(3), jnp.ones(3), t1=0.1)
    # The fused kernel has no contacts, so no friction either: refused by name.
    with pytest.raises(ValueError, match=r"backend='kernel' does not support unilat"):
        jl.simulate_batch(
            block(), jnp.zeros((2, 3)), jnp.ones((2, 3)), t1=0.1, backend="kernel"
        )
