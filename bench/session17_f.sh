#!/usr/bin/env bash
# Session 17, run F: the row sort at 8 vs 16 warps (bf16 with the int32 carriers takes 158 registers at 8 warps, one
# program an SM; 64 at 16), outputs compared bit for bit, torch in the same process.
#   bash bench/session17_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 240 python bench/sort_net_ab.py "$out/sort_warps.json" warps 2>&1 | f | python bench/sort_rows_brief.py
rm -f "$out/sort_warps.jsonl"
