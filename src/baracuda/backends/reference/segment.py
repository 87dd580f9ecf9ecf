"""NumPy float64 bodies of the segment family (JAX's jax.ops.segment_*): see ops/segment.py for the semantics."""
from __future__ import annotations

import numpy as np

from ...ops.segment import SEGMENT_REDUCTIONS, _np_segment
from . import register_reference


def _forward(reduction):
    def body(d, data, ids):
        return _np_segment(reduction, data, ids, d.attr("num_segments"))
    return body


def segment_grad(reduction, g, data, ids, out, ns):
    """dx of segment_<reduction> (float64), dropped positions 0."""
    if ns == 0:
        return np.zeros(data.shape)
    k = ids.ndim
    x = data.reshape((-1,) + data.shape[k:])
    i = ids.reshape(-1).astype(np.int64)
    keep = (i >= 0) & (i < ns)
    ic = np.where(keep, i, 0)
    gi = np.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), g[ic], 0.0)
    cnt = np.bincount(i[keep], minlength=ns).astype(np.float64)
    if reduction == "sum":
        dx = gi
    elif reduction == "mean":
        dx = gi / np.maximum(cnt, 1)[ic].reshape((-1,) + (1,) * (x.ndim - 1))
    elif reduction in ("max", "min"):
        hit = keep.reshape((-1,) + (1,) * (x.ndim - 1)) & (x == out[ic])
        ties = np.zeros(out.shape)
        np.add.at(ties, i[keep], hit[keep].astype(np.float64))
        dx = np.where(hit, gi / np.maximum(ties[ic], 1.0), 0.0)
    else:   # prod: the product of the segment's other elements, without dividing by a zero
        zero = x == 0
        nz = np.ones(out.shape)
        nzc = np.zeros(out.shape)
        np.multiply.at(nz, i[keep], np.where(zero, 1.0, x)[keep])
        np.add.at(nzc, i[keep], zero[keep].astype(np.float64))
        p, z = nz[ic], nzc[ic]
        with np.errstate(divide="ignore", invalid="ignore"):
            others = np.where(zero, np.where(z == 1, p, 0.0), np.where(z == 0, p / np.where(zero, 1.0, x), 0.0))
        dx = gi * others
    return dx.reshape(data.shape)


def _backward(d, g, data, ids, out):
    return segment_grad(d.attr("reduction"), g, data, ids, out, d.attr("num_segments"))


for _r in SEGMENT_REDUCTIONS:
    register_reference(f"segment_{_r}", _forward(_r))
register_reference("segment_backward", _backward)
