"""The experiments run end to end: `textbook_constraints.py --quick`.

Runs the script in a subprocess, as CI and users do, and checks what it leaves:
its exit status, its PNG and its `results.json`. The quick mode compiles five
systems: measured 40 s for the script alone and 72 s for this test on a
2-core machine at load average 5.
"""

import json
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]

# The worst relative error of the quick table. Measured 9e-9 (the event angles
# and the normal forces, with rtol = atol = 1e-10 and a start 1e-3 rad off the
# unstable top); the bound leaves room for other platforms, and is still well
# below the O(θ₀²) ≈ 1e-6 difference from the textbook's θ₀ = 0 numbers that a
# wrong closed form (⅔ instead of ⅔ cos θ₀) would show.
WORST = 1e-7


def _quick(name: str, out: Path) -> subprocess.CompletedProcess:
    """Run `experiments/<name>.py --quick --out <out>` as a user would; it must pass."""
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "experiments" / f"{name}.py"),
            "--quick",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def test_textbook_constraints_quick(tmp_path):
    done = _quick("textbook_constraints", tmp_path)
    png = tmp_path / "textbook_constraints.png"
    assert png.stat().st_size > 10_000
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((tmp_path / "results.json").read_text())
    rows = results["rows"]
    # One example of each kind made it into the table: the releases, the
    # impulse and the bounces.
    titles = {row["example"] for row in rows}
    for kind in ("6.9.1", "6.9.2", "6.12", "bouncing ball"):
        assert any(title.startswith(kind) for title in titles), titles
    errors = [row["relative_error"] for row in rows]
    assert results["worst_relative_error"] == max(errors)
    assert max(errors) < WORST, max(rows, key=lambda row: row["relative_error"])
    assert f"worst relative error {max(errors):.1e}" in done.stdout


def test_small_oscillations_quick(tmp_path):
    _quick("small_oscillations", tmp_path)
    assert (tmp_path / "small_oscillations.png").stat().st_size > 10_000
    results = json.loads((tmp_path / "results.json").read_text())
    # Closed forms of normal modes and equilibria: rounding-level agreement.
    assert results["worst_relative_error"] < 1e-10
    assert len(results["rows"]) == 7
    # The benchmark bicycle's eigenvalues at v = 0..5 m/s against the paper's table.
    assert results["bicycle_table_2_max_abs_error"] < 1e-9


def test_variational_quick(tmp_path):
    _quick("variational", tmp_path)
    assert (tmp_path / "variational.png").stat().st_size > 10_000
    results = json.loads((tmp_path / "results.json").read_text())
    # 36 000 steps: the midpoint energy error stays below 0.1 J (measured 0.068)
    # and Heun's drifts past it (0.56); angular momentum and constraint to round-off.
    energy = results["energy"]
    assert energy["variational midpoint"]["max_abs_energy_error"] < 0.1
    assert energy["Heun"]["max_abs_energy_error"] > 0.3
    assert results["kepler_max_relative_momentum_error"] < 1e-11
    assert results["constrained"]["max_g"] < 1e-10


def test_friction_quick(tmp_path):
    # Four systems compiled (ball, block, sphere, wheel): measured 170 s for the
    # script on a 2-core machine at load average 5 (70 s of CPU).
    done = _quick("friction", tmp_path)
    png = tmp_path / "friction.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((tmp_path / "results.json").read_text())
    titles = {row["example"] for row in results["rows"]}
    for kind in ("solid sphere", "disk", "block", "6.9.2", "6.9.4"):
        assert any(kind in title for title in titles), titles
    errors = [row["relative_error"] for row in results["rows"]]
    assert results["worst_relative_error"] == max(errors)
    # Measured 1.3e-8: the rolling release at μ = 1e6 (the O(1/μ) slip just
    # before it); the closed forms and the SciPy references agree to 1e-10.
    assert max(errors) < 1e-7, max(results["rows"], key=lambda r: r["relative_error"])
    assert "worst relative error" in done.stdout


def test_rigid_bodies_quick(tmp_path):
    # Three systems compiled (the top, the free body, the upright top's
    # linearization): measured 4 min for the script at load average 10.
    done = _quick("rigid_bodies", tmp_path)
    assert (tmp_path / "rigid_bodies.png").stat().st_size > 10_000
    results = json.loads((tmp_path / "results.json").read_text())
    examples = [row["example"] for row in results["rows"]]
    assert len(examples) == 8, examples
    for kind in ("steady precession", "nutation", "flips", "Euler", "threshold"):
        assert any(kind in example for example in examples), (kind, examples)
    # Measured: steady θ 1.3e-12 rad, the precession rate 2e-14, the nutation's
    # turning point 5e-12, the flip's half period 7e-9, ω against Euler's
    # equations 2e-7 rad/s over two flips, |p|² − 1 4e-16, the sleeping top's
    # threshold 3e-11 (from the frequencies) and 3e-8 (bisection).
    for row in results["rows"]:
        bound = 1e-6 if row["kind"] == "absolute" else 1e-7
        assert row["error"] < bound, row
    assert results["worst_relative_error"] < 1e-7
    assert "worst relative error" in done.stdout
