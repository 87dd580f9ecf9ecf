"""pixel_shuffle / pixel_unshuffle / channel_shuffle: each a copy from a strided view of the input into a view of
the output (the layout family's ``copy_into``: tiled, coalesced where a dim is contiguous in both, bit-exact for
every dtype).  The views only split dims (a channel dim c r^2 into (c, r, r), a spatial dim H r into (H, r)), so
they exist for any input strides: nothing is copied before the one pass.  Leading batch dims are merged into one
where their strides allow (the copy takes at most 6 dims); otherwise one copy per batch index."""
from __future__ import annotations

from ..layout.move import copy_into
from .._lib.register import register_triton


def _batch(t, k):
    """t's first k dims merged into one (shape, stride), or None when the strides do not allow it."""
    shape, st = t.shape[:k], t.stride()[:k]
    if k == 0:
        return 1, 0
    n, s = shape[-1], st[-1]
    for d in range(k - 2, -1, -1):
        if shape[d] == 1:
            continue
        if st[d] != s * n and n != 1:
            return None
        n, s = n * shape[d], (st[d] if n == 1 else s)
    return n, s


def _views(op, attrs, x, y):
    """(input view, output view) of the same 6-d (or fewer) shape; None when a batch merge is impossible."""
    if op == "channel_shuffle":
        g = attrs["groups"]
        n, c = x.shape[:2]
        sx, sy = x.stride(), y.stride()
        shp = (n, c // g, g) + tuple(x.shape[2:])
        if len(shp) > 6:
            return None
        xv = x.as_strided(shp, (sx[0], sx[1], sx[1] * (c // g)) + tuple(sx[2:]))
        yv = y.as_strided(shp, (sy[0], sy[1] * g, sy[1]) + tuple(sy[2:]))
        return xv, yv
    shuffle = op == "pixel_shuffle"
    big, small = (y, x) if shuffle else (x, y)    # big: (B, C, H r, W r); small: (B, C r^2, H, W)
    r = attrs["upscale_factor" if shuffle else "downscale_factor"]
    k = big.dim() - 3
    bb, bs = _batch(big, k), _batch(small, k)
    if bb is None or bs is None:
        return None
    c, h, w = big.shape[k], small.shape[-2], small.shape[-1]
    shp = (bb[0], c, h, r, w, r)
    sb, ss = big.stride()[k:], small.stride()[k:]
    bv = big.as_strided(shp, (bb[1], sb[0], sb[1] * r, sb[1], sb[2] * r, sb[2]))
    sv = small.as_strided(shp, (bs[1], ss[0] * r * r, ss[1], ss[0] * r, ss[2], ss[0]))
    return (sv, bv) if shuffle else (bv, sv)


def _copy(op, attrs, x, y):
    v = _views(op, attrs, x, y)
    if v is None:   # batch dims whose strides do not merge: one copy per batch index (> 6 dims: per last index)
        for i in range(x.shape[0] if op != "channel_shuffle" else x.shape[-1]):
            _copy(op, attrs, *((x[i], y[i]) if op != "channel_shuffle" else (x[..., i], y[..., i])))
        return
    copy_into(v[1], v[0])


def _run(desc, inputs, outputs, ws):
    x, y = inputs[0], outputs[0]
    if y.numel():
        _copy(desc.op, desc.attr_dict, x, y)


for _op in ("pixel_shuffle", "pixel_unshuffle", "channel_shuffle"):
    register_triton(_op, _run, route=f"triton:{_op}:strided-copy")
