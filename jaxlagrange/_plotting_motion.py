"""The motion figures: paths in physical space and the animated GIF.

Part of `jaxlagrange.plotting` (which re-exports `motion` and `animation`). It
imports only NumPy at the top, and nothing of the package, so that a process
can load it by its path without importing JAX (`_cli/_gif_worker.py`).
"""

from collections.abc import Sequence
from typing import Any

import numpy as np


def new_figure(width: float, height: float):
    from matplotlib.figure import Figure

    # Margins fixed in inches: a layout engine costs as much as the drawing.
    fig = Figure(figsize=(width, height))
    top, right = 1 - 0.5 / height, 1 - 0.3 / width
    fig.subplots_adjust(0.9 / width, 0.65 / height, right, top, wspace=0.45)
    return fig


def with_unit(label: str, unit: str | None) -> str:
    """`θ₁ [rad]`, or the bare label without a unit."""
    return f"{label} [{unit}]" if unit else label


def _motion_axes(fig, positions: np.ndarray, unit: str | None = None):
    """Axes that hold every point of `positions` (T, k, d) at equal scale."""
    d = positions.shape[-1]
    flat = positions.reshape(-1, d)
    low, high = flat.min(axis=0), flat.max(axis=0)
    centre, half = (low + high) / 2, max(float((high - low).max()) / 2, 1e-12) * 1.08
    if d == 3:
        ax = fig.add_subplot(projection="3d")
        ax.set_box_aspect((1, 1, 1))
    else:
        ax = fig.add_subplot()
        ax.set_aspect("equal")
    for name, c in zip("xyz", centre, strict=False):
        getattr(ax, f"set_{name}lim")(c - half, c + half)
        getattr(ax, f"set_{name}label")(with_unit(name, unit))
    return ax


def _skeleton(points: np.ndarray, links) -> np.ndarray:
    """Lines of one configuration (k, d): points in order, or `links` as segments."""
    if links is None:
        return points
    gap = np.full((1, points.shape[-1]), np.nan)
    return np.concatenate(
        [np.stack([points[i], points[j], gap[0]]) for i, j in links] or [gap]
    )


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
    links: Sequence[tuple[int, int]] | None = None,
):
    """The paths of the points of a system in physical space.

    Each moving point's path is a line; the first and last configurations are
    drawn as the points joined in order (a pendulum's rods, a chain's springs),
    or as the segments `links` names (a loaded model's joints and bodies). A
    legend names them.

    **Arguments:**

    - `positions`: shape (T, k, 2) or (T, k, 3), e.g.
        `ready.positions(traj.q, traj.ts)`.
    - `title`: the figure title.
    - `names`: one name per point for the legend (None: point 1, 2, ...).
    - `unit`: the unit of length, on the axes (None: unknown).
    - `links`: pairs `(i, j)` of point indices, each drawn as a segment (None:
        the points joined in order); `ReadySystem.links`.

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
        raise ValueError(
            f"`names` must have one entry per point ({k}), got {len(names)}."
        )
    names = [f"point {j + 1}" for j in range(k)] if names is None else list(names)
    fig = new_figure(5.5, 5.0)
    ax = _motion_axes(fig, positions, unit)
    for j in range(k):
        still = np.ptp(positions[:, j], axis=0).max() == 0  # a fixed pivot
        label = "_nolegend_" if still else f"path of {names[j]}"
        ax.plot(*positions[:, j].T, lw=0.7, alpha=0.8, label=label)
    for frame, style, label in ((0, ":o", "first"), (-1, "-o", "last")):
        lines = _skeleton(positions[frame], links)
        ax.plot(
            *lines.T, style, color="k", ms=4, lw=1.2, label=f"{label} configuration"
        )
    ax.legend(loc="best", framealpha=0.85, fontsize="small")
    ax.set_title(title or "motion: paths, first and last configuration")
    return fig


def animation(
    ts: Any,
    positions: Any,
    *,
    frames: int | None = None,
    fps: int = 20,
    max_seconds: float = 10.0,
    trail: float = 0.15,
    title: str | None = None,
    unit: str | None = None,
    time_unit: str | None = None,
    size: float = 4.0,
    dpi: int = 100,
    links: Sequence[tuple[int, int]] | None = None,
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
    - `title`: the figure title (the speed-up, if any, is appended).
    - `unit`, `time_unit`: the units of length (on the axes) and of time (on the
        clock in the corner), e.g. `"m"` and `"s"` (None: unknown).
    - `size`, `dpi`: the figure's side in inches and its resolution.
    - `links`: pairs of point indices drawn as segments, as in `motion`.

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

    ts, positions = np.asarray(ts, dtype=float), np.asarray(positions, dtype=float)
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
    ax = _motion_axes(fig, positions, unit)
    three = positions.shape[-1] == 3
    pace = "" if abs(speed - 1) < 0.005 else f" ({speed:.3g}× speed)"
    ax.set_title(f"{title or 'motion'}{pace}", fontsize="large")
    lines = _skeleton(positions[0], links)
    (body,) = ax.plot(*lines.T, "-o", color="k", ms=5, lw=1.5, animated=True)
    paths = [
        ax.plot(*positions[:1, j].T, lw=0.8, animated=True)[0]
        for j in range(positions.shape[1])
    ]
    # Fixed margins (3-D: room for z's label); tight_layout costs as much as 60 frames.
    fig.subplots_adjust(0.0 if three else 0.15, 0.12, 0.88 if three else 0.96, 0.92)
    canvas.draw()
    background = canvas.copy_from_bbox(fig.bbox)
    width, height = canvas.get_width_height()
    # The clock is drawn by Pillow: a matplotlib text costs more than the lines.
    font = ImageFont.load_default(size=round(0.18 * dpi))
    corner = (ax.bbox.x0 + 6, height - ax.bbox.y1 + 4)
    clock = f"t = {{:.2f}} {time_unit}" if time_unit else "t = {:.2f}"
    images = []
    for now in index:
        recent = positions[max(0, now - window) : now + 1]
        lines = _skeleton(positions[now], links)
        body.set_data(*lines[:, :2].T)
        if three:
            body.set_3d_properties(lines[:, 2])
        for j, path in enumerate(paths):
            path.set_data(*recent[:, j, :2].T)
            if three:
                path.set_3d_properties(recent[:, j, 2])
        canvas.restore_region(background)
        for artist in (*paths, body):
            ax.draw_artist(artist)
        rgba = canvas.buffer_rgba()  # reused by the next draw: convert (copy) now
        image = Image.frombuffer("RGBA", (width, height), rgba).convert("RGB")
        ImageDraw.Draw(image).text(corner, clock.format(ts[now]), fill=0, font=font)
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
    gif = dict(format="GIF", save_all=True, duration=round(1000 / fps), loop=0)
    quantized[0].save(buffer, append_images=quantized[1:], **gif)
    return buffer.getvalue()
