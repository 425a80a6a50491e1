"""Rigid bodies in 3-D: rotations, angular velocity and kinetic energy.

The pieces a plain L(q, qd, t[, params]) of rigid bodies is written from
(docs/rigid_bodies.md). Rotation matrices map body to space, x_space = R x_body;
quaternions are scalar first, p = (w, x, y, z); angular velocities are in body
axes (ω̂ = RᵀṘ) or in space axes (ω̂ = ṘRᵀ).
"""

import functools
from collections.abc import Callable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ._custom_types import Array, ArrayLike, Float
from ._errors import known
from ._validate import check_callable


def matrix_angular_velocity(
    r: Float[ArrayLike, "3 3"], r_dot: Float[ArrayLike, "3 3"], *, frame: str = "body"
) -> Float[Array, " 3"]:
    """The angular velocity ω of a rotation matrix R moving at Ṙ.

    ω is read from the antisymmetric part of ω̂ = RᵀṘ (body) or ṘRᵀ (space). For
    a system that forms R and Ṙ itself, e.g. by one JVP for several bodies
    (`jl.systems.whipple_bicycle`); `angular_velocity` takes R(q, t) instead.

    **Arguments:**

    - `r`, `r_dot`: R (body to space) and Ṙ, shape (3, 3) each.
    - `frame`: `"body"` (components in body axes, the default) or `"space"`.

    **Returns:** ω, shape (3,).

    **Raises:** `ValueError` for a bad `frame` or an `r` that is not (3, 3).

    **Example:**

    ```python
    zxz = lambda q: jl.rigid.euler_to_matrix(q, "ZXZ")
    q, qd = jnp.array([0.1, 0.7, 0.2]), jnp.array([1.0, 0.0, 10.0])
    r, r_dot = jax.jvp(zxz, (q,), (qd,))
    jl.rigid.matrix_angular_velocity(r, r_dot)  # ω₃ = ψ̇ + φ̇ cos θ
    ```
    """
    _check_frame(frame)
    r, r_dot = jnp.asarray(r), jnp.asarray(r_dot)
    _check_shape("r", r.shape, (3, 3), "must be a (3, 3) matrix")
    w = r.T @ r_dot if frame == "body" else r_dot @ r.T
    return 0.5 * jnp.stack([w[2, 1] - w[1, 2], w[0, 2] - w[2, 0], w[1, 0] - w[0, 1]])


def quaternion_to_matrix(p: Float[ArrayLike, "*batch 4"]) -> Float[Array, "*batch 3 3"]:
    """The rotation matrix of a quaternion p = (w, x, y, z), scalar first.

    R = I + (2/|p|²)(w K + K²), with K the cross-product matrix of (x, y, z): the
    rotation by the angle 2 atan2(|(x, y, z)|, w) about (x, y, z). It maps body to
    space (x_space = R x_body). For a unit p this is the textbook matrix; for any
    other nonzero p, however tiny or huge, it is the rotation of p/|p| (as
    SciPy's `Rotation.from_quat` normalizes), exactly orthogonal, without a
    square root, so it is smooth wherever p ≠ 0 (p = 0 gives non-finite values). Since R does not depend on |p|,
    a kinetic energy written with it does not depend on the component of ṗ along
    p: see `quaternion_norm_term`.

    **Arguments:**

    - `p`: the quaternion, shape (4,), or a batch (..., 4).

    **Returns:** the rotation matrix, shape (3, 3) (or (..., 3, 3)).

    **Raises:** `ValueError` when `p` does not end with 4 components.

    **Example:**

    ```python
    half = jnp.sqrt(0.5)
    jl.rigid.quaternion_to_matrix(jnp.array([half, 0.0, 0.0, half]))  # R_z(90°)
    ```
    """
    p = jnp.asarray(p)
    if p.ndim == 0 or p.shape[-1] != 4:
        raise ValueError(
            f"`p` must be a quaternion (w, x, y, z) of shape (4,) (or (..., 4)), got "
            f"shape {p.shape}."
        )
    if not jnp.issubdtype(p.dtype, jnp.floating):
        p = p.astype(float)
    # R(p) = R(p/c) for any c > 0: scaled to max |p_i| = 1, |p|² neither
    # overflows nor underflows (p = 1e±200). c is a constant to autodiff, so
    # the derivatives are those of R(p) itself.
    p = p / jax.lax.stop_gradient(jnp.max(jnp.abs(p), axis=-1, keepdims=True))
    w, x, y, z = (p[..., i] for i in range(4))
    s = 2.0 / jnp.sum(p * p, axis=-1)
    rows = [
        [1 - s * (y * y + z * z), s * (x * y - w * z), s * (x * z + w * y)],
        [s * (x * y + w * z), 1 - s * (x * x + z * z), s * (y * z - w * x)],
        [s * (x * z - w * y), s * (y * z + w * x), 1 - s * (x * x + y * y)],
    ]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def _elementary(axis: int, angle: Array) -> Array:
    """The rotation by `angle` about coordinate axis 0, 1 or 2, shape (..., 3, 3)."""
    c, s = jnp.cos(angle), jnp.sin(angle)
    one, zero = jnp.ones_like(angle), jnp.zeros_like(angle)
    if axis == 0:
        rows = [[one, zero, zero], [zero, c, -s], [zero, s, c]]
    elif axis == 1:
        rows = [[c, zero, s], [zero, one, zero], [-s, zero, c]]
    else:
        rows = [[c, -s, zero], [s, c, zero], [zero, zero, one]]
    return jnp.stack([jnp.stack(row, axis=-1) for row in rows], axis=-2)


def euler_to_matrix(
    angles: Float[ArrayLike, "..."], seq: str
) -> Float[Array, "*batch 3 3"]:
    """The rotation matrix of Euler angles, as SciPy's `Rotation.from_euler`.

    An uppercase `seq` is intrinsic (rotations about the axes of the frame as it
    turns): `"ZXZ"` gives R = R_z(φ) R_x(θ) R_z(ψ), the classical precession,
    nutation and spin. A lowercase `seq` is extrinsic (about the fixed axes):
    `"xyz"` gives R = R_z(γ) R_y(β) R_x(α). Either way
    `euler_to_matrix(angles, seq)` equals
    `scipy.spatial.transform.Rotation.from_euler(seq, angles).as_matrix()`.

    **Arguments:**

    - `angles`: the angles in radians, shape (k,) for k = len(seq) axes (or a batch
        (..., k); a scalar for a single axis).
    - `seq`: 1 to 3 axes, e.g. `"ZXZ"`, `"XYZ"`, `"zyx"`, `"Z"`; consecutive axes
        differ.

    **Returns:** the rotation matrix (body to space), shape (3, 3) (or (..., 3, 3)).

    **Raises:** `ValueError` for a bad `seq`, or `angles` whose last axis is not
    len(seq).

    **Example:**

    ```python
    jl.rigid.euler_to_matrix(jnp.array([0.3, 0.5, 1.0]), "ZXZ")
    ```
    """
    if not (
        isinstance(seq, str)
        and 1 <= len(seq) <= 3
        and (set(seq) <= set("xyz") or set(seq) <= set("XYZ"))
        and all(a != b for a, b in zip(seq, seq[1:], strict=False))
    ):
        raise ValueError(
            "`seq` must be 1 to 3 axes from 'xyz' (extrinsic) or 'XYZ' (intrinsic), "
            f"all of one case, no axis twice in a row (e.g. 'ZXZ', 'xyz'), got {seq!r}."
        )
    axes = tuple("xyz".index(a.lower()) for a in seq)
    angles = jnp.asarray(angles)
    if not jnp.issubdtype(angles.dtype, jnp.floating):
        angles = angles.astype(float)
    if len(axes) == 1 and angles.ndim == 0:
        angles = angles[None]
    if angles.ndim == 0 or angles.shape[-1] != len(axes):
        raise ValueError(
            f"`angles` must end with {len(axes)} angle(s) for seq {seq!r}, got shape "
            f"{angles.shape}."
        )
    factors = [_elementary(a, angles[..., i]) for i, a in enumerate(axes)]
    return functools.reduce(jnp.matmul, factors if seq.isupper() else factors[::-1])


def _check_frame(frame: Any) -> None:
    if frame not in ("body", "space"):
        raise ValueError(f"`frame` must be 'body' or 'space', got {frame!r}.")


def _state(q: ArrayLike, qd: ArrayLike, t: ArrayLike) -> tuple[Array, Array, Array]:
    q, qd = jnp.asarray(q), jnp.asarray(qd)
    dtype = jnp.result_type(q.dtype, qd.dtype, float)
    q, qd = q.astype(dtype), qd.astype(dtype)
    if q.shape != qd.shape:
        raise ValueError(
            f"`q` and `qd` must have the same shape, got {q.shape} and {qd.shape}."
        )
    t = jnp.asarray(t, dtype)
    _check_shape("t", t.shape, (), "must be a scalar")
    return q, qd, t


def _motion(fn: Callable, q: Array, qd: Array, t: Array):
    """fn(q, t) and its total time derivative along (qd, 1), by one JVP."""
    return jax.jvp(fn, (q, t), (qd, jnp.ones_like(t)))


def _check_shape(name: str, shape: tuple[int, ...], expected, must: str) -> None:
    """The shape checks' one template: "`{name}` {must}, got shape {shape}."."""
    if tuple(shape) != expected:
        raise ValueError(f"`{name}` {must}, got shape {tuple(shape)}.")


def angular_velocity(
    rotation: Callable[[Array, Array], Array],
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    t: float | ArrayLike = 0.0,
    *,
    frame: str = "body",
) -> Float[Array, " 3"]:
    """The angular velocity ω of a rotation R(q, t), by one JVP.

    ω̂ = RᵀṘ in the body frame and ω̂ = ṘRᵀ in space (ω_space = R ω_body), where
    Ṙ = (∂R/∂q) q̇ + ∂R/∂t is the total time derivative: a rotation that depends
    on t explicitly (a driven axis) is handled. ω is read from the antisymmetric
    part of ω̂.

    **Arguments:**

    - `rotation`: `rotation(q, t) -> (3, 3)`, body to space, e.g.
        `lambda q, t: jl.rigid.euler_to_matrix(q, "ZXZ")`.
    - `q`, `qd`: coordinates and velocities, same shape.
    - `t`: the time.
    - `frame`: `"body"` (components in body axes, the default) or `"space"`.

    **Returns:** ω, shape (3,).

    **Raises:** `ValueError` for a bad `frame`, `q` and `qd` of different shapes, or
    a `rotation` that is not a function returning (3, 3).

    **Example:**

    ```python
    zxz = lambda q, t: jl.rigid.euler_to_matrix(q, "ZXZ")
    q, qd = jnp.array([0.1, 0.7, 0.2]), jnp.array([1.0, 0.0, 10.0])
    jl.rigid.angular_velocity(zxz, q, qd)  # ω₃ = ψ̇ + φ̇ cos θ
    ```
    """
    _check_frame(frame)
    q, qd, t = _state(q, qd, t)
    check_callable("rotation", rotation, "rotation(q, t) -> (3, 3)")
    r, r_dot = _motion(rotation, q, qd, t)
    _check_shape("rotation(q, t)", jnp.shape(r), (3, 3), "must return a (3, 3) matrix")
    return matrix_angular_velocity(r, r_dot, frame=frame)


def quaternion_angular_velocity(
    p: Float[ArrayLike, " 4"], pd: Float[ArrayLike, " 4"], *, frame: str = "body"
) -> Float[Array, " 3"]:
    """The angular velocity of `quaternion_to_matrix(p)` in closed form.

    For p = (w, v) moving at ṗ = (ẇ, v̇),

        ω = 2 (w v̇ − ẇ v − v × v̇) / |p|²  (body),   2 (w v̇ − ẇ v + v × v̇) / |p|²  (space):

    the vector part of 2 p̄ ⊗ ṗ / |p|² (of 2 ṗ ⊗ p̄ / |p|² in space), for any
    nonzero p, unit or not. It equals `angular_velocity(lambda p, t:
    quaternion_to_matrix(p), p, pd, frame=frame)` to rounding, without that
    function's JVP of R and product RᵀṘ: a quaternion Lagrangian written with it
    is smaller to differentiate, traces and compiles twice as fast and runs 5×
    faster (`jl.systems.free_rigid_body`).

    **Arguments:**

    - `p`, `pd`: the quaternion (w, x, y, z), scalar first, and its rate, shape (4,).
    - `frame`: `"body"` (components in body axes, the default) or `"space"`.

    **Returns:** ω, shape (3,).

    **Raises:** `ValueError` for a bad `frame`, or `p` or `pd` not of shape (4,).

    **Example:**

    ```python
    p = jnp.array([1.0, 0.0, 0.0, 0.0])  # the identity,
    pd = jnp.array([0.0, 0.0, 0.0, 0.5])  # turning about z
    jl.rigid.quaternion_angular_velocity(p, pd)  # [0., 0., 1.]
    ```
    """
    _check_frame(frame)
    p, pd = jnp.asarray(p), jnp.asarray(pd)
    _check_shape("p", p.shape, (4,), "must be a quaternion (w, x, y, z), shape (4,)")
    _check_shape("pd", pd.shape, (4,), "must be its rate, shape (4,)")
    dtype = jnp.result_type(p.dtype, pd.dtype, float)
    p, pd = p.astype(dtype), pd.astype(dtype)
    w, v, wd, vd = p[0], p[1:], pd[0], pd[1:]
    turn = jnp.cross(v, vd)
    vector = w * vd - wd * v + (turn if frame == "space" else -turn)
    return vector * (2.0 / (p @ p))  # one quotient: its derivatives are products


def _check_body(mass, inertia) -> None:
    """`kinetic_energy`'s checks of `mass` and `inertia` where their values are known."""
    m, i = known(mass), known(inertia)
    if m is not None and m.shape == () and not m >= 0:
        raise ValueError(f"`mass` must be >= 0, got {m}.")
    if i is None or i.shape not in ((3,), (3, 3)) or not np.isrealobj(i):
        return  # (a wrong shape is named by `kinetic_energy`)
    i = i.astype(float)
    tol = np.sqrt(np.finfo(float).eps) * np.max(np.abs(i))
    if i.ndim == 2 and not np.max(np.abs(i - i.T)) <= tol:
        raise ValueError(f"`inertia` must be a symmetric tensor, got {i.tolist()}.")
    moments = np.linalg.eigvalsh(i) if i.ndim == 2 else i
    if not np.all(moments >= -tol):
        what = "principal moments >= 0"
    elif 2 * np.max(moments) > np.sum(moments) + tol:
        what = "principal moments that satisfy the triangle inequality (each at most"
        what += " the sum of the other two)"
    else:
        return
    raise ValueError(f"`inertia` must have {what}, got {moments.tolist()}.")


def kinetic_energy(
    mass: float | ArrayLike,
    inertia: ArrayLike,
    position: Callable[[Array, Array], Array],
    rotation: Callable[[Array, Array], Array],
    q: Float[ArrayLike, " n"],
    qd: Float[ArrayLike, " n"],
    t: float | ArrayLike = 0.0,
) -> Float[Array, ""]:
    """The kinetic energy ½ m |ẋ|² + ½ ωᵀ I ω of a rigid body.

    ẋ and ω (in body axes) are total time derivatives from one JVP of
    (position, rotation) along (q̇, 1). About a fixed point, `position` may be the
    centre of mass seen from that point, with `inertia` about the centre of mass:
    the sum is then ½ ωᵀ I_point ω (parallel axes).

    **Arguments:**

    - `mass`: the mass m (a scalar).
    - `inertia`: the inertia tensor about the centre of mass in body axes, (3, 3),
        or its principal moments, (3,).
    - `position`: `position(q, t) -> (3,)`, the centre of mass in space.
    - `rotation`: `rotation(q, t) -> (3, 3)`, body to space.
    - `q`, `qd`, `t`: the state.

    **Returns:** the kinetic energy, a scalar.

    **Raises:** `ValueError` for an `inertia` that is not (3,) or (3, 3), a
    non-scalar `mass`, a `position` that does not return (3,), or as
    `angular_velocity`; and, where their values are known as L is traced
    (constants), for a negative `mass`, an `inertia` tensor that is not
    symmetric, negative principal moments or ones that break the triangle
    inequality.

    **Example:**

    ```python
    def lagrangian(q, qd, t):  # a free cube of side 1 and mass 6, centre q[:3]
        position = lambda q, t: q[:3]
        rotation = lambda q, t: jl.rigid.euler_to_matrix(q[3:], "XYZ")
        return jl.rigid.kinetic_energy(6.0, jnp.ones(3), position, rotation, q, qd)

    system = jl.LagrangianSystem(lagrangian)
    ```
    """
    q, qd, t = _state(q, qd, t)
    _check_body(mass, inertia)
    mass = jnp.asarray(mass, q.dtype)
    _check_shape("mass", mass.shape, (), "must be a scalar")
    inertia = jnp.asarray(inertia)
    if inertia.shape not in ((3,), (3, 3)):
        raise ValueError(
            "`inertia` must be the inertia tensor about the centre of mass in body "
            f"axes, shape (3, 3), or its principal moments, shape (3,), got shape "
            f"{inertia.shape}."
        )
    inertia = (jnp.diag(inertia) if inertia.ndim == 1 else inertia).astype(q.dtype)
    check_callable("position", position, "position(q, t) -> (3,)")
    check_callable("rotation", rotation, "rotation(q, t) -> (3, 3)")
    (x, r), (velocity, r_dot) = _motion(
        lambda q, t: (position(q, t), rotation(q, t)), q, qd, t
    )
    _check_shape("position(q, t)", jnp.shape(x), (3,), "must return shape (3,)")
    _check_shape("rotation(q, t)", jnp.shape(r), (3, 3), "must return a (3, 3) matrix")
    omega = matrix_angular_velocity(r, r_dot)
    return 0.5 * mass * velocity @ velocity + 0.5 * omega @ inertia @ omega


def unit_quaternion(indices: Sequence[int]) -> Callable[..., Array]:
    """The holonomic constraint |p|² − 1 = 0 of the quaternion p = q[indices].

    **Arguments:**

    - `indices`: the 4 positions of (w, x, y, z) in q, e.g. `[0, 1, 2, 3]` or
        `range(3, 7)`.

    **Returns:** a constraint function `g(q, t)` (also callable as
    `g(q, t, params)`, for a system with params) returning shape (1,). Combine
    several bodies' constraints with `jnp.concatenate`.

    **Raises:** `ValueError` for `indices` that are not 4 distinct non-negative
    ints, or (when g is called) that do not fit in q.

    **Example:**

    ```python
    g = jl.rigid.unit_quaternion([0, 1, 2, 3])
    g(jnp.array([1.0, 0.0, 0.0, 0.0]), 0.0)  # [0.]
    ```
    """
    try:
        values = np.asarray(indices)
    except Exception:  # noqa: BLE001 - anything that is not a sequence of ints
        values = None
    if (
        values is None
        or values.shape != (4,)
        or not np.issubdtype(values.dtype, np.integer)
        or len(set(values.tolist())) != 4
        or np.any(values < 0)
    ):
        raise ValueError(
            "`indices` must be 4 distinct non-negative ints, the positions of "
            f"(w, x, y, z) in q, got {indices!r}."
        )
    index = tuple(int(i) for i in values)

    def unit(q, t, params=None):
        q = jnp.asarray(q)
        if q.ndim != 1 or max(index) >= q.shape[0]:
            raise ValueError(
                f"The unit-quaternion constraint on q[{list(index)}] needs q of shape "
                f"(n,) with n > {max(index)}, got shape {q.shape}."
            )
        p = q[jnp.array(index)]
        return jnp.stack([p @ p - 1])

    return unit


def quaternion_norm_term(
    J: float | ArrayLike, p: Float[ArrayLike, " 4"], pd: Float[ArrayLike, " 4"]
) -> Float[Array, ""]:
    """½ J (2 p·ṗ)²: add it to a Lagrangian in quaternion coordinates.

    With R = `quaternion_to_matrix(p)`, ½ ωᵀ I ω does not depend on the component
    of ṗ along p, so the mass matrix ∂²L/∂ṗ² is singular along p (rank 3 of 4) and
    `simulate` refuses it. This term gives that direction the inertia J: in body
    axes ω = 2 (p̄ ⊗ ṗ)_vector for a unit p, and 2 p·ṗ = 2 (p̄ ⊗ ṗ)_scalar is the
    "fourth component" this term weighs. It vanishes with its gradient on the
    constraint's tangent space (p·ṗ = 0 while |p| = 1), so it changes neither the
    energy nor the motion of the constrained body, only the constraint multiplier.
    For a unit p the mass matrix becomes 4 (Gᵀ I G + J p pᵀ), with eigenvalues
    4 I₁, 4 I₂, 4 I₃ and 4 J: take J of the size of the principal moments (their
    mean, say) for a well-conditioned M.

    **Arguments:**

    - `J`: the inertia given to the norm direction, a positive scalar.
    - `p`, `pd`: the quaternion and its rate, shape (4,).

    **Returns:** ½ J (2 p·ṗ)², a scalar.

    **Raises:** `ValueError` when `p` or `pd` is not of shape (4,), or `J` is not a
    scalar, or (where its value is known as L is traced) not > 0.

    **Example:**

    ```python
    I = jnp.array([1.0, 2.0, 3.0])

    def lagrangian(p, pd, t):
        rotation = lambda p, t: jl.rigid.quaternion_to_matrix(p)
        kinetic = jl.rigid.kinetic_energy(
            1.0, I, lambda p, t: jnp.zeros(3), rotation, p, pd
        )
        return kinetic + jl.rigid.quaternion_norm_term(jnp.mean(I), p, pd)

    body = jl.LagrangianSystem(lagrangian, holonomic=jl.rigid.unit_quaternion(range(4)))
    ```
    """
    p, pd = jnp.asarray(p), jnp.asarray(pd)
    for name, x in (("p", p), ("pd", pd)):
        _check_shape(name, x.shape, (4,), "must have shape (4,)")
    value = known(J)
    if value is not None and value.shape == () and not value > 0:
        raise ValueError(f"`J` must be > 0, got {value}.")
    J = jnp.asarray(J)
    _check_shape("J", J.shape, (), "must be a scalar")
    rate = 2.0 * (p @ pd)
    return 0.5 * J * rate * rate
