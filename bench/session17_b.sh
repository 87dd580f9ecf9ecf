#!/usr/bin/env bash
# Session 17, run B: scatter_add's row form on index_add's atomic row kernel (against torch eager / compile); the
# normal fill's block / warps; Nsight Compute source counters (stall samples per Python line and per SASS
# instruction) of topk's filter (k = 1024 bf16) and of the 8192-key row sort; the indexing scatter tests on the GPU.
#   bash bench/session17_b.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python bench/scatter_rows.py "$out/scatter_rows.json" 2>&1 | f | cut -c1-400
timeout 100 python bench/normal_sweep.py "$out/normal_sweep.json" 2>&1 | f | cut -c1-200
timeout 150 python -m pytest -q -p no:warnings -n 8 tests/indexing/test_gather_scatter.py --tb=short -rf > "$out/tests_scatter.txt" 2>&1; f "$out/tests_scatter.txt" | tail -3
for w in topk:_filter_kernel sort:_rows_kernel; do
  timeout 150 ncu --import-source yes --launch-skip 1 --launch-count 1 -k "regex:${w#*:}" --section SourceCounters \
    --section WarpStateStats -o "$out/ncu_${w%%:*}" python bench/sort_ncu.py "${w%%:*}" > "$out/ncu_${w%%:*}.log" 2>&1
  tail -2 "$out/ncu_${w%%:*}.log"
  ncu -i "$out/ncu_${w%%:*}.ncu-rep" --page source --csv --print-source cuda > "$out/ncu_${w%%:*}_py.csv" 2>&1
  ncu -i "$out/ncu_${w%%:*}.ncu-rep" --page source --csv --print-source sass > "$out/ncu_${w%%:*}_sass.csv" 2>&1
  ncu -i "$out/ncu_${w%%:*}.ncu-rep" --page details > "$out/ncu_${w%%:*}_details.txt" 2>&1
  wc -l "$out/ncu_${w%%:*}_py.csv" "$out/ncu_${w%%:*}_sass.csv"; head -c 600 "$out/ncu_${w%%:*}_py.csv"
done
