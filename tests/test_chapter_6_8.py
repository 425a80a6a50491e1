"""The chapter's 6.8.8 and 6.8.9, which it leaves as equations of motion.

Each is set up in other coordinates than the chapter's (Cartesian, with the
string as a holonomic constraint; or the rod's direction as a free vector) and
integrated by `jl.simulate`, against the chapter's reduced equations (checked
by hand, `friction_references.py`) integrated by SciPy.
"""

import jax.numpy as jnp
import numpy as np
from friction_references import masses_on_rod, table_and_pendulum

import jaxlagrange as jl


G = 9.81
TOL = 1e-11
TS = np.linspace(0.0, 3.0, 7)


def test_mass_on_table_with_hanging_pendulum():
    # q = (x₁, y₁, x₂, z₂): m₁ on the table, m₂ in a vertical plane below the
    # hole at the origin; the string: |(x₁, y₁)| + |(x₂, z₂)| = l.
    m1, m2, length = 1.0, 0.5, 2.0

    def lagrangian(q, qd, t):
        kinetic = 0.5 * m1 * (qd[0] ** 2 + qd[1] ** 2) + 0.5 * m2 * (
            qd[2] ** 2 + qd[3] ** 2
        )
        return kinetic - m2 * G * q[3]

    def string(q, t):
        return jnp.array([jnp.hypot(q[0], q[1]) + jnp.hypot(q[2], q[3]) - length])

    system = jl.LagrangianSystem(lagrangian, holonomic=string)
    r, th, ph, rd, thd, phd = y0 = [1.0, 0.3, 0.0, 0.0, 0.0, 2.0]
    rho = length - r
    q0 = [rho * np.cos(ph), rho * np.sin(ph), r * np.sin(th), -r * np.cos(th)]
    qd0 = [
        -rd * np.cos(ph) - rho * phd * np.sin(ph),
        -rd * np.sin(ph) + rho * phd * np.cos(ph),
        rd * np.sin(th) + r * thd * np.cos(th),
        -rd * np.cos(th) + r * thd * np.sin(th),
    ]
    traj = jl.simulate(
        system, jnp.array(q0), jnp.array(qd0), t1=TS[-1], saveat=TS, rtol=TOL, atol=TOL
    )
    reference = table_and_pendulum(y0, TS, m1=m1, m2=m2, length=length, g=G)
    q = np.asarray(traj.q)
    r = np.hypot(q[:, 2], q[:, 3])
    theta = np.arctan2(q[:, 2], -q[:, 3])
    phi = np.unwrap(np.arctan2(q[:, 1], q[:, 0]))
    # The string stays taut and m₁ off the hole over the run.
    assert np.all((reference[:, 0] > 0.2) & (reference[:, 0] < length - 0.2))
    np.testing.assert_allclose(r, reference[:, 0], rtol=1e-8)
    np.testing.assert_allclose(theta, reference[:, 1], atol=1e-8)
    np.testing.assert_allclose(phi, reference[:, 2], atol=1e-8)
    # Angular momentum of m₁ about the hole, m₁ (l − r)² φ̇, is conserved.
    momentum = m1 * (q[:, 0] * traj.qd[:, 1] - q[:, 1] * traj.qd[:, 0])
    np.testing.assert_allclose(momentum, m1 * rho**2 * phd, rtol=1e-9)


def test_two_masses_on_springs_along_a_moving_rod():
    # q = (c, p): the rod's centre and the position of one mass from it (the
    # other at −p); the rod's direction p/|p| carries its rotational energy.
    m, M, length, K, r0 = 1.0, 2.0, 3.0, 5.0, 0.5

    def lagrangian(q, qd, t):
        p, pd = q[3:], qd[3:]
        r = jnp.linalg.norm(p)
        ud = pd / r - p * jnp.dot(p, pd) / r**3
        kinetic = (
            0.5 * (M + 2 * m) * jnp.sum(qd[:3] ** 2)
            + m * jnp.sum(pd**2)
            + M * length**2 / 24 * jnp.sum(ud**2)
        )
        return kinetic - K * (r - r0) ** 2

    system = jl.LagrangianSystem(lagrangian)
    r, th, ph, rd, thd, phd = y0 = [0.7, 1.0, 0.0, 0.1, 0.3, 1.0]
    u = np.array([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)])
    e_th = np.array([np.cos(th) * np.cos(ph), np.cos(th) * np.sin(ph), -np.sin(th)])
    e_ph = np.array([-np.sin(ph), np.cos(ph), 0.0])
    centre_velocity = np.array([0.2, -0.1, 0.05])
    q0 = np.concatenate([np.zeros(3), r * u])
    qd0 = np.concatenate(
        [centre_velocity, rd * u + r * (thd * e_th + phd * np.sin(th) * e_ph)]
    )
    traj = jl.simulate(
        system, jnp.array(q0), jnp.array(qd0), t1=TS[-1], saveat=TS, rtol=TOL, atol=TOL
    )
    reference = masses_on_rod(y0, TS, m=m, M=M, length=length, K=K, r0=r0)
    p = np.asarray(traj.q[:, 3:])
    radius = np.linalg.norm(p, axis=1)
    np.testing.assert_allclose(radius, reference[:, 0], rtol=1e-8)
    np.testing.assert_allclose(np.arccos(p[:, 2] / radius), reference[:, 1], atol=1e-8)
    phi = np.unwrap(np.arctan2(p[:, 1], p[:, 0]))
    np.testing.assert_allclose(phi, reference[:, 2], atol=1e-8)
    # The centre moves uniformly.
    np.testing.assert_allclose(
        traj.qd[:, :3], np.tile(centre_velocity, (7, 1)), atol=1e-10
    )
