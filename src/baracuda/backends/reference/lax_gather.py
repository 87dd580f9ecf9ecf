"""NumPy bodies of lax_gather / lax_scatter (the oracle: index arithmetic over every output / update element).

Both walk their "space" (gather: the output; scatter: the updates) through ``ops.lax_gather.IndexMap``: the batch
coordinates pick an index vector, whose components (clamped in 'clip' mode, checked in 'fill' mode) and the
batching coordinates give the window's start in the operand, and the window coordinates are added on the window
dims.  Float values are float64 here (the registration upcasts them); integers and bools stay exact.
"""
from __future__ import annotations

import numpy as np

from ...ops.lax_gather import fill_of, index_map_of
from . import register_reference


def operand_coords(im, shape, idx):
    """(operand coordinates per space element, in-bounds mask) -- both of the space's shape.  Out-of-bounds
    windows ('fill' mode) get coordinates 0 (never dereferenced as such: the mask says which)."""
    pos = list(np.indices(im.space)) if im.space else []
    g = tuple(pos[d] for d in im.batch_dims)           # the coordinates into the indices' batch dims
    start = [np.zeros(im.space, np.int64) for _ in shape]
    ok = np.ones(im.space, bool)
    idx = np.asarray(idx).astype(np.int64)
    for k, od in enumerate(im.index_map):
        s = np.broadcast_to(idx[g + (k,)], im.space)
        hi = shape[od] - im.window[od]                 # the last start whose window is in bounds
        if im.clip:
            s = np.clip(s, 0, hi)
        else:
            ok &= (s >= 0) & (s <= hi)
        start[od] = s
    for od, idim in im.batching:
        start[od] = g[idim]
    for sd, od in zip(im.window_dims, im.window_operand):
        start[od] = start[od] + pos[sd]
    return tuple(np.where(ok, c, 0) for c in start), ok


def _gather(d, x, idx):
    im = index_map_of(d)
    coords, ok = operand_coords(im, x.shape, idx)
    fill = fill_of(d.inputs[0].dtype, d.attr("fill_value"))
    if not ok.size:
        return np.zeros(im.space, x.dtype)
    return np.where(ok, x[coords], np.asarray(fill).astype(x.dtype))


_UFUNC = {"add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}   # bool: OR / AND / AND / OR


def _scatter(d, x, idx, u):
    im = index_map_of(d)
    out = x.copy()
    coords, ok = operand_coords(im, x.shape, idx)
    if not ok.any():
        return out
    tgt = tuple(c[ok] for c in coords)                 # row-major update order, dropped windows left out
    vals = u[ok]
    comb = d.attr("combiner")
    if comb == "replace":   # duplicate targets: the last update in row-major order wins
        flat = np.ravel_multi_index(tgt, x.shape)
        _, first_rev = np.unique(flat[::-1], return_index=True)
        last = len(flat) - 1 - first_rev
        out[tuple(c[last] for c in tgt)] = vals[last]
    else:                   # np.maximum / np.minimum propagate NaN (XLA's max / min)
        _UFUNC[comb].at(out, tgt, vals)
    return out


register_reference("lax_gather", _gather)
register_reference("lax_scatter", _scatter)
