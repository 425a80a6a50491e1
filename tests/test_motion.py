"""Positions of the ready systems, and the motion figures."""

import io

import jax.numpy as jnp
import numpy as np
import pytest
from PIL import Image

import jaxlagrange as jl


@pytest.mark.parametrize("name", jl.systems.names())
def test_every_ready_system_has_positions(name):
    ready = jl.systems.make(name)
    one = ready.positions(ready.q0)
    assert one.ndim == 2 and one.shape[1] in (2, 3)
    assert np.all(np.isfinite(one))
    # A batch with one time per state: the same points, stacked.
    batch = jnp.stack([ready.q0, ready.q0])
    both = ready.positions(batch, jnp.array([0.0, 0.0]))
    assert both.shape == (2, *one.shape)
    assert np.allclose(both[1], one, rtol=1e-14, atol=1e-14)


def test_positions_closed_forms():
    dp = jl.systems.double_pendulum({"l1": 2.0, "l2": 0.5})
    th1, th2 = 0.3, -1.2
    expected = [
        [0, 0],
        [2 * np.sin(th1), -2 * np.cos(th1)],
        [2 * np.sin(th1) + 0.5 * np.sin(th2), -2 * np.cos(th1) - 0.5 * np.cos(th2)],
    ]
    assert np.allclose(dp.positions(jnp.array([th1, th2])), expected, atol=1e-15)
    # Kapitza's pivot moves: (0, a cos ωt).
    k = jl.systems.kapitza()
    t = 0.01
    pivot = k.positions(jnp.array([0.0]), t)[0]
    assert np.allclose(pivot, [0.0, 0.1 * np.cos(100.0 * t)], atol=1e-15)
    # The spherical pendulum's bob is at distance l from the pivot.
    sp = jl.systems.spherical_pendulum({"l": 1.5})
    bob = sp.positions(jnp.array([0.4, 2.0]))[1]
    assert np.linalg.norm(bob) == pytest.approx(1.5, rel=1e-14)
    # The chain's walls are n + 1 apart, the masses displaced by q.
    chain = jl.systems.spring_chain(n=3)
    x = chain.positions(jnp.array([0.1, 0.0, -0.2]))[:, 0]
    assert np.allclose(x, [0.0, 1.1, 2.0, 2.8, 4.0], atol=1e-15)


def test_positions_errors():
    ready = jl.systems.pendulum()
    with pytest.raises(ValueError, match=r"`q` must end with the 1 coordinates"):
        ready.positions(jnp.zeros(3))
    bare = jl.systems.ReadySystem(ready.system, ready.q0, ready.qd0, "mine", ("θ",))
    with pytest.raises(ValueError, match=r"'mine' has no positions"):
        bare.positions(ready.q0)


def test_motion_figures():
    ready = jl.systems.double_pendulum()
    ts = jnp.linspace(0.0, 2.0, 101)
    traj = jl.simulate(*ready, t1=2.0, saveat=ts)
    positions = ready.positions(traj.q, traj.ts)
    fig = jl.plotting.motion(positions)
    assert len(fig.axes) == 1 and len(fig.axes[0].lines) == 3 + 2
    gif = jl.plotting.animation(traj.ts, positions, frames=12, fps=6)
    image = Image.open(io.BytesIO(gif))
    assert image.format == "GIF" and image.n_frames == 12
    assert abs(image.info["duration"] - 1000 / 6) <= 10  # GIF: centiseconds
    # 3-D points draw too.
    sp = jl.systems.spherical_pendulum()
    traj = jl.simulate(*sp, t1=1.0, saveat=jnp.linspace(0.0, 1.0, 11))
    gif = jl.plotting.animation(traj.ts, sp.positions(traj.q), frames=5)
    assert Image.open(io.BytesIO(gif)).n_frames == 5


def test_motion_errors():
    with pytest.raises(ValueError, match=r"`positions` must have shape \(T, k, 2\)"):
        jl.plotting.motion(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"`ts` must have shape \(T,\)"):
        jl.plotting.animation(np.zeros(3), np.zeros((4, 2, 2)))
    with pytest.raises(ValueError, match=r"`frames` must be an int >= 2"):
        jl.plotting.animation(np.arange(4.0), np.zeros((4, 2, 2)), frames=1)
    with pytest.raises(ValueError, match=r"at least two finite saves"):
        jl.plotting.animation(np.array([0.0, np.inf]), np.zeros((2, 2, 2)))
