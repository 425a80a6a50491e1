"""The problem `fit` solves: its unknowns (trainable params, positive ones as
logarithms, and the shooting segments' starts), the loss and residuals as
functions of them, and `prepare`, which builds it from `fit`'s checked
arguments."""

from collections.abc import Collection, Mapping
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._custom_types import Params
from .._eom import mass_matrix, unread_velocities
from .._errors import traced
from .._results import code_of
from .._system import LagrangianSystem
from .._trajectory import RESULTS
from ._loss import as_data, layout_of, residuals
from ._solvers import strong


def _bool_leaf(x) -> bool:
    if not isinstance(x, (bool, np.bool_)):
        raise ValueError(f"must hold bools, got {type(x).__name__} {x!r}")
    return bool(x)


def check_names(names, params, what: str, instead: str) -> None:
    """Refuse param `names` unless `params` is a dict that has them all."""
    if not isinstance(params, Mapping):
        raise ValueError(
            f"`{what}` given by name needs dict params, but system.params is a "
            f"{type(params).__name__}: {instead}."
        )
    unknown = sorted(set(names) - set(params))
    if unknown:
        raise ValueError(
            f"`{what}` names unknown params {unknown}; valid names: {sorted(params)}."
        )


def mask(spec, params, name: str) -> Params:
    """A pytree of bools with the structure of `params`, from `spec`."""
    if isinstance(spec, bool):
        return jtu.tree_map(lambda _: spec, params)
    if (
        isinstance(spec, Collection)
        and not isinstance(spec, Mapping)
        and all(isinstance(s, str) for s in spec)
    ):
        if isinstance(spec, str):
            spec = [spec]
        check_names(spec, params, name, "pass a pytree of bools")
        return type(params)(
            {k: jtu.tree_map(lambda _, k=k: k in spec, v) for k, v in params.items()}
        )
    try:
        return jtu.tree_map(
            lambda m, sub: jtu.tree_map(lambda _: _bool_leaf(m), sub), spec, params
        )
    except ValueError as e:
        raise ValueError(
            f"`{name}` must be True/False, a collection of top-level param names, "
            "or a pytree of bools with the structure of system.params (or a prefix "
            f"of it): {str(e).splitlines()[0]}"
        ) from None


def encode(params, trainable, positive) -> Params:
    """The unconstrained unknowns: trainable leaves, positive ones as logarithms."""
    return jtu.tree_map(
        lambda x, t, p: (_log(x) if p else x) if t else None,
        params,
        trainable,
        positive,
    )


def _log(x):
    # A concrete guess in NumPy: an eager jnp.log is one more small compile.
    return jnp.log(x) if traced(x) else np.log(np.asarray(x))


class Problem(eqx.Module):
    """Everything the loss needs besides the unknowns."""

    system: LagrangianSystem
    fixed: Params  # the non-trainable params (None at trainable leaves)
    positive: Params = eqx.field(static=True)
    layouts: list
    fit_initial_state: bool = eqx.field(static=True)
    continuity_weight: Any
    options: dict
    sigma_given: bool = eqx.field(static=True)  # every `Observations` has `sigma`

    @property
    def total(self):
        """The summed weights of all observed quantities."""
        return sum(layout.total * layout.kinds for layout in self.layouts)

    @property
    def count(self):
        """N, the number of observed quantities weighted > 0 (dof: N − P)."""
        return sum(layout.count * layout.kinds for layout in self.layouts)

    def decoded(self, theta):
        """The params, and the segment starts of each observed trajectory."""
        unknowns, starts = theta
        values = jtu.tree_map(
            lambda u, p: None if u is None else (jnp.exp(u) if p else u),
            unknowns,
            self.positive,
            is_leaf=lambda x: x is None,
        )
        if not self.fit_initial_state:
            # The held initial state is not an unknown: only the later segments'.
            held = [layout.starts for layout in self.layouts]
            starts = [
                (jnp.concatenate([q0[:1], q]), jnp.concatenate([qd0[:1], qd]))
                for (q, qd), (q0, qd0) in zip(starts, held, strict=True)
            ]
        return eqx.combine(values, self.fixed), starts

    def loss(self, theta):
        """The fit loss, and the result code of every solve."""
        r, _, codes, _ = self.residuals(theta)
        return jnp.sum(r**2), codes

    def forward(self) -> "Problem":
        """The problem with its solves differentiated in forward mode."""
        return eqx.tree_at(lambda p: p.options["adjoint"], self, diffrax.ForwardMode())

    def residuals(self, theta, diagnose: bool = False):
        params, starts = self.decoded(theta)
        system, weight = self.system.with_params(params), self.continuity_weight
        return residuals(system, self.layouts, starts, weight, self.options, diagnose)

    def named_codes(self, theta, codes) -> np.ndarray:
        """The solves' result `codes` at `theta`, the causes of stopped solves named."""
        codes = np.asarray(codes)
        if not np.isin(codes, _PROVISIONAL).any():
            return codes
        # A diagnosed evaluation, compiled only on this failure path.
        return np.asarray(_diagnosed_codes(theta, self))


# The codes of a stopped solve before its diagnosis (`_guard.provisional`).
_PROVISIONAL = [
    int(code_of(RESULTS.step_size_collapsed)),
    int(code_of(RESULTS.non_finite_state)),
]


@eqx.filter_jit
def _diagnosed_codes(theta, problem: Problem):
    return problem.residuals(theta, diagnose=True)[2]


def prepare(
    system,
    data,
    params,
    *,
    trainable,
    positive,
    fit_initial_state,
    segments,
    continuity_weight,
    options,
):
    """`fit`'s problem, unknowns, trained mask and data, checked before any compile."""
    data = as_data(data)
    weight = np.asarray(continuity_weight)
    if not (
        weight.shape == ()
        and np.issubdtype(weight.dtype, np.number)
        and np.isfinite(weight)
        and weight >= 0
    ):
        raise ValueError(
            "`continuity_weight` must be a finite number >= 0, got "
            f"{continuity_weight!r}."
        )
    explicit = trainable is not None and trainable is not True
    trainable = mask(True if trainable is None else trainable, params, "trainable")
    integers = [
        jtu.keystr(path)
        for path, x in jtu.tree_leaves_with_path(eqx.filter(params, trainable))
        if eqx.is_array(x) and not eqx.is_inexact_array(x)
    ]
    if integers and explicit:
        raise ValueError(
            f"trainable param {integers[0]} has an integer dtype and cannot be "
            "fitted: give it as a float (e.g. 2.0 instead of 2)."
        )
    trainable = jtu.tree_map(
        lambda t, x: t and eqx.is_inexact_array(x), trainable, params
    )
    trainable = _driven(params, trainable, data, explicit)
    positive = mask(False if positive is None else positive, params, "positive")
    both = jtu.tree_map(lambda t, p: t and p, trainable, positive)
    for path, x in jtu.tree_leaves_with_path(eqx.filter(params, both)):
        if not np.all(np.asarray(x) > 0):
            raise ValueError(
                f"positive param {jtu.keystr(path)} must start > 0 (it is fitted "
                f"as its logarithm), got {np.asarray(x)}."
            )
    # After the positive params' check: a length of 0 makes M singular, which
    # this check would blame on the data.
    check_guess(system, params, data)
    if fit_initial_state is None:
        # A state the data give (`q0`, `qd0`) is held; one read off a noisy
        # sample is fitted, or its noise would bias every param.
        fit_initial_state = not all(
            d.q0 is not None and d.qd0 is not None for d in data
        )
    if not any(jtu.tree_leaves(trainable)) and not fit_initial_state and segments == 1:
        hint = f" (integer params are never trained: {integers})" if integers else ""
        raise ValueError(
            f"nothing to fit: no trainable params{hint} and fit_initial_state=False."
        )
    layouts = [layout_of(d, segments) for d in data]
    if not fit_initial_state:
        check_given_starts(system, params, trainable, data, layouts)
    problem = Problem(
        system,
        eqx.filter(params, trainable, inverse=True),
        positive,
        layouts,
        fit_initial_state,
        weight * 1.0,
        options,
        all(d.sigma is not None for d in data),
    )
    starts = [
        layout.starts if fit_initial_state else tuple(x[1:] for x in layout.starts)
        for layout in layouts
    ]
    theta = strong((encode(params, trainable, positive), starts))
    return problem, theta, trainable, data


def _driven(params, trainable, data, explicit: bool):
    """`trainable` without `ctrl` where `Observations(ctrl=...)` drives it."""
    shapes = {d.ctrl.shape[1:] for d in data if d.ctrl is not None}
    if not shapes:
        return trainable
    have = isinstance(params, Mapping) and "ctrl" in params
    have = np.shape(params["ctrl"]) if have else None
    if shapes != {have}:
        raise ValueError(
            f"`Observations.ctrl` of shape (T, {'/'.join(str(*s) for s in shapes)}) "
            "drives the system's `ctrl` param, but system.params "
            + ("has no 'ctrl'" if have is None else f"has 'ctrl' of shape {have}")
            + ": a model with actuators has one of shape (nu,)."
        )
    if explicit and any(jtu.tree_leaves(trainable["ctrl"])):
        raise ValueError("`trainable` names 'ctrl', which `Observations.ctrl` drives.")
    return eqx.tree_at(lambda t: t["ctrl"], trainable, False)


def check_given_starts(system, params, trainable, data, layouts) -> None:
    """Refuse a held start off the constraints that no fitted param moves."""
    # No param reaches it, and the fit, from its projection, is biased by the
    # distance; where a fitted param moves the constraints, the distance fits it.
    fitted, held = eqx.partition(params, trainable)
    for i, (obs, layout) in enumerate(zip(data, layouts, strict=True)):
        # A first sample masked by a zero weight (an outlier) is still the held
        # start, q0 = q[0].
        if obs.q0 is None and not np.all(layout.weight[0, 0] > 0):
            raise ValueError(
                f"the first sample of data[{i}] has weight 0, but it is the held "
                "initial state (q0 = q[0] when none is given): give `q0` (and "
                "`qd0`), or fit it (`fit_initial_state`)."
            )
        if obs.q0 is None or not system.constraints.positional:
            continue
        q0, t0 = jnp.asarray(layout.starts[0][0]), jnp.asarray(layout.ts[0, 0])

        def residual(fitted, q0=q0, t0=t0):
            new = system.with_params(eqx.combine(fitted, held))
            return new.constraints.positions(q0, t0)

        g = np.asarray(residual(fitted))
        slopes = [np.asarray(x) for x in jtu.tree_leaves(jax.jacfwd(residual)(fitted))]
        moved = np.zeros(g.shape, bool)
        for slope in slopes:
            moved |= np.any(slope.reshape(g.size, -1) != 0, axis=1)
        # The distance from each constraint surface (|g| / |∂g/∂q|), against a
        # tolerance that takes a q0 rounded to a measurement's digits: such a
        # start is projected, its distance a negligible bias.
        gradient = np.asarray(jax.jacfwd(lambda q: residual(fitted, q))(q0))
        norms = np.linalg.norm(gradient.reshape(g.size, -1), axis=1)
        distance = np.abs(g) / np.where(norms > 0, norms, 1.0)
        tol = np.finfo(g.dtype).eps ** (1 / 3) * (1 + np.max(np.abs(q0)))
        off = (distance > tol) & ~moved
        if off.any():
            raise ValueError(
                f"the initial position of data[{i}] (its q0) is off the holonomic "
                f"constraints, which no fitted param moves: it is "
                f"{np.max(distance[off]):.3g} from them. Give a q0 on them (project "
                "it with `jl.project_initial_state`), or fit it (`fit_initial_state`)."
            )


def check_not_traced(*inputs) -> None:
    """Refuse a traced `fit`: it runs its own loop and reads results on the host."""
    if traced(inputs):
        raise ValueError(
            "jl.fit runs its own compiled solver loop and reads its results on the "
            "host: it cannot be traced (under jax.jit, vmap or grad). Call it "
            "outside them, or differentiate `jl.fit_loss`, the loss it minimizes."
        )


def check_guess(system: LagrangianSystem, params, data) -> None:
    """Name a non-finite starting guess or data that do not fit the system."""
    for path, x in jtu.tree_leaves_with_path(params):
        if eqx.is_inexact_array(x) and not np.all(np.isfinite(np.asarray(x))):
            raise ValueError(
                f"the starting guess of param {jtu.keystr(path)} is not finite: "
                f"{np.asarray(x)}."
            )
    obs = data[0]
    n = obs.q.shape[1]
    guess = system.with_params(params)
    q = np.asarray(obs.q)[0]
    qd = np.asarray(obs.qd)[0] if obs.qd is not None else np.zeros(n)
    t0 = np.asarray(obs.ts)[0]
    try:
        mass = np.asarray(mass_matrix(guess, q, qd, t0))
        np.linalg.cholesky(mass)
        good = bool(np.all(np.isfinite(mass)))
    except (
        np.linalg.LinAlgError,
        ValueError,
        TypeError,
        IndexError,
        eqx.EquinoxRuntimeError,
    ):
        good = False
    if not good:
        rows = unread_velocities(guess, q, qd, t0)
        unread = f" (L does not depend on q̇{rows})" if rows else ""
        raise ValueError(
            f"`data` has n = {n} coordinates, but at its first observed state the "
            f"system's mass matrix (with the starting params) is not positive "
            f"definite{unread}: check that the data has the system's number of "
            "coordinates and that the starting guess is physical."
        )
