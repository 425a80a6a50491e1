"""Geom contacts: the pairs MuJoCo's filter collides, as unilateral rows h ≥ 0,
h their signed distance (`contact.dist`) from the bodies' frames (the kinds and
formulas: docs/mujoco_contacts.md). The slip is the second geom's velocity
against the first's at the midpoint of the surface points, in the plane's axes
or in a basis turned onto the normal (smooth but at the normal opposite qpos0's).
"""

import itertools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Array
from ._model import disabled, enabled, name_of, quat_matrix


PLANE, HFIELD, SPHERE, CAPSULE, BOX = 0, 1, 2, 3, 6  # mujoco.mjtGeom
Z = np.eye(3)[2]
_ROUND = (SPHERE, CAPSULE)


def pairs(m) -> list[tuple[int, int, int]]:
    """The geom pairs (g1 < g2, k) that MuJoCo tests for contact (k: `<pair>` or −1)."""
    if not enabled(m, "CONTACT"):
        return []
    given = zip(m.pair_geom1, m.pair_geom2, strict=True)
    given = {tuple(sorted(map(int, g))): k for k, g in enumerate(given)}
    body, weld = m.geom_bodyid, m.body_weldid[m.geom_bodyid]
    parent = m.body_weldid[m.body_parentid[m.body_weldid]]
    excluded = {(int(s >> 16), int(s & 0xFFFF)) for s in m.exclude_signature}
    family = not disabled(m, "FILTERPARENT")
    found = [(a, b, k) for (a, b), k in given.items()]
    for i, k in itertools.combinations(range(m.ngeom), 2):
        a, b = int(weld[i]), int(weld[k])
        touch = m.geom_contype[i] & m.geom_conaffinity[k]
        touch = touch or m.geom_contype[k] & m.geom_conaffinity[i]
        kin = family and a and b and (parent[a] == b or parent[b] == a)
        if touch and a != b and (i, k) not in given and not kin:
            if tuple(sorted((int(body[i]), int(body[k])))) not in excluded:
                found.append((i, k, -1))
    # Plane–plane, plane–hfield and hfield–hfield have no collision function.
    return sorted(p for p in found if max(m.geom_type[list(p[:2])]) > HFIELD)


class Contacts(NamedTuple):  # a model's contact rows as constants
    body: np.ndarray  # per geom: geom_bodyid, its frame in the body (pos, rot)
    pos: np.ndarray
    rot: np.ndarray
    plane: tuple[np.ndarray, ...]  # plane rows: plane, other geom, point, radius
    round: tuple[np.ndarray, ...]  # segment rows: geoms (2), half lengths, radii, basis
    order: np.ndarray  # the rows in pair order: (plane rows, segment rows)[order]
    mix: np.ndarray  # per row, the two geoms whose friction is mixed
    fixed: np.ndarray  # per row, μ where it is not mixed (−1: mixed)
    names: tuple[str, ...]  # one label per row


def read(m) -> tuple[Contacts | None, list[str]]:
    """The contact rows of the supported pairs (or None), and phrases for the others."""
    import mujoco

    data = mujoco.MjData(m)
    mujoco.mj_kinematics(m, data)  # the geoms at qpos0, for the tangent bases
    plane, round_, names, mix, fixed, kinds, spinning = ([] for _ in range(7))
    skipped = {}
    for g1, g2, k in pairs(m):
        if m.geom_type[g1] > m.geom_type[g2]:
            g1, g2 = g2, g1
        t1, t2 = int(m.geom_type[g1]), int(m.geom_type[g2])
        label = f"{name_of(m, 'GEOM', g1)}/{name_of(m, 'GEOM', g2)}"
        if not (t1 == PLANE and t2 in (*_ROUND, BOX) or {t1, t2} <= set(_ROUND)):
            kind = "–".join(mujoco.mjtGeom(t).name[7:].lower() for t in (t1, t2))
            skipped.setdefault(kind, []).append(label)
            continue
        size = m.geom_size[g2]
        if t1 == PLANE:
            ends = [[0, 0, -size[1]], [0, 0, size[1]]]
            corners = list(itertools.product(*[(-s, s) for s in size[:3]]))
            points = {SPHERE: [[0, 0, 0]], CAPSULE: ends}.get(t2, corners)
            radius = size[0] * (t2 != BOX)
            plane += [(g1, g2, p, radius) for p in np.array(points, float)]
        else:
            half = [m.geom_size[g, 1] * (m.geom_type[g] == CAPSULE) for g in (g1, g2)]
            normal = data.geom_xpos[g2] - data.geom_xpos[g1]
            normal = normal / np.linalg.norm(normal) if normal @ normal else Z
            tangent = np.linalg.svd(normal[None])[2][1]  # any unit vector ⟂ normal
            basis = np.stack([tangent, np.cross(normal, tangent), normal])
            round_.append((g1, g2, half, m.geom_size[[g1, g2], 0], basis))
            points = [None]
        n = len(points)
        names += [label] if n == 1 else [f"{label} {i}" for i in range(n)]
        kinds += [t1 != PLANE] * n
        # MuJoCo's mix: the geom of higher priority, else the larger condim and μ.
        prio = m.geom_priority[[g1, g2]]
        top = [g1, g2][int(np.argmax(prio))] if prio[0] != prio[1] else None
        condim = m.geom_condim[[g1, g2] if top is None else top].max()
        condim = m.pair_dim[k] if k >= 0 else condim
        spinning += [label] * bool(condim > 3)
        mix += [(g1, g2) if top is None else (top, top)] * n
        fixed += [0.0 if condim == 1 else -1.0 if k < 0 else m.pair_friction[k, 0]] * n
    missing = [f"contacts of {k} geoms ({', '.join(v)})" for k, v in skipped.items()]
    if spinning:
        missing.append(f"torsional and rolling friction ({', '.join(spinning)})")
    if not names:
        return None, missing
    return Contacts(
        np.array(m.geom_bodyid),
        np.array(m.geom_pos),
        np.stack([quat_matrix(p) for p in m.geom_quat]),
        tuple(map(np.array, zip(*plane, strict=True))),  # (columns)
        tuple(map(np.array, zip(*round_, strict=True))),
        np.argsort(np.argsort(kinds, kind="stable")),
        np.array(mix),
        np.array(fixed),
        tuple(names),
    ), missing


def _frames(c: Contacts, x: Array, r: Array, geoms: np.ndarray) -> tuple[Array, Array]:
    """The frames (xpos, xmat) of `geoms` from the bodies' frames."""
    b = c.body[geoms]
    return x[b] + jnp.einsum("gij,gj->gi", r[b], c.pos[geoms]), r[b] @ c.rot[geoms]


def _segment(p: Array, a: Array, b: Array) -> Array:
    """The point of the segment [a, b] closest to p (a = b allowed)."""
    d = b - a
    length2 = d @ d
    s = (p - a) @ d / jnp.where(length2 > 0, length2, 1.0)
    return a + jnp.clip(s, 0.0, 1.0) * d


def _closest(a0: Array, a1: Array, b0: Array, b1: Array) -> tuple[Array, Array]:
    """The closest points of the segments [a0, a1] and [b0, b1]."""
    d1, d2, r = a1 - a0, b1 - b0, a0 - b0
    A, B, E, C, F = d1 @ d1, d1 @ d2, d2 @ d2, d1 @ r, d2 @ r
    det = A * E - B * B
    # Parallel segments: the interior candidate is left out, so h stays continuous
    # and its gradient finite.
    good = det > 1e-12 * A * E
    det = jnp.where(good, det, 1.0)
    s, t = (B * F - C * E) / det, (A * F - B * C) / det
    inner = good & (s > 0) & (s < 1) & (t > 0) & (t < 1)
    on_a = [a0, a1, _segment(b0, a0, a1), _segment(b1, a0, a1), a0 + s * d1]
    on_b = [_segment(a0, b0, b1), _segment(a1, b0, b1), b0, b1, b0 + t * d2]
    firsts, seconds = jnp.stack(on_a), jnp.stack(on_b)
    gaps = jnp.sum((seconds - firsts) ** 2, -1)
    best = jnp.argmin(gaps.at[4].set(jnp.where(inner, gaps[4], jnp.inf)))
    return firsts[best], seconds[best]


def _rotated(basis: Array, n: Array) -> Array:
    """The tangents of `basis` (rows t₁, t₂, n₀), turned with n₀ onto n."""
    n0, k = basis[2], jnp.cross(basis[2], n)
    c = n0 @ n
    t = basis[:2]
    # About n₀ × n: smooth in n but at n = −n₀.
    scale = 1.0 / jnp.maximum(1.0 + c, 1e-300)
    return c * t + jnp.cross(k, t) + jnp.outer(t @ k, k) * scale


def _witnesses(c: Contacts, x: Array, r: Array):
    """Per row: h, the contact point, the two geoms' bodies and tangents (u, 2, 3)."""
    parts = []
    if c.plane:
        planes, others, points, radii = c.plane
        px, pr = _frames(c, x, r, planes)
        ox, orot = _frames(c, x, r, others)
        n = pr[:, :, 2]
        centre = ox + jnp.einsum("gij,gj->gi", orot, points)
        h = jnp.sum((centre - px) * n, -1) - radii
        point = centre - (radii + h / 2)[:, None] * n
        tangents = jnp.moveaxis(pr[:, :, :2], -1, 1)
        parts.append((h, point, c.body[planes], c.body[others], tangents))
    if c.round:
        first, second, half, radii, basis = c.round
        (ax, ar), (bx, br) = _frames(c, x, r, first), _frames(c, x, r, second)
        u, v = ar[:, :, 2] * half[:, :1], br[:, :, 2] * half[:, 1:]
        p1, p2 = jax.vmap(_closest)(ax - u, ax + u, bx - v, bx + v)
        gap2 = jnp.sum((p2 - p1) ** 2, -1)
        safe = gap2 > 1e-200
        gap = jnp.sqrt(jnp.where(safe, gap2, 1.0))
        n = jnp.where(safe[:, None], (p2 - p1) / gap[:, None], basis[:, 2])
        h = jnp.where(safe, gap, 0.0) - radii.sum(1)
        point = p1 + (radii[:, 0] + h / 2)[:, None] * n
        tangents = jax.vmap(_rotated)(basis, n)
        parts.append((h, point, c.body[first], c.body[second], tangents))
    return [jnp.concatenate(rows)[c.order] for rows in zip(*parts, strict=True)]


def distances(c: Contacts, x: Array, r: Array) -> Array:
    """h per contact row, from the bodies' frames (xpos, xmat)."""
    return _witnesses(c, x, r)[0]


def slip(c: Contacts, frames, q: Array, qd: Array) -> Array:
    """The contacts' tangential velocities (u, 2): second geom's against the first's."""
    (x, r), (v, r_dot) = jax.jvp(frames, (q,), (qd,))
    _, point, first, second, tangents = _witnesses(c, x, r)

    def velocity(b):  # of the material point of body b at `point`
        local = jnp.einsum("uji,uj->ui", r[b], point - x[b])
        return v[b] + jnp.einsum("uij,uj->ui", r_dot[b], local)

    return jnp.einsum("ukj,uj->uk", tangents, velocity(second) - velocity(first))


def friction(c: Contacts, params: dict[str, Any]) -> Array:
    """μ per contact row: the `<pair>`'s, 0 if frictionless, else MuJoCo's mix."""
    mixed = jnp.max(params["geom_friction"][c.mix, 0], axis=1)
    return jnp.where(c.fixed < 0, mixed, c.fixed)
