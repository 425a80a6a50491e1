"""The projection after every step keeps the order of the wrapped solver.

A projected `jl.simulate` of the Cartesian pendulum (`ProjectedSolver`, the
default for equality constraints) with constant steps, dt halving: the error at
t1 against the angle formulation solved by Dopri8 at rtol = atol = 1e-13 falls
as dtᵖ with p the solver's order (Tsit5: 5; Heun, Midpoint: 2), measured as
the slope of a log-log fit, within ±0.3.
"""

import diffrax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import cartesian_pendulum, pendulum, pendulum_state

import jaxlagrange as jl


T1 = 2.0
THETA0 = 1.0


@pytest.fixture(scope="module")
def reference():
    """(q, q̇) of the Cartesian pendulum at t1, from the angle θ(t1)."""
    angle = jl.simulate(
        pendulum(1.0),
        jnp.array([THETA0]),
        jnp.zeros(1),
        t1=T1,
        solver=diffrax.Dopri8(),
        rtol=1e-13,
        atol=1e-13,
    )
    return jnp.concatenate(pendulum_state(angle.q[-1, 0], angle.qd[-1, 0]))


@pytest.mark.parametrize(
    "solver, order, steps",
    [
        # Tsit5's error constant changes over its coarsest steps (local slopes
        # 5.5, 5.3, 5.2 from dt = 0.2): start at 0.1.
        (diffrax.Tsit5(), 5, [0.1, 0.05, 0.025, 0.0125]),
        (diffrax.Heun(), 2, [0.02, 0.01, 0.005, 0.0025]),
        (diffrax.Midpoint(), 2, [0.02, 0.01, 0.005, 0.0025]),
    ],
)
def test_projected_solver_keeps_the_order(reference, solver, order, steps):
    system = cartesian_pendulum(1.0)
    q0, qd0 = pendulum_state(THETA0, 0.0)
    errors = []
    for dt in steps:
        traj = jl.simulate(
            system,
            q0,
            qd0,
            t1=T1,
            dt0=dt,
            solver=solver,
            stepsize_controller=diffrax.ConstantStepSize(),
        )
        assert traj.result == jl.RESULTS.successful
        # Every step ends on the manifold, whatever the step size.
        np.testing.assert_allclose(traj.q[-1] @ traj.q[-1], 1.0, atol=1e-14)
        np.testing.assert_allclose(traj.q[-1] @ traj.qd[-1], 0.0, atol=1e-13)
        state = jnp.concatenate([traj.q[-1], traj.qd[-1]])
        errors.append(float(jnp.max(jnp.abs(state - reference))))
    # The finest error stays well above the reference's (~1e-13).
    assert errors[-1] > 1e-11
    slope = np.polyfit(np.log(steps), np.log(errors), 1)[0]
    assert abs(slope - order) < 0.3, (slope, errors)
