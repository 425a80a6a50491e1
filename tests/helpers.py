"""The small systems that several test files share.

Each Lagrangian is a module-level function, so that systems of one shape with
other params share one compilation; each factory returns a `jl.LagrangianSystem`
(the ready systems of `jl.systems` stay the first choice where one fits).
"""

import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest

import jaxlagrange as jl


G = 9.81

# The mass solvers that tests cross with the default dense solve.
MASS_SOLVERS = {
    "cholesky": lx.Cholesky(),
    "lu": lx.LU(),
    "cg": lx.CG(rtol=1e-12, atol=1e-12),
}


def dense_and(*names):
    """pytest params of `mass_solver`: None (the default dense solve), then
    `MASS_SOLVERS[name]` for each name."""
    solvers = [pytest.param(MASS_SOLVERS[n], id=n) for n in names]
    return [pytest.param(None, id="dense"), *solvers]


# Free unit point masses.


def free_lagrangian(q, qd, t):
    """L = ½ |q̇|²: unit masses, no forces."""
    return 0.5 * jnp.sum(qd**2)


def falling_lagrangian(q, qd, t):
    """L = ½ |q̇|² − g q₁: a unit mass in the vertical (x, y) plane, y up."""
    return 0.5 * jnp.sum(qd**2) - G * q[1]


def rayleigh(q, qd, t, params):
    """Rayleigh's R = ½ c q̇₀², params {"c"}."""
    return 0.5 * params["c"] * qd[0] ** 2


# A simple pendulum, θ from the downward vertical.


def unit_pendulum_lagrangian(q, qd, t, p):
    """L = ½ θ̇² + g cos θ (unit mass and length), params {"g"}."""
    return 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0])


def unit_pendulum(g=G, **system_options):
    """The pendulum of unit mass and length, θ̈ = −g sin θ, params {"g": g}."""
    return jl.LagrangianSystem(
        unit_pendulum_lagrangian, params={"g": g}, **system_options
    )


def pendulum_lagrangian(q, qd, t, p):
    """L = ½ l² θ̇² + g l cos θ (unit mass), params {"l", "g"}."""
    return 0.5 * p["l"] ** 2 * qd[0] ** 2 + p["g"] * p["l"] * jnp.cos(q[0])


def pendulum(length=1.0, g=G):
    """The pendulum of unit mass, θ̈ = −(g/l) sin θ, params {"l", "g"}."""
    return jl.LagrangianSystem(pendulum_lagrangian, params={"l": length, "g": g})


# A bead on a hoop of radius R spinning at ω about its vertical diameter; for
# ω² > g/R it oscillates about θ* = arccos(g / (R ω²)).


def hoop_lagrangian(q, qd, t, p):
    spin = p["omega"] ** 2 * jnp.sin(q[0]) ** 2
    kinetic = 0.5 * p["R"] ** 2 * (qd[0] ** 2 + spin)
    return kinetic + p["g"] * p["R"] * jnp.cos(q[0])


def hoop(R=0.5, omega=6.0, g=G):
    return jl.LagrangianSystem(hoop_lagrangian, params={"R": R, "omega": omega, "g": g})


# A point mass on a rod of length l in the (x, y) plane, y up: the Cartesian
# pendulum with the constraint x² + y² − l² = 0 (unscaled, unlike the ready
# `jl.systems.cartesian_pendulum`, whose constraint is divided by 2l).


def cartesian_pendulum_lagrangian(q, qd, t, p):
    """L = ½ m (ẋ² + ẏ²) − m g y, params {"m"} (g = 9.81)."""
    return 0.5 * p["m"] * jnp.sum(qd**2) - p["m"] * G * q[1]


def rod(q, t, p):
    return jnp.array([jnp.sum(q**2) - p["l"] ** 2])


def cartesian_pendulum(length=1.0, m=1.0, **system_options):
    """The Cartesian pendulum, params {"m": m, "l": length}."""
    return jl.LagrangianSystem(
        cartesian_pendulum_lagrangian,
        params={"m": m, "l": length},
        holonomic=rod,
        **system_options,
    )


def pendulum_state(theta, omega, length=1.0):
    """(q, q̇) of the Cartesian pendulum at angle θ swinging at θ̇ = ω."""
    q = length * jnp.array([jnp.sin(theta), -jnp.cos(theta)])
    qd = length * omega * jnp.array([jnp.cos(theta), jnp.sin(theta)])
    return q, qd


# The double pendulum, both angles from the downward vertical: the ready
# system's Lagrangian (params {"m1", "m2", "l1", "l2", "g"}), not a copy of it.

double_pendulum_lagrangian = jl.systems.double_pendulum().system.lagrangian


def double_pendulum(m1=1.0, m2=1.0, l1=1.0, l2=1.0, g=G):
    params = {"m1": m1, "m2": m2, "l1": l1, "l2": l2, "g": g}
    return jl.LagrangianSystem(double_pendulum_lagrangian, params=params)


# Chains.


def pendulum_chain_lagrangian(q, qd, t, params):
    """n equal pendulums hanging from each other, angles from the vertical: M dense."""
    m, length, g = params["m"], params["l"], params["g"]
    vx = jnp.cumsum(length * jnp.cos(q) * qd)
    vy = jnp.cumsum(length * jnp.sin(q) * qd)
    y = -jnp.cumsum(length * jnp.cos(q))
    return 0.5 * m * jnp.sum(vx**2 + vy**2) - m * g * jnp.sum(y)


def pendulum_chain(n, m=1.0, length=0.5, g=G):
    """The chain of `n` pendulums of `pendulum_chain_lagrangian`."""
    del n  # the number of links is the length of q
    params = {"m": m, "l": length, "g": g}
    return jl.LagrangianSystem(pendulum_chain_lagrangian, params=params)


def _cartesian_chain_lagrangian(q, qd, t, params):
    y = q[1::2]
    return 0.5 * params["m"] * jnp.sum(qd**2) - params["m"] * params["g"] * jnp.sum(y)


def _links(q, t, params):
    points = jnp.concatenate([jnp.zeros((1, 2)), q.reshape(-1, 2)])
    return jnp.sum(jnp.diff(points, axis=0) ** 2, axis=1) - params["l"] ** 2


def cartesian_chain(links, **system_options):
    """Point masses in the plane joined by rigid links: 2n coordinates, n constraints."""
    del links  # the number of links is half the length of q
    params = {"m": 1.0, "g": G, "l": 1.0}
    return jl.LagrangianSystem(
        _cartesian_chain_lagrangian, params=params, holonomic=_links, **system_options
    )


def chain_state(links, seed):
    """A state on a Cartesian chain's constraint manifold (q̇ tangent to it)."""
    rng = np.random.default_rng(seed)
    angles = rng.uniform(-1.0, 1.0, links)
    rates = rng.normal(size=links)
    x, y = np.cumsum(np.sin(angles)), -np.cumsum(np.cos(angles))
    xd, yd = np.cumsum(np.cos(angles) * rates), np.cumsum(np.sin(angles) * rates)
    q = np.stack([x, y], axis=1).ravel()
    return jnp.asarray(q), jnp.asarray(np.stack([xd, yd], axis=1).ravel())


def off_chain_state(links, seed):
    """`chain_state` moved off the manifold: 1e-3 in position, 1e-2 in velocity."""
    q, qd = chain_state(links, seed)
    rng = np.random.default_rng(seed)
    q_off = q + 1e-3 * jnp.asarray(rng.normal(size=q.shape))
    qd_off = qd + 1e-2 * jnp.asarray(rng.normal(size=q.shape))
    return q_off, qd_off


# A harmonic oscillator.


def oscillator_lagrangian(q, qd, t, params):
    """L = ½ m q̇² − ½ k q² in every coordinate, params {"m", "k"}."""
    return 0.5 * params["m"] * jnp.sum(qd**2) - 0.5 * params["k"] * jnp.sum(q**2)


def unit_oscillator_lagrangian(q, qd, t):
    """L = ½ |q̇|² − ½ |q|²: q(t) = q₀ cos t + q̇₀ sin t."""
    return 0.5 * jnp.sum(qd**2) - 0.5 * jnp.sum(q**2)


def oscillator(m=1.0, k=1.0, **system_options):
    return jl.LagrangianSystem(
        oscillator_lagrangian, params={"m": m, "k": k}, **system_options
    )


# A mass whose M = diag(1, 1 − q₀) turns singular at q₀ = 1: from q₀ = 0 at
# q̇₀ = 1 it reaches there at t = 1 with finite dynamics before.


def degenerating_lagrangian(q, qd, t):
    return 0.5 * qd[0] ** 2 + 0.5 * (1 - q[0]) * qd[1] ** 2


def counting(monkeypatch, module, name):
    """Wrap `module.name` so that its calls are recorded: the list of their
    first arguments (e.g. how often `_guard._diagnose` is traced)."""
    calls = []
    original = getattr(module, name)

    def counted(first, *args, **kwargs):
        calls.append(first)
        return original(first, *args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def assert_same_dynamics(scalar, array, close):
    """The fields of two `dynamics` outputs agree: None alike, flags equal, and
    arrays by `close(a, b)` (each test's own tolerance)."""
    for a, b in zip(scalar, array, strict=True):
        if b is None:
            assert a is None
        elif b.dtype == bool:
            assert bool(a) == bool(b)
        else:
            close(a, b)
