"""The fused ensemble integrator: adaptive Tsit5 in one Pallas kernel.

One program integrates a block of members, one lane each, the state and stages
held as (block,) vectors, the right-hand side (`dynamics`) evaluated lane by lane
(`.._lanes`); each lane has its own step size and stopping, and a program runs
while any lane is going.

It mirrors `simulate`'s default: Tsit5 with diffrax's `PIDController` defaults
(I-control, RMS norm of `error / (atol + rtol·max(|y0|, |y1|))`), diffrax's
initial step when `dt0` is None, first-same-as-last, and (equality constraints
without Baumgarte gains) `ProjectedSolver`'s projection of every step's end. It
differs in one respect: a step is clipped to the next save time (diffrax
interpolates instead), and the step proposed before the clip is resumed after it.

Failures are per lane: a non-finite initial state, `max_steps` reached, and a
step size that collapses (to 16 ulp of the time span), named a singular mass
matrix or redundant constraints when a finite stage flagged them, else a
non-finite state or a collapsed step.

All memory is 1-D, read and written in (block,) slices at offsets computed from
the program id, so the kernel lowers to Triton (power-of-two blocks) as well as
running in Pallas's interpret mode on the CPU.
"""

import functools
import operator
from typing import NamedTuple

import diffrax
import jax
import jax.numpy as jnp

from .._lanes import lanes_of, object_array
from .._results import RESULTS, code_of


_TABLEAU = diffrax.Tsit5.tableau
_A = [tuple(float(x) for x in row) for row in _TABLEAU.a_lower]
_B_SOL = tuple(float(x) for x in _TABLEAU.b_sol)
_B_ERR = tuple(float(x) for x in _TABLEAU.b_error)
_C = (0.0, *(float(x) for x in _TABLEAU.c))
_ERROR_ORDER = 5.0

_CODE = {
    name: int(code_of(getattr(RESULTS, name)))
    for name in """successful max_steps_reached singular_mass_matrix
    redundant_constraints non_finite_state step_size_collapsed""".split()
}


class Controller(NamedTuple):
    """The step-size control: adaptive (diffrax's PID defaults) or constant."""

    adaptive: bool
    safety: float = 0.9
    factormin: float = 0.2
    factormax: float = 10.0


class KernelProblem(NamedTuple):
    """What the kernel integrates (static: traced functions and sizes)."""

    rhs: object  # LaneFunction (t, y, leaves, gains) -> (ẏ, singular M, singular C)
    project: object | None  # LaneFunction (t, y, leaves, gains) -> y, or None
    n: int  # coordinates: y has 2n entries
    num_params: int  # rows of per-member params
    param_shapes: tuple  # shapes of the param leaves (one member)
    num_gains: int  # 0 or 2 (Baumgarte)
    num_saves: int
    controller: Controller
    max_steps: int
    has_dt0: bool
    block: int
    unroll: bool = True  # the stages written out (else a loop over them)


# The scalars every lane shares, in the order of the `scalars` input.
_T0, _T1, _RTOL, _ATOL, _DT0, _RESOLUTION, _GAIN0 = range(7)


def _pick(s, values):
    """values[s - 1] for a traced stage number s (a chain of selects)."""
    out = values[0]
    for i, v in enumerate(values[1:], start=2):
        out = jnp.where(s == i, v, out)
    return out


def _row_coefficient(s, j):
    """a_{s, j} of the Tsit5 tableau (0 above the diagonal) at stage s."""
    return _pick(s, [row[j] if j < len(row) else 0.0 for row in _A])


def _where(c, a, b):
    return [jnp.where(c, x, y) for x, y in zip(a, b, strict=True)]


def _axpy(y, h, coeffs, ks):
    out = []
    for i, yi in enumerate(y):
        acc = None
        for c, k in zip(coeffs, ks, strict=False):
            if not (isinstance(c, float) and c == 0.0):
                term = c * k[i]
                acc = term if acc is None else acc + term
        out.append(yi if acc is None else yi + h * acc)
    return out


def _rms(values):
    total = functools.reduce(lambda a, v: a + v * v, values[1:], values[0] * values[0])
    return jnp.sqrt(total / len(values))


def _all_finite(values):
    return functools.reduce(operator.and_, map(jnp.isfinite, values))


def _at_finite(ys, singular_mass, singular_constraints):
    """A stage's singular M and C flags, only where its state is finite."""
    # A state made non-finite by an earlier stage gives NaN M and C: no cause.
    finite = _all_finite(ys)
    return singular_mass & finite, singular_constraints & finite


def _kernel_body(problem: KernelProblem, dtype, bp: int):
    from jax.experimental import pallas as pl  # on use: 30 ms of every import

    p = problem
    n2 = 2 * p.n
    block = p.block
    ctrl = p.controller

    def kernel(x_ref, s_ref, ys_ref, tf_ref, code_ref):
        off = pl.program_id(0) * block

        def row(ref, r, stride):
            return ref[pl.ds(r * stride + off, block)]

        def scalar(k):
            return s_ref[pl.ds(k * block, block)]

        def as_obj(values, shape):
            flat = iter(values)
            return object_array(shape, lambda _: next(flat))

        y0 = [row(x_ref, i, bp) for i in range(n2)]
        flat = iter([row(x_ref, n2 + i, bp) for i in range(p.num_params)])
        leaves = [as_obj(flat, shape) for shape in p.param_shapes]
        gains = [scalar(_GAIN0 + i) for i in range(p.num_gains)]
        t0, t1 = scalar(_T0), scalar(_T1)
        rtol, atol = scalar(_RTOL), scalar(_ATOL)
        resolution = scalar(_RESOLUTION)

        def args_of(t, y):  # the `LaneFunction`'s (t, y, leaves[, gains])
            args = (as_obj([t], ()), as_obj(y, (n2,)), leaves)
            if p.num_gains:
                args = (*args, as_obj(gains, (p.num_gains,)))
            return args

        def rhs(t, y):
            ydot, sing_mass, sing_con = p.rhs(*args_of(t, y))
            flags = lanes_of([sing_mass[()], sing_con[()]], block, bool)
            return (lanes_of(ydot.flat, block, dtype), *flags)

        def project(t, y):
            if p.project is None:
                return y
            return lanes_of(p.project(*args_of(t, y)).flat, block, dtype)

        finite0 = _all_finite(y0)
        y0 = [jnp.where(finite0, v, jnp.zeros_like(v)) for v in y0]
        scale = [atol + jnp.abs(v) * rtol for v in y0]
        d0 = _rms([v / s for v, s in zip(y0, scale, strict=True)])

        def first_step(f0):
            # diffrax's initial step (Hairer, Nørsett & Wanner, II.4): h0 and the
            # state at which the second evaluation is made.
            d1 = _rms([v / s for v, s in zip(f0, scale, strict=True)])
            small = (d0 < 1e-5) | (d1 < 1e-5)
            h0 = jnp.where(small, 1e-6, 0.01 * (d0 / jnp.where(small, 1.0, d1)))
            return d1, h0, [v + h0 * f for v, f in zip(y0, f0, strict=True)]

        if p.has_dt0 or p.unroll:
            f0, sm0, sc0 = rhs(t0, y0)
            if not p.has_dt0:
                d1, h0, y1 = first_step(f0)
                f1, _, _ = rhs(t0 + h0, y1)
        else:
            # Both evaluations in a loop: one copy of the right-hand side.
            def evaluate(i, carry):
                f0, _, sm0, sc0 = carry
                _, h0, y1 = first_step(f0)
                t_in = jnp.where(i == 0, t0, t0 + h0)
                y_in = _where(i == 0, y0, y1)
                f, sm, sc = rhs(t_in, y_in)
                first = [_where(i == 0, [a], [b])[0] for a, b in ((sm, sm0), (sc, sc0))]
                return (_where(i == 0, f, f0), f, *first)

            no = jnp.zeros((block,), bool)
            f0, f1, sm0, sc0 = jax.lax.fori_loop(0, 2, evaluate, (y0, y0, no, no))
            d1, h0, _ = first_step(f0)
        if p.has_dt0:
            dt = scalar(_DT0)
        else:
            d2 = _rms([(a - b) / s for a, b, s in zip(f1, f0, scale, strict=True)]) / h0
            max_d = jnp.maximum(d1, d2)
            h1 = jnp.where(
                max_d <= 1e-15,
                jnp.maximum(1e-6, h0 * 1e-3),
                (0.01 / max_d) ** (1 / _ERROR_ORDER),
            )
            dt = jnp.minimum(100 * h0, h1)
        dt = dt.astype(dtype)
        zero = jnp.zeros((block,), jnp.int32)
        code = jnp.where(finite0, _CODE["successful"], _CODE["non_finite_state"])
        # q̈ undefined at the start: the member fails there, named. (Later, a
        # step whose last stage (FSAL) is not finite is rejected: its flags are
        # among the step's.)
        code = jnp.where(finite0 & sc0, _CODE["redundant_constraints"], code)
        code = jnp.where(finite0 & sm0, _CODE["singular_mass_matrix"], code)
        code = code.astype(jnp.int32)
        state = (t0, y0, f0, dt, code, zero, zero, zero)
        inf = jnp.full((block,), jnp.inf, dtype)

        def save(j, state):
            target = s_ref[pl.ds((_GAIN0 + p.num_gains + j) * block, block)]
            eps = jnp.finfo(dtype).eps
            floor = target - 100 * eps * jnp.abs(target)

            def running(state):
                t, _, _, _, code, *_ = state
                return (code == _CODE["successful"]) & (t < target)

            def cond(state):
                # (Triton lowers reduce_max, not reduce_or.)
                return jnp.max(running(state).astype(jnp.int32)) > 0

            def body(state):
                t, y, f0, dt, code, steps, accepted, rejected = state
                active = running(state)
                reach = t + dt >= floor
                h = jnp.where(reach, target - t, dt)
                sm = jnp.zeros((block,), bool)
                if p.unroll:
                    ks, sc = [f0], sm
                    for s in range(1, 7):
                        ys = _axpy(y, h, _A[s - 1], ks)
                        k, m, c = rhs(t + _C[s] * h, ys)
                        ks.append(k)
                        # (M at a stage made NaN by an earlier one is no cause.)
                        m, c = _at_finite(ys, m, c)
                        sm, sc = sm | m, sc | c
                else:
                    # The six new stages in a loop: one copy of a large right-hand
                    # side in the program, the tableau's row picked by the stage.
                    zeros = [jnp.zeros_like(v) for v in y]
                    ks = [f0] + [zeros] * 6

                    def stage(s, carry):
                        ks, sm, sc = carry
                        # As a lane vector: Triton lowers (block,) selects only.
                        s = jnp.full((block,), s, jnp.int32)
                        coefficients = [_row_coefficient(s, j) for j in range(6)]
                        ys = _axpy(y, h, coefficients, ks)
                        k, m, c = rhs(t + _pick(s, _C[1:]) * h, ys)
                        ks = [ks[0], *[_where(s == i, k, ks[i]) for i in range(1, 7)]]
                        m, c = _at_finite(ys, m, c)
                        return ks, sm | m, sc | c

                    ks, sm, sc = jax.lax.fori_loop(1, 7, stage, (ks, sm, sm))
                y1 = _axpy(y, h, _B_SOL, ks)
                err = [h * e for e in _axpy([0.0] * n2, 1.0, _B_ERR, ks)]
                y1 = project(t + h, y1)
                finite = _all_finite(y1) & _all_finite(err)
                if ctrl.adaptive:
                    ymax = [
                        jnp.maximum(jnp.abs(a), jnp.abs(jnp.where(finite, b, a)))
                        for a, b in zip(y, y1, strict=True)
                    ]
                    scaled = _rms(
                        [e / (atol + m * rtol) for e, m in zip(err, ymax, strict=True)]
                    )
                    scaled = jnp.where(finite, scaled, jnp.inf)
                    keep = scaled < 1
                    inv = 1 / scaled
                    lo = jnp.where(keep, 1.0, ctrl.factormin)
                    hi = jnp.where(keep, ctrl.factormax, ctrl.safety)
                    factor = jnp.clip(ctrl.safety * inv ** (1 / _ERROR_ORDER), lo, hi)
                    new_dt = h * factor
                    # A step shortened to land on a save time: resume the step
                    # the controller had proposed before.
                    new_dt = jnp.where(keep & reach, jnp.maximum(new_dt, dt), new_dt)
                    stuck = ~keep & ~(new_dt > resolution)  # NaN too
                else:
                    keep = finite
                    new_dt = dt
                    stuck = ~finite
                t_new = jnp.where(reach, target, t + h)
                move = active & keep
                y = _where(move, y1, y)
                f0 = _where(move, ks[6], f0)
                t = jnp.where(move, t_new, t)
                dt = jnp.where(active, new_dt, dt)
                steps = steps + active.astype(jnp.int32)
                accepted = accepted + move.astype(jnp.int32)
                rejected = rejected + (active & ~keep).astype(jnp.int32)
                why = jnp.where(
                    finite, _CODE["step_size_collapsed"], _CODE["non_finite_state"]
                )
                why = jnp.where(sc, _CODE["redundant_constraints"], why)
                why = jnp.where(sm, _CODE["singular_mass_matrix"], why)
                code = jnp.where(active & stuck, why, code)
                out_of_steps = active & (steps >= p.max_steps) & (t < t1)
                code = jnp.where(
                    out_of_steps & (code == _CODE["successful"]),
                    _CODE["max_steps_reached"],
                    code,
                ).astype(jnp.int32)
                return (t, y, f0, dt, code, steps, accepted, rejected)

            state = jax.lax.while_loop(cond, body, state)
            t, y, _, _, code, *_ = state
            reached = (code == _CODE["successful"]) & (t >= target)
            for i in range(n2):
                ys_ref[pl.ds((j * n2 + i) * bp + off, block)] = jnp.where(
                    reached, y[i], inf
                )
            return state

        state = jax.lax.fori_loop(0, p.num_saves, save, state)
        t, _, _, _, code, steps, accepted, rejected = state
        tf_ref[pl.ds(off, block)] = jnp.where(finite0, t, t0)
        for k, v in enumerate((code, steps, accepted, rejected)):
            code_ref[pl.ds(k * bp + off, block)] = v

    return kernel


def run(problem: KernelProblem, y0: jax.Array, params: jax.Array, scalars: jax.Array):
    """Integrate the members: `y0` (B, 2n), `params` (B, P), `scalars` (S,)."""
    from jax.experimental import pallas as pl
    from jax.experimental.pallas import triton as pl_triton

    dtype = y0.dtype
    size = y0.shape[0]
    block = problem.block
    bp = -(-size // block) * block
    pad = bp - size
    if pad:
        # Padding repeats member 0, so that it cannot fail.
        y0 = jnp.concatenate([y0, jnp.repeat(y0[:1], pad, axis=0)])
        params = jnp.concatenate([params, jnp.repeat(params[:1], pad, axis=0)])
    x = jnp.concatenate([y0.T, params.T.astype(dtype)]).reshape(-1)
    s = jnp.repeat(scalars.astype(dtype), block)
    n2 = 2 * problem.n
    kernel = _kernel_body(problem, dtype, bp)

    def call(interpret, x, s):
        triton = pl_triton.CompilerParams(num_warps=4)
        return pl.pallas_call(
            kernel,
            out_shape=(
                jax.ShapeDtypeStruct((problem.num_saves * n2 * bp,), dtype),
                jax.ShapeDtypeStruct((bp,), dtype),
                jax.ShapeDtypeStruct((4 * bp,), jnp.int32),
            ),
            grid=(bp // block,),
            interpret=interpret,
            # Triton: one program per block of lanes, elementwise ops.
            compiler_params=None if interpret else triton,
            name="jaxlagrange_tsit5",
        )(x, s)

    # The platform lowered for picks the kernel: Triton on a GPU, Pallas's interpret
    # mode (an exact emulator) elsewhere; a program lowered for CUDA holds the GPU
    # kernel on any machine, a CPU's included.
    gpu = functools.partial(call, False)
    ys, tf, codes = jax.lax.platform_dependent(
        x, s, cuda=gpu, rocm=gpu, default=functools.partial(call, True)
    )
    ys = ys.reshape(problem.num_saves, n2, bp).transpose(2, 0, 1)[:size]
    codes = codes.reshape(4, bp)[:, :size]
    return ys, tf[:size], codes
