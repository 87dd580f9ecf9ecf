#!/usr/bin/env bash
# Session 9, run F: which mode-routed ops of HF's Llama forward launch through Triton's JIT path each call
# (bench/slow_launch_probe.py), with cProfiles of the slowest.
#   bash bench/session9_f.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
(cd bench && timeout 200 python slow_launch_probe.py "$out/slow_launch_probe.txt" 2>&1 | f | head -22 | cut -c1-400)
