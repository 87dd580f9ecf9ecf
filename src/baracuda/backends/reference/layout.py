"""NumPy bodies of the layout family (exact: pure data movement, no upcast needed)."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.layout_join import pad_pairs
from . import register_reference


def _perm_movedim(d, x):
    return np.moveaxis(x, d.attr("source"), d.attr("destination"))


def _slice(d, x):
    idx = [slice(None)] * x.ndim
    idx[d.attr("dim")] = slice(d.attr("start"), d.attr("end"), d.attr("step"))
    return x[tuple(idx)]


def _roll(d, x):
    if x.ndim == 0:       # torch.roll of a 0-d tensor is the value (np.roll has no axis 0 to roll)
        return x
    dims = d.attr("dims")
    return np.roll(x, d.attr("shifts"), dims) if dims is not None else np.roll(x, d.attr("shifts")[0])


def _repeat(d, x):
    reps = d.attr("repeats")
    return np.tile(x.reshape((1,) * (len(reps) - x.ndim) + x.shape), reps)


def _counts(d, reps, n):
    """The per-element repeat counts (a 1-count tensor applies to every element), validated on the host."""
    reps = np.asarray(reps).reshape(-1).astype(np.int64)
    if reps.size == 1 and n != 1:
        reps = np.full(n, reps[0], np.int64)
    if (reps < 0).any():
        raise InvalidProblemError("repeat_interleave", "repeats", "non-negative counts", reps.min())
    return reps


def _rinter(d, x, reps=None):
    dim = d.attr("dim")
    xx = x.reshape(-1) if dim is None else (x.reshape(1) if x.ndim == 0 else x)
    axis = 0 if dim is None else dim
    if reps is None:
        return np.repeat(xx, d.attr("repeats"), axis=axis)
    reps = _counts(d, reps, xx.shape[axis])
    if int(reps.sum()) != d.attr("output_size"):
        raise InvalidProblemError("repeat_interleave", "output_size", f"the sum of the repeats ({int(reps.sum())})",
                                  d.attr("output_size"))
    return np.repeat(xx, reps, axis=axis)


def _rinter_backward(d, g, reps):
    """x-grad[i] = sum of the grad rows j in segment i (the rows repeat_interleave wrote from element i)."""
    shape, dim = d.attr("shape"), d.attr("dim")
    axis = 0 if dim is None else dim
    n = int(np.prod(shape)) if dim is None else (list(shape) or [1])[axis]
    reps = _counts(d, reps, n)
    ends = np.cumsum(reps)
    out = np.zeros(g.shape[:axis] + (n,) + g.shape[axis + 1:], np.float64)
    for i in range(n):
        idx = [slice(None)] * g.ndim
        idx[axis] = slice(int(ends[i] - reps[i]), int(ends[i]))
        out[(slice(None),) * axis + (i,)] = g[tuple(idx)].sum(axis=axis)
    return out.reshape(shape)


def _tri(d, x):
    fn = np.triu if d.op == "triu" else np.tril
    return fn(x, d.attr("diagonal")) if x.size else x


def _cat(d, *xs):
    from ...ops.layout_join import cat_inputs

    keep = cat_inputs(d.inputs) or [0]
    dt = d.outputs[0].dtype.numpy     # torch's promotion, decided by the spec
    return np.concatenate([xs[i].astype(dt) for i in keep], axis=d.attr("dim"))


_NP_MODE = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


def _pad_index(n, a, m, mode):
    """For each of the m output positions along a dim, the input index it reads (-1: constant fill).  A negative
    pad crops: reflect / replicate map o - a over the whole input (torch), circular wraps the cropped input
    x[max(-a, 0) : n - max(-b, 0)] (torch pads the cropped view)."""
    i = np.arange(m) - a
    if mode == "constant":
        return np.where((i >= 0) & (i < n), i, -1)
    if mode == "reflect":
        i = np.abs(i)
        return np.where(i >= n, 2 * (n - 1) - i, i)
    if mode == "replicate":
        return np.clip(i, 0, n - 1)
    b = m - n - a
    c0, mc = max(-a, 0), n - max(-a, 0) - max(-b, 0)
    return (np.arange(m) - max(a, 0)) % max(mc, 1) + c0


def _pad(d, x):
    pairs = pad_pairs(x.ndim, d.attr("pad"))
    mode = d.attr("mode")
    out_shape = tuple(n + a + b for n, (a, b) in zip(x.shape, pairs))
    out = np.full(out_shape, d.attr("value"), dtype=np.float64 if x.dtype.kind == "f" else x.dtype)
    if mode == "constant" and x.dtype == np.bool_:
        out = np.full(out_shape, bool(d.attr("value")))
    idx = [_pad_index(n, a, m, mode) for n, (a, _), m in zip(x.shape, pairs, out_shape)]
    valid = np.ones(out_shape, bool)
    for k, ix in enumerate(idx):
        shp = [1] * x.ndim
        shp[k] = -1
        valid &= (ix >= 0).reshape(shp)
    if x.size and out.size:
        src = x[np.ix_(*[np.maximum(ix, 0) for ix in idx])]
        out[valid] = src[valid]
    return out


def _pad_backward(d, g):
    shape = d.attr("shape")
    pairs = pad_pairs(len(shape), d.attr("pad"))
    out = np.zeros(shape, np.float64)
    idx = [_pad_index(n, a, m, d.attr("mode")) for n, (a, _), m in zip(shape, pairs, g.shape)]
    if g.size:
        np.add.at(out, np.ix_(*idx), g)
    return out


def _scatter(d, x, src):
    out = x.copy()
    idx = [slice(None)] * x.ndim
    dim = d.attr("dim")
    if d.op == "select_scatter":
        idx[dim] = d.attr("index")
    elif d.op == "write_slice":
        idx[dim] = slice(d.attr("start"), d.attr("start") + src.shape[dim])
    else:
        idx[dim] = slice(d.attr("start"), d.attr("end"), d.attr("step"))
    out[tuple(idx)] = src
    return out


BODIES = {
    "contiguous": lambda d, x: x.copy(),
    "permute": lambda d, x: np.transpose(x, d.attr("dims")),
    "transpose": lambda d, x: np.swapaxes(x, d.attr("dim0"), d.attr("dim1")) if x.ndim else x,
    "movedim": _perm_movedim,
    "slice": _slice,
    "flip": lambda d, x: np.flip(x, d.attr("dims")) if x.ndim else x,
    "fliplr": lambda d, x: np.flip(x, 1),
    "flipud": lambda d, x: np.flip(x, 0),
    "roll": _roll,
    "rot90": lambda d, x: np.rot90(x, d.attr("k"), d.attr("dims")),
    "repeat": _repeat,
    "tile": _repeat,
    "repeat_interleave": _rinter,
    "repeat_interleave_backward": _rinter_backward,
    "triu": _tri,
    "tril": _tri,
    "cat": _cat,
    "stack": lambda d, *xs: np.stack([x.astype(d.outputs[0].dtype.numpy) for x in xs], axis=d.attr("dim")),
    "pad": _pad,
    "pad_backward": _pad_backward,
    "fill": lambda d, x: np.full(x.shape, d.attr("value"), dtype=x.dtype),
    "slice_scatter": _scatter,
    "select_scatter": _scatter,
    "write_slice": _scatter,
}

for _name, _fn in BODIES.items():
    register_reference(_name, _fn, upcast_inputs=_name.endswith("_backward"))   # the ops that add


def _diagonal(d, x):
    return np.diagonal(x, d.attr("offset"), d.attr("dim1"), d.attr("dim2")).copy()


def _diag_write(shape, g, offset, d1, d2, dtype):
    out = np.zeros(shape, dtype)
    view = np.diagonal(out, offset, d1, d2)
    view.setflags(write=True)
    view[...] = g
    return out


def _diagonal_bw(d, g):
    return _diag_write(d.attr("shape"), g, d.attr("offset"), d.attr("dim1"), d.attr("dim2"), g.dtype)


def _diag_embed(d, x):
    return _diag_write(d.outputs[0].shape, x, d.attr("offset"), d.attr("dim1"), d.attr("dim2"), x.dtype)


def _diag(d, x):
    k = d.attr("diagonal")
    if x.ndim == 1:
        return _diag_write(d.outputs[0].shape, x, k, 0, 1, x.dtype)
    return np.diagonal(x, k).copy()


for _name, _fn in (("diagonal", _diagonal), ("diagonal_backward", _diagonal_bw), ("diag_embed", _diag_embed),
                   ("diag", _diag)):
    register_reference(_name, _fn, upcast_inputs=False)
