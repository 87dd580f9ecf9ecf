"""Offline sm_90 compile of the pooling plans with their own host code and launch specialisation: max / avg / lp
forward and the max / avg backward, bf16 / f32 / f64, the ResNet stem's 3x3 s2 window, an adaptive 28 -> 7 window
(run as the sliding 4 x 4 s4) and the channels-last global head 7 x 7 -> 1, NCHW (width lanes) and channels-last
(channel lanes): each launches a 2-d tile kernel (tile.py), and no kernel spills; the NCHW global head stays the
reduction family's mean."""
from __future__ import annotations

import pytest

from baracuda.testing.sm90 import failure_report, run_isolated, unavailable

_SCRIPT = r'''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.testing.sm90 import offline_launches

CL = torch.channels_last
W = dict(kernel_size=(3, 3), stride=(2, 2), padding=(1, 1))
cases = []
for dt in (torch.bfloat16, torch.float32, torch.float64):
    for fmt in (torch.contiguous_format, CL):
        x = torch.empty(64, 64, 112, 112, dtype=dt).to(memory_format=fmt)
        g = torch.empty(64, 64, 56, 56, dtype=dt).to(memory_format=fmt)
        j = torch.empty(64, 64, 56, 56, dtype=torch.int64).to(memory_format=fmt)
        cases += [("max_pool2d", [x], W), ("avg_pool2d", [x], W),
                  ("lp_pool2d", [x], dict(norm_type=2.0, kernel_size=(3, 3), stride=(2, 2))),
                  ("max_pool_backward", [g, x, j], dict(W, nd=2, dilation=(1, 1))),
                  ("avg_pool_backward", [g, x], dict(W, nd=2))]
        x = torch.empty(64, 512, 28, 28, dtype=dt).to(memory_format=fmt)
        g = torch.empty(64, 512, 7, 7, dtype=dt).to(memory_format=fmt)
        cases += [("adaptive_avg_pool2d", [x], dict(output_size=(7, 7))),
                  ("avg_pool_backward", [g, x], dict(nd=2, window="adaptive"))]
    # ResNet's global-average head, channels-last: 49 unrolled taps (NCHW takes the spatial mean instead)
    x = torch.empty(64, 2048, 7, 7, dtype=dt).to(memory_format=CL)
    cases += [("adaptive_avg_pool2d", [x], dict(output_size=(1, 1))),
              ("avg_pool_backward", [torch.empty(64, 2048, 1, 1, dtype=dt).to(memory_format=CL), x],
               dict(nd=2, window="adaptive"))]
bad = []
for op, xs, attrs in cases:
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch).to(memory_format=xs[-1].is_contiguous() and
                                                          torch.contiguous_format or CL) for o in desc.outputs]
    with offline_launches() as launches:
        impl.bind(desc)(desc, xs, outs, None)
    want = "_pool2d_bw" if op.endswith("backward") else "_pool2d_fw"
    assert [k.name for k in launches] == [want], (op, launches)
    regs, stack = launches[0].resources()
    print(op, xs[0].dtype, xs[0].is_contiguous(), "regs", regs, "stack", stack, flush=True)
    bad += [(op, xs[0].dtype, regs, stack)] if stack else []
assert not bad, bad
# the NCHW global head stays the reduction family's spatial mean and its broadcast backward
x = torch.empty(64, 2048, 7, 7, dtype=torch.bfloat16)
for op, xs, attrs, want in (("adaptive_avg_pool2d", [x], dict(output_size=(1, 1)), "_row_kernel"),
                            ("avg_pool_backward", [torch.empty(64, 2048, 1, 1, dtype=torch.bfloat16), x],
                             dict(nd=2, window="adaptive"), "_expand_kernel")):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
    outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
    with offline_launches() as launches:
        impl.bind(desc)(desc, xs, outs, torch.empty(max(impl.workspace(desc), 8), dtype=torch.uint8))
    assert [k.name for k in launches] == [want], (op, launches)
print("ok")
'''


@pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))
def test_pool_tile_kernels_compile_for_sm90_without_spills():
    r = run_isolated(_SCRIPT, timeout=900)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
