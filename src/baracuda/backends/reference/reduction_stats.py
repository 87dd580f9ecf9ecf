"""NumPy float64 bodies of the statistical reductions (the oracle: two-pass in f64, clarity over speed)."""
from __future__ import annotations

import numpy as np

from ...ops.reduction import keepdim_shape
from ...ops.reduction_stats import MOMENT_OPS, NORM_OPS, count_of
from . import register_reference


def _ax(dims):
    return tuple(dims)


def _moments(d, x):
    dims, keep = d.attr("dims"), d.attr("keepdim")
    n = count_of(x.shape, dims)
    mean = np.mean(x, axis=_ax(dims), keepdims=True) if x.size else np.full(keepdim_shape(x.shape, dims), np.nan)
    m2 = np.sum((x - mean) ** 2, axis=_ax(dims), keepdims=keep)
    var = m2 / max(0.0, n - d.attr("correction"))
    stat = np.sqrt(var) if d.op.startswith("std") else var
    if d.op.endswith("_mean"):
        return stat, mean if keep else mean.reshape(np.shape(stat))
    return stat


def _var_backward(d, g, x, out, gm=None):
    dims = d.attr("dims")
    ks = keepdim_shape(x.shape, dims)
    n = count_of(x.shape, dims)
    g, out = g.reshape(ks), out.reshape(ks)
    if d.attr("std"):
        g = np.where(out == 0, 0.0, g / (2 * out))
    mean = np.mean(x, axis=_ax(dims), keepdims=True) if x.size else np.zeros(ks)
    r = (2.0 / (n - d.attr("correction"))) * g * (x - mean)
    return r + gm.reshape(ks) / n if gm is not None else r


def _norm(d, x):
    dt, p, dims, keep = d.attr("dtype"), d.attr("ord"), d.attr("dims"), d.attr("keepdim")
    if dt is not None:
        x = x.astype(dt.numpy).astype(np.float64)   # torch converts the input first
    a = np.abs(x)
    kw = {"axis": _ax(dims), "keepdims": keep}
    if p == np.inf:
        return np.max(a, **kw)
    if p == -np.inf:
        return np.min(a, **kw)
    if p == 0:
        return np.sum(a != 0, **kw).astype(np.float64)
    if p == 1:
        return np.sum(a, **kw)
    if p == 2:
        return np.sqrt(np.sum(a * a, **kw))
    return np.sum(a ** p, **kw) ** (1.0 / p)


def _norm_backward(d, g, x, n):
    p, dims = d.attr("ord"), d.attr("dims")
    ks = keepdim_shape(x.shape, dims)
    g, n = g.reshape(ks), n.reshape(ks)
    s = np.sign(x)
    a = np.abs(x)
    if p == 0:
        return np.zeros_like(x)
    if p == 1:
        return s * g
    if p == 2:
        return g * np.where(n == 0, 0.0, x / n)
    if p < 1:
        return s * np.where(x == 0, 0.0, a ** (p - 1)) * g * n ** (1 - p)
    sc = np.where(n == 0, 0.0, g / n ** (p - 1))
    return (s * a ** (p - 1) if p < 2 else x * a ** (p - 2)) * sc


def _logsumexp(d, x):
    dims, keep = d.attr("dims"), d.attr("keepdim")
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=_ax(dims), keepdims=keep))
    m = np.max(x, axis=_ax(dims), keepdims=True)
    m = np.where(np.isinf(m), 0.0, m)   # torch: a max of +-inf is not subtracted (a row of -inf stays -inf)
    r = np.log(np.sum(np.exp(x - m), axis=_ax(dims), keepdims=True)) + m
    return r if keep else r.reshape(np.shape(np.sum(x, axis=_ax(dims))))


def _logsumexp_backward(d, g, x, out):
    ks = keepdim_shape(x.shape, d.attr("dims"))
    return g.reshape(ks) * np.exp(x - out.reshape(ks))


def _trace(d, x):
    if x.dtype.kind in "iub":     # (bool too) an int64 sum, wrapping as torch.trace (uint64 arithmetic is defined mod 2^64)
        return np.asarray(np.trace(x.astype(np.uint64))).view(np.int64)
    return np.trace(x)


def _trace_backward(d, g):
    return g * np.eye(*d.attr("shape"))


BODIES = {**{op: _moments for op in MOMENT_OPS}, **{op: _norm for op in NORM_OPS},
          "var_backward": _var_backward, "vector_norm_backward": _norm_backward, "logsumexp": _logsumexp,
          "logsumexp_backward": _logsumexp_backward, "trace": _trace, "trace_backward": _trace_backward}

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):   # empty / N <= correction -> NaN or inf, 0^-p -> inf: as torch
            return _fn(desc, *xs)
    register_reference(_name, _run)
