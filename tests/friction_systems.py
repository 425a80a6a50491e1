"""The systems with friction of `test_friction.py` and `experiments/friction.py`.

Each is a `jl.LagrangianSystem` with a unilateral contact h ≥ 0 (a distance),
its slip velocity s (the contact point's tangential velocity) and Coulomb
friction. The functions are module level, so that systems of one shape with
other coefficients or params share one compilation.
"""

import jax.numpy as jnp

import jaxlagrange as jl


G = 9.81


# A ball or disk (mass 1, radius r, I = k r²) on the floor: q = (x, y, φ), φ
# counterclockwise; the contact point's velocity along x is ẋ + r φ̇.


def _rolling_lagrangian(q, qd, t, params):
    r = params["r"]
    kinetic = 0.5 * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * params["k"] * r**2 * qd[2] ** 2
    return kinetic - G * q[1]


def _floor(q, t, params):
    return jnp.array([q[1] - params["r"]])


def _rolling_slip(q, qd, t, params):
    return jnp.array([qd[0] + params["r"] * qd[2]])


def ball(k, mu, r=0.1, mu_s=None):
    return jl.LagrangianSystem(
        _rolling_lagrangian,
        params={"r": r, "k": k},
        unilateral=_floor,
        slip=_rolling_slip,
        friction=mu,
        static_friction=mu_s,
    )


# A block (mass 1) on an incline of angle α: q = (x, y) along and across the
# slope, x downhill; contact y ≥ 0, slip velocity ẋ.


def _incline_lagrangian(q, qd, t, params):
    alpha = params["alpha"]
    return 0.5 * jnp.sum(qd**2) + G * (q[0] * jnp.sin(alpha) - q[1] * jnp.cos(alpha))


def _across(q, t, params):
    return q[1:]


def _along(q, qd, t, params):
    return qd[:1]


def block(mu_k, mu_s, alpha=0.4):
    return jl.LagrangianSystem(
        _incline_lagrangian,
        params={"alpha": alpha},
        unilateral=_across,
        slip=_along,
        friction=mu_k,
        static_friction=mu_s,
    )


# The chapter's 6.9.2 and 6.9.3: a solid sphere (radius a) on a fixed sphere
# (radius R), q = (x, y, φ) of its centre and rotation.

A, R = 0.1, 1.0  # the rolling sphere's radius, the fixed one's
RHO = A + R


def _sphere_lagrangian(q, qd, t):
    return 0.5 * (qd[0] ** 2 + qd[1] ** 2) + 0.2 * A**2 * qd[2] ** 2 - G * q[1]


def _on_sphere(q, t):
    return jnp.array([jnp.sqrt(q[0] ** 2 + q[1] ** 2) - RHO])


def _sphere_slip(q, qd, t):
    rho = jnp.sqrt(q[0] ** 2 + q[1] ** 2)
    return jnp.array([(qd[0] * q[1] - qd[1] * q[0]) / rho + A * qd[2]])


def sphere(mu_k, mu_s):
    return jl.LagrangianSystem(
        _sphere_lagrangian,
        unilateral=_on_sphere,
        slip=_sphere_slip,
        friction=mu_k,
        static_friction=mu_s,
    )


# The chapter's 6.9.4: a small body (mass m) held by friction on the rim of a
# wheel (M, R, I) rolling on the floor; q = (x, φ, r, θ), rolling x = R φ.

WHEEL = {"M": 1.0, "R": 1.0, "inertia": 0.5, "m": 0.2}
_M, _WR, _I, _m = WHEEL.values()


def _wheel_lagrangian(q, qd, t):
    x, phi, r, th = q
    vx = qd[0] + qd[2] * jnp.sin(th) + r * qd[3] * jnp.cos(th)
    vy = qd[2] * jnp.cos(th) - r * qd[3] * jnp.sin(th)
    kinetic = 0.5 * _M * qd[0] ** 2 + 0.5 * _I * qd[1] ** 2 + 0.5 * _m * (vx**2 + vy**2)
    return kinetic - _m * G * (_WR + r * jnp.cos(th))


def wheel(mu_k, mu_s):
    return jl.LagrangianSystem(
        _wheel_lagrangian,
        holonomic=lambda q, t: jnp.array([q[0] - _WR * q[1]]),
        unilateral=lambda q, t: jnp.array([q[2] - _WR]),
        slip=lambda q, qd, t: jnp.array([q[2] * qd[3] - _WR * qd[1]]),
        friction=mu_k,
        static_friction=mu_s,
    )
