"""Variational integrators: the discrete Euler–Lagrange equations of the midpoint rule.

The midpoint discrete Lagrangian L_d(q₀, q₁) = h L(q̄, v, t̄), with q̄ = (q₀ + q₁)/2,
v = (q₁ − q₀)/h and t̄ = t + h/2, gives in position–momentum form

    p₀ = ∂L/∂q̇ − (h/2)(∂L/∂q + Q) − (h/2) G(q₀)ᵀλ      (solved for q₁ and λ,
    g(q₁, t + h) = 0                                     with the constraint)
    p₁ = ∂L/∂q̇ + (h/2)(∂L/∂q + Q) + (h/2) G(q₁)ᵀμ       (all at (q̄, v, t̄))

with the generalized force Q (and −∂R/∂q̇) entering by the discrete
Lagrange–d'Alembert principle, and the velocity at the new point from the
discrete Legendre transform p₁ = ∂L/∂q̇(q₁, q̇₁, t + h) together with the velocity
constraint G(q₁) q̇₁ + ∂g/∂t = 0 (which fixes μ), as in RATTLE.

Each implicit solve is Newton's method with the exact Jacobian (forward-over-
reverse autodiff; its leading block is the mass matrix). Derivatives do not
run through the iterations: one Newton step from the converged solution with
the Jacobian held fixed carries the implicit-function derivative.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._constraints import dynamics
from .._custom_types import Array, BoolScalar
from .._eom import unconstrained
from .._guard import no_gradient, select
from .._initial_state import check_initial_state
from .._system import LagrangianSystem
from .._trajectory import RESULTS, Trajectory, without_events
from .._validate import positive_int
from ._base import AbstractLagrangianSolver


class VariationalMidpoint(AbstractLagrangianSolver):
    """The variational midpoint integrator, for `jl.simulate(..., solver=...)`.

    Symplectic, momentum-preserving and symmetric, derived from the system's own
    Lagrangian: energy errors stay bounded over any number of steps instead of
    drifting. Takes fixed steps of size `dt0` (required in `simulate`), shortened
    only to land on the save times. Holonomic constraints hold at every step to
    the Newton tolerance and `traj.qd` satisfies their velocity form; forces and
    Rayleigh dissipation enter by the discrete Lagrange–d'Alembert principle.
    Nonholonomic and unilateral constraints are not supported (a `ValueError`).

    **Arguments:**

    - `order`: 2 (the midpoint rule) or 4 (its symmetric triple-jump composition,
        three midpoint steps of h/(2 − 2^⅓), −2^⅓ h/(2 − 2^⅓), h/(2 − 2^⅓)).
    - `rtol`, `atol`: each Newton solve stops at the first update below
        atol + rtol × scale (default: 1e-12 in float64, 1e-5 in float32, which
        cannot reach 1e-12): the positions' update against |q₁| component by
        component, the constraint impulse's against the largest momentum (the
        multipliers' roundoff grows with the momenta). That last update is
        applied, so at the defaults each solve ends at roundoff and the symmetric
        map runs back to its start to roundoff. Looser values save iterations.
    - `max_iterations`: Newton iterations per implicit solve; a solve that has not
        converged by then stops the run with `RESULTS.implicit_step_failed`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.double_pendulum()
    traj = jl.simulate(system, q0, qd0, t1=100.0, dt0=0.01,
                       solver=jl.VariationalMidpoint())
    ```
    """

    order: int = eqx.field(static=True, default=2)
    rtol: float | None = eqx.field(static=True, default=None)
    atol: float | None = eqx.field(static=True, default=None)
    max_iterations: int = eqx.field(static=True, default=20)

    def __check_init__(self):
        if self.order not in (2, 4):
            raise ValueError(f"`order` must be 2 or 4, got {self.order!r}.")
        for name, value in (("rtol", self.rtol), ("atol", self.atol)):
            if not (value is None or isinstance(value, (int, float)) and value > 0):
                raise ValueError(f"`{name}` must be a positive number, got {value!r}.")
        positive_int("max_iterations", self.max_iterations)

    def simulate(
        self, system, q0, qd0, t0, t1, ts, options, stepsize_controller
    ) -> Trajectory:
        dt0, max_steps = options.dt0, options.max_steps
        for has, name in (
            (system.constraints.velocity_level, "nonholonomic constraints"),
            (system.constraints.one_sided, "unilateral constraints"),
        ):
            if has:
                raise ValueError(
                    f"jl.VariationalMidpoint does not support {name} yet; use a "
                    "diffrax solver (the default) for this system."
                )
        if dt0 is None:
            raise ValueError(
                "jl.VariationalMidpoint takes fixed steps: pass the step size `dt0`."
            )
        if stepsize_controller is not None or options.baumgarte is not None:
            raise ValueError(
                "jl.VariationalMidpoint takes fixed steps of size `dt0` and keeps the "
                "constraints exactly: `stepsize_controller` and `baumgarte` do not "
                "apply."
            )
        q0 = check_initial_state(system, q0, qd0, t0)
        # The loop also spends one iteration recording each save.
        budget = max_steps + ts.shape[0] + 1
        bound = _step_bound(t0, t1, ts, dt0)
        budget = budget if bound is None else min(budget, bound)
        args = (system, q0, qd0, t0, t1, ts, self, dt0, budget, max_steps)
        return _variational_jit(*args)

    def tolerances(self, dtype) -> tuple[float, float]:
        """(rtol, atol) for `dtype`: the given ones, else 1e-12 (float64) or 1e-5."""
        default = 1e-12 if jnp.finfo(dtype).bits >= 64 else 1e-5
        return (
            default if self.rtol is None else self.rtol,
            default if self.atol is None else self.atol,
        )

    @property
    def substeps(self) -> tuple[float, ...]:
        if self.order == 2:
            return (1.0,)
        cbrt2 = 2.0 ** (1.0 / 3.0)
        outer = 1.0 / (2.0 - cbrt2)
        return (outer, -cbrt2 * outer, outer)


def _newton(residual, small, z0: Array, args, solver: VariationalMidpoint):
    """Solve residual(z, args) = 0; derivatives by the implicit function theorem."""
    if z0.shape[0] == 0:
        return z0, jnp.array(True)
    frozen = no_gradient(args)

    def linearized(z):
        fn = lambda z: (residual(z, frozen),) * 2  # noqa: E731
        return jax.jacfwd(fn, has_aux=True)(z)

    def cond(carry):
        _, i, done = carry
        return (~done) & (i < solver.max_iterations)

    def body(carry):
        z, i, _ = carry
        jac, r = linearized(z)
        dz = jnp.linalg.solve(jac, r)
        # The update below the tolerance is applied all the same: Newton converges
        # quadratically, so the error left after it is its square, at roundoff.
        done = small(z, dz, frozen, solver)
        return z - dz, i + 1, done

    z, _, done = jax.lax.while_loop(
        cond, body, (jax.lax.stop_gradient(z0), jnp.array(0), jnp.array(False))
    )
    z = jax.lax.stop_gradient(z)
    jac = jax.lax.stop_gradient(linearized(z)[0])
    # Zero in value; its derivative is −J⁻¹ ∂r/∂args, the implicit derivative.
    z = z - jnp.linalg.solve(jac, residual(z, args))
    return z, done & jnp.all(jnp.isfinite(z))


def _grad_lagrangian(system: LagrangianSystem, q, v, t):
    return jax.grad(system.L, argnums=(0, 1))(q, v, t)


def _midpoint_terms(system: LagrangianSystem, q0, v, t0, h):
    """∂L/∂q̇ and (h/2)(∂L/∂q + Q) at the midpoint (q̄, v, t̄) of a step from q0."""
    qm, tm = q0 + 0.5 * h * v, t0 + 0.5 * h
    lq, lv = _grad_lagrangian(system, qm, v, tm)
    force = system.Q(qm, v, tm)
    return lv, 0.5 * h * (lq + (jnp.zeros_like(qm) if force is None else force))


def _holonomic_jacobian(system: LagrangianSystem, q, t):
    if not system.constraints.positional:
        return jnp.zeros((0, q.shape[0]), q.dtype)
    return jax.jacfwd(system.constraints.positions)(q, t)


def _small(dx, x, g, nu, dnu, p, solver: VariationalMidpoint):
    """Whether dx is small against x, and the impulse's Gᵀdν against p and Gᵀν."""
    rtol, atol = solver.tolerances(x.dtype)
    # The multipliers' roundoff floor scales with p and Gᵀν, not with ν.
    scale = jnp.max(jnp.abs(jnp.concatenate([p, g.T @ nu])), initial=0.0)
    return jnp.all(jnp.abs(dx) <= atol + rtol * jnp.abs(x)) & jnp.all(
        jnp.abs(g.T @ dnu) <= atol + rtol * scale
    )


# The unknowns of the position solve are the discrete velocity v = (q₁ − q₀)/h
# and the impulse ν = (h/2)λ, not q₁ and λ: p₀ and the momenta of the step then
# come from v itself, so a short step (one landing on a save time) keeps them to
# roundoff, where (q₁ − q₀)/h would lose digits as 1/h; and ν, in momentum units
# over G's, has its roundoff floor near eps |p| at any h, where λ's grows as 1/h.


def _position_residual(z, args):
    system, q0, p0, t0, h = args
    n = q0.shape[0]
    v, nu = z[:n], z[n:]
    lv, half = _midpoint_terms(system, q0, v, t0, h)
    rows = [lv - half - _holonomic_jacobian(system, q0, t0).T @ nu - p0]
    if system.constraints.positional:
        rows.append(system.constraints.positions(q0 + h * v, t0 + h))
    return jnp.concatenate(rows)


def _position_small(z, dz, args, solver: VariationalMidpoint):
    """q₁'s update h dv against q₁ (a test on positions, as h → 0 too)."""
    system, q0, p0, t0, h = args
    n = q0.shape[0]
    g0 = _holonomic_jacobian(system, q0, t0)
    return _small(h * dz[:n], q0 + h * z[:n], g0, z[n:], dz[n:], p0, solver)


def _velocity_residual(w, args):
    system, q1, p_half, t1 = args
    n = q1.shape[0]
    v1, nu = w[:n], w[n:]
    g1 = _holonomic_jacobian(system, q1, t1)
    _, momentum = _grad_lagrangian(system, q1, v1, t1)
    rows = [momentum - p_half - g1.T @ nu]
    if system.constraints.positional:
        one = jnp.ones((), t1.dtype)
        rows.append(jax.jvp(system.constraints.positions, (q1, t1), (v1, one))[1])
    return jnp.concatenate(rows)


def _velocity_small(w, dw, args, solver: VariationalMidpoint):
    system, q1, p_half, t1 = args
    n = q1.shape[0]
    g1 = _holonomic_jacobian(system, q1, t1)
    return _small(dw[:n], w[:n], g1, w[n:], dw[n:], p_half, solver)


class _State(NamedTuple):
    t: Array
    q: Array
    p: Array
    v: Array
    lam: Array
    mu: Array


def _midpoint(system, solver, state: _State, h) -> tuple[_State, BoolScalar]:
    """One midpoint step of size h (its sign may be negative)."""
    n = state.q.shape[0]
    z0 = jnp.concatenate([state.v, 0.5 * h * state.lam])
    args = (system, state.q, state.p, state.t, h)
    z, ok_q = _newton(_position_residual, _position_small, z0, args, solver)
    v, lam = z[:n], z[n:] / (0.5 * h)
    q1 = state.q + h * v
    lv, half = _midpoint_terms(system, state.q, v, state.t, h)
    p_half, t1 = lv + half, state.t + h
    w0 = jnp.concatenate([v, 0.5 * h * state.mu])
    args = (system, q1, p_half, t1)
    w, ok_v = _newton(_velocity_residual, _velocity_small, w0, args, solver)
    v1, nu = w[:n], w[n:]
    p1 = p_half + _holonomic_jacobian(system, q1, t1).T @ nu
    return _State(t1, q1, p1, v1, lam, nu / (0.5 * h)), ok_q & ok_v


def _step(system, solver, state: _State, h) -> tuple[_State, BoolScalar]:
    ok = jnp.array(True)
    start = state.t
    for fraction in solver.substeps:
        state, good = _midpoint(system, solver, state, fraction * h)
        ok = ok & good
    return state._replace(t=start + h), ok


class _Carry(NamedTuple):
    state: _State
    index: Array  # the next save time to reach
    steps: Array
    failed: BoolScalar
    qs: Array
    vs: Array


@eqx.filter_jit
def _variational_jit(system, q0, qd0, t0, t1, ts, solver, dt0, budget, step_limit):
    """The trajectory, in at most `budget` loop iterations and `step_limit` steps."""
    start_finite = jnp.all(jnp.isfinite(q0)) & jnp.all(jnp.isfinite(qd0))
    q0, qd0 = (jnp.where(start_finite, x, 0.0) for x in (q0, qd0))
    n, dtype = q0.shape[0], q0.dtype
    m = jax.eval_shape(lambda: _holonomic_jacobian(system, q0, t0)).shape[0]
    p0 = _grad_lagrangian(system, q0, qd0, t0)[1]
    zeros_m = jnp.zeros((m,), dtype)
    state = _State(t0, q0, p0, qd0, zeros_m, zeros_m)
    num_saves = ts.shape[0]
    # Steps that land within this of a save time land on it.
    close = 64 * jnp.finfo(dtype).eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1))

    def cond(carry: _Carry):
        # At most `step_limit` steps; a save time reached is still recorded.
        target = ts[jnp.minimum(carry.index, num_saves - 1)]
        room = (carry.steps < step_limit) | (target - carry.state.t <= close)
        return (carry.index < num_saves) & ~carry.failed & room

    def body(carry: _Carry) -> _Carry:
        target = ts[jnp.minimum(carry.index, num_saves - 1)]
        remaining = target - carry.state.t
        at_save = remaining <= close
        # The step that reaches the save time lands on it, stretched by up to
        # 1/64 of dt0 rather than leaving a sliver: the times add up dt0 by dt0
        # with rounding errors, and a last step of 1e-13 (t1 = 10, dt0 = 0.01)
        # is one the implicit solve of a constrained step cannot converge on.
        last = remaining <= (1 + 1 / 64) * dt0
        # At a save time the step is only recorded: the full step taken meanwhile
        # is discarded (and stays well-conditioned for autodiff).
        h = jnp.where(at_save | ~last, dt0, remaining)
        stepped, ok = _step(system, solver, carry.state, h)
        stepped = stepped._replace(t=jnp.where(last, target, stepped.t))
        state = select(at_save, carry.state, stepped)
        finite = jnp.all(jnp.isfinite(state.q)) & jnp.all(jnp.isfinite(state.v))
        failed = ~at_save & ~(ok & finite)
        qs = carry.qs.at[carry.index].set(state.q, pred=at_save)
        vs = carry.vs.at[carry.index].set(state.v, pred=at_save)
        index = carry.index + at_save.astype(carry.index.dtype)
        steps = carry.steps + (~at_save).astype(carry.steps.dtype)
        return _Carry(state, index, steps, failed, qs, vs)

    unsaved = jnp.full((2, num_saves, n), jnp.inf, dtype)  # q and q̇
    init = _Carry(state, jnp.array(0), jnp.array(0), jnp.array(False), *unsaved)
    out = eqx.internal.while_loop(
        cond,
        body,
        init,
        max_steps=budget,
        buffers=lambda c: (c.qs, c.vs),
        kind="checkpointed",
    )
    reached = jnp.arange(num_saves) < out.index
    saved_ts = jnp.where(reached, ts, jnp.inf)
    if system.constraints.positional:
        safe_q = jnp.where(reached[:, None], out.qs, 0.0)
        safe_v = jnp.where(reached[:, None], out.vs, 0.0)
        dyn = jax.vmap(lambda q, v, t: dynamics(system, q, v, t))(
            safe_q, safe_v, jnp.where(reached, ts, t0)
        )
        multipliers = jnp.where(reached[:, None], dyn.multipliers, jnp.inf)
    else:
        multipliers = jnp.zeros((num_saves, 0), dtype)
    finite = jnp.all(jnp.isfinite(out.state.q)) & jnp.all(jnp.isfinite(out.state.v))
    ran_out = ~out.failed & (out.index < num_saves)
    result = RESULTS.where(ran_out, RESULTS.max_steps_reached, RESULTS.successful)
    result = RESULTS.where(out.failed & finite, RESULTS.implicit_step_failed, result)
    non_finite = (out.failed & ~finite) | ~start_finite
    result = RESULTS.where(non_finite, RESULTS.non_finite_state, result)
    # The mass matrix at t0, checked as the other solvers check it (Cholesky, or
    # the system's `mass_solver`): M = 0 would otherwise fail as a non-finite
    # state, and L = V − T (M negative definite) would run silently.
    singular = start_finite & unconstrained(system, q0, qd0, t0)[1]
    t_final = jnp.where(start_finite & ~singular, out.state.t, t0)
    result = RESULTS.where(singular, RESULTS.singular_mass_matrix, result)
    steps = out.steps
    stats = dict(
        num_steps=steps,
        num_accepted_steps=steps,
        num_rejected_steps=jnp.zeros_like(steps),
        max_steps=step_limit,
    )
    return without_events(saved_ts, out.qs, out.vs, multipliers, result, t_final, stats)


def _step_bound(t0, t1, ts, dt0) -> int | None:
    """The number of loop iterations when the times are known at trace time."""
    try:
        t0, t1, dt0 = float(t0), float(t1), float(dt0)
        count = int(np.asarray(ts).shape[0])
    except (TypeError, jax.errors.ConcretizationTypeError):
        return None
    if not np.isfinite((t1 - t0) / dt0):
        return None
    return int(np.ceil((t1 - t0) / dt0)) + 2 * count + 2
