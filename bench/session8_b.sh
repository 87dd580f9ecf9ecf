#!/usr/bin/env bash
# Session 8, run B: topk's radix select swept (bench/topk_probe.py), then the GPU tests of the families this
# session touched (sort incl. search / histogram / unique, indexing, embedding, random, image).   bash bench/session8_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python bench/topk_probe.py "$out/topk_probe.json" 2>&1 | f | tail -12
timeout 330 python -m pytest -q -p no:warnings -n 14 --maxfail=60 -v --tb=line -rf tests/sort tests/indexing \
  tests/embedding tests/random tests/image > "$out/gpu_tests.txt" 2>&1
grep -E "FAILED|ERROR|passed|failed" "$out/gpu_tests.txt" | tail -25 | cut -c1-300
