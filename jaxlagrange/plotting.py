"""Figures of trajectories; matplotlib is imported only when a figure is made.

Each function returns a `matplotlib.figure.Figure` (no pyplot, no global state):
save it with `fig.savefig("x.png")`.
"""

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

# The motion figures live in their own module, which imports nothing of the
# package: `jaxlagrange run` draws motion.gif from it in a worker process that
# does not import JAX (see `_cli/_gif_worker.py`).
from ._plotting_motion import (
    animation as animation,
    motion as motion,
    new_figure as new_figure,
    with_unit as with_unit,
)


# The figures, including the re-exported ones (the API docs list these).
__all__ = [
    "animation",
    "configuration",
    "coordinates",
    "energy",
    "fit_comparison",
    "losses",
    "motion",
    "phase_portrait",
    "sweep_map",
]


def _labels(n: int, coordinates, units) -> tuple[list[str], list[str | None]]:
    """One label and one unit (None: unknown) per coordinate."""
    if units is not None and len(units) != n:
        raise ValueError(
            f"`units` must have one entry per coordinate ({n}), got {len(units)}."
        )
    if coordinates is None or len(coordinates) != n:
        coordinates = [f"q{i}" for i in range(n)]
    return list(coordinates), [None] * n if units is None else list(units)


def _image(ax, values, extent, cmap, vmin, vmax):
    """`values` (x, y) as an image over `extent`, one cell per value."""
    kwargs = dict(cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    return ax.imshow(values.T, aspect="auto", origin="lower", extent=extent, **kwargs)


def _rate(label: str) -> str:
    # Not a combining dot above: matplotlib's fonts misplace it on θ₁ and friends.
    return f"d{label}/dt"


_MANY = 6  # above this many coordinates, draw a space-time image instead of lines


def coordinates(
    ts: Any,
    q: Any,
    coordinates: Sequence[str] | None = None,
    *,
    units: Sequence[str] | None = None,
    title: str | None = None,
):
    """The coordinates against time: one line each, or an image for many of them.

    In the image, coordinates of very different sizes are each shown about their
    mean and scaled to their own range (the colour bar says so).

    **Arguments:**

    - `ts`: the times, shape (T,).
    - `q`: the coordinates, shape (T, n).
    - `coordinates`: one label per coordinate (e.g. `ReadySystem.coordinates`).
    - `units`: one unit per coordinate (e.g. `ReadySystem.units`; None: unknown),
        shown on the axis (or beside each name when they differ); with units the
        time is in seconds.
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`.

    **Example:**

    ```python
    fig = jl.plotting.coordinates(traj.ts, traj.q, ready.coordinates, units=ready.units)
    fig.savefig("coordinates.png")
    ```
    """
    ts, q = np.asarray(ts), np.asarray(q)
    n = q.shape[1]
    labels, unit_list = _labels(n, coordinates, units)
    shared = unit_list[0] if len(set(unit_list)) == 1 else None
    if shared is None:
        labels = [with_unit(a, u) for a, u in zip(labels, unit_list, strict=True)]
    fig = new_figure(8, 4.5)
    ax = fig.add_subplot()
    if n <= _MANY:
        for i in range(n):
            ax.plot(ts, q[:, i], label=labels[i], lw=1.2)
        ax.legend(loc="best", framealpha=0.85, ncols=min(n, 3))
        ax.set_ylabel(with_unit("coordinate", shared))
        ax.grid(alpha=0.3)
    else:
        values, label = q, with_unit("value", shared)
        scales = np.max(np.abs(q), axis=0)
        if np.max(scales) > 10 * np.min(scales[scales > 0], initial=np.inf):
            # Very different sizes (a mirror and its field modes, say): show each
            # row's variation about its mean, scaled to its own largest value.
            values = q - np.mean(q, axis=0)
            spread = np.max(np.abs(values), axis=0)
            values = values / np.where(spread > 0, spread, 1.0)
            label = "per row: (q − mean) / max |q − mean|"
        limit = float(np.max(np.abs(values))) or 1.0
        extent = (ts[0], ts[-1], -0.5, n - 0.5)
        image = _image(ax, values, extent, "RdBu_r", -limit, limit)
        step = max(1, n // 12)
        ax.set_yticks(range(0, n, step), labels[::step])
        ax.set_ylabel("coordinate")
        fig.colorbar(image, ax=ax, label=label)
    ax.set_xlabel(with_unit("time t", units and "s"))
    ax.set_xlim(ts[0], ts[-1])
    ax.set_title(title or "Coordinates against time")
    return fig


def phase_portrait(
    q: Any,
    qd: Any,
    coordinates: Sequence[str] | None = None,
    *,
    units: Sequence[str] | None = None,
    ts: Any = None,
    title: str | None = None,
    max_panels: int = 4,
):
    """Velocity against coordinate, one panel per coordinate, coloured by time.

    **Arguments:**

    - `q`, `qd`: coordinates and velocities, shape (T, n).
    - `coordinates`: one label per coordinate.
    - `units`: one unit per coordinate (None: unknown); velocities in unit/s.
    - `ts`: the times (T,), for the colour scale (None: sample index).
    - `title`: the figure title.
    - `max_panels`: draw at most this many coordinates (the first ones).

    **Returns:** a `matplotlib.figure.Figure`.
    """
    q, qd = np.asarray(q), np.asarray(qd)
    n = q.shape[1]
    labels, unit_list = _labels(n, coordinates, units)
    k = min(n, max_panels)
    fig = new_figure(3.6 * k + 0.8, 3.8)
    axes = fig.subplots(1, k, squeeze=False)[0]
    for i, ax in enumerate(axes):
        points = _path(ax, q[:, i], qd[:, i], ts, linewidths=0)
        unit = unit_list[i]
        ax.set_xlabel(with_unit(labels[i], unit))
        ax.set_ylabel(with_unit(_rate(labels[i]), unit and f"{unit}/s"))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", framealpha=0.85)
    fig.colorbar(points, ax=list(axes), label=_time_label(ts, units))
    shown = "" if k == n else f" (first {k} of {n} coordinates)"
    fig.suptitle((title or "Phase portrait") + shown)
    return fig


def _path(ax, x, y, ts, **kwargs):
    """A path in grey, its points coloured by time (or sample), and its start."""
    colour = np.arange(len(x)) if ts is None else np.asarray(ts)
    ax.plot(x, y, color="0.8", lw=0.6, zorder=1)
    points = ax.scatter(x, y, c=colour, s=2, cmap="viridis", zorder=2, **kwargs)
    ax.plot(x[0], y[0], "o", color="crimson", ms=5, zorder=3, label="start")
    return points


def _time_label(ts, units) -> str:
    return with_unit("time t", units and "s") if ts is not None else "sample"


def configuration(
    q: Any,
    coordinates: Sequence[str] | None = None,
    *,
    units: Sequence[str] | None = None,
    ts: Any = None,
    title: str | None = None,
):
    """The path in the plane of the first two coordinates, coloured by time.

    **Arguments:**

    - `q`: the coordinates, shape (T, n) with n ≥ 2.
    - `coordinates`: one label per coordinate.
    - `units`: one unit per coordinate (None: unknown).
    - `ts`: the times, for the colour scale.
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`.
    """
    q = np.asarray(q)
    labels, unit_list = _labels(q.shape[1], coordinates, units)
    fig = new_figure(5.6, 5)
    ax = fig.add_subplot()
    points = _path(ax, q[:, 0], q[:, 1], ts)
    ax.set_xlabel(with_unit(labels[0], unit_list[0]))
    ax.set_ylabel(with_unit(labels[1], unit_list[1]))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", framealpha=0.85)
    fig.colorbar(points, ax=ax, label=_time_label(ts, units))
    ax.set_title(title or f"Configuration path ({labels[0]}, {labels[1]})")
    return fig


def energy(
    ts: Any,
    energies: Any,
    *,
    conserved: bool = True,
    unit: str | None = None,
    title: str | None = None,
):
    """The energy error |E(t) − E(0)| (relative where E(0) ≠ 0), or E(t) itself.

    **Arguments:**

    - `ts`: the times, shape (T,).
    - `energies`: the energy (Jacobi integral) at `ts`, shape (T,).
    - `conserved`: whether the energy should be conserved. If so the error is
        drawn on a log scale; if not (a driven or damped system) E(t) is drawn.
    - `unit`: the unit of energy (`"J"`; None: unknown); with one, time is in s.
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`.
    """
    ts, energies = np.asarray(ts), np.asarray(energies)
    fig = new_figure(8, 4)
    ax = fig.add_subplot()
    e0 = energies[0]
    if conserved:
        error = np.abs(energies - e0)
        relative = e0 != 0
        if relative:
            error = error / abs(e0)
        # Exact zeros (at t0, say) have no place on a log scale: leave gaps.
        ax.semilogy(ts, np.where(error > 0, error, np.nan), lw=1.0, color="C3")
        ax.set_ylabel(
            "|E(t) − E(0)| / |E(0)|" if relative else with_unit("|E(t) − E(0)|", unit)
        )
        e0_text = f"{e0:.6g} {unit}" if unit else f"{e0:.6g}"
        ax.set_title(
            title or f"Energy error (max {np.max(error):.2e}, E(0) = {e0_text})"
        )
    else:
        ax.plot(ts, energies, lw=0.5, color="C3", alpha=0.6, label="E(t)")
        window = len(ts) // 40
        if window >= 3:  # the slow trend under a fast drive
            kernel = np.ones(window) / window
            mean = np.convolve(energies, kernel, mode="valid")
            middle = np.convolve(ts, kernel, mode="valid")
            label = f"running mean ({window} samples)"
            ax.plot(middle, mean, lw=1.8, color="k", label=label)
            ax.legend(loc="best", framealpha=0.85)
        ax.set_ylabel(with_unit("energy E(t)", unit))
        ax.set_title(title or "Energy (not conserved: driven or damped system)")
    ax.set_xlabel(with_unit("time t", unit and "s"))
    ax.set_xlim(ts[0], ts[-1])
    ax.grid(alpha=0.3, which="both")
    return fig


def sweep_map(
    axes: dict[str, Any],
    values: Any,
    *,
    grid_shape: Sequence[int] | None = None,
    label: str = "value",
    title: str | None = None,
    cmap: str = "magma",
    coordinates: Sequence[str] | None = None,
    units: Sequence[str] | None = None,
    param_units: Mapping[str, str] | None = None,
):
    """A quantity over a sweep: an image over a 2-D grid, else a line or scatter.

    **Arguments:**

    - `axes`: axis name -> the swept value of each member, shape (size,) (the
        first one or two axes are drawn).
    - `values`: the quantity per member, shape (size,); NaN (failed members) is
        drawn blank.
    - `grid_shape`: the grid's shape when the members form a grid in C order.
    - `label`, `title`, `cmap`: colour-bar label (with its unit), title, colour map.
    - `coordinates`, `units`: the system's coordinate labels and units, to label
        axes named `q[i]` and `qd[i]` as `θ₁ [rad]` and `dθ₁/dt [rad/s]`.
    - `param_units`: the unit of a param (`"body_mass": "kg"`) or of one entry
        of it (`"dof_damping[0]"`), to label axes over params (e.g.
        `dict(ReadySystem.param_units)`).

    **Returns:** a `matplotlib.figure.Figure`.

    **Example:**

    ```python
    fig = jl.plotting.sweep_map({"q[0]": a.ravel(), "q[1]": b.ravel()}, lam.ravel(),
                                grid_shape=a.shape, label="λ")
    ```
    """
    names = list(axes)
    titles = [_axis_name(a, coordinates, units, param_units or {}) for a in names]
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    vmin, vmax = np.percentile(finite, [0.5, 99.5]) if finite.size else (0.0, 1.0)
    fig = new_figure(6.4, 5.4)
    ax = fig.add_subplot()
    x = np.asarray(axes[names[0]])
    if len(names) == 1:
        order = np.argsort(x)
        ax.plot(x[order], values[order], lw=1.0)
        ax.set_xlabel(titles[0])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    else:
        y = np.asarray(axes[names[1]])
        if grid_shape is not None and len(grid_shape) == 2:
            extent = (x.min(), x.max(), y.min(), y.max())
            image = _image(ax, values.reshape(grid_shape), extent, cmap, vmin, vmax)
        else:
            image = ax.scatter(x, y, c=values, s=4, cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_xlabel(titles[0])
        ax.set_ylabel(titles[1])
        fig.colorbar(image, ax=ax, label=label)
    ax.set_title(title or f"{label} over the sweep")
    return fig


def _axis_name(name: str, coordinates, units, param_units) -> str:
    """Axis label: `q[0]` -> `θ₁ [rad]`, `qd[0]` -> `dθ₁/dt [rad/s]`, a param's unit."""
    kind, _, index = name.rstrip("]").partition("[")
    if kind not in ("q", "qd") or not index.isdigit() or coordinates is None:
        return with_unit(name, param_units.get(name, param_units.get(kind)))
    label, unit = coordinates[int(index)], units and units[int(index)]
    if kind == "qd":
        label, unit = _rate(label), unit and f"{unit}/s"
    return with_unit(label, unit)


def fit_comparison(
    ts: Any,
    q: Any,
    q_fit: Any,
    coordinates: Sequence[str] | None = None,
    *,
    units: Sequence[str] | None = None,
    sigma: Any = None,
    title: str | None = None,
):
    """Observed coordinates (points) against a fitted trajectory (lines).

    **Arguments:**

    - `ts`: the observation times, shape (T,).
    - `q`: the observed coordinates, shape (T, n).
    - `q_fit`: the fitted trajectory at `ts`, shape (T, n).
    - `coordinates`: one label per coordinate.
    - `units`: one unit per coordinate (None: unknown); with units, time is in s.
    - `sigma`: the data's noise, a scalar or one per coordinate, drawn as a ±σ
        band on the residuals (None: the residuals' own standard deviation).
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`: per coordinate (at most six) a panel
    of the data and the fit, and below it a panel of the residuals, observed −
    fitted, with their ±σ band.
    """
    ts, q, q_fit = np.asarray(ts), np.asarray(q), np.asarray(q_fit)
    n = min(q.shape[1], _MANY)
    labels, unit_list = _labels(q.shape[1], coordinates, units)
    residuals = q - q_fit
    band, band_label = (
        (np.std(residuals, axis=0), "±σ of the residuals")
        if sigma is None
        else (np.broadcast_to(np.asarray(sigma, float), q.shape[1:]), "±σ (noise)")
    )
    fig = new_figure(8, 1.2 + 3.3 * n)
    grid = fig.add_gridspec(2 * n, 1, height_ratios=[2, 1] * n)
    axes = []
    for i in range(n):
        ax = fig.add_subplot(grid[2 * i], sharex=axes[0] if axes else None)
        ax.plot(ts, q[:, i], ".", ms=3, color="k", alpha=0.6, label="observed")
        ax.plot(ts, q_fit[:, i], lw=1.3, color="C3", label="fitted")
        ax.set_ylabel(with_unit(labels[i], unit_list[i]))
        ax.grid(alpha=0.3)
        ax.tick_params(labelbottom=False)
        res = fig.add_subplot(grid[2 * i + 1], sharex=ax)
        res.axhspan(-band[i], band[i], color="C0", alpha=0.15, lw=0, label=band_label)
        res.plot(ts, residuals[:, i], ".", ms=2, color="C0")
        res.axhline(0.0, color="k", lw=0.6)
        res.set_ylabel(with_unit("residual", unit_list[i]))
        res.grid(alpha=0.3)
        if i < n - 1:
            res.tick_params(labelbottom=False)
        if i == 0:
            res.legend(loc="upper right", framealpha=0.85, fontsize="small")
        axes.append(ax)
    axes[0].legend(loc="best", framealpha=0.85)
    res.set_xlabel(with_unit("time t", units and "s"))
    res.set_xlim(ts[0], ts[-1])
    fig.suptitle(title or "Observed and fitted trajectory")
    return fig


def losses(losses: Any, *, title: str | None = None):
    """A loss history on a log scale.

    **Arguments:**

    - `losses`: the loss at each optimizer step, shape (steps,).
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`.
    """
    losses = np.asarray(losses)
    fig = new_figure(7, 4)
    ax = fig.add_subplot()
    ax.semilogy(np.arange(len(losses)), np.where(losses > 0, losses, np.nan), lw=1.3)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title or f"Loss history (final {losses[-1]:.3e})")
    return fig
