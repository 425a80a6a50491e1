"""The variational midpoint integrator: structure, accuracy, constraints, gradients."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import falling_lagrangian

import jaxlagrange as jl


G = 9.81
MIDPOINT = jl.VariationalMidpoint()


def _pendulum(length=1.0):
    def lagrangian(q, qd, t, p):
        return 0.5 * p["l"] ** 2 * qd[0] ** 2 + G * p["l"] * jnp.cos(q[0])

    return jl.LagrangianSystem(lagrangian, params={"l": length})


def _cartesian_pendulum():
    return jl.LagrangianSystem(
        falling_lagrangian, holonomic=lambda q, t: jnp.array([q @ q - 1.0])
    )


def test_chaotic_double_pendulum_energy_bounded_without_trend():
    # Both arms horizontal from rest, h = 0.01: 20 000 steps here (200 s); the
    # 360 000-step run is in experiments/variational.py.
    system, _, _ = jl.systems.double_pendulum()
    q0 = jnp.array([np.pi / 2, np.pi / 2])
    ts = jnp.linspace(0.0, 200.0, 2001)
    traj = jl.simulate(
        system, q0, jnp.zeros(2), t1=200.0, saveat=ts, dt0=0.01, solver=MIDPOINT
    )
    energy = jax.vmap(lambda q, v: jl.energy(system, q, v, 0.0))(traj.q, traj.qd)
    error = np.asarray(energy - energy[0])
    assert np.max(np.abs(error)) < 0.1  # J; measured 0.069
    # No drift: the mean error of the last quarter is that of the first.
    quarter = len(error) // 4
    assert abs(np.mean(error[-quarter:]) - np.mean(error[:quarter])) < 0.01
    assert int(traj.stats["num_steps"]) == 20_000


@pytest.mark.parametrize("order", [2, 4])
def test_convergence_order(order):
    system = _pendulum()
    q0, qd0 = jnp.array([1.2]), jnp.array([0.0])
    reference = jl.simulate(
        system, q0, qd0, t1=2.0, solver=diffrax.Dopri8(), rtol=1e-13, atol=1e-13
    ).q[-1, 0]
    steps = np.array([0.04, 0.02, 0.01])
    solver = jl.VariationalMidpoint(order=order)
    errors = [
        abs(
            float(jl.simulate(system, q0, qd0, t1=2.0, dt0=h, solver=solver).q[-1, 0])
            - float(reference)
        )
        for h in steps
    ]
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.15, (slope, errors)


def test_kepler_angular_momentum_to_round_off():
    # Discrete Noether: the midpoint L_d is invariant under rotations, so the
    # angular momentum x p_y − y p_x is conserved exactly (up to Newton's tolerance).
    def lagrangian(q, qd, t):
        return 0.5 * qd @ qd + 1.0 / jnp.sqrt(q @ q)

    system = jl.LagrangianSystem(lagrangian)
    q0, qd0 = jnp.array([1.0, 0.0]), jnp.array([0.0, 1.3])  # e = 0.69
    ts = jnp.linspace(0.0, 50.0, 501)
    traj = jl.simulate(system, q0, qd0, t1=50.0, saveat=ts, dt0=0.005, solver=MIDPOINT)
    momentum = traj.q[:, 0] * traj.qd[:, 1] - traj.q[:, 1] * traj.qd[:, 0]
    assert np.max(np.abs(momentum / momentum[0] - 1)) < 1e-11


def test_constraints_hold_at_every_step():
    system = _cartesian_pendulum()
    q0 = jnp.array([np.sin(2.5), -np.cos(2.5)])
    ts = jnp.linspace(0.0, 20.0, 2001)  # every step of h = 0.01
    traj = jl.simulate(
        system, q0, jnp.zeros(2), t1=20.0, saveat=ts, dt0=0.01, solver=MIDPOINT
    )
    position = jnp.sum(traj.q**2, axis=1) - 1.0
    velocity = jnp.sum(traj.q * traj.qd, axis=1)
    assert np.max(np.abs(position)) < 1e-10
    assert np.max(np.abs(velocity)) < 1e-10
    # The multipliers are those of the continuous equations at the saved states.
    lam = jax.vmap(lambda q, v: jl.multipliers(system, q, v, 0.0))(traj.q, traj.qd)
    np.testing.assert_allclose(traj.multipliers, lam, rtol=1e-12)
    energy = 0.5 * jnp.sum(traj.qd**2, axis=1) + G * traj.q[:, 1]
    assert np.max(np.abs(energy - energy[0])) < 2e-3 * G


def test_reversible():
    system, _, _ = jl.systems.double_pendulum()
    q0, qd0 = jnp.array([1.0, -0.5]), jnp.array([0.3, 0.8])
    forward = jl.simulate(system, q0, qd0, t1=3.0, dt0=0.01, solver=MIDPOINT)
    back = jl.simulate(
        system, forward.q[-1], -forward.qd[-1], t1=3.0, dt0=0.01, solver=MIDPOINT
    )
    np.testing.assert_allclose(back.q[-1], q0, atol=1e-10)
    np.testing.assert_allclose(back.qd[-1], -qd0, atol=1e-10)


def test_damped_oscillator_by_lagrange_dalembert():
    # x'' = −x − 2ζ x' with ζ = 0.1 from (1, 0): the exact solution at t = 5.
    zeta = 0.1
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 0.5 * q @ q,
        dissipation=lambda q, qd, t: zeta * qd @ qd,
    )
    traj = jl.simulate(
        system, jnp.array([1.0]), jnp.array([0.0]), t1=5.0, dt0=0.005, solver=MIDPOINT
    )
    wd = np.sqrt(1 - zeta**2)
    exact = np.exp(-zeta * 5.0) * (np.cos(wd * 5.0) + zeta / wd * np.sin(wd * 5.0))
    np.testing.assert_allclose(traj.q[-1, 0], exact, atol=2e-5)


def test_saves_off_the_step_grid():
    system = _pendulum()
    ts = jnp.array([0.0, 0.123, 0.5, 1.0 / 3.0 + 0.5, 1.7])
    traj = jl.simulate(
        system,
        jnp.array([1.0]),
        jnp.array([0.0]),
        t1=1.7,
        saveat=ts,
        dt0=0.01,
        solver=MIDPOINT,
    )
    reference = jl.simulate(
        system,
        jnp.array([1.0]),
        jnp.array([0.0]),
        t1=1.7,
        saveat=ts,
        rtol=1e-12,
        atol=1e-12,
    )
    np.testing.assert_allclose(traj.ts, ts)
    np.testing.assert_allclose(traj.q, reference.q, atol=5e-4)
    np.testing.assert_allclose(traj.q[0], [1.0])


@pytest.mark.parametrize("dt0, t1", [(0.0025, 2.0), (0.02, 20.0)])
def test_constrained_steps_reach_t1_without_a_sliver(dt0, t1):
    # dt0 added up t1/dt0 times falls short of t1 by more than rounding at t1:
    # the step onto t1 is stretched instead of followed by a step of 1e-13,
    # on which the constrained step's implicit solve failed.
    traj = jl.simulate(
        _cartesian_pendulum(),
        jnp.array([1.0, 0.0]),
        jnp.zeros(2),
        t1=t1,
        dt0=dt0,
        solver=MIDPOINT,
    )
    assert traj.result == jl.RESULTS.successful
    assert int(traj.stats["num_steps"]) == round(t1 / dt0)
    assert float(traj.t_final) == t1
    assert abs(float(traj.q[-1] @ traj.q[-1]) - 1.0) < 1e-12


def test_max_steps_counts_steps_only():
    # The loop's iterations that record a save are not steps: max_steps = 5
    # took 7 steps (and 106 with 100 save times) before.
    for saveat in (None, jnp.linspace(0.9, 1.0, 100)):
        traj = jl.simulate(
            _pendulum(),
            jnp.array([1.0]),
            jnp.array([0.0]),
            t1=1.0,
            saveat=saveat,
            dt0=0.01,
            solver=MIDPOINT,
            max_steps=5,
            throw=False,
        )
        assert jl.result_name(traj) == "max_steps_reached"
        assert int(traj.stats["num_steps"]) == 5
        assert float(traj.t_final) == pytest.approx(0.05)


def test_float32_states_take_float32_tolerances():
    # The Newton tolerance follows the precision of the state (1e-5 in float32):
    # at a fixed 1e-12 every float32 run stopped at its first step.
    system, q0, qd0 = jl.systems.double_pendulum()
    q0, qd0 = q0.astype(jnp.float32), qd0.astype(jnp.float32)
    traj = jl.simulate(system, q0, qd0, t1=1.0, dt0=0.01, solver=MIDPOINT)
    assert traj.q.dtype == jnp.float32
    assert jl.result_name(traj) == "successful"
    reference = jl.simulate(
        system, q0.astype(float), qd0.astype(float), t1=1.0, dt0=0.01, solver=MIDPOINT
    )
    np.testing.assert_allclose(traj.q, reference.q, atol=1e-4)


def test_gradients_match_finite_differences():
    q0 = jnp.array([np.pi / 2, np.pi / 2])

    def final_angle(length, q0):
        system = jl.systems.double_pendulum({"l1": length}).system
        traj = jl.simulate(system, q0, jnp.zeros(2), t1=1.0, dt0=0.01, solver=MIDPOINT)
        return traj.q[-1, 0]

    h = 1e-6
    grad_l, grad_q = jax.grad(final_angle, argnums=(0, 1))(1.0, q0)
    fd_l = (final_angle(1.0 + h, q0) - final_angle(1.0 - h, q0)) / (2 * h)
    np.testing.assert_allclose(grad_l, fd_l, rtol=1e-6)
    e = jnp.array([h, 0.0])
    fd_q = (final_angle(1.0, q0 + e) - final_angle(1.0, q0 - e)) / (2 * h)
    np.testing.assert_allclose(grad_q[0], fd_q, rtol=1e-6)

    def constrained(length):
        system = jl.LagrangianSystem(
            lambda q, qd, t, p: 0.5 * qd @ qd - G * q[1],
            params={"l": length},
            holonomic=lambda q, t, p: jnp.array([q @ q - p["l"] ** 2]),
        )
        q0 = length * jnp.array([np.sin(1.0), -np.cos(1.0)])
        traj = jl.simulate(system, q0, jnp.zeros(2), t1=1.0, dt0=0.01, solver=MIDPOINT)
        return traj.q[-1, 0]

    fd = (constrained(1.0 + h) - constrained(1.0 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(constrained)(1.0), fd, rtol=1e-6)


def test_jit_and_vmap_match_a_loop():
    system = _pendulum()
    q0s = jnp.array([[0.5], [1.0], [2.0]])

    @jax.jit
    @jax.vmap
    def batched(q0):
        return jl.simulate(
            system, q0, jnp.zeros(1), t1=1.0, dt0=0.01, solver=MIDPOINT
        ).q[-1]

    loop = [
        jl.simulate(system, q0, jnp.zeros(1), t1=1.0, dt0=0.01, solver=MIDPOINT).q[-1]
        for q0 in q0s
    ]
    np.testing.assert_allclose(batched(q0s), np.stack(loop), rtol=1e-13)


def test_errors():
    system = _pendulum()
    q0, qd0 = jnp.array([1.0]), jnp.array([0.0])
    with pytest.raises(ValueError, match="pass the step size `dt0`"):
        jl.simulate(system, q0, qd0, t1=1.0, solver=MIDPOINT)
    with pytest.raises(ValueError, match=r"`dt0` must be positive and finite"):
        jl.simulate(system, q0, qd0, t1=1.0, dt0=-0.1, solver=MIDPOINT)
    with pytest.raises(ValueError, match="`stepsize_controller` and `baumgarte` do"):
        jl.simulate(
            system,
            q0,
            qd0,
            t1=1.0,
            dt0=0.1,
            solver=MIDPOINT,
            stepsize_controller=diffrax.ConstantStepSize(),
        )
    rolling = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd,
        nonholonomic=lambda q, qd, t: qd[:1] - qd[1:],
    )
    with pytest.raises(ValueError, match="does not support nonholonomic constraints"):
        jl.simulate(
            rolling, jnp.zeros(2), jnp.zeros(2), t1=1.0, dt0=0.1, solver=MIDPOINT
        )
    with pytest.raises(ValueError, match="`order` must be 2 or 4"):
        jl.VariationalMidpoint(order=3)
    with pytest.raises(ValueError, match="`max_iterations` must be a positive int"):
        jl.VariationalMidpoint(max_iterations=0)
    with pytest.raises(ValueError, match="`solver` must be a diffrax solver or"):
        jl.simulate(system, q0, qd0, t1=1.0, solver="midpoint")
    # One Newton iteration cannot meet the tolerance: a named result code.
    lazy = jl.VariationalMidpoint(max_iterations=1)
    traj = jl.simulate(
        system, jnp.array([2.0]), qd0, t1=1.0, dt0=0.1, solver=lazy, throw=False
    )
    assert traj.result == jl.RESULTS.implicit_step_failed
    with pytest.raises(
        eqx.EquinoxRuntimeError, match="implicit solve of a variational"
    ):
        jl.simulate(system, jnp.array([2.0]), qd0, t1=1.0, dt0=0.1, solver=lazy)


def test_time_dependent_lagrangian_converges_at_second_order():
    # Kapitza's pendulum: the support oscillates at ω = 100, so L depends on t.
    system, q0, qd0 = jl.systems.kapitza()
    reference = jl.simulate(
        system, q0, qd0, t1=1.0, solver=diffrax.Dopri8(), rtol=1e-12, atol=1e-12
    ).q[-1, 0]
    errors = [
        abs(
            float(
                jl.simulate(system, q0, qd0, t1=1.0, dt0=h, solver=MIDPOINT).q[-1, 0]
                - reference
            )
        )
        for h in (0.002, 0.001)
    ]
    assert errors[0] < 1e-5  # measured 7.6e-6
    assert 3.8 < errors[0] / errors[1] < 4.2  # measured 4.01
