"""Values that ran, or failed under another name, before they were checked.

A coefficient named as a param checked on the value each batch member or fit
step uses; rigid-body inertias, masses and the quaternion term's J; ready
systems' params that are not numbers or not finite; a noise scale whose 1/σ²
overflows; `jl.failed` on what `jl.result_name` takes; quaternions far from
unit norm.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from friction_systems import _across, _along, _incline_lagrangian
from scipy.spatial.transform import Rotation

import jaxlagrange as jl


RUNTIME = RuntimeError  # eqx.EquinoxRuntimeError, or under jax.jit JaxRuntimeError


def _bouncing_batch(e, **options):
    system, q0, qd0 = jl.systems.bouncing_ball()
    return jl.simulate_batch(
        system,
        jnp.stack([q0, q0]),
        jnp.stack([qd0, qd0]),
        params={"e": jnp.asarray(e)},
        t1=1.0,
        backend="vmap",
        **options,
    )


@pytest.mark.parametrize("throw", [True, False])
def test_a_batch_over_a_restitution_param_checks_each_member(throw):
    # e = 1.5 ran "successful", rebounding faster than it landed.
    with pytest.raises(RUNTIME, match=r"`restitution` must lie in \[0, 1\]"):
        _bouncing_batch([0.5, 1.5], throw=throw)
    # Valid members: the first bounce at √(2/g) rebounds at e √(2g).
    traj = _bouncing_batch([0.5, 1.0], throw=throw, saveat=jnp.array([0.5]))
    t = 0.5 - np.sqrt(2 / 9.81)
    v = np.array([0.5, 1.0]) * np.sqrt(2 * 9.81)
    np.testing.assert_allclose(traj.q[:, 0, 0], v * t - 0.5 * 9.81 * t**2, rtol=1e-6)


def test_a_batch_over_a_friction_param_checks_each_member():
    system = jl.LagrangianSystem(
        _incline_lagrangian,
        params={"alpha": 0.4, "mu": 0.3},
        unilateral=_across,
        slip=_along,
        friction="mu",
    )
    zeros = jnp.zeros((2, 2))

    def batch(mu):
        return jl.simulate_batch(
            system, zeros, zeros, params={"mu": jnp.array(mu)}, t1=0.5, throw=False
        )

    # (Static friction follows the named kinetic one: the first read names it.)
    with pytest.raises(RUNTIME, match="friction` must be finite and non-negative"):
        batch([0.3, -0.3])
    # μ = 0.1 < tan α: the block slides down at g (sin α − μ cos α).
    traj = batch([0.1, 0.2])
    accel = 9.81 * (np.sin(0.4) - np.array([0.1, 0.2]) * np.cos(0.4))
    np.testing.assert_allclose(traj.q[:, -1, 0], 0.5 * accel * 0.25, rtol=1e-7)


def test_a_fit_over_a_restitution_param_checks_the_value_it_uses():
    system, q0, qd0 = jl.systems.bouncing_ball()
    ts = jnp.linspace(0.0, 0.8, 9)
    traj = jl.simulate(system, q0, qd0, t1=0.8, saveat=ts)
    data = jl.Observations(ts, traj.q, traj.qd, q0=q0, qd0=qd0)
    # A starting guess out of range is named before anything is compiled (put
    # in by `with_params`, which checks it as the constructor does) ...
    with pytest.raises(ValueError, match=r"`restitution` must lie in \[0, 1\]"):
        jl.fit(system, data, params={**system.params, "e": 1.5}, trainable={"e"})

    # ... and a traced value by the solves of the loss that read it.
    def loss(e):
        return jl.fit_loss(system.with_params({**system.params, "e": e}), data)

    with pytest.raises(RUNTIME, match=r"`restitution` must lie in \[0, 1\]"):
        jax.jit(loss)(1.5)
    assert np.isfinite(jax.jit(loss)(0.9))


def _energy(mass, inertia, q, qd):
    return jl.rigid.kinetic_energy(
        mass,
        inertia,
        lambda q, t: q[:3],
        lambda q, t: jl.rigid.euler_to_matrix(q[3:], "XYZ"),
        q,
        qd,
    )


@pytest.mark.parametrize(
    "mass, inertia, match",
    [
        (-1.0, [1.0, 2.0, 2.5], r"`mass` must be >= 0, got -1\.0"),
        (np.nan, [1.0, 2.0, 2.5], r"`mass` must be >= 0, got nan"),
        (1.0, [[1.0, 0.5, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 2.5]], "symmetric tensor"),
        (1.0, [-1.0, 2.0, 2.5], r"principal moments >= 0, got \[-1\.0, 2\.0, 2\.5\]"),
        (1.0, [1.0, 1.0, 3.0], r"triangle inequality .* got \[1\.0, 1\.0, 3\.0\]"),
        (1.0, np.diag([3.0, 1.0, 1.0]) + 0.1 * np.ones((3, 3)), "triangle"),
    ],
)
def test_kinetic_energy_refuses_unphysical_bodies(mass, inertia, match):
    q, qd = jnp.arange(6.0) / 10, jnp.ones(6)
    with pytest.raises(ValueError, match=match):
        _energy(mass, inertia, q, qd)
    # Also inside a traced L, where the constants are known.
    with pytest.raises(ValueError, match=match):
        jax.jit(lambda q: _energy(mass, inertia, q, qd))(q)


def test_kinetic_energy_takes_physical_bodies():
    # A thin rod (one moment 0, the others equal: the triangle's edge case) and a
    # rotated symmetric tensor, rounded as R I Rᵀ is.
    q, qd = jnp.zeros(6), jnp.array([0.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    assert float(_energy(2.0, [0.0, 1.0, 1.0], q, qd)) == 0.0
    r = Rotation.from_euler("xyz", [0.3, -0.2, 1.1]).as_matrix()
    tensor = r @ np.diag([1.0, 2.0, 2.5]) @ r.T
    expected = 0.5 * tensor[0, 0]
    np.testing.assert_allclose(_energy(2.0, tensor, q, qd), expected, rtol=1e-12)


def test_quaternion_norm_term_refuses_a_non_positive_J():
    p, pd = jnp.array([1.0, 0.0, 0.0, 0.0]), jnp.array([0.5, 0.0, 0.0, 0.0])
    for J in (-1.0, 0.0):
        with pytest.raises(ValueError, match=rf"`J` must be > 0, got {J}"):
            jl.rigid.quaternion_norm_term(J, p, pd)
    assert float(jl.rigid.quaternion_norm_term(2.0, p, pd)) == 1.0


@pytest.mark.parametrize(
    "dtype, scale", [(jnp.float64, 1e200), (jnp.float64, 1e-200), (jnp.float32, 1e19)]
)
def test_quaternion_to_matrix_of_tiny_and_huge_quaternions(dtype, scale):
    # |p|² overflowed (or underflowed) to inf (0): R was NaN.
    unit = np.array([0.5, 0.5, -0.5, 0.5]) * np.array([1.0, 0.2, 0.3, 0.4])
    for s in (scale, 1 / scale):
        p = jnp.asarray(unit * s, dtype)
        expected = Rotation.from_quat(unit[[1, 2, 3, 0]]).as_matrix()
        tol = 1e-12 if dtype == jnp.float64 else 1e-6
        np.testing.assert_allclose(jl.rigid.quaternion_to_matrix(p), expected, atol=tol)
    # The derivative is that of R(p): R is scale-invariant, so dR(p)·p = 0.
    p = jnp.asarray(unit, jnp.float64)
    tangent = jax.jvp(jl.rigid.quaternion_to_matrix, (p,), (p,))[1]
    np.testing.assert_allclose(tangent, 0.0, atol=1e-14)
    jac = jax.jacfwd(jl.rigid.quaternion_to_matrix)(p)
    h = 1e-6
    fd = [
        (
            jl.rigid.quaternion_to_matrix(p.at[i].add(h))
            - jl.rigid.quaternion_to_matrix(p.at[i].add(-h))
        )
        / (2 * h)
        for i in range(4)
    ]
    np.testing.assert_allclose(jac, np.stack(fd, axis=-1), atol=1e-8)


@pytest.mark.parametrize(
    "make, params, match",
    [
        (jl.systems.free_rigid_body, {"I1": "a"}, r"'I1' .* number .* got str 'a'"),
        (jl.systems.heavy_top, {"l": np.inf}, r"'l' of system 'heavy_top' must be fin"),
        (jl.systems.pendulum, {"g": np.nan}, r"'g' of system 'pendulum' must be fin"),
    ],
)
def test_ready_system_params_are_named(make, params, match):
    with pytest.raises(ValueError, match=match):
        make(params)


def test_a_sigma_whose_inverse_square_overflows_is_named():
    ts = jnp.linspace(0.0, 1.0, 5)
    q = jnp.ones((5, 1))
    with pytest.raises(ValueError, match=r"`sigma_qd` = 1e-200 is so small that 1/"):
        jl.Observations(ts, q, q, sigma=0.01, sigma_qd=1e-200)
    with pytest.raises(ValueError, match=r"`sigma` = 1e-100 is so small"):
        jl.Observations(ts, q, sigma=1e-100)
    assert float(jl.Observations(ts, q, sigma=1e-60).sigma) == 1e-60


def test_failed_takes_what_result_name_takes():
    codes = np.array([0, int(jl.RESULTS.singular_mass_matrix._value)])
    np.testing.assert_array_equal(jl.failed(codes), [False, True])
    assert not bool(jl.failed(jl.RESULTS.successful))
    assert bool(jl.failed(jl.RESULTS.singular_mass_matrix))
    assert jl.failed(0).shape == ()
    for bad, match in [(None, "must be integers"), (99, "99 is not a `jl.RESULTS`")]:
        with pytest.raises(ValueError, match=match):
            jl.failed(bad)


def test_a_wrong_number_of_coordinates_is_named():
    # It was "too many values to unpack (expected 2)", naming no q0.
    system, _, _ = jl.systems.double_pendulum()
    with pytest.raises(
        ValueError,
        match=r"`lagrangian` failed for q of length 3 \(too many values to unpack "
        r"\(expected 2\)\): check that q0",
    ):
        jl.simulate(system, jnp.zeros(3), jnp.zeros(3), t1=1.0)
    # A pendulum reads q[0] only: data with two coordinates was a singular M.
    pendulum, _, _ = jl.systems.pendulum()
    ts = jnp.linspace(0.0, 1.0, 5)
    data = jl.Observations(ts, jnp.ones((5, 2)), jnp.zeros((5, 2)))
    with pytest.raises(
        ValueError, match=r"`data` has n = 2 .* \(L does not depend on q̇\[1\]\)"
    ):
        jl.fit(pendulum, data)
