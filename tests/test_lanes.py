"""The lane evaluator (`jaxlagrange/_lanes/`), shared by the fused kernel (lanes
of shape (block,)) and the scalar form (lanes of shape ()): its data movement
(unstack, gathers in every mode), the products it writes out itself under
`jax.grad`, against `jax.vmap` to 1e-14; and the rigid bodies this opens to
the kernel, against the vmap backend (Pallas interpret mode on the CPU).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_kernel import TIGHT, assert_close, both

import jaxlagrange as jl
from jaxlagrange._lanes import (
    LaneFunction,
    UnsupportedPrimitiveError,
    _scalar,
    from_lanes,
    to_lanes,
)
from jaxlagrange._lanes._evaluator import Evaluator
from jaxlagrange._lanes._known import const_array
from jaxlagrange._options import GivenOptions


def by_lanes(fn, xs):
    """`fn` of one member, evaluated on the lanes of the batch `xs`."""
    lanes = LaneFunction(fn, xs[0])
    size = xs.shape[0]

    @jax.jit
    def run(xs):
        outs = lanes(to_lanes(xs))
        return jax.tree.map(
            lambda o, s: from_lanes(o, size, s.dtype), outs, lanes.out_shape
        )

    return run(xs)


def assert_lanes_equal_vmap(fn, xs):
    out, expected = by_lanes(fn, xs), jax.jit(jax.vmap(fn))(xs)
    for a, b in zip(jax.tree.leaves(out), jax.tree.leaves(expected), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)


XS = jnp.array(
    [[[0.1, 0.7, 0.4], [0.9, -0.2, 0.6]], [[0.3, 0.5, -0.8], [1.1, 0.0, 0.25]]]
)


def test_unstack():
    # jnp.unstack along either axis, of a state and of a value known at trace
    # time (an iota; the state's part is folded away by x·0 = 0).
    def fn(x):
        a, b = jnp.unstack(x)
        c, d, e = jnp.unstack(x, axis=1)
        grid = jnp.outer(jnp.arange(2.0), jnp.ones(3)) + 0.0 * x
        known = jnp.unstack(grid, axis=1)[2]
        return a * d[1] + jnp.sin(b[::-1]) * e[0] + known[1], jnp.stack([c, d])

    assert "unstack" in str(jax.make_jaxpr(fn)(XS[0]))
    assert_lanes_equal_vmap(fn, XS)


def test_scans_of_any_length():
    # A scan's stacked outputs keep their shape, at length 0 too.
    def fn(x):
        def step(c, y):
            return c * y[0] + y[1], jnp.stack([c, jnp.sin(c)])

        empty = jax.lax.scan(step, x[0, 0], x[:0])
        return empty, jax.lax.scan(step, x[1, 2], x, reverse=True)

    assert_lanes_equal_vmap(fn, XS)


def _scalars(x):
    out = np.empty(x.shape, dtype=object)
    for index in np.ndindex(x.shape):
        out[index] = x[index]
    return out


def _on_scalars(fn):
    """`fn` evaluated by the base evaluator on scalars (lanes of shape ())."""

    def evaluated(x):
        closed = jax.make_jaxpr(fn)(x)
        consts = [const_array(c) for c in closed.consts]
        (out,) = Evaluator(()).eval_jaxpr(closed.jaxpr, consts, [_scalars(x)])
        return jnp.stack(list(out.flat)).reshape(out.shape)

    return evaluated


def test_written_out_products_under_grad():
    # dot_general, reductions and cumulative products become products the
    # evaluator binds itself: they carry `mul`'s out_dtype, which its transpose
    # rule reads (a `jax.grad` of the scalar form raised without it).
    inertia = jnp.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.0], [0.1, 0.0, 3.0]])

    def fn(x):
        energy = x @ inertia @ x + jnp.prod(x) + jnp.cumprod(x)[-1] ** 2
        return jnp.sin(energy)[None]

    x = jnp.array([0.3, 0.7, -0.4])
    evaluated = _on_scalars(fn)
    np.testing.assert_allclose(evaluated(x), fn(x), rtol=0, atol=1e-14)
    grad = jax.grad(lambda x: evaluated(x)[0])(x)
    np.testing.assert_allclose(grad, jax.grad(lambda x: fn(x)[0])(x), atol=1e-14)
    hessian = jax.hessian(lambda x: evaluated(x)[0])(x)
    expected = jax.hessian(lambda x: fn(x)[0])(x)
    np.testing.assert_allclose(hessian, expected, rtol=0, atol=1e-13)


def test_written_out_products_share_the_memo():
    # x₀x₁ written by the user and x₀x₁ written out of a dot product have the
    # same params, so the product is emitted once.
    def fn(x):
        return jnp.stack([x[0] * x[1], jnp.dot(x[:1], x[1:2])])

    jaxpr = jax.make_jaxpr(_on_scalars(fn))(jnp.ones(2))
    assert [e.primitive.name for e in jaxpr.eqns].count("mul") == 1


def _gather(x, indices, mode, fill_value=None):
    # lax.gather itself: jnp resolves a fill value of None before binding.
    dimension_numbers = jax.lax.GatherDimensionNumbers(
        offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    return jax.lax.gather(
        x,
        jnp.asarray(indices)[:, None],
        dimension_numbers,
        slice_sizes=(1, x.shape[1]),
        mode=mode,
        fill_value=fill_value,
    )


@pytest.mark.parametrize(
    "mode, fill_value, dtype",
    [
        ("fill", 0.5, float),
        ("fill", None, float),  # NaN out of bounds
        ("fill", None, jnp.int32),  # the most negative int32
        ("fill", 7, jnp.int32),
        ("clip", None, float),
        ("promise_in_bounds", None, float),
    ],
)
def test_gather_modes(mode, fill_value, dtype):
    if mode == "promise_in_bounds":
        indices = [1, 0, 1]
    else:
        indices = [1, 0, 2, -1, 1]  # 2 and -1: out of bounds

    def fn(x):
        return _gather(x, indices, mode, fill_value)

    xs = (XS * 10).astype(dtype)
    out, expected = by_lanes(fn, xs), jax.jit(jax.vmap(fn))(xs)
    assert out.dtype == expected.dtype
    np.testing.assert_array_equal(out, expected)
    if mode == "fill":
        fill = expected[:, 2:4]
        if fill_value is None and dtype is float:
            assert np.all(np.isnan(fill))
        elif fill_value is None:
            assert np.all(fill == np.iinfo(np.int32).min)
        else:
            assert np.all(fill == fill_value)


def test_gather_with_a_fill_value_in_a_lagrangian():
    # The user's `.at[].get(mode="fill")` in L, through the whole vector field.
    def fn(x):
        padded = x.at[jnp.array([2, 0, 1, 5])].get(mode="fill", fill_value=0.5)
        return jnp.sin(padded * x[1, 2]).ravel()

    assert_lanes_equal_vmap(fn, XS)


SCATTERS = {
    "set": lambda x: jnp.zeros(5).at[jnp.array([0, 3, 4])].set(x[0]),
    "set_tril": lambda x: jnp.zeros((3, 3)).at[jnp.tril_indices(3, -1)].set(x[1]),
    "add": lambda x: x[1].at[jnp.array([0, 2, 0, 1])].add(x.ravel()[:4]),
    "add_dropped": lambda x: x[0].at[jnp.array([0, 5, 0])].add(x[1]),
    "subtract": lambda x: x[0].at[jnp.array([1, 1])].subtract(x[1, :2]),
    "multiply": lambda x: x[1].at[jnp.array([0, 1, 0])].multiply(x[0]),
    "min": lambda x: x[1].at[jnp.array([2, 2, 0])].min(x[0]),
    "max": lambda x: jnp.ones(2).at[jnp.array([1, 1, 0])].max(x[0]),
    "rows": lambda x: jnp.zeros((4, 3)).at[jnp.array([3, 0])].add(x),
}


@pytest.mark.parametrize("name", SCATTERS)
def test_scatters_at_known_indices(name):
    # Each update is combined with the operand's element where it lands
    # (repeated indices accumulate, out-of-bounds ones are dropped), and
    # nothing is left of the scatter but that arithmetic.
    fn = SCATTERS[name]
    assert "scatter" in str(jax.make_jaxpr(fn)(XS[0]))
    assert_lanes_equal_vmap(fn, XS)
    names = {e.primitive.name for e in jax.make_jaxpr(_on_scalars(fn))(XS[0]).eqns}
    assert not any("scatter" in n for n in names), names


def test_tile_and_diagonal():
    # jnp.diag of a matrix is platform-dependent code (`lax.platform_dependent`):
    # its default branch is taken.
    def fn(x):
        return jnp.concatenate([jnp.tile(x[0], 2), jnp.diag(jnp.outer(x[1], x[0]))])

    jaxpr = str(jax.make_jaxpr(fn)(XS[0]))
    assert "tile" in jaxpr and "platform_index" in jaxpr
    assert_lanes_equal_vmap(fn, XS)


def test_platform_dependent_code_with_no_default():
    def fn(x):
        return jax.lax.platform_dependent(x, cpu=jnp.sin, cuda=jnp.sin)

    lanes = LaneFunction(fn, XS[0])
    with pytest.raises(UnsupportedPrimitiveError, match="no default branch"):
        lanes(to_lanes(XS))


def test_state_dependent_indices_are_unsupported():
    def fn(x):
        return x[0, jnp.argmax(x[1])][None]

    lanes = LaneFunction(fn, XS[0])
    with pytest.raises(UnsupportedPrimitiveError, match="'argmax'"):
        lanes(to_lanes(XS))


# Rigid bodies (`jl.rigid`: rotation matrices built on jnp.unstack) in the kernel.


def test_heavy_top_in_the_kernel():
    system, q0, qd0 = jl.systems.heavy_top()
    q0s = q0 + jnp.array([[0.0], [0.05], [-0.1]])
    kernel, vmap = both(
        system, q0s, qd0, block_size=2, t1=0.2, saveat=jnp.array([0.1, 0.2]), **TIGHT
    )
    assert kernel.q.shape == (3, 2, 3)
    assert_close(kernel, vmap)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["free_rigid_body", "whipple_bicycle"])
def test_rigid_systems_in_the_kernel(name):
    # Slow to compile in interpret mode (whipple_bicycle: about 2 minutes).
    system, q0, qd0 = jl.systems.make(name)
    kernel, vmap = both(
        system, jnp.stack([q0, q0]), qd0, block_size=2, t1=0.05, **TIGHT
    )
    assert_close(kernel, vmap)


def _indexed_lagrangian(q, qd, t, p):
    # Fancy indexing in L: a gather, whose transpose in q̈ is a scatter-add.
    inertia = jnp.zeros((2, 2)).at[jnp.diag_indices(2)].set(p["m"]) + 0.2
    swapped = q[jnp.array([1, 0])]
    return 0.5 * qd @ inertia @ qd - jnp.sum(p["k"] * (1 - jnp.cos(swapped)))


def test_fancy_indexing_in_the_kernel():
    params = {"m": jnp.array([1.0, 2.0]), "k": jnp.array([3.0, 1.0])}
    system = jl.LagrangianSystem(_indexed_lagrangian, params=params)
    q0 = jnp.array([[0.3, -0.2], [0.1, 0.5], [-0.4, 0.0]])
    kernel, vmap = both(system, q0, jnp.zeros(2), block_size=2, t1=0.3, **TIGHT)
    assert_close(kernel, vmap)


def test_neural_lagrangian_in_the_kernel():
    # Its params are MLPs whose activation functions are leaves but no arrays:
    # they are the system's own, not batched (the kernel raised a TypeError,
    # which "auto" on a GPU did not catch).
    system = jl.neural_lagrangian(2, key=jax.random.key(1), width=4, depth=1)
    q0 = jnp.array([[0.3, -0.2], [0.1, 0.5]])
    kernel, vmap = both(
        system, q0, jnp.array([0.1, 0.2]), block_size=2, t1=0.1, **TIGHT
    )
    assert_close(kernel, vmap)


def _lowered_for_cuda(system, n):
    # No GPU here: lower for CUDA, which runs Pallas's Triton lowering rules on
    # every primitive the lane evaluator emitted (as test_kernel.py does).
    from jaxlagrange._kernel import _ensemble, _tsit5

    leaves, tree = jax.tree.flatten(eqx.filter(system.params, eqx.is_array_like))
    leaves = [jnp.asarray(leaf, float) for leaf in leaves]
    controller = _ensemble.check_supported(system, GivenOptions())
    problem = _ensemble._problem(
        system, n, leaves, tree, float, 2, controller, GivenOptions(), 128
    )

    def run(y0, params, scalars):
        return _tsit5.run(problem, y0, params, scalars)

    width = sum(leaf.size for leaf in leaves)
    args = (jnp.zeros((256, 2 * n)), jnp.zeros((256, width)), jnp.zeros(8))
    return jax.jit(run).trace(*args).lower(lowering_platforms=("cuda",)).as_text()


@pytest.mark.parametrize("name", ["heavy_top", "indexed", "neural"])
def test_new_paths_lower_to_triton(name):
    if name == "heavy_top":
        system, n = jl.systems.heavy_top().system, 3
    elif name == "indexed":
        params = {"m": jnp.array([1.0, 2.0]), "k": jnp.array([3.0, 1.0])}
        system, n = jl.LagrangianSystem(_indexed_lagrangian, params=params), 2
    else:
        system = jl.neural_lagrangian(2, key=jax.random.key(1), width=4, depth=1)
        n = 2
    assert "triton" in _lowered_for_cuda(system, n)


def _sorted_oscillator(q, qd, t):
    # ½|q̇|² − ½|sort(q)|² = ½|q̇|² − ½|q|²: q(t) = q₀ cos t, but through a sort.
    return 0.5 * qd @ qd - 0.5 * jnp.sum(jnp.sort(q) ** 2)


def test_auto_falls_back_for_what_the_kernel_cannot_evaluate(monkeypatch):
    system = jl.LagrangianSystem(_sorted_oscillator)
    q0, qd0 = jnp.array([[0.3, -0.2], [0.1, 0.5]]), jnp.zeros(2)
    with pytest.raises(UnsupportedPrimitiveError, match="'sort'"):
        jl.simulate_batch(system, q0, qd0, t1=0.1, backend="kernel", block_size=2)
    # "auto" (made to pick the kernel, as on a GPU) falls back to vmap.
    from jaxlagrange._ensemble import _backend

    monkeypatch.setattr(_backend, "_kernel_is_faster", lambda devices: True)
    traj = jl.simulate_batch(system, q0, qd0, t1=0.1, **TIGHT)
    np.testing.assert_allclose(traj.q[:, -1], q0 * jnp.cos(0.1), rtol=0, atol=1e-9)
    vmap = jl.simulate_batch(system, q0, qd0, t1=0.1, backend="vmap", **TIGHT)
    np.testing.assert_array_equal(traj.q, vmap.q)


def test_platform_dependent_code_in_the_scalar_form():
    # jnp.diag's default branch (beside Mosaic's) is written out; code with a
    # branch for a named platform keeps its cond, for XLA to choose.
    def diagonal(x):
        return jnp.diag(jnp.outer(x, x[::-1]))

    def per_platform(x):
        return jax.lax.platform_dependent(x, cpu=jnp.sin, default=jnp.cos)

    x = jnp.array([0.3, -0.7, 1.1])
    for fn, kept in ((diagonal, False), (per_platform, True)):
        written = jax.jit(lambda x, fn=fn: _scalar.scalar_form(fn, x))
        np.testing.assert_allclose(written(x), fn(x), rtol=0, atol=1e-15)
        names = {
            e.primitive.name
            for e in jax.make_jaxpr(written)(x).eqns[0].params["jaxpr"].eqns
        }
        assert ("cond" in names) == kept, names
