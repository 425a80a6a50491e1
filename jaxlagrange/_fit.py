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
import optimistix as optx
from jax.flatten_util import ravel_pytree

from ._custom_types import Array, Params, ScalarLike
from ._eom import mass_matrix
from ._fit_loss import (
    Observations,
    _as_data,
    _check_params,
    _layout,
    _objective,
    _options,
    _residuals,
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
    - `stderr`: standard errors of the fitted params, a pytree like `params` (0 for
        leaves that were not trained), the square roots of the diagonal of
        `covariance`.
    - `covariance`: the Gauss–Newton covariance σ̂² (JᵀJ)⁻¹ of the flattened
        trained params (in tree order), shape (p, p), from the Jacobian J of the
        residuals (in units of `Observations.sigma`) at the optimum, with the
        segment starts as nuisance unknowns. With σ given, the residuals are in
        units of the noise and σ̂² = 1; without, σ̂² = χ² / (N − P) is estimated
        from the misfit (N weighted observations, P unknowns).
        NaN beyond 1024 unknowns, and where the params are not identifiable
        (JᵀJ singular).
    - `converged`: whether the solver met its tolerance (optimistix), or the
        gradient vanished to 1e-6 (optax, which has no stopping rule).
    - `steps`: how many solver steps ran.
    """

    params: Params
    system: LagrangianSystem
    losses: np.ndarray
    loss: float
    q0: Any
    qd0: Any
    starts: list[tuple[Array, Array]]
    stderr: Params
    covariance: Array
    converged: bool
    steps: int


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

    @property
    def total(self):
        """The summed weights of all observed quantities (N)."""
        return sum(
            layout.total * (1 if layout.qd is None else 2) for layout in self.layouts
        )

    def unpack(self, theta):
        """The system with the decoded params, and the segment starts."""
        unknowns, starts = theta
        params = _decode(unknowns, self.fixed, self.positive)
        system = eqx.tree_at(lambda s: s.params, self.system, params)
        if not self.fit_initial_state:
            # The held initial state is not an unknown: only the later segments'.
            starts = [
                (jnp.concatenate([q0[None], q]), jnp.concatenate([qd0[None], qd]))
                for (q, qd), (q0, qd0) in zip(starts, self.initial, strict=True)
            ]
        return system, starts

    def loss(self, theta):
        system, starts = self.unpack(theta)
        return _objective(
            system, self.layouts, starts, self.continuity_weight, self.options
        )

    def residuals(self, theta):
        system, starts = self.unpack(theta)
        return _residuals(
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
    leaves = [jnp.max(jnp.abs(g), initial=0.0) for g in jtu.tree_leaves(grads)]
    largest = jnp.max(jnp.stack(leaves)) if leaves else jnp.zeros(())
    return theta, opt_state, loss, codes, _all_finite(grads), largest


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
    jacobian: str = "auto",
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
    - `optimizer`: the default, `optimistix.LevenbergMarquardt(rtol=1e-10,
        atol=1e-10)`, solves the least-squares problem on the residuals (a few
        Gauss–Newton steps for a few physical params). Any optimistix
        least-squares solver (`GaussNewton`, `Dogleg`, ...) or minimiser (`BFGS`,
        on the loss) is used the same way, in one compiled solve; any optax
        optimizer runs `steps` gradient steps (line-search optimizers such as
        `optax.lbfgs()` get the loss function they need).
    - `steps`: the most solver steps (optimistix), or the number of optimizer
        steps (optax).
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
    - `jacobian`: how an optimistix solver gets the residuals' Jacobian:
        "forward" (forward-mode through the solves, with `diffrax.ForwardMode()`
        unless `adjoint` is given; one tangent per unknown), "reverse" (one
        cotangent per residual), or "auto": forward up to 128 unknowns (params
        and segment starts), reverse beyond (neural Lagrangians).

    **Returns:** a `FitResult`, with standard errors and the covariance of the
    fitted params.

    **Raises:**

    - `ValueError` for bad data (see `Observations`), `params` whose structure
        differs from `system.params`, unknown names in `trainable`/`positive`,
        positive params that are not > 0, a bad `segments`.
    - `ValueError`, before anything is compiled, for params with a non-finite
        value, integer params named in `trainable`, and data whose number of
        coordinates does not fit the system (its mass matrix is singular there).
    - `FloatingPointError` naming the step at which the loss (or its gradient)
        became non-finite, e.g. because a solve diverged; the message says why.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0})
    ts = jnp.linspace(0.0, 3.0, 61)
    traj = jl.simulate(system, q0, qd0, t1=3.0, saveat=ts)
    data = jl.Observations(ts, traj.q, traj.qd)
    guess = {**system.params, "l": 1.3}
    result = jl.fit(system, data, params=guess, trainable={"l"}, positive={"l"})
    result.params["l"], result.stderr["l"]  # ≈ 2.0, and its standard error
    ```
    """
    single = isinstance(data, Observations)
    data = _as_data(data)
    params = _check_params(system, params)
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"`steps` must be a positive integer, got {steps!r}.")
    explicit = trainable is not None and trainable is not True
    trainable = _mask(True if trainable is None else trainable, params, "trainable")
    integers = [
        jtu.keystr(path)
        for (path, x), t in zip(
            jtu.tree_leaves_with_path(params), jtu.tree_leaves(trainable), strict=True
        )
        if t and eqx.is_array(x) and not eqx.is_inexact_array(x)
    ]
    if integers and explicit:
        raise ValueError(
            f"trainable param {integers[0]} has an integer dtype and cannot be "
            "fitted: give it as a float (e.g. 2.0 instead of 2)."
        )
    trainable = jtu.tree_map(
        lambda t, x: t and eqx.is_inexact_array(x), trainable, params
    )
    _check_guess(system, params, data)
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
        hint = f" (integer params are never trained: {integers})" if integers else ""
        raise ValueError(
            f"nothing to fit: no trainable params{hint} and fit_initial_state=False."
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
        [
            layout.starts if fit_initial_state else tuple(x[1:] for x in layout.starts)
            for layout in layouts
        ],
    )
    if optimizer is None:
        optimizer = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    theta = _strong(theta)
    start = time.perf_counter()
    setup = _covariance_setup(theta, problem, trainable, positive, data)
    covariance = None
    if isinstance(optimizer, (optx.AbstractLeastSquaresSolver, optx.AbstractMinimiser)):
        size = ravel_pytree(eqx.filter(theta, eqx.is_array))[0].shape[0]
        mode = _jacobian_mode(jacobian, size)
        # A minimiser takes the gradient of the scalar loss, and Dogleg the
        # gradient Jᵀr: both transpose the Jacobian, which needs reverse mode.
        if isinstance(optimizer, (optx.AbstractMinimiser, optx.Dogleg)):
            if jacobian == "forward":
                raise ValueError(
                    f"{type(optimizer).__name__} needs reverse-mode derivatives: "
                    "use jacobian='reverse' or 'auto'."
                )
            mode = "bwd"
        if adjoint is None:
            adjoint = diffrax.ForwardMode() if mode == "fwd" else None
            problem = eqx.tree_at(
                lambda p: p.options,
                problem,
                _options(adjoint, solver, rtol, atol, max_steps),
            )
        theta, losses, codes, done, count, gauss_newton = _optimistix_solve(
            theta, problem, optimizer, steps, mode, setup
        )
        if gauss_newton is not None:
            final, _, covariance = gauss_newton
        losses = np.asarray(losses)
        if progress:
            print(
                f"jl.fit: {type(optimizer).__name__} ran {int(count)} steps in "
                f"{time.perf_counter() - start:.1f} s (compile included)",
                flush=True,
            )
        _check_finite(float(losses[-1]), True, codes, steps, steps, losses, max_steps)
        converged, count = bool(done), int(count)
    elif isinstance(optimizer, optax.GradientTransformation):
        theta, losses, converged = _optax_loop(
            theta, problem, optimizer, steps, progress, max_steps, start
        )
        count = steps
    else:
        raise ValueError(
            "`optimizer` must be an optax optimizer, an optimistix least-squares "
            "solver (e.g. optimistix.LevenbergMarquardt) or an optimistix minimiser "
            f"(e.g. optimistix.BFGS), got {type(optimizer).__name__}."
        )

    if covariance is None:  # the optax path, or past _COVARIANCE_MAX
        final, _, covariance = _covariance(theta, problem, setup)
    system_fit, starts = problem.unpack(theta)
    fitted = system_fit.params
    q0 = [q[0] for q, _ in starts]
    qd0 = [qd[0] for _, qd in starts]
    trained = eqx.filter(fitted, trainable)
    _, unflatten = ravel_pytree(trained)
    stderr = unflatten(jnp.sqrt(jnp.clip(jnp.diagonal(covariance), 0.0)))
    stderr = eqx.combine(
        stderr,
        jtu.tree_map(
            lambda x: jnp.zeros_like(x) if eqx.is_array(x) else None,
            eqx.filter(fitted, trainable, inverse=True),
        ),
    )
    return FitResult(
        fitted,
        system_fit,
        losses,
        float(final),
        q0[0] if single else q0,
        qd0[0] if single else qd0,
        starts,
        stderr,
        covariance,
        converged,
        count,
    )


def _check_guess(system: LagrangianSystem, params, data) -> None:
    """Name a non-finite starting guess or data that do not fit the system."""
    for path, x in jtu.tree_leaves_with_path(params):
        if eqx.is_inexact_array(x) and not np.all(np.isfinite(np.asarray(x))):
            raise ValueError(
                f"the starting guess of param {jtu.keystr(path)} is not finite: "
                f"{np.asarray(x)}."
            )
    obs = data[0]
    n = obs.q.shape[1]
    guess = eqx.tree_at(lambda s: s.params, system, params)
    qd = obs.qd[0] if obs.qd is not None else jnp.zeros(n)
    try:
        mass = np.asarray(mass_matrix(guess, obs.q[0], qd, obs.ts[0]))
        np.linalg.cholesky(mass)
        good = bool(np.all(np.isfinite(mass)))
    except (np.linalg.LinAlgError, ValueError, TypeError, IndexError):
        good = False
    if not good:
        raise ValueError(
            f"`data` has n = {n} coordinates, but at its first observed state the "
            "system's mass matrix (with the starting params) is not positive "
            "definite: check that the data has the system's number of coordinates "
            "and that the starting guess is physical."
        )


def _jacobian_mode(jacobian: str, size: int) -> str:
    if jacobian not in ("auto", "forward", "reverse"):
        raise ValueError(
            f"`jacobian` must be 'auto', 'forward' or 'reverse', got {jacobian!r}."
        )
    if jacobian == "auto":
        # Forward mode costs one tangent per unknown, reverse one cotangent per
        # residual: few unknowns (physical params, segment starts) go forward.
        return "fwd" if size <= _FORWARD_MAX else "bwd"
    return "fwd" if jacobian == "forward" else "bwd"


_FORWARD_MAX = 128


@eqx.filter_jit
def _optimistix_solve(theta, problem: _Problem, optimizer, steps, mode, setup):
    arrays, static = eqx.partition(theta, eqx.is_array)

    def residuals(y, _):
        r, _, codes = problem.residuals(eqx.combine(y, static))
        return r, codes

    def loss(y, _):
        value, codes = problem.loss(eqx.combine(y, static))
        return value, codes

    initial = loss(arrays, None)[0]
    options = {"jac": mode}
    if isinstance(optimizer, optx.AbstractLeastSquaresSolver):
        sol = optx.least_squares(
            residuals,
            optimizer,
            arrays,
            has_aux=True,
            max_steps=steps,
            options=options,
            throw=False,
        )
    else:
        sol = optx.minimise(
            loss, optimizer, arrays, has_aux=True, max_steps=steps, throw=False
        )
    final, codes = loss(sol.value, None)
    done = sol.result == optx.RESULTS.successful
    losses = jnp.stack([initial, final])
    theta = eqx.combine(sol.value, static)
    # The covariance in the same program: one compilation instead of two.
    gauss_newton = None if setup is None else _gauss_newton(theta, *setup)
    return theta, losses, codes, done, sol.stats["num_steps"], gauss_newton


def _optax_loop(theta, problem, optimizer, steps, progress, max_steps, start):
    optimizer = optax.with_extra_args_support(optimizer)
    opt_state = _strong(optimizer.init(eqx.filter(theta, eqx.is_array)))
    losses = np.empty(steps)
    report = {int(k) for k in np.linspace(0, steps - 1, min(steps, 11))}
    for k in range(steps):
        new_theta, new_state, loss, codes, grad_finite, _ = _step(
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
    final, codes, _, gradient = _step(theta, opt_state, problem, optimizer)[2:]
    _check_finite(float(final), True, codes, steps, steps, losses, max_steps)
    return theta, losses, bool(gradient <= 1e-6)


def _gauss_newton(theta, problem: _Problem, sigma_given: bool, logs: tuple):
    """The loss, χ²/N and the Gauss–Newton covariance of the trained params at
    `theta`; `problem` must differentiate in forward mode, `logs` flags the
    trained params fitted as logarithms (flattened)."""
    arrays, static = eqx.partition(theta, eqx.is_array)
    flat, unravel = ravel_pytree(arrays)

    def residuals(x):
        r, chi, _ = problem.residuals(eqx.combine(unravel(x), static))
        return r, (r, chi)

    jac, (r, chi) = jax.jacfwd(residuals, has_aux=True)(flat)
    size = flat.shape[0]
    # Residuals are scaled by 1/√N (N the summed weights): JᵀJ is 1/N of the
    # usual normal matrix, and χ² = N · chi.
    total = problem.total
    gram = total * (jac.T @ jac)
    dof = jnp.maximum(total - size, 1.0)
    variance = jnp.where(sigma_given, 1.0, total * chi / dof)
    factor = jax.scipy.linalg.cho_factor(gram)
    cov = variance * jax.scipy.linalg.cho_solve(factor, jnp.eye(size))
    p = len(logs)
    # Positive params are fitted as logarithms: d x = x d(log x). The trained
    # params come first in the flattened unknowns.
    scale = jnp.where(np.asarray(logs, bool), jnp.exp(flat[:p]), 1.0)
    return jnp.sum(r**2), chi, cov[:p, :p] * scale[:, None] * scale[None, :]


_covariance_jit = eqx.filter_jit(_gauss_newton)


def _covariance_setup(theta, problem, trainable, positive, data):
    """What `_gauss_newton` needs besides theta, or None past `_COVARIANCE_MAX`."""
    size = ravel_pytree(eqx.filter(theta, eqx.is_array))[0].shape[0]
    if size > _COVARIANCE_MAX:
        return None
    logs = ravel_pytree(
        jtu.tree_map(
            lambda t, pos, x: jnp.full(jnp.shape(x), bool(pos)) if t else None,
            trainable,
            positive,
            problem.system.params,
        )
    )[0]
    sigma_given = all(d.sigma is not None for d in data)
    # The Jacobian is taken in forward mode, whatever the fit's adjoint.
    forward = eqx.tree_at(
        lambda q: q.options["adjoint"], problem, diffrax.ForwardMode()
    )
    return forward, sigma_given, tuple(bool(x) for x in np.asarray(logs))


def _covariance(theta, problem, setup):
    """The loss at `theta` and the Gauss–Newton covariance of the trained params."""
    if setup is None:
        loss, _ = _loss_jit(theta, problem)
        p = ravel_pytree(eqx.filter(theta[0], eqx.is_array))[0].shape[0]
        return loss, None, jnp.full((p, p), jnp.nan)
    return _covariance_jit(theta, *setup)


# Beyond this many unknowns (e.g. a neural Lagrangian's weights) the covariance
# is not computed (NaN): it would cost a Jacobian column per unknown, and such
# fits are not identifiable parameter by parameter anyway.
_COVARIANCE_MAX = 1024


@eqx.filter_jit
def _loss_jit(theta, problem):
    return problem.loss(theta)


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
