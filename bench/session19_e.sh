#!/usr/bin/env bash
# Session 19, run E: Nsight Compute on the rows still below target (bench/family_ncu.py): interpolate's tile kernel
# (bicubic / bilinear x2 up), the depthwise forward / backward kernels and torch's own depthwise forward, the NCHW max
# pool forward.   bash bench/session19_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
M=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum,dram__bytes_read.sum,dram__bytes_write.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum
for w in interp_bicubic_up:1:1:_tile2 interp_bilinear_up:1:1:_tile2 dw_fw:1:1:_dw2 dw_bw:2:2:_dw2 dw_fw_torch:1:2:. maxpool_nchw:1:1:pool_fw; do
  IFS=: read -r case skip count rx <<< "$w"
  timeout 150 ncu --launch-skip "$skip" --launch-count "$count" -k "regex:$rx" --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section LaunchStats --section SchedulerStats --metrics $M \
    python bench/family_ncu.py "$case" > "$out/ncu_$case.txt" 2>&1
  echo "=== $case"
  grep -E "^  [A-Za-z_0-9]+.*\(|Duration|DRAM Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Compute \(SM\)|Achieved Occupancy|Theoretical Occupancy|Registers Per|Warp Cycles Per Issued|Issue Slots Busy|Block Size|Grid Size|l1tex__|smsp__inst|dram__bytes|Mem Busy|Max Bandwidth|Mem Pipes" "$out/ncu_$case.txt" | head -60
done
