#!/usr/bin/env bash
# On a machine with a CUDA GPU, from the repository root: the CUDA-only tests (tests/gpu,
# pytest -m cuda), adapt's time before its first epoch (benchmarks/adapt_startup.py), then the
# CPU/GPU benchmark, each time-boxed; their output goes to DIR (default: the current directory)
# as gpu_tests.txt, adapt_startup.txt and gpu_benchmark.txt.
#
#     bash benchmarks/gpu_checks.sh DIR           # about 2 + 1 + 5 minutes on one GPU, 9.8 at most
#     bash benchmarks/gpu_checks.sh DIR --smoke   # the same steps at the benchmarks' smoke size
set -u
out="${1:-.}"
smoke=()
[ "${2:-}" = "--smoke" ] && smoke=(--smoke)
python="${PYTHON:-python3}"
mkdir -p "$out"
timeout 200 "$python" -m pytest -m cuda -rA -q -p no:cacheprovider tests/gpu 2>&1 \
    | tee "$out/gpu_tests.txt"
timeout 70 "$python" benchmarks/adapt_startup.py --cuda "${smoke[@]}" 2>&1 \
    | tee "$out/adapt_startup.txt"
timeout 320 "$python" benchmarks/gpu.py --out "$out/gpu_benchmark.txt" "${smoke[@]}" 2>&1 \
    | tee "$out/gpu_benchmark.log"
