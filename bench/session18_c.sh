#!/usr/bin/env bash
# Session 18, run C: the session's end against its start (ab_old/src: session 17's tree) in alternating processes --
# topk (k = 8 ... 1024, bf16 / f16 / f32: the packed scan and the register caps) and the normal fill; then the sort
# and random GPU tests.
#   bash bench/session18_c.sh OUTDIR [bench | tests]
source "$(dirname "$0")/device_env.sh" "$@"
[ "${2:-bench}" = bench ] && ab 'echo "== $tree $rep"
    timeout 90 python bench/normal_fill.py "$out/normal_${tree}_$rep.json" 2>&1 | f | grep float32 | cut -c1-160
    timeout 200 python bench/sort_net_ab.py "$out/topk_${tree}_$rep.json" topk 2>&1 | f | python bench/sort_rows_brief.py'
[ "${2:-bench}" = tests ] || exit 0
timeout 500 python -m pytest -q -p no:warnings -n 16 tests/random tests/sort --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -4
