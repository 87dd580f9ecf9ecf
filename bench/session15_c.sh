# Session 15 run C: the sort network's hypercube permutation (network.cube_order) against none, every sort-family
# row of issue #17 with torch in the same process (bench/sort_net_ab.py), and Nsight Compute on the two register
# networks (bench/sort_ncu.py).  bash bench/session15_c.sh OUT
source "$(dirname "$0")/device_env.sh" "$1"
timeout 330 python bench/sort_net_ab.py "$out/sort_net_ab.json" 2>&1 | f | tail -40
M=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,smsp__inst_executed.sum,smsp__thread_inst_executed_per_inst_executed.ratio
for w in sort:_rows_kernel topk:_filter_kernel; do
  timeout 120 ncu --launch-skip 1 --launch-count 1 -k "regex:${w#*:}" --section SpeedOfLight --section WarpStateStats \
    --section SchedulerStats --section Occupancy --section LaunchStats --metrics $M \
    python bench/sort_ncu.py "${w%%:*}" > "$out/ncu_${w%%:*}.txt" 2>&1
  grep -v "^==PROF==" "$out/ncu_${w%%:*}.txt" | tail -80
done
