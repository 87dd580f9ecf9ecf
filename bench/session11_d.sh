#!/usr/bin/env bash
# Session 11, run D: the session's tree against its start (.whl/base11) on the ResNet steps at batch 256 in one run;
# GPU tests of what the session touched; the Llama step (eager / mode / patch) and the demo on this tree.
#   bash bench/session11_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 200 python -m pytest -q -p no:warnings tests/core/test_bad_inputs.py tests/norm_group tests/conv/test_conv_cudnn.py tests/attention/test_sdpa_cudnn.py -x --tb=short -rf > "$out/tests.txt" 2>&1; f "$out/tests.txt" | tail -3
for i in 1 2; do
  for tree in base work; do
    src=$PWD/src; [ $tree = base ] && src=$PWD/.whl/base11/src
    PYTHONPATH=$src timeout 120 python bench/resnet_mode.py "$out/resnet_b256_${tree}_$i.json" --batch 256 2>&1 | f | grep -E "^resnet|Error" | sed "s/^/$tree $i /" | cut -c1-170
  done
done
timeout 200 python -m baracuda.cli bench --model llama --variant eager,mode,patch --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; f "$out/model_llama.txt" | tail -5
timeout 100 python -m baracuda.cli demo > "$out/demo.txt" 2>&1; tail -2 "$out/demo.txt"
