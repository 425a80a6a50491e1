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

    python experiments/textbook_constraints.py            # t1 of several seconds
    python experiments/textbook_constraints.py --quick    # short runs for CI

Prints a table (quantity, closed form, simulated, relative error), and writes
`textbook_constraints.png` (each example's main quantity against time) and
`results.json` to `--out` (default `out/textbook_constraints`).

Each example is a function in `EXAMPLES` returning an `Example`; append new ones
(e.g. the unilateral examples 6.9.1–6.9.2: a mass leaving a sphere, a sphere
rolling off a shell) to that list.
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
    seconds: float = field(default=0.0)


def _simulate(system, q0, qd0, t1, saves=101):
    ts = jnp.linspace(0.0, t1, saves)
    traj = jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=TOL, atol=TOL)
    return np.asarray(ts), traj


def disk_on_incline(t1: float) -> Example:
    """6.8.1: a disk rolling down an incline, ÿ = ⅔ g sin α, λ = −m g sin α / 3."""
    alpha = 0.5
    rows, curves = [], []
    for rolling in ("holonomic", "nonholonomic"):
        system, q0, qd0 = jl.systems.rolling_disk({"alpha": alpha}, rolling=rolling)
        ts, traj = _simulate(system, q0, qd0, t1)
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
    ts, traj = _simulate(system, jnp.array([1.0, 2.0]), jnp.zeros(2), t1)
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
    ts, traj = _simulate(system, q0, jnp.zeros(3), t1)
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
    ts, traj = _simulate(system, jnp.zeros(3), jnp.zeros(3), t1)
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
    ts, traj = _simulate(system, q0, qd0, t1)
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
    ts, traj = _simulate(system, q0, qd0, t1)
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
    ts, traj = _simulate(system, q0, jnp.array([0.0, omega, 0.0]), t1)
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
        ts, traj = _simulate(system, q0, qd0, t1)
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
        ax.set_xlabel("t [s]")
        ax.set_ylabel(ex.ylabel)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    for ax in axes[len(examples) :]:
        ax.set_visible(False)
    fig.suptitle(f"Constrained examples of Cline, ch. 6 (rtol = atol = {TOL:g})")
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="short runs for CI")
    parser.add_argument("--out", default="out/textbook_constraints")
    args = parser.parse_args()
    t1 = 1.0 if args.quick else 10.0
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    examples = []
    for example in EXAMPLES:
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
    plot(examples, out / "textbook_constraints.png")
    (out / "results.json").write_text(
        json.dumps({"t1": t1, "tol": TOL, "rows": results}, indent=2) + "\n"
    )
    print(f"wrote {out}/textbook_constraints.png and {out}/results.json")


if __name__ == "__main__":
    main()
