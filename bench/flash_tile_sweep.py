"""Tile sweep of the Triton flash kernels on the GPU: time the forward and backward of the issue's shapes (bf16)
over candidate tiles (BM x BN, warps, stages) and print / write the best per shape, which is how the tile tables in
backends/triton/attention/flash_fwd.py and flash_bwd.py are chosen.

    python bench/flash_tile_sweep.py OUT.json [--tma on|off|both] [--only SUBSTR] [--no-fwd] [--no-bwd]

--tma: sweep the TMA-descriptor kernels (tags end in ",tma"), the pointer kernels, or both (default off)."""
from __future__ import annotations

import argparse
import json
import sys
import traceback

import torch

import baracuda as bc
from baracuda.bench.timing import median_ms
from baracuda.backends.triton.attention import sdpa as reg
from baracuda.backends.triton.attention.flash_bwd import flash_backward
from baracuda.backends.triton.attention.flash_fwd import TileCfg, flash_forward

SHAPES = [("b4h32s4096d128 causal", 4, 32, 32, 4096, 128, "top_left"), ("b4h32s4096d128", 4, 32, 32, 4096, 128, "none"),
          ("gqa32/8 b2s8192d128 causal", 2, 32, 8, 8192, 128, "top_left"),
          ("b4h32s4096d64 causal", 4, 32, 32, 4096, 64, "top_left"), ("b4h16s4096d256 causal", 4, 16, 16, 4096, 256, "top_left")]
FWD = {64: [(128, 64, 4, 3), (128, 128, 8, 3), (128, 64, 8, 4), (64, 64, 4, 4), (128, 128, 8, 4), (256, 64, 8, 3)],
       128: [(128, 64, 4, 3), (128, 64, 8, 3), (128, 128, 8, 3), (128, 128, 8, 2), (64, 64, 4, 3), (128, 64, 8, 4),
             (64, 128, 4, 3), (256, 64, 8, 2)],
       256: [(128, 64, 8, 2), (64, 64, 4, 2), (64, 64, 8, 2), (128, 32, 8, 2), (64, 32, 4, 3), (128, 64, 8, 1)]}
BWD = {64: [((32, 128, 8, 3), (128, 64, 8, 3)), ((64, 128, 8, 2), (128, 64, 8, 2)), ((64, 64, 4, 3), (64, 64, 4, 3)),
            ((128, 128, 8, 2), (128, 128, 8, 2)), ((32, 64, 4, 3), (64, 32, 4, 3))],
       128: [((32, 128, 8, 2), (128, 64, 8, 2)), ((64, 128, 8, 2), (128, 64, 8, 2)), ((64, 64, 4, 2), (64, 64, 4, 2)),
             ((32, 64, 4, 3), (64, 32, 4, 3)), ((64, 128, 8, 3), (128, 32, 8, 3)), ((128, 128, 8, 2), (128, 128, 8, 2))],
       256: [((64, 32, 8, 2), (64, 32, 8, 2)), ((32, 64, 8, 2), (64, 32, 8, 2)), ((64, 64, 8, 1), (64, 64, 8, 1)),
             ((32, 32, 4, 2), (32, 32, 4, 2))]}


def _time(fn, n=10):
    return median_ms(fn, n) * 1e-3


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--tma", choices=("on", "off", "both"), default="off")
    ap.add_argument("--only", default="")
    ap.add_argument("--no-fwd", action="store_true")
    ap.add_argument("--no-bwd", action="store_true")
    args = ap.parse_args(argv)
    path = args.out
    tmas = {"on": (True,), "off": (False,), "both": (False, True)}[args.tma]
    res = {}
    for name, B, Hq, Hk, S, D, causal in SHAPES:
        if args.only not in name:
            continue
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(B, Hq, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
        k = torch.randn(B, Hk, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
        v = torch.randn(B, Hk, S, D, device="cuda", dtype=torch.bfloat16, generator=g)
        do = torch.randn_like(q)
        desc = bc.Descriptor.like("sdpa", q, k, v, causal=causal)
        p = reg._with_tensors(reg._static(desc, None), desc, ())
        out, lse = torch.empty_like(q), torch.empty(B, Hq, S, device="cuda", dtype=torch.float32)
        fl = 4 * B * Hq * S * S * D * (0.5 if causal != "none" else 1)
        row = res[name] = {"fwd": {}, "bwd": {}}
        for c, tma in [(c, t) for c in ([] if args.no_fwd else FWD[D]) for t in tmas]:
            cfg = TileCfg(*c, tma)
            try:
                t = _time(lambda: flash_forward(p, q, k, v, out, lse, cfg))
                row["fwd"][cfg.tag()] = round(fl / t / 1e12, 1)
            except Exception as e:
                row["fwd"][cfg.tag()] = f"error: {str(e)[:200]}"
            print(name, "fwd", cfg.tag(), row["fwd"][cfg.tag()], flush=True)
        dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
        for (kvc, qc), tma in [(c, t) for c in ([] if args.no_bwd else BWD[D]) for t in tmas]:
            cfgs = (TileCfg(*kvc), TileCfg(*qc, tma))      # (TMA: the dQ kernel's loop; dK/dV has pointer loads)
            tag = cfgs[0].tag() + "|" + cfgs[1].tag()
            try:
                t = _time(lambda: flash_backward(p, do, q, k, v, out, lse, dq, dk, dv, cfgs), 5)
                row["bwd"][tag] = round(2.5 * fl / t / 1e12, 1)
            except Exception:
                row["bwd"][tag] = f"error: {traceback.format_exc()[-300:]}"
            print(name, "bwd", tag, row["bwd"][tag], flush=True)
        json.dump(res, open(path, "w"), indent=1)


if __name__ == "__main__":
    main(sys.argv[1:])
