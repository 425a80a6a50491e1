"""Worked constrained examples of Cline's ch. 6: closed form vs simulated.

The chapter is D. Cline, *Variational Principles in Classical Mechanics*, ch. 6
(Lagrangian dynamics).

Every holonomic and nonholonomic example of the chapter that has a closed form
(6.8.1–6.8.7), plus the classic nonholonomic rolling coin, is set up with its
constraints as a `jl.LagrangianSystem` (the Lagrangian in redundant coordinates
and g = 0 or a = 0, not the textbook's reduced coordinates), integrated by
`jl.simulate` with its default drift control (projection onto the manifold), and
compared with the closed form: positions at t1, the Lagrange multipliers (the
constraint forces, sign convention of eq. 6.60), periods.

The one-sided examples (6.9) use unilateral constraints h ≥ 0, released by
`simulate` as root-found events where their multiplier (the normal force)
falls through zero:

- 6.9.1, a mass sliding off a smooth sphere: the leaving angle cos θ = ⅔ cos θ₀
  (48.19° from the top), its time (a quadrature of the energy equation), and the
  normal force m g (3 cos θ − 2 cos θ₀) at 30°;
- 6.9.2, a solid sphere rolling on a spherical shell: leaving at
  cos θ = (10/17) cos θ₀ (53.97°), its time, the normal force and the friction
  needed, μ = 2 sin θ/(17 cos θ − 10 cos θ₀), at 30° and at the chapter's slip
  angle for μ = 1 (47.54°).

Both start θ₀ = 1e-3 rad off the top (rest at the top is an equilibrium).
Impulsive forces (6.12): the section has no worked example, so its end-of-chapter
problem, a rod hanging on a string struck horizontally at its bottom end, is
solved by `jl.apply_impulse` against the closed form of eq. 6.79; and a
bouncing ball (restitution `e`, read from its params) loses e² of its energy per bounce at the
closed-form bounce times.

Not here, for want of a closed form in the chapter (it gives only the
equations of motion): 6.8.8 (a mass on a table tied to a hanging pendulum) and
6.8.9 (masses on springs along a free rod) are checked against their equations
integrated by SciPy in `tests/test_chapter_6_8.py`; 6.9.3 (a sphere rolling and
slipping on a shell, F = μN) and 6.9.4 (a body held by friction on a rolling
wheel: it sticks, slips, then flies off) need Coulomb friction and are in
`experiments/friction.py`. 6.7.x have no
constraints, and 6.11.1 (the pendulum on an oscillating support) is the subject
of `jl.systems.kapitza`.

    python experiments/textbook_constraints.py            # every example, t1 = 10
    python experiments/textbook_constraints.py --quick    # one of each kind, for CI

`--quick` runs t1 = 1 and only one example of each kind (a holonomic one, the two
release examples, the impulse and the bounces): compiling each system costs
5–30 s, far more than integrating it. The event examples run past their events
whatever t1.

Prints a table (quantity, closed form, simulated, relative error) and the worst
relative error, and writes `textbook_constraints.png` (each example's main
quantity against time, or against θ or the impulse) and `results.json` (the rows
and `worst_relative_error`) to `--out` (default `out/textbook_constraints`).

Each example is a function in `EXAMPLES` returning an `Example`; append new ones
to that list (and to `QUICK` to run them in CI).
"""

import argparse
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import scipy.integrate  # noqa: E402
import scipy.optimize  # noqa: E402
import scipy.special  # noqa: E402

import jaxlagrange as jl  # noqa: E402


G = 9.81
TOL = 1e-10  # rtol = atol of every simulation


@dataclass
class Example:
    """One worked example: table rows and one curve to plot."""

    title: str
    rows: list[tuple[str, float, float]]  # (quantity, closed form, simulated)
    ts: np.ndarray
    simulated: np.ndarray
    closed: np.ndarray
    ylabel: str
    xlabel: str = "t [s]"
    seconds: float = field(default=0.0)


def simulate_checked(system, q0, qd0, t1, saves=101):
    ts = jnp.linspace(0.0, t1, saves)
    traj = jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=TOL, atol=TOL)
    return np.asarray(ts), traj


def disk_on_incline(t1: float) -> Example:
    """6.8.1: a disk rolling down an incline, ÿ = ⅔ g sin α, λ = −m g sin α / 3."""
    alpha = 0.5
    rows, curves = [], []
    for rolling in ("holonomic", "nonholonomic"):
        system, q0, qd0 = jl.systems.rolling_disk({"alpha": alpha}, rolling=rolling)
        ts, traj = simulate_checked(system, q0, qd0, t1)
        closed = G * np.sin(alpha) / 3 * ts**2
        rows += [
            (f"y(t1), {rolling} rolling", closed[-1], traj.q[-1, 0]),
            (f"λ friction, {rolling}", -G * np.sin(alpha) / 3, traj.multipliers[-1, 0]),
        ]
        curves.append((traj.q[:, 0], closed))
    return Example("6.8.1 disk rolling down an incline", rows, ts, *curves[0], "y [m]")


def _inclines(q, qd, t, params):
    m1, m2, th1, th2 = params
    kinetic = 0.5 * m1 * qd[0] ** 2 + 0.5 * m2 * qd[1] ** 2
    return kinetic + G * (m1 * q[0] * jnp.sin(th1) + m2 * q[1] * jnp.sin(th2))


def _string(q, t, params):
    return jnp.stack([q[0] + q[1] - 3.0])


def masses_on_inclines(t1: float) -> Example:
    """6.8.2: two masses on inclines joined over the apex by a string."""
    m1, m2, th1, th2 = 2.0, 1.0, 0.8, 0.3
    system = jl.LagrangianSystem(
        _inclines, params=(m1, m2, th1, th2), holonomic=_string
    )
    ts, traj = simulate_checked(system, jnp.array([1.0, 2.0]), jnp.zeros(2), t1)
    accel = G * (m1 * np.sin(th1) - m2 * np.sin(th2)) / (m1 + m2)
    tension = m1 * m2 * G * (np.sin(th1) + np.sin(th2)) / (m1 + m2)
    closed = 1.0 + 0.5 * accel * ts**2
    rows = [
        ("x₁(t1)", closed[-1], traj.q[-1, 0]),
        ("string tension T = −λ", tension, -traj.multipliers[-1, 0]),
    ]
    return Example(
        "6.8.2 masses on two inclines", rows, ts, traj.q[:, 0], closed, "x₁ [m]"
    )


def _block_wedge(q, qd, t, params):
    m, big_m = params["m"], params["M"]
    return 0.5 * m * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * big_m * qd[2] ** 2 - m * G * q[1]


def _slope(q, t, params):
    th = params["theta"]
    return jnp.stack([(q[1] - 2.0) * jnp.cos(th) + (q[0] - q[2]) * jnp.sin(th)])


def block_on_movable_incline(t1: float) -> Example:
    """6.8.3: a block sliding on a frictionless wedge free to slide on the floor."""
    m, big_m, th = 1.0, 3.0, 0.6
    system = jl.LagrangianSystem(
        _block_wedge, params={"m": m, "M": big_m, "theta": th}, holonomic=_slope
    )
    q0 = jnp.array([0.0, 2.0, 0.0])
    ts, traj = simulate_checked(system, q0, jnp.zeros(3), t1)
    slide = G * np.sin(th) / (1 - m * np.cos(th) ** 2 / (m + big_m))
    wedge = -m * np.cos(th) * slide / (m + big_m)
    normal = m * big_m * G * np.cos(th) / (big_m + m * np.sin(th) ** 2)
    q = np.asarray(traj.q)
    along = (q[:, 0] - q[:, 2]) * np.cos(th) - (q[:, 1] - 2.0) * np.sin(th)
    closed = 0.5 * slide * ts**2
    rows = [
        ("block down the slope x'(t1)", closed[-1], along[-1]),
        ("wedge X(t1)", 0.5 * wedge * t1**2, q[-1, 2]),
        ("normal force N = λ", normal, traj.multipliers[-1, 0]),
    ]
    return Example(
        "6.8.3 block on a movable incline", rows, ts, along, closed, "x' [m]"
    )


def _sphere_wedge(q, qd, t, params):
    m, big_m, r, phi = params
    # q = (X, s, θ): the wedge, the sphere's distance down the slope, its rotation.
    kinetic = 0.5 * big_m * qd[0] ** 2 + 0.5 * m * (
        qd[0] ** 2 + qd[1] ** 2 + 2 * qd[0] * qd[1] * jnp.cos(phi)
    )
    return kinetic + 0.2 * m * r**2 * qd[2] ** 2 + m * G * q[1] * jnp.sin(phi)


def _sphere_rolls(q, t, params):
    return jnp.stack([q[1] - params[2] * q[2]])


def sphere_on_movable_incline(t1: float) -> Example:
    """6.8.4: a sphere rolling without slipping down a wedge on a frictionless floor."""
    m, big_m, r, phi = 1.0, 2.0, 0.2, 0.5
    system = jl.LagrangianSystem(
        _sphere_wedge, params=(m, big_m, r, phi), holonomic=_sphere_rolls
    )
    ts, traj = simulate_checked(system, jnp.zeros(3), jnp.zeros(3), t1)
    denominator = 7 * (big_m + m) - 5 * m * np.cos(phi) ** 2
    wedge = -5 * m * G * np.sin(2 * phi) / (4 * denominator) * ts**2
    slide = 5 * G * np.sin(phi) * (m + big_m) / (2 * denominator) * ts**2
    rows = [
        ("wedge X(t1)", wedge[-1], traj.q[-1, 0]),
        ("sphere down the slope s(t1)", slide[-1], traj.q[-1, 1]),
    ]
    return Example(
        "6.8.4 sphere rolling on a movable incline",
        rows,
        ts,
        traj.q[:, 0],
        wedge,
        "X [m]",
    )


def rotating_rod(t1: float) -> Example:
    """6.8.5 with θ̇ = ω imposed: r = r₀ cosh ωt, rod force 2 m r₀ ω² sinh ωt."""
    omega, r0 = 1.5, 0.5
    system, q0, qd0 = jl.systems.rotating_rod(
        {"omega": omega}, q0=[r0, 0.0], qd0=[0.0, omega * r0]
    )
    ts, traj = simulate_checked(system, q0, qd0, t1)
    r = np.hypot(traj.q[:, 0], traj.q[:, 1])
    closed = r0 * np.cosh(omega * ts)
    rows = [
        ("r(t1)", closed[-1], r[-1]),
        (
            "rod force λ(t1)",
            2 * r0 * omega**2 * np.sinh(omega * t1),
            traj.multipliers[-1, 0],
        ),
    ]
    return Example("6.8.5 bead on a rotating rod", rows, ts, r, closed, "r [m]")


def _free_mass(q, qd, t):
    return 0.5 * jnp.sum(qd**2) - G * q[2]


def _sphere(q, t):
    return jnp.stack([(q @ q - 1.0) / 2])


def conical_pendulum(t1: float) -> Example:
    """6.8.6: the spherical pendulum in Cartesian (x, y, z), |q| = l = 1, conical orbit."""
    theta = 0.6
    omega = np.sqrt(G / np.cos(theta))  # φ̇² = g / (l cos θ)
    system = jl.LagrangianSystem(_free_mass, holonomic=_sphere)
    q0 = jnp.array([np.sin(theta), 0.0, -np.cos(theta)])
    qd0 = jnp.array([0.0, omega * np.sin(theta), 0.0])
    ts, traj = simulate_checked(system, q0, qd0, t1)
    phi = np.unwrap(np.arctan2(traj.q[:, 1], traj.q[:, 0]))
    rows = [
        ("azimuth φ(t1)", omega * t1, phi[-1]),
        ("height z(t1)", -np.cos(theta), traj.q[-1, 2]),
        ("rod tension −λ = m g / cos θ", G / np.cos(theta), -traj.multipliers[-1, 0]),
    ]
    return Example(
        "6.8.6 conical (spherical) pendulum", rows, ts, phi, omega * ts, "φ [rad]"
    )


def _cylindrical(q, qd, t):
    return 0.5 * (qd[0] ** 2 + q[0] ** 2 * qd[1] ** 2 + qd[2] ** 2) - G * q[2]


def _paraboloid(q, t):
    return jnp.stack([q[0] ** 2 - 0.5 * q[2]])


def paraboloid_orbit(t1: float) -> Example:
    """6.8.7: circular orbit on ρ² = a z at ω = √(2g/a); λ = −m g / a."""
    a, rho = 0.5, 0.8
    omega = np.sqrt(2 * G / a)
    system = jl.LagrangianSystem(_cylindrical, holonomic=_paraboloid)
    q0 = jnp.array([rho, 0.0, rho**2 / a])
    ts, traj = simulate_checked(system, q0, jnp.array([0.0, omega, 0.0]), t1)
    rows = [
        ("ρ(t1)", rho, traj.q[-1, 0]),
        ("φ(t1)", omega * t1, traj.q[-1, 1]),
        ("λ = −m g / a", -G / a, traj.multipliers[-1, 0]),
    ]
    closed = np.full_like(ts, rho)
    return Example(
        "6.8.7 orbit on a paraboloid", rows, ts, traj.q[:, 0], closed, "ρ [m]"
    )


def cartesian_pendulum(t1: float) -> Example:
    """The plane pendulum in (x, y): θ(t) = 2 arcsin(k sn(K − ω₀t, k²)), its period."""
    theta0 = 1.0
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    k2 = np.sin(theta0 / 2) ** 2
    quarter = scipy.special.ellipk(k2)
    period = 4 * quarter / np.sqrt(G)
    t1 = max(t1, 1.05 * period)
    laps = int(t1 / period)
    # Save at whole periods too: there the bob is back at rest at θ0.
    ts = jnp.sort(
        jnp.concatenate([jnp.linspace(0.0, t1, 101), jnp.array([laps * period])])
    )
    traj = jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=TOL, atol=TOL)
    ts = np.asarray(ts)
    theta = np.arctan2(traj.q[:, 0], -traj.q[:, 1])
    closed = 2 * np.arcsin(
        np.sqrt(k2) * scipy.special.ellipj(quarter - np.sqrt(G) * ts, k2)[0]
    )
    i = int(np.searchsorted(ts, laps * period))
    # At t = laps·T the bob should turn at θ0; θ̇ there is g sin θ0 times the time
    # it is behind (a longer simulated period).
    (x, y), (xd, yd) = traj.q[i], traj.qd[i]
    lag = (x * yd - y * xd) / (G * np.sin(theta0))
    rows = [
        ("θ(t1)", closed[-1], theta[-1]),
        (f"period (from {laps} laps)", period, period + lag / laps),
        (
            "rod tension at t1: m v²/l − m g y/l",
            float(np.sum(traj.qd[-1] ** 2) - G * traj.q[-1, 1]),
            -traj.multipliers[-1, 0],
        ),
    ]
    return Example(
        "plane pendulum in Cartesian coordinates", rows, ts, theta, closed, "θ [rad]"
    )


def rolling_coin(t1: float) -> Example:
    """A vertical coin rolling on a level and on a tilted plane (nonholonomic)."""
    rows, curves = [], []
    for alpha in (0.0, 0.3):
        system, q0, qd0 = jl.systems.rolling_coin({"alpha": alpha})
        ts, traj = simulate_checked(system, q0, qd0, t1)
        v0, omega = float(qd0[0]), float(qd0[2])
        k = 2 / 3 * G * np.sin(alpha)
        w = omega * ts
        x = v0 / omega * np.sin(w) + k * np.sin(w) ** 2 / (2 * omega**2)
        y = v0 / omega * (1 - np.cos(w)) + k * (w - 0.5 * np.sin(2 * w)) / (
            2 * omega**2
        )
        rows += [
            (f"x(t1), plane tilted {alpha}", x[-1], traj.q[-1, 0]),
            (f"y(t1), plane tilted {alpha}", y[-1], traj.q[-1, 1]),
        ]
        curves.append((traj.q[:, 1], y))
    return Example(
        "rolling coin (knife edge), tilted plane", rows, ts, *curves[1], "y [m]"
    )


# Unilateral constraints (6.9): h ≥ 0 acts as a holonomic constraint while its
# multiplier (the normal force) pushes, and `simulate` releases it, as a
# root-found event, where the multiplier falls through zero.


def _time_to(theta0, theta1, rate2):
    """∫ dθ/θ̇ from rest at θ₀, with θ̇² = rate2 (cos θ₀ − cos θ) on the surface.

    The time to leave the surface, for the rows that compare event times. The
    1/√(θ − θ₀) singularity at the start is taken by quad's weight, and
    cos θ₀ − cos θ = 2 sin((θ + θ₀)/2) sin((θ − θ₀)/2) avoids the cancellation.
    """

    def smooth(theta):
        d = theta - theta0
        if d == 0:
            return np.sqrt(1 / (rate2 * np.sin(theta0)))
        drop = 2 * np.sin((theta + theta0) / 2) * np.sin(d / 2)
        return np.sqrt(d / (rate2 * drop))

    value, _ = scipy.integrate.quad(
        smooth, theta0, theta1, weight="alg", wvar=(-0.5, 0.0), epsabs=0, epsrel=1e-13
    )
    return value


# "From rest at the top" is an unstable equilibrium that never moves: start
# THETA0 off the top. The closed forms keep θ₀ (cos θ = ⅔ cos θ₀ instead of ⅔),
# and differ from the chapter's θ₀ = 0 numbers by O(θ₀²) ≈ 1e-6. Much closer to
# the top, atol would dominate the error of θ, which grows like e^(t√(g/R)).
THETA0 = 1e-3
PROBE = np.radians(30.0)  # where the normal force is compared, before leaving


def _release_run(system, q0, t_off, rate2, probes=(PROBE,)):
    """Simulate past the release, saving also at the closed-form times of the
    release and of the `probes` angles; returns ts, traj and their indices."""
    t_probes = [_time_to(THETA0, angle, rate2) for angle in probes]
    t1 = 1.3 * t_off
    ts = np.sort(np.r_[np.linspace(0.0, t1, 121), t_probes, t_off])
    traj = jl.simulate(
        system, q0, jnp.zeros_like(q0), t1=t1, saveat=ts, rtol=TOL, atol=TOL
    )
    # The release is the one event, a release of the unilateral constraint.
    assert int(traj.num_events) == 1, int(traj.num_events)
    assert int(traj.event_kind[0]) == jl.EVENT_RELEASE
    at = [int(np.argmax(ts == t)) for t in (*t_probes, t_off)]
    return ts, traj, at


def mass_off_sphere(t1: float) -> Example:
    """6.9.1: a mass sliding off a smooth sphere leaves at cos θ = ⅔ cos θ₀."""
    m, radius = 1.0, 1.0
    system, q0, _ = jl.systems.mass_on_sphere(
        {"m": m, "R": radius}, q0=[radius, THETA0]
    )
    # Energy: θ̇² = (2g/R)(cos θ₀ − cos θ); radial equation: the normal force
    # λ = m g (3 cos θ − 2 cos θ₀), zero at cos θ = ⅔ cos θ₀.
    theta_off = np.arccos(2 / 3 * np.cos(THETA0))
    rate2 = 2 * G / radius
    t_off = _time_to(THETA0, theta_off, rate2)
    ts, traj, (probe, off) = _release_run(system, q0, t_off, rate2)
    theta = np.asarray(traj.q[:, 1])
    normal = np.where(
        theta < theta_off, m * G * (3 * np.cos(theta) - 2 * np.cos(THETA0)), 0.0
    )
    rows = [
        (
            "leaving angle θ [°] (θ at the closed-form t)",
            np.degrees(theta_off),
            np.degrees(theta[off]),
        ),
        ("leaving time (release event)", t_off, traj.event_ts[0]),
        (
            "normal force λ at θ = 30°",
            m * G * (3 * np.cos(PROBE) - 2 * np.cos(THETA0)),
            traj.multipliers[probe, 0],
        ),
    ]
    return Example(
        "6.9.1 mass sliding off a sphere",
        rows,
        np.degrees(theta),
        np.asarray(traj.multipliers[:, 0]),
        normal,
        "normal force λ [N]",
        xlabel="θ [°]",
    )


def _rolling(q, qd, t, params):
    m, a = params["m"], params["a"]
    r, theta, _ = q
    inertia = 0.4 * m * a**2  # a uniform solid sphere
    kinetic = 0.5 * m * (qd[0] ** 2 + r**2 * qd[1] ** 2) + 0.5 * inertia * qd[2] ** 2
    return kinetic - m * G * r * jnp.cos(theta)


def _rolls(q, t, params):
    # The chapter's g₂ = a(φ − θ) − Rθ, φ measured from the vertical.
    return jnp.stack([params["a"] * (q[2] - q[1]) - params["R"] * q[1]])


def _on_shell(q, t, params):
    return jnp.stack([q[0] - params["R"] - params["a"]])


def sphere_off_shell(t1: float) -> Example:
    """6.9.2: a solid sphere rolling on a spherical shell leaves at cos θ = 10/17."""
    m, radius, a = 1.0, 1.0, 0.25
    system = jl.LagrangianSystem(
        _rolling,
        params={"m": m, "a": a, "R": radius},
        holonomic=_rolls,
        unilateral=_on_shell,
    )
    rho = radius + a
    # Rolling keeps 2/7 of the kinetic energy in rotation: (7/10) ρ θ̇² =
    # g (cos θ₀ − cos θ); the normal force N = m g (17 cos θ − 10 cos θ₀)/7
    # vanishes at cos θ = (10/17) cos θ₀, and the friction is F = (2/7) m g sin θ.
    theta_off = np.arccos(10 / 17 * np.cos(THETA0))
    rate2 = 10 * G / (7 * rho)
    t_off = _time_to(THETA0, theta_off, rate2)
    q0 = jnp.array([rho, THETA0, THETA0 * rho / a])
    # The friction needed, μ = F/N = 2 sin θ/(17 cos θ − 10 cos θ₀), reaches
    # μ = 1 (where the chapter's sphere starts to slip, 47.54°) before it leaves.
    theta_slip = scipy.optimize.brentq(
        lambda th: 2 * np.sin(th) - (17 * np.cos(th) - 10 * np.cos(THETA0)),
        PROBE,
        theta_off,
        xtol=1e-15,
    )
    ts, traj, (probe, slip, off) = _release_run(
        system, q0, t_off, rate2, probes=(PROBE, theta_slip)
    )
    theta = np.asarray(traj.q[:, 1])
    # Multipliers: the rolling constraint's first (the friction F), then the
    # unilateral one's (the normal force N).
    friction, normal = np.asarray(traj.multipliers).T
    closed = np.where(
        theta < theta_off, m * G * (17 * np.cos(theta) - 10 * np.cos(THETA0)) / 7, 0.0
    )
    rows = [
        (
            "leaving angle θ [°] (θ at the closed-form t)",
            np.degrees(theta_off),
            np.degrees(theta[off]),
        ),
        ("leaving time (release event)", t_off, traj.event_ts[0]),
        (
            "normal force λ₁ at θ = 30°",
            m * G * (17 * np.cos(PROBE) - 10 * np.cos(THETA0)) / 7,
            normal[probe],
        ),
        (
            "μ needed = λ₂/λ₁ at θ = 30°",
            2 * np.sin(PROBE) / (17 * np.cos(PROBE) - 10 * np.cos(THETA0)),
            friction[probe] / normal[probe],
        ),
        (
            f"μ needed at θ = {np.degrees(theta_slip):.2f}° (slips if μ = 1)",
            1.0,
            friction[slip] / normal[slip],
        ),
    ]
    return Example(
        "6.9.2 solid sphere rolling off a spherical shell",
        rows,
        np.degrees(theta),
        normal,
        closed,
        "normal force λ₁ [N]",
        xlabel="θ [°]",
    )


# Impulsive forces (6.12): over an instant M Δq̇ = P + CᵀΛ, `jl.apply_impulse`.


def _hanging_rod(q, qd, t, params):
    big_m, half = params["M"], params["L"]
    # q = (x, y, φ): the rod's centre and its angle from the downward vertical.
    inertia = big_m * half**2 / 3  # a uniform rod of length 2L about its centre
    kinetic = 0.5 * big_m * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * inertia * qd[2] ** 2
    return kinetic - big_m * G * q[1]


def _string_taut(q, t, params):
    # The top end of the rod, (x − L sin φ, y + L cos φ), on a circle of radius l
    # about the suspension point: an inextensible string.
    x = q[0] - params["L"] * jnp.sin(q[2])
    y = q[1] + params["L"] * jnp.cos(q[2])
    return jnp.stack([(x**2 + y**2 - params["l"] ** 2) / 2])


def struck_rod(t1: float) -> Example:
    """6.12, end-of-chapter problem: a rod on a string struck at its bottom end.

    The chapter's impulse section has no worked example; its problem of a rod
    (mass M, length 2L) hanging on a string of length l, struck horizontally at
    its bottom end by an impulse P, has a closed form from eq. 6.79 in the angles
    (θ of the string, φ of the rod): M l² θ̇ + M l L φ̇ = P l and
    M l L θ̇ + (4/3) M L² φ̇ = 2 L P, so φ̇ = 3P/(ML), θ̇ = −2P/(Ml): the top end
    moves backwards at 2P/M and the centre forwards at P/M.
    """
    big_m, half, length = 2.0, 0.5, 1.5
    system = jl.LagrangianSystem(
        _hanging_rod,
        params={"M": big_m, "L": half, "l": length},
        holonomic=_string_taut,
    )
    q = jnp.array([0.0, -length - half, 0.0])
    blows = np.linspace(0.0, 2.0, 21)

    @jax.jit
    def after(blow):
        # The generalized impulse of a horizontal blow on the bottom end
        # (x + L sin φ, y − L cos φ): P·∂r/∂q = (P, 0, P L cos φ).
        impulse = jnp.array([blow, 0.0, blow * half * jnp.cos(q[2])])
        return jl.apply_impulse(system, q, jnp.zeros(3), 0.0, impulse)

    velocities = np.asarray(jax.vmap(after)(jnp.asarray(blows)))
    blow = blows[-1]
    qd = velocities[-1]
    rows = [
        ("centre ẋ after the blow = P/M", blow / big_m, qd[0]),
        ("rod φ̇ after the blow = 3P/(ML)", 3 * blow / (big_m * half), qd[2]),
        (
            "string θ̇ = (top-end ẋ)/l = −2P/(Ml)",
            -2 * blow / (big_m * length),
            (qd[0] - half * qd[2]) / length,
        ),
    ]
    return Example(
        "6.12 rod on a string, struck at its end",
        rows,
        blows,
        velocities[:, 2],
        3 * blows / (big_m * half),
        "φ̇ just after [rad/s]",
        xlabel="impulse P [N s]",
    )


def bouncing_ball(t1: float) -> Example:
    """Impacts with restitution e: energy × e² per bounce, closed-form bounce times."""
    e, y0 = 0.7, 1.0
    system, q0, qd0 = jl.systems.bouncing_ball({"e": e}, q0=[y0])
    # Dropped from y₀ it lands at t₀ = √(2y₀/g); the k-th rebound leaves at eᵏ
    # times the landing speed and flies 2 t₀ eᵏ. Stop before the 5th bounce,
    # well before the chatter that precedes the Zeno time t₀(1 + 2e/(1 − e)).
    count = 4
    first = np.sqrt(2 * y0 / G)
    bounces = first + np.r_[0.0, np.cumsum(2 * first * e ** np.arange(1, count + 1))]
    t_end = 0.5 * (bounces[count - 1] + bounces[count])
    # Save at the closed-form bounces too, so that the plotted parabolas meet
    # the floor.
    ts = np.sort(np.r_[np.linspace(0.0, t_end, 201), bounces[:count]])
    traj = jl.simulate(system, q0, qd0, t1=t_end, saveat=ts, rtol=TOL, atol=TOL)
    assert int(traj.num_events) == count, int(traj.num_events)
    assert np.all(np.asarray(traj.event_kind[:count]) == jl.EVENT_IMPACT)
    # The closed-form height: a parabola from the last bounce before t.
    k = np.searchsorted(bounces, ts)
    start = np.where(k == 0, 0.0, bounces[np.maximum(k - 1, 0)])
    speed = np.where(k == 0, 0.0, np.sqrt(2 * G * y0) * e ** k.astype(float))
    tau = ts - start
    closed = np.where(k == 0, y0, 0.0) + speed * tau - 0.5 * G * tau**2
    # The energy in the flights after the first and second bounces (mid-flight
    # saves, away from the event times).
    energy = 0.5 * np.asarray(traj.qd[:, 0]) ** 2 + G * np.asarray(traj.q[:, 0])
    mid = [
        int(np.argmin(abs(ts - 0.5 * (bounces[i] + bounces[i + 1])))) for i in (0, 1)
    ]
    rows = [
        ("energy ratio E₁/E₀ = e²", e**2, energy[mid[0]] / (G * y0)),
        ("energy ratio E₂/E₁ = e²", e**2, energy[mid[1]] / energy[mid[0]]),
    ]
    rows += [
        (f"bounce {i + 1} time", bounces[i], traj.event_ts[i]) for i in range(count)
    ]
    return Example(
        f"bouncing ball, e = {e}", rows, ts, np.asarray(traj.q[:, 0]), closed, "y [m]"
    )


EXAMPLES = [
    disk_on_incline,
    masses_on_inclines,
    block_on_movable_incline,
    sphere_on_movable_incline,
    rotating_rod,
    conical_pendulum,
    paraboloid_orbit,
    cartesian_pendulum,
    rolling_coin,
    mass_off_sphere,
    sphere_off_shell,
    struck_rod,
    bouncing_ball,
]

# `--quick` (the CI test) runs one example of each kind: compilation, not t1,
# dominates the cost (5–30 s per system on a loaded 2-core machine), so running
# all of them would take minutes whatever t1.
QUICK = [
    masses_on_inclines,
    mass_off_sphere,
    sphere_off_shell,
    struck_rod,
    bouncing_ball,
]


def _relative(closed, simulated):
    closed, simulated = float(closed), float(simulated)
    return abs(simulated - closed) / max(abs(closed), 1e-300)


def plot(examples, path):
    from matplotlib.figure import Figure

    cols = 3
    rows = -(-len(examples) // cols)
    fig = Figure(figsize=(5 * cols, 3.4 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    for ax, ex in zip(axes, examples, strict=False):
        ax.plot(ex.ts, ex.closed, "k-", lw=1.2, label="closed form")
        step = max(1, len(ex.ts) // 25)
        ax.plot(
            ex.ts[::step],
            ex.simulated[::step],
            "o",
            ms=3.5,
            color="C1",
            label="simulated",
        )
        worst = max(_relative(c, s) for _, c, s in ex.rows)
        ax.set_title(f"{ex.title}\nworst relative error {worst:.1e}", fontsize=9)
        ax.set_xlabel(ex.xlabel)
        ax.set_ylabel(ex.ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[len(examples) :]:
        ax.set_visible(False)
    fig.suptitle(f"Constrained examples of Cline, ch. 6 (rtol = atol = {TOL:g})")
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="one example of each kind, t1 = 1, for CI"
    )
    parser.add_argument("--out", default="out/textbook_constraints")
    args = parser.parse_args()
    t1 = 1.0 if args.quick else 10.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    examples = []
    for example in QUICK if args.quick else EXAMPLES:
        start = time.perf_counter()
        ex = example(t1)
        ex.seconds = time.perf_counter() - start
        examples.append(ex)

    width = max(len(q) for ex in examples for q, _, _ in ex.rows)
    print(f"Closed form vs jl.simulate to t1 = {t1:g} (rtol = atol = {TOL:g})")
    print(
        f"{'quantity':{width}}  {'closed form':>16}  {'simulated':>16}  {'rel. error':>10}"
    )
    results = []
    for ex in examples:
        print(f"-- {ex.title} ({ex.seconds:.1f} s with compilation)")
        for quantity, closed, simulated in ex.rows:
            error = _relative(closed, simulated)
            print(
                f"{quantity:{width}}  {float(closed):16.10g}  {float(simulated):16.10g}  {error:10.1e}"
            )
            results.append(
                {
                    "example": ex.title,
                    "quantity": quantity,
                    "closed_form": float(closed),
                    "simulated": float(simulated),
                    "relative_error": error,
                }
            )
    worst = max(row["relative_error"] for row in results)
    print(f"worst relative error {worst:.1e}")
    plot(examples, out / "textbook_constraints.png")
    (out / "results.json").write_text(
        json.dumps(
            {"t1": t1, "tol": TOL, "worst_relative_error": worst, "rows": results},
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {out}/textbook_constraints.png and {out}/results.json")


if __name__ == "__main__":
    main()
