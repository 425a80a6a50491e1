"""A free rigid body (no torque), in unit-quaternion coordinates."""

import jax.numpy as jnp

from .. import rigid
from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"I1": 1.0, "I2": 2.0, "I3": 3.0}


def _lagrangian(p, pd, t, params):
    inertia = jnp.stack([params["I1"], params["I2"], params["I3"]])
    # ½ ωᵀ I ω, ω = `rigid.angular_velocity` of `quaternion_to_matrix` in closed form.
    omega = rigid.quaternion_angular_velocity(p, pd)
    kinetic = 0.5 * jnp.sum(inertia * omega**2)
    # The norm direction gets the mean moment: M = 4(GᵀIG + J ppᵀ) is then
    # regular and well conditioned; with p = r u, L = T(u, u̇) + 2J r² ṙ², so |p|
    # is decoupled and stays at 1 without a constraint (or its projections).
    return kinetic + rigid.quaternion_norm_term(jnp.mean(inertia), p, pd)


def _points(p, t, params):
    """The principal axes as a path: +e₁, centre, +e₂, centre, +e₃ (lengths ∝ I)."""
    axes = rigid.quaternion_to_matrix(p)
    moments = jnp.stack([params["I1"], params["I2"], params["I3"]])
    tips = (axes * (moments / jnp.max(moments))).T  # one tip per row
    centre = jnp.zeros(3, p.dtype)
    return jnp.stack([tips[0], centre, tips[1], centre, tips[2]])


# The drawn principal axes have lengths I_k / max I: dimensionless.
_AXES = ("axis 1", "centre", "axis 2", "centre", "axis 3")


@register("free_rigid_body", units=("1",) * 4, point_names=_AXES, length_unit="1")
def free_rigid_body(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A torque-free rigid body, in unit-quaternion coordinates q = p = (w, x, y, z).

    R = `jl.rigid.quaternion_to_matrix(p)` (body to space), the principal moments
    I₁, I₂, I₃, no gravity and no translation:

        L = ½ ωᵀ I ω + ½ J (2 p·ṗ)²,

    with ω the body angular velocity (`jl.rigid.quaternion_angular_velocity`) and
    J the mean of the moments in the term (`jl.rigid.quaternion_norm_term`) that
    makes the mass matrix regular. R and ω depend on p/|p| alone and the term
    decouples |p| (it moves as a free particle): started with |p| = 1 and
    p·ṗ = 0, |p| stays 1 to the solver's tolerance, with no constraint to
    project onto (add `jl.rigid.unit_quaternion` as `holonomic` to hold it to
    rounding). The body's ω obeys Euler's equations I ω̇ = (I ω) × ω; the energy and
    the angular momentum (|I ω| in the body, R I ω in space) are conserved, and a
    spin near the intermediate axis flips over and over (Dzhanibekov). For a unit
    p, ṗ = ½ p ⊗ (0, ω): at p = (1, 0, 0, 0), ṗ = (0, ω/2).

    **Arguments:**

    - `params`: overrides of the defaults `{"I1": 1.0, "I2": 2.0, "I3": 3.0}`.
    - `q0`, `qd0`: initial p and ṗ (|p| = 1 and p·ṗ = 0); default the
        identity, spinning at ω = (0.01, 2, 0) rad/s, nearly about the
        intermediate axis.

    **Returns:** a `ReadySystem` with coordinates `("w", "x", "y", "z")`; its
    positions are the tips of the principal axes joined through the centre, in 3-D.

    **Example:**

    ```python
    body, p0, pd0 = jl.systems.free_rigid_body()
    traj = jl.simulate(body, p0, pd0, t1=10.0)
    ```
    """
    params = merge_params("free_rigid_body", _DEFAULTS, params)
    q0, qd0 = initial_state(
        "free_rigid_body", q0, qd0, [1.0, 0.0, 0.0, 0.0], [0.0, 0.005, 1.0, 0.0]
    )
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(
        system, q0, qd0, "free_rigid_body", ("w", "x", "y", "z"), points=_points
    )
