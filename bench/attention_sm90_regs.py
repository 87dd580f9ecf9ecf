"""Registers and spills of the FlashAttention kernels per tile config, compiled offline for sm_90 (no GPU needed).

For each head dim (32 .. 256 incl. 80 / 96 / 160 / 192), dtype (bf16, f32 exact, f32 tf32, FP8 e4m3 with P V in
bf16 "fp8" or in e4m3 "fp8pv") and causal / not, the
forward, dK/dV and dQ kernels are compiled exactly as a launch of that problem would compile them (the plan's own
tile choice) and their registers per thread and stack bytes (> 0: spills) printed.  Run without TRITON_INTERPRET:

    python bench/attention_sm90_regs.py [--quick] [--fp8]   # --quick: D in {64, 128, 256}, bf16 only;
                                                            # --fp8: D in {64, 128, 256}, the FP8 kinds only
"""
from __future__ import annotations

import math
import sys

import torch

from baracuda.backends.triton.attention.flash_bwd import bwd_configs, flash_backward
from baracuda.backends.triton.attention.flash_fwd import Problem, flash_forward, fwd_config
from baracuda.testing.sm90 import offline_launches


_F8 = torch.float8_e4m3fn


def _problem(D, dt, prec, causal, group=1):
    """causal "features": bottom-right causal with a window, softcap, ALiBi, a float mask and dropout at once (the
    most live values per score tile)."""
    S, Hkv = 512, 2
    H = Hkv * group
    ds = (torch.ones(H), torch.ones(Hkv), torch.ones(Hkv)) if dt == _F8 else ()     # per-head descales
    if causal != "features":
        return Problem("bhsd", 1, H, Hkv, S, S, D, D, 1 / math.sqrt(D), causal, None, None, 0.0, 0.0, 0, 0, prec,
                       descales=ds, fp8=bool(ds))
    mdt = torch.bfloat16 if dt == _F8 else dt
    return Problem("bhsd", 1, H, Hkv, S, S, D, D, 1 / math.sqrt(D), "bottom_right", 256, None, 30.0, 0.1, 7, 0, prec,
                   mask=torch.empty(S, S, dtype=mdt).expand(1, H, S, S), slopes=torch.empty(H), descales=ds,
                   fp8=bool(ds))


def main(quick: bool = False, fp8: bool = False) -> int:
    dims = (64, 128, 256) if quick or fp8 else (32, 64, 80, 96, 128, 160, 192, 256)
    f8 = (("fp8", _F8, "ieee"), ("fp8pv", _F8, "fp8"))
    kinds = f8 if fp8 else (("bf16", torch.bfloat16, "ieee"),) if quick else (
        ("bf16", torch.bfloat16, "ieee"), ("f32", torch.float32, "ieee"), ("tf32", torch.float32, "tf32")) + f8
    spills = 0
    print(f"{'kernel':<18}{'dtype':<6}{'D':>4} {'causal':<9}{'tile':<16}{'regs':>5}{'stack':>7}")
    for D in dims:
        for name, dt, prec in kinds:
            for causal in ("top_left", "none", "features"):
                p = _problem(D, dt, prec, causal)
                B, H, S = p.B, p.Hq, p.Sq
                q = torch.empty(B, H, S, D, dtype=dt)
                k, v = torch.empty(B, p.Hkv, S, D, dtype=dt), torch.empty(B, p.Hkv, S, D, dtype=dt)
                lse = torch.empty(B, H, S)
                odt = torch.bfloat16 if dt == _F8 else dt      # FP8: out, grad_out and the gradients in bf16
                try:
                    fc = fwd_config(p, dt)
                    kvc, qc = bwd_configs(p, dt)
                    with offline_launches() as L:
                        flash_forward(p, q, k, v, torch.empty_like(q, dtype=odt), lse, fc)
                        if prec != "fp8":   # (the backward has no e4m3 P V variant)
                            flash_backward(p, torch.empty_like(q, dtype=odt), q, k, v, torch.empty_like(q, dtype=odt),
                                           lse, torch.empty_like(q, dtype=odt), torch.empty_like(k, dtype=odt),
                                           torch.empty_like(v, dtype=odt), (kvc, qc))
                except Exception as e:   # noqa: BLE001  (report and go on)
                    print(f"FAIL D={D} {name} {causal}: {type(e).__name__}: {str(e).strip().splitlines()[-1][:200]}")
                    spills += 1
                    continue
                tiles = {"_flash_fwd_kernel": fc, "_bwd_dkdv_kernel": kvc, "_bwd_dq_kernel": qc}
                for launch in L:
                    if launch.name not in tiles:
                        continue
                    regs, stack = launch.resources()
                    spills += stack > 0
                    print(f"{launch.name:<18}{name:<6}{D:>4} {causal:<9}{tiles[launch.name].tag():<16}{regs:>5}"
                          f"{stack:>7}{'  SPILLS' if stack else ''}", flush=True)
    print(f"{spills} configs with spills or failures")
    return 1 if spills else 0


if __name__ == "__main__":
    sys.exit(main("--quick" in sys.argv, "--fp8" in sys.argv))
