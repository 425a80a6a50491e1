"""`neural_lagrangian`: a Lagrangian given by MLPs, with a positive definite mass.

L(q, q̇) = ½ q̇ᵀ (C(q) C(q)ᵀ + εI) q̇ − V(q), where C(q) is lower triangular with
a positive diagonal (softplus of the MLP's outputs) and V(q) is a second MLP. The
mass matrix ∂²L/∂q̇² = C Cᵀ + εI is then symmetric positive definite for every
q and every value of the weights, so training can never make the equations of
motion singular, and the learned dynamics conserve the learned energy
h = ½ q̇ᵀ M q̇ + V exactly (up to the solver's error).
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.random as jr
import numpy as np

from ._custom_types import Array
from ._system import LagrangianSystem
from ._validate import positive_int, returned


class _NeuralLagrangian(eqx.Module):
    """L(q, q̇, t, params) for params {"mass": MLP, "potential": MLP}."""

    n: int = eqx.field(static=True)
    eps: float = eqx.field(static=True)
    features: Callable[[Array], Array] | None = eqx.field(static=True)

    def __call__(self, q, qd, t, params):
        x = q if self.features is None else self.features(q)
        entries = params["mass"](x)
        rows, cols = np.tril_indices(self.n)
        diagonal = rows == cols
        # A positive diagonal makes C Cᵀ positive definite; εI bounds it below.
        entries = jnp.where(diagonal, jax.nn.softplus(entries), entries)
        factor = jnp.zeros((self.n, self.n), entries.dtype).at[rows, cols].set(entries)
        v = factor.T @ qd
        kinetic = 0.5 * (v @ v + self.eps * qd @ qd)
        return kinetic - params["potential"](x)


def neural_lagrangian(
    n: int,
    *,
    key: Array,
    width: int = 32,
    depth: int = 2,
    eps: float = 1e-3,
    activation: Callable[[Array], Array] = jax.nn.softplus,
    features: Callable[[Array], Array] | None = None,
) -> LagrangianSystem:
    """A `LagrangianSystem` whose Lagrangian is learned, with a positive definite mass.

        L(q, q̇) = ½ q̇ᵀ (C(q) C(q)ᵀ + εI) q̇ − V(q)

    C(q) is lower triangular, its n(n + 1)/2 entries the outputs of one MLP (the
    diagonal through softplus, so it is positive); V(q) is a second MLP. The mass
    matrix is symmetric positive definite by construction, with eigenvalues ≥ ε.
    The params are `{"mass": eqx.nn.MLP, "potential": eqx.nn.MLP}`; train them
    with `jl.fit` (their activation functions are not trained).

    **Arguments:**

    - `n`: the number of coordinates.
    - `key`: a `jax.random` key for the initial weights.
    - `width`, `depth`: the hidden width and number of hidden layers of both MLPs.
    - `eps`: the lower bound ε > 0 of the mass matrix's eigenvalues.
    - `activation`: the hidden activation; smooth (softplus, tanh), since the
        equations of motion take second derivatives of L.
    - `features`: a map q → the MLPs' input, e.g. `lambda q: jnp.concatenate(
        [jnp.sin(q), jnp.cos(q)])` for angles (default: q itself).

    **Returns:** a `LagrangianSystem` with MLP params.

    **Raises:** `ValueError` for `n < 1`, `eps <= 0`, or `features` not mapping
    (n,) to a 1-D array.

    **Example:**

    ```python
    system = jl.neural_lagrangian(2, key=jax.random.key(0))
    result = jl.fit(system, data, optimizer=optax.adam(1e-3), steps=2000)
    ```
    """
    n = positive_int("n", n)
    if not eps > 0:
        raise ValueError(
            f"`eps` must be > 0 (it keeps the mass matrix positive definite), got {eps!r}."
        )
    size = n
    if features is not None:
        q = jax.ShapeDtypeStruct((n,), jnp.result_type(float))
        out = jax.eval_shape(features, q)
        what = f"a 1-D array for q of shape {q.shape}"
        returned("features", out, out.ndim == 1, what)
        size = out.shape[0]
    mass_key, potential_key = jr.split(key)
    params = {
        "mass": eqx.nn.MLP(
            size, n * (n + 1) // 2, width, depth, activation=activation, key=mass_key
        ),
        "potential": eqx.nn.MLP(
            size, "scalar", width, depth, activation=activation, key=potential_key
        ),
    }
    return LagrangianSystem(_NeuralLagrangian(n, float(eps), features), params=params)
