"""Accelerations and Lagrange multipliers: the KKT system through its Schur complement.

With C = [G; A] stacking the holonomic Jacobian G = ∂g/∂q, the nonholonomic
A = ∂a/∂q̇ and the active unilateral rows ∂h/∂q, the equations of motion are

    M q̈ = f + Cᵀλ,    C q̈ = −b,

where b collects the velocity-product terms of g̈ (and of ȧ, ḧ). Through the
Schur complement S = C M⁻¹ Cᵀ,

    S λ = −b − C M⁻¹ f,    q̈ = M⁻¹(f + Cᵀλ),

solved by the system's mass strategy (`_mass`). Redundant rows (rank-deficient
C: a box flat on four corners, a planar four-bar's out-of-plane row) make S
singular: q̈ is the same for every solution (null(S) = null(Cᵀ)), and λ is the
least-norm one, the weight shared equally by symmetric contacts. Only an
inconsistent system is flagged.

Integrating C q̈ = −b keeps only the second (first, for nonholonomic rows)
derivative of the constraints at zero, so g and ġ drift with the integration
error. `simulate` projects the state back after every step (`_projection.py`),
or with `baumgarte=(α, β)` replaces the rows' right-hand side by
−b − 2α ċ − β² c (−b − α a for nonholonomic rows), so that drift decays as
c̈ + 2αċ + β²c = 0; at a consistent state the extra terms vanish.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp

from ._coefficients import friction_coefficients
from ._complementarity import held_set
from ._custom_types import Array, BoolScalar, ScalarLike
from ._eom import SINGULAR_MASS, scalar_where_small, unconstrained
from ._mass import Rows
from ._system import LagrangianSystem


class Dynamics(NamedTuple):
    """Everything the equations of motion give at one state."""

    accelerations: Array  # q̈, (n,)
    multipliers: Array  # (m + k + u,), zero for inactive unilateral rows
    constraint_matrix: Array | None  # C, (m + k + u, n); None without constraints
    singular_mass: BoolScalar
    singular_constraints: BoolScalar
    # The friction force along the slip direction at each contact, (u,) or (u, 2)
    # as s: λ_T while sticking, −μ_k λ_N sign(s) (or s/|s|) while slipping, 0
    # when free. None without `slip`.
    friction: Array | None = None

    def undefined(self) -> list:
        """The checks that q̈ is defined here: M regular, the constraints independent."""
        return [
            (self.singular_mass, SINGULAR_MASS),
            (self.singular_constraints, SINGULAR_CONSTRAINTS),
        ]


class Modes(NamedTuple):
    """The friction modes of the unilateral contacts (those in `active`)."""

    stick: Array  # (u,) bool: s = 0 held as a constraint (sticking, rolling)
    # Slipping: (u,) ±1, sign(s); (u, 2) for 3-D contacts, the unit slip
    # direction at the segment start (`slip_direction`). 0 elsewhere.
    direction: Array


def per_contact(mask: Array, x: Array) -> Array:
    """A (u,) array shaped to broadcast against x, (u,) or (u, 2, ...)."""
    return mask.reshape(mask.shape + (1,) * (x.ndim - 1))


def unit(x: Array, tol: float = 0.0) -> tuple[Array, Array]:
    """x/|x| and |x| per row of x (u, 2); 0 for both where |x| ≤ tol, with finite
    derivatives there (x = 0 included)."""
    norm2 = jnp.sum(x**2, axis=-1)
    big = norm2 > tol**2
    norm = jnp.sqrt(jnp.where(big, norm2, 1.0))
    return jnp.where(big[:, None], x / norm[:, None], 0.0), jnp.where(big, norm, 0.0)


def slip_direction(s: Array, anchor: Array, tol: float) -> Array:
    """The friction direction of slipping 3-D contacts: s/|s|, but the anchor d
    (the direction at the segment start) where |s| ≤ tol, and turned by π where
    s·d < 0. The turn continues s/|s| smoothly through a stop (s passing zero
    along a line), so that the slip's event function (`_friction._sliding`)
    changes sign there with a smooth solution about the root, as σ s does in
    the plane."""
    e, norm = unit(s, tol)
    side = jnp.where(jnp.sum(s * anchor, axis=-1) < 0, -1.0, 1.0)
    return jnp.where((norm > 0)[:, None], side[:, None] * e, anchor)


class ConstraintValues(NamedTuple):
    """The constraint functions and their first time derivatives at a state."""

    g: Array | None  # holonomic, (m,)
    gd: Array | None  # ġ
    a: Array | None  # nonholonomic, (k,)
    h: Array | None  # unilateral, (u,)
    hd: Array | None  # ḣ


def constraint_values(
    system: LagrangianSystem, q: Array, qd: Array, t: Array
) -> ConstraintValues:
    """g, ġ, a, h and ḣ at a state (None where the system has no such constraint)."""
    stack = system.constraints
    g, gd = stack.values(stack.positional, q, qd, t)
    a, _ = stack.values(stack.velocity_level, q, qd, t)
    h, hd = stack.values(stack.one_sided, q, qd, t)
    return ConstraintValues(g, gd, a, h, hd)


def gap_rates(system: LagrangianSystem, q: Array, qd: Array, t: Array, qdd: Array):
    """h, ḣ and ḧ of the unilateral rows, ḧ under the accelerations q̈."""
    one = jnp.ones_like(t)

    def rate(q, qd, t):
        return jax.jvp(system.constraints.gaps, (q, t), (qd, one))

    (h, hd), (_, hdd) = jax.jvp(rate, (q, qd, t), (qd, qdd, one))
    return h, hd, hdd


def num_rows(system: LagrangianSystem, q: Array, qd: Array, t: Array):
    """(m, k, u): the numbers of holonomic, nonholonomic and unilateral rows."""
    values = eqx.filter_eval_shape(constraint_values, system, q, qd, t)
    return tuple(0 if x is None else x.shape[0] for x in (values.g, values.a, values.h))


def num_unilateral(system: LagrangianSystem, q: Array, t: Array) -> int:
    stack = system.constraints
    if not stack.one_sided:
        return 0
    return jax.eval_shape(stack.gaps, q, t).shape[0]


def _constraint_rows(system, q, qd, t, active, baumgarte):
    """The rows of C (bilateral, then one-sided), C q̈'s right side, the active rows."""
    alpha, beta = (0.0, 0.0) if baumgarte is None else baumgarte
    stack = system.constraints
    rows, rhs, masks = [], [], []
    for kind in stack.kinds:
        jac, target, value = kind.rows(q, qd, t, alpha, beta)
        rows.append(jac)
        rhs.append(target)
        if active is None or not kind.one_sided:
            masks.append(jnp.ones(value.shape, bool))
    if active is not None and stack.one_sided:
        masks.append(active)
    return rows, jnp.concatenate(rhs), jnp.concatenate(masks)


def dynamics(
    system: LagrangianSystem,
    q: Array,
    qd: Array,
    t: Array,
    *,
    active: Array | None = None,
    baumgarte: tuple[ScalarLike, ScalarLike] | None = None,
    modes: Modes | None = None,
) -> Dynamics:
    """q̈ and the multipliers; singularities are flags, never raised (traced values)."""
    # active: (u,) bool, None: all; baumgarte: (α, β), None: exact; modes: None: stick.
    stack = system.constraints
    if not stack.kinds:
        qdd, singular = unconstrained(system, q, qd, t)
        none = jnp.zeros((0,), q.dtype)
        return Dynamics(qdd, none, None, singular, jnp.array(False))
    if stack.friction is not None:
        fn, args = _friction_dynamics, (active, baumgarte, modes)
    else:
        fn, args = _constrained_dynamics, (active, baumgarte)
    out = scalar_where_small(fn, system, q, qd, t, *args)
    # In the state's dtype: float64 params must not promote a float32 state.
    friction = None if out.friction is None else out.friction.astype(q.dtype)
    return out._replace(
        accelerations=out.accelerations.astype(q.dtype),
        multipliers=out.multipliers.astype(q.dtype),
        friction=friction,
    )


def _constrained_dynamics(system, q, qd, t, active, baumgarte) -> Dynamics:
    factor, f = system.mass_strategy.terms(system, q, qd, t)
    rows, target, mask = _constraint_rows(system, q, qd, t, active, baumgarte)
    matrix = jnp.concatenate(rows)  # formed only where the strategy uses it
    kkt = factor.constrain(Rows(velocity_rows(system, q, qd, t), matrix), f)
    # q̈ from any λ (Dᵀλ is the same): where only q̈ is read, the least-norm λ's
    # null-space correction is dead code (q̈ of the Cartesian pendulum 2x faster).
    basic, singular_constraints = kkt.multipliers(target, mask, least=False)
    qdd, failed = kkt.solution(basic)
    lam, _ = kkt.multipliers(target, mask)
    singular_mass = factor.singular | failed
    return Dynamics(qdd, lam, matrix, singular_mass, singular_constraints)


def velocity_rows(
    system: LagrangianSystem, q: Array, qd: Array, t: Array, one_sided: bool = True
):
    """v ↦ C v, C = [G; A; H] = [∂g/∂q; ∂a/∂q̇; ∂h/∂q], by JVPs: no Jacobian formed."""
    stack = system.constraints
    kinds = stack.kinds if one_sided else stack.bilateral

    def rows(v):
        v = v.astype(q.dtype)  # a float32 state beside float64 params
        return jnp.concatenate([kind.product(q, qd, t, v) for kind in kinds])

    return rows


def velocity_rates(
    system: LagrangianSystem, q: Array, qd: Array, t: Array, one_sided: bool = True
) -> Array:
    """The rates [ġ; a; ḣ] (ḣ with `one_sided`) in the rows of `velocity_rows`."""
    values = constraint_values(system, q, qd, t)
    rates = (values.gd, values.a, values.hd if one_sided else None)
    return jnp.concatenate([x for x in rates if x is not None])


# Coulomb friction: the KKT system with the slip rows.
#
# Contact i in contact (`active`) either sticks, s_i = 0 held by the row
# S_i q̈ = −b_s with S = ∂s/∂q̇ and its multiplier λ_T (the friction force along
# the slip direction), or slips with direction σ_i = sign(s_i): then its normal
# force λ_N acts along H_i and the friction force −μ_k σ_i λ_N along S_i, so
# its force direction is D_i = H_i − μ_k σ_i S_i while its constraint row stays
# H_i. With C the constraint rows and D the force directions (D = C but for the
# slipping contacts),
#
#     M q̈ = f + Dᵀλ,    C q̈ = −b    ⇒    (C M⁻¹ Dᵀ) λ = −b − C M⁻¹ f,
#
# a non-symmetric (LU-solved) Schur complement C M⁻¹ Dᵀ (`_mass`). A 3-D
# contact (s of shape (u, 2)) has two slip rows, λ_T ∈ R², and slipping
# D_i = H_i − μ_k e_i·S_i with e_i = s_i/|s_i| (`slip_direction`).
# The mode of each contact is fixed here; `_friction.py` decides it from the
# multipliers and locates the switches as events.


def _friction_dynamics(system, q, qd, t, active, baumgarte, modes) -> Dynamics:
    factor, f = system.mass_strategy.terms(system, q, qd, t)
    rows, target, mask = _constraint_rows(system, q, qd, t, active, baumgarte)
    u, n = rows[-1].shape  # the unilateral rows come last
    bilateral = mask.shape[0] - u
    active = mask[bilateral:]
    alpha = 0.0 if baumgarte is None else baumgarte[0]
    slip = system.constraints.friction
    s_rows, s_target, s = slip.rows(q, qd, t, alpha, 0.0)
    if modes is None:
        modes = Modes(jnp.ones((u,), bool), jnp.zeros(s.shape, q.dtype))
    stick = modes.stick & active
    slipping = active & ~modes.stick
    mu_k, _ = friction_coefficients(system, u, q.dtype)
    direction = modes.direction
    if s.ndim == 2:
        direction = slip_direction(s, direction, contact_tolerance(q.dtype))
    slide = jnp.where(per_contact(slipping, s), per_contact(mu_k, s) * direction, 0.0)

    def along(x):  # Σ_k slide_k x_k per contact, x of shape (u[, 2][, n])
        if s.ndim == 1:
            return per_contact(slide, x) * x
        return jnp.sum(slide.reshape(slide.shape + (1,) * (x.ndim - 2)) * x, axis=1)

    matrix = jnp.concatenate([*rows, s_rows.reshape(-1, n)])
    target = jnp.concatenate([target, s_target.reshape(-1)])
    mask = jnp.concatenate([mask, jnp.repeat(stick, s.size // u)])
    directions = matrix.at[bilateral : bilateral + u].add(-along(s_rows))
    constraint_rows = velocity_rows(system, q, qd, t)

    def slip_rows(v):  # S v
        return slip.product(q, qd, t, v)

    def rows_of(v):  # C v
        return jnp.concatenate([constraint_rows(v), slip_rows(v).reshape(-1)])

    def directions_of(v):  # D v: a slipping contact's force has H − μ_k σ S
        c, sv = constraint_rows(v), slip_rows(v)
        c = c.at[bilateral : bilateral + u].add(-along(sv))
        return jnp.concatenate([c, sv.reshape(-1)])

    kkt = factor.constrain(
        Rows(rows_of, matrix), f, directions=Rows(directions_of, directions)
    )
    lam, singular = kkt.multipliers(target, mask)
    qdd, failed = kkt.solution(lam)
    singular_mass = factor.singular | failed
    bound = bilateral + u
    normal = per_contact(lam[bilateral:bound], s)
    tangential = lam[bound:].reshape(s.shape)
    friction = jnp.where(per_contact(stick, s), tangential, -slide * normal)
    # The multipliers as without friction: bilateral, then the normal forces.
    return Dynamics(qdd, lam[:bound], matrix[:bound], singular_mass, singular, friction)


def contact_tolerance(dtype) -> float:
    return float(jnp.finfo(dtype).eps) ** 0.5


def contact_set(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> Array:
    """The unilateral constraints in contact at a state: of the rows touching
    (h ≤ √eps, ḣ ≤ √eps), those held with λ ≥ 0 and ḧ ≥ 0 off them
    (`_complementarity`)."""
    if num_unilateral(system, q, t) == 0:
        return jnp.zeros((0,), bool)
    return held_contacts(system, q, qd, t, touching(system, q, qd, t))[0]


def touching(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> Array:
    """The unilateral rows at h ≈ 0 not moving apart: h ≤ √eps, ḣ ≤ √eps."""
    values = constraint_values(system, q, qd, t)
    tol = contact_tolerance(q.dtype)
    return (values.h <= tol) & (values.hd <= tol)


def held_contacts(system, q, qd, t, given, modes=None, switch=None):
    """The rows held of `given` and those touching, with their friction modes:
    λ_N ≥ 0 on them, ḧ ≥ 0 off them (`_complementarity.held_set`)."""
    offset = num_bilateral(system, q, qd, t)

    def solve(held, modes):
        dyn = dynamics(system, q, qd, t, active=held, modes=modes)
        _, _, hdd = gap_rates(system, q, qd, t, dyn.accelerations)
        return dyn.multipliers[offset:], hdd, dyn.friction

    candidates = given | touching(system, q, qd, t)
    tol = contact_tolerance(q.dtype)
    return held_set(solve, candidates, given, tol, q.dtype, modes, switch)


def num_bilateral(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> int:
    m, k, _ = num_rows(system, q, qd, t)
    return m + k


SINGULAR_CONSTRAINTS = (
    "The constraint Jacobian C = [∂g/∂q; ∂a/∂qd; ∂h/∂q] is rank-deficient at this "
    "state and its rows contradict each other or are degenerate here (redundant "
    "rows that agree are solved, least-norm; `normal_modes` needs independent "
    "rows). Remove the redundant ones."
)
