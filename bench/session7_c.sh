#!/usr/bin/env bash
# Session 7, run C: FFT GPU tests and the rfft2 rows after the halved-c2r gradient; the narrow first-dim reduction
# sweep (CUDA-graph timed); the demo block and the fused linear CE memory row.   bash bench/session7_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/fft tests/generic -k "fft" \
  > "$out/gpu_tests_fft.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_fft.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_fft.txt" | cut -c1-230 | sort | uniq | head
timeout 100 python -m baracuda.cli bench --op rfft2 --time-budget 80 --json "$out/bench_rfft2.json" \
  > "$out/bench_rfft2.txt" 2>&1
f "$out/bench_rfft2.txt" | grep -E " fw | bw " | cut -c1-200
timeout 150 python bench/reduce_sweep.py "$out/reduce_sweep.json" > "$out/reduce_sweep.txt" 2>&1
f "$out/reduce_sweep.txt" | python -c "
import sys, json
for l in sys.stdin:
    if l.startswith('{'):
        r = json.loads(l); print(r['shape'], r['dtype'][6:], r['op'], r['impl'], r.get('force', ''), round(r['us'], 1), r.get('route', ''))"
timeout 90 python -m baracuda.cli demo > "$out/demo.txt" 2>&1; echo "demo: exit $?"; tail -n 12 "$out/demo.txt"
timeout 120 python bench/lce_memory.py --json "$out/lce.json" > "$out/lce.txt" 2>&1; f "$out/lce.txt" | tail -12
