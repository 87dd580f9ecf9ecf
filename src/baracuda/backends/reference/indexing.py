"""NumPy bodies of the indexing family's gather and scatter forms (the oracle: clarity over speed).

Every index is checked before anything is written: an out-of-range one raises ``InvalidProblemError`` naming
the op, the argument, the value and the valid range (``ops/indexing.py: oob_error``).  Float values are
float64 here (the registration upcasts them); integer values stay exact (sums wrap like torch's).
"""
from __future__ import annotations

import numpy as np

from ...ops.indexing import oob_error, tad_shapes
from ...ops.indexing_scatter import scatter_mode
from . import register_reference


def _checked(op, arg, idx, size, wrap, what=""):
    """``idx`` as int64, negative ones wrapped when ``wrap``; raises on the first out-of-range value."""
    j = np.asarray(idx).astype(np.int64)
    lo = -size if wrap else 0
    bad = (j < lo) | (j >= size)
    if bad.any():
        raise oob_error(op, arg, j[bad].flat[0], size, wrap, what)
    return np.where(j < 0, j + size, j)


def _coords(shape, dim, j):
    """The full coordinates of every index position with the ``dim`` coordinate replaced by ``j``."""
    grids = list(np.indices(shape, sparse=True)) if shape else []
    grids[dim] = j
    return tuple(grids)


def _as1(a):
    return a.reshape(a.shape or (1,))


def _gather(d, x, idx):
    if idx.size == 0:    # (any rank and dtype: torch checks nothing about an empty index)
        return np.zeros(idx.shape, x.dtype)
    dim = d.attr("dim")
    x1, i1 = _as1(x), _as1(idx)
    j = _checked(d.op, "index", i1, x1.shape[dim], False, f"dimension {dim} of size {x1.shape[dim]}")
    return x1[_coords(i1.shape, dim, j)].reshape(idx.shape)


def _take(d, x, idx):
    j = _checked(d.op, "index", idx, x.size, True, f"an input of {x.size} elements")
    return x.reshape(-1)[j]


def _take_along_dim(d, x, idx):
    dim = d.attr("dim")
    if dim is None:    # torch: a gather of the flattened operands (negative indices are out of range)
        j = _checked(d.op, "indices", idx.reshape(-1), x.size, False, f"an input of {x.size} elements")
        return x.reshape(-1)[j]
    x1, i1 = _as1(x), _as1(idx)
    bx, bj = tad_shapes(d.op, x1, i1, dim)
    xb, ib = np.broadcast_to(x1, bx), np.broadcast_to(i1, bj)
    j = _checked(d.op, "indices", ib, bx[dim], True, f"dimension {dim} of size {bx[dim]}")
    return xb[_coords(bj, dim, j)].reshape(d.outputs[0].shape)


def _one_hot(d, t):
    c = d.attr("num_classes")
    j = _checked(d.op, "tensor", t, c, False, f"num_classes={c}")
    return (j[..., None] == np.arange(c)).astype(np.int64)


_IDENTITY = {"sum": 0, "prod": 1, "mean": 0}
# np.maximum / np.minimum propagate NaN, as torch's amax / amin
_UFUNC = {"sum": np.add, "prod": np.multiply, "mean": np.add, "amax": np.maximum, "amin": np.minimum}


def scatter_into(out, coords, vals, reduce, include_self):
    """``out`` (a copy of the input, float64 or exact integers / bools) with ``vals`` scattered to ``coords``."""
    if reduce is None:
        out[coords] = vals
        return out
    is_bool = out.dtype == np.bool_
    work = out.astype(np.int64) if is_bool else out
    touched = np.zeros(out.shape, bool)
    touched[coords] = True
    if not include_self:   # the scattered positions start from the reduction's identity (or the first value)
        if reduce in ("amax", "amin"):
            hi = np.inf if work.dtype.kind == "f" else np.iinfo(work.dtype).max
            lo = -np.inf if work.dtype.kind == "f" else np.iinfo(work.dtype).min
            work[touched] = lo if reduce == "amax" else hi
        else:
            work[touched] = _IDENTITY[reduce]
    v = vals.astype(np.int64) if is_bool else vals
    _UFUNC[reduce].at(work, coords, v)
    if reduce == "mean":
        count = np.zeros(out.shape, np.int64) + (1 if include_self else 0)
        np.add.at(count, coords, 1)
        safe = np.maximum(count, 1)
        mean = work / safe if work.dtype.kind == "f" else np.floor_divide(work, safe)
        work = np.where(count > 0, mean, out)
    if is_bool:
        return work != 0
    return work


def _scatter_dim(d, x, idx, src=None):
    if idx.size == 0:
        return x.copy()
    dim = d.attr("dim")
    reduce, include_self = scatter_mode(d)
    x1, i1 = _as1(x), _as1(idx)
    j = _checked(d.op, "index", i1, x1.shape[dim], False, f"dimension {dim} of size {x1.shape[dim]}")
    if src is None:
        vals = np.full(i1.shape, d.attr("value"), dtype=x1.dtype)
    else:
        s1 = _as1(src)
        vals = s1[tuple(slice(0, n) for n in i1.shape)]
    out = scatter_into(x1.copy(), _coords(i1.shape, dim, j), vals, reduce, include_self)
    return out.reshape(x.shape)


def _put(d, x, idx, src):
    reduce, _ = scatter_mode(d)
    j = _checked(d.op, "index", idx, x.size, True, f"an input of {x.size} elements").reshape(-1)
    out = scatter_into(x.reshape(-1).copy(), (j,), src.reshape(-1), reduce, True)
    return out.reshape(x.shape)


register_reference("gather", _gather)
register_reference("take", _take)
register_reference("take_along_dim", _take_along_dim)
register_reference("one_hot", _one_hot)
for _op in ("scatter", "scatter_add", "scatter_reduce"):
    register_reference(_op, _scatter_dim)
register_reference("put", _put)
