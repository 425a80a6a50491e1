"""Impulses: the velocity jump of an instantaneous blow or impact.

Impulses follow the textbook's impulsive Lagrange equations: over an instant
the coordinates do not move and the momenta jump, M Δq̇ = P + CᵀΛ, where P is an
applied generalized impulse and Λ the constraint impulses. Λ is fixed by the
velocity-level constraints after the jump: the holonomic and nonholonomic ones
stay satisfied (ġ = 0, a = 0), contacts keep ḣ = 0, and an impacting constraint
rebounds with ḣ⁺ = −e ḣ⁻ for its coefficient of restitution e. This is the
KKT system of the equations of motion with P in place of f: the Schur system
(C M⁻¹ Cᵀ) Λ = w − ċ − C M⁻¹P for the wanted rates w and the current ones ċ,
and Δq̇ = M⁻¹(P + CᵀΛ), solved by the system's mass strategy (`_mass`), formed
or matrix-free. A contact whose impulse would pull (Λ < 0) lets go instead;
redundant contacts (a flat foot) share the impulse by least norm.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ._coefficients import checked_values
from ._complementarity import held_set
from ._constraints import (
    SINGULAR_CONSTRAINTS,
    contact_set,
    contact_tolerance,
    num_bilateral,
    velocity_rates,
    velocity_rows,
)
from ._custom_types import Array, BoolScalar, ScalarLike, Vector, VectorLike
from ._eom import NON_FINITE_STATE, SINGULAR_MASS, is_finite_state
from ._errors import first_error
from ._mass import Rows
from ._system import LagrangianSystem, as_state


class _Impulse(NamedTuple):
    velocities: Array  # q̇ after the impulse, (n,)
    contact: Array  # the unilateral rows that took an impulse, (u,) bool
    singular_mass: BoolScalar
    singular_constraints: BoolScalar


def impulse_jump(
    system: LagrangianSystem,
    q: Array,
    qd: Array,
    t: Array,
    impulse: Array,
    contact: Array,
    target: Array,
    near: Array | None = None,
    plastic: Array | None = None,
) -> _Impulse:
    """q̇⁺ from M Δq̇ = P + CᵀΛ: bilateral rates 0, `contact` rows' rates `target`;
    rows of `contact` or `near` left separating no faster than `plastic` are
    held at ḣ⁺ = 0."""
    factor = system.mass_strategy.factor(system, q, qd, t)
    if not system.has_constraints:
        jump, failed = factor.solve(impulse)
        velocities = qd + jump.astype(qd.dtype)
        return _Impulse(velocities, contact, factor.singular | failed, jnp.array(False))
    rows = velocity_rows(system, q, qd, t)
    kkt = factor.constrain(Rows(rows), impulse)
    bilateral = num_bilateral(system, q, qd, t)
    rates = velocity_rates(system, q, qd, t)
    wanted = jnp.concatenate([jnp.zeros(bilateral, q.dtype), target]) - rates
    ones = jnp.ones(bilateral, bool)
    near = jnp.zeros_like(contact) if near is None else near

    def solve(contact):
        lam, singular = kkt.multipliers(wanted, jnp.concatenate([ones, contact]))
        jump, failed = kkt.solution(lam)
        return lam, singular, jump, failed

    def rates_after(contact, _):
        lam, _, jump, _ = solve(contact)
        return lam[bilateral:], (rates + rows(jump))[bilateral:] - target, None

    # The contact rows held (`_complementarity`): rows in `near` (h ≈ 0) that the
    # jump would drive inwards join, rows whose impulse would pull let go.
    # Redundant rows (a flat foot) share the impulse by least norm (`_mass`).
    tol = contact_tolerance(q.dtype)
    candidates = contact | near
    contact, _ = held_set(rates_after, candidates, contact, tol, q.dtype)
    if plastic is not None:
        # A row that the impulse leaves separating too slowly to rise above the
        # solver's resolution would land again at once, and its impulse would
        # lift another such row: plastic impacts of several rows accumulate
        # (the hopper's foot and joint limits). Such rows are held too, the
        # same rule as a landing row's rebound (`_hybrid._landing`).
        first = solve(contact)
        separating = (rates + rows(first[2]))[bilateral:]
        held = contact | (candidates & (separating <= plastic))
        # Only a row the rule adds needs another solve.
        _, singular, jump, failed = jax.lax.cond(
            jnp.any(held & ~contact), solve, lambda _: first, held
        )
        contact = held
    else:
        _, singular, jump, failed = solve(contact)
    singular_mass = factor.singular | failed
    return _Impulse(qd + jump.astype(qd.dtype), contact, singular_mass, singular)


@eqx.filter_jit
def _checked_impulse(system, q, qd, t, impulse):
    system = checked_values(system)
    contact = contact_set(system, q, qd, t)  # (0,) without unilateral constraints
    target = jnp.zeros(contact.shape, q.dtype)
    out = impulse_jump(system, q, qd, t, impulse, contact, target)
    return first_error(
        out.velocities,
        [
            (
                ~(is_finite_state(q, qd, t) & jnp.all(jnp.isfinite(impulse))),
                NON_FINITE_STATE,
            ),
            (out.singular_mass, SINGULAR_MASS),
            (out.singular_constraints, SINGULAR_CONSTRAINTS),
        ],
    )


def apply_impulse(
    system: LagrangianSystem,
    q: VectorLike,
    qd: VectorLike,
    t: ScalarLike,
    impulse: VectorLike,
) -> Vector:
    """The velocities just after a generalized impulse P acts at a state.

    Over an instant the coordinates do not move and the momenta jump:
    M Δq̇ = P + CᵀΛ, where the constraint impulses Λ keep the holonomic and
    nonholonomic constraints satisfied at velocity level (ġ = 0 and a = 0
    afterwards). Unilateral constraints in contact (`contact_set`) act as plastic
    contacts: they keep ḣ = 0 if their impulse pushes, and let go otherwise.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q`, `qd`: coordinates and velocities just before the impulse, shape (n,).
    - `t`: the time, a scalar.
    - `impulse`: the generalized impulse P = ∫ Q dt, shape (n,) (for a force F on
        a point r(q), Pⱼ = F·∂r/∂qⱼ integrated over the blow).

    **Returns:** the velocities q̇⁺ just after, shape (n,).

    **Raises:** `ValueError` at trace time for wrong shapes (`impulse` must have
    the shape of `q`); under `jax.jit` too, an error when the mass matrix is
    singular, the constraints are inconsistent, or the state or impulse is
    not finite.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    # A unit mass on a circle of radius 1, struck sideways at the bottom.
    pendulum = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * jnp.sum(qd**2) - 9.81 * q[1],
        holonomic=lambda q, t: jnp.array([jnp.sum(q**2) - 1.0]),
    )
    q, qd = jnp.array([0.0, -1.0]), jnp.zeros(2)
    jl.apply_impulse(pendulum, q, qd, 0.0, jnp.array([2.0, 5.0]))  # [2.0, 0.0]
    ```
    """
    q, qd, t = as_state(q, qd, t)
    impulse = jnp.asarray(impulse)
    if impulse.shape != q.shape:
        raise ValueError(
            f"`impulse` must have shape {q.shape} (the shape of q), got shape "
            f"{impulse.shape}."
        )
    return _checked_impulse(system, q, qd, t, impulse.astype(q.dtype))
