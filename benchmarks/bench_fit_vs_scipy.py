"""`jl.fit` end to end against SymPy + SciPy least squares, each in a fresh process.

    python benchmarks/bench_fit_vs_scipy.py [--repeats R]

The problem of `configs/fit_pendulum.toml`: recover a pendulum's length l = 2
(starting from 1.4) from 20 s of its motion (1001 samples of q and q̇, from
q = 2.8 at rest), with 10 multiple-shooting segments.

- jaxlagrange: `jl.fit` with its defaults (Levenberg–Marquardt, forward-mode
  Jacobians), rtol = atol = 1e-10, in a fresh Python process: import, compile
  and solve, then a second fit in the same (warm) process. Run once with an
  empty JAX persistent compilation cache and once with it filled (what a
  second `jaxlagrange fit` of the same problem sees).
- SymPy + SciPy: `LagrangesMethod` + `lambdify` for the equations of motion,
  `solve_ivp(method="DOP853", rtol=1e-10, atol=1e-10)` per segment and
  `least_squares(method="lm")` over l and the segment starts, in a fresh process.

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
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]

MAKE_DATA = """
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp, numpy as np, jaxlagrange as jl
system, q0, qd0 = jl.systems.pendulum({"l": 2.0}, q0=[2.8])
ts = jnp.linspace(0.0, 20.0, 1001)
traj = jl.simulate(system, q0, qd0, t1=20.0, saveat=ts, rtol=1e-12, atol=1e-12)
np.savez(PATH, ts=np.asarray(ts), q=np.asarray(traj.q), qd=np.asarray(traj.qd))
print(json.dumps({}))
"""

JL = """
import time
start = time.perf_counter()
import jax
jax.config.update("jax_enable_x64", True)
if CACHE:
    jax.config.update("jax_compilation_cache_dir", CACHE)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
import numpy as np, jaxlagrange as jl
imported = time.perf_counter()
data = np.load(PATH)
system, _, _ = jl.systems.pendulum({"l": 1.4})
obs = jl.Observations(data["ts"], data["q"], data["qd"])
def run():
    return jl.fit(system, obs, trainable={"l"}, positive={"l"}, segments=10,
                  rtol=1e-10, atol=1e-10)
result = run()
first = time.perf_counter()
again = run()
second = time.perf_counter()
print(json.dumps(dict(import_s=imported - start, fit_s=first - imported,
                      total_s=first - start, second_fit_s=second - first,
                      l=float(result.params["l"]), stderr=float(result.stderr["l"]),
                      steps=result.steps)))
"""

SCIPY = """
import time
start = time.perf_counter()
import numpy as np, sympy as sm
from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols
from scipy.integrate import solve_ivp
from scipy.optimize import least_squares
imported = time.perf_counter()
th = dynamicsymbols("theta")
thd = dynamicsymbols("theta", 1)
m, l, g = sm.symbols("m l g")
lm = LagrangesMethod(m * l**2 * thd**2 / 2 + m * g * l * sm.cos(th), [th])
lm.form_lagranges_equations()
rhs = sm.lambdify((th, thd, l, m, g), lm.rhs().subs({}), "numpy")
derived = time.perf_counter()
data = np.load(PATH)
ts, q, qd = data["ts"], data["q"][:, 0], data["qd"][:, 0]
bounds = np.round(np.linspace(0, len(ts) - 1, 11)).astype(int)

def residuals(x):
    length, starts = x[0], x[1:].reshape(-1, 2)
    starts = np.vstack([[q[0], qd[0]], starts])
    out = []
    for k in range(10):
        a, b = bounds[k], bounds[k + 1]
        sol = solve_ivp(lambda t, y: np.ravel(rhs(y[0], y[1], length, 1.0, 9.81)),
                        (ts[a], ts[b]), starts[k], method="DOP853", t_eval=ts[a:b + 1],
                        rtol=1e-10, atol=1e-10)
        out.append(sol.y[0, :-1] - q[a:b])
        out.append(sol.y[1, :-1] - qd[a:b])
        if k < 9:
            out.append(sol.y[:, -1] - starts[k + 1])
        else:
            out.append([sol.y[0, -1] - q[b], sol.y[1, -1] - qd[b]])
    return np.concatenate(out)

x0 = np.concatenate([[1.4], np.column_stack([q, qd])[bounds[1:-1]].ravel()])
fit = least_squares(residuals, x0, method="lm", xtol=1e-12, ftol=1e-12)
done = time.perf_counter()
print(json.dumps(dict(import_s=imported - start, derive_s=derived - imported,
                      fit_s=done - derived, total_s=done - start, l=float(fit.x[0]),
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "pendulum.npz")
        fresh(MAKE_DATA, PATH=path)
        cache = os.path.join(tmp, "jax-cache")
        cold, warm, scipy = [], [], []
        for _ in range(args.repeats):
            # Interleaved, so that a busy machine slows every variant alike.
            cold.append(fresh(JL, PATH=path, CACHE=""))
            fresh(JL, PATH=path, CACHE=cache)  # fills the cache
            warm.append(fresh(JL, PATH=path, CACHE=cache))
            scipy.append(fresh(SCIPY, PATH=path))
            for f in Path(cache).glob("*"):
                f.unlink()
    s = median(scipy, "total_s")
    print(
        f"pendulum l from 1.4, 10 segments, 1001 samples; median of {args.repeats} "
        "fresh processes"
    )
    print(
        f"SymPy + SciPy: {s:.2f} s end to end (import {median(scipy, 'import_s'):.2f}"
        f", derive + lambdify {median(scipy, 'derive_s'):.2f}, least_squares "
        f"{median(scipy, 'fit_s'):.2f} s, {scipy[0]['nfev']} evaluations), "
        f"l = {scipy[0]['l']:.10f}"
    )
    for name, runs in (
        ("jaxlagrange, empty compile cache", cold),
        ("jaxlagrange, warm compile cache", warm),
    ):
        t = median(runs, "total_s")
        print(
            f"{name}: {t:.2f} s end to end (import {median(runs, 'import_s'):.2f}, "
            f"compile + solve {median(runs, 'fit_s'):.2f} s, {runs[0]['steps']} "
            f"LM steps), l = {runs[0]['l']:.10f} ± {runs[0]['stderr']:.1e}: "
            f"{s / t:.2f}× SymPy + SciPy"
        )
    second = median(cold, "second_fit_s")
    print(
        f"a second fit in the same process: {second:.2f} s: "
        f"{median(scipy, 'fit_s') / second:.1f}× SciPy's least_squares alone"
    )


if __name__ == "__main__":
    main()
