"""`simulate` on bad input and on failing solves: clear errors and result codes."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import scipy.integrate
from helpers import degenerating_lagrangian

import jaxlagrange as jl


def _pendulum(q, qd, t):
    return 0.5 * qd[0] ** 2 + jnp.cos(q[0])


def _blowing_up(q, qd, t):
    # M = 1 − q²; (1 − q²) qd² is conserved, so from q = 0, qd = 1 the particle
    # reaches q = 1 at t = ∫₀¹ √(1 − q²) dq = π/4 with qd → ∞.
    return 0.5 * (1 - q[0] ** 2) * qd[0] ** 2


def _three_halves(q, qd, t):
    # V = q^{3/2} is NaN for q < 0: crossing q = 0 makes the right-hand side NaN.
    return 0.5 * qd[0] ** 2 - q[0] ** 1.5


pendulum = jl.LagrangianSystem(_pendulum)
# M = diag(1, 1 − q₀): q₀ moves at constant speed (qd₁ = 0 stays 0), so M turns
# singular at q₀ = 1 with perfectly finite dynamics before.
degenerating = jl.LagrangianSystem(degenerating_lagrangian)
blowing_up = jl.LagrangianSystem(_blowing_up)
three_halves = jl.LagrangianSystem(_three_halves)
q1, qd1 = jnp.array([1.0]), jnp.array([0.0])
fixed = dict(dt0=0.01, stepsize_controller=diffrax.ConstantStepSize())


def _crossing_time():
    # From q = 1, qd = −2 with E = 3: t* = ∫₀¹ dq / √(2(E − q^{3/2})).
    value, _ = scipy.integrate.quad(lambda q: 1 / np.sqrt(6 - 2 * q**1.5), 0, 1)
    return value


# Trace-time errors.


def test_t1_not_after_t0():
    with pytest.raises(ValueError, match=r"`t1` must be greater than `t0`.*t1 = 0.5"):
        jl.simulate(pendulum, q1, qd1, t0=1.0, t1=0.5)
    with pytest.raises(ValueError, match="`t1` must be greater than `t0`"):
        jl.simulate(pendulum, q1, qd1, t0=1.0, t1=1.0)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_saveat_checks():
    with pytest.raises(
        ValueError, match=r"`saveat` must lie in \[t0, t1\].*saveat\[2\]"
    ):
        jl.simulate(pendulum, q1, qd1, t1=1.0, saveat=jnp.array([0.0, 0.5, 1.5]))
    with pytest.raises(ValueError, match=r"`saveat` must lie in \[t0, t1\]"):
        jl.simulate(pendulum, q1, qd1, t0=0.2, t1=1.0, saveat=jnp.array([0.1, 0.5]))
    with pytest.raises(ValueError, match=r"strictly increasing, but saveat\[1\] = 0.5"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, saveat=jnp.array([0.0, 0.5, 0.5]))
    with pytest.raises(ValueError, match="strictly increasing"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, saveat=jnp.array([0.5, 0.2]))
    with pytest.raises(
        ValueError, match=r"non-empty 1-D array of times, got shape \(2, 2\)"
    ):
        jl.simulate(pendulum, q1, qd1, t1=1.0, saveat=jnp.zeros((2, 2)))
    with pytest.raises(
        ValueError, match=r"non-empty 1-D array of times, got shape \(0,\)"
    ):
        jl.simulate(pendulum, q1, qd1, t1=1.0, saveat=jnp.zeros((0,)))


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize("value", [0.0, -1e-8, float("nan")])
def test_tolerances_must_be_positive(name, value):
    with pytest.raises(ValueError, match=f"`{name}` must be positive and finite"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, **{name: value})


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_state_shapes():
    with pytest.raises(ValueError, match=r"`q0` and `qd0` must have the same shape"):
        jl.simulate(pendulum, jnp.zeros(2), jnp.zeros(3), t1=1.0)
    with pytest.raises(ValueError, match=r"`q0` must be a 1-D array.*\(2, 1\)"):
        jl.simulate(pendulum, jnp.zeros((2, 1)), jnp.zeros((2, 1)), t1=1.0)
    with pytest.raises(ValueError, match=r"`t0` must be a scalar"):
        jl.simulate(pendulum, q1, qd1, t0=jnp.zeros(2), t1=1.0)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_option_checks():
    with pytest.raises(ValueError, match="`max_steps` must be a positive int"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, max_steps=0)
    with pytest.raises(
        ValueError, match="`system` must be a jaxlagrange.LagrangianSystem"
    ):
        jl.simulate(_pendulum, q1, qd1, t1=1.0)
    with pytest.raises(ValueError, match="`solver` must be a diffrax solver"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, solver="tsit5")
    with pytest.raises(ValueError, match="`progress_meter` must be a diffrax progress"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, progress_meter=True)
    with pytest.raises(TypeError, match="unexpected keyword argument 'rtoll'"):
        jl.simulate(pendulum, q1, qd1, t1=1.0, rtoll=1e-6)


def test_non_finite_initial_state():
    with pytest.raises(
        ValueError, match=r"initial state \(q0, qd0\) contains a non-finite"
    ):
        jl.simulate(pendulum, jnp.array([jnp.nan]), qd1, t1=1.0)
    # Under vmap with throw=False it is a result code: see the test below.


# The same checks under jit, where the values are not known at trace time. Under
# `jax.jit` (not `eqx.filter_jit`) XLA re-raises equinox's error as its own type.
_UNDER_JIT = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError, ValueError)


def test_value_checks_under_jit():
    @jax.jit
    def final(q0, t1, rtol, saves):
        return jl.simulate(pendulum, q0, qd1, t1=t1, rtol=rtol, saveat=saves).q

    good = (q1, 1.0, 1e-8, jnp.array([0.5, 1.0]))
    assert np.all(np.isfinite(final(*good)))
    with pytest.raises(_UNDER_JIT, match="initial state"):
        final(jnp.array([jnp.nan]), *good[1:])
    with pytest.raises(_UNDER_JIT, match="`t1` must be greater than `t0`"):
        final(q1, -1.0, *good[2:])
    with pytest.raises(_UNDER_JIT, match="`rtol` must be positive"):
        final(q1, 1.0, -1.0, good[3])
    with pytest.raises(_UNDER_JIT, match="strictly increasing"):
        final(*good[:3], jnp.array([1.0, 0.5]))
    with pytest.raises(_UNDER_JIT, match=r"must lie in \[t0, t1\]"):
        final(*good[:3], jnp.array([0.5, 2.0]))


# Solver failures: result codes, the time reached, and the raised messages.


def test_max_steps():
    traj = jl.simulate(pendulum, q1, qd1, t1=10.0, max_steps=10, throw=False)
    assert traj.result == jl.RESULTS.max_steps_reached
    assert 0 < traj.t_final < 10.0
    assert traj.stats["num_steps"] == 10
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"stopped at t = .* before t1 = 10\.0: The maximum number of solver steps "
        r"\(10\) was reached before t1\. Raise it with `jl.simulate\(\.\.\., "
        r"max_steps=\.\.\.\)`",
    ):
        jl.simulate(pendulum, q1, qd1, t1=10.0, max_steps=10)
    # Under jit the message cannot hold the time, and says where to find it.
    with pytest.raises(_UNDER_JIT, match=r"\(10\) was reached(.|\n)*t_final"):
        jax.jit(lambda q: jl.simulate(pendulum, q, qd1, t1=10.0, max_steps=10).q)(q1)


@pytest.mark.parametrize("options", [{}, fixed], ids=["adaptive", "constant"])
def test_singular_mass_matrix(options):
    q0, qd0 = jnp.zeros(2), jnp.array([1.0, 0.0])
    traj = jl.simulate(degenerating, q0, qd0, t1=3.0, throw=False, **options)
    assert traj.result == jl.RESULTS.singular_mass_matrix
    # Singular at t = 1: adaptive steps close in on it, a fixed step stops at or
    # before it (the state at t = 1 is finite; the step after it is not).
    tol = 1e-12 if not options else 0.01 + 1e-12
    assert 1.0 - tol <= traj.t_final <= 1.0
    # Raised (eagerly) with the time reached.
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"stopped at t = (0\.99\d*|1\.0) before t1 = 3\.0: The mass matrix .* "
        r"became "
        r"singular(.|\n)*throw=False",
    ):
        jl.simulate(degenerating, q0, qd0, t1=3.0, **options)


def test_a_singular_mass_matrix_at_the_start_names_the_velocities_L_does_not_read():
    # q0 has three entries, L reads two: M has a zero row.
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * (qd[0] ** 2 + qd[2] ** 2) - 0.5 * q[0] ** 2
    )
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"stopped at t = 0\.0 .*singular.* L does not depend on q̇\[1\] at the "
        r"start: does q0 have more entries than the coordinates L reads\?",
    ):
        jl.simulate(system, jnp.ones(3), jnp.zeros(3), t1=1.0)
    # A mass matrix that degenerates later names none.
    with pytest.raises(eqx.EquinoxRuntimeError) as raised:
        jl.simulate(degenerating, jnp.zeros(2), jnp.array([1.0, 0.0]), t1=3.0)
    assert "does not depend" not in str(raised.value)


def test_singular_mass_matrix_at_a_blow_up():
    traj = jl.simulate(blowing_up, jnp.zeros(1), jnp.ones(1), t1=2.0, throw=False)
    assert traj.result == jl.RESULTS.singular_mass_matrix
    assert abs(traj.t_final - np.pi / 4) < 1e-8


@pytest.mark.parametrize("options", [{}, fixed], ids=["adaptive", "constant"])
def test_nan_right_hand_side(options):
    q0, qd0, ts = jnp.ones(1), jnp.array([-2.0]), jnp.linspace(0.0, 3.0, 31)
    traj = jl.simulate(three_halves, q0, qd0, t1=3.0, saveat=ts, throw=False, **options)
    assert traj.result == jl.RESULTS.non_finite_state
    tol = 1e-10 if not options else 0.01
    assert _crossing_time() - tol <= traj.t_final <= _crossing_time()
    # What was reached before the failure is kept; the rest is inf, as in diffrax.
    reached = ts <= traj.t_final
    assert np.sum(reached) == 5  # t* = 0.44
    np.testing.assert_array_equal(traj.ts[reached], ts[reached])
    assert np.all(np.isfinite(traj.q[reached])) and np.all(traj.q[~reached] == np.inf)
    with pytest.raises(
        eqx.EquinoxRuntimeError, match=r"stopped at t = 0\.4.*non-finite"
    ):
        jl.simulate(three_halves, q0, qd0, t1=3.0, saveat=ts, **options)


def test_vmap_has_a_result_per_member():
    # Singular at t = 1, fine until t = 10, and a NaN initial state.
    q0 = jnp.zeros((3, 2))
    qd0 = jnp.array([[1.0, 0.0], [0.1, 0.0], [jnp.nan, 0.0]])

    def run(q0, qd0, throw):
        return jl.simulate(degenerating, q0, qd0, t0=0.5, t1=5.0, throw=throw)

    batched = jax.vmap(lambda q0, qd0: run(q0, qd0, False))(q0, qd0)
    codes = [
        jl.RESULTS.singular_mass_matrix,
        jl.RESULTS.successful,
        jl.RESULTS.non_finite_state,
    ]
    for i, code in enumerate(codes):
        np.testing.assert_array_equal(batched.result == code, np.arange(3) == i)
    np.testing.assert_allclose(batched.t_final, [1.5, 5.0, 0.5], rtol=1e-12)
    assert np.all(np.isfinite(batched.q[1])) and np.all(
        batched.q[np.array([0, 2])] == np.inf
    )
    # With throw=True one failing member raises for the whole batch.
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"initial state \(q0, qd0\)"):
        jax.vmap(lambda q0, qd0: run(q0, qd0, True))(q0, qd0)


def test_forward_mode_names_the_adjoint_that_allows_it():
    # The default adjoint is reverse mode only: JAX's own error said nothing of
    # the option that allows `jax.jacfwd`.
    system, q0, qd0 = jl.systems.pendulum()

    def final(q0, **options):
        return jl.simulate(system, q0, qd0, t1=0.5, **options).q[-1]

    with pytest.raises(
        TypeError,
        match=r"`simulate` is differentiated in reverse mode .* pass "
        r"`adjoint=diffrax\.ForwardMode\(\)`",
    ):
        jax.jacfwd(final)(q0)
    forward = jax.jacfwd(lambda q: final(q, adjoint=diffrax.ForwardMode()))(q0)
    np.testing.assert_allclose(forward, jax.jacrev(final)(q0), rtol=1e-8)
