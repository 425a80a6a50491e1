"""The planar double pendulum."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m1": 1.0, "m2": 1.0, "l1": 1.0, "l2": 1.0, "g": 9.81}


def _lagrangian(q, qd, t, params):
    m1, m2, l1, l2, g = (params[k] for k in ("m1", "m2", "l1", "l2", "g"))
    th1, th2 = q
    w1, w2 = qd
    kinetic = (
        0.5 * (m1 + m2) * l1**2 * w1**2
        + 0.5 * m2 * l2**2 * w2**2
        + m2 * l1 * l2 * w1 * w2 * jnp.cos(th1 - th2)
    )
    potential = -(m1 + m2) * g * l1 * jnp.cos(th1) - m2 * g * l2 * jnp.cos(th2)
    return kinetic - potential


def bobs(q, t, params):
    """The pivot and the two bobs (y up)."""
    first = params["l1"] * jnp.stack([jnp.sin(q[0]), -jnp.cos(q[0])])
    second = first + params["l2"] * jnp.stack([jnp.sin(q[1]), -jnp.cos(q[1])])
    return jnp.stack([jnp.zeros_like(first), first, second])


@register(
    "double_pendulum", units=("rad",) * 2, point_names=("pivot", "bob 1", "bob 2")
)
def double_pendulum(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """Two point masses on massless rods, the second hung from the first.

    With θ₁, θ₂ measured from the downward vertical,

        L = ½ (m₁ + m₂) l₁² θ̇₁² + ½ m₂ l₂² θ̇₂² + m₂ l₁ l₂ θ̇₁ θ̇₂ cos(θ₁ − θ₂)
            + (m₁ + m₂) g l₁ cos θ₁ + m₂ g l₂ cos θ₂.

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m1": 1.0, "m2": 1.0, "l1": 1.0, "l2": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (θ₁, θ₂) and (θ̇₁, θ̇₂). The default, θ = (2.0, 2.5)
        from rest, has enough energy for both arms to flip: it is chaotic.

    **Returns:** a `ReadySystem` with coordinates `("θ₁", "θ₂")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.double_pendulum()
    traj = jl.simulate(system, q0, qd0, t1=20.0, saveat=jnp.linspace(0, 20, 1001))
    ```
    """
    params = merge_params("double_pendulum", _DEFAULTS, params)
    q0, qd0 = initial_state("double_pendulum", q0, qd0, [2.0, 2.5], [0.0, 0.0])
    system = LagrangianSystem(_lagrangian, params=params)
    return ReadySystem(system, q0, qd0, "double_pendulum", ("θ₁", "θ₂"), points=bobs)
