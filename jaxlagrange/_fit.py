"""`fit`: fit a system's params (and initial states) to observed trajectories.

The optimizer sees an unconstrained vector of unknowns: the trainable params
(positive ones as their logarithm, so that a step can never make a mass or a
length negative) and the starting state of every shooting segment but the held
first one. By default Levenberg–Marquardt solves the least-squares problem on
the residuals; the solve loops and the covariance are in `_fit_solvers.py`.
"""

import time
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import diffrax
import equinox as eqx
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
from ._fit_solvers import (
    _check_finite,
    _covariance,
    _covariance_setup,
    _jacobian_mode,
    _optax_loop,
    _optimistix_solve,
    _strong,
)
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
