#!/usr/bin/env bash
# Session 17, run D: topk's threshold filter at large k -- the k-th search by 8-bit histograms against the bitwise
# search, pass 2's lanes per step, 16 warps, 4096 chunks (bench/sort_net_ab.py filter; outputs compared bit for bit).
#   bash bench/session17_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 300 python bench/sort_net_ab.py "$out/topk_filter.json" filter 2>&1 | f | python bench/sort_rows_brief.py
