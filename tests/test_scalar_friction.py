"""Coulomb friction's KKT solve as scalar code.

Its Schur complement C M⁻¹ Dᵀ is not symmetric (D ≠ C for slipping contacts):
it is solved by an unrolled LU with partial pivoting (`_linalg.lu_solve`, held
to LAPACK here), so that the whole friction q̈ is written out by the scalar
form as the frictionless constrained q̈ is; against the array form to 1e-12.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from friction_systems import ball, block, sphere, wheel
from helpers import assert_same_dynamics

import jaxlagrange as jl
from jaxlagrange._constraints import Modes, dynamics
from jaxlagrange._mass import DenseCholesky
from jaxlagrange._mass._linalg import lu_solve


def _close(a, b):
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_lu_solve_equals_lapack(n):
    rng = np.random.default_rng(n)
    for _ in range(20):
        a, b = rng.normal(size=(n, n)), rng.normal(size=n)
        expected = np.linalg.solve(a, b)
        bound = 1e-15 * np.linalg.cond(a) * max(1.0, np.max(np.abs(expected)))
        x = lu_solve(jnp.asarray(a), jnp.asarray(b), 6)
        np.testing.assert_allclose(x, expected, rtol=0, atol=bound)


def test_lu_solve_pivots_and_flags_singular_matrices():
    # A zero leading entry needs the row exchange; a singular matrix gives a
    # non-finite solution, as `jnp.linalg.solve` (the caller flags it).
    swap = jnp.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
    x = lu_solve(swap, jnp.array([2.0, 3.0, 4.0]))
    np.testing.assert_array_equal(x, [3.0, 2.0, 2.0])
    singular = jnp.array([[1.0, 2.0], [2.0, 4.0]])
    assert not np.all(np.isfinite(lu_solve(singular, jnp.ones(2))))
    assert not np.all(np.isfinite(jnp.linalg.solve(singular, jnp.ones(2))))
    # Past `unroll`: LAPACK.
    a = jnp.asarray(np.random.default_rng(0).normal(size=(4, 4)))
    jaxpr = str(jax.make_jaxpr(lambda a: lu_solve(a, jnp.ones(4), unroll=3))(a))
    assert "lu" in jaxpr
    np.testing.assert_allclose(
        lu_solve(a, jnp.ones(4), unroll=3), jnp.linalg.solve(a, jnp.ones(4)), rtol=1e-14
    )


SYSTEMS = {
    "ball": (lambda: ball(0.4, 0.3), 3),
    "block": (lambda: block(0.3, 0.5), 2),
    "sphere": (lambda: sphere(0.3, 0.5), 3),
    "wheel": (lambda: wheel(0.3, 0.5), 4),
}


@pytest.mark.parametrize("name", SYSTEMS)
def test_friction_dynamics_to_rounding(name):
    make, n = SYSTEMS[name]
    system = make()
    rng = np.random.default_rng(n)
    states = []
    for k in range(4):
        q = jnp.asarray(1.0 + 0.1 * rng.normal(size=n))
        qd = jnp.asarray(rng.normal(size=n))
        # Sticking and slipping either way, in contact or not, with and
        # without Baumgarte gains.
        modes = Modes(jnp.array([k % 2 == 0]), jnp.array([(-1.0) ** (k // 2)]))
        kwargs = {"active": jnp.array([k != 3]), "modes": modes}
        if k % 2:
            kwargs["baumgarte"] = (2.0, 3.0)
        states.append((q, qd, jnp.asarray(0.1 * k), kwargs))
    for q, qd, t, kwargs in states:
        out = {}
        for scalar in (True, False):
            s = system.with_mass_strategy(DenseCholesky(scalar=scalar))
            out[scalar] = dynamics(s, q, qd, t, **kwargs)
        assert_same_dynamics(out[True], out[False], _close)
    # Written out: no LAPACK call and no array assembled around one.
    q, qd, t, kwargs = states[0]
    jaxpr = jax.make_jaxpr(lambda q, qd: dynamics(system, q, qd, t, **kwargs))(q, qd)
    names = {e.primitive.name for e in jaxpr.eqns}
    assert not names & {"lu", "custom_linear_solve", "dot_general", "pad"}, names


def test_friction_simulation_unchanged():
    # The block on the incline slides (μ_k = 0.3 < tan 0.4 ≈ 0.42) with
    # ẍ = g (sin α − μ_k cos α), through the scalar form in `simulate`.
    system = block(0.3, 0.5)
    traj = jl.simulate(
        system, jnp.zeros(2), jnp.array([0.5, 0.0]), t1=0.5, rtol=1e-10, atol=1e-10
    )
    acceleration = 9.81 * (np.sin(0.4) - 0.3 * np.cos(0.4))
    expected = 0.5 * 0.5 + 0.5 * acceleration * 0.5**2
    np.testing.assert_allclose(traj.q[-1, 0], expected, rtol=0, atol=1e-9)


def test_friction_gradients_to_rounding():
    # Through the written-out LU (its row exchanges are selects) and the scalar
    # form's products: reverse mode against the array form's.
    system = wheel(0.3, 0.5)
    q, qd = jnp.array([1.0, 1.0, 1.05, 0.3]), jnp.array([0.2, 0.2, -0.1, 0.7])
    modes = Modes(jnp.array([False]), jnp.array([1.0]))

    def loss(x, mu, scalar):
        s = jl.LagrangianSystem(
            system.lagrangian,
            holonomic=system.holonomic,
            unilateral=system.unilateral,
            slip=system.slip,
            friction=mu,
            static_friction=0.5,
        ).with_mass_strategy(DenseCholesky(scalar=scalar))
        out = dynamics(s, x, qd, jnp.asarray(0.0), modes=modes)
        return jnp.sum(out.accelerations**2) + jnp.sum(out.friction)

    for argnum in (0, 1):
        grads = [
            jax.grad(loss, argnum)(q, jnp.asarray(0.3), scalar)
            for scalar in (True, False)
        ]
        np.testing.assert_allclose(grads[0], grads[1], rtol=1e-11, atol=1e-12)
