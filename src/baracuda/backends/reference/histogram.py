"""NumPy bodies of histc / histogram / bincount (``ops.histogram.np_hist``: float64 bin positions; the data's range
where none is given; a bincount value outside [0, length) raises as the GPU flag does)."""
from __future__ import annotations

import numpy as np

from ...ops.histogram import bincount_error, np_hist, np_histogramdd, outer_range
from . import register_reference


def _data_range(x):
    x = np.asarray(x, np.float64)
    return (float(np.nanmin(x)), float(np.nanmax(x))) if x.size else (None, None)


def _histc(d, x):
    lo, hi = outer_range("histc", d.attr("min"), d.attr("max"), *_data_range(x), empty=np.size(x) == 0)
    return np_hist(x, bins=d.attr("bins"), lo=lo, hi=hi)[0]


def _histogram(d, x, *ops):
    bins = d.attr("bins")
    edges = None if bins is not None else ops[0]
    w = ops[-1] if len(ops) == (1 if bins is not None else 2) else None
    lo = hi = None
    if bins is not None:
        r = d.attr("range")
        lo, hi = outer_range("histogram", *(r if r is not None else (None, None)), *_data_range(x),
                             empty=np.size(x) == 0)
    return np_hist(x, edges=edges, bins=bins, lo=lo, hi=hi, weight=w, density=d.attr("density"))


def _histogramdd(d, x, *ops):
    k = np.shape(x)[-1] if d.attr("bins") is None else 0
    w = ops[k] if len(ops) > k else None
    return np_histogramdd(x, d.attr("bins"), d.attr("range"), w, d.attr("density"), edges=ops[:k] if k else None)


def _bincount(d, x, w=None):
    x = np.asarray(x, np.int64)
    n = d.attr("length")
    bad = x[(x < 0) | (x >= n)]
    if bad.size:
        raise bincount_error(int(bad[0]), n)
    if w is None:
        return np.bincount(x, minlength=n).astype(np.int64)
    return np.bincount(x, weights=np.asarray(w, np.float64), minlength=n)


for _name, _fn in {"histc": _histc, "histogram": _histogram, "histogramdd": _histogramdd, "bincount": _bincount}.items():
    def _run(desc, *xs, _fn=_fn):
        return _fn(desc, *xs)
    register_reference(_name, _run)
