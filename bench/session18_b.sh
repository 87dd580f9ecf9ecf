#!/usr/bin/env bash
# Session 18, run B: the normal fill with _log_unit and the fma forms against session 17's tree (ab_old/src) in
# alternating processes; topk k = 1024's chunks and pass-2 lanes on the paired k-th search; the random and sort GPU
# tests.
#   bash bench/session18_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
ab 'timeout 90 python bench/normal_fill.py "$out/normal_${tree}_$rep.json" 2>&1 | f | grep -v "^{\"moments" | cut -c1-160'
for rep in 1 2; do
  echo "== topk new $rep"
  timeout 200 python bench/sort_net_ab.py "$out/topk_new_$rep.json" topk-shapes 2>&1 | f | python bench/sort_rows_brief.py
done
timeout 280 python -m pytest -q -p no:warnings -n 8 tests/random tests/sort --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -4
