"""Physically consistent inertial params of a loaded model (`fit(consistent=True)`).

A body's ten standard inertial params (mass m, first moment m·c, second
moments) form its pseudo-inertia J = ∫ [x; 1][x; 1]ᵀ dm (4 × 4, body frame),
and the body is physically consistent (m > 0, an inertia about the centre of
mass that is positive definite and obeys the triangle inequalities) exactly
when J is positive definite (Wensing, Kim & Slotine 2018). J = U Uᵀ with

    U = e^α [[e^d₁, s₁₂, s₁₃, t₁], [0, e^d₂, s₂₃, t₂], [0, 0, e^d₃, t₃], [0, 0, 0, 1]]

maps ten free numbers one-to-one onto the positive definite J (the
log-Cholesky parametrization of Rucker & Wensing 2022): they are the fit's
unknowns, so every iterate is consistent. The model's fields are read off J:
m = J₄₄, c = J[:3, 3]/m, the inertia about c as a full tensor in the body
frame (with `body_iquat` the identity while fitting), reported as MuJoCo has
it: principal moments and the quaternion of their axes. A fit of the masses
alone fits their logarithms.
"""

from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ..rigid import quaternion_to_matrix
from ._quality import flat_names


INERTIAL = ("body_mass", "body_ipos", "body_inertia", "body_iquat")
_STANDARD = ("m", "mc_x", "mc_y", "mc_z", "I_xx", "I_yy", "I_zz", "I_xy", "I_xz")
_STANDARD += ("I_yz",)


class Inertial(eqx.Module, Mapping):
    """A loaded model's params, the bodies' inertial fields made from `theta`."""

    theta: Any  # (nbody − 1, 10) log-Cholesky numbers, or (nbody − 1,) log-masses
    rest: dict  # every other param (and the world's)

    def __getitem__(self, key):
        if key in INERTIAL:
            return _fields(self.theta, self.rest)[key]
        return self.rest[key]

    def __iter__(self):
        return iter(self.rest)

    def __len__(self):
        return len(self.rest)


def _pseudo(theta):
    """J = U Uᵀ of log-Cholesky numbers theta, (b, 10) -> (b, 4, 4)."""
    e, s, t = jnp.exp(theta[:, 1:4]), theta[:, 4:7], theta[:, 7:]
    z, one = jnp.zeros_like(e[:, 0]), jnp.ones_like(e[:, 0])
    rows = [
        [e[:, 0], s[:, 0], s[:, 1], t[:, 0]],
        [z, e[:, 1], s[:, 2], t[:, 1]],
        [z, z, e[:, 2], t[:, 2]],
        [z, z, z, one],
    ]
    u = jnp.stack([jnp.stack(r, -1) for r in rows], -2) * jnp.exp(theta[:, :1, None])
    return u @ jnp.swapaxes(u, 1, 2)


def _fields(theta, rest) -> dict:
    if theta.ndim == 1:  # the masses alone
        return {**rest, "body_mass": rest["body_mass"].at[1:].set(jnp.exp(theta))}
    J = _pseudo(theta)
    m, h = J[:, 3, 3], J[:, :3, 3]
    second = J[:, :3, :3] - h[:, :, None] * h[:, None, :] / m[:, None, None]
    trace = jnp.trace(second, axis1=1, axis2=2)[:, None, None]
    inertia = trace * jnp.eye(3) - second
    world = rest["body_inertia"][:1, :, None] * jnp.eye(3)
    iquat = rest["body_iquat"].at[1:].set(jnp.array([1.0, 0.0, 0.0, 0.0]))
    return {
        **rest,
        "body_mass": rest["body_mass"].at[1:].set(m),
        "body_ipos": rest["body_ipos"].at[1:].set(h / m[:, None]),
        "body_inertia": jnp.concatenate([world, inertia]),
        "body_iquat": iquat,
    }


def _standard(theta):
    """Each body's ten standard params (m, m·c, inertia at its origin), linear in J."""
    if theta.ndim == 1:
        return jnp.exp(theta)
    J = _pseudo(theta)
    inertia = jnp.trace(J[:, :3, :3], axis1=1, axis2=2)[:, None, None] * jnp.eye(3)
    inertia = inertia - J[:, :3, :3]
    i, k = (0, 1, 2, 0, 0, 1), (0, 1, 2, 1, 2, 2)
    return jnp.concatenate([J[:, 3, 3:], J[:, 3, :3], inertia[:, i, k]], -1).ravel()


def wrap(params: dict, trained: Mapping) -> tuple[Any, Any] | None:
    """The params as an `Inertial`, and its trained mask; None if no inertia trains."""
    fields = [k for k in INERTIAL if any(jax.tree_util.tree_leaves(trained[k]))]
    if not fields:
        return None
    rest = {k: jnp.asarray(v) for k, v in params.items()}
    mass = np.asarray(rest["body_mass"])[1:]
    if fields == ["body_mass"]:
        theta = np.log(mass)
    else:
        keys = ("body_iquat", "body_ipos", "body_inertia")
        iquat, ipos, moments = (np.asarray(params[k])[1:] for k in keys)
        rot = np.asarray(quaternion_to_matrix(iquat))
        inertia = np.einsum("bij,bj,bkj->bik", rot, moments, rot)
        h = mass[:, None] * ipos
        trace = np.trace(inertia, axis1=1, axis2=2)[:, None, None]
        second = trace / 2 * np.eye(3) - inertia
        J = np.zeros((mass.size, 4, 4))
        J[:, :3, :3] = second + h[:, :, None] * ipos[:, None, :]
        J[:, :3, 3], J[:, 3, :3], J[:, 3, 3] = h, h, mass
        flip = np.eye(4)[::-1]  # J = (P L P)(P L P)ᵀ with P L P upper triangular
        u = flip @ np.linalg.cholesky(flip @ J @ flip) @ flip
        scale = u[:, 3, 3]
        u = u / scale[:, None, None]
        d = np.log(np.diagonal(u, axis1=1, axis2=2)[:, :3])
        s = u[:, [0, 0, 1], [1, 2, 2]]
        theta = np.concatenate([np.log(scale)[:, None], d, s, u[:, :3, 3]], 1)
    mask = {k: False if k in INERTIAL else v for k, v in trained.items()}
    mask = Inertial(True, mask)
    return Inertial(jnp.asarray(theta), rest), mask


def public(params):
    """A fitted `Inertial` as MjModel fields (principal moments, axes' quaternion)."""
    if not isinstance(params, Inertial):
        return params
    out = {k: np.array(v) for k, v in _fields(params.theta, params.rest).items()}
    full = out["body_inertia"]
    if full.ndim == 3:
        moments, axes = np.linalg.eigh(full[1:])
        axes[:, :, 2] *= np.sign(np.linalg.det(axes))[:, None]  # a rotation
        out["body_inertia"] = np.concatenate([np.diagonal(full[:1], 0, 1, 2), moments])
        out["body_iquat"][1:] = [_quaternion(r) for r in axes]
    return out


def _quaternion(r) -> np.ndarray:
    """The unit quaternion (w, x, y, z), w ≥ 0, of a rotation matrix."""
    # Bar-Itzhack: the eigenvector of the largest eigenvalue of the symmetric K.
    # fmt: off
    k = np.array(
        [
            [r[0, 0] + r[1, 1] + r[2, 2], r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]],
            [r[2, 1] - r[1, 2], r[0, 0] - r[1, 1] - r[2, 2], r[0, 1] + r[1, 0], r[0, 2] + r[2, 0]],
            [r[0, 2] - r[2, 0], r[0, 1] + r[1, 0], r[1, 1] - r[0, 0] - r[2, 2], r[1, 2] + r[2, 1]],
            [r[1, 0] - r[0, 1], r[0, 2] + r[2, 0], r[1, 2] + r[2, 1], r[2, 2] - r[0, 0] - r[1, 1]],
        ]
    )
    # fmt: on
    q = np.linalg.eigh(k)[1][:, -1]
    return q * (1.0 if q[0] >= 0 else -1.0)


def reported(fitted: Inertial, trainable, stderr, covariance, precision, dead):
    """A consistent fit's result in the model's terms (covariance: standard params)."""
    theta, rest = fitted.theta, fitted.rest
    size, nb = theta.size, theta.shape[0]
    # The Jacobian of the standard params in the unknowns; the others pass.
    step = jax.jacfwd(lambda x: _standard(x.reshape(theta.shape)))(theta.ravel())
    T = jax.scipy.linalg.block_diag(step, jnp.eye(covariance.shape[0] - size))
    inverse = jnp.linalg.solve(T, jnp.eye(T.shape[0]))
    # Unknowns that do not move the residuals carry a unit precision (see
    # `_covariance`): none here, so that the spectrum finds their directions.
    keep = ~np.asarray(dead)
    precision = inverse.T @ (precision * keep[:, None] * keep[None, :]) @ inverse
    dead = np.concatenate([np.zeros(size, bool), np.asarray(dead)[size:]])
    standard = ("body_mass",) if theta.ndim == 1 else _STANDARD
    names = [f"{n}[{b}]" for b in range(1, nb + 1) for n in standard]
    names += flat_names(eqx.filter(rest, trainable.rest))

    def observed(x):  # the mass, centre and principal moments of each body
        f = _fields(x.reshape(theta.shape), rest)
        parts = [f["body_mass"][1:], f["body_ipos"][1:].ravel()]
        if theta.ndim > 1:
            parts.append(jnp.linalg.eigvalsh(f["body_inertia"][1:]).ravel())
        return jnp.concatenate(parts)

    # Standard errors by the delta method (NaN for `body_iquat`, a rotation).
    g = jax.jacfwd(observed)(theta.ravel())
    # (Unknowns that do not move the motion have inf variances: left out here,
    # the fields they reach are named undetermined and given inf.)
    block = covariance[:size, :size]
    block = jnp.where(jnp.isfinite(block), block, 0.0)
    errors = np.sqrt(np.clip(np.diagonal(g @ block @ g.T), 0, None))
    fields = public(fitted)
    out = {k: np.zeros_like(v) for k, v in fields.items()}
    out["body_mass"][1:] = errors[:nb]
    if theta.ndim > 1:
        out["body_ipos"][1:] = errors[nb : 4 * nb].reshape(nb, 3)
        out["body_inertia"][1:] = errors[4 * nb :].reshape(nb, 3)
        out["body_iquat"][1:] = np.nan
    out.update({k: np.asarray(v) for k, v in stderr.rest.items() if k not in INERTIAL})
    trained = ("body_mass",) if theta.ndim == 1 else INERTIAL
    mask = {k: k in trained or v for k, v in trainable.rest.items()}
    fields, out = ({k: jnp.asarray(v) for k, v in d.items()} for d in (fields, out))
    return fields, mask, out, T @ covariance @ T.T, precision, dead, names


def undetermined(names: list[str]) -> list[str]:
    """The model's fields that the standard params `names` leave undetermined."""
    out = []
    for name in names:
        head, _, index = name.partition("[")
        if head not in _STANDARD:
            out.append(name)
            continue
        b = index.rstrip("]")
        fields = ["inertia", "ipos"] if head[0] == "m" else ["inertia"]
        out += [f"body_mass[{b}]"] * (head == "m")
        out += [f"body_{f}[{b}, {k}]" for f in fields for k in range(3)]
    return out
