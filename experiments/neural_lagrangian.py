"""A neural Lagrangian against a plain neural ODE: long-time energy behaviour.

The truth: a spring pendulum, a mass on a spring of stiffness k and rest length
l₀ swinging in a vertical plane, coordinates (r, θ):

    L = ½ m (ṙ² + r² θ̇²) + m g r cos θ − ½ k (r − l₀)²,   m = 1, g = 9.81, k = 40, l₀ = 1.

Both models are trained on the same data (8 trajectories of 2 s from random
initial states, q and q̇ every 0.05 s), with the same loss (multiple shooting,
segments of 0.25 s), optimizer (Adam) and number of steps:

- `jl.neural_lagrangian(2)`: L = ½ q̇ᵀ(C Cᵀ + εI)q̇ − V(q) from two MLPs, the
  equations of motion derived by jaxlagrange (its energy is conserved exactly);
- a neural ODE: an MLP (q, q̇) ↦ q̈ of about the same size.

Then both are run for 100 s (50× the training horizon) from a held-out initial
state, and the true energy is measured along their trajectories. The neural
Lagrangian's energy error stays bounded (it conserves its own learned energy,
close to the true one); the neural ODE's drifts.

    python experiments/neural_lagrangian.py            # 2000 steps, t = 100
    python experiments/neural_lagrangian.py --quick    # 200 steps, t = 20

Writes `energy.png` (true energy along each model's long run), `results.json`
and prints a table, to `--out` (default `out/experiments/neural_lagrangian`).
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
import optax  # noqa: E402

import jaxlagrange as jl  # noqa: E402


PARAMS = {"m": 1.0, "g": 9.81, "k": 40.0, "l0": 1.0}


def spring_pendulum(q, qd, t, params):
    m, g, k, l0 = (params[n] for n in ("m", "g", "k", "l0"))
    r, theta = q
    kinetic = 0.5 * m * (qd[0] ** 2 + r**2 * qd[1] ** 2)
    return kinetic + m * g * r * jnp.cos(theta) - 0.5 * k * (r - l0) ** 2


TRUTH = jl.LagrangianSystem(spring_pendulum, params=PARAMS)


def true_energy(q, qd):
    return jax.vmap(jl.energy, (None, 0, 0, None))(TRUTH, q, qd, 0.0)


def make_data(count, t1, saves, key):
    ts = jnp.linspace(0.0, t1, saves)
    k1, k2, k3 = jax.random.split(key, 3)
    # Static equilibrium stretch r = l0 + m g / k, and swings of up to ~0.6 rad.
    r0 = 1.0 + 9.81 / 40.0 + 0.15 * jax.random.uniform(k1, (count,), minval=-1)
    th0 = 0.6 * jax.random.uniform(k2, (count,), minval=-1)
    w0 = 1.0 * jax.random.uniform(k3, (count,), minval=-1)
    data = []
    for i in range(count):
        q0, qd0 = jnp.array([r0[i], th0[i]]), jnp.array([0.0, w0[i]])
        traj = jl.simulate(TRUTH, q0, qd0, t1=t1, saveat=ts, rtol=1e-10, atol=1e-10)
        data.append(jl.Observations(ts, traj.q, traj.qd))
    return data


class NeuralODE(eqx.Module):
    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        q, qd = y
        return qd, self.mlp(jnp.concatenate([q, qd]))


def solve_ode(model, q0, qd0, ts, max_steps=100_000):
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(model),
        diffrax.Tsit5(),
        ts[0],
        ts[-1],
        None,
        (q0, qd0),
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
        max_steps=max_steps,
        throw=False,
    )
    return sol.ys


def train_ode(model, data, segments, steps, optimizer):
    # The same multiple-shooting loss as jl.fit, with the segment starts fixed at
    # the data (the neural ODE has no use for fitted starts: it is a black box).
    pieces = []
    for obs in data:
        bounds = np.round(np.linspace(0, len(obs.ts) - 1, segments + 1)).astype(int)
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            pieces.append((obs.ts[a : b + 1], obs.q[a : b + 1], obs.qd[a : b + 1]))
    ts, q, qd = (jnp.stack([p[i] for p in pieces]) for i in range(3))

    def loss(model):
        pq, pqd = jax.vmap(lambda q0, qd0, ts: solve_ode(model, q0, qd0, ts, 4096))(
            q[:, 0], qd[:, 0], ts
        )
        return jnp.mean((pq - q) ** 2) + jnp.mean((pqd - qd) ** 2)

    @eqx.filter_jit
    def step(model, state):
        value, grads = eqx.filter_value_and_grad(loss)(model)
        updates, state = optimizer.update(grads, state, model)
        return eqx.apply_updates(model, updates), state, value

    state = optimizer.init(eqx.filter(model, eqx.is_array))
    losses = []
    for _ in range(steps):
        model, state, value = step(model, state)
        losses.append(float(value))
    return model, np.array(losses)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a short run for CI")
    parser.add_argument("--out", default="out/experiments/neural_lagrangian")
    args = parser.parse_args()
    steps = 200 if args.quick else 2000
    t_long = 20.0 if args.quick else 100.0
    count = 4 if args.quick else 8
    width = 32

    data = make_data(count, 2.0, 41, jax.random.key(0))
    segments = 8  # 0.25 s each
    rows = []

    start = time.perf_counter()
    neural = jl.neural_lagrangian(2, key=jax.random.key(1), width=width, depth=2)
    lagrangian = jl.fit(
        neural,
        data,
        optimizer=optax.adam(3e-3),
        steps=steps,
        segments=segments,
        continuity_weight=1.0,
        progress=True,
    )
    rows.append(
        {
            "model": "neural Lagrangian",
            "train_s": time.perf_counter() - start,
            "final_loss": lagrangian.loss,
        }
    )

    start = time.perf_counter()
    ode = NeuralODE(
        eqx.nn.MLP(
            4, 2, width + 16, 2, activation=jax.nn.softplus, key=jax.random.key(2)
        )
    )
    ode, ode_losses = train_ode(ode, data, segments, steps, optax.adam(3e-3))
    rows.append(
        {
            "model": "neural ODE",
            "train_s": time.perf_counter() - start,
            "final_loss": float(ode_losses[-1]),
        }
    )

    # A held-out initial state, run 50x past the training horizon.
    q0, qd0 = jnp.array([1.3, 0.3]), jnp.array([0.1, -0.4])
    ts = jnp.linspace(0.0, t_long, int(t_long * 20) + 1)
    true = jl.simulate(TRUTH, q0, qd0, t1=t_long, saveat=ts, rtol=1e-10, atol=1e-10)
    e_true = float(true_energy(q0[None], qd0[None])[0])
    learned = jl.simulate(
        lagrangian.system, q0, qd0, t1=t_long, saveat=ts, throw=False, max_steps=10**6
    )
    ode_q, ode_qd = solve_ode(ode, q0, qd0, ts, max_steps=10**6)
    curves = {}
    for row, (q, qd) in zip(
        rows, ((learned.q, learned.qd), (ode_q, ode_qd)), strict=True
    ):
        energy = np.asarray(true_energy(q, qd))
        error = np.abs(energy - e_true) / abs(e_true)
        finite = np.isfinite(error)
        curves[row["model"]] = error
        short = ts <= 2.0
        row.update(
            {
                "rmse_q_first_2s": float(
                    jnp.sqrt(jnp.mean((q[short] - true.q[short]) ** 2))
                ),
                "max_rel_energy_error_first_2s": float(np.max(error[short])),
                "max_rel_energy_error": float(np.max(error)) if finite.all() else None,
                "rel_energy_error_at_end": float(error[-1]) if finite.all() else None,
                "energy_error_trend_per_s": (
                    float(np.polyfit(np.asarray(ts), error, 1)[0])
                    if finite.all()
                    else None
                ),
            }
        )

    print(
        f"spring pendulum, {count} training trajectories of 2 s, {steps} Adam steps; "
        f"held-out run to t = {t_long}"
    )
    print(
        f"{'model':<20}{'train s':>9}{'loss':>11}{'rmse q 0-2s':>13}"
        f"{'max dE/E 0-2s':>15}{'max dE/E':>11}{'dE/E trend /s':>15}"
    )
    for r in rows:

        def fmt(x, spec):
            return (
                format(x, spec) if x is not None else "diverged".rjust(int(spec[1:3]))
            )

        print(
            f"{r['model']:<20}{r['train_s']:>9.1f}{r['final_loss']:>11.2e}"
            f"{r['rmse_q_first_2s']:>13.2e}{r['max_rel_energy_error_first_2s']:>15.2e}"
            f"{fmt(r['max_rel_energy_error'], '>11.2e')}"
            f"{fmt(r['energy_error_trend_per_s'], '>15.2e')}"
        )

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"rows": rows, "steps": steps}, indent=2)
    )
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4.5), layout="constrained")
    ax = fig.add_subplot()
    for name, error in curves.items():
        ax.semilogy(
            np.asarray(ts), np.where(error > 0, error, np.nan), lw=1.0, label=name
        )
    ax.axvline(2.0, color="k", lw=0.6, ls="--", label="training horizon")
    ax.set_xlabel("time t [s]")
    ax.set_ylabel("|E_true − E_true(0)| / |E_true(0)|")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    ax.set_title("Spring pendulum: true energy along each learned model's run")
    fig.savefig(out / "energy.png", dpi=130)
    print(f"wrote {out}/")


if __name__ == "__main__":
    main()
