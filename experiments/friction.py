"""Coulomb friction at contacts: stick, slip, roll, fly — closed forms vs simulated.

    python experiments/friction.py            # 401 saves per run, for the plots
    python experiments/friction.py --quick    # 41 saves, for CI

Every example is a `jl.LagrangianSystem` with a unilateral contact h ≥ 0, its
slip velocity s and Coulomb friction (`friction=μ_k`, `static_friction=μ_s`),
integrated by `jl.simulate` (rtol = atol = 1e-10), which locates the switches
between sticking, slipping and flying as events:

- a solid sphere and a disk thrown sliding on the floor without spin roll after
  t* = 2v₀/(7μg) with 5v₀/7 (sphere) and t* = v₀/(3μg) with 2v₀/3 (disk);
- a block on an incline stays while μ_s ≥ tan α (held by m g sin α), slides with
  g(sin α − μ_k cos α) otherwise; pushed up the slope it stops at
  t = v₀/(g(sin α + μ_k cos α)) and sticks, or slides back down;
- the chapter's 6.9.2 (Cline, ch. 6): a solid sphere rolling on a fixed sphere
  needs μ = 2 sin θ/(17 cos θ − 10 cos θ₀); with μ_s = 1 it slips at 47.54°,
  then (6.9.3, F = μ_k N) flies off where N = 0, against hand-derived equations
  integrated by SciPy (`tests/friction_references.py`); with μ = 1e6 it rolls
  to the rolling release at cos θ = (10/17) cos θ₀ (53.97°);
- the chapter's 6.9.4: a small body held by friction on top of a wheel rolling
  on the floor sticks, slips, then flies off: the event times and angles against
  the same kind of SciPy reference.

Prints a table (example, quantity, reference, simulated, relative error) and
the worst error, and writes `friction.png` (the friction force over μ_k N for
each run, with its modes) and `results.json` to `--out` (default
`out/friction`).
"""

import argparse
import json
import sys
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.optimize import brentq  # noqa: E402

import jaxlagrange as jl  # noqa: E402


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from friction_references import sphere_on_sphere, wheel_and_body  # noqa: E402
from friction_systems import RHO, WHEEL, A, R, ball, block, sphere, wheel  # noqa: E402


G = 9.81
TOL = 1e-10
KINDS = {
    jl.EVENT_RELEASE: "release",
    jl.EVENT_IMPACT: "impact",
    jl.EVENT_STICK: "stick",
    jl.EVENT_SLIP: "slip",
}


def _run(system, q0, qd0, t1, saves):
    ts = jnp.linspace(0.0, t1, saves)
    traj = jl.simulate(
        system,
        jnp.asarray(q0, float),
        jnp.asarray(qd0, float),
        t1=t1,
        saveat=ts,
        rtol=TOL,
        atol=TOL,
        max_events=6,
    )
    assert traj.result == jl.RESULTS.successful, traj.result
    return traj


def _at(system, q0, qd0, t1, times):
    """The states at `times` (save times just after an event hold the state after)."""
    traj = jl.simulate(
        system,
        jnp.asarray(q0, float),
        jnp.asarray(qd0, float),
        t1=t1,
        saveat=jnp.asarray(times, float),
        rtol=TOL,
        atol=TOL,
        max_events=6,
    )
    return traj


def _events(traj):
    count = int(traj.num_events)
    return [
        (float(t), KINDS[int(k)])
        for t, k in zip(traj.event_ts[:count], traj.event_kind[:count], strict=True)
    ]


def sliding(saves):
    rows, runs = [], []
    mu, v0 = 0.3, 2.0
    for name, k, ratio, speed in (
        ("solid sphere", 0.4, 2 / 7, 5 / 7),
        ("disk", 0.5, 1 / 3, 2 / 3),
    ):
        traj = _run(ball(k, mu), [0.0, 0.1, 0.0], [v0, 0.0, 0.0], 0.5, saves)
        (t_star, kind), *_ = _events(traj)
        assert kind == "stick"
        rows += [
            (f"{name} sliding", "rolls at t* [s]", ratio * v0 / (mu * G), t_star),
            (f"{name} sliding", "then speed [m/s]", speed * v0, traj.qd[-1, 0]),
        ]
        runs.append((f"{name} thrown sliding (μ = {mu})", traj, mu))
    return rows, runs


def incline(saves):
    alpha, mu_k, t1 = 0.4, 0.3, 1.0
    sin, cos = np.sin(alpha), np.cos(alpha)
    rows, runs = [], []
    stays = _run(block(mu_k, 0.45, alpha), [0, 0], [0, 0], t1, saves)
    rows.append(
        ("block, μ_s ≥ tan α", "holding force [N]", -G * sin, stays.friction[-1, 0])
    )
    slides = _run(block(mu_k, 0.42, alpha), [0, 0], [0, 0], t1, saves)
    down = G * (sin - mu_k * cos)
    rows.append(("block, μ_s < tan α", "x(1 s) [m]", 0.5 * down, slides.q[-1, 0]))
    v0 = -2.0
    up = G * (sin + mu_k * cos)
    t_stop = -v0 / up
    stuck = _run(block(mu_k, 0.45, alpha), [0, 0], [v0, 0], t1, saves)
    (t_event, kind), *_ = _events(stuck)
    assert kind == "stick"
    rows += [
        ("block pushed up, sticks", "stops at [s]", t_stop, t_event),
        ("block pushed up, sticks", "top x [m]", -(v0**2) / (2 * up), stuck.q[-1, 0]),
    ]
    back = _run(block(mu_k, 0.42, alpha), [0, 0], [v0, 0], t1, saves)
    (t_event, kind), *_ = _events(back)
    assert kind == "slip"
    top = -(v0**2) / (2 * up)
    rows += [
        ("block pushed up, slides back", "stops at [s]", t_stop, t_event),
        (
            "block pushed up, slides back",
            "x(1 s) [m]",
            top + 0.5 * down * (t1 - t_stop) ** 2,
            back.q[-1, 0],
        ),
    ]
    runs += [
        ("block on incline, μ_s ≥ tan α", stays, mu_k),
        ("block pushed up, sticks", stuck, mu_k),
        ("block pushed up, slides back", back, mu_k),
    ]
    return rows, runs


_THETA0 = 1e-3


_SPHERE_Q0 = [RHO * np.sin(_THETA0), RHO * np.cos(_THETA0), 0.0]


def _angle(q):
    return np.degrees(np.arctan2(q[0], q[1]))


def sphere_on_a_sphere(saves):
    rows, runs = [], []
    mu_k, mu_s = 0.8, 1.0
    reference = sphere_on_sphere(mu_k, mu_s, _THETA0, R=R, a=A, g=G)
    times = [t for _, t, *_ in reference]
    system = sphere(mu_k, mu_s)
    traj = _run(system, _SPHERE_Q0, [0, 0, 0], times[-1] + 0.05, saves)
    events = _events(traj)
    assert [kind for _, kind in events[:2]] == ["slip", "release"]
    at = _at(
        system, _SPHERE_Q0, [0, 0, 0], times[-1] + 0.05, [e for e, _ in events[:2]]
    )
    slip_angle = brentq(
        lambda th: 2 * np.sin(th) - mu_s * (17 * np.cos(th) - 10 * np.cos(_THETA0)),
        0.5,
        1.0,
    )
    title = f"6.9.2/6.9.3 sphere on sphere (μ_s = {mu_s}, μ_k = {mu_k})"
    rows += [
        (title, "slip angle [°]", np.degrees(slip_angle), _angle(at.q[0])),
        (title, "slip time [s] (SciPy)", times[0], events[0][0]),
        (
            title,
            "release angle [°] (SciPy)",
            np.degrees(reference[1][2]),
            _angle(at.q[1]),
        ),
        (title, "release time [s] (SciPy)", times[1], events[1][0]),
    ]
    runs.append((title, traj, mu_k))
    rolling = sphere(1e6, 1e6)
    traj = _run(rolling, _SPHERE_Q0, [0, 0, 0], 3.1, saves)
    release = [t for t, kind in _events(traj) if kind == "release"][0]
    at = _at(rolling, _SPHERE_Q0, [0, 0, 0], 3.1, [release - 0.1, release])
    rows.append(
        (
            "6.9.2 rolling sphere (μ = 1e6)",
            "release angle [°]",
            np.degrees(np.arccos(10 / 17 * np.cos(_THETA0))),
            _angle(at.q[1]),
        )
    )
    return rows, runs


def body_on_wheel(saves):
    mu_k, mu_s, v0 = 0.3, 0.4, 1.0
    reference, _, _ = wheel_and_body(mu_k, mu_s, v0, **WHEEL, g=G)
    times = [t for _, t, *_ in reference]
    system = wheel(mu_k, mu_s)
    radius = WHEEL["R"]
    q0, qd0 = [0.0, 0.0, radius, 0.0], [v0, v0 / radius, 0.0, v0 / radius]
    traj = _run(system, q0, qd0, times[-1] + 0.1, saves)
    events = _events(traj)
    assert [kind for _, kind in events[:2]] == ["slip", "release"]
    at = _at(system, q0, qd0, times[-1] + 0.1, [e for e, _ in events[:2]])
    title = f"6.9.4 body on a rolling wheel (μ_s = {mu_s}, μ_k = {mu_k})"
    rows = []
    for i, (kind, t, state, _) in enumerate(reference):
        rows += [
            (title, f"{kind} time [s] (SciPy)", t, events[i][0]),
            (
                title,
                f"{kind} angle [°] (SciPy)",
                np.degrees(state[0]),
                np.degrees(at.q[i, 3]),
            ),
        ]
    return rows, [(title, traj, mu_k)]


EXAMPLES = [sliding, incline, sphere_on_a_sphere, body_on_wheel]


def _relative(reference, simulated):
    reference, simulated = float(reference), float(simulated)
    return abs(simulated - reference) / max(abs(reference), 1e-300)


def plot(runs, path):
    from matplotlib.figure import Figure

    cols = 3
    rows = -(-len(runs) // cols)
    fig = Figure(figsize=(5 * cols, 3.2 * rows), layout="constrained")
    axes = np.atleast_1d(fig.subplots(rows, cols)).ravel()
    colors = {"stick": "C2", "slip": "C1", "release": "C7", "impact": "C3"}
    for ax, (title, traj, mu) in zip(axes, runs, strict=False):
        ts = np.asarray(traj.ts)
        normal = np.asarray(traj.multipliers[:, -1])
        ratio = np.where(
            normal > 0, traj.friction[:, 0] / np.maximum(mu * normal, 1e-300), 0
        )
        ax.plot(ts, ratio, "k-", lw=1.2)
        for t, kind in _events(traj):
            ax.axvline(t, color=colors[kind], ls="--", lw=1, label=kind)
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("t [s]")
        ax.set_ylabel("friction / (μ_k N)")
        ax.grid(alpha=0.3)
        if _events(traj):
            ax.legend(fontsize=7)
    for ax in axes[len(runs) :]:
        ax.set_visible(False)
    fig.suptitle(
        "Coulomb friction: ±1 slipping, inside sticking/rolling, 0 free "
        f"(rtol = atol = {TOL:g}); dashed: events"
    )
    fig.savefig(path, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="41 saves, for CI")
    parser.add_argument("--out", default="out/friction")
    args = parser.parse_args()
    saves = 41 if args.quick else 401
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    table, runs = [], []
    for example in EXAMPLES:
        start = time.perf_counter()
        rows, more = example(saves)
        print(
            f"-- {example.__name__}: {time.perf_counter() - start:.1f} s with compilation"
        )
        table += rows
        runs += more
    width = max(len(f"{e}: {q}") for e, q, _, _ in table)
    print(
        f"{'example: quantity':{width}}  {'reference':>16}  {'simulated':>16}  {'rel. error':>10}"
    )
    results = []
    for example, quantity, reference, simulated in table:
        error = _relative(reference, simulated)
        label = f"{example}: {quantity}"
        print(
            f"{label:{width}}  {float(reference):16.10g}  {float(simulated):16.10g}  {error:10.1e}"
        )
        results.append(
            {
                "example": example,
                "quantity": quantity,
                "reference": float(reference),
                "simulated": float(simulated),
                "relative_error": error,
            }
        )
    worst = max(row["relative_error"] for row in results)
    print(f"worst relative error {worst:.1e}")
    plot(runs, out / "friction.png")
    (out / "results.json").write_text(
        json.dumps(
            {"tol": TOL, "worst_relative_error": worst, "rows": results}, indent=2
        )
        + "\n"
    )
    print(f"wrote {out}/friction.png and {out}/results.json")


if __name__ == "__main__":
    main()
