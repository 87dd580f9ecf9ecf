"""torchvision.ops beyond the generic suite: roi_align's reference against a direct port of torchvision's per-sample
loop (the reference uses separable per-axis matrices), roi_pool's bins, ties, NaN and empty bins, the Triton kernels
on channels-last inputs, atomic backwards and multi-block NMS sweeps, the drop-ins' torchvision forms (list of
boxes, roi_pool's single output, nms's keep[:count]), and torchvision itself where it imports."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
import baracuda.torch.vision as tvo
from baracuda._core.device import triton_interpreting
from baracuda._core.sku import Backend
from baracuda.ops.image_nms import random_boxes
from baracuda.ops.image_roi import random_rois
from baracuda.testing import assert_close

TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
needs_interp = pytest.mark.skipif(not triton_interpreting(), reason="Triton on the CPU runs under TRITON_INTERPRET=1")


def _ref(op, *arrays, **attrs):
    return bc.Plan.select(bc.Descriptor.like(op, *arrays, **attrs), device="cpu", pref=REF).run(*arrays)


# -- roi_align: torchvision's algorithm, one sample at a time -------------------------------------------------------
def _bilinear(plane, y, x):
    h, w = plane.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return 0.0
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    hy, hx = 1 - ly, 1 - lx
    return hy * hx * plane[yl, xl] + hy * lx * plane[yl, xh] + ly * hx * plane[yh, xl] + ly * lx * plane[yh, xh]


def _roi_align_loop(x, rois, ph, pw, scale, ratio, aligned):
    out = np.zeros((len(rois), x.shape[1], ph, pw))
    off = 0.5 if aligned else 0.0
    for k, (b, x1, y1, x2, y2) in enumerate(rois):
        sw, sh, ew, eh = x1 * scale - off, y1 * scale - off, x2 * scale - off, y2 * scale - off
        rw, rh = ew - sw, eh - sh
        if not aligned:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        bh, bw = rh / ph, rw / pw
        gh = ratio if ratio > 0 else math.ceil(rh / ph)
        gw = ratio if ratio > 0 else math.ceil(rw / pw)
        count = max(gh * gw, 1)
        for c in range(x.shape[1]):
            for i in range(ph):
                for j in range(pw):
                    acc = 0.0
                    for iy in range(gh):
                        yy = sh + i * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            acc += _bilinear(x[int(b), c], yy, sw + j * bw + (ix + 0.5) * bw / gw)
                    out[k, c, i, j] = acc / count
    return out


@pytest.mark.parametrize("ratio,aligned,scale", [(2, False, 1.0), (-1, True, 0.5), (0, False, 2.0), (1, True, 1.0)])
def test_roi_align_reference_is_torchvisions_sampling_loop(ratio, aligned, scale):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 5, 7))
    rois = random_rois(rng, 6, 2, 5, 7, scale)
    rois[0, 1:] = (2.0 / scale, 1.0 / scale, 2.2 / scale, 1.1 / scale)   # a roi below one pixel (clamped unless aligned)
    rois[1, 1:] = (-3.0 / scale, -2.0 / scale, 9.0 / scale, 8.0 / scale)  # past every border
    got = _ref("roi_align", x, rois, output_size=(3, 2), spatial_scale=scale, sampling_ratio=ratio, aligned=aligned)
    assert_close(got, _roi_align_loop(x, rois, 3, 2, scale, ratio, aligned), 1e-12, 1e-12, "roi_align reference")


def test_roi_pool_bins_first_maximum_nan_and_empty():
    x = np.zeros((1, 1, 4, 4))
    x[0, 0] = [[1, 5, 5, 0], [5, 2, 0, np.nan], [0, 0, 0, 0], [-1, -1, -1, -1]]
    rois = np.array([[0, 0, 0, 3, 1],        # rows 0-1, cols 0-3 as 1 x 2 bins: ties -> the first in row-major order
                     [0, 3, 1, 3, 1],        # the one NaN element: never wins -> -FLT_MAX, argmax -1
                     [0, 6, 0, 9, 3],        # entirely right of the image: empty bins -> 0, -1
                     [1, 0, 0, 3, 3]])       # batch index out of range -> 0, -1
    out, arg = _ref("roi_pool", x, rois.astype(float), output_size=(1, 2))
    assert arg[0, 0, 0].tolist() == [1, 2] and out[0, 0, 0].tolist() == [5, 5]
    assert arg[1, 0, 0].tolist() == [-1, -1] and np.all(out[1] == -np.finfo(np.float32).max)
    assert np.all(arg[2:] == -1) and np.all(out[2:] == 0)


# -- Triton (interpreter): channels-last, backward through the drop-ins --------------------------------------------
@needs_interp
@pytest.mark.parametrize("op", ["roi_align", "roi_pool"])
def test_triton_channels_last_and_backward_match_reference(op):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 6, 5, generator=g).to(memory_format=torch.channels_last).requires_grad_()
    rois = torch.from_numpy(random_rois(np.random.default_rng(2), 5, 2, 6, 5, 0.5)).float()
    args = (x, rois, (2, 3), 0.5) + ((0, True) if op == "roi_align" else ())
    fn = getattr(tvo, op)
    with bt.preference(TRITON):
        y = fn(*args)
        (dx,) = torch.autograd.grad(y, x, torch.ones_like(y))
    xr = x.detach().contiguous().double().requires_grad_()
    with bt.preference(REF):
        yr = fn(xr, rois.double(), *args[2:])
        (dxr,) = torch.autograd.grad(yr, xr, torch.ones_like(yr))
    assert_close(y, yr.detach().numpy(), 1e-5, 1e-5, f"{op} channels-last forward")
    assert_close(dx, dxr.numpy(), 1e-5, 1e-5, f"{op} backward")


@needs_interp
@pytest.mark.parametrize("op", ["nms", "batched_nms"])
def test_triton_nms_sweeps_several_blocks_like_the_reference(op):
    rng = np.random.default_rng(3)
    boxes, scores = random_boxes(rng, 130)     # 3 blocks of 64: removals carried across blocks
    scores[10:20] = scores[5]                  # a run of ties: the stable order decides
    ins = (boxes.astype(np.float32), scores.astype(np.float32)) + ((rng.integers(0, 4, 130),) if op != "nms" else ())
    d = bc.Descriptor.like(op, *ins, iou_threshold=0.3)
    keep, count = bc.Plan.select(d, device="cpu", pref=TRITON).run(*[torch.from_numpy(a) for a in ins])
    want, n = _ref(op, *ins, iou_threshold=0.3)
    assert int(count) == int(n) and np.array_equal(keep.numpy(), want)
    assert 20 < int(n) < 130


def test_nms_order_suppression_and_ties():
    boxes = np.array([[0, 0, 10, 10], [1, 1, 11, 11], [0, 0, 10, 10], [20, 20, 30, 30], [0, 0, 10, 10.]])
    scores = np.array([0.5, 0.9, 0.5, 0.5, 0.1])
    # IoU(0, 1) = 81 / 119 = 0.68: box 1 (0.9) first removes 0 and 2 at 0.5, not at 0.7; the tie 0 / 2 / 3 keeps
    # index order
    keep, n = _ref("nms", boxes, scores, iou_threshold=0.5)
    assert keep[:int(n)].tolist() == [1, 3]
    keep, n = _ref("nms", boxes, scores, iou_threshold=0.7)
    assert keep[:int(n)].tolist() == [1, 0, 3] and keep[int(n):].tolist() == [-1, -1]
    keep, n = _ref("batched_nms", boxes, scores, np.array([0, 1, 0, 0, 1]), iou_threshold=0.5)
    assert keep[:int(n)].tolist() == [1, 0, 3]


# -- the drop-ins' torchvision forms ---------------------------------------------------------------------------------
def test_dropins_take_box_lists_and_return_torchvisions_results():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 6, 6, generator=g, dtype=torch.float64)
    b0, b1 = torch.tensor([[0.5, 1.0, 4.0, 5.0]]), torch.tensor([[1.0, 0.0, 5.5, 3.0], [2.0, 2.0, 3.0, 4.0]])
    rois = torch.cat([torch.tensor([[0.0], [1.0], [1.0]]), torch.cat([b0, b1])], 1).double()
    assert torch.equal(tvo.roi_align(x, [b0.double(), b1.double()], 2, 1.0, 2, True), tvo.roi_align(x, rois, 2, 1.0, 2, True))
    y = tvo.roi_pool(x, [b0.double(), b1.double()], (2, 3))
    assert isinstance(y, torch.Tensor) and y.shape == (3, 3, 2, 3) and torch.equal(y, tvo.roi_pool(x, rois, (2, 3)))
    keep = tvo.nms(torch.tensor([[0., 0, 4, 4], [0, 0, 4, 4.2], [5, 5, 6, 6]]), torch.tensor([0.3, 0.6, 0.1]), 0.5)
    assert keep.dtype == torch.int64 and keep.tolist() == [1, 2]
    with pytest.raises(bc.InvalidProblemError, match="roi_align: argument 'boxes'"):
        tvo.roi_align(x, [torch.zeros(2, 5)], 2)
    with pytest.raises(bc.DTypeMismatchError, match="argument 'rois'"):
        tvo.roi_align(x, rois.float(), 2)


# -- torchvision itself (installed on the GPU machine, not in the CPU CI) --------------------------------------------
def test_against_torchvision():
    tv = pytest.importorskip("torchvision.ops")
    rng = np.random.default_rng(5)
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(5), requires_grad=True)
    rois = torch.from_numpy(random_rois(rng, 7, 2, 9, 8, 0.5))
    for kw in (dict(output_size=(3, 2), spatial_scale=0.5, sampling_ratio=2, aligned=False),
               dict(output_size=2, spatial_scale=0.5, sampling_ratio=-1, aligned=True),
               dict(output_size=(2, 4), spatial_scale=0.5, sampling_ratio=0, aligned=False)):
        for fn, a in (("roi_align", kw), ("roi_pool", {k: kw[k] for k in ("output_size", "spatial_scale")})):
            want = getattr(tv, fn)(x, rois, **a)
            got = getattr(tvo, fn)(x, rois, **a)
            gw, = torch.autograd.grad(want, x, torch.ones_like(want))
            gg, = torch.autograd.grad(got, x, torch.ones_like(got))
            assert_close(got.detach(), want.detach().numpy(), 1e-10, 1e-10, f"{fn} {kw}")
            assert_close(gg, gw.numpy(), 1e-10, 1e-10, f"{fn} grad {kw}")
    boxes, scores = random_boxes(rng, 200, dup=False)       # distinct scores: torchvision's CPU sort is not stable
    b, s, i = torch.from_numpy(boxes), torch.from_numpy(scores), torch.from_numpy(rng.integers(0, 5, 200))
    for thr in (0.2, 0.5):
        assert torch.equal(tvo.nms(b, s, thr), tv.nms(b, s, thr))
        assert torch.equal(tvo.batched_nms(b, s, i, thr), tv.batched_nms(b, s, i, thr))
