"""`load`: the Lagrangian of a MuJoCo model's kinematic tree, as a ready system.

MuJoCo's `mj_kinematics` is followed body by body: a body's frame is its
parent's moved by `body_pos`/`body_quat`, then by each joint (a hinge turns by
qpos − qpos0 about its axis through its anchor, a slide moves by qpos − qpos0
along its axis, a ball turns by its quaternion, a free joint places the body in
the world). One JVP of all the inertial frames along q̇ gives every body's
velocity and Ṙ, from which `jl.rigid` forms ½ m |ẋ|² + ½ ωᵀ I ω.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import rigid
from .._custom_types import Array
from .._system import LagrangianSystem
from ..systems._registry import ReadySystem, merge_params
from . import _model
from ._model import BALL, FREE, HINGE, SLIDE, Tree


def _omega(p: Array, pd: Array) -> Array:
    """ω = 2 Im(p̄ ⊗ ṗ)/|p|², in the body frame (batched over leading axes)."""
    w, v, wd, vd = p[..., :1], p[..., 1:], pd[..., :1], pd[..., 1:]
    return 2 * (w * vd - wd * v - jnp.cross(v, vd)) / jnp.sum(p * p, -1, keepdims=True)


def _rate(p: Array, omega: Array) -> Array:
    """ṗ = ½ p ⊗ (0, ω), the inverse of `_omega` for any p."""
    w, v = p[..., :1], p[..., 1:]
    scalar = -jnp.sum(v * omega, -1, keepdims=True)
    return 0.5 * jnp.concatenate([scalar, w * omega + jnp.cross(v, omega)], -1)


def _turn(axis: np.ndarray, angle: Array) -> Array:
    """The rotation by `angle` about a unit `axis` (an elementary one when the
    axis is a coordinate axis: fewer operations in the compiled q̈)."""
    k = np.flatnonzero(axis)
    if k.size == 1:
        return rigid._elementary(int(k[0]), angle * np.sign(axis[k[0]]))
    K = np.cross(np.eye(3), axis)  # the cross-product matrix of axis
    return jnp.eye(3) + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * (K @ K)


def _frames(tree: Tree, q: Array) -> tuple[Array, Array]:
    """The bodies' frames (xpos, xmat) at q, shapes (nbody, 3), (nbody, 3, 3)."""
    pos, rot = [jnp.zeros(3, q.dtype)], [jnp.eye(3, dtype=q.dtype)]
    for body in tree.bodies:
        joints = body.joints
        if joints and joints[0].kind == FREE:  # placed in the world by qpos
            a = joints[0].q
            x, r = q[a : a + 3], rigid.quaternion_to_matrix(q[a + 3 : a + 7])
        else:
            x, r = pos[body.parent], rot[body.parent]
            if np.any(body.pos):
                x = x + r @ body.pos
            if not np.array_equal(body.rot, np.eye(3)):
                r = r @ body.rot
            for j in joints:
                if j.kind == SLIDE:
                    x = x + (r @ j.axis) * (q[j.q] - j.qpos0)
                    continue
                anchor = x + r @ j.pos
                if j.kind == HINGE:
                    r = r @ _turn(j.axis, q[j.q] - j.qpos0)
                else:
                    r = r @ rigid.quaternion_to_matrix(q[j.q : j.q + 4])
                x = anchor - r @ j.pos
        pos.append(x)
        rot.append(r)
    return jnp.stack(pos), jnp.stack(rot)


def _layout(tree: Tree) -> tuple[tuple[int, int, int], ...]:
    """(kind, qpos address, qvel address) of each joint, in MuJoCo's order."""
    return tuple((j.kind, j.q, j.v) for b in tree.bodies for j in b.joints)


def _quaternions(layout) -> list[int]:
    """The qpos address of each ball and free joint's quaternion."""
    return [a + 3 * (kind == FREE) for kind, a, _ in layout if kind in (BALL, FREE)]


def _dof_velocity(layout, q: Array, qd: Array) -> Array:
    """MuJoCo's qvel from q̇, ω in the child frame for quaternions (..., nv)."""
    parts = []
    for kind, a, _ in layout:
        if kind == FREE:
            parts.append(qd[..., a : a + 3])
            a += 3
        if kind in (BALL, FREE):
            parts.append(_omega(q[..., a : a + 4], qd[..., a : a + 4]))
        else:
            parts.append(qd[..., a : a + 1])
    return jnp.concatenate(parts, -1)


def _rates(layout, qpos: Array, qvel: Array) -> Array:
    """q̇ from MuJoCo's qvel: ṗ = ½ p ⊗ (0, ω) for quaternions (..., nq)."""
    parts = []
    for kind, a, v in layout:
        if kind == FREE:
            parts.append(qvel[..., v : v + 3])
            a, v = a + 3, v + 3
        if kind in (BALL, FREE):
            parts.append(_rate(qpos[..., a : a + 4], qvel[..., v : v + 3]))
        else:
            parts.append(qvel[..., v : v + 1])
    return jnp.concatenate(parts, -1)


def _functions(tree: Tree, irot: np.ndarray):
    """The Lagrangian, dissipation, force and points of the model."""
    layout = _layout(tree)
    quaternions = _quaternions(layout)
    sprung = [(j.id, j.q) for b in tree.bodies for j in b.joints if j.kind in (HINGE, SLIDE)]
    sprung_ids, sprung_q = np.array([i for i, _ in sprung], int), np.array([a for _, a in sprung], int)

    def centres(q, params):
        x, r = _frames(tree, q)
        ipos = params["body_ipos"][1:]
        return x[1:] + jnp.einsum("bij,bj->bi", r[1:], ipos), r[1:]

    def lagrangian(q, qd, t, params):
        (x, r), (v, r_dot) = jax.jvp(lambda q: centres(q, params), (q,), (qd,))
        # The inertia about the centre of mass in the body frame, Rᵢ diag(I) Rᵢᵀ.
        inertia = jnp.einsum("bij,bj,bkj->bik", irot, params["body_inertia"][1:], irot)
        mass = params["body_mass"][1:]
        kinetic = jnp.sum(
            jax.vmap(rigid._body_kinetic_energy)(mass, inertia, v, r, r_dot)
        )
        dof_v = _dof_velocity(layout, q, qd)
        kinetic += 0.5 * jnp.sum(params["dof_armature"] * dof_v**2)
        for J, a in zip(tree.norm_inertia, quaternions, strict=True):
            kinetic += rigid.quaternion_norm_term(J, q[a : a + 4], qd[a : a + 4])
        potential = 0.0
        if tree.gravity:
            potential -= jnp.sum(mass * (x @ params["gravity"]))
        if tree.spring and sprung:
            stretch = q[sprung_q] - tree.qpos_spring[sprung_q]
            potential += 0.5 * jnp.sum(params["jnt_stiffness"][sprung_ids] * stretch**2)
        return kinetic - potential

    def dissipation(q, qd, t, params):
        return 0.5 * jnp.sum(params["dof_damping"] * _dof_velocity(layout, q, qd) ** 2)

    actuators = np.array([a for a, _, _ in tree.motors], int)
    addresses = np.array([q for _, q, _ in tree.motors], int)
    gains = np.array([g for _, _, g in tree.motors])

    def force(q, qd, t, params):
        torque = gains * params["ctrl"][actuators]
        return jnp.zeros_like(q).at[addresses].add(torque)

    def holonomic(q, t, params):
        return jnp.concatenate([rigid.unit_quaternion(range(a, a + 4))(q, t) for a in quaternions])

    def points(q, t, params):
        return centres(q, params)[0]

    return (
        lagrangian,
        dissipation if tree.damper else None,
        force if tree.motors else None,
        holonomic if quaternions else None,
        points,
    )


class MujocoSystem(ReadySystem):
    """A ready system loaded from a MuJoCo model, with its state conversions."""

    layout: tuple[tuple[int, int, int], ...] = eqx.field(static=True, default=())

    def to_mujoco(self, q: Any, qd: Any) -> tuple[Array, Array]:
        """MuJoCo's `(qpos, qvel)` of a state `(q, qd)` (or a batch (..., nq)):
        qpos = q, and ω = 2 Im(p̄ ⊗ ṗ) in the child frame for ball and free joints."""
        q, qd = jnp.asarray(q), jnp.asarray(qd)
        return q, _dof_velocity(self.layout, q, qd)

    def from_mujoco(self, qpos: Any, qvel: Any) -> tuple[Array, Array]:
        """The state `(q, qd)` of MuJoCo's `(qpos, qvel)` (or a batch): q = qpos,
        and ṗ = ½ p ⊗ (0, ω) for ball and free joints."""
        qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
        return qpos, _rates(self.layout, qpos, qvel)


def _check_armature(m, armature: Any) -> None:
    """One armature for the three angular dofs of each ball and free joint."""
    if isinstance(armature, jax.core.Tracer):
        return
    armature = np.asarray(armature)
    for j in range(m.njnt):
        if m.jnt_type[j] in (BALL, FREE):
            v = m.jnt_dofadr[j] + 3 * (m.jnt_type[j] == FREE)
            angular = armature[v : v + 3]
            if np.ptp(angular) > 0:
                raise ValueError(
                    f"`dof_armature` of the angular dofs {v}..{v + 2} of joint "
                    f"{_model._name(m, 'JOINT', j)!r} must be one value (MuJoCo adds "
                    f"it without gyroscopic terms), got {angular.tolist()}."
                )


def load(source: Any, *, params: dict[str, Any] | None = None) -> MujocoSystem:
    """A MuJoCo model as a ready system: exact, differentiable equations of motion.

    L = T − V is built from the model's kinematic tree: the bodies' masses and
    principal inertias in their inertial frames, joint armature (½ a v² in each
    dof's velocity), gravity and joint springs (½ k (q − qpos_spring)² on hinges
    and slides); joint damping is a Rayleigh dissipation ½ d v², and motors apply
    gear·ctrl to their joint. Disable flags of the model (gravity, spring, damper,
    actuation) remove those terms and their params. Contacts, joint limits,
    tendons, equality constraints, fluid forces and other actuators are not
    imported: one warning names those the model has.

    The coordinates are MuJoCo's qpos (hinge and slide 1, ball 4 = quaternion
    (w, x, y, z), free 7 = position then quaternion), and q̇ = dq/dt: a
    quaternion's rate ṗ, kept on |p| = 1 by `jl.rigid.unit_quaternion`.
    `to_mujoco` and `from_mujoco` convert states to and from MuJoCo's
    (qpos, qvel), whose ball and free angular velocity is in the child frame.

    **Arguments:**

    - `source`: a path to an MJCF or URDF file, an MJCF string, or a
        `mujoco.MjModel` (read as it is: after editing its fields call
        `mujoco.mj_setConst`).
    - `params`: overrides of the params, named after the MjModel fields:
        `body_mass` (nbody,), `body_inertia` (nbody, 3), `body_ipos` (nbody, 3),
        `dof_armature` (nv,), `dof_damping` (nv,), `jnt_stiffness` (njnt,),
        `gravity` (3,) and `ctrl` (nu,) (zeros by default; absent with no
        actuators).

    **Returns:** a `MujocoSystem`, a `ReadySystem` that unpacks as
    `system, q0, qd0` (qpos0 at rest), with `positions(q)` the bodies' centres
    of mass and `to_mujoco`/`from_mujoco`.

    **Raises:** `ValueError` for a missing file, a model MuJoCo rejects, an
    unknown param or one of the wrong shape, or unequal armature on the angular
    dofs of a ball or free joint.

    **Example:**

    ```python
    arm = jl.mujoco.load('''
    <mujoco><worldbody><body><joint type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.05"/></body></worldbody>
    </mujoco>''')
    system, q0, qd0 = arm
    traj = jl.simulate(system, q0 + 0.5, qd0, t1=2.0)
    ```
    """
    m = _model.read_source(source)
    if m.nv == 0:
        raise ValueError(
            f"MuJoCo model {_model.model_name(m)!r} has no joints: nothing moves."
        )
    tree = _model.tree(m)
    name = _model.model_name(m)
    merged = merge_params(name, _model.default_params(m, tree), params)
    _check_armature(m, merged["dof_armature"])
    _model.warn_not_imported(m)
    irot = np.stack([b.irot for b in tree.bodies]) if tree.bodies else np.zeros((0, 3, 3))
    lagrangian, dissipation, force, holonomic, points = _functions(tree, irot)
    system = LagrangianSystem(
        lagrangian,
        params=merged,
        dissipation=dissipation,
        force=force,
        holonomic=holonomic,
    )
    q0 = jnp.asarray(m.qpos0, dtype=float)
    return MujocoSystem(
        system,
        q0,
        jnp.zeros_like(q0),
        name,
        _model.coordinates(m),
        points=points,
        layout=_layout(tree),
    )
