"""Constraint kinds, each one class that owns its residual, rows and side.

A kind holds the system and evaluates the user's function of its name through
it (as diffrax's `ODETerm.vf` its `vector_field`): position-level c(q, t)
(holonomic g = 0, unilateral h ≥ 0) or velocity-level c(q, q̇, t), affine in
q̇ (nonholonomic a = 0; the slip velocities s of friction). Each answers c and
ċ (`values`), its block of C q̈ = −b − 2α ċ − β² c (velocity level −b − α a)
(`rows`), v ↦ C v by one JVP (`product`) and ∂c/∂t. `Constraints`
(`system.constraints`) stacks them in row order, bilateral before one-sided:
the rest of the package asks it, never a kind by name. A new equality kind is
a class here and an entry in `Constraints.__init__`.
"""

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from ._custom_types import Array
from ._validate import check_affine, returned


def position_rows(fn, q: Array, qd: Array, t: Array):
    """For c(q, t): the Jacobian ∂c/∂q, the term b of c̈ = (∂c/∂q) q̈ + b, c and ċ."""
    one = jnp.ones((), t.dtype)

    def rate(q, t):
        return jax.jvp(fn, (q, t), (qd, one))[1]

    value, velocity = jax.jvp(fn, (q, t), (qd, one))
    jac = jax.jacfwd(fn)(q, t)
    _, b = jax.jvp(rate, (q, t), (qd, one))
    return jac, b, value, velocity


class AbstractKind(eqx.Module):
    """A kind of constraint: the system's user function `name`, evaluated."""

    system: Any
    name: eqx.AbstractClassVar[str]  # the `LagrangianSystem` field holding it
    one_sided: eqx.AbstractClassVar[bool]  # c ≥ 0 (else c = 0)
    positional: eqx.AbstractClassVar[bool]  # c(q, t) (else c(q, q̇, t))

    @property
    def fn(self):
        """The user's function."""
        return getattr(self.system, self.name)

    def __call__(self, *args) -> Array:
        """c(q, t) or c(q, q̇, t), shape (rows,)."""
        out = jnp.asarray(self.system.call(self.fn, *args))
        what = "a 1-D array (one entry per constraint)"
        return returned(self.name, out, out.ndim == 1, what)


class _AbstractPositionKind(AbstractKind):
    positional = True

    def residual(self, q: Array, qd: Array, t: Array) -> Array:
        return self(q, t)

    def values(self, q: Array, qd: Array, t: Array) -> tuple[Array, Array]:
        return jax.jvp(self, (q, t), (qd, jnp.ones((), t.dtype)))

    def rows(self, q, qd, t, alpha, beta) -> tuple[Array, Array, Array]:
        jac, b, c, cd = position_rows(self, q, qd, t)
        return jac, -b - 2 * alpha * cd - beta**2 * c, c

    def product(self, q: Array, qd: Array, t: Array, v: Array) -> Array:
        return jax.jvp(lambda q: self(q, t), (q,), (v,))[1]

    def time_derivative(self, q: Array, qd: Array, t: Array) -> Array:
        return jax.jacfwd(self, argnums=1)(q, t)


class _AbstractVelocityKind(AbstractKind):
    positional = False
    one_sided = False

    def residual(self, q: Array, qd: Array, t: Array) -> Array:
        return self(q, qd, t)

    def values(self, q: Array, qd: Array, t: Array) -> tuple[Array, Array]:
        a = self(q, qd, t)
        return a, a

    def rows(self, q, qd, t, alpha, beta) -> tuple[Array, Array, Array]:
        # A = ∂a/∂q̇ and the term b of ȧ = A q̈ + b (a is affine in q̇).
        jac = jax.jacfwd(self, argnums=1)(q, qd, t)
        tangents = (qd, jnp.zeros_like(qd), jnp.ones((), t.dtype))
        a, b = jax.jvp(self, (q, qd, t), tangents)
        return jac, -b - alpha * a, a

    def product(self, q: Array, qd: Array, t: Array, v: Array) -> Array:
        return jax.jvp(lambda qd: self(q, qd, t), (qd,), (v,))[1]

    def time_derivative(self, q: Array, qd: Array, t: Array) -> Array:
        return jax.jacfwd(self, argnums=2)(q, qd, t)

    def check_affine(self, q: Array, qd: Array, t: Array) -> Array:
        """`q`, with an error unless the kind is affine in q̇ at this state."""
        return check_affine(self.name, self, q, qd, t, q)


class Holonomic(_AbstractPositionKind):
    """g(q, t) = 0."""

    name = "holonomic"
    one_sided = False


class Unilateral(_AbstractPositionKind):
    """h(q, t) ≥ 0: contacts and limits."""

    name = "unilateral"
    one_sided = True


class Nonholonomic(_AbstractVelocityKind):
    """a(q, q̇, t) = 0, affine in q̇."""

    name = "nonholonomic"


class Slip(_AbstractVelocityKind):
    """Slip velocities s(q, q̇, t) at the one-sided rows: (u,) planar, (u, 2) in 3-D."""

    name = "slip"

    def __call__(self, q: Array, qd: Array, t: Array) -> Array:
        out = jnp.asarray(self.system.call(self.fn, q, qd, t))
        u = jax.eval_shape(self.system.constraints.gaps, q, t).shape
        what = (
            "one slip velocity per unilateral constraint, or two (a tangent "
            f"basis): shape {(*u, 2)} or shape {u}"
        )
        return returned("slip", out, out.shape in (u, (*u, 2)), what)


def _stacked(kinds, *args) -> Array | None:
    if len(kinds) < 2:
        return kinds[0](*args) if kinds else None
    return jnp.concatenate([kind(*args) for kind in kinds])


class Constraints(eqx.Module):
    """The system's constraint kinds, stacked: what the rest of the package asks."""

    # In row order: bilateral position-level, bilateral velocity-level, one-sided.
    kinds: tuple[AbstractKind, ...]
    friction: Slip | None

    @property
    def all(self) -> tuple[AbstractKind, ...]:
        """Every kind, the friction kind last."""
        return self.kinds if self.friction is None else (*self.kinds, self.friction)

    def __init__(self, system):
        kinds = (Holonomic(system), Nonholonomic(system), Unilateral(system))
        self.kinds = tuple(k for k in kinds if getattr(system, k.name) is not None)
        self.friction = None if system.slip is None else Slip(system)

    @property
    def bilateral(self) -> tuple[AbstractKind, ...]:
        """The equality kinds (= 0): projected, in every KKT solve."""
        return tuple(k for k in self.kinds if not k.one_sided)

    @property
    def positional(self) -> tuple[AbstractKind, ...]:
        """The position-level equality kinds, g(q, t) = 0."""
        return tuple(k for k in self.bilateral if k.positional)

    @property
    def velocity_level(self) -> tuple[AbstractKind, ...]:
        """The velocity-level equality kinds, a(q, q̇, t) = 0."""
        return tuple(k for k in self.bilateral if not k.positional)

    @property
    def one_sided(self) -> tuple[AbstractKind, ...]:
        """The one-sided kinds (≥ 0): contacts with events and impulses."""
        return tuple(k for k in self.kinds if k.one_sided)

    def positions(self, q: Array, t: Array) -> Array | None:
        """g(q, t): the position-level equality residuals (None without)."""
        return _stacked(self.positional, q, t)

    def gaps(self, q: Array, t: Array) -> Array | None:
        """h(q, t): the one-sided residuals, ≥ 0 where allowed (None without)."""
        return _stacked(self.one_sided, q, t)

    def values(self, kinds, q: Array, qd: Array, t: Array):
        """(c, ċ) of `kinds` stacked, (None, None) without."""
        values = [kind.values(q, qd, t) for kind in kinds]
        if len(values) < 2:
            return values[0] if values else (None, None)
        return tuple(jnp.concatenate(x) for x in zip(*values, strict=True))

    def time_derivatives(self, q: Array, qd: Array, t: Array) -> list[Array]:
        """∂c/∂t of each equality kind."""
        return [kind.time_derivative(q, qd, t) for kind in self.bilateral]

    def check_affine(self, q: Array, qd: Array, t: Array) -> Array:
        """`q`, with an error unless the velocity kinds and slip are affine in q̇."""
        # The equations use their q̇-Jacobians as constant directions.
        for kind in (*self.velocity_level, self.friction):
            if kind is not None:
                q = kind.check_affine(q, qd, t)
        return q
