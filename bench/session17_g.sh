#!/usr/bin/env bash
# Session 17, run G: 16-bit float order keys from the bits alone (no f32 conversion and compares): the bf16 sort and
# topk rows (default paths, torch in the same process); the sort family's GPU tests.
#   bash bench/session17_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/sort_net_ab.py "$out/sort_half.json" half 2>&1 | f | python bench/sort_rows_brief.py
rm -f "$out/sort_half.jsonl"
timeout 240 python -m pytest -q -p no:warnings -n 8 tests/sort --tb=short -rf > "$out/tests_sort.txt" 2>&1; f "$out/tests_sort.txt" | tail -4
