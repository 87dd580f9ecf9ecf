"""Convolution and im2col / col2im beyond the generic suite: the torch drop-ins (F.conv*d, F.conv_transpose*d,
F.unfold / F.fold) against torch CPU with autograd, channels-last inputs read in place (no copy) and channels-last
outputs, the Triton kernel's multi-tile / K-tail / split-K paths, frozen weights skipping their gradient pass,
unbatched and zero-size inputs, error messages, and nn.Conv2d under bt.mode().

Sizes are tiny: the Triton kernels run under the interpreter in CI.  Tolerances: float64 everywhere the reference
and the kernels can agree to rounding (a <= 36-term dot product: 1e-12), f32 (1e-5: K <= 40 terms of f32 products)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.device import triton_interpreting
from baracuda._core.sku import Backend
from baracuda.backends.triton.conv import implicit_gemm, plans
from baracuda.testing import assert_close

TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
# tests that watch the Triton launches of CPU tensors: they run where the interpreter runs the kernels on the CPU
on_interpreter = pytest.mark.skipif(not triton_interpreting(), reason="watches the Triton kernels on CPU tensors "
                                    "(TRITON_INTERPRET=1); tests/conv/test_conv_cudnn.py covers the GPU")
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
BF = bt.nn.functional
F64 = 1e-12


def _gen():
    return torch.Generator().manual_seed(0)


def _r(*shape, dtype=torch.float64, g=None):
    return torch.randn(shape, generator=g or _gen(), dtype=dtype)


def _grads(fn, *ts):
    ts = [t.detach().clone().requires_grad_(t.requires_grad) for t in ts]
    y = fn(*ts)
    up = torch.randn(y.shape, generator=torch.Generator().manual_seed(7), dtype=y.dtype)
    y.backward(up)
    return y.detach(), [t.grad for t in ts]


# (torch function name, input, weight, bias?, kwargs): one per direction and rank, grouped / strided / dilated
_CASES = [
    ("conv1d", (2, 4, 9), (6, 2, 3), True, dict(stride=2, padding=1, dilation=2, groups=2)),
    ("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), True, dict(stride=(2, 1), padding=(1, 0))),
    ("conv2d", (1, 4, 6, 5), (4, 1, 3, 3), False, dict(padding="same", dilation=2, groups=4)),   # depthwise
    ("conv3d", (1, 2, 4, 3, 4), (3, 2, 2, 2, 3), True, dict(padding=(1, 0, 1))),
    ("conv_transpose1d", (2, 4, 5), (4, 3, 3), True, dict(stride=3, padding=1, output_padding=2)),
    ("conv_transpose2d", (1, 4, 3, 4), (4, 1, 3, 2), True, dict(stride=2, output_padding=(1, 0), groups=2,
                                                                dilation=(1, 2))),
    ("conv_transpose3d", (1, 2, 2, 3, 2), (2, 2, 2, 2, 2), False, dict(stride=(1, 2, 1), padding=(0, 1, 0))),
]


@pytest.mark.parametrize("prefer", ["reference", "triton"])
@pytest.mark.parametrize("case", _CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(_CASES)])
def test_dropins_match_torch_values_and_autograd_in_f64(case, prefer):
    name, sx, sw, has_b, kw = case
    g = _gen()
    ts = [_r(*sx, g=g).requires_grad_(), _r(*sw, g=g).requires_grad_()]
    if has_b:
        cout = sw[0] if not name.startswith("conv_transpose") else sw[1] * kw.get("groups", 1)
        ts.append(_r(cout, g=g).requires_grad_())
    want_y, want_g = _grads(lambda *a: getattr(F, name)(*a, **kw), *ts)
    with bt.preference(bc.PlanPreference(prefer=[prefer])):
        got_y, got_g = _grads(lambda *a: getattr(BF, name)(*a, **kw), *ts)
    assert_close(got_y.numpy(), want_y.numpy(), F64, F64, f"{name} forward")
    for i, (a, b) in enumerate(zip(got_g, want_g)):
        assert_close(a.numpy(), b.numpy(), F64, F64, f"{name} grad of input {i}")


def test_gradcheck_transposed_conv_finite_differences():
    g = _gen()
    x, w, b = _r(1, 2, 3, 2, g=g), _r(2, 2, 2, 3, g=g), _r(4, g=g)
    ts = [t.requires_grad_() for t in (x, w, b)]
    fn = lambda x, w, b: BF.conv_transpose2d(x, w, b, stride=2, padding=(0, 1), output_padding=1, groups=2)  # noqa
    with bt.preference(TRITON):
        assert torch.autograd.gradcheck(fn, ts, eps=1e-6, atol=1e-8, fast_mode=True)   # (random projections: few calls)


@on_interpreter
@pytest.mark.parametrize("transposed", [False, True])
def test_channels_last_input_is_read_in_place_and_the_output_is_channels_last(transposed, monkeypatch):
    g = _gen()
    x = _r(2, 4, 5, 6, dtype=torch.float32, g=g).contiguous(memory_format=torch.channels_last)
    w = _r(4, 4, 3, 3, dtype=torch.float32, g=g) if not transposed else _r(4, 2, 3, 3, dtype=torch.float32, g=g)
    seen = []
    real = plans.launch

    def spy(mode, geom, img, resp, wt, cfg, prec, **kw):
        seen.append((mode, img, resp))
        return real(mode, geom, img, resp, wt, cfg, prec, **kw)
    monkeypatch.setattr(plans, "launch", spy)
    fn = "conv_transpose2d" if transposed else "conv2d"
    with bt.preference(TRITON):
        y = getattr(BF, fn)(x, w, stride=2, padding=1)
    want = getattr(F, fn)(x, w, stride=2, padding=1)
    assert y.shape == want.shape and y.is_contiguous(memory_format=torch.channels_last), y.stride()
    assert_close(y.numpy(), want.numpy(), 1e-5, 1e-5, fn)
    (mode, img, resp), = seen
    src = resp if transposed else img          # the operand the kernel reads x through
    assert src.data_ptr() == x.data_ptr() and src.stride(1) == 1, "x must be read in place, channels innermost"
    dst = img if transposed else resp
    assert dst.data_ptr() == y.data_ptr() and dst.stride(1) == 1, "the output is written in channels-last order"


@on_interpreter
def test_multi_tile_k_tail_and_split_k_paths_match_reference():
    # 20 channels over 16-wide tiles: two column tiles and a masked K tail; wgrad split over 3 K slots (f32
    # partials in the workspace, summed in slot order); bitwise reruns (deterministic)
    g = _gen()
    x, w, gy = _r(2, 20, 5, 4, g=g), _r(20, 20, 3, 2, g=g), None
    desc = bc.Descriptor.like("convolution", x, w, stride=(1, 2), padding=(1,))
    gy = _r(*desc.outputs[0].shape, g=g)
    bdesc = bc.Descriptor.like("convolution_backward", gy, x, w, stride=(1, 2), padding=(1,))
    with implicit_gemm.forced(bm=16, bn=16, bk=16, split=3):
        y = bc.Plan.select(desc, device="cpu", pref=TRITON).run(x, w)
        plan = bc.Plan.select(bdesc, device="cpu", pref=TRITON)
        assert "splitk3" in plan.sku.route and plan.workspace_size == 8 * 3 * w.numel()   # f64 partials
        dx, dw = plan.run(gy, x, w)
        dx2, dw2 = plan.run(gy, x, w)
    ref = bc.Plan.select(desc, device="cpu", pref=REF).run(x, w)
    rdx, rdw = bc.Plan.select(bdesc, device="cpu", pref=REF).run(gy, x, w)
    assert_close(y.numpy(), ref.numpy(), F64, F64, "forward")
    assert_close(dx.numpy(), rdx.numpy(), F64, F64, "dgrad")
    assert_close(dw.numpy(), rdw.numpy(), F64, F64, "wgrad (split-K)")
    assert torch.equal(dx, dx2) and torch.equal(dw, dw2)


@on_interpreter
def test_frozen_weight_runs_no_weight_gradient_pass(monkeypatch):
    modes = []
    real = plans.launch
    monkeypatch.setattr(plans, "launch", lambda mode, *a, **k: (modes.append(mode), real(mode, *a, **k))[1])
    x = _r(1, 2, 5, 5).requires_grad_()
    w, b = _r(3, 2, 3, 3), _r(3).requires_grad_()
    with bt.preference(TRITON):
        y = BF.conv2d(x, w, b, padding=1)
        y.sum().backward()
    assert modes == [implicit_gemm.CORR, implicit_gemm.SCATTER], modes    # forward, dgrad; no wgrad
    x2 = x.detach().requires_grad_()
    F.conv2d(x2, w, b.detach(), padding=1).sum().backward()
    assert_close(x.grad.numpy(), x2.grad.numpy(), F64, F64, "dx")
    assert_close(b.grad.numpy(), np.full(3, 25.0), F64, F64, "dbias = the sum over N and spatial of grad")


def test_unbatched_and_zero_batch_inputs():
    g = _gen()
    x, w, b = _r(3, 6, 5, g=g), _r(4, 3, 2, 2, g=g), _r(4, g=g)
    assert_close(BF.conv2d(x, w, b).numpy(), F.conv2d(x, w, b).numpy(), F64, F64, "unbatched conv2d")
    xt, wt = _r(4, 5, g=g), _r(4, 2, 3, g=g)
    assert_close(BF.conv_transpose1d(xt, wt, stride=2).numpy(), F.conv_transpose1d(xt, wt, stride=2).numpy(), F64,
                 F64, "unbatched conv_transpose1d")
    z = torch.zeros(0, 3, 6, 5, dtype=torch.float64, requires_grad=True)
    wz = w.clone().requires_grad_()
    with bt.preference(TRITON):
        y = BF.conv2d(z, wz, b, padding=1)
        y.sum().backward()
    assert y.shape == F.conv2d(z, w, b, padding=1).shape and z.grad.shape == z.shape and torch.equal(wz.grad, torch.zeros_like(w))


def test_same_padding_even_kernel_puts_the_extra_zero_high():
    g = _gen()
    x, w = _r(2, 3, 8, g=g), _r(2, 3, 4, g=g)
    with bt.preference(TRITON):
        y = bt.conv1d(x, w, padding="same", dilation=3)
    assert_close(y.numpy(), F.conv1d(x, w, padding="same", dilation=3).numpy(), F64, F64, "same, total 9 = 4 + 5")


@pytest.mark.parametrize("call, err, pattern", [
    (lambda x, w: BF.conv2d(x[0, 0], w), bc.InvalidProblemError, r"argument 'input': expected a 3-d \(unbatched\)"),
    (lambda x, w: BF.conv2d(x, w, stride=2, padding="same"), bc.InvalidProblemError, r"'same' needs stride 1"),
    (lambda x, w: BF.conv2d(x, w, padding=-1), bc.InvalidProblemError, r"argument 'padding': expected non-negative"),
    (lambda x, w: BF.conv2d(x, w, groups=3), bc.InvalidProblemError, r"argument 'groups'"),
    (lambda x, w: BF.conv2d(x[:, :2], w), bc.InvalidProblemError, r"argument 'x': expected 3 channels"),
    (lambda x, w: BF.conv2d(x[..., :2, :2], w), bc.InvalidProblemError, r"expected padded spatial sizes"),
    (lambda x, w: BF.conv_transpose2d(x, w.transpose(0, 1), output_padding=1), bc.InvalidProblemError,
     r"argument 'output_padding': expected values smaller than stride"),
    (lambda x, w: BF.conv_transpose2d(x, w.transpose(0, 1), padding="same"), TypeError, r"argument 'padding'"),
    (lambda x, w: BF.unfold(x[0, 0, 0], 2), bc.InvalidProblemError, r"im2col: argument 'input': expected a 3-d"),
    (lambda x, w: BF.fold(x[0, :, :4, :1].reshape(1, 12, 1), (4, 4), 2), bc.InvalidProblemError,
     r"col2im: argument 'cols': expected 9 blocks"),
])
def test_errors_name_op_argument_expected_and_given(call, err, pattern):
    x, w = _r(2, 3, 5, 5), _r(4, 3, 3, 3)
    with pytest.raises(err, match=pattern):
        call(x, w)


def test_unfold_and_fold_are_adjoint_and_match_torch():
    g = _gen()
    kw = dict(kernel_size=(2, 3), dilation=(1, 2), padding=1, stride=(2, 1))
    x = _r(2, 3, 5, 6, g=g)
    with bt.preference(TRITON):
        cols = BF.unfold(x, **kw)
        v = _r(*cols.shape, g=g)
        back = BF.fold(v, (5, 6), **kw)
        unb = BF.unfold(x[0], **kw)
    assert_close(cols.numpy(), F.unfold(x, **kw).numpy(), 0, 0, "unfold copies values")
    assert_close(back.numpy(), F.fold(v, (5, 6), **kw).numpy(), F64, F64, "fold")
    assert_close(unb.numpy(), cols[0].numpy(), 0, 0, "unbatched unfold")
    # <unfold(x), v> == <x, fold(v)>: each is the other's adjoint (and so the other's backward)
    assert abs(float((cols * v).sum()) - float((x * back).sum())) < 1e-10
    xr = x.clone().requires_grad_()
    with bt.preference(TRITON):
        BF.unfold(xr, **kw).backward(v)
    assert_close(xr.grad.numpy(), back.numpy(), F64, F64, "unfold's gradient is fold")


def test_conv2d_module_under_mode_routes_to_baracuda():
    torch.manual_seed(0)
    m = torch.nn.Conv2d(3, 4, 3, stride=2, padding=1, groups=1).double()
    x = _r(2, 3, 7, 7).requires_grad_()
    want_y, want_g = _grads(m, x)
    want_w = m.weight.grad.clone()
    m.zero_grad()
    with bt.mode(coverage=True) as md:
        got_y, got_g = _grads(m, x)
    assert md.routed.get("torch.conv2d", 0) + md.routed.get("torch.nn.functional.conv2d", 0) == 1, md.summary()
    assert not md.fell_through, md.summary()
    assert_close(got_y.numpy(), want_y.numpy(), F64, F64, "nn.Conv2d forward")
    assert_close(got_g[0].numpy(), want_g[0].numpy(), F64, F64, "nn.Conv2d dx")
    assert_close(m.weight.grad.numpy(), want_w.numpy(), F64, F64, "nn.Conv2d dweight")
