#!/usr/bin/env bash
# Session 10, run G: the cuBLASLt backend through nvmath-python's bindings: its GPU tests (tests/gemm/test_cublaslt.py
# and the generic suite's linear / linear_act rows, every backend), then bench/cublaslt_bench.py against the torch
# route and torch eager.
#   bash bench/session10_g.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings tests/gemm/test_cublaslt.py -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -25 | cut -c1-300
timeout 200 python -m pytest -q -p no:warnings tests/generic -k "linear and not bilinear" --tb=line -rf > "$out/tests_generic.txt" 2>&1; f "$out/tests_generic.txt" | tail -6 | cut -c1-300
timeout 150 python bench/cublaslt_bench.py "$out/cublaslt_bench.json" 2>&1 | f | tail -8
