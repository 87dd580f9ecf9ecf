"""NumPy bodies of index_select / index_add / index_copy / index_fill / index_reduce (+ index_reduce_backward).

Operands are viewed as (outer, N, inner) along ``dim``; indices are checked against torch's range first (the same
``InvalidProblemError`` the GPU kernels' flag raises).  Floats compute in float64, integers exactly in int64
(two's-complement wrap when rounded to the output dtype, as torch's integer arithmetic)."""
from __future__ import annotations

import numpy as np

from ...ops.indexing_index import INDEX_DEFS, dim_geometry, index_error, index_reduce_np
from . import register_reference


def checked_index(desc, index, n, arg="index"):
    """The indices as int64, negative ones wrapped where the op wraps; an out-of-range one raises."""
    idx = np.asarray(index).astype(np.int64).reshape(-1)
    wrap = INDEX_DEFS[desc.op].wrap if desc.op in INDEX_DEFS else False
    lo = -n if wrap else 0
    bad = (idx < lo) | (idx >= n)
    if bad.any():
        raise index_error(desc.op, arg, int(idx[bad][0]), n, wrap)
    return np.where(idx < 0, idx + n, idx)


def _view(desc, x):
    return np.asarray(x).reshape(dim_geometry(np.shape(x), desc.attr("dim")))


def _exact(x):
    """float64 for floats, int64 for integers and bools (exact arithmetic)."""
    return x.astype(np.float64) if x.dtype.kind == "f" else x.astype(np.int64)


def _select(d, x, index):
    x3 = _view(d, x)
    idx = checked_index(d, index, x3.shape[1])
    return x3[:, idx, :].reshape(d.outputs[0].shape)


def _src3(x3, src):
    return np.asarray(src).reshape(x3.shape[0], -1, x3.shape[2])


def _add(d, x, index, src):
    x3 = _exact(_view(d, x)).copy()
    idx = checked_index(d, index, x3.shape[1])
    np.add.at(x3, (slice(None), idx, slice(None)), _exact(_src3(x3, src)) * d.attr("alpha"))
    return x3.reshape(np.shape(x))


def _copy(d, x, index, src):
    x3 = _view(d, x).copy()
    idx = checked_index(d, index, x3.shape[1])
    s3 = _src3(x3, src)
    for k, n in enumerate(idx):          # in order: with repeated indices the last one wins (torch on the CPU)
        x3[:, n, :] = s3[:, k, :]
    return x3.reshape(np.shape(x))


def fill_value(d, x, value=None):
    """The fill value: the attribute, or the 0-d tensor operand (in x's arithmetic: float or exact int)."""
    v = d.attr("value") if value is None else np.asarray(value).item()
    return v if x.dtype.kind == "f" else bool(v) if x.dtype.kind == "b" else int(v)


def _fill(d, x, index, value=None):
    x3 = _view(d, x).copy()
    idx = checked_index(d, index, x3.shape[1])
    x3[:, idx, :] = fill_value(d, x, value)
    return x3.reshape(np.shape(x))


def _reduce(d, x, index, src):
    dim = d.attr("dim")
    idx = checked_index(d, index, dim_geometry(np.shape(x), dim)[1])
    if np.asarray(x).dtype.kind == "f":
        return index_reduce_np(x, idx, src, dim, d.attr("reduce"), d.attr("include_self"))
    return _reduce_int(d, x, idx, src)


def _reduce_int(d, x, idx, src):
    """Integer index_reduce in int64: mean is the floor of the sum over the count (torch's integral mean)."""
    x3 = _exact(_view(d, x))
    s3 = _exact(_src3(x3, src))
    out = x3.copy()
    red, incl = d.attr("reduce"), d.attr("include_self")
    for n in range(x3.shape[1]):
        ks = np.nonzero(idx == n)[0]
        if ks.size == 0:
            continue
        vals = np.concatenate([x3[:, n:n + 1, :], s3[:, ks, :]], axis=1) if incl else s3[:, ks, :]
        if red == "mean":
            out[:, n, :] = np.floor_divide(vals.sum(axis=1), vals.shape[1])
        else:
            out[:, n, :] = {"prod": np.prod, "amax": np.max, "amin": np.min}[red](vals, axis=1)
    return out.reshape(np.shape(x))


def _reduce_bw(d, g, x, index, src, out):
    """torch's index_reduce gradients: mean -> g / count; prod -> g * the product of the others; amax/amin ->
    g / (number of values equal to out, the input's own counted as torch does) at those values."""
    dim = d.attr("dim")
    red, incl = d.attr("reduce"), d.attr("include_self")
    x3, g3, o3 = _view(d, x), _view(d, g), _view(d, out)
    s3 = _src3(x3, src)
    idx = checked_index(d, index, x3.shape[1])
    gx, gs = g3.copy(), np.zeros_like(s3)
    for n in range(x3.shape[1]):
        ks = np.nonzero(idx == n)[0]
        if ks.size == 0:
            continue
        vals = np.concatenate([x3[:, n:n + 1, :], s3[:, ks, :]], axis=1) if incl else s3[:, ks, :]
        gn, on = g3[:, n:n + 1, :], o3[:, n:n + 1, :]
        if red == "mean":
            w = np.broadcast_to(gn / vals.shape[1], vals.shape)
        elif red == "prod":
            w = np.empty_like(vals)
            for j in range(vals.shape[1]):
                w[:, j, :] = gn[:, 0, :] * np.prod(np.delete(vals, j, axis=1), axis=1)
        else:
            # torch's rule: the gradient is shared by every value equal to the result, the input's own row counted
            # even when include_self=False (its share is then dropped: torch's index_fill of grad_self)
            hit = np.concatenate([x3[:, n:n + 1, :] == on, s3[:, ks, :] == on], axis=1)
            w = np.where(hit, gn / np.maximum(hit.sum(axis=1, keepdims=True), 1), 0.0)
            w = w if incl else w[:, 1:, :]
        if incl:
            gx[:, n, :], gs[:, ks, :] = w[:, 0, :], w[:, 1:, :]
        else:
            gx[:, n, :], gs[:, ks, :] = 0.0, w
    del dim
    return gx.reshape(np.shape(x)), gs.reshape(np.shape(src))


def put_index(op, x, indices):
    """The index tuple for the leading dims, wrapped; an out-of-range index raises naming indices[j]."""
    shape = np.shape(x) or (1,)
    out = []
    for j, t in enumerate(indices):
        n = shape[j]
        i = np.asarray(t).astype(np.int64)
        bad = (i < -n) | (i >= n)
        if bad.any():
            raise index_error(op, f"indices[{j}]", int(i[bad].reshape(-1)[0]), n, True)
        out.append(np.where(i < 0, i + n, i))
    return tuple(np.broadcast_arrays(*out))


def _put(d, x, values, *indices):
    out = _exact(np.asarray(x)).copy().reshape(np.shape(x) or (1,))
    idx = put_index(d.op, x, indices)
    target = out[idx].shape
    v = np.broadcast_to(_exact(np.asarray(values)), target)
    if d.attr("accumulate"):
        np.add.at(out, idx, v)
    else:
        out[idx] = v          # repeated destinations: the last value wins (NumPy's and torch's CPU rule)
    return out.reshape(np.shape(x))


def _adv(d, x, *indices):
    xx = np.asarray(x).reshape(np.shape(x) or (1,))
    return xx[put_index(d.op, x, indices)].reshape(d.outputs[0].shape)


BODIES = {"index_put": _put, "advanced_index": _adv,
          "index_select": _select, "index_add": _add, "index_copy": _copy, "index_fill": _fill,
          "index_reduce": _reduce, "index_reduce_backward": _reduce_bw}

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):
            return _fn(desc, *xs)
    register_reference(_name, _run)
