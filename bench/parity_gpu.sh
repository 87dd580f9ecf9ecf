#!/usr/bin/env bash
# The OpInfo parity run (baracuda.testing.parity) on the GPU, in N parallel shards: each entry compiles its
# kernels on first use, which is CPU-bound, so shards share the GPU and use the host's cores.
#   bash bench/parity_gpu.sh OUTDIR [N]     -> OUTDIR/parity_cuda.json (summary), OUTDIR/shard*.jsonl
set -uo pipefail
out=${1:?output directory}; n=${2:-12}
mkdir -p "$out"
for k in $(seq 0 $((n - 1))); do
  python -m baracuda.testing.parity --device cuda --shard "$k/$n" --log "$out/shard$k.jsonl" >"$out/shard$k.txt" 2>&1 &
done
wait
python -m baracuda.testing.parity --device cuda --summarize "$out"/shard*.jsonl --json "$out/parity_cuda.json" \
  2>/dev/null | tee "$out/parity_cuda.txt"
