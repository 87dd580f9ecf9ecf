#!/usr/bin/env bash
# Session 7, run H (after the review): the host-overhead benchmark and a tiny Llama under bt.mode() against eager.
#   bash bench/session7_h.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 100 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; f "$out/host.txt" | tail -25
timeout 60 python bench/mode_host_profile.py "$out/mode_host.json" > "$out/mode_host.txt" 2>&1
python -c "import json; d=json.load(open('$out/mode_host.json')); print('tiny llama host ms/step: eager', round(d['eager_ms'], 2), 'mode', round(d['mode_ms'], 2))"
