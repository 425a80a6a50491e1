"""Linearization, equilibria and normal modes against closed forms and SymPy."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxlagrange as jl


G = 9.81


def _cartesian_pendulum(force=False):
    """A unit mass on a rod of length l in the (x, y) plane, y up."""

    def lagrangian(q, qd, t, p):
        return 0.5 * jnp.sum(qd**2) - G * q[1]

    def rod(q, t, p):
        return jnp.array([q[0] ** 2 + q[1] ** 2 - p["l"] ** 2])

    def push(q, qd, t, p):
        return jnp.array([p["F"], 0.0])

    return jl.LagrangianSystem(
        lagrangian,
        params={"l": 2.0, "F": 0.0},
        holonomic=rod,
        force=push if force else None,
    )


def _hoop(omega):
    """A bead on a hoop of radius R spinning at Ω about the vertical."""

    def lagrangian(q, qd, t, p):
        r, w = p["R"], p["omega"]
        th = q[0]
        return 0.5 * r**2 * (qd[0] ** 2 + w**2 * jnp.sin(th) ** 2) + G * r * jnp.cos(th)

    return jl.LagrangianSystem(lagrangian, params={"R": 0.5, "omega": omega})


def test_double_pendulum_modes():
    system, _, _ = jl.systems.double_pendulum({"l1": 1.5, "l2": 1.5})
    omega2, modes = jl.normal_modes(system, jnp.zeros(2))
    expected = G / 1.5 * np.array([2 - np.sqrt(2), 2 + np.sqrt(2)])
    np.testing.assert_allclose(omega2, expected, rtol=1e-10)
    mass = jl.mass_matrix(system, jnp.zeros(2), jnp.zeros(2), 0.0)
    np.testing.assert_allclose(modes.T @ mass @ modes, np.eye(2), atol=1e-12)
    # The slow mode swings both arms the same way, amplitude ratio √2.
    np.testing.assert_allclose(modes[1, 0] / modes[0, 0], np.sqrt(2), rtol=1e-10)
    np.testing.assert_allclose(modes[1, 1] / modes[0, 1], -np.sqrt(2), rtol=1e-10)


def test_spring_chain_dispersion():
    n, k, m = 7, 3.0, 0.5

    def lagrangian(q, qd, t):
        stretch = jnp.diff(jnp.concatenate([jnp.zeros(1), q, jnp.zeros(1)]))
        return 0.5 * m * jnp.sum(qd**2) - 0.5 * k * jnp.sum(stretch**2)

    omega2, _ = jl.normal_modes(jl.LagrangianSystem(lagrangian), jnp.zeros(n))
    j = np.arange(1, n + 1)
    expected = 4 * k / m * np.sin(j * np.pi / (2 * (n + 1))) ** 2
    np.testing.assert_allclose(omega2, expected, rtol=1e-10)


@pytest.mark.parametrize("omega", [3.0, 6.0])
def test_hoop_equilibrium_and_bifurcation(omega):
    r = 0.5
    system = _hoop(omega)
    critical = G / r  # Ω² at the bifurcation
    if omega**2 < critical:
        theta, w2 = 0.0, critical - omega**2
    else:
        theta = np.arccos(G / (r * omega**2))
        w2 = omega**2 - (G / (r * omega)) ** 2
    q = jl.equilibrium(system, jnp.array([0.9]))
    np.testing.assert_allclose(q[0], theta, atol=1e-10)
    omega2, _ = jl.normal_modes(system, q)
    np.testing.assert_allclose(omega2[0], w2, rtol=1e-9)
    # Above the bifurcation the bottom is unstable: a negative ω².
    bottom, _ = jl.normal_modes(system, jnp.zeros(1))
    np.testing.assert_allclose(bottom[0], critical - omega**2, rtol=1e-10)


def test_cartesian_pendulum_on_the_tangent_space():
    system = _cartesian_pendulum()
    q = jnp.array([0.0, -2.0])
    omega2, modes = jl.normal_modes(system, q)
    np.testing.assert_allclose(omega2, [G / 2.0], rtol=1e-12)
    assert modes.shape == (2, 1)
    np.testing.assert_allclose(modes[:, 0], [1.0, 0.0], atol=1e-12)  # tangent
    q_eq = jl.equilibrium(system, jnp.array([0.5, -1.8]))
    np.testing.assert_allclose(q_eq, [0.0, -2.0], atol=1e-10)


def test_gradient_of_frequency_matches_closed_form_and_fd():
    def lowest(length):
        system, _, _ = jl.systems.double_pendulum({"l1": length, "l2": length})
        return jl.normal_modes(system, jnp.zeros(2))[0][0]

    grad = jax.grad(lowest)(1.3)
    np.testing.assert_allclose(grad, -G * (2 - np.sqrt(2)) / 1.3**2, rtol=1e-9)

    def constrained(length):
        system = _cartesian_pendulum()
        system = jl.LagrangianSystem(
            system.lagrangian,
            params={"l": length, "F": 0.0},
            holonomic=system.holonomic,
        )
        return jl.normal_modes(system, jnp.array([0.0, -length]))[0][0]

    h = 1e-6
    fd = (constrained(2.0 + h) - constrained(2.0 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(constrained)(2.0), fd, rtol=1e-7)
    np.testing.assert_allclose(jax.grad(constrained)(2.0), -G / 4.0, rtol=1e-10)


def test_equilibrium_gradient_is_implicit():
    # d θ*/dΩ = g / (R Ω³ sin θ*) · 2 from cos θ* = g/(RΩ²).
    def theta(omega):
        return jl.equilibrium(_hoop(omega), jnp.array([0.9]))[0]

    omega = 6.0
    th = np.arccos(G / (0.5 * omega**2))
    expected = 2 * G / (0.5 * omega**3 * np.sin(th))
    np.testing.assert_allclose(jax.grad(theta)(omega), expected, rtol=1e-8)


def test_jit_and_vmap_match():
    system, _, _ = jl.systems.double_pendulum()
    qs = jnp.array([[0.1, 0.2], [0.3, -0.1]])
    qds = jnp.array([[0.5, 0.0], [-0.2, 0.4]])
    eager = [jl.linearize(system, q, qd).A for q, qd in zip(qs, qds, strict=True)]
    batched = jax.jit(jax.vmap(lambda q, qd: jl.linearize(system, q, qd).A))(qs, qds)
    np.testing.assert_allclose(batched, np.stack(eager), rtol=1e-12)


def test_linearize_matches_finite_differences_of_accelerations():
    system, _, _ = jl.systems.double_pendulum()
    q, qd = jnp.array([0.4, -0.3]), jnp.array([1.1, -0.7])
    lin = jl.linearize(system, q, qd)
    h = 1e-6
    cols = []
    for i in range(4):
        e = np.zeros(4)
        e[i] = h
        up = jl.accelerations(system, q + e[:2], qd + e[2:], 0.0)
        down = jl.accelerations(system, q - e[:2], qd - e[2:], 0.0)
        cols.append(np.concatenate([e[2:] / h, (up - down) / (2 * h)]))
    np.testing.assert_allclose(lin.A, np.stack(cols, axis=1), atol=1e-7)


# SymPy's linearizer, with inputs.


def _with_accelerations(lm, point, values, coords):
    """Add q̈ (and λ) at the operating point, which SymPy's linearizer needs."""
    rhs = lm.rhs().subs(point).subs(values)
    n = len(coords)
    for i, c in enumerate(coords):
        point[c.diff().diff()] = float(rhs[n + i])
    for j, lam in enumerate(lm.lam_vec):
        point[lam] = float(rhs[2 * n + j])


def _sympy_cart_pendulum(op):
    sm = pytest.importorskip("sympy")
    me = pytest.importorskip("sympy.physics.mechanics")
    x, th = me.dynamicsymbols("x th")
    xd, thd = me.dynamicsymbols("x th", 1)
    big, m, length, g = sm.symbols("M m l g")
    force = me.dynamicsymbols("F")  # an input: a function of time for SymPy
    n = me.ReferenceFrame("N")
    cart = me.Point("C")
    cart.set_vel(n, xd * n.x)
    lagrangian = (
        (big + m) * xd**2 / 2
        + m * length * xd * thd * sm.cos(th)
        + m * length**2 * thd**2 / 2
        + m * g * length * sm.cos(th)
    )
    lm = me.LagrangesMethod(
        lagrangian, [x, th], forcelist=[(cart, force * n.x)], frame=n
    )
    lm.form_lagranges_equations()
    values = {big: 2.0, m: 0.7, length: 1.3, g: G}
    point = {x: op["q"][0], th: op["q"][1], xd: op["qd"][0], thd: op["qd"][1]}
    point[force] = op["F"]
    point.update({x.diff(): op["qd"][0], th.diff(): op["qd"][1]})
    _with_accelerations(lm, point, values, [x, th])
    a, b, _ = lm.linearize(
        q_ind=[x, th], qd_ind=[xd, thd], A_and_B=True, op_point=point
    )
    return (
        np.array(a.subs(values), dtype=float),
        np.array(b.subs(values), dtype=float),
    )


def test_cart_pendulum_matches_sympy_with_inputs():
    def lagrangian(q, qd, t, p):
        big, m, arm = p["M"], p["m"], p["l"]
        return (
            0.5 * (big + m) * qd[0] ** 2
            + m * arm * qd[0] * qd[1] * jnp.cos(q[1])
            + 0.5 * m * arm**2 * qd[1] ** 2
            + m * G * arm * jnp.cos(q[1])
        )

    def force(q, qd, t, p):
        return jnp.array([p["F"], 0.0])

    params = {"M": 2.0, "m": 0.7, "l": 1.3, "F": 0.4}
    system = jl.LagrangianSystem(lagrangian, params=params, force=force)
    op = {"q": [0.2, 0.6], "qd": [-0.3, 0.9], "F": 0.4}
    lin = jl.linearize(system, jnp.array(op["q"]), jnp.array(op["qd"]), inputs={"F"})
    a, b = _sympy_cart_pendulum(op)
    np.testing.assert_allclose(lin.A, a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lin.B, b, rtol=1e-10, atol=1e-12)


def test_constrained_pendulum_matches_sympy_with_inputs():
    # A pendulum in Cartesian coordinates, x independent and y dependent, pushed
    # sideways by the input F, linearized away from equilibrium by SymPy's
    # KanesMethod (its LagrangesMethod holds λ fixed instead of eliminating it).
    sm = pytest.importorskip("sympy")
    me = pytest.importorskip("sympy.physics.mechanics")
    x, y, ux, uy = me.dynamicsymbols("x y u_x u_y")
    length, g = sm.symbols("l g")
    force = me.dynamicsymbols("F")
    n = me.ReferenceFrame("N")
    origin = me.Point("O")
    origin.set_vel(n, 0)
    bob = origin.locatenew("P", x * n.x + y * n.y)
    bob.set_vel(n, ux * n.x + uy * n.y)
    kane = me.KanesMethod(
        n,
        q_ind=[x],
        u_ind=[ux],
        q_dependent=[y],
        u_dependent=[uy],
        kd_eqs=[ux - x.diff(), uy - y.diff()],
        configuration_constraints=[x**2 + y**2 - length**2],
        velocity_constraints=[x * ux + y * uy],
    )
    kane.kanes_equations([me.Particle("bob", bob, 1)], [(bob, force * n.x - g * n.y)])
    th, w = 0.5, 0.8
    q = np.array([2.0 * np.sin(th), -2.0 * np.cos(th)])
    qd = w * np.array([2.0 * np.cos(th), 2.0 * np.sin(th)])
    values = {length: 2.0, g: G}
    point = {x: q[0], y: q[1], ux: qd[0], uy: qd[1], force: 0.3}
    rhs = kane.rhs().subs(point).subs(values)
    point.update({ux.diff(): float(rhs[2]), uy.diff(): float(rhs[3])})
    a, b, _ = kane.linearize(A_and_B=True, op_point=[point, values])
    a = np.array(a, dtype=float)
    b = np.array(b, dtype=float)

    system = _cartesian_pendulum(force=True)
    system = jl.LagrangianSystem(
        system.lagrangian,
        params={"l": 2.0, "F": 0.3},
        holonomic=system.holonomic,
        force=system.force,
    )
    lin = jl.linearize(
        system,
        jnp.asarray(q),
        jnp.asarray(qd),
        coordinates=[0],
        velocities=[0],
        inputs={"F"},
    )
    np.testing.assert_allclose(lin.A, a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(lin.B, b, rtol=1e-10, atol=1e-12)
    # And by hand: with c = cos θ = √(1 − x²/l²), ẍ = c(F c − g x/l) − x ẋ²/(l² c²).
    xs, xds = q[0], qd[0]

    def xdd(x, xd):
        c = np.sqrt(1 - x**2 / 4.0)
        return c * (0.3 * c - G * x / 2.0) - x * xd**2 / (4.0 * c**2)

    h = 1e-6
    np.testing.assert_allclose(
        lin.A[1, 0], (xdd(xs + h, xds) - xdd(xs - h, xds)) / (2 * h), rtol=1e-8
    )


def test_nonholonomic_elimination_matches_reduced_coordinates():
    # A knife-edge-free example: a particle in the plane with the velocity
    # constraint ẏ = c ẋ (a = ẏ − c ẋ). Eliminating ẏ leaves a free particle in x
    # with mass 1 + c² pulled by the spring forces on x and y.
    c, kx, ky = 0.5, 2.0, 3.0

    def lagrangian(q, qd, t):
        return 0.5 * jnp.sum(qd**2) - 0.5 * (kx * q[0] ** 2 + ky * q[1] ** 2)

    system = jl.LagrangianSystem(
        lagrangian, nonholonomic=lambda q, qd, t: jnp.array([qd[1] - c * qd[0]])
    )
    lin = jl.linearize(system, jnp.zeros(2), jnp.zeros(2), velocities=[0])
    assert lin.A.shape == (3, 3)  # x, y and ẋ
    # ẍ (1 + c²) = −kx x − c ky y.
    expected = np.array(
        [[0, 0, 1], [0, 0, c], [-kx / (1 + c**2), -c * ky / (1 + c**2), 0]]
    )
    np.testing.assert_allclose(lin.A, expected, atol=1e-12)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_errors():
    system = _cartesian_pendulum()
    q, qd = jnp.array([0.0, -2.0]), jnp.zeros(2)
    with pytest.raises(ValueError, match="`coordinates` must name the 1 independent"):
        jl.linearize(system, q, qd, coordinates=[])
    with pytest.raises(
        ValueError, match=r"`coordinates` must hold indices in \[0, 2\)"
    ):
        jl.linearize(system, q, qd, coordinates=[5])
    with pytest.raises(ValueError, match="`velocities` has repeated indices"):
        jl.linearize(system, q, qd, velocities=[0, 0])
    with pytest.raises(ValueError, match="`coordinates` must be a sequence of integer"):
        jl.linearize(system, q, qd, coordinates=[0.5])
    with pytest.raises(ValueError, match=r"`inputs` names unknown params \['mass'\]"):
        jl.linearize(system, q, qd, inputs={"mass"})
    with pytest.raises(ValueError, match="does not satisfy the constraints"):
        jl.linearize(system, jnp.array([0.0, -1.0]), qd)
    with pytest.raises(eqx.EquinoxRuntimeError, match="dependent coordinates cannot"):
        # At the bottom, ∂g/∂x = 0: x cannot be the dependent coordinate.
        jl.linearize(system, q, qd, coordinates=[1], velocities=[1])
    plain = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd - 0.5 * q @ q)
    with pytest.raises(ValueError, match="`inputs` given by name needs dict params"):
        jl.linearize(plain, jnp.zeros(1), jnp.zeros(1), inputs={"k"})
    free = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd @ qd - q[0])  # no equilibrium
    with pytest.raises(
        eqx.EquinoxRuntimeError, match="jl.equilibrium did not converge"
    ):
        jl.equilibrium(free, jnp.zeros(1))
    with pytest.raises(ValueError, match="`max_steps` must be a positive int"):
        jl.equilibrium(free, jnp.zeros(1), max_steps=0)
    with pytest.raises(ValueError, match="`inputs` must be names of params, or a"):
        jl.linearize(system, q, qd, inputs=[1])
    with pytest.raises(ValueError, match="`inputs` must be names of params or a bool"):
        jl.linearize(system, q, qd, inputs={"l": True})  # no entry for "F"
    for function, args in [
        (jl.linearize, (q, qd)),
        (jl.equilibrium, (q,)),
        (jl.normal_modes, (q,)),
    ]:
        with pytest.raises(
            ValueError, match="`system` must be a jaxlagrange.LagrangianSystem, got str"
        ):
            function("pendulum", *args)
    with pytest.raises(eqx.EquinoxRuntimeError, match="dependent velocities cannot"):
        # At the bottom, ∂(x ẋ + y ẏ)/∂ẋ = x = 0: ẋ cannot be the dependent one.
        jl.linearize(system, q, qd, coordinates=[0], velocities=[1])
    with pytest.raises(
        eqx.EquinoxRuntimeError, match="does not satisfy the constraints"
    ):
        eqx.filter_jit(lambda q: jl.linearize(system, q, qd).A)(jnp.array([0.0, -1.0]))
    massless = jl.LagrangianSystem(lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * q @ q)
    with pytest.raises(
        eqx.EquinoxRuntimeError, match="restricted to the constraint tangent space is"
    ):
        jl.normal_modes(massless, jnp.zeros(2))
    # Where q̈ is not defined, its derivatives are not either: linearize and
    # equilibrium named nothing (a zero row of A for the massless coordinate).
    singular = "The mass matrix ∂²L/∂qd² is singular or not positive definite"
    with pytest.raises(eqx.EquinoxRuntimeError, match=singular):
        jl.linearize(massless, jnp.zeros(2), jnp.zeros(2))
    with pytest.raises(eqx.EquinoxRuntimeError, match=singular):
        jl.equilibrium(massless, jnp.array([0.1, 0.2]))
    # q off g(q) = 0 where q̈ = 0 (gravity along the rod): the modes of another
    # pendulum (ω² = g/3 for a rod of 2) were returned.
    off = r"`q` does not satisfy the holonomic constraints g\(q, t\) = 0: .* 5"
    with pytest.raises(ValueError, match=off):
        jl.normal_modes(system, jnp.array([0.0, -3.0]))
    with pytest.raises(eqx.EquinoxRuntimeError, match="does not satisfy the holonomic"):
        eqx.filter_jit(jl.normal_modes)(system, jnp.array([0.0, -3.0]))


def test_modes_with_every_coordinate_held_or_redundant_constraints():
    def lagrangian(q, qd, t):
        return 0.5 * qd @ qd - G * q[-1]

    pinned = jl.LagrangianSystem(
        lagrangian, holonomic=lambda q, t: jnp.array([q[0], q[1] + 1.0])
    )
    omega2, modes = jl.normal_modes(pinned, jnp.array([0.0, -1.0]))
    assert omega2.shape == (0,) and modes.shape == (2, 0)
    redundant = "The constraint Jacobian .* is rank-deficient"
    for rows in (
        lambda q, t: jnp.array([q @ q - 1.0, 2 * (q @ q - 1.0)]),  # d = 1
        lambda q, t: jnp.array([q @ q - 1.0, q[0], 3 * q[0]]),  # d = 0
    ):
        system = jl.LagrangianSystem(lagrangian, holonomic=rows)
        with pytest.raises(eqx.EquinoxRuntimeError, match=redundant):
            jl.normal_modes(system, jnp.array([0.0, 0.0, -1.0]))


def test_a_circulatory_force_has_no_normal_modes():
    # Q = c(−q₂, q₁) is no gradient: K = [[k₁, c], [−c, k₂]] is not symmetric and
    # the motion may flutter (c = 1.5 here: ω² complex). Its symmetric part was
    # used, which drops the force: ω² = (1, 3), stable, reported for both c.
    def system(c):
        return jl.LagrangianSystem(
            lambda q, qd, t: 0.5 * qd @ qd - 0.5 * (q[0] ** 2 + 3.0 * q[1] ** 2),
            force=lambda q, qd, t: c * jnp.array([-q[1], q[0]]),
        )

    for function in (jl.normal_modes, eqx.filter_jit(jl.normal_modes)):
        with pytest.raises((ValueError, eqx.EquinoxRuntimeError), match="circulatory"):
            function(system(1.5), jnp.zeros(2))
    # A force that is a gradient passes: Q = −c (q₂, q₁) = −∇(c q₁ q₂).
    gradient = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 0.5 * (q[0] ** 2 + 3.0 * q[1] ** 2),
        force=lambda q, qd, t: -0.8 * jnp.array([q[1], q[0]]),
    )
    omega2, _ = jl.normal_modes(gradient, jnp.zeros(2))
    np.testing.assert_allclose(omega2, [2 - np.sqrt(1 + 0.64), 2 + np.sqrt(1 + 0.64)])


def test_normal_modes_say_contacts_are_not_used():
    # A mass resting on a floor (y ≥ 0): jl.equilibrium finds it, but the modes
    # leave contacts out, and the refusal says so (it advised jl.equilibrium).
    system = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd @ qd - 2.0 * q[0] ** 2 - 9.81 * q[1],
        unilateral=lambda q, t: q[1:],
    )
    rest = jl.equilibrium(system, jnp.array([0.3, 0.2]))
    with pytest.raises(ValueError, match="does not use unilateral constraints"):
        jl.normal_modes(system, rest)


def test_equilibrium_and_modes_under_jit():
    system = _cartesian_pendulum()
    guess = jnp.array([0.5, -1.8])
    eager = jl.equilibrium(system, guess)
    np.testing.assert_allclose(
        jax.jit(lambda g: jl.equilibrium(system, g))(guess), eager, atol=1e-12
    )
    omega2, modes = jax.jit(lambda q: jl.normal_modes(system, q))(eager)
    np.testing.assert_allclose(omega2, [G / 2.0], rtol=1e-10)
    np.testing.assert_allclose(jnp.abs(modes[:, 0]), [1.0, 0.0], atol=1e-10)


# The benchmark bicycle (Meijaard, Papadopoulos, Ruina and Schwab 2007, table 2 /
# eq. (A.35)): M q̈ + v C1 q̇ + (g K0 + v² K2) q = 0 for q = (lean, steer).
BENCH_M = np.array([[80.81722, 2.31941332208709], [2.31941332208709, 0.29784188199686]])
BENCH_C1 = np.array([[0.0, 33.86641391492494], [-0.85035641456978, 1.68540397397560]])
BENCH_K0 = np.array(
    [[-80.95, -2.59951685249872], [-2.59951685249872, -0.80329488458618]]
)
BENCH_K2 = np.array([[0.0, 76.59734589573222], [0.0, 2.65431523794604]])
WEAVE_SPEED, CAPSIZE_SPEED = 4.29238253634111, 6.02426201538837  # the paper's


# Table 2 of the paper: the eigenvalues of the lean-steer motion at v = 0..5 m/s.
BENCH_EIGENVALUES = {
    0.0: [-5.53094371765393, -3.13164324790656, 3.13164324790656, 5.53094371765393],
    1.0: [-7.11008014637442, -3.13423125066578, 3.52696170990070 + 0.80774027519930j],
    2.0: [-8.67387984831735, -3.07158645641514, 2.68234517512745 + 1.68066296590675j],
    3.0: [-10.35101467245920, -2.63366137253667, 1.70675605663975 + 2.31582447384325j],
    4.0: [-12.15861426576450, -1.42944427361326, 0.41325331521125 + 3.07910818603206j],
    5.0: [-14.07838969279820, -0.32286642900409, -0.77534188219585 + 4.46486771378823j],
}


@pytest.fixture(scope="module")
def bicycle_rows():
    """The lean and steer rows of the bicycle's A at ten speeds (one compilation)."""
    bike, q0, _ = jl.systems.whipple_bicycle()
    r_rear, r_front = 0.3, 0.35

    @jax.jit
    @jax.vmap
    def lean_steer(v):
        qd = jnp.array([v, 0, 0, 0, 0, 0, -v / r_rear, -v / r_front])
        a = jl.linearize(
            bike, q0, qd, coordinates=[0, 1, 2, 3, 5, 6, 7], velocities=[3, 5, 6]
        ).A
        # State: x, y, ψ, φ, δ, θ_R, θ_F | φ̇, δ̇, θ̇_R; the lean and steer rows.
        return a[7:9]

    return lambda speeds: np.asarray(lean_steer(jnp.asarray(speeds, dtype=float)))


def _lean_steer_eigenvalues(row):
    a = np.block([[np.zeros((2, 2)), np.eye(2)], [row[:, [3, 4]], row[:, [7, 8]]]])
    return np.linalg.eigvals(a)


def test_benchmark_bicycle_lean_and_steer_equations(bicycle_rows):
    speeds = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.5, 1.5, 2.5, 3.5])
    for v, row in zip(speeds, bicycle_rows(speeds), strict=True):
        stiffness = -np.linalg.solve(BENCH_M, G * BENCH_K0 + v**2 * BENCH_K2)
        damping = -np.linalg.solve(BENCH_M, v * BENCH_C1)
        np.testing.assert_allclose(row[:, [3, 4]], stiffness, rtol=1e-9, atol=1e-11)
        np.testing.assert_allclose(row[:, [7, 8]], damping, rtol=1e-9, atol=1e-11)
        # Position, yaw, wheel angles and the speed itself do not enter.
        assert np.max(np.abs(row[:, [0, 1, 2, 5, 6, 9]])) < 1e-12


def test_benchmark_bicycle_eigenvalues(bicycle_rows):
    speeds = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0, 0.0])
    for v, row in zip(speeds[:6], bicycle_rows(speeds)[:6], strict=True):
        expected = list(BENCH_EIGENVALUES[v])
        if len(expected) == 3:  # the weave pair's conjugate
            expected.append(np.conj(expected[2]))
        got = np.sort_complex(_lean_steer_eigenvalues(row))
        np.testing.assert_allclose(got, np.sort_complex(expected), rtol=0, atol=1e-9)


def test_benchmark_bicycle_stable_speed_range(bicycle_rows):
    # Narrow brackets around the sign changes of the largest growth rate (weave:
    # + to −, capsize: − to +) five interior speeds each per round.
    def growth(speeds):
        rows = bicycle_rows(speeds)
        return np.array([np.max(_lean_steer_eigenvalues(r).real) for r in rows])

    brackets = [[3.0, 5.0], [5.0, 7.0]]
    for _ in range(12):
        grids = [np.linspace(lo, hi, 7)[1:-1] for lo, hi in brackets]
        rates = growth(np.concatenate(grids))
        for b, grid, rate in zip(brackets, grids, (rates[:5], rates[5:]), strict=True):
            points = np.concatenate([[b[0]], grid, [b[1]]])
            ends = np.concatenate([[np.nan], rate, [np.nan]])
            # Which sub-interval holds the crossing: the first interior point on
            # the far side of zero (the ends' signs are known from the bracket).
            before = ends[1:-1] > 0 if b is brackets[0] else ends[1:-1] < 0
            k = int(np.argmin(before)) if not before.all() else 5
            b[:] = [points[k], points[k + 1]]
    weave, capsize = (0.5 * (lo + hi) for lo, hi in brackets)
    np.testing.assert_allclose(weave, WEAVE_SPEED, atol=1e-8)
    np.testing.assert_allclose(capsize, CAPSIZE_SPEED, atol=1e-8)
    # Stable in between, unstable outside.
    rates = growth([1.0, 4.0, 4.5, 5.0, 5.5, 6.5, 8.0, 0.0, 0.0, 0.0])[:7]
    assert list(rates < 0) == [False, False, True, True, True, False, False]
