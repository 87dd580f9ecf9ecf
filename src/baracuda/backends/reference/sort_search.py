"""NumPy bodies of searchsorted / bucketize / isin: torch's binary search (``ops.sort_search.np_search``) per row,
the sequence read through ``sorter`` where given; isin as equality against every test element."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.sort_search import np_search
from . import register_reference


def rows(seq, x):
    """(seq as (B, M), x as (B, N)): a 1-D sequence is one row for every value of x."""
    seq, x = np.asarray(seq), np.asarray(x)
    if seq.ndim == 1:
        return seq.reshape(1, -1), x.reshape(1, -1)
    m = seq.shape[-1]
    return seq.reshape(-1, m), x.reshape(seq.reshape(-1, m).shape[0], -1)


def _searchsorted(d, seq, x, sorter=None):
    if sorter is not None:
        m = np.shape(seq)[-1]
        bad = np.asarray(sorter)[(np.asarray(sorter) < 0) | (np.asarray(sorter) >= m)]
        if bad.size:
            raise InvalidProblemError("searchsorted", "sorter", f"indices in [0, {m}) (the sorted_sequence's last "
                                      "dim)", int(bad.reshape(-1)[0]))
        seq = np.take_along_axis(np.asarray(seq), np.asarray(sorter), axis=-1)
    s, q = rows(seq, x)
    return np_search(s, q, d.attr("right")).reshape(np.shape(x))


def _bucketize(d, x, bd):
    return np_search(np.asarray(bd).reshape(1, -1), np.asarray(x).reshape(1, -1), d.attr("right")).reshape(np.shape(x))


def _isin(d, x, t):
    x, t = np.asarray(x), np.asarray(t).reshape(-1)
    hit = (x.reshape(-1, 1) == t.reshape(1, -1)).any(axis=1).reshape(x.shape) if t.size else np.zeros(x.shape, bool)
    return hit != d.attr("invert")


for _name, _fn in {"searchsorted": _searchsorted, "bucketize": _bucketize, "isin": _isin}.items():
    def _run(desc, *xs, _fn=_fn):
        return _fn(desc, *xs)
    register_reference(_name, _run)
