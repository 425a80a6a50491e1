"""The fused kernel's GPU program, checked on a machine without a GPU.

`simulate_batch(..., backend="kernel")` picks its kernel by the platform the
program is lowered for: Pallas's interpret mode on the CPU (the results that
tests/test_kernel.py checks against the vmap backend), Triton on a GPU. Lowering
the public call for CUDA here runs Pallas's Triton lowering on every primitive of
the kernel (block shapes, dtypes, each lane operation the GPU compiler will see)
for every ready system the kernel supports, in float64 and float32. What only a
GPU shows: that Triton and PTX compile the kernel, and how fast it runs
(`benchmarks/gpu_check.sh`).

Equinox's runtime checks inside the program (of the times and tolerances, of a
constrained start's distance from its constraints) are host callbacks under its
default error mode, and JAX lowers a host callback only for the platform of the
machine it runs on: lowering the program for CUDA here fails on them
(`test_checks_are_callbacks_by_default`), while a GPU machine compiles them. So
the lowerings are made with `EQX_ON_ERROR=nan`, which traces those checks as
values, and `throw=False` (each member's result code carries its failure): what
remains is the program itself, which must hold the Triton kernel and no host
callback.

The lowerings run in one fresh process: this one instruments the package for
type checks (conftest.py), which makes tracing the lane evaluator 3-4× slower.
"""

import functools
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import jaxlagrange as jl


# The ready systems the kernel refuses, and why (any other must lower).
UNSUPPORTED = {
    "bouncing_ball": "unilateral constraints",
    "mass_on_sphere": "unilateral constraints",
}
SUPPORTED = [name for name in jl.systems.names() if name not in UNSUPPORTED]
# Slow to trace (about 10 s in each dtype): the default set lowers the others,
# which cover the same kinds (rigid bodies, nonholonomic constraints).
SLOW = {"whipple_bicycle"}
DTYPES = ("float64", "float32")
TRITON = "__gpu$xla.gpu.triton"


def _batch(name, dtype):
    """The public call on two members (one block of the default 128 lanes)."""
    ready = jl.systems.make(name)
    q0 = jnp.asarray(ready.q0, dtype)
    qd0 = jnp.asarray(ready.qd0, dtype)

    def final(q0s):
        traj = jl.simulate_batch(
            ready.system, q0s, qd0, t1=1.0, backend="kernel", throw=False
        )
        return traj.q, traj.result

    return final, jnp.stack([q0, q0])


def _custom_calls(text):
    """The lowered program's custom calls: (target, its line without the kernel's
    serialized IR)."""
    calls = re.findall(r"stablehlo\.custom_call @([^(\s]+)\((.*)", text)
    return [(t, re.sub(r'ir = "[^"]*"', "ir = ...", line)) for t, line in calls]


_LOWER = """
import json, sys
import jax
jax.config.update("jax_enable_x64", True)
jax.config.update("jax_platform_name", "cpu")
from test_kernel_lowering import _batch, _custom_calls

out = {}
for name, dtype in json.loads(sys.argv[1]):
    fn, q0s = _batch(name, dtype)
    traced = jax.jit(fn).trace(q0s)  # once: lowered for CUDA, and for the CPU
    cuda = traced.lower(lowering_platforms=("cuda",)).as_text()
    cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
    out[name + "/" + dtype] = {
        "cuda": _custom_calls(cuda),
        "cpu": _custom_calls(cpu),
    }
print(json.dumps(out))
"""


@functools.cache
def _lowered(cases):
    here = Path(__file__).resolve().parent
    env = dict(os.environ, EQX_ON_ERROR="nan")
    paths = [str(here.parent), str(here), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(paths)
    done = subprocess.run(
        [sys.executable, "-c", _LOWER, json.dumps(cases)],
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _lowering(name, dtype):
    if name in SLOW:
        return _lowered(((name, dtype),))[f"{name}/{dtype}"]
    cases = tuple((s, d) for s in SUPPORTED if s not in SLOW for d in DTYPES)
    return _lowered(cases)[f"{name}/{dtype}"]


def _cases():
    for name in SUPPORTED:
        for dtype in DTYPES:
            marks = [pytest.mark.slow] if name in SLOW else []
            if (name, dtype) == ("whipple_bicycle", "float32"):
                # Its float64 params promote the float32 state (on the vmap path
                # too): a dtype error while tracing, before any lowering.
                marks.append(pytest.mark.xfail(strict=True, raises=AssertionError))
            yield pytest.param(name, dtype, marks=marks)


@pytest.mark.parametrize("name, dtype", list(_cases()))
def test_cuda_lowering_holds_the_triton_kernel(name, dtype):
    lowering = _lowering(name, dtype)
    targets = {target for target, _ in lowering["cuda"]}
    assert TRITON in targets, targets
    assert not any("callback" in target for target in targets), targets
    (kernel,) = [line for target, line in lowering["cuda"] if target == TRITON]
    assert 'name = "jaxlagrange_tsit5"' in kernel
    assert "num_warps = 4" in kernel
    # It computes in the batch's dtype (its result codes and step counts: int32).
    element = {"float64": "f64", "float32": "f32"}[dtype]
    results = re.search(r"-> \((.*)\)$", kernel).group(1)
    assert re.findall(r"x(\w+)>", results) == [element, element, "i32"], results
    # The same trace lowered for the CPU: the kernel in interpret mode, emulated
    # in HLO (the other custom calls are the program's outside the kernel, such
    # as LAPACK's for a rigid body's multipliers).
    assert not any("triton" in line for _, line in lowering["cpu"]), lowering["cpu"]


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_the_others_are_refused(name):
    fn, q0s = _batch(name, jnp.float64)
    with pytest.raises(
        ValueError,
        match=rf"backend='kernel' does not support {UNSUPPORTED[name]}.*"
        "backend='vmap' supports it",
    ):
        fn(q0s)


def test_checks_are_callbacks_by_default():
    # Why the lowerings above trace equinox's checks as values: under its
    # default error mode they are host callbacks, lowered for this machine only.
    fn, q0s = _batch("double_pendulum", jnp.float64)
    traced = jax.jit(fn).trace(q0s)
    cpu = traced.lower(lowering_platforms=("cpu",)).as_text()
    assert any("callback" in target for target, _ in _custom_calls(cpu))
    with pytest.raises(ValueError, match="different from the lowering platform cuda"):
        traced.lower(lowering_platforms=("cuda",))
