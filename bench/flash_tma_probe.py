"""Probe: a TMA-descriptor FlashAttention forward on Hopper, with and without Triton's warp specialization, against
our pointer-load kernel (the Triton plan), cuDNN (our plan) and torch SDPA -- one run, same shapes (GPU only).

    python bench/flash_tma_probe.py OUT.json [--reps N] [--quick]

The kernel here is the plain case only (causal or not, GQA, any [B, H, S, D] strides with a unit last stride): q / k /
v / out are addressed through 4-D tensor descriptors ([B, H, S, D], block [1, 1, BM, D]), so the loads are TMA
copies into shared memory that need no address registers and zero-fill past the sequence end, and the key loop may
run as a warp-specialized producer / consumer pipeline (``tl.range(..., warp_specialize=True)``).  Each config
row records TF/s (FlashAttention's count: 4 B H S^2 D, halved for causal), the max error against torch SDPA in
f32, or the compile error when Triton refuses it.  The result decides whether the plans take this kernel.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

import baracuda as bc
from baracuda.bench.timing import median_ms

LOG2E = 1.4426950408889634


@triton.jit
def _tma_step(acc, l_i, m_i, q, Kd, Vd, b, hk, j0, offs_m, scale2,
              MASKED: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr):
    k = Kd.load([b, hk, j0, 0]).reshape(BN, BD)
    qk = tl.dot(q, tl.trans(k))
    if MASKED:
        jj = j0 + tl.arange(0, BN)
        qk = qk * scale2 + tl.where(offs_m[:, None] >= jj[None, :], 0.0, -1.0e6)
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = tl.exp2(qk - m_new[:, None])
    else:
        m_new = tl.maximum(m_i, tl.max(qk, 1) * scale2)
        p = tl.exp2(qk * scale2 - m_new[:, None])
    alpha = tl.exp2(m_i - m_new)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    v = Vd.load([b, hk, j0, 0]).reshape(BN, BD)
    acc = tl.dot(p.to(v.dtype), v, acc)
    return acc, l_i, m_new


@triton.jit
def _tma_fwd(Qd, Kd, Vd, Od, LSE, Hq, GROUP, S, scale2,
             CAUSAL: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, WS: tl.constexpr):
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    hk = h // GROUP
    i0 = pid_m * BM
    offs_m = i0 + tl.arange(0, BM)
    q = Qd.load([b, h, i0, 0]).reshape(BM, BD)
    acc = tl.zeros([BM, BD], tl.float32)
    l_i = tl.zeros([BM], tl.float32) + 1.0e-30
    m_i = tl.full([BM], -1.0e30, tl.float32)
    hi = i0 if CAUSAL else S
    for j0 in tl.range(0, hi, BN, warp_specialize=WS):
        acc, l_i, m_i = _tma_step(acc, l_i, m_i, q, Kd, Vd, b, hk, j0, offs_m, scale2, False, BN, BD)
    if CAUSAL:
        for j0 in tl.range(i0, i0 + BM, BN, warp_specialize=WS):
            acc, l_i, m_i = _tma_step(acc, l_i, m_i, q, Kd, Vd, b, hk, j0, offs_m, scale2, True, BN, BD)
    out = acc / l_i[:, None]
    Od.store([b, h, i0, 0], out.to(Od.dtype).reshape(1, 1, BM, BD))
    tl.store(LSE + bh.to(tl.int64) * S + offs_m, (m_i + tl.log2(l_i)) * 0.6931471805599453, mask=offs_m < S)


def _desc(t, layout, bm, bd):
    s = t.stride()
    if layout == "bhsd":
        B, H, S, D = t.shape
        st = [s[0], s[1], s[2], s[3]]
    else:
        B, S, H, D = t.shape
        st = [s[0], s[2], s[1], s[3]]
    return TensorDescriptor(t, [B, H, S, D], st, [1, 1, bm, bd])


def tma_forward(q, k, v, causal, cfg, layout="bhsd"):
    bm, bn, warps, stages, ws = cfg
    if layout == "bhsd":
        B, Hq, S, D = q.shape
        Hkv = k.shape[1]
    else:
        B, S, Hq, D = q.shape
        Hkv = k.shape[2]
    out = torch.empty_like(q)
    lse = torch.empty(B, Hq, S, device=q.device, dtype=torch.float32)
    qd, od = _desc(q, layout, bm, D), _desc(out, layout, bm, D)
    kd, vd = _desc(k, layout, bn, D), _desc(v, layout, bn, D)
    grid = (triton.cdiv(S, bm), B * Hq)

    def run():
        _tma_fwd[grid](qd, kd, vd, od, lse, Hq, Hq // Hkv, S, D ** -0.5 * LOG2E, CAUSAL=causal, BM=bm, BN=bn, BD=D,
                       WS=ws, num_warps=warps, num_stages=stages)
    return run, out


CONFIGS = {
    64: [(128, 64, 4, 3, False), (128, 64, 8, 3, False), (128, 128, 8, 3, False), (128, 64, 4, 3, True),
         (128, 128, 8, 2, True), (128, 64, 8, 4, True)],
    128: [(128, 64, 4, 2, False), (128, 64, 8, 2, False), (128, 64, 8, 3, False), (128, 128, 8, 2, False),
          (128, 128, 8, 3, False), (64, 64, 4, 3, False),
          (128, 64, 4, 2, True), (128, 64, 4, 3, True), (128, 64, 8, 3, True), (128, 128, 8, 2, True),
          (128, 128, 4, 2, True), (64, 64, 4, 3, True)],
    256: [(128, 64, 8, 2, False), (64, 64, 4, 2, False), (128, 32, 8, 2, False), (128, 64, 8, 2, True),
          (64, 64, 4, 2, True)],
}

SHAPES = [("b4h32s4096d128-causal", 4, 32, 32, 4096, 128, True),
          ("b4h32s4096d128", 4, 32, 32, 4096, 128, False),
          ("gqa32/8-b2s8192d128-causal", 2, 32, 8, 8192, 128, True),
          ("b4h32s4096d64-causal", 4, 32, 32, 4096, 64, True),
          ("b4h16s4096d256-causal", 4, 16, 16, 4096, 256, True)]


def _tfs(B, H, S, D, causal, ms):
    f = 4.0 * B * H * S * S * D / (2 if causal else 1)
    return round(f / (ms * 1e-3) / 1e12, 1)


def _ours(q, k, v, causal, backend, reps):
    d = bc.Descriptor.like("sdpa", q, k, v, causal="bottom_right" if causal else "none")
    plan = bc.Plan.select(d, "cuda", bc.PlanPreference(prefer=(backend,)))
    if plan.sku.backend != backend:
        return None, str(plan.sku.route)
    plan.run(q, k, v)
    return median_ms(lambda: plan.run(q, k, v), reps), str(plan.sku.route)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="D128 causal only")
    args = ap.parse_args(argv)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    rows = []
    torch.manual_seed(0)
    shapes = SHAPES[:1] if args.quick else SHAPES
    for name, B, Hq, Hkv, S, D, causal in shapes:
        q = torch.randn(B, Hq, S, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(B, Hkv, S, D, device="cuda", dtype=torch.bfloat16)
        row = {"shape": name, "configs": []}
        kk, vv = (k, v) if Hkv == Hq else (k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1))
        small = slice(0, 1)
        ref = torch.nn.functional.scaled_dot_product_attention(q[small].float(), kk[small].float(),
                                                               vv[small].float(), is_causal=causal)
        for kern, label in ((SDPBackend.CUDNN_ATTENTION, "torch_cudnn"), (SDPBackend.FLASH_ATTENTION, "torch_flash")):
            try:
                with sdpa_kernel(kern):
                    f = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,  # noqa
                                                                                 enable_gqa=Hq != Hkv)
                    f()
                    row[label] = _tfs(B, Hq, S, D, causal, median_ms(f, args.reps))
            except Exception as e:          # noqa: BLE001
                row[label] = f"error: {e}"[:200]
        for backend, label in ((bc.Backend.TRITON, "ours_triton"), (bc.Backend.CUDNN, "ours_cudnn")):
            try:
                ms, route = _ours(q, k, v, causal, backend, args.reps)
                row[label] = None if ms is None else _tfs(B, Hq, S, D, causal, ms)
                row[label + "_route"] = route
            except Exception as e:          # noqa: BLE001
                row[label] = f"error: {e}"[:200]
        for cfg in CONFIGS[D]:
            rec = {"cfg": list(cfg)}
            try:
                t0 = time.perf_counter()
                run, out = tma_forward(q, k, v, causal, cfg)
                run()
                torch.cuda.synchronize()
                rec["compile_s"] = round(time.perf_counter() - t0, 2)
                rec["max_err"] = float((out[small].float() - ref).abs().max())
                rec["tfs"] = _tfs(B, Hq, S, D, causal, median_ms(run, args.reps))
            except Exception as e:          # noqa: BLE001
                rec["error"] = "".join(traceback.format_exception_only(type(e), e))[-400:]
            row["configs"].append(rec)
            print(name, rec, flush=True)
        # the best config again in the bshd layout (strided descriptors, no copies)
        ok = [c for c in row["configs"] if "tfs" in c]
        if ok:
            best = max(ok, key=lambda c: c["tfs"])
            try:
                qs, ks, vs = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in (q, k, v))
                qs, ks, vs = (t.transpose(1, 2) for t in (qs, ks, vs))      # [B, S, H, D] views, contiguous
                run, out = tma_forward(qs, ks, vs, causal, tuple(best["cfg"]), layout="bshd")
                run()
                torch.cuda.synchronize()
                row["best_bshd"] = {"cfg": best["cfg"], "tfs": _tfs(B, Hq, S, D, causal, median_ms(run, args.reps)),
                                    "max_err": float((out.transpose(1, 2)[small].float() - ref).abs().max())}
            except Exception as e:          # noqa: BLE001
                row["best_bshd"] = {"error": str(e)[-300:]}
        print(json.dumps({k: v for k, v in row.items() if k != "configs"}), flush=True)
        rows.append(row)
        del q, k, v
        torch.cuda.empty_cache()
    json.dump({"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%d"),
               "command": "python bench/flash_tma_probe.py " + " ".join(argv or sys.argv[1:]), "rows": rows},
              open(args.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
