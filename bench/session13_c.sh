#!/usr/bin/env bash
# Session 13, run C: argmax / argmin packed as one int32 max per tile (bf16 / f16) against the pair path, then
# issue #16 item 4's full table again with every change of the session (bench/item4_gpu.sh).
#   bash bench/session13_c.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 60 python -m pytest -q -p no:warnings tests/reduction/test_reduction.py -x --tb=short -rf -k "packed or sm90" \
  > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
timeout 100 python bench/reduce_ab.py "$out/reduce_ab.json" argmax,argmin > "$out/reduce_ab.txt" 2>&1; echo "ab exit $?"
python - "$out/reduce_ab.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        print(f'{r["op"]:7s} {str(r["shape"]):20s} d{r["dim"]} {r["dtype"][6:]:9s} {r["impl"]:26s} {r["us"]:8.2f} {r.get("route", "")} {r.get("check", "")}')
PY
bash bench/item4_gpu.sh "$out" 150 300 > /dev/null 2>&1; echo "item4 exit $?"
grep -v "^\[" "$out/item4.txt" | awk '$4 != "torch" && $4 != "torch.compile"' | cut -c1-170 | tail -75
