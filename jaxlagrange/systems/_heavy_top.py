"""The heavy symmetric top on a fixed tip, in ZXZ Euler angles."""

import jax.numpy as jnp

from .. import rigid
from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "l": 0.5, "I1": 0.35, "I3": 0.2, "g": 9.81}


def _rotation(q, t):
    return rigid.euler_to_matrix(q, "ZXZ")


def _centre(q, t, params):
    """The centre of mass, a distance l up the symmetry axis (z up, tip at 0)."""
    return params["l"] * _rotation(q, t)[:, 2]


def _lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    # The moments about the tip less m l² are those about the centre of mass.
    transverse = params["I1"] - m * length**2
    inertia = jnp.stack([transverse, transverse, params["I3"]])
    kinetic = rigid.kinetic_energy(
        m, inertia, lambda q, t: _centre(q, t, params), _rotation, q, qd, t
    )
    return kinetic - m * g * _centre(q, t, params)[2]


def _points(q, t, params):
    """The tip, the centre of mass and a point on the rim (it shows the spin)."""
    centre = _centre(q, t, params)
    rim = centre + 0.5 * params["l"] * _rotation(q, t)[:, 0]
    return jnp.stack([jnp.zeros_like(centre), centre, rim])


@register("heavy_top", units=("rad",) * 3, point_names=("tip", "centre of mass", "rim"))
def heavy_top(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A heavy symmetric top spinning on a fixed tip, in ZXZ Euler angles.

    q = (φ, θ, ψ): precession about the vertical, nutation (the tilt of the
    symmetry axis from the vertical) and spin, R = R_z(φ) R_x(θ) R_z(ψ) from
    `jl.rigid.euler_to_matrix(q, "ZXZ")`. With I₁ the transverse moment about the
    tip and I₃ the axial one,

        L = ½ I₁ (θ̇² + φ̇² sin²θ) + ½ I₃ (ψ̇ + φ̇ cos θ)² − m g l cos θ,

    written with `jl.rigid.kinetic_energy` (the centre of mass at l along the
    axis, the moments about it I₁ − m l², I₁ − m l², I₃). φ and ψ are cyclic:
    p_φ and p_ψ = I₃ ω₃ are conserved, with the energy. Steady precession at
    φ̇ = Ω, θ̇ = 0 needs I₁ Ω² cos θ − I₃ ω₃ Ω + m g l = 0, and the upright
    (sleeping) top is stable when I₃² ω₃² > 4 I₁ m g l. The angles are singular at
    θ = 0 (upright): linearize there in other angles (`"XYZ"`, see the docs).

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m": 1.0, "l": 0.5, "I1": 0.35, "I3": 0.2, "g": 9.81}` (SI units; `I1`
        about the tip).
    - `q0`, `qd0`: initial (φ, θ, ψ) and (φ̇, θ̇, ψ̇); default tilted by θ = 0.3
        rad, spinning at ψ̇ = 20 rad/s, released without precession (it nutates).

    **Returns:** a `ReadySystem` with coordinates `("φ", "θ", "ψ")`; its positions
    are the tip, the centre of mass and a point on the rim, in 3-D (z up).

    **Example:**

    ```python
    top, q0, qd0 = jl.systems.heavy_top()
    traj = jl.simulate(top, q0, qd0, t1=2.0)
    ```
    """
    params = merge_params("heavy_top", _DEFAULTS, params)
    q0, qd0 = initial_state("heavy_top", q0, qd0, [0.0, 0.3, 0.0], [0.0, 0.0, 20.0])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(system, q0, qd0, "heavy_top", ("φ", "θ", "ψ"), points=_points)
