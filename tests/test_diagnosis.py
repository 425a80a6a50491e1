"""The cause of a stopped solve is named on demand, outside the solve's program."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from helpers import counting, degenerating_lagrangian

import jaxlagrange as jl
from jaxlagrange import _guard
from jaxlagrange._options import GivenOptions
from jaxlagrange._simulate import simulate_checked


# M = diag(1, 1 − q₀) turns singular at q₀ = 1, reached at t = 1 from q₀ = 0.
q0, qd0 = jnp.zeros(2), jnp.array([1.0, 0.0])
_OPTIONS = GivenOptions(t1=3.0, rtol=1e-8, atol=1e-8)


@pytest.fixture
def host_diagnoses(monkeypatch):
    return counting(monkeypatch, _guard, "_diagnose_on_host")


def test_diagnosis_runs_only_after_a_failure(host_diagnoses):
    system = jl.LagrangianSystem(degenerating_lagrangian)
    traj = jl.simulate(system, q0, qd0, t1=0.5, throw=False)
    assert traj.result == jl.RESULTS.successful
    assert host_diagnoses == []
    # The solve alone gives the provisional code: the failed step was NaN.
    raw, failure, _ = simulate_checked(system, q0, qd0, _OPTIONS, throw=False)
    assert raw.result == jl.RESULTS.non_finite_state
    assert bool(failure.stop.stopped)
    # `simulate` names the cause, with a second program run on the failed state.
    traj = jl.simulate(system, q0, qd0, t1=3.0, throw=False)
    assert traj.result == jl.RESULTS.singular_mass_matrix
    assert len(host_diagnoses) == 1
    assert abs(float(traj.t_final) - 1.0) < 1e-12


def test_the_same_codes_under_jit_and_vmap(host_diagnoses):
    system = jl.LagrangianSystem(degenerating_lagrangian)

    def run(qd0):
        return jl.simulate(system, q0, qd0, t1=3.0, throw=False)

    eager = run(qd0)
    jitted = jax.jit(run)(qd0)
    # One member fails at t = 1, the other reaches t1 = 3 (singular at t = 10).
    batched = jax.vmap(run)(jnp.array([[1.0, 0.0], [0.1, 0.0]]))
    assert eager.result == jitted.result == jl.RESULTS.singular_mass_matrix
    np.testing.assert_array_equal(
        batched.result._value,
        jnp.stack(
            [jl.RESULTS.singular_mass_matrix._value, jl.RESULTS.successful._value]
        ),
    )
    # Traced, the stopped members are diagnosed together by a host callback.
    assert len(host_diagnoses) == 1


def test_the_solve_traces_no_probes():
    traces = []

    def lagrangian(q, qd, t):
        traces.append(None)
        return degenerating_lagrangian(q, qd, t)

    def count(fn):
        # A new system each time: the solve's own jit cache must not hide a trace.
        system = jl.LagrangianSystem(lambda q, qd, t: lagrangian(q, qd, t))
        traces.clear()
        jax.make_jaxpr(lambda qd: fn(system, qd).q)(qd0)
        return len(traces)

    deferred = count(
        lambda s, qd: simulate_checked(s, q0, qd, _OPTIONS, throw=False)[0]
    )
    # Traced, `simulate` names the cause by a host callback: no probes either.
    traced = count(lambda s, qd: jl.simulate(s, q0, qd, t1=3.0, throw=False))
    raising = count(lambda s, qd: jl.simulate(s, q0, qd, t1=3.0))
    assert 0 < deferred == traced == raising


def test_the_command_line_names_the_cause(tmp_path, capsys):
    from jaxlagrange import _cli

    (tmp_path / "degenerating.py").write_text(
        "import jaxlagrange as jl\n\n"
        "def make():\n"
        "    return jl.LagrangianSystem(\n"
        "        lambda q, qd, t: 0.5 * qd[0] ** 2 + 0.5 * (1 - q[0]) * qd[1] ** 2\n"
        "    )\n"
    )
    config = tmp_path / "degenerating.toml"
    config.write_text(
        "[system]\nfile = 'degenerating.py'\nfunction = 'make'\n"
        "[initial]\nq = [0.0, 0.0]\nqd = [1.0, 0.0]\n[simulate]\nt1 = 3.0\n"
    )
    status = _cli.main(["run", str(config), "--quiet", "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert status == 1
    assert err.startswith(
        "jaxlagrange run: error: simulation of 'degenerating' failed at t = 1 "
        "(t1 = 3): The mass matrix ∂²L/∂qd² became singular"
    )


# Batches: the vmapped solve returns provisional codes and where each member
# stopped; the stopped members alone are diagnosed, by a second program.


def _mixed_lagrangian(q, qd, t, params):
    # M = 1 − q turns singular at q = 1 (from q = 0 moving up at 1: t ≈ 0.67);
    # V = k (q + 1)^{3/2} is NaN below q = −1 (moving down at 3: t ≈ 0.41).
    return 0.5 * (1.0 - q[0]) * qd[0] ** 2 - params["k"] * (q[0] + 1.0) ** 1.5


_MIXED_NAMES = ["singular_mass_matrix", "non_finite_state", "successful"]
_MIXED_QD0 = jnp.array([[1.0], [-3.0], [0.0]])


@pytest.fixture
def diagnoses(monkeypatch):
    return counting(monkeypatch, _guard, "_diagnose")


def test_a_batch_diagnoses_only_after_a_failure(diagnoses):
    # A new system: no compiled program of an earlier test can hide a trace.
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: _mixed_lagrangian(q, qd, t, p), params={"k": 0.01}
    )
    ok = jl.simulate_batch(
        system, jnp.zeros((3, 1)), jnp.array([[0.0], [0.1], [-0.1]]), t1=0.5
    )
    assert not jl.failed(ok).any()
    assert diagnoses == []  # the batch's program holds no diagnosis
    traj = jl.simulate_batch(system, jnp.zeros((3, 1)), _MIXED_QD0, t1=1.0, throw=False)
    assert jl.result_name(traj).tolist() == _MIXED_NAMES
    assert len(diagnoses) >= 1
    np.testing.assert_allclose(traj.t_final[2], 1.0, rtol=1e-12)
    assert 0.6 < traj.t_final[0] < 0.7 and 0.35 < traj.t_final[1] < 0.45
    # Members are diagnosed on their own state: the same causes one by one.
    for i, name in enumerate(_MIXED_NAMES):
        alone = jl.simulate(system, jnp.zeros(1), _MIXED_QD0[i], t1=1.0, throw=False)
        assert jl.result_name(alone) == name
        np.testing.assert_allclose(alone.t_final, traj.t_final[i], rtol=1e-12)
    # The provisional code alone would not name the singular mass matrix.
    with pytest.raises(
        eqx.EquinoxRuntimeError,
        match=r"`simulate_batch`: 2 of 3 members failed: members 0 \(singular_mass_"
        r"matrix at t = 0\.6\d*\), 1 \(non_finite_state at t = 0\.[34]\d*\)\. The "
        r"first: The mass matrix ∂²L/∂qd² became singular",
    ):
        jl.simulate_batch(system, jnp.zeros((3, 1)), _MIXED_QD0, t1=1.0)


def test_a_batch_with_params_names_each_member():
    # Batched params: each member's system is rebuilt with its own params for the
    # diagnosis (k = 0 never reaches the NaN; k = 40 pulls it below q = −1).
    system = jl.LagrangianSystem(_mixed_lagrangian, params={"k": 0.01})
    traj = jl.simulate_batch(
        system,
        jnp.zeros(1),
        jnp.array([[1.0], [-0.5], [-0.5]]),
        params={"k": jnp.array([0.0, 40.0, 0.0])},
        t1=1.0,
        throw=False,
    )
    assert jl.result_name(traj).tolist() == _MIXED_NAMES


def test_a_traced_batch_names_the_causes_by_a_callback(diagnoses):
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: _mixed_lagrangian(q, qd, t, p), params={"k": 0.01}
    )
    q0 = jnp.zeros((3, 1))

    def run(qd0, k):
        s = jl.LagrangianSystem(system.lagrangian, params={"k": k})
        traj = jl.simulate_batch(s, q0, qd0, t1=1.0, throw=False)
        # The loss of the member that reaches t1; the codes as aux.
        return jnp.sum(traj.q[2] ** 2), traj.result

    jax.jit(run).trace(_MIXED_QD0, 0.01)
    assert not diagnoses  # under jit the program holds no probes
    jitted = jax.jit(run)(_MIXED_QD0, 0.01)[1]
    assert jl.result_name(jitted).tolist() == _MIXED_NAMES
    assert len(diagnoses) == 1  # the two stopped members, on the host, together
    # Under grad (the batch's outputs are tracers) likewise.
    (_, result), _ = jax.value_and_grad(run, argnums=1, has_aux=True)(_MIXED_QD0, 0.01)
    assert jl.result_name(result).tolist() == _MIXED_NAMES


# Fits: the loss's programs give provisional codes; a failed fit names the cause.


def _mass_lagrangian(q, qd, t, params):
    return 0.5 * params["m"] * qd[0] ** 2 - 0.5 * q[0] ** 2


def test_a_failed_fit_names_the_cause_found_afterwards(diagnoses):
    # The data need m = 0.25 (ω = 2): the first Adam step moves m by -lr = -5, from
    # 1 to -4, where the mass matrix is not positive definite. The loss's program
    # gives the provisional code (a NaN step); the diagnosed evaluation, compiled
    # only after the failure, names the singular mass matrix.
    # A new function: no compiled program of an earlier test can hide a trace.
    system = jl.LagrangianSystem(
        lambda q, qd, t, p: _mass_lagrangian(q, qd, t, p), params={"m": 1.0}
    )
    ts = jnp.linspace(0.0, 1.0, 11)
    data = jl.Observations(
        ts, jnp.cos(2.0 * ts)[:, None], q0=jnp.ones(1), qd0=jnp.zeros(1)
    )
    with pytest.warns(UserWarning, match="poor fit"):
        ok = jl.fit(system, data, optimizer=optax.adam(1e-2), steps=2)
    assert np.isfinite(ok.loss)
    assert diagnoses == []  # the fit's programs hold no diagnosis
    with pytest.raises(
        FloatingPointError,
        match=r"the loss is not finite \(inf\) at step 1 of 5: 1 of 1 solves failed\. "
        r"The mass matrix ∂²L/∂qd² became singular",
    ):
        jl.fit(system, data, optimizer=optax.adam(5.0), steps=5)
    assert len(diagnoses) >= 1


def _vanishing_mass(q, qd, t, params):
    return 0.5 * (1.0 - q[0] / params["a"]) * qd[0] ** 2 - 0.5 * q[0] ** 2


def test_a_failed_least_squares_fit_names_the_cause():
    # From the guess a = 0.5 the motion reaches q = a, where M = 1 − q/a vanishes,
    # at t < 1.5: the first loss is inf, and the error names the singular mass
    # matrix (the loss's program alone gives the provisional code).
    system = jl.LagrangianSystem(_vanishing_mass, params={"a": 0.5})
    ts = jnp.linspace(0.0, 1.5, 11)
    data = jl.Observations(ts, jnp.sin(ts)[:, None], q0=jnp.zeros(1), qd0=jnp.ones(1))
    with pytest.raises(
        FloatingPointError,
        match=r"the loss is not finite \(inf\) after the last step of \d+: 1 of 1 "
        r"solves failed\. The mass matrix ∂²L/∂qd² became singular",
    ):
        jl.fit(system, data, steps=5)
