"""NumPy float64 bodies of the reductions and broadcast_to (the oracle: clarity over speed).  Integer and bool
inputs arrive unconverted: sums and products of them are computed exactly in int64 (wrapping, as torch)."""
from __future__ import annotations

import numpy as np

from ...ops import reduction_prod_nan_logic_minmax  # noqa: F401  (registers its RedDefs into REDUCTIONS)
from ...ops.broadcast import reduce_to_parts
from ...ops.reduction import REDUCTIONS, keepdim_shape
from . import register_reference


def _axes(dims):
    return tuple(dims) if dims else None


def _as_dtype_first(d, x):
    """torch's sum/mean/prod(dtype=): the input is converted to ``dtype`` before accumulating; integers
    (and bool) accumulate in int64, floats in float64."""
    dt = d.attr("dtype")
    if dt is not None:
        x = x.astype(dt.numpy)
    return x.astype(np.float64) if x.dtype.kind == "f" or x.dtype.name == "bfloat16" else x.astype(np.int64)


def _sum(d, x):
    x = _as_dtype_first(d, x)
    return np.sum(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))


def _prod(d, x):
    x = _as_dtype_first(d, x)
    return np.prod(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))


def _nansum(d, x):
    if x.dtype.kind == "f" or x.dtype.name == "bfloat16":   # NaN is zeroed before dtype= converts (torch)
        x = np.where(np.isnan(x), np.zeros((), x.dtype), x)
    x = _as_dtype_first(d, x)
    return np.sum(x, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))


def _nanmean(d, x):
    x = _as_dtype_first(d, x)
    ok = ~np.isnan(x)
    ax, keep = _axes(d.attr("dims")), d.attr("keepdim")
    return np.sum(np.where(ok, x, 0.0), axis=ax, keepdims=keep) / np.sum(ok, axis=ax, keepdims=keep)


def _logic(fn):
    def body(d, x):
        return fn(x != 0, axis=_axes(d.attr("dims")), keepdims=d.attr("keepdim"))   # NaN != 0: true
    return body


def _count_nonzero(d, x):
    return np.sum(x != 0, axis=_axes(d.attr("dims")), dtype=np.int64)


def _aminmax(d, x):
    dim, keep = d.attr("dim"), d.attr("keepdim")
    if x.ndim == 0:
        return x, x
    if dim is None:
        shape = (1,) * x.ndim if keep else ()
        return np.min(x).reshape(shape), np.max(x).reshape(shape)
    return np.min(x, axis=dim, keepdims=keep), np.max(x, axis=dim, keepdims=keep)


def _sel(vfn, ifn):
    def body(d, x):
        dim, keep = d.attr("dim"), d.attr("keepdim")
        if dim is None:
            v = vfn(x) if x.ndim else x
            return np.reshape(v, (1,) * x.ndim) if keep else v
        if x.ndim == 0:
            return x, np.zeros((), np.int64)
        return vfn(x, axis=dim, keepdims=keep), np.asarray(ifn(x, axis=dim, keepdims=keep), np.int64)
    return body


def _moved(x, dims):
    """x with the reduced axes moved last and flattened into one: (kept..., R)."""
    dims = tuple(dims)
    kept = [a for a in range(x.ndim) if a not in dims]
    y = np.transpose(x, kept + list(dims))
    return y.reshape(y.shape[:len(kept)] + (-1,)), kept


def _unmoved(y, x_shape, dims, kept):
    dims = tuple(dims)
    perm = kept + list(dims)
    y = y.reshape(tuple(x_shape[a] for a in perm))
    return np.transpose(y, np.argsort(perm))


def _prod_backward(d, g, x):
    """The product of the other elements of each slice as torch's prod_safe_zeros_backward builds it: the
    exclusive cumulative product from the left times the one from the right (zero-safe, no division)."""
    dims = d.attr("dims")
    if x.ndim == 0:
        return g
    y, kept = _moved(x, dims)
    ones = np.ones(y.shape[:-1] + (1,))
    left = np.cumprod(np.concatenate([ones, y[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, y[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    gk = g.reshape(keepdim_shape(x.shape, dims))
    return gk * _unmoved(left * right, x.shape, dims, kept)


def _nansum_backward(d, g, x):
    dims = d.attr("dims")
    gk = g.reshape(keepdim_shape(x.shape, dims))
    ok = ~np.isnan(x)
    if d.attr("mean"):
        gk = gk / (np.sum(ok, axis=_axes(dims), keepdims=True) if x.ndim else ok)
    return gk * ok     # a product, as torch: an all-NaN slice of nanmean gets (g / 0) * 0 = NaN


def _value_select_backward(d, g, idx):
    shape, dim, keep = d.attr("shape"), d.attr("dim"), d.attr("keepdim")
    if not shape:
        return g
    gk = g if keep else np.expand_dims(g, dim)
    ik = idx if keep else np.expand_dims(idx, dim)
    pos = np.arange(shape[dim]).reshape([-1 if a == dim else 1 for a in range(len(shape))])
    return np.where(pos == ik, gk, 0.0)


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
    o = out.reshape(shape)
    mask = ((x == o) | (d.attr("nan") & np.isnan(x) & np.isnan(o))).astype(np.float64)
    cnt = np.sum(mask, axis=_axes(dims), keepdims=True) if x.ndim else mask
    return (g.reshape(shape) / cnt) * mask


def _mean_backward(d, g):
    shape, dims = d.attr("shape"), d.attr("dims")
    count = float(np.prod([shape[a] for a in dims]))
    return np.broadcast_to(g.reshape(keepdim_shape(shape, dims)), shape) / count


def _broadcast_to(d, x):
    return np.broadcast_to(x, d.attr("shape"))


_REDUCE_TO = {"sum": np.sum, "amax": np.max, "amin": np.min, "prod": np.prod}


def _reduce_to(d, x):
    dims, kshape = reduce_to_parts(d)
    return _REDUCE_TO[d.attr("mode")](x, axis=dims, keepdims=True).reshape(d.attr("shape"))


BODIES = {
    "sum": _sum, "mean": _mean, "amax": _ext(np.max), "amin": _ext(np.min),
    "argmax": _arg(np.argmax), "argmin": _arg(np.argmin),
    "prod": _prod, "nansum": _nansum, "nanmean": _nanmean, "any": _logic(np.any), "all": _logic(np.all),
    "count_nonzero": _count_nonzero, "aminmax": _aminmax, "max": _sel(np.max, np.argmax), "min": _sel(np.min, np.argmin),
    "amax_backward": _amax_backward, "mean_backward": _mean_backward, "broadcast_to": _broadcast_to,
    "reduce_to": _reduce_to,
    "prod_backward": _prod_backward, "nansum_backward": _nansum_backward,
    "value_select_backward": _value_select_backward,
}

missing = set(REDUCTIONS) - set(BODIES)
if missing:
    raise ImportError(f"reference reduction: no body for {sorted(missing)}")

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):  # empty mean -> NaN, 0/0 in amax_backward -> NaN, as torch
            return _fn(desc, *xs)
    register_reference(_name, _run)
