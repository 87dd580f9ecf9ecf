#!/usr/bin/env bash
# Session 7, run D: FFT GPU tests and the rfft2 rows after the Hermitian edge bins of the halved c2r.
#   bash bench/session7_d.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -p no:warnings -n 14 --tb=line -rf tests/fft tests/generic -k "fft" \
  > "$out/gpu_tests_fft.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_fft.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_fft.txt" | cut -c1-230 | sort | uniq | head
timeout 120 python -m baracuda.cli bench --op rfft2,rfft --time-budget 100 --json "$out/bench_rfft.json" \
  > "$out/bench_rfft.txt" 2>&1
f "$out/bench_rfft.txt" | grep -E " fw | bw " | cut -c1-200
python - <<'PY'
import torch, baracuda.torch as bt
torch.manual_seed(0)
for shape, fn, kw in (((64, 1024, 1024), "rfft2", {}), ((8, 256, 255), "rfftn", {"dim": (0, 1, 2)}), ((4096, 1000), "rfft", {})):
    x = torch.randn(*shape, device="cuda", requires_grad=True)
    y = getattr(torch.fft, fn)(x, **kw)
    g = torch.randn_like(y)
    a = torch.autograd.grad(y, x, g)[0]
    b = torch.autograd.grad(getattr(bt.fft, fn)(x, **kw), x, g)[0]
    x64 = x.detach().double().requires_grad_()
    c = torch.autograd.grad(getattr(torch.fft, fn)(x64, **kw), x64, g.to(torch.complex128))[0]
    err = lambda u: ((u.double() - c).abs().max() / c.abs().max()).item()
    print(f"{fn}{shape}: grad max rel err vs f64 -- torch {err(a):.2e}, baracuda {err(b):.2e}")
PY
