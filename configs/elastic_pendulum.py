"""A system of your own for the command line: the elastic (spring) pendulum.

A mass m on a spring of stiffness k and rest length l0, swinging in a vertical
plane; r is the spring's length and θ its angle from the downward vertical:

    L = ½ m (ṙ² + r² θ̇²) − ½ k (r − l0)² + m g r cos θ.

`jaxlagrange run configs/elastic_pendulum.toml` calls `make(**params)` with the
config's `[system] params`, draws the motion with `positions`, and labels the
figures with `coordinates`, their `units`, the `point_names` of `positions`
and their `length_unit`.
"""

import jax.numpy as jnp

import jaxlagrange as jl


coordinates = ["r", "θ"]
units = ["m", "rad"]  # SI: time is then in s and energy in J on the figures
point_names = ["pivot", "bob"]
length_unit = "m"


def lagrangian(q, qd, t, params):
    m, k, l0, g = params["m"], params["k"], params["l0"], params["g"]
    r, theta = q
    kinetic = 0.5 * m * (qd[0] ** 2 + r**2 * qd[1] ** 2)
    potential = 0.5 * k * (r - l0) ** 2 - m * g * r * jnp.cos(theta)
    return kinetic - potential


def make(m=1.0, k=40.0, l0=1.0, g=9.81):
    """The system, with its params fittable and sweepable by name."""
    params = {"m": m, "k": k, "l0": l0, "g": g}
    return jl.LagrangianSystem(lagrangian, params=params)


def positions(q, **params):
    """The pivot and the mass, y up."""
    r, theta = q
    mass = jnp.stack([r * jnp.sin(theta), -r * jnp.cos(theta)])
    return jnp.stack([jnp.zeros(2), mass])
