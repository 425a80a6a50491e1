"""With `mass_solver=lineax.LU()` every solve with M is LU's (issue 28).

A lineax LU that records each trace of its solve checks, path by path, that
the user's solver is the one that solves, not a factorization of the
package's own.
"""

import itertools

import equinox as eqx
import jax.numpy as jnp
import lineax as lx
import pytest
from friction_systems import block
from helpers import cartesian_pendulum, pendulum_state

import jaxlagrange as jl


# The user's solver is the one that solves: a lineax LU that records its calls.

_SPY_CALLS = []


class SpyLU(lx.AbstractLinearSolver):
    """`lineax.LU()` that records each trace of its solve. `tag` makes each
    instance a new static value, so that no compiled program is reused."""

    tag: int = eqx.field(static=True)

    def init(self, operator, options):
        return lx.LU().init(operator, options)

    def compute(self, state, vector, options):
        _SPY_CALLS.append(self.tag)
        return lx.LU().compute(state, vector, options)

    def transpose(self, state, options):
        return lx.LU().transpose(state, options)

    def conj(self, state, options):
        return lx.LU().conj(state, options)

    def assume_full_rank(self):
        return True


_TAGS = itertools.count()


def _uses_the_solver(call):
    """Whether `call(solver)` traces a solve with that (new) solver."""
    tag = next(_TAGS)
    call(SpyLU(tag))
    return tag in _SPY_CALLS


_PATHS = {
    "accelerations": lambda s: jl.accelerations(
        s(jl.systems.double_pendulum().system), jnp.ones(2), jnp.ones(2), 0.0
    ),
    "multipliers": lambda s: jl.multipliers(
        s(cartesian_pendulum()), *pendulum_state(0.3, 1.0), 0.0
    ),
    "friction": lambda s: jl.accelerations(
        s(block(0.5, 0.6)), jnp.zeros(2), jnp.zeros(2), 0.0
    ),
    "apply_impulse": lambda s: jl.apply_impulse(
        s(cartesian_pendulum()), *pendulum_state(0.3, 1.0), 0.0, jnp.ones(2)
    ),
    "project_initial_state": lambda s: jl.project_initial_state(
        s(cartesian_pendulum()), jnp.array([0.1, -1.1]), jnp.ones(2), 0.0
    ),
    "linearize": lambda s: jl.linearize(
        s(jl.systems.double_pendulum().system), jnp.zeros(2), jnp.zeros(2), 0.0
    ),
    "normal_modes": lambda s: jl.normal_modes(
        s(jl.systems.double_pendulum().system), jnp.zeros(2)
    ),
}


@pytest.mark.parametrize("path", list(_PATHS))
def test_the_users_solver_solves(path):
    # With `mass_solver=lineax.LU()` every solve with M is LU's (issue 28).
    assert _uses_the_solver(
        lambda solver: _PATHS[path](lambda s: s.with_mass_solver(solver))
    )
