"""Errors of the equations of motion: trace-time ValueErrors and checks under jit."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl


# The jaxtyping annotations are checked here too (tests/conftest.py), except where
# a wrong input is passed on purpose to see the package's own message.
pytestmark = pytest.mark.typecheck


def oscillator(q, qd, t):
    return 0.5 * qd @ qd - 0.5 * q @ q


Q = jnp.array([0.3, -0.2])
QD = jnp.array([0.1, 0.5])
PUBLIC = [jl.accelerations, jl.mass_matrix, jl.momenta, jl.energy]
SINGULAR = "mass matrix ∂²L/∂qd² is singular or not positive definite"


# Tier 1: structure, at trace time (also under jit).


@pytest.mark.parametrize("fn", PUBLIC)
@pytest.mark.parametrize("jit", [False, True])
def test_lagrangian_not_scalar(fn, jit):
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd**2)
    call = jax.jit(fn) if jit else fn
    with pytest.raises(
        ValueError,
        match=r"`lagrangian` must return a scalar, but it returned shape \(2,\) for q of "
        r"shape \(2,\)",
    ):
        call(system, Q, QD, 0.0)


@pytest.mark.no_typecheck
@pytest.mark.parametrize("fn", PUBLIC)
def test_state_shapes(fn):
    system = jl.LagrangianSystem(oscillator)
    with pytest.raises(
        ValueError,
        match=r"`q` and `qd` must have the same shape, got q \(2,\) and qd \(3,\)",
    ):
        fn(system, Q, jnp.zeros(3), 0.0)
    with pytest.raises(
        ValueError,
        match=r"`q` must be a 1-D array of at least one coordinate, got shape \(2, 2\)",
    ):
        fn(system, jnp.zeros((2, 2)), jnp.zeros((2, 2)), 0.0)
    with pytest.raises(
        ValueError,
        match=r"`q` must be a 1-D array of at least one coordinate, got shape \(\)",
    ):
        fn(system, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match=r"`t` must be a scalar, got shape \(2,\)"):
        fn(system, Q, QD, jnp.zeros(2))


def test_arity_with_params():
    with pytest.raises(
        ValueError,
        match=r"`lagrangian` must take \(q, qd, t, params\) because the system has "
        r"params, but it is oscillator\(q, qd, t\)",
    ):
        jl.LagrangianSystem(oscillator, params={"k": 1.0})

    def lagrangian(q, qd, t, params):
        return params["k"] * oscillator(q, qd, t)

    def force(q, qd, t):
        return -qd

    with pytest.raises(
        ValueError,
        match=r"`force` must take \(q, qd, t, params\) because the system has params, "
        r"but it is force\(q, qd, t\)",
    ):
        jl.LagrangianSystem(lagrangian, params={"k": 1.0}, force=force)


def test_arity_without_params():
    def lagrangian(q, qd, t, params):
        return params["k"] * oscillator(q, qd, t)

    with pytest.raises(
        ValueError,
        match=r"`lagrangian` must take \(q, qd, t\) because the system has no params, "
        r"but it is lagrangian\(q, qd, t, params\)\. Pass `params=` to "
        r"LagrangianSystem",
    ):
        jl.LagrangianSystem(lagrangian)

    def rayleigh(q, qd):
        return qd @ qd

    with pytest.raises(
        ValueError,
        match=r"`dissipation` must take \(q, qd, t\) because the system has no params, "
        r"but it is rayleigh\(q, qd\)",
    ):
        jl.LagrangianSystem(oscillator, dissipation=rayleigh)


@pytest.mark.no_typecheck
def test_not_callable():
    with pytest.raises(
        ValueError, match=r"`force` must be a function \(q, qd, t\), got float"
    ):
        jl.LagrangianSystem(oscillator, force=9.81)


@pytest.mark.parametrize("jit", [False, True])
def test_force_wrong_shape(jit):
    system = jl.LagrangianSystem(oscillator, force=lambda q, qd, t: jnp.zeros(3))
    call = jax.jit(jl.accelerations) if jit else jl.accelerations
    with pytest.raises(
        ValueError,
        match=r"`force` must return shape \(2,\) \(the shape of q\), but it returned "
        r"shape \(3,\)",
    ):
        call(system, Q, QD, 0.0)


@pytest.mark.parametrize("jit", [False, True])
def test_dissipation_not_scalar(jit):
    system = jl.LagrangianSystem(oscillator, dissipation=lambda q, qd, t: 0.5 * qd**2)
    call = jax.jit(jl.accelerations) if jit else jl.accelerations
    with pytest.raises(
        ValueError,
        match=r"`dissipation` must return a scalar \(the Rayleigh function\), but it "
        r"returned shape \(2,\)",
    ):
        call(system, Q, QD, 0.0)


# Tier 2: values, with eqx.error_if, also under jit and vmap.


def _coupled(q, qd, t):  # L = q̇·q − ½ q·q: M = 0
    return qd @ q - 0.5 * q @ q


def _linear(q, qd, t):  # L linear in q̇: M = 0
    return jnp.sum(jnp.sin(q) * qd) - 0.5 * q @ q


def _indefinite(q, qd, t):  # M = diag(1, −1, 1, 1, ...): full rank, indefinite
    return 0.5 * (qd @ qd - 2 * qd[1] ** 2) - 0.5 * q @ q


def _rank_one(q, qd, t):  # M = [[1, 1], [1, 1]]
    return 0.5 * (qd[0] + qd[1]) ** 2 - 0.5 * q @ q


@pytest.mark.parametrize(
    "lagrangian, n",
    [
        (_coupled, 2),
        (_linear, 2),
        (_indefinite, 2),
        (_rank_one, 2),
        (_coupled, 9),
        (_indefinite, 9),
    ],
)
def test_singular_mass_matrix(lagrangian, n):
    """Unrolled (n = 2) and LAPACK (n = 9) factorizations flag M."""
    system = jl.LagrangianSystem(lagrangian)
    q = jnp.linspace(0.1, 0.9, n)
    qd = jnp.linspace(-0.5, 0.4, n)
    with pytest.raises(RuntimeError, match=SINGULAR):
        jl.accelerations(system, q, qd, 0.0)
    with pytest.raises(RuntimeError, match=SINGULAR):
        jax.jit(jl.accelerations)(system, q, qd, 0.0)


def test_singular_in_one_batch_member():
    def lagrangian(q, qd, t):  # M = diag(q0², 1): singular where q0 = 0
        return 0.5 * (q[0] * qd[0]) ** 2 + 0.5 * qd[1] ** 2

    system = jl.LagrangianSystem(lagrangian)
    qs = jnp.array([[1.0, 0.0], [0.0, 0.0], [2.0, 1.0]])
    batched = jax.jit(jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None)))
    np.testing.assert_allclose(
        batched(system, qs[jnp.array([0, 2])], jnp.ones((2, 2)), 0.0),
        [[-1.0, 0.0], [-0.5, 0.0]],  # q̈0 = −q̇0²/q0
        rtol=1e-12,
    )
    with pytest.raises(RuntimeError, match=SINGULAR):
        batched(system, qs, jnp.ones((3, 2)), 0.0)


def test_check_feeds_the_output():
    """The check survives dead-code elimination: it guards the returned value."""
    system = jl.LagrangianSystem(_coupled)

    @jax.jit
    def loss(q):
        return jnp.sum(jl.accelerations(system, q, QD, 0.0) ** 2)

    with pytest.raises(RuntimeError, match=SINGULAR):
        loss(Q)
    with pytest.raises(RuntimeError, match=SINGULAR):
        jax.grad(loss)(Q)


@pytest.mark.parametrize("n", [2, 9])
@pytest.mark.parametrize("bad", [jnp.nan, jnp.inf])
def test_non_finite_state(n, bad):
    system = jl.LagrangianSystem(oscillator)
    q = jnp.ones(n).at[1].set(bad)
    match = r"The state \(q, qd, t\) contains a non-finite value"
    with pytest.raises(RuntimeError, match=match):
        jax.jit(jl.accelerations)(system, q, jnp.ones(n), 0.0)
    with pytest.raises(RuntimeError, match=match):
        jl.accelerations(system, jnp.ones(n), jnp.ones(n), bad)
    np.testing.assert_allclose(
        jl.accelerations(system, jnp.ones(n), jnp.ones(n), 0.0), -1
    )
