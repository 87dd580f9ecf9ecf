"""Offline sm_90 compile of the tap-unrolled depthwise kernels (no GPU: Triton's CUDA backend and bundled ptxas) for
issue #18's bench shapes, through the plans' own host code and launch specialisation: forward, data and weight
gradients of bf16 channels-last MobileNet (3 x 3, stride 1 and 2) and ConvNeXt (7 x 7, 32- and 64-channel tiles)
problems, the NCHW one and an f32 one.  No kernel spills, and the channels-last bf16 passes read 16 bytes a load."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

# (N, C, H, kernel, stride, channels_last, dtype)
CASES = [(64, 144, 56, 3, 1, True, torch.bfloat16), (64, 96, 112, 3, 2, True, torch.bfloat16),
         (64, 96, 56, 7, 1, True, torch.bfloat16), (64, 384, 14, 7, 1, True, torch.bfloat16),
         (64, 144, 56, 3, 1, False, torch.bfloat16), (64, 144, 56, 3, 1, True, torch.float32)]
impls = {op: next(i for i in implementations(op) if i.backend == Backend.TRITON)
         for op in ("convolution", "convolution_backward")}
for n, c, h, k, s, cl, dt in CASES:
    fmt = torch.channels_last if cl else torch.contiguous_format
    x = torch.empty(n, c, h, h, dtype=dt).to(memory_format=fmt)
    w = torch.empty(c, 1, k, k, dtype=dt)
    attrs = dict(stride=(s,), padding=(k // 2,), groups=c, channels_last=cl)
    fwd = bc.Descriptor.like("convolution", x, w, **attrs)
    y = torch.empty(fwd.outputs[0].shape, dtype=dt)
    bwd = bc.Descriptor.like("convolution_backward", y, x, w, **attrs)
    for desc, xs in ((fwd, [x, w]), (bwd, [y, x, w])):
        outs = [torch.empty(o.shape, dtype=dt) for o in desc.outputs]
        if cl and desc.op == "convolution_backward":      # the drop-in's gradients come channels-last
            outs[0] = outs[0].to(memory_format=torch.channels_last)
        ws = torch.empty(max(impls[desc.op].workspace_of(desc), 1), dtype=torch.uint8)
        with offline_launches() as launches:
            impls[desc.op].bind(desc)(desc, xs, outs, ws)
        for kern in launches:
            if "sum_splits" in kern.name:
                continue
            regs, stack = kern.resources()
            print((n, c, h, k, s, cl, str(dt)), kern.name, {a: v for a, v in kern.constexprs.items()
                  if a in ("MODE", "BP", "BC", "KT")}, "regs", regs, "stack", stack, flush=True)
            assert kern.name.startswith("_dw2"), (kern.name, "not the tap-unrolled kernel")
            assert stack == 0, (kern.name, "spills", stack)
            if cl and dt == torch.bfloat16:
                ptx = kern.compiled.asm["ptx"]
                assert "ld.global.v4" in ptx or "ld.global.nc.v4" in ptx, (kern.name, "no 16-byte loads")
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_depthwise_kernels_compile_for_sm90_without_spills_and_with_16_byte_loads():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
