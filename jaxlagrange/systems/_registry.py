"""`ReadySystem` and the registry of ready systems by name."""

import dataclasses
import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .._custom_types import Array
from .._errors import traced
from .._system import LagrangianSystem, as_float


class ReadySystem(eqx.Module):
    """A ready system: the `LagrangianSystem` with its default initial state.

    Unpacks as `system, q0, qd0 = jl.systems.double_pendulum()`.

    **Attributes:**

    - `system`: the `LagrangianSystem` (its params are `system.params`).
    - `q0`, `qd0`: the default initial state, shape (n,).
    - `name`: the registry name.
    - `coordinates`: one label per coordinate, for plots and tables.
    - `points`: `points(q, t, params)`, the points to draw at one state, shape
        (k, 2) or (k, 3); None where the system has none. Read through
        `positions`.
    - `units`: the unit of each coordinate (`"rad"`, `"m"`, ...; None: unknown);
        with units, time is in seconds and energy in joules (SI).
    - `point_names`: one name per point of `positions`, for legends.
    - `length_unit`: the unit of `positions` (None: unknown).
    - `param_units`: `(name, unit)` pairs, the unit of a param (`"body_mass"`)
        or of one entry of it (`"dof_damping[0]"`), for the axes of sweeps.
    - `links`: pairs `(i, j)` of point indices that figures draw as segments
        (a loaded model's joints and bodies); None: the points joined in order.
    """

    system: LagrangianSystem
    q0: Array
    qd0: Array
    name: str = eqx.field(static=True)
    coordinates: tuple[str, ...] = eqx.field(static=True)
    points: Callable[..., Array] | None = eqx.field(static=True, default=None)
    units: tuple[str, ...] | None = eqx.field(static=True, default=None)
    point_names: tuple[str, ...] | None = eqx.field(static=True, default=None)
    length_unit: str | None = eqx.field(static=True, default=None)
    param_units: tuple[tuple[str, str], ...] | None = eqx.field(
        static=True, default=None
    )
    links: tuple[tuple[int, int], ...] | None = eqx.field(static=True, default=None)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.system, self.q0, self.qd0))

    def positions(self, q: Any, t: Any = 0.0) -> Array:
        """The points of the system in physical space at coordinates `q`.

        **Arguments:**

        - `q`: coordinates, shape (n,), or a batch (..., n) such as `traj.q`.
        - `t`: the time (a scalar, or one per state in the batch); it matters only
            for systems that move a support in time (Kapitza's pendulum, the
            rotating rod).

        **Returns:** shape (k, d), or (..., k, d) for a batch: k points (bodies,
        pivots) in d = 2 or 3 dimensions, with y (2-D) or z (3-D) pointing up.

        **Raises:** `ValueError` when the system has no positions or `q` does not
        end with n coordinates.

        **Example:**

        ```python
        ready = jl.systems.double_pendulum()
        ready.positions(ready.q0)  # pivot, first bob, second bob: shape (3, 2)
        ```
        """
        if self.points is None:
            raise ValueError(f"The ready system {self.name!r} has no positions.")
        q = jnp.asarray(q)
        n = self.q0.shape[0]
        if q.ndim == 0 or q.shape[-1] != n:
            raise ValueError(
                f"`q` must end with the {n} coordinates of {self.name!r}, got shape "
                f"{q.shape}."
            )
        t = jnp.broadcast_to(jnp.asarray(t, q.dtype), q.shape[:-1])

        def fn(q, t):
            return jnp.asarray(self.points(q, t, self.system.params))

        for _ in range(q.ndim - 1):
            fn = jax.vmap(fn)
        return fn(q, t)


_REGISTRY: dict[str, Callable[..., ReadySystem]] = {}


def register(name: str, *, units=None, point_names=None, length_unit="m"):
    """Add a ready-system factory to the registry under `name`, with the labels
    of its figures: the `units` of its coordinates and the `point_names` of its
    positions (each a tuple, or a function of the number of coordinates)."""

    def wrap(factory: Callable[..., ReadySystem]) -> Callable[..., ReadySystem]:
        if name in _REGISTRY:
            raise ValueError(f"A ready system named {name!r} is already registered.")

        @functools.wraps(factory)
        def labelled(*args, **kwargs) -> ReadySystem:
            ready = factory(*args, **kwargs)
            n = len(ready.q0)
            label = {"units": units, "point_names": point_names}
            label = {k: v(n) if callable(v) else v for k, v in label.items()}
            return dataclasses.replace(ready, **label, length_unit=length_unit)

        _REGISTRY[name] = labelled
        return labelled

    return wrap


def names() -> tuple[str, ...]:
    """The names of all ready systems, sorted."""
    return tuple(sorted(_REGISTRY))


def get(name: str) -> Callable[..., ReadySystem]:
    """The factory of the ready system `name`; unknown names list the known ones."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(
            f"Unknown system {name!r}; known systems: {', '.join(names())}."
        ) from None


def describe(name: str) -> tuple[str, dict[str, str]]:
    """What the ready system `name` is, in one line, and one line per param
    ("" where none is written); e.g. `describe("kepler")[1]["eps"]`."""
    from ._descriptions import DESCRIPTIONS

    factory = get(name)
    summary, params = DESCRIPTIONS.get(name, ("", {}))
    if not summary:
        doc = (factory.__doc__ or "").strip().splitlines()
        summary = doc[0].rstrip(".") if doc else ""
    return summary, dict(params)


def make(name: str, **kwargs) -> ReadySystem:
    """Build the ready system `name`, e.g. `make("spring_chain", n=5, params={"k": 2.0})`."""
    return get(name)(**kwargs)


def origin_and_q(q, t, params):
    """The points of a system whose coordinates are points' in the plane, (x₁, y₁,
    x₂, y₂, ...): the origin (a pivot, an axis, a centre of attraction), then them."""
    return jnp.concatenate([jnp.zeros((1, 2), q.dtype), q.reshape(-1, 2)])


# Params that are physical only when positive (masses, lengths, radii, stiffnesses,
# the gravitational parameter, principal moments), and restitution coefficients.
_POSITIVE = frozenset(
    {"m", "m1", "m2", "l", "l1", "l2", "R", "k", "mu", "q_eq", "I1", "I2", "I3"}
)
_UNIT_INTERVAL = frozenset({"e"})


def check_physical(name: str, key: str, value: Array) -> None:
    """Apply `_param`'s checks of system `name`'s param `key` to `value`."""
    _param(name, key, value, value)


def merge_params(
    name: str, defaults: Mapping[str, Any], params: Mapping[str, Any] | None
) -> dict[str, Array]:
    """Defaults overridden by `params`; an unknown key names the valid ones."""
    params = {} if params is None else dict(params)
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ValueError(
            f"Unknown parameter {unknown[0]!r} for system {name!r}; valid parameters: "
            f"{', '.join(sorted(defaults))}."
        )
    return {k: _param(name, k, v, params.get(k, v)) for k, v in defaults.items()}


def _unphysical(key: str, value: Array) -> str | None:
    """What the param `key` must be and `value` is not, or None."""
    if traced(value):
        return None  # (e.g. a batch of params: checked where it is concrete)
    values = np.asarray(value)
    outside = np.any((values < 0) | (values > 1))
    for bad, what in (
        (not np.all(np.isfinite(values)), "be finite"),
        (key in _POSITIVE and not np.all(values > 0), "be positive"),
        (key in _UNIT_INTERVAL and outside, "lie in [0, 1]"),
    ):
        if bad:
            return f"{what}, got {values}"
    return None


def _param(name: str, key: str, default, given) -> Array:
    """The param `key` as an array shaped like its default, checked."""
    try:
        value = as_float(given)
    except (TypeError, ValueError):
        why = (
            f"be a number or an array of numbers, got {type(given).__name__} {given!r}"
        )
    else:
        shape = np.shape(default)
        if value.shape != shape:
            why = f"have shape {shape}, got {value.shape}"
        elif (why := _unphysical(key, value)) is None:
            return value
    raise ValueError(f"Parameter {key!r} of system {name!r} must {why}.")


# From this many coordinates on, the ready systems whose mass matrix is cheap to
# apply (a spring chain's m·I, the cavity's identity plus a rank-2 term) solve
# M q̈ = f by matrix-free conjugate gradients: measured by
# `benchmarks/bench_large.py`, CG wins from n ≈ 16 on (the dense Hessian and
# factorization cost O(n³), one CG solve a few O(n) or O(n²) products).
CG_FROM = 16


def default_mass_solver(n: int):
    """None (dense) for small systems, `lineax.CG` from `CG_FROM` coordinates on."""
    import lineax as lx

    return lx.CG(rtol=1e-12, atol=1e-12) if n >= CG_FROM else None


def initial_state(
    name: str, q0: Any, qd0: Any, default_q0: Any, default_qd0: Any
) -> tuple[Array, Array]:
    """The initial state, defaults where None, with a shape check naming the system."""
    q0 = as_float(default_q0 if q0 is None else q0)
    qd0 = as_float(default_qd0 if qd0 is None else qd0)
    # (A list of the defaults may hold a traced param: `mass_on_sphere`'s R
    # under `jax.grad`, which NumPy cannot read.)
    expected = jax.eval_shape(as_float, default_q0).shape
    for label, x in (("q0", q0), ("qd0", qd0)):
        if x.shape != expected:
            raise ValueError(
                f"`{label}` for system {name!r} must have shape {expected}, got {x.shape}."
            )
    return q0, qd0
