#!/usr/bin/env bash
# Session 12, run F: the flat narrow-column reductions on the GPU (tests, bench rows with torch.compile peers), and
# the var candidates for narrow rows / columns (bench/var_narrow_probe.py).
#   bash bench/session12_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings tests/reduction -x --tb=short -rf > "$out/tests_reduction.txt" 2>&1; f "$out/tests_reduction.txt" | tail -3
timeout 200 python bench/var_narrow_probe.py "$out/var_probe.json" > "$out/var_probe.txt" 2>&1; echo "var probe rc $?"
timeout 200 python -m baracuda.cli bench --op sum,mean,amax,var --workload 'first-\[1048576,16\]|last-\[1048576,16\]|first-\[16384,4096\]-bf16' --time-budget 180 --json "$out/bench_reduce.json" > "$out/bench_reduce.txt" 2>&1; grep -v "^\[" "$out/bench_reduce.txt" | grep -E "triton|compile" | cut -c1-170 | tail -40
