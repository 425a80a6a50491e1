"""`simulate`: integrate a `LagrangianSystem` with diffrax, and `Trajectory`."""

from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

from ._constraints import _dynamics
from ._custom_types import Array, ScalarLike, VectorLike
from ._system import LagrangianSystem, _as_state


class RESULTS(diffrax.RESULTS):  # pyright: ignore[reportGeneralTypeIssues]
    """diffrax's result codes, and the ones jaxlagrange detects itself."""

    singular_mass_matrix = (
        "The mass matrix ∂²L/∂qd² became singular or indefinite during the solve: "
        "the Lagrangian is not strictly convex in qd there."
    )
    redundant_constraints = (
        "The constraint Jacobian became rank-deficient during the solve: the "
        "constraints are redundant or degenerate there."
    )
    non_finite_state = (
        "The state became non-finite (NaN or inf) during the solve."
    )


class Trajectory(eqx.Module):
    """A solution of `simulate`.

    **Attributes:**

    - `ts`: the save times, shape (T,).
    - `q`, `qd`: coordinates and velocities at `ts`, shape (T, n).
    - `multipliers`: Lagrange multipliers at `ts`, shape (T, m + k + u)
        (holonomic, nonholonomic, unilateral; (T, 0) without constraints).
    - `result`: a `jaxlagrange.RESULTS` code; `RESULTS.successful` on success.
    - `t_final`: the time the solve reached (t1 on success).
    - `stats`: diffrax's statistics (`num_steps`, `num_accepted_steps`, ...).
    """

    ts: Array
    q: Array
    qd: Array
    multipliers: Array
    result: RESULTS
    t_final: Array
    stats: dict[str, Any]


def _vector_field(t, y, args):
    system, baumgarte = args
    q, qd = y
    dyn = _dynamics(system, q, qd, t, baumgarte=baumgarte)
    bad = dyn.singular_mass | dyn.singular_constraints
    # NaN makes diffrax's adaptive controller reject the step; the cause is then
    # diagnosed from the final state and reported by its own result code.
    qdd = jnp.where(bad, jnp.nan, dyn.accelerations)
    return qd, qdd


def _diagnose(system, q, qd, t, baumgarte) -> RESULTS:
    dyn = _dynamics(system, q, qd, t, baumgarte=baumgarte)
    finite = jnp.all(jnp.isfinite(q)) & jnp.all(jnp.isfinite(qd))
    result = RESULTS.where(dyn.singular_constraints, RESULTS.redundant_constraints, RESULTS.successful)
    result = RESULTS.where(dyn.singular_mass, RESULTS.singular_mass_matrix, result)
    return RESULTS.where(finite, result, RESULTS.non_finite_state)


def simulate(
    system: LagrangianSystem,
    q0: VectorLike,
    qd0: VectorLike,
    *,
    t0: ScalarLike = 0.0,
    t1: ScalarLike,
    saveat: Any = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0: ScalarLike | None = None,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    max_steps: int = 100_000,
    adjoint: diffrax.AbstractAdjoint | None = None,
    baumgarte: tuple[float, float] | None = None,
    progress_meter: diffrax.AbstractProgressMeter | None = None,
    throw: bool = True,
) -> Trajectory:
    """Integrate the equations of motion from (q0, qd0) at t0 to t1.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q0`, `qd0`: initial coordinates and velocities, shape (n,).
    - `t0`, `t1`: start and end time, t1 > t0.
    - `saveat`: increasing array of times in [t0, t1] to save at (None: t1 only).
    - `solver`: any diffrax ODE solver (default `diffrax.Tsit5()`).
    - `rtol`, `atol`: tolerances of the adaptive step-size controller.
    - `dt0`: initial step (None: chosen automatically).
    - `stepsize_controller`: overrides the default `diffrax.PIDController(rtol, atol)`.
    - `max_steps`: the most steps the solver may take.
    - `adjoint`: how to differentiate (default `diffrax.RecursiveCheckpointAdjoint()`).
    - `baumgarte`: gains (α, β) of the constraint stabilization (None: no
        stabilization).
    - `progress_meter`: a diffrax progress meter, e.g. `diffrax.TqdmProgressMeter()`.
    - `throw`: raise on failure; with `throw=False` inspect `Trajectory.result`.

    **Returns:** a `Trajectory`.
    """
    q0, qd0, t0 = _as_state(q0, qd0, t0, where="q0")
    dtype = q0.dtype
    t1 = jnp.asarray(t1, dtype)
    ts = t1[None] if saveat is None else jnp.asarray(saveat, dtype)
    solver = diffrax.Tsit5() if solver is None else solver
    if stepsize_controller is None:
        stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
    adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
    progress_meter = (
        diffrax.NoProgressMeter() if progress_meter is None else progress_meter
    )
    args = (system, baumgarte)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(_vector_field),
        solver,
        t0=t0,
        t1=t1,
        dt0=dt0,
        y0=(q0, qd0),
        args=args,
        saveat=diffrax.SaveAt(subs=[diffrax.SubSaveAt(ts=ts), diffrax.SubSaveAt(t1=True)]),
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        max_steps=max_steps,
        progress_meter=progress_meter,
        throw=False,
    )
    (saved_ts, final_ts), ((q, qd), (q_final, qd_final)) = sol.ts, sol.ys
    t_final = final_ts[0]
    result = RESULTS.promote(sol.result)
    diagnosed = _diagnose(system, q_final[0], qd_final[0], t_final, baumgarte)
    failed = result != RESULTS.successful
    result = RESULTS.where(failed & (diagnosed != RESULTS.successful), diagnosed, result)
    result = RESULTS.where(
        diagnosed == RESULTS.non_finite_state, RESULTS.non_finite_state, result
    )
    multipliers = jax.vmap(
        lambda q, qd, t: _dynamics(system, q, qd, t, baumgarte=baumgarte).multipliers
    )(q, qd, saved_ts)
    traj = Trajectory(saved_ts, q, qd, multipliers, result, t_final, sol.stats)
    if throw:
        traj = result.error_if(traj, result != RESULTS.successful)
    return traj
