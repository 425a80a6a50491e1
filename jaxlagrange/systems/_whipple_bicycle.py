"""The Whipple bicycle of the benchmark of Meijaard, Papadopoulos, Ruina and Schwab (2007)."""

import jax
import jax.numpy as jnp

from .._system import LagrangianSystem
from ._registry import ReadySystem, initial_state, merge_params, register


# The benchmark's parameters (SI units; x forward, y right, z down).
_DEFAULTS = {
    "w": 1.02,  # wheelbase
    "c": 0.08,  # trail
    "lam": 3.141592653589793 / 10,  # steer axis tilt from the vertical
    "g": 9.81,
    "rR": 0.3, "mR": 2.0, "IRxx": 0.0603, "IRyy": 0.12,  # rear wheel
    "xB": 0.3, "zB": -0.9, "mB": 85.0,  # rear body and frame
    "IBxx": 9.2, "IByy": 11.0, "IBzz": 2.8, "IBxz": 2.4,
    "xH": 0.9, "zH": -0.7, "mH": 4.0,  # front handlebar and fork
    "IHxx": 0.05892, "IHyy": 0.06, "IHzz": 0.00708, "IHxz": -0.00756,
    "rF": 0.35, "mF": 3.0, "IFxx": 0.1405, "IFyy": 0.28,  # front wheel
}  # fmt: skip

_BODIES = (("R", "mR"), ("B", "mB"), ("H", "mH"), ("F", "mF"))


def _rx(a):
    c, s = jnp.cos(a), jnp.sin(a)
    return jnp.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])


def _ry(a):
    c, s = jnp.cos(a), jnp.sin(a)
    return jnp.array([[c, 0.0, s], [0.0, 1.0, 0.0], [-s, 0.0, c]])


def _rz(a):
    c, s = jnp.cos(a), jnp.sin(a)
    return jnp.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def _about(axis, angle):
    """Rotation by `angle` about the unit vector `axis` (Rodrigues)."""
    k = jnp.array(
        [[0.0, -axis[2], axis[1]], [axis[2], 0.0, -axis[0]], [-axis[1], axis[0], 0.0]]
    )
    return jnp.eye(3) + jnp.sin(angle) * k + (1 - jnp.cos(angle)) * k @ k


def _poses(q, p):
    """Centre and orientation of each body: R(ear wheel), B, H, F(ront wheel).

    q = (x, y, ψ, φ, θ, δ, θ_R, θ_F): rear contact point, yaw, lean (roll), pitch of
    the rear frame, steer, and the wheels' rotations; all zero is the benchmark's
    reference configuration, upright and straight.
    """
    x, y, yaw, lean, pitch, steer, spin_r, spin_f = q
    leaned = _rz(yaw) @ _rx(lean)
    centre_r = jnp.array([x, y, 0.0]) - p["rR"] * leaned[:, 2]
    frame = leaned @ _ry(pitch)
    axis = jnp.array([jnp.sin(p["lam"]), 0.0, jnp.cos(p["lam"])])
    # Reference positions relative to the rear wheel centre; the steer axis
    # passes through the ground point a trail ahead of the front contact.
    pivot = jnp.array([p["w"] + p["c"], 0.0, p["rR"]])
    turn = _about(axis, steer)

    def on_front(point):
        return centre_r + frame @ (pivot + turn @ (point - pivot))

    fork = frame @ turn
    return {
        "R": (centre_r, leaned @ _ry(pitch + spin_r)),
        "B": (centre_r + frame @ jnp.array([p["xB"], 0.0, p["zB"] + p["rR"]]), frame),
        "H": (on_front(jnp.array([p["xH"], 0.0, p["zH"] + p["rR"]])), fork),
        "F": (
            on_front(jnp.array([p["w"], 0.0, p["rR"] - p["rF"]])),
            fork @ _ry(spin_f),
        ),
    }


def _inertia(p, body):
    if body in ("R", "F"):
        return jnp.diag(jnp.stack([p[f"I{body}xx"], p[f"I{body}yy"], p[f"I{body}xx"]]))
    xx, yy, zz, xz = (p[f"I{body}{k}"] for k in ("xx", "yy", "zz", "xz"))
    zero = jnp.zeros_like(xx)
    return jnp.stack(
        [
            jnp.stack([xx, zero, xz]),
            jnp.stack([zero, yy, zero]),
            jnp.stack([xz, zero, zz]),
        ]
    )


def _lagrangian(q, qd, t, p):
    kinetic = potential = 0.0
    poses, rates = jax.jvp(lambda q: _poses(q, p), (q,), (qd,))
    for body, mass in _BODIES:
        (centre, rot), (velocity, rot_dot) = poses[body], rates[body]
        w = rot.T @ rot_dot  # the angular velocity in the body's frame, as a skew
        omega = jnp.stack([w[2, 1], w[0, 2], w[1, 0]])
        kinetic = kinetic + 0.5 * p[mass] * velocity @ velocity
        kinetic = kinetic + 0.5 * omega @ _inertia(p, body) @ omega
        potential = potential - p[mass] * p["g"] * centre[2]  # z points down
    return kinetic - potential


def _contact(q, p, body):
    """The lowest point of a wheel: its centre plus r along the downward direction
    in the wheel's plane."""
    centre, rot = _poses(q, p)[body]
    axle = rot[:, 1]
    down = jnp.array([0.0, 0.0, 1.0])
    along = down - (down @ axle) * axle
    return centre + p[f"r{body}"] * along / jnp.sqrt(along @ along)


def _front_on_ground(q, t, p):
    return _contact(q, p, "F")[2:]


def _rolling(q, qd, t, p):
    """The velocity of each wheel's material point at its contact, v + ω × (P − c):
    zero when rolling without slipping (its x and y components)."""
    rows = []
    poses, rates = jax.jvp(lambda q: _poses(q, p), (q,), (qd,))
    for body in ("R", "F"):
        (centre, rot), (velocity, rot_dot) = poses[body], rates[body]
        w = rot_dot @ rot.T
        omega = jnp.stack([w[2, 1], w[0, 2], w[1, 0]])
        arm = _contact(q, p, body) - centre
        rows.append((velocity + jnp.cross(omega, arm))[:2])
    return jnp.concatenate(rows)


def _points(q, t, params):
    """The centres of the rear wheel, rear frame, front fork and front wheel (z up)."""
    centres = jnp.stack([centre for centre, _ in _poses(q, params).values()])
    return centres * jnp.array([1.0, 1.0, -1.0], q.dtype)


@register("whipple_bicycle")
def whipple_bicycle(
    params=None, *, q0=None, qd0=None, speed: float = 5.0
) -> ReadySystem:
    """The Whipple bicycle of the benchmark of Meijaard et al. (2007).

    Four rigid bodies (rear wheel, rear frame with rider, front fork with
    handlebar, front wheel) with knife-edge wheels rolling without slipping on
    flat ground: eight coordinates q = (x, y, ψ, φ, θ, δ, θ_R, θ_F) (rear contact,
    yaw, lean, pitch, steer, wheel rotations; z points down), one holonomic
    constraint (the front wheel touches the ground, which fixes the pitch) and four
    nonholonomic ones (both contacts roll). Linearized about upright straight
    running at speed v with `jl.linearize(system, q, qd, coordinates=[0, 1, 2, 3,
    5, 6, 7], velocities=[3, 5, 6])`, the lean and steer rows are the benchmark's
    M q̈ + v C₁ q̇ + (g K₀ + v² K₂) q = 0, stable for 4.29 < v < 6.02 m/s.

    **Arguments:**

    - `params`: overrides of the benchmark's parameters (SI units): `w`, `c`,
        `lam`, `g`, and per body `rR, mR, IRxx, IRyy` (rear wheel), `xB, zB, mB,
        IBxx, IByy, IBzz, IBxz` (rear frame), `xH, zH, mH, IHxx, IHyy, IHzz, IHxz`
        (front frame), `rF, mF, IFxx, IFyy` (front wheel).
    - `q0`, `qd0`: the initial state (default: upright and straight).
    - `speed`: the forward speed of the default initial state, in m/s.

    **Returns:** a `ReadySystem` with coordinates `("x", "y", "ψ", "φ", "θ", "δ",
    "θ_R", "θ_F")`.

    **Example:**

    ```python
    bike, q0, qd0 = jl.systems.whipple_bicycle(speed=5.0)
    lin = jl.linearize(bike, q0, qd0, coordinates=[0, 1, 2, 3, 5, 6, 7],
                       velocities=[3, 5, 6])
    ```
    """
    params = merge_params("whipple_bicycle", _DEFAULTS, params)
    v = float(speed)
    rolling = [
        v,
        0.0,
        0.0,
        0.0,
        0.0,
        0.0,
        -v / float(params["rR"]),
        -v / float(params["rF"]),
    ]
    q0, qd0 = initial_state("whipple_bicycle", q0, qd0, [0.0] * 8, rolling)
    system = LagrangianSystem(
        _lagrangian,
        params=params,
        holonomic=_front_on_ground,
        nonholonomic=_rolling,
    )
    return ReadySystem(
        system,
        q0,
        qd0,
        "whipple_bicycle",
        ("x", "y", "ψ", "φ", "θ", "δ", "θ_R", "θ_F"),
        points=_points,
    )
