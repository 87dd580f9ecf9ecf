"""NumPy bodies of unique / unique_consecutive (padded outputs and the number of distinct values,
``ops.unique.np_unique``) and mode (``ops.unique.np_mode``: the smallest most frequent value, its last index)."""
from __future__ import annotations

import numpy as np

from ...ops.unique import np_mode, np_unique
from . import register_reference


def _unique(d, x):
    return np_unique(x, d.attr("dim"), d.op == "unique_consecutive")


def _mode(d, x):
    x = np.asarray(x)
    dim = d.attr("dim")
    v, i = np_mode(x, dim)
    if x.ndim and not d.attr("keepdim"):
        v, i = np.squeeze(v, dim), np.squeeze(i, dim)
    return v, i


for _name, _fn in {"unique": _unique, "unique_consecutive": _unique, "mode": _mode}.items():
    def _run(desc, *xs, _fn=_fn):
        return _fn(desc, *xs)
    register_reference(_name, _run, upcast_inputs=False)
