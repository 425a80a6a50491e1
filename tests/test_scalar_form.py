"""The unconstrained q̈ of the dense strategy evaluated as scalar code.

With `DenseCholesky(scalar=True)` (the default), `_eom.scalar_where_small`
evaluates the traced q̈ of one state with every small array split into its
scalars (`_lanes/_scalar.py`); these tests
hold it to the array form (`scalar=False`) to rounding on every ready system,
check what it compiles to, and check that what has no scalar form (custom
derivative rules, state-dependent loops and branches, large programs) keeps
its meaning, derivatives included.
"""

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import assert_same_dynamics

import jaxlagrange as jl
from jaxlagrange._constraints import dynamics
from jaxlagrange._eom import unconstrained
from jaxlagrange._lanes import _scalar
from jaxlagrange._mass import DenseCholesky


def accelerations(strategy, system, q, qd, t):
    """The unconstrained q̈ and singular flag of `system` solving by `strategy`."""
    return unconstrained(system.with_mass_strategy(strategy), q, qd, t)


def both(system, q, qd, t, unroll=6):
    """q̈ and the singular flag from the scalar and the array form."""
    scalar = accelerations(DenseCholesky(unroll, scalar=True), system, q, qd, t)
    array = accelerations(DenseCholesky(unroll, scalar=False), system, q, qd, t)
    return scalar, array


def assert_close(a, b, rtol=1e-12):
    a, b = np.asarray(a), np.asarray(b)
    scale = max(1.0, float(np.max(np.abs(b))))
    np.testing.assert_allclose(a, b, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("name", jl.systems.names())
def test_every_ready_system_to_rounding(name):
    system, q0, qd0 = jl.systems.make(name)
    n = q0.shape[0]
    rng = np.random.default_rng(n)
    for k in range(3):
        q = q0 + 0.3 * k * jnp.asarray(rng.normal(size=n))
        qd = qd0 + jnp.asarray(rng.normal(size=n))
        t = jnp.asarray(0.1 * k)
        (x, singular), (y, singular_array) = both(system, q, qd, t, max(6, n))
        assert x.shape == y.shape == (n,) and x.dtype == y.dtype
        assert bool(singular) == bool(singular_array)
        assert_close(x, y)


def damped_driven(q, qd, t, p):
    # Vector and scalar params, explicit time, a coupling through cos(q₁ − q₂).
    kinetic = 0.5 * jnp.sum(p["m"] * qd**2) + p["c"] * qd[0] * qd[1] * jnp.cos(
        q[0] - q[1]
    )
    return kinetic + jnp.sum(p["m"] * p["g"] * jnp.cos(q)) + jnp.sin(t) * q[0]


def damped_driven_system():
    params = {"m": jnp.array([2.0, 1.5]), "c": jnp.asarray(0.4), "g": jnp.asarray(9.8)}
    return jl.LagrangianSystem(
        damped_driven,
        params=params,
        force=lambda q, qd, t, p: jnp.array([0.3 * jnp.cos(2 * t), 0.0]),
        dissipation=lambda q, qd, t, p: 0.5 * p["c"] * jnp.sum(qd**2),
    )


STATE = (jnp.array([0.4, -1.1]), jnp.array([0.7, 0.2]), jnp.asarray(0.3))


def test_forces_dissipation_time_and_vector_params():
    system = damped_driven_system()
    (x, _), (y, _) = both(system, *STATE)
    assert_close(x, y)
    assert_close(jl.accelerations(system, *STATE), y)


def test_jit_vmap_and_traced_params_agree():
    system = damped_driven_system()
    rng = np.random.default_rng(0)
    q = jnp.asarray(rng.normal(size=(5, 2)))
    qd = jnp.asarray(rng.normal(size=(5, 2)))
    t = jnp.linspace(0.0, 1.0, 5)

    @jax.jit
    def batched(system, q, qd, t):
        return jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0))(system, q, qd, t)

    out = batched(system, q, qd, t)
    for i in range(5):
        (_, _), (y, _) = both(system, q[i], qd[i], t[i])
        assert_close(out[i], y)


def test_closed_over_tracer():
    # A Lagrangian closing over a traced value (not a param): a jaxpr constant
    # that is a tracer of the enclosing jit.
    @jax.jit
    def accelerate(k, q, qd):
        system = jl.LagrangianSystem(
            lambda q, qd, t: 0.5 * jnp.sum(qd**2) - 0.5 * k * jnp.sum(q**2)
        )
        return jl.accelerations(system, q, qd, 0.0)

    q = jnp.array([1.0, -2.0])
    np.testing.assert_allclose(accelerate(3.0, q, jnp.zeros(2)), -3.0 * q, rtol=1e-14)


def test_gradient_matches_array_form_and_finite_differences():
    system = damped_driven_system()

    def loss(scalar, c, g):
        params = dict(system.params, c=c, g=g)
        s = jl.LagrangianSystem(
            damped_driven,
            params=params,
            force=system.force,
            dissipation=system.dissipation,
        )
        x, _ = accelerations(DenseCholesky(scalar=scalar), s, *STATE)
        return jnp.sum(jnp.sin(x))

    c, g = jnp.asarray(0.4), jnp.asarray(9.8)
    grad_scalar = jax.grad(loss, argnums=(1, 2))(True, c, g)
    grad_array = jax.grad(loss, argnums=(1, 2))(False, c, g)
    for a, b in zip(grad_scalar, grad_array, strict=True):
        assert_close(a, b, 1e-11)
    h = 1e-6
    fd = (loss(True, c + h, g) - loss(True, c - h, g)) / (2 * h)
    np.testing.assert_allclose(grad_scalar[0], fd, rtol=1e-7)
    # Forward mode through the scalar form too.
    _, tangent = jax.jvp(lambda g: loss(True, c, g), (g,), (jnp.ones(()),))
    assert_close(tangent, grad_array[1], 1e-11)


def double_pendulum_constants(q, qd, t):
    kinetic = qd[0] ** 2 + 0.5 * qd[1] ** 2 + qd[0] * qd[1] * jnp.cos(q[0] - q[1])
    return kinetic + 2 * 9.81 * jnp.cos(q[0]) + 9.81 * jnp.cos(q[1])


def _compiled_counts(system, scalar):
    system = system.with_mass_strategy(DenseCholesky(scalar=scalar))
    q = jnp.ones((64, 2))

    def fn(system, q, qd):
        return jax.vmap(lambda q, qd: dynamics(system, q, qd, 0.0).accelerations)(q, qd)

    text = jax.jit(fn).lower(system, q, q).compile().as_text()
    entry = text[text.index("\nENTRY") :]
    fusions = entry.count(" fusion(")
    transcendental = len(re.findall(r"= \S+ (?:sine|cosine)\(", text))
    return fusions, transcendental


@pytest.mark.parametrize("constants_in_l", [True, False])
def test_double_pendulum_compiles_like_hand_written_code(constants_in_l):
    # The hand-written q̈ (sin q₁, sin q₂, sin Δ, cos Δ) compiles to one loop
    # fusion; the array form to about ten, with sin Δ recomputed in several.
    if constants_in_l:
        system = jl.LagrangianSystem(double_pendulum_constants)
    else:
        system = jl.systems.make("double_pendulum").system
    fusions, transcendental = _compiled_counts(system, scalar=True)
    assert transcendental == 4
    assert fusions <= 2  # the loop, and with traced params their products
    array_fusions, array_transcendental = _compiled_counts(system, scalar=False)
    assert array_fusions > fusions and array_transcendental > transcendental


@jax.custom_jvp
def doubled_slope(k):
    return k


@doubled_slope.defjvp
def _doubled_slope_jvp(primals, tangents):
    # Deliberately not the derivative of the primal: a rule that is lost shows.
    return primals[0], 2.0 * tangents[0]


def test_custom_derivative_rules_are_kept():
    # q̈ = −k q with k through a custom_jvp: d q̈/dk follows its rule (−2q).
    def lagrangian(q, qd, t, p):
        return 0.5 * jnp.sum(qd**2) - 0.5 * doubled_slope(p["k"]) * jnp.sum(q**2)

    q = jnp.array([1.0, -2.0])

    def qdd(k):
        system = jl.LagrangianSystem(lagrangian, params={"k": k})
        return accelerations(DenseCholesky(), system, q, jnp.zeros(2), 0.0)[0]

    np.testing.assert_allclose(qdd(3.0), -3.0 * q, rtol=1e-14)
    np.testing.assert_allclose(jax.jacfwd(qdd)(3.0), -2.0 * q, rtol=1e-14)
    np.testing.assert_allclose(jax.jacrev(qdd)(3.0), -2.0 * q, rtol=1e-14)


def test_scan_and_state_dependent_cond_are_bound_as_they_are():
    def potential(x):
        def body(acc, i):
            return acc + jnp.cos(x) / (i + 1.0), None

        acc, _ = jax.lax.scan(body, 0.0 * x, jnp.arange(3.0))
        # The branch not taken is NaN here: written out and selected, it would
        # give a NaN gradient.
        return jax.lax.cond(x > 0, lambda x: jnp.sqrt(x) * x, lambda x: x**2, x) + acc

    def lagrangian(q, qd, t):
        return (
            0.5 * jnp.sum(qd**2)
            + 0.3 * qd[0] * qd[1] * jnp.cos(q[0])
            - (potential(q[0]) + potential(q[1]))
        )

    system = jl.LagrangianSystem(lagrangian)
    state = (jnp.array([0.9, -0.2]), jnp.array([0.4, -0.6]), jnp.asarray(0.0))
    (x, _), (y, _) = both(system, *state)
    assert_close(x, y)

    def loss(q, scalar):
        strategy = DenseCholesky(scalar=scalar)
        return jnp.sum(accelerations(strategy, system, q, *state[1:])[0])

    gradient = jax.grad(loss)(state[0], True)
    assert bool(jnp.all(jnp.isfinite(gradient)))
    assert_close(gradient, jax.grad(loss)(state[0], False))


def test_state_dependent_while_loop_is_bound_as_it_is():
    def force(q, qd, t):
        def body(carry):
            i, acc = carry
            return i + 1, acc + 0.1 * qd / (i + 1.0)

        _, acc = jax.lax.while_loop(
            lambda c: c[0] < 2 + (q[0] > 0).astype(int), body, (0, 0.0 * qd)
        )
        return -acc

    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) + 0.3 * qd[0] * qd[1] * jnp.cos(q[0])

    system = jl.LagrangianSystem(lagrangian, force=force)
    for q in ([0.9, -0.2], [-0.3, 1.7]):
        state = (jnp.array(q), jnp.array([0.4, -0.6]), jnp.asarray(0.0))
        (x, _), (y, _) = both(system, *state)
        assert_close(x, y)

        def qdd(qd, scalar, state=state):
            strategy = DenseCholesky(scalar=scalar)
            return accelerations(strategy, system, state[0], qd, state[2])[0]

        assert_close(jax.jacfwd(qdd)(state[1], True), jax.jacfwd(qdd)(state[1], False))


def test_a_program_too_large_keeps_its_array_form(monkeypatch):
    system = damped_driven_system()
    assert _scalar.scalar_form(lambda q: q * 2, STATE[0]) is not None
    monkeypatch.setattr(_scalar, "MAX_SCALAR_OPS", 0)
    assert _scalar.scalar_form(lambda q: q * 2, STATE[0]) is None
    (x, _), (y, _) = both(system, *STATE)
    np.testing.assert_array_equal(x, y)  # the same program, bit for bit


def test_float32():
    system = damped_driven_system()
    params = jax.tree.map(lambda x: x.astype(jnp.float32), system.params)
    system = jl.LagrangianSystem(
        damped_driven, params=params, force=system.force, dissipation=system.dissipation
    )
    state = jax.tree.map(lambda x: x.astype(jnp.float32), STATE)
    (x, _), (y, _) = both(system, *state)
    assert x.dtype == jnp.float32
    np.testing.assert_allclose(x, y, rtol=1e-5)


def test_singular_mass_is_flagged_and_raised():
    # M = [[1, cos q₁], [cos q₁, 1]] is singular at q₁ = 0.
    def lagrangian(q, qd, t):
        return 0.5 * (qd[0] ** 2 + qd[1] ** 2) + qd[0] * qd[1] * jnp.cos(q[0])

    system = jl.LagrangianSystem(lagrangian)
    state = (jnp.zeros(2), jnp.ones(2), jnp.asarray(0.0))
    (x, singular), (_, singular_array) = both(system, *state)
    assert bool(singular) and bool(singular_array) and bool(jnp.all(jnp.isfinite(x)))
    with pytest.raises(Exception, match="mass matrix"):
        jax.jit(jl.accelerations)(system, *state)


def _singular_or_not_finite(q, qd, t):
    # M = diag(q₀², 1): singular where q₀ = 0; ∂L/∂q₁ is NaN where q₁ < 0.
    return 0.5 * (q[0] * qd[0]) ** 2 + 0.5 * qd[1] ** 2 - jnp.sqrt(q[1])


@pytest.mark.parametrize(
    "members, match",
    [
        ([[1.0, 1.0], [0.0, 1.0], [1.0, -1.0], [jnp.nan, 1.0]], "The state"),
        ([[1.0, 1.0], [1.0, -1.0], [0.0, 1.0]], "mass matrix"),
        ([[1.0, 1.0], [1.0, -1.0]], "is not finite"),
    ],
)
def test_checks_under_vmap_keep_their_priority(members, match):
    # One check, one reduction over the batch: the message is that of the most
    # basic failure in the batch.
    system = jl.LagrangianSystem(_singular_or_not_finite)
    batched = jax.jit(jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None)))
    q = jnp.asarray(members)
    np.testing.assert_allclose(
        batched(system, q[:1], jnp.ones((1, 2)), 0.0), [[-1.0, -0.5]], rtol=1e-14
    )
    with pytest.raises(RuntimeError, match=match):
        batched(system, q, jnp.ones_like(q), 0.0)


def test_checked_accelerations_keep_the_batch_layout():
    # XLA passes a checked q̈ of shape (batch, n) to the check in (n, batch)
    # order unless told otherwise, and then computes each coordinate's share of
    # the transcendentals apart: twice the time. The check adds one cosine (M's
    # pivots for the singular test) to the four of the double pendulum.
    system = jl.systems.make("double_pendulum").system
    q = jnp.ones((64, 2))
    batched = jax.vmap(jl.accelerations, in_axes=(None, 0, 0, None))
    text = jax.jit(batched).lower(system, q, q, 0.0).compile().as_text()
    entry = text[text.index("\nENTRY") :]
    assert re.search(r"f64\[64,2\]\{0,1\}", entry) is None
    assert len(re.findall(r"= \S+ (?:sine|cosine)\(", text)) <= 5


def test_unstack_is_written_out():
    # jnp.unstack (and the rotation matrices of `jl.rigid`, built on it) has a
    # scalar form: no array is assembled for it (the heavy top's q̈ ran 4× faster).
    def lagrangian(q, qd, t):
        x, y = jnp.unstack(q)
        u, v = jnp.unstack(qd)
        return 0.5 * (u**2 + v**2) + 0.2 * u * v * jnp.cos(x - y) + jnp.cos(x)

    system = jl.LagrangianSystem(lagrangian)
    (x, _), (y, _) = both(system, *STATE)
    assert_close(x, y)
    strategy = DenseCholesky()
    jaxpr = jax.make_jaxpr(lambda *s: accelerations(strategy, system, *s))(*STATE)
    names = {eqn.primitive.name for eqn in jaxpr.jaxpr.eqns}
    assert "unstack" not in names and "dot_general" not in names


def test_reverse_mode_through_written_out_products():
    # dot_general and reductions become scalar products and sums; the products
    # carry `mul`'s params, so that their transpose (jax.grad) works.
    def lagrangian(q, qd, t, p):
        inertia = jnp.array([[2.0, 0.3], [0.3, 1.0]]) * p["m"]
        return 0.5 * qd @ inertia @ qd - jnp.sum(p["k"] * jnp.cos(q))

    params = {"m": jnp.asarray(1.5), "k": jnp.array([1.0, 2.0])}

    def loss(params, scalar):
        system = jl.LagrangianSystem(lagrangian, params=params)
        strategy = DenseCholesky(scalar=scalar)
        return jnp.sum(accelerations(strategy, system, *STATE)[0] ** 2)

    grads = jax.grad(loss)(params, True)
    expected = jax.grad(loss)(params, False)
    for key in params:
        assert_close(grads[key], expected[key], 1e-11)


CONSTRAINED = [
    name for name in jl.systems.names() if jl.systems.make(name).system.has_constraints
]


@pytest.mark.parametrize("name", CONSTRAINED)
def test_constrained_dynamics_to_rounding(name):
    # The KKT solve (holonomic, nonholonomic, unilateral rows, Baumgarte terms)
    # is written out with q̈ (friction: test_scalar_friction.py).
    system, q0, qd0 = jl.systems.make(name)
    n = q0.shape[0]
    unroll = max(6, n)
    rng = np.random.default_rng(n)
    u = jl.systems.make(name).system.unilateral
    for k in range(2):
        q = q0 + 0.05 * k * jnp.asarray(rng.normal(size=n))
        qd = qd0 + 0.5 * jnp.asarray(rng.normal(size=n))
        t = jnp.asarray(0.2 * k)
        kwargs = {"baumgarte": (2.0, 3.0)} if k else {}
        if u is not None and k:
            h = system.constraints.gaps(q, t)
            kwargs["active"] = jnp.arange(h.shape[0]) % 2 == 0
        out = {}
        for scalar in (True, False):
            s = system.with_mass_strategy(DenseCholesky(unroll, scalar=scalar))
            out[scalar] = dynamics(s, q, qd, t, **kwargs)
        assert_same_dynamics(out[True], out[False], assert_close)


def test_gather_and_scatter_keep_their_meaning():
    # The neural Lagrangian builds its mass factor by a scatter (.at[].set) and
    # reads back by a gather; both agree with the array form, gradients too.
    system = jl.neural_lagrangian(2, key=jax.random.key(1), width=4, depth=1)
    (x, _), (y, _) = both(system, *STATE)
    assert_close(x, y)

    def lagrangian(q, qd, t, p):
        rows, cols = np.tril_indices(2)
        factor = jnp.zeros((2, 2)).at[rows, cols].set(p["w"] * (1 + q[0] ** 2))
        mass = factor @ factor.T + jnp.eye(2)
        return 0.5 * qd @ mass @ qd - jnp.sum(jnp.cos(q[jnp.array([1, 0])]))

    def loss(w, scalar):
        s = jl.LagrangianSystem(lagrangian, params={"w": w})
        return jnp.sum(accelerations(DenseCholesky(scalar=scalar), s, *STATE)[0])

    w = jnp.array([1.0, 0.3, 0.8])
    assert_close(loss(w, True), loss(w, False))
    assert_close(jax.grad(loss)(w, True), jax.grad(loss)(w, False), 1e-11)


@pytest.mark.parametrize(
    "name, written_out",
    [("double_pendulum", True), ("heavy_top", True), ("neural", False)],
)
def test_only_programs_that_collapse_are_written_out(name, written_out):
    # A learned Lagrangian (dense weights) does not collapse when written out:
    # under vmap its batched matrix products are faster (1.6x for width 8, 25x
    # for width 32), so it keeps the array form.
    if name == "neural":
        system = jl.neural_lagrangian(2, key=jax.random.key(1), width=8, depth=1)
        q0 = qd0 = jnp.ones(2)
    else:
        system, q0, qd0 = jl.systems.make(name)
    strategy = DenseCholesky(scalar=False)
    out = []

    def trace(q, qd, t):
        fn = lambda q, qd, t: strategy.accelerations(system, q, qd, t)  # noqa: E731
        out.append(_scalar.scalar_form(fn, q, qd, t))
        return 0.0

    jax.make_jaxpr(trace)(q0, qd0, jnp.zeros(()))
    assert (out[0] is not None) == written_out
