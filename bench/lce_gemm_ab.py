"""The three GEMMs of one fused-linear-CE token chunk (8192 x 4096 x 128256 bf16): cuBLAS (torch.mm, and the
dW accumulation dw.addmm_ that every chunk after the first runs) against the bespoke Triton GEMM
(backends/triton/gemm/gemm.py) in several tile configs.  GPU only.

    python bench/lce_gemm_ab.py [--json OUT] [--chunks 1280,1536] [--rounds 8] [--cublas-only]
Interleaved rounds (every variant once per round, 3 back-to-back launches timed by CUDA events), median ms and
TFLOP/s; the Triton dW is checked against cuBLAS's.  (The dW accumulation inside the Triton kernel, C read
before or after the K loop, was measured at commit e486149: no faster than cuBLAS's; not kept.)
"""
import argparse
import json
import time

import torch

from baracuda.backends.triton.gemm.gemm import GemmConfig, _launcher

CONFIGS = {
    "128x256x64s3": GemmConfig(128, 256, 64, 8, 8, 3),
    "128x256x64s4": GemmConfig(128, 256, 64, 8, 8, 4),
    "256x128x64s3": GemmConfig(256, 128, 64, 8, 8, 3),
    "128x128x64s4": GemmConfig(128, 128, 64, 8, 8, 4),
    "128x256x64s3g16": GemmConfig(128, 256, 64, 16, 8, 3),
}


def variants(x, w, dw, lg, dxc, xc, cublas_only=False):
    v = {
        "cublas fw": lambda: torch.mm(xc, w.t(), out=lg),
        "cublas dx": lambda: torch.mm(lg, w, out=dxc),
        "cublas dw0": lambda: torch.mm(lg.t(), xc, out=dw),
        "cublas dw+": lambda: dw.addmm_(lg.t(), xc),
    }
    for name, cfg in ({} if cublas_only else CONFIGS).items():
        fw = _launcher(xc, w.t(), lg, cfg, "ieee")
        v[f"triton fw {name}"] = (lambda g: lambda: g(xc, w, lg, None, None))(fw)
        g = _launcher(lg.t(), xc, dw, cfg, "ieee")
        v[f"triton dw0 {name}"] = (lambda g: lambda: g(lg, xc, dw, None, None))(g)
    return v


def time3(fn):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(3):
        fn()
    e.record()
    e.synchronize()
    return s.elapsed_time(e) / 3


def check(xc, w, dw, lg, dxc):
    """Triton dW against cuBLAS's (max error over max magnitude)."""
    out = {}
    ref = torch.mm(lg.t(), xc).float()
    for name, cfg in CONFIGS.items():
        got = torch.empty_like(dw)
        _launcher(lg.t(), xc, got, cfg, "ieee")(lg, xc, got, None, None)
        out[f"dw {name}"] = ((got.float() - ref).abs().max() / ref.abs().max()).item()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--chunks", default="1280,1536")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--cublas-only", action="store_true")
    a = ap.parse_args()
    torch.manual_seed(0)
    n, h, vocab = 8192, 4096, 128256
    dev = "cuda"
    x = torch.randn(n, h, device=dev, dtype=torch.bfloat16)
    w = torch.randn(vocab, h, device=dev, dtype=torch.bfloat16) * 0.02
    dw = torch.zeros(vocab, h, device=dev, dtype=torch.bfloat16)
    res = {"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"), "chunks": {}}
    for tc in (int(c) for c in a.chunks.split(",")):
        lg = torch.randn(tc, vocab, device=dev, dtype=torch.bfloat16) * 1e-4
        dxc = torch.empty(tc, h, device=dev, dtype=torch.bfloat16)
        xc = x[:tc]
        vs = variants(x, w, dw, lg, dxc, xc, a.cublas_only)
        for fn in vs.values():   # compile + warm
            fn()
        torch.cuda.synchronize()
        times = {k: [] for k in vs}
        for _ in range(a.rounds):
            for k, fn in vs.items():
                times[k].append(time3(fn))
        flop = 2 * tc * h * vocab
        row = {}
        for k, t in times.items():
            t = sorted(t)
            med = t[len(t) // 2]
            row[k] = {"ms": med, "ms_min": t[0], "ms_max": t[-1], "tflops": flop / med / 1e9}
        row["check_rel_err"] = {} if a.cublas_only else check(xc, w, dw, lg, dxc)
        res["chunks"][tc] = row
        print(f"-- chunk {tc}")
        for k, r in row.items():
            if k != "check_rel_err":
                print(f"{k:32s} {r['ms']:.3f} ms ({r['ms_min']:.3f}-{r['ms_max']:.3f})  {r['tflops']:.0f} TFLOP/s")
        print(row["check_rel_err"])
        del lg, dxc
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
