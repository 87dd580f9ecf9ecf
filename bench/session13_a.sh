#!/usr/bin/env bash
# Session 13, run A: issue #16 item 4's full table (every op and shape class, torch eager and torch.compile peers,
# compile caches warmed in parallel first), as the baseline for the rows still below target.
#   bash bench/session13_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
bash bench/item4_gpu.sh "$out" 170 330
