"""Linearization about an operating point, static equilibria and normal modes.

With constraints, `linearize` eliminates the dependent coordinates and velocities
as SymPy's `Linearizer` does, and `normal_modes` solves K v = ω² M v on the
tangent space with K = −∂(f + Gᵀλ)/∂q: both are derived in docs/linearization.md.
"""

from collections.abc import Iterable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jax.flatten_util import ravel_pytree

from ._cache import cached
from ._constraints import (
    SINGULAR_CONSTRAINTS,
    contact_set,
    dynamics,
    num_rows,
    velocity_rates,
)
from ._custom_types import Array, Float, ScalarLike, VectorLike
from ._errors import first_error
from ._fit._problem import check_names
from ._kinds import position_rows
from ._mass import Rows, cholesky, forcing, momenta_of, solve_lower, solve_upper_t
from ._system import LagrangianSystem, as_state, check_system
from ._validate import check_finite, check_finite_params


class Linearization(eqx.Module):
    """The linear system ẋ = A x + B u about an operating point.

    **Attributes:**

    - `A`: (s, s), the Jacobian of the flow with respect to the state
        x = [q[coordinates]; qd[velocities]].
    - `B`: (s, p), its Jacobian with respect to the inputs (the chosen params,
        flattened in tree order); p = 0 without inputs.
    """

    A: Float[Array, "s s"]
    B: Float[Array, "s p"]


def _indices(name: str, value, n: int, expected: int) -> tuple[int, ...]:
    """Validated static indices; fewer than n means the others are eliminated."""
    if value is None:
        return tuple(range(n))
    try:
        raw = np.asarray(value)
        integer = np.issubdtype(raw.dtype, np.integer) or raw.shape == (0,)
        idx = tuple(int(i) for i in raw) if raw.ndim == 1 and integer else None
    except (TypeError, ValueError):
        idx = None
    parsed, idx = idx is not None, idx or ()
    checks = [
        (not parsed, f"`{name}` must be a sequence of integer indices, got {value!r}."),
        (
            any(i < 0 or i >= n for i in idx),
            f"`{name}` must hold indices in [0, {n}), got {list(idx)}.",
        ),
        (len(set(idx)) != len(idx), f"`{name}` has repeated indices: {list(idx)}."),
        (
            len(idx) not in (n, expected),
            f"`{name}` must name the {expected} independent "
            f"ones (n = {n} minus the constraints on them) or all {n}, got {len(idx)}: "
            f"{list(idx)}.",
        ),
    ]
    first_error(None, checks, error=ValueError)
    return idx


def _input_mask(system: LagrangianSystem, inputs):
    """A bool pytree shaped like the params: which leaves are inputs."""
    params = system.params
    if isinstance(inputs, str) or (
        isinstance(inputs, Iterable) and not isinstance(inputs, dict)
    ):
        names = {inputs} if isinstance(inputs, str) else set(inputs)
        if not all(isinstance(k, str) for k in names):
            raise ValueError(
                "`inputs` must be names of params, or a bool pytree like the params, "
                f"got {inputs!r}."
            )
        check_names(names, params, "inputs", "pass a bool pytree instead")
        return {
            k: jtu.tree_map(lambda _, k=k: k in names, v) for k, v in params.items()
        }
    try:
        return jtu.tree_map(lambda m, _: bool(m), inputs, params)
    except (ValueError, TypeError):
        raise ValueError(
            "`inputs` must be names of params or a bool pytree with the structure "
            f"of the params {jtu.tree_structure(params)}, got {inputs!r}."
        ) from None


_OFF_MANIFOLD = (
    "The operating point (q, qd) does not satisfy the constraints (residual above "
    "√eps): linearize about a consistent state, e.g. from `jl.project_initial_state`."
)
_DEPENDENT = (
    "The dependent {0} cannot be solved from the constraints at the operating point "
    "(their constraint Jacobian is singular): choose other independent `{0}`."
)


def _solve_dependent(matrix: Array, rhs: Array, name: str) -> Array:
    """Solve the square system for the dependent `name`, with a named error."""
    x = jnp.linalg.solve(matrix, rhs)
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), _DEPENDENT.format(name))


@eqx.filter_jit
def _linearize(system, q, qd, t, coordinates, velocities, mask):
    n = q.shape[0]
    dynamic, static = eqx.partition(system, mask)
    u0, unravel = ravel_pytree(dynamic)
    active = contact_set(system, q, qd, t) if system.constraints.one_sided else None
    ci, vi = np.array(coordinates, dtype=int), np.array(velocities, dtype=int)

    def flow(x, u):
        sys = eqx.combine(unravel(u), static)
        xq, xv = x[: ci.shape[0]], x[ci.shape[0] :]
        if len(coordinates) == n:
            qq = q.at[ci].set(xq)
        else:
            # The dependent coordinates follow g = 0 to first order (all that
            # the Jacobian at the operating point needs).
            dep = np.setdiff1d(np.arange(n), coordinates)
            jac = jax.jacfwd(sys.constraints.positions)(q, t)
            slope = -_solve_dependent(jac[:, dep], jac[:, ci], "coordinates")
            dq = xq - q[ci]
            qq = q.at[ci].add(dq).at[dep].add(slope @ dq)
        if len(velocities) == n:
            vv = qd.at[vi].set(xv)
        else:
            dep = np.setdiff1d(np.arange(n), velocities)
            base = jnp.zeros_like(qd).at[vi].set(xv)

            def residual(vd):
                v = base.at[dep].set(vd)
                return velocity_rates(sys, qq, v, t, one_sided=False)

            zero = jnp.zeros(dep.shape[0], qd.dtype)
            jac = jax.jacfwd(residual)(zero)  # exact: affine in the velocities
            vd = -_solve_dependent(jac, residual(zero), "velocities")
            vv = base.at[dep].set(vd)
        qdd = dynamics(sys, qq, vv, t, active=active).accelerations
        return jnp.concatenate([vv[ci], qdd[vi]])

    x0 = jnp.concatenate([q[ci], qd[vi]])
    a = jax.jacfwd(flow, argnums=0)(x0, u0)
    b = jax.jacfwd(flow, argnums=1)(x0, u0).reshape(x0.shape[0], u0.shape[0])
    # q̈ is not defined where M is singular (a heavy top's Euler angles at θ = 0)
    # or the constraints are redundant: its derivatives would be finite and
    # meaningless.
    return Linearization(a, b), dynamics(system, q, qd, t, active=active).undefined()


@eqx.filter_jit
def _manifold_residual(system, q, qd, t, velocities=True) -> tuple[Array, Array]:
    """The largest constraint residual at (q, q̇, t), and whether it is too large."""
    parts = [jnp.zeros((0,), q.dtype)]
    stack = system.constraints
    if stack.positional:
        parts.append(stack.positions(q, t))
    if velocities and stack.bilateral:  # G q̇ + ∂g/∂t and a
        parts.append(velocity_rates(system, q, qd, t, one_sided=False))
    residual = jnp.max(jnp.abs(jnp.concatenate(parts)), initial=0.0)
    tol = jnp.sqrt(jnp.finfo(q.dtype).eps) * (1 + jnp.max(jnp.abs(q), initial=0.0))
    return residual, residual > tol


def _on_manifold(message: str, system, q, qd, t, velocities: bool = True) -> Array:
    """`q`, with a `ValueError` giving the residual if the constraints do not hold."""
    residual, off = _manifold_residual(system, q, qd, t, velocities)
    text = lambda: f" Residual: {float(residual):.3g}."  # noqa: E731
    return first_error(q, [(off, (message + "{}", text))], error=ValueError)


@cached
def linearize(
    system: LagrangianSystem,
    q: VectorLike,
    qd: VectorLike,
    t: ScalarLike = 0.0,
    *,
    coordinates=None,
    velocities=None,
    inputs=None,
) -> Linearization:
    """Linearize the equations of motion about the operating point (q, qd, t).

    The state is x = [q[coordinates]; qd[velocities]] and the flow ẋ = f(x, u)
    is differentiated exactly (forward-mode autodiff). With constraints, pass the
    independent coordinates (n − m of them) and velocities (n − m − k): the
    dependent ones follow the holonomic and nonholonomic constraints about the
    operating point, as SymPy's linearizer does, so a constrained system is
    linearized on its constraint manifold. A steady motion (q̇ ≠ 0, e.g. a
    bicycle at speed) is a valid operating point.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q`, `qd`, `t`: the operating point; it must satisfy the constraints.
    - `coordinates`: indices of the independent coordinates (None: all n).
    - `velocities`: indices of the independent velocities (None: all n).
    - `inputs`: which params are the inputs u: names (dict params) or a bool
        pytree like the params. None: B has no columns.

    **Returns:** a `Linearization` with `A` (s, s) and `B` (s, p).

    **Raises:** `ValueError` for bad indices or inputs, for a non-finite `q`, `qd`
    or `t`, and for an operating point off the constraint manifold; an error
    (also under `jax.jit`) naming a non-finite param, a singular mass matrix or
    redundant constraints at the operating point (where q̈ is not defined), and
    when the dependent coordinates or velocities cannot be solved for.

    **Example:**

    ```python
    system, _, _ = jl.systems.pendulum()
    lin = jl.linearize(system, jnp.array([0.0]), jnp.array([0.0]))
    jnp.linalg.eigvals(lin.A)  # ±i √(g/l)
    ```
    """
    check_system(system)
    q, qd, t = as_state(q, qd, t)
    point = {"q": q, "qd": qd, "t": t}
    q = check_finite_params(system.params, check_finite(point, q))
    n = q.shape[0]
    m, k, _ = num_rows(system, q, qd, t)
    coordinates = _indices("coordinates", coordinates, n, n - m)
    velocities = _indices("velocities", velocities, n, n - m - k)
    mask = jtu.tree_map(lambda _: False, system)
    if inputs is not None:
        mask = eqx.tree_at(lambda s: s.params, mask, _input_mask(system, inputs))
    q = _on_manifold(_OFF_MANIFOLD, system, q, qd, t)
    # The checks after the program, not in it: there they would be host callbacks.
    lin, undefined = _linearize(system, q, qd, t, coordinates, velocities, mask)
    lin = first_error(lin, undefined)
    return check_finite_params(system.params, check_finite(point, lin))


@eqx.filter_jit
def _normal_modes(system, q, t):
    n = q.shape[0]
    qd = jnp.zeros_like(q)
    # M formed for the eigenproblem; the equilibrium's q̈ and multipliers are
    # solved by the system's mass strategy, as the equations of motion are.
    mass = jax.jacfwd(momenta_of(system, q, t))(qd)
    mass = 0.5 * (mass + mass.T)
    factor, f = system.mass_strategy.terms(system, q, qd, t)
    if not system.constraints.positional:
        lam, redundant = None, False
        residual, _ = factor.solve(f)
        basis = jnp.eye(n, dtype=q.dtype)
    else:
        # The equilibrium multipliers: M q̈ = f + Gᵀλ with G q̈ = −b.
        g, b, _, _ = position_rows(system.constraints.positions, q, qd, t)
        kkt = factor.constrain(Rows(lambda v: g @ v, g), f)
        lam, redundant = kkt.multipliers(-b)
        residual, _ = kkt.solution(lam)
        # A basis of the null space of G: from the SVD at this point, projected
        # again so that derivatives see the tangent space move with the params.
        _, sv, vt = jnp.linalg.svd(jax.lax.stop_gradient(g), full_matrices=True)
        # Redundant rows (solved by the KKT solve) leave no basis of this size.
        eps = jnp.finfo(q.dtype).eps
        redundant = redundant | (g.shape[0] > n) | (sv[-1] <= eps**0.5 * sv[0])
        start = vt[g.shape[0] :].T
        basis = start - g.T @ jnp.linalg.solve(g @ g.T, g @ start)

    def generalized_force(q):
        f = forcing(system, q, jnp.zeros_like(q), t)
        if lam is not None:
            f = f + jax.jacfwd(system.constraints.positions)(q, t).T @ lam
        return f

    stiffness = -jax.jacfwd(generalized_force)(q)
    if basis.shape[1] == 0:  # the constraints hold every coordinate: no modes
        # (An error tied to an empty array is never raised: tied to q̈.)
        residual = first_error(residual, [(redundant, SINGULAR_CONSTRAINTS)])
        return jnp.zeros((0,), q.dtype), basis, residual, jnp.array(False)
    reduced_mass = basis.T @ mass @ basis
    reduced_stiffness = basis.T @ stiffness @ basis
    # A position force that is no gradient (circulatory: Q = c(−q₂, q₁)) makes K
    # unsymmetric; its oscillations are no normal modes (they may flutter).
    skew = reduced_stiffness - reduced_stiffness.T
    size = jnp.max(jnp.abs(reduced_stiffness), initial=0.0)
    eps = jnp.finfo(q.dtype).eps
    circulatory = jnp.max(jnp.abs(skew), initial=0.0) > jnp.sqrt(eps) * size
    reduced_stiffness = 0.5 * (reduced_stiffness + reduced_stiffness.T)
    chol = cholesky(reduced_mass)
    left = solve_lower(chol.factor, reduced_stiffness)
    sym = solve_lower(chol.factor, left.T)
    sym = 0.5 * (sym + sym.T)
    omega2, vectors = jnp.linalg.eigh(sym)
    modes = basis @ solve_upper_t(chol.factor, vectors)
    omega2 = first_error(
        omega2,
        [
            (redundant, SINGULAR_CONSTRAINTS),
            (
                chol.singular,
                "The mass matrix restricted to the constraint tangent space is "
                "singular or not positive definite at `q`.",
            ),
        ],
    )
    return omega2, modes, residual, circulatory


_CIRCULATORY = (
    "The stiffness K = −∂f/∂q at `q` is not symmetric: a position-dependent force "
    "that is not the gradient of a potential (a circulatory force) acts there. "
    "Its small oscillations are no normal modes (they may grow, flutter): use "
    "jl.linearize(system, q, zeros) and the eigenvalues of its A."
)

_OFF_CONSTRAINTS = (
    "`q` does not satisfy the holonomic constraints g(q, t) = 0: normal modes are "
    "the small oscillations about an equilibrium on them. Find one with "
    "jl.equilibrium(system, q), or jl.project_initial_state."
)

_NOT_EQUILIBRIUM = (
    "`q` is not a static equilibrium: at q̇ = 0 the accelerations are not 0{} (the "
    "constraints kept). Normal modes are the small oscillations about "
    "an equilibrium: find one with jl.equilibrium(system, q), or use jl.linearize "
    "about a motion."
)


def normal_modes(
    system: LagrangianSystem, q: VectorLike, t: ScalarLike = 0.0
) -> tuple[Float[Array, " d"], Float[Array, "n d"]]:
    """Squared frequencies and shapes of the small oscillations about `q`.

    Solves K v = ω² M v on the tangent space of the holonomic constraints, with
    M the mass matrix and K = −∂(f + Gᵀλ)/∂q the stiffness at q̇ = 0 (λ the
    equilibrium multipliers). Velocity-dependent (gyroscopic, damping) terms are
    left out: use `jl.linearize` for those. `q` must be an equilibrium (see
    `jl.equilibrium`); nonholonomic and unilateral constraints are not used.

    **Arguments:**

    - `system`: the `LagrangianSystem`.
    - `q`: the equilibrium, shape (n,).
    - `t`: the time.

    **Returns:** `(omega2, modes)`: ω² ascending, shape (d,) with d = n − m
    (negative: an unstable direction), and the mode shapes in full coordinates,
    shape (n, d), M-orthonormal (modesᵀ M modes = I) and tangent to the
    holonomic constraints.

    **Raises:** `ValueError` for a bad `system`, a non-finite `q` or `t`, a `q`
    off the holonomic constraints, a `q` that is not an equilibrium (q̈ at q̇ = 0
    above rounding; the message gives it), and a stiffness that is not symmetric
    (a circulatory position force); an error (also under `jax.jit`) for the same,
    naming a non-finite param, redundant constraints, and a mass matrix that is
    not positive definite on the tangent space.

    **Example:**

    ```python
    system, _, _ = jl.systems.double_pendulum()
    omega2, modes = jl.normal_modes(system, jnp.zeros(2))  # (g/l)(2 ∓ √2)
    ```
    """
    check_system(system)
    q, _, t = as_state(q, jnp.zeros_like(jnp.asarray(q)), t)
    inputs = {"q": q, "t": t}
    q = check_finite_params(system.params, check_finite(inputs, q))
    q = _on_manifold(_OFF_CONSTRAINTS, system, q, jnp.zeros_like(q), t, False)
    omega2, modes, residual, circulatory = _normal_modes(system, q, t)
    omega2 = check_finite_params(system.params, check_finite(inputs, omega2))
    # Off equilibrium: q̈ above that of a √eps (1 + max |q|) step on the stiffest mode.
    stiffest = jnp.maximum(1.0, jnp.max(jnp.abs(omega2), initial=0.0))
    tol = jnp.sqrt(jnp.finfo(q.dtype).eps) * ((1 + jnp.max(jnp.abs(q))) * stiffest)
    off = ~(jnp.max(jnp.abs(residual)) <= tol)
    contacts = (
        ""
        if not system.constraints.one_sided
        else " normal_modes does not use unilateral constraints: a contact "
        "that holds at `q` is to be written as a holonomic constraint."
    )
    accelerations = lambda: f": q̈ = {np.asarray(residual)}"  # noqa: E731
    checks = [(off, (_NOT_EQUILIBRIUM + contacts, accelerations))]
    checks.append((circulatory, _CIRCULATORY))
    omega2 = first_error(omega2, checks, error=ValueError)
    return omega2, modes
