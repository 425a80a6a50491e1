"""`fit`: fit a system's params (and initial states) to observed trajectories.

The optimizer sees an unconstrained vector of unknowns: the trainable params
(positive ones as their logarithm, so that a step can never make a mass or a
length negative) and the starting state of every shooting segment but a held
first one. `_problem.prepare` builds the problem from the checked arguments,
`_drivers.driver_of` chooses how to solve it (Levenberg–Marquardt by default),
and `fit` reads the solution's quality and uncertainties.
"""

import warnings
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jax.flatten_util import ravel_pytree

from .._cache import cached
from .._custom_types import Array, Params, ScalarLike
from .._system import LagrangianSystem
from . import _consistent
from ._drivers import driver_of
from ._loss import Observations, check_params, solve_options
from ._problem import check_not_traced, mask, prepare
from ._quality import (
    flat_names,
    hopeless_loss,
    quality,
    start_params,
    warn_not_converged,
    warn_undetermined,
    warn_unidentifiable,
    weak_directions,
)
from ._solvers import covariance_of, covariance_setup, unknowns


class FitResult(eqx.Module):
    """The result of `fit`.

    **Attributes:**

    - `params`: the fitted params, a pytree like `system.params`.
    - `system`: the system with the fitted params.
    - `losses`: one loss per solver step, a NumPy array: for an optax optimizer the
        loss before each step, shape (steps,); for an optimistix solver the loss at
        the point each step evaluated (the first step evaluates the starting guess;
        a later one a trial point, which Levenberg–Marquardt keeps only if it
        lowers the loss), shape (`steps` that ran,).
    - `loss`: the loss at the fitted params (and states): χ²/N, the mean of the
        N squared weighted residuals (not half of it), so that σ̂² below is
        loss·N/(N − P); for the half-mean ½χ²/N of some least-squares codes it
        reads 2·loss·N/(N − P), the same estimate.
    - `q0`, `qd0`: the initial state of each observed trajectory (fitted, or
        the data's where `fit_initial_state` held it); arrays of shape (n,) for
        one `Observations`, lists of them for a sequence.
    - `starts`: per observed trajectory, the start states `(q, qd)` of its
        shooting segments, each of shape (segments, n).
    - `stderr`: standard errors of the fitted params, a pytree like `params` (0 for
        leaves that were not trained), the square roots of the diagonal of
        `covariance`; inf for a param the data cannot determine (one that does
        not change the motion, or one in a combination of params they do not
        determine: see `unidentifiable`), named by a warning.
    - `covariance`: the Gauss–Newton covariance σ̂² (JᵀJ)⁻¹ of the flattened
        trained params (in tree order), shape (p, p), from the Jacobian J of the
        residuals (in units of `Observations.sigma`) at the optimum, with the
        segment starts as nuisance unknowns. With σ given, the residuals are in
        units of the noise and σ̂² = 1; without, σ̂² = χ² / (N − P) is estimated
        from the misfit (N weighted observations, P unknowns).
        NaN beyond 1024 unknowns, and where combinations of params are not
        identifiable (JᵀJ singular); a single param that does not change the
        motion has variance inf (and NaN covariances) without spoiling the rest.
    - `converged`: the solver's own flag: whether it met its tolerance
        (optimistix; the default's also within the noise: see `optimizer`), or
        the gradient vanished to 1e-6 (optax, which has no stopping rule). It
        says nothing of how well the model fits: see `warning`.
    - `steps`: how many solver steps ran.
    - `solver_result`: the optimistix solver's result in words ("successful",
        "The maximum number of steps was reached in the nonlinear solver", ...);
        for optax "converged" or "ran all steps". "stalled: ..." for an
        optimistix fit stopped as hopeless: its lowest loss fell by less than 0.1%
        over 25 steps while far above a good fit's (χ²_red above 10 times the
        poor fit's limit with σ, else an RMS residual above 20% of `data_scale`);
        it is not `converged`, and a fit converging slowly but steadily is never
        stopped so.
    - `chi2_red`: the reduced χ² = χ² / (N − P) at the optimum when every
        `Observations` has `sigma` (about 1 for a good fit), else None.
    - `rms`: the RMS residual of the coordinates, in the data's units (weighted
        as the loss weighs them).
    - `data_scale`: the RMS spread of the observed coordinates about their time
        means, to judge `rms` by.
    - `warning`: None for a fit whose misfit is consistent with the noise (χ²_red
        not far above 1), or without `sigma` small against the data (`rms` ≤ 5%
        of `data_scale`); else the text of the warning `fit` issued, saying what
        to try (more segments, other starts).
    - `start_losses`: with `starts=`, the final loss from each starting guess
        (inf where that fit failed); None otherwise.
    - `unidentifiable`: what the data cannot determine, each a direction in
        param space as {name: coefficient} (a unit vector in the params' own
        units): {name: 1.0} for a param that does not change the motion, and
        each combination along which the residuals barely change (an eigenvalue
        of the params' precision, scaled to a unit diagonal, below 1e-8 of the
        largest; e.g. {"a": 0.89, "b": -0.45} for params that enter only as the
        product a·b). Every param in them has an inf standard error, and
        `fit` warns, naming them.
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
    solver_result: str = ""
    chi2_red: float | None = None
    rms: float = float("nan")
    data_scale: float = float("nan")
    warning: str | None = None
    start_losses: np.ndarray | None = None
    unidentifiable: list[dict[str, float]] = eqx.field(default_factory=list)


@cached
def fit(
    system: LagrangianSystem,
    data: Observations | Sequence[Observations],
    *,
    params: Params | None = None,
    optimizer: optax.GradientTransformation
    | optx.AbstractLeastSquaresSolver
    | optx.AbstractMinimiser
    | None = None,
    steps: int = 1000,
    trainable: Any = None,
    positive: Any = None,
    fit_initial_state: bool | None = None,
    segments: int = 1,
    continuity_weight: ScalarLike = 1.0,
    adjoint: diffrax.AbstractAdjoint | None = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: ScalarLike | None = None,
    atol: ScalarLike | None = None,
    max_steps: int = 4096,
    progress: bool = False,
    jacobian: str = "auto",
    starts: Any = None,
    consistent: bool | None = None,
    callback: Callable[[Params], Any] | None = None,
) -> FitResult:
    """Fit the params of `system` (and optionally initial states) to observed data.

    Minimizes `fit_loss`, the weighted mean squared misfit between simulated and
    observed coordinates (and velocities where observed): by Levenberg–Marquardt
    (optimistix) by default, or another optimistix solver or an optax optimizer.

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
        Gauss–Newton steps for a few physical params); it also stops, converged,
        once a Gauss–Newton step would move the unknowns by less than 1e-3 of
        their standard errors (that solver given explicitly does not). Any
        optimistix least-squares solver (`GaussNewton`, `Dogleg`, ...) or
        minimiser (`BFGS`, on the loss) is used the same way, in one compiled
        solve; any optax optimizer runs `steps` gradient steps (line-search
        optimizers such as `optax.lbfgs()` get the loss function they need).
    - `steps`: the most solver steps (optimistix), or the number of optimizer
        steps (optax).
    - `trainable`: which params to fit: None or True (all floating-point array
        leaves; other leaves, such as an MLP's activation, are never trained), a
        collection of top-level names of dict params (`{"l", "c"}`), or a pytree
        of bools with the structure of `system.params` or a prefix of it.
    - `positive`: which params are positive (masses, lengths): given like
        `trainable` (default none). They are fitted as their logarithm, so they
        stay positive and are scaled sensibly; they must start > 0.
    - `fit_initial_state`: whether to fit each trajectory's initial state (q0,
        qd0) too. The default, None, fits it unless every `Observations` gives
        it (`q0` and `qd0`): a state read off the data's first sample carries
        that sample's noise, which, held, biases every fitted param. False holds
        it at the data's.
    - `segments`: multiple shooting: cut each observed trajectory into this many
        segments, each simulated from its own fitted start state (initialized
        from the data), with `continuity_weight` on the jumps between them. Use it
        for long or chaotic data (e.g. 10 s of a double pendulum).
    - `continuity_weight`: the weight of the continuity penalty, a finite number
        ≥ 0.
    - `adjoint`: how gradients go through the solves. The default,
        `diffrax.RecursiveCheckpointAdjoint()`, differentiates the solver's own
        steps: exact gradients of the computed loss (the finite-difference checks
        agree to 1e-6 and better), memory logarithmic in `max_steps`.
        `diffrax.BacksolveAdjoint()` solves an adjoint ODE backwards in O(1)
        memory; its gradient is only as accurate as that solve, and it is
        unreliable for chaotic systems over long segments (the backward solve
        is unstable). Their costs are compared by `benchmarks/bench_fit.py`.
    - `solver`, `rtol`, `atol`, `max_steps`: as for `jl.simulate`, per segment
        (the tolerances' default follows the precision: 1e-8 in float64).
    - `progress`: print the loss about ten times during the fit.
    - `jacobian`: how an optimistix solver gets the residuals' Jacobian:
        "forward" (forward-mode through the solves, with `diffrax.ForwardMode()`
        unless `adjoint` is given; one tangent per unknown), "reverse" (one
        cotangent per residual), or "auto": forward up to 128 unknowns (params
        and segment starts), reverse beyond (neural Lagrangians).
    - `starts`: several starting guesses, fitted one after the other (the compiled
        solve is reused), keeping the fit with the lowest loss: a list of params
        (dicts may name only some params, the rest from `params`), or a dict of
        param names to arrays of starting values, e.g. `{"omega": [4, 6, 8]}`.
        A rugged loss (long or chaotic data) has local minima; a spread of starts
        with a few `segments` finds the global one more reliably than one start.

    - `consistent`: keep a loaded model's bodies physically consistent (the
        default, None: on for params with MuJoCo's inertial fields, from
        `jl.mujoco.load`). Where `trainable` includes `body_ipos`,
        `body_inertia` or `body_iquat`, the ten standard inertial params of
        every body (mass, centre of mass, full inertia tensor) are fitted
        together as the log-Cholesky factor of its pseudo-inertia, so that
        every iterate has mass > 0 and a positive definite inertia that obeys
        the triangle inequalities; `body_mass` alone is fitted as logarithms.
        The result is in the model's terms (principal moments in
        `body_inertia`, their axes in `body_iquat`; write it to a model file
        with `jl.mujoco.save`); `stderr` of `body_iquat` is NaN (a rotation),
        and `covariance` and `unidentifiable` are over each body's ten
        standard params `m[b]`, `mc_x[b]`… (m times the centre), `I_xx[b]`…
        (the inertia about the body frame's origin), then the other trained
        params. False fits the fields as they are.
    - `callback`: called with the params (a pytree like `params`) at each
        point the solver evaluates (each optax step), e.g. to record the path.

    A fit whose misfit is far above the noise (χ²_red ≫ 1 with `sigma`), or
    without `sigma` not small against the data, issues a `UserWarning` saying so
    and what to try; the numbers are on the result (`chi2_red`, `rms`,
    `data_scale`, `warning`).

    **Returns:** a `FitResult`, with standard errors and the covariance of the
    fitted params.

    **Raises:**

    - `ValueError` for bad data (see `Observations`), `params` whose structure
        differs from `system.params`, unknown names in `trainable`/`positive`,
        positive params that are not > 0, a bad `segments`.
    - `ValueError` for a `continuity_weight` that is negative or not finite, and
        for bad `starts` (also starting values for a param that `trainable`
        holds fixed).
    - `ValueError`, before anything is compiled, for params with a non-finite
        value, integer params named in `trainable`, and data whose number of
        coordinates does not fit the system (its mass matrix is singular there);
        `sigma` given for some observed trajectories but not all; a held initial
        state that is a sample of weight 0, or a given q0 off the holonomic
        constraints that no fitted param moves; and for a traced call (under
        `jax.jit`, `vmap` or `grad`: use `fit_loss` there).
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
    check_not_traced(system, params, data, starts, continuity_weight)
    params = check_params(system, params)
    system, params, trainable, positive = _consistent_of(
        system, params, trainable, positive, consistent, starts
    )
    driver = driver_of(
        optimizer,
        steps=steps,
        jacobian=jacobian,
        adjoint=adjoint,
        progress=progress,
        callback=None if callback is None else _Reported(callback),
    )
    one = partial(
        _fit_from,
        system,
        data,
        driver=driver,
        trainable=trainable,
        positive=positive,
        fit_initial_state=fit_initial_state,
        segments=segments,
        continuity_weight=continuity_weight,
        options=solve_options(adjoint, solver, rtol, atol, max_steps),
    )
    if starts is None:
        return one(params)
    begins = start_params(starts, params, trainable)
    return _best_of(one, [check_params(system, start) for start in begins])


class _Reported(eqx.Module):
    """`callback` of the params in the user's terms."""

    # A Module, not a closure: equal for an equal callback, so a second fit
    # reuses the compiled solve.
    callback: Callable[[Params], Any]

    def __call__(self, params):
        return self.callback(_consistent.public(params))


def _fit_from(system, data, params, *, driver, **settings) -> FitResult:
    """One fit, from the starting `params`."""
    single = isinstance(data, Observations)
    problem, theta, trainable, data = prepare(system, data, params, **settings)
    setup = covariance_setup(theta, problem, trainable)
    hopeless = hopeless_loss(data, problem, unknowns(theta))
    solved = driver.run(theta, problem, setup, trainable, hopeless)
    theta, covariance, decoded = solved.theta, solved.gauss_newton, solved.decoded
    if covariance is None:  # the optax path, or past _COVARIANCE_MAX
        covariance, decoded = covariance_of(theta, problem, setup, trainable)
    final, chi, covariance, raw, dead, precision = covariance
    fitted, segment_starts, (q0, qd0), stderr = decoded
    consistent = isinstance(fitted, _consistent.Inertial)
    if consistent:
        fitted, trainable, stderr, covariance, precision, dead, names = (
            _consistent.reported(fitted, trainable, stderr, covariance, precision, dead)
        )
    else:
        names = flat_names(eqx.filter(fitted, trainable))
    alone, weak = weak_directions(precision, names, dead)
    dead = [n for n, d in zip(names, np.asarray(dead), strict=True) if d] + alone
    weak_names = [n for d in weak for n in d] + dead
    if consistent:
        weak_names = _consistent.undetermined(weak_names)
    stderr = _undetermined(stderr, trainable, weak_names)
    misfit = quality(data, problem, chi, raw, unknowns(theta))
    if misfit.warning is not None:
        warnings.warn(misfit.warning, UserWarning, stacklevel=3)
    warn_unidentifiable(dead, weak)
    # (A consistent fit's `body_iquat` has no per-component error: NaN, said.)
    warn_undetermined({**stderr, "body_iquat": None} if consistent else stderr)
    if solved.stopped_early:
        name = type(driver.solver).__name__
        warn_not_converged(name, solved.solver_result, solved.count)
    return FitResult(
        fitted,
        problem.system.with_params(fitted),
        solved.losses,
        float(final),
        q0[0] if single else q0,
        qd0[0] if single else qd0,
        segment_starts,
        stderr,
        covariance,
        solved.converged,
        solved.count,
        solved.solver_result,
        **misfit._asdict(),
        unidentifiable=[{n: 1.0} for n in dead] + weak,
    )


def _consistent_of(system, params, trainable, positive, consistent, starts):
    """`fit`'s inputs, the bodies' inertial params consistent unknowns if asked."""
    loaded = isinstance(params, Mapping)
    loaded = loaded and all(k in params for k in _consistent.INERTIAL)
    if consistent not in (None, True, False) or (consistent and not loaded):
        raise ValueError(
            "`consistent` must be None, True or False; True needs a loaded model's "
            f"params (`jl.mujoco.load`: {', '.join(_consistent.INERTIAL)}), got "
            f"{consistent!r}" + ("" if loaded else " for other params") + "."
        )
    if consistent is False or not loaded:
        return system, params, trainable, positive
    trained = mask(True if trainable is None else trainable, params, "trainable")
    wrapped = _consistent.wrap(params, trained)
    if wrapped is None:
        return system, params, trainable, positive
    if starts is not None:
        raise ValueError(
            "`starts` is not supported with consistent inertial params: pass "
            "consistent=False, or fit from each start in turn."
        )
    params, trainable = wrapped
    fixed = mask(False if positive is None else positive, params.rest, "positive")
    inertial = _consistent.INERTIAL  # consistency holds them positive
    positive = {k: k not in inertial and v for k, v in fixed.items()}
    positive = _consistent.Inertial(False, positive)
    return system.with_params(params), params, trainable, positive


def _undetermined(stderr, trainable, names):
    """`stderr` with inf for the trained params `names` (not determined)."""
    if not names:
        return stderr
    flat, unflatten = ravel_pytree(eqx.filter(stderr, trainable))
    bad = np.isin(flat_names(eqx.filter(stderr, trainable)), names)
    return eqx.combine(unflatten(jnp.where(bad, jnp.inf, flat)), stderr)


def _best_of(fit_from, starts) -> FitResult:
    """`fit_from` each start: the best result, its warnings again, all final losses."""
    results, caught, errors = [], [], []
    for params in starts:
        with warnings.catch_warnings(record=True) as issued:
            warnings.simplefilter("always")
            try:
                results.append(fit_from(params))
            except FloatingPointError as e:
                errors.append(e)
                results.append(None)
        caught.append(issued)
    if len(errors) == len(results):
        raise errors[0]
    losses = np.array([np.inf if r is None else r.loss for r in results])
    losses = np.where(np.isfinite(losses), losses, np.inf)
    best = int(np.argmin(losses))
    for w in caught[best]:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return eqx.tree_at(
        lambda r: r.start_losses, results[best], losses, is_leaf=lambda x: x is None
    )
