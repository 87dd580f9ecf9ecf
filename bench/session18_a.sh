#!/usr/bin/env bash
# Session 18, run A: the normal fill with the widening-multiply Philox and topk with the paired k-th search, each
# against session 17's tree (ab_old/src: `git archive 16cb234 src`, carried) in alternating processes, torch in
# every process; the random and topk GPU tests.
#   bash bench/session18_a.sh OUTDIR      (as run: the loops ab() now writes were spelled out)
source "$(dirname "$0")/device_env.sh" "$@"
ab 'timeout 90 python bench/normal_fill.py "$out/normal_${tree}_$rep.json" 2>&1 | f | grep float32 | cut -c1-160'
ab 'echo "== topk $tree $rep"; timeout 150 python bench/sort_net_ab.py "$out/topk_${tree}_$rep.json" topk 2>&1 | f | python bench/sort_rows_brief.py'
timeout 240 python -m pytest -q -p no:warnings -n 8 tests/random tests/sort/test_sort.py -k "topk or random or normal or dropout or rand" --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -4
