"""The compiled solves behind `fit`'s drivers (`_drivers.py`), and the
uncertainties of its result: the optimistix loop with the Gauss–Newton
covariance at its end, the optax step, and the covariance on its own."""

from functools import partial

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx
from jax.flatten_util import ravel_pytree

from .._results import code_of


def strong(tree):
    # Weakly typed leaves (from Python floats, or optax's initial states) become
    # strongly typed after one step, which would compile the step a second time.
    return jtu.tree_map(
        lambda x: (
            jax.lax.convert_element_type(x, x.dtype)
            if isinstance(x, jax.Array) and x.weak_type
            else x
        ),
        tree,
    )


@eqx.filter_jit
def optax_step(theta, opt_state, problem, optimizer):
    value_fn = lambda theta: problem.loss(theta)[0]  # noqa: E731
    (loss, codes), grads = eqx.filter_value_and_grad(problem.loss, has_aux=True)(theta)
    updates, opt_state = optimizer.update(
        grads, opt_state, theta, value=loss, grad=grads, value_fn=value_fn
    )
    theta = eqx.apply_updates(theta, updates)
    # The largest |gradient| component: NaN or inf where the gradient is not finite.
    largest = jnp.max(jnp.abs(ravel_pytree(grads)[0]), initial=0.0)
    return theta, opt_state, loss, codes, largest


# A fit is hopeless, and stops ("stalled"), when its lowest loss fell by less
# than _STALL_DROP (relative) over the last _STALL_STEPS steps while above
# `hopeless` (a loss far from a good fit, `_quality.hopeless_loss`).
_STALL_STEPS = 25
_STALL_DROP = 1e-3
STALLED = (
    f"stalled: the loss fell by less than {_STALL_DROP:.1%} over {_STALL_STEPS} "
    "steps, far above a good fit's"
)


def _iterate(fn, solver, y0, steps: int, options: dict, on_step, hopeless, near):
    """optimistix's solve loop, recording each step's loss; stops stalled or `near`."""
    # Not closure-converted (as `optx.least_squares` does): the solver's JVP of a
    # converted `fn` would trace `_with_jacobian`'s solves a second time.
    f_struct, aux_struct = eqx.filter_eval_shape(fn, y0, None)
    tags = frozenset()
    state = solver.init(fn, y0, None, options, f_struct, aux_struct, tags)
    dynamic, static = eqx.partition(state, eqx.is_array)
    successful = optx.RESULTS.successful

    def terminate(y, state):
        done, result = solver.terminate(fn, y, None, options, state, tags)
        finite = jnp.all(jnp.isfinite(ravel_pytree(y)[0]))
        return done, optx.RESULTS.where(finite, result, optx.RESULTS.nonfinite)

    done, result = terminate(y0, state)
    aux = jtu.tree_map(lambda x: jnp.zeros(x.shape, x.dtype), aux_struct)
    losses = jnp.full(steps, jnp.nan, aux_struct[1].dtype)

    def cond(carry):
        _, _, _, losses, k, done, result = carry
        seen = jnp.where(jnp.isnan(losses), jnp.inf, losses)
        best = lambda n: jnp.min(jnp.where(jnp.arange(steps) < n, seen, jnp.inf))  # noqa: E731
        now, before = best(k), best(k - _STALL_STEPS)
        stalled = (now > hopeless) & (now > (1 - _STALL_DROP) * before)
        return ~done & (result == successful) & (k < steps) & ~stalled

    def body(carry):
        y, dynamic, _, losses, k, _, _ = carry
        state = eqx.combine(dynamic, static)
        new_y, state, aux = solver.step(fn, y, None, options, state, tags)
        if on_step is not None:
            on_step(new_y)
        done, result = terminate(y, state)
        loss = aux[1]  # the loss of the point accepted before this step
        if near is not None:  # stopping at the point just accepted: its loss last
            now = near(state)
            loss = jnp.where(now, jnp.sum(state.f_info.residual**2), loss)
            done = done | now
        dynamic = eqx.filter(state, eqx.is_array)
        return new_y, dynamic, aux, losses.at[k].set(loss), k + 1, done, result

    carry = (y0, dynamic, aux, losses, jnp.array(0), done, result)
    y, dynamic, aux, losses, count, done, result = jax.lax.while_loop(cond, body, carry)
    stop = ~done & (result == successful) & (count < steps)  # it stalled
    result = optx.RESULTS.where(
        (result == successful) & ~done & ~stop,
        optx.RESULTS.nonlinear_max_steps_reached,
        result,
    )
    state = eqx.combine(dynamic, static)
    y, _, _ = solver.postprocess(fn, y, aux, None, options, state, tags, result)
    return y, losses, count, result, state, stop


@eqx.filter_jit
def solve_and_decode(
    theta, problem, optimizer, steps, mode, setup, trainable, callback, hopeless, near
):
    """The optimistix solve and `decode_result` of it, in one program."""
    arrays, static = eqx.partition(theta, eqx.is_array)
    on_step = None
    if callback is not None:  # on the host, with the params the step evaluates

        def on_step(y):
            jax.debug.callback(callback, problem.decoded(eqx.combine(y, static))[0])

    def residuals(y, _):
        r, _, codes, _ = problem.residuals(eqx.combine(y, static))
        return r, (codes, jnp.sum(r**2))

    def loss(y, _):
        value, codes = problem.loss(eqx.combine(y, static))
        return value, (codes, value)

    # A Gauss–Newton solver in forward mode evaluates the Jacobian J at every step;
    # `_with_jacobian` hands the J of its last accepted point back in the state, so
    # the loss and the covariance at the solution cost no second copy of the solves.
    reuse = mode == "fwd" and isinstance(optimizer, optx.AbstractGaussNewton)
    if reuse:
        fn, options = _with_jacobian(problem, static), {"jac": mode}
    elif isinstance(optimizer, optx.AbstractLeastSquaresSolver):
        fn, options = residuals, {"jac": mode}
    else:
        fn, options = loss, {}
    near = near and reuse and setup is not None  # (no σ̂ past _COVARIANCE_MAX)
    near = partial(_near, problem, unknowns(theta)) if near else None
    value, losses, count, result, state, stalled = _iterate(
        fn, optimizer, arrays, steps, options, on_step, hopeless, near
    )
    theta = eqx.combine(value, static)
    if reuse:
        # The state's residuals and aux belong to the accepted point, `value`.
        r = state.f_info.residual
        codes, _, jac, chi, raw = state.aux
        codes, final = codes.astype(jnp.int32), jnp.sum(r**2)
        gauss_newton = None
        if setup is not None:
            flat = ravel_pytree(value)[0]
            gauss_newton = _covariance(jac, r, chi, raw, flat, problem, setup[1])
    else:
        final, (codes, _) = loss(value, None)
        # The covariance in the same program: one compilation instead of two.
        gauss_newton = None if setup is None else _gauss_newton(theta, *setup)
    code = jnp.where(stalled, -1, code_of(result))  # -1: stalled
    out = theta, losses, final, codes, code, count, gauss_newton
    if gauss_newton is None:
        return out, None
    return out, decode_result(theta, problem, gauss_newton, trainable)


# The default solve also stops where a Gauss–Newton step would move the unknowns
# by less than _NEAR of their standard errors: digits the data do not determine.
# Not with continuity gaps: residuals without noise, closed to the solves' digits.
_NEAR = 1e-3


def _near(problem, size, state):
    r, jac, chi = state.f_info.residual, state.aux[2], state.aux[3]
    if r.shape[0] > _data_rows(problem):
        return False
    decrease = jnp.sum((jac @ jnp.linalg.lstsq(jac, r)[0]) ** 2)  # in χ²/W
    dof = jnp.maximum(problem.count - size, 1.0)
    # A residual's noise variance: from σ, or σ̂.
    variance = jnp.where(problem.sigma_given, 1.0 / problem.total, chi / dof)
    return ~state.first_step & (decrease <= _NEAR**2 * variance)


def _with_jacobian(problem, static):
    """The residual function of a forward-mode Gauss–Newton solve, J in its aux."""

    # The problem's arrays (the data: tracers of the solve's program) are
    # arguments: a jitted function that closes over tracers is traced anew at
    # every call, which would trace the solves twice.
    arrays, rest = eqx.partition(problem, eqx.is_array)

    # Jitted: one trace for every use (the primal, the solver's init and step).
    @jax.jit
    def evaluate(y, arrays):
        return _jacobian(eqx.combine(arrays, rest), y, static)

    # J by `jax.jacfwd` beside r answers a tangent t with J t: the solver's
    # linearization is J itself (the one it would form from the solves' own JVP),
    # and J at its last accepted point comes back in its state's aux.
    @jax.custom_jvp
    def core(y):
        return evaluate(y, arrays)

    @core.defjvp
    def _(primals, tangents):
        out = evaluate(primals[0], arrays)
        jac = out[2]
        tangent = jac @ ravel_pytree(tangents[0])[0]
        return out, (tangent, *(jnp.zeros_like(x) for x in out[1:]))

    def fn(y, _):
        r, codes, jac, chi, raw = core(y)
        return r, (codes, jnp.sum(r**2), jac, chi, raw)

    return fn


def decode_result(theta, problem, gauss_newton, trainable):
    """The fitted params, segment starts, initial states, standard errors (0: held)."""
    fitted, starts = problem.decoded(theta)
    firsts = [q[0] for q, _ in starts], [qd[0] for _, qd in starts]
    _, unflatten = ravel_pytree(eqx.filter(fitted, trainable))
    stderr = unflatten(jnp.sqrt(jnp.clip(jnp.diagonal(gauss_newton[2]), 0.0)))
    zero = jtu.tree_map(
        lambda x: jnp.zeros_like(x) if eqx.is_array(x) else None, fitted
    )
    return fitted, starts, firsts, eqx.combine(stderr, zero)


def _jacobian(problem, y, static):
    """The residuals at the unknowns' arrays `y`, result codes, Jacobian, χ²/N, misfit."""
    flat, unravel = ravel_pytree(y)

    def pieces(x):
        r, chi, codes, raw = problem.residuals(eqx.combine(unravel(x), static))
        # Codes as floats: a custom JVP's integer outputs need float0 tangents.
        return r, (r, codes.astype(r.dtype), chi, raw)

    # `problem` must differentiate in forward mode.
    jac, (r, codes, chi, raw) = jax.jacfwd(pieces, has_aux=True)(flat)
    return r, codes, jac, chi, raw


def _gauss_newton(theta, problem, logs: tuple):
    """At `theta`: loss, χ²/N, covariance, raw misfit, unidentifiable params."""
    arrays, static = eqx.partition(theta, eqx.is_array)
    r, _, jac, chi, raw = _jacobian(problem, arrays, static)
    return _covariance(jac, r, chi, raw, ravel_pytree(arrays)[0], problem, logs)


def _covariance(jac, r, chi, raw, flat, problem, logs: tuple):
    """`_gauss_newton`'s outputs from the residuals' Jacobian in the unknowns."""
    size = flat.shape[0]
    total = problem.total
    # Residuals are scaled by 1/√W (W the summed weights): JᵀJ is 1/W of the
    # usual normal matrix, and χ² = W · chi. The degrees of freedom are those of
    # the N observations (weights are relative: scaling them all changes no
    # standard error).
    gram = total * (jac.T @ jac)
    dof = jnp.maximum(problem.count - size, 1.0)
    variance = jnp.where(problem.sigma_given, 1.0, total * chi / dof)
    # An unknown whose column of J vanishes (a param that does not enter the
    # motion) has an infinite variance; the others' covariance is that of the
    # rest, so one such param does not turn every standard error NaN.
    column = jnp.sqrt(jnp.diagonal(gram))
    dead = column <= 1e-12 * jnp.max(column, initial=0.0)
    # Also against the data's own size, for a dead param that is the only
    # unknown (or beside other dead ones): a change of 100% of it (of its log
    # for a positive param) that moves the predictions by less than 1e-10 of the
    # data does not change the motion.
    p = len(logs)
    logged = np.concatenate([np.asarray(logs, bool), np.zeros(size - p, bool)])
    relative = column * jnp.where(logged, 1.0, jnp.maximum(jnp.abs(flat), 1.0))
    dead = dead | (relative <= 1e-10 * _data_norm(problem))
    either = dead[:, None] | dead[None, :]
    kept = jnp.where(either, 0.0, gram) + jnp.diag(jnp.where(dead, 1.0, 0.0))
    factor = jax.scipy.linalg.cho_factor(kept)
    inverse = jax.scipy.linalg.cho_solve(factor, jnp.eye(size))
    # The continuity gaps of multiple shooting are residuals without noise: the
    # estimate's covariance is the sandwich G⁻¹ G_d G⁻¹, G_d the normal matrix of
    # the data rows alone, which come first (G⁻¹ overstates the errors).
    rows = _data_rows(problem)
    if rows < jac.shape[0]:
        data = total * (jac[:rows].T @ jac[:rows])
        data = jnp.where(either, 0.0, data) + jnp.diag(jnp.where(dead, 1.0, 0.0))
        inverse = inverse @ data @ inverse
    cov = variance * inverse
    cov = jnp.where(either, jnp.where(jnp.eye(size, dtype=bool), jnp.inf, jnp.nan), cov)
    # Positive params are fitted as logarithms: d x = x d(log x). The trained
    # params come first in the flattened unknowns.
    scale = jnp.where(np.asarray(logs, bool), jnp.exp(flat[:p]), 1.0)
    cov = cov[:p, :p] * scale[:, None] * scale[None, :]
    # The params' precision with the segment starts eliminated (a Schur
    # complement), in their own units: its spectrum tells which combinations
    # the data determine (`_quality.weak_directions`).
    precision = kept[:p, :p]
    if size > p:
        starts = jax.scipy.linalg.cho_factor(kept[p:, p:])
        coupling = jax.scipy.linalg.cho_solve(starts, kept[p:, :p])
        precision = precision - kept[:p, p:] @ coupling
    precision = precision / (variance * scale[:, None] * scale[None, :])
    return jnp.sum(r**2), chi, cov, raw, dead[:p], precision


def _data_rows(problem) -> int:
    """How many residuals are the data's (they come first; then the gaps)."""
    return sum(x.q.size * x.kinds for x in problem.layouts)


def _data_norm(problem):
    """‖√w x / σ‖ over the observed quantities: the data in the residuals' units."""
    total = 0.0
    for layout in problem.layouts:
        total += jnp.sum(layout.weight * layout.q**2)
        if layout.qd is not None:
            qd_weight = layout.weight * layout.scale_qd / layout.scale
            total += jnp.sum(qd_weight * layout.qd**2)
    return jnp.sqrt(total)


def unknowns(theta) -> int:
    """The number of unknowns: the size of `ravel_pytree` of theta's arrays."""
    return sum(
        int(np.size(x)) for x in jtu.tree_leaves(eqx.filter(theta, eqx.is_array))
    )


def covariance_setup(theta, problem, trainable):
    """What `_gauss_newton` needs besides theta, or None past `_COVARIANCE_MAX`."""
    if unknowns(theta) > _COVARIANCE_MAX:
        return None
    # On the host (an eager ravel_pytree is a few small compiles), in its order.
    logs = tuple(
        bool(pos)
        for t, pos, x in zip(
            jtu.tree_leaves(trainable),
            jtu.tree_leaves(problem.positive),
            jtu.tree_leaves(problem.system.params),
            strict=True,
        )
        if t
        for _ in range(np.size(x))
    )
    # The Jacobian is taken in forward mode, whatever the fit's adjoint.
    return problem.forward(), logs


@eqx.filter_jit
def covariance_of(theta, problem, setup, trainable):
    """`_gauss_newton` at `theta` (NaN past `_COVARIANCE_MAX`), `decode_result` of it."""
    if setup is None:
        r, chi, _, raw = problem.residuals(theta)
        p = unknowns(theta[0])
        nan = jnp.full((p, p), jnp.nan)
        gauss_newton = jnp.sum(r**2), chi, nan, raw, jnp.zeros(p, bool), nan
    else:
        gauss_newton = _gauss_newton(theta, *setup)
    return gauss_newton, decode_result(theta, problem, gauss_newton, trainable)


# Beyond this many unknowns (e.g. a neural Lagrangian's weights) the covariance
# is not computed (NaN): it would cost a Jacobian column per unknown, and such
# fits are not identifiable parameter by parameter anyway.
_COVARIANCE_MAX = 1024
