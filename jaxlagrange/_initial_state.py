"""The initial state: its projection onto the constraint manifold, and the check.

`project_initial_state` moves (q0, qd0) onto the manifold by the projections of
`_projection` (20 Gauss–Newton steps for the positions); `check_initial_state`
is `simulate`'s consistency check, with the residuals in the message.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._constraints import constraint_values
from ._custom_types import Array, ArrayLike, BoolScalar, ScalarLike, Vector, VectorLike
from ._errors import first_error, traced
from ._projection import Metric, project
from ._results import RESULTS
from ._system import LagrangianSystem, as_state


_INITIAL_ITERATIONS = 20


class _Residuals(eqx.Module):
    """How far an initial state is off its manifold, scaled to tolerance units."""

    position: Array  # max |Δq| of one Gauss–Newton step / (1 + max |q|)
    velocity: Array  # max |Δq̇| of the velocity projection / (1 + max |q̇|)
    penetration: Array  # deepest h < 0, as a distance in q, / (1 + max |q|)
    g: Array  # max |g| (holonomic), for the message
    gd: Array  # max |ġ|
    a: Array  # max |a| (nonholonomic)
    singular_mass: BoolScalar
    redundant: BoolScalar


def _max_abs(x: Array | None, dtype) -> Array:
    if x is None or x.size == 0:
        return jnp.zeros((), dtype)
    return jnp.max(jnp.abs(x))


def residuals(system: LagrangianSystem, q: Array, qd: Array, t: Array) -> _Residuals:
    dtype = q.dtype
    metric = Metric(system, q, qd, t)
    singular_mass, redundant = metric.singular, jnp.array(False)
    position = velocity = penetration = jnp.zeros((), dtype)
    values = constraint_values(system, q, qd, t)
    q_scale = 1 + _max_abs(q, dtype)
    stack = system.constraints
    if stack.positional:
        dq, bad_mass, bad = metric.position_correction(system, q, t)
        position = _max_abs(dq, dtype) / q_scale
        singular_mass, redundant = singular_mass | bad_mass, redundant | bad
    if stack.bilateral:
        dqd, bad_mass, bad = metric.velocity_correction(system, q, qd, t)
        velocity = _max_abs(dqd, dtype) / (1 + _max_abs(qd, dtype))
        singular_mass, redundant = singular_mass | bad_mass, redundant | bad
    if stack.one_sided and (h := values.h).size:
        jac = jax.jacfwd(stack.gaps)(q, t)
        # −h/|∇h| is the depth below h = 0 to first order, in units of q.
        gradient = jnp.sqrt(jnp.sum(jac**2, axis=1))
        depth = jnp.where(h < 0, -h / jnp.where(gradient > 0, gradient, 1.0), 0.0)
        penetration = jnp.max(depth) / q_scale
    g, gd, a = (_max_abs(x, dtype) for x in (values.g, values.gd, values.a))
    return _Residuals(
        position, velocity, penetration, g, gd, a, singular_mass, redundant
    )


def tolerance(dtype) -> float:
    return float(np.sqrt(np.finfo(dtype).eps))


PROJECT_HINT = (
    "Project it first with `q0, qd0 = jl.project_initial_state(system, q0, qd0, t0)`."
)
_OFF_POSITION = (
    "The initial state is off the constraint manifold: the holonomic constraints "
    "g(q0, t0) = 0 are violated (max |g| = {g}). " + PROJECT_HINT
)
_OFF_VELOCITY = (
    "The initial velocities violate the velocity constraints (max |dg/dt| = {gd}, "
    "max |a| = {a} for G qd + ∂g/∂t = 0 and a(q0, qd0, t0) = 0). " + PROJECT_HINT
)
_PENETRATING = (
    "The initial state violates a unilateral constraint: h(q0, t0) < 0 (it must be "
    "h >= 0). Start on or above the constraint surface."
)
_REDUNDANT_AT_T0 = (
    "The constraints are inconsistent at the initial state: the constraint "
    "Jacobian C = [∂g/∂q; ∂a/∂qd] is rank-deficient at t0 and its redundant rows "
    "contradict each other (RESULTS.redundant_constraints). Remove the redundant "
    "constraints."
)
_SINGULAR_MASS_AT_T0 = (
    "The mass matrix ∂²L/∂qd² is singular or not positive definite at the initial "
    "state (RESULTS.singular_mass_matrix)."
)


def initial_checks(
    r: _Residuals, tol: float, known: bool
) -> list[tuple[ArrayLike, str]]:
    """The failures of an initial state, each with its message, first first."""
    if known:
        g, gd, a = (f"{float(x):.3g}" for x in (r.g, r.gd, r.a))
    else:
        g = gd = a = "(not known under jit)"
    return [
        (r.singular_mass, _SINGULAR_MASS_AT_T0),
        (r.redundant, _REDUNDANT_AT_T0),
        (r.position > tol, _OFF_POSITION.format(g=g)),
        (r.velocity > tol, _OFF_VELOCITY.format(gd=gd, a=a)),
        (r.penetration > tol, _PENETRATING),
    ]


_initial_residuals = eqx.filter_jit(residuals)

# The result code of each of `initial_checks`, in its order (the last three:
# off the positions, the velocities, or below a unilateral constraint).
_START_CODES = (
    RESULTS.singular_mass_matrix,
    RESULTS.redundant_constraints,
    *3 * (RESULTS.inconsistent_initial_state,),
)


def start_result(system: LagrangianSystem, q0: Array, qd0: Array, t0: Array) -> RESULTS:
    """Why (q0, qd0) cannot start, as a result code (`successful`: it can)."""
    checks = initial_checks(residuals(system, q0, qd0, t0), tolerance(q0.dtype), False)
    result = RESULTS.successful
    for (failed, _), code in reversed(list(zip(checks, _START_CODES, strict=True))):
        result = RESULTS.where(failed, code, result)
    return result


def check_initial_state(
    system: LagrangianSystem, q0: Array, qd0: Array, t0: Array
) -> Array:
    """`q0`, with an error if (q0, qd0) is not on its constraint manifold at t0."""
    if not system.has_constraints:
        return q0
    r = _initial_residuals(system, q0, qd0, t0)
    known = not traced(r)
    if known:
        # In NumPy: an eager JAX comparison is one more small program to compile.
        r = jax.tree.map(np.asarray, r)
    checks = initial_checks(r, tolerance(q0.dtype), known=known)
    stack = system.constraints
    # One name per one-sided row, where the functions have them.
    names = sum((getattr(k.fn, "names", ()) for k in stack.one_sided), ())
    if known and r.penetration > tolerance(q0.dtype) and names:
        h = np.asarray(stack.gaps(q0, t0))
        i = int(np.argmin(h)) if len(names) == h.size else None
        row = "" if i is None else f" The deepest row: {names[i]}, h = {h[i]:.3g}."
        checks = [(c, m + row if m == _PENETRATING else m) for c, m in checks]
    return first_error(q0, checks, error=ValueError)


@eqx.filter_jit
def _project_initial(system, q, qd, t):
    q, qd, _ = project(system, q, qd, t, _INITIAL_ITERATIONS)
    r = residuals(system, q, qd, t)
    tol = tolerance(q.dtype)
    not_reached = (
        "the Gauss–Newton iteration did not reach the manifold g(q, t0) = 0 from "
        "this q0; start closer to it, or check that g = 0 has a solution near q0."
    )
    # The mass matrix and redundant rows as `simulate`'s check words them.
    checks = [*initial_checks(r, tol, known=False)[:2], (r.position > tol, not_reached)]
    where = "jl.project_initial_state: "
    return first_error((q, qd), [(c, where + m) for c, m in checks])


def project_initial_state(
    system: LagrangianSystem, q0: VectorLike, qd0: VectorLike, t0: ScalarLike = 0.0
) -> tuple[Vector, Vector]:
    """Move an initial state onto the constraint manifold at t0.

    The positions are projected onto g(q, t0) = 0 by Gauss–Newton steps of least
    mass-matrix norm, Δq = −M⁻¹Gᵀ(GM⁻¹Gᵀ)⁻¹g (20 iterations; a converged iteration
    stays put), then the velocities onto G q̇ + ∂g/∂t = 0 and A q̇ + a₀ = 0 by the
    correction of least kinetic energy. The mass-matrix metric makes the result
    independent of the units of the coordinates. Unilateral constraints h ≥ 0 are
    inequalities and are not touched. Differentiable with respect to the state and
    the system's params.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q0`, `qd0`: the initial state, shape (n,).
    - `t0`: the initial time (rheonomic constraints depend on it).

    **Returns:** the projected `(q0, qd0)`.

    **Raises:** an error (also under `jax.jit`) when the iteration does not reach
    the manifold, when the constraints are redundant at the state, or when the mass
    matrix is singular there.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    system, _, _ = jl.systems.cartesian_pendulum()
    q0, qd0 = jl.project_initial_state(
        system, jnp.array([0.9, -0.5]), jnp.array([1.0, 1.0])
    )  # now |q0| = l and q0 · qd0 = 0
    traj = jl.simulate(system, q0, qd0, t1=10.0)
    ```
    """
    q0, qd0, t0 = as_state(q0, qd0, t0, where="q0")
    if not system.constraints.bilateral:
        return q0, qd0
    return _project_initial(system, q0, qd0, t0)
