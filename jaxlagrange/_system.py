"""`LagrangianSystem`, and calling user functions with or without params."""

import copy
import inspect
from collections.abc import Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import lineax as lx
import numpy as np

from ._coefficients import check_friction, known_coefficient
from ._custom_types import Array, Params, UserFunction
from ._kinds import Constraints
from ._mass import AbstractMassStrategy, check_mass_solver, mass_strategy
from ._validate import as_real, check_callable, returned


_SIGNATURES = {
    "lagrangian": "(q, qd, t)",
    "force": "(q, qd, t)",
    "dissipation": "(q, qd, t)",
    "holonomic": "(q, t)",
    "nonholonomic": "(q, qd, t)",
    "unilateral": "(q, t)",
    "slip": "(q, qd, t)",
    "mass_preconditioner": "(q, qd, t)",
}
USER_FUNCTIONS = tuple(_SIGNATURES)  # the fields that hold the user's functions


def as_float(x: Any) -> Array:
    """`jnp.asarray(x, dtype=float)`, concrete values converted by NumPy."""
    # An eager conversion by JAX compiles a small program on its first use.
    if any(isinstance(leaf, jax.Array) for leaf in jax.tree.leaves(x)):
        return jnp.asarray(x, dtype=float)
    return jax.device_put(np.asarray(x, dtype=jnp.result_type(float)))


def to_leaf(x: Any) -> Any:
    # Python and NumPy numbers become JAX floats, so that they are differentiable
    # leaves; everything else (arrays, activation functions of an MLP, ...) is kept.
    if isinstance(x, bool):
        return x
    if isinstance(x, (int, float)) or (
        isinstance(x, (np.ndarray, np.generic)) and np.issubdtype(x.dtype, np.integer)
    ):
        return as_float(x)
    if isinstance(x, (np.ndarray, np.generic)):
        return jax.device_put(x)
    return x


# The coefficients that may name a param (`restitution="e"`) instead of holding a
# value.
_COEFFICIENTS = ("restitution", "friction", "static_friction")


def _leaf_or_name(x: Any) -> tuple[Any, Any]:
    """A coefficient as (leaf, None), or (None, it) for a param's name or a function."""
    # A function of the params: e.g. a loaded model's μ, mixed from `geom_friction`.
    return (None, x) if isinstance(x, str) or callable(x) else (to_leaf(x), None)


def _accepts(fn: UserFunction, nargs: int) -> bool | None:
    """Whether `fn` can be called with `nargs` positional arguments (None: unknown)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        signature.bind(*range(nargs))
    except TypeError:
        return False
    return True


def _describe(fn: UserFunction) -> str:
    try:
        return f"{getattr(fn, '__name__', type(fn).__name__)}{inspect.signature(fn)}"
    except (TypeError, ValueError):
        return repr(fn)


class LagrangianSystem(eqx.Module):
    """A mechanical system given by a Lagrangian L(q, q̇, t), written in JAX.

    Every user function takes `(q, qd, t)` (constraints `(q, t)`), followed by
    `params` when the system has params.

    **Arguments:**

    - `lagrangian`: `L(q, qd, t[, params]) -> scalar`.
    - `params`: any pytree of arrays, passed to every user function. Its array leaves
        are the differentiable parameters of the system (Python numbers are turned
        into JAX floats). `None` means the functions take no `params` argument.
    - `force`: generalized non-conservative force `Q(q, qd, t[, params]) -> (n,)`.
    - `dissipation`: Rayleigh function `R(q, qd, t[, params]) -> scalar`; adds
        `-∂R/∂qd` to the generalized force.
    - `holonomic`: `g(q, t[, params]) -> (m,)`, the constraints `g = 0`.
    - `nonholonomic`: `a(q, qd, t[, params]) -> (k,)`, affine in `qd`, the
        constraints `a = 0`.
    - `unilateral`: `h(q, t[, params]) -> (u,)`, the one-sided constraints `h >= 0`.
    - `restitution`: coefficient of restitution of impacts on the unilateral
        constraints, a scalar or one per constraint (0, the default: plastic; 1:
        elastic); or the name of a param that holds it (`restitution="e"`), so
        that the fits, batches and sweeps over that param change it.
    - `slip`: `s(q, qd, t[, params]) -> (u,)`, affine in `qd`: the tangential slip
        velocity at each unilateral contact (zero when it rolls or sticks). With
        it, the contacts have Coulomb friction (see `friction`). Shape (u, 2):
        two components per contact in an orthonormal tangent basis, a 3-D
        contact with isotropic friction (the force −μ_k λ_N s/|s| slipping).
    - `friction`: the kinetic friction coefficient μ_k ≥ 0, a scalar or one per
        unilateral constraint (a differentiable leaf, like `params`); or the name
        of a param that holds it (`friction="mu"`). Slipping, the contact force
        adds `−μ_k λ_N sign(s) ∂s/∂qd` to the generalized force.
    - `static_friction`: μ_s ≥ μ_k (default μ_k), or the name of a param that
        holds it: a contact with s = 0 sticks (s = 0 is then a constraint with
        multiplier λ_T) while |λ_T| ≤ μ_s λ_N.
    - `mass_solver`: how M q̈ = f is solved. None (the default): a dense Cholesky
        factorization, unrolled for small n. A lineax solver is used as given: an
        iterative one (`lineax.CG(rtol=1e-10, atol=1e-10)`, `GMRES`, ...) works
        matrix-free on M, by Hessian-vector products of L in qd, never forming
        M (the choice for large systems with a sparse or cheap-to-apply M); any
        other (`lineax.Cholesky()`, `lineax.LU()`) gets the materialized M. Every
        solve with M (constraints, friction, impulses, projection, diagnosis)
        and the constrained Schur complement C M⁻¹ Cᵀ use it. `lineax.CG` is
        run by jaxlagrange's own conjugate gradients (same `rtol`, `atol`,
        `norm`, `max_steps`; fewer products, see the large-systems guide);
        `lineax.Normal(lineax.CG(...))` or another iterative solver goes
        through `lineax.linear_solve`.
    - `mass_preconditioner`: for an iterative `mass_solver`, a function
        `(q, qd, t[, params])` returning the diagonal of M (or an approximation:
        CG is then preconditioned by its inverse), or a lineax operator
        approximating M⁻¹ (tagged positive semidefinite).
    - `not_imported`: what the model this system was made from has that its
        functions leave out, one phrase each (`jl.mujoco.load` fills it in);
        every `Trajectory` simulated from it carries the same record.

    Sign convention: `d/dt ∂L/∂qd − ∂L/∂q = Q + Gᵀλ + Aᵀμ`.

    The fields hold the functions as given; evaluated (params passed, shapes
    checked) they are `system.L(q, qd, t)`, `system.Q(q, qd, t)`, the constraint
    kinds stacked in `system.constraints`, and `system.coefficient(name)`.

    **Example:**

    ```python
    import jax.numpy as jnp
    import jaxlagrange as jl

    def lagrangian(q, qd, t, params):
        m, l = params["m"], params["l"]
        return 0.5 * m * l**2 * qd[0] ** 2 + m * 9.81 * l * jnp.cos(q[0])

    pendulum = jl.LagrangianSystem(lagrangian, params={"m": 1.0, "l": 2.0})
    qdd = jl.accelerations(pendulum, jnp.array([0.3]), jnp.array([0.0]), 0.0)
    ```
    """

    lagrangian: UserFunction = eqx.field(static=True)
    params: Params
    force: UserFunction | None = eqx.field(static=True)
    dissipation: UserFunction | None = eqx.field(static=True)
    holonomic: UserFunction | None = eqx.field(static=True)
    nonholonomic: UserFunction | None = eqx.field(static=True)
    unilateral: UserFunction | None = eqx.field(static=True)
    slip: UserFunction | None = eqx.field(static=True)
    # Each coefficient is a leaf, or None when its `*_param` names the param
    # holding it (read by `coefficient`).
    restitution: Any
    restitution_param: str | None = eqx.field(static=True)
    friction: Any
    friction_param: str | None = eqx.field(static=True)
    static_friction: Any
    static_friction_param: str | None = eqx.field(static=True)
    mass_solver: lx.AbstractLinearSolver | None = eqx.field(static=True)
    mass_preconditioner: UserFunction | None = eqx.field(static=True)
    # How every solve with M is done, made once from `mass_solver` (`_mass`).
    mass_strategy: AbstractMassStrategy = eqx.field(repr=False)  # no leaves
    has_params: bool = eqx.field(static=True)
    not_imported: tuple[str, ...] = eqx.field(static=True)

    def __init__(
        self,
        lagrangian: UserFunction,
        params: Params = None,
        force: UserFunction | None = None,
        dissipation: UserFunction | None = None,
        holonomic: UserFunction | None = None,
        nonholonomic: UserFunction | None = None,
        unilateral: UserFunction | None = None,
        *,
        restitution: Any = 0.0,
        slip: UserFunction | None = None,
        friction: Any = None,
        static_friction: Any = None,
        mass_solver: lx.AbstractLinearSolver | None = None,
        mass_preconditioner: UserFunction | None = None,
        not_imported: tuple[str, ...] = (),
    ):
        self.lagrangian = lagrangian
        self.not_imported = tuple(map(str, not_imported))
        self.has_params = params is not None
        self.params = jax.tree_util.tree_map(to_leaf, params)
        self.force = force
        self.dissipation = dissipation
        self.holonomic = holonomic
        self.nonholonomic = nonholonomic
        self.unilateral = unilateral
        self.restitution, self.restitution_param = _leaf_or_name(restitution)
        self.slip = slip
        self.friction, self.friction_param = _leaf_or_name(friction)
        self.static_friction, self.static_friction_param = _leaf_or_name(
            friction if static_friction is None else static_friction
        )
        check_mass_solver(mass_solver, mass_preconditioner)
        self.mass_solver = mass_solver
        self.mass_preconditioner = mass_preconditioner
        self.mass_strategy = mass_strategy(mass_solver)

    def __check_init__(self):
        for coefficient in _COEFFICIENTS:
            name = getattr(self, f"{coefficient}_param")
            if isinstance(name, str) and not (
                isinstance(self.params, Mapping) and name in self.params
            ):
                names = sorted(self.params) if isinstance(self.params, Mapping) else []
                raise ValueError(
                    f"`{coefficient}` names the param {name!r}, which the system's "
                    f"params do not have (they are: {names})."
                )
        check_friction(self)
        values = known_coefficient(self, "restitution")
        if values is not None and not (
            np.issubdtype(values.dtype, np.number)
            and np.all((values >= 0) & (values <= 1))
        ):
            raise ValueError(
                "`restitution` must lie in [0, 1] (0: plastic, 1: elastic), got "
                f"{values}."
            )
        for name, signature in _SIGNATURES.items():
            fn = getattr(self, name)
            if fn is None:
                continue
            check_callable(name, fn, signature)
            nargs = signature.count(",") + 1
            with_params = _accepts(fn, nargs + 1)
            if self.has_params and with_params is False:
                raise ValueError(
                    f"`{name}` must take {signature[:-1]}, params) because the system "
                    f"has params, but it is {_describe(fn)}."
                )
            if not self.has_params and _accepts(fn, nargs) is False:
                hint = (
                    " Pass `params=` to LagrangianSystem to give it params."
                    if with_params
                    else ""
                )
                raise ValueError(
                    f"`{name}` must take {signature} because the system has no "
                    f"params, but it is {_describe(fn)}.{hint}"
                )

    def with_params(self, params: Params) -> "LagrangianSystem":
        """The same system with other `params` (also where it had None).

        Their leaves are converted and checked as the constructor's are: Python
        numbers become JAX floats, and a coefficient that names a param must find
        it, in its range where its value is known (traced values, as inside
        `jax.jit`, `vmap` or `grad`, are checked by the solves that read them).

        **Arguments:**

        - `params`: the new params, a pytree as for `LagrangianSystem`.

        **Returns:** a new `LagrangianSystem`; this one is unchanged.

        **Raises:** `ValueError` as the constructor, for a coefficient's param
        missing or out of its range.

        **Example:**

        ```python
        system, q0, qd0 = jl.systems.pendulum()
        longer = system.with_params({**system.params, "l": 2.0})
        ```
        """
        new = eqx.tree_at(
            lambda s: s.params,
            self,
            jax.tree.map(to_leaf, params),
            is_leaf=lambda x: x is None,
        )
        new.__check_init__()
        return new

    def with_mass_solver(
        self,
        mass_solver: lx.AbstractLinearSolver | None,
        mass_preconditioner: UserFunction | None = None,
    ) -> "LagrangianSystem":
        """The same system with another `mass_solver` (and `mass_preconditioner`).

        **Arguments:** as for the keyword arguments of the same names.

        **Returns:** a new `LagrangianSystem`; this one is unchanged.

        **Raises:** `ValueError` when `mass_solver` is neither None nor a lineax
        solver.

        **Example:**

        ```python
        import lineax as lx

        system, q0, qd0 = jl.systems.spring_chain(n=1000)
        system = system.with_mass_solver(lx.CG(rtol=1e-10, atol=1e-10))
        ```
        """
        check_mass_solver(mass_solver, mass_preconditioner)
        new = copy.copy(self)
        object.__setattr__(new, "mass_solver", mass_solver)
        object.__setattr__(new, "mass_preconditioner", mass_preconditioner)
        object.__setattr__(new, "mass_strategy", mass_strategy(mass_solver))
        new.__check_init__()
        return new

    def with_mass_strategy(self, strategy: AbstractMassStrategy) -> "LagrangianSystem":
        """The same system solving with M by `strategy` (e.g. the unrolled dense
        solve of the ensemble kernel); `mass_solver` is unchanged."""
        return eqx.tree_at(lambda s: s.mass_strategy, self, strategy)

    def coefficient(self, coefficient: str) -> Any:
        """The value of `restitution`, `friction` or `static_friction`: the leaf,
        the param it names, or the function of the params it is."""
        name = getattr(self, f"{coefficient}_param")
        if callable(name):
            return name(self.params)
        return getattr(self, coefficient) if name is None else self.params[name]

    # The evaluated functions (as diffrax's `ODETerm.vf` beside `vector_field`):
    # the user's functions called with or without params, with the trace-time
    # shape checks. The constraint kinds evaluate theirs in `_kinds`.

    def call(self, fn: UserFunction, *args):
        """`fn(*args, params)`, or `fn(*args)` for a system without params."""
        return fn(*args, self.params) if self.has_params else fn(*args)

    def L(self, q: Array, qd: Array, t: Array) -> Array:
        """The Lagrangian L(q, q̇, t), a real scalar."""
        try:
            out = jnp.asarray(self.call(self.lagrangian, q, qd, t))
        except (ValueError, IndexError) as error:
            # q's length differs from the coordinates L reads (`th1, th2 = q`,
            # q[2]): the message names the length, not just the unpacking.
            if not ("unpack" in str(error) or "out of bounds" in str(error)):
                raise
            raise ValueError(
                f"`lagrangian` failed for q of length {q.shape[0]} ({error}): check "
                "that q0 (and qd0) have the system's number of coordinates."
            ) from error
        detail = f" for q of shape {q.shape}"
        returned("lagrangian", out, out.shape == (), "a scalar", detail)
        if not jnp.issubdtype(out.dtype, jnp.floating):
            raise ValueError(
                f"`lagrangian` must return a real floating-point scalar, but it "
                f"returned dtype {out.dtype}."
            )
        return out

    def Q(self, q: Array, qd: Array, t: Array) -> Array | None:
        """The total generalized force Q(q, q̇, t): `force` plus the Rayleigh term
        `-∂R/∂qd` (None without either)."""
        total = None
        if self.force is not None:
            total = jnp.asarray(self.call(self.force, q, qd, t))
            what = f"shape {q.shape} (the shape of q)"
            returned("force", total, total.shape == q.shape, what)
        if self.dissipation is not None:

            def rayleigh(qd):
                out = jnp.asarray(self.call(self.dissipation, q, qd, t))
                what = "a scalar (the Rayleigh function)"
                return returned("dissipation", out, out.shape == (), what)

            damping = -jax.grad(rayleigh)(qd)
            total = damping if total is None else total + damping
        return total

    @property
    def constraints(self) -> Constraints:
        """The constraint kinds, stacked (`_kinds`): their residuals and rows."""
        return Constraints(self)

    @property
    def has_constraints(self) -> bool:
        return bool(self.constraints.kinds)


def as_state(q, qd, t, where: str = "q") -> tuple[Array, Array, Array]:
    """Check and convert a state `(q, qd, t)` to arrays of one floating dtype."""
    q, qd = as_coordinates(q, qd, where)
    t = jnp.asarray(t)
    if t.shape != ():
        raise ValueError(f"`t` must be a scalar, got shape {t.shape}.")
    return q, qd, t.astype(q.dtype)


def as_coordinates(q, qd, where: str = "q") -> tuple[Array, Array]:
    """`q` and `qd` (named `where` and its rate) checked, in one floating dtype."""
    rate = where.replace("q", "qd", 1)
    q, qd = as_real(where, q), as_real(rate, qd)
    if q.ndim != 1 or q.shape[0] == 0:
        raise ValueError(
            f"`{where}` must be a 1-D array of at least one coordinate, got shape "
            f"{q.shape}."
        )
    if qd.shape != q.shape:
        raise ValueError(
            f"`{where}` and `{rate}` must have the same shape, got {where} {q.shape} "
            f"and {rate} {qd.shape}."
        )
    dtype = jnp.result_type(q.dtype, qd.dtype, float)
    return q.astype(dtype), qd.astype(dtype)


def check_system(system) -> None:
    if not isinstance(system, LagrangianSystem):
        raise ValueError(
            f"`system` must be a jaxlagrange.LagrangianSystem, got {type(system).__name__}."
        )
