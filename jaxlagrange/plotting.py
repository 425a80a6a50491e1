"""Figures of trajectories; matplotlib is imported only when a figure is made.

Each function returns a `matplotlib.figure.Figure` (no pyplot, no global state):
save it with `fig.savefig("x.png")`.
"""

from collections.abc import Sequence
from typing import Any

import numpy as np


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig


def _labels(n: int, coordinates: Sequence[str] | None) -> list[str]:
    if coordinates is None or len(coordinates) != n:
        return [f"q{i}" for i in range(n)]
    return list(coordinates)


def _rate(label: str) -> str:
    # Not a combining dot above: matplotlib's fonts misplace it on θ₁ and friends.
    return f"d{label}/dt"


def _units(n: int, units: Sequence[str] | None) -> list[str] | None:
    if units is None:
        return None
    if len(units) != n:
        raise ValueError(f"`units` must have one entry per coordinate ({n}), got {len(units)}.")
    return list(units)


def _with(label: str, unit: str | None) -> str:
    """`θ₁ [rad]`, or the bare label without a unit."""
    return f"{label} [{unit}]" if unit else label


def _time_label(units) -> str:
    # Systems that know their units are in SI, time included.
    return "time t [s]" if units is not None else "time t"


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
    labels = _labels(n, coordinates)
    unit_list = _units(n, units)
    shared = unit_list[0] if unit_list and len(set(unit_list)) == 1 else None
    if unit_list and shared is None:
        labels = [_with(a, u) for a, u in zip(labels, unit_list, strict=True)]
    fig = _figure(8, 4.5)
    ax = fig.add_subplot()
    if n <= _MANY:
        for i in range(n):
            ax.plot(ts, q[:, i], label=labels[i], lw=1.2)
        ax.legend(loc="best", framealpha=0.85, ncols=min(n, 3))
        ax.set_ylabel(_with("coordinate", shared))
        ax.grid(alpha=0.3)
    else:
        values, label = q, "value"
        scales = np.max(np.abs(q), axis=0)
        if np.max(scales) > 10 * np.min(scales[scales > 0], initial=np.inf):
            # Very different sizes (a mirror and its field modes, say): show each
            # row's variation about its mean, scaled to its own largest value.
            values = q - np.mean(q, axis=0)
            spread = np.max(np.abs(values), axis=0)
            values = values / np.where(spread > 0, spread, 1.0)
            label = "per row: (q − mean) / max |q − mean|"
        limit = float(np.max(np.abs(values))) or 1.0
        image = ax.imshow(
            values.T,
            aspect="auto",
            origin="lower",
            extent=(ts[0], ts[-1], -0.5, n - 0.5),
            cmap="RdBu_r",
            vmin=-limit,
            vmax=limit,
            interpolation="nearest",
        )
        step = max(1, n // 12)
        ax.set_yticks(range(0, n, step), labels[::step])
        ax.set_ylabel("coordinate")
        fig.colorbar(image, ax=ax, label=_with(label, shared) if label == "value" else label)
    ax.set_xlabel(_time_label(units))
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
    labels = _labels(n, coordinates)
    unit_list = _units(n, units) or [None] * n
    k = min(n, max_panels)
    colour = np.arange(len(q)) if ts is None else np.asarray(ts)
    fig = _figure(3.6 * k + 0.8, 3.8)
    axes = fig.subplots(1, k, squeeze=False)[0]
    for i, ax in enumerate(axes):
        ax.plot(q[:, i], qd[:, i], color="0.8", lw=0.6, zorder=1)
        points = ax.scatter(
            q[:, i], qd[:, i], c=colour, s=2, cmap="viridis", zorder=2, linewidths=0
        )
        ax.plot(q[0, i], qd[0, i], "o", color="crimson", ms=5, zorder=3, label="start")
        unit = unit_list[i]
        ax.set_xlabel(_with(labels[i], unit))
        ax.set_ylabel(_with(_rate(labels[i]), unit and f"{unit}/s"))
        ax.grid(alpha=0.3)
    axes[0].legend(loc="best", framealpha=0.85)
    fig.colorbar(
        points, ax=list(axes), label=_time_label(units) if ts is not None else "sample"
    )
    shown = "" if k == n else f" (first {k} of {n} coordinates)"
    fig.suptitle((title or "Phase portrait") + shown)
    return fig


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
    labels = _labels(q.shape[1], coordinates)
    unit_list = _units(q.shape[1], units) or [None] * q.shape[1]
    colour = np.arange(len(q)) if ts is None else np.asarray(ts)
    fig = _figure(5.6, 5)
    ax = fig.add_subplot()
    ax.plot(q[:, 0], q[:, 1], color="0.8", lw=0.6, zorder=1)
    points = ax.scatter(q[:, 0], q[:, 1], c=colour, s=2, cmap="viridis", zorder=2)
    ax.plot(q[0, 0], q[0, 1], "o", color="crimson", ms=5, zorder=3, label="start")
    ax.set_xlabel(_with(labels[0], unit_list[0]))
    ax.set_ylabel(_with(labels[1], unit_list[1]))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", framealpha=0.85)
    fig.colorbar(
        points, ax=ax, label=_time_label(units) if ts is not None else "sample"
    )
    ax.set_title(title or f"Configuration path ({labels[0]}, {labels[1]})")
    return fig


def energy(
    ts: Any,
    energies: Any,
    *,
    conserved: bool = True,
    title: str | None = None,
):
    """The energy error |E(t) − E(0)| (relative where E(0) ≠ 0), or E(t) itself.

    **Arguments:**

    - `ts`: the times, shape (T,).
    - `energies`: the energy (Jacobi integral) at `ts`, shape (T,).
    - `conserved`: whether the energy should be conserved. If so the error is
        drawn on a log scale; if not (a driven or damped system) E(t) is drawn.
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`.
    """
    ts, energies = np.asarray(ts), np.asarray(energies)
    fig = _figure(8, 4)
    ax = fig.add_subplot()
    e0 = energies[0]
    if conserved:
        error = np.abs(energies - e0)
        relative = e0 != 0
        if relative:
            error = error / abs(e0)
        # Exact zeros (at t0, say) have no place on a log scale: leave gaps.
        ax.semilogy(ts, np.where(error > 0, error, np.nan), lw=1.0, color="C3")
        ax.set_ylabel("|E(t) − E(0)| / |E(0)|" if relative else "|E(t) − E(0)|")
        ax.set_title(
            title or f"Energy error (max {np.max(error):.2e}, E(0) = {e0:.6g})"
        )
    else:
        ax.plot(ts, energies, lw=0.5, color="C3", alpha=0.6, label="E(t)")
        window = len(ts) // 40
        if window >= 3:  # the slow trend under a fast drive
            kernel = np.ones(window) / window
            mean = np.convolve(energies, kernel, mode="valid")
            middle = np.convolve(ts, kernel, mode="valid")
            ax.plot(
                middle,
                mean,
                lw=1.8,
                color="k",
                label=f"running mean ({window} samples)",
            )
            ax.legend(loc="best", framealpha=0.85)
        ax.set_ylabel("energy E(t)")
        ax.set_title(title or "Energy (not conserved: driven or damped system)")
    ax.set_xlabel("time t")
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
):
    """A quantity over a sweep: an image over a 2-D grid, else a line or scatter.

    **Arguments:**

    - `axes`: axis name -> the swept value of each member, shape (size,) (the
        first one or two axes are drawn).
    - `values`: the quantity per member, shape (size,); NaN (failed members) is
        drawn blank.
    - `grid_shape`: the grid's shape when the members form a grid in C order.
    - `label`, `title`, `cmap`: colour-bar label, title and colour map.

    **Returns:** a `matplotlib.figure.Figure`.

    **Example:**

    ```python
    fig = jl.plotting.sweep_map({"q[0]": a.ravel(), "q[1]": b.ravel()}, lam.ravel(),
                                grid_shape=a.shape, label="λ")
    ```
    """
    names = list(axes)
    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values)]
    vmin, vmax = (
        (np.percentile(finite, 0.5), np.percentile(finite, 99.5))
        if finite.size
        else (0.0, 1.0)
    )
    fig = _figure(6.4, 5.4)
    ax = fig.add_subplot()
    x = np.asarray(axes[names[0]])
    if len(names) == 1:
        order = np.argsort(x)
        ax.plot(x[order], values[order], lw=1.0)
        ax.set_xlabel(names[0])
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    else:
        y = np.asarray(axes[names[1]])
        if grid_shape is not None and len(grid_shape) == 2:
            image = ax.imshow(
                values.reshape(grid_shape).T,
                origin="lower",
                aspect="auto",
                extent=(x.min(), x.max(), y.min(), y.max()),
                cmap=cmap,
                vmin=vmin,
                vmax=vmax,
                interpolation="nearest",
            )
        else:
            image = ax.scatter(x, y, c=values, s=4, cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_xlabel(names[0])
        ax.set_ylabel(names[1])
        fig.colorbar(image, ax=ax, label=label)
    ax.set_title(title or f"{label} over the sweep")
    return fig


def fit_comparison(
    ts: Any,
    q: Any,
    q_fit: Any,
    coordinates: Sequence[str] | None = None,
    *,
    title: str | None = None,
):
    """Observed coordinates (points) against a fitted trajectory (lines).

    **Arguments:**

    - `ts`: the observation times, shape (T,).
    - `q`: the observed coordinates, shape (T, n).
    - `q_fit`: the fitted trajectory at `ts`, shape (T, n).
    - `coordinates`: one label per coordinate.
    - `title`: the figure title.

    **Returns:** a `matplotlib.figure.Figure`: per coordinate (at most six) a panel
    of the data and the fit, and below it a panel of the residuals, observed −
    fitted.
    """
    ts, q, q_fit = np.asarray(ts), np.asarray(q), np.asarray(q_fit)
    n = min(q.shape[1], _MANY)
    labels = _labels(q.shape[1], coordinates)
    fig = _figure(8, 1.2 + 3.3 * n)
    grid = fig.add_gridspec(2 * n, 1, height_ratios=[2, 1] * n)
    axes, residual_axes = [], []
    for i in range(n):
        ax = fig.add_subplot(grid[2 * i], sharex=axes[0] if axes else None)
        ax.plot(ts, q[:, i], ".", ms=3, color="k", alpha=0.6, label="observed")
        ax.plot(ts, q_fit[:, i], lw=1.3, color="C3", label="fitted")
        ax.set_ylabel(labels[i])
        ax.grid(alpha=0.3)
        ax.tick_params(labelbottom=False)
        res = fig.add_subplot(grid[2 * i + 1], sharex=ax)
        res.plot(ts, q[:, i] - q_fit[:, i], ".", ms=2, color="C0")
        res.axhline(0.0, color="k", lw=0.6)
        res.set_ylabel("residual")
        res.grid(alpha=0.3)
        if i < n - 1:
            res.tick_params(labelbottom=False)
        axes.append(ax)
        residual_axes.append(res)
    axes = residual_axes
    axes[0].figure.axes[0].legend(loc="best", framealpha=0.85)
    axes[-1].set_xlabel("time t")
    axes[-1].set_xlim(ts[0], ts[-1])
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
    fig = _figure(7, 4)
    ax = fig.add_subplot()
    ax.semilogy(np.arange(len(losses)), np.where(losses > 0, losses, np.nan), lw=1.3)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3, which="both")
    ax.set_title(title or f"Loss history (final {losses[-1]:.3e})")
    return fig


def _motion_axes(fig, positions: np.ndarray, unit: str | None = None):
    """Axes that hold every point of `positions` (T, k, d) at equal scale."""
    d = positions.shape[-1]
    flat = positions.reshape(-1, d)
    low, high = flat.min(axis=0), flat.max(axis=0)
    centre, half = (low + high) / 2, max(float((high - low).max()) / 2, 1e-12) * 1.08
    if d == 3:
        ax = fig.add_subplot(projection="3d")
        ax.set_box_aspect((1, 1, 1))
        for set_lim, c in zip(
            (ax.set_xlim, ax.set_ylim, ax.set_zlim), centre, strict=True
        ):
            set_lim(c - half, c + half)
        ax.set_xlabel(_with("x", unit))
        ax.set_ylabel(_with("y", unit))
        ax.set_zlabel(_with("z", unit))
    else:
        ax = fig.add_subplot()
        ax.set_aspect("equal")
        ax.set_xlim(centre[0] - half, centre[0] + half)
        ax.set_ylim(centre[1] - half, centre[1] + half)
        ax.set_xlabel(_with("x", unit))
        ax.set_ylabel(_with("y", unit))
    return ax


def _check_positions(positions: Any) -> np.ndarray:
    positions = np.asarray(positions, dtype=float)
    if positions.ndim != 3 or positions.shape[-1] not in (2, 3):
        raise ValueError(
            "`positions` must have shape (T, k, 2) or (T, k, 3) (T times, k points), "
            f"got shape {positions.shape}."
        )
    return positions[np.all(np.isfinite(positions), axis=(1, 2))]


def motion(
    positions: Any,
    *,
    title: str | None = None,
    names: Sequence[str] | None = None,
    unit: str | None = None,
):
    """The paths of the points of a system in physical space.

    Each moving point's path is a line; the first and last configurations are
    drawn as the points joined in order (a pendulum's rods, a chain's springs).
    A legend names them.

    **Arguments:**

    - `positions`: shape (T, k, 2) or (T, k, 3), e.g.
        `ready.positions(traj.q, traj.ts)`.
    - `title`: the figure title.
    - `names`: one name per point for the legend (None: point 1, 2, ...).
    - `unit`: the unit of length, on the axes (None: unknown).

    **Returns:** a `matplotlib.figure.Figure`.

    **Example:**

    ```python
    fig = jl.plotting.motion(ready.positions(traj.q, traj.ts))
    fig.savefig("motion.png")
    ```
    """
    positions = _check_positions(positions)
    if positions.shape[0] == 0:
        raise ValueError("`positions` holds no finite configuration to draw.")
    k = positions.shape[1]
    if names is not None and len(names) != k:
        raise ValueError(f"`names` must have one entry per point ({k}), got {len(names)}.")
    names = [f"point {j + 1}" for j in range(k)] if names is None else list(names)
    fig = _figure(5.5, 5.0)
    ax = _motion_axes(fig, positions, unit)
    for j in range(k):
        still = np.ptp(positions[:, j], axis=0).max() == 0  # a fixed pivot
        label = "_nolegend_" if still else f"path of {names[j]}"
        ax.plot(*positions[:, j].T, lw=0.7, alpha=0.8, label=label)
    for frame, style, label in ((0, ":", "first configuration"), (-1, "-", "last configuration")):
        ax.plot(
            *positions[frame].T, style, color="k", marker="o", ms=4, lw=1.2, label=label
        )
    ax.legend(loc="best", framealpha=0.85, fontsize="small")
    ax.set_title(title or "motion: paths, first and last configuration")
    return fig


def animation(
    ts: Any,
    positions: Any,
    *,
    frames: int | None = None,
    fps: int = 25,
    max_seconds: float = 10.0,
    trail: float = 0.15,
    title: str | None = None,
    size: float = 4.5,
    dpi: int = 72,
) -> bytes:
    """An animated GIF of the motion in physical space.

    By default the GIF plays at the motion's own pace, `fps` frames per second of
    motion, up to `max_seconds` of playback; a longer motion is sped up to fit,
    and the title says by how much. Each frame shows the points joined in order
    and their recent paths, at the save nearest its time.

    **Arguments:**

    - `ts`: the times, shape (T,).
    - `positions`: shape (T, k, 2) or (T, k, 3).
    - `frames`: the number of frames (None: as many as the pace needs; the GIF
        lasts frames / fps seconds, looping).
    - `fps`: frames per second of playback.
    - `max_seconds`: the longest playback when `frames` is None.
    - `trail`: the length of the drawn recent paths, as a fraction of the run.
    - `title`: the figure title (the time, and the speed-up if any, are appended).
    - `size`, `dpi`: the figure's side in inches and its resolution.

    **Returns:** the GIF file's bytes (encoded with Pillow, one shared palette).

    **Raises:** `ValueError` for shapes that do not match or fewer than two finite
    saves.

    **Example:**

    ```python
    gif = jl.plotting.animation(traj.ts, ready.positions(traj.q, traj.ts))
    open("motion.gif", "wb").write(gif)
    ```
    """
    import io

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from PIL import Image, ImageDraw, ImageFont

    ts = np.asarray(ts, dtype=float)
    positions = np.asarray(positions, dtype=float)
    if ts.ndim != 1 or positions.shape[:1] != ts.shape:
        raise ValueError(
            f"`ts` must have shape (T,) for positions of shape {positions.shape}, "
            f"got shape {ts.shape}."
        )
    if not (
        (frames is None or (isinstance(frames, int) and frames >= 2))
        and isinstance(fps, int)
        and fps > 0
    ):
        raise ValueError(
            f"`frames` must be an int >= 2 (or None) and `fps` a positive int, got "
            f"{frames!r} and {fps!r}."
        )
    if not (np.isfinite(max_seconds) and max_seconds > 0):
        raise ValueError(f"`max_seconds` must be positive, got {max_seconds!r}.")
    _check_positions(positions)
    keep = np.isfinite(ts) & np.all(np.isfinite(positions), axis=(1, 2))
    ts, positions = ts[keep], positions[keep]
    if ts.shape[0] < 2:
        raise ValueError("`animation` needs at least two finite saves.")
    span = ts[-1] - ts[0]
    if frames is None:
        frames = max(2, int(round(min(span, max_seconds) * fps)) + 1)
    # Playback seconds per second of motion: 1 at the motion's own pace.
    speed = span / max((frames - 1) / fps, 1e-300)
    # One frame per equal time step: the save nearest each frame time.
    wanted = np.linspace(ts[0], ts[-1], frames)
    index = np.clip(np.searchsorted(ts, wanted), 0, ts.shape[0] - 1)
    window = max(1, int(trail * ts.shape[0]))

    # One figure, drawn once: each frame restores the background and draws only
    # the moving artists over it (blitting), ~100x cheaper than a full draw.
    fig = Figure(figsize=(size, size), dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax = _motion_axes(fig, positions)
    three = positions.shape[-1] == 3
    label = title or "motion"
    pace = "" if abs(speed - 1) < 0.005 else f" ({speed:.3g}× speed)"
    ax.set_title(f"{label}{pace}")
    (body,) = ax.plot(*positions[0].T, "-o", color="k", ms=5, lw=1.5, animated=True)
    paths = [
        ax.plot(*positions[:1, j].T, lw=0.8, animated=True)[0]
        for j in range(positions.shape[1])
    ]
    fig.tight_layout()
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    width, height = canvas.get_width_height()
    # The clock is drawn by Pillow: a matplotlib text costs more than the lines.
    font = ImageFont.load_default()
    corner = (ax.bbox.x0 + 6, height - ax.bbox.y1 + 4)
    images = []
    for now in index:
        recent = positions[max(0, now - window) : now + 1]
        body.set_data(*positions[now, :, :2].T)
        if three:
            body.set_3d_properties(positions[now, :, 2])
        for j, path in enumerate(paths):
            path.set_data(*recent[:, j, :2].T)
            if three:
                path.set_3d_properties(recent[:, j, 2])
        canvas.restore_region(background)
        for artist in (*paths, body):
            ax.draw_artist(artist)
        rgba = canvas.buffer_rgba()  # reused by the next draw: convert (copy) now
        image = Image.frombuffer("RGBA", (width, height), rgba).convert("RGB")
        ImageDraw.Draw(image).text(corner, f"t = {ts[now]:.2f}", fill=0, font=font)
        images.append(image)
    # One palette for all frames, from a few of them side by side.
    sample = [images[0], images[len(images) // 2], images[-1]]
    strip = Image.new("RGB", (sum(im.width for im in sample), images[0].height))
    for k, im in enumerate(sample):
        strip.paste(im, (k * im.width, 0))
    palette = strip.quantize(colors=64)
    quantized = [
        im.quantize(palette=palette, dither=Image.Dither.NONE) for im in images
    ]
    buffer = io.BytesIO()
    quantized[0].save(
        buffer,
        format="GIF",
        save_all=True,
        append_images=quantized[1:],
        duration=round(1000 / fps),
        loop=0,
    )
    return buffer.getvalue()
