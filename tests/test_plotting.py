"""Figures: the right kind of plot for the data, labelled from the coordinates."""

import numpy as np
import pytest

import jaxlagrange as jl


pytest.importorskip("matplotlib")

TS = np.linspace(0.0, 10.0, 201)


def test_coordinates_lines_or_image():
    q = np.stack([np.sin(TS), np.cos(TS)], axis=1)
    fig = jl.plotting.coordinates(TS, q, ("θ₁", "θ₂"))
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["θ₁", "θ₂"]
    assert np.allclose(ax.lines[1].get_ydata(), np.cos(TS))
    # Many coordinates: one space-time image with a colour bar, not 12 lines.
    many = np.sin(TS[:, None] + np.arange(12))
    fig = jl.plotting.coordinates(TS, many, [f"x{i}" for i in range(12)])
    assert len(fig.axes[0].images) == 1 and len(fig.axes[0].lines) == 0
    assert len(fig.axes) == 2
    # Of very different sizes (a mirror near 1, modes near 1e-3): each row scaled.
    mixed = np.concatenate([1 + 0.1 * many[:, :1], 1e-3 * many[:, 1:]], axis=1)
    fig = jl.plotting.coordinates(TS, mixed)
    image = fig.axes[0].images[0].get_array()
    assert np.allclose(np.max(np.abs(image), axis=1), 1.0)
    assert "per row" in fig.axes[1].get_ylabel()


def test_phase_portrait_panels():
    q = np.sin(TS[:, None] + np.arange(6))
    fig = jl.plotting.phase_portrait(q, np.cos(TS[:, None] + np.arange(6)), ts=TS)
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
    assert len(panels) == 4
    assert panels[0].get_xlabel() == "q0" and panels[0].get_ylabel() == "dq0/dt"
    assert "first 4 of 6 coordinates" in fig.texts[0].get_text()


def test_energy_error_or_energy():
    energy = 2.0 + 1e-9 * np.sin(TS)
    fig = jl.plotting.energy(TS, energy)
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and "/ |E(0)|" in ax.get_ylabel()
    assert np.nanmax(ax.lines[0].get_ydata()) == pytest.approx(0.5e-9, rel=1e-3)
    # E(0) = 0: an absolute error.
    fig = jl.plotting.energy(TS, 1e-9 * np.sin(TS))
    assert fig.axes[0].get_ylabel() == "|E(t) − E(0)|"
    # Not conserved: E(t) itself, with its running mean.
    fig = jl.plotting.energy(TS, np.sin(50 * TS) + TS, conserved=False)
    ax = fig.axes[0]
    assert ax.get_yscale() == "linear" and len(ax.lines) == 2
    mean = ax.lines[1].get_ydata()
    assert np.allclose(mean, ax.lines[1].get_xdata(), atol=0.2)  # the trend, t


def test_a_loaded_models_motion_draws_its_joints_and_bodies():
    # Issue 56: a loaded arm was drawn as lines joining its centres of mass,
    # which look like links. Now each body runs from its joint's anchor to its
    # centre, and on to its child's anchor, as the model has them.
    arm = """<mujoco model="arm"><worldbody>
      <body name="upper" pos="0 0 1"><joint name="shoulder" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.5 0 0" size="0.03"/>
        <body name="lower" pos="0.5 0 0"><joint name="elbow" axis="0 1 0"/>
          <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.03"/>
        </body></body></worldbody></mujoco>"""
    ready = jl.mujoco.load(arm)
    positions = np.asarray(ready.positions(np.array([[0.0, 0.0], [0.4, -0.8]])))
    shoulder, upper, elbow, lower = positions[-1][[2, 0, 3, 1]]
    fig = jl.plotting.motion(
        positions, names=ready.point_names, unit="m", links=ready.links
    )
    ax = fig.axes[0]
    assert ax.get_xlabel() == "x [m]" and ax.get_zlabel() == "z [m]"
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[:3] == ["path of upper", "path of lower", "path of joint elbow"]
    lines = np.asarray(ax.lines[-1].get_data_3d()).T  # the last configuration
    segments = [s[~np.isnan(s).any(1)] for s in np.split(lines, 3)]
    expected = [[shoulder, upper], [elbow, lower], [upper, elbow]]
    np.testing.assert_allclose(segments, expected, atol=1e-12)
    np.testing.assert_allclose(shoulder, [0, 0, 1], atol=1e-12)  # fixed pivot
    np.testing.assert_allclose(np.linalg.norm(elbow - shoulder), 0.5, rtol=1e-12)
    # The GIF draws the same segments.
    gif = jl.plotting.animation([0.0, 1.0], positions, links=ready.links, frames=2)
    assert gif[:6] == b"GIF89a"
