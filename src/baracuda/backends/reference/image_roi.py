"""NumPy float64 bodies of the torchvision ops (ops/image_roi.py, ops/image_nms.py), written from torchvision's
algorithm: roi_align as per-roi products with two per-axis sampling matrices (a bin's bilinear weights are a product
of a row and a column factor, and so is the out-of-range rule), roi_pool as a loop over bins, nms as the greedy
sweep over a full IoU matrix."""
from __future__ import annotations

import math

import numpy as np

from ...ops.image_roi import roi_geometry
from . import register_reference

FLT_MAX = float(np.finfo(np.float32).max)


def _batch(b: float, n: int):
    """The roi's image (C's truncating int cast), or None outside [0, n)."""
    return int(math.trunc(b)) if -1.0 < b < n else None


# -- roi_align -----------------------------------------------------------------------------------------------------
def _axis_weights(start: float, length: float, bins: int, grid: int, size: int) -> np.ndarray:
    """[bins, size]: row p sums the bilinear weights of the grid samples of bin p along one axis."""
    a = np.zeros((bins, size))
    step = length / bins
    for p in range(bins):
        for i in range(grid):
            y = start + p * step + (i + 0.5) * step / grid
            if y < -1.0 or y > size:
                continue
            y = max(y, 0.0)
            lo = int(y)
            if lo >= size - 1:
                lo = hi = size - 1
                y = float(lo)
            else:
                hi = lo + 1
            frac = y - lo
            a[p, lo] += 1.0 - frac
            a[p, hi] += frac
    return a


def _align_mats(desc, roi, h, w):
    """(rows [PH, H], cols [PW, W], count) of one roi row (x1, y1, x2, y2 after the batch index)."""
    ph, pw = desc.attr("output_size")
    scale, ratio, aligned = desc.attr("spatial_scale"), desc.attr("sampling_ratio"), desc.attr("aligned")
    off = 0.5 if aligned else 0.0
    x1, y1, x2, y2 = (v * scale - off for v in roi)
    rw, rh = x2 - x1, y2 - y1
    if not aligned:
        rw, rh = max(rw, 1.0), max(rh, 1.0)
    gh = ratio if ratio > 0 else math.ceil(rh / ph)
    gw = ratio if ratio > 0 else math.ceil(rw / pw)
    count = max(gh * gw, 1)
    return _axis_weights(y1, rh, ph, max(gh, 0), h), _axis_weights(x1, rw, pw, max(gw, 0), w), count


def _roi_align(desc, x, rois):
    (n, c, h, w), k, (ph, pw) = roi_geometry(desc)
    out = np.zeros((k, c, ph, pw))
    for r in range(k):
        b = _batch(rois[r, 0], n)
        if b is not None:
            ay, ax, count = _align_mats(desc, rois[r, 1:], h, w)
            out[r] = np.einsum("ph,chw,qw->cpq", ay, x[b], ax) / count
    return out


def _roi_align_bw(desc, g, rois):
    (n, c, h, w), k, _ = roi_geometry(desc)
    dx = np.zeros((n, c, h, w))
    for r in range(k):
        b = _batch(rois[r, 0], n)
        if b is not None:
            ay, ax, count = _align_mats(desc, rois[r, 1:], h, w)
            dx[b] += np.einsum("ph,cpq,qw->chw", ay, g[r], ax) / count
    return dx


# -- roi_pool ------------------------------------------------------------------------------------------------------
def _round_away(v: float) -> int:
    """C's round(): half away from zero."""
    a = abs(v)
    f = math.floor(a)
    r = f + 1 if a - f >= 0.5 else f
    return int(math.copysign(r, v))


def _pool_bins(desc, roi, h, w):
    """Per bin (ph, pw): (h0, h1, w0, w1) rows / columns of the input, clipped (empty when h1 <= h0 or w1 <= w0)."""
    ph, pw = desc.attr("output_size")
    s = desc.attr("spatial_scale")
    x1, y1, x2, y2 = (_round_away(v * s) for v in roi)
    rw, rh = max(x2 - x1 + 1, 1), max(y2 - y1 + 1, 1)

    def edges(p, length, bins, start, size):
        lo = (p * length) // bins
        hi = -((-(p + 1) * length) // bins)
        return min(max(lo + start, 0), size), min(max(hi + start, 0), size)
    return [[edges(i, rh, ph, y1, h) + edges(j, rw, pw, x1, w) for j in range(pw)] for i in range(ph)]


def _roi_pool(desc, x, rois):
    (n, c, h, w), k, (ph, pw) = roi_geometry(desc)
    out = np.zeros((k, c, ph, pw))
    arg = np.full((k, c, ph, pw), -1, np.int64)
    for r in range(k):
        b = _batch(rois[r, 0], n)
        if b is None:
            continue
        for i, row in enumerate(_pool_bins(desc, rois[r, 1:], h, w)):
            for j, (h0, h1, w0, w1) in enumerate(row):
                if h1 <= h0 or w1 <= w0:
                    continue
                win = x[b, :, h0:h1, w0:w1].reshape(c, -1)
                with np.errstate(invalid="ignore"):
                    ok = win > -FLT_MAX                   # (NaN compares False: it never wins)
                vals = np.where(ok, win, -np.inf)
                best = vals.max(axis=1)
                first = np.argmax(ok & (vals == best[:, None]), axis=1)
                have = ok.any(axis=1)
                out[r, :, i, j] = np.where(have, best, -FLT_MAX)
                flat = (h0 + first // (w1 - w0)) * w + w0 + first % (w1 - w0)
                arg[r, :, i, j] = np.where(have, flat, -1)
    return out, arg


def _roi_pool_bw(desc, g, rois, argmax):
    (n, c, h, w), k, _ = roi_geometry(desc)
    dx = np.zeros((n, c, h * w))
    for r in range(k):
        b = _batch(rois[r, 0], n)
        if b is None:
            continue
        for ch in range(c):
            a = argmax[r, ch].reshape(-1)
            ok = (a >= 0) & (a < h * w)
            np.add.at(dx[b, ch], a[ok], g[r, ch].reshape(-1)[ok])
    return dx.reshape(n, c, h, w)


register_reference("roi_align", _roi_align)
register_reference("roi_align_backward", _roi_align_bw)
register_reference("roi_pool", _roi_pool)
register_reference("roi_pool_backward", _roi_pool_bw)


# -- nms -----------------------------------------------------------------------------------------------------------
def score_order(scores: np.ndarray) -> np.ndarray:
    """torch.sort(scores, descending=True, stable=True)'s permutation: NaN first, ties by index."""
    nan = np.isnan(scores)
    return np.lexsort((-np.where(nan, 0.0, scores), ~nan))


def _nms(desc, boxes, scores, idxs=None):
    k = scores.shape[0]
    order = score_order(scores)
    b = boxes[order]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    iw = np.maximum(np.minimum(b[:, None, 2], b[None, :, 2]) - np.maximum(b[:, None, 0], b[None, :, 0]), 0.0)
    ih = np.maximum(np.minimum(b[:, None, 3], b[None, :, 3]) - np.maximum(b[:, None, 1], b[None, :, 1]), 0.0)
    inter = iw * ih
    with np.errstate(invalid="ignore", divide="ignore"):
        sup = inter / (area[:, None] + area[None, :] - inter) > desc.attr("iou_threshold")
    if idxs is not None:
        sup &= idxs[order][:, None] == idxs[order][None, :]
    removed = np.zeros(k, bool)
    keep = []
    later = np.arange(k)
    for i in range(k):
        if not removed[i]:
            keep.append(order[i])
            removed |= sup[i] & (later > i)
    out = np.full(k, -1, np.int64)
    out[:len(keep)] = keep
    return out, np.int64(len(keep))


register_reference("nms", _nms)
register_reference("batched_nms", _nms)
