"""How `fit` runs its optimizer: one driver per family, chosen once (`driver_of`).

`LeastSquares` runs an optimistix least-squares solver or minimiser as one
compiled program (the covariance at its end, in the same program); `Optax` runs
an optax optimizer as a Python loop over one compiled step, so that a
non-finite loss is stopped at once, naming the step. Both return a `Solved`.
"""

import abc
import sys
import time
from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import numpy as np
import optax
import optimistix as optx

from .. import _programs
from .._progress import progress_bar
from .._results import messages_of
from .._trajectory import result_messages
from ._solvers import STALLED, optax_step, solve_and_decode, strong, unknowns


class Solved(NamedTuple):
    """What a driver hands back to `fit`."""

    theta: Any
    losses: np.ndarray
    count: int
    converged: bool
    solver_result: str
    # The Gauss–Newton covariance and the decoded result where the solve
    # computed them in its program, else None (`fit` computes them).
    gauss_newton: Any
    decoded: Any
    stopped_early: bool  # a solver with a tolerance stopped before meeting it


class AbstractDriver(eqx.Module):
    """Runs the solve of a prepared problem from the unknowns `theta`."""

    @abc.abstractmethod
    def run(self, theta, problem, setup, trainable, hopeless) -> Solved:
        """Fit from `theta`; a stalled fit stops above the loss `hopeless`."""


class LeastSquares(AbstractDriver):
    """An optimistix least-squares solver or minimiser, one program the CLI keeps."""

    solver: optx.AbstractLeastSquaresSolver | optx.AbstractMinimiser
    steps: int
    progress: bool
    jacobian: str
    forward_adjoint: bool  # no `adjoint` given: forward mode where the Jacobian is
    callback: Any = None
    near: bool = False  # the default solver: stop once within the noise (`_near`)

    def run(self, theta, problem, setup, trainable, hopeless) -> Solved:
        start = time.perf_counter()
        # Forward mode costs one tangent per unknown, reverse one cotangent per
        # residual: few unknowns (physical params, segment starts) go forward.
        auto = "fwd" if unknowns(theta) <= _FORWARD_MAX else "bwd"
        mode = {"forward": "fwd", "reverse": "bwd"}.get(self.jacobian, auto)
        if mode == "fwd" and self.forward_adjoint:
            problem = problem.forward()
        # One traced program, the decoding of its result in it: no eager steps
        # (each a small compile) after it.
        args = (theta, problem, self.solver, self.steps, mode, setup, trainable)
        more = (self.callback, np.asarray(hopeless, float), self.near)
        out = _programs.call("fit.solve", solve_and_decode, *args, *more)
        (theta, losses, last, codes, code, count, gauss_newton), decoded = out
        count, code, name = int(count), int(code), type(self.solver).__name__
        losses = np.asarray(losses)[:count]
        if self.progress:
            print(
                f"jl.fit: {name} ran {count} steps in "
                f"{time.perf_counter() - start:.1f} s (compile included)",
                flush=True,
            )
        _check_finite(problem, count, losses, float(last), True, theta, codes, count)
        result = solver_message(code)
        return Solved(
            theta, losses, count, code == 0, result, gauss_newton, decoded, code != 0
        )


_FORWARD_MAX = 128


class Optax(AbstractDriver):
    """An optax optimizer: `steps` compiled steps (a line search gets the loss)."""

    optimizer: optax.GradientTransformation
    steps: int
    progress: bool
    callback: Any = None

    def run(self, theta, problem, setup, trainable, hopeless) -> Solved:
        # No `hopeless` stop: an optax fit may cross a plateau.
        start, steps, losses = time.perf_counter(), self.steps, np.empty(self.steps)
        check = partial(_check_finite, problem, steps, losses)
        optimizer = optax.with_extra_args_support(self.optimizer)
        opt_state = strong(optimizer.init(eqx.filter(theta, eqx.is_array)))
        bar = progress_bar(steps, enabled=self.progress, unit="step")
        try:
            for k in range(steps):
                new_theta, new_state, loss, codes, gradient = optax_step(
                    theta, opt_state, problem, optimizer
                )
                loss = float(loss)
                if k == 0 and self.progress:
                    bar.write(
                        f"jl.fit: compiled (and ran step 1) in "
                        f"{time.perf_counter() - start:.1f} s",
                        file=sys.stderr,
                    )
                check(loss, bool(np.isfinite(gradient)), theta, codes, k)
                losses[k] = loss
                theta, opt_state = new_theta, new_state
                if self.callback is not None:
                    self.callback(problem.decoded(theta)[0])
                bar.set_postfix(loss=f"{loss:.4e}", refresh=False)
                bar.update()
        finally:
            bar.close()
        final, codes, gradient = optax_step(theta, opt_state, problem, optimizer)[2:]
        check(float(final), True, theta, codes, steps)
        # optax has no stopping rule: converged means the gradient vanished.
        converged = bool(gradient <= 1e-6)
        result = "converged" if converged else "ran all steps"
        return Solved(theta, losses, steps, converged, result, None, None, False)


def driver_of(
    optimizer, *, steps, jacobian, adjoint, progress, callback=None
) -> AbstractDriver:
    """The driver of `fit`'s `optimizer` (None: Levenberg–Marquardt), checked."""
    if not (isinstance(steps, int) and steps >= 1):
        raise ValueError(f"`steps` must be a positive integer, got {steps!r}.")
    if jacobian not in ("auto", "forward", "reverse"):
        raise ValueError(
            f"`jacobian` must be 'auto', 'forward' or 'reverse', got {jacobian!r}."
        )
    near = optimizer is None
    if near:
        optimizer = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    if isinstance(optimizer, optax.GradientTransformation):
        return Optax(optimizer, steps, progress, callback)
    if not isinstance(
        optimizer, (optx.AbstractLeastSquaresSolver, optx.AbstractMinimiser)
    ):
        raise ValueError(
            "`optimizer` must be an optax optimizer, an optimistix least-squares "
            "solver (e.g. optimistix.LevenbergMarquardt) or an optimistix minimiser "
            f"(e.g. optimistix.BFGS), got {type(optimizer).__name__}."
        )
    # A minimiser takes the gradient of the scalar loss, and Dogleg the
    # gradient Jᵀr: both transpose the Jacobian, which needs reverse mode.
    if isinstance(optimizer, (optx.AbstractMinimiser, optx.Dogleg)):
        if jacobian == "forward":
            raise ValueError(
                f"{type(optimizer).__name__} needs reverse-mode derivatives: "
                "use jacobian='reverse' or 'auto'."
            )
        jacobian = "reverse"
    return LeastSquares(
        optimizer, steps, progress, jacobian, adjoint is None, callback, near
    )


def solver_message(code: int) -> str:
    """The optimistix result `code` in one line ("successful" for 0)."""
    if code == -1:
        return STALLED
    if code == 0:
        return "successful"
    return messages_of(optx.RESULTS)[code].split(". ")[0].strip().rstrip(".")


def _check_finite(problem, steps, losses, loss, grad_finite, theta, codes, k) -> None:
    """Raise if the loss or its gradient at `theta` is not finite, naming the solves'."""
    if np.isfinite(loss) and grad_finite:
        return
    what = "loss" if not np.isfinite(loss) else "gradient of the loss"
    where = f"at step {k}" if k < steps else "after the last step"
    codes = problem.named_codes(theta, codes)
    failed = codes != 0
    if failed.any():
        message = result_messages(problem.options["max_steps"])[int(codes[failed][0])]
        # (The segments' solves take fit's `max_steps`.)
        message = message.replace(
            "jl.simulate(..., max_steps=", "jl.fit(..., max_steps="
        )
        cause = f": {int(failed.sum())} of {codes.size} solves failed. {message}"
    else:
        cause = "."
    # The history may be shorter than k (optimistix records the steps that ran),
    # and may hold non-finite trial losses: name the last finite one.
    history = np.asarray(losses)[: min(k, len(losses))]
    finite = np.flatnonzero(np.isfinite(history))
    last = (
        f" The last finite loss was {history[finite[-1]]:.6e} at step {finite[-1]}."
        if finite.size
        else ""
    )
    raise FloatingPointError(
        f"jl.fit: the {what} is not finite ({loss}) {where} of {steps}{cause}{last} "
        "Try a smaller learning rate, a better starting guess, more `segments`, "
        "or `positive=` for params that must stay positive."
    )
