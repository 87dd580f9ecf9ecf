"""NumPy float64 bodies of the scan family (the oracle: clarity over speed).

Each body moves the scan axis last and flips it for ``reverse`` (a reversed scan is the forward scan of the
flipped axis, flipped back; cummax/cummin indices are mapped back with n - 1 - i).  Integer scans stay in
int64 (wrapping like torch); float scans accumulate in float64 and are rounded once to the output dtype.
"""
from __future__ import annotations

import numpy as np

from ...ops.scan import SCAN_OPS, _np_cumext
from . import register_reference


def _axis_last(d, x):
    """x with the scan axis last (a 0-d input becomes shape (1,)) and flipped when reverse."""
    x = np.moveaxis(x.reshape(x.shape or (1,)), d.attr("dim"), -1)
    return np.flip(x, -1) if d.attr("reverse") else x


def _restore(d, r, shape):
    r = np.flip(r, -1) if d.attr("reverse") else r
    return np.moveaxis(r, -1, d.attr("dim")).reshape(shape)


def _cast_first(d, x):
    """torch's dtype=: the input is converted to the output dtype before the scan (int results in int64)."""
    out = d.outputs[0].dtype
    if d.attr("dtype") is not None:
        x = x.astype(out.numpy)
    if out.is_floating:
        return x.astype(np.float64)
    return x.astype(np.int64)


def _arith(fn):
    def body(d, x):
        z = _axis_last(d, _cast_first(d, x))
        return _restore(d, fn(z, axis=-1), x.shape)
    return body


def _lse(d, x):
    return _restore(d, np.logaddexp.accumulate(_axis_last(d, x), axis=-1), x.shape)


def _ext(better):
    def body(d, x):
        z = _axis_last(d, x.astype(np.int64) if x.dtype == np.bool_ else x)
        v, i = _np_cumext(z, -1, better)
        if d.attr("reverse"):
            i = (z.shape[-1] - 1) - i
        return _restore(d, v, x.shape).astype(x.dtype), _restore(d, i, x.shape)
    return body


def _cumprod_bw(d, g, x, out):
    """dx_i = prod_{k<i} x_k * Q_i, Q_i = g_i + x_{i+1} Q_{i+1} (forward order; the saved out is not needed)."""
    gz, xz = _axis_last(d, g), _axis_last(d, x)
    n = xz.shape[-1]
    pre = np.ones_like(xz)
    for i in range(1, n):
        pre[..., i] = pre[..., i - 1] * xz[..., i - 1]
    q = np.zeros_like(gz)
    for i in range(n - 1, -1, -1):
        q[..., i] = gz[..., i] + (xz[..., i + 1] * q[..., i + 1] if i + 1 < n else 0.0)
    return _restore(d, pre * q, g.shape)


def _lse_bw(d, g, x, out):
    """dx_i = sum_{j>=i} g_j exp(x_i - y_j) with y = the given out; x_i = -inf contributes 0."""
    gz, xz, yz = _axis_last(d, g), _axis_last(d, x), _axis_last(d, out)
    n = xz.shape[-1]
    dx = np.zeros_like(gz)
    with np.errstate(all="ignore"):
        for i in range(n):
            w = np.exp(xz[..., i:i + 1] - yz[..., i:])
            s = np.sum(np.where(np.isneginf(xz[..., i:i + 1]), 0.0, w * gz[..., i:]), axis=-1)
            dx[..., i] = s
    return _restore(d, dx, g.shape)


def _ext_bw(d, g, idx):
    """Scatter-add of g to the indices along dim."""
    gz = np.moveaxis(g.reshape(g.shape or (1,)), d.attr("dim"), -1)
    iz = np.moveaxis(idx.reshape(idx.shape or (1,)), d.attr("dim"), -1)
    dx = np.zeros_like(gz)
    rows = np.indices(iz.shape[:-1]) if iz.ndim > 1 else ()
    rows = tuple(r[..., None] for r in rows)
    np.add.at(dx, rows + (iz,), gz)
    return np.moveaxis(dx, -1, d.attr("dim")).reshape(g.shape)


BODIES = {
    "cumsum": _arith(np.cumsum), "cumprod": _arith(np.cumprod), "logcumsumexp": _lse,
    "cummax": _ext(np.greater_equal), "cummin": _ext(np.less_equal),
    "cumprod_backward": _cumprod_bw, "logcumsumexp_backward": _lse_bw, "cummax_backward": _ext_bw,
}

missing = set(SCAN_OPS) - set(BODIES)
if missing:
    raise ImportError(f"reference scan: no body for {sorted(missing)}")

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):   # NaN/inf propagate as in torch
            return _fn(desc, *xs)
    register_reference(_name, _run)
