"""Large systems: `mass_solver` (matrix-free CG and lineax solvers) against dense."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from helpers import cartesian_chain, chain_state, off_chain_state, pendulum_chain

import jaxlagrange as jl


CG = lx.CG(rtol=1e-13, atol=1e-13)


def random_state(n, seed, scale=0.5):
    rng = np.random.default_rng(seed)
    return jnp.asarray(scale * rng.normal(size=n)), jnp.asarray(rng.normal(size=n))


def cavity_state(modes, seed):
    system, q0, _ = jl.systems.make("cavity", modes=modes)
    rng = np.random.default_rng(seed)
    q = np.asarray(q0).copy()
    q[0] = 1.1
    q[1:] = 0.1 * rng.normal(size=modes) / np.arange(1, modes + 1)
    return system, jnp.asarray(q), jnp.asarray(0.1 * rng.normal(size=modes + 1))


def cases():
    spring, _, _ = jl.systems.spring_chain(n=50)
    cavity, q_cavity, qd_cavity = cavity_state(16, 1)
    return {
        "spring chain": (spring, *random_state(50, 0)),
        "pendulum chain": (pendulum_chain(8), *random_state(8, 2)),
        "cavity": (cavity, q_cavity, qd_cavity),
    }


@pytest.mark.parametrize("name", ["spring chain", "pendulum chain", "cavity"])
@pytest.mark.parametrize(
    "solver", [CG, lx.Cholesky(), lx.GMRES(rtol=1e-13, atol=1e-13)]
)
def test_unconstrained_matches_dense(name, solver):
    system, q, qd = cases()[name]
    system = system.with_mass_solver(None)  # the large ready systems pick CG
    dense = jl.accelerations(system, q, qd, 0.3)
    other = jl.accelerations(system.with_mass_solver(solver), q, qd, 0.3)
    assert system.mass_solver is None
    assert jnp.max(jnp.abs(dense)) > 0.1
    np.testing.assert_allclose(other, dense, rtol=0, atol=1e-9)


@pytest.mark.parametrize("solver", [CG, lx.Cholesky()])
def test_constrained_matches_dense(solver):
    system = cartesian_chain(4)
    q, qd = chain_state(4, 3)
    fast = system.with_mass_solver(solver)
    for fn in (jl.accelerations, jl.multipliers, jl.constraint_force):
        dense, other = fn(system, q, qd, 0.0), fn(fast, q, qd, 0.0)
        assert jnp.max(jnp.abs(dense)) > 1.0
        np.testing.assert_allclose(other, dense, rtol=0, atol=1e-9)


@pytest.mark.parametrize("name", ["rolling_disk", "rolling_coin", "mass_on_sphere"])
def test_nonholonomic_and_unilateral_match_dense(name):
    ready = jl.systems.make(name)
    system, q0 = ready.system, ready.q0
    qd0 = ready.qd0 + 0.1  # a generic velocity (may leave the manifold: no matter)
    fast = system.with_mass_solver(CG)
    for fn in (jl.accelerations, jl.multipliers):
        np.testing.assert_allclose(
            fn(fast, q0, qd0, 0.0), fn(system, q0, qd0, 0.0), rtol=0, atol=1e-9
        )


def test_gradient_through_cg_matches_finite_differences():
    system = pendulum_chain(6)
    q, qd = random_state(6, 4)
    weights = jnp.linspace(1.0, 2.0, 6)

    def loss(params, q):
        s = eqx.tree_at(lambda s: s.params, system, params).with_mass_solver(CG)
        return jnp.dot(weights, jl.accelerations(s, q, qd, 0.0))

    grad_params, grad_q = jax.grad(loss, argnums=(0, 1))(system.params, q)
    # M and f are both proportional to m: q̈ does not depend on it (finite
    # differences would see only the solver's rounding, ~1e-7 at this h).
    assert abs(grad_params["m"]) < 1e-10
    h = 1e-6
    for key in ("l", "g"):
        up = dict(system.params, **{key: system.params[key] + h})
        down = dict(system.params, **{key: system.params[key] - h})
        fd = (loss(up, q) - loss(down, q)) / (2 * h)
        np.testing.assert_allclose(grad_params[key], fd, rtol=1e-6, atol=1e-7)
    for i in range(6):
        e = jnp.zeros(6).at[i].set(h)
        fd = (loss(system.params, q + e) - loss(system.params, q - e)) / (2 * h)
        np.testing.assert_allclose(grad_q[i], fd, rtol=1e-6, atol=1e-6)


def test_jit_and_vmap_match_single_calls():
    system = cartesian_chain(3).with_mass_solver(CG)
    states = [chain_state(3, seed) for seed in range(4)]
    q, qd = (jnp.stack(x) for x in zip(*states, strict=True))
    batched = jax.jit(jax.vmap(jl.multipliers, (None, 0, 0, None)))(system, q, qd, 0.0)
    for i, (qi, qdi) in enumerate(states):
        np.testing.assert_allclose(
            batched[i], jl.multipliers(system, qi, qdi, 0.0), rtol=0, atol=1e-12
        )
    cavity, q0, qd0 = cavity_state(8, 5)
    cavity = cavity.with_mass_solver(CG)
    qs = q0 + 1e-2 * jnp.arange(3)[:, None]
    batched = jax.vmap(jl.accelerations, (None, 0, None, None))(cavity, qs, qd0, 0.0)
    for i in range(3):
        np.testing.assert_allclose(
            batched[i], jl.accelerations(cavity, qs[i], qd0, 0.0), rtol=0, atol=1e-12
        )


def test_simulate_with_cg_matches_dense():
    system, q0, qd0 = jl.systems.spring_chain(n=20)
    kwargs = dict(
        t1=2.0,
        saveat=jnp.linspace(0.0, 2.0, 5),
        dt0=0.01,
        stepsize_controller=diffrax.ConstantStepSize(),
    )
    dense = jl.simulate(system, q0, qd0, **kwargs)
    fast = jl.simulate(system.with_mass_solver(CG), q0, qd0, **kwargs)
    np.testing.assert_allclose(fast.q, dense.q, rtol=0, atol=1e-9)
    chain = cartesian_chain(3)
    q0, qd0 = chain_state(3, 6)
    dense = jl.simulate(chain, q0, qd0, t1=0.5)
    fast = jl.simulate(chain.with_mass_solver(CG), q0, qd0, t1=0.5)
    np.testing.assert_allclose(fast.q, dense.q, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.multipliers, dense.multipliers, atol=1e-8)


def test_preconditioner_keeps_the_result():
    system = pendulum_chain(8)
    q, qd = random_state(8, 7)

    def diagonal(q, qd, t, params):
        # diag M for the pendulum chain: m l² (n − i), exact.
        n = q.shape[0]
        return params["m"] * params["l"] ** 2 * jnp.arange(n, 0, -1.0)

    dense = jl.accelerations(system, q, qd, 0.0)
    fast = system.with_mass_solver(CG, diagonal)
    np.testing.assert_allclose(jl.accelerations(fast, q, qd, 0.0), dense, atol=1e-9)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_mass_solver_must_be_a_lineax_solver():
    with pytest.raises(ValueError, match="`mass_solver` must be None .* got 'cg'"):
        jl.LagrangianSystem(lambda q, qd, t: qd @ qd, mass_solver="cg")
    system, _, _ = jl.systems.spring_chain(n=3)
    with pytest.raises(ValueError, match="`mass_solver` must be None"):
        system.with_mass_solver(lx.CG)  # the class, not a solver
    with pytest.raises(ValueError, match="`mass_preconditioner` must be a function"):
        system.with_mass_solver(CG, mass_preconditioner=np.ones(3))


def test_preconditioner_shape_is_checked():
    system, q0, qd0 = jl.systems.spring_chain(n=3)
    bad = system.with_mass_solver(CG, lambda q, qd, t, params: jnp.ones(4))
    with pytest.raises(ValueError, match="`mass_preconditioner` must return .* shape"):
        jl.accelerations(bad, q0, qd0, 0.0)


def singular_system():
    def lagrangian(q, qd, t):
        return 0.5 * qd[0] ** 2 - 0.5 * jnp.sum(q**2)  # no kinetic term in q[1]

    return jl.LagrangianSystem(lagrangian, mass_solver=lx.CG(rtol=1e-10, atol=1e-10))


def test_singular_mass_is_reported_under_jit():
    system = singular_system()
    q, qd = jnp.array([1.0, 2.0]), jnp.array([0.0, 0.0])
    with pytest.raises(Exception, match="mass matrix .* singular"):
        jax.jit(jl.accelerations)(system, q, qd, 0.0)


def test_singular_mass_is_a_result_code_in_simulate():
    system = singular_system()
    traj = jl.simulate(system, jnp.array([1.0, 2.0]), jnp.zeros(2), t1=1.0, throw=False)
    assert traj.result == jl.RESULTS.singular_mass_matrix


def test_large_chain_never_forms_the_mass_matrix():
    n = 20_000
    system, q0, qd0 = jl.systems.spring_chain(n=n)
    system = system.with_mass_solver(lx.CG(rtol=1e-10, atol=1e-10))

    def accelerations(q, qd):
        return jl.accelerations(system, q, qd, 0.0)

    compiled = jax.jit(accelerations).lower(q0, qd0).compile()
    memory = compiled.memory_analysis()
    total = memory.temp_size_in_bytes + memory.output_size_in_bytes
    assert total < 100 * n * 8  # an n × n matrix would be n * n * 8 bytes
    qdd = compiled(q0, qd0)
    # x₁ = 0.5, the rest at 0: q̈₁ = −2 k x₁ / m, q̈₂ = k x₁ / m.
    np.testing.assert_allclose(qdd[:3], [-1.0, 0.5, 0.0], atol=1e-12)


@pytest.mark.parametrize(
    "name, options, solver",
    [
        ("spring_chain", {"n": 8}, None),
        ("spring_chain", {"n": 40}, "CG"),
        ("cavity", {"modes": 10}, None),
        ("cavity", {"modes": 20}, "CG"),
    ],
)
def test_ready_systems_pick_cg_when_large(name, options, solver):
    # The default picks well: dense below 16 coordinates, CG from there on, with
    # the same accelerations as the dense solve.
    system, q0, qd0 = jl.systems.make(name, **options)
    picked = system.mass_solver
    assert (picked is None) if solver is None else type(picked).__name__ == solver
    qd0 = qd0 + 0.1 * jnp.cos(jnp.arange(q0.shape[0]))
    dense = jl.accelerations(system.with_mass_solver(None), q0, qd0, 0.0)
    assert np.allclose(
        jl.accelerations(system, q0, qd0, 0.0), dense, rtol=1e-10, atol=1e-12
    )


def test_cg_that_does_not_converge_is_reported():
    system = pendulum_chain(8).with_mass_solver(
        lx.CG(rtol=1e-13, atol=1e-13, max_steps=2)
    )
    q, qd = random_state(8, 8)
    with pytest.raises(
        Exception, match="did not converge within the solver's max_steps"
    ):
        jl.accelerations(system, q, qd, 0.0)


def test_cg_reports_an_indefinite_mass_matrix():
    def lagrangian(q, qd, t):
        return 0.5 * qd[0] ** 2 - 0.5 * qd[1] ** 2 - 0.5 * jnp.sum(q**2)

    system = jl.LagrangianSystem(lagrangian, mass_solver=CG)
    with pytest.raises(Exception, match="singular or not positive definite"):
        jl.accelerations(system, jnp.array([1.0, 2.0]), jnp.array([0.3, 0.1]), 0.0)


@pytest.mark.parametrize("solver", [CG, lx.GMRES(rtol=1e-13, atol=1e-13)])
def test_iterative_solvers_let_non_finite_dynamics_through(solver):
    # ∂L/∂q is NaN at q₀ < 0: reported as non-finite dynamics, not as a solve
    # failure, and never as a finite q̈.
    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) - jnp.sqrt(q[0]) - 0.5 * q[1] ** 2

    system = jl.LagrangianSystem(lagrangian, mass_solver=solver)
    q, qd = jnp.array([-1.0, 2.0]), jnp.array([0.3, 0.1])
    with pytest.raises(Exception, match="jl.accelerations is not finite"):
        jl.accelerations(system, q, qd, 0.0)


def test_cg_gradient_through_the_solve_is_implicit():
    # Reverse mode through a while loop needs the implicit derivative of
    # `jax.lax.custom_linear_solve`: d(M⁻¹f)/dθ against the dense solve's.
    system, q, qd = cavity_state(20, 9)

    def loss(params, solver):
        s = eqx.tree_at(lambda s: s.params, system, params).with_mass_solver(solver)
        return jnp.sum(jnp.sin(jl.accelerations(s, q, qd, 0.0)))

    cg = jax.grad(loss)(system.params, CG)
    dense = jax.grad(loss)(system.params, None)
    for key in ("m", "k", "q_eq"):
        assert abs(dense[key]) > 1e-3
        np.testing.assert_allclose(cg[key], dense[key], rtol=1e-9)


def test_projection_with_cg_matches_dense():
    # Off the manifold in position and velocity: the Gauss–Newton steps and the
    # velocity projection in M's metric, matrix-free, land where the dense ones do.
    system = cartesian_chain(4)
    q_off, qd_off = off_chain_state(4, 10)
    dense = jl.project_initial_state(system, q_off, qd_off, 0.0)
    fast = jl.project_initial_state(system.with_mass_solver(CG), q_off, qd_off, 0.0)
    assert jnp.max(jnp.abs(dense[0] - q_off)) > 1e-4
    assert jnp.max(jnp.abs(dense[1] - qd_off)) > 1e-3
    for a, b in zip(fast, dense, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-9)


def test_constrained_simulate_never_forms_the_mass_matrix():
    # A chain of 1000 links (2000 coordinates, 1000 constraints) with CG: the
    # accelerations and the projection after each step stay matrix-free.
    links = 1000
    n = 2 * links
    system = cartesian_chain(links).with_mass_solver(lx.CG(rtol=1e-8, atol=1e-8))
    q0, qd0 = chain_state(links, 11)

    def run(q0, qd0):
        return jl.simulate(
            system,
            q0,
            qd0,
            t1=1e-3,
            dt0=1e-3,
            stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=1,
        ).q[-1]

    memory = jax.jit(run).lower(q0, qd0).compile().memory_analysis()
    total = memory.temp_size_in_bytes + memory.output_size_in_bytes
    assert total < n * n * 8 / 10  # an n × n matrix is n * n * 8 bytes


def falling_chain(links):
    """A Cartesian chain, hung from the origin, whose last point can hit a floor at
    y = −(links − 0.5)."""
    chain = cartesian_chain(links)

    def floor(q, t, params):
        return jnp.array([q[-1] + links - 0.5])

    return jl.LagrangianSystem(
        chain.lagrangian,
        params=chain.params,
        holonomic=chain.holonomic,
        unilateral=floor,
        restitution=0.5,
    )


def test_impulses_with_cg_match_dense():
    system = cartesian_chain(4)
    q, qd = chain_state(4, 12)
    impulse = jnp.asarray(np.random.default_rng(12).normal(size=q.shape))
    dense = jl.apply_impulse(system, q, qd, 0.0, impulse)
    fast = jl.apply_impulse(system.with_mass_solver(CG), q, qd, 0.0, impulse)
    assert jnp.max(jnp.abs(dense - qd)) > 0.1
    np.testing.assert_allclose(fast, dense, rtol=0, atol=1e-9)
    # Impacts of a chain on a floor: the links, the contact and the rebound of
    # each impact, matrix-free.
    chain = falling_chain(3)
    angles = np.array([1.2, 1.3, 1.4])  # from the downward vertical: let go sideways
    q0 = np.stack([np.cumsum(np.sin(angles)), -np.cumsum(np.cos(angles))], 1)
    q0, qd0 = jnp.asarray(q0.ravel()), jnp.zeros(6)
    kwargs = dict(t1=1.5, saveat=jnp.linspace(0.0, 1.5, 7), max_events=8)
    dense = jl.simulate(chain, q0, qd0, **kwargs)
    fast = jl.simulate(chain.with_mass_solver(CG), q0, qd0, **kwargs)
    assert int(jnp.sum(dense.event_kind == jl.EVENT_IMPACT)) >= 1
    np.testing.assert_array_equal(fast.event_kind, dense.event_kind)
    np.testing.assert_allclose(fast.event_ts, dense.event_ts, rtol=0, atol=1e-9)
    np.testing.assert_allclose(fast.q, dense.q, rtol=0, atol=1e-8)


def test_gradient_through_simulate_with_cg_matches_dense():
    # Reverse mode through diffrax's loop and the CG loop inside each step.
    system, q0, qd0 = jl.systems.spring_chain(n=20)

    def loss(k, solver):
        s = eqx.tree_at(lambda s: s.params["k"], system, k).with_mass_solver(solver)
        traj = jl.simulate(
            s,
            q0,
            qd0,
            t1=1.0,
            dt0=0.05,
            stepsize_controller=diffrax.ConstantStepSize(),
            saveat=jnp.array([1.0]),
        )
        return jnp.sum(traj.q[-1] ** 2)

    k = jnp.asarray(system.params["k"])
    dense = jax.grad(loss)(k, None)
    fast = jax.grad(loss)(k, CG)
    assert abs(dense) > 1e-3
    np.testing.assert_allclose(fast, dense, rtol=1e-9)
