"""M and f at a state, from the Lagrangian by autodiff.

With p(q, q̇, t) = ∂L/∂q̇, Lagrange's equations read M q̈ = f with

    M = ∂p/∂q̇,    f = ∂L/∂q − (∂p/∂q) q̇ − ∂p/∂t + Q.

`terms` gets both from one forward-mode pass over ∇L: its tangents along the n
unit directions in q̇ are the columns of M, and its tangent along (q̇, 0, 1) is
the velocity-product and explicit-time term (∂p/∂q) q̇ + ∂p/∂t. No mixed Hessian
is ever formed. `forcing` alone (for a solver that never forms M) is cheaper:
one gradient in q and one JVP of p. A Lagrangian with `tree_terms` (a loaded MuJoCo
tree) gives `terms` and `mass` its bodies' M and f by Kane's equations itself.
"""

import functools
from typing import NamedTuple

import jax
import jax.numpy as jnp

from .._custom_types import Array


class Terms(NamedTuple):
    mass: Array  # M = ∂²L/∂q̇², (n, n); symmetric up to rounding
    forcing: Array  # f, (n,): everything but the constraint forces


def _parts(system):
    """(the bodies' M and f by `tree_terms`, or None; the rest of L for autodiff)."""
    fn = system.lagrangian
    if not hasattr(fn, "tree_terms"):
        return None, system.L
    call = functools.partial(functools.partial, system.call)
    return call(fn.tree_terms), call(fn.rest)


def terms(system, q: Array, qd: Array, t: Array) -> Terms:
    """M and f at a state (f includes the generalized and the Rayleigh forces)."""
    n, dtype = q.shape[0], q.dtype
    own, lagrangian = _parts(system)
    gradient = jax.grad(lagrangian, argnums=(0, 1))
    # n + 1 tangent directions: (0, e_i, 0) for the mass matrix, (q̇, 0, 1) for f.
    tq = jnp.concatenate([jnp.zeros((n, n), dtype), qd[None]])
    tqd = jnp.concatenate([jnp.eye(n, dtype=dtype), jnp.zeros((1, n), dtype)])
    tt = jnp.concatenate([jnp.zeros(n, dtype), jnp.ones(1, dtype)])

    def push(tq, tqd, tt):
        return jax.jvp(gradient, (q, qd, t), (tq, tqd, tt))

    (dldq, _), (_, dp) = jax.vmap(push, out_axes=(None, 0))(tq, tqd, tt)
    # Not symmetrized: the factorizations read one triangle (LAPACK's symmetrizes).
    mass, f = dp[:n], dldq - dp[n]
    if own is not None:
        own_mass, own_f = own(q, qd, t)
        mass, f = mass + own_mass, f + own_f
    force = system.Q(q, qd, t)
    if force is not None:
        f = f + force
    return Terms(mass, f)


def momenta_of(system, q: Array, t: Array):
    """q̇ ↦ p = ∂L/∂q̇ at fixed (q, t)."""
    return lambda qd: jax.grad(system.L, argnums=1)(q, qd, t)


def mass(system, q: Array, qd: Array, t: Array) -> Array:
    """M = ∂p/∂q̇ alone (not symmetrized), by n JVPs of p."""
    own, lagrangian = _parts(system)
    matrix = jax.jacfwd(lambda qd: jax.grad(lagrangian, argnums=1)(q, qd, t))(qd)
    return matrix if own is None else matrix + own(q, qd, t)[0]


def forcing(system, q: Array, qd: Array, t: Array) -> Array:
    """f = ∂L/∂q − (∂p/∂q) q̇ − ∂p/∂t + Q without M (cheaper than `terms`)."""
    dldq = jax.grad(system.L, argnums=0)(q, qd, t)
    tangents = (qd, jnp.zeros_like(qd), jnp.ones_like(t))
    _, dp = jax.jvp(jax.grad(system.L, argnums=1), (q, qd, t), tangents)
    f = dldq - dp
    force = system.Q(q, qd, t)
    return f if force is None else f + force
