#!/usr/bin/env bash
# Session 17, run C: the sort network's int32 carriers for keys of <= 16 bits against the int64 network (sort and
# topk rows, outputs compared bit for bit, torch in the same process); the sort family's GPU tests.  One tarball
# back (the device returns few files).
#   bash bench/session17_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 240 python bench/sort_net_ab.py "$out/sort_fc.json" fc 2>&1 | f | cut -c1-300
timeout 240 python -m pytest -q -p no:warnings -n 8 tests/sort --tb=short -rf > "$out/tests_sort.txt" 2>&1; f "$out/tests_sort.txt" | tail -4
