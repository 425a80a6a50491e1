"""The Whipple bicycle of the benchmark of Meijaard, Papadopoulos, Ruina and Schwab (2007)."""

import jax
import jax.numpy as jnp

from .. import rigid
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


def _turn(seq, angle):
    return rigid.euler_to_matrix(angle, seq)


def _poses(q, p):
    """The centre and orientation (body to space) of each body R, B, H, F, by name."""
    x, y, yaw, lean, pitch, steer, spin_r, spin_f = q
    # The leaned frame and the steer turn are shared: the Lagrangian differentiates
    # the four bodies in one JVP, half the program of one JVP each.
    leaned = rigid.euler_to_matrix(jnp.stack([yaw, lean]), "ZX")
    centre_r = jnp.stack([x, y, jnp.zeros_like(x)]) - p["rR"] * leaned[:, 2]
    frame = leaned @ _turn("Y", pitch)
    # Reference positions relative to the rear wheel centre; the steer axis, tilted
    # back by lam from the vertical, passes through the ground point a trail ahead
    # of the front contact: the steer turns about it, R_y(λ) R_z(δ) R_y(−λ).
    pivot = jnp.array([p["w"] + p["c"], 0.0, p["rR"]])
    turn = rigid.euler_to_matrix(jnp.stack([p["lam"], steer, -p["lam"]]), "YZY")
    fork = frame @ turn

    def steered(point):
        return centre_r + frame @ (pivot + turn @ (point - pivot))

    return {
        "R": (centre_r, leaned @ _turn("Y", pitch + spin_r)),
        "B": (centre_r + frame @ jnp.array([p["xB"], 0.0, p["zB"] + p["rR"]]), frame),
        "H": (steered(jnp.array([p["xH"], 0.0, p["zH"] + p["rR"]])), fork),
        "F": (
            steered(jnp.array([p["w"], 0.0, p["rR"] - p["rF"]])),
            fork @ _turn("Y", spin_f),
        ),
    }


def _inertia(p, body):
    if body in ("R", "F"):
        return jnp.diag(jnp.stack([p[f"I{body}xx"], p[f"I{body}yy"], p[f"I{body}xx"]]))
    xx, yy, zz, xz = (p[f"I{body}{k}"] for k in ("xx", "yy", "zz", "xz"))
    return jnp.array([[xx, 0.0, xz], [0.0, yy, 0.0], [xz, 0.0, zz]])


def _motions(q, qd, p):
    """`_poses` and their rates along q̇ (nothing depends on t explicitly)."""
    return jax.jvp(lambda q: _poses(q, p), (q,), (qd,))


def _lagrangian(q, qd, t, p):
    # Σ ½ m |ẋ|² + ½ ωᵀ I ω, each body's `rigid.kinetic_energy`, from one JVP.
    poses, rates = _motions(q, qd, p)
    lagrangian = 0.0
    for body, mass in _BODIES:
        (centre, rotation), (velocity, rate) = poses[body], rates[body]
        omega = rigid.matrix_angular_velocity(rotation, rate)
        kinetic = 0.5 * p[mass] * velocity @ velocity
        kinetic = kinetic + 0.5 * omega @ _inertia(p, body) @ omega
        # z points down: the potential energy is −m g z.
        lagrangian = lagrangian + kinetic + p[mass] * p["g"] * centre[2]
    return lagrangian


def _contact(centre, rotation, p, body):
    """The lowest point of a wheel: its centre plus r down, in the wheel's plane."""
    axle = rotation[:, 1]
    down = jnp.array([0.0, 0.0, 1.0])
    along = down - (down @ axle) * axle
    return centre + p[f"r{body}"] * along / jnp.sqrt(along @ along)


def _front_on_ground(q, t, p):
    return _contact(*_poses(q, p)["F"], p, "F")[2:]


def _rolling(q, qd, t, p):
    """Each wheel's contact velocity v + ω × (P − c): x and y zero when rolling."""
    poses, rates = _motions(q, qd, p)
    rows = []
    for body in ("R", "F"):
        (centre, rotation), (velocity, rate) = poses[body], rates[body]
        omega = rigid.matrix_angular_velocity(rotation, rate, frame="space")
        arm = _contact(centre, rotation, p, body) - centre
        rows.append((velocity + jnp.cross(omega, arm))[:2])
    return jnp.concatenate(rows)


def _points(q, t, params):
    """The centres of the rear wheel, rear frame, front fork and front wheel (z up)."""
    poses = _poses(q, params)
    centres = jnp.stack([poses[body][0] for body, _ in _BODIES])
    return centres * jnp.array([1.0, 1.0, -1.0], q.dtype)


@register(
    "whipple_bicycle",
    units=("m", "m") + ("rad",) * 6,
    point_names=("rear wheel", "rear frame", "front fork", "front wheel"),
)
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
    rolling = [v, *[0.0] * 5, -v / float(params["rR"]), -v / float(params["rF"])]
    q0, qd0 = initial_state("whipple_bicycle", q0, qd0, [0.0] * 8, rolling)
    system = LagrangianSystem(
        _lagrangian, params=params, holonomic=_front_on_ground, nonholonomic=_rolling
    )
    return ReadySystem(
        system,
        q0,
        qd0,
        "whipple_bicycle",
        ("x", "y", "ψ", "φ", "θ", "δ", "θ_R", "θ_F"),
        points=_points,
    )
