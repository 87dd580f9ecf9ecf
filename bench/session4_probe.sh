#!/usr/bin/env bash
# Session 4's first device call: the call path after the last session's changes (host bench, bt.mode step), the
# Llama memory peak with baracuda's own frames attributed, and a probe of nvmath-python (cuFFT / cuSOLVER) on the box.
#   bash bench/session4_probe.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
python - <<'PY' > "$out/nvmath_probe.txt" 2>&1
import torch, nvmath, nvmath.fft
from nvmath.bindings import cusolverDn, cusolver, cufft
print("nvmath", nvmath.__version__, "cufft", cufft.get_version(), "cusolver", cusolver.get_version())
x = torch.randn(4, 1024, dtype=torch.complex64, device="cuda")
y = nvmath.fft.fft(x, axes=[-1])
print("fft err", (y - torch.fft.fft(x)).abs().max().item(), type(y), y.dtype, y.stride())
r = torch.randn(8, 64, device="cuda")
yr = nvmath.fft.rfft(r, axes=[-1])
print("rfft err", (yr - torch.fft.rfft(r)).abs().max().item())
h = cusolverDn.create(); cusolverDn.set_stream(h, torch.cuda.current_stream().cuda_stream)
a = torch.randn(64, 64, device="cuda", dtype=torch.float64); a = a @ a.T + 64 * torch.eye(64, device="cuda", dtype=torch.float64)
w = a.clone(); lw = cusolverDn.dpotrf_buffer_size(h, 0, 64, w.data_ptr(), 64)
ws = torch.empty(max(lw, 1), dtype=torch.float64, device="cuda"); info = torch.zeros(1, dtype=torch.int32, device="cuda")
cusolverDn.dpotrf(h, 0, 64, w.data_ptr(), 64, ws.data_ptr(), lw, info.data_ptr()); torch.cuda.synchronize()
L = torch.linalg.cholesky(a)
print("potrf info", info.item(), "err (col-major lower == row-major upper)", (w.triu() - L.T).abs().max().item())
PY
cat "$out/nvmath_probe.txt" | grep -v "leaked\|nanobind\|See https\|skipped rem\|^ - " | tail -12
t=$(python -c "import transformers,os;print(os.path.dirname(transformers.__file__))")
sed -n 150,172p $t/integrations/sdpa_attention.py > "$out/hf_lines.txt"; sed -n 300,325p $t/models/llama/modeling_llama.py >> "$out/hf_lines.txt"
timeout 200 python -m baracuda.cli bench --host --json "$out/host.json" > "$out/host.txt" 2>&1; tail -30 "$out/host.txt" | cut -c1-200
timeout 200 python -m baracuda.cli bench --model llama --variant eager,mode,patch,liger --json "$out/model_llama.json" > "$out/model_llama.txt" 2>&1; tail -15 "$out/model_llama.txt" | cut -c1-200
timeout 150 python bench/memory_peak.py "$out/mem_llama.json" --model llama --variant patch,liger > "$out/mem_llama.txt" 2>&1; tail -3 "$out/mem_llama.txt"
