"""Energy error of the chaotic double pendulum against tolerance and solver.

The double pendulum released from θ = (2.0, 2.5) at rest is chaotic, so errors are
not damped: the Jacobi integral E (here the total energy) is the one exact check
along the whole trajectory. For each diffrax solver and each tolerance
rtol = atol = tol this integrates to t1 and reports the largest relative energy
error max_t |E(t) − E(0)| / |E(0)|, the number of steps and the run time (after
compilation; one compile per solver, tolerances are traced).

    python experiments/double_pendulum_energy.py            # t1 = 50, tol 1e-4 … 1e-13
    python experiments/double_pendulum_energy.py --quick    # t1 = 10, three tolerances

Writes `energy_error.png` (error against tolerance, error against steps, and
error against time), `results.json` and prints a table, to `--out`
(default `out/experiments/double_pendulum_energy`).
"""

import argparse
import json
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxlagrange as jl  # noqa: E402


SOLVERS = {
    "Bosh3": diffrax.Bosh3,
    "Tsit5": diffrax.Tsit5,
    "Dopri5": diffrax.Dopri5,
    "Dopri8": diffrax.Dopri8,
}


def run(solver_name, tolerances, t1, saves, max_steps):
    system, q0, qd0 = jl.systems.double_pendulum()
    ts = jnp.linspace(0.0, t1, saves)

    @eqx.filter_jit
    def solve(tol):
        traj = jl.simulate(
            system,
            q0,
            qd0,
            t1=t1,
            saveat=ts,
            solver=SOLVERS[solver_name](),
            rtol=tol,
            atol=tol,
            max_steps=max_steps,
            throw=False,
        )
        ok = traj.result == jl.RESULTS.successful
        # A failed solve leaves inf past the failure: measure only a finished one.
        q = jnp.where(ok, traj.q, 0.0)
        qd = jnp.where(ok, traj.qd, 0.0)
        energy = jax.vmap(jl.energy, (None, 0, 0, 0))(system, q, qd, ts)
        error = jnp.abs(energy - energy[0]) / jnp.abs(energy[0])
        return error, traj.stats["num_steps"], ok

    rows = []
    start = time.perf_counter()
    jax.block_until_ready(solve(jnp.asarray(tolerances[0])))
    compile_s = time.perf_counter() - start
    for tol in tolerances:
        start = time.perf_counter()
        error, steps, ok = jax.block_until_ready(solve(jnp.asarray(tol)))
        seconds = time.perf_counter() - start
        rows.append(
            {
                "solver": solver_name,
                "tol": tol,
                "max_rel_energy_error": float(jnp.max(error)) if ok else None,
                "final_rel_energy_error": float(error[-1]) if ok else None,
                "steps": int(steps),
                "run_s": seconds,
                "ok": bool(ok),
                "error_t": np.asarray(error),
            }
        )
    return rows, compile_s


def plot(rows, ts, path):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(15, 4.6), layout="constrained")
    ax_tol, ax_steps, ax_t = fig.subplots(1, 3)
    for k, name in enumerate(dict.fromkeys(r["solver"] for r in rows)):
        mine = [r for r in rows if r["solver"] == name and r["ok"]]
        tol = [r["tol"] for r in mine]
        err = [max(r["max_rel_energy_error"], 1e-17) for r in mine]
        steps = [r["steps"] for r in mine]
        ax_tol.loglog(tol, err, "o-", color=f"C{k}", label=name)
        ax_steps.loglog(steps, err, "o-", color=f"C{k}", label=name)
    lo, hi = min(r["tol"] for r in rows), max(r["tol"] for r in rows)
    ax_tol.loglog([lo, hi], [lo, hi], "k:", lw=1, label="error = tol")
    ax_tol.set_xlabel("rtol = atol")
    ax_tol.set_ylabel("max |E(t) − E(0)| / |E(0)|")
    ax_tol.set_title("Energy error against tolerance")
    ax_steps.set_xlabel("solver steps")
    ax_steps.set_ylabel("max |E(t) − E(0)| / |E(0)|")
    ax_steps.set_title("Work against precision")
    best = "Dopri8" if any(r["solver"] == "Dopri8" for r in rows) else rows[0]["solver"]
    mine = [r for r in rows if r["solver"] == best and r["ok"]]
    from matplotlib import colormaps

    shades = colormaps["plasma"](np.linspace(0.0, 0.85, len(mine)))
    for j, r in enumerate(mine):
        e = r["error_t"]
        ax_t.semilogy(
            ts,
            np.where(e > 0, e, np.nan),
            lw=0.8,
            color=shades[j],
            label=f"tol {r['tol']:.0e}",
        )
    ax_t.set_xlabel("time t [s]")
    ax_t.set_ylabel("|E(t) − E(0)| / |E(0)|")
    ax_t.set_title(f"Energy error against time ({best})")
    for ax in (ax_tol, ax_steps, ax_t):
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, framealpha=0.85)
    fig.suptitle(
        f"Chaotic double pendulum, θ(0) = (2.0, 2.5), t1 = {ts[-1]:g}, float64"
    )
    fig.savefig(path, dpi=130)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI")
    parser.add_argument("--out", default="out/experiments/double_pendulum_energy")
    args = parser.parse_args()
    if args.quick:
        t1, saves, tolerances = 10.0, 501, [1e-6, 1e-8, 1e-10]
        solvers = ["Tsit5", "Dopri8"]
    else:
        t1, saves = 50.0, 2001
        tolerances = [10.0**-k for k in range(4, 14)]
        solvers = list(SOLVERS)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows, compiles = [], {}
    for name in solvers:
        # Bosh3 (3rd order) needs millions of steps at the tightest tolerances.
        tols = [t for t in tolerances if name != "Bosh3" or t >= 1e-10]
        solver_rows, compiles[name] = run(name, tols, t1, saves, max_steps=2_000_000)
        rows += solver_rows

    print(f"Chaotic double pendulum to t1 = {t1:g}: max relative energy error")
    print(f"{'solver':8} {'tol':>8} {'max |ΔE|/E':>12} {'steps':>8} {'run [s]':>9}")
    for r in rows:
        err = r["max_rel_energy_error"]
        shown = f"{err:12.2e}" if err is not None else f"{'failed':>12}"
        print(
            f"{r['solver']:8} {r['tol']:8.0e} {shown} {r['steps']:8d} {r['run_s']:9.4f}"
        )
    print("compile [s]: " + ", ".join(f"{k} {v:.1f}" for k, v in compiles.items()))

    ts = np.linspace(0.0, t1, saves)
    plot(rows, ts, out / "energy_error.png")
    results = {
        "t1": t1,
        "saves": saves,
        "initial": {"q": [2.0, 2.5], "qd": [0.0, 0.0]},
        "compile_s": compiles,
        "rows": [{k: v for k, v in r.items() if k != "error_t"} for r in rows],
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}/energy_error.png and {out}/results.json")


if __name__ == "__main__":
    main()
