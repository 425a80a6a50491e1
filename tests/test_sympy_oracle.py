"""An independent oracle: random Lagrangians whose equations SymPy derives symbolically.

Each Lagrangian L(q, q̇, t) = ½ q̇ᵀ M(q, t) q̇ + q̇·b(q, t) − V(q, t) is drawn at random
(seeded) from polynomial, rational and trigonometric terms: M is configuration- and
time-dependent and diagonally dominant (so SPD), b and V are dense. SymPy's
`LagrangesMethod` derives the mass matrix and forcing; the same expression of L,
lambdified to JAX, goes through `jl.accelerations`.
"""

import random

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

import jaxlagrange as jl


def _random_lagrangian(n: int, seed: int):
    rng = random.Random(seed)
    t = dynamicsymbols._t
    q = dynamicsymbols(f"q1:{n + 1}")
    qd = [sp.diff(x, t) for x in q]

    def coefficient(scale=1.0):
        return sp.Rational(rng.randint(-9, 9) or 1, 10) * scale

    def bounded(i, j):  # |·| ≤ 1: entries of the off-diagonal of M
        k, m = rng.randrange(n), rng.randrange(n)
        return rng.choice(
            [
                sp.cos(q[k]),
                sp.sin(q[k] + q[m]),
                2 * q[k] / (1 + q[k] ** 2),
                sp.cos(q[i] * q[j]),
            ]
        )

    def term():  # a term of b or V
        k, m = rng.randrange(n), rng.randrange(n)
        return rng.choice(
            [
                q[k] * q[m],
                q[k] ** 3,
                sp.sin(q[k]) * sp.cos(q[m]),
                q[k] * sp.cos(t),
                sp.sin(q[k] + t / 2),
                q[k] ** 2 * t,
                sp.exp(-(q[k] ** 2)),
            ]
        )

    mass = sp.zeros(n, n)
    for i in range(n):
        k = rng.randrange(n)
        mass[i, i] = 2 + sp.sin(q[k]) ** 2 + sp.Rational(3, 10) * sp.sin(2 * t)
        for j in range(i):
            # Off-diagonal rows sum to less than 1 < 1.7 ≤ M_ii.
            mass[i, j] = mass[j, i] = coefficient(sp.Rational(1, n)) * bounded(i, j)
    drift = [sum(coefficient() * term() for _ in range(2)) for _ in range(n)]
    potential = sum(coefficient() * term() for _ in range(2 * n)) + sum(
        x**2 / 2 for x in q
    )
    qd_vec = sp.Matrix(qd)
    lagrangian = (qd_vec.T * mass * qd_vec)[0] / 2 + sum(
        b * v for b, v in zip(drift, qd, strict=True)
    )
    return lagrangian - potential, q, qd, t


def _oracle(n: int, seed: int):
    """(L for JAX, the SymPy q̈ as a NumPy function) of the random Lagrangian."""
    lagrangian, q, qd, t = _random_lagrangian(n, seed)
    method = LagrangesMethod(lagrangian, q)
    method.form_lagranges_equations()
    # Plain symbols in place of the dynamic symbols, to lambdify.
    qs = sp.symbols(f"x1:{n + 1}")
    qds = sp.symbols(f"v1:{n + 1}")
    ts = sp.Symbol("s")
    plain = dict(zip(qd, qds, strict=True)) | dict(zip(q, qs, strict=True))

    def flat(expr):
        return expr.subs(plain).subs(t, ts)

    args = (*qs, *qds, ts)
    mass = sp.lambdify(args, flat(method.mass_matrix), "numpy")
    forcing = sp.lambdify(args, flat(method.forcing), "numpy")
    lagrangian_jax = sp.lambdify(args, flat(lagrangian), jnp)

    def sympy_accelerations(x, v, s):
        a = (*x, *v, s)
        return np.linalg.solve(
            np.asarray(mass(*a), float), np.asarray(forcing(*a), float).ravel()
        )

    def lagrangian_fn(x, v, s):
        return lagrangian_jax(*(x[i] for i in range(n)), *(v[i] for i in range(n)), s)

    return lagrangian_fn, sympy_accelerations


@pytest.mark.parametrize("n, seed", [(2, 0), (2, 1), (3, 2), (4, 4), (5, 7)])
def test_against_sympy(n, seed):
    lagrangian, expected = _oracle(n, seed)
    system = jl.LagrangianSystem(lagrangian)
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1.5, 1.5, (6, n))
    qd = rng.uniform(-1.5, 1.5, (6, n))
    t = rng.uniform(0.0, 3.0, 6)
    batched = jax.jit(jax.vmap(jl.accelerations, in_axes=(None, 0, 0, 0)))
    qdd = batched(system, q, qd, t)
    for i in range(6):
        np.testing.assert_allclose(
            qdd[i], expected(q[i], qd[i], t[i]), rtol=1e-9, atol=1e-9
        )


def test_oracle_is_not_trivial():
    """The drawn Lagrangians have dense, state- and time-dependent M and forcing."""
    lagrangian, q, qd, t = _random_lagrangian(4, 4)
    method = LagrangesMethod(lagrangian, q)
    method.form_lagranges_equations()
    mass = method.mass_matrix
    assert all(mass[i, j] != 0 for i in range(4) for j in range(4))
    assert mass.has(t) and all(mass.has(x) for x in q)
    assert method.forcing.has(t)
