"""Pooling semantics the generic suite cannot express: torch's indices and NaN / tie rules, -inf padding, ceil_mode
edge windows, channels-last in and out (Triton, no copy), torch's fractional draw, errors, nn modules under mode().
Shapes are tiny: the Triton cases run under the interpreter."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.device import triton_interpreting

TRITON = pytest.mark.skipif(not triton_interpreting(), reason="Triton kernels run on the CPU only under TRITON_INTERPRET=1")


def _run(op, *xs, backend="reference", **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    plan = bc.Plan.select(desc, "cpu", bc.PlanPreference(prefer=(backend,)))
    assert plan.sku.backend.value == backend
    return plan.run(*xs)


BACKENDS = ["reference", pytest.param("triton", marks=TRITON)]


@pytest.mark.parametrize("backend", BACKENDS)
def test_max_pool_nan_wins_ties_keep_the_first_and_padding_never_wins(backend):
    x = torch.tensor([[[[-5., -5., 2., 2.], [float("nan"), -5., 2., 1.], [-9., -9., -9., -9.],
                        [-9., float("nan"), -9., float("nan")]]]], dtype=torch.float64)
    y, i = _run("max_pool2d", x, backend=backend, kernel_size=2, stride=2, padding=1)
    ty, ti = F.max_pool2d(x, 2, 2, 1, return_indices=True)
    assert torch.equal(i, ti)                                  # torch's flat per-plane offsets, same winners
    assert torch.allclose(y, ty, equal_nan=True)
    # all-negative windows at the border: padding (-inf) never wins, the value does
    assert y[0, 0, 0, 0] == -5.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_ceil_mode_edge_windows_and_avg_divisors_match_torch(backend):
    x = torch.randn(1, 2, 5, 6, dtype=torch.float64)
    for cip in (True, False):
        y = _run("avg_pool2d", x, backend=backend, kernel_size=3, stride=2, padding=1, ceil_mode=True,
                 count_include_pad=cip)
        # f64 accumulation of <= 9 values: agreement to rounding
        torch.testing.assert_close(y, F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=cip), rtol=1e-12,
                                   atol=1e-12)
    y, i = _run("max_pool1d", x[0], backend=backend, kernel_size=2, stride=2, ceil_mode=True)
    ty, ti = F.max_pool1d(x[0], 2, 2, ceil_mode=True, return_indices=True)
    assert y.shape == ty.shape == (2, 5, 3) and torch.equal(i, ti) and torch.equal(y, ty)


@TRITON
@pytest.mark.parametrize("op,kw", [("max_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                                   ("avg_pool2d", dict(kernel_size=3, stride=2, padding=1)),
                                   ("adaptive_avg_pool2d", dict(output_size=(1, 1)))])
def test_channels_last_is_read_in_place_and_the_output_stays_channels_last(op, kw):
    x = torch.randn(2, 4, 6, 5, dtype=torch.float32).to(memory_format=torch.channels_last).requires_grad_()
    with bc.preference(bc.PlanPreference(prefer=["triton"])):
        y = getattr(bt.nn.functional, op)(x, **kw)
        y.sum().backward()
    ref = getattr(F, op)(x.detach().clone().requires_grad_(), **kw)
    assert y.is_contiguous(memory_format=torch.channels_last) and y.stride() == ref.stride()   # torch's rule
    # f32 window sums of <= 9 (30 for the adaptive mean) values
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-6)
    xr = x.detach().clone().requires_grad_()
    getattr(F, op)(xr, **kw).sum().backward()
    torch.testing.assert_close(x.grad, xr.grad, rtol=1e-5, atol=1e-6)


def test_gradients_match_torch_autograd_with_ties():
    # ties: torch sends the gradient to the first maximum of each window; the gather backward does the same
    x = torch.tensor([[[1., 3., 3., 0., 3.], [3., 2., 3., 1., 0.], [0., 3., 3., 2., 1.]]],
                     dtype=torch.float64, requires_grad=True)
    for fn, kw in ((F.max_pool2d, dict(kernel_size=2, stride=1)), (F.adaptive_max_pool2d, dict(output_size=(2, 3))),
                   (F.avg_pool2d, dict(kernel_size=2, stride=1, padding=1, count_include_pad=False)),
                   (F.lp_pool2d, dict(norm_type=2.0, kernel_size=2))):
        g = torch.randn_like(fn(x, **kw))
        want, = torch.autograd.grad(fn(x, **kw), x, g)
        got, = torch.autograd.grad(getattr(bt.nn.functional, fn.__name__)(x, **kw), x, g)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_fractional_draws_torchs_samples():
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    torch.manual_seed(5)
    want = F.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True)
    torch.manual_seed(5)
    got = bt.nn.functional.fractional_max_pool2d(x, 2, output_size=(4, 5), return_indices=True)
    assert torch.equal(got[1], want[1]) and torch.equal(got[0], want[0])


def test_unpool_inverts_max_pool_and_its_gradient_gathers():
    x = torch.randn(1, 2, 4, 6, dtype=torch.float64)
    y, i = F.max_pool2d(x, 2, return_indices=True)
    y.requires_grad_()
    got = bt.nn.functional.max_unpool2d(y, i, 2)
    want = F.max_unpool2d(y, i, 2)
    assert torch.equal(got, want)
    g = torch.randn_like(want)
    torch.testing.assert_close(torch.autograd.grad(got, y, g)[0], torch.autograd.grad(want, y, g)[0])


def test_zero_size_batch():
    x = torch.randn(0, 3, 5, 5)
    assert bt.nn.functional.max_pool2d(x, 2).shape == (0, 3, 2, 2)
    assert bt.nn.functional.adaptive_avg_pool2d(x, 1).shape == (0, 3, 1, 1)


@pytest.mark.parametrize("call,match", [
    (lambda x: bt.nn.functional.max_pool2d(x, 2, padding=2), r"max_pool2d: argument 'padding': expected at most half"),
    (lambda x: bt.nn.functional.avg_pool2d(x, 9), r"avg_pool2d: argument 'input': expected spatial sizes giving an "
                                                  r"output of at least 1"),
    (lambda x: bt.nn.functional.max_pool2d(x, 0), r"max_pool2d: argument 'kernel_size': expected positive ints"),
    (lambda x: bt.nn.functional.max_pool2d(x, (2, 2, 2)), r"argument 'kernel_size': expected an int or a tuple of 2"),
    (lambda x: bt.nn.functional.adaptive_max_pool2d(x, -1), r"argument 'output_size': expected non-negative"),
    (lambda x: bt.nn.functional.fractional_max_pool2d(x, 3, output_size=6), r"argument 'output_size': expected "
                                                                            r"output_size \+ kernel_size - 1"),
])
def test_errors_name_op_argument_and_expectation(call, match):
    with pytest.raises(bc.InvalidProblemError, match=match):
        call(torch.randn(1, 2, 6, 6))


def test_nn_modules_route_under_mode():
    x = torch.randn(2, 3, 7, 7, dtype=torch.float64)
    mods = (torch.nn.MaxPool2d(3, 2, 1), torch.nn.AdaptiveAvgPool2d(1))
    with bt.mode(strict=True):     # strict: a call not run by baracuda raises
        got = [m(x) for m in mods]
    for m, g in zip(mods, got):
        torch.testing.assert_close(g, m(x), rtol=1e-12, atol=1e-12)
    assert np.isfinite(got[0].numpy()).all()


@TRITON
@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("channels_last", [False, True])
def test_global_average_head_is_the_spatial_mean(nd, channels_last):
    """Adaptive average pooling to 1 x ... x 1 (a CNN's head) runs as the reduction family's mean over the spatial
    dims and its backward as mean_backward's broadcast (the route says so); values and gradient as torch's, in
    NCHW and channels-last (2-d / 3-d) alike."""
    g = torch.Generator().manual_seed(nd)
    x = torch.randn((2, 5) + (4, 3, 2)[:nd], generator=g, dtype=torch.float64)
    if channels_last and nd > 1:
        x = x.to(memory_format=torch.channels_last if nd == 2 else torch.channels_last_3d)
    op = f"adaptive_avg_pool{nd}d"
    desc = bc.Descriptor.like(op, x, output_size=(1,) * nd)
    plan = bc.Plan.select(desc, "cpu", bc.PlanPreference(prefer=("triton",)))
    assert "global mean" in plan.sku.route, plan.sku.route
    want = getattr(F, op)(x, 1)
    torch.testing.assert_close(plan.run(x), want, rtol=1e-12, atol=1e-12)
    up = torch.randn(want.shape, generator=g, dtype=torch.float64)
    bdesc = bc.Descriptor.like("avg_pool_backward", up, x, nd=nd, window="adaptive")
    bplan = bc.Plan.select(bdesc, "cpu", bc.PlanPreference(prefer=("triton",)))
    assert "global mean" in bplan.sku.route, bplan.sku.route
    xr = x.clone().requires_grad_()
    getattr(F, op)(xr, 1).backward(up)
    torch.testing.assert_close(bplan.run(up, x), xr.grad, rtol=1e-12, atol=1e-12)


@TRITON
@pytest.mark.parametrize("channels_last", [False, True])
@pytest.mark.parametrize("op", ["max_pool2d", "avg_pool2d"])
def test_windows_past_the_tile_kernels_unroll_take_the_nd_kernels(op, channels_last):
    """A 9 x 9 window (81 taps, past the 64 the 2-d tile kernels unroll; 9 backward candidates a dim squared, past
    27) runs on the N-d kernels, in both layouts; values and gradients as torch's (float64)."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(1, 3, 20, 19, generator=g, dtype=torch.float64)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    kw = dict(kernel_size=9, stride=1, padding=4)
    xb, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    with bc.preference(bc.PlanPreference(prefer=["triton"])):
        y = getattr(bt.nn.functional, op)(xb, **kw)
        y.backward(torch.ones_like(y))
    ref = getattr(F, op)(xt, **kw)
    ref.backward(torch.ones_like(ref))
    torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(xb.grad, xt.grad, rtol=1e-12, atol=1e-12)


@TRITON
@pytest.mark.parametrize("channels_last", [False, True])
def test_tile_kernels_int64_offsets(monkeypatch, channels_last):
    """The tile kernels' int64 index path (taken past 2^31 elements) on a small problem, forced: max pooling's values,
    indices and gradient as torch's."""
    from baracuda.backends.triton.pool import pool as P

    monkeypatch.setattr(P, "_i64", lambda *ts: True)
    g = torch.Generator().manual_seed(64)
    x = torch.randn(2, 3, 9, 8, generator=g, dtype=torch.float64)
    if channels_last:
        x = x.to(memory_format=torch.channels_last)
    xb, xt = x.clone().requires_grad_(), x.clone().requires_grad_()
    with bc.preference(bc.PlanPreference(prefer=["triton"])):
        y, i = bt.nn.functional.max_pool2d(xb, 3, 2, 1, return_indices=True)
        y.backward(torch.ones_like(y))
    yt, it = F.max_pool2d(xt, 3, 2, 1, return_indices=True)
    yt.backward(torch.ones_like(yt))
    torch.testing.assert_close(y, yt)
    assert torch.equal(i, it)
    torch.testing.assert_close(xb.grad, xt.grad)
