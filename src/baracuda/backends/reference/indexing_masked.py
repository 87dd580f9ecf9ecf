"""NumPy bodies of masked_fill / masked_scatter / masked_select / nonzero / argwhere / nonzero_static (+ the
masked_scatter source gradient): the mask broadcast with the input, positions in row-major order.  A count
attribute that is not the mask's, or a source shorter than the True positions, raises as the GPU flag does."""
from __future__ import annotations

import numpy as np

from ...ops.indexing_masked import count_error, np_nonzero
from . import register_reference


def _bcast(d, x, mask):
    shape = d.outputs[0].shape if d.op in ("masked_fill", "masked_scatter") else np.broadcast_shapes(
        np.shape(x), np.shape(mask))
    return np.broadcast_to(x, shape), np.broadcast_to(np.asarray(mask, bool), shape)


def _fill(d, x, mask, value=None):
    xb, mb = _bcast(d, x, mask)
    v = d.attr("value") if value is None else np.asarray(value).item()
    if x.dtype.kind in "iub":     # exact integers (a value outside the dtype wraps like torch's cast)
        return np.where(mb, np.asarray(v).astype(np.int64 if x.dtype.kind != "b" else bool), xb)
    return np.where(mb, float(v), xb)


def _scatter(d, x, mask, src):
    xb, mb = _bcast(d, x, mask)
    n = int(mb.sum())
    s = np.asarray(src).reshape(-1)
    if n > s.size:
        raise count_error("masked_scatter", "source", f"at least as many elements ({s.size}) as True mask positions", n)
    out = np.array(xb)
    out[mb] = s[:n]
    return out


def _check_count(d, n):
    if n != d.attr("count"):
        raise count_error(d.op, "count", f"count={d.attr('count')}, the number of True / nonzero elements", n)


def _select(d, x, mask):
    xb, mb = _bcast(d, x, mask)
    _check_count(d, int(mb.sum()))
    return xb[mb]


def _nonzero(d, x):
    c = np_nonzero(x)
    if d.op != "nonzero_static":
        _check_count(d, c.shape[0])
    if d.op == "nonzero" and d.attr("as_tuple"):
        return tuple(c[:, j] for j in range(c.shape[1])) if c.shape[1] else (np.zeros(c.shape[0], np.int64),)
    if d.op == "nonzero_static":
        size = d.attr("size")
        out = np.full((size, c.shape[1]), d.attr("fill_value"), np.int64)
        out[:min(size, c.shape[0])] = c[:size]
        return out
    return c


def _scatter_bw(d, g, mask):
    gb, mb = np.broadcast_arrays(g, np.asarray(mask, bool))
    sel = gb[mb]
    shape = d.attr("source_shape")
    n = int(np.prod(shape)) if shape else 1
    out = np.zeros(n)
    out[:min(n, sel.size)] = sel[:n]
    return out.reshape(shape)


BODIES = {"masked_fill": _fill, "masked_scatter": _scatter, "masked_select": _select, "nonzero": _nonzero,
          "argwhere": _nonzero, "nonzero_static": _nonzero, "masked_scatter_backward": _scatter_bw}

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        return _fn(desc, *xs)
    register_reference(_name, _run)
