"""Histograms (issue 17): histc, histogram, bincount.

Semantics are torch's:

* histc(input, bins=100, min=0, max=0): ``bins`` equal-width bins over [min, max]; min == max (the default 0, 0,
  or any equal pair: torch's rule) takes the data's minimum and maximum (computed on the device: no host read);
  equal data bounds widen to [min - 1, max + 1]; min > max is an error.  A value's bin is floor((x - min) * bins / (max - min)) in float64; x == max lands in the last bin;
  values outside [min, max] and NaN are not counted.  Output: (bins,) of the input's dtype.
* histogram(input, bins, *, range=None, weight=None, density=False) -> (hist, bin_edges): ``bins`` an int (equal
  widths over ``range``, or the data's [min, max], equal bounds widened by 0.5 each way, an empty input [0, 1];
  bin_edges = torch.linspace(min, max, bins + 1)'s values) or a 1-D tensor of increasing edges (a value's bin: the
  last edge <= x; x == the last edge lands in the last bin).  ``weight`` (the input's shape and dtype): each value
  adds its weight instead of 1.  ``density``: hist / (sum(hist) * bin widths).  f32 / f64, as torch.
* histogramdd(input, bins=10, *, range=None, weight=None, density=False) -> (hist, bin_edges): the points along
  the input's last dim (D coordinates each), equal-width bins per dim (``bins`` an int or D ints; ``range`` 2 * D
  numbers or each dim's data range, widened as histogram's); a point outside any dim's range is not counted.
  ``bins`` as D edge tensors: operands after the input (the ``bins`` attribute None), binned as histogram's.
* bincount(input, weights=None, minlength=0): counts of each non-negative integer of the 1-D ``input``; output
  length max(max(input) + 1, minlength): the drop-in reads max(input) on the host (torch does the same) and passes
  it as the ``length`` attribute, which the Plan API's caller gives.  A negative value or one >= length is an
  ``InvalidProblemError`` (the GPU flag: nothing is written out of bounds).  Output int64, or the weights' sums:
  f32 for f32 weights, f64 for every other weight dtype (torch's rule).

The ops' operands: histc (input,); histogram (input[, bins tensor][, weight]) with the ``bins`` attribute an int or
None (None: the second operand is the edges tensor); bincount (input[, weights]).  None is differentiable (torch
has no derivative for them).

GPU algorithm: integer atomics into an int32 count per bin (deterministic: the counts do not depend on the order),
then one program writes the output (the cast, the density, the edges).  Weighted sums add floats atomically (f32
for f32, f64 for f64): not bit-stable across runs (the plan's precision says deterministic=False).
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import (Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec,
                          set_bench_inputs)
from ._common import check_nonneg, no_out
from .indexing_index import INT_VALUES

__all__ = ["HIST_TYPES", "outer_range", "np_linspace", "np_hist", "np_histogramdd", "bincount_error"]

HIST_TYPES = (DType.f64, DType.f32)                                  # torch.histogram (CPU)
HISTC_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16)         # torch.histc
WEIGHT_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16) + INT_VALUES + (DType.bool,)


def outer_range(op: str, lo: float, hi: float, data_lo=None, data_hi=None, empty=False):
    """The (min, max) a histogram bins over: the given range, or the data's (``data_lo``/``data_hi``) where none
    is given (histc: min = max = 0; histogram: range None), widened where equal (histc +-1, histogram +-0.5)."""
    if op == "histc":
        if lo == hi and not empty:
            lo, hi = data_lo, data_hi
        if lo == hi:
            lo, hi = lo - 1, hi + 1
        return float(lo), float(hi)
    if lo is None:
        lo, hi = (0.0, 1.0) if empty else (data_lo, data_hi)
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    return float(lo), float(hi)


def np_linspace(lo, hi, steps):
    """torch.linspace's values in float64: from the start for the first half, from the end for the second."""
    i = np.arange(steps, dtype=np.float64)
    step = (hi - lo) / (steps - 1) if steps > 1 else 0.0
    return np.where(i < steps // 2, lo + step * i, hi - step * (steps - 1 - i))


def np_hist(x, edges=None, bins=None, lo=None, hi=None, weight=None, density=False):
    """(hist, edges) in float64: equal-width bins over [lo, hi] (float64 bin positions) or given ``edges``."""
    x = np.asarray(x, np.float64).reshape(-1)
    w = np.ones_like(x) if weight is None else np.asarray(weight, np.float64).reshape(-1)
    with np.errstate(invalid="ignore"):
        if edges is None:
            edges = np_linspace(lo, hi, bins + 1)
            ok = (x >= lo) & (x <= hi)
            b = np.floor((np.where(ok, x, lo) - lo) * bins / (hi - lo)).astype(np.int64)
        else:
            edges = np.asarray(edges, np.float64)
            bins = edges.size - 1
            ok = (x >= edges[0]) & (x <= edges[-1]) if edges.size else np.zeros(x.shape, bool)
            b = np.searchsorted(edges, np.where(ok, x, 0), side="right") - 1
        b = np.minimum(b, bins - 1)
    hist = np.bincount(b[ok], weights=w[ok], minlength=bins)[:bins].astype(np.float64)
    if density:
        hist = hist / (hist.sum() * np.diff(edges))
    return hist, edges


def bincount_error(value: int, length: int) -> InvalidProblemError:
    return InvalidProblemError("bincount", "input", f"non-negative integers < length={length} (torch: "
                                                    "non-negative integral inputs)", value)


# -- shape / dtype rules -------------------------------------------------------------------------------
def _operands(op, inputs, n, names):
    if len(inputs) not in n:
        raise InvalidProblemError(op, "inputs", f"{' or '.join(map(str, n))} operands ({', '.join(names)})",
                                  len(inputs))
    check_nonneg(op, names, [t.shape for t in inputs])


def _dtype(op, x, dtypes, arg="input"):
    if x.dtype not in dtypes:
        raise UnsupportedError(op, f"argument '{arg}' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, dtypes))}")


def _bounds(op, lo, hi, arg):
    if lo is not None and not (math.isfinite(lo) and math.isfinite(hi)):
        raise InvalidProblemError(op, arg, "finite bounds", (lo, hi))
    if lo is not None and lo > hi:
        raise InvalidProblemError(op, arg, "min <= max (torch: max must be larger than min)", (lo, hi))


def _check_histc(inputs, attrs):
    op = "histc"
    _operands(op, inputs, (1,), ("input",))
    _dtype(op, inputs[0], HISTC_TYPES)
    _bounds(op, float(attrs["min"]), float(attrs["max"]), "max")
    return attrs, (TensorSpec((attrs["bins"],), inputs[0].dtype),)


def _check_histogram(inputs, attrs):
    op = "histogram"
    bins = attrs["bins"]
    names = ("input", "weight") if bins is not None else ("input", "bins", "weight")
    _operands(op, inputs, (1, 2) if bins is not None else (2, 3), names)
    x = inputs[0]
    _dtype(op, x, HIST_TYPES)
    rest = inputs[1:]
    if bins is None:
        e = rest[0]
        if e.dtype != x.dtype:
            raise DTypeMismatchError(op, "bins", f"{x.dtype} (the input's)", str(e.dtype))
        if len(e.shape) != 1 or e.shape[0] < 1:
            raise InvalidProblemError(op, "bins", "a 1-D tensor of at least one edge", f"shape {tuple(e.shape)}")
        if attrs["range"] is not None:
            raise InvalidProblemError(op, "range", "None with a tensor of bin edges", attrs["range"])
        nb = e.shape[0] - 1
        rest = rest[1:]
    else:
        nb = bins
    if rest:
        w = rest[0]
        if w.dtype != x.dtype:
            raise DTypeMismatchError(op, "weight", f"{x.dtype} (the input's)", str(w.dtype))
        if tuple(w.shape) != tuple(x.shape):
            raise InvalidProblemError(op, "weight", f"the input's shape {tuple(x.shape)}", tuple(w.shape))
    rng = attrs["range"]
    if rng is not None:
        if len(rng) != 2:
            raise InvalidProblemError(op, "range", "a (min, max) pair", rng)
        rng = (float(rng[0]), float(rng[1]))
        _bounds(op, rng[0], rng[1], "range")
    a = dict(attrs, range=rng)
    return a, (TensorSpec((nb,), x.dtype), TensorSpec((nb + 1,), x.dtype))


def _check_histogramdd(inputs, attrs):
    op = "histogramdd"
    if not inputs:
        raise InvalidProblemError(op, "inputs", "an input (and edges, weight)", 0)
    x = inputs[0]
    _dtype(op, x, HIST_TYPES)
    if len(x.shape) < 2:
        raise InvalidProblemError(op, "input", "a tensor of at least 2 dims (points along the last)",
                                  f"shape {tuple(x.shape)}")
    d = x.shape[-1]
    bins = attrs["bins"]
    n_edges = d if bins is None else 0
    _operands(op, inputs, (1 + n_edges, 2 + n_edges), ("input",) + ("bins",) * n_edges + ("weight",))
    if bins is None:
        for e in inputs[1:1 + d]:
            if e.dtype != x.dtype:
                raise DTypeMismatchError(op, "bins", f"{x.dtype} (the input's)", str(e.dtype))
            if len(e.shape) != 1 or e.shape[0] < 1:
                raise InvalidProblemError(op, "bins", "1-D tensors of at least one edge", f"shape {tuple(e.shape)}")
        if attrs["range"] is not None:
            raise InvalidProblemError(op, "range", "None with tensors of bin edges", attrs["range"])
        counts = tuple(e.shape[0] - 1 for e in inputs[1:1 + d])
    else:
        counts = tuple(bins) * d if len(bins) == 1 else tuple(bins)
        if len(counts) != d or any(b < 1 for b in counts):
            raise InvalidProblemError(op, "bins", f"one positive bin count or {d} of them (the input's last dim)",
                                      tuple(bins))
    if len(inputs) == 2 + n_edges:
        w = inputs[-1]
        if w.dtype != x.dtype:
            raise DTypeMismatchError(op, "weight", f"{x.dtype} (the input's)", str(w.dtype))
        if tuple(w.shape) != tuple(x.shape[:-1]):
            raise InvalidProblemError(op, "weight", f"the input's leading shape {tuple(x.shape[:-1])}", tuple(w.shape))
    rng = attrs["range"]
    if rng is not None:
        if len(rng) != 2 * d:
            raise InvalidProblemError(op, "range", f"{2 * d} numbers (min, max per dim)", rng)
        rng = tuple(float(v) for v in rng)
        for k in range(d):
            _bounds(op, rng[2 * k], rng[2 * k + 1], "range")
    return dict(attrs, bins=None if bins is None else counts, range=rng), (TensorSpec(counts, x.dtype),) + tuple(
        TensorSpec((b + 1,), x.dtype) for b in counts)


def np_histogramdd(x, bins, rng, weight, density, edges=None):
    """(hist, *edges) in float64: equal-width bins per dim over the given or the data's ranges, or given ``edges``
    (a value's bin: the last edge <= it; the last edge itself in the last bin)."""
    x = np.asarray(x, np.float64)
    d = x.shape[-1]
    pts = x.reshape(-1, d)
    w = np.ones(pts.shape[0]) if weight is None else np.asarray(weight, np.float64).reshape(-1)
    ok = np.ones(pts.shape[0], bool)
    flat = np.zeros(pts.shape[0], np.int64)
    out_edges, widths = [], []
    counts = bins if edges is None else tuple(np.size(e) - 1 for e in edges)
    for k in range(d):
        col = pts[:, k]
        if edges is None:
            data = (float(np.nanmin(col)), float(np.nanmax(col))) if col.size else (None, None)
            lo, hi = outer_range("histogram", *(rng[2 * k:2 * k + 2] if rng is not None else (None, None)), *data,
                                 empty=col.size == 0)
            e = np_linspace(lo, hi, counts[k] + 1)
        else:
            e = np.asarray(edges[k], np.float64)
        with np.errstate(invalid="ignore"):
            ok &= (col >= e[0]) & (col <= e[-1])
            if edges is None:
                b = np.floor((np.where(ok, col, e[0]) - e[0]) * counts[k] / (e[-1] - e[0])).astype(np.int64)
            else:
                b = np.searchsorted(e, np.where(ok, col, e[0]), side="right") - 1
        flat = flat * counts[k] + np.where(ok, np.minimum(b, counts[k] - 1), 0)
        out_edges.append(e)
        widths.append(np.diff(e))
    n = int(np.prod(counts))
    hist = np.bincount(flat[ok], weights=w[ok], minlength=n)[:n].astype(np.float64).reshape(counts)
    if density:
        vol = np.ones(())
        for wd in widths:
            vol = np.multiply.outer(vol, wd)
        hist = hist / (hist.sum() * vol)
    return (hist,) + tuple(out_edges)


def _check_bincount(inputs, attrs):
    op = "bincount"
    _operands(op, inputs, (1, 2), ("input", "weights"))
    x = inputs[0]
    _dtype(op, x, INT_VALUES)
    if len(x.shape) != 1:
        raise InvalidProblemError(op, "input", "a 1-D tensor (torch: bincount only supports 1-d non-negative "
                                               "integral inputs)", f"shape {tuple(x.shape)}")
    if attrs["length"] < attrs["minlength"]:
        raise InvalidProblemError(op, "length", f"a length >= minlength={attrs['minlength']}", attrs["length"])
    out = DType.i64
    if len(inputs) == 2:
        w = inputs[1]
        _dtype(op, w, WEIGHT_TYPES, "weights")
        if tuple(w.shape) != tuple(x.shape):
            raise InvalidProblemError(op, "weights", f"the input's shape {tuple(x.shape)}", tuple(w.shape))
        out = DType.f32 if w.dtype == DType.f32 else DType.f64
    return attrs, (TensorSpec((attrs["length"],), out),)


# -- torch peers and drop-ins -------------------------------------------------------------------------
def _peer_histc(x, bins=100, min=0, max=0):
    import torch

    return torch.histc(x, bins=bins, min=min, max=max)


def _peer_histogram(x, *ops, bins=None, range=None, weight=None, density=False):
    import torch

    b = ops[0] if bins is None else bins
    w = ops[-1] if len(ops) == (2 if bins is None else 1) else None
    kw = {"range": range} if range is not None else {}     # (the edges overload has no range keyword)
    r = torch.histogram(x, b, weight=w, density=density, **kw)
    return r.hist, r.bin_edges


def _peer_histogramdd(x, *ops, bins=(), range=None, density=False):
    import torch

    d = x.shape[-1]
    edges = list(ops[:d]) if bins is None else list(bins)
    w = ops[-1] if len(ops) == (d + 1 if bins is None else 1) else None
    r = torch.histogramdd(x, edges, range=list(range) if range is not None else None, weight=w, density=density)
    return (r.hist,) + tuple(r.bin_edges)


def _peer_bincount(x, *w, minlength=0, length=0):
    import torch

    out = torch.bincount(x, weights=w[0] if w else None, minlength=minlength)
    return torch.nn.functional.pad(out, (0, length - out.numel()))


def _di_histc(input, bins=100, min=0, max=0, *, out=None):
    no_out("histc", out)
    return (input,), {"bins": bins, "min": min, "max": max}


def _di_histogram(input, bins, *, range=None, weight=None, density=False, out=None):
    import torch

    no_out("histogram", out)
    ops = (input,) if not isinstance(bins, torch.Tensor) else (input, bins)
    ops = ops + ((weight,) if weight is not None else ())
    return ops, {"bins": None if isinstance(bins, torch.Tensor) else bins,
                 "range": None if range is None else tuple(range), "density": density}


def _di_histogramdd(input, bins=10, *, range=None, weight=None, density=False):
    import torch

    tensors = not isinstance(bins, int) and any(isinstance(b, torch.Tensor) for b in bins)
    edges = tuple(bins) if tensors else ()
    return (input,) + edges + ((weight,) if weight is not None else ()), {
        "bins": None if tensors else (bins,) if isinstance(bins, int) else tuple(bins),
        "range": None if range is None else tuple(range), "density": density}


def _histdd_result(out):
    import torch

    return torch.return_types.histogramdd((out[0], tuple(out[1:])))


def host_max(t) -> int:
    """max(t) read on the host (baracuda's amax plan under the preference in effect)."""
    from .._core.device import as_device
    from .._core.options import current_preference
    from .._core.plan import plan_for
    from .._core.spec import Descriptor

    p = plan_for(Descriptor.like("amax", t, dims=None, keepdim=False), as_device(t.device), current_preference())
    return int(p.run(t).item())


def _di_bincount(input, weights=None, minlength=0):
    import torch

    if not isinstance(input, torch.Tensor) or input.dim() != 1 or input.dtype.is_floating_point:
        raise UnsupportedError("bincount", "input must be a 1-D integral tensor")
    length = max(host_max(input) + 1 if input.numel() else 0, minlength)
    return (input,) + ((weights,) if weights is not None else ()), {"minlength": minlength, "length": length}


def _hist_result(out):
    import torch

    return torch.return_types.histogram(tuple(out))


# -- samples, errors, workloads -------------------------------------------------------------------------
def _histc_samples(rng):
    for shape, bins, lo, hi in (((7, 9), 10, 0, 0), ((50,), 4, -1.0, 1.5), ((3, 4, 5), 1, 0, 0), ((0,), 5, 0, 0),
                                ((6,), 3, 0.5, 0.5), ((200,), 17, -2.0, 2.0)):
        yield Sample((rng.standard_normal(shape),), {"bins": bins, "min": lo, "max": hi}, name=f"{shape}-{bins}-{lo}",
                     grad=False)
    x = np.repeat(np.array([0.25, -1.5, 0.75]), 4)         # max and min of the data exactly: edge rules
    yield Sample((x,), {"bins": 4, "min": 0, "max": 0}, name="edges", grad=False)


def _histogram_samples(rng):
    # (the edges samples first: the generic plan-reuse test redraws the last sample's float operands, which would
    # unsort its edges)
    edges = np.array([-1.5, -0.2, 0.0, 0.3, 2.0])
    for w, dens in ((False, False), (True, True)):
        x = np.concatenate([rng.standard_normal(40), edges])
        ops = (x, edges, rng.random(x.shape)) if w else (x, edges)
        yield Sample(ops, {"bins": None, "density": dens}, name=f"edges-w{w}-d{dens}", grad=False)
    for shape, bins, r, w, dens in (((7, 9), 10, None, False, False), ((50,), 4, (-1.0, 1.5), True, False),
                                    ((30,), 6, None, True, True), ((0,), 5, None, False, False),
                                    ((4,), 3, (0.5, 0.5), False, True)):
        x = rng.standard_normal(shape)
        ops = (x, rng.random(shape)) if w else (x,)
        yield Sample(ops, {"bins": bins, "range": r, "density": dens}, name=f"{shape}-{bins}-{r}-w{w}-d{dens}",
                     grad=False)


def _histogramdd_samples(rng):
    # (edges first: the generic plan-reuse test redraws the last sample's float operands)
    e0, e1 = np.array([-1.5, 0.0, 0.4, 2.0]), np.array([-0.7, 0.7])
    x = np.concatenate([rng.standard_normal((25, 2)), np.array([[2.0, 0.7], [-1.5, -0.7]])])
    yield Sample((x, e0, e1, rng.random(27)), {"bins": None, "density": True}, name="edges-w-d", grad=False)
    for shape, bins, r, w, dens in (((20, 2), (3, 4), None, False, False), ((30, 3), (2,), None, True, True),
                                    ((4, 5, 2), (3, 2), (-1.0, 1.0, -0.5, 0.5), True, False),
                                    ((0, 2), (2, 2), None, False, False), ((6, 1), (5,), (0.5, 0.5), False, True)):
        x = rng.standard_normal(shape)
        ops = (x, rng.random(shape[:-1])) if w else (x,)
        yield Sample(ops, {"bins": bins, "range": r, "density": dens}, name=f"{shape}-{bins}-{r}-w{w}-d{dens}",
                     grad=False)


def _bincount_samples(rng):
    for n, hi, minlength, w in ((20, 7, 0, False), (20, 7, 10, True), (0, 0, 3, False), (0, 0, 0, True),
                                (300, 40, 5, True), (1, 1, 0, False)):
        x = rng.integers(0, hi, n).astype(np.int64) if hi else np.zeros(0, np.int64)
        length = max(int(x.max()) + 1 if n else 0, minlength)
        ops = (x, rng.random(n) + 0.5) if w else (x,)
        yield Sample(ops, {"minlength": minlength, "length": length}, name=f"{n}-{hi}-{minlength}-w{w}", grad=False)


def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        if op == "histc":
            yield ErrorCase((f,), {"bins": 4, "min": 2.0, "max": 1.0}, InvalidProblemError,
                            r"histc: argument 'max': expected min <= max", "min-gt-max")
            yield ErrorCase((f,), {"bins": 0}, InvalidProblemError, r"histc: argument 'bins'", "zero-bins")
            yield ErrorCase((((3,), "i64"),), {"bins": 4}, UnsupportedError, r"dtype i64", "int")
        elif op == "histogram":
            yield ErrorCase((f,), {"bins": 4, "range": (2.0, 1.0)}, InvalidProblemError,
                            r"histogram: argument 'range': expected min <= max", "range")
            yield ErrorCase((f, ((3, 4), "f64")), {"bins": 4}, DTypeMismatchError, r"argument 'weight'", "w-dtype")
            yield ErrorCase((f, ((4, 3), "f32")), {"bins": 4}, InvalidProblemError, r"argument 'weight'", "w-shape")
            yield ErrorCase((f, ((2, 2), "f32")), {"bins": None}, InvalidProblemError, r"argument 'bins': expected a "
                            "1-D tensor", "2d-edges")
            yield ErrorCase((((3,), "f16"),), {"bins": 4}, UnsupportedError, r"dtype f16", "f16")
        elif op == "histogramdd":
            yield ErrorCase((((5,), "f32"),), {"bins": (2,)}, InvalidProblemError,
                            r"histogramdd: argument 'input': expected a tensor of at least 2 dims", "1d")
            yield ErrorCase((f,), {"bins": (2, 3)}, InvalidProblemError, r"histogramdd: argument 'bins'", "bins")
            yield ErrorCase((f,), {"bins": (2,), "range": (0.0, 1.0)}, InvalidProblemError, r"argument 'range'",
                            "range-len")
            yield ErrorCase((f, ((4,), "f32")), {"bins": (2,)}, InvalidProblemError, r"argument 'weight'", "w-shape")
        else:
            yield ErrorCase((((3, 4), "i64"),), {"length": 5}, InvalidProblemError, r"bincount: argument 'input': "
                            "expected a 1-D tensor", "2d")
            yield ErrorCase((((3,), "f32"),), {"length": 5}, UnsupportedError, r"dtype f32", "float")
            yield ErrorCase((((3,), "i64"),), {"length": 2, "minlength": 4}, InvalidProblemError,
                            r"argument 'length'", "short")
            yield ErrorCase((((3,), "i64"), ((4,), "f32")), {"length": 5}, InvalidProblemError, r"argument 'weights'",
                            "w-shape")
    return errors


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 0


_DEFS = {
    "histc": dict(arg_names=("input",), check=_check_histc, dtypes=HISTC_TYPES,
                  attrs=(Attr("bins", "int", 100, ge=1), Attr("min", "number", 0), Attr("max", "number", 0)),
                  torch_peer=_peer_histc, dropin=_di_histc, samples=_histc_samples,
                  # the row: 64M f32 values, data range found on the device
                  workloads=(Workload("histc-64M-f32-100bins", ((1 << 26,),), DType.f32, {"bins": 100}),)),
    "histogram": dict(arg_names=("input", "bins", "weight"), check=_check_histogram, dtypes=HIST_TYPES,
                      attrs=(Attr("bins", "int", None, optional=True, ge=1),
                             Attr("range", "any", None, optional=True), Attr("density", "bool", False)),
                      torch_peer=_peer_histogram, dropin=_di_histogram, dropin_result=_hist_result,
                      samples=_histogram_samples,
                      workloads=(Workload("histogram-64M-f32-100bins", ((1 << 26,),), DType.f32, {"bins": 100}),)),
    "histogramdd": dict(arg_names=("input", "weight"), check=_check_histogramdd, dtypes=HIST_TYPES,
                        attrs=(Attr("bins", "ints", (10,), optional=True), Attr("range", "any", None, optional=True),
                               Attr("density", "bool", False)),
                        torch_peer=_peer_histogramdd, dropin=_di_histogramdd, dropin_result=_histdd_result,
                        samples=_histogramdd_samples,
                        workloads=(Workload("histogramdd-16Mx3-f32-32bins", ((1 << 24, 3),), DType.f32,
                                            {"bins": (32,)}),)),
    "bincount": dict(arg_names=("input", "weights"), check=_check_bincount, dtypes=INT_VALUES,
                     attrs=(Attr("minlength", "int", 0, ge=0), Attr("length", "int", ge=0,
                                                                    expected="the output length, >= minlength")),
                     torch_peer=_peer_bincount, dropin=_di_bincount, samples=_bincount_samples,
                     # the row: 16M int64 values into 1024 bins
                     workloads=(Workload("bincount-16M-i64", (((1 << 24,), DType.i64),), DType.i64,
                                         {"length": 1024}),)),
}
HIST_OPS = tuple(_DEFS)
for _name, _kw in _DEFS.items():
    register_spec(OpSpec(name=_name, family="sort", torch_name=f"torch.{_name}", errors=_errors(_name),
                         # counts are exact; weighted sums and densities are float reductions
                         tol=default_tol, cost=_cost, category="sort",
                         doc=f"torch.{_name}: see the module docstring of baracuda.ops.histogram.", **_kw))
del _name, _kw


def _bench_bincount(desc, device, gen):
    import torch

    x = desc.inputs[0]
    return [torch.randint(0, desc.attr("length"), x.shape, device=device, generator=gen, dtype=torch.int64)]


set_bench_inputs("bincount", _bench_bincount)
