#!/usr/bin/env bash
# Session 20, run E: svd per matrix on gesvdj (Xgesvd where it does not converge) -- the spectral GPU tests, the
# 4096^2 f32 svd against torch's drivers -- and issue #19's table from the op database's rows (fft, rfft2, the
# batched 65536 x 32^2 and the 4096^2 factorizations / solves), eager torch beside each.
#   bash bench/session20_e.sh OUTDIR
source "$(dirname "$0")/device_env.sh" "$@"
timeout 150 python -m pytest -q -p no:warnings -n 14 --tb=line -rf tests/linalg/test_spectral.py \
  tests/linalg/test_spectral_backward.py tests/generic -k "svd or pinv or matrix_rank or cond or matrix_norm or norm" \
  > "$out/gpu_tests_svd.txt" 2>&1
grep -E "passed|failed" "$out/gpu_tests_svd.txt" | tail -1; grep -E "^E  |^FAILED" "$out/gpu_tests_svd.txt" | cut -c1-230 | sort | uniq | head -20
timeout 60 python - <<'PY' 2>&1 | f | tail -5
import time, torch, baracuda.torch as bt
S = torch.randn(4096, 4096, device="cuda", generator=torch.Generator(device="cuda").manual_seed(0))
def wall(fn, reps=2):
    fn(); torch.cuda.synchronize(); ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); fn(); torch.cuda.synchronize(); ts.append((time.perf_counter() - t0) * 1e3)
    return round(min(ts), 1)
t, o = wall(lambda: torch.linalg.svd(S, full_matrices=False)), wall(lambda: bt.linalg.svd(S, full_matrices=False))
u, s, vh = bt.linalg.svd(S, full_matrices=False)
err = ((u * s[None]) @ vh - S).abs().max().item() / S.abs().max().item()
print(f"svd 4096^2 f32: torch {t} ms, ours {o} ms, x{t / o:.3f}; reconstruction max err {err:.2e}")
PY
timeout 330 python -m baracuda.cli bench --op fft,rfft2,cholesky,lu_factor,solve,inv,qr,eigh,svd \
  --no-compile --max-seconds 6 --time-budget 300 --json "$out/bench_issue19.json" > "$out/bench_issue19.txt" 2>&1
f "$out/bench_issue19.txt" | grep -E " fw | bw |summary|^linalg|^fft" | cut -c1-200 | head -90
