"""`jl.fit`: recovery of known params, gradients against finite differences, errors.

Compilation dominates the run time, so the tests share compiled steps: the fits
below reuse one optimizer object, one system and equal data shapes wherever the
point of the test allows.
"""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
import pytest
from helpers import rayleigh

import jaxlagrange as jl


def _damped_lagrangian(q, qd, t, params):
    m, length, g = params["m"], params["l"], params["g"]
    return 0.5 * m * length**2 * qd[0] ** 2 + m * g * length * jnp.cos(q[0])


TRUE = {"m": 1.0, "l": 2.0, "g": 9.81, "c": 0.3}
GUESS = {"m": 1.0, "l": 1.3, "g": 9.81, "c": 0.18}  # 35% and 40% off
PENDULUM = jl.LagrangianSystem(_damped_lagrangian, params=TRUE, dissipation=rayleigh)
TS = jnp.linspace(0.0, 2.0, 41)
LBFGS = optax.lbfgs()


def _observe(system, q0, qd0, ts):
    traj = jl.simulate(system, q0, qd0, t1=ts[-1], saveat=ts, rtol=1e-10, atol=1e-10)
    return traj.q, traj.qd


Q, QD = _observe(PENDULUM, jnp.array([1.2]), jnp.array([0.0]), TS)


def _relative_error(fitted, names):
    return {k: abs(float(fitted[k]) / TRUE[k] - 1) for k in names}


def _fit_length_and_damping(data):
    """L-BFGS fit of the pendulum's l and c from GUESS (the recovery tests' fit)."""
    return jl.fit(
        PENDULUM,
        data,
        params=GUESS,
        optimizer=LBFGS,
        steps=40,
        trainable={"l", "c"},
        positive={"l", "c"},
        rtol=1e-10,
        atol=1e-10,
    )


def test_recover_pendulum_length_and_damping_noise_free():
    data = jl.Observations(TS, Q, QD, q0=Q[0], qd0=QD[0])  # a known state: held
    result = _fit_length_and_damping(data)
    errors = _relative_error(result.params, ("l", "c"))
    assert max(errors.values()) < 1e-5, errors
    # Fixed params are untouched, and the fitted system carries the fitted params.
    assert float(result.params["m"]) == 1.0 and float(result.params["g"]) == 9.81
    assert result.system.params["l"] is result.params["l"]
    assert result.losses.shape == (40,) and isinstance(result.losses, np.ndarray)
    assert result.losses[-1] < 1e-6 * result.losses[0]
    assert result.loss <= result.losses[-1]
    np.testing.assert_array_equal(result.q0, Q[0])


def test_recover_pendulum_from_noisy_data():
    # Noise of σ = 1e-3 on q (rad) and qd (rad/s), 41 samples over 2 s. Over 2 s the
    # damping changes the amplitude by only ~7%, so c is the less determined: the
    # test allows relative errors of 1e-3 on l and 3e-2 on c.
    key_q, key_qd = jax.random.split(jax.random.key(0))
    noisy_q = Q + 1e-3 * jax.random.normal(key_q, Q.shape)
    noisy_qd = QD + 1e-3 * jax.random.normal(key_qd, QD.shape)
    data = jl.Observations(TS, noisy_q, noisy_qd, q0=Q[0], qd0=QD[0], sigma=1e-3)
    result = _fit_length_and_damping(data)
    errors = _relative_error(result.params, ("l", "c"))
    assert errors["l"] < 1e-3 and errors["c"] < 3e-2, errors
    assert errors["l"] > 1e-7  # noise leaves a finite error: not a fit to the truth
    # At the least-squares optimum each residual, scaled by σ, is of order one:
    # the loss (their mean square) is ≈ 1 − 2/82, with a spread of ≈ 0.16.
    assert 0.5 < result.loss < 1.5


def test_fit_initial_state_from_positions_only():
    # No observed velocities: qd0 starts from a finite-difference estimate and the
    # initial state is fitted together with l (Adam, the default optimizer family).
    data = jl.Observations(TS, Q)
    result = jl.fit(
        PENDULUM,
        data,
        params={**TRUE, "l": 1.6},
        optimizer=optax.adam(0.02),
        steps=300,
        trainable={"l"},
        positive={"l"},
        fit_initial_state=True,
    )
    assert abs(float(result.params["l"]) / 2.0 - 1) < 2e-3
    assert abs(float(result.qd0[0])) < 1e-2
    assert abs(float(result.q0[0]) - 1.2) < 1e-3
    assert result.losses[-1] < 1e-3 * result.losses[0]


def test_double_pendulum_multiple_shooting():
    # 4 s of chaotic motion, cut into 8 segments: m2, l1 and l2 from 30% off.
    system, q0, qd0 = jl.systems.double_pendulum({"m2": 0.8, "l1": 1.2, "l2": 0.9})
    ts = jnp.linspace(0.0, 4.0, 81)
    q, qd = _observe(system, q0, qd0, ts)
    data = jl.Observations(ts, q, qd)
    guess = {**system.params, "m2": 0.56, "l1": 1.56, "l2": 0.63}
    result = jl.fit(
        system,
        data,
        params=guess,
        optimizer=LBFGS,
        steps=200,
        trainable={"m2", "l1", "l2"},
        positive={"m2", "l1", "l2"},
        segments=8,
    )
    for name, true in (("m2", 0.8), ("l1", 1.2), ("l2", 0.9)):
        assert abs(float(result.params[name]) / true - 1) < 1e-5, name
    q_starts, _ = result.starts[0]
    assert q_starts.shape == (8, 2)
    # The fitted segment starts lie on the observed trajectory.
    np.testing.assert_allclose(
        q_starts, q[np.round(np.linspace(0, 80, 9)).astype(int)[:-1]], atol=1e-5
    )


FD_DATA = jl.Observations(TS[:21], Q[:21] + 0.01, QD[:21])
FD_OPTIONS = dict(segments=2, rtol=1e-11, atol=1e-11)


def _fd_loss(params, adjoint=None):
    system = eqx.tree_at(lambda s: s.params, PENDULUM, params)
    return jl.fit_loss(system, FD_DATA, adjoint=adjoint, **FD_OPTIONS)


_fd_value = jax.jit(_fd_loss)  # the forward loss does not depend on the adjoint


@pytest.mark.parametrize(
    "adjoint, tolerance",
    [(None, 1e-6), (diffrax.BacksolveAdjoint(), 1e-5)],
    ids=["default RecursiveCheckpointAdjoint", "BacksolveAdjoint"],
)
def test_gradient_matches_finite_differences(adjoint, tolerance):
    params = {k: jnp.asarray(v) for k, v in GUESS.items()}
    grad = jax.jit(jax.grad(lambda p: _fd_loss(p, adjoint)))(params)
    for name in ("l", "c", "g"):
        h = 1e-5 * float(params[name])
        up = {**params, name: params[name] + h}
        down = {**params, name: params[name] - h}
        numeric = (_fd_value(up) - _fd_value(down)) / (2 * h)
        assert float(grad[name]) == pytest.approx(float(numeric), rel=tolerance), name


def _bad_observations(**override):
    kwargs = dict(ts=TS, q=Q, qd=QD)
    kwargs.update(override)
    return lambda: jl.Observations(**kwargs)


@pytest.mark.parametrize(
    "make, match",
    [
        (_bad_observations(q=Q[:-1]), r"`q` has 40 rows but `ts` has 41 times"),
        (_bad_observations(qd=QD[:-1]), r"`qd` must have the shape of `q`, \(41, 1\)"),
        (
            _bad_observations(ts=TS[::-1]),
            r"`ts` must be strictly increasing, but ts\[0\]",
        ),
        (_bad_observations(ts=TS.at[5].set(TS[4])), r"ts\[4\] = 0.2 and ts\[5\] = 0.2"),
        (
            _bad_observations(q=Q.at[7, 0].set(jnp.nan)),
            r"`q` contains a non-finite value \(NaN or inf\) at index \(7, 0\)",
        ),
        (_bad_observations(qd=QD.at[3, 0].set(jnp.inf)), r"`qd` contains a non-finite"),
        (_bad_observations(q=Q[:, 0]), r"`q` must have shape \(T, n\) = \(41, n\)"),
        (_bad_observations(ts=TS[:1], q=Q[:1], qd=QD[:1]), r"at least 2 times"),
        (lambda: jl.Observations(TS, Q, sigma=-1.0), r"`sigma` must be > 0"),
        (
            lambda: jl.Observations(TS, Q, weights=jnp.ones(3)),
            r"`weights` must have shape \(41,\) or \(41, 1\)",
        ),
        (
            lambda: jl.Observations(TS, Q, q0=jnp.zeros(2)),
            r"`q0` must have shape \(1,\)",
        ),
    ],
)
def test_bad_observations(make, match):
    with pytest.raises(ValueError, match=match):
        make()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (
            dict(params={"m": 1.0, "l": 1.0}),
            r"`params` must have the pytree structure of system.params",
        ),
        (
            dict(params={**TRUE, "l": jnp.ones(2)}),
            r"`params` leaf \['l'\] has shape \(2,\), but in system.params it has shape \(\)",
        ),
        (
            dict(trainable={"length"}),
            r"`trainable` names unknown params \['length'\]; valid names: \['c', 'g', 'l', 'm'\]",
        ),
        (
            dict(trainable={"l": True}),
            r"`trainable` must be True/False, a collection of top-level param names, or a pytree of bools",
        ),
        (
            dict(trainable={"l", "c"}, positive={"c"}, params={**TRUE, "c": -0.1}),
            r"positive param \['c'\] must start > 0",
        ),
        # l = 0 makes M singular: the start is named, not the data.
        (
            dict(trainable={"l"}, positive={"l"}, params={**TRUE, "l": 0.0}),
            r"positive param \['l'\] must start > 0",
        ),
        (dict(segments=41), r"`segments` must be an integer from 1 to 40"),
        (dict(steps=0), r"`steps` must be a positive integer"),
        (dict(trainable=False, fit_initial_state=False), r"nothing to fit"),
    ],
)
def test_bad_fit_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        jl.fit(PENDULUM, jl.Observations(TS, Q, QD), **kwargs)


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_bad_data_argument():
    with pytest.raises(
        ValueError, match=r"`data` must be a `jl.Observations` or a non-empty sequence"
    ):
        jl.fit(PENDULUM, (TS, Q))
    with pytest.raises(ValueError, match=r"same number of coordinates, got \[1, 2\]"):
        jl.fit(
            PENDULUM, [jl.Observations(TS, Q), jl.Observations(TS, jnp.ones((41, 2)))]
        )


def _sqrt_lagrangian(q, qd, t, params):
    return 0.5 * qd[0] ** 2 - 0.5 * jnp.sqrt(params["k"]) ** 2 * q[0] ** 2


def test_non_finite_loss_names_the_step():
    # The data need k = 0.25: the first Adam step moves k by -lr = -5, from 1 to -4: sqrt(k) is NaN there,
    # the solve fails, and the loss at step 1 is not finite.
    system = jl.LagrangianSystem(_sqrt_lagrangian, params={"k": 1.0})
    ts = jnp.linspace(0.0, 1.0, 11)
    data = jl.Observations(
        ts, jnp.cos(0.5 * ts)[:, None], q0=jnp.ones(1), qd0=jnp.zeros(1)
    )
    with pytest.raises(
        FloatingPointError,
        match=r"the loss is not finite \(inf\) at step 1 of 5: 1 of 1 solves failed\. The state or the equations of motion became non-finite.* The last finite loss was .* at step 0",
    ):
        jl.fit(system, data, optimizer=optax.adam(5.0), steps=5)


def test_neural_lagrangian_mass_is_positive_definite_and_trains():
    system = jl.neural_lagrangian(2, key=jax.random.key(1), width=8, depth=1, eps=1e-2)
    qs = jax.random.normal(jax.random.key(2), (16, 2)) * 3
    masses = jax.vmap(jl.mass_matrix, (None, 0, 0, None))(system, qs, qs, 0.0)
    eigenvalues = jnp.linalg.eigvalsh(masses)
    assert jnp.all(eigenvalues >= 1e-2 * (1 - 1e-12))
    np.testing.assert_allclose(masses, jnp.swapaxes(masses, 1, 2), atol=1e-14)

    # Train on a harmonic oscillator pair for a few Adam steps: the MLP params
    # (with their activation functions, which are not arrays) go through fit.
    ts = jnp.linspace(0.0, 1.0, 11)
    q = jnp.stack([jnp.cos(ts), 0.5 * jnp.cos(2 * ts)], axis=1)
    qd = jnp.stack([-jnp.sin(ts), -jnp.sin(2 * ts)], axis=1)
    result = jl.fit(
        system, jl.Observations(ts, q, qd), optimizer=optax.adam(1e-2), steps=30
    )
    assert result.losses[-1] < 0.5 * result.losses[0]
    assert result.params["mass"].activation is system.params["mass"].activation
    with pytest.raises(ValueError, match=r"`eps` must be > 0"):
        jl.neural_lagrangian(2, key=jax.random.key(0), eps=0.0)


# The default least-squares path, optimistix solvers, and the uncertainties.


def _length_fit(data, **kwargs):
    return jl.fit(
        PENDULUM,
        data,
        params=GUESS,
        trainable={"l", "c"},
        positive={"l", "c"},
        rtol=1e-10,
        atol=1e-10,
        **kwargs,
    )


def test_default_levenberg_marquardt_recovers_to_rounding_level():
    result = _length_fit(jl.Observations(TS, Q, QD))
    errors = _relative_error(result.params, ("l", "c"))
    assert max(errors.values()) < 1e-8, errors
    assert result.converged and 0 < result.steps < 40
    assert result.losses.shape == (result.steps,) and result.loss < 1e-16
    assert result.losses[0] > 1e-3 and result.losses.min() == pytest.approx(
        result.loss, rel=1e-6, abs=1e-20
    )
    assert result.covariance.shape == (2, 2)
    # Noise-free data: the estimated noise is at rounding level, and so are the
    # standard errors; untrained params have none.
    assert 0 <= float(result.stderr["l"]) < 1e-8
    assert float(result.stderr["m"]) == 0.0 and float(result.stderr["g"]) == 0.0


@pytest.mark.parametrize(
    "optimizer",
    [optx.GaussNewton(rtol=1e-10, atol=1e-10), optx.BFGS(rtol=1e-12, atol=1e-12)],
    ids=["gauss_newton", "bfgs"],
)
def test_optimistix_solvers(optimizer):
    data = jl.Observations(TS, Q, QD, q0=Q[0], qd0=QD[0])
    result = _length_fit(data, optimizer=optimizer, steps=200)
    errors = _relative_error(result.params, ("l", "c"))
    assert max(errors.values()) < 1e-5, errors
    assert result.converged


def test_default_stops_once_the_step_is_within_the_noise():
    # With noise the optimum is known to its standard errors: the default solve
    # stops once a Gauss–Newton step would move the params by less than 1e-3 of
    # them, where optimistix's tolerance alone (the same solver given
    # explicitly) takes further steps that change nothing the data determine.
    rng = np.random.default_rng(0)
    noisy = jl.Observations(
        TS, Q + 1e-3 * rng.standard_normal(Q.shape), QD, q0=Q[0], qd0=QD[0], sigma=1e-3
    )
    default = _length_fit(noisy)
    tight = _length_fit(
        noisy, optimizer=optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    )
    assert default.converged and default.solver_result == "successful"
    assert default.steps < tight.steps, (default.steps, tight.steps)
    for k in ("l", "c"):
        moved = abs(float(default.params[k]) - float(tight.params[k]))
        assert moved < 1e-2 * float(tight.stderr[k]), k


def test_reverse_mode_jacobian_matches_forward():
    data = jl.Observations(TS, Q, QD)
    forward = _length_fit(data, jacobian="forward")
    reverse = _length_fit(data, jacobian="reverse")
    np.testing.assert_allclose(forward.params["l"], reverse.params["l"], rtol=1e-9)
    with pytest.raises(ValueError, match="`jacobian` must be 'auto', 'forward' or"):
        _length_fit(data, jacobian="sideways")


NOISE = 0.01


def _noisy(seed):
    rng = np.random.default_rng(seed)
    return jl.Observations(
        TS,
        Q + NOISE * rng.normal(size=Q.shape),
        QD + NOISE * rng.normal(size=QD.shape),
        q0=Q[0],
        qd0=QD[0],
        sigma=NOISE,
    )


def test_stderr_matches_an_independent_covariance():
    # Gauss–Newton by hand: e(l, c) = (simulated − observed)/σ over q and q̇, its
    # Jacobian by central differences, covariance (JᵀJ)⁻¹ (σ known, so σ̂² = 1).
    data = _noisy(0)
    result = _length_fit(data)
    best = {k: float(v) for k, v in result.params.items()}

    def residuals(length, damping):
        system = eqx.tree_at(
            lambda s: s.params,
            PENDULUM,
            {**best, "l": jnp.asarray(length), "c": jnp.asarray(damping)},
        )
        traj = jl.simulate(
            system, Q[0], QD[0], t1=TS[-1], saveat=TS, rtol=1e-12, atol=1e-12
        )
        return (
            np.concatenate([np.ravel(traj.q - data.q), np.ravel(traj.qd - data.qd)])
            / NOISE
        )

    h = 1e-6
    columns = []
    for i in range(2):
        up, down = [best["l"], best["c"]], [best["l"], best["c"]]
        up[i] += h
        down[i] -= h
        columns.append((residuals(*up) - residuals(*down)) / (2 * h))
    jac = np.stack(columns, axis=1)
    expected = np.linalg.solve(jac.T @ jac, np.eye(2))
    # The covariance is in the params' tree order: c, then l.
    np.testing.assert_allclose(result.covariance, expected[::-1, ::-1], rtol=1e-4)
    np.testing.assert_allclose(result.stderr["l"], np.sqrt(expected[0, 0]), rtol=1e-4)


def test_stderr_matches_the_spread_of_replicates():
    fits = [_length_fit(_noisy(seed)) for seed in range(1, 13)]
    lengths = np.array([float(f.params["l"]) for f in fits])
    stderr = np.mean([float(f.stderr["l"]) for f in fits])
    # 12 replicates: the sample deviation is within ±40% of the true one (95%).
    assert 0.6 < np.std(lengths, ddof=1) / stderr < 1.4, (np.std(lengths), stderr)
    assert abs(np.mean(lengths) - 2.0) < 3 * stderr


def test_stderr_without_sigma_estimates_the_noise():
    with_sigma = _length_fit(_noisy(0))
    data = _noisy(0)
    data = jl.Observations(data.ts, data.q, data.qd, q0=Q[0], qd0=QD[0])
    without = _length_fit(data)
    # σ̂ estimated from the misfit is the noise level within sampling error.
    ratio = float(without.stderr["l"]) / float(with_sigma.stderr["l"])
    assert 0.8 < ratio < 1.2, ratio


@pytest.mark.no_typecheck  # wrong inputs on purpose
def test_bad_inputs_named_before_compiling():
    data = jl.Observations(TS, Q, QD)
    with pytest.raises(ValueError, match=r"starting guess of param \['l'\] is not"):
        jl.fit(PENDULUM, data, params={**GUESS, "l": float("nan")}, trainable={"l"})
    with pytest.raises(ValueError, match=r"trainable param \['l'\] has an integer"):
        jl.fit(PENDULUM, data, params={**GUESS, "l": jnp.array(2)}, trainable={"l"})
    system, q0, qd0 = jl.systems.double_pendulum()
    with pytest.raises(ValueError, match=r"`data` has n = 1 coordinates, but"):
        jl.fit(system, data, trainable={"l2"})
    with pytest.raises(ValueError, match="`optimizer` must be an optax optimizer"):
        jl.fit(PENDULUM, data, optimizer="lm", trainable={"l"})


def test_a_constrained_system_is_fitted_from_noisy_data():
    # The Cartesian pendulum (x² + y² = l²): every piece starts on the circle,
    # its start projected, so noisy data, several segments and a fitted initial
    # state work (each ended in an error of the initial state off the manifold).
    true, q0, qd0 = jl.systems.cartesian_pendulum({"l": 1.5, "g": 9.81})
    ts = jnp.linspace(0.0, 2.0, 41)
    traj = jl.simulate(true, q0, qd0, t1=2.0, saveat=ts, rtol=1e-11, atol=1e-11)
    noise = np.random.default_rng(1).normal(0.0, 1e-3, traj.q.shape)
    data = jl.Observations(ts, traj.q + noise, traj.qd, sigma=1e-3)
    guess, _, _ = jl.systems.cartesian_pendulum({"l": 1.5, "g": 9.0})
    result = jl.fit(
        guess,
        data,
        trainable={"g"},
        positive={"g"},
        segments=2,
        fit_initial_state=True,
        rtol=1e-10,
        atol=1e-10,
    )
    g, stderr = float(result.params["g"]), float(result.stderr["g"])
    assert 0 < stderr < 0.05 and abs(g - 9.81) < 4 * stderr
    q, qd = result.q0, result.qd0
    assert abs(float(q @ q) - 1.5**2) < 1e-10 and abs(float(q @ qd)) < 1e-10


def test_a_given_start_off_the_constraints_is_refused_unless_a_param_moves_them():
    # q0 = (1, 1) is off the rod x² + y² = l² = 1, and fitting g cannot move
    # it: the fit started from its projection, biased by the distance, and
    # reported g = 7.95 for 9.81 as converged. Fitting l, the distance is what
    # fits it, and the start is taken.
    true, q0, qd0 = jl.systems.cartesian_pendulum({"l": 1.0, "g": 9.81})
    ts = jnp.linspace(0.0, 1.0, 11)
    traj = jl.simulate(true, q0, qd0, t1=1.0, saveat=ts)
    off = jl.Observations(ts, traj.q, traj.qd, q0=jnp.array([1.0, 1.0]))
    with pytest.raises(
        ValueError,
        match=r"the initial position of data\[0\] \(its q0\) is off the holonomic "
        r"constraints, which no fitted param moves: it is 0\.354 from them\.",
    ):
        jl.fit(true, off, trainable={"g"}, fit_initial_state=False)
    # Rounded to a measurement's digits, a start is taken (and projected).
    rounded = jl.Observations(ts, traj.q, traj.qd, q0=traj.q[0] + 1e-7)
    held = dict(trainable={"g"}, fit_initial_state=False)
    assert abs(float(jl.fit(true, rounded, **held).params["g"]) - 9.81) < 1e-3
    on_the_rod = jl.Observations(ts, traj.q, traj.qd, q0=traj.q[0] * 1.2)
    result = jl.fit(
        true, on_the_rod, trainable={"l"}, positive={"l"}, fit_initial_state=False
    )
    assert np.isfinite(float(result.params["l"]))


_FLOAT32_DEFAULTS = """
import jax.numpy as jnp
import jaxlagrange as jl
system, q0, qd0 = jl.systems.pendulum()
ts = jnp.linspace(0.0, 1.0, 11)
traj = jl.simulate(system, q0, qd0, t1=1.0, saveat=ts)
print(float(jl.fit_loss(system, jl.Observations(ts, traj.q, traj.qd))))
print(float(jl.finite_time_lyapunov(system, q0, qd0, t1=1.0)))
"""


def test_fit_loss_and_lyapunov_defaults_follow_the_precision():
    # In float32 (JAX's default) fit_loss refused its own default rtol = 1e-8,
    # "below the precision of float32"; fit and simulate take 1e-5 there.
    env = {k: v for k, v in os.environ.items() if k != "JAX_ENABLE_X64"}
    proc = subprocess.run(
        [sys.executable, "-c", _FLOAT32_DEFAULTS],
        env={**env, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    loss, lam = (float(x) for x in proc.stdout.split())
    assert loss < 1e-8 and abs(lam) < 2.0


def test_fits_that_mislead_are_refused_or_warned():
    # Found by a fitting audit: each was silent.
    clean = jl.Observations(TS, Q, QD)
    noisy = _noisy(1)
    # sigma for one trajectory but not the other: σ̂ pooled residuals in two
    # units, the one without sigma weighed 1e4 : 1 (errors 0.6× too small).
    with pytest.raises(
        ValueError, match=r"`sigma` is given for some observed .* data\[1\]"
    ):
        _length_fit([noisy, clean])
    # A first sample masked by weight 0 was still the held initial state.
    glitch = jl.Observations(
        TS, Q.at[0].add(0.5), QD, weights=jnp.ones(TS.shape).at[0].set(0.0)
    )
    with pytest.raises(ValueError, match=r"the first sample of data\[0\] has weight 0"):
        _length_fit(glitch, fit_initial_state=False)
    # Two params that enter only as a product: inf errors, the direction named.
    product = jl.LagrangianSystem(
        lambda q, qd, t, p: 0.5 * qd[0] ** 2 + p["a"] * p["b"] * jnp.cos(q[0]),
        params={"a": 2.0, "b": 4.905},
    )
    q, qd = _observe(product, jnp.array([1.0]), jnp.array([0.0]), TS)
    with pytest.warns(
        UserWarning, match=r"combination of params along [-+]0.\d+·a [-+]0.\d+·b"
    ):
        data = jl.Observations(TS, q, qd, q0=q[0], qd0=qd[0])
        result = jl.fit(product, data, params={"a": 1.5, "b": 5.0})
    assert np.isinf(float(result.stderr["a"])) and np.isinf(float(result.stderr["b"]))
    (direction,) = result.unidentifiable  # along (a, −b): a·b unchanged
    a, b = float(result.params["a"]), float(result.params["b"])
    np.testing.assert_allclose(direction["a"] / direction["b"], -a / b, rtol=1e-3)
    # Stopped at its step limit: said so (it was silent, with usual errors).
    with pytest.warns(UserWarning, match=r"LevenbergMarquardt stopped before meeting"):
        assert not _length_fit(clean, steps=3).converged
    # Under a transformation: named, not a TracerArrayConversionError.
    with pytest.raises(ValueError, match=r"jl\.fit runs its own compiled solver loop"):
        jax.jit(
            lambda length: jl.fit(PENDULUM, clean, params={**GUESS, "l": length}).loss
        )(1.3)


def test_the_data_spread_is_that_of_the_fitted_samples():
    from jaxlagrange._fit._quality import data_scale

    weights = jnp.ones(TS.shape).at[5].set(0.0)
    outlier = jl.Observations(TS, Q.at[5].set(100.0), QD, weights=weights)
    kept = np.asarray(Q)[np.arange(TS.shape[0]) != 5]
    expected = np.sqrt(np.mean((kept - kept.mean(axis=0)) ** 2))
    assert data_scale([outlier]) == pytest.approx(expected, rel=1e-12)


def test_velocities_with_their_own_noise_scale():
    # q with noise 0.01, q̇ with 0.1 (finite differences, say): one σ for both
    # read χ²_red ≈ 50 and gave errors 8× too small; with sigma_qd both are right.
    rng = np.random.default_rng(3)
    q = Q + 0.01 * rng.normal(size=Q.shape)
    qd = QD + 0.1 * rng.normal(size=QD.shape)

    def fitted(**sigmas):
        data = jl.Observations(TS, q, qd, q0=Q[0], qd0=QD[0], **sigmas)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the one-σ fit's χ² warning
            return _length_fit(data)

    one, own = fitted(sigma=0.01), fitted(sigma=0.01, sigma_qd=0.1)
    assert one.chi2_red > 20 and 0.6 < own.chi2_red < 1.5
    assert float(own.stderr["l"]) > 3 * float(one.stderr["l"])
    assert abs(float(own.params["l"]) - 2.0) < 4 * float(own.stderr["l"])
    with pytest.raises(ValueError, match=r"`sigma_qd` is the noise of the observed"):
        jl.Observations(TS, Q, sigma_qd=0.1)
    with pytest.raises(ValueError, match=r"`sigma_qd` must be > 0, got"):
        jl.Observations(TS, Q, QD, sigma=0.01, sigma_qd=-1.0)


def _noisy_swing(seed):
    """3 s of a pendulum (l = 2) released at 1 rad, q and q̇ with noise 0.01."""
    system, q0, qd0 = jl.systems.pendulum({"l": 2.0}, q0=[1.0])
    ts = jnp.linspace(0.0, 3.0, 31)
    traj = jl.simulate(system, q0, qd0, t1=3.0, saveat=ts, rtol=1e-11, atol=1e-11)
    noise = np.random.default_rng(seed).normal(0.0, 0.01, (2, *traj.q.shape))
    return system, ts, traj.q + noise[0], traj.qd + noise[1]


def test_the_default_fit_of_noisy_data_is_honest():
    # The initial state read off the first (noisy) sample was held by default:
    # its noise biased l by up to 7.5 standard errors (seed 3), with χ²_red ≈ 1.
    # Fitted by default, every seed lands within 3 of them.
    held = []
    for seed in range(4):
        system, ts, q, qd = _noisy_swing(seed)
        data = jl.Observations(ts, q, qd, sigma=0.01)
        guess = {**system.params, "l": 1.6}
        for fit_initial_state, out in ((None, None), (False, held)):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the held fits' poor-fit warning
                result = jl.fit(
                    system,
                    data,
                    params=guess,
                    trainable={"l"},
                    positive={"l"},
                    fit_initial_state=fit_initial_state,
                )
            z = (float(result.params["l"]) - 2.0) / float(result.stderr["l"])
            if out is None:
                assert abs(z) < 3, (seed, z)
                assert abs(float(result.q0[0]) - 1.0) < 0.02  # fitted, not q[0]
            else:
                out.append(z)
    assert max(abs(z) for z in held) > 5, held  # the held start's bias, shown


def test_a_system_without_params_fits_its_initial_state():
    # The initial state is then all there is to fit (it crashed in eqx.tree_at).
    oscillator = jl.LagrangianSystem(
        lambda q, qd, t: 0.5 * qd[0] ** 2 - 0.5 * q[0] ** 2
    )
    ts = jnp.linspace(0.0, 1.0, 11)
    data = jl.Observations(ts, q=(0.7 * jnp.cos(ts) + 0.2 * jnp.sin(ts))[:, None])
    result = jl.fit(oscillator, data)
    assert result.converged and result.system.params is None
    np.testing.assert_allclose([result.q0[0], result.qd0[0]], [0.7, 0.2], atol=1e-7)
