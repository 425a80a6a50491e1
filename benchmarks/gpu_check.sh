#!/usr/bin/env bash
# The GPU figures of issues 26 and 27, in one call on a lent GPU machine:
#
#     bash benchmarks/gpu_check.sh [OUT]     # at most 10 minutes (90 + 330 + 100 + 70 s)
#
# Nothing is installed (the machine has JAX with Pallas, diffrax, equinox,
# lineax and optimistix; jaxlagrange runs from the working tree). Each part
# has its own time limit and writes its output to OUT (default: $OUT or
# ./gpu_check), so a part that runs over still leaves the others'.
#
# 0. issue 26: `kernel_check.py`, the kernel compiled for the GPU against the
#    vmap backend (the tests' checks, which run in interpret mode on the CPU);
# 1. issue 26: `bench_kernel.py --gpu`, the kernel table (float64, float32,
#    time against B, bigger states);
# 2. issue 27: `bench_cli.py` on the GPU machine as it is (run, fit: `--device
#    auto` computes them on the CPU and starts only JAX's CPU backend), then
#    with JAX_PLATFORMS=cpu, the "no slower than on its CPU" reference.
# (The tests run on the CPU by design, conftest.py: they are not rerun here.)
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu_check}}"
mkdir -p "$out"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
{
    date
    nvidia-smi -L || true
    python -c "import jax; print(jax.__version__, jax.devices())"
} > "$out/machine.txt" 2>&1
timeout 90 python benchmarks/kernel_check.py > "$out/kernel_check.txt" 2>&1
echo "kernel_check: exit $?" >> "$out/machine.txt"
timeout 330 python benchmarks/bench_kernel.py --gpu --repeats 3 \
    > "$out/bench_kernel_gpu.txt" 2>&1
echo "bench_kernel --gpu: exit $?" >> "$out/machine.txt"
# The figures (and so `fit`, which draws them) need matplotlib.
cases="run run_plots fit"
python -c "import matplotlib, PIL" 2>/dev/null || cases="run"
timeout 100 python benchmarks/bench_cli.py --repeats 2 --cases $cases \
    > "$out/bench_cli_gpu_machine.txt" 2>&1
echo "bench_cli: exit $?" >> "$out/machine.txt"
JAX_PLATFORMS=cpu timeout 70 python benchmarks/bench_cli.py --repeats 2 --cases $cases \
    > "$out/bench_cli_jax_platforms_cpu.txt" 2>&1
echo "bench_cli, JAX_PLATFORMS=cpu: exit $?" >> "$out/machine.txt"
cat "$out"/*.txt
