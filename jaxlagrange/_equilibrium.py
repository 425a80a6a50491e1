"""Static equilibria: q̈ = 0 at q̇ = 0, with the constraints kept.

The contacts of unilateral constraints are found by an active-set iteration, then
fixed and solved once more, so that the result is differentiable with respect to
the params (docs/linearization.md).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

from ._cache import cached
from ._constraints import contact_tolerance, dynamics, num_bilateral
from ._custom_types import Array, Float, ScalarLike, VectorLike
from ._errors import first_error
from ._guard import no_gradient
from ._options import check_tolerance
from ._system import LagrangianSystem, as_state, check_system
from ._validate import check_finite, param_flags, positive_int


_NOT_CONVERGED = (
    "jl.equilibrium did not converge from `q_guess`: no static equilibrium "
    "(q̈ = 0 at q̇ = 0 with the constraints kept) was found nearby. Try another "
    "guess, or raise `max_steps`."
)
_NO_CONTACT_SET = (
    "jl.equilibrium found no consistent set of contacts for the `unilateral` "
    "constraints from `q_guess`: at the equilibrium found, a contact pulls (λ < 0) "
    "or a free constraint is violated (h < 0). Try another guess."
)


def _static_residual(q, args):
    system, t, active = args
    qd = jnp.zeros_like(q)
    qdd = dynamics(system, q, qd, t, active=active).accelerations
    parts = [qdd]
    stack = system.constraints
    if stack.positional:
        parts.append(stack.positions(q, t))
    if active is not None:
        parts.append(jnp.where(active, stack.gaps(q, t), 0.0))
    return jnp.concatenate(parts)


def _solve(system, q_guess, t, active, rtol, atol, max_steps):
    """The equilibrium with the contacts in `active` held, and whether it converged."""
    solver = optx.LevenbergMarquardt(rtol=rtol, atol=atol)
    args = (system, t, active)
    sol = optx.least_squares(
        _static_residual, solver, q_guess, args, max_steps=max_steps, throw=False
    )
    q = sol.value
    residual = _static_residual(q, args)
    scale = 1 + jnp.max(jnp.abs(q))
    small = jnp.max(jnp.abs(residual)) <= jnp.sqrt(atol) * scale
    # A residual at rounding level is converged even where the solver's own step
    # test could not terminate (the step no longer changes q).
    tiny = jnp.max(jnp.abs(residual)) <= 100 * jnp.finfo(q.dtype).eps * scale
    converged = (sol.result == optx.RESULTS.successful) | tiny
    return q, converged & small & jnp.all(jnp.isfinite(q))


def _contact_changes(system, q, t, active) -> tuple[Array, Array]:
    """The contacts that pull (λ < 0) and the free ones that are violated (h < 0)."""
    offset = num_bilateral(system, q, q, t)
    lam = dynamics(system, q, jnp.zeros_like(q), t, active=active).multipliers
    h = system.constraints.gaps(q, t)
    tol = contact_tolerance(q.dtype) * (1 + jnp.max(jnp.abs(q)))
    return active & (lam[offset:] < 0), ~active & (h < -tol)


def _active_set(system, q_guess, t, rtol, atol, max_steps):
    """The contacts that hold the equilibrium (not differentiated through)."""
    system, q_guess, t = no_gradient((system, q_guess, t))
    u = jax.eval_shape(system.constraints.gaps, q_guess, t).shape[0]

    def cond(carry):
        i, _, _, done = carry
        return ~done & (i < 2 * u + 2)

    def body(carry):
        i, active, q, _ = carry
        q, ok = _solve(system, q_guess, t, active, rtol, atol, max_steps)
        release, engage = _contact_changes(system, q, t, active)
        done = ok & ~jnp.any(release | engage)
        return i + 1, (active & ~release) | engage, q, done

    init = (jnp.array(0), jnp.ones((u,), bool), q_guess, jnp.array(False))
    _, active, q, _ = jax.lax.while_loop(cond, body, init)
    return active, q


@eqx.filter_jit
def _equilibrium(system, q_guess, t, rtol, atol, max_steps):
    """The equilibrium and its checks, applied by the caller (not host callbacks)."""
    active, checks = None, []
    contacts = bool(system.constraints.one_sided)
    if contacts:
        active, q_guess = _active_set(system, q_guess, t, rtol, atol, max_steps)
    q, ok = _solve(system, q_guess, t, active, rtol, atol, max_steps)
    if contacts:
        release, engage = _contact_changes(system, q, t, active)
        checks = [(jnp.any(release | engage), _NO_CONTACT_SET)]
    # q̈ must be defined at (q, 0, t), else the residual's q̈ row means nothing.
    point = dynamics(system, q, jnp.zeros_like(q), t, active=active)
    return q, [*point.undefined(), (~ok, _NOT_CONVERGED), *checks]


@cached
def equilibrium(
    system: LagrangianSystem,
    q_guess: VectorLike,
    t: ScalarLike = 0.0,
    *,
    rtol: float = 1e-10,
    atol: float = 1e-10,
    max_steps: int = 256,
) -> Float[Array, " n"]:
    """A static equilibrium: q with q̈ = 0 at q̇ = 0, the holonomic constraints kept.

    Solved by Levenberg–Marquardt (optimistix) on the residual [q̈(q, 0, t); g(q, t)]
    from `q_guess`; the result is differentiable with respect to the params
    (implicit differentiation). Unilateral constraints h ≥ 0 hold the system only
    where they are in contact and push: each is kept as h = 0 where its multiplier
    is λ ≥ 0 at the equilibrium, and left free (h ≥ 0) otherwise, as found by an
    active-set iteration (a ball on a spring above its floor hangs where the
    spring holds it; without the spring it rests on the floor).

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q_guess`: the starting point, shape (n,).
    - `t`: the time (for explicitly time-dependent systems).
    - `rtol`, `atol`: the solver's tolerances, positive finite numbers.
    - `max_steps`: the solver's step budget (per solve, with unilateral constraints).

    **Returns:** the equilibrium q, shape (n,).

    **Raises:** `ValueError` for a bad `system`, `rtol`, `atol` or `max_steps`, and
    for a non-finite `q_guess` or `t`; an error (also under `jax.jit`) naming a
    non-finite param, a singular mass matrix or redundant constraints at the
    point found, when the solve does not converge, or when no set of contacts is
    consistent.

    **Example:**

    ```python
    system, _, _ = jl.systems.pendulum()
    jl.equilibrium(system, jnp.array([0.3]))  # [0.]
    ```
    """
    check_system(system)
    q_guess, _, t = as_state(
        q_guess, jnp.zeros_like(jnp.asarray(q_guess)), t, where="q_guess"
    )
    check_tolerance("rtol", rtol)  # (the values stay as given: static when known)
    check_tolerance("atol", atol)
    max_steps = positive_int("max_steps", max_steps)
    inputs = {"q_guess": q_guess, "t": t}
    q_guess = check_finite(inputs, q_guess)
    q, checks = _equilibrium(system, q_guess, t, rtol, atol, max_steps)
    # A non-finite param is named first: it would fail the solve.
    q = first_error(q, [*zip(*param_flags(system.params), strict=True), *checks])
    return check_finite(inputs, q)
