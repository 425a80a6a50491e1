"""The fused kernel against the vmap backend on this machine's default device.

    python benchmarks/kernel_check.py       # exit status 1 if any check fails

Issue 26's correctness checks, as the tests make them in Pallas's interpret mode
on the CPU (`tests/test_kernel.py`), for a machine where the kernel is compiled
for real (a GPU: Triton), without pytest: float64, rtol = atol = 1e-10, each
system's `simulate_batch(backend="kernel")` against `backend="vmap"` to 1e-8 in
q, q̇ and the multipliers, with the same save times and final times:

- the double pendulum (three members in blocks of two: a padded lane);
- a damped, driven pendulum with params per member;
- the Kapitza pendulum (time-dependent);
- the Cartesian pendulum (holonomic: |q|² − l² and q·q̇ within 1e-8);
- the rolling disk (nonholonomic);
- the result codes per member: a NaN start, a singular M and `max_steps`
  beside a member that succeeds (and matches its lone solve).

Each row prints the largest differences and the step counts of both backends.
On the CPU the kernel runs in interpret mode: a check of this script, slow.
"""

import sys
import time

import jax


jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import jaxlagrange as jl  # noqa: E402


TIGHT = dict(rtol=1e-10, atol=1e-10)
TOL = 1e-8


def both(system, q0, qd0, params=None, block_size=4, **options):
    run = dict(params=params, throw=False, **options)
    kernel = jl.simulate_batch(
        system, q0, qd0, backend="kernel", block_size=block_size, **run
    )
    vmap = jl.simulate_batch(system, q0, qd0, backend="vmap", **run)
    return kernel, vmap


def compare(kernel, vmap) -> tuple[bool, str]:
    """Whether the two agree as `tests/test_kernel.py` asks, and the figures."""
    diff = max(
        float(jnp.max(jnp.abs(getattr(kernel, k) - getattr(vmap, k))))
        for k in ("q", "qd", "multipliers")
        if getattr(kernel, k).size
    )
    steps, expected = kernel.stats["num_steps"], vmap.stats["num_steps"]
    ok = (
        not bool(jnp.any(jl.failed(kernel)))
        and diff <= TOL
        and bool(jnp.all(kernel.ts == vmap.ts))
        and bool(jnp.all(kernel.t_final == vmap.t_final))
        and bool(jnp.all(jnp.abs(steps - expected) <= jnp.maximum(3, 0.3 * expected)))
    )
    figures = (
        f"max |Δ| {diff:.1e}, steps {np.asarray(steps).tolist()} "
        f"(vmap {np.asarray(expected).tolist()})"
    )
    return ok, figures


def pendulum_lagrangian(q, qd, t, p):
    return 0.5 * qd[0] ** 2 + p["g"] * jnp.cos(q[0])


def double_pendulum():
    system, q0, qd0 = jl.systems.double_pendulum()
    q0s = q0 + jnp.linspace(0.0, 0.3, 3)[:, None]
    options = dict(t1=1.0, saveat=jnp.array([0.25, 1.0]), **TIGHT)
    return compare(*both(system, q0s, qd0, block_size=2, **options))


def damped_driven():
    system = jl.LagrangianSystem(
        pendulum_lagrangian,
        params={"g": 9.81, "c": 0.1, "A": 0.5, "w": 2.0},
        force=lambda q, qd, t, p: jnp.array([p["A"] * jnp.cos(p["w"] * t)]),
        dissipation=lambda q, qd, t, p: 0.5 * p["c"] * qd[0] ** 2,
    )
    params = {
        "c": jnp.array([0.0, 0.2, 0.5, 1.0]),
        "w": jnp.array([1.0, 2.0, 3.0, 5.0]),
    }
    q0s = jnp.linspace(0.1, 1.5, 4)[:, None]
    kernel, vmap = both(system, q0s, jnp.zeros(1), params, t1=2.0, **TIGHT)
    ok, figures = compare(kernel, vmap)
    distinct = len(np.unique(np.round(np.asarray(kernel.q[:, -1, 0]), 6))) == 4
    return ok and distinct, figures


def kapitza():
    system, q0, qd0 = jl.systems.kapitza()
    q0s = q0 + jnp.array([[0.0], [0.1]])
    options = dict(t1=0.5, saveat=jnp.array([0.1, 0.5]), **TIGHT)
    return compare(*both(system, q0s, qd0, **options))


def cartesian_pendulum():
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    qd0s = qd0 * jnp.array([[1.0], [0.5]])
    options = dict(t1=2.0, saveat=jnp.linspace(0.5, 2.0, 4), **TIGHT)
    kernel, vmap = both(system, q0, qd0s, **options)
    ok, figures = compare(kernel, vmap)
    length = system.params["l"] if isinstance(system.params, dict) else 1.0
    drift = max(
        float(jnp.max(jnp.abs(jnp.sum(kernel.q**2, axis=-1) - length**2))),
        float(jnp.max(jnp.abs(jnp.sum(kernel.q * kernel.qd, axis=-1)))),
    )
    return ok and drift <= 1e-8, f"{figures}, drift {drift:.1e}"


def rolling_disk():
    system, q0, qd0 = jl.systems.rolling_disk()
    q0s = q0 + jnp.array([[0.0, 0.0], [0.1, 0.1 / system.params["R"]]])
    return compare(*both(system, q0s, qd0, t1=1.0, **TIGHT))


def result_codes():
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * p["m"] * qd[0] ** 2 - 0.5 * p["k"] * q[0] ** 2,
        params={"m": 1.0, "k": 1.0},
    )
    # 0: fine; 1: NaN start; 2: singular M (m = 0); 3: too stiff for max_steps.
    q0s = jnp.array([[1.0], [jnp.nan], [1.0], [1.0]])
    params = {
        "m": jnp.array([1.0, 1.0, 0.0, 1.0]),
        "k": jnp.array([1.0, 1.0, 1.0, 1e6]),
    }
    kernel, vmap = both(system, q0s, jnp.zeros(1), params, t1=1.0, max_steps=60)
    expected = [
        "successful",
        "non_finite_state",
        "singular_mass_matrix",
        "max_steps_reached",
    ]
    names = jl.result_name(kernel).tolist()
    # The member that succeeds is left alone by the others (m = k = 1, the system's).
    alone = jl.simulate(system, jnp.ones(1), jnp.zeros(1), t1=1.0)
    ok = (
        names == expected
        and jl.result_name(vmap).tolist() == expected
        and float(jnp.max(jnp.abs(kernel.q[0] - alone.q))) <= 1e-7
        and int(kernel.stats["num_steps"][3]) == 60
    )
    return ok, f"kernel {names}"


CHECKS = {
    "double pendulum": double_pendulum,
    "damped, driven pendulum, params per member": damped_driven,
    "Kapitza pendulum": kapitza,
    "Cartesian pendulum": cartesian_pendulum,
    "rolling disk": rolling_disk,
    "result codes per member": result_codes,
}


def main() -> int:
    device = jax.devices()[0]
    print(f"kernel against vmap on {device.platform} ({device.device_kind}), float64")
    failed = 0
    for name, check in CHECKS.items():
        start = time.perf_counter()
        try:
            ok, figures = check()
        except Exception as e:  # noqa: BLE001 - report it and go on
            ok, figures = False, f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        failed += not ok
        print(
            f"  {'PASS' if ok else 'FAIL'}  {name:44s} {time.perf_counter() - start:5.1f} s"
            f"  {figures}",
            flush=True,
        )
    print(f"{len(CHECKS) - failed} of {len(CHECKS)} checks passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
