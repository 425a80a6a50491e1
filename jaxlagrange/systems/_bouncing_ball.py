"""A ball bouncing on the floor."""

import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


_DEFAULTS = {"m": 1.0, "g": 9.81, "e": 0.8}


def _lagrangian(q, qd, t, params):
    return 0.5 * params["m"] * qd[0] ** 2 - params["m"] * params["g"] * q[0]


def _above_floor(q, t, params):
    return q


def _points(q, t, params):
    """The ball above the floor."""
    return jnp.stack([jnp.zeros_like(q[0]), q[0]])[None]


@register("bouncing_ball", units=("m",), point_names=("ball",))
def bouncing_ball(params=None, *, q0=None, qd0=None) -> ReadySystem:
    """A point mass `m` falling under gravity `g` onto a floor at y = 0.

    L = ½ m ẏ² − m g y with the unilateral constraint h = y ≥ 0. Each impact
    reverses the velocity with coefficient of restitution `e`: the rebound speed
    is e times the impact speed and the energy is multiplied by e². Dropped from
    rest at height y₀, the ball lands at √(2y₀/g) and, for e < 1, comes to rest
    after infinitely many bounces at time √(2y₀/g) (1 + 2e/(1 − e)); `simulate`
    ends the chatter with a plastic impact once a bounce would rise less than
    its `atol`, just before that time.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "g": 9.81, "e": 0.8}`. The
        impacts read `e` from the params (`restitution="e"`): fits, batches and
        sweeps over it change the bounces.
    - `q0`, `qd0`: initial (y,) and (ẏ,); default y = 1 from rest.

    **Returns:** a `ReadySystem` with coordinates `("y",)`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.bouncing_ball({"e": 0.5})
    traj = jl.simulate(system, q0, qd0, t1=2.0)
    traj.event_ts[: int(traj.num_events)]  # the bounces
    ```
    """
    params = merge_params("bouncing_ball", _DEFAULTS, params)
    q0, qd0 = initial_state("bouncing_ball", q0, qd0, [1.0], [0.0])
    system = LagrangianSystem(
        _lagrangian, params=params, unilateral=_above_floor, restitution="e"
    )
    return ReadySystem(system, q0, qd0, "bouncing_ball", ("y",), points=_points)
