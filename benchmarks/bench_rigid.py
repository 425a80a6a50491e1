"""The free rigid body against MuJoCo and hand-written equations, float64 on CPU.

    python benchmarks/bench_rigid.py [--rounds 3]

The problem: a torque-free body with principal moments (1, 2, 3) spun at
ω = (0.01, 2, 0) rad/s, nearly about its intermediate axis, turns over and over
(the Dzhanibekov flip). ω₂ changes sign every half period T/2, with the period
T = 4 K(k) / s of the Jacobi elliptic solution in closed form. Each method runs
to t = 100 s (14 flips); its period is read from the first and last sign change
of ω₂ and compared with T. The accuracy asked for is |ΔT| ≤ 5e-8 s.

Methods (each timed in process CPU time, which a shared machine disturbs less
than wall time, as the median of `--rounds` calls of a compiled program, with
its compile time beside):

- `jl.simulate` of `jl.systems.free_rigid_body` (a quaternion and the norm
  term, which keeps |p| = 1 without a constraint), with Tsit5 (the default) and with
  Dopri8, each at the loosest rtol = atol of 1e-8, 3e-9, 1e-9, ... that meets
  the accuracy;
- the same problem hand-written for diffrax (Tsit5, same controller):
  the quaternion q̈ of the constrained body, p̈ = −¼|ω|² p + ½ p ⊗ (0, ω̇), and
  Euler's equations I ω̇ = (I ω) × ω with ṗ = ½ p ⊗ (0, ω);
- MuJoCo (`mujoco`, the `benchmark` extra): a body on a ball joint, its RK4
  integrator at the largest step 100/N (N = 1000 · 1.2^k) that meets the
  accuracy, run by `mujoco.rollout` (C++, no Python per step).

The period error is read from ω at t1 (no interpolation between saves enters
it): the time shift τ that best maps the reference ω (Euler's equations by
SciPy's DOP853 at rtol 1e-13) onto it, spread over the t1 / T periods run,
|ΔT| = |τ| T / t1.

First, the q̈ alone: the vector field of `simulate` for the free body and
the heavy top against hand-written ones (the heavy top's in closed form, two
transcendentals), per call and by the fusions and expensive ops of its HLO.

The machine may be shared: `uptime` is printed first; compare the ratios.
"""

import argparse
import os
import sys
import time


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402
from scipy.special import ellipk  # noqa: E402


jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")

from _jitted import median_cpu_time  # noqa: E402

import jaxlagrange as jl  # noqa: E402


MOMENTS = np.array([1.0, 2.0, 3.0])
OMEGA0 = np.array([0.01, 2.0, 0.0])
T1 = 100.0
ACCURACY = 5e-8  # s, on the flip period
P0 = np.array([1.0, 0.0, 0.0, 0.0])
PD0 = np.concatenate([[0.0], 0.5 * OMEGA0])  # ṗ = ½ p ⊗ (0, ω) at the identity


def flip_period() -> float:
    """4 K(k)/s: the period of ω₂ (for M² < 2 E I₂)."""
    i1, i2, i3 = MOMENTS
    m2 = np.sum((MOMENTS * OMEGA0) ** 2)
    e2 = np.sum(MOMENTS * OMEGA0**2)
    s = np.sqrt((i2 - i1) * (e2 * i3 - m2) / (i1 * i2 * i3))
    k2 = (i3 - i2) * (m2 - e2 * i1) / ((i2 - i1) * (e2 * i3 - m2))
    return 4 * ellipk(k2) / s


def _euler(t, w):
    return np.cross(MOMENTS * w, w) / MOMENTS


def reference_omega():
    """ω(t1) and ω̇(t1) by Euler's equations (SciPy DOP853 at rtol 1e-13)."""
    done = solve_ivp(_euler, (0.0, T1), OMEGA0, method="DOP853", rtol=1e-13,
                     atol=1e-14)  # fmt: skip
    omega = done.y[:, -1]
    return omega, _euler(T1, omega)


def period_error(omega, reference) -> float:
    """The error of the flip period that puts ω(t1) where it is: the time shift τ
    that best maps the reference onto it, (ω − ω_ref)·ω̇_ref / |ω̇_ref|², over
    the t1 / T periods run."""
    omega_ref, rate = reference
    shift = np.dot(np.asarray(omega) - omega_ref, rate) / np.dot(rate, rate)
    return abs(shift) * flip_period() / T1


def compiled(fn):
    start = time.process_time()
    out = jax.jit(fn).lower().compile()
    return out, time.process_time() - start


# --- jaxlagrange -------------------------------------------------------------


def jl_run(rtol, solver=None):
    body, p0, pd0 = jl.systems.free_rigid_body(
        dict(zip(("I1", "I2", "I3"), MOMENTS.tolist(), strict=True))
    )

    def run():
        traj = jl.simulate(body, p0, pd0, t1=T1, rtol=rtol, atol=rtol, solver=solver,
                           max_steps=1_000_000)  # fmt: skip
        omega = jl.rigid.quaternion_angular_velocity(traj.q[-1], traj.qd[-1])
        return omega, traj.stats["num_steps"]

    return run


# --- hand-written, diffrax -------------------------------------------------


def _qmul(a, b):
    w1, v1, w2, v2 = a[0], a[1:], b[0], b[1:]
    scalar = jnp.stack([w1 * w2 - v1 @ v2])
    return jnp.concatenate([scalar, w1 * v2 + w2 * v1 + jnp.cross(v1, v2)])


def _pure(v):
    return jnp.concatenate([jnp.zeros(1, v.dtype), v])


def quaternion_qdd(t, y, args):
    """y = [p; ṗ]: p̈ of the constrained body (|p| = 1, p·ṗ = 0)."""
    inertia = jnp.asarray(MOMENTS)
    p, pd = y[:4], y[4:]
    w, v, wd, vd = p[0], p[1:], pd[0], pd[1:]
    omega = 2 * (w * vd - wd * v - jnp.cross(v, vd))
    omega_dot = jnp.cross(inertia * omega, omega) / inertia
    pdd = -0.25 * (omega @ omega) * p + 0.5 * _qmul(p, _pure(omega_dot))
    return jnp.concatenate([pd, pdd])


def euler_equations(t, y, args):
    """y = [p; ω]: ṗ = ½ p ⊗ (0, ω), I ω̇ = (I ω) × ω."""
    inertia = jnp.asarray(MOMENTS)
    p, omega = y[:4], y[4:]
    pd = 0.5 * _qmul(p, _pure(omega))
    return jnp.concatenate([pd, jnp.cross(inertia * omega, omega) / inertia])


def hand_run(field, rtol):
    rate0 = PD0 if field is quaternion_qdd else OMEGA0
    y0 = jnp.asarray(np.concatenate([P0, rate0]))

    def run():
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(field), diffrax.Tsit5(), 0.0, T1, None, y0,
            stepsize_controller=diffrax.PIDController(rtol=rtol, atol=rtol),
            max_steps=1_000_000,
        )  # fmt: skip
        y = sol.ys[-1]
        if field is quaternion_qdd:
            omega = jl.rigid.quaternion_angular_velocity(y[:4], y[4:])
        else:
            omega = y[4:]
        return omega, sol.stats["num_steps"]

    return run


# --- MuJoCo ----------------------------------------------------------------


def mujoco_run(steps):
    import mujoco
    import mujoco.rollout

    xml = f"""
    <mujoco>
      <option timestep="{T1 / steps!r}" integrator="RK4" gravity="0 0 0"/>
      <worldbody><body>
        <joint type="ball" damping="0" armature="0"/>
        <inertial pos="0 0 0" mass="1" diaginertia="{" ".join(map(str, MOMENTS))}"/>
      </body></worldbody>
    </mujoco>"""
    model = mujoco.MjModel.from_xml_string(xml)
    data = mujoco.MjData(model)
    data.qpos[:] = P0
    data.qvel[:] = OMEGA0  # a ball joint's qvel: ω in the body's frame
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.empty(mujoco.mj_stateSize(model, spec))
    mujoco.mj_getState(model, data, state0, spec)
    out = np.empty((1, steps, state0.shape[0]))

    def run():
        mujoco.rollout.rollout(model, data, state0[None], nstep=steps, state=out)
        # FULLPHYSICS: time, qpos (4), qvel (3), ...
        return out[0, -1, 5:8]

    return run


def rigid_table(rounds):
    reference = reference_omega()
    print(f"flip period (closed form) T = {flip_period():.12f} s; asked |ΔT| ≤ "
          f"{ACCURACY:g} s over t1 = {T1:g} s")  # fmt: skip
    rows = {}

    def report(name, run_s, compile_s, error, steps, setting):
        rows[name] = run_s
        compile_text = "" if compile_s is None else f", compile {compile_s:5.2f} s"
        print(f"  {name:32s} {setting:11s} {steps:6d} steps  |ΔT| {error:7.1e} s  "
              f"run {run_s * 1e3:7.2f} ms{compile_text}")  # fmt: skip

    for label, make in (
        ("jl.simulate free_rigid_body", jl_run),
        ("jl.simulate, Dopri8", lambda r: jl_run(r, diffrax.Dopri8())),
        ("hand-written quaternion q̈", lambda r: hand_run(quaternion_qdd, r)),
        ("hand-written Euler's equations", lambda r: hand_run(euler_equations, r)),
    ):
        for rtol in (1e-8, 3e-9, 1e-9, 3e-10, 1e-10, 3e-11, 1e-11, 3e-12, 1e-12,
                     3e-13, 1e-13):  # fmt: skip
            program, compile_s = compiled(make(rtol))
            omega, steps = program()
            error = period_error(omega, reference)
            if error <= ACCURACY or rtol == 1e-13:
                run_s = median_cpu_time(program, rounds)
                report(label, run_s, compile_s, error, int(steps), f"rtol {rtol:g}")
                break
    try:
        import mujoco  # noqa: F401
    except ImportError:
        print("  MuJoCo: not installed (pip install 'jaxlagrange[benchmark]')")
        return rows
    for steps in np.unique(np.round(1000 * 1.2 ** np.arange(20)).astype(int)):
        run = mujoco_run(int(steps))
        error = period_error(run(), reference)
        if error <= ACCURACY:
            run_s = median_cpu_time(run, rounds)
            report("MuJoCo RK4 (rollout)", run_s, None, error, int(steps),
                   f"dt {T1 / steps:.2g}")  # fmt: skip
            break
    mj = rows.get("MuJoCo RK4 (rollout)")
    if mj:
        for name, run_s in rows.items():
            print(f"  {name:32s} {run_s / mj:5.2f}× MuJoCo's run time")
    return rows


# --- the q̈ alone ------------------------------------------------------------


TOP = {"m": 1.0, "l": 0.5, "I1": 0.35, "I3": 0.2, "g": 9.81}


def top_field(t, y, args):
    """The heavy top's q̈ by hand (ZXZ; φ and ψ cyclic): two transcendentals."""
    i1, i3, mgl = TOP["I1"], TOP["I3"], TOP["m"] * TOP["g"] * TOP["l"]
    _, theta, _, phi_d, theta_d, psi_d = y
    s, c = jnp.sin(theta), jnp.cos(theta)
    spin = psi_d + phi_d * c  # ω₃
    # p_φ = I₁ φ̇ s² + I₃ ω₃ c and p_ψ = I₃ ω₃ are conserved: solve for φ̈, ψ̈.
    theta_dd = (i1 * phi_d**2 * s * c - i3 * spin * phi_d * s + mgl * s) / i1
    phi_dd = (i3 * spin * theta_d - 2 * i1 * phi_d * c * theta_d) / (i1 * s)
    psi_dd = phi_d * s * theta_d - phi_dd * c
    return jnp.stack([phi_d, theta_d, psi_d, phi_dd, theta_dd, psi_dd])


def _hlo_counts(fn, y):
    text = jax.jit(fn).lower(jnp.zeros(()), y, None).compile().as_text()
    entry = text[text.index("ENTRY") :]
    ops = (" sine(", " cosine(", " divide(", " sqrt(", " rsqrt(", " atan2(")
    return entry.count(" fusion("), sum(text.count(op) for op in ops)


def _per_call(fn, y, calls=20_000, rounds=3):
    def run(y):
        return jax.lax.fori_loop(
            0, calls, lambda i, y: y + 1e-12 * fn(jnp.zeros(()), y, None), y
        )

    run = jax.jit(run)
    jax.block_until_ready(run(y))
    return median_cpu_time(lambda: run(y), rounds) / calls


def qdd_table(rounds):
    """One state's q̈ (the vector field of `simulate`) against hand-written code."""
    from jaxlagrange._projection import VectorFieldArgs
    from jaxlagrange._segment import _vector_field

    body, p0, pd0 = jl.systems.free_rigid_body()
    top, q0, qd0 = jl.systems.heavy_top()
    print("\nq̈ of one state (process CPU time per call, in a loop of 20 000):")

    def generated(system):
        return lambda t, y, a: _vector_field(t, y, VectorFieldArgs(system))

    for name, fn, y in (
        ("free body, jl (quaternion and norm term)", generated(body),
         jnp.concatenate([p0, pd0])),
        ("free body, hand-written quaternion q̈", quaternion_qdd,
         jnp.concatenate([p0, pd0])),
        ("free body, hand-written Euler's equations", euler_equations,
         jnp.asarray(np.concatenate([P0, OMEGA0]))),
        ("heavy top, jl", generated(top), jnp.concatenate([q0, qd0])),
        ("heavy top, hand-written", top_field, jnp.concatenate([q0, qd0])),
    ):  # fmt: skip
        fusions, expensive = _hlo_counts(fn, y)
        ns = _per_call(fn, y, rounds=rounds) * 1e9
        print(f"  {name:42s} {ns:6.0f} ns  {fusions:3d} fusions, "
              f"{expensive:3d} divides/roots/transcendentals in the HLO")  # fmt: skip


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(f"uptime: {os.popen('uptime').read().strip()}")
    qdd_table(args.rounds)
    rigid_table(args.rounds)


if __name__ == "__main__":
    main()
