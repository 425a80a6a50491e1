"""Pendulums in Cartesian coordinates, held by holonomic constraints."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._double_pendulum import bobs
from ._registry import ReadySystem, initial_state, merge_params, origin_and_q, register


_DEFAULTS = {"m": 1.0, "l": 1.0, "g": 9.81}


def _lagrangian(q, qd, t, params):
    m, g = params["m"], params["g"]
    return 0.5 * m * (qd[0] ** 2 + qd[1] ** 2) - m * g * q[1]


def _rod(q, t, params):
    length = params["l"]
    # Polynomial, so differentiable everywhere (no norm); divided by 2l so that
    # |∇g| = 1 on the circle and λ is the force of the rod along q/l.
    return jnp.stack([(q[0] ** 2 + q[1] ** 2 - length**2) / (2 * length)])


@register("cartesian_pendulum", units=("m", "m"), point_names=("pivot", "bob"))
def cartesian_pendulum(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """The simple pendulum in the Cartesian coordinates (x, y) of its bob.

        L = ½ m (ẋ² + ẏ²) − m g y,    g(q) = (x² + y² − l²) / (2l) = 0.

    The multiplier is the force of the rod along the outward direction q/l, so the
    tension is −λ = m v²/l − m g y/l. The motion matches `pendulum` with
    θ = atan2(x, −y).

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "l": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (x, y) and (ẋ, ẏ); default θ = 1 rad from rest,
        (x, y) = (l sin 1, −l cos 1).

    **Returns:** a `ReadySystem` with coordinates `("x", "y")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    traj = jl.simulate(system, q0, qd0, t1=10.0, saveat=jnp.linspace(0, 10, 101))
    ```
    """
    params = merge_params("cartesian_pendulum", _DEFAULTS, params)
    length = params["l"]
    default = [length * jnp.sin(1.0), -length * jnp.cos(1.0)]
    q0, qd0 = initial_state("cartesian_pendulum", q0, qd0, default, [0.0, 0.0])
    system = LagrangianSystem(_lagrangian, params=params, holonomic=_rod)
    return ReadySystem(
        system, q0, qd0, "cartesian_pendulum", ("x", "y"), points=origin_and_q
    )


_DOUBLE_DEFAULTS = {"m1": 1.0, "m2": 1.0, "l1": 1.0, "l2": 1.0, "g": 9.81}


def _double_lagrangian(q, qd, t, params):
    m1, m2, g = params["m1"], params["m2"], params["g"]
    kinetic = 0.5 * m1 * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * m2 * (
        qd[2] ** 2 + qd[3] ** 2
    )
    return kinetic - g * (m1 * q[1] + m2 * q[3])


def _rods(q, t, params):
    l1, l2 = params["l1"], params["l2"]
    dx, dy = q[2] - q[0], q[3] - q[1]
    return jnp.stack(
        [(q[0] ** 2 + q[1] ** 2 - l1**2) / (2 * l1), (dx**2 + dy**2 - l2**2) / (2 * l2)]
    )


@register(
    "cartesian_double_pendulum",
    units=("m",) * 4,
    point_names=("pivot", "bob 1", "bob 2"),
)
def cartesian_double_pendulum(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """The planar double pendulum in the Cartesian coordinates of its two bobs.

        L = ½ m₁ (ẋ₁² + ẏ₁²) + ½ m₂ (ẋ₂² + ẏ₂²) − g (m₁ y₁ + m₂ y₂),
        g₁ = (x₁² + y₁² − l₁²) / (2 l₁) = 0,
        g₂ = ((x₂ − x₁)² + (y₂ − y₁)² − l₂²) / (2 l₂) = 0.

    Four coordinates and two constraints: the same motion as `double_pendulum`,
    with the rod forces as multipliers (each the force along its rod, outwards).

    **Arguments:**

    - `params`: overrides of the defaults
        `{"m1": 1.0, "m2": 1.0, "l1": 1.0, "l2": 1.0, "g": 9.81}`.
    - `q0`, `qd0`: initial (x₁, y₁, x₂, y₂) and their rates; default the angles
        (θ₁, θ₂) = (2.0, 2.5) from rest, as `double_pendulum`.

    **Returns:** a `ReadySystem` with coordinates `("x₁", "y₁", "x₂", "y₂")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.cartesian_double_pendulum()
    traj = jl.simulate(system, q0, qd0, t1=5.0)
    ```
    """
    params = merge_params("cartesian_double_pendulum", _DOUBLE_DEFAULTS, params)
    default = bobs(jnp.array([2.0, 2.5]), 0.0, params)[1:].reshape(-1)
    q0, qd0 = initial_state("cartesian_double_pendulum", q0, qd0, default, [0.0] * 4)
    system = LagrangianSystem(_double_lagrangian, params=params, holonomic=_rods)
    return ReadySystem(
        system,
        q0,
        qd0,
        "cartesian_double_pendulum",
        ("x₁", "y₁", "x₂", "y₂"),
        points=origin_and_q,
    )
