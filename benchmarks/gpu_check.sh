#!/usr/bin/env bash
# The fused kernel's GPU checks and table (issues 26, 27 and 46), in one call on
# a lent GPU machine:
#
#     bash benchmarks/gpu_check.sh [OUT]     # at most 10 minutes (110 + 300 + 100 + 70 s)
#
# Nothing is installed (the machine has JAX with Pallas, diffrax, equinox,
# lineax and optimistix; jaxlagrange runs from the working tree). Each part
# has its own time limit and writes its output to OUT (default: $OUT or
# ./gpu_check), so a part that runs over still leaves the others'.
#
# 0. `kernel_check.py`, the kernel compiled by Triton against the vmap backend
#    (the tests' checks, which run in interpret mode on the CPU);
# 1. `bench_kernel.py --gpu`, the table: B = 16 384 and 1 048 576, float64 and
#    float32, simulate_batch(backend="kernel") against backend="vmap", vmapped
#    hand-written diffrax and the reference kernel with a hand-written q̈,
#    compile time, run time, steps/s (then time against B and bigger states);
# 2. `bench_cli.py` on the GPU machine as it is (run, fit: `--device auto`
#    computes them on the CPU and starts only JAX's CPU backend), then with
#    JAX_PLATFORMS=cpu, the "no slower than on its CPU" reference.
# (The tests run on the CPU by design, conftest.py: they are not rerun here.)
#
# A dry run on a machine without a GPU (the kernels in interpret mode, tiny
# batches and spans: it catches Python errors, its times mean nothing):
#
#     JAXLAGRANGE_BENCH_TINY=1 PYTHON=.venv/bin/python bash benchmarks/gpu_check.sh /tmp/dry
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu_check}}"
py="${PYTHON:-python}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
    date
    nvidia-smi -L || true
    "$py" -c "import jax; print(jax.__version__, jax.devices())"
} > "$out/machine.txt" 2>&1
timeout 110 "$py" benchmarks/kernel_check.py > "$out/kernel_check.txt" 2>&1
echo "kernel_check: exit $?" >> "$out/machine.txt"
timeout 300 "$py" benchmarks/bench_kernel.py --gpu --repeats 3 \
    > "$out/bench_kernel_gpu.txt" 2>&1
echo "bench_kernel --gpu: exit $?" >> "$out/machine.txt"
# The figures (and so `fit`, which draws them) need matplotlib.
cases="run run_plots fit"
"$py" -c "import matplotlib, PIL" 2>/dev/null || cases="run"
repeats=2
[ "${JAXLAGRANGE_BENCH_TINY:-}" = 1 ] && { cases="run"; repeats=1; }
timeout 100 "$py" benchmarks/bench_cli.py --repeats $repeats --cases $cases \
    > "$out/bench_cli_gpu_machine.txt" 2>&1
echo "bench_cli: exit $?" >> "$out/machine.txt"
JAX_PLATFORMS=cpu timeout 70 "$py" benchmarks/bench_cli.py --repeats $repeats \
    --cases $cases > "$out/bench_cli_jax_platforms_cpu.txt" 2>&1
echo "bench_cli, JAX_PLATFORMS=cpu: exit $?" >> "$out/machine.txt"
cat "$out"/*.txt
