"""The variational midpoint's Newton solves end at roundoff (issue 30, item 22).

The midpoint map is symmetric: steps forward, a flip of q̇ and as many steps
back return to the start up to the roundoff the solves leave, amplified by the
motion's chaos. Before the solves took the discrete velocity as their unknown, a
short step (the one landing on t1 or a save time) lost digits as 1/h in
(q₁ − q₀)/h, and the chaotic double pendulum came back 5.6e-5 off.
"""

import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl


Q0, QD0 = jnp.array([0.8, -0.4]), jnp.array([0.3, 0.2])


@pytest.fixture(scope="module")
def pendulum():
    return jl.systems.double_pendulum().system


def test_chaotic_double_pendulum_runs_back_to_its_start(pendulum):
    # Issue 30's case: h = 0.01, 1000 steps forward, q̇ flipped, 1000 back.
    # Measured 6.7e-16 in q and 3.1e-14 in q̇ (before: 5.6e-5 and 1.6e-3).
    solver = jl.VariationalMidpoint()
    forward = jl.simulate(pendulum, Q0, QD0, t1=10.0, dt0=0.01, solver=solver)
    back = jl.simulate(
        pendulum, forward.q[-1], -forward.qd[-1], t1=10.0, dt0=0.01, solver=solver
    )
    np.testing.assert_allclose(back.q[-1], Q0, rtol=0, atol=1e-13)
    np.testing.assert_allclose(-back.qd[-1], QD0, rtol=0, atol=1e-12)


def test_a_tiny_step_to_a_save_time_keeps_the_state(pendulum):
    # A save 1e-11 after another is one extra step of 1e-11: the state after it
    # must be the state of the run without it, to roundoff (before: 2e-6 in q at
    # t1 = 1, as the tiny step's velocity came out 4.5e-6 wrong).
    solver = jl.VariationalMidpoint()
    extra = jl.simulate(
        pendulum, Q0, QD0, t1=1.0, dt0=0.01, solver=solver,
        saveat=jnp.array([0.5, 0.5 + 1e-11, 1.0]),
    )  # fmt: skip
    plain = jl.simulate(
        pendulum, Q0, QD0, t1=1.0, dt0=0.01, solver=solver, saveat=jnp.array([0.5, 1.0])
    )
    np.testing.assert_allclose(extra.qd[1], extra.qd[0], rtol=0, atol=1e-9)
    np.testing.assert_allclose(extra.q[-1], plain.q[-1], rtol=0, atol=1e-12)
    np.testing.assert_allclose(extra.qd[-1], plain.qd[-1], rtol=0, atol=1e-12)


def test_a_loose_tolerance_still_runs_back(pendulum):
    # The speed option: rtol = atol = 1e-8 stops each solve one iteration
    # earlier; the update applied last still leaves about its square.
    solver = jl.VariationalMidpoint(rtol=1e-8, atol=1e-8)
    forward = jl.simulate(pendulum, Q0, QD0, t1=2.0, dt0=0.01, solver=solver)
    back = jl.simulate(
        pendulum, forward.q[-1], -forward.qd[-1], t1=2.0, dt0=0.01, solver=solver
    )
    np.testing.assert_allclose(back.q[-1], Q0, rtol=0, atol=1e-12)
