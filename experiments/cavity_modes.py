"""The moving-mirror cavity: mode energies over time, and cost against N.

A one-dimensional optical cavity whose end mirror (position q, on a spring) moves:
the field, expanded in the instantaneous modes Q_k with frequencies ω_k = kπ/q,
pushes the mirror by radiation pressure, and the mirror's motion transfers energy
between the modes (`jl.systems.cavity`). Two results:

1. Mode energies E_k = ½ (P_k² + ω_k² Q_k²) over time, with P_k = ∂L/∂Q̇_k the
   canonical momentum (from `jl.momenta`), for N modes starting with only the
   lowest one excited; and the drift of the conserved Jacobi integral.
2. Cost against N: compile time, run time, steps and time per step of one
   `simulate`, and the time of one `accelerations` call, for N = 1 … 32. The mass
   matrix is dense and depends on the state, so one step costs O(N³) at large N.

    python experiments/cavity_modes.py            # N = 10 to t = 60; cost N = 1 … 32
    python experiments/cavity_modes.py --quick    # N = 4 to t = 10; cost N = 1 … 8
    python experiments/cavity_modes.py --quick --cg --modes 64 256 --t1 0.5
                                     # matrix-free CG mass solves, cost at N = 256

Writes `mode_energies.png`, `cost.png` and `results.json` to `--out`
(default `out/experiments/cavity_modes`), and prints tables.
"""

import argparse
import json
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import lineax as lx  # noqa: E402
import numpy as np  # noqa: E402

import jaxlagrange as jl  # noqa: E402


def _timed(fn, *args, repeat=3):
    start = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - start
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - start)
    return out, first - best, best


def _make(modes, cg):
    """The cavity with the matrix-free CG mass solve when `cg`, else the dense one
    (the ready system's own default is CG from 16 coordinates on)."""
    ready = jl.systems.make("cavity", modes=modes)
    solver = lx.CG(rtol=1e-11, atol=1e-11) if cg else None
    return eqx.tree_at(lambda r: r.system, ready, ready.system.with_mass_solver(solver))


def mode_energies(modes, t1, saves, tol, cg=False):
    ready = _make(modes, cg)
    assert ready.coordinates[0] == "q", ready.coordinates  # (mirror, Q_1, ..., Q_N)
    system, q0, qd0 = ready
    ts = jnp.linspace(0.0, t1, saves)
    traj = jl.simulate(system, q0, qd0, t1=t1, saveat=ts, rtol=tol, atol=tol)
    p = jax.vmap(jl.momenta, (None, 0, 0, 0))(system, traj.q, traj.qd, ts)
    h = jax.vmap(jl.energy, (None, 0, 0, 0))(system, traj.q, traj.qd, ts)
    mirror = traj.q[:, 0]
    omega = jnp.arange(1, modes + 1) * jnp.pi / mirror[:, None]
    energies = 0.5 * (p[:, 1:] ** 2 + (omega * traj.q[:, 1:]) ** 2)
    params = system.params
    speed = traj.qd[:, 0]
    mirror_energy = (
        0.5 * params["m"] * speed**2
        + 0.5 * params["k"] * (mirror - params["q_eq"]) ** 2
    )
    return {
        "mirror_energy": np.asarray(mirror_energy),
        "ts": np.asarray(ts),
        "mirror": np.asarray(mirror),
        "energies": np.asarray(energies),
        "jacobi": np.asarray(h),
        "steps": int(traj.stats["num_steps"]),
    }


def cost(modes, t1, tol, cg=False):
    system, q0, qd0 = _make(modes, cg)

    @eqx.filter_jit
    def solve(system, q0, qd0):
        traj = jl.simulate(system, q0, qd0, t1=t1, rtol=tol, atol=tol)
        return traj.q[-1], traj.stats["num_steps"]

    # Per state, over a batch: one call's dispatch overhead would hide the cost.
    batch = 256
    noise = jax.random.normal(jax.random.key(0), (batch, modes + 1))
    qs = q0 + 1e-3 * noise
    accelerations = eqx.filter_jit(
        jax.vmap(jl.accelerations, in_axes=(None, 0, None, None))
    )
    (_, steps), compile_s, run_s = _timed(solve, system, q0, qd0)
    _, _, accel_s = _timed(accelerations, system, qs, qd0, 0.0, repeat=10)
    accel_s /= batch
    steps = int(steps)
    return {
        "modes": modes,
        "compile_s": compile_s,
        "run_s": run_s,
        "steps": steps,
        "us_per_step": 1e6 * run_s / steps,
        "accelerations_us": 1e6 * accel_s,  # per state, in a batch of 256
    }


def plot_modes(result, path):
    from matplotlib.figure import Figure

    ts, energies = result["ts"], result["energies"]
    modes = energies.shape[1]
    fig = Figure(figsize=(13, 8), layout="constrained")
    (ax_e, ax_log), (ax_q, ax_h) = fig.subplots(2, 2)
    from matplotlib import colormaps

    colours = colormaps["viridis"](np.linspace(0.0, 0.9, modes))
    field = energies.sum(axis=1)
    ax_e.plot(ts, field, color="C0", lw=1.2, label="field, Σ E_k")
    ax_e.plot(ts, result["mirror_energy"], color="C3", lw=1.2, label="mirror, ½mq̇² + V")
    ax_e.plot(ts, field + result["mirror_energy"], "k--", lw=1, label="sum")
    ax_e.set_ylabel("energy [J]")
    ax_e.set_title(f"Field and mirror exchange energy (N = {modes})")
    ax_e.legend(fontsize=8, framealpha=0.85, loc="best")
    for k in range(modes):
        ax_log.semilogy(ts, energies[:, k], lw=0.9, color=colours[k], label=f"E{k + 1}")
    ax_log.legend(fontsize=7, ncols=2, framealpha=0.85, loc="lower right")
    ax_log.set_ylabel("mode energy E_k [J]")
    ax_log.set_title("Mode energies E_k = ½(P_k² + ω_k² Q_k²)")
    ax_q.plot(ts, result["mirror"], color="C3", lw=1.2)
    ax_q.set_ylabel("mirror position q [m]")
    ax_q.set_title("The mirror, pushed by radiation pressure")
    h = result["jacobi"]
    drift = np.abs(h - h[0]) / np.abs(h[0])
    ax_h.semilogy(ts, np.where(drift > 0, drift, np.nan), color="C1", lw=0.8)
    ax_h.set_ylabel("|h(t) − h(0)| / |h(0)|")
    ax_h.set_title(f"Jacobi integral drift (max {drift.max():.1e})")
    for ax in (ax_e, ax_log, ax_q, ax_h):
        ax.set_xlabel("time t [s]")
        ax.grid(alpha=0.3, which="both")
    fig.savefig(path, dpi=130)


def plot_cost(rows, path):
    from matplotlib.figure import Figure

    n = np.array([r["modes"] for r in rows], dtype=float)
    fig = Figure(figsize=(13, 4.5), layout="constrained")
    ax_step, ax_total, ax_compile = fig.subplots(1, 3)
    for ax, key, label in (
        (ax_step, "us_per_step", "μs per solver step"),
        (ax_step, "accelerations_us", "μs per accelerations (batch of 256)"),
        (ax_total, "run_s", "run time [s]"),
        (ax_compile, "compile_s", "compile time [s]"),
    ):
        y = np.array([r[key] for r in rows])
        if key == "compile_s":  # roughly constant: a linear axis from 0
            ax.semilogx(n, y, "o-", label=label)
            ax.set_ylim(bottom=0)
            continue
        # The log-log slope over the three largest N: the cost's power of N.
        slope = np.polyfit(np.log(n[-3:]), np.log(y[-3:]), 1)[0] if len(n) >= 3 else 0
        ax.loglog(n, y, "o-", label=f"{label} (slope {slope:.1f} at large N)")
    ax_total.loglog(
        n, [r["steps"] * 1e-4 for r in rows], "s:", color="0.5", label="steps / 10⁴"
    )
    for ax, title in (
        (ax_step, "Cost per step"),
        (ax_total, "One simulate, t = 0 … t1"),
        (ax_compile, "Compilation"),
    ):
        ax.set_xlabel("number of modes N")
        ax.set_title(title)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, framealpha=0.85)
    fig.savefig(path, dpi=130)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI")
    parser.add_argument("--out", default="out/experiments/cavity_modes")
    parser.add_argument(
        "--cg", action="store_true", help="matrix-free CG mass solves (large N)"
    )
    parser.add_argument(
        "--modes", type=int, nargs="+", help="the N of the cost table (e.g. 64 256)"
    )
    parser.add_argument("--t1", type=float, help="end time of the cost runs")
    args = parser.parse_args()
    if args.quick:
        modes, t1, saves, sizes, cost_t1 = 4, 10.0, 501, [1, 2, 4, 8], 2.0
    else:
        modes, t1, saves, sizes, cost_t1 = 10, 60.0, 3001, [1, 2, 4, 8, 16, 32], 5.0
    tol = 1e-9
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    sizes = args.modes or sizes
    cost_t1 = args.t1 or cost_t1
    result = mode_energies(modes, t1, saves, tol, args.cg)
    energies, h = result["energies"], result["jacobi"]
    drift = float(np.max(np.abs(h - h[0])) / abs(h[0]))
    print(
        f"Cavity, N = {modes}, t1 = {t1:g}, rtol = atol = {tol:g}: "
        f"{result['steps']} steps, max Jacobi drift {drift:.2e}"
    )
    print(f"{'mode':>4} {'E_k(0)':>10} {'max E_k':>10} {'E_k(t1)':>10}")
    for k in range(modes):
        e = energies[:, k]
        print(f"{k + 1:4d} {e[0]:10.3e} {e.max():10.3e} {e[-1]:10.3e}")
    plot_modes(result, out / "mode_energies.png")

    cost(sizes[0], cost_t1, tol, args.cg)  # warm up: the first compile's one-offs
    rows = [cost(n, cost_t1, tol, args.cg) for n in sizes]
    print(
        f"\nCost of simulate to t1 = {cost_t1:g} (rtol = atol = {tol:g}), float64 CPU"
    )
    print(
        f"{'N':>3} {'compile s':>9} {'run s':>8} {'steps':>6} {'μs/step':>8} "
        f"{'accel μs/state':>14}"
    )
    for r in rows:
        print(
            f"{r['modes']:3d} {r['compile_s']:9.2f} {r['run_s']:8.4f} "
            f"{r['steps']:6d} {r['us_per_step']:8.1f} {r['accelerations_us']:14.2f}"
        )
    plot_cost(rows, out / "cost.png")
    results = {
        "modes": modes,
        "t1": t1,
        "tol": tol,
        "steps": result["steps"],
        "max_jacobi_drift": drift,
        "mode_energy_initial": energies[0].tolist(),
        "mode_energy_max": energies.max(axis=0).tolist(),
        "mode_energy_final": energies[-1].tolist(),
        "cost": rows,
    }
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}/mode_energies.png, {out}/cost.png, {out}/results.json")


if __name__ == "__main__":
    main()
