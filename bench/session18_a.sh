#!/usr/bin/env bash
# Session 18, run A: the normal fill with the widening-multiply Philox and topk with the paired k-th search, each
# against session 17's tree (ab_old/src: `git archive 16cb234 src`, carried) in alternating processes, torch in
# every process; the random and topk GPU tests.
#   bash bench/session18_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > "$out/gpu.txt" 2>&1; cat "$out/gpu.txt"
for rep in 1 2; do
  for tree in old new; do
    src=$PWD/src; [ $tree = old ] && src=$PWD/ab_old/src
    PYTHONPATH=$src timeout 90 python bench/normal_fill.py "$out/normal_${tree}_$rep.json" 2>&1 | f | grep float32 | cut -c1-160
  done
done
for rep in 1 2; do
  for tree in old new; do
    src=$PWD/src; [ $tree = old ] && src=$PWD/ab_old/src
    echo "== topk $tree $rep"
    PYTHONPATH=$src timeout 150 python bench/sort_net_ab.py "$out/topk_${tree}_$rep.json" topk 2>&1 | f | python bench/sort_rows_brief.py
  done
done
timeout 240 python -m pytest -q -p no:warnings -n 8 tests/random tests/sort/test_sort.py -k "topk or random or normal or dropout or rand" --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -4
