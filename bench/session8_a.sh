#!/usr/bin/env bash
# Session 8, run A: issue #17's rows below target, before (.whl/base/src: the tree at 2d19204) and after this
# session's change, one process each, same machine: gather / index_select / scatter_add / normal (forward and
# backward, torch eager peers), then the kernel probes (bench/index_probe.py).   bash bench/session8_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader > "$out/info.txt"
ops=gather,index_select,scatter_add,normal,uniform,index_add
for v in base new; do
  src=$PWD/src; [ $v = base ] && src=$PWD/.whl/base/src
  PYTHONPATH=$src timeout 170 python -m baracuda.cli bench --no-compile --op $ops --max-seconds 14 --time-budget 150 \
    --json "$out/bench_$v.json" > "$out/bench_$v.txt" 2>&1
  grep -v "^\[" "$out/bench_$v.txt" | tail -30 | cut -c1-200
done
timeout 150 python bench/index_probe.py "$out/index_probe.json" 2>&1 | f | tail -30
