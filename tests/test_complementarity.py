"""The contacts held at an instant: the complementarity problem of `_complementarity`.

z ≥ 0, w = S z + c ≥ 0, zᵢwᵢ = 0 on the candidate rows, S positive semidefinite
(rank-deficient where rows are redundant), checked against enumeration of
every set, and the sets that releasing all pulling rows at once gets wrong.
"""

import itertools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxlagrange._complementarity import held_set
from jaxlagrange._mass._linalg import min_norm_solve


TOL = 1e-9


@jax.jit
def _held(s, c, given):
    """The held rows of the LCP (S, c) from `given`: z least-norm on the held
    rows, w = S z + c."""

    def solve(held, modes):
        both = held[:, None] & held[None, :]
        matrix = jnp.where(both, s, 0.0) + jnp.diag(jnp.where(held, 0.0, 1.0))
        z, _ = min_norm_solve(matrix, jnp.where(held, -c, 0.0))
        z = jnp.where(held, z, 0.0)
        return z, s @ z + c, None

    candidates = jnp.ones(c.shape, bool)
    return held_set(solve, candidates, given, TOL, c.dtype)[0]


def _complementary(s, c, held):
    z = np.zeros(c.shape[0])
    idx = np.nonzero(held)[0]
    if idx.size:
        z[idx] = np.linalg.lstsq(s[np.ix_(idx, idx)], -c[idx], rcond=None)[0]
    w = s @ z + c
    return np.all(z >= -1e-8) and np.all(w >= -1e-8) and np.all(np.abs(z * w) < 1e-7)


@pytest.mark.parametrize("seed", range(12))
def test_held_set_solves_random_contact_problems(seed):
    # S = B Bᵀ of a random rank (redundant rows when rank < u); every start.
    rng = np.random.default_rng(seed)
    u, rank = 5, [5, 3, 4][seed % 3]
    b = rng.normal(size=(u, rank))
    s, c = b @ b.T, b @ rng.normal(size=rank) + (0.0 if seed % 2 else 0.3)
    exists = any(
        _complementary(s, c, np.array(held))
        for held in itertools.product([False, True], repeat=u)
    )
    assert exists  # S psd and c in its range (or positive): a solution exists
    for start in ([False] * u, [True] * u, list(rng.random(u) < 0.5)):
        held = _held(s, c, jnp.array(start))
        assert _complementary(s, c, np.asarray(held)), (start, held)


def test_a_consistent_given_set_is_kept():
    # Two rows that both push: no other set is tried.
    s, c = jnp.array([[2.0, 0.5], [0.5, 1.0]]), jnp.array([-1.0, -1.0])
    assert _held(s, c, jnp.array([True, True])).tolist() == [True, True]


def test_two_pulling_rows_of_which_one_holds():
    # A point in a wedge, normals 143° apart (n₁·n₂ = −0.8), pressed into wall 1:
    # held together, both rows pull; released together, row 1 sinks (ḧ₁ = −0.1).
    # The solution holds row 1 alone (λ₁ = 0.1, ḧ₂ = 0.92).
    s, c = jnp.array([[1.0, -0.8], [-0.8, 1.0]]), jnp.array([-0.1, 1.0])
    assert _held(s, c, jnp.array([True, True])).tolist() == [True, False]


def test_modes_switch_once_the_normal_set_is_consistent():
    # A mode flag that halves c₀ when row 0 is held with z₀ > 1 (a friction
    # switch's shape): the method goes on from the new problem.
    s = jnp.eye(2)

    def solve(held, flag):
        c = jnp.array([jnp.where(flag, -1.0, -2.0), 0.5])
        z = jnp.where(held, -c, 0.0)
        return z, s @ z + c, None

    def switch(held, flag, z, _):
        change = held[0] & (z[0] > 1.0) & ~flag
        return flag | change, change

    held, flag = held_set(
        solve, jnp.ones(2, bool), jnp.zeros(2, bool), TOL, jnp.float64, False, switch
    )
    assert held.tolist() == [True, False] and bool(flag)
