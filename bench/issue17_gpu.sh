#!/usr/bin/env bash
# Issue #17's families on the GPU machine, one device call: their tests on the GPU (the Triton kernels against the
# float64 reference and torch's CUDA kernels), then their bench rows (the issue's table shapes) against torch
# eager.   bash bench/issue17_gpu.sh OUTDIR [TEST_SECONDS] [BENCH_SECONDS] [extra `baracuda bench` args...]
set -u
cd "$(dirname "$0")/.."
out=${1:?output directory}; tsec=${2:-240}; bsec=${3:-200}; shift 3 2>/dev/null || shift $#
mkdir -p "$out"
python -m pip install --no-deps -q .whl/*.whl > "$out/pip.txt" 2>&1
export PYTHONPATH="$PWD/src"
unset TRITON_INTERPRET
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log -1 --oneline 2>/dev/null
  python -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$out/device.txt" 2>&1
dirs=$(ls -d tests/indexing tests/embedding tests/sort tests/random 2>/dev/null)
timeout "$tsec" python -m pytest -q -p no:warnings -n 14 --maxfail=100 $dirs > "$out/gpu_tests_issue17.txt" 2>&1
tail -25 "$out/gpu_tests_issue17.txt" | cut -c1-400
timeout "$bsec" python -m baracuda.cli bench --time-budget $((bsec - 20)) --max-seconds 10 --json "$out/bench_issue17.json" "$@" \
  > "$out/bench_issue17.txt" 2>&1
grep -v "^\[" "$out/bench_issue17.txt" | tail -40 | cut -c1-220
