# Session 15 run E: the sort family's GPU tests after the network change, then every sort-family row of issue #17
# against torch in one process (bench/sort_net_ab.py: the default path against the unpermuted network, the merge
# passes against the radix passes for long rows).  bash bench/session15_e.sh OUT
source "$(dirname "$0")/device_env.sh" "$1"
timeout 200 python -m pytest -q -p no:warnings -n 8 tests/sort -x 2>&1 | f | tail -5 | tee "$out/gpu_tests_sort.txt"
timeout 300 python bench/sort_net_ab.py "$out/sort_net_ab.json" 2>&1 | f | tail -3
