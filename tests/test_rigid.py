"""Rigid bodies in 3-D (issue 31): `jl.rigid` against SciPy and the textbook
closed forms. The ready systems are in `test_rigid_systems.py`."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import jaxlagrange as jl


def _rz(angle):
    c, s = jnp.cos(angle), jnp.sin(angle)
    return jnp.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _zxz(q, t):
    return jl.rigid.euler_to_matrix(q, "ZXZ")


def _quaternion(p, t):
    return jl.rigid.quaternion_to_matrix(p)


# Rotations against SciPy.


@pytest.mark.parametrize(
    "seq", ["ZXZ", "XYZ", "ZYX", "YZY", "zxz", "xyz", "zyx", "xzy", "ZY", "x", "Y"]
)
def test_euler_to_matrix_matches_scipy(seq):
    rng = np.random.default_rng(0)
    angles = rng.uniform(-np.pi, np.pi, (5, len(seq)))
    expected = Rotation.from_euler(seq, angles).as_matrix()
    np.testing.assert_allclose(
        jl.rigid.euler_to_matrix(angles, seq), expected, atol=1e-15
    )
    one = jl.rigid.euler_to_matrix(angles[0], seq)
    np.testing.assert_allclose(one, expected[0], atol=1e-15)


def test_euler_to_matrix_intrinsic_and_extrinsic_products():
    a, b, c = 0.3, -1.2, 2.0
    rx = jl.rigid.euler_to_matrix(a, "X")
    ry = jl.rigid.euler_to_matrix(b, "Y")
    rz = jl.rigid.euler_to_matrix(c, "Z")
    angles = jnp.array([a, b, c])
    np.testing.assert_allclose(
        jl.rigid.euler_to_matrix(angles, "XYZ"), rx @ ry @ rz, atol=1e-15
    )
    np.testing.assert_allclose(
        jl.rigid.euler_to_matrix(angles, "xyz"), rz @ ry @ rx, atol=1e-15
    )
    np.testing.assert_allclose(rz, _rz(c), atol=1e-16)


def test_quaternion_to_matrix_matches_scipy():
    rng = np.random.default_rng(1)
    p = rng.normal(size=(6, 4))
    expected = Rotation.from_quat(p, scalar_first=True).as_matrix()
    # Unit quaternions, and any other nonzero one (the rotation of p/|p|, as SciPy).
    unit = p / np.linalg.norm(p, axis=1, keepdims=True)
    np.testing.assert_allclose(
        jl.rigid.quaternion_to_matrix(unit), expected, atol=1e-15
    )
    np.testing.assert_allclose(
        jl.rigid.quaternion_to_matrix(3.0 * p), expected, atol=1e-15
    )
    r = jl.rigid.quaternion_to_matrix(p[0])
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-15)
    np.testing.assert_allclose(np.linalg.det(r), 1.0, rtol=1e-15)


def test_rotations_differentiable_at_identity():
    # No NaN at the identity (no square root of |v|), and the known derivative:
    # d/dε R(1, ε e₃) at ε = 0 is 2 ê₃.
    p = jnp.array([1.0, 0.0, 0.0, 0.0])
    d = jax.jacfwd(jl.rigid.quaternion_to_matrix)(p)
    assert np.all(np.isfinite(d))
    hat_z = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    np.testing.assert_allclose(d[..., 3], 2 * hat_z, atol=1e-15)
    np.testing.assert_allclose(d[..., 0], 0.0, atol=1e-15)  # |p| does not matter
    g = jax.grad(lambda a: jl.rigid.euler_to_matrix(a, "ZXZ")[0, 1])(jnp.zeros(3))
    np.testing.assert_allclose(g, [-1.0, 0.0, -1.0], atol=1e-15)


# Angular velocity.


def test_angular_velocity_of_a_rotation_about_z():
    rotation = lambda q, t: _rz(q[0])  # noqa: E731
    q, qd = jnp.array([0.7]), jnp.array([2.5])
    for frame in ("body", "space"):
        omega = jl.rigid.angular_velocity(rotation, q, qd, frame=frame)
        np.testing.assert_allclose(omega, [0.0, 0.0, 2.5], atol=1e-15)


def test_angular_velocity_includes_the_explicit_time_derivative():
    # R = R_z(φ(t)) with φ = q + 3 t: ω₃ = q̇ + 3 (the ∂R/∂t term).
    rotation = lambda q, t: _rz(q[0] + 3.0 * t)  # noqa: E731
    omega = jl.rigid.angular_velocity(rotation, jnp.array([0.2]), jnp.array([0.5]), 1.3)
    np.testing.assert_allclose(omega, [0.0, 0.0, 3.5], atol=1e-15)
    still = jl.rigid.angular_velocity(rotation, jnp.array([0.2]), jnp.array([0.0]), 0.4)
    np.testing.assert_allclose(still, [0.0, 0.0, 3.0], atol=1e-15)


def test_angular_velocity_of_zxz_euler_angles_textbook():
    # Goldstein (4.87): body components of ω in the ZXZ (x-convention) angles.
    rng = np.random.default_rng(2)
    for _ in range(3):
        (phi, theta, psi), (dphi, dtheta, dpsi) = rng.normal(size=(2, 3))
        q, qd = jnp.array([phi, theta, psi]), jnp.array([dphi, dtheta, dpsi])
        body = [
            dphi * np.sin(theta) * np.sin(psi) + dtheta * np.cos(psi),
            dphi * np.sin(theta) * np.cos(psi) - dtheta * np.sin(psi),
            dphi * np.cos(theta) + dpsi,
        ]
        space = [
            dtheta * np.cos(phi) + dpsi * np.sin(theta) * np.sin(phi),
            dtheta * np.sin(phi) - dpsi * np.sin(theta) * np.cos(phi),
            dpsi * np.cos(theta) + dphi,
        ]
        np.testing.assert_allclose(
            jl.rigid.angular_velocity(_zxz, q, qd), body, atol=1e-14
        )
        np.testing.assert_allclose(
            jl.rigid.angular_velocity(_zxz, q, qd, frame="space"), space, atol=1e-14
        )
        # The same from R and Ṙ formed by the caller (one JVP for several bodies).
        r, r_dot = jax.jvp(lambda q: _zxz(q, 0.0), (q,), (qd,))
        np.testing.assert_allclose(
            jl.rigid.matrix_angular_velocity(r, r_dot), body, atol=1e-14
        )
        np.testing.assert_allclose(
            jl.rigid.matrix_angular_velocity(r, r_dot, frame="space"),
            space,
            atol=1e-14,
        )


def test_matrix_angular_velocity_errors():
    r = jnp.eye(3)
    with pytest.raises(ValueError, match=r"`frame` must be 'body' or 'space', got 'z'"):
        jl.rigid.matrix_angular_velocity(r, r, frame="z")
    with pytest.raises(
        ValueError, match=r"`r` must be a \(3, 3\) matrix, got shape \(2, 2\)"
    ):
        jl.rigid.matrix_angular_velocity(r[:2, :2], r[:2, :2])


def test_angular_velocity_of_a_quaternion():
    # ω_body = 2 (p̄ ⊗ ṗ)_vector for a unit p; ṗ ∥ p adds nothing.
    p = jnp.array([0.5, 0.5, -0.5, 0.5])
    omega = jnp.array([0.3, -1.0, 2.0])
    w, v = p[0], p[1:]
    pd = 0.5 * jnp.concatenate([-(v @ omega)[None], w * omega + jnp.cross(v, omega)])
    got = jl.rigid.angular_velocity(_quaternion, p, pd)
    np.testing.assert_allclose(got, omega, atol=1e-15)
    got = jl.rigid.angular_velocity(_quaternion, p, pd + 0.7 * p)
    np.testing.assert_allclose(got, omega, atol=1e-15)


@pytest.mark.parametrize("frame", ["body", "space"])
def test_quaternion_angular_velocity_is_that_of_the_rotation(frame):
    # The closed form against the JVP of R, for unit and non-unit p, with a rate
    # along p too; under jit and vmap as well.
    rng = np.random.default_rng(5)
    ps = jnp.asarray(rng.normal(size=(6, 4)) * np.array([[1.0], [0.2], [3.0]] * 2))
    pds = jnp.asarray(rng.normal(size=(6, 4)))
    ps = ps.at[0].set(ps[0] / jnp.linalg.norm(ps[0]))
    for p, pd in zip(ps, pds, strict=True):
        expected = jl.rigid.angular_velocity(_quaternion, p, pd, frame=frame)
        got = jl.rigid.quaternion_angular_velocity(p, pd, frame=frame)
        scale = float(jnp.linalg.norm(pd) / jnp.linalg.norm(p))
        np.testing.assert_allclose(got, expected, atol=1e-14 * scale, rtol=0)
    fn = lambda p, pd: jl.rigid.quaternion_angular_velocity(p, pd, frame=frame)  # noqa: E731
    loop = np.stack([fn(p, pd) for p, pd in zip(ps, pds, strict=True)])
    np.testing.assert_allclose(jax.jit(jax.vmap(fn))(ps, pds), loop, atol=1e-15)


def test_quaternion_angular_velocity_errors():
    p = jnp.array([1.0, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match=r"`frame` must be 'body' or 'space', got 'z'"):
        jl.rigid.quaternion_angular_velocity(p, p, frame="z")
    with pytest.raises(ValueError, match=r"`p` must be a quaternion.*got shape \(3,\)"):
        jl.rigid.quaternion_angular_velocity(p[:3], p)
    with pytest.raises(ValueError, match=r"`pd` must be its rate.*got shape \(1, 4\)"):
        jl.rigid.quaternion_angular_velocity(p, p[None])


def test_angular_velocity_jit_and_vmap_agree():
    rng = np.random.default_rng(3)
    qs, qds = jnp.asarray(rng.normal(size=(2, 4, 3)))
    loop = np.stack(
        [jl.rigid.angular_velocity(_zxz, q, qd) for q, qd in zip(qs, qds, strict=True)]
    )
    batched = jax.jit(jax.vmap(lambda q, qd: jl.rigid.angular_velocity(_zxz, q, qd)))
    np.testing.assert_allclose(batched(qs, qds), loop, atol=1e-15)


# Kinetic energy.


def _top_kinetic(q, qd, i1, i3):
    (_, theta, _), (dphi, dtheta, dpsi) = q, qd
    omega3 = dpsi + dphi * jnp.cos(theta)
    return 0.5 * i1 * (dtheta**2 + dphi**2 * jnp.sin(theta) ** 2) + 0.5 * i3 * omega3**2


def test_kinetic_energy_of_a_top_about_its_tip():
    # Centre of mass l up the axis with moments about it (I₁ − m l², I₃): the
    # total is the textbook ½ I₁(θ̇² + φ̇² sin²θ) + ½ I₃ ω₃² about the tip.
    m, length, i1, i3 = 1.5, 0.4, 0.5, 0.3
    centre = lambda q, t: length * _zxz(q, t)[:, 2]  # noqa: E731
    q, qd = jnp.array([0.3, 0.8, -1.0]), jnp.array([1.1, -0.4, 9.0])
    moments = jnp.array([i1 - m * length**2, i1 - m * length**2, i3])
    got = jl.rigid.kinetic_energy(m, moments, centre, _zxz, q, qd)
    np.testing.assert_allclose(got, _top_kinetic(q, qd, i1, i3), rtol=1e-14)
    tensor = jl.rigid.kinetic_energy(m, jnp.diag(moments), centre, _zxz, q, qd)
    np.testing.assert_allclose(tensor, got, rtol=1e-15)


def test_kinetic_energy_translation_and_a_moving_frame():
    # A body carried along x at speed 2 by an explicit t, turning about z at
    # ω = q̇ + 3 with a full inertia tensor: ½ m 4 + ½ I₃₃ ω².
    inertia = jnp.array([[2.0, 0.1, 0.2], [0.1, 3.0, 0.3], [0.2, 0.3, 4.0]])
    position = lambda q, t: jnp.array([2.0 * t, 0.0, q[0]])  # noqa: E731
    rotation = lambda q, t: _rz(q[0] + 3.0 * t)  # noqa: E731
    got = jl.rigid.kinetic_energy(5.0, inertia, position, rotation, jnp.array([0.1]),
                                  jnp.array([0.5]), 0.7)  # fmt: skip
    np.testing.assert_allclose(
        got, 0.5 * 5.0 * (4.0 + 0.25) + 0.5 * 4.0 * 3.5**2, rtol=1e-15
    )


# Constraint and the regular mass matrix of quaternion coordinates.


def test_unit_quaternion_constraint_with_and_without_params():
    g = jl.rigid.unit_quaternion(range(2, 6))
    q = jnp.array([9.0, 9.0, 0.0, 0.6, 0.0, 0.8, 9.0])
    np.testing.assert_allclose(g(q, 0.0), [0.0], atol=1e-15)
    np.testing.assert_allclose(g(2 * q, 0.0, {"any": 1.0}), [3.0], atol=1e-15)
    assert g(q, 0.0).shape == (1,)
    mask = np.isin(np.arange(7), [2, 3, 4, 5])
    np.testing.assert_allclose(jax.jacfwd(g)(q, 0.0), [2 * q * mask], atol=1e-15)


def test_quaternion_mass_matrix_singular_without_the_norm_term():
    inertia = jnp.array([1.0, 2.0, 3.0])

    def bare(p, pd, t):
        return jl.rigid.kinetic_energy(0.0, inertia, lambda p, t: jnp.zeros(3),
                                       _quaternion, p, pd, t)  # fmt: skip

    def regular(p, pd, t):
        return bare(p, pd, t) + jl.rigid.quaternion_norm_term(2.5, p, pd)

    p = jnp.array([0.5, 0.5, -0.5, 0.5])
    m_bare = jl.mass_matrix(jl.LagrangianSystem(bare), p, jnp.zeros(4), 0.0)
    np.testing.assert_allclose(m_bare @ p, 0.0, atol=1e-14)  # singular along p
    m = jl.mass_matrix(jl.LagrangianSystem(regular), p, jnp.zeros(4), 0.0)
    # 4 (Gᵀ I G + J p pᵀ): eigenvalues 4 I₁, 4 I₂, 4 I₃ and 4 J.
    np.testing.assert_allclose(
        np.linalg.eigvalsh(m), [4.0, 8.0, 10.0, 12.0], rtol=1e-14
    )
    # The term vanishes with its gradient where p·ṗ = 0.
    pd = jnp.array([0.1, -0.2, 0.3, 0.4])
    pd = pd - (pd @ p) * p
    np.testing.assert_allclose(
        jl.rigid.quaternion_norm_term(2.5, p, pd), 0.0, atol=1e-30
    )
    grads = jax.grad(jl.rigid.quaternion_norm_term, argnums=(1, 2))(2.5, p, pd)
    np.testing.assert_allclose(np.concatenate(grads), 0.0, atol=1e-15)


# Errors name the bad input.


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_errors_name_the_bad_input():
    with pytest.raises(ValueError, match=r"`seq` must be 1 to 3 axes.*'ZZX'"):
        jl.rigid.euler_to_matrix(jnp.zeros(3), "ZZX")
    with pytest.raises(ValueError, match=r"`seq`.*'Xyz'"):
        jl.rigid.euler_to_matrix(jnp.zeros(3), "Xyz")
    with pytest.raises(ValueError, match=r"`seq`.*'ABC'"):
        jl.rigid.euler_to_matrix(jnp.zeros(3), "ABC")
    with pytest.raises(
        ValueError,
        match=r"`angles` must end with 3 angle\(s\) for seq 'ZXZ', got shape \(2,\)",
    ):
        jl.rigid.euler_to_matrix(jnp.zeros(2), "ZXZ")
    with pytest.raises(ValueError, match=r"`p` must be a quaternion.*got shape \(3,\)"):
        jl.rigid.quaternion_to_matrix(jnp.zeros(3))
    with pytest.raises(
        ValueError, match=r"`frame` must be 'body' or 'space', got 'world'"
    ):
        jl.rigid.angular_velocity(_zxz, jnp.zeros(3), jnp.zeros(3), frame="world")
    with pytest.raises(ValueError, match=r"`q` and `qd` must have the same shape"):
        jl.rigid.angular_velocity(_zxz, jnp.zeros(3), jnp.zeros(2))
    with pytest.raises(
        ValueError,
        match=r"`rotation\(q, t\)` must return a \(3, 3\) matrix, got shape \(3,\)",
    ):
        jl.rigid.angular_velocity(lambda q, t: q, jnp.zeros(3), jnp.zeros(3))
    with pytest.raises(ValueError, match=r"`rotation` must be a function"):
        jl.rigid.angular_velocity(np.eye(3), jnp.zeros(3), jnp.zeros(3))
    centre = lambda q, t: jnp.zeros(3)  # noqa: E731
    with pytest.raises(ValueError, match=r"`inertia` must be .* got shape \(2,\)"):
        jl.rigid.kinetic_energy(
            1.0, jnp.ones(2), centre, _zxz, jnp.zeros(3), jnp.zeros(3)
        )
    with pytest.raises(ValueError, match=r"`mass` must be a scalar, got shape \(2,\)"):
        jl.rigid.kinetic_energy(jnp.ones(2), jnp.ones(3), centre, _zxz, jnp.zeros(3),
                                jnp.zeros(3))  # fmt: skip
    with pytest.raises(
        ValueError,
        match=r"`position\(q, t\)` must return shape \(3,\), got shape \(2,\)",
    ):
        jl.rigid.kinetic_energy(1.0, jnp.ones(3), lambda q, t: q[:2], _zxz, jnp.zeros(3),
                                jnp.zeros(3))  # fmt: skip
    with pytest.raises(
        ValueError, match=r"`indices` must be 4 distinct non-negative ints"
    ):
        jl.rigid.unit_quaternion([0, 1, 2])
    with pytest.raises(ValueError, match=r"`indices` must be 4 distinct"):
        jl.rigid.unit_quaternion([0, 1, 1, 2])
    with pytest.raises(
        ValueError, match=r"unit-quaternion constraint on q\[\[3, 4, 5, 6\]\] needs q"
    ):
        jl.rigid.unit_quaternion(range(3, 7))(jnp.zeros(5), 0.0)
    with pytest.raises(
        ValueError, match=r"`pd` must have shape \(4,\), got shape \(3,\)"
    ):
        jl.rigid.quaternion_norm_term(1.0, jnp.ones(4), jnp.ones(3))
    with pytest.raises(ValueError, match=r"`J` must be a scalar"):
        jl.rigid.quaternion_norm_term(jnp.ones(2), jnp.ones(4), jnp.ones(4))
    with pytest.raises(
        ValueError, match=r"Parameter 'I3' of system 'heavy_top' must be positive"
    ):
        jl.systems.heavy_top({"I3": -1.0})
