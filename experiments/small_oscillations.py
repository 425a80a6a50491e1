"""Small oscillations: normal modes and equilibria against their closed forms.

1. The double pendulum with equal masses and lengths: ω² = (g/l)(2 ∓ √2).
2. A chain of n masses between two walls: ω_j² = (4k/m) sin²(jπ / 2(n + 1)).
3. A bead on a hoop of radius R spinning at Ω: below Ω² = g/R the bottom is
   stable with ω² = g/R − Ω²; above it the bead sits at θ* = arccos(g/(RΩ²)) with
   ω² = Ω² − (g/(RΩ))², and the bottom turns unstable (ω² < 0): a pitchfork.
4. A pendulum written in Cartesian coordinates with a holonomic constraint:
   one mode, tangent to the circle, with ω² = g/l.
5. The benchmark bicycle (Meijaard et al. 2007, `jl.systems.whipple_bicycle`):
   the eigenvalues of its linearized lean and steer motion against forward
   speed against the paper's Table 2, and the weave and capsize speeds bounding
   its stable range (4.2924 and 6.0243 m/s in the paper).

    python experiments/small_oscillations.py [--quick] [--out DIR]

Prints a table (closed form, jaxlagrange, relative error), writes
`small_oscillations.png` (the chain's dispersion relation, the hoop's
bifurcation diagram and the bicycle's eigenvalues against speed) and
`results.json`.
"""

import argparse
import functools
import json
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxlagrange as jl  # noqa: E402


G = 9.81


def hoop(omega, radius=0.5):
    def lagrangian(q, qd, t, p):
        r, w = p["R"], p["omega"]
        kinetic = 0.5 * r**2 * (qd[0] ** 2 + (w * jnp.sin(q[0])) ** 2)
        return kinetic + G * r * jnp.cos(q[0])

    return jl.LagrangianSystem(lagrangian, params={"R": radius, "omega": omega})


def chain(n, k=1.0, m=1.0):
    def lagrangian(q, qd, t):
        stretch = jnp.diff(jnp.concatenate([jnp.zeros(1), q, jnp.zeros(1)]))
        return 0.5 * m * jnp.sum(qd**2) - 0.5 * k * jnp.sum(stretch**2)

    return jl.LagrangianSystem(lagrangian)


# The paper's Table 2: weave and capsize speeds, and the eigenvalues at v = 0..5 m/s
# (one of each complex-conjugate pair).
WEAVE_SPEED, CAPSIZE_SPEED = 4.29238253634111, 6.02426201538837
TABLE_2 = {
    0.0: [-5.53094371765393, -3.13164324790656, 3.13164324790656, 5.53094371765393],
    1.0: [-7.11008014637442, -3.13423125066578, 3.52696170990070 + 0.80774027519930j],
    2.0: [-8.67387984831735, -3.07158645641514, 2.68234517512745 + 1.68066296590675j],
    3.0: [-10.35101467245920, -2.63366137253667, 1.70675605663975 + 2.31582447384325j],
    4.0: [-12.15861426576450, -1.42944427361326, 0.41325331521125 + 3.07910818603206j],
    5.0: [-14.07838969279820, -0.32286642900409, -0.77534188219585 + 4.46486771378823j],
}
_BATCH = 16  # speeds per call of the one compiled linearization


@functools.cache
def _lean_steer():
    bike, q0, _ = jl.systems.whipple_bicycle()

    @jax.jit
    @jax.vmap
    def lean_steer(v):
        qd = jnp.array([v, 0, 0, 0, 0, 0, -v / 0.3, -v / 0.35])
        a = jl.linearize(
            bike, q0, qd, coordinates=[0, 1, 2, 3, 5, 6, 7], velocities=[3, 5, 6]
        ).A
        return a[jnp.array([3, 4, 7, 8])][:, jnp.array([3, 4, 7, 8])]

    return lean_steer


def bicycle_eigenvalues(speeds):
    """Eigenvalues of the benchmark bicycle's lean–steer motion at each speed."""
    speeds = np.asarray(speeds, dtype=float)
    padded = np.zeros(-(-len(speeds) // _BATCH) * _BATCH)
    padded[: len(speeds)] = speeds
    blocks = [
        np.asarray(_lean_steer()(jnp.asarray(chunk)))
        for chunk in padded.reshape(-1, _BATCH)
    ]
    return np.linalg.eigvals(np.concatenate(blocks)[: len(speeds)])


def bicycle_speeds(rounds=11):
    """Weave and capsize speeds: the sign changes of the largest growth rate,
    bracketed by seven interior speeds per bracket and round."""
    brackets = [[4.0, 4.6, False], [5.8, 6.3, True]]  # low, high, growth rising
    for _ in range(rounds):
        grids = [np.linspace(lo, hi, 9)[1:-1] for lo, hi, _ in brackets]
        growth = np.max(bicycle_eigenvalues(np.concatenate(grids)).real, axis=1)
        for b, grid, rate in zip(
            brackets, grids, (growth[:7], growth[7:]), strict=True
        ):
            points = np.concatenate([[b[0]], grid, [b[1]]])
            beyond = rate > 0 if b[2] else rate <= 0  # past the crossing
            k = int(np.argmax(beyond)) if beyond.any() else 7
            b[0], b[1] = points[k], points[k + 1]
    return [0.5 * (lo + hi) for lo, hi, _ in brackets]


def bicycle_table_2_error():
    """The largest |λ − λ_paper| over Table 2's eigenvalues at v = 0..5 m/s."""
    eig = bicycle_eigenvalues(list(TABLE_2))
    worst = 0.0
    for got, expected in zip(eig, TABLE_2.values(), strict=True):
        expected = list(expected) + [np.conj(z) for z in expected if np.iscomplex(z)]
        diff = np.sort_complex(got) - np.sort_complex(np.array(expected))
        worst = max(worst, float(np.max(np.abs(diff))))
    return worst


def rows(quick):
    out = []

    def add(example, closed, computed):
        closed, computed = float(closed), float(computed)
        error = abs(computed - closed) / abs(closed)
        out.append(
            dict(
                example=example,
                closed_form=closed,
                jaxlagrange=computed,
                relative_error=error,
            )
        )

    system, _, _ = jl.systems.double_pendulum()
    omega2, _ = jl.normal_modes(system, jnp.zeros(2))
    add("double pendulum ω₁²", G * (2 - np.sqrt(2)), omega2[0])
    add("double pendulum ω₂²", G * (2 + np.sqrt(2)), omega2[1])

    n = 8 if quick else 32
    omega2, _ = jl.normal_modes(chain(n), jnp.zeros(n))
    j = np.arange(1, n + 1)
    exact = 4 * np.sin(j * np.pi / (2 * (n + 1))) ** 2
    worst = int(np.argmax(np.abs(omega2 - exact) / exact))
    add(
        f"spring chain n = {n}, worst mode j = {worst + 1}", exact[worst], omega2[worst]
    )

    for omega in (3.0, 6.0):
        system = hoop(omega)
        q = jl.equilibrium(system, jnp.array([0.9]))
        omega2, _ = jl.normal_modes(system, q)
        if omega**2 < G / 0.5:
            theta, w2 = 0.0, G / 0.5 - omega**2
        else:
            theta = np.arccos(G / (0.5 * omega**2))
            w2 = omega**2 - (G / (0.5 * omega)) ** 2
            add(f"hoop Ω = {omega}: θ*", theta, q[0])
        add(f"hoop Ω = {omega}: ω²", w2, omega2[0])

    def rod(q, t):
        return jnp.array([q[0] ** 2 + q[1] ** 2 - 4.0])

    cartesian = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * jnp.sum(qd**2) - G * q[1], holonomic=rod
    )
    q = jl.equilibrium(cartesian, jnp.array([0.3, -1.9]))
    omega2, _ = jl.normal_modes(cartesian, q)
    add("Cartesian pendulum l = 2: ω²", G / 2.0, omega2[0])

    if not quick:
        weave, capsize = bicycle_speeds()
        add("benchmark bicycle: weave speed (m/s)", WEAVE_SPEED, weave)
        add("benchmark bicycle: capsize speed (m/s)", CAPSIZE_SPEED, capsize)
    return out


def plot(path, quick):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right, bike) = plt.subplots(1, 3, figsize=(15, 4))
    n = 8 if quick else 32
    omega2, _ = jl.normal_modes(chain(n), jnp.zeros(n))
    j = np.arange(1, n + 1)
    kappa = j * np.pi / (n + 1)
    fine = np.linspace(0, np.pi, 200)
    left.plot(fine, 2 * np.sin(fine / 2), "k-", label="2 sin(κ/2)")
    left.plot(kappa, np.sqrt(omega2), "o", label="jl.normal_modes")
    left.set(
        xlabel="wave number κ = jπ/(n+1)",
        ylabel="ω [rad/s] (k = m = 1)",
        title=f"spring chain, n = {n}",
    )
    left.legend()

    omegas = np.linspace(1.0, 10.0, 12 if quick else 60)
    theta_star = jax.vmap(lambda w: jl.equilibrium(hoop(w), jnp.array([1.2]))[0])(
        jnp.asarray(omegas)
    )
    right.plot(omegas**2, np.zeros_like(omegas), "k--", lw=1, label="θ = 0")
    right.plot(omegas**2, theta_star, "o", label="jl.equilibrium from θ = 1.2")
    w2 = np.linspace(G / 0.5, 100, 200)
    right.plot(w2, np.arccos(G / (0.5 * w2)), "k-", label="arccos(g/(RΩ²))")
    right.axvline(G / 0.5, color="grey", lw=0.5)
    right.set(xlabel="Ω² (1/s²)", ylabel="θ* (rad)", title="bead on a spinning hoop")
    right.legend()

    speeds = np.linspace(0.0, 10.0, 21 if quick else 201)
    eig = bicycle_eigenvalues(speeds)
    bike.plot(speeds, eig.real, "k.", ms=2)
    bike.plot(speeds, np.abs(eig.imag), ".", color="C0", ms=2)
    bike.axhline(0.0, color="grey", lw=0.5)
    for v in (WEAVE_SPEED, CAPSIZE_SPEED):
        bike.axvline(v, color="C3", lw=0.7, ls="--")
    bike.set(
        xlabel="forward speed v (m/s)",
        ylabel="eigenvalue (1/s)",
        ylim=(-10, 10),
        title="benchmark bicycle: Re λ (black), |Im λ| (blue)",
    )
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="out/experiments/small_oscillations")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    table = rows(args.quick)
    print(
        f"{'example':48s} {'closed form':>16s} {'jaxlagrange':>16s} {'rel. error':>10s}"
    )
    for row in table:
        print(
            f"{row['example']:48s} {row['closed_form']:16.10g} "
            f"{row['jaxlagrange']:16.10g} {row['relative_error']:10.1e}"
        )
    worst = max(row["relative_error"] for row in table)
    print(f"worst relative error {worst:.1e}")
    table_2 = bicycle_table_2_error()
    print(f"benchmark bicycle: largest |λ − Table 2| at v = 0..5 m/s {table_2:.1e}")
    plot(out / "small_oscillations.png", args.quick)
    (out / "results.json").write_text(
        json.dumps(
            {
                "rows": table,
                "worst_relative_error": worst,
                "bicycle_table_2_max_abs_error": table_2,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
