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

A 3-D contact (s of shape (u, 2), a friction disc) sticks with λ_T ∈ R² while
|λ_T| ≤ μ_s λ_N and slips against λ_T when |λ_T| reaches μ_s λ_N. Slipping,
its friction −μ_k λ_N s/|s| follows s; its mode keeps the unit direction d of
s at the segment start (re-read at every event). |s| only touches zero at a
stop, but s passes zero along a line, and the friction direction, turned by π
past the stop (`_constraints.slip_direction`), continues smoothly there, so
that s·d crosses zero. The event function is s·d − |s × d|/√3, positive while
s lies within 60° of d: it crosses zero at a stop within that cone (where |s|
is within the solver's resolution the contact is tried as sticking), and
where the slip turns 60° away from d without stopping (a resolved |s|: it
slips on with d re-read, an `EVENT_SLIP`), so that a stop is never approached
square to d (where s·d would only touch zero).

A slip below the solver's resolution of s (`slip_resolution`: its tolerance on
each velocity, at least √eps) has no resolved direction: s/|s| turns at ~|ṡ|/|s|,
faster than the steps follow, and would re-anchor again and again (a sphere on
an incline: three times in 3e-8 s). As with a rebound below `atol`, it stops. A
contact that starts slipping from such a slip keeps its direction from λ_T and
stops only once σ s falls below minus the resolution (`slip_offset`).
"""

import jax
import jax.numpy as jnp

from ._coefficients import friction_coefficients
from ._constraints import (
    Modes,
    contact_tolerance,
    held_contacts,
    per_contact,
    touching,
    unit,
)
from ._custom_types import Array
from ._system import LagrangianSystem


def stop_slips(system: LagrangianSystem, q, qd, t, modes: Modes, keep, tolerances):
    """Slipping contacts (not `keep`) whose slip stopped (`slip_modes`), as sticking."""
    if system.constraints.friction is None:
        return modes
    stopped = ~modes.stick & slip_modes(system, q, qd, t, tolerances).stick & ~keep
    direction = jnp.where(per_contact(stopped, modes.direction), 0.0, modes.direction)
    return Modes(modes.stick | stopped, direction)


def _size(friction: Array) -> Array:
    """|F| per contact, (u,), of friction forces (u,) or (u, 2)."""
    return jnp.abs(friction) if friction.ndim == 1 else unit(friction)[1]


def _against(friction: Array) -> Array:
    """The slip direction that the friction forces (u,) or (u, 2) oppose."""
    return -jnp.sign(friction) if friction.ndim == 1 else -unit(friction)[0]


def _sliding(direction: Array, s: Array) -> Array:
    """σ s, or s·d − |s × d|/√3 for 3-D contacts (module docstring): positive
    while the contacts slip along their direction."""
    if s.ndim == 1:
        return direction * s
    across = s[:, 0] * direction[:, 1] - s[:, 1] * direction[:, 0]
    return jnp.sum(direction * s, axis=-1) - jnp.abs(across) / 3**0.5


def friction_values(args, q, qd, t, normal, friction, divided: bool) -> Array:
    """The tangential event functions of a segment (`args`), positive while the
    mode holds, (u,). Sticking: μ_s λ_N − |λ_T|. Slipping: (σ s + r) / (t − t_s)
    (3-D: `_sliding`, r: `slip_offset`), so that a contact that starts slipping at
    s ≈ 0 does not trigger at once (at t_s: σ s + r, at least √eps); not
    `divided`: σ s + r. Free: +inf (never triggers)."""
    system, active, modes, start = args.system, args.active, args.modes, args.start
    _, mu_s = friction_coefficients(system, active.shape[0], q.dtype)
    limit = mu_s * normal - _size(friction)
    sliding = _sliding(modes.direction, system.constraints.friction(q, qd, t))
    sliding = sliding + args.slip_offset
    if divided:
        later = t > start
        at_start = jnp.maximum(sliding, contact_tolerance(q.dtype))
        sliding = jnp.where(later, sliding / jnp.where(later, t - start, 1.0), at_start)
    value = jnp.where(modes.stick, limit, sliding)
    return jnp.where(active, value, jnp.inf)


def slip_offset(system: LagrangianSystem, q, qd, t, modes: Modes, tolerances) -> Array:
    """r per contact, (u,): `slip_resolution` for a 3-D contact that slips from a
    slip below it, else 0. Its s/|s| is noise there, and s may be held at zero
    by other contacts that stick (a foot flat on the floor whose heel's friction
    is at its limit and toe's within): it stops when σ s falls below −r."""
    if modes.direction.ndim == 1:  # planar, or no friction
        return jnp.zeros(modes.stick.shape, q.dtype)
    resolution = slip_resolution(system, q, qd, t, tolerances)
    size = unit(system.constraints.friction(q, qd, t))[1]
    unresolved = ~modes.stick & (size <= resolution)
    return jnp.where(unresolved, resolution, 0.0).astype(q.dtype)


def no_modes(u: int, dtype) -> Modes:
    """All contacts sticking (the modes of a system without friction are unused)."""
    return Modes(jnp.ones((u,), bool), jnp.zeros((u,), dtype))


def slip_modes(system: LagrangianSystem, q, qd, t, tolerances=None) -> Modes:
    """The modes read from s: sticking where |s| ≤ √eps, or for 3-D contacts given
    the solver's (rtol, atol) where |s| ≤ `slip_resolution`, else slipping along s."""
    if system.constraints.friction is None:
        return no_modes(system.constraints.gaps(q, t).shape[0], q.dtype)
    s = system.constraints.friction(q, qd, t)
    if s.ndim == 2:
        direction, size = unit(s)
        stick = size <= slip_resolution(system, q, qd, t, tolerances)
        return Modes(stick, jnp.where(stick[:, None], 0.0, direction).astype(q.dtype))
    stick = jnp.abs(s) <= contact_tolerance(q.dtype)
    return Modes(stick, jnp.where(stick, 0.0, jnp.sign(s)).astype(q.dtype))


def settle(
    system: LagrangianSystem, q, qd, t, active, modes: Modes, tolerances=None
) -> tuple[Array, Modes]:
    """The contacts and modes consistent with the multipliers at a state.

    Of `active` and the rows touching, those held with λ_N ≥ 0 and the others
    not sinking (`_constraints.held_contacts`); sticking contacts whose friction
    would exceed μ_s λ_N slip against λ_T. Rows that join take their modes from
    s (`slip_modes`, with the solver's `tolerances`). Slipping 3-D contacts with
    a resolved s then take d = s/|s| (the segment's anchor); below it d stays
    (against λ_T after a switch), as s/|s| is noise there.
    """
    if system.constraints.friction is None:
        return held_contacts(system, q, qd, t, active)[0], modes
    _, mu_s = friction_coefficients(system, active.shape[0], q.dtype)
    fresh = slip_modes(system, q, qd, t, tolerances)
    modes = Modes(
        jnp.where(active, modes.stick, fresh.stick),
        jnp.where(
            per_contact(active, fresh.direction), modes.direction, fresh.direction
        ),
    )

    def exceeding(held, modes, normal, friction):
        exceed = held & modes.stick & (_size(friction) > mu_s * normal)
        direction = jnp.where(
            per_contact(exceed, friction), _against(friction), modes.direction
        )
        return Modes(modes.stick & ~exceed, direction), jnp.any(exceed)

    active, modes = held_contacts(system, q, qd, t, active, modes, exceeding)
    if fresh.direction.ndim == 1:
        return active, modes
    resolved = (~modes.stick & ~fresh.stick)[:, None]
    anchor = jnp.where(resolved, fresh.direction, modes.direction)
    return active, modes._replace(direction=anchor)


def slip_resolution(system: LagrangianSystem, q, qd, t, tolerances) -> Array:
    """The least |s| per contact that the solver's (rtol, atol) resolve (module
    docstring), at least √eps; √eps without `tolerances`."""
    if tolerances is None:
        return contact_tolerance(q.dtype)
    rtol, atol = tolerances  # |Σⱼ |∂s/∂q̇ⱼ| (atol + rtol |q̇ⱼ|)|
    q, qd = jax.lax.stop_gradient((q, qd))  # a threshold: no derivative
    rows = jax.jacfwd(system.constraints.friction, argnums=1)(q, qd, t)
    error = jnp.abs(rows) @ (atol + rtol * jnp.abs(qd))
    size = unit(error.astype(q.dtype))[1]
    return jnp.maximum(size, contact_tolerance(q.dtype))


def switch(
    system: LagrangianSystem, q, qd, t, modes: Modes, onehot, friction, tolerances
) -> Modes:
    """The modes to settle after a friction event of contact `onehot`, from the
    friction forces before it; `tolerances`: the solver's (rtol, atol).

    A sticking contact slips against its friction force; a slipping one whose slip
    stopped is tried as sticking (a 3-D one whose slip only turned 60° from its
    direction, |s| above `slip_resolution`, slips on).
    """
    stopped = ~modes.stick
    if friction.ndim == 2:
        stopped = stopped & slip_modes(system, q, qd, t, tolerances).stick
    slips = per_contact(onehot & modes.stick, friction)
    direction = jnp.where(per_contact(onehot & stopped, friction), 0.0, modes.direction)
    return Modes(
        jnp.where(onehot, stopped, modes.stick),
        jnp.where(slips, _against(friction), direction),
    )


def contact_modes(system: LagrangianSystem, q: Array, qd: Array, t: Array):
    """The contacts at a state of a system with friction, and their modes: the
    rows touching (h ≈ 0, ḣ ≈ 0), settled (`settle`) from the modes read from s."""
    touching_rows = touching(system, q, qd, t)
    return settle(system, q, qd, t, touching_rows, slip_modes(system, q, qd, t))
