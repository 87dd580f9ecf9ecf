"""The Triton depthwise route (backends/triton/conv/depthwise.py): depthwise descriptors choose it, and its forward,
data and weight gradients match the float64 reference for 1-d / 2-d / 3-d, strides, dilation, padding (asymmetric
'same' included), bias, transposed depthwise, NCHW and channels-last operands, channel counts the tile does not
divide, multi-tile programs and a split weight gradient, on both kernel sets (tap-unrolled 1-d / 2-d, generic), in
every float dtype and with int64 offsets; the split weight gradient is bit-stable."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.device import triton_interpreting
from baracuda._core.dtypes import as_dtype
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
    # 7 x 7 (ConvNeXt) over 6 channels: an 8-channel tile with masked lanes; 49 taps padded to 64 in the wgrad
    ((1, 6, 9, 8), (7, 7), {"padding": (3,), "channels_last": True}),
    ((2, 5, 7, 6), (4, 2), {"padding": "same", "dilation": (1, 2)}),   # asymmetric: 1 + 2 rows, 1 + 1 columns
    ((1, 3, 5, 4), (3, 3), {"transposed": True, "stride": (2,), "dilation": (2,), "padding": (2,),
                            "channels_last": True}),
]
_PATHS = {"unrolled": {}, "generic": {"unrolled": False}}


def _run(desc, pref, arrays):
    plan = bc.Plan.select(desc, device="cpu", pref=pref)
    out = plan.run(*arrays)
    return plan, (out if isinstance(out, tuple) else (out,))


def _arrays(case, dtype):
    """(x, w, b, g, attrs) of a case in ``dtype`` (values drawn in float64, so every dtype sees the same problem)."""
    shape, k, attrs = _CASES[case]
    c = shape[1]
    attrs = dict(attrs, groups=c)
    rng = np.random.default_rng(case)
    x, w, b = (torch.from_numpy(rng.standard_normal(s)).to(dtype) for s in (shape, (c, 1) + k, (c,)))
    if attrs.get("channels_last"):
        x = x.to(memory_format=torch.channels_last) if x.dim() == 4 else x
    geom, _ = conv_geometry("convolution", shape, tuple(w.shape), {**bc.get_spec("convolution").defaults, **attrs})
    g = torch.from_numpy(rng.standard_normal(geom.y_storage)).to(dtype)
    return x, w, b, g, attrs


def _np(t):
    return t.contiguous().double().numpy()


def _check(case, dtype, force):
    """The Triton route of ``case`` under ``force`` against the float64 reference: forward (+ bias), then both
    gradients with several position tiles per pass and a 3-slot split weight gradient."""
    x, w, b, g, attrs = _arrays(case, dtype)
    dt = as_dtype(dtype)
    fwd = bc.Descriptor.like("convolution", x, w, b, **attrs)
    with forced(**force):
        plan, got = _run(fwd, TRITON, (x, w, b))
    assert "conv-depthwise-direct" in plan.sku.route, plan.sku.route
    _, want = _run(bc.Descriptor.like("convolution", *(t.double() for t in (x, w, b)), **attrs), REF,
                   (_np(x), _np(w), _np(b)))
    spec = bc.get_spec("convolution")
    assert_close(got[0], want[0], *spec.tol(dt), f"forward {dtype} {attrs} {force}")
    bw = bc.Descriptor.like("convolution_backward", g, x, w, **attrs)
    with forced(bp=16, split=3, **force):     # several position tiles per pass, a 3-slot split weight gradient
        plan, got = _run(bw, TRITON, (g, x, w))
    assert "split3" in plan.sku.route and "conv-depthwise-direct" in plan.sku.route
    _, want = _run(bc.Descriptor.like("convolution_backward", *(t.double() for t in (g, x, w)), **attrs), REF,
                   (_np(g), _np(x), _np(w)))
    assert_close(got[0], want[0], *spec.grad_tol(dt), f"dgrad {dtype} {attrs} {force}")
    assert_close(got[1], want[1], *spec.grad_tol(dt), f"wgrad {dtype} {attrs} {force}")
    return plan


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("case", range(len(_CASES)))
def test_depthwise_route_matches_reference_forward_and_both_gradients(case, path):
    plan = _check(case, torch.float32, _PATHS[path])
    unrolled = path == "unrolled" and len(_CASES[case][0]) < 5       # 3-d problems always take the generic kernels
    assert ("taps-unrolled" in plan.sku.route) == unrolled, plan.sku.route


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("case", [1, 5])
def test_depthwise_route_matches_reference_in_every_float_dtype(case, dtype):
    _check(case, dtype, {})


@pytest.mark.parametrize("case", [1, 6])
def test_int64_offsets_give_the_int32_results(case):
    _check(case, torch.float32, {"i64": True})


def test_unrolled_forward_is_bitwise_the_generic_one_and_the_split_wgrad_is_bit_stable():
    x, w, b, g, attrs = _arrays(5, torch.float32)
    fwd = bc.Descriptor.like("convolution", x, w, b, **attrs)
    outs = []
    for force in _PATHS.values():   # the same products summed in the same tap order, f32
        with forced(**force):
            outs.append(_run(fwd, TRITON, (x, w, b))[1][0])
    assert torch.equal(outs[0], outs[1])
    bw = bc.Descriptor.like("convolution_backward", g, x, w, **attrs)
    with forced(bp=16, split=3):
        runs = [_run(bw, TRITON, (g, x, w))[1] for _ in range(2)]
    assert all(torch.equal(a, b) for a, b in zip(*runs))


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
