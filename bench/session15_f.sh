# Session 15 run F (the last device time): issue #17's sort / topk rows on the default paths against torch
# (bench/sort_net_ab.py table; rows also written as they come to sort_table.jsonl), then the sort family's GPU tests.
# bash bench/session15_f.sh OUT
source "$(dirname "$0")/device_env.sh" "$1"
timeout 130 python bench/sort_net_ab.py "$out/sort_table.json" table 2>&1 | f | grep '^{' | cut -c1-220
timeout 170 python -m pytest -q -p no:warnings -n 8 tests/sort 2>&1 | f | tail -4 | tee "$out/gpu_tests_sort.txt"
