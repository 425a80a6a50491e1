"""The fused ensemble kernel (`simulate_batch(..., backend="kernel")`), in Pallas's
interpret mode on the CPU: the lane-wise evaluator against `jax.vmap`, the kernel
against the vmap backend at tight tolerances, result codes, gradients, errors.

Interpret mode is slow to compile: small batches, short spans, small blocks.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np
import pytest
import zarr
from helpers import (
    oscillator,
    rayleigh,
    unit_oscillator_lagrangian,
    unit_pendulum_lagrangian,
)

import jaxlagrange as jl
from jaxlagrange._ensemble import _backend
from jaxlagrange._ensemble._batch import BatchMember
from jaxlagrange._ensemble._member import Rows
from jaxlagrange._ensemble._sweep import stream
from jaxlagrange._kernel._ensemble import simulate_kernel
from jaxlagrange._lanes import (
    LaneFunction,
    UnsupportedPrimitiveError,
    from_lanes,
    to_lanes,
)
from jaxlagrange._options import GivenOptions
from jaxlagrange._projection import VectorFieldArgs, project_state
from jaxlagrange._segment import _vector_field


TIGHT = dict(rtol=1e-10, atol=1e-10)


def both(system, q0, qd0, params=None, block_size=4, **options):
    kernel = jl.simulate_batch(
        system,
        q0,
        qd0,
        params=params,
        backend="kernel",
        block_size=block_size,
        throw=False,
        **options,
    )
    vmap = jl.simulate_batch(
        system, q0, qd0, params=params, backend="vmap", throw=False, **options
    )
    return kernel, vmap


def assert_close(kernel, vmap, tol=1e-8):
    assert not jnp.any(jl.failed(kernel))
    np.testing.assert_array_equal(kernel.ts, vmap.ts)
    np.testing.assert_allclose(kernel.q, vmap.q, rtol=0, atol=tol)
    np.testing.assert_allclose(kernel.qd, vmap.qd, rtol=0, atol=tol)
    np.testing.assert_allclose(kernel.multipliers, vmap.multipliers, rtol=0, atol=tol)
    np.testing.assert_array_equal(kernel.t_final, vmap.t_final)
    # Two adaptive integrators with their own step sequences: similar work.
    steps, expected = kernel.stats["num_steps"], vmap.stats["num_steps"]
    assert np.all(jnp.abs(steps - expected) <= jnp.maximum(3, 0.3 * expected))


# The lane-wise evaluator.


def _member_functions(system, n):
    leaves, tree = jax.tree.flatten(system.params)

    def with_params(leaves):
        if tree.num_leaves == 0:
            return system
        return eqx.tree_at(lambda s: s.params, system, jax.tree.unflatten(tree, leaves))

    def field(t, y, leaves):
        return _vector_field(t, y, VectorFieldArgs(with_params(leaves)))

    def project(t, y, leaves):
        return project_state(with_params(leaves), y, t)

    return leaves, field, project


def _dict_params_system():
    def lagrangian(q, qd, t, params):
        kinetic = 0.5 * params["m"] * jnp.sum(qd**2) + params["c"] * qd[0] * qd[1]
        potential = 0.5 * jnp.sum(params["k"] * q**2) + params["a"] * q[0] ** 3
        return kinetic - potential

    def force(q, qd, t, params):
        return -params["b"] * qd + jnp.array([jnp.sin(2.0 * t), 0.0])

    params = {"m": 1.5, "c": 0.2, "k": jnp.array([1.0, 3.0]), "a": 0.1, "b": 0.05}
    return jl.LagrangianSystem(lagrangian, params=params, force=force)


def _by_lanes(lanes, size):
    @jax.jit
    def by_lanes(ts, ys, ps):
        out = lanes(to_lanes(ts), to_lanes(ys), [to_lanes(p) for p in ps])
        return from_lanes(out, size, ys.dtype)

    return by_lanes


@pytest.mark.parametrize(
    "name", ["double_pendulum", "cartesian_pendulum", "rolling_disk", "dict_params"]
)
def test_lanes_equal_vmap(name):
    if name == "dict_params":
        system, q0, qd0 = _dict_params_system(), jnp.array([0.3, -0.2]), jnp.ones(2)
    else:
        system, q0, qd0 = getattr(jl.systems, name)()
    n, size = q0.shape[0], 5
    leaves, field, project = _member_functions(system, n)
    leaves = [jnp.asarray(leaf, float) for leaf in leaves]
    y = jnp.concatenate([q0, qd0])
    key = jax.random.PRNGKey(0)
    ys = y + 0.1 * jax.random.normal(key, (size, 2 * n))
    ts = jnp.linspace(0.0, 1.0, size)
    ps = [
        leaf * (1 + 0.1 * jnp.arange(size).reshape((size,) + (1,) * leaf.ndim))
        for leaf in leaves
    ]
    functions = [field]
    if system.has_constraints:
        functions.append(project)
    for fn in functions:
        lanes = LaneFunction(fn, jnp.zeros(()), y, leaves)
        by_lanes = _by_lanes(lanes, size)
        expected = jax.jit(jax.vmap(fn))(ts, ys, ps)
        np.testing.assert_allclose(by_lanes(ts, ys, ps), expected, rtol=0, atol=1e-14)


def test_lanes_unsupported_primitive():
    def fn(x):
        return jnp.linalg.cholesky(jnp.outer(x, x) + jnp.eye(2))[1]

    lanes = LaneFunction(fn, jnp.ones(2))
    with pytest.raises(
        UnsupportedPrimitiveError,
        match=r"'cholesky' lane by lane .* Use backend='vmap', which supports it\.$",
    ):
        lanes(to_lanes(jnp.ones((4, 2))))


def test_lanes_cond_and_loops():
    def fn(x):
        y = jax.lax.cond(x[0] > 0, lambda x: x * 2.0, lambda x: -x, x)
        y = jax.lax.fori_loop(0, 3, lambda i, y: y + i * y[::-1], y)
        return jax.lax.scan(lambda c, v: (c + v, c * v), 0.0, y)

    xs = jnp.array([[1.0, 2.0], [-1.0, 0.5], [0.3, -3.0], [-2.0, -1.0]])
    lanes = LaneFunction(fn, jnp.ones(2))
    carry, ys = lanes(to_lanes(xs))
    expected_carry, expected_ys = jax.jit(jax.vmap(fn))(xs)
    np.testing.assert_allclose(from_lanes(carry, 4, float), expected_carry, atol=1e-14)
    np.testing.assert_allclose(from_lanes(ys, 4, float), expected_ys, atol=1e-14)


# The kernel against the vmap backend, rtol = atol = 1e-10.


def test_double_pendulum():
    system, q0, qd0 = jl.systems.double_pendulum()
    # Three members in blocks of two: two programs, one padded lane.
    q0s = q0 + jnp.linspace(0.0, 0.3, 3)[:, None]
    kernel, vmap = both(
        system,
        q0s,
        qd0,
        block_size=2,
        devices=jax.devices()[:1],
        t1=1.0,
        saveat=jnp.array([0.25, 1.0]),
        **TIGHT,
    )
    assert kernel.q.shape == (3, 2, 2)
    assert_close(kernel, vmap)
    # The same kernel, called directly (no jit, no custom_vjp).
    direct = simulate_kernel(
        system,
        q0s,
        jnp.broadcast_to(qd0, q0s.shape),
        jax.tree.map(lambda x: jnp.full((3,), x), system.params),
        GivenOptions(t1=1.0, saveat=jnp.array([0.25, 1.0]), **TIGHT),
        block_size=2,
    )
    np.testing.assert_allclose(direct.q, kernel.q, rtol=1e-14)


def test_damped_driven_pendulum_params_per_member():
    def force(q, qd, t, params):
        return jnp.array([params["A"] * jnp.cos(params["w"] * t)])

    system = jl.LagrangianSystem(
        unit_pendulum_lagrangian,
        params={"g": 9.81, "c": 0.1, "A": 0.5, "w": 2.0},
        force=force,
        dissipation=rayleigh,
    )
    params = {
        "c": jnp.array([0.0, 0.2, 0.5, 1.0]),
        "w": jnp.array([1.0, 2.0, 3.0, 5.0]),
    }
    q0s = jnp.linspace(0.1, 1.5, 4)[:, None]
    kernel, vmap = both(system, q0s, jnp.zeros(1), params, t1=2.0, **TIGHT)
    assert_close(kernel, vmap)
    # The members differ (the params reached them).
    assert len(np.unique(np.round(np.asarray(kernel.q[:, -1, 0]), 6))) == 4


def test_kapitza_time_dependent():
    system, q0, qd0 = jl.systems.kapitza()
    q0s = q0 + jnp.array([[0.0], [0.1]])
    kernel, vmap = both(system, q0s, qd0, t1=0.5, saveat=jnp.array([0.1, 0.5]), **TIGHT)
    assert_close(kernel, vmap)


def test_cartesian_pendulum_stays_on_its_manifold():
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    qd0s = qd0 * jnp.array([[1.0], [0.5]])
    kernel, vmap = both(
        system, q0, qd0s, t1=2.0, saveat=jnp.linspace(0.5, 2.0, 4), **TIGHT
    )
    assert_close(kernel, vmap)
    length = system.params["l"] if isinstance(system.params, dict) else 1.0
    g = jnp.sum(kernel.q**2, axis=-1) - length**2
    gd = jnp.sum(kernel.q * kernel.qd, axis=-1)
    assert float(jnp.max(jnp.abs(g))) <= 1e-8
    assert float(jnp.max(jnp.abs(gd))) <= 1e-8


def test_rolling_disk_nonholonomic():
    system, q0, qd0 = jl.systems.rolling_disk()
    q0s = q0 + jnp.array([[0.0, 0.0], [0.1, 0.1 / system.params["R"]]])
    kernel, vmap = both(system, q0s, qd0, t1=1.0, **TIGHT)
    assert_close(kernel, vmap)


def test_constant_step_size():
    system, q0, qd0 = jl.systems.double_pendulum()
    q0s = q0 + jnp.array([[0.0], [0.2]])
    kernel, vmap = both(
        system,
        q0s,
        qd0,
        t1=0.5,
        saveat=jnp.array([0.25, 0.5]),
        dt0=0.01,
        stepsize_controller=diffrax.ConstantStepSize(),
    )
    assert_close(kernel, vmap, tol=1e-12)
    np.testing.assert_array_equal(kernel.stats["num_steps"], 50)


# Result codes per member.


def test_result_codes_per_member():
    system = oscillator()
    # 0: fine; 1: NaN start; 2: singular M (m = 0); 3: too stiff for max_steps.
    q0s = jnp.array([[1.0], [jnp.nan], [1.0], [1.0]])
    params = {
        "m": jnp.array([1.0, 1.0, 0.0, 1.0]),
        "k": jnp.array([1.0, 1.0, 1.0, 1e6]),
    }
    kernel, vmap = both(system, q0s, jnp.zeros(1), params, t1=1.0, max_steps=60)
    expected = [
        jl.RESULTS.successful,
        jl.RESULTS.non_finite_state,
        jl.RESULTS.singular_mass_matrix,
        jl.RESULTS.max_steps_reached,
    ]
    for i, code in enumerate(expected):
        assert kernel.result._value[i] == code._value, i
        assert vmap.result._value[i] == code._value, i
    np.testing.assert_array_equal(jl.failed(kernel), [False, True, True, True])
    # The failed members leave the others alone.
    alone = jl.simulate(system, jnp.ones(1), jnp.zeros(1), t1=1.0)
    np.testing.assert_allclose(kernel.q[0], alone.q, atol=1e-7)
    assert kernel.t_final[1] == 0.0 and jnp.all(jnp.isinf(kernel.q[1]))
    assert kernel.stats["num_steps"][3] == 60
    with pytest.raises(eqx.EquinoxRuntimeError, match="3 of 4 members failed"):
        jl.simulate_batch(
            system,
            q0s,
            jnp.zeros(1),
            params=params,
            t1=1.0,
            max_steps=60,
            backend="kernel",
            block_size=4,
        )


def test_a_mass_matrix_that_vanishes_on_the_way_is_named_as_on_vmap(tmp_path):
    # M = 1 − q₀ reaches 0 at t = 1/3 from q₀ = 0.5, q̇₀ = 1: the step collapses
    # just short of it, where no stage sees M singular. The kernel said
    # step_size_collapsed there; such members are solved again on the vmap path,
    # whose diagnosis names the singular mass matrix, in batches and sweeps.
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * (1.0 - q[0]) * qd[0] ** 2 + 0.5 * qd[1] ** 2
    )
    q0 = jnp.array([[0.5, 0.0], [0.0, 0.0]])
    qd0 = jnp.array([[1.0, 0.0], [0.0, 0.0]])
    kernel, vmap = (
        jl.simulate_batch(system, q0, qd0, t1=2.0, throw=False, backend=b, block_size=4)
        for b in ("kernel", "vmap")
    )
    names = ["singular_mass_matrix", "successful"]
    assert list(jl.result_name(kernel)) == list(jl.result_name(vmap)) == names
    np.testing.assert_allclose(kernel.t_final, [1 / 3, 2.0], rtol=1e-6)
    store = jl.simulate_sweep(
        system,
        np.asarray(q0),
        np.asarray(qd0),
        store=tmp_path / "s.zarr",
        progress=False,
        backend="kernel",
        block_size=4,
        t1=2.0,
    )
    assert list(jl.result_name(store["outputs/result"][:])) == names


# Gradients, float32, the backends.


def test_a_state_gone_non_finite_is_not_named_a_singular_mass_matrix():
    # √(1.5 − q) is NaN past q = 1.5 while M = 2 + cos q stays regular. The
    # stages after the first NaN one evaluate M at a NaN state, which flagged
    # it singular: the kernel named the failure singular_mass_matrix.
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * (2.0 + jnp.cos(q[0])) * qd[0] ** 2 + jnp.sqrt(1.5 - q[0])
    )
    q0, qd0 = jnp.zeros((2, 1)), jnp.array([[0.1], [3.0]])
    kernel, vmap = (
        jl.simulate_batch(system, q0, qd0, t1=2.0, throw=False, backend=b, block_size=4)
        for b in ("kernel", "vmap")
    )
    names = ["successful", "non_finite_state"]
    assert list(jl.result_name(kernel)) == list(jl.result_name(vmap)) == names


def test_gradient_equals_vmap_gradient():
    system = oscillator()

    def loss(k, q0, backend):
        traj = jl.simulate_batch(
            system,
            q0,
            jnp.zeros(1),
            params={"k": k},
            t1=1.0,
            backend=backend,
            block_size=2,
            **TIGHT,
        )
        return jnp.sum(traj.q[:, -1, 0] ** 2)

    k, q0 = jnp.array([1.0, 2.0]), jnp.array([[1.0], [0.5]])
    grads = jax.grad(loss, argnums=(0, 1))(k, q0, "kernel")
    expected = jax.grad(loss, argnums=(0, 1))(k, q0, "vmap")
    for g, e in zip(grads, expected, strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
    # Against central differences of the kernel's own forward pass.
    h = jnp.array([1e-5, 0.0])
    fd = (loss(k + h, q0, "kernel") - loss(k - h, q0, "kernel")) / 2e-5
    np.testing.assert_allclose(grads[0][0], fd, rtol=1e-6)


def test_forward_mode_with_the_forward_mode_adjoint():
    # As on the vmap path, `adjoint=diffrax.ForwardMode()` makes the batch
    # differentiable in forward mode: the kernel's values, the vmap path's
    # tangents (a custom_vjp refused jax.jvp before).
    import diffrax

    system, _, _ = jl.systems.double_pendulum()
    q0 = jnp.array([[0.5, 0.3], [0.1, 0.2]])

    def final(l2, backend):
        traj = jl.simulate_batch(
            system,
            q0,
            jnp.zeros((2, 2)),
            params={"l2": l2},
            t1=0.3,
            backend=backend,
            block_size=4,
            adjoint=diffrax.ForwardMode(),
            **TIGHT,
        )
        return traj.q[:, -1, 0]

    l2, ones = jnp.array([1.0, 1.1]), jnp.ones(2)
    kernel = jax.jvp(lambda x: final(x, "kernel"), (l2,), (ones,))
    vmap = jax.jvp(lambda x: final(x, "vmap"), (l2,), (ones,))
    np.testing.assert_allclose(kernel[0], vmap[0], atol=1e-8)
    np.testing.assert_allclose(kernel[1], vmap[1], rtol=1e-6)
    eps = 1e-6
    fd = (final(l2 + eps, "vmap") - final(l2 - eps, "vmap")) / (2 * eps)
    np.testing.assert_allclose(kernel[1], fd, rtol=1e-5)


def test_float32():
    system, q0, qd0 = jl.systems.double_pendulum()
    q0s = (q0 + jnp.array([[0.0], [0.2]])).astype(jnp.float32)
    kernel, vmap = both(
        system, q0s, qd0.astype(jnp.float32), t1=0.5, rtol=1e-5, atol=1e-5
    )
    assert kernel.q.dtype == jnp.float32
    assert_close(kernel, vmap, tol=1e-3)


def test_auto_on_cpu_is_vmap():
    system, q0, qd0 = jl.systems.double_pendulum()
    q0s = q0 + jnp.array([[0.0], [0.2]])
    auto = jl.simulate_batch(system, q0s, qd0, t1=0.5)
    vmap = jl.simulate_batch(system, q0s, qd0, t1=0.5, backend="vmap")
    np.testing.assert_array_equal(auto.q, vmap.q)


def test_auto_on_a_gpu(monkeypatch):
    class Device:  # what `_kernel_is_faster` reads of a device
        platform = "gpu"

    assert _backend._kernel_is_faster([Device()])
    assert not _backend._kernel_is_faster(jax.devices("cpu"))
    monkeypatch.setattr(_backend, "_kernel_is_faster", lambda devices: True)

    def chosen(backend, ready, **options):
        system, q0, qd0 = ready
        member = BatchMember(system, GivenOptions(t1=1.0, **options))
        rows = Rows(q0[None], qd0[None])
        return _backend.backend_for(backend, None, member, rows, None)

    pendulum, bouncing = jl.systems.double_pendulum(), jl.systems.bouncing_ball()
    assert isinstance(chosen("auto", pendulum), _backend.KernelBackend)
    # Unsupported systems or options under "auto" fall back without a word.
    for ready, options in ((pendulum, {"solver": diffrax.Dopri5()}), (bouncing, {})):
        assert isinstance(chosen("auto", ready, **options), _backend.VmapBackend)
    with pytest.raises(ValueError, match="Dopri5"):
        chosen("kernel", pendulum, solver=diffrax.Dopri5())


def test_unknown_backend_and_block_size():
    system, q0, qd0 = jl.systems.double_pendulum()
    with pytest.raises(ValueError, match="`backend` must be one of"):
        jl.simulate_batch(system, q0[None], qd0, t1=0.1, backend="gpu")
    for bad in (0, 3, 2.0):
        with pytest.raises(ValueError, match="`block_size` must be a positive power"):
            jl.simulate_batch(system, q0[None], qd0, t1=0.1, block_size=bad)


@pytest.mark.parametrize(
    "case, match",
    [
        ("solver", r"`solver=Dopri5\(\)`.*backend='vmap' supports it"),
        ("controller", r"PIDController.*backend='vmap' supports it"),
        ("controller_type", r"`stepsize_controller=StepTo.*backend='vmap' supports it"),
        ("progress", r"`progress_meter=TextProgressMeter.*backend='vmap' supports it"),
        ("unilateral", r"unilateral constraints.*backend='vmap' supports it"),
        ("mass_solver", r"`mass_solver`.*backend='vmap' supports it"),
        ("variational", r"`solver=VariationalMidpoint.*backend='vmap' supports it"),
    ],
)
def test_unsupported_options(case, match):
    system, q0, qd0 = jl.systems.double_pendulum()
    options = {}
    if case == "solver":
        options["solver"] = diffrax.Dopri5()
    elif case == "controller":
        options["stepsize_controller"] = diffrax.PIDController(
            rtol=1e-6, atol=1e-6, pcoeff=0.3, icoeff=0.4
        )
    elif case == "controller_type":
        options["stepsize_controller"] = diffrax.StepTo(jnp.linspace(0, 0.1, 3))
    elif case == "progress":
        options["progress_meter"] = diffrax.TextProgressMeter()
    elif case == "unilateral":
        system, q0, qd0 = jl.systems.bouncing_ball()
    elif case == "mass_solver":
        system = system.with_mass_solver(lx.CG(rtol=1e-10, atol=1e-10))
    elif case == "variational":
        options["solver"] = jl.VariationalMidpoint()
        options["dt0"] = 0.01
    with pytest.raises(ValueError, match=match):
        jl.simulate_batch(system, q0[None], qd0, t1=0.1, backend="kernel", **options)


def test_stages_in_a_loop(monkeypatch):
    # A large right-hand side is evaluated in a loop over the six stages.
    from jaxlagrange._kernel import _ensemble

    monkeypatch.setattr(_ensemble, "_UNROLL_STAGES", 0)
    system, q0, qd0 = jl.systems.double_pendulum()
    q0s = q0 + jnp.array([[0.0], [0.2]])
    kernel, vmap = both(system, q0s, qd0, t1=0.4, **TIGHT)  # a program of its own
    assert_close(kernel, vmap)


@pytest.mark.parametrize(
    "name, loop", [("double_pendulum", False), ("cartesian_pendulum", True)]
)
def test_lowers_to_triton(name, loop, monkeypatch):
    # No GPU here: lower for CUDA, which runs Pallas's Triton lowering rules on
    # every primitive of the kernel (the stages written out, and in a loop).
    from jaxlagrange._kernel import _ensemble, _tsit5

    if loop:
        monkeypatch.setattr(_ensemble, "_UNROLL_STAGES", 0)
    system, q0, qd0 = getattr(jl.systems, name)()
    n = q0.shape[0]
    leaves, tree = jax.tree.flatten(system.params)
    leaves = [jnp.asarray(leaf, float) for leaf in leaves]
    controller = _ensemble.check_supported(system, GivenOptions())
    problem = _ensemble._problem(
        system, n, leaves, tree, float, 2, controller, GivenOptions(), 128
    )
    assert problem.unroll is not loop

    def run(y0, params, scalars):
        return _tsit5.run(problem, y0, params, scalars)

    args = (jnp.zeros((256, 2 * n)), jnp.zeros((256, len(leaves))), jnp.zeros(8))
    lowered = jax.jit(run).trace(*args).lower(lowering_platforms=("cuda",))
    assert "triton" in lowered.as_text()


def test_sweeps_reach_the_kernel(monkeypatch, tmp_path):
    # backend="kernel" (interpret mode on the CPU) against backend="vmap", for
    # `simulate_sweep` and for the command line's member.
    from jaxlagrange._ensemble import _sweep_simulate as _sweep

    system, _, _ = jl.systems.double_pendulum()
    q0 = np.array([[1.0, 0.5], [1.2, 0.4], [0.3, -0.2]])
    g = {"g": np.array([9.81, 5.0, 1.0])}
    options = dict(t1=0.3, saveat=jnp.array([0.1, 0.3]), **TIGHT)

    def swept(backend, name):
        return jl.simulate_sweep(
            system,
            q0,
            np.zeros(2),
            params=g,
            store=tmp_path / name,
            progress=False,
            backend=backend,
            block_size=4,
            **options,
        )

    inputs = {"q0": q0, "qd0": np.zeros((3, 2)), "params/g": g["g"]}

    def cli(backend, name):
        member = _sweep.SweepMember(system, GivenOptions(**options), False)
        return stream(member, inputs, tmp_path / name, progress=False, backend=backend)

    for a, b, names in (
        (swept("kernel", "k.zarr"), swept("vmap", "v.zarr"), ("q", "qd")),
        (cli("kernel", "ck.zarr"), cli("vmap", "cv.zarr"), ("q", "qd", "energy")),
    ):
        for name in (*names, "result", "t_final"):
            np.testing.assert_allclose(
                a[f"outputs/{name}"][:], b[f"outputs/{name}"][:], rtol=0, atol=1e-8
            )
    # A store holds what one integrator computed: resumed with the other, the
    # two (whose chaotic members part) would mix in it.
    with pytest.raises(
        ValueError,
        match=r"was computed with backend='kernel', and this sweep would take "
        r"backend='vmap': .* Resume it with backend='kernel' \(in a config: \[sweep\] "
        r'backend = "kernel"\)',
    ):
        swept("vmap", "k.zarr")
    # "auto" asks for the kernel (which it takes on a GPU only).
    calls = []
    monkeypatch.setattr(
        _backend, "_kernel_is_faster", lambda devices: calls.append(devices) or False
    )
    swept("auto", "a.zarr")
    cli("auto", "ca.zarr")
    assert len(calls) == 2


def test_an_auto_sweep_takes_vmap_where_the_lanes_cannot(monkeypatch, tmp_path):
    # As `simulate_batch` does: "auto" (here given the kernel, as on a GPU) falls
    # back to vmap for a system whose q̈ the lanes cannot evaluate (a Cholesky).
    # The sweep failed there, and records the backend it used.
    def lagrangian(q, qd, t):
        factor = jnp.linalg.cholesky(jnp.eye(1) * (2.0 + q[0] ** 2))
        return 0.5 * qd @ qd - 0.5 * factor[0, 0] ** 2

    monkeypatch.setattr(_backend, "_kernel_is_faster", lambda devices: True)
    store = jl.simulate_sweep(
        jl.LagrangianSystem(lagrangian),
        np.array([[0.1], [0.2]]),
        np.zeros(1),
        store=tmp_path / "s.zarr",
        progress=False,
        t1=0.5,
    )
    assert store.attrs["backend"] == "vmap"
    # L = ½q̇² − ½(2 + q²): q = q₀ cos t.
    np.testing.assert_allclose(
        store["outputs/q"][:, 0, 0], [0.1 * np.cos(0.5), 0.2 * np.cos(0.5)], rtol=1e-6
    )
    np.testing.assert_array_equal(store["outputs/result"][:], 0)
    # "auto" where it would take the kernel follows a store computed with vmap.
    pendulum, _, _ = jl.systems.pendulum()

    def pendulums(backend):
        return jl.simulate_sweep(
            pendulum,
            np.array([[0.1], [0.2]]),
            np.zeros(1),
            store=tmp_path / "p.zarr",
            progress=False,
            backend=backend,
            t1=0.5,
        )

    before = pendulums("vmap")["outputs/q"][:]
    np.testing.assert_array_equal(pendulums("auto")["outputs/q"][:], before)


def test_a_store_from_before_backends_were_recorded_is_resumed(monkeypatch, tmp_path):
    from jaxlagrange._ensemble import _sweep

    system, _, _ = jl.systems.pendulum()

    def sweep():
        return jl.simulate_sweep(
            system,
            np.array([[0.1], [0.2]]),
            np.zeros(1),
            store=tmp_path / "s.zarr",
            progress=False,
            t1=0.5,
        )

    with monkeypatch.context() as patch:  # as it was written before
        patch.setattr(_sweep, "_backend_of", lambda *args: _backend.VmapBackend())
        assert "backend" not in sweep().attrs
    assert "backend" not in sweep().attrs  # resumed (here: reopened), not refused


def test_sweep_backend_errors(tmp_path):
    from jaxlagrange._ensemble import _sweep_simulate as _sweep

    system, q0, qd0 = jl.systems.pendulum()
    kwargs = dict(store=tmp_path / "s.zarr", progress=False, t1=0.1)
    with pytest.raises(ValueError, match=r"`backend` must be one of 'auto', 'vmap'"):
        jl.simulate_sweep(system, q0[None], qd0, backend="gpu", **kwargs)
    with pytest.raises(ValueError, match=r"`block_size` must be a positive power"):
        jl.simulate_sweep(system, q0[None], qd0, block_size=3, **kwargs)
    with pytest.raises(ValueError, match=r"backend='kernel' does not support.*'vmap'"):
        jl.simulate_sweep(
            system, q0[None], qd0, backend="kernel", solver=diffrax.Dopri5(), **kwargs
        )
    member = _sweep.SweepMember(
        system, GivenOptions(t1=0.1, saveat=jnp.array([0.1])), True
    )
    with pytest.raises(ValueError, match=r"`lyapunov` is not supported by backend='k"):
        inputs = {"q0": q0[None], "qd0": qd0[None]}
        stream(member, inputs, tmp_path / "l.zarr", backend="kernel")


_SWEEP_CONFIG = """\
[system]
name = "double_pendulum"

[simulate]
t1 = 0.2
saves = 2
rtol = 1e-10
atol = 1e-10

[sweep]
chunk_size = 4
backend = "{backend}"
lyapunov = {lyapunov}

[sweep.axes]
"q[0]" = {{ min = 0.5, max = 1.5, num = 3 }}
"""


def test_sweep_config_backend(tmp_path, capsys):
    from jaxlagrange._cli import main

    stores = {}
    for backend in ("kernel", "vmap"):
        config = tmp_path / f"{backend}.toml"
        config.write_text(_SWEEP_CONFIG.format(backend=backend, lyapunov="false"))
        out = tmp_path / backend
        assert main(["sweep", str(config), "--out", str(out), "--quiet"]) == 0
        stores[backend] = zarr.open_group(out / "sweep.zarr", mode="r")
    for name in ("q", "qd", "energy", "result"):
        np.testing.assert_allclose(
            stores["kernel"][f"outputs/{name}"][:],
            stores["vmap"][f"outputs/{name}"][:],
            rtol=0,
            atol=1e-8,
        )
    config = tmp_path / "lyapunov.toml"
    config.write_text(_SWEEP_CONFIG.format(backend="kernel", lyapunov="true"))
    assert main(["sweep", str(config), "--out", str(tmp_path / "l"), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "[sweep] `lyapunov` is not supported by backend='kernel'" in err
    assert not (tmp_path / "l" / "sweep.zarr").exists()


def test_too_large_for_the_kernel(monkeypatch):
    system = jl.LagrangianSystem(unit_oscillator_lagrangian)
    q0, qd0 = jnp.ones((2, 33)), jnp.zeros(33)
    with pytest.raises(ValueError, match="more than 32 coordinates.*'vmap' supp"):
        jl.simulate_batch(system, q0, qd0, t1=0.1, backend="kernel")
    # "auto" (here made to pick the kernel, as on a GPU) falls back to vmap.
    monkeypatch.setattr(_backend, "_kernel_is_faster", lambda devices: True)
    traj = jl.simulate_batch(system, q0, qd0, t1=0.1)
    np.testing.assert_allclose(traj.q[:, -1], jnp.cos(0.1), rtol=1e-7)


_TWO_DEVICES = """
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
import jaxlagrange as jl

assert len(jax.devices()) == 2
system, q0, qd0 = jl.systems.double_pendulum()
q0s = q0 + jnp.linspace(0.0, 0.3, 4)[:, None]


def final_q(q0s, backend):
    traj = jl.simulate_batch(
        system, q0s, qd0, t1=0.3, backend=backend, block_size=2, rtol=1e-10,
        atol=1e-10,
    )
    return traj.q


kernel, vmap = final_q(q0s, "kernel"), final_q(q0s, "vmap")
assert len(kernel.sharding.device_set) == 2, kernel.sharding
assert float(jnp.max(jnp.abs(kernel - vmap))) < 1e-8
grad = jax.grad(lambda q: jnp.sum(final_q(q, "kernel")))(q0s)
expected = jax.grad(lambda q: jnp.sum(final_q(q, "vmap")))(q0s)
assert float(jnp.max(jnp.abs(grad - expected))) < 1e-12
print("ok")
"""


@pytest.mark.slow
def test_kernel_split_over_two_devices():
    # A fresh process: the device count is fixed when JAX starts.
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
    env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-c", _TWO_DEVICES],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")
