"""NumPy bodies of the order statistics (the oracle): every one reads the stable sorted row of
``ops.sort.np_sort_order`` (NaN largest) at a position computed per row; quantile's ranks are computed in the
input's dtype, as torch does, so floor / ceil / round pick the same neighbours."""
from __future__ import annotations

import numpy as np

from ...ops.sort import np_sort_order
from ...ops.sort_stats import quantile_qs
from . import register_reference


def _rows(d, x):
    """x with the reduced axis last: (z, dim) where dim=None flattens."""
    dim = d.attr("dim")
    if dim is None:
        return x.reshape(-1)
    return np.moveaxis(x.reshape(x.shape or (1,)), dim, -1)


def _pick(z, pos):
    """(values, original indices) of the sorted rows of z at per-row positions pos (shape z.shape[:-1])."""
    order = np_sort_order(z, -1)
    p = np.asarray(pos, np.int64)[..., None]
    i = np.take_along_axis(order, p, -1)[..., 0]
    return np.take_along_axis(z, i[..., None], -1)[..., 0], i


def _nvalid(z):
    return np.sum(~np.isnan(z), -1) if z.dtype.kind == "f" else np.full(z.shape[:-1], z.shape[-1])


def _select(d, z, pos):
    v, i = _pick(z, pos)
    shapes = [o.shape for o in d.outputs]
    if len(shapes) == 1:
        return v.reshape(shapes[0])
    return v.reshape(shapes[0]), i.reshape(shapes[1])


def _kth(d, x):
    z = _rows(d, x)
    return _select(d, z, np.full(z.shape[:-1], d.attr("k") - 1))


def _median(nan_skip):
    def body(d, x):
        z = _rows(d, x)
        n, nv = z.shape[-1], _nvalid(z)
        if n == 0:     # median() of an empty tensor: NaN (integers: the dtype's minimum, as torch's CPU kernel)
            dt = d.outputs[0].dtype.numpy
            return np.full(d.outputs[0].shape, np.nan if d.outputs[0].dtype.is_floating else np.iinfo(dt).min)
        if nan_skip:
            pos = np.maximum(nv - 1, 0) // 2
        else:
            pos = np.where(nv < n, nv, (n - 1) // 2)      # a NaN row: its first NaN
        return _select(d, z, pos)
    return body


def quantile_positions(d, z):
    """(below, above, weight) per (q, row): sorted positions of the two neighbours and the lerp weight, all
    computed in the input's dtype like torch (the weight 0 where no interpolation happens)."""
    dt = np.dtype(d.inputs[-1].dtype.numpy).type
    interp = d.attr("interpolation")
    n, nv = z.shape[-1], _nvalid(z)
    q = np.asarray(quantile_qs(d.attr("q")), dt).reshape((-1,) + (1,) * (z.ndim - 1))
    if d.op == "nanquantile" or (d.op == "quantile_backward" and d.attr("ignore_nan")):
        rank = q * (nv.astype(dt) - dt(1))
        rank = np.where(rank < 0, dt(0), rank)
    else:
        rank = np.where(nv < n, dt(n - 1), q * dt(n - 1)).astype(dt)
    rank = {"lower": np.floor, "higher": np.ceil, "nearest": np.round}.get(interp, lambda r: r)(rank)
    below = np.floor(rank).astype(np.int64)
    if interp in ("linear", "midpoint"):
        above = np.ceil(rank).astype(np.int64)
        w = (rank - below.astype(dt)) if interp == "linear" else np.full(rank.shape, dt(0.5))
    else:
        above, w = below, np.zeros(rank.shape, dt)
    return below, above, w.astype(np.float64)


def _quantile(d, x):
    z = _rows(d, x)
    below, above, w = quantile_positions(d, z)
    zz = np.broadcast_to(z, below.shape + z.shape[-1:])
    a, _ = _pick(zz, below)
    b, _ = _pick(zz, above)
    with np.errstate(all="ignore"):   # torch's lerp: the formula depends on which side of 0.5 the weight is
        v = np.where(w < 0.5, a + w * (b - a), b - (b - a) * (1 - w))
    return v.reshape(d.outputs[0].shape)


def _quantile_bw(d, g, x):
    z = _rows(d, x)
    below, above, w = quantile_positions(d, z)
    zz = np.broadcast_to(z, below.shape + z.shape[-1:])
    gq = g.reshape(below.shape)
    order = np_sort_order(zz, -1)
    dz = np.zeros(zz.shape)
    rows = tuple(r[..., None] for r in np.indices(below.shape))
    for pos, part in ((below, (1 - w) * gq), (above, w * gq)):
        i = np.take_along_axis(order, pos[..., None], -1)
        np.add.at(dz, rows + (i,), part[..., None])
    dz = dz.sum(0)                                        # the q axis
    if d.attr("dim") is None:
        return dz.reshape(x.shape)
    return np.moveaxis(dz, -1, d.attr("dim")).reshape(x.shape)


for _name, _fn in {"kthvalue": _kth, "median": _median(False), "nanmedian": _median(True),
                   "quantile": _quantile, "nanquantile": _quantile, "quantile_backward": _quantile_bw}.items():
    register_reference(_name, _fn)
