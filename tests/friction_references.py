"""Independent references for the friction tests: equations of motion derived by
hand (Newton–Euler, below) and integrated by SciPy's `solve_ivp` with events.

Nothing here uses jaxlagrange: these are the chapter's examples (Cline, ch. 6)
that it leaves unsolved, 6.8.8, 6.8.9, 6.9.3 and 6.9.4, written in the reduced
coordinates of the textbook, while the tests set them up in other coordinates
(Cartesian, or with the contact as a unilateral constraint and a slip velocity)
and integrate them with `jl.simulate`.
"""

import numpy as np
from scipy.integrate import solve_ivp


TOL = dict(rtol=1e-12, atol=1e-12, method="DOP853")


def _phase(rhs, t0, y0, t1, events):
    """One phase up to the first of `events` (terminal, falling through zero), or
    t1: each event function is positive while its phase lasts."""
    for event in events:
        event.terminal = True
        event.direction = -1
    sol = solve_ivp(rhs, (t0, t1), y0, events=events, dense_output=True, **TOL)
    assert sol.success, sol.message
    hits = [(ts[0], i) for i, ts in enumerate(sol.t_events) if len(ts)]
    if not hits:
        return t1, sol.y[:, -1], None, sol
    t, which = min(hits)
    return t, sol.sol(t), which, sol


# ---------------------------------------------------------------------------
# 6.9.2 / 6.9.3: a solid sphere (mass m, radius a, I = 2/5 m a²) on a fixed
# sphere of radius R, in a vertical plane.
#
# Centre of the sphere at distance ρ = R + a from the centre of the shell, at
# angle θ from the top (increasing clockwise); ω its angular velocity
# (counterclockwise positive). Unit vectors n = (sin θ, cos θ) (outward) and
# t = (cos θ, −sin θ) (direction of increasing θ). The contact point is at
# centre − a n and moves along t with the slip velocity
#
#     s = ρ θ̇ + a ω       (ω × (−a n) = a ω t for ω along z).
#
# Forces on the sphere: gravity −m g ŷ, normal N n, friction F t at the contact.
# While in contact (ρ fixed), Newton along t and n, and Euler about the centre
# (torque of F t at −a n is a F, counterclockwise):
#
#     m ρ θ̈ = m g sin θ + F
#     m ρ θ̇² = m g cos θ − N        ⇒ N = m g cos θ − m ρ θ̇²
#     I ω̇ = a F
#
# Rolling (s = 0, ṡ = ρ θ̈ + a ω̇ = 0): g sin θ + F/m + a² F/I = 0, so
# F = −m g sin θ/(1 + m a²/I) = −(2/7) m g sin θ and ρ θ̈ = (5/7) g sin θ.
# Slipping with σ = sign s: F = −μ_k σ N. Rolling lasts while |F| ≤ μ_s N, the
# contact while N > 0.
# ---------------------------------------------------------------------------


def sphere_on_sphere(mu_k, mu_s, theta0, R=1.0, a=0.1, g=9.81, m=1.0, t1=10.0):
    """Roll, slip, release: the events' times and states.

    Returns a list of (kind, t, θ, θ̇, ω), kind one of "slip", "release".
    """
    rho = R + a
    inertia = 0.4 * m * a**2

    def normal(y):
        theta, thetad, _ = y
        return m * g * np.cos(theta) - m * rho * thetad**2

    def rolling(t, y):
        theta, thetad, _ = y
        force = -m * g * np.sin(theta) / (1 + m * a**2 / inertia)
        return [thetad, (g * np.sin(theta) + force / m) / rho, a * force / inertia]

    def static_limit(t, y):
        theta = y[0]
        force = -m * g * np.sin(theta) / (1 + m * a**2 / inertia)
        return mu_s * normal(y) - abs(force)

    def released(t, y):
        return normal(y)

    events = []
    t, y, which, _ = _phase(
        rolling, 0.0, [theta0, 0.0, 0.0], t1, [static_limit, released]
    )
    if which == 1:
        return [("release", t, *y)]
    events.append(("slip", t, *y))
    sigma = 1.0  # the contact point slips forward: rolling friction was < 0

    def slipping(t, y):
        theta, thetad, _ = y
        force = -mu_k * sigma * normal(y)
        return [thetad, (g * np.sin(theta) + force / m) / rho, a * force / inertia]

    def stops(t, y):
        return sigma * (rho * y[1] + a * y[2])

    t, y, which, _ = _phase(slipping, t, y, t1, [released, stops])
    assert which == 0, "the sphere stopped slipping before it flew off"
    events.append(("release", t, *y))
    return events


# ---------------------------------------------------------------------------
# 6.9.4: a small body (mass m) on the rim of a wheel (mass M, radius R, moment
# of inertia I about its centre) that rolls without slipping on the floor.
#
# Wheel centre at (x, R), rotation φ clockwise, rolling x = R φ. The body at
# angle θ from the top (clockwise), on the rim: position (x + R sin θ,
# R + R cos θ). With n = (sin θ, cos θ) and t = (cos θ, −sin θ), its
# acceleration is p̈ = ẍ x̂ + R θ̈ t − R θ̇² n, so
#
#     p̈·n = ẍ sin θ − R θ̇²,     p̈·t = ẍ cos θ + R θ̈.
#
# Forces on the body: gravity, the rim's normal force N n and friction F t
# (t is also the direction of the body's slip velocity s = R(θ̇ − φ̇) relative to
# the rim). Newton:
#
#     N = m g cos θ + m (ẍ sin θ − R θ̇²)            (normal)
#     m (ẍ cos θ + R θ̈) = F + m g sin θ             (tangential)
#
# On the wheel: −N n − F t at the rim point R n, and the floor's horizontal
# friction f at the bottom point −R ŷ. Translation M ẍ = f − N sin θ − F cos θ;
# rotation (clockwise) I φ̈ = −R f − R F (N is radial: no torque). With
# φ̈ = ẍ/R, eliminating f:
#
#     (M + I/R²) ẍ = −N sin θ − F (1 + cos θ).
#
# Sticking (θ̇ = φ̇ = ẋ/R, θ̈ = ẍ/R): three linear equations in ẍ, N, F.
# Slipping with σ = sign(θ̇ − φ̇): F = −μ_k σ N, unknowns ẍ, N, θ̈. Sticking
# lasts while |F| ≤ μ_s N, the contact while N > 0; then the body flies free.
# ---------------------------------------------------------------------------


def wheel_and_body(mu_k, mu_s, v0, M=1.0, R=1.0, inertia=0.5, m=0.2, g=9.81, t1=10.0):
    """Stick, slip, fly: the events' times and states (θ, θ̇, x, ẋ).

    Returns a list of (kind, t, state, σ) with kind "slip", "stick" or
    "release" (σ: the slip direction after the event, 0 sticking), and the
    functions giving (ẍ, N, F, θ̈) in each mode, for checks.
    """
    mass = M + inertia / R**2

    def sticking_forces(y):
        theta, thetad, _, _ = y
        sin, cos = np.sin(theta), np.cos(theta)
        # Unknowns (ẍ, N, F).
        matrix = np.array(
            [
                [-m * sin, 1.0, 0.0],
                [m * (1 + cos), 0.0, -1.0],
                [mass, sin, 1 + cos],
            ]
        )
        rhs = np.array([m * g * cos - m * R * thetad**2, m * g * sin, 0.0])
        xdd, normal, friction = np.linalg.solve(matrix, rhs)
        return xdd, normal, friction, xdd / R

    def slipping_forces(y, sigma):
        theta, thetad, _, _ = y
        sin, cos = np.sin(theta), np.cos(theta)
        # Unknowns (ẍ, N); then θ̈ from the tangential equation.
        matrix = np.array([[-m * sin, 1.0], [mass, sin - mu_k * sigma * (1 + cos)]])
        rhs = np.array([m * g * cos - m * R * thetad**2, 0.0])
        xdd, normal = np.linalg.solve(matrix, rhs)
        friction = -mu_k * sigma * normal
        thetadd = (friction + m * g * sin - m * xdd * cos) / (m * R)
        return xdd, normal, friction, thetadd

    def rhs_stick(t, y):
        xdd, _, _, thetadd = sticking_forces(y)
        return [y[1], thetadd, y[3], xdd]

    def static_limit(t, y):
        _, normal, friction, _ = sticking_forces(y)
        return mu_s * normal - abs(friction)

    def stick_released(t, y):
        return sticking_forces(y)[1]

    # Phases until the body flies off: sticking ends by slipping (|F| reaches
    # μ_s N; it slips against F) or release (N = 0); slipping ends by release or
    # by the slip stopping (then it sticks if μ_s N can hold it, else slips back).
    events = []
    t, y, sigma = 0.0, np.array([0.0, v0 / R, 0.0, v0]), 0.0
    while len(events) < 10:
        if sigma == 0.0:
            t, y, which, _ = _phase(rhs_stick, t, y, t1, [static_limit, stick_released])
            if which != 0:
                events.append(("release", t, y, sigma))
                return events, sticking_forces, slipping_forces
            sigma = -np.sign(sticking_forces(y)[2])
            events.append(("slip", t, y, sigma))
            continue

        def rhs_slip(t, y, sigma=sigma):
            xdd, _, _, thetadd = slipping_forces(y, sigma)
            return [y[1], thetadd, y[3], xdd]

        def slip_released(t, y, sigma=sigma):
            return slipping_forces(y, sigma)[1]

        def stops(t, y, sigma=sigma):
            return sigma * (y[1] - y[3] / R)

        t, y, which, _ = _phase(rhs_slip, t, y, t1, [slip_released, stops])
        if which != 1:
            events.append(("release", t, y, sigma))
            return events, sticking_forces, slipping_forces
        _, normal, friction, _ = sticking_forces(y)
        sigma = 0.0 if abs(friction) <= mu_s * normal else -np.sign(friction)
        events.append(("stick" if sigma == 0.0 else "slip", t, y, sigma))
    raise AssertionError(f"more than 10 phases: {events}")


# ---------------------------------------------------------------------------
# 6.8.8: mass m₁ on a frictionless table, tied by a string of length l through
# a hole to m₂, which hangs as a plane pendulum. r: the length of string below
# the table, θ: the pendulum's angle from the downward vertical, φ: the polar
# angle of m₁ (at distance l − r from the hole).
#
#     T = ½ m₁ (ṙ² + (l − r)² φ̇²) + ½ m₂ (ṙ² + r² θ̇²),  U = −m₂ g r cos θ
#
# Lagrange's equations (the chapter's):
#
#     (m₁ + m₂) r̈ = −m₁ (l − r) φ̇² + m₂ r θ̇² + m₂ g cos θ
#     r θ̈ = −2 ṙ θ̇ − g sin θ
#     d/dt [m₁ (l − r)² φ̇] = 0  ⇒  φ̈ = 2 ṙ φ̇/(l − r)
# ---------------------------------------------------------------------------


def table_and_pendulum(y0, ts, m1=1.0, m2=0.5, length=2.0, g=9.81):
    """(r, θ, φ, ṙ, θ̇, φ̇) at `ts` from y0 at t = 0."""
    l = length  # noqa: E741

    def rhs(t, y):
        r, theta, phi, rd, thetad, phid = y
        rdd = (
            -m1 * (l - r) * phid**2 + m2 * r * thetad**2 + m2 * g * np.cos(theta)
        ) / (m1 + m2)
        thetadd = (-2 * rd * thetad - g * np.sin(theta)) / r
        phidd = 2 * rd * phid / (l - r)
        return [rd, thetad, phid, rdd, thetadd, phidd]

    sol = solve_ivp(rhs, (0.0, ts[-1]), y0, t_eval=ts, **TOL)
    assert sol.success, sol.message
    return sol.y.T


# ---------------------------------------------------------------------------
# 6.8.9: two masses m on a free rod (mass M, length l), held symmetric about
# its centre by springs (constant K, rest length r₀) each. Spherical (r, θ, φ)
# of one mass about the rod's centre; the centre moves uniformly.
#
#     T = m (ṙ² + r² θ̇² + r² sin²θ φ̇²) + (M l²/24)(θ̇² + sin²θ φ̇²),
#     U = K (r − r₀)²
#
# With J = 2 m r² + M l²/12 (the moment of inertia about the centre):
#
#     r̈ = r θ̇² + r sin²θ φ̇² − (K/m)(r − r₀)
#     d/dt (J θ̇) = J sin θ cos θ φ̇²  ⇒  θ̈ = sin θ cos θ φ̇² − 4 m r ṙ θ̇/J
#     d/dt (J sin²θ φ̇) = 0          ⇒  φ̈ = −(4 m r ṙ/J + 2 θ̇ cot θ) φ̇
#
# (the chapter's θ equation has m for M in its last term: a misprint).
# ---------------------------------------------------------------------------


def masses_on_rod(y0, ts, m=1.0, M=2.0, length=3.0, K=5.0, r0=0.5):
    """(r, θ, φ, ṙ, θ̇, φ̇) at `ts` from y0 at t = 0."""
    l = length  # noqa: E741

    def rhs(t, y):
        r, theta, phi, rd, thetad, phid = y
        inertia = 2 * m * r**2 + M * l**2 / 12
        rdd = r * thetad**2 + r * np.sin(theta) ** 2 * phid**2 - K / m * (r - r0)
        thetadd = (
            np.sin(theta) * np.cos(theta) * phid**2 - 4 * m * r * rd * thetad / inertia
        )
        phidd = -(4 * m * r * rd / inertia + 2 * thetad / np.tan(theta)) * phid
        return [rd, thetad, phid, rdd, thetadd, phidd]

    sol = solve_ivp(rhs, (0.0, ts[-1]), y0, t_eval=ts, **TOL)
    assert sol.success, sol.message
    return sol.y.T
