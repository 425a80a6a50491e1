"""`jl.fit` end to end against SymPy + SciPy least squares, each in a fresh process.

    python benchmarks/bench_fit_vs_scipy.py [--repeats R] [--problems pendulum double]

Two problems, each with 10 multiple-shooting segments and rtol = atol = 1e-10:

- `pendulum`: the problem of `configs/fit_pendulum.toml`: recover a pendulum's
  length l = 2 (starting from 1.4) from 20 s of its motion (1001 samples of q and
  q̇, from q = 2.8 at rest);
- `double`: recover a double pendulum's m₂ = 0.8 and l₂ = 0.9 (starting 20% off,
  m₁ = l₁ = 1 and g fixed) from 10 s of its motion (1001 samples, from
  θ = (1.0, 1.5) at rest).

- jaxlagrange, as a user runs it: `jaxlagrange fit config.toml` (the problem as
  a config; its figures written too) in a fresh process, first with an empty
  cache directory (`JAXLAGRANGE_CACHE_DIR`), then again with the cache the
  first left: JAX's compiled programs and jaxlagrange's kept traced programs
  (what a second `jaxlagrange fit` of the same problem sees). Wall time of the
  process, from its start to its exit.
- jaxlagrange as a library: `jl.fit` with its defaults (Levenberg–Marquardt,
  forward-mode Jacobians) in a fresh Python process without any cache: import,
  compile and solve, then a second fit in the same (warm) process.
- SymPy + SciPy: `LagrangesMethod` + `lambdify` for the equations of motion,
  `solve_ivp(method="DOP853")` per segment and `least_squares(method="lm")` over
  the params and the segment starts, in a fresh process.

Each figure is the median of `--repeats` fresh processes. Ratios are SymPy +
SciPy time over jaxlagrange time (> 1: jaxlagrange is faster).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]

PROBLEMS = {
    "pendulum": dict(
        SYSTEM="pendulum",
        TRUE={"l": 2.0},
        GUESS={"l": 1.4},
        FIXED={"m": 1.0, "g": 9.81},
        Q0=[2.8],
        T1=20.0,
    ),
    "double": dict(
        SYSTEM="double_pendulum",
        TRUE={"m2": 0.8, "l2": 0.9},
        GUESS={"m2": 0.64, "l2": 1.08},
        FIXED={"m1": 1.0, "l1": 1.0, "g": 9.81},
        Q0=[1.0, 1.5],
        T1=10.0,
    ),
}
SAMPLES, SEGMENTS = 1001, 10

MAKE_DATA = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, jaxlagrange as jl
system, q0, qd0 = jl.systems.make(SYSTEM, params={**FIXED, **TRUE}, q0=Q0)
ts = jnp.linspace(0.0, T1, SAMPLES)
traj = jl.simulate(system, q0, qd0, t1=T1, saveat=ts, rtol=1e-12, atol=1e-12)
np.savez(PATH, ts=np.asarray(ts), q=np.asarray(traj.q), qd=np.asarray(traj.qd))
print(json.dumps({}))
"""

JL = """
import time
start = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
import numpy as np, jaxlagrange as jl
imported = time.perf_counter()
data = np.load(PATH)
system, _, _ = jl.systems.make(SYSTEM, params={**FIXED, **GUESS})
obs = jl.Observations(data["ts"], data["q"], data["qd"])
def run():
    return jl.fit(system, obs, trainable=set(GUESS), positive=set(GUESS),
                  segments=SEGMENTS, rtol=1e-10, atol=1e-10)
result = run()
first = time.perf_counter()
again = run()
second = time.perf_counter()
print(json.dumps(dict(import_s=imported - start, fit_s=first - imported,
                      total_s=first - start, second_fit_s=second - first,
                      params={k: float(result.params[k]) for k in GUESS},
                      stderr={k: float(result.stderr[k]) for k in GUESS},
                      steps=result.steps)))
"""

CONFIG = """\
[system]
name = "{SYSTEM}"
params = {{ {PARAMS} }}

[fit]
data = "{PATH}"
trainable = {TRAINABLE}
positive = {TRAINABLE}
segments = {SEGMENTS}

[simulate]
rtol = 1e-10
atol = 1e-10
"""


def cli(config: str, cache: str, out: str, names) -> dict:
    """`jaxlagrange fit config` in a fresh process: its wall time and result."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAXLAGRANGE_CACHE_DIR": cache}
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "jaxlagrange", "fit", config, "--quiet", "--out", out],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    with open(os.path.join(out, "params.json")) as f:
        fitted = json.load(f)
    with open(os.path.join(out, "summary.json")) as f:
        steps = json.load(f)["solver_steps"]
    return dict(
        total_s=wall,
        steps=steps,
        params={k: fitted[k] for k in names},
        stderr={k: fitted[f"{k}_stderr"] for k in names},
    )


SCIPY = """
import time
start = time.perf_counter()
import numpy as np, sympy as sm
from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares
imported = time.perf_counter()
names = sorted({**FIXED, **TRUE})
symbols = {k: sm.Symbol(k) for k in names}
if SYSTEM == "pendulum":
    th = [dynamicsymbols("theta")]
    thd = [x.diff() for x in th]
    m, l, g = (symbols[k] for k in ("m", "l", "g"))
    lagrangian = m * l**2 * thd[0] ** 2 / 2 + m * g * l * sm.cos(th[0])
else:
    th = list(dynamicsymbols("theta1 theta2"))
    thd = [x.diff() for x in th]
    m1, m2, l1, l2, g = (symbols[k] for k in ("m1", "m2", "l1", "l2", "g"))
    lagrangian = (
        (m1 + m2) * l1**2 * thd[0] ** 2 / 2 + m2 * l2**2 * thd[1] ** 2 / 2
        + m2 * l1 * l2 * thd[0] * thd[1] * sm.cos(th[0] - th[1])
        + (m1 + m2) * g * l1 * sm.cos(th[0]) + m2 * g * l2 * sm.cos(th[1])
    )
lm = LagrangesMethod(lagrangian, th)
lm.form_lagranges_equations()
rhs = sm.lambdify((*th, *thd, *(symbols[k] for k in names)), lm.rhs(), "numpy")
derived = time.perf_counter()
data = np.load(PATH)
ts, y = data["ts"], np.column_stack([data["q"], data["qd"]])
n, free = y.shape[1], list(GUESS)
bounds = np.round(np.linspace(0, len(ts) - 1, SEGMENTS + 1)).astype(int)

def residuals(x):
    values = {**FIXED, **dict(zip(free, x[: len(free)]))}
    args = [values[k] for k in names]
    starts = np.vstack([y[0], x[len(free):].reshape(-1, n)])
    out = []
    for k in range(SEGMENTS):
        a, b = bounds[k], bounds[k + 1]
        sol = solve_ivp(lambda t, z: np.ravel(rhs(*z, *args)), (ts[a], ts[b]),
                        starts[k], method="DOP853", t_eval=ts[a:b + 1],
                        rtol=1e-10, atol=1e-10)
        out.append((sol.y[:, :-1].T - y[a:b]).ravel())
        out.append(sol.y[:, -1] - (starts[k + 1] if k < SEGMENTS - 1 else y[b]))
    return np.concatenate(out)

x0 = np.concatenate([[GUESS[k] for k in free], y[bounds[1:-1]].ravel()])
fit = least_squares(residuals, x0, method="lm", xtol=1e-12, ftol=1e-12)
done = time.perf_counter()
print(json.dumps(dict(import_s=imported - start, derive_s=derived - imported,
                      fit_s=done - derived, total_s=done - start,
                      params=dict(zip(free, map(float, fit.x[: len(free)]))),
                      nfev=int(fit.nfev))))
"""


def fresh(code: str, **values) -> dict:
    prelude = "import json\n" + "".join(f"{k} = {v!r}\n" for k, v in values.items())
    done = subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return json.loads(done.stdout.strip().splitlines()[-1])


def median(runs, key):
    return float(np.median([r[key] for r in runs]))


def _params(run, true) -> str:
    return ", ".join(
        f"{k} = {v:.10f} (error {abs(v / true[k] - 1):.1e})"
        + (f" ± {run['stderr'][k]:.1e}" if "stderr" in run else "")
        for k, v in run["params"].items()
    )


def bench(name: str, repeats: int) -> None:
    problem = {**PROBLEMS[name], "SAMPLES": SAMPLES, "SEGMENTS": SEGMENTS}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "data.npz")
        fresh(MAKE_DATA, PATH=path, **problem)
        config = os.path.join(tmp, "fit.toml")
        params = {**problem["FIXED"], **problem["GUESS"]}
        with open(config, "w") as f:
            f.write(
                CONFIG.format(
                    SYSTEM=problem["SYSTEM"],
                    PARAMS=", ".join(f"{k} = {v!r}" for k, v in params.items()),
                    PATH=path,
                    TRAINABLE=json.dumps(sorted(problem["GUESS"])),
                    SEGMENTS=SEGMENTS,
                )
            )
        out = os.path.join(tmp, "out")
        first, second, library, scipy = [], [], [], []
        for r in range(repeats):
            # Interleaved, so that a busy machine slows every variant alike.
            cache = os.path.join(tmp, f"cache_{r}")
            first.append(cli(config, cache, out, problem["GUESS"]))
            second.append(cli(config, cache, out, problem["GUESS"]))
            library.append(fresh(JL, PATH=path, **problem))
            scipy.append(fresh(SCIPY, PATH=path, **problem))
    true = problem["TRUE"]
    s = median(scipy, "total_s")
    print(
        f"\n{name}: {', '.join(true)} from {problem['GUESS']}, {SEGMENTS} segments, "
        f"{SAMPLES} samples over {problem['T1']} s; median of {repeats} fresh "
        f"processes, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"SymPy + SciPy: {s:.2f} s end to end (import {median(scipy, 'import_s'):.2f}"
        f", derive + lambdify {median(scipy, 'derive_s'):.2f}, least_squares "
        f"{median(scipy, 'fit_s'):.2f} s, {scipy[0]['nfev']} evaluations), "
        f"{_params(scipy[0], true)}"
    )
    for label, runs in (
        ("`jaxlagrange fit`, empty cache", first),
        ("`jaxlagrange fit` again, cache warm", second),
    ):
        t = median(runs, "total_s")
        print(
            f"{label}: {t:.2f} s end to end ({runs[0]['steps']} LM steps), "
            f"{_params(runs[0], true)}: {s / t:.2f}× SymPy + SciPy"
        )
    t = median(library, "total_s")
    print(
        f"`jl.fit` from Python, no cache: {t:.2f} s end to end (import "
        f"{median(library, 'import_s'):.2f}, compile + solve "
        f"{median(library, 'fit_s'):.2f} s): {s / t:.2f}× SymPy + SciPy"
    )
    again = median(library, "second_fit_s")
    print(
        f"a second `jl.fit` in the same process: {again:.2f} s: "
        f"{median(scipy, 'fit_s') / again:.1f}× SciPy's least_squares alone"
    )


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--problems", nargs="+", choices=sorted(PROBLEMS), default=list(PROBLEMS)
    )
    args = parser.parse_args()
    for name in args.problems:
        bench(name, args.repeats)


if __name__ == "__main__":
    main()
