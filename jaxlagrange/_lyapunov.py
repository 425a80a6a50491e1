"""`finite_time_lyapunov`: the growth rate of a tangent vector along a solution."""

import diffrax
import jax
import jax.numpy as jnp

from ._constraints import dynamics
from ._custom_types import Scalar, ScalarLike, VectorLike
from ._errors import first_error
from ._options import MAX_STEPS
from ._results import promote
from ._system import LagrangianSystem, as_state
from ._trajectory import RESULTS
from ._validate import default_tolerance


def _accelerations(system, q, qd, t):
    # NaN where q̈ is not defined (a singular M, redundant constraints), so that
    # the solve fails there rather than integrate a meaningless q̈.
    dyn = dynamics(system, q, qd, t)
    bad = dyn.singular_mass | dyn.singular_constraints
    return jnp.where(bad, jnp.nan, dyn.accelerations)


def _vector_field(t, y, system):
    # The state, a tangent u of (q, qd) space of about unit length, and
    # ρ = ln‖δ‖: with J the Jacobian of the flow's vector field, δ' = Jδ splits
    # into u' = Ju − r u and ρ' = r, r = u·Ju / u·u. No overflow however fast δ
    # grows, and the step-size controller sees the tangent's error as well as
    # the state's. ‖u‖ is constant in exact arithmetic; r divides by u·u, so
    # its drift does not bias ρ (with r = u·Ju, the unit sphere repelled u in a
    # contracting flow: ‖u‖ went to 0 and ρ stopped).
    q, qd, uq, uqd, _ = y
    _, duqd = jax.jvp(
        lambda q, qd: _accelerations(system, q, qd, t), (q, qd), (uq, uqd)
    )
    qdd = _accelerations(system, q, qd, t)
    ju = (uqd, duqd)
    growth = (jnp.vdot(uq, ju[0]) + jnp.vdot(uqd, ju[1])) / (
        jnp.vdot(uq, uq) + jnp.vdot(uqd, uqd)
    )
    return qd, qdd, ju[0] - growth * uq, ju[1] - growth * uqd, growth


def finite_time_lyapunov(
    system: LagrangianSystem,
    q0: VectorLike,
    qd0: VectorLike,
    *,
    t0: ScalarLike = 0.0,
    t1: ScalarLike,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = MAX_STEPS,
    throw: bool = True,
) -> Scalar:
    """The finite-time estimate of the largest Lyapunov exponent at (q0, qd0).

    λ = ln(‖δ(t1)‖ / ‖δ(t0)‖) / (t1 − t0) for a tangent δ of the (q, qd) phase
    space, δ(t0) = (1, ..., 1)/√(2n), integrated with the state by the variational
    equations δ' = J δ (J by one `jax.jvp` of the accelerations, constraints
    included), in the renormalized form u = δ/‖δ‖, ρ = ln‖δ‖. As t1 − t0 grows, λ
    tends to the largest Lyapunov exponent for almost every δ(t0): about zero on
    regular (quasi-periodic) motion, positive on chaotic motion. vmap it (or use
    it in `jl.sweep`) for chaos maps.

    **Arguments:**

    - `system`, `q0`, `qd0`, `t0`, `t1`, `solver`, `rtol`, `atol`, `max_steps`: as
        in `simulate`.
    - `throw`: raise if the solve fails; with `throw=False` the estimate is over the
        time the solve reached.

    **Returns:** λ, a scalar in units of 1/time.

    **Raises:** with `throw`, an error (also under `jax.jit`) when the solve
    fails, naming a singular mass matrix or redundant constraints at the start.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.make("double_pendulum")
    lam = jl.finite_time_lyapunov(system, jnp.array([2.0, 2.0]), qd0, t1=50.0)
    ```
    """
    q0, qd0, t0 = as_state(q0, qd0, t0, where="q0")
    dtype = q0.dtype
    # As in `simulate`: 1e-8 in float64, 1e-5 in float32.
    rtol = default_tolerance(dtype) if rtol is None else rtol
    atol = default_tolerance(dtype) if atol is None else atol
    t1 = jnp.asarray(t1, dtype)
    n = q0.shape[0]
    u0 = jnp.full((n,), 1.0 / jnp.sqrt(2.0 * n), dtype)
    y0 = (q0, qd0, u0, u0, jnp.zeros((), dtype))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field),
        diffrax.Tsit5() if solver is None else solver,
        t0=t0,
        t1=t1,
        dt0=None,
        y0=y0,
        args=system,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
        throw=False,
    )
    result = promote(sol.result)
    log_growth = sol.ys[4][0]
    t_final = sol.ts[0]
    lam = log_growth / (t_final - t0)
    if throw:
        # The start's named cause before the solver's failure it leads to.
        lam = first_error(lam, dynamics(system, q0, qd0, t0).undefined())
        lam = result.error_if(lam, result != RESULTS.successful)
    return lam
