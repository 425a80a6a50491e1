"""`load`: the Lagrangian of a MuJoCo model's kinematic tree, as a ready system.

The bodies' frames follow `mj_kinematics` (`_frames`; `_jumped` without a loop
for large trees); one JVP of them along q̇ gives the velocities of
½ m |ẋ|² + ½ ωᵀ I ω. docs/mujoco.md says what is imported.
"""

import collections
import functools
import hashlib
import warnings
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import rigid
from .._custom_types import Array
from .._errors import traced
from .._hold import value_at
from .._system import LagrangianSystem
from ..systems._registry import ReadySystem, merge_params
from . import _actuators, _contacts, _equality, _limits, _model, _tendons
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
    """The rotation by `angle` about the unit `axis` (elementary where it can be)."""
    # Elementary: fewer operations in the compiled q̈.
    k = np.flatnonzero(axis)
    if k.size == 1:
        return rigid.euler_to_matrix(angle * np.sign(axis[k[0]]), "xyz"[k[0]])
    K = np.cross(np.eye(3), axis)  # the cross-product matrix of axis
    return jnp.eye(3) + jnp.sin(angle) * K + (1 - jnp.cos(angle)) * (K @ K)


# Larger trees are walked by `_jumped`, a program of O(log depth) size: the unrolled
# walk (faster on a small tree) grows with the tree, and XLA's compile time with it.
JUMP_FROM = 8


def _frames(tree: Tree, q: Array) -> tuple[Array, Array]:
    """The bodies' frames (xpos, xmat) at q, shapes (nbody, 3), (nbody, 3, 3)."""
    if len(tree.bodies) > JUMP_FROM:
        return _jumped(tree, q)
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


def _read(x, at):  # x[at] as a product with one-hot rows: no gather nor scatter
    return jnp.tensordot(np.eye(x.shape[0])[at], x, 1)


def _walk(tree: Tree, q: Array):
    """`local`, a body's frame in its parent's (a free body's in the world), and its
    constants, where it reads q (padded) and those reads, stacked over the bodies."""
    nq, nb = q.shape[0], len(tree.bodies)
    slots = (nb, max(len(b.joints) for b in tree.bodies))
    c = dict(
        pos=np.array([b.pos for b in tree.bodies]),
        rot=np.array([b.rot for b in tree.bodies]),
        qpos0=np.zeros(slots + (2,)),  # the slide's, the hinge's
        axis=np.zeros(slots + (2, 3)),
        anchor=np.zeros(slots + (3,)),
        free=np.zeros(nb, bool),
    )
    # The padding the kinds a slot lacks read (0, the unit quaternion): no motion.
    at = dict(slide=np.full(slots, nq), hinge=np.full(slots, nq))
    at.update(ball=np.full(slots + (4,), nq + 1) + np.arange(4))
    at.update(placed=np.tile(nq + np.array([0, 0, 0, 1, 2, 3, 4]), (nb, 1)))
    for i, body in enumerate(tree.bodies):
        for s, j in enumerate(body.joints):
            if j.kind == FREE:  # (a child of the world, as MuJoCo requires)
                at["placed"][i], c["free"][i] = j.q + np.arange(7), True
            elif j.kind == BALL:
                at["ball"][i, s], c["anchor"][i, s] = j.q + np.arange(4), j.pos
            else:
                k = int(j.kind == HINGE)
                at[("slide", "hinge")[k]][i, s] = j.q
                c["qpos0"][i, s, k], c["axis"][i, s, k] = j.qpos0, j.axis
                c["anchor"][i, s] = j.pos if k else 0.0
    kinds = {j.kind for b in tree.bodies for j in b.joints}  # only those written

    def local(c, read):
        x, r = c["pos"], c["rot"]
        for s in range(slots[1]):
            (a, b), axis = c["qpos0"][s], c["axis"][s]
            if SLIDE in kinds:
                x = x + (r @ axis[0]) * (read["slide"][s] - a)
            anchor = x + r @ c["anchor"][s]
            if HINGE in kinds:  # Rodrigues: I + sin θ K + (1 − cos θ) K²
                angle, k = read["hinge"][s] - b, jnp.cross(jnp.eye(3), axis[1])
                r = r + jnp.sin(angle) * (r @ k) + (1 - jnp.cos(angle)) * (r @ k @ k)
            if BALL in kinds:
                r = r @ rigid.quaternion_to_matrix(read["ball"][s])
            x = anchor - r @ c["anchor"][s]
        if FREE in kinds:
            placed = read["placed"]
            x = jnp.where(c["free"], placed[:3], x)
            r = jnp.where(c["free"], rigid.quaternion_to_matrix(placed[3:]), r)
        return x, r

    q = jnp.concatenate([q, jnp.array([0.0, 1, 0, 0, 0], q.dtype)])
    return local, c, at, {k: _read(q, v) for k, v in at.items()}


def _jumped(tree: Tree, q: Array) -> tuple[Array, Array]:
    """`_frames` without a loop over the bodies: every body's frame at once."""
    local, c, _, reads = _walk(tree, q)
    x, r = jax.vmap(local)(c, reads)
    x = jnp.concatenate([jnp.zeros((1, 3), q.dtype), x])
    r = jnp.concatenate([jnp.eye(3, dtype=q.dtype)[None], r])
    ancestor = np.array([0] + [b.parent for b in tree.bodies])
    # Pointer jumping: ⌈log₂ depth⌉ rounds of T_i ← T_{a(i)} ∘ T_i, a(i) ← a(a(i)).
    while np.any(ancestor):
        up = _read(r, ancestor)
        x, r = _read(x, ancestor) + jnp.einsum("bij,bj->bi", up, x), up @ r
        ancestor = ancestor[ancestor]
    return x, r


_angular = jnp.vectorize(rigid.matrix_angular_velocity, signature="(3,3),(3,3)->(3)")


def _jacobians(tree: Tree, q: Array, centres: Array) -> tuple[Array, Array]:
    """∂ẋ/∂q̇ of the bodies' centres and ∂ω/∂q̇ in body axes, (nbody − 1, n, 3) each:
    a coordinate turns its body in its parent's frame (a JVP of that `local` frame
    alone), at the twist ω, v that moves every centre c below it at v + ω × c."""
    n, nb = q.shape[0], len(tree.bodies)
    local, c, at, reads = _walk(tree, q)
    owner = np.zeros(n, int)  # the body (1 …) each coordinate moves first
    for i, body in enumerate(tree.bodies, 1):
        for j in body.joints:
            owner[j.q : j.q + {FREE: 7, BALL: 4}.get(j.kind, 1)] = i
    own = [np.flatnonzero(owner == i) for i in range(1, nb + 1)]
    width = max(map(len, own))
    own = np.array([np.pad(o, (0, width - len(o)), constant_values=-1) for o in own])
    # The tangents of the reads along each own coordinate: static one-hot arrays.
    tangents = {
        k: (v[:, None] == own.reshape(own.shape + (1,) * (v.ndim - 1))).astype(q.dtype)
        for k, v in at.items()
    }
    push = lambda c, read, t: jax.jvp(lambda read: local(c, read), (read,), (t,))  # noqa: E731
    along = jax.vmap(push, in_axes=(None, None, 0), out_axes=(None, 0))  # its own
    (_, rl), (dx, dr) = jax.vmap(along)(c, reads, tangents)  # dx: (nb, width, 3)
    x, r = _frames(tree, q)
    # The twist in the world: ω, and v = R_parent ẋ_local − ω × x_body.
    omega = jnp.einsum("bij,bkj->bki", r[1:], _angular(rl[:, None], dr))
    turned = _read(r, [b.parent for b in tree.bodies])  # the parents' rotations
    v = jnp.einsum("bij,bkj->bki", turned, dx) - jnp.cross(omega, x[1:, None])
    # To the coordinates' order (a static one-hot product), then each body's.
    scatter = (own.reshape(-1) == np.arange(n)[:, None]).astype(q.dtype)
    omega, v = scatter @ omega.reshape(-1, 3), scatter @ v.reshape(-1, 3)
    ancestry = np.eye(nb + 1, dtype=bool)
    for i, body in enumerate(tree.bodies, 1):
        ancestry[i] |= ancestry[body.parent]
    moves = ancestry[1:, owner][..., None]  # (body, coordinate): k moves body b
    jx = jnp.where(moves, v + jnp.cross(omega, centres[:, None]), 0.0)
    jw = jnp.where(moves, jnp.einsum("bji,kj->bki", r[1:], omega), 0.0)
    return jx, jw


def _kane(tree, frames, mass, inertia, gravity, q, qd):
    """M = Σ Jᵀ diag(m, I) J and f = −Σ Jᵀ (m (a⁰ − g), I ω̇⁰ + ω × I ω) of the bodies
    by Kane's equations: J by `_jacobians`, a⁰ and ω̇⁰ at q̈ = 0 (of the `frames`)."""
    velocity = lambda q: jax.jvp(frames, (q,), (qd,))  # noqa: E731
    ((c, r), (_, r_dot)), (_, (a, r_ddot)) = jax.jvp(velocity, (q,), (qd,))
    jx, jw = _jacobians(tree, q, c)
    w, spin = _angular(r, r_dot), lambda w: jnp.einsum("bij,bj->bi", inertia, w)
    torque = spin(_angular(r, r_ddot)) + jnp.cross(w, spin(w))
    matrix = jnp.einsum("bni,b,bmi->nm", jx, mass, jx)
    matrix += jnp.einsum("bni,bij,bmj->nm", jw, inertia, jw)
    force = jnp.einsum("bni,b,bi->n", jx, mass, a - gravity)
    return matrix, -force - jnp.einsum("bni,bi->n", jw, torque)


def _layout(tree: Tree) -> tuple[tuple[int, int, int], ...]:
    """(kind, qpos address, qvel address) of each joint, in MuJoCo's order."""
    return tuple((j.kind, j.q, j.v) for b in tree.bodies for j in b.joints)


def _velocities(layout, q: Array, rates: Array, *, to_mujoco: bool) -> Array:
    """MuJoCo's qvel from q̇ (`to_mujoco`) or back; quaternions: ω = 2 Im(p̄ ⊗ ṗ)."""
    parts = []
    for kind, a, v in layout:
        at = a if to_mujoco else v
        if kind == FREE:
            parts.append(rates[..., at : at + 3])
            a, at = a + 3, at + 3
        if kind in (BALL, FREE):
            rate = rates[..., at : at + 3 + to_mujoco]  # ṗ (4) or ω (3)
            parts.append((_omega if to_mujoco else _rate)(q[..., a : a + 4], rate))
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
    tendons, actuators = tree.tendons, tree.actuators
    nq, tendinous = tendons.coef.shape[1], tendons.imported.size > 0
    driven = bool(np.any(actuators.source >= nq))  # an actuator on a tendon

    def lengths(q):  # the tendons', (ntendon,)
        return _tendons.lengths(tendons, q, lambda q: _frames(tree, q))

    def tendon_energies(q, qd, params):
        return _tendons.energies(tendons, *jax.jvp(lengths, (q,), (qd,)), params)

    def dofs(q, qd):  # MuJoCo's qvel
        return _velocities(layout, q, qd, to_mujoco=True)

    def centres(q, params):
        x, r = _frames(tree, q)
        return x[1:] + jnp.einsum("bij,bj->bi", r[1:], params["body_ipos"][1:]), r[1:]

    def bodies(params):  # masses, inertias about the centres in body axes, g
        # Rᵢ Iᵢ Rᵢᵀ: Iᵢ principal, or a full (3, 3) tensor (`jl.fit(consistent=True)`).
        irot = rigid.quaternion_to_matrix(params["body_iquat"][1:])
        inertia = params["body_inertia"][1:]
        inertia = inertia if inertia.ndim == 3 else inertia[..., None] * np.eye(3)
        gravity = params["gravity"] if tree.gravity else np.zeros(3)
        return params["body_mass"][1:], irot @ inertia @ irot.mT, gravity

    def rest(q, qd, t, params):  # L less the bodies' ½ m |ẋ|² + ½ ωᵀ I ω + m g·x
        kinetic = 0.5 * params["dof_armature"] @ dofs(q, qd) ** 2
        for J, a in zip(tree.norm_inertia, quaternions, strict=True):
            kinetic += rigid.quaternion_norm_term(J, q[a : a + 4], qd[a : a + 4])
        potential = 0.0
        if tree.spring and sprung:
            i, a = np.array(sprung).T
            stretch = q[a] - tree.qpos_spring[a]
            potential += 0.5 * params["jnt_stiffness"][i] @ stretch**2
        if tendinous:
            armature, spring, _ = tendon_energies(q, qd, params)
            kinetic, potential = kinetic + armature, potential + spring
        return kinetic - potential

    def lagrangian(q, qd, t, params):
        (x, r), (v, r_dot) = jax.jvp(lambda q: centres(q, params), (q,), (qd,))
        mass, inertia, gravity = bodies(params)
        w = _angular(r, r_dot)  # ½ m |ẋ|² + ½ ωᵀ I ω + m g·x of each body
        energy = mass @ jnp.sum(v * v, -1) + jnp.einsum("bi,bij,bj->", w, inertia, w)
        return 0.5 * energy + mass @ (x @ gravity) + rest(q, qd, t, params)

    def tree_terms(q, qd, t, params):
        frames = functools.partial(centres, params=params)
        return _kane(tree, frames, *bodies(params), q, qd)

    # M and f of the bodies by Kane's equations, of the rest by autodiff (`_terms`).
    lagrangian.tree_terms, lagrangian.rest = tree_terms, rest

    # The rules of MuJoCo's compiler, also for `simulate`'s and `simulate_batch`'s
    # params (`checked_values`).
    lagrangian.check_params = functools.partial(_model.check_inertial, tree.inertial)

    def dissipation(q, qd, t, params):
        damping = tendon_energies(q, qd, params)[2] if tendinous else 0.0
        return 0.5 * params["dof_damping"] @ dofs(q, qd) ** 2 + damping

    def force(q, qd, t, params):
        position, rate = q, qd  # then the tendons' lengths and rates, if driven
        if driven:
            length, speed = jax.jvp(lengths, (q,), (qd,))
            pull = jax.vjp(lengths, q)[1]
            position, rate = jnp.append(q, length), jnp.append(qd, speed)
        ctrl = value_at(params["ctrl"], t)  # the one place the controls are read
        forces = _actuators.forces(actuators, ctrl, position, rate, params)
        return forces[:nq] + pull(forces[nq:])[0] if driven else forces

    def holonomic(q, t, params):
        rows = [unit(q, t) for unit in units]
        if tree.equalities:  # after the quaternions' norms
            rows.append(_equality.residuals(tree.equalities, *_frames(tree, q), q))
        if tendons.equalities.size:
            rows.append(_tendons.equalities(tendons, lengths(q)))
        return jnp.concatenate(rows)

    # The one-sided rows: contacts, joint limits, then tendon limits.
    limits, tendon_limits = tree.limits, tendons.limited.size > 0

    def unilateral(q, t, params):
        rows = [_contacts.distances(contacts, *_frames(tree, q))] if contacts else []
        if limits:
            rows.append(_limits.rows(limits, q))
        if tendon_limits:
            rows.append(_tendons.limits(tendons, lengths(q)))
        return jnp.concatenate(rows)

    # Named in the refusal of a start below a limit. Friction acts at contacts
    # alone: the limit rows slip by 0 with μ = 0.
    sides = ("lower", "upper")
    bounds = (limits.names if limits else ()) + tuple(
        f"the {side} limit of tendon {i}" for i in tendons.limited for side in sides
    )
    unilateral.names = (contacts.names if contacts else ()) + bounds
    one_sided, others = bool(unilateral.names), len(bounds)

    def slip(q, qd, t, params):
        s = _contacts.slip(contacts, lambda q: _frames(tree, q), q, qd)
        return jnp.pad(s, ((0, others), (0, 0)))

    def friction(params):
        return jnp.pad(_contacts.friction(contacts, params), (0, others))

    rough = contacts is not None and np.any(contacts.fixed != 0)
    bilateral = units or tree.equalities or tendons.equalities.size
    system = LagrangianSystem(
        lagrangian,
        params=params,
        dissipation=dissipation if tree.damper else None,
        force=force if actuators.ids.size else None,
        holonomic=holonomic if bilateral else None,
        unilateral=unilateral if one_sided else None,
        restitution="restitution" if one_sided else 0.0,
        slip=slip if rough else None,
        friction=friction if rough else None,
        not_imported=not_imported,
    )

    def points(q, t, params):  # the centres of mass, then the anchors
        x, r = _frames(tree, q)
        # Each body's first joint's anchor, in its frame before the joint moves
        # it (MuJoCo's xanchor); a free or jointless body's origin.
        anchors = [
            x[i]
            if not body.joints or body.joints[0].kind == FREE
            else x[body.parent]
            + r[body.parent] @ (body.pos + body.rot @ body.joints[0].pos)
            for i, body in enumerate(tree.bodies, 1)
        ]
        return jnp.concatenate([centres(q, params)[0], jnp.stack(anchors)])

    return system, points, lengths


class MujocoSystem(ReadySystem):
    """A ready system loaded from a MuJoCo model, with its state conversions and
    `check_params(params)`: a `ValueError` naming an impossible mass or inertia."""

    layout: tuple[tuple[int, int, int], ...] = eqx.field(static=True, default=())
    lengths: Any = eqx.field(static=True, default=None)  # the tendons' at q
    check_params: Any = eqx.field(static=True, default=None)
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

    def tendon_lengths(self, q: Any) -> Array:
        """The tendons' lengths (MuJoCo's `ten_length`) at q, shape (ntendon,), or
        (..., ntendon) for a batch such as `traj.q`; NaN for a tendon not imported
        (one that wraps geoms)."""
        return jnp.vectorize(self.lengths, signature="(n)->(k)")(jnp.asarray(q))

    def tendon_velocities(self, q: Any, qd: Any) -> Array:
        """The tendons' rates dL/dt = (∂L/∂q) q̇ (MuJoCo's `ten_velocity`) at the
        state `(q, qd)`, shape (ntendon,), or (..., ntendon) for a batch."""
        rate = lambda q, qd: jax.jvp(self.lengths, (q,), (qd,))[1]  # noqa: E731
        return jnp.vectorize(rate, signature="(n),(n)->(k)")(jnp.asarray(q), qd)


_BUILT: "collections.OrderedDict[bytes, tuple]" = collections.OrderedDict()


def _built(m, tree: Tree, params, not_imported, contacts):
    """`_system` with `params`, its functions shared by every load of the same model."""
    import mujoco

    buffer = np.empty(mujoco.mj_sizeModel(m), np.uint8)
    mujoco.mj_saveModel(m, None, buffer)
    key = hashlib.sha256(buffer).digest()
    # JAX keys programs by the functions' identity: a program traced for one load
    # (a fit, a simulate) serves the next.
    if key not in _BUILT:
        built = _system(tree, params, not_imported, contacts)
        if traced(params):  # (loaded inside a user's jit: nothing kept)
            return built
        _BUILT[key] = built
        while len(_BUILT) > 16:
            _BUILT.popitem(last=False)
    _BUILT.move_to_end(key)
    system, points, lengths = _BUILT[key]
    return system.with_params(params), points, lengths


def _check_armature(m, layout, armature: Any) -> None:
    """One armature for the three angular dofs of each ball and free joint."""
    for j, (kind, _, v) in enumerate(layout):
        v += 3 * (kind == FREE)
        angular = armature[v : v + 3]
        if kind in (BALL, FREE) and np.ptp(angular) > 0:
            raise ValueError(
                f"`dof_armature` of the angular dofs {v}..{v + 2} of joint "
                f"{_model.name_of(m, 'JOINT', j)!r} must be one value (MuJoCo adds "
                f"it without gyroscopic terms), got {angular.tolist()}."
            )


def load(
    source: Any,
    *,
    params: dict[str, Any] | None = None,
    strict: bool = False,
    assets: dict[str, bytes] | None = None,
) -> MujocoSystem:
    """A MuJoCo model as a ready system: exact, differentiable equations of motion.

    L = T − V of the model's kinematic tree (bodies, joint and tendon armature,
    gravity, joint and tendon springs), Rayleigh damping, MuJoCo's affine
    actuator forces, and joint and tendon limits, active equalities and the geom
    contacts MuJoCo would collide (with Coulomb friction; `ready.contacts` labels
    their rows) as exact constraints (the "MuJoCo models" page says which).
    Disable flags remove their terms and params. One warning names what is not
    imported; a default pose outside a limit is moved onto it.

    The coordinates are MuJoCo's qpos and q̇ = dq/dt (a quaternion's rate ṗ,
    kept on |p| = 1); `to_mujoco` and `from_mujoco` convert states to and from
    MuJoCo's (qpos, qvel), whose ball and free ω is in the child frame.

    **Arguments:**

    - `source`: a path to an MJCF or URDF file, MJCF text (a string or bytes,
        a byte-order mark allowed), a `mujoco.MjModel` (read as it is: after
        editing its fields call `mujoco.mj_setConst`) or dm_control's
        `physics.model`.
    - `params`: overrides of the params, named after the MjModel fields:
        `body_mass` (nbody,), `body_inertia` (nbody, 3), `body_ipos` (nbody, 3),
        `body_iquat` (nbody, 4),
        `dof_armature` (nv,), `dof_damping` (nv,), `jnt_stiffness` (njnt,),
        `gravity` (3,); `tendon_armature`, `tendon_stiffness`, `tendon_damping`
        (ntendon,), `tendon_lengthspring` (ntendon, 2); `actuator_gainprm`,
        `actuator_biasprm` (nactuator, 3) and `ctrl` (nu,) (zeros; absent where
        no imported actuator reads it; a `jl.ZeroOrderHold` of shape (T, nu)
        holds a series); with contacts, `geom_friction` (ngeom, 3; μ from column
        0); with contacts or limits, `restitution` (a scalar, 0 by default).
    - `strict`: raise the warning of what is not imported as a `ValueError`.
    - `assets`: the bytes of the files the model includes, by name (as
        `mujoco.MjModel.from_xml_string` takes them).

    **Returns:** a `MujocoSystem`, a `ReadySystem` that unpacks as
    `system, q0, qd0` (qpos0 at rest), with `positions(q)` the bodies' centres
    of mass, `to_mujoco`/`from_mujoco` and `tendon_lengths`/`tendon_velocities`.

    **Raises:** `ValueError` for a missing file, a model MuJoCo rejects, an
    unknown param or one of the wrong shape, masses and inertias MuJoCo's
    compiler refuses (the result's `check_params(params)`), unequal armature on
    the angular dofs of a ball or free joint, or, with `strict`, anything not
    imported.

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
    m = _model.read_source(source, assets)
    name = _model.model_name(m)
    if m.nv == 0:
        raise ValueError(f"MuJoCo model {name!r} has no joints: nothing moves.")
    tendons = _tendons.read(m)
    actuators = _actuators.read(m, tendons)
    tree = _model.tree(m)._replace(tendons=tendons, actuators=actuators)
    tree = tree._replace(limits=_limits.read(m), equalities=_equality.read(m))
    tree = tree._replace(inertial=_model.inertial(m, name))
    layout = _layout(tree)
    contacts, missing_contacts = _contacts.read(m)
    defaults = _model.default_params(m, tree) | _tendons.default_params(m, tendons)
    defaults |= _actuators.default_params(m, actuators)
    if contacts:
        defaults.update(geom_friction=np.array(m.geom_friction), restitution=0.0)
    merged = merge_params(name, defaults, params)
    if not traced(merged):  # (params traced through `load`: checked where used)
        _check_armature(m, layout, np.asarray(merged["dof_armature"]))
        _model.check_inertial(tree.inertial, merged)
    missing = _model.not_imported(m) + _tendons.not_imported(m)
    missing += _actuators.not_imported(m, tendons) + missing_contacts
    said = "; ".join(missing)
    said = said and f"not imported (absent from the Lagrangian): {said}"
    if said and strict:
        raise ValueError(f"MuJoCo model {name!r}: {said} (strict=True).")
    q0, moved = _limits.onto(tree.limits, m.qpos0)
    moved = moved and f"default pose moved onto its joint limits: {', '.join(moved)}"
    if said or moved:
        said = "; ".join(x for x in (said, moved) if x)
        warnings.warn(f"MuJoCo model {name!r}: {said}.", stacklevel=2)
    system, points, lengths = _built(m, tree, merged, tuple(missing), contacts)
    q0 = jnp.asarray(q0)
    ready = system, q0, jnp.zeros_like(q0), name
    labels = contacts.names if contacts else ()
    extras = dict(points=points, layout=layout, lengths=lengths, contacts=labels)
    extras.update(check_params=system.lagrangian.check_params)  # (shared)
    return MujocoSystem(*ready, **extras, **_model.labels(m))
