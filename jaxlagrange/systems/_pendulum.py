"""The simple pendulum."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "l": 1.0, "g": 9.81}


def _lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    return 0.5 * m * length**2 * qd[0] ** 2 + m * g * length * jnp.cos(q[0])


def _points(q, t, params):
    """The pivot and the bob (y up)."""
    bob = params["l"] * jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])
    return jnp.stack([jnp.zeros_like(bob), bob])


@register("pendulum", units=("rad",), point_names=("pivot", "bob"))
def pendulum(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A point mass `m` on a massless rod of length `l` under gravity `g`.

    L = ½ m l² θ̇² + m g l cos θ, with θ measured from the downward vertical.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "l": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (θ,) and (θ̇,); default θ = 1 rad from rest.

    **Returns:** a `ReadySystem` with coordinates `("θ",)`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0})
    traj = jl.simulate(system, q0, qd0, t1=10.0)
    ```
    """
    params = merge_params("pendulum", _DEFAULTS, params)
    q0, qd0 = initial_state("pendulum", q0, qd0, [1.0], [0.0])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(system, q0, qd0, "pendulum", ("θ",), points=_points)
