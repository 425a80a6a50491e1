"""Rigid bodies in 3-D: the heavy top and the free body against their closed forms.

1. Steady precession of the heavy top (`jl.systems.heavy_top`): at θ̇ = 0 and
   φ̇ = Ω with I₁ Ω² cos θ − I₃ ω₃ Ω + m g l = 0, θ stays put and φ turns at Ω.
2. Nutation: released at θ₀ with θ̇ = φ̇ = 0, the top dips to the turning point
   u = cos θ₁ < cos θ₀ of p_ψ² (u₀ − u) = 2 I₁ m g l (1 − u²), p_ψ = I₃ ω₃.
3. The Dzhanibekov flip (`jl.systems.free_rigid_body`, unit quaternions): near
   the intermediate axis ω₂ turns over every half period 2 K(k)/s of the Jacobi
   elliptic solution of Euler's equations (Landau & Lifshitz §37, for
   M² < 2 E I₂: s² = (I₂ − I₁)(2 E I₃ − M²)/(I₁ I₂ I₃), k² = (I₃ − I₂)(M² −
   2 E I₁)/((I₂ − I₁)(2 E I₃ − M²))); ω agrees with Euler's equations integrated
   separately.
4. The sleeping top's threshold from `jl.linearize` (the top in XYZ angles,
   regular upright): stable exactly when I₃² ω₃² > 4 I₁ m g l. The two
   frequencies of the stable top, f± = (I₃ ω₃ ± √(I₃²ω₃² − 4 I₁ m g l))/(2 I₁),
   give the threshold back as ω₃ · 2√(f₊ f₋)/(f₊ + f₋); a bisection on the
   growth rate finds it too.

    python experiments/rigid_bodies.py [--quick] [--out DIR]

Prints a table (closed form, jaxlagrange, relative error), writes
`rigid_bodies.png` and `results.json`.
"""

import argparse
import json
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402
from scipy.interpolate import CubicSpline  # noqa: E402
from scipy.special import ellipk  # noqa: E402

import jaxlagrange as jl  # noqa: E402


TOP = {"m": 1.0, "l": 0.5, "I1": 0.35, "I3": 0.2, "g": 9.81}
MGL = TOP["m"] * TOP["g"] * TOP["l"]
MOMENTS = np.array([1.0, 2.0, 3.0])
OMEGA0 = np.array([0.01, 2.0, 0.0])
TOL = 1e-12


def top_runs(quick):
    """Steady precession and nutation: θ(t), φ(t) on one compiled solve."""
    top = jl.systems.heavy_top(TOP).system
    t1 = 2.0 if quick else 6.0
    saveat = jnp.linspace(0.0, t1, 2001 if quick else 6001)

    def run(q0, qd0):
        return jl.simulate(top, q0, qd0, t1=t1, saveat=saveat, rtol=TOL, atol=TOL,
                           max_steps=1_000_000)  # fmt: skip

    theta0, omega3 = 0.5, 20.0
    a, b = TOP["I1"] * np.cos(theta0), -TOP["I3"] * omega3
    rate = (-b - np.sqrt(b * b - 4 * a * MGL)) / (2 * a)
    steady = run(
        jnp.array([0.0, theta0, 0.0]),
        jnp.array([rate, 0.0, omega3 - rate * np.cos(theta0)]),
    )
    nutating = run(jnp.array([0.0, theta0, 0.0]), jnp.array([0.0, 0.0, omega3]))
    # The turning point: 2 I₁ m g l u² − p² u + p² u₀ − 2 I₁ m g l = 0, the root
    # below u₀ (the other is u₀'s partner above 1).
    p2, u0, c = (TOP["I3"] * omega3) ** 2, np.cos(theta0), 2 * TOP["I1"] * MGL
    u1 = (p2 - np.sqrt(p2 * p2 - 4 * c * (p2 * u0 - c))) / (2 * c)
    return theta0, rate, np.arccos(u1), steady, nutating


def _peak(ts, ys):
    """The largest sample refined by the parabola through it and its neighbours."""
    i = int(np.clip(np.argmax(ys), 1, len(ys) - 2))
    y0, y1, y2 = ys[i - 1 : i + 2]
    h = ts[1] - ts[0]
    shift = 0.5 * (y0 - y2) / (y0 - 2 * y1 + y2)
    return y1 - 0.25 * (y0 - y2) * shift, ts[i] + shift * h


def flip_period():
    """4 K(k)/s of the Jacobi elliptic solution for M² < 2 E I₂."""
    i1, i2, i3 = MOMENTS
    m2 = np.sum((MOMENTS * OMEGA0) ** 2)
    e2 = np.sum(MOMENTS * OMEGA0**2)  # 2 E
    assert m2 < e2 * i2
    s = np.sqrt((i2 - i1) * (e2 * i3 - m2) / (i1 * i2 * i3))
    k2 = (i3 - i2) * (m2 - e2 * i1) / ((i2 - i1) * (e2 * i3 - m2))
    return 4 * ellipk(k2) / s


def euler_equations(ts):
    def rhs(t, w):
        return np.cross(MOMENTS * w, w) / MOMENTS

    done = solve_ivp(rhs, (ts[0], ts[-1]), OMEGA0, method="DOP853", t_eval=ts,
                     rtol=1e-13, atol=1e-14)  # fmt: skip
    return done.y.T


def free_body_run(quick):
    body = jl.systems.free_rigid_body(
        dict(zip(("I1", "I2", "I3"), MOMENTS, strict=True))
    ).system
    t1 = 25.0 if quick else 60.0
    ts = np.linspace(0.0, t1, 2501 if quick else 6001)
    p0 = jnp.array([1.0, 0.0, 0.0, 0.0])
    pd0 = jnp.concatenate([jnp.zeros(1), 0.5 * jnp.asarray(OMEGA0)])
    traj = jl.simulate(body, p0, pd0, t1=t1, saveat=jnp.asarray(ts), rtol=1e-11,
                       atol=1e-11, max_steps=1_000_000)  # fmt: skip

    def rotation(p, t):
        return jl.rigid.quaternion_to_matrix(p)

    omega = jax.vmap(lambda p, pd: jl.rigid.angular_velocity(rotation, p, pd))(
        traj.q, traj.qd
    )
    norm = np.max(np.abs(np.sum(np.asarray(traj.q) ** 2, axis=1) - 1))
    return ts, np.asarray(omega), norm


def _zeros(ts, ys):
    """Times where ys crosses zero (cubic spline roots)."""
    return CubicSpline(ts, ys).roots(extrapolate=False)


def _upright(params):
    def rotation(q, t):
        return jl.rigid.euler_to_matrix(q, "XYZ")

    def lagrangian(q, qd, t, p):
        centre = lambda q, t: p["l"] * rotation(q, t)[:, 2]  # noqa: E731
        transverse = p["I1"] - p["m"] * p["l"] ** 2
        moments = jnp.stack([transverse, transverse, p["I3"]])
        kinetic = jl.rigid.kinetic_energy(p["m"], moments, centre, rotation, q, qd, t)
        return kinetic - p["m"] * p["g"] * centre(q, t)[2]

    return jl.LagrangianSystem(
        lagrangian, params={k: jnp.asarray(v) for k, v in params.items()}
    )


def sleeping_top(quick):
    system = _upright(TOP)

    @jax.jit
    @jax.vmap
    def batch(spin):
        lin = jl.linearize(system, jnp.zeros(3), jnp.array([0.0, 0.0, 1.0]) * spin)
        return jnp.linalg.eigvals(lin.A)

    def eigenvalues(spins):  # in batches of 9: one compilation
        spins = np.asarray(spins, float)
        chunks = [np.resize(spins[i : i + 9], 9) for i in range(0, len(spins), 9)]
        return np.concatenate([np.asarray(batch(jnp.asarray(c))) for c in chunks])[
            : len(spins)
        ]

    threshold = np.sqrt(4 * TOP["I1"] * MGL) / TOP["I3"]
    spins = np.linspace(0.2, 2.0, 45 if quick else 180) * threshold
    growth = eigenvalues(spins).real.max(axis=1)
    # From the stable top's two frequencies at 1.5 × the threshold.
    spin = 1.5 * threshold
    eig_stable = eigenvalues([spin])[0]
    freqs = np.unique(np.round(np.abs(eig_stable.imag), 9))[-2:]
    from_frequencies = spin * 2 * np.sqrt(freqs[0] * freqs[1]) / (freqs[0] + freqs[1])
    # Bisection on the growth rate (above roundoff's √eps near the double root).
    lo, hi = 0.5 * threshold, 1.5 * threshold
    for _ in range(8 if quick else 12):
        grid = np.linspace(lo, hi, 9)
        unstable = eigenvalues(grid).real.max(axis=1) > 1e-6
        i = int(np.argmin(unstable))  # the first stable spin
        lo, hi = grid[max(i - 1, 0)], grid[i]
    return threshold, from_frequencies, 0.5 * (lo + hi), spins, growth


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="out/experiments/rigid_bodies")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    rows = []

    def add(example, closed, got, absolute=False):
        error = abs(got - closed) if absolute else abs(got - closed) / abs(closed)
        rows.append(dict(example=example, closed_form=float(closed),
                         jaxlagrange=float(got), error=float(error),
                         kind="absolute" if absolute else "relative"))  # fmt: skip

    theta0, rate, theta1, steady, nutating = top_runs(args.quick)
    ts = np.asarray(steady.ts)
    add("top, steady precession: max |θ − θ₀| (rad)", 0.0,
        np.max(np.abs(np.asarray(steady.q[:, 1]) - theta0)), absolute=True)  # fmt: skip
    add("top, steady precession: rate φ(t₁)/t₁ (rad/s)", rate,
        float(steady.q[-1, 0]) / ts[-1])  # fmt: skip
    theta_max, _ = _peak(ts, np.asarray(nutating.q[:, 1]))
    add("top, nutation: turning point θ₁ (rad)", theta1, theta_max)

    period = flip_period()
    t_body, omega, norm = free_body_run(args.quick)
    reference = euler_equations(t_body)
    zeros = _zeros(t_body, omega[:, 1])
    add("free body: time between flips of ω₂ (s)", period / 2, np.mean(np.diff(zeros)))
    add("free body: max |ω − Euler's equations| (rad/s)", 0.0,
        np.max(np.abs(omega - reference)), absolute=True)  # fmt: skip
    add("free body: max ||p|² − 1|", 0.0, norm, absolute=True)

    threshold, from_freqs, bisected, spins, growth = sleeping_top(args.quick)
    add("sleeping top: threshold ω₃ from the frequencies", threshold, from_freqs)
    add("sleeping top: threshold ω₃ by bisection", threshold, bisected)

    print(f"{'example':52s} {'closed form':>14s} {'jaxlagrange':>14s} {'error':>9s}")
    for row in rows:
        print(f"{row['example']:52s} {row['closed_form']:14.10g} "
              f"{row['jaxlagrange']:14.10g} {row['error']:9.1e}")  # fmt: skip
    relative = [row["error"] for row in rows if row["kind"] == "relative"]
    print(f"worst relative error {max(relative):.1e}")

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ((a, b), (c, d)) = plt.subplots(2, 2, figsize=(11, 8))
    a.plot(ts, np.asarray(nutating.q[:, 1]), label="released at rest: nutation")
    a.plot(ts, np.asarray(steady.q[:, 1]), label="φ̇ = Ω: steady precession")
    a.axhline(
        theta1, color="k", ls="--", lw=0.8, label="turning point θ₁ (closed form)"
    )
    a.set(xlabel="t (s)", ylabel="θ (rad)", title="heavy top: nutation angle")
    a.legend(fontsize=8)
    top = jl.systems.heavy_top(TOP)
    centre = np.asarray(top.positions(nutating.q))[:, 1]
    b.plot(centre[:, 0], centre[:, 1], lw=0.8)
    b.set(xlabel="x (m)", ylabel="y (m)", title="heavy top: centre of mass from above",
          aspect="equal")  # fmt: skip
    for i in range(3):
        c.plot(t_body, omega[:, i], color=f"C{i}", label=f"ω{i + 1}")
        c.plot(t_body[::50], reference[::50, i], "k.", ms=3)
    for z in zeros:
        c.axvline(z, color="grey", lw=0.4)
    c.set(xlabel="t (s)", ylabel="ω (rad/s, body axes)",
          title=f"free body: flips every {period / 2:.4f} s (2K(k)/s); dots: Euler's eqs")  # fmt: skip
    c.legend(fontsize=8)
    i1, i3 = TOP["I1"], TOP["I3"]
    closed = np.sqrt(np.maximum(4 * i1 * MGL - (i3 * spins) ** 2, 0.0)) / (2 * i1)
    d.plot(spins, growth, "o", ms=3, label="jl.linearize, largest Re λ")
    d.plot(spins, closed, "k-", lw=1, label="√(4 I₁ m g l − I₃² ω₃²) / 2 I₁")
    d.axvline(threshold, color="C3", ls="--", lw=0.8, label="I₃ ω₃ = 2√(I₁ m g l)")
    d.set(xlabel="spin ω₃ (rad/s)", ylabel="growth rate (1/s)",
          title="sleeping top: stable above the threshold")  # fmt: skip
    d.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "rigid_bodies.png", dpi=120)
    plt.close(fig)

    (out / "results.json").write_text(json.dumps(
        {"rows": rows, "worst_relative_error": max(relative)}, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
