"""The issue's decode row on the GPU: batch 64, KV 8192, H 32/8, D 128, bf16, paged (pages of 16).

Times (CUDA events, median of the runs) and reports bandwidth against the 2.99 TB/s copy ceiling (H100 SXM, measured
by the project's copy benchmark) for:
  ours  paged_attention (the paged decode row), also with the KV split count forced (1, 2, 4, 8, 16: tuning data)
        and with an FP8 e4m3 cache (half the bytes); sdpa_decode over the contiguous cache
  torch F.scaled_dot_product_attention over a contiguous [B, H, S, D] KV (enable_gqa; the gather not timed)
  eager gather (index_select of the pages per call) + torch SDPA: what serving code without a paged kernel pays
Bytes: the K/V each request owns (2 GiB bf16) + q/out/lse + indices.  Each result is checked against torch SDPA's
(max abs difference reported).  Under a minute of GPU time.

    python bench/decode_bench.py results.json
"""
from __future__ import annotations

import json
import sys

import torch

import baracuda as bc
from baracuda.bench.timing import median_ms
from baracuda.backends.triton.attention.decode import forced

B, S, HQ, HKV, D, PS = 64, 8192, 32, 8, 128, 16
CEILING = 2.99e12
WARMUP, RUNS = 5, 20


def _time(fn):
    return median_ms(fn, RUNS, WARMUP) * 1e-3


def _plan(op, *xs, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    plan = bc.Plan.select(desc, bc.as_device("cuda"), bc.PlanPreference(prefer=(bc.Backend.TRITON,)))
    outs = [torch.empty(t.shape, dtype=t.dtype.torch, device="cuda") for t in desc.outputs]
    ws = torch.empty(max(plan.workspace_size, 1), dtype=torch.uint8, device="cuda")
    return plan, outs, ws, desc


def main(path: str) -> None:
    torch.manual_seed(0)
    dev = "cuda"
    P = B * S // PS
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    kp = torch.randn(P, PS, HKV, D, device=dev, dtype=torch.bfloat16)
    vp = torch.randn(P, PS, HKV, D, device=dev, dtype=torch.bfloat16)
    kvi = torch.randperm(P, device=dev, dtype=torch.int64).to(torch.int32)
    kvp = torch.arange(B + 1, device=dev, dtype=torch.int32) * (S // PS)
    last = torch.full((B,), PS, device=dev, dtype=torch.int32)
    qo = torch.arange(B + 1, device=dev, dtype=torch.int32)
    paged_ins = (q, qo, kp, vp, kvp, kvi, last)

    def gather(pages):   # [B, Hkv, S, D] contiguous: the pages of each request in order
        return pages[kvi.long()].view(B, S // PS * PS, HKV, D).transpose(1, 2).contiguous()

    kc, vc = gather(kp), gather(vp)
    qs = q.view(B, HQ, 1, D)
    ref = torch.nn.functional.scaled_dot_product_attention(qs, kc, vc, enable_gqa=True)[:, :, 0]
    kv_bytes = 2 * B * S * HKV * D * 2
    io_bytes = q.numel() * 2 * 2 + B * HQ * 4 + (kvi.numel() + 3 * (B + 1)) * 4
    rows = []

    def record(name, seconds, nbytes, err=None, **extra):
        rows.append(dict(name=name, ms=seconds * 1e3, GBps=nbytes / seconds / 1e9,
                         ceiling_fraction=nbytes / seconds / CEILING, max_abs_err=err, **extra))
        print(f"{name:48s} {seconds * 1e3:8.3f} ms {nbytes / seconds / 1e9:8.1f} GB/s "
              f"{100 * nbytes / seconds / CEILING:5.1f}% of 2.99 TB/s" + (f"  err {err:.2e}" if err is not None else ""),
              flush=True)

    def ours(op, ins, label, nbytes, want, **attrs):
        plan, outs, ws, desc = _plan(op, *ins, **attrs)
        fn = lambda: plan.run(*ins, out=tuple(outs), workspace=ws)   # noqa: E731
        t = _time(fn)
        got = outs[0].reshape(want.shape).float()
        record(label, t, nbytes, float((got - want.float()).abs().max()), route=plan.sku.route)

    ours("paged_attention", paged_ins, "ours paged_attention (bf16, page 16)", kv_bytes + io_bytes, ref)
    for ns in (1, 2, 4, 8, 16):
        with forced(splits=ns):
            ours("paged_attention", paged_ins, f"ours paged_attention splits={ns}", kv_bytes + io_bytes, ref)
    ours("sdpa_decode", (q.view(B, 1, HQ, D), kc.transpose(1, 2), vc.transpose(1, 2)),
         "ours sdpa_decode (strided contiguous cache)", kv_bytes + io_bytes, ref)
    k8, v8 = (kp * 0.5).to(torch.float8_e4m3fn), (vp * 0.5).to(torch.float8_e4m3fn)
    ref8 = torch.nn.functional.scaled_dot_product_attention(
        qs, gather(k8.to(torch.bfloat16) * 2), gather(v8.to(torch.bfloat16) * 2), enable_gqa=True)[:, :, 0]
    ours("paged_attention", (q, qo, k8, v8, kvp, kvi, last), "ours paged_attention fp8 cache", kv_bytes // 2 + io_bytes,
         ref8, k_scale=2.0, v_scale=2.0)
    del k8, v8
    sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(qs, kc, vc, enable_gqa=True)  # noqa: E731
    record("torch SDPA, contiguous KV (gather not timed)", _time(sdpa), kv_bytes + io_bytes, 0.0)
    eager = lambda: torch.nn.functional.scaled_dot_product_attention(qs, gather(kp), gather(vp), enable_gqa=True)  # noqa
    # bytes: the useful K/V (the gather's extra read + write of it is the eager path's cost)
    record("eager gather + torch SDPA", _time(eager), kv_bytes + io_bytes,
           float((eager()[:, :, 0].float() - ref.float()).abs().max()))
    info = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, shape=dict(B=B, S=S, Hq=HQ, Hkv=HKV, D=D,
                page=PS, dtype="bf16"), kv_bytes=kv_bytes, ceiling_Bps=CEILING, runs=RUNS, rows=rows,
                command=" ".join(["python"] + sys.argv))
    with open(path, "w") as f:
        json.dump(info, f, indent=1)
    print(f"wrote {path}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "decode_bench.json")
