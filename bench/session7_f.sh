#!/usr/bin/env bash
# Session 7, run F: the narrow first-dim reduction sweep with input copies rotated past 2x L2.
#   bash bench/session7_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/reduce_sweep.py "$out/reduce_sweep.json" > "$out/reduce_sweep.txt" 2>&1
f "$out/reduce_sweep.txt" | python -c "
import sys, json
for l in sys.stdin:
    if l.startswith('{'):
        r = json.loads(l); print(r['shape'], r['dtype'][6:], r['op'], r['impl'], r.get('force', ''), round(r['us'], 1), r.get('route', ''))"
