"""Long runs with the variational midpoint integrator against explicit Runge–Kutta.

1. The chaotic double pendulum (m = l = 1, g = 9.81, both arms horizontal from
   rest) with a fixed step h = 0.01 for 360 000 steps (3600 s): the energy error
   of `jl.VariationalMidpoint()` (order 2 and 4) against diffrax's Heun, RK4 and
   Tsit5 with the same fixed step. The variational ones stay bounded with no
   trend; the Runge–Kutta ones drift.
2. Kepler (e = 0.69) in Cartesian coordinates: the angular momentum, conserved
   to round-off by the discrete Noether theorem.
3. A pendulum written in Cartesian coordinates with its rod as a holonomic
   constraint: |g| and |ġ| at every step, and the energy error.

    python experiments/variational.py [--quick] [--out DIR]

`--quick` runs 36 000 steps instead of 360 000. Prints a table and writes
`variational.png` and `results.json`.
"""

import argparse
import json
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxlagrange as jl  # noqa: E402


H = 0.01


class RK4(diffrax.AbstractERK):
    """The classical fourth-order Runge–Kutta method (diffrax has no class for it)."""

    tableau = diffrax.ButcherTableau(
        c=np.array([0.5, 0.5, 1.0]),
        b_sol=np.array([1 / 6, 1 / 3, 1 / 3, 1 / 6]),
        b_error=np.zeros(4),
        a_lower=(np.array([0.5]), np.array([0.0, 0.5]), np.array([0.0, 0.0, 1.0])),
    )
    interpolation_cls = diffrax.ThirdOrderHermitePolynomialInterpolation.from_k

    def order(self, terms):
        return 4


def energy_errors(steps):
    system, _, _ = jl.systems.double_pendulum()
    q0, qd0 = jnp.array([np.pi / 2, np.pi / 2]), jnp.zeros(2)
    t1 = steps * H
    ts = jnp.linspace(0.0, t1, 1001)
    energy = jax.jit(jax.vmap(lambda q, v: jl.energy(system, q, v, 0.0)))
    solvers = {
        "variational midpoint": (jl.VariationalMidpoint(), {}),
        "variational order 4": (jl.VariationalMidpoint(order=4), {}),
        "Heun": (diffrax.Heun(), {"stepsize_controller": diffrax.ConstantStepSize()}),
        "RK4": (RK4(), {"stepsize_controller": diffrax.ConstantStepSize()}),
        "Tsit5": (diffrax.Tsit5(), {"stepsize_controller": diffrax.ConstantStepSize()}),
    }
    out = {}
    for name, (solver, options) in solvers.items():
        start = time.perf_counter()
        traj = jl.simulate(
            system,
            q0,
            qd0,
            t1=t1,
            saveat=ts,
            dt0=H,
            solver=solver,
            max_steps=steps + 10,
            **options,
        )
        traj.q.block_until_ready()
        seconds = time.perf_counter() - start
        e = np.asarray(energy(traj.q, traj.qd))
        out[name] = dict(ts=np.asarray(ts), error=e - e[0], seconds=seconds)
    return out


def kepler(steps):
    system = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd + 1 / jnp.sqrt(q @ q))
    t1 = steps * 0.005
    ts = jnp.linspace(0.0, t1, 1001)
    traj = jl.simulate(
        system,
        jnp.array([1.0, 0.0]),
        jnp.array([0.0, 1.3]),
        t1=t1,
        saveat=ts,
        dt0=0.005,
        solver=jl.VariationalMidpoint(),
    )
    momentum = np.asarray(traj.q[:, 0] * traj.qd[:, 1] - traj.q[:, 1] * traj.qd[:, 0])
    return np.asarray(ts), momentum / momentum[0] - 1


def constrained(steps):
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 9.81 * q[1],
        holonomic=lambda q, t: jnp.array([q @ q - 1.0]),
    )
    t1 = steps * H
    ts = jnp.linspace(0.0, t1, steps + 1)
    traj = jl.simulate(
        system,
        jnp.array([np.sin(2.5), -np.cos(2.5)]),
        jnp.zeros(2),
        t1=t1,
        saveat=ts,
        dt0=H,
        solver=jl.VariationalMidpoint(),
    )
    g = np.asarray(jnp.sum(traj.q**2, axis=1) - 1)
    gd = np.asarray(jnp.sum(traj.q * traj.qd, axis=1))
    e = np.asarray(0.5 * jnp.sum(traj.qd**2, axis=1) + 9.81 * traj.q[:, 1])
    return np.abs(g).max(), np.abs(gd).max(), np.abs(e - e[0]).max() / abs(e[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default="out/experiments/variational")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    steps = 36_000 if args.quick else 360_000

    runs = energy_errors(steps)
    print(f"double pendulum, h = {H}, {steps} steps ({steps * H:g} s):")
    print(
        f"{'solver':22s} {'max |ΔE| (J)':>14s} {'final ΔE (J)':>14s} {'wall (s)':>9s}"
    )
    table = {}
    for name, run in runs.items():
        worst, final = float(np.abs(run["error"]).max()), float(run["error"][-1])
        table[name] = dict(
            max_abs_energy_error=worst,
            final_energy_error=final,
            wall_seconds=run["seconds"],
        )
        print(f"{name:22s} {worst:14.3g} {final:14.3g} {run['seconds']:9.2f}")
    ts_k, dl = kepler(steps // 4)
    print(
        f"Kepler e = 0.69, {steps // 4} steps: max relative angular momentum "
        f"error {np.abs(dl).max():.1e}"
    )
    g, gd, de = constrained(min(steps, 20_000))
    print(
        f"Cartesian pendulum, every step: max |g| {g:.1e}, max |ġ| {gd:.1e}, "
        f"relative energy error {de:.1e}"
    )

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for name, run in runs.items():
        left.plot(run["ts"], run["error"], label=name, lw=1)
    left.set(
        xlabel="t (s)",
        ylabel="E(t) − E(0) (J)",
        yscale="symlog",
        title=f"chaotic double pendulum, h = {H}",
    )
    left.set_yscale("symlog", linthresh=1e-3)
    left.legend(fontsize=8)
    right.plot(ts_k, dl, lw=1)
    right.set(xlabel="t", ylabel="ΔL / L", title="Kepler: angular momentum (midpoint)")
    fig.tight_layout()
    fig.savefig(out / "variational.png", dpi=120)
    plt.close(fig)
    results = dict(
        steps=steps,
        energy=table,
        kepler_max_relative_momentum_error=float(np.abs(dl).max()),
        constrained=dict(max_g=g, max_gdot=gd, relative_energy_error=de),
    )
    (out / "results.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
