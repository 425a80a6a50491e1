"""`Observations` and `fit_loss`, the loss that `fit` minimizes.

The loss is a weighted least-squares misfit between observed and simulated
coordinates (and velocities, where observed). With multiple shooting each
observed trajectory is cut into `segments` pieces, each simulated from its own
free starting state; a penalty on the jumps between the end of one piece and the
start of the next ties them together. Short pieces keep the loss smooth in the
params even for chaotic data, where a single long shot has a loss landscape full
of local minima and gradients that grow like exp(λ t).

All the pieces of one observed trajectory are simulated together under
`jax.vmap`, so they share one compiled solve: they are padded to a common number
of save times (the padding is masked out of the loss).
"""

from collections.abc import Sequence
from functools import partial
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np

from .._custom_types import Array, Float, Params, ScalarLike
from .._errors import known as _known
from .._hold import ZeroOrderHold
from .._initial_state import project_initial_state
from .._options import GivenOptions
from .._results import SUCCESSFUL, code_of
from .._simulate import simulate, simulate_checked
from .._system import LagrangianSystem, as_float, check_system, to_leaf


def _as_float(x, name: str) -> Array | None:
    if x is None:
        return None
    # The dtype of host data by NumPy (an eager JAX conversion compiles a small
    # program on its first use); `as_float` converts them the same way.
    traced = any(isinstance(leaf, jax.Array) for leaf in jtu.tree_leaves(x))
    x = (jnp if traced else np).asarray(x)
    if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
        raise ValueError(f"`{name}` must be real numbers, got dtype {x.dtype}.")
    return as_float(x)


def _keyword(name: str):
    """A keyword-only argument of `Observations`, None by default."""
    converter = lambda x: _as_float(x, name)  # noqa: E731
    return eqx.field(default=None, converter=converter, kw_only=True)


class Observations(eqx.Module):
    """One observed trajectory: coordinates (and optionally velocities) at times.

    **Arguments:**

    - `ts`: strictly increasing observation times, shape (T,), T ≥ 2.
    - `q`: observed coordinates, shape (T, n).
    - `qd`: observed velocities, shape (T, n), or None if not observed.
    - `q0`, `qd0`: the initial state at `ts[0]`, shape (n,), where known: `fit`
        then holds it (given both). Default: `q[0]`, and `qd[0]`, or without `qd`
        a finite-difference estimate from `q`: the starting guess of the initial
        state that `fit` fits.
    - `weights`: non-negative weights of the residuals, shape (T,) or (T, n).
    - `sigma`: the noise scale of `q` (and `qd`), a positive scalar or shape (n,);
        residuals are divided by it. Default None: residuals in the data's
        units, the noise then estimated from the misfit (`chi2_red` is None).
    - `sigma_qd`: the noise scale of `qd` where it differs from that of `q`
        (velocities from finite differences are often noisier), with `sigma`;
        a positive scalar or shape (n,). Default: `sigma`.
    - `ctrl`: the controls applied during the experiment, shape (T, nu), row k
        held over [ts[k], ts[k+1]) (a zero-order hold, as MuJoCo's `mj_step`
        applies `ctrl`): `fit` drives the system's `ctrl` param by it, as a
        `jl.ZeroOrderHold` (and never fits that param).

    **Raises:** `ValueError` naming the argument for a wrong shape, lengths that do
    not match `ts`, times that are not strictly increasing, and non-finite data.

    **Example:**

    ```python
    data = jl.Observations(traj.ts, traj.q, traj.qd)
    ```
    """

    ts: Float[Array, " T"] = eqx.field(converter=lambda x: _as_float(x, "ts"))
    q: Float[Array, "T n"] = eqx.field(converter=lambda x: _as_float(x, "q"))
    qd: Float[Array, "T n"] | None = eqx.field(
        default=None, converter=lambda x: _as_float(x, "qd")
    )
    q0: Float[Array, " n"] | None = _keyword("q0")
    qd0: Float[Array, " n"] | None = _keyword("qd0")
    weights: Array | None = _keyword("weights")
    sigma: Array | None = _keyword("sigma")
    sigma_qd: Array | None = _keyword("sigma_qd")
    ctrl: Array | None = _keyword("ctrl")

    def __check_init__(self):
        ts, q = self.ts, self.q
        if ts.ndim != 1 or ts.shape[0] < 2:
            raise ValueError(
                f"`ts` must be a 1-D array of at least 2 times, got shape {ts.shape}."
            )
        T = ts.shape[0]
        if q.ndim != 2:
            raise ValueError(
                f"`q` must have shape (T, n) = ({T}, n), got shape {q.shape}."
            )
        n = q.shape[1]
        if q.shape[0] != T:
            raise ValueError(
                f"`q` has {q.shape[0]} rows but `ts` has {T} times: they must "
                "have the same length."
            )
        vector = (lambda x: x == (n,), f"must have shape ({n},)")
        scale = (lambda x: x in ((), (n,)), f"must be a scalar or shape ({n},)")
        shapes = {  # name: (whether its shape is right, what it must be)
            "qd": (lambda x: x == q.shape, f"must have the shape of `q`, {q.shape}"),
            "ctrl": (lambda x: len(x) == 2 and x[0] == T, f"must have shape ({T}, nu)"),
            "q0": vector,
            "qd0": vector,
            "weights": (
                lambda x: x in ((T,), (T, n)),
                f"must have shape ({T},) or ({T}, {n})",
            ),
            "sigma": scale,
            "sigma_qd": scale,
        }
        for name, (right, what) in shapes.items():
            x = getattr(self, name)
            if x is not None and not right(x.shape):
                raise ValueError(f"`{name}` {what}, got {x.shape}.")
        if self.sigma_qd is not None and (self.qd is None or self.sigma is None):
            raise ValueError(
                "`sigma_qd` is the noise of the observed velocities `qd` beside that "
                "of `q`: it needs `qd` and `sigma`."
            )
        # Value checks need concrete data (not under jit).
        given = {k: getattr(self, k) for k in self.__dataclass_fields__}
        known = {k: None if v is None else _known(v) for k, v in given.items()}
        if any(known[k] is None and v is not None for k, v in given.items()):
            return
        for name, x in known.items():
            if x is not None and not np.all(np.isfinite(x)):
                index = tuple(int(i) for i in np.argwhere(~np.isfinite(x))[0])
                where = f" at index {index}" if index else ""
                raise ValueError(
                    f"`{name}` contains a non-finite value (NaN or inf){where}."
                )
        steps = np.diff(known["ts"])
        if np.any(steps <= 0):
            i = int(np.argmax(steps <= 0))
            raise ValueError(
                f"`ts` must be strictly increasing, but ts[{i}] = {known['ts'][i]} "
                f"and ts[{i + 1}] = {known['ts'][i + 1]}."
            )
        w = known["weights"]
        if w is not None and (np.any(w < 0) or not w.any()):
            raise ValueError("`weights` must be >= 0 and not all zero.")
        for name in ("sigma", "sigma_qd"):
            if given[name] is None:
                continue
            if np.any(known[name] <= 0):
                raise ValueError(f"`{name}` must be > 0, got {known[name]}.")
            # The residuals are scaled by 1/σ², which must leave them room to
            # be squared and summed.
            tiny = np.finfo(known[name].dtype).max ** -0.25
            low, high = np.min(known[name]), np.max(known[name])
            if low < tiny or high > 1 / tiny:
                small = low < tiny
                raise ValueError(
                    f"`{name}` = {low if small else high:.3g} is so "
                    f"{'small' if small else 'large'} that 1/{name}² "
                    f"{'over' if small else 'under'}flows {known[name].dtype} (the "
                    "residuals are divided by it): give it in the data's units, "
                    f"{'at least' if small else 'at most'} "
                    f"{tiny if small else 1 / tiny:.3g}."
                )


class _Layout(eqx.Module):
    """One observed trajectory cut into K segments of m + 1 save times each."""

    # NumPy arrays (see `layout_of`).
    ts: np.ndarray  # (K, m + 1), padded past each segment's end by tiny steps
    q: np.ndarray  # (K, m + 1, n)
    qd: np.ndarray | None  # (K, m + 1, n)
    weight: np.ndarray  # (K, m + 1, n): weights / sigma², 0 on padding, shared ends
    total: np.ndarray  # the sum of the weights (without 1 / sigma²) over residuals
    count: np.ndarray  # how many of them have a weight > 0 (the observations N)
    scale: np.ndarray  # (n,): 1 / sigma², for the continuity penalty
    ends: np.ndarray  # (K,) index of each segment's last real save time
    starts: tuple[np.ndarray, np.ndarray]  # (K, n) each: the data's segment starts
    scale_qd: np.ndarray  # (n,): 1 / sigma_qd², of the velocities' residuals
    hold: tuple[np.ndarray, np.ndarray] | None  # (ts, ctrl) of a driven experiment

    @property
    def kinds(self) -> int:
        """The observed quantities per weight: q, and qd where observed."""
        return 1 if self.qd is None else 2


def layout_of(obs: Observations, segments: int) -> _Layout:
    ts, q = np.asarray(obs.ts), np.asarray(obs.q)
    qd = None if obs.qd is None else np.asarray(obs.qd)
    T, n = q.shape
    if not (isinstance(segments, int) and 1 <= segments <= T - 1):
        raise ValueError(
            f"`segments` must be an integer from 1 to {T - 1} (the number of "
            f"intervals between the {T} observation times), got {segments!r}."
        )
    bounds = np.round(np.linspace(0, T - 1, segments + 1)).astype(int)
    m = int(np.max(np.diff(bounds)))
    index = bounds[:-1, None] + np.arange(m + 1)
    real = index <= bounds[1:, None]
    clipped = np.minimum(index, bounds[1:, None])
    # Padding save times lie just past the segment's end; they are masked out.
    delta = 1e-6 * np.min(np.diff(ts))
    seg_ts = np.where(real, ts[clipped], ts[clipped] + (index - clipped) * delta)
    # A shared end point is the next segment's start: counted once, there.
    counted = real & (
        (index < bounds[1:, None]) | (np.arange(segments) == segments - 1)[:, None]
    )

    def per_coordinate(x, default):
        return default if x is None else np.broadcast_to(np.asarray(x), (n,))

    sigma = per_coordinate(obs.sigma, np.ones(n))
    w = np.ones((T, n)) if obs.weights is None else np.asarray(obs.weights)
    w = np.broadcast_to(w if w.ndim == 2 else w[:, None], (T, n))
    weight = np.where(counted[..., None], w[clipped], 0.0)
    # The loss is the weighted mean of the squared residuals in units of sigma.
    total = np.sum(weight)
    weight = weight / sigma**2
    sigma_qd = per_coordinate(obs.sigma_qd, sigma)
    edge = 2 if T > 2 else 1
    velocities = np.gradient(q, ts, axis=0, edge_order=edge) if qd is None else qd
    start_q, start_qd = q[bounds[:-1]].copy(), velocities[bounds[:-1]].copy()
    if obs.q0 is not None:
        start_q[0] = np.asarray(obs.q0)
    if obs.qd0 is not None:
        start_qd[0] = np.asarray(obs.qd0)
    # NumPy arrays: the programs take them as inputs, and the fit's eager steps
    # (segment starts, totals) then cost no small compiles of their own.
    return _Layout(
        seg_ts,
        q[clipped],
        None if qd is None else qd[clipped],
        weight,
        np.asarray(total),
        np.asarray(np.count_nonzero(weight)),
        1.0 / sigma**2,
        bounds[1:] - bounds[:-1],
        (start_q, start_qd),
        1.0 / sigma_qd**2,
        None if obs.ctrl is None else (ts, np.asarray(obs.ctrl)),
    )


def _pieces(system, layout: _Layout, starts, options, diagnose: bool):
    """One observed trajectory's residuals √w (q̂ − q)/σ and continuity gaps."""
    q0s, qd0s = starts
    if layout.hold is not None:  # the experiment's controls drive `ctrl`
        hold = ZeroOrderHold(*layout.hold)
        system = system.with_params({**system.params, "ctrl": hold})
    constrained = bool(system.constraints.bilateral)
    if constrained:
        # Each piece starts on the constraint manifold: a start (noisy data, a
        # fitted unknown, the data's state for other params) is projected first.
        onto = jax.vmap(project_initial_state, in_axes=(None, 0, 0, 0))
        begins = onto(system, q0s, qd0s, layout.ts[:, 0])
    else:
        begins = (q0s, qd0s)

    # Without `diagnose` a stopped solve keeps its provisional code: the loss's
    # program holds no diagnosis (a failed fit's `Problem.named_codes` runs it).
    def solve(q0, qd0, ts):
        kwargs = dict(t0=ts[0], t1=ts[-1], saveat=ts, **options)
        if diagnose:
            return simulate(system, q0, qd0, throw=False, **kwargs)
        # (The observations' times were checked when the data were made.)
        return simulate_checked(
            system, q0, qd0, GivenOptions(**kwargs), throw=False, trusted_times=True
        )[0]

    traj = jax.vmap(solve)(*begins, layout.ts)
    root = jnp.sqrt(layout.weight)
    residuals = [(root * (traj.q - layout.q)).ravel()]
    # Σ w (q̂ − q)²: the coordinates' misfit in the data's units.
    raw = jnp.sum(layout.weight / layout.scale * (traj.q - layout.q) ** 2)
    # The velocities' residuals and gaps in units of their own noise, σ_qd.
    to_qd = jnp.sqrt(layout.scale_qd / layout.scale)
    if layout.qd is not None:
        residuals.append((root * to_qd * (traj.qd - layout.qd)).ravel())
    rows = jnp.arange(q0s.shape[0])
    q_end, qd_end = traj.q[rows, layout.ends], traj.qd[rows, layout.ends]
    scale, scale_qd = jnp.sqrt(layout.scale), jnp.sqrt(layout.scale_qd)
    gaps = [
        (scale * (q_end[:-1] - q0s[1:])).ravel(),
        (scale_qd * (qd_end[:-1] - qd0s[1:])).ravel(),
    ]
    if constrained:
        # The later starts are tied to the manifold by their gaps; the first by
        # its distance from its projection (else its off-manifold part would be
        # a direction the residuals do not see: a singular normal matrix).
        gaps += [
            (scale * (begins[0][0] - q0s[0])).ravel(),
            (scale_qd * (begins[1][0] - qd0s[0])).ravel(),
        ]
    return residuals, gaps, code_of(traj.result), raw


def residuals(system, layouts, starts, continuity_weight, options, diagnose=False):
    """The residuals r (Σ r² the fit loss), data share, result codes and raw misfit."""
    data, gaps, codes = [], [], []
    count, raw = 0, 0.0
    # Experiments of one shape are solved as one batch (vmap): one trace, one
    # compiled solve, however many there are.
    groups: dict[Any, list[int]] = {}
    for i, layout in enumerate(layouts):
        shapes = jtu.tree_map(np.shape, (layout, starts[i]))
        groups.setdefault(str(shapes), []).append(i)
    pieces = jax.vmap(partial(_pieces, system, options=options, diagnose=diagnose))
    stack = lambda *x: jnp.stack(x)  # noqa: E731
    for group in groups.values():
        layout = jtu.tree_map(stack, *[layouts[i] for i in group])
        start = jtu.tree_map(stack, *[starts[i] for i in group])
        r, g, code, misfit = pieces(layout, start)
        data += [x.ravel() for x in r]
        gaps += [x.ravel() for x in g]
        raw = raw + jnp.sum(misfit)
        _, segments, n = start[0].shape  # 2n gaps per later segment's start
        count += (
            2 * n * len(group) * (segments - 1 + bool(system.constraints.bilateral))
        )
        codes.append(code.ravel())
    total = sum(layout.total * layout.kinds for layout in layouts)
    data = jnp.concatenate(data) / jnp.sqrt(total)
    parts = [data]
    if count:
        parts.append(jnp.sqrt(continuity_weight / count) * jnp.concatenate(gaps))
    codes = jnp.concatenate(codes)
    ok = jnp.all(codes == SUCCESSFUL)
    # A failed solve leaves inf in its trajectory; keep it inf, never NaN.
    residual = jnp.where(ok, jnp.concatenate(parts), jnp.inf)
    return residual, jnp.sum(data**2), codes, raw


# Exact gradients of the computed solve (see `fit`'s docstring).
_DEFAULT_ADJOINT = diffrax.RecursiveCheckpointAdjoint()


def solve_options(adjoint, solver, rtol, atol, max_steps) -> dict[str, Any]:
    return dict(
        adjoint=_DEFAULT_ADJOINT if adjoint is None else adjoint,
        solver=solver,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
    )


def as_data(data) -> list[Observations]:
    if isinstance(data, Observations):
        data = [data]
    elif not (
        isinstance(data, Sequence)
        and data
        and all(isinstance(d, Observations) for d in data)
    ):
        raise ValueError(
            "`data` must be a `jl.Observations` or a non-empty sequence of them, got "
            f"{type(data).__name__}."
        )
    n = {d.q.shape[1] for d in data}
    if len(n) > 1:
        raise ValueError(
            f"all observed trajectories must have the same number of coordinates, got {sorted(n)}."
        )
    given = [d.sigma is not None for d in data]
    if any(given) and not all(given):
        # Residuals in units of σ beside residuals in the data's units: the noise
        # then estimated from both weighs one set by 1/σ² against the other.
        missing = [i for i, g in enumerate(given) if not g]
        raise ValueError(
            f"`sigma` is given for some observed trajectories but not for data"
            f"{missing}: give it for all of them (their residuals are weighed by "
            "it), or for none (the noise is then estimated from the misfit)."
        )
    return list(data)


def check_params(system: LagrangianSystem, params) -> Params:
    check_system(system)
    if params is None:
        return system.params
    params = jtu.tree_map(to_leaf, params)
    expected, got = jtu.tree_structure(system.params), jtu.tree_structure(params)
    if expected != got:
        raise ValueError(
            f"`params` must have the pytree structure of system.params: expected "
            f"{expected}, got {got}."
        )
    for (path, a), b in zip(
        jtu.tree_leaves_with_path(system.params), jtu.tree_leaves(params), strict=True
    ):
        if eqx.is_array(a) and jnp.shape(a) != jnp.shape(b):
            raise ValueError(
                f"`params` leaf {jtu.keystr(path)} has shape {jnp.shape(b)}, but in "
                f"system.params it has shape {jnp.shape(a)}."
            )
    return params


def fit_loss(
    system: LagrangianSystem,
    data: "Observations | Sequence[Observations]",
    starts: Sequence[tuple[Array, Array]] | None = None,
    *,
    segments: int = 1,
    continuity_weight: ScalarLike = 1.0,
    adjoint: diffrax.AbstractAdjoint | None = None,
    solver: diffrax.AbstractSolver | None = None,
    rtol: ScalarLike | None = None,
    atol: ScalarLike | None = None,
    max_steps: int = 4096,
) -> Array:
    """The loss that `fit` minimizes, at the system's params.

    loss = (Σ w ((q̂ − q)/σ)² [+ Σ w ((q̂d − qd)/σ)² where q̇ is observed]) / (Σ w per
           observed quantity) + continuity_weight · mean over segment boundaries
           and coordinates of ((x̂_end − x_start)/σ)²

    (sums over times and coordinates), so with the right σ a good fit has a loss
    of about one,

    and q̂ is simulated piece by piece from the segment starts, x = (q, q̇).
    It is differentiable in `system` (its params) and in `starts`.

    **Arguments:**

    - `system`, `data`: as for `fit`.
    - `starts`: per observed trajectory, the states `(q, qd)` (each (segments, n))
        at which its segments start. Default: taken from the data (see
        `Observations`).
    - the other options: as for `fit`.

    **Returns:** the loss, a scalar (inf if a solve failed).

    **Example:**

    ```python
    grad = jax.grad(lambda p: jl.fit_loss(system.with_params(p), data))
    ```
    """
    data = as_data(data)
    layouts = [layout_of(d, segments) for d in data]
    starts = [layout.starts for layout in layouts] if starts is None else list(starts)
    options = solve_options(adjoint, solver, rtol, atol, max_steps)
    r = residuals(system, layouts, starts, continuity_weight, options)[0]
    return jnp.sum(r**2)
