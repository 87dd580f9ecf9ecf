"""NumPy bodies of the sort family (the oracle): sort / argsort / msort / topk from the one stable order of
``ops.sort.np_sort_order`` (NaN largest, -0.0 == +0.0), and the scatter of ``sort_backward``."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.sort import np_sort_order
from . import register_reference


def _sorted(x, dim, descending):
    xx = x.reshape(x.shape or (1,))
    idx = np_sort_order(xx, dim, descending)
    return np.take_along_axis(xx, idx, dim).reshape(x.shape), idx.reshape(x.shape)


def _sort(d, x):
    return _sorted(x, d.attr("dim"), d.attr("descending"))


def _argsort(d, x):
    return _sorted(x, d.attr("dim"), d.attr("descending"))[1]


def _msort(d, x):
    return _sorted(x, 0, False)


def _topk(d, x):
    dim, k = d.attr("dim"), d.attr("k")
    v, i = _sorted(x, dim, d.attr("largest"))
    if not x.shape:
        return v, i
    return np.take(v, np.arange(k), axis=dim), np.take(i, np.arange(k), axis=dim)


def _sort_bw(d, g, idx):
    dim, size = d.attr("dim"), d.attr("size")
    out_shape = d.outputs[0].shape
    gg, ii = g.reshape(g.shape or (1,)), idx.reshape(idx.shape or (1,))
    if ii.size and (ii.min() < 0 or ii.max() >= size):
        bad = int(ii.min() if ii.min() < 0 else ii.max())
        raise InvalidProblemError("sort_backward", "indices", f"values in [0, {size - 1}]", bad)
    shape = list(gg.shape)
    shape[dim] = size
    out = np.zeros(shape, g.dtype)
    np.put_along_axis(out, ii, gg, dim)
    return out.reshape(out_shape)


for _name, _fn in {"sort": _sort, "argsort": _argsort, "msort": _msort, "topk": _topk,
                   "sort_backward": _sort_bw}.items():
    register_reference(_name, _fn)
