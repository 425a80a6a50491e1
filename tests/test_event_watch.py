"""Events that begin and end within one solver step (`_event_functions.EventWatch`).

Each case is a motion that Tsit5 integrates exactly (a polynomial in t), so its
steps grow long, and an event function that dips below zero and comes back
between two step ends. Without the watch all three ran to t1 as `successful`
with the event missed: the ball through the ceiling, the block held to a floor
that fell away from it, the block slipping on a belt it should have stuck to.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl


g = 9.81


def _events(traj):
    n = int(traj.num_events)
    return np.asarray(traj.event_ts[:n]), np.asarray(traj.event_kind[:n])


@pytest.mark.parametrize("y0, v0, H", [(0.5, 3.0, 0.95), (0.0, 5.0, 1.27)])
def test_ball_grazing_the_ceiling_bounces(y0, v0, H):
    # Floor y ≥ 0 and ceiling y ≤ H; the free flight would rise to
    # y0 + v0²/2g (0.9587 and 1.2742), just above H, for 0.08 s.
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd[0] ** 2 - g * q[0],
        unilateral=lambda q, t: jnp.array([q[0], H - q[0]]),
        restitution=1.0,
    )
    traj = jl.simulate(system, jnp.array([y0]), jnp.array([v0]), t1=0.5)
    ts, kinds = _events(traj)
    hit = (v0 - np.sqrt(v0**2 - 2 * g * (H - y0))) / g
    assert kinds[0] == jl.EVENT_IMPACT and int(traj.event_constraint[0]) == 1
    assert ts[0] == pytest.approx(hit, abs=1e-10)
    assert float(traj.q[-1, 0]) <= H + 1e-12


def test_contact_force_that_turns_negative_for_an_instant_releases():
    # A block resting on a floor at y_f(t) = −d t²/2 + k (t − t₁)⁴/12: the normal
    # force m (g + ÿ_f) = m (g − d + k (t − t₁)²) is negative for
    # |t − t₁| < √((d − g)/k) = 0.063 s, so the block leaves at t₁ − 0.063.
    d, k, t_1 = 9.85, 10.0, 0.8

    def floor(t):
        return -d * t**2 / 2 + k * (t - t_1) ** 4 / 12

    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd[0] ** 2 - g * q[0],
        unilateral=lambda q, t: jnp.array([q[0] - floor(t)]),
    )
    rate = -k * t_1**3 / 3  # ẏ_f(0)
    traj = jl.simulate(
        system, jnp.array([floor(0.0)]), jnp.array([rate]), t1=1.5, throw=False
    )
    ts, kinds = _events(traj)
    assert kinds[0] == jl.EVENT_RELEASE
    assert ts[0] == pytest.approx(t_1 - np.sqrt((d - g) / k), abs=1e-10)
    # No contact ever pulls.
    assert np.all(np.asarray(traj.multipliers) >= 0)


def test_block_on_an_accelerating_belt_sticks_and_slips_again():
    # The belt moves at V(t) = V₀ + c t²/2. From rest the block slips, pulled by
    # μ_k m g, until μ_k g t = V(t); it sticks (friction m c t ≤ μ_s m g) until
    # c t = μ_s g, and slips again. The slip s = ẋ − V is quadratic in t.
    m, mu_k, mu_s, V0, c = 1.0, 0.3, 0.5, 1.0, 4.0
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * m * (qd[0] ** 2 + qd[1] ** 2) - m * g * q[1],
        unilateral=lambda q, t: jnp.array([q[1]]),
        slip=lambda q, qd, t: jnp.array([qd[0] - (V0 + 0.5 * c * t**2)]),
        friction=mu_k,
        static_friction=mu_s,
    )
    traj = jl.simulate(
        system,
        jnp.zeros(2),
        jnp.zeros(2),
        t1=1.5,
        saveat=jnp.array([1.0, 1.5]),
        rtol=1e-10,
        atol=1e-10,
    )
    ts, kinds = _events(traj)
    stick = (mu_k * g - np.sqrt((mu_k * g) ** 2 - 2 * c * V0)) / c
    slip = mu_s * g / c
    np.testing.assert_array_equal(kinds, [jl.EVENT_STICK, jl.EVENT_SLIP])
    np.testing.assert_allclose(ts, [stick, slip], atol=1e-10)
    np.testing.assert_allclose(
        np.asarray(traj.friction[:, 0]), [m * c * 1.0, mu_k * m * g], rtol=1e-9
    )
    v = V0 + 0.5 * c * slip**2 + mu_k * g * (1.5 - slip)
    assert float(traj.qd[1, 0]) == pytest.approx(v, abs=1e-9)
