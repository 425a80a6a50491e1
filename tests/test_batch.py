"""simulate_batch: equal to a loop of simulate, per-member failures, gradients."""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import unit_pendulum

import jaxlagrange as jl


def double_pendulum_lagrangian(q, qd, t, params):
    # Unit masses and lengths; g is the parameter.
    (a, b), (wa, wb) = q, qd
    kinetic = wa**2 + 0.5 * wb**2 + wa * wb * jnp.cos(a - b)
    potential = -2 * params["g"] * jnp.cos(a) - params["g"] * jnp.cos(b)
    return kinetic - potential


DOUBLE = jl.LagrangianSystem(double_pendulum_lagrangian, params={"g": 9.81})
SAVEAT = jnp.linspace(0.0, 1.0, 4)
Q0 = jnp.stack([jnp.linspace(0.2, 2.5, 5), jnp.linspace(-1.0, 1.0, 5)], axis=1)
G = jnp.linspace(5.0, 12.0, 5)


@jax.jit
def simulate_one(g, q0):
    system = jl.LagrangianSystem(double_pendulum_lagrangian, params={"g": g})
    return jl.simulate(system, q0, jnp.zeros(2), t1=1.0, saveat=SAVEAT)


def test_equals_a_loop_of_simulate():
    # Under jit too (as every other test calls it without).
    traj = jax.jit(
        lambda q0, g: jl.simulate_batch(
            DOUBLE, q0, jnp.zeros(2), params={"g": g}, t1=1.0, saveat=SAVEAT
        )
    )(Q0, G)
    assert traj.q.shape == (5, 4, 2) and traj.result._value.shape == (5,)
    for i in range(5):
        ref = simulate_one(G[i], Q0[i])
        np.testing.assert_allclose(traj.q[i], ref.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj.qd[i], ref.qd, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj.ts[i], ref.ts)
    assert not jl.failed(traj).any()


def test_constraints_and_broadcast_state():
    # A pendulum in Cartesian coordinates, |x| = l, with batched lengths, released
    # at rest at θ0 = 0.3 from the bottom; the shared qd0 is broadcast.
    def lagrangian(q, qd, t, params):
        return 0.5 * qd @ qd - 9.81 * q[1]

    def rod(q, t, params):
        return jnp.array([q @ q - params["l"] ** 2])

    system = jl.LagrangianSystem(lagrangian, params={"l": 1.0}, holonomic=rod)
    lengths = jnp.array([0.5, 1.0, 2.0])
    q0 = jnp.stack([lengths * jnp.sin(0.3), -lengths * jnp.cos(0.3)], axis=1)
    saveat = jnp.linspace(0.0, 0.5, 3)
    traj = jl.simulate_batch(
        system, q0, jnp.zeros(2), params={"l": lengths}, t1=0.5, saveat=saveat
    )
    assert traj.multipliers.shape == (3, 3, 1)

    @jax.jit
    def simulate_one(length, q0):
        one = jl.LagrangianSystem(lagrangian, params={"l": length}, holonomic=rod)
        return jl.simulate(one, q0, jnp.zeros(2), t1=0.5, saveat=saveat)

    for i, length in enumerate(lengths):
        ref = simulate_one(length, q0[i])
        np.testing.assert_allclose(traj.q[i], ref.q, rtol=0, atol=1e-12)
        np.testing.assert_allclose(traj.multipliers[i], ref.multipliers, rtol=1e-10)
    # At rest at the start, the rod's tension balances gravity's radial part:
    # λ ∇g = 2λ x, so 2λ l = -g cos θ0 (the rod pulls inwards).
    np.testing.assert_allclose(
        2 * traj.multipliers[:, 0, 0] * lengths, -9.81 * jnp.cos(0.3), rtol=1e-10
    )


def test_throw_false_marks_failed_members():
    # A harmonic oscillator with stiffness k: the stiff member needs far more than
    # `max_steps` steps, the others do not.
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd @ qd - 0.5 * p["k"] * q @ q, params={"k": 1.0}
    )
    k = jnp.array([1.0, 1e8, 4.0])
    traj = jl.simulate_batch(
        system,
        jnp.ones(1),
        jnp.zeros(1),
        params={"k": k},
        t1=1.0,
        max_steps=500,
        throw=False,
    )
    np.testing.assert_array_equal(jl.failed(traj), [False, True, False])
    assert traj.result._value[1] == jl.RESULTS.max_steps_reached._value
    # The others are unaffected, and right: q = cos(√k t).
    np.testing.assert_allclose(traj.q[::2, -1, 0], jnp.cos(jnp.sqrt(k[::2])), atol=1e-7)
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"`simulate_batch`: 1 of 3 members failed: member 1 \(max_steps_reached "
        r"at t = 0\.\d+\)\. The first: The maximum number of solver",
    ):
        jl.simulate_batch(
            system, jnp.ones(1), jnp.zeros(1), params={"k": k}, t1=1.0, max_steps=500
        )


def test_grad_through_simulate_batch():
    pendulum = unit_pendulum()

    def loss(g, q0):
        traj = jl.simulate_batch(pendulum, q0, jnp.zeros(1), params={"g": g}, t1=0.5)
        return jnp.sum(traj.q[:, -1] ** 2)

    g, q0 = G[:3], Q0[:3, :1]
    grad_g, grad_q0 = jax.grad(loss, argnums=(0, 1))(g, q0)
    # Against central finite differences, member by member.
    eps = 1e-5
    for i in range(3):
        fd = (loss(g.at[i].add(eps), q0) - loss(g.at[i].add(-eps), q0)) / (2 * eps)
        np.testing.assert_allclose(grad_g[i], fd, rtol=1e-6)
        fd = (loss(g, q0.at[i, 0].add(eps)) - loss(g, q0.at[i, 0].add(-eps))) / (
            2 * eps
        )
        np.testing.assert_allclose(grad_q0[i, 0], fd, rtol=1e-6)


def test_finite_time_lyapunov_closed_forms():
    # q̈ = q (L = ½q̇² + ½q²) at its equilibrium: the tangent (1, 1)/√2 is the
    # unstable eigenvector, it grows like e^t, so λ = 1 exactly.
    saddle = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd + 0.5 * q @ q)
    lam = jl.finite_time_lyapunov(saddle, jnp.zeros(1), jnp.zeros(1), t1=5.0)
    np.testing.assert_allclose(lam, 1.0, rtol=1e-7)
    # q̈ = -q: the tangent rotates, its norm is kept, λ = 0.
    oscillator = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd - 0.5 * q @ q)
    lam = jl.finite_time_lyapunov(oscillator, jnp.ones(1), jnp.zeros(1), t1=20.0)
    np.testing.assert_allclose(lam, 0.0, atol=1e-8)
    # A damped oscillator, ζ = 0.1, ω = 2: the flow contracts, and the exact
    # finite-time value is ln(‖e^{AT} δ₀‖/‖δ₀‖)/T (→ −ζω). The unit tangent
    # shrank to 0 there, and λ with it (−0.086 for −0.198 at T = 100).
    zeta, w = 0.1, 2.0
    damped = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 0.5 * w**2 * q @ q,
        dissipation=lambda q, qd, t: zeta * w * qd @ qd,
    )
    a = np.array([[0.0, 1.0], [-(w**2), -2 * zeta * w]])
    values, vectors = np.linalg.eig(a)
    for t1 in (50.0, 100.0):
        flow = (vectors @ np.diag(np.exp(values * t1)) @ np.linalg.inv(vectors)).real
        exact = np.log(np.linalg.norm(flow @ np.ones(2)) / np.sqrt(2)) / t1
        lam = jl.finite_time_lyapunov(
            damped, jnp.ones(1), jnp.zeros(1), t1=t1, rtol=1e-10, atol=1e-10
        )
        np.testing.assert_allclose(lam, exact, rtol=1e-6)
    # q̈ is not defined where M is singular: named, not a number.
    massless = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * q @ q)
    with pytest.raises(eqx.EquinoxRuntimeError, match="The mass matrix .* is singular"):
        jl.finite_time_lyapunov(massless, jnp.ones(2), jnp.zeros(2), t1=1.0)


def test_structure_errors():
    zeros = jnp.zeros(2)
    with pytest.raises(ValueError, match="got nothing batched"):
        jl.simulate_batch(DOUBLE, zeros, zeros, t1=1.0)
    with pytest.raises(ValueError, match=r"The batch sizes disagree: q0 5, qd0 3\."):
        jl.simulate_batch(DOUBLE, Q0, jnp.zeros((3, 2)), t1=1.0)
    with pytest.raises(ValueError, match=r"q0 5, params\['g'\] 4"):
        jl.simulate_batch(DOUBLE, Q0, zeros, params={"g": jnp.ones(4)}, t1=1.0)
    with pytest.raises(
        ValueError, match="unknown option 'rtl'; the options of `simulate`"
    ):
        jl.simulate_batch(DOUBLE, Q0, zeros, t1=1.0, rtl=1e-6)
    with pytest.raises(ValueError, match="unknown key 'm'; the system's params are: g"):
        jl.simulate_batch(DOUBLE, Q0, zeros, params={"m": jnp.ones(5)}, t1=1.0)
    with pytest.raises(ValueError, match=r"params\['g'\]` is a scalar"):
        jl.simulate_batch(DOUBLE, Q0, zeros, params={"g": 9.81}, t1=1.0)
    with pytest.raises(ValueError, match=r"must have shape \(n,\) or \(batch, n\)"):
        jl.simulate_batch(DOUBLE, Q0[None], zeros, t1=1.0)
    with pytest.raises(ValueError, match="The batch is empty"):
        jl.simulate_batch(DOUBLE, Q0[:0], zeros, t1=1.0)
    plain = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd)
    with pytest.raises(ValueError, match="the system has no params"):
        jl.simulate_batch(plain, Q0, zeros, params={"g": G}, t1=1.0)
    with pytest.raises(
        ValueError, match=r"leaves must have shape .* = \(5, 3\), got \(5,\)"
    ):
        vector = jl.LagrangianSystem(
            lambda q, qd, t, p: 0.5 * qd @ qd, params={"w": jnp.ones(3)}
        )
        jl.simulate_batch(vector, Q0, zeros, params={"w": G}, t1=1.0)
    with pytest.raises(ValueError, match="`devices` is empty"):
        jl.simulate_batch(DOUBLE, Q0, zeros, t1=1.0, devices=[])
    # Known times and tolerances are named with their values, as by `simulate`
    # (they were checked in the program only: "got t0 = t0 and t1 = a value not
    # greater"); lists stand for arrays.
    for options, match in (
        (dict(t0=1.0, t1=0.5), r"got t0 = 1\.0 and t1 = 0\.5\."),
        (dict(t1=1.0, saveat=[0.0, 2.0]), r"\[0\.0, 1\.0\], but saveat\[1\] = 2\.0"),
        (dict(t1=1.0, rtol=-1.0), r"`rtol` must be positive and finite, got -1\.0"),
        (dict(), r"`simulate_batch` needs `t1`, the end time"),
    ):
        with pytest.raises(ValueError, match=match):
            jl.simulate_batch(DOUBLE, Q0, zeros, **options)
    listed = jl.simulate_batch(
        DOUBLE, Q0.tolist(), zeros, params={"g": G.tolist()}, t1=0.1
    )
    arrays = jl.simulate_batch(DOUBLE, Q0, zeros, params={"g": G}, t1=0.1)
    np.testing.assert_array_equal(listed.q, arrays.q)

    def last(g):  # a list holding a traced value
        params = {"g": [g, *G[1:].tolist()]}
        return jl.simulate_batch(DOUBLE, Q0, zeros, params=params, t1=0.1).q[0, -1, 0]

    assert np.isfinite(jax.grad(last)(G[0]))


@pytest.mark.parametrize("backend", ["vmap", "kernel"])
def test_dt0_is_checked_as_simulate_checks_it(backend):
    # 0, NaN and negative steps ended as other failures in the two backends (or
    # as diffrax's error quoting tracers), none naming `dt0`.
    zeros = jnp.zeros(2)
    for dt0, match in (
        (0.0, r"`dt0` must be positive and finite, got 0\.0\."),
        (-0.01, r"`dt0` must be positive and finite, got -0\.01\."),
        (float("nan"), r"`dt0` must be positive and finite, got nan\."),
        (jnp.array([0.1, 0.1]), r"`dt0` must be a positive scalar, got shape \(2,\)"),
    ):
        with pytest.raises(ValueError, match=match):
            jl.simulate(DOUBLE, Q0[0], zeros, t1=1.0, dt0=dt0)
        with pytest.raises(ValueError, match=match):
            jl.simulate_batch(DOUBLE, Q0, zeros, t1=1.0, dt0=dt0, backend=backend)


def test_a_member_off_the_constraints_is_named():
    # It was "max |g| = (not known under jit)", naming no member.
    pendulum, q0, qd0 = jl.systems.cartesian_pendulum()
    q0s = jnp.stack([q0, q0, 1.1 * q0])
    for backend in ("vmap", "kernel"):
        with pytest.raises(
            ValueError,
            match=r"`simulate_batch`: member 2 \(1 of 3 members\) cannot start: The "
            r"initial state is off the constraint manifold.*\(max \|g\| = 0\.\d+\)",
        ):
            jl.simulate_batch(pendulum, q0s, qd0, t1=0.1, backend=backend)
    traj = jl.simulate_batch(pendulum, q0s[:2], qd0, t1=0.1)
    assert jnp.all(traj.result == jl.RESULTS.successful)


@pytest.mark.parametrize("backend", ["vmap", "kernel"])
def test_with_throw_false_a_member_off_the_constraints_fails_alone(backend):
    pendulum, q0, qd0 = jl.systems.cartesian_pendulum()
    q0s = jnp.stack([q0, 1.1 * q0, q0])
    alone = jl.simulate_batch(pendulum, q0[None], qd0, t1=0.5, backend=backend)

    def results(q0s):
        traj = jl.simulate_batch(
            pendulum, q0s, qd0, t1=0.5, backend=backend, throw=False
        )
        return traj.result, traj.q

    for run in (results, jax.jit(results)):
        result, q = run(q0s)
        assert list(jl.result_name(result)) == [
            "successful",
            "inconsistent_initial_state",
            "successful",
        ]
        assert jnp.allclose(q[0], alone.q[0], rtol=0, atol=1e-12)
        assert jnp.allclose(q[2], alone.q[0], rtol=0, atol=1e-12)
    with pytest.raises(Exception, match="not on its constraints at t0"):
        jax.jit(
            lambda q: jl.simulate_batch(pendulum, q, qd0, t1=0.5, backend=backend).q
        )(q0s)


def test_large_cpu_batches_run_in_chunks(monkeypatch):
    # Past CPU_CHUNK members the batch is solved one chunk after another (the
    # last one padded): the same members, values and gradients as one by one.
    from jaxlagrange._ensemble import _sharding

    monkeypatch.setattr(_sharding, "CPU_CHUNK", 3)
    q0 = jnp.stack([jnp.linspace(0.1, 2.0, 7), jnp.linspace(-1.0, 0.5, 7)], axis=1)
    g = jnp.linspace(6.0, 11.0, 7)

    def loss(g):
        traj = jl.simulate_batch(DOUBLE, q0, jnp.zeros(2), params={"g": g}, t1=1.0)
        return jnp.sum(traj.q[:, -1] ** 2), traj

    assert " scan[" in str(jax.make_jaxpr(loss)(g))  # the loop over the chunks
    (_, traj), grad = jax.value_and_grad(loss, has_aux=True)(g)
    assert traj.q.shape == (7, 1, 2)
    for i in range(7):
        ref = simulate_one(g[i], q0[i])
        np.testing.assert_allclose(traj.q[i, -1], ref.q[-1], rtol=0, atol=1e-12)
        one = jax.grad(lambda g, q0: jnp.sum(simulate_one(g, q0).q[-1] ** 2))(
            g[i], q0[i]
        )
        np.testing.assert_allclose(grad[i], one, rtol=1e-9)
    # A member that fails in the last chunk is named as in one batch.
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd @ qd - 0.5 * p["k"] * q @ q, params={"k": 1.0}
    )
    k = jnp.array([1.0, 4.0, 9.0, 1.0, 4.0, 1e8, 9.0])
    run = functools.partial(
        jl.simulate_batch, system, jnp.ones(1), jnp.zeros(1), params={"k": k}, t1=1.0
    )
    traj = run(max_steps=500, throw=False)
    np.testing.assert_array_equal(jl.failed(traj), np.arange(7) == 5)
    ok = np.arange(7) != 5
    np.testing.assert_allclose(traj.q[ok, -1, 0], jnp.cos(jnp.sqrt(k[ok])), atol=1e-7)
    with pytest.raises(
        eqx.EquinoxRuntimeError, match=r"1 of 7 members failed: member 5 \(max_steps"
    ):
        run(max_steps=500)
