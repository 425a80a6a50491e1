"""`ZeroOrderHold`: a control series held piecewise constant, as MuJoCo applies
`ctrl` (row k over [ts[k], ts[k+1])). A hold placed among a system's params is
read at t by the force; `simulate` steps exactly to its switch times (diffrax's
`jump_ts`), so the discontinuities cost no accuracy."""

import equinox as eqx
import jax
import jax.numpy as jnp

from ._custom_types import Array, Float


class ZeroOrderHold(eqx.Module):
    """A series of values held constant between times: `hold(t)` is `values[k]`
    for ts[k] ≤ t < ts[k+1] (the first row before ts[0], the last after ts[-1]).

    Used as a param (a MuJoCo model's `ctrl`, or any param a force reads with
    `hold(t)`), it makes `jl.simulate` stop at every switch time `ts` and restart
    there (`diffrax.ClipStepSizeController(jump_ts=ts)` around the default
    controller), so each smooth piece is integrated to the solver's tolerance.
    `jl.fit` builds one per experiment from `Observations(ctrl=...)`.

    **Arguments:**

    - `ts`: strictly increasing switch times, shape (T,).
    - `values`: the held values, shape (T, ...).

    **Example:**

    ```python
    system, q0, qd0 = jl.mujoco.load(xml)  # a model with motors
    ts = jnp.linspace(0.0, 1.0, 101)
    hold = jl.ZeroOrderHold(ts, jnp.sin(6 * ts)[:, None])
    pushed = eqx.tree_at(lambda s: s.params["ctrl"], system, hold)
    traj = jl.simulate(pushed, q0, qd0, t1=1.0, saveat=ts)
    ```
    """

    ts: Float[Array, " T"] = eqx.field(converter=jnp.asarray)
    values: Array = eqx.field(converter=jnp.asarray)

    def __check_init__(self):
        if self.ts.ndim != 1 or self.values.shape[:1] != self.ts.shape:
            raise ValueError(
                "ZeroOrderHold needs `ts` of shape (T,) and `values` of shape "
                f"(T, ...), got {self.ts.shape} and {self.values.shape}."
            )

    def __call__(self, t) -> Array:
        k = jnp.searchsorted(self.ts, t, side="right") - 1
        return self.values[jnp.clip(k, 0, self.ts.shape[0] - 1)]


def value_at(x, t):
    """`x(t)` for a `ZeroOrderHold`, else `x` itself."""
    return x(t) if isinstance(x, ZeroOrderHold) else x


def switch_times(params) -> Array | None:
    """The switch times of every hold among `params` (None: there are none)."""
    holds = jax.tree_util.tree_leaves(
        params, is_leaf=lambda x: isinstance(x, ZeroOrderHold)
    )
    ts = [h.ts for h in holds if isinstance(h, ZeroOrderHold)]
    return jnp.concatenate(ts) if ts else None
