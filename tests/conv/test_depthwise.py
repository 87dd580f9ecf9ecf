"""The Triton depthwise route (backends/triton/conv/depthwise.py): depthwise descriptors choose it, and its forward,
data and weight gradients match the float64 reference for 1-d / 2-d / 3-d, strides, dilation, padding, bias,
transposed depthwise, NCHW and channels-last operands, multi-tile programs and a split weight gradient."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.device import triton_interpreting
from baracuda._core.sku import Backend
from baracuda.backends.triton.conv.depthwise import forced
from baracuda.ops.conv import conv_geometry
from baracuda.testing import assert_close

TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
pytestmark = pytest.mark.skipif(not triton_interpreting(), reason="Triton on the CPU runs under TRITON_INTERPRET=1")

# (x shape, kernel, attrs): C = groups, weight (C, 1, *kernel)
_CASES = [
    ((2, 3, 6, 5), (3, 3), {"padding": (1,)}),
    ((1, 4, 7, 6), (3, 2), {"stride": (2, 1), "dilation": (1, 2), "padding": (2, 1), "channels_last": True}),
    ((2, 3, 9), (3,), {"stride": (2,), "dilation": (2,), "padding": (1,)}),
    ((1, 2, 3, 4, 3), (2, 2, 2), {"padding": (1, 0, 1), "stride": (1, 2, 1)}),
    ((1, 4, 3, 4), (3, 3), {"transposed": True, "stride": (2,), "padding": (1,), "output_padding": (1, 0)}),
]


def _run(desc, pref, arrays):
    plan = bc.Plan.select(desc, device="cpu", pref=pref)
    out = plan.run(*arrays)
    return plan, (out if isinstance(out, tuple) else (out,))


@pytest.mark.parametrize("case", range(len(_CASES)))
def test_depthwise_route_matches_reference_forward_and_both_gradients(case):
    shape, k, attrs = _CASES[case]
    c = shape[1]
    attrs = dict(attrs, groups=c)
    rng = np.random.default_rng(case)
    x = torch.from_numpy(rng.standard_normal(shape)).float()
    w = torch.from_numpy(rng.standard_normal((c, 1) + k)).float()
    b = torch.from_numpy(rng.standard_normal(c)).float()
    if attrs.get("channels_last"):
        x = x.to(memory_format=torch.channels_last)
    fwd = bc.Descriptor.like("convolution", x, w, b, **attrs)
    plan, got = _run(fwd, TRITON, (x, w, b))
    assert "conv-depthwise-direct" in plan.sku.route, plan.sku.route
    _, want = _run(fwd, REF, (x.contiguous().numpy(), w.numpy(), b.numpy()))
    assert_close(got[0], want[0], 2e-5, 2e-5, f"forward {attrs}")
    geom, _ = conv_geometry("convolution", shape, tuple(w.shape), {**bc.get_spec("convolution").defaults, **attrs})
    g = torch.from_numpy(rng.standard_normal(geom.y_storage)).float()
    bw = bc.Descriptor.like("convolution_backward", g, x, w, **attrs)
    with forced(bp=16, split=3):     # several position tiles per pass, a 3-slot split weight gradient
        plan, got = _run(bw, TRITON, (g, x, w))
    assert "split3" in plan.sku.route and "conv-depthwise-direct" in plan.sku.route
    _, want = _run(bw, REF, (g.numpy(), x.contiguous().numpy(), w.numpy()))
    assert_close(got[0], want[0], 4e-5, 1e-4, f"dgrad {attrs}")
    assert_close(got[1], want[1], 4e-5, 1e-4, f"wgrad {attrs}")


def test_channels_last_bf16_dropin_returns_channels_last_and_matches_torch():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 8, 5, 6, generator=g).to(torch.bfloat16).to(memory_format=torch.channels_last)
    w = torch.randn(8, 1, 3, 3, generator=g).to(torch.bfloat16)
    with bt.preference(TRITON):
        y = bt.nn.functional.conv2d(x, w, None, 1, 1, 1, 8)
    want = torch.nn.functional.conv2d(x.double(), w.double(), None, 1, 1, 1, 8)
    assert y.is_contiguous(memory_format=torch.channels_last)
    # bf16 output: one rounding (2^-8 relative) of a 9-term f32 sum of bf16 products
    assert_close(y, want.numpy(), 1.6e-2, 1e-2, "bf16 channels-last depthwise")


def test_grouped_but_not_depthwise_keeps_the_implicit_gemm():
    d = bc.Descriptor.make("convolution", ((1, 4, 5, 5), "f32"), ((8, 1, 3, 3), "f32"), groups=4)   # multiplier 2
    assert "implicit-gemm" in bc.Plan.select(d, device="cpu", pref=TRITON).sku.route
