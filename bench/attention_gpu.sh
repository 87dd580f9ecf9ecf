#!/usr/bin/env bash
# The attention family on the GPU machine, in one device call (~8 min): the wheels the image lacks (cuDNN's
# frontend, expecttest), the attention tests on the GPU, the SDPA benchmark (ours / cuDNN / torch SDPA / compile)
# and the decode benchmark.   bash bench/attention_gpu.sh OUTDIR [TEST_SECONDS]
set -u
cd "$(dirname "$0")/.."
out=${1:?output directory}; tsec=${2:-240}
mkdir -p "$out"
python -m pip install --no-deps -q .whl/*.whl > "$out/pip.txt" 2>&1
export PYTHONPATH="$PWD/src"
unset TRITON_INTERPRET
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; git log -1 --oneline 2>/dev/null
  python -c "import torch, triton; print(torch.__version__, triton.__version__)"
  python -c "import cudnn; print('cudnn frontend', cudnn.__version__, 'backend', cudnn.backend_version())"; } \
  > "$out/device.txt" 2>&1
timeout "$tsec" python -m pytest -q -p no:warnings -n 12 --maxfail=200 tests/attention > "$out/gpu_tests_attention.txt" 2>&1
tail -3 "$out/gpu_tests_attention.txt"
[ -f bench/attention_bench.py ] && timeout 200 python bench/attention_bench.py "$out/attention_bench.json" \
  > "$out/attention_bench.txt" 2>&1; tail -30 "$out/attention_bench.txt" 2>/dev/null
timeout 90 python bench/decode_bench.py "$out/decode_bench.json" > "$out/decode_bench.txt" 2>&1
tail -15 "$out/decode_bench.txt"
