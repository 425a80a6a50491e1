"""simulate_batch split over 4 (fake) CPU devices equals the unsharded run."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path


ROOT = Path(__file__).resolve().parents[1]

# Run in a fresh process: the device count is fixed when JAX starts.
SCRIPT = textwrap.dedent(
    """
    import json
    import jax
    import jax.numpy as jnp
    import numpy as np

    jax.config.update("jax_enable_x64", True)
    import jaxlagrange as jl

    devices = jax.devices()
    assert len(devices) == 4, devices
    pendulum = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd @ qd + p["g"] * jnp.cos(q[0]), params={"g": 9.81}
    )
    saveat = jnp.linspace(0.0, 1.0, 3)

    def run(size, devices):
        q0 = jnp.linspace(0.1, 3.0, 12)[:size, None]
        g = jnp.linspace(5.0, 15.0, 12)[:size]
        return jl.simulate_batch(
            pendulum, q0, jnp.zeros(1), params={"g": g}, devices=devices,
            t1=1.0, saveat=saveat,
        )

    def same(a, b):
        return all(
            bool(np.array_equal(x, y))
            for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True)
        )

    out = {}
    one = run(12, devices[:1])
    four = run(12, devices)
    out["equal_12"] = same(one, four)
    # The work was split: each device holds 3 of the 12 members.
    out["shards"] = sorted(s.data.shape[0] for s in four.q.addressable_shards)
    out["devices"] = len(four.q.sharding.device_set)
    # 10 members on 4 devices: padded to 12, the padding stripped. Bitwise equal.
    ten = run(10, devices)
    out["shape_10"] = list(ten.q.shape)
    out["equal_10"] = same(jax.tree.map(lambda x: x[:10], one), ten)

    def loss(g, devices):
        q0 = jnp.linspace(0.1, 3.0, 12)[:10, None]
        traj = jl.simulate_batch(
            pendulum, q0, jnp.zeros(1), params={"g": g}, devices=devices, t1=1.0
        )
        return jnp.sum(traj.q[:, -1] ** 2)

    g = jnp.linspace(5.0, 15.0, 10)
    grad_one = jax.grad(loss)(g, devices[:1])
    grad_four = jax.grad(loss)(g, devices)
    out["grad_error"] = float(jnp.max(jnp.abs(grad_one - grad_four)))
    out["grad_scale"] = float(jnp.max(jnp.abs(grad_one)))
    print("RESULT " + json.dumps(out))
    """
)


def test_sharded_over_four_cpu_devices_equals_unsharded():
    env = dict(
        os.environ,
        PYTHONPATH=str(ROOT),
        JAX_PLATFORMS="cpu",
        XLA_FLAGS="--xla_force_host_platform_device_count=4",
    )
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULT ")]
    out = json.loads(line[len("RESULT ") :])
    assert out["equal_12"] and out["equal_10"], out
    assert out["shards"] == [3, 3, 3, 3] and out["devices"] == 4
    assert out["shape_10"] == [10, 3, 1]
    # The sharded reverse pass recomputes the same solves: equal to rounding.
    assert out["grad_error"] <= 1e-12 * out["grad_scale"], out
