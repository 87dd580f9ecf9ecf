"""NumPy float64 bodies of the pooling family: max / avg / lp / adaptive / fractional pooling, max_unpool and the
two backward ops.  Every pooling op is the same computation over explicit window tables (ops/pool.py:
window_table): gather each output's window (input positions, validity), then max (torch's NaN and tie rules),
mean (torch's divisor) or the lp norm; the backward ops scatter the gradient back through the same tables."""
from __future__ import annotations

import numpy as np

from ...ops.pool import (POOL_BACKWARD_OPS, UNPOOL_OPS, WINDOW_POOL_OPS, frac_sample_index, split_batch, window_of,
                        window_table)
from . import register_reference


def _tables(desc, sp, out, x_dtype_f64=True, u=None):
    w = window_of(desc)
    tabs = []
    for j, (L, O) in enumerate(zip(sp, out)):
        uj = None if u is None else u[:, frac_sample_index(len(sp), j)]
        tabs.append(window_table(w.kind, L, O, w.k[j], w.s[j], w.p[j], w.d[j], uj, f64=x_dtype_f64))
    return tabs


def _gather(x2, tabs, sp):
    """Windows of the planes x2 [P, *sp]: (vals [P, *O, K], valid, flat positions) with K = the product of the
    per-dim window lengths, in torch's scan order (the last dim fastest)."""
    nd = len(tabs)
    P = x2.shape[0]
    flat, valid = np.zeros((1,) * (1 + 2 * nd), np.int64), np.ones((1,) * (1 + 2 * nd), bool)
    for j, (pos, vm, _) in enumerate(tabs):
        shp = [pos.shape[0]] + [1] * (2 * nd)
        shp[1 + j], shp[1 + nd + j] = pos.shape[1], pos.shape[2]
        flat = flat * sp[j] + np.clip(pos, 0, sp[j] - 1).reshape(shp)
        valid = valid & vm.reshape(shp)
    outs = tuple(t[0].shape[1] for t in tabs)
    full = (P,) + outs + tuple(t[0].shape[2] for t in tabs)
    flat = np.broadcast_to(flat, full).reshape((P,) + outs + (-1,))
    valid = np.broadcast_to(valid, full).reshape((P,) + outs + (-1,))
    planes = x2.reshape(P, -1)
    vals = np.take_along_axis(planes, flat.reshape(P, -1), 1).reshape(flat.shape)
    return vals, valid, flat


def _max(vals, valid, flat):
    """torch's max: a NaN wins (the last one in window order), else the first maximum."""
    if vals.dtype.kind == "f":
        isn = valid & np.isnan(vals)
        lowest = -np.inf
    else:
        isn = np.zeros(vals.shape, bool)
        lowest = np.iinfo(vals.dtype).min
    m = np.where(valid & ~isn, vals, lowest).max(-1)
    first = (valid & ~isn & (vals == m[..., None])).argmax(-1)
    lastnan = vals.shape[-1] - 1 - isn[..., ::-1].argmax(-1)
    has_nan = isn.any(-1)
    pos = np.where(has_nan, lastnan, first)
    y = np.where(has_nan, np.nan, m) if vals.dtype.kind == "f" else m
    return y, np.take_along_axis(flat, pos[..., None], -1)[..., 0]


def _divisor(desc, tabs):
    """avg_pool's divisor per output: divisor_override, the window clipped to the padded input
    (count_include_pad; adaptive windows: their size) or the count of its elements inside the input."""
    a = desc.attr_dict
    nd = len(tabs)
    if a.get("divisor_override") is not None:
        return float(a["divisor_override"])
    div = np.ones((1,) * (1 + nd))
    for j, (pos, vm, incl) in enumerate(tabs):
        shp = [incl.shape[0]] + [1] * nd
        shp[1 + j] = incl.shape[1]
        part = incl if a.get("count_include_pad", True) else vm.sum(-1)
        div = div * part.reshape(shp)
    return div


def _unbatch(desc, x, nd, fn):
    N, C, sp = split_batch(x.shape, nd)
    res = fn(x.reshape((N * C,) + sp), N, C, sp)
    lead = x.shape[: x.ndim - nd]
    res = res if isinstance(res, tuple) else (res,)
    return tuple(r.reshape(lead + r.shape[1:]) for r in res)


def _out_spatial(desc, nd):
    return desc.outputs[0].shape[-nd:]


def _pool(desc, x, *rest):
    w = window_of(desc)
    nd, out = w.nd, _out_spatial(desc, w.nd)
    op = desc.op

    def body(x2, N, C, sp):
        u = None
        if w.kind == "fractional":
            u = rest[0].reshape(N * C, nd)
        tabs = _tables(desc, sp, out, desc.dtype.name == "f64", u)
        vals, valid, flat = _gather(x2, tabs, sp)
        if "max" in op:
            y, idx = _max(vals, valid, flat)
            return y, idx
        if op.startswith("lp_pool"):
            p = desc.attr("norm_type")
            with np.errstate(all="ignore"):
                s = np.where(valid, vals ** p, 0.0).sum(-1) / _divisor(desc, tabs)
                return (s * np.prod(w.k)) ** (1.0 / p)
        if desc.dtype.is_integer:   # torch's CPU: the exact sum, divided with truncation toward zero
            s = np.where(valid, vals, 0).astype(np.int64).sum(-1)
            div = np.broadcast_to(np.asarray(_divisor(desc, tabs)), s.shape).astype(np.int64)
            return np.sign(s) * np.sign(div) * (np.abs(s) // np.abs(div))
        return np.where(valid, vals, 0.0).sum(-1) / _divisor(desc, tabs)
    return _unbatch(desc, x, nd, body)


def _pool_backward(desc, g, x, *idx):
    w = window_of(desc)
    nd = w.nd

    def body(x2, N, C, sp):
        P = x2.shape[0]
        g2 = g.reshape((P, -1))
        dx = np.zeros((P, int(np.prod(sp))))
        rows = np.arange(P)[:, None]
        if desc.op == "max_pool_backward":
            np.add.at(dx, (rows, idx[0].reshape(P, -1)), g2)
            return dx.reshape((P,) + sp)
        out = g.shape[-nd:]
        tabs = _tables(desc, sp, out)
        _, valid, flat = _gather(x2, tabs, sp)
        contrib = (g.reshape((P,) + out) / _divisor(desc, tabs))[..., None]
        contrib = np.broadcast_to(contrib, flat.shape)
        r = np.broadcast_to(np.arange(P).reshape((P,) + (1,) * (nd + 1)), flat.shape)
        np.add.at(dx, (r[valid], flat[valid]), contrib[valid])
        return dx.reshape((P,) + sp)
    return _unbatch(desc, x, nd, body)


def _unpool(desc, x, idx):
    nd = int(desc.op[-2])
    N, C, sp = split_batch(x.shape, nd)
    out = desc.outputs[0].shape
    L = int(np.prod(out[-nd:]))
    y = np.zeros((N * C, L), dtype=x.dtype)
    ix = idx.reshape(N * C, -1)
    if ix.size and (ix.min() < 0 or ix.max() >= L):
        from ..._core.errors import InvalidProblemError

        bad = ix.min() if ix.min() < 0 else ix.max()
        raise InvalidProblemError(desc.op, "indices", f"indices in [0, {L}) (the output plane)", int(bad))
    np.put_along_axis(y, ix, x.reshape(N * C, -1), 1)
    return y.reshape(out)


for _op in WINDOW_POOL_OPS:
    register_reference(_op, _pool)
for _op in UNPOOL_OPS:
    register_reference(_op, _unpool)
for _op in POOL_BACKWARD_OPS:
    register_reference(_op, _pool_backward)
