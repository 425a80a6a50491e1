"""The jaxtyping annotations of the public functions, checked with beartype.

`tests/conftest.py` instruments the package (as diffrax does with
`--jaxtyping-packages`) and checks it in tests marked `typecheck`. Here every
public function is called with the inputs its docstring allows (lists, NumPy
arrays, Python floats), which its annotations must accept.
"""

import diffrax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
from helpers import cartesian_pendulum, pendulum_state, unit_pendulum

import jaxlagrange as jl


pytest.importorskip("beartype")
pytestmark = pytest.mark.typecheck


def test_the_checks_are_on_in_marked_tests():
    # A state of the wrong shape fails the annotation before the package's own
    # check: the check is on here.
    system, _, _ = jl.systems.double_pendulum()
    with pytest.raises(TypeError, match="Type-check error whilst checking the param"):
        jl.accelerations(system, jnp.zeros(2), jnp.zeros(3), 0.0)


@pytest.mark.no_typecheck
def test_the_checks_are_off_where_exempt():
    system, _, _ = jl.systems.double_pendulum()
    with pytest.raises(ValueError, match="`q` and `qd` must have the same shape"):
        jl.accelerations(system, jnp.zeros(2), jnp.zeros(3), 0.0)


def test_state_functions_take_arrays_and_floats():
    system, _, _ = jl.systems.double_pendulum()
    for q, qd in [(jnp.ones(2), jnp.ones(2)), (np.ones(2), np.ones(2))]:
        for t in (0.0, jnp.asarray(0.0), np.float64(0.0)):
            for fn in (jl.accelerations, jl.mass_matrix, jl.momenta, jl.energy):
                fn(system, q, qd, t)


def test_multipliers_return_another_length():
    system = cartesian_pendulum()
    q, qd = pendulum_state(0.3, 1.0)
    assert jl.multipliers(system, q, qd, 0.0).shape == (1,)


def test_state_functions_take_lists_and_ints():
    system, _, _ = jl.systems.double_pendulum()
    jl.accelerations(system, [1.0, 0.5], [0, 0], 0)


def _simulate_pendulum(**options):
    system, q0, qd0 = jl.systems.pendulum()
    return jl.simulate(system, q0, qd0, **{"t1": jnp.asarray(0.1), **options})


def test_simulate_takes_arrays_and_floats():
    _simulate_pendulum(saveat=jnp.array([0.05, 0.1]), rtol=1e-6, atol=np.float64(1e-6))


def test_simulate_takes_a_float_t1():
    _simulate_pendulum(t1=0.1)


def test_simulate_takes_a_numpy_saveat():
    _simulate_pendulum(saveat=np.array([0.05, 0.1]))


def test_simulate_takes_the_variational_solver():
    _simulate_pendulum(dt0=0.05, solver=jl.VariationalMidpoint())


def test_fit_takes_an_optimistix_solver():
    system = unit_pendulum()
    ts = jnp.linspace(0.0, 0.5, 6)
    traj = jl.simulate(system, jnp.array([0.5]), jnp.zeros(1), t1=0.5, saveat=ts)
    data = jl.Observations(ts, traj.q, q0=jnp.array([0.5]), qd0=jnp.zeros(1))
    solver = optx.GaussNewton(rtol=1e-8, atol=1e-8)
    jl.fit(system, data, params={"g": 9.0}, optimizer=solver, steps=2)


def test_simulate_takes_list_states():
    system, _, _ = jl.systems.pendulum()
    jl.simulate(system, [0.3], [0.0], t1=jnp.asarray(0.1))


def test_impulse_projection_and_linearization():
    system = cartesian_pendulum()
    q, qd = pendulum_state(0.3, 1.0)
    jl.apply_impulse(system, q, qd, 0.0, np.array([1.0, 0.0]))
    jl.project_initial_state(system, q, qd, 0.0)
    double, _, _ = jl.systems.double_pendulum()
    jl.linearize(double, jnp.zeros(2), jnp.zeros(2), 0.0)
    jl.normal_modes(double, np.zeros(2), 0.0)


def test_euler_to_matrix_takes_one_angle():
    # One axis, one angle: a scalar, as SciPy's Rotation.from_euler("Y", 0.3).
    rotation = jl.rigid.euler_to_matrix(jnp.asarray(0.3), "Y")
    np.testing.assert_allclose(rotation[0, 0], np.cos(0.3), rtol=1e-14)


def test_a_ready_system_with_a_constant_step():
    system, q0, qd0 = jl.systems.cartesian_pendulum()
    jl.simulate(
        system,
        q0,
        qd0,
        t1=jnp.asarray(0.1),
        dt0=0.05,
        stepsize_controller=diffrax.ConstantStepSize(),
    )
