"""JAX's general gather / scatter with XLA dimension numbers: ``lax_gather`` (``jax.lax.gather``) and
``lax_scatter`` (``jax.lax.scatter`` / ``scatter_add`` / ``scatter_mul`` / ``scatter_min`` / ``scatter_max``
through ``combiner``).  The torch forms (gather, index_select, take, index_add, ...) are special cases.

lax_gather(operand, start_indices; offset_dims, collapsed_slice_dims, start_index_map, operand_batching_dims=(),
           start_indices_batching_dims=(), slice_sizes, mode='fill', fill_value=None) -> out
  index_vector_dim is start_indices' last dim (JAX's convention).  out has rank (start_indices.ndim - 1) +
  len(offset_dims); its offset_dims hold the window (slice_sizes of the operand dims neither collapsed nor
  batching, in order), its other ("batch") dims follow start_indices' dims but the last, in order.  For an
  output position with batch coordinates G and window coordinates W:
    start[d] = start_indices[G][k] for d = start_index_map[k];  start[d] = G[start_indices_batching_dims[i]]
    for d = operand_batching_dims[i];  0 elsewhere;  out[G, W] = operand[start + W (placed on the window dims)].
lax_scatter(operand, scatter_indices, updates; update_window_dims, inserted_window_dims,
            scatter_dims_to_operand_dims, operand_batching_dims=(), scatter_indices_batching_dims=(),
            combiner='replace', mode='fill') -> out
  out = operand, then every update element goes to the operand position computed the same way (updates'
  update_window_dims are the window, its other dims follow scatter_indices' dims but the last), combined by
  replace / add / mul / min / max.

Out-of-bounds windows (JAX's GatherScatterMode; ``mode=None`` is 'fill', as JAX):
  'clip': every start index is clamped to [0, operand.shape[d] - window[d]] so the whole window is in bounds;
  'fill': a window any part of which is out of bounds is filled with ``fill_value`` (gather; None: NaN for
    floats, the minimum for signed integers, the maximum for unsigned ones, True for bool, as JAX) or dropped
    entirely (scatter);
  'promise_in_bounds': treated as 'clip' here (JAX leaves out-of-bounds results unspecified).
  Indices never wrap (no negative indexing: lax's).  No mode raises or reads / writes out of bounds, so these ops
  set no device flag: an out-of-bounds index is defined behaviour here, unlike the torch forms.

Combiners: 'replace' with duplicate targets keeps one of the values (the reference: the last in row-major update
order; the GPU: whichever store lands last, so its plan says deterministic=False, as JAX says "may be applied in
any order"); 'add' / 'mul' on floats depend on the order the atomics land in (deterministic=False); integer sums
and products wrap in the operand's dtype; bool add is OR and mul AND (XLA's PRED arithmetic); 'min' / 'max'
propagate NaN (XLA's min / max) and are exact.

Validation: every constraint of JAX's shape rules (``_gather_shape_rule`` / ``_scatter_shape_rule``): sorted,
distinct, in-range dims; disjoint collapsed / inserted and batching dims; start_index_map outside the batching
dims; matching batching sizes; one slice size per operand dim, each in [0, operand dim], 1 on the collapsed dims
(<= 1 on the batching dims); updates' scatter dims equal to scatter_indices' dims; window bounds within the
operand.  Errors name the op, the attribute, what was expected and what was given.  ``unique_indices`` and
``indices_are_sorted`` are hints (accepted; they change no result).  Index dtypes: int32 and int64.

Backward (JAX's transpose rules): gather -> operand gets lax_scatter(zeros, indices, g; combiner='add') with the
mirrored dimension numbers and the same mode (a filled window gets no gradient); scatter(add) -> operand gets g,
updates get lax_gather(g) (fill_value=0: a dropped window's update gets none); scatter(replace) -> operand gets
g with the scattered positions zeroed (a replace scatter of zeros), updates get lax_gather(g): exact for unique
targets (with duplicate targets every duplicate receives the target's gradient; JAX gives it to the winner only);
min / max -> the gradient is shared evenly by the operand value and the updates equal to the result (torch's
scatter_reduce amax rule); mul -> operand gets lax_scatter(g, indices, updates; 'mul'), updates get
lax_gather(g * operand): JAX's rule, defined (as JAX) only for unique_indices=True (else UnsupportedError).
"""
from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, Sample, TensorSpec, Workload, default_tol, set_bench_inputs
from ._common import check_nonneg
from .indexing import INDEX_TYPES, _values, index_bench_inputs, index_spec, zeros_view

__all__ = ["IndexMap", "MODES", "COMBINERS", "index_map_of", "fill_of"]

MODES = ("fill", "clip", "promise_in_bounds")
COMBINERS = ("replace", "add", "mul", "min", "max")
declare_rule_ops(__name__, "lax_gather", "lax_scatter", "full", "eq", "div", "mul", "to_dtype")


class IndexMap(NamedTuple):
    """The one geometry both ops share, over the "space" (gather: the output; scatter: the updates).

    window_dims: the space dims holding the window, mapped in order to ``window_operand`` operand dims;
    batch_dims: the other space dims, in order those of the indices but the last;
    index_map: operand dim of each index-vector component; batching: (operand dim, indices dim) pairs;
    window: per operand dim, the window's extent (clip clamps a start to operand.shape[d] - window[d]);
    clip: 'clip' / 'promise_in_bounds' (else 'fill': out-of-bounds windows filled or dropped)."""
    space: tuple
    window_dims: tuple
    window_operand: tuple
    batch_dims: tuple
    index_map: tuple
    batching: tuple
    window: tuple
    clip: bool


def _bad(op, arg, expected, given):
    return InvalidProblemError(op, arg, expected, given)


def _dims(op, arg, dims, rank, *, ordered=True):
    """Distinct dims in [0, rank), sorted unless ``ordered`` is False."""
    if any(not 0 <= d < rank for d in dims):
        raise _bad(op, arg, f"dims in [0, {rank})", dims)
    if len(set(dims)) != len(dims):
        raise _bad(op, arg, "distinct dims", dims)
    if ordered and list(dims) != sorted(dims):
        raise _bad(op, arg, "sorted dims", dims)


def _common(op, names, inputs, attrs, keys):
    """The checks gather and scatter share; keys: (collapsed/inserted, index map, operand batching, indices
    batching) attribute names."""
    check_nonneg(op, names, [t.shape for t in inputs])
    x, idx = inputs[:2]
    _values(op, x)
    if idx.dtype not in INDEX_TYPES:
        raise DTypeMismatchError(op, names[1], "i64 or i32", str(idx.dtype))
    if not idx.shape:
        raise _bad(op, names[1], "a tensor of rank >= 1 (its last dim is the index vector)", idx.shape)
    r, ir = len(x.shape), len(idx.shape)
    ins, imap, obd, ibd = (attrs[k] for k in keys)
    _dims(op, keys[0], ins, r)
    _dims(op, keys[2], obd, r)
    if set(ins) & set(obd):
        raise _bad(op, keys[2], f"dims disjoint from {keys[0]} {ins}", obd)
    if len(imap) != idx.shape[-1]:
        raise _bad(op, keys[1], f"{idx.shape[-1]} dims (the size of {names[1]}'s last dim)", imap)
    _dims(op, keys[1], imap, r, ordered=False)
    if set(imap) & set(obd):
        raise _bad(op, keys[1], f"dims outside {keys[2]} {obd}", imap)
    _dims(op, keys[3], ibd, ir - 1, ordered=False)
    if len(ibd) != len(obd):
        raise _bad(op, keys[3], f"{len(obd)} dims (one per {keys[2]} dim)", ibd)
    ob, ib = tuple(x.shape[d] for d in obd), tuple(idx.shape[d] for d in ibd)
    if ob != ib:
        raise _bad(op, keys[3], f"dims of the operand's batching sizes {ob}", f"dims of sizes {ib}")


def fill_of(dtype: DType, fill_value):
    """The gather's fill value in ``dtype`` (None: JAX's default)."""
    if fill_value is None:
        if dtype.is_floating:
            return math.nan
        if dtype == DType.bool:
            return True
        info = np.iinfo(dtype.numpy)
        return int(info.min if info.min < 0 else info.max)
    if dtype == DType.bool:
        return bool(fill_value)
    if not dtype.is_floating:
        info = np.iinfo(dtype.numpy)
        if fill_value != int(fill_value) or not info.min <= fill_value <= info.max:
            raise _bad("lax_gather", "fill_value", f"an integer in [{info.min}, {info.max}] (the operand is {dtype})",
                       fill_value)
        return int(fill_value)
    return float(fill_value)


_GKEYS = ("collapsed_slice_dims", "start_index_map", "operand_batching_dims", "start_indices_batching_dims")
_SKEYS = ("inserted_window_dims", "scatter_dims_to_operand_dims", "operand_batching_dims",
          "scatter_indices_batching_dims")


def _check_gather(inputs, attrs):
    op = "lax_gather"
    if len(inputs) != 2:
        raise _bad(op, "inputs", "2 operands (operand, start_indices)", len(inputs))
    _common(op, ("operand", "start_indices"), inputs, attrs, _GKEYS)
    x, idx = inputs
    offs, col, obd, sizes = attrs["offset_dims"], attrs["collapsed_slice_dims"], attrs["operand_batching_dims"], \
        attrs["slice_sizes"]
    out_rank = len(offs) + len(idx.shape) - 1
    _dims(op, "offset_dims", offs, out_rank)
    if len(sizes) != len(x.shape):
        raise _bad(op, "slice_sizes", f"{len(x.shape)} sizes (one per operand dim)", sizes)
    if len(offs) + len(col) + len(obd) != len(x.shape):
        raise _bad(op, "offset_dims", f"{len(x.shape) - len(col) - len(obd)} dims (operand rank - collapsed - "
                   "batching dims)", offs)
    for d, (s, n) in enumerate(zip(sizes, x.shape)):
        if not 0 <= s <= n:
            raise _bad(op, "slice_sizes", f"slice_sizes[{d}] in [0, {n}] (the operand's dim {d})", sizes)
    if any(sizes[d] != 1 for d in col):
        raise _bad(op, "slice_sizes", f"1 on the collapsed_slice_dims {col}", sizes)
    if any(sizes[d] > 1 or (sizes[d] == 0 and x.shape[d]) for d in obd):
        raise _bad(op, "slice_sizes", f"1 on the operand_batching_dims {obd}", sizes)
    fill_of(x.dtype, attrs["fill_value"])
    win = iter(s for d, s in enumerate(sizes) if d not in col and d not in obd)
    bat = iter(idx.shape[:-1])
    shape = tuple(next(win) if d in offs else next(bat) for d in range(out_rank))
    return dict(attrs), (TensorSpec(shape, x.dtype),)


def _check_scatter(inputs, attrs):
    op = "lax_scatter"
    if len(inputs) != 3:
        raise _bad(op, "inputs", "3 operands (operand, scatter_indices, updates)", len(inputs))
    _common(op, ("operand", "scatter_indices", "updates"), inputs, attrs, _SKEYS)
    x, idx, u = inputs
    if u.dtype != x.dtype:
        raise DTypeMismatchError(op, "updates", f"{x.dtype} (the operand's)", str(u.dtype))
    uwd, ins, obd = attrs["update_window_dims"], attrs["inserted_window_dims"], attrs["operand_batching_dims"]
    _dims(op, "update_window_dims", uwd, len(u.shape))
    if len(uwd) + len(ins) + len(obd) != len(x.shape):
        raise _bad(op, "update_window_dims", f"{len(x.shape) - len(ins) - len(obd)} dims (operand rank - inserted "
                   "- batching dims)", uwd)
    scat = tuple(u.shape[d] for d in range(len(u.shape)) if d not in uwd)
    if scat != tuple(idx.shape[:-1]):
        raise _bad(op, "updates", f"scatter dims (those not in update_window_dims) of sizes {tuple(idx.shape[:-1])} "
                   "(scatter_indices' but the last)", u.shape)
    wops = [d for d in range(len(x.shape)) if d not in ins and d not in obd]
    for k, (ud, od) in enumerate(zip(uwd, wops)):
        if u.shape[ud] > x.shape[od]:
            raise _bad(op, "updates", f"a window no larger than the operand: updates dim {ud} <= operand dim {od} "
                       f"of size {x.shape[od]}", u.shape)
    return dict(attrs), (TensorSpec(x.shape, x.dtype),)


def index_map_of(desc) -> IndexMap:
    """The IndexMap of a lax_gather / lax_scatter descriptor."""
    a = desc.attr_dict
    x, idx = desc.inputs[:2]
    r = len(x.shape)
    if desc.op == "lax_gather":
        space, wdims, ins, imap, obd, ibd = desc.outputs[0].shape, a["offset_dims"], a["collapsed_slice_dims"], \
            a["start_index_map"], a["operand_batching_dims"], a["start_indices_batching_dims"]
        window = tuple(a["slice_sizes"])
    else:
        space, wdims, ins, imap, obd, ibd = desc.inputs[2].shape, a["update_window_dims"], \
            a["inserted_window_dims"], a["scatter_dims_to_operand_dims"], a["operand_batching_dims"], \
            a["scatter_indices_batching_dims"]
        w = [1] * r
        for ud, od in zip(wdims, [d for d in range(r) if d not in ins and d not in obd]):
            w[od] = desc.inputs[2].shape[ud]
        window = tuple(w)
    wop = tuple(d for d in range(r) if d not in ins and d not in obd)
    bdims = tuple(d for d in range(len(space)) if d not in wdims)
    return IndexMap(tuple(space), tuple(wdims), wop, bdims, tuple(imap), tuple(zip(obd, ibd)), window,
                    a["mode"] != "fill")


# -- backward --------------------------------------------------------------------------------------------------
def _flags(a):
    return {"mode": a["mode"], "indices_are_sorted": a["indices_are_sorted"], "unique_indices": a["unique_indices"]}


def _g_gather(ctx, d, grads, s):
    a, x = d.attr_dict, d.inputs[0]
    g = ctx.op("lax_scatter", zeros_view(ctx, x.shape, x.dtype), s["start_indices"], grads[0],
               update_window_dims=a["offset_dims"], inserted_window_dims=a["collapsed_slice_dims"],
               scatter_dims_to_operand_dims=a["start_index_map"], operand_batching_dims=a["operand_batching_dims"],
               scatter_indices_batching_dims=a["start_indices_batching_dims"], combiner="add", **_flags(a))
    return g, None


def _gather_of(ctx, d, t, idx, fill=0.0):
    """lax_gather of an operand-shaped ``t`` at the scatter's update windows (the updates' shape)."""
    a, im = d.attr_dict, index_map_of(d)
    return ctx.op("lax_gather", t, idx, offset_dims=a["update_window_dims"],
                  collapsed_slice_dims=a["inserted_window_dims"], start_index_map=a["scatter_dims_to_operand_dims"],
                  operand_batching_dims=a["operand_batching_dims"],
                  start_indices_batching_dims=a["scatter_indices_batching_dims"], slice_sizes=im.window,
                  fill_value=fill, **_flags(a))


def _scatter_like(ctx, d, operand, idx, updates, combiner):
    a = dict(d.attr_dict, combiner=combiner)
    return ctx.op("lax_scatter", operand, idx, updates, **a)


def _g_scatter(ctx, d, grads, s):
    g, idx, comb = grads[0], s["scatter_indices"], d.attr("combiner")
    u = d.inputs[2]
    if comb == "add":
        return g, None, _gather_of(ctx, d, g, idx)
    if comb == "replace":
        return _scatter_like(ctx, d, g, idx, zeros_view(ctx, u.shape, u.dtype), "replace"), None, _gather_of(ctx, d, g, idx)
    if comb in ("min", "max"):
        dt = d.inputs[0].dtype
        out, x, upd = s["out"], s["operand"], s["updates"]
        x_is = ctx.op("to_dtype", ctx.op("eq", x, out), dtype=dt)
        # a dropped window's update reads NaN (equal to nothing): no share of the gradient
        u_is = ctx.op("to_dtype", ctx.op("eq", upd, _gather_of(ctx, d, out, idx, math.nan)), dtype=dt)
        n = _scatter_like(ctx, d, x_is, idx, u_is, "add")
        gd = ctx.op("div", g, n)
        return ctx.op("mul", x_is, gd), None, ctx.op("mul", u_is, _gather_of(ctx, d, gd, idx))
    if not d.attr("unique_indices"):   # JAX's scatter_mul JVP refuses the same case
        raise UnsupportedError("lax_scatter", "combiner='mul' is differentiable only with unique_indices=True "
                               "(JAX's rule: the updates' gradient is the operand's value at their target)")
    gx = _scatter_like(ctx, d, g, idx, s["updates"], "mul")
    return gx, None, _gather_of(ctx, d, ctx.op("mul", g, s["operand"]), idx)


def _scatter_saves(desc):
    if desc.attr("combiner") in ("min", "max"):
        return ("operand", "scatter_indices", "updates", "out")
    if desc.attr("combiner") == "mul":
        return ("operand", "scatter_indices", "updates")
    return ("scatter_indices",)


# -- samples / errors --------------------------------------------------------------------------------------------
def _gd(offset_dims, collapsed, start_map, slice_sizes, obd=(), ibd=(), **kw):
    return dict(offset_dims=offset_dims, collapsed_slice_dims=collapsed, start_index_map=start_map,
                operand_batching_dims=obd, start_indices_batching_dims=ibd, slice_sizes=slice_sizes, **kw)


def _sd(window, inserted, to_operand, obd=(), ibd=(), **kw):
    return dict(update_window_dims=window, inserted_window_dims=inserted, scatter_dims_to_operand_dims=to_operand,
                operand_batching_dims=obd, scatter_indices_batching_dims=ibd, **kw)


def _ri(rng, shape, hi, lo=0):
    return rng.integers(lo, hi, size=shape).astype(np.int64)


def _gather_samples(rng):
    n = rng.standard_normal
    # rows (index_select): [5, 4] operand, 3 row indices
    yield Sample((n((5, 4)), _ri(rng, (3, 1), 5)), _gd((1,), (0,), (0,), (1, 4), mode="clip"), name="rows")
    # torch.gather along dim 1 through a batching dim: out[i, j] = x[i, idx[i, j]]
    yield Sample((n((3, 6)), _ri(rng, (3, 4, 1), 6).astype(np.int32)),
                 _gd((), (1,), (1,), (1, 1), obd=(0,), ibd=(0,), mode="clip"), name="batching-i32")
    # 2-d windows at 2-d starts (dynamic_slice batched), clamped: starts past the end clip
    yield Sample((n((4, 5, 3)), _ri(rng, (2, 3, 2), 6)), _gd((1, 3), (1,), (0, 1), (2, 1, 3), mode="clip"),
                 name="windows-clip")
    # fill: windows partly out of bounds (and negative starts) filled with fill_value
    yield Sample((n((6, 3)), _ri(rng, (5, 1), 7, lo=-2)), _gd((1, 2), (), (0,), (2, 3), fill_value=1.0),
                 name="fill")
    yield Sample((n((6, 3)), _ri(rng, (4, 1), 8)), _gd((1,), (0,), (0,), (1, 3)), name="fill-nan-default",
                 grad=False)
    # rank 4, everything at once: a batching dim, a 2-component index vector, interleaved window and batch dims
    yield Sample((n((2, 3, 4, 5)), _ri(rng, (2, 3, 2), 4)),
                 _gd((1, 3), (1,), (1, 3), (1, 1, 2, 3), obd=(0,), ibd=(0,), fill_value=0.0), name="rank4-mixed")
    # an empty index vector: every window starts at 0; offset dim in the middle
    yield Sample((n((3, 4)), np.zeros((2, 0), np.int64)), _gd((1,), (0,), (), (1, 3), mode="clip"), name="no-index")
    yield Sample((n((5, 4)), np.zeros((0, 1), np.int64)), _gd((1,), (0,), (0,), (1, 4)), name="empty")


def _perm(rng, n, k):
    return rng.permutation(n)[:k].astype(np.int64)


def _scatter_samples(rng):
    n = rng.standard_normal
    for comb in COMBINERS:
        # rows (index_add / index_copy): distinct rows for replace, repeated rows for the reductions
        # (mul: JAX differentiates it for unique_indices=True only)
        unique = comb in ("replace", "mul")
        rows = _perm(rng, 6, 4) if unique else _ri(rng, 4, 6)
        yield Sample((n((6, 3)), rows[:, None], n((4, 3))), _sd((1,), (0,), (0,), combiner=comb, mode="clip",
                                                             unique_indices=comb == "mul"), name=f"rows-{comb}")
    # torch.scatter_add along dim 1 through a batching dim (duplicates within a row)
    yield Sample((n((3, 5)), _ri(rng, (3, 4, 1), 5).astype(np.int32), n((3, 4))),
                 _sd((), (1,), (1,), obd=(0,), ibd=(0,), combiner="add"), name="batching-add-i32")
    # 2-d windows at distinct 2-d starts, some out of bounds: dropped (fill) or clamped (clip)
    idx = np.array([[0, 0], [2, 3], [5, 1], [-1, 0]], np.int64)
    yield Sample((n((4, 5)), idx, n((4, 2, 2))), _sd((1, 2), (), (0, 1), combiner="replace"), name="windows-drop")
    yield Sample((n((4, 5)), idx[:2], n((2, 2, 2))), _sd((1, 2), (), (0, 1), combiner="add", mode="clip"),
                 name="windows-add-clip")
    yield Sample((n((4, 5)), idx, n((4, 2, 2))), _sd((1, 2), (), (0, 1), combiner="max"), name="windows-max-drop")
    # the rank-4 mirror of lax_gather's (its transpose), windows partly out of bounds dropped
    yield Sample((n((2, 3, 4, 5)), _ri(rng, (2, 3, 2), 4), n((2, 2, 3, 3))),
                 _sd((1, 3), (1,), (1, 3), obd=(0,), ibd=(0,), combiner="add"), name="rank4-mixed-add")
    yield Sample((n((3, 4)), np.zeros((0, 1), np.int64), np.zeros((0, 4))), _sd((1,), (0,), (0,), combiner="add"),
                 name="empty")


def _gather_errors():
    x, i = ((5, 4), "f32"), ((3, 1), "i64")
    ok = _gd((1,), (0,), (0,), (1, 4))
    yield ErrorCase((x, ((3, 1), "f32")), ok, DTypeMismatchError, r"lax_gather: argument 'start_indices'", "idx-dtype")
    yield ErrorCase((x, i), dict(ok, collapsed_slice_dims=(2,)), InvalidProblemError,
                    r"lax_gather: argument 'collapsed_slice_dims': expected dims in \[0, 2\)", "collapsed-range")
    yield ErrorCase((((5, 4, 2), "f32"), ((3, 1), "i64")), _gd((1,), (2, 0), (0,), (1, 4, 1)), InvalidProblemError,
                    r"lax_gather: argument 'collapsed_slice_dims': expected sorted dims", "collapsed-unsorted")
    yield ErrorCase((x, i), dict(ok, slice_sizes=(1, 5)), InvalidProblemError,
                    r"lax_gather: argument 'slice_sizes': expected slice_sizes\[1\] in \[0, 4\]", "slice-size")
    yield ErrorCase((x, i), dict(ok, slice_sizes=(2, 4)), InvalidProblemError,
                    r"lax_gather: argument 'slice_sizes': expected 1 on the collapsed", "collapsed-size")
    yield ErrorCase((x, i), dict(ok, start_index_map=(0, 1)), InvalidProblemError,
                    r"lax_gather: argument 'start_index_map': expected 1 dims", "map-len")
    yield ErrorCase((x, i), dict(ok, offset_dims=(1, 2)), InvalidProblemError, r"lax_gather: argument 'offset_dims'",
                    "offset-count")
    yield ErrorCase((x, i), dict(ok, mode="wrap"), InvalidProblemError, r"lax_gather: argument 'mode'", "mode")
    yield ErrorCase((((3, 6), "i32"), ((3, 4, 1), "i64")), _gd((), (1,), (1,), (1, 1), obd=(0,), ibd=(1,)),
                    InvalidProblemError, r"lax_gather: argument 'start_indices_batching_dims'", "batch-size")
    yield ErrorCase((((5, 4), "i32"), i), dict(ok, fill_value=0.5), InvalidProblemError,
                    r"lax_gather: argument 'fill_value'", "fill-int")
    yield ErrorCase((x, ((), "i64")), ok, InvalidProblemError, r"lax_gather: argument 'start_indices'", "0d")


def _scatter_errors():
    x, i, u = ((6, 3), "f32"), ((4, 1), "i64"), ((4, 3), "f32")
    ok = _sd((1,), (0,), (0,))
    yield ErrorCase((x, i, ((4, 3), "f64")), ok, DTypeMismatchError, r"lax_scatter: argument 'updates'", "dtype")
    yield ErrorCase((x, i, ((5, 3), "f32")), ok, InvalidProblemError,
                    r"lax_scatter: argument 'updates': expected scatter dims", "scatter-dims")
    yield ErrorCase((x, i, ((4, 4), "f32")), ok, InvalidProblemError,
                    r"lax_scatter: argument 'updates': expected a window no larger", "window")
    yield ErrorCase((x, i, u), dict(ok, update_window_dims=(2,)), InvalidProblemError,
                    r"lax_scatter: argument 'update_window_dims': expected dims in \[0, 2\)", "uwd-range")
    yield ErrorCase((x, i, u), dict(ok, scatter_dims_to_operand_dims=(0, 0)), InvalidProblemError,
                    r"lax_scatter: argument 'scatter_dims_to_operand_dims'", "map")
    yield ErrorCase((x, i, u), dict(ok, operand_batching_dims=(0,), scatter_indices_batching_dims=(0,)),
                    InvalidProblemError, r"lax_scatter: argument 'operand_batching_dims': expected dims disjoint",
                    "disjoint")
    yield ErrorCase((x, i, u), dict(ok, combiner="sub"), InvalidProblemError, r"lax_scatter: argument 'combiner'",
                    "combiner")


# -- specs -----------------------------------------------------------------------------------------------------
_FLAGS = (Attr("mode", "str", "fill", none_default=True, choices=MODES),
          Attr("indices_are_sorted", "bool", False), Attr("unique_indices", "bool", False))


def _gather_cost(desc):
    return desc.inputs[1].nbytes + 2 * desc.outputs[0].nbytes, 0


def _scatter_cost(desc):
    x, idx, u = desc.inputs
    # operand copied (read + write), the index and updates read once, each update's target read and written
    return 2 * x.nbytes + idx.nbytes + 3 * u.nbytes, (u.numel if desc.attr("combiner") != "replace" else 0)


_ROWS = _gd((1,), (0,), (0,), (1, 4096), mode="clip")
index_spec("lax_gather", _check_gather, arg_names=("operand", "start_indices"), torch_name=None,
           attrs=(Attr("offset_dims", "ints", REQUIRED), Attr("collapsed_slice_dims", "ints", REQUIRED),
                  Attr("start_index_map", "ints", REQUIRED), Attr("operand_batching_dims", "ints", ()),
                  Attr("start_indices_batching_dims", "ints", ()), Attr("slice_sizes", "shape", REQUIRED))
           + _FLAGS + (Attr("fill_value", "number", None, optional=True),),
           grad=_g_gather, saves=("start_indices",), samples=_gather_samples, errors=_gather_errors,
           cost=_gather_cost, jax_name="jax.lax.gather",
           workloads=[Workload("lax_gather-rows-[65536,4096]<-[16384]-bf16",
                               ((65536, 4096), ((16384, 1), DType.i64)), DType.bf16, _ROWS, backward=True)],
           doc="jax.lax.gather with XLA GatherDimensionNumbers (index_vector_dim: start_indices' last dim); "
               "modes clip / fill (fill_value) / promise_in_bounds (= clip).")

index_spec("lax_scatter", _check_scatter, arg_names=("operand", "scatter_indices", "updates"), torch_name=None,
           attrs=(Attr("update_window_dims", "ints", REQUIRED), Attr("inserted_window_dims", "ints", REQUIRED),
                  Attr("scatter_dims_to_operand_dims", "ints", REQUIRED), Attr("operand_batching_dims", "ints", ()),
                  Attr("scatter_indices_batching_dims", "ints", ()),
                  Attr("combiner", "str", "replace", choices=COMBINERS)) + _FLAGS,
           grad=_g_scatter, differentiable=(0, 2), saves=_scatter_saves, samples=_scatter_samples,
           errors=_scatter_errors, cost=_scatter_cost, jax_name="jax.lax.scatter",
           # replace / min / max move values (exact); add / mul round once per combine in the accumulator (f32 for the
           # half types, rounded once at the end): the dtype's default tolerance
           tol=lambda dt: default_tol(dt) if dt.is_floating else (0.0, 0.0),
           workloads=[Workload("lax_scatter-add-rows-[65536,64]<-[16M]-f32",
                               ((65536, 64), ((1 << 24, 1), DType.i64), (1 << 24, 64)), DType.f32,
                               _sd((1,), (0,), (0,), combiner="add", mode="clip"))],
           doc="jax.lax.scatter / scatter_add / scatter_mul / scatter_min / scatter_max (combiner) with XLA "
               "ScatterDimensionNumbers; modes fill (drop out-of-bounds windows) / clip / promise_in_bounds (= clip).")

set_bench_inputs("lax_gather", index_bench_inputs(1, lambda d: d.inputs[0].shape[0]))
set_bench_inputs("lax_scatter", index_bench_inputs(1, lambda d: d.inputs[0].shape[0]))
