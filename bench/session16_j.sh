#!/usr/bin/env bash
# Session 16, run J: the normal fill with Box-Muller by pairs, session 15's tree (.whl/base/src) and this one in
# separate processes (GPU-bound: the process's host speed does not enter); the random family's GPU tests.
#   bash bench/session16_j.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
for tree in base new; do
  src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base/src
  PYTHONPATH=$src timeout 40 python bench/normal_fill.py "$out/normal_fill_$tree.json" 2>&1 | f | sed "s/^/$tree /" | cut -c1-160
done
timeout 70 python -m pytest -q -p no:warnings -n 8 tests/random/test_random.py tests/random/test_graph_safe.py tests/random/test_dropout.py --tb=short -rf > "$out/tests_random.txt" 2>&1; f "$out/tests_random.txt" | tail -3
