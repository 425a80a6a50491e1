"""`finite_time_lyapunov`: the growth rate of a perturbation, by forward-mode autodiff."""

from typing import Any

import diffrax
import jax
import jax.numpy as jnp

from ._custom_types import Array, Scalar, VectorLike
from ._simulate import Trajectory, simulate
from ._system import LagrangianSystem, _as_state


def _tangent_solve(
    system: LagrangianSystem, q0: Array, qd0: Array, **options: Any
) -> tuple[Trajectory, Array]:
    """The trajectory from (q0, qd0), and the growth of a unit phase-space tangent.

    The tangent δ(0) = (1, ..., 1)/√(2n) in (q, qd) is pushed through the whole
    solve by one `jax.jvp` (`diffrax.ForwardMode`), so it never saturates the way
    the distance of two nearby trajectories does.
    """
    q0, qd0, _ = _as_state(q0, qd0, 0.0, where="q0")
    n = q0.shape[0]
    direction = jnp.full((n,), 1.0 / jnp.sqrt(2.0 * n), q0.dtype)

    def solve(q0, qd0):
        return simulate(
            system, q0, qd0, adjoint=diffrax.ForwardMode(), throw=False, **options
        )

    traj, tangent = jax.jvp(solve, (q0, qd0), (direction, direction))
    delta = jnp.concatenate([tangent.q[-1], tangent.qd[-1]])
    # A sum of squares, then log: no sqrt, so finite for any non-zero tangent.
    return traj, 0.5 * jnp.log(jnp.sum(delta**2))


def finite_time_lyapunov(
    system: LagrangianSystem,
    q0: VectorLike,
    qd0: VectorLike,
    *,
    t0: float = 0.0,
    t1: float,
    **simulate_options: Any,
) -> Scalar:
    """The finite-time estimate of the largest Lyapunov exponent at (q0, qd0).

    λ = ln(‖δ(t1)‖ / ‖δ(t0)‖) / (t1 − t0) for a tangent δ of the (q, qd) phase
    space carried along the solve by forward-mode autodiff (the variational
    equations, discretised as the solver is). As t1 − t0 grows, λ tends to the
    largest Lyapunov exponent for almost every δ(t0): about zero on regular
    (quasi-periodic) motion, positive on chaotic motion. vmap it (or use it in
    `jl.sweep`) for chaos maps.

    **Arguments:**

    - `system`, `q0`, `qd0`: as in `simulate`.
    - `t0`, `t1`: the time window.
    - `**simulate_options`: the other options of `simulate` (`rtol`, `solver`, ...),
        except `adjoint`, which is `diffrax.ForwardMode()` here.

    **Returns:** λ, a scalar (in units of 1/time). Inspect
    `simulate(..., throw=False).result` if the solve may fail.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.make("double_pendulum")
    lam = jl.finite_time_lyapunov(system, jnp.array([2.0, 2.0]), qd0, t1=50.0)
    ```
    """
    if "adjoint" in simulate_options or "saveat" in simulate_options:
        raise ValueError(
            "`finite_time_lyapunov` sets `adjoint` and `saveat` itself; do not pass them."
        )
    _, log_growth = _tangent_solve(system, q0, qd0, t0=t0, t1=t1, **simulate_options)
    return log_growth / (jnp.asarray(t1) - jnp.asarray(t0))
