"""The command line's time to first result, each command in a fresh process.

    python benchmarks/bench_cli.py [--repeats R] [--cases floor run run_plots ...]

- `floor`: `python -c "import jaxlagrange"`, the import floor (Python, JAX, the
  package: what every command pays before it starts);
- `run`: `jaxlagrange run --no-plots` (the embedded default: a chaotic double
  pendulum, 20 s, 2001 saves, Tsit5 at rtol = atol = 1e-10);
- `run_plots`: `jaxlagrange run` with its figures and motion.gif;
- `fit`: `jaxlagrange fit configs/fit_pendulum.toml` (its data made first by
  `jaxlagrange run configs/pendulum.toml`, outside the timing);
- `rigid`: `jaxlagrange run configs/free_rigid_body.toml --no-plots` (a rigid
  body: a quaternion with its unit-norm constraint).

Each case runs `first` with an empty compilation cache and `second` with the
cache the first run left (what a user's second call of the same command sees).
A figure is the median of `--repeats` such pairs, each pair with its own new
cache directory. Wall time is what the user waits; CPU time (user + system of
the process) is what it costs, the steadier figure on a shared machine. The
ratios are those of the speed issue: `run` over the import floor (≤ 1.8× first,
≤ 1.4× second), figures and GIF over `--no-plots` (≤ 1.35×), and the free body
in ≤ 3.5 s with an empty cache, on a 2-core CPU.
"""

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


ROOT = Path(__file__).resolve().parents[1]

CASES = {
    "floor": [],
    "run": ["run", "--no-plots", "--quiet"],
    "run_plots": ["run", "--quiet"],
    "fit": ["fit", str(ROOT / "configs" / "fit_pendulum.toml"), "--quiet"],
    "rigid": ["run", "configs/free_rigid_body.toml", "--no-plots", "--quiet"],
}
TARGETS = {  # seconds of wall time on a 2-core CPU
    ("run", "first"): 2.5,
    ("run", "second"): 2.0,
    ("rigid", "first"): 3.5,
}
RATIOS = {  # (case, over case): target, per cache state
    ("run", "floor"): {"first": 1.8, "second": 1.4},
    ("run_plots", "run"): {"first": 1.35, "second": 1.35},
}


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def fresh(args: list[str], cache: str, out: str) -> tuple[float, float]:
    """(wall, cpu) seconds of `jaxlagrange *args` in a new process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "JAXLAGRANGE_CACHE_DIR": cache}
    cpu = _children_cpu()
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "jaxlagrange", *args, "--out", out]
        if args
        else [sys.executable, "-c", "import jaxlagrange"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"jaxlagrange {' '.join(args)} failed:\n{done.stderr}")
    return wall, _children_cpu() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    options = parser.parse_args()
    if "fit" in options.cases:  # the fit's data, untimed
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        subprocess.run(
            [sys.executable, "-m", "jaxlagrange", "run", "configs/pendulum.toml"]
            + ["--quiet", "--no-plots"],
            env=env,
            cwd=ROOT,
            check=True,
        )
    results: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(options.repeats):
            for case in options.cases:
                cache = os.path.join(tmp, f"cache_{case}_{r}")
                out = os.path.join(tmp, f"out_{case}_{r}")
                for when in ("first", "second"):
                    timing = fresh(CASES[case], cache, out)
                    results.setdefault((case, when), []).append(timing)
                    print(
                        f"  {case:9s} {when:6s} wall {timing[0]:6.2f} s  "
                        f"cpu {timing[1]:6.2f} s",
                        flush=True,
                    )
    print(
        f"\nmedian of {options.repeats} fresh processes, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print("| command | cache | wall (s) | CPU (s) | target (wall) |")
    print("|---|---|---|---|---|")
    for (case, when), runs in results.items():
        wall, cpu = np.median(np.asarray(runs), axis=0)
        target = TARGETS.get((case, when))
        target_text = f"≤ {target}" if target else ""
        command = " ".join(["jaxlagrange", *CASES[case][:-1]]).replace(
            str(ROOT) + "/", ""
        )
        if case == "floor":
            command = 'python -c "import jaxlagrange"'
        print(f"| `{command}` | {when} | {wall:.2f} | {cpu:.2f} | {target_text} |")
    median = {k: np.median(np.asarray(v), axis=0) for k, v in results.items()}
    for (case, over), targets in RATIOS.items():
        for when, target in targets.items():
            if (case, when) in median and (over, when) in median:
                wall = median[(case, when)][0] / median[(over, when)][0]
                print(
                    f"{case} / {over}, {when} run: {wall:.2f}x wall (target ≤ {target})"
                )


if __name__ == "__main__":
    main()
