#!/usr/bin/env bash
# Session 19, run A: the 2-d pooling tile kernels (pool/tile.py) against the session's start (ab_old/src: `git archive
# ad3608a src`, carried) in alternating processes, NCHW and channels-last, torch eager and torch.compile in every
# process; the pooling GPU tests; ResNet-18 / -50 train steps under the mode at batch 256 (this tree).
#   bash bench/session19_a.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
# (the pooling change alone: ab_new/src is HEAD + pool/, carried, while other families were being edited)
export AB_NEW=$PWD/ab_new/src PYTHONPATH=$PWD/ab_new/src
ab 'echo "== pool $tree $rep"; timeout 150 python bench/pool_ab.py "$out/pool_${tree}_$rep.json" 2>&1 | f'
timeout 200 python -m pytest -q -p no:warnings -n 8 tests/pool --tb=short -rf > "$out/tests_pool.txt" 2>&1; f "$out/tests_pool.txt" | tail -4

