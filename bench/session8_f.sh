#!/usr/bin/env bash
# Session 8, run F: top-k / top-p sampling's four-way threshold search and the drop-ins' Python-number operand path,
# before (.whl/base/src, 2d19204) and after, same machine; the GPU tests of the random family and the call path.
#   bash bench/session8_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for v in base new; do
  src=$PWD/src; [ $v = base ] && src=$PWD/.whl/base/src
  PYTHONPATH=$src timeout 60 python -m baracuda.cli bench --no-compile --op top_k_top_p_sampling --max-seconds 10 \
    --json "$out/bench_sampling_$v.json" > "$out/bench_sampling_$v.txt" 2>&1
  grep "top_k_top_p" "$out/bench_sampling_$v.txt" | grep -v "^\[" | cut -c1-200
  (cd bench && PYTHONPATH=$src timeout 90 python scalar_host.py "$out/scalar_host_$v.json" 2>&1 | f | tail -14)
done
timeout 240 python -m pytest -q -p no:warnings -n 14 --maxfail=60 -v --tb=line -rf tests/random \
  tests/torch/test_call_path.py tests/elementwise > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -12 | cut -c1-300
