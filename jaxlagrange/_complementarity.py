"""The contacts that hold at an instant: a complementarity problem, by active sets.

Of the touching one-sided rows, those held push (z ≥ 0) and the others do not
move inwards (w ≥ 0), zᵢwᵢ = 0: for an impact, w = ḣ⁺ − its target and z the
impulses; for the forces after it, w = ḧ and z the normal forces. It is the
LCP of S = C M⁻¹ Cᵀ, positive semidefinite (redundant rows: least-norm solves),
solved by Lawson and Hanson's active-set method (1974, ch. 23): the given set
if consistent; else, from none held, the most inward row joins, one at a
time, and where a solve pulls, z steps back from the last pushing solution to
the boundary and the row reaching zero first goes. No set repeats. With
Coulomb friction, sticking contacts whose friction exceeds μ_s λ_N slip
(`switch`) once the normal set is consistent. Releasing all pulling rows at
once and never adding one back left rows sinking at the instant of their
release: the dm_control hopper's foot and joint limits then chattered.
"""

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ._custom_types import Array


def _select(flag, a, b):
    # In b's dtypes: a loop's carry keeps a float32 state's dtype beside float64 params.
    return jax.tree.map(lambda x, y: jnp.where(flag, x, y).astype(y.dtype), a, b)


def held_set(
    solve: Callable[[Array, Any], tuple[Array, Array, Any]],
    candidates: Array,
    given: Array,
    tol: float,
    dtype,
    modes: Any = None,
    switch: Callable | None = None,
) -> tuple[Array, Any]:
    """The rows held (u,) and their modes: `solve(held, modes)` gives (z, w, extra)
    per row (z = 0 off `held`); `switch(held, modes, z, extra)` gives (modes,
    whether any changed)."""
    u = candidates.shape[0]
    if u == 0:
        return given, modes
    given = given & candidates
    none = jnp.zeros_like(given)

    def step(state):
        held, z, modes, first, _ = state
        lam, w, extra = solve(held, modes)
        lam = lam.astype(z.dtype)
        pull = held & (lam < 0)
        pulls = jnp.any(pull)
        # The step back to the last pushing z: the first row to reach zero goes.
        ratio = jnp.where(pull, z / jnp.where(pull, z - lam, 1.0), jnp.inf)
        alpha = jnp.min(ratio, initial=jnp.inf)
        back = z + jnp.where(pulls, alpha, 0.0) * (lam - z)
        dropped = held & ((pull & (ratio <= alpha)) | (back <= 0))
        # A given set that pulls is no start: from no row held.
        after_pull = (
            jnp.where(first, none, held & ~dropped),
            jnp.where(first, 0, back),
        )
        inward = candidates & ~held & (w < -tol)
        add = (jnp.arange(u) == jnp.argmin(jnp.where(inward, w, jnp.inf))) & inward
        switched = jnp.array(False)
        if switch is not None:
            new_modes, switched = switch(held, modes, lam, extra)
            switched = switched & ~pulls & ~jnp.any(inward)
            modes = _select(switched, new_modes, modes)
        consistent = (held | add, jnp.where(held, lam, 0.0))
        held_next, z_next = _select(pulls, after_pull, consistent)
        settled = ~pulls & ~jnp.any(inward) & ~switched
        return held_next, z_next, modes, jnp.array(False), settled

    def body(_, state):
        # Unbatched, a settled set skips the rest of the loop's solves.
        return jax.lax.cond(state[-1], lambda s: s, step, state)

    zeros = jnp.zeros(given.shape, dtype)
    state = (given, zeros, modes, jnp.array(True), jnp.array(False))
    # The given set, then room for each row to join and leave once and each mode
    # to switch once; a set not settled by then is taken as it stands (as the
    # old fixed sweeps did). A loop, not Python unrolling: one traced solve.
    held, _, modes, _, _ = jax.lax.fori_loop(0, 3 * u + 1, body, state)
    return held, modes
