#!/usr/bin/env bash
# Session 13, run B: the reduction changes on the GPU -- their tests (packed argmax, flat narrow rows, var's wide
# columns and one-split finish, the sm90 compile check), then bench/reduce_ab.py (new vs old path, torch eager,
# torch.compile, one process).
#   bash bench/session13_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 170 python -m pytest -q -p no:warnings tests/reduction/test_reduction.py tests/reduction_stats -x --tb=short -rf \
  -k "packed or flat_narrow or wide_column or sm90 or nan_prop or ties or split or large_mean" > "$out/tests.txt" 2>&1
f "$out/tests.txt" | tail -4
timeout 380 python bench/reduce_ab.py "$out/reduce_ab.json" > "$out/reduce_ab.txt" 2>&1; echo "ab exit $?"
python - "$out/reduce_ab.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f'{r["op"]:7s} {str(r["shape"]):20s} d{r["dim"]} {r["dtype"][6:]:9s} {r["impl"]:26s} {r["us"]:8.2f} {r.get("route", "")} {r.get("check", "")}')
PY
