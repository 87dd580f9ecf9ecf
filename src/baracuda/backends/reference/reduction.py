"""NumPy float64 bodies of the reductions and broadcast_to (the oracle: clarity over speed)."""
from __future__ import annotations

import numpy as np

from ...ops.reduction import REDUCTIONS, keepdim_shape
from . import register_reference


def _axes(dims):
    return tuple(dims) if dims else None


def _as_dtype_first(d, x):
    """torch's sum/mean(dtype=): the input is converted to ``dtype`` before accumulating."""
    dt = d.attr("dtype")
    return x.astype(dt.numpy).astype(np.float64) if dt is not None else x


def _sum(d, x):
    x = _as_dtype_first(d, x)
    return np.sum(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))


def _mean(d, x):
    x = _as_dtype_first(d, x)
    return np.mean(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))


def _ext(fn):
    def body(d, x):
        if x.ndim == 0:
            return x
        return fn(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))  # NaN propagates, as torch
    return body


def _arg(fn):
    def body(d, x):
        dim, keep = d.attr("dim"), d.attr("keepdim")
        if x.ndim == 0:
            return np.zeros((), np.int64)
        if dim is None:
            r = np.asarray(fn(x), np.int64)  # flattened; NumPy returns the first NaN / first tie, as torch
            return r.reshape((1,) * x.ndim) if keep else r
        return np.asarray(fn(x, axis=dim, keepdims=keep), np.int64)
    return body


def _amax_backward(d, g, x, out):
    dims = d.attr("dims")
    shape = keepdim_shape(x.shape, dims)
    mask = (x == out.reshape(shape)).astype(np.float64)
    cnt = np.sum(mask, axis=_axes(dims), keepdims=True) if x.ndim else mask
    return (g.reshape(shape) / cnt) * mask


def _mean_backward(d, g):
    shape, dims = d.attr("shape"), d.attr("dims")
    count = float(np.prod([shape[a] for a in dims]))
    return np.broadcast_to(g.reshape(keepdim_shape(shape, dims)), shape) / count


def _broadcast_to(d, x):
    return np.broadcast_to(x, d.attr("shape"))


BODIES = {
    "sum": _sum, "mean": _mean, "amax": _ext(np.max), "amin": _ext(np.min),
    "argmax": _arg(np.argmax), "argmin": _arg(np.argmin),
    "amax_backward": _amax_backward, "mean_backward": _mean_backward, "broadcast_to": _broadcast_to,
}

missing = set(REDUCTIONS) - set(BODIES)
if missing:
    raise ImportError(f"reference reduction: no body for {sorted(missing)}")

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):  # empty mean -> NaN, 0/0 in amax_backward -> NaN, as torch
            return _fn(desc, *xs)
    register_reference(_name, _run)
