"""An optical cavity with one moving mirror: N field modes coupled to the mirror."""

import jax.numpy as jnp
import numpy as np

from .._system import LagrangianSystem
from .._validate import positive_int
from ._registry import (
    ReadySystem,
    default_mass_solver,
    initial_state,
    merge_params,
    register,
)


_DEFAULTS = {"m": 1.0, "k": 1.0, "q_eq": 1.0}


def _coupling(modes: int) -> np.ndarray:
    """G_kj = (−1)^(k+j) 2kj / (j² − k²) for k ≠ j, 0 on the diagonal (antisymmetric)."""
    k = np.arange(1, modes + 1, dtype=float)[:, None]
    j = k.T
    offdiagonal = ~np.eye(modes, dtype=bool)
    denominator = np.where(offdiagonal, j**2 - k**2, 1.0)
    sign = np.where((k + j) % 2 == 0, 1.0, -1.0)
    return np.where(offdiagonal, sign * 2 * k * j / denominator, 0.0)


def _lagrangian(q, qd, t, params):
    # q = (mirror position, Q_1, ..., Q_N); G is a constant fixed by the shape.
    x, xd = q[0], qd[0]
    field, field_rate = q[1:], qd[1:]
    modes = field.shape[0]
    coupling = jnp.asarray(_coupling(modes), q.dtype)
    omega = jnp.arange(1, modes + 1, dtype=q.dtype) * jnp.pi / x
    phi = xd / x
    drift = phi * (field @ coupling.T) - field_rate
    potential = 0.5 * params["k"] * (x - params["q_eq"]) ** 2
    return (
        0.5 * drift @ drift
        - 0.5 * jnp.sum((omega * field) ** 2)
        + 0.5 * params["m"] * xd**2
        - potential
    )


def _points(q, t, params):
    """The fixed mirror at the origin and the moving one at x = q₀."""
    zero = jnp.zeros_like(q[0])
    return jnp.stack([jnp.stack([zero, zero]), jnp.stack([q[0], zero])])


# A mode amplitude Q has ½Q̇² in joules: Q in √kg m.
@register(
    "cavity",
    units=lambda n: ("m",) + ("√kg m",) * (n - 1),
    point_names=("fixed mirror", "moving mirror"),
)
def cavity(params=None, *, modes: int = 10, q0=None, qd0=None) -> ReadySystem:
    """A one-dimensional optical cavity of length q whose end mirror moves.

    The field is expanded in the cavity's instantaneous modes, with amplitudes
    Q_1, ..., Q_N and frequencies ω_k = kπ/q. With φ = q̇/q, Ω = diag(ω_k) and the
    antisymmetric coupling G_kj = (−1)^(k+j) 2kj/(j² − k²) (0 on the diagonal),

        L = ½ ‖φ G Q − Q̇‖² − ½ ‖Ω Q‖² + ½ m q̇² − V(q),

    with the mirror held by a spring, V(q) = ½ k (q − q_eq)². Its Euler–Lagrange
    equations are

        Q̈ + Ω²Q − 2φ G Q̇ − φ̇ G Q + φ² G² Q = 0,
        m q̈ + V′(q) − ⟨Ω²Q, Q⟩/q + ⟨Ω²Q, G Q⟩/q = 0:

    the field's radiation pressure pushes the mirror, the mirror's motion pumps
    the field. The mass matrix is dense and depends on q, q̇ and Q, which makes
    this N + 1 degree-of-freedom system a scaling benchmark for the equations of
    motion. No explicit time dependence: the Jacobi integral is conserved.

    **Arguments:**

    - `params`: overrides of the defaults `{"m": 1.0, "k": 1.0, "q_eq": 1.0}`
        (mirror mass, spring constant, rest length of the spring).
    - `modes`: the number N of field modes kept.
    - `q0`, `qd0`: initial (q, Q_1, ..., Q_N) and their rates, shape (N + 1,).
        The default: the mirror at rest at q = 1 with the lowest mode excited,
        Q_1 = 0.1.

    From 16 coordinates on, the system solves M q̈ = f by matrix-free conjugate
    gradients (`system.mass_solver` is `lineax.CG(rtol=1e-12, atol=1e-12)`;
    `system.with_mass_solver(None)` gives the dense solve), which costs a few
    cheap Hessian-vector products instead of an O(n³) factorization.

    **Returns:** a `ReadySystem` with coordinates `("q", "Q1", ..., "QN")`.

    **Example:**

    ```python
    system, q0, qd0 = jl.systems.make("cavity", modes=16)
    qdd = jl.accelerations(system, q0, qd0, 0.0)
    ```
    """
    modes = positive_int("modes", modes, " (the field modes of system 'cavity')")
    params = merge_params("cavity", _DEFAULTS, params)
    default_q0 = np.concatenate([[1.0, 0.1], np.zeros(modes - 1)])
    q0, qd0 = initial_state("cavity", q0, qd0, default_q0, np.zeros(modes + 1))
    system = LagrangianSystem(
        _lagrangian, params=params, mass_solver=default_mass_solver(modes + 1)
    )
    coordinates = ("q",) + tuple(f"Q{k}" for k in range(1, modes + 1))
    return ReadySystem(system, q0, qd0, "cavity", coordinates, points=_points)
