#!/usr/bin/env bash
# Session 12, run G: the sort family's new paths (LSD radix sort of long rows, topk's threshold filter) and the flat /
# wide var paths on the GPU: tests, then A/B against the old paths and torch in one process, then the var bench rows.
#   bash bench/session12_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 170 python -m pytest -q -p no:warnings tests/sort tests/reduction_stats -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
timeout 150 python bench/sort_ab.py "$out/sort_ab.json" > "$out/sort_ab.txt" 2>&1; echo "sort_ab rc $?"; cut -c1-230 "$out/sort_ab.txt" | grep -v "^\[" | tail -30
timeout 150 python bench/topk_filter_probe.py "$out/topk_filter_probe.json" > "$out/topk_filter_probe.txt" 2>&1; echo "topk probe rc $?"; tail -c 1500 "$out/topk_filter_probe.txt"
timeout 120 python -m baracuda.cli bench --op var --workload 'first-\[1048576,16\]|last-\[1048576,16\]|first-\[16384,4096\]-bf16|last-\[16384,4096\]-bf16' --time-budget 100 --json "$out/bench_var.json" > "$out/bench_var.txt" 2>&1; grep -v "^\[" "$out/bench_var.txt" | grep -E "triton|compile" | cut -c1-170
