"""Coulomb friction at unilateral contacts: the modes and their switching.

A unilateral contact h ≥ 0 with a slip velocity s (`LagrangianSystem(slip=...)`)
is in one of three modes:

- free (h > 0 or released): no contact force, no friction;
- sticking (rolling): in contact with s = 0 held as a constraint row
  S q̈ = −ṡ-terms, S = ∂s/∂q̇, whose multiplier λ_T is the friction force along
  the slip direction; valid while |λ_T| ≤ μ_s λ_N;
- slipping with direction σ = ±1: in contact, the friction force −μ_k σ λ_N
  acts along S (see `_constraints._friction_dynamics`).

The mode is never read from the sign of s along the way (which chatters near
s = 0): each mode is kept through a smooth segment, and its end is an event
located by root finding (`_hybrid.py`):

- sticking ends when μ_s λ_N − |λ_T| falls through zero (`EVENT_SLIP`: it slips
  with σ = −sign λ_T, the direction the static friction was holding back), or
  when λ_N does (`EVENT_RELEASE`);
- slipping ends when σ s falls through zero: the contact is tried as sticking,
  and it sticks (`EVENT_STICK`) if then |λ_T| ≤ μ_s λ_N, else slips the other
  way (`EVENT_SLIP`); or when λ_N falls through zero (`EVENT_RELEASE`).

After every event, and at t0, the modes of all contacts are settled together
from the multipliers (`settle`), so simultaneous switches of several contacts
are taken in one event.
"""

import jax.numpy as jnp

from ._constraints import (
    Modes,
    _contact_tolerance,
    _friction_coefficients,
    no_modes as no_modes,
    settle as settle,
    slip_modes as slip_modes,
)
from ._custom_types import Array
from ._system import LagrangianSystem


def stop_slips(
    system: LagrangianSystem, q: Array, qd: Array, t: Array, modes: Modes, keep: Array
) -> Modes:
    """Slipping contacts whose slip velocity is ≈ 0 (|s| ≤ √eps) tried as sticking.

    At an event every contact whose slip stopped at the same instant is settled
    with it; `keep` (u,) marks the contacts whose mode the event itself set.
    """
    if system.slip is None:
        return modes
    s = system._slip(q, qd, t)
    stopped = ~modes.stick & (jnp.abs(s) <= _contact_tolerance(q.dtype)) & ~keep
    return Modes(modes.stick | stopped, jnp.where(stopped, 0.0, modes.direction))


def friction_values(
    system: LagrangianSystem,
    q: Array,
    qd: Array,
    t: Array,
    active: Array,
    modes: Modes,
    normal: Array,
    friction: Array,
    start: Array,
    initial: Array,
) -> Array:
    """The tangential event functions, positive while the mode holds, shape (u,).

    Sticking: μ_s λ_N − |λ_T|. Slipping: σ s / (t − t_s), the slip velocity along
    its direction divided by the time since the segment start t_s, so that a
    contact that starts slipping at s ≈ 0 does not trigger at once (`initial` at
    t_s). Free: +inf (never triggers).
    """
    _, mu_s = _friction_coefficients(system, active.shape[0], q.dtype)
    limit = mu_s * normal - jnp.abs(friction)
    s = system._slip(q, qd, t)
    later = t > start
    sliding = jnp.where(
        later, modes.direction * s / jnp.where(later, t - start, 1.0), initial
    )
    value = jnp.where(modes.stick, limit, sliding)
    return jnp.where(active, value, jnp.inf)


def initial_slip(system: LagrangianSystem, q: Array, qd: Array, t: Array, modes):
    """The slipping event functions at the segment start: σ s, at least √eps."""
    s = system._slip(q, qd, t)
    return jnp.maximum(modes.direction * s, _contact_tolerance(q.dtype))
