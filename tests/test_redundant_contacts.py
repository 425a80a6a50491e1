"""Redundant rows solved least-norm, simultaneous impacts, bounces that come to rest.

A box on a gimbal (heave z, roll φ, pitch θ) touches the floor at four corners:
four rows blocking three directions. A rod falls flat on its two ends. A planar
four-bar is closed by a 3-row connect whose out-of-plane row is redundant. A bar
rocks on its two ends, each plastic impact lifting the other, until it rests.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import dense_and, free_lagrangian

import jaxlagrange as jl
from jaxlagrange._mass._linalg import min_norm_solve


G, MASS, A, B = 9.81, 2.0, 0.3, 0.2
CORNERS = np.array([[sx, sy] for sx in (1.0, -1.0) for sy in (1.0, -1.0)])
TS = np.linspace(0.0, 0.6, 61)


def _box_lagrangian(q, qd, t):
    return 0.5 * (MASS * qd[0] ** 2 + 0.05 * qd[1] ** 2 + 0.08 * qd[2] ** 2) - (
        MASS * G * q[0]
    )


def _corners(q, t):
    return q[0] + CORNERS[:, 1] * B * jnp.sin(q[1]) + CORNERS[:, 0] * A * jnp.sin(q[2])


def _box(e=0.0, **options):
    return jl.LagrangianSystem(
        _box_lagrangian, unilateral=_corners, restitution=e, **options
    )


def _drop(e, height, v0=0.0, **kwargs):
    q0, qd0 = jnp.array([height, 0.0, 0.0]), jnp.array([v0, 0.0, 0.0])
    return jl.simulate(_box(e), q0, qd0, t1=0.6, saveat=TS, max_events=40, **kwargs)


def test_min_norm_solve_of_a_singular_system_and_its_gradient():
    # S = Y Yᵀ of rank 2 with a consistent right-hand side: x = S⁺ b.
    y = jnp.array([[1.0, 0.0], [0.0, 2.0], [1.0, 2.0], [3.0, -1.0]])
    s, b = y @ y.T, y @ jnp.array([0.3, -0.7])
    x, inconsistent = min_norm_solve(s, b)
    np.testing.assert_allclose(x, np.linalg.pinv(np.asarray(s)) @ b, atol=1e-12)
    assert not inconsistent
    assert min_norm_solve(s, b.at[0].add(1.0))[1]  # off the range: flagged

    # Its derivative along a rank-preserving change of S and b: finite differences.
    def solve(p):
        yp = y.at[0, 0].set(1.0 + p)
        return min_norm_solve(yp @ yp.T, yp @ jnp.array([0.3, -0.7 + p]))[0]

    step = 1e-6
    fd = (solve(step) - solve(-step)) / (2 * step)
    np.testing.assert_allclose(jax.jacfwd(solve)(0.0), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jax.jacrev(solve)(0.0), fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("solver", dense_and("cholesky", "cg"))
def test_box_flat_on_the_floor_shares_its_weight(solver):
    box = _box(mass_solver=solver)
    q, qd = jnp.zeros(3), jnp.zeros(3)
    np.testing.assert_allclose(
        jl.multipliers(box, q, qd, 0.0), MASS * G / 4, rtol=1e-10
    )
    np.testing.assert_allclose(jl.accelerations(box, q, qd, 0.0), 0.0, atol=1e-10)


def test_box_at_rest_stays_at_rest():
    traj = _drop(0.0, 0.0)
    assert traj.result == jl.RESULTS.successful and int(traj.num_events) == 0
    np.testing.assert_allclose(traj.q, 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.multipliers, MASS * G / 4, rtol=1e-10)


def test_box_dropped_flat_lands_on_all_four_corners():
    height = 0.05
    traj = _drop(0.0, height)
    assert traj.result == jl.RESULTS.successful and int(traj.num_events) == 1
    assert traj.event_kind[0] == jl.EVENT_IMPACT
    np.testing.assert_allclose(traj.event_ts[0], np.sqrt(2 * height / G), atol=1e-9)
    landed = TS > traj.event_ts[0]
    np.testing.assert_allclose(traj.q[landed], 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.qd[landed], 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.multipliers[landed], MASS * G / 4, rtol=1e-8)


def test_box_with_restitution_bounces_flat_and_comes_to_rest():
    e, height = 0.5, 0.05
    traj = _drop(e, height)
    assert traj.result == jl.RESULTS.successful
    count = int(traj.num_events)
    assert 0 < count < 40
    # The heave bounces as a ball: energy e^(2k) m g h after k bounces (apexes
    # e^(2k) h), flat throughout, at rest before the Zeno time.
    energy = 0.5 * MASS * traj.qd[:, 0] ** 2 + MASS * G * traj.q[:, 0]
    bounces = np.searchsorted(np.asarray(traj.event_ts[:count]), TS)
    flying = bounces < count
    np.testing.assert_allclose(
        energy[flying], MASS * G * height * e ** (2.0 * bounces[flying]), rtol=1e-7
    )
    np.testing.assert_allclose(traj.q[:, 1:], 0.0, atol=1e-10)
    zeno = np.sqrt(2 * height / G) * (1 + e) / (1 - e)
    assert zeno - 1e-3 < traj.event_ts[count - 1] < zeno
    rest = ~flying
    assert rest.sum() > 10
    np.testing.assert_allclose(traj.q[rest], 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.multipliers[rest], MASS * G / 4, rtol=1e-8)


def _rocker(inertia):
    # A bar on a frictionless floor (x, y, tilt θ), its ends at y ∓ sin θ / 2.
    def lagrangian(q, qd, t):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2 + inertia * qd[2] ** 2) - G * q[1]

    def ends(q, t):
        return q[1] + jnp.array([-0.5, 0.5]) * jnp.sin(q[2])

    return jl.LagrangianSystem(lagrangian, unilateral=ends)


def test_a_bar_rocking_on_its_ends_comes_to_rest():
    # Tilted on end 0, the bar falls onto end 1; its rotary inertia (above
    # m L²/4) makes end 0 pull at that plastic impact, so end 0 lifts, falls,
    # lifts end 1, and so on, with ever shorter flights. A held end lifted by
    # an impact is judged by its free fall: once it would rise less than atol
    # the impact holds it. Judged by its own ḧ (0 while held) it rocked on
    # to √eps m/s: 18 events instead of 8.
    tilt = 0.3
    q0 = jnp.array([0.0, 0.5 * np.sin(tilt), tilt])
    ts = np.linspace(0.0, 1.0, 41)
    traj = jl.simulate(_rocker(0.5), q0, jnp.zeros(3), t1=1.0, saveat=ts)
    assert traj.result == jl.RESULTS.successful
    count = int(traj.num_events)
    assert count <= 10
    rows = np.asarray(traj.event_constraint[:count])
    np.testing.assert_array_equal(rows, np.arange(1, count + 1) % 2)  # 1, 0, 1, …
    np.testing.assert_array_equal(traj.event_kind[:count], jl.EVENT_IMPACT)
    energy = 0.5 * (traj.qd[:, 0] ** 2 + traj.qd[:, 1] ** 2 + 0.5 * traj.qd[:, 2] ** 2)
    energy = energy + G * traj.q[:, 1]
    assert np.all(np.diff(energy) <= 1e-6 * energy[0])  # the solver's error
    rest = ts > float(traj.event_ts[count - 1])
    # An end lifted from 1.4e-9 m below the floor (the drift of a held row, well
    # within `contact_penetration`'s tolerance) lands back at that depth.
    ends = jax.vmap(lambda q: q[1] + jnp.array([-0.5, 0.5]) * jnp.sin(q[2]))(traj.q)
    np.testing.assert_allclose(ends[rest], 0.0, atol=2e-9)
    np.testing.assert_allclose(traj.qd[rest], 0.0, atol=1e-10)
    np.testing.assert_allclose(traj.multipliers[rest], G / 2, rtol=1e-8)


ENDS = jnp.array([-0.8, 0.2])  # a bar's ends from its centre of mass
K_PUSH, MU_FLAT = 10.0, 0.5


def _pushed_bar_lagrangian(q, qd, t):  # q = (x, y, z, pitch), pushed by K t along x
    kinetic = 0.5 * jnp.sum(qd[:3] ** 2) + 0.15 * qd[3] ** 2
    return kinetic - G * q[2] + K_PUSH * t * q[0]


def _bar_slips(q, qd, t):  # both ends' (u, 2): equal while the bar lies flat
    along = qd[0] - ENDS * jnp.sin(q[3]) * qd[3]
    return jnp.stack([along, jnp.full(2, qd[1])], axis=1)


@pytest.mark.parametrize("tol", [1e-10, 1e-8, 1e-6])
def test_a_flat_bar_whose_light_end_reaches_its_friction_limit_first(tol):
    # The bar lies flat on its two ends, which carry 0.2 and 0.8 of its weight,
    # and slip together. The least-norm split of the push K t gives each end half:
    # the light end reaches μ 0.2 g at t = 0.4 μ g/K and slips at that limit while
    # the heavy end sticks and holds the bar (and so the light end's slip) at
    # rest, until K t = μ g. A slip velocity left from the start (1e-9, below
    # √eps: sticking) made the light end's slip σ s < 0 at once: it fired again at
    # the same instant, without end (`max_events_reached`).
    system = jl.LagrangianSystem(
        _pushed_bar_lagrangian,
        unilateral=lambda q, t: q[2] - ENDS * jnp.sin(q[3]),
        slip=_bar_slips,
        friction=MU_FLAT,
    )
    v0, t_b = -1e-9, MU_FLAT * G / K_PUSH
    qd0 = jnp.zeros(4).at[0].set(v0)
    traj = jl.simulate(
        system,
        jnp.zeros(4),
        qd0,
        t1=1.0,
        saveat=jnp.array([0.3, 1.0]),
        rtol=tol,
        atol=tol,
    )
    assert traj.result == jl.RESULTS.successful
    assert int(traj.num_events) == 2
    assert np.asarray(traj.event_kind[:2]).tolist() == [jl.EVENT_SLIP] * 2
    assert np.asarray(traj.event_constraint[:2]).tolist() == [0, 1]
    np.testing.assert_allclose(traj.event_ts[:2], [0.4 * t_b, t_b], rtol=1e-9)
    light = MU_FLAT * 0.2 * G
    np.testing.assert_allclose(
        traj.friction[0], [[-light, 0.0], [light - K_PUSH * 0.3, 0.0]], atol=1e-9
    )
    # Then both slide: ẍ = K t − μ g.
    x = K_PUSH * (1 / 6 - t_b**2 / 2 + t_b**3 / 3) - MU_FLAT * G * (1 - t_b) ** 2 / 2
    np.testing.assert_allclose(traj.q[1, 0], x + v0, rtol=0, atol=1e-9 + tol)


def test_gradients_of_shared_contact_forces():
    # The least-norm forces of the four corners, differentiated in any tilt
    # (four rows of rank three throughout): exact derivatives, never NaN.
    box = _box()
    force = lambda q: jl.multipliers(box, q, jnp.array([0.3, -0.2, 0.5]), 0.0)  # noqa: E731
    q = jnp.array([0.0, 0.1, -0.2])
    jac = jax.jacfwd(force)(q)
    step = 1e-6
    for i in range(3):
        dq = jnp.zeros(3).at[i].set(step)
        fd = (force(q + dq) - force(q - dq)) / (2 * step)
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(jax.jacrev(force)(q), jac, rtol=1e-10, atol=1e-12)


@pytest.mark.slow
def test_gradients_of_a_flat_landing():
    # With e = 0.5 the box is in its first rebound at t1 = 0.15: the final heave
    # and its rate depend smoothly on the drop height and the initial velocity.
    def final(p):
        traj = _drop(0.5, p[0], p[1])
        return jnp.stack([traj.q[15, 0], traj.qd[15, 0]])

    p = jnp.array([0.05, 0.1])
    jac = jax.jacrev(final)(p)
    assert np.all(np.isfinite(jac))
    step = 1e-5
    for i in range(2):
        dp = jnp.zeros(2).at[i].set(step)
        fd = (final(p + dp) - final(p - dp)) / (2 * step)
        np.testing.assert_allclose(jac[:, i], fd, rtol=1e-5)
    # Closed form: impact speed v = √(v0² + 2gh) at t_i = (v0 + v)/g, then up at e v.
    h, v0 = float(p[0]), float(p[1])
    v = np.sqrt(v0**2 + 2 * G * h)
    tau = 0.15 - (v0 + v) / G
    np.testing.assert_allclose(
        final(p), [0.5 * v * tau - G * tau**2 / 2, 0.5 * v - G * tau], rtol=1e-8
    )


# A rod (x, z, θ) of half-length l, frictionless ends on the floor.
L_ROD = 0.4


def _rod_lagrangian(q, qd, t):
    inertia = MASS * L_ROD**2 / 3
    return (
        0.5 * MASS * (qd[0] ** 2 + qd[1] ** 2)
        + 0.5 * inertia * qd[2] ** 2
        - (MASS * G * q[1])
    )


def test_rod_falling_flat_lands_on_both_ends():
    ends = lambda q, t: q[1] + jnp.array([1.0, -1.0]) * L_ROD * jnp.sin(q[2])  # noqa: E731
    rod = jl.LagrangianSystem(_rod_lagrangian, unilateral=ends)
    ts = np.linspace(0.0, 0.5, 11)
    traj = jl.simulate(
        rod, jnp.array([0.0, 0.1, 0.0]), jnp.array([0.3, 0.0, 0.0]), t1=0.5, saveat=ts
    )
    assert traj.result == jl.RESULTS.successful and int(traj.num_events) == 1
    landed = ts > np.sqrt(2 * 0.1 / G)
    np.testing.assert_allclose(traj.q[landed, 1:], 0.0, atol=1e-10)
    np.testing.assert_allclose(
        traj.qd[landed], [[0.3, 0.0, 0.0]] * landed.sum(), atol=1e-10
    )
    np.testing.assert_allclose(traj.multipliers[landed], MASS * G / 2, rtol=1e-8)


# A planar four-bar: crank (ground pivot at 0), coupler, rocker (ground pivot at
# D); q = the three link angles, the coupler's end joined to the rocker's.
LINKS, D = np.array([0.3, 0.8, 0.6]), np.array([0.7, 0.0, 0.0])


def _ends(q):
    unit = lambda a: jnp.stack([jnp.cos(a), jnp.sin(a), 0.0 * a])  # noqa: E731
    crank = LINKS[0] * unit(q[0])
    return crank, crank + LINKS[1] * unit(q[1]), D + LINKS[2] * unit(q[2])


def _four_bar_lagrangian(q, qd, t):
    def centres(q):
        crank, coupler, _ = _ends(q)
        rocker = D + 0.5 * LINKS[2] * jnp.stack([jnp.cos(q[2]), jnp.sin(q[2]), 0.0])
        return jnp.stack([0.5 * crank, 0.5 * (crank + coupler), rocker])

    x, v = jax.jvp(centres, (q,), (qd,))
    kinetic = 0.5 * jnp.sum(v**2) + 0.5 * jnp.sum(LINKS**2 / 12 * qd**2)
    return kinetic - G * jnp.sum(x[:, 1])


def _connect(rows):
    def closure(q, t):
        _, coupler, rocker = _ends(q)
        return (coupler - rocker)[:rows]  # 3 rows: the out-of-plane one redundant

    return closure


def test_planar_four_bar_with_a_redundant_connect_row():
    redundant = jl.LagrangianSystem(_four_bar_lagrangian, holonomic=_connect(3))
    plain = jl.LagrangianSystem(_four_bar_lagrangian, holonomic=_connect(2))
    q0, qd0 = jl.project_initial_state(
        redundant, jnp.array([1.2, 0.2, 1.7]), jnp.array([2.0, 0.0, 0.0])
    )
    assert np.max(np.abs(_connect(3)(q0, 0.0))) < 1e-12
    ts = np.linspace(0.0, 2.0, 21)
    traj = jl.simulate(redundant, q0, qd0, t1=2.0, saveat=ts)
    assert traj.result == jl.RESULTS.successful
    residual = jax.vmap(lambda q: _connect(3)(q, 0.0))(traj.q)
    assert np.max(np.abs(residual)) <= 1e-8
    # q̈ and the in-plane multipliers as without the redundant row, which carries none.
    acc = jax.vmap(lambda q, qd: jl.accelerations(redundant, q, qd, 0.0))
    acc_plain = jax.vmap(lambda q, qd: jl.accelerations(plain, q, qd, 0.0))
    np.testing.assert_allclose(
        acc(traj.q, traj.qd), acc_plain(traj.q, traj.qd), atol=1e-10
    )
    lam = jax.vmap(lambda q, qd: jl.multipliers(plain, q, qd, 0.0))(traj.q, traj.qd)
    np.testing.assert_allclose(traj.multipliers[:, :2], lam, atol=1e-9)
    np.testing.assert_allclose(traj.multipliers[:, 2], 0.0, atol=1e-12)


def test_redundant_rows_that_contradict_are_refused():
    # Rows q₀ and q₀ − t²: the same row of C, but q̈₀ = 0 and q̈₀ = 2.
    rows = lambda q, t: jnp.stack([q[0], q[0] - t**2])  # noqa: E731
    system = jl.LagrangianSystem(free_lagrangian, holonomic=rows)
    with pytest.raises(Exception, match="rows contradict each other"):
        jl.accelerations(system, jnp.zeros(2), jnp.zeros(2), 0.0)
    traj = jl.simulate(system, jnp.zeros(2), jnp.zeros(2), t1=1.0, throw=False)
    assert traj.result == jl.RESULTS.redundant_constraints
    # Never satisfiable (q₀ = 1 and q₀ = 2): refused at t0.
    apart = jl.LagrangianSystem(
        free_lagrangian, holonomic=lambda q, t: jnp.stack([q[0] - 1.0, q[0] - 2.0])
    )
    with pytest.raises(ValueError, match="inconsistent at the initial state"):
        jl.simulate(apart, jnp.array([1.0, 0.0]), jnp.zeros(2), t1=1.0)


def test_a_contact_that_sinks_is_no_success():
    # The floor drops by 2 at t = 0.5 (a step in t): the contact is below h = 0.
    def lagrangian(q, qd, t):
        return 0.5 * qd[0] ** 2 - G * q[0]

    floor = lambda q, t: q[:1] + jnp.where(t < 0.5, 0.0, -2.0)  # noqa: E731
    system = jl.LagrangianSystem(lagrangian, unilateral=floor)
    traj = jl.simulate(system, jnp.zeros(1), jnp.zeros(1), t1=1.0, throw=False)
    assert traj.result == jl.RESULTS.contact_penetration
    with pytest.raises(Exception, match="sank below h = 0"):
        jl.simulate(system, jnp.zeros(1), jnp.zeros(1), t1=1.0)


# The rod on three points (ends and middle) with Coulomb friction: three normal
# rows blocking two directions, the friction Schur complement singular.
THREE = jnp.array([1.0, 0.0, -1.0])


def _three_points(q, t):
    return q[1] + THREE * L_ROD * jnp.sin(q[2])


def _three_slips(q, qd, t):
    return qd[0] - THREE * L_ROD * jnp.sin(q[2]) * qd[2]


def _sliding_rod():
    return jl.LagrangianSystem(
        _rod_lagrangian, unilateral=_three_points, slip=_three_slips, friction=0.5
    )


def test_rod_on_three_points_with_friction_shares_its_weight():
    rod, q = _sliding_rod(), jnp.zeros(3)
    for v in (0.0, 1.0):  # sticking, then slipping at μ g
        qd = jnp.array([v, 0.0, 0.0])
        np.testing.assert_allclose(
            jl.multipliers(rod, q, qd, 0.0), MASS * G / 3, rtol=1e-10
        )
        np.testing.assert_allclose(
            jl.accelerations(rod, q, qd, 0.0), [-0.5 * G * v, 0.0, 0.0], atol=1e-10
        )


@pytest.mark.slow
def test_rod_on_three_points_slides_to_rest():
    # Stops after v0/(μ g) at v0²/(2 μ g), its weight shared throughout.
    traj = jl.simulate(
        _sliding_rod(), jnp.zeros(3), jnp.array([1.0, 0.0, 0.0]), t1=0.4, saveat=[0.4]
    )
    assert traj.result == jl.RESULTS.successful and int(traj.num_events) == 1
    np.testing.assert_allclose(traj.event_ts[0], 1 / (0.5 * G), rtol=1e-8)
    np.testing.assert_allclose(traj.q[-1], [1 / G, 0.0, 0.0], atol=1e-9)
    np.testing.assert_allclose(traj.multipliers[-1], MASS * G / 3, rtol=1e-10)
