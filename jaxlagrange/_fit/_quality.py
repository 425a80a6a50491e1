"""How good a fit is: the misfit against the noise and against the data, the
params the data cannot determine, and several starting guesses.

A least-squares solver stops at a local minimum as readily as at the global
one, and its standard errors describe the minimum it found, however poor. So
`fit` reports the misfit beside the scale it should be judged by (the noise σ
when given, else the data's own spread) and warns when it is far off.
"""

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax.tree_util as jtu
import numpy as np

from ._problem import check_names


class FitQuality(NamedTuple):
    """The misfit numbers of a fit (plain Python values, for `FitResult`)."""

    chi2_red: float | None
    rms: float
    data_scale: float
    warning: str | None


# A fit is poor when χ²_red is this far above 1 (and at least 5 standard
# deviations of χ²_red, √(2/dof), above it), or, without σ, when the RMS
# residual of the coordinates exceeds this fraction of the data's spread.
_CHI2_FACTOR = 2.0
_RELATIVE = 0.05

_ADVICE = (
    "The solver may have stopped in a local minimum: try more `segments` (each "
    "shorter than the motion's fastest period), other starting params "
    "(`starts=`), or check the model"
)


def data_scale(data) -> float:
    """The RMS spread of the fitted observed coordinates about their time means."""
    spreads = []
    for d in data:
        q = np.asarray(d.q)
        w = np.ones(q.shape[0]) if d.weights is None else np.asarray(d.weights)
        used = np.broadcast_to(w.reshape(q.shape[0], -1) > 0, q.shape)
        for j in range(q.shape[1]):
            column = q[used[:, j], j]
            spreads.append(column - column.mean() if column.size else column)
    return float(np.sqrt(np.mean(np.concatenate(spreads) ** 2)))


def quality(data, problem, chi, raw, unknowns: int) -> FitQuality:
    """A fit's misfit: χ²_red, RMS residual, data spread, and a warning when far off."""
    dof, weights = _counts(problem, unknowns)
    rms = math.sqrt(max(float(raw), 0.0) / weights)
    scale = data_scale(data)
    chi2_red = float(problem.total) * float(chi) / dof if problem.sigma_given else None
    warning = None
    if chi2_red is not None:
        if not chi2_red <= _limit(dof):
            warning = (
                f"jl.fit: poor fit: the reduced χ² is {chi2_red:.4g}, far above 1 "
                f"(the residuals are {math.sqrt(chi2_red):.3g} times the noise σ; "
                f"RMS residual {rms:.3g} against the data's spread {scale:.3g}). "
                f"{_ADVICE} and σ."
            )
    elif not rms <= _RELATIVE * scale:
        percent = 100 * rms / scale if scale > 0 else math.inf
        warning = (
            f"jl.fit: poor fit: the RMS residual of the coordinates, {rms:.3g}, is "
            f"{percent:.3g}% of the data's spread ({scale:.3g}). {_ADVICE}; if the "
            "data are this noisy, give their noise (`Observations(sigma=...)`) to "
            "compare the misfit with it."
        )
    return FitQuality(chi2_red, rms, scale, warning)


def hopeless_loss(data, problem, unknowns: int) -> float:
    """The loss above which a fit that no longer improves stops as stalled."""
    dof, weights = _counts(problem, unknowns)
    if problem.sigma_given:
        return 10 * _limit(dof) * dof / problem.total
    return (4 * _RELATIVE * data_scale(data)) ** 2 * weights / float(problem.total)


def _counts(problem, unknowns: int) -> tuple[float, float]:
    """The degrees of freedom N − P (at least 1), the coordinates' summed weights."""
    weights = sum(float(layout.total) for layout in problem.layouts)
    return max(float(problem.count) - unknowns, 1.0), weights


def _limit(dof: float) -> float:
    """The largest χ²_red of a fit that is not poor."""
    return max(_CHI2_FACTOR, 1.0 + 5.0 * math.sqrt(2.0 / dof))


def flat_names(trained) -> list[str]:
    """A name per flattened trained param, e.g. `k` or `["w"][1]`."""
    names = []
    for path, leaf in jtu.tree_leaves_with_path(trained):
        keys = [getattr(k, "key", None) for k in path]
        one = len(keys) == 1 and isinstance(keys[0], str)
        name = str(keys[0]) if one else jtu.keystr(path)
        if np.size(leaf) == 1:
            names.append(name)
        else:
            index = np.ndindex(np.shape(leaf))
            names += [f"{name}[{', '.join(map(str, i))}]" for i in index]
    return names


# A combination of params is not determined when the precision, scaled to a unit
# diagonal, has an eigenvalue below this fraction of its largest: its standard
# error is then > 10⁴ times what the data would give each param alone.
_WEAK = 1e-8


def weak_directions(precision, names, dead) -> tuple[list[str], list[dict[str, float]]]:
    """What the data leave undetermined besides `dead`: lone params, combinations."""
    precision, dead = np.asarray(precision, float), np.asarray(dead, bool)
    d = np.sqrt(np.abs(np.diagonal(precision)))
    if not np.all(np.isfinite(precision)) or not np.any(d[~dead] > 0):
        return [], []
    # A param whose precision vanishes against the others' (rounding) alone.
    alone = ~dead & (d <= _WEAK * np.max(d[~dead]))
    single, out = [names[i] for i in np.flatnonzero(alone)], []
    keep = np.flatnonzero(~dead & ~alone)
    if keep.size < 2:
        return single, out
    scaled = precision[np.ix_(keep, keep)] / np.outer(d[keep], d[keep])
    w, v = np.linalg.eigh((scaled + scaled.T) / 2)
    for k in np.flatnonzero(w < _WEAK * w[-1]):
        x = v[:, k] / d[keep]
        x = x / np.linalg.norm(x) * np.sign(x[np.argmax(np.abs(x))])
        big = np.flatnonzero(np.abs(x) >= 0.05)
        out.append({names[keep[i]]: float(x[i]) for i in big})
    return single, out


def _first(items: list[str], most: int, sep: str = ", ", more: str = "") -> str:
    """The first `most` items, joined, and how many `more` there are."""
    rest = f"{sep if sep == '; ' else ' '}and {len(items) - most} more{more}"
    return sep.join(items[:most]) + (rest if len(items) > most else "")


def warn_unidentifiable(dead: list[str], weak: list[dict[str, float]]) -> None:
    """Warn that `dead` params and `weak` combinations are undetermined."""
    if not dead and not weak:
        return
    parts = []
    if dead:
        parts.append(
            f"param {_first(dead, 5)} does not change the fitted motion (its column "
            "of the residuals' Jacobian is zero)"
        )
    if weak:
        # A neural Lagrangian's may be dozens of directions over hundreds of
        # params: the warning shows the largest terms, `unidentifiable` all.
        def terms(d):  # its four largest, in the params' order
            largest = sorted(d, key=lambda n: -abs(d[n]))[:4]
            shown = " ".join(f"{c:+.3g}·{n}" for n, c in d.items() if n in largest)
            more = len(d) - len(largest)
            return shown + (f" and {more} more terms" if more else "")

        combos = _first([terms(d) for d in weak], 3, "; ", " directions")
        parts.append(
            "the data do not determine the combination"
            f"{'s' * (len(weak) > 1)} of params along {combos} (a direction in "
            "which the residuals barely change: the params may enter only through "
            "a product, or the experiment does not excite them separately)"
        )
    text = (
        f"jl.fit: {'; and '.join(parts)}. Their standard errors are inf (the "
        "others' are computed without them). Hold all but one of each fixed "
        "(`trainable=`), or add an experiment that moves them separately. The "
        "directions are in `FitResult.unidentifiable`."
    )
    warnings.warn(text, UserWarning, stacklevel=4)


def warn_undetermined(stderr) -> None:
    """Warn that params with a NaN standard error are not separately determined."""
    names = [
        jtu.keystr(path)
        for path, x in jtu.tree_leaves_with_path(stderr)
        if x is not None and np.any(np.isnan(np.asarray(x)))
    ]
    if not names:
        return
    text = (
        f"jl.fit: the data do not determine params {_first(names, 5)} separately: the "
        "residuals' Jacobian has dependent columns (they enter the motion only "
        "through a combination of them, a product say, or the Lagrangian has a "
        "symmetry such as L → cL), so their standard errors are NaN. Hold all but "
        "one of such a combination fixed (`trainable=`), or fit the combination."
    )
    warnings.warn(text, UserWarning, stacklevel=4)


def warn_not_converged(solver: str, result: str, steps: int) -> None:
    """Warn that a least-squares solver stopped before its tolerance."""
    advice = "Raise `steps`, or start closer."
    if result.startswith("stalled"):
        advice = f"More `steps` would not help. {_ADVICE}."
    text = (
        f"jl.fit: {solver} stopped before meeting its tolerance ({result}, after "
        f"{steps} steps): the params may not be at the optimum yet. {advice}"
    )
    warnings.warn(text, UserWarning, stacklevel=4)


def start_params(starts, params, trainable) -> list[Any]:
    """The starting params of `fit(..., starts=...)`, each shaped like `params`."""
    if isinstance(starts, Mapping):
        sizes = {k: np.shape(v)[0] if np.ndim(v) else None for k, v in starts.items()}
        if not starts or None in sizes.values() or len(set(sizes.values())) != 1:
            raise ValueError(
                "`starts` as a dict must map param names to arrays with the same "
                f"leading length (one entry per start), got lengths {sizes}."
            )
        fixed = isinstance(trainable, (set, frozenset, list, tuple))
        held = sorted(set(starts) - set(trainable)) if fixed else []
        if held:
            raise ValueError(
                f"`starts` gives starting values for {held}, which `trainable` "
                f"({sorted(trainable)}) holds fixed: train them, or set their "
                "value in `params`."
            )
        count = next(iter(sizes.values()))
        starts = [
            {k: np.asarray(v)[i] for k, v in starts.items()} for i in range(count)
        ]
    if (
        isinstance(starts, (str, bytes))
        or not isinstance(starts, Sequence)
        or not starts
    ):
        raise ValueError(
            "`starts` must be a non-empty list of starting params, or a dict of param "
            f"names to arrays of starting values, got {type(starts).__name__}."
        )
    out = []
    for i, start in enumerate(starts):
        if isinstance(start, Mapping):
            check_names(start, params, f"starts[{i}]", "pass a list of params")
            start = type(params)({**params, **start})
        out.append(start)
    return out
