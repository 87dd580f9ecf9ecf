"""Offline sm_90 compile of every gumbel_softmax / sparsemax kernel (no GPU: Triton's CUDA backend and bundled
ptxas).  The plans' own host code runs on CPU tensors with launches turned into sm_90 compiles
(baracuda.testing.sm90), so each kernel is built with the launcher's real specialisation (R == 1 and unit
strides become constants, 16-divisible sizes get divisibility hints) for configurations covering what
choose() can pick: rows and inner lanes, one-chunk (SINGLE) and chunked rows, BR from 1 to 16384, 4/8/16
warps, f64 and the half types, every gumbel variant (soft, hard, backward).  R == 1 is the case that aborted
Triton 3.6 in TritonGPUCoalesce on the H100 (see backends/triton/softmax/gumbel_sparsemax.py).  Runs in a subprocess:
a compiler abort fails this test instead of killing pytest."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

VARIANTS = {"gumbel": ("gumbel_softmax", 1, dict(tau=0.7, hard=False, seed=5)),
            "gumbel-hard": ("gumbel_softmax", 1, dict(tau=0.7, hard=True, seed=2 ** 40 + 3)),
            "gumbel-bw": ("gumbel_softmax_backward", 2, dict(tau=0.7, seed=1)),   # seed == 1: a constant
            "sparsemax": ("sparsemax", 1, {}), "sparsemax-bw": ("sparsemax_backward", 2, {})}
# (shape, dim, dtypes): R == 1 rows / inner lanes (the coalesce abort), L == 1, small inner, a one-chunk row,
# the widest one-chunk row (16 warps), chunked rows (f32: BR 16384; f64: BR 8192), chunked inner lanes (8 warps)
CASES = [((5, 1), -1, ("bf16", "f64")), ((4, 1, 3), 1, ("f16",)), ((7,), 0, ("f32",)), ((2, 21, 3), 1, ("bf16",)),
         ((6, 1000), -1, ("f32", "f64")), ((1, 16384), -1, ("bf16",)), ((2, 20000), -1, ("f16",)),
         ((2, 9000), -1, ("f64",)), ((2, 4096, 64), 1, ("bf16",))]
DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32, "f64": torch.float64}
WIDE = {((1, 16384), -1), ((2, 20000), -1), ((2, 4096, 64), 1)}   # unit-stride, 16-divisible: 16-byte accesses


def triton_impl(op):
    return next(i for i in implementations(op) if i.backend == Backend.TRITON)


seen = set()
for name, (op, nin, attrs) in VARIANTS.items():
    for shape, dim, dts in CASES:
        for dt in dts:
            xs = [torch.empty(shape, dtype=DT[dt]) for _ in range(nin)]
            desc = bc.Descriptor.like(op, *xs, dim=dim, **attrs)
            outs = [torch.empty(o.shape, dtype=DT[dt]) for o in desc.outputs]
            print("compiling", name, shape, dim, dt, flush=True)
            with offline_launches() as launches:
                triton_impl(op).bind(desc)(desc, xs, outs, None)
            assert len(launches) == 1, launches
            k = launches[0]
            regs, stack = k.resources()
            print("   ", k.name, {n: k.constexprs[n] for n in ("SINGLE", "BL", "BR")}, "warps", k.num_warps,
                  "regs", regs, "stack", stack, flush=True)
            # no spills (f64 one-chunk rows of 2 x 1024 at 4 warps spill 8 B in the backward: tolerated)
            assert stack <= (8 if dt == "f64" else 0), (name, shape, dt, "spills", stack)
            ptx = k.compiled.asm["ptx"]
            if (shape, dim) in WIDE and dt != "f64":
                assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, (name, shape, "no 16-byte loads")
            seen.add((name, k.constexprs["SINGLE"], dt == "f64", k.constexprs["BR"] == 1))
# every variant compiled one-chunk and chunked, in f64 and a half/f32 type, and with R == 1
for name in VARIANTS:
    for single in (True, False):
        for f64 in (True, False):
            assert any(s[:3] == (name, single, f64) for s in seen), (name, single, f64)
    assert (name, True, True, True) in seen and (name, True, False, True) in seen, name
print("ok")
'''


def test_triton_kernels_registered_for_cuda():
    from baracuda._core.registry import implementations
    from baracuda._core.sku import Backend

    for op in ("gumbel_softmax", "gumbel_softmax_backward", "sparsemax", "sparsemax_backward"):
        (impl,) = [i for i in implementations(op) if i.backend == Backend.TRITON]
        assert "cuda" in impl.devices, op


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_gumbel_sparsemax_kernels_compile_for_sm90():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
