"""A chaos map of the double pendulum: the largest Lyapunov exponent over (θ₁, θ₂).

Both arms are released from rest at angles (θ₁, θ₂) on a 512 × 512 grid over
[-π, π]², and for each the finite-time Lyapunov exponent λ over t ∈ [0, t1] is
computed (`jl.finite_time_lyapunov`, the variational equations integrated with
the state). The sweep streams to a Zarr store chunk by chunk (`jl.sweep`), so an
interrupted run resumes where it stopped; then the map is drawn.

Expected picture: a dark regular island around the stable equilibrium (0, 0),
where λ ≈ 0 (the estimate decays like ln(t)/t), bounded by the energy at which
the arms can flip, and a bright chaotic sea (λ ≈ 1–3 /s for unit masses and
lengths, g = 9.81) at high energy, with regular islands inside it. The map is
symmetric under (θ₁, θ₂) → (−θ₁, −θ₂).

    python experiments/chaos_map.py [--quick] [--num 512] [--t1 20] [--out DIR]
"""

import argparse
import json
import sys
import time
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="defaults for a quick run: a 32 x 32 grid, t1 = 10, chunks of 256, "
        "into out/chaos_map_quick",
    )
    parser.add_argument("--num", type=int, help="grid points per axis (512)")
    parser.add_argument("--t1", type=float, help="length of the window (20)")
    parser.add_argument("--rtol", type=float, default=1e-8)
    parser.add_argument("--chunk-size", type=int, help="members per chunk (4096)")
    parser.add_argument("--out", help="output directory (out/chaos_map)")
    args = parser.parse_args(argv)
    # What is given stands; --quick changes only the defaults.
    quick = (32, 10.0, 256, "out/chaos_map_quick")
    defaults = quick if args.quick else (512, 20.0, 4096, "out/chaos_map")
    for name, default in zip(("num", "t1", "chunk_size", "out"), defaults, strict=True):
        if getattr(args, name) is None:
            setattr(args, name, default)

    import jax

    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    import numpy as np

    import jaxlagrange as jl
    from jaxlagrange import plotting

    system, _, _ = jl.systems.make("double_pendulum")
    angles = np.linspace(-np.pi, np.pi, args.num)
    th1, th2 = np.meshgrid(angles, angles, indexing="ij")
    inputs = {"q0": np.stack([th1.ravel(), th2.ravel()], axis=1)}

    def member(x):
        lam = jl.finite_time_lyapunov(
            system,
            x["q0"],
            jnp.zeros(2),
            t1=args.t1,
            rtol=args.rtol,
            atol=args.rtol,
            throw=False,
        )
        return {
            "lyapunov": lam,
            "energy": jl.energy(system, x["q0"], jnp.zeros(2), 0.0),
        }

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    group = jl.sweep(
        member,
        inputs,
        out / "chaos_map.zarr",
        chunk_size=args.chunk_size,
        attrs={
            "experiment": "chaos_map",
            "num": args.num,
            "t1": args.t1,
            "rtol": args.rtol,
        },
    )
    wall = time.perf_counter() - start
    lam = group["outputs/lyapunov"][:]
    energy = group["outputs/energy"][:]
    fig = plotting.sweep_map(
        {"θ₁(0) [rad]": th1.ravel(), "θ₂(0) [rad]": th2.ravel()},
        lam,
        grid_shape=th1.shape,
        label=f"finite-time Lyapunov exponent λ [1/s] (t1 = {args.t1:g} s)",
        title=f"Double pendulum from rest, {args.num} × {args.num}",
    )
    fig.savefig(out / "chaos_map.png", dpi=150)

    # With unit masses and lengths, V = -2g cos θ₁ - g cos θ₂: E = -3g at rest at
    # the bottom; the outer arm can go over the top only if E >= -g, the inner
    # one only if E >= g. Low energy is regular, high energy mostly chaotic.
    g = 9.81
    low = energy < -2.5 * g
    high = energy > 0.5 * g
    mirrored = np.abs(lam.reshape(th1.shape) - lam.reshape(th1.shape)[::-1, ::-1])

    def over(reduce, values):  # None where a coarse grid has no such member
        return float(reduce(values)) if values.size else None

    rows = {
        "members": int(lam.size),
        "wall_s (this run)": round(wall, 1),
        "members_per_s (this run)": round(lam.size / wall, 1),
        "median λ, E < -2.5 g (low energy)": over(np.median, lam[low]),
        "median λ, E > 0.5 g (high energy)": over(np.median, lam[high]),
        "fraction λ > 0.5, high energy": over(np.mean, lam[high] > 0.5),
        "symmetry max |λ(θ) − λ(−θ)|, low energy": over(
            np.max, mirrored[low.reshape(th1.shape)]
        ),
    }
    for k, v in rows.items():
        print(f"{k:45s} {v}")
    (out / "chaos_map.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(f"wrote {out}/chaos_map.png")


if __name__ == "__main__":
    main()
