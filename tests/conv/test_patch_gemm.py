"""The cuBLAS patch-GEMM route of convolution / convolution_backward (backends/nvidia/conv_patch_gemm.py: kernel ==
stride, no padding / dilation / groups): its bound runs on CPU tensors (torch's CPU GEMMs stand in for cuBLAS)
against the float64 NumPy reference, channels-last and channels-first images and weights, with and without bias,
images with remainder rows / columns, each gradient mask; and what it refuses."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from baracuda._core.oracle import reference_f64  # noqa: E402
from baracuda._core.spec import Descriptor  # noqa: E402
from baracuda.backends.nvidia import conv_patch_gemm as pg  # noqa: E402

CL = {4: torch.channels_last, 5: torch.channels_last_3d}


def _t(a, cl):
    t = torch.tensor(a)
    return t.to(memory_format=CL[t.dim()]) if cl and t.dim() in CL else t


def _attrs(k, nd, channels_last):
    return {"stride": (k,) * nd, "padding": (0,) * nd, "dilation": (1,) * nd, "transposed": False,
            "output_padding": (0,) * nd, "groups": 1, "channels_last": channels_last}


CASES = [  # (x shape, w shape, kernel, bias)
    ((2, 3, 8, 8), (5, 3, 4, 4), 4, True),
    ((2, 3, 10, 9), (4, 3, 4, 4), 4, False),      # remainder rows / columns: in no patch
    ((1, 2, 6, 6, 4), (3, 2, 2, 2, 2), 2, True),   # 3-d
]


@pytest.mark.parametrize("x_cl", [False, True])
@pytest.mark.parametrize("w_cl", [False, True])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_forward_and_backward_match_the_reference(case, x_cl, w_cl):
    xs, ws, k, has_bias = CASES[case]
    nd = len(xs) - 2
    rng = np.random.default_rng(case)
    x, w, b = rng.standard_normal(xs), rng.standard_normal(ws), rng.standard_normal(ws[0])
    cl_attr = (x_cl or w_cl) and nd >= 2
    attrs = _attrs(k, nd, cl_attr)
    ins = [x, w] + ([b] if has_bias else [])
    desc = Descriptor.make("convolution", *[(a.shape, "f64") for a in ins], **attrs)
    assert pg.supports(desc) is None
    (want,) = reference_f64(desc, ins)
    run = pg._bind(desc, None)
    got = run.produce([_t(x, x_cl), _t(w, w_cl)] + ([torch.tensor(b)] if has_bias else []))[0]
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-12)
    gy = rng.standard_normal(want.shape)
    for mask in ((True, True), (True, False), (False, True)):
        bdesc = Descriptor.make("convolution_backward", (gy.shape, "f64"), (x.shape, "f64"), (w.shape, "f64"),
                                **attrs, output_mask=mask)
        want_b = reference_f64(bdesc, [gy, x, w])
        outs = pg._bind(bdesc, None).produce([torch.tensor(gy), _t(x, x_cl), _t(w, w_cl)])
        for o, e in zip(outs, want_b):
            np.testing.assert_allclose(o.numpy(), e, rtol=1e-12, atol=1e-12, err_msg=str(mask))
        if cl_attr:   # a channels-last convolution's gradients come channels-last
            assert all(o.is_contiguous(memory_format=CL[o.dim()]) for o in outs)


def test_given_outputs_of_any_layout_are_written():
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((2, 3, 8, 8)), rng.standard_normal((4, 3, 4, 4))
    gy = rng.standard_normal((2, 4, 2, 2))
    bdesc = Descriptor.make("convolution_backward", (gy.shape, "f64"), (x.shape, "f64"), (w.shape, "f64"),
                            **_attrs(4, 2, False), output_mask=(True, True))
    want = reference_f64(bdesc, [gy, x, w])
    outs = [torch.empty(8, 8, 3, 2, dtype=torch.float64).permute(3, 2, 0, 1),      # odd strides
            torch.empty(4, 4, 4, 3, dtype=torch.float64).permute(0, 3, 1, 2)]
    pg._bind(bdesc, None)(bdesc, [torch.tensor(gy), torch.tensor(x), torch.tensor(w)], outs, None)
    for o, e in zip(outs, want):
        np.testing.assert_allclose(o.numpy(), e, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs,why", [
    (dict(stride=(2, 2)), "kernel != stride"),
    (dict(padding=(1, 1)), "kernel != stride"),
    (dict(dilation=(2, 2)), "kernel != stride"),
    (dict(groups=3), "grouped"),
])
def test_what_is_not_a_patch_embedding_is_refused_with_its_reason(attrs, why):
    a = dict(_attrs(4, 2, False), **attrs)
    w = (6, 1, 4, 4) if a["groups"] == 3 else (6, 3, 4, 4)
    desc = Descriptor.make("convolution", ((2, 3, 16, 16), "bf16"), (w, "bf16"), **a)
    assert why in pg.supports(desc)
    one = Descriptor.make("convolution", ((2, 3, 8, 8), "bf16"), ((4, 3, 1, 1), "bf16"), **_attrs(1, 2, False))
    assert "1x1" in pg.supports(one)


def test_route_names_the_gemm():
    desc = Descriptor.make("convolution", ((2, 3, 32, 32), "bf16"), ((8, 3, 16, 16), "bf16"), ((8,), "bf16"),
                           **_attrs(16, 2, True))
    assert pg._route(desc) == "cublas:conv-patch-gemm[16x16,fprop+bias]"


@pytest.mark.parametrize("cl", [False, True])
def test_on_the_gpu_the_plan_selects_the_patch_gemm_and_matches_the_reference(cl):
    """(GPU only) a bf16 patch embedding through Plan selection: the cuBLAS route, values and both gradients against
    the float64 reference (bf16 inputs, K = 3 x 8 x 8 = 192 products accumulated in f32: ~1e-2 relative)."""
    import baracuda as bc
    from baracuda.testing import test_device

    dev = test_device()
    if dev.type != "cuda":
        pytest.skip("the cuBLAS route runs on CUDA devices")
    rng = np.random.default_rng(9)
    x, w, b = rng.standard_normal((2, 3, 32, 32)), rng.standard_normal((16, 3, 8, 8)), rng.standard_normal(16)
    attrs = _attrs(8, 2, cl)
    desc = Descriptor.make("convolution", (x.shape, "bf16"), (w.shape, "bf16"), (b.shape, "bf16"), **attrs)
    plan = bc.Plan.select(desc, dev)
    assert "conv-patch-gemm" in plan.sku.route, plan.sku
    tb = [_t(a, cl).to(torch.bfloat16).cuda() for a in (x, w)] + [torch.tensor(b).to(torch.bfloat16).cuda()]
    (want,) = reference_f64(Descriptor.make("convolution", (x.shape, "f64"), (w.shape, "f64"), (b.shape, "f64"),
                                            **attrs), [t.double().cpu().numpy() for t in tb])
    np.testing.assert_allclose(plan.run(*tb).double().cpu().numpy(), want, rtol=2e-2, atol=2e-1)
