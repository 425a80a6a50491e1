"""Physics that was silently wrong or wrongly named, now checked and named.

Each test holds a case that was silently wrong or wrongly named before: an
equilibrium against a one-sided contact, normal modes off an equilibrium, the
variational integrator's mass-matrix and `dt0` checks, the friction and
restitution coefficients under `jit`, the values `linearize`, `equilibrium` and
`normal_modes` are given, `lineax.CG`'s mass matrix and preconditioner, a `slip`
that is not affine in q̇, non-finite params, n = 0 and the memory limits that
size the save arrays.
"""

import os
import resource
import subprocess
import sys
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
from friction_systems import ball
from helpers import (
    falling_lagrangian,
    free_lagrangian,
    unit_oscillator_lagrangian,
    unit_pendulum,
)

import jaxlagrange as jl
from jaxlagrange import _validate


G = 9.81
RUNTIME = RuntimeError  # eqx.EquinoxRuntimeError, or under jax.jit JaxRuntimeError


# 6. `equilibrium` with unilateral contacts.


def _hanging_ball(anchor):
    """A unit ball on a spring (rest height `anchor`, stiffness k) above a floor."""

    def lagrangian(q, qd, t, p):
        return 0.5 * qd[0] ** 2 - G * q[0] - 0.5 * p["k"] * (q[0] - anchor) ** 2

    def floor(q, t, p):
        return q[:1]

    return jl.LagrangianSystem(lagrangian, params={"k": 2 * G}, unilateral=floor)


@pytest.mark.parametrize("guess", [0.3, 0.0, 2.0])
def test_equilibrium_ignores_a_contact_that_would_pull(guess):
    # k = 2g: the spring holds the ball at 1 − g/k = 0.5, above the floor.
    q = jl.equilibrium(_hanging_ball(1.0), jnp.array([guess]))
    np.testing.assert_allclose(q, [0.5], atol=1e-10)


def test_equilibrium_rests_on_a_contact_that_pushes():
    # Rest height 0.2: the free equilibrium 0.2 − 0.5 < 0 is below the floor, so
    # the ball rests on it (λ = g − k·0.2 > 0).
    system = _hanging_ball(0.2)
    q = jl.equilibrium(system, jnp.array([0.7]))
    np.testing.assert_allclose(q, [0.0], atol=1e-10)
    lam = jl.multipliers(system, q, jnp.zeros(1), 0.0)
    np.testing.assert_allclose(lam, [G - 2 * G * 0.2], rtol=1e-10)


def test_equilibrium_pendulum_against_a_stop():
    def lagrangian(q, qd, t, p):
        return 0.5 * qd[0] ** 2 + G * jnp.cos(q[0])

    def stop(q, t, p):
        return jnp.array([q[0] - p["edge"]])

    def pendulum(edge):
        return jl.LagrangianSystem(lagrangian, params={"edge": edge}, unilateral=stop)

    # A stop at θ ≥ 0.2 holds the pendulum there; one at θ ≥ −0.2 does not touch it.
    solve = jax.jit(jl.equilibrium)
    np.testing.assert_allclose(
        solve(pendulum(0.2), jnp.array([0.5])), [0.2], atol=1e-10
    )
    np.testing.assert_allclose(
        solve(pendulum(-0.2), jnp.array([0.1])), [0.0], atol=1e-10
    )


def test_equilibrium_with_contacts_is_differentiable():
    # y* = a − g/k, so dy*/dk = g/k².
    def height(k):
        system = _hanging_ball(1.0)
        system = eqx.tree_at(lambda s: s.params["k"], system, k)
        return jl.equilibrium(system, jnp.array([0.3]))[0]

    k = 2 * G
    np.testing.assert_allclose(jax.grad(height)(k), G / k**2, rtol=1e-8)


# 7. `normal_modes` at a point that is not an equilibrium.


def test_normal_modes_refuses_a_non_equilibrium():
    system, _, _ = jl.systems.pendulum()
    with pytest.raises(ValueError, match=r"not a static equilibrium.*q̈ = \[-4\.7"):
        jl.normal_modes(system, jnp.array([0.5]))
    with pytest.raises(RUNTIME, match="not a static equilibrium"):
        jax.jit(jl.normal_modes)(system, jnp.array([0.5]))
    omega2, _ = jax.jit(jl.normal_modes)(system, jnp.array([0.0]))
    np.testing.assert_allclose(omega2, [G], rtol=1e-12)


# 8. `VariationalMidpoint`: the mass matrix and `dt0`.


def _variational(system, dt0=0.1):
    return jl.simulate(
        system,
        jnp.array([1.0]),
        jnp.array([0.0]),
        t1=1.0,
        dt0=dt0,
        solver=jl.VariationalMidpoint(),
    )


@pytest.mark.parametrize(
    "lagrangian",
    [
        lambda q, qd, t: qd[0] * q[0] - 0.5 * q[0] ** 2,  # M = 0
        lambda q, qd, t: -0.5 * qd[0] ** 2 + 0.5 * q[0] ** 2,  # L = V − T: M < 0
    ],
    ids=["zero", "negative"],
)
def test_variational_refuses_a_singular_or_indefinite_mass_matrix(lagrangian):
    system = jl.LagrangianSystem(lagrangian)
    with pytest.raises(RUNTIME, match="mass matrix"):
        _variational(system)
    with pytest.raises(RUNTIME, match="mass matrix"):
        jax.jit(_variational)(system)


def test_variational_names_a_traced_dt0():
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * q[0] ** 2)
    for dt0 in (-0.1, 0.0, jnp.nan):
        with pytest.raises(RUNTIME, match="`dt0` must be positive"):
            jax.jit(lambda dt: _variational(system, dt).q)(dt0)
    q = jax.jit(lambda dt: _variational(system, dt).q)(0.01)
    np.testing.assert_allclose(q[-1], [np.cos(1.0)], atol=1e-4)


# 9. Friction and restitution checked under jit, vmap and grad.

Q_BALL = jnp.array([0.0, 0.1, 0.0])
QD_BALL = jnp.array([1.0, 0.0, 0.0])


def _ball_qdd(mu, mu_s=None):
    return jl.accelerations(ball(0.4, mu, mu_s=mu_s), Q_BALL, QD_BALL, 0.0)


def test_friction_coefficients_checked_under_jit():
    with pytest.raises(RUNTIME, match="`friction` must be finite and non-negative"):
        jax.jit(_ball_qdd)(-0.1)
    with pytest.raises(RUNTIME, match="`static_friction` must be finite and"):
        jax.jit(_ball_qdd)(0.3, -1.0)
    with pytest.raises(RUNTIME, match=r"`static_friction` must be at least `friction`"):
        jax.jit(_ball_qdd)(0.3, 0.2)
    with pytest.raises(RUNTIME, match="`friction` must be finite"):
        jax.vmap(_ball_qdd)(jnp.array([0.3, -0.3]))
    with pytest.raises(RUNTIME, match="`friction` must be finite"):
        jax.grad(lambda mu: _ball_qdd(mu)[0])(-0.1)
    # A valid coefficient: the slipping ball decelerates at μ g.
    np.testing.assert_allclose(jax.jit(_ball_qdd)(0.3)[0], -0.3 * G, rtol=1e-12)


def _drop(e):
    def lagrangian(q, qd, t):
        return 0.5 * qd[0] ** 2 - G * q[0]

    system = jl.LagrangianSystem(
        lagrangian, unilateral=lambda q, t: q[:1], restitution=e
    )
    return jl.simulate(system, jnp.array([1.0]), jnp.array([0.0]), t1=0.6).q[-1, 0]


def test_restitution_checked_under_jit():
    for e in (1.5, -0.2, jnp.nan):
        with pytest.raises(RUNTIME, match=r"`restitution` must lie in \[0, 1\]"):
            jax.jit(_drop)(e)
    with pytest.raises(RUNTIME, match="`restitution` must lie"):
        jax.grad(_drop)(1.5)
    # The ball lands at t = √(2/g) and rebounds elastically.
    t = 0.6 - np.sqrt(2 / G)
    v = np.sqrt(2 * G)
    np.testing.assert_allclose(jax.jit(_drop)(1.0), v * t - 0.5 * G * t**2, rtol=1e-6)


# 15. `linearize`, `equilibrium` and `normal_modes` check their values.


ZERO = jnp.zeros(1)
NAN = jnp.array([jnp.nan])
INF = jnp.array([jnp.inf])


def test_linearize_names_a_non_finite_operating_point():
    system = unit_pendulum()
    cases = [
        ((NAN, ZERO, 0.0), "`q`"),
        ((ZERO, INF, 0.0), "`qd`"),
        ((ZERO, ZERO, jnp.nan), "`t`"),
    ]
    for args, name in cases:
        with pytest.raises(ValueError, match=f"{name} is not finite"):
            jl.linearize(system, *args)
        with pytest.raises(RUNTIME, match=f"{name} is not finite"):
            jax.jit(jl.linearize)(system, *args)


def test_non_finite_params_are_named():
    system = unit_pendulum(jnp.nan)
    match = r"params\['g'\] is not finite"
    with pytest.raises(RUNTIME, match=match):
        jl.linearize(system, ZERO, ZERO)
    with pytest.raises(RUNTIME, match=match):
        jl.equilibrium(system, ZERO)
    with pytest.raises(RUNTIME, match=match):
        jl.normal_modes(system, ZERO)
    with pytest.raises(RUNTIME, match=match):
        jax.jit(jl.normal_modes)(system, ZERO)


def test_equilibrium_and_normal_modes_name_non_finite_inputs():
    system = unit_pendulum()
    with pytest.raises(ValueError, match="`q_guess` is not finite"):
        jl.equilibrium(system, NAN)
    with pytest.raises(RUNTIME, match="`q_guess` is not finite"):
        jax.jit(jl.equilibrium)(system, NAN)
    with pytest.raises(ValueError, match="`t` is not finite"):
        jl.equilibrium(system, ZERO, jnp.inf)
    with pytest.raises(ValueError, match="`q` is not finite"):
        jl.normal_modes(system, INF)
    with pytest.raises(RUNTIME, match="`q` is not finite"):
        jax.jit(jl.normal_modes)(system, INF)


@pytest.mark.parametrize("name", ["rtol", "atol"])
@pytest.mark.parametrize("value", [-1.0, 0.0, float("nan"), float("inf"), "tight"])
def test_equilibrium_names_bad_tolerances(name, value):
    # One tolerance check for simulate, batches and equilibrium (`_options`).
    with pytest.raises(ValueError, match=f"`{name}` must be (a number|positive)"):
        jl.equilibrium(unit_pendulum(), jnp.array([0.1]), **{name: value})


# 16. `lineax.CG`: the mass matrix and `mass_preconditioner`.

CG = lx.CG(rtol=1e-10, atol=1e-10)


def _oscillator(preconditioner):
    return jl.LagrangianSystem(
        unit_oscillator_lagrangian, mass_solver=CG, mass_preconditioner=preconditioner
    )


@pytest.mark.parametrize("value", [0.0, -1.0, jnp.nan, jnp.inf])
def test_bad_preconditioner_is_named(value):
    system = _oscillator(lambda q, qd, t: jnp.full(2, value))
    q0, qd0 = jnp.ones(2), jnp.zeros(2)
    match = "`mass_preconditioner` returned a diagonal that is not positive"
    with pytest.raises(RUNTIME, match=match):
        jl.accelerations(system, q0, qd0, 0.0)
    with pytest.raises(RUNTIME, match=match):
        jl.simulate(system, q0, qd0, t1=1.0)


def test_preconditioner_operator_of_the_wrong_size_is_named():
    def preconditioner(q, qd, t):
        diagonal = lx.DiagonalLinearOperator(jnp.ones(3))
        return lx.TaggedLinearOperator(diagonal, lx.positive_semidefinite_tag)

    system = _oscillator(preconditioner)
    with pytest.raises(ValueError, match=r"`mass_preconditioner`.*shape \(3,\)"):
        jl.accelerations(system, jnp.ones(2), jnp.zeros(2), 0.0)


def test_good_preconditioner_is_accepted():
    system = _oscillator(lambda q, qd, t: jnp.full(2, 2.0))
    qdd = jl.accelerations(system, jnp.array([1.0, 2.0]), jnp.zeros(2), 0.0)
    np.testing.assert_allclose(qdd, [-1.0, -2.0], rtol=1e-9)


@pytest.mark.parametrize("mass_solver", [None, CG], ids=["dense", "cg"])
def test_mass_matrix_singular_during_the_solve_is_named(mass_solver):
    # M = 1 − q₀² vanishes at q₀ = 1, reached at t = π/4 (q₀ = sin t).
    def lagrangian(q, qd, t):
        return 0.5 * (1 - q[0] ** 2) * qd[0] ** 2 + 0.5 * qd[1] ** 2

    system = jl.LagrangianSystem(lagrangian, mass_solver=mass_solver)
    with pytest.raises(RUNTIME, match="mass matrix .* became singular"):
        jl.simulate(system, jnp.zeros(2), jnp.ones(2), t1=2.0)


# 19. `slip` must be affine in q̇.


def _slipping_block(slip):
    return jl.LagrangianSystem(
        falling_lagrangian, unilateral=lambda q, t: q[1:], slip=slip, friction=0.3
    )


def test_slip_not_affine_is_refused():
    system = _slipping_block(lambda q, qd, t: qd[:1] ** 3)
    q0, qd0 = jnp.zeros(2), jnp.array([1.0, 0.0])
    with pytest.raises(ValueError, match="`slip` must be affine in qd"):
        jl.simulate(system, q0, qd0, t1=0.1)
    with pytest.raises(RUNTIME, match="`slip` must be affine in qd"):
        jax.jit(lambda q: jl.simulate(system, q, qd0, t1=0.1).q)(q0)
    # |q̇| is affine on either side of 0 but not across it.
    system = _slipping_block(lambda q, qd, t: jnp.abs(qd[:1]))
    with pytest.raises(ValueError, match="`slip` must be affine in qd"):
        jl.simulate(system, q0, qd0, t1=0.1)

    # An affine slip passes the check (and every system of test_friction.py runs).
    def affine(q, qd, t):
        return qd[:1] - 2.0 * qd[1:] * q[:1] + jnp.sin(q[:1]) + t

    t0 = jnp.asarray(0.3)
    checked = _validate.check_affine("slip", affine, q0 + 0.4, qd0, t0, q0)
    np.testing.assert_array_equal(checked, q0)


def test_nonholonomic_not_affine_is_refused():
    def constraint(q, qd, t):
        return jnp.array([qd[0] * qd[1]])

    system = jl.LagrangianSystem(free_lagrangian, nonholonomic=constraint)
    with pytest.raises(ValueError, match="`nonholonomic` must be affine in qd"):
        jl.simulate(system, jnp.zeros(2), jnp.array([1.0, 0.0]), t1=0.1)


# 20. Non-finite params, n = 0 and the memory limits.


def test_non_finite_param_of_a_friction_system_is_named():
    system = ball(0.4, 0.3)
    system = eqx.tree_at(lambda s: s.params["k"], system, jnp.nan)
    with pytest.raises(RUNTIME, match=r"params\['k'\] is not finite"):
        jl.accelerations(system, Q_BALL, QD_BALL, 0.0)
    with pytest.raises(RUNTIME, match=r"params\['k'\] is not finite"):
        jl.simulate(system, Q_BALL, QD_BALL, t1=0.1)


def test_non_finite_mass_param_is_not_blamed_on_the_mass_matrix():
    def lagrangian(q, qd, t, p):
        return 0.5 * p["m"] * qd[0] ** 2 + jnp.cos(q[0])

    system = jl.LagrangianSystem(lagrangian, params={"m": jnp.inf})
    with pytest.raises(RUNTIME, match=r"params\['m'\] is not finite"):
        jl.accelerations(system, ZERO, ZERO, 0.0)
    with pytest.raises(RUNTIME, match=r"params\['m'\] is not finite"):
        jl.normal_modes(system, ZERO)
    with pytest.raises(RUNTIME, match=r"params\['m'\] is not finite"):
        jl.simulate(system, ZERO, ZERO, t1=1.0)


def test_no_coordinates_is_refused():
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * jnp.sum(qd**2))
    empty = jnp.zeros(0)
    match = "at least one coordinate"
    with pytest.raises(ValueError, match=match):
        jl.accelerations(system, empty, empty, 0.0)
    with pytest.raises(ValueError, match=match):
        jl.linearize(system, empty, empty)
    with pytest.raises(ValueError, match=match):
        jl.equilibrium(system, empty)
    with pytest.raises(ValueError, match=match):
        jl.normal_modes(system, empty)


def _memory_limit():
    """The smallest of the process's memory limits (None: none known)."""
    return min((value for value, _ in _validate.memory_limits()), default=None)


def test_memory_limit_follows_rlimit_as(monkeypatch):
    limit = 2**30

    def getrlimit(which):
        if which == resource.RLIMIT_AS:
            return (limit, resource.RLIM_INFINITY)
        return (resource.RLIM_INFINITY, resource.RLIM_INFINITY)

    monkeypatch.setattr(resource, "getrlimit", getrlimit)
    assert _memory_limit() <= limit
    # 2 GiB of saves: under physical memory, over the address-space limit.
    with pytest.raises(ValueError, match=r"address-space limit.*1\.0 GiB"):
        _validate.check_output_size(2**26, 1, 0, jnp.float64)
    _validate.check_output_size(2**20, 1, 0, jnp.float64)


def test_memory_limit_follows_the_cgroup(monkeypatch, tmp_path):
    (tmp_path / "memory.max").write_text(f"{2**30}\n")
    monkeypatch.setattr(_validate, "_CGROUP_FILES", (str(tmp_path / "memory.max"),))
    assert _memory_limit() <= 2**30
    with pytest.raises(ValueError, match=r"memory limit.*1\.0 GiB"):
        _validate.check_output_size(2**26, 1, 0, jnp.float64)
    (tmp_path / "memory.max").write_text("max\n")
    assert _memory_limit() is None or _memory_limit() > 2**30


def test_cli_refuses_saves_beyond_the_address_space_limit(tmp_path):
    # Under `ulimit -v` the save times alone (8 GB) made XLA abort (status −6).
    (tmp_path / "big.toml").write_text(
        '[system]\nname = "pendulum"\n[simulate]\nt1 = 1.0\nsaves = 1000000000\n'
    )
    limit_kib = 6 * 2**20  # ulimit -v counts KiB: 6 GiB
    command = f'ulimit -v {limit_kib} && exec "$0" -m jaxlagrange run big.toml --out o'
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run(
        ["bash", "-c", command, sys.executable],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(root), "JAX_PLATFORMS": "cpu"},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "[simulate] saves = 1000000000 is too many" in proc.stderr
    assert "address-space limit (ulimit -v) of 6.0 GiB" in proc.stderr
