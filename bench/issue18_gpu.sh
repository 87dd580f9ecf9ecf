#!/usr/bin/env bash
# Issue #18's families on the GPU machine in one device call: their tests on the GPU (Triton kernels and cuDNN against
# torch), the torchvision ResNet steps under bt.mode(), then bench rows (the issue's shapes) against torch eager.
#   bash bench/issue18_gpu.sh OUTDIR [TEST_SECONDS] [RESNET_SECONDS] [BENCH_SECONDS]
set -u
cd "$(dirname "$0")/.."
out=${1:?output directory}; tsec=${2:-200}; rsec=${3:-120}; bsec=${4:-240}
mkdir -p "$out"
python -m pip install --no-deps -q .whl/*.whl > "$out/pip.txt" 2>&1
export PYTHONPATH="$PWD/src"
unset TRITON_INTERPRET
timeout "$tsec" python -m pytest -q -p no:warnings -n 8 --maxfail=60 tests/conv tests/pool tests/image \
  > "$out/gpu_tests_issue18.txt" 2>&1
grep -E "passed|failed|^FAILED|^ERROR" "$out/gpu_tests_issue18.txt" | head -40 | cut -c1-300
timeout "$rsec" python bench/resnet_mode.py "$out/resnet_mode.json" > "$out/resnet_mode.txt" 2>&1
grep -E "^resnet|fell through|routed to" "$out/resnet_mode.txt" | cut -c1-400
timeout "$bsec" python -m baracuda.cli bench --family conv --family pool --family image --no-compile --max-seconds 8 \
  --time-budget $((bsec - 15)) --json "$out/bench_issue18.json" > "$out/bench_issue18.txt" 2>&1
grep -v "^\[" "$out/bench_issue18.txt" | tail -45 | cut -c1-220
