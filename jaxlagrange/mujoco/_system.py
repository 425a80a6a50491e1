"""`load`: the Lagrangian of a MuJoCo model's kinematic tree, as a ready system.

MuJoCo's `mj_kinematics` is followed body by body: a body's frame is its
parent's moved by `body_pos`/`body_quat`, then by each joint (a hinge turns by
qpos − qpos0 about its axis through its anchor, a slide moves by qpos − qpos0
along its axis, a ball turns by its quaternion, a free joint places the body in
the world). One JVP of all the inertial frames along q̇ gives every body's
velocity and Ṙ, from which `jl.rigid` forms ½ m |ẋ|² + ½ ωᵀ I ω.
"""

import warnings
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import rigid
from .._custom_types import Array
from .._errors import traced
from .._system import LagrangianSystem
from ..systems._registry import ReadySystem, merge_params
from . import _contacts, _labels, _model
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


def _velocities(layout, q: Array, rates: Array, *, to_mujoco: bool) -> Array:
    """MuJoCo's qvel from q̇ (`to_mujoco`), or q̇ from qvel (batched over leading
    axes): ω = 2 Im(p̄ ⊗ ṗ) in the child frame ⇄ ṗ = ½ p ⊗ (0, ω) for quaternions."""
    parts = []
    for kind, a, v in layout:
        at = a if to_mujoco else v
        if kind == FREE:
            parts.append(rates[..., at : at + 3])
            a, v, at = a + 3, v + 3, at + 3
        if kind in (BALL, FREE):
            p = q[..., a : a + 4]
            parts.append(
                _omega(p, rates[..., a : a + 4])
                if to_mujoco
                else _rate(p, rates[..., v : v + 3])
            )
        else:
            parts.append(rates[..., at : at + 1])
    return jnp.concatenate(parts, -1)


def _system(tree: Tree, params: dict[str, Any], not_imported=(), contacts=None):
    """The model's `LagrangianSystem` with `params`, and its points."""
    layout = _layout(tree)
    quaternions = [a + 3 * (k == FREE) for k, a, _ in layout if k in (BALL, FREE)]
    units = [rigid.unit_quaternion(range(a, a + 4)) for a in quaternions]
    # Joint i is layout[i]: the springs of hinges and slides by joint and address.
    sprung = [(i, a) for i, (k, a, _) in enumerate(layout) if k in (HINGE, SLIDE)]
    irot = np.stack([b.irot for b in tree.bodies])
    actuators, addresses, gains = tree.motors

    def dofs(q, qd):  # MuJoCo's qvel
        return _velocities(layout, q, qd, to_mujoco=True)

    def centres(q, params):
        x, r = _frames(tree, q)
        return x[1:] + jnp.einsum("bij,bj->bi", r[1:], params["body_ipos"][1:]), r[1:]

    def lagrangian(q, qd, t, params):
        (x, r), (v, r_dot) = jax.jvp(lambda q: centres(q, params), (q,), (qd,))
        # The inertia about the centre of mass in the body frame, Rᵢ diag(I) Rᵢᵀ.
        inertia = jnp.einsum("bij,bj,bkj->bik", irot, params["body_inertia"][1:], irot)
        mass = params["body_mass"][1:]
        energy = jax.vmap(rigid._body_kinetic_energy)(mass, inertia, v, r, r_dot)
        kinetic = jnp.sum(energy) + 0.5 * params["dof_armature"] @ dofs(q, qd) ** 2
        for J, a in zip(tree.norm_inertia, quaternions, strict=True):
            kinetic += rigid.quaternion_norm_term(J, q[a : a + 4], qd[a : a + 4])
        potential = 0.0
        if tree.gravity:
            potential -= jnp.sum(mass * (x @ params["gravity"]))
        if tree.spring and sprung:
            i, a = np.array(sprung).T
            stretch = q[a] - tree.qpos_spring[a]
            potential += 0.5 * params["jnt_stiffness"][i] @ stretch**2
        return kinetic - potential

    def dissipation(q, qd, t, params):
        return 0.5 * params["dof_damping"] @ dofs(q, qd) ** 2

    def force(q, qd, t, params):
        return jnp.zeros_like(q).at[addresses].add(gains * params["ctrl"][actuators])

    def holonomic(q, t, params):
        return jnp.concatenate([unit(q, t) for unit in units])

    def unilateral(q, t, params):  # contacts first, then limits
        return _contacts.distances(contacts, *_frames(tree, q))

    def slip(q, qd, t, params):
        return _contacts.slip(contacts, lambda q: _frames(tree, q), q, qd)

    rough = contacts is not None and np.any(contacts.fixed != 0)
    system = LagrangianSystem(
        lagrangian,
        params=params,
        dissipation=dissipation if tree.damper else None,
        force=force if gains.size else None,
        holonomic=holonomic if units else None,
        unilateral=unilateral if contacts else None,
        restitution="restitution" if "restitution" in params else 0.0,
        slip=slip if rough else None,
        friction=partial(_contacts.friction, contacts) if rough else None,
        not_imported=not_imported,
    )
    return system, lambda q, t, params: centres(q, params)[0]


class MujocoSystem(ReadySystem):
    """A ready system loaded from a MuJoCo model, with its state conversions."""

    layout: tuple[tuple[int, int, int], ...] = eqx.field(static=True, default=())
    contacts: tuple[str, ...] = eqx.field(static=True, default=())  # row labels

    def to_mujoco(self, q: Any, qd: Any) -> tuple[Array, Array]:
        """MuJoCo's `(qpos, qvel)` of a state `(q, qd)` (or a batch (..., nq)):
        qpos = q, and ω = 2 Im(p̄ ⊗ ṗ) in the child frame for ball and free joints."""
        q, qd = jnp.asarray(q), jnp.asarray(qd)
        return q, _velocities(self.layout, q, qd, to_mujoco=True)

    def from_mujoco(self, qpos: Any, qvel: Any) -> tuple[Array, Array]:
        """The state `(q, qd)` of MuJoCo's `(qpos, qvel)` (or a batch): q = qpos,
        and ṗ = ½ p ⊗ (0, ω) for ball and free joints."""
        qpos, qvel = jnp.asarray(qpos), jnp.asarray(qvel)
        return qpos, _velocities(self.layout, qpos, qvel, to_mujoco=False)


def _check_armature(m, layout, armature: Any) -> None:
    """One armature for the three angular dofs of each ball and free joint."""
    for j, (kind, _, v) in enumerate(layout):
        v += 3 * (kind == FREE)
        angular = armature[v : v + 3]
        if kind in (BALL, FREE) and np.ptp(angular) > 0:
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
    actuation) remove those terms and their params. The geom pairs MuJoCo would
    collide (plane, sphere, capsule and box on a plane; spheres and capsules)
    are one-sided constraints h ≥ 0, h their signed distance, with Coulomb
    friction (`ready.contacts` labels the rows). Other contacts, joint limits,
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
        actuators); with contacts, `geom_friction` (ngeom, 3; μ from column 0)
        and `restitution` (0 by default).

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
    name = _model.model_name(m)
    if m.nv == 0:
        raise ValueError(f"MuJoCo model {name!r} has no joints: nothing moves.")
    tree = _model.tree(m)
    layout = _layout(tree)
    contacts, missing = _contacts.read(m)
    defaults = _model.default_params(m, tree)
    if contacts:
        defaults.update(geom_friction=np.array(m.geom_friction), restitution=0.0)
    merged = merge_params(name, defaults, params)
    if not traced(merged["dof_armature"]):
        _check_armature(m, layout, np.asarray(merged["dof_armature"]))
    missing = _model.not_imported(m) + missing
    if missing:
        warnings.warn(
            f"MuJoCo model {name!r}: not imported (absent from the Lagrangian): "
            f"{'; '.join(missing)}.",
            stacklevel=2,
        )
    system, points = _system(tree, merged, missing, contacts)
    q0 = jnp.asarray(m.qpos0, dtype=float)
    coordinates = _model.coordinates(m)
    labels = contacts.names if contacts else ()
    ready = (system, q0, jnp.zeros_like(q0), name, coordinates)
    return MujocoSystem(
        *ready, points=points, layout=layout, contacts=labels, **_labels.labels(m)
    )
