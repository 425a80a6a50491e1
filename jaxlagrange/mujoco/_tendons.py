"""Tendons as MuJoCo's `mj_tendon` measures them (fixed: Σ coef·qpos; spatial:
the distances between consecutive sites, over the last pulley's divisor), their
armature, dead-band springs and damping, limits and equalities."""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from . import _model


JOINT, PULLEY = 1, 2  # mujoco.mjtWrap; SITE = 3, SPHERE, CYLINDER > 3: wrapping geoms
TENDON_EQUALITY = 3  # mujoco.mjtEq.mjEQ_TENDON


class Tendons(NamedTuple):
    imported: np.ndarray  # MuJoCo ids of the tendons imported (no wrapping geoms)
    coef: np.ndarray  # (ntendon, nq): the fixed tendons' coefficients
    offset: np.ndarray  # (ntendon,): segments within one body; NaN: not imported
    segments: tuple  # (tendon, body, site pos, body, site pos, 1/divisor) arrays
    limited: np.ndarray  # ids of the limited tendons, with their `range`
    range: np.ndarray
    equalities: np.ndarray  # (k, 2): the tendon ids of each active equality
    polynomials: np.ndarray  # (k, 5): eq_data[:5], zero beyond the constant if alone
    length0: np.ndarray  # tendon_length0, the lengths at qpos0


def _wrapping(m) -> list[int]:
    """The tendons that wrap geoms (sphere, cylinder: wrap types above sites)."""
    kinds = np.split(m.wrap_type, m.tendon_adr[1:])
    return [t for t in range(m.ntendon) if np.any(kinds[t] > 3)]


def read(m) -> Tendons:
    """The model's tendons as constants; those wrapping geoms are left out."""
    imported = sorted(set(range(m.ntendon)) - set(_wrapping(m)))
    coef, offset = np.zeros((m.ntendon, m.nq)), np.full(m.ntendon, np.nan)
    offset[imported] = 0.0
    segments = []
    for t in imported:
        wraps = (m.wrap_type, m.wrap_objid, m.wrap_prm)
        kind, ids, prm = (x[m.tendon_adr[t] :][: m.tendon_num[t]] for x in wraps)
        if kind[0] == JOINT:
            np.add.at(coef[t], m.jnt_qposadr[ids], prm)
            continue
        divisor = 1.0
        for j in range(len(kind) - 1):  # MuJoCo's walk: a pulley starts a branch
            divisor = prm[j] if kind[j] == PULLEY else divisor
            if PULLEY in kind[j : j + 2]:
                continue
            pair = ids[j : j + 2]
            (a, b), (pa, pb) = m.site_bodyid[pair], m.site_pos[pair]
            if a == b:  # a fixed distance (and no derivative of |0| to take)
                offset[t] += np.linalg.norm(pa - pb) / divisor
            else:
                segments.append((t, a, pa, b, pb, 1.0 / divisor))
    segments = tuple(np.array(x) for x in zip(*segments, strict=True))
    limits, on = _model.enabled(m, "LIMIT"), _model.enabled(m, "EQUALITY")
    limited = [t for t in imported if limits and m.tendon_limited[t]]
    pairs, polynomials = [], []
    for e in np.flatnonzero(on * m.eq_active0 * (m.eq_type == TENDON_EQUALITY)):
        a, b = m.eq_obj1id[e], m.eq_obj2id[e]
        if {a, b} - {-1} <= set(imported):
            alone = b < 0  # L_a − L_a0 = eq_data[0]: no second tendon
            pairs.append((a, a if alone else b))
            polynomials.append(m.eq_data[e, :5] * ([1, 0, 0, 0, 0] if alone else 1))
    imported, limited, pairs = (np.array(x, int) for x in (imported, limited, pairs))
    ranges, pairs = m.tendon_range[limited], pairs.reshape(-1, 2)
    polynomials, length0 = np.reshape(polynomials, (-1, 5)), np.array(m.tendon_length0)
    return Tendons(
        imported, coef, offset, segments, limited, ranges, pairs, polynomials, length0
    )


def lengths(tendons: Tendons, q, frames):
    """The tendon lengths (ntendon,) at q, NaN for those not imported."""
    length = tendons.offset + tendons.coef @ q
    if not tendons.segments:
        return length
    t, a, pa, b, pb, weight = tendons.segments
    x, r = frames(q)
    ends = [x[i] + jnp.einsum("sij,sj->si", r[i], p) for i, p in ((a, pa), (b, pb))]
    return length.at[t].add(weight * jnp.linalg.norm(ends[0] - ends[1], axis=-1))


def energies(tendons: Tendons, length, rate, params):
    """(½ a L̇², ½ k x², ½ d L̇²) summed over the imported tendons."""
    i = tendons.imported
    length, rate = length[i], rate[i]
    kinetic = 0.5 * params["tendon_armature"][i] @ rate**2
    potential = damping = 0.0
    if "tendon_stiffness" in params:
        # x: MuJoCo's stretch beyond [lower, upper] of `tendon_lengthspring`.
        band = params["tendon_lengthspring"][i]
        stretch = length - jnp.clip(length, band[:, 0], band[:, 1])
        potential = 0.5 * params["tendon_stiffness"][i] @ stretch**2
    if "tendon_damping" in params:
        damping = 0.5 * params["tendon_damping"][i] @ rate**2
    return kinetic, potential, damping


def limits(tendons: Tendons, length):
    """L − lower ≥ 0 and upper − L ≥ 0 for each limited tendon, in that order."""
    length = length[tendons.limited]
    lower, upper = tendons.range.T
    return jnp.stack([length - lower, upper - length], -1).reshape(-1)


def equalities(tendons: Tendons, length):
    """MuJoCo's tendon equality rows, L_a − L_a0 = p(L_b − L_b0), p a quartic."""
    a, b = tendons.equalities.T
    shift = length - tendons.length0
    value = jnp.zeros_like(shift[b])
    # Horner's rule: no 0⁰ in a derivative.
    for c in tendons.polynomials.T[::-1]:
        value = value * shift[b] + c
    return shift[a] - value


def default_params(m, tendons: Tendons) -> dict[str, np.ndarray]:
    """The tendons' armature, stiffness, lengthspring and damping params, where on."""
    on = tendons.imported.size > 0
    spring, damper = (on and not _model.disabled(m, f) for f in ("SPRING", "DAMPER"))
    names = ["armature"] * on + ["stiffness", "lengthspring"] * spring
    names += ["damping"] * damper
    return {f"tendon_{k}": np.array(getattr(m, f"tendon_{k}"), float) for k in names}


def not_imported(m) -> list[str]:
    """What of the tendons is left out, one phrase each."""
    friction = m.tendon_frictionloss * (not _model.disabled(m, "FRICTIONLOSS"))
    poly = np.any(m.tendon_stiffnesspoly, 1) | np.any(m.tendon_dampingpoly, 1)
    wrapping = "tendons wrapping geoms, with their limits, equalities and actuators"
    checks = {wrapping: _wrapping(m), "tendon friction loss": np.flatnonzero(friction)}
    checks["nonlinear tendon stiffness or damping"] = np.flatnonzero(poly)
    named = {k: [_model.name_of(m, "TENDON", t) for t in v] for k, v in checks.items()}
    return [f"{k} ({', '.join(names)})" for k, names in named.items() if names]
