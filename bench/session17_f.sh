#!/usr/bin/env bash
# Session 17, run F: the row sort at 8 vs 16 warps (bf16 with the int32 carriers takes 158 registers at 8 warps, one
# program an SM; 64 at 16), outputs compared bit for bit, torch in the same process.
#   bash bench/session17_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
export PYTHONUNBUFFERED=1
timeout 240 python bench/sort_net_ab.py "$out/sort_warps.json" warps 2>&1 | f | python -c "
import sys, json
for l in sys.stdin:
    try: r = json.loads(l)
    except Exception: print(l.rstrip()[:200]); continue
    print(r['op'], r['shape'], r['dtype'][6:], r['impl'], r.get('force'), round(r.get('us', 0)), r.get('same_as_first'), r.get('error', '')[:150])"
rm -f "$out/sort_warps.jsonl"
