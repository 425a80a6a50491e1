"""`fit`: fit a system's params (and initial states) to observed trajectories.

The optimizer sees an unconstrained vector of unknowns: the trainable params
(positive ones as their logarithm, so that a step can never make a mass or a
length negative) and the starting state of every shooting segment. One
`equinox.filter_jit`-ed step computes the loss and its gradient and applies the
optax update; a Python loop runs the steps so that progress can be reported and
a non-finite loss stopped at once, naming the step.
"""

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optax

from ._custom_types import Array, Params, ScalarLike
from ._fit_loss import (
    Observations,
    _as_data,
    _check_params,
    _layout,
    _objective,
    _options,
)
from ._simulate import _messages
from ._system import LagrangianSystem


class FitResult(eqx.Module):
    """The result of `fit`.

    **Attributes:**

    - `params`: the fitted params, a pytree like `system.params`.
    - `system`: the system with the fitted params.
    - `losses`: the loss before each optimizer step, a NumPy array of shape (steps,).
    - `loss`: the loss at the fitted params (and states).
    - `q0`, `qd0`: the initial state of each observed trajectory (fitted with
        `fit_initial_state=True`, else the data's); arrays of shape (n,) for one
        `Observations`, lists of them for a sequence.
    - `starts`: per observed trajectory, the start states `(q, qd)` of its
        shooting segments, each of shape (segments, n).
    """

    params: Params
    system: LagrangianSystem
    losses: np.ndarray
    loss: float
    q0: Any
    qd0: Any
    starts: list[tuple[Array, Array]]


def _bool_leaf(x) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise ValueError(f"must hold bools, got {type(x).__name__} {x!r}")
    return bool(x)


def _mask(spec, params, name: str) -> Params:
    """A pytree of bools with the structure of `params`, from `spec`."""
    if isinstance(spec, bool):
        return jtu.tree_map(lambda _: spec, params)
    if (
        isinstance(spec, Collection)
        and not isinstance(spec, Mapping)
        and all(isinstance(s, str) for s in spec)
    ):
        if isinstance(spec, str):
            spec = [spec]
        if not isinstance(params, Mapping):
            raise ValueError(
                f"`{name}` as a collection of names needs dict params, but "
                f"system.params is a {type(params).__name__}: pass a pytree of bools."
            )
        unknown = sorted(set(spec) - set(params))
        if unknown:
            raise ValueError(
                f"`{name}` names unknown params {unknown}; valid names: "
                f"{sorted(params)}."
            )
        return type(params)(
            {k: jtu.tree_map(lambda _, k=k: k in spec, v) for k, v in params.items()}
        )
    try:
        return jtu.tree_map(
            lambda m, sub: jtu.tree_map(lambda _: _bool_leaf(m), sub), spec, params
        )
    except ValueError as e:
        raise ValueError(
            f"`{name}` must be True/False, a collection of top-level param names, "
            "or a pytree of bools with the structure of system.params (or a prefix "
            f"of it): {str(e).splitlines()[0]}"
        ) from None


def _encode(params, trainable, positive) -> Params:
    """The unconstrained unknowns: trainable leaves, positive ones as logarithms."""
    return jtu.tree_map(
        lambda x, t, p: (jnp.log(x) if p else x) if t else None,
        params,
        trainable,
        positive,
    )


def _decode(unknowns, fixed, positive) -> Params:
    values = jtu.tree_map(
        lambda u, p: None if u is None else (jnp.exp(u) if p else u),
        unknowns,
        positive,
        is_leaf=lambda x: x is None,
    )
    return eqx.combine(values, fixed)


class _Problem(eqx.Module):
    """Everything the loss needs besides the unknowns."""

    system: LagrangianSystem
    fixed: Params  # the non-trainable params (None at trainable leaves)
    positive: Params = eqx.field(static=True)
    layouts: list
    initial: list  # the data's initial state of each observed trajectory
    fit_initial_state: bool = eqx.field(static=True)
    continuity_weight: Any
    options: dict

    def loss(self, theta):
        unknowns, starts = theta
        params = _decode(unknowns, self.fixed, self.positive)
        system = eqx.tree_at(lambda s: s.params, self.system, params)
        if not self.fit_initial_state:
            starts = [
                (q.at[0].set(q0), qd.at[0].set(qd0))
                for (q, qd), (q0, qd0) in zip(starts, self.initial, strict=True)
            ]
        return _objective(
            system, self.layouts, starts, self.continuity_weight, self.options
        )


def _strong(tree):
    # Weakly typed leaves (from Python floats, or optax's initial states) become
    # strongly typed after one step, which would compile the step a second time.
    return jtu.tree_map(
        lambda x: jax.lax.convert_element_type(x, x.dtype) if eqx.is_array(x) else x,
        tree,
    )


def _all_finite(tree) -> Array:
    leaves = [jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(tree)]
    return jnp.stack(leaves).all() if leaves else jnp.array(True)


@eqx.filter_jit
def _step(theta, opt_state, problem: _Problem, optimizer):
    value_fn = lambda theta: problem.loss(theta)[0]  # noqa: E731
    (loss, codes), grads = eqx.filter_value_and_grad(problem.loss, has_aux=True)(theta)
    updates, opt_state = optimizer.update(
        grads, opt_state, theta, value=loss, grad=grads, value_fn=value_fn
    )
    theta = eqx.apply_updates(theta, updates)
    return theta, opt_state, loss, codes, _all_finite(grads)


def fit(
    system: LagrangianSystem,
    data: Observations | Sequence[Observations],
    *,
    params: Params | None = None,
    optimizer: optax.GradientTransformation | None = None,
    steps: int = 1000,
    trainable: Any = None,
    positive: Any = None,
    fit_initial_state: bool = False,
    segments: int = 1,
    continuity_weight: ScalarLike = 1.0,
    adjoint: diffrax.AbstractAdjoint | None = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: ScalarLike = 1e-8,
    atol: ScalarLike = 1e-8,
    max_steps: int = 4096,
    progress: bool = False,
) -> FitResult:
    """Fit the params of `system` (and optionally initial states) to observed data.

    Minimizes `fit_loss`, the weighted mean squared misfit between simulated and
    observed coordinates (and velocities where observed), with an optax optimizer.

    Only identifiable combinations can be recovered: a Lagrangian times a constant
    has the same motion, so fit a pendulum's length with g and m fixed, and a
    double pendulum's m₂ with m₁ fixed (`trainable=`).

    **Arguments:**

    - `system`: the `LagrangianSystem`; its params are the starting guess.
    - `data`: an `Observations`, or a sequence of them (e.g. several runs from
        different initial states), all of the same system.
    - `params`: a starting guess other than `system.params`, with its structure.
    - `optimizer`: any optax optimizer (default `optax.adam(1e-2)`). Line-search
        optimizers such as `optax.lbfgs()` get the loss function they need.
    - `steps`: the number of optimizer steps.
    - `trainable`: which params to fit: None or True (all floating-point array
        leaves; other leaves, such as an MLP's activation, are never trained), a
        collection of top-level names of dict params (`{"l", "c"}`), or a pytree
        of bools with the structure of `system.params` or a prefix of it.
    - `positive`: which params are positive (masses, lengths): given like
        `trainable` (default none). They are fitted as their logarithm, so they
        stay positive and are scaled sensibly; they must start > 0.
    - `fit_initial_state`: also fit each trajectory's initial state (q0, qd0);
        otherwise it is held at the data's (see `Observations`).
    - `segments`: multiple shooting: cut each observed trajectory into this many
        segments, each simulated from its own fitted start state (initialized
        from the data), with `continuity_weight` on the jumps between them. Use it
        for long or chaotic data (e.g. 10 s of a double pendulum).
    - `continuity_weight`: the weight of the continuity penalty.
    - `adjoint`: how gradients go through the solves. The default,
        `diffrax.RecursiveCheckpointAdjoint()`, differentiates the solver's own
        steps: exact gradients of the computed loss (the finite-difference checks
        agree to 1e-6 and better), memory logarithmic in `max_steps`.
        `diffrax.BacksolveAdjoint()` solves an adjoint ODE backwards in O(1)
        memory; its gradient is only as accurate as that solve, and it is
        unreliable for chaotic systems over long segments (the backward solve
        is unstable). Their costs are compared by `benchmarks/bench_fit.py`.
    - `solver`, `rtol`, `atol`, `max_steps`: as for `jl.simulate`, per segment.
    - `progress`: print the loss about ten times during the fit.

    **Returns:** a `FitResult`.

    **Raises:**

    - `ValueError` for bad data (see `Observations`), `params` whose structure
        differs from `system.params`, unknown names in `trainable`/`positive`,
        positive params that are not > 0, a bad `segments`.
    - `FloatingPointError` naming the step at which the loss (or its gradient)
        became non-finite, e.g. because a solve diverged; the message says why.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0})
    ts = jnp.linspace(0.0, 3.0, 61)
    traj = jl.simulate(system, q0, qd0, t1=3.0, saveat=ts)
    data = jl.Observations(ts, traj.q, traj.qd)
    guess = {**system.params, "l": 1.3}
    result = jl.fit(system, data, params=guess, trainable={"l"}, positive={"l"},
                    optimizer=optax.lbfgs(), steps=30)
    result.params["l"]  # ≈ 2.0
    ```
    """
    single = isinstance(data, Observations)
    data = _as_data(data)
    params = _check_params(system, params)
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"`steps` must be a positive integer, got {steps!r}.")
    trainable = _mask(True if trainable is None else trainable, params, "trainable")
    trainable = jtu.tree_map(
        lambda t, x: t and eqx.is_inexact_array(x), trainable, params
    )
    positive = _mask(False if positive is None else positive, params, "positive")
    for (path, x), t, p in zip(
        jtu.tree_leaves_with_path(params),
        jtu.tree_leaves(trainable),
        jtu.tree_leaves(positive),
        strict=True,
    ):
        if t and p and not np.all(np.asarray(x) > 0):
            raise ValueError(
                f"positive param {jtu.keystr(path)} must start > 0 (it is fitted "
                f"as its logarithm), got {np.asarray(x)}."
            )
    if not any(jtu.tree_leaves(trainable)) and not fit_initial_state and segments == 1:
        raise ValueError(
            "nothing to fit: no trainable params and fit_initial_state=False."
        )
    layouts = [_layout(d, segments) for d in data]
    problem = _Problem(
        system,
        eqx.filter(params, trainable, inverse=True),
        positive,
        layouts,
        [(layout.starts[0][0], layout.starts[1][0]) for layout in layouts],
        fit_initial_state,
        jnp.asarray(continuity_weight),
        _options(adjoint, solver, rtol, atol, max_steps),
    )
    theta = (
        _encode(params, trainable, positive),
        [layout.starts for layout in layouts],
    )
    optimizer = optax.adam(1e-2) if optimizer is None else optimizer
    optimizer = optax.with_extra_args_support(optimizer)
    theta = _strong(theta)
    opt_state = _strong(optimizer.init(eqx.filter(theta, eqx.is_array)))

    losses = np.empty(steps)
    start = time.perf_counter()
    report = {int(k) for k in np.linspace(0, steps - 1, min(steps, 11))}
    for k in range(steps):
        new_theta, new_state, loss, codes, grad_finite = _step(
            theta, opt_state, problem, optimizer
        )
        loss = float(loss)
        if k == 0 and progress:
            print(
                f"jl.fit: compiled (and ran step 1) in {time.perf_counter() - start:.1f} s",
                flush=True,
            )
        _check_finite(loss, bool(grad_finite), codes, k, steps, losses, max_steps)
        losses[k] = loss
        theta, opt_state = new_theta, new_state
        if progress and k in report:
            print(
                f"jl.fit: step {k + 1}/{steps}, loss {loss:.6e}, "
                f"{time.perf_counter() - start:.1f} s",
                flush=True,
            )
    final, codes = _step(theta, opt_state, problem, optimizer)[2:4]
    _check_finite(float(final), True, codes, steps, steps, losses, max_steps)

    unknowns, starts = theta
    if not fit_initial_state:
        starts = [
            (q.at[0].set(q0), qd.at[0].set(qd0))
            for (q, qd), (q0, qd0) in zip(starts, problem.initial, strict=True)
        ]
    fitted = _decode(unknowns, problem.fixed, positive)
    q0 = [q[0] for q, _ in starts]
    qd0 = [qd[0] for _, qd in starts]
    return FitResult(
        fitted,
        eqx.tree_at(lambda s: s.params, system, fitted),
        losses,
        float(final),
        q0[0] if single else q0,
        qd0[0] if single else qd0,
        starts,
    )


def _check_finite(loss, grad_finite, codes, k, steps, losses, max_steps) -> None:
    if np.isfinite(loss) and grad_finite:
        return
    what = "loss" if not np.isfinite(loss) else "gradient of the loss"
    where = f"at step {k}" if k < steps else "after the last step"
    codes = np.asarray(codes)
    failed = codes != 0
    if failed.any():
        message = _messages(max_steps)[int(codes[failed][0])]
        cause = f": {int(failed.sum())} of {codes.size} solves failed. {message}"
    else:
        cause = "."
    last = (
        f" The last finite loss was {losses[k - 1]:.6e} at step {k - 1}."
        if k > 0
        else ""
    )
    raise FloatingPointError(
        f"jl.fit: the {what} is not finite ({loss}) {where} of {steps}{cause}{last} "
        "Try a smaller learning rate, a better starting guess, more `segments`, "
        "or `positive=` for params that must stay positive."
    )
