"""Reductions: sum, mean, amax, amin (any set of axes), argmax, argmin (one axis or all), and the fused
backward of amax/amin (``amax_backward``).  The rest of the family (prod, nansum, nanmean, any, all,
count_nonzero, aminmax, max/min with indices) is in ``reduction_prod_nan_logic_minmax.py``, on the same
shape/dtype rules.

Attribute names are fixed by the core: ``ctx.reduce_to`` calls ``sum`` with ``dims=``/``keepdim=``, so
sum/mean/amax/amin take ``dims`` (None, an int or a tuple of ints; None or () = every axis, as torch),
``keepdim`` and, for sum/mean, ``dtype`` (accumulate and output in that dtype, as torch's ``dtype=``);
argmax/argmin take ``dim`` (None = the flattened input) and ``keepdim``.

Semantics follow torch: an empty sum is 0, an empty mean is NaN, amax/amin/argmax/argmin of an empty
reduction raise; NaN propagates (amax returns NaN, argmax the index of the first NaN); argmax/argmin
return the first index on ties.  The gradient of amax/amin is split evenly among tied maxima
(``(g / count) * (x == out)``, torch's ``scale_grad_by_count``).

Dtypes (torch's rules): sum/prod/nansum of integers and bool accumulate and return int64 (wrapping on
overflow); ``dtype=`` converts the input to that dtype first (a float, an integer type or bool: a bool sum is
any, a bool prod all; nansum zeroes NaN first); mean/nanmean are defined for floating inputs only;
amax/amin (and max/min/aminmax) also take integers and bool (bool in, bool out), argmax/argmin integers.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, get_spec, register_spec
from .._core.derive import declare_rule_ops
from ._common import norm_axes, norm_axis

__all__ = ["REDUCTIONS", "RedDef", "reduced_shape", "keepdim_shape", "sum_tol", "register_reductions",
           "INT_TYPES", "NUM_TYPES", "ALL_TYPES", "ATTRS", "KEEPDIM", "FWD_SHAPE", "dims_attr", "fwd_rank", "full_dims"]

INT_TYPES = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
NUM_TYPES = FLOAT_TYPES + INT_TYPES
ALL_TYPES = NUM_TYPES + (DType.bool,)


# -- shape rules --------------------------------------------------------------------------------
def _norm_dims(op: str, dims, rank: int) -> tuple[int, ...]:
    """None, (), an int or a sequence -> sorted distinct axes; None/() mean every axis (torch)."""
    if dims is not None and not isinstance(dims, (int, tuple, list)):
        raise InvalidProblemError(op, "dim", "None, an int or a tuple of ints", repr(dims))
    if isinstance(dims, (tuple, list)) and not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool)
                                                    for a in dims):
        raise InvalidProblemError(op, "dim", "a tuple of ints", repr(dims))
    if rank == 0:  # a 0-d tensor accepts dim 0 / -1 and reduces nothing
        if isinstance(dims, int):
            norm_axis(op, "dim", dims, 0)
        elif dims:
            for a in dims:
                norm_axis(op, "dim", int(a), 0)
        return ()
    return norm_axes(op, "dim", dims, rank)


def keepdim_shape(shape, dims) -> tuple[int, ...]:
    return tuple(1 if i in dims else s for i, s in enumerate(shape))


def reduced_shape(shape, dims, keepdim: bool) -> tuple[int, ...]:
    if keepdim:
        return keepdim_shape(shape, dims)
    return tuple(s for i, s in enumerate(shape) if i not in dims)


def dims_attr(rank=0) -> Attr:
    """``dims``: None, an int or a tuple of axes of input ``rank`` (an index, or f(inputs, attrs)); None / () mean
    every axis.  Errors name it 'dim' (torch's argument)."""
    return Attr("dims", "axes", None, label="dim", rank=rank)


KEEPDIM = Attr("keepdim", "bool", False)
# the forward input's shape, for a backward op that does not read the input
FWD_SHAPE = Attr("shape", "shape", expected="the forward input's shape")


def fwd_rank(inputs, attrs) -> int:
    return len(attrs["shape"])


def full_dims(dims, rank: int) -> tuple:
    """The validated ``dims`` of an input of ``rank``: a 0-d input reduces nothing (it accepts dim 0 / -1)."""
    return dims if rank else ()


def _nonempty(op, shape, dims, all_axes: bool):
    """amax/amin/argmax/argmin/max/min/aminmax of an empty reduction raise, with torch's wording."""
    if all_axes and math.prod(shape) == 0:
        want = ("a non-empty input (aminmax over an empty dimension has no identity)" if op == "aminmax"
                else "a reduction dim to be specified for input.numel() == 0")
        raise InvalidProblemError(op, "dim", want, f"dim=None on an input of shape {tuple(shape)}")
    for d in dims:
        if shape[d] == 0:
            raise InvalidProblemError(op, "dim", f"reduction dim {d} to have non-zero size", "size 0")


def _check_one_input(op, spec, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    spec.check_dtypes(inputs)
    return inputs[0]


# kind -> attributes.  sum: sum/prod/nansum (ints -> i64, dtype= float or int);
# mean: mean/nanmean (dtype= float); ext: amax/amin; logic: any/all; count: count_nonzero;
# arg: argmax/argmin; sel: max/min (dim=None: the value, else (values, indices)); minmax: aminmax.
_DTYPE = Attr("dtype", "dtype", None, optional=True)
_ONE_DIM = Attr("dim", "axis", None, optional=True, expected="None or an int")
ATTRS = {"sum": (dims_attr(), KEEPDIM, _DTYPE), "mean": (dims_attr(), KEEPDIM, _DTYPE),
         "ext": (dims_attr(), KEEPDIM), "logic": (dims_attr(), KEEPDIM), "count": (dims_attr(),),
         "arg": (_ONE_DIM, KEEPDIM), "sel": (_ONE_DIM, KEEPDIM), "minmax": (_ONE_DIM, KEEPDIM)}
_DTYPE_ARG = {"sum": ALL_TYPES, "mean": FLOAT_TYPES}   # what dtype= may name (sum/prod/nansum: bool too, as torch)


def _check_dtype_arg(name, kind, dt):
    if dt is None:
        return None
    ok = _DTYPE_ARG[kind]
    if dt not in ok:
        raise UnsupportedError(name, f"argument 'dtype' is {dt}; supported: {', '.join(map(str, ok))}")
    return dt


def _make_check(name: str, kind: str):
    def check(inputs, attrs):
        x = _check_one_input(name, get_spec(name), inputs)
        a = attrs
        keep = a.get("keepdim", False)
        rank = len(x.shape)
        if kind in ("arg", "sel", "minmax"):
            dims = tuple(range(rank)) if a["dim"] is None else ((a["dim"],) if rank else ())
            _nonempty(name, x.shape, dims, a["dim"] is None)
            shape = reduced_shape(x.shape, dims, keep)
            if kind == "arg":
                return a, (TensorSpec(shape, DType.i64),)
            if kind == "minmax":
                return a, (TensorSpec(shape, x.dtype), TensorSpec(shape, x.dtype))
            if a["dim"] is None:
                return a, (TensorSpec(shape, x.dtype),)
            return a, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))
        dims = a["dims"] = full_dims(a["dims"], rank)
        shape = reduced_shape(x.shape, dims, keep)
        if kind == "ext":
            _nonempty(name, x.shape, dims, len(dims) == rank)
            out_dt = x.dtype
        elif kind == "logic":
            out_dt = DType.u8 if x.dtype == DType.u8 else DType.bool   # torch keeps uint8 for any/all
        elif kind == "count":
            out_dt = DType.i64
        else:
            a["dtype"] = _check_dtype_arg(name, kind, a["dtype"])
            out_dt = a["dtype"] or (x.dtype if x.dtype.is_floating else DType.i64)
        return a, (TensorSpec(shape, out_dt),)
    return check


def bw_operands(op, spec, inputs):
    """(grad, x, out) of a reduction's fused backward op: three operands of the spec's dtypes."""
    if len(inputs) != 3:
        raise InvalidProblemError(op, "inputs", "3 operands (grad, x, out)", len(inputs))
    spec.check_dtypes(inputs)
    return inputs


def check_reduced(op, x, dims, keepdim, same_dtype=True, **named):
    """Each named operand (grad, out) has x's shape reduced over dims, and x's dtype when same_dtype."""
    want = reduced_shape(x.shape, dims, keepdim)
    for nm, t in named.items():
        if t.shape != want:
            raise InvalidProblemError(op, nm, f"shape {want} (x reduced over {dims})", t.shape)
        if same_dtype and t.dtype != x.dtype:
            raise DTypeMismatchError(op, nm, str(x.dtype), str(t.dtype))


def _check_amax_backward(inputs, attrs):
    op = "amax_backward"
    g, x, out = bw_operands(op, SPECS[op], inputs)
    attrs["dims"] = full_dims(attrs["dims"], len(x.shape))
    check_reduced(op, x, attrs["dims"], attrs["keepdim"], grad=g, out=out)
    return attrs, (TensorSpec(x.shape, x.dtype),)


# -- backward rules -------------------------------------------------------------------------------
def float_grad(d, grads) -> bool:
    """Integer/bool inputs and integer outputs (``dtype=``) have no gradient, as in torch."""
    return d.inputs[0].dtype.is_floating and d.outputs[0].dtype.is_floating and grads[0] is not None


def _g_sum(ctx, d, grads, s):
    if not float_grad(d, grads):
        return (None,)
    x = d.inputs[0]
    g = ctx.reshape(grads[0], keepdim_shape(x.shape, d.attr("dims")))
    if d.outputs[0].dtype != x.dtype:   # (sum(x, dtype=...)): the gradient is cast back to x's dtype: a kernel
        return (ctx.op("broadcast_to", g, shape=x.shape, dtype=x.dtype),)
    return (ctx.expand(g, x.shape),)   # torch's gradient: the upstream expanded, a view (no kernel)


def _g_mean(ctx, d, grads, s):
    # one fused pass (broadcast, divide by the count in the compute dtype, cast to x's dtype) rather than a
    # scalar multiply + broadcast: no fp32-rounded 1/count for f64
    x = d.inputs[0]
    return (ctx.op("mean_backward", grads[0], shape=x.shape, dims=d.attr("dims"), keepdim=d.attr("keepdim"),
                   dtype=x.dtype),)


def _check_mean_backward(inputs, attrs):
    op = "mean_backward"
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (grad)", len(inputs))
    SPECS[op].check_dtypes(inputs)
    g = inputs[0]
    shape, keepdim = attrs["shape"], attrs["keepdim"]
    dims = full_dims(attrs["dims"], len(shape))
    want = reduced_shape(shape, dims, keepdim)
    if g.shape != want:
        raise InvalidProblemError(op, "grad", f"shape {want} ({shape} reduced over {dims})", g.shape)
    dt = attrs["dtype"] or g.dtype
    if dt not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'dtype' is {dt}; supported: {', '.join(map(str, FLOAT_TYPES))}")
    return {"shape": shape, "dims": dims, "keepdim": keepdim, "dtype": dt}, (TensorSpec(shape, dt),)


def _peer_mean_bw(g, shape, dims=None, keepdim=False, dtype=None):
    d = _tdims(dims)
    d = [a % len(shape) for a in d] if d is not None and shape else list(range(len(shape)))
    count = math.prod(shape[a] for a in d)
    r = g.reshape(keepdim_shape(tuple(shape), d)).expand(tuple(shape)) / count
    return r.to(as_dtype(dtype).torch) if dtype is not None else r


def _mean_bw_samples(rng):
    for shape, dims, keepdim in [((3, 5), (1,), False), ((33, 65), (0,), True), ((2, 3, 4, 5), (0, 2), False),
                                 ((7,), None, False), ((0, 4), (1,), False)]:
        g = rng.standard_normal(reduced_shape(shape, _norm_dims("mean_backward", dims, len(shape)), keepdim))
        yield Sample((g,), {"shape": shape, "dims": dims, "keepdim": keepdim}, name=f"{shape}-{dims}")
    yield Sample((rng.standard_normal((3,)),), {"shape": (3, 6), "dims": (1,), "dtype": "f64"}, name="to-f64")


def _mean_bw_errors():
    yield ErrorCase((((4,), "f32"),), {"shape": (3, 4), "dims": (1,)}, InvalidProblemError,
                    r"mean_backward: argument 'grad': expected shape \(3,\)", "bad-grad")
    yield ErrorCase((((3,), "i32"),), {"shape": (3,)}, UnsupportedError, r"dtype i32", "int-dtype")


def _g_ext(ctx, d, grads, s):
    if not float_grad(d, grads):
        return (None,)
    return (ctx.op("amax_backward", grads[0], s["x"], s["out"], dims=d.attr("dims"), keepdim=d.attr("keepdim")),)


# -- torch peers and drop-in adapters ------------------------------------------------------------
def _tdims(dims):
    """Peers are also called with the raw (un-normalized) attributes: None / () / int / sequence."""
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        return None
    return [int(dims)] if isinstance(dims, (int, np.integer)) else [int(a) for a in dims]


def _peer_sum(fn):
    def peer(x, dims=None, keepdim=False, dtype=None):
        import torch

        kw = {"dtype": as_dtype(dtype).torch} if dtype is not None else {}
        d = _tdims(dims)
        if d is None or x.dim() == 0:
            r = getattr(torch, fn)(x, **kw)
            return r.reshape([1] * x.dim()) if keepdim else r
        return getattr(torch, fn)(x, dim=d, keepdim=keepdim, **kw)
    return peer


def _peer_ext(fn):
    def peer(x, dims=None, keepdim=False):
        import torch

        return getattr(torch, fn)(x, dim=_tdims(dims) or (), keepdim=keepdim)
    return peer


def _peer_arg(fn):
    def peer(x, dim, keepdim):
        import torch

        return getattr(torch, fn)(x, dim=dim, keepdim=keepdim)
    return peer


def _peer_amax_bw(g, x, out, dims=None, keepdim=False, nan=False):
    d = _tdims(dims)
    d = [a % x.dim() for a in d] if d is not None and x.dim() else list(range(x.dim()))
    shape = keepdim_shape(tuple(x.shape), d)
    gk, ok = g.reshape(shape), out.reshape(shape)
    mask = (x == ok) | (x.isnan() & ok.isnan()) if nan else (x == ok)
    mask = mask.to(x.dtype)
    cnt = mask.sum(dim=d, keepdim=True) if x.dim() else mask
    return (gk / cnt) * mask


def _dropin_dims(dim):
    """torch's ``dim`` as given (a list as a tuple): the typed ``dims`` attribute validates it, so a float is an
    error naming the argument, never truncated (``int(1.5)``)."""
    return tuple(dim) if isinstance(dim, list) else dim


def _dropin_sum(input, dim=None, keepdim=False, *, dtype=None):
    return (input,), {"dims": _dropin_dims(dim), "keepdim": keepdim, "dtype": None if dtype is None else as_dtype(dtype)}


def _dropin_ext(input, dim=(), keepdim=False):
    return (input,), {"dims": _dropin_dims(dim), "keepdim": keepdim}


def _dropin_arg(input, dim=None, keepdim=False):
    return (input,), {"dim": dim, "keepdim": keepdim}


# -- samples, errors, workloads ------------------------------------------------------------------
_DIM_CASES = [  # (shape, dims) -- contiguous row, column, middle, permute-needed, all, empty
    ((7,), None), ((3, 5), 1), ((3, 5), 0), ((33, 65), -1), ((33, 65), 0), ((2, 3, 4, 5), (0, 2)),
    ((2, 3, 4, 5), (1, 2)), ((2, 3, 4, 5), None), ((), None), ((4, 1, 3), 1), ((0, 4), 0), ((0, 4), 1),
]


def _sum_samples(name):
    def samples(rng):
        for i, (shape, dims) in enumerate(_DIM_CASES):
            yield Sample((rng.standard_normal(shape),), {"dims": dims, "keepdim": i % 3 == 1},
                         name=f"{shape}-dims{dims}")
        yield Sample((rng.standard_normal((3, 5)),), {"dims": 1, "dtype": DType.f64}, name="dtype=f64", grad=True)
        # (a narrowing dtype= is tested in tests/reduction: the generic tolerance is keyed on the input dtype)
    return samples


def _ext_samples(name):
    def samples(rng):
        for i, (shape, dims) in enumerate(_DIM_CASES):
            nd = _norm_dims(name, dims, len(shape))
            if any(shape[d] == 0 for d in nd) or (len(nd) == len(shape) and math.prod(shape) == 0):
                continue
            yield Sample((rng.standard_normal(shape),), {"dims": dims, "keepdim": i % 3 == 1}, name=f"{shape}-dims{dims}")
    return samples


def _arg_samples(name):
    def samples(rng):
        cases = [((7,), None), ((3, 5), 1), ((3, 5), 0), ((33, 65), -1), ((33, 65), 0), ((2, 3, 4, 5), 2),
                 ((2, 3, 4, 5), None), ((), None), ((), 0), ((0, 4), 1)]
        for i, (shape, dim) in enumerate(cases):
            yield Sample((rng.standard_normal(shape),), {"dim": dim, "keepdim": i % 2 == 1}, name=f"{shape}-dim{dim}")
    return samples


def _amax_bw_samples(rng):
    # small integers: ties are frequent and exact in every dtype, so the even split is exercised
    for shape, dims, keepdim in [((3, 5), (1,), False), ((33, 65), (0,), True), ((2, 3, 4, 5), (0, 2), False),
                                 ((7,), (0,), False), ((4, 6), (0, 1), True), ((0, 4), (1,), False)]:
        x = rng.integers(-2, 3, size=shape).astype(np.float64)
        out = np.max(x, axis=dims, keepdims=keepdim) if x.size else np.zeros(reduced_shape(shape, dims, keepdim))
        g = rng.standard_normal(np.shape(out))
        yield Sample((g, x, np.asarray(out, np.float64)), {"dims": dims, "keepdim": keepdim}, name=f"{shape}-{dims}")
    # max()/min() without dim: a NaN result sends the gradient evenly to the NaN elements (nan=True)
    x = np.array([[1.0, np.nan, 3.0, np.nan], [2.0, 5.0, 5.0, 0.0]])
    out = np.array(np.nan)
    yield Sample((np.array(0.75), x, out), {"dims": None, "nan": True}, name="nan-result", grad=False)
    yield Sample((np.array([0.5, -2.0]), x, np.array([np.nan, 5.0])), {"dims": (1,), "nan": True}, name="nan-rows",
                 grad=False)


def _errors(name, kind, dtypes=FLOAT_TYPES):
    def errors():
        bad = DType.i32 if DType.i32 not in dtypes else DType.c64
        yield ErrorCase((((3,), bad.short),), {}, UnsupportedError, rf"dtype {bad}; the op is defined for", "bad-dtype")
        yield ErrorCase((((3, 4), "f32"),), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        dimattr = "dim" if kind in ("arg", "sel", "minmax") else "dims"
        yield ErrorCase((((3, 4), "f32"),), {dimattr: 2}, InvalidProblemError,
                        rf"{name}: argument 'dim': expected an axis in \[-2, 1\], got 2", "bad-dim")
        if dimattr == "dims":
            yield ErrorCase((((3, 4), "f32"),), {"dims": (0, -2)}, InvalidProblemError, r"distinct axes", "dup-dims")
        else:
            yield ErrorCase((((3, 4), "f32"),), {"dim": (0, 1)}, InvalidProblemError, r"expected None or an int",
                            "tuple-dim")
        if kind == "sum":
            yield ErrorCase((((3, 4), "f32"),), {"dtype": "c64"}, UnsupportedError, r"argument 'dtype' is c64",
                            "complex-out-dtype")
        if kind == "mean":
            yield ErrorCase((((3, 4), "f32"),), {"dtype": "i32"}, UnsupportedError, r"argument 'dtype' is i32",
                            "int-out-dtype")
        if kind in ("ext", "arg", "sel", "minmax"):
            want = "reduction dim 0 to have non-zero size"
            yield ErrorCase((((0, 4), "f32"),), {dimattr: 0}, InvalidProblemError,
                            rf"{name}: argument 'dim': expected {want}", "empty-dim")
            want = "a non-empty input" if kind == "minmax" else "a reduction dim to be specified"
            yield ErrorCase((((0, 4), "f32"),), {}, InvalidProblemError, rf"{name}: argument 'dim': expected {want}",
                            "empty-all")
    return errors


def _amax_bw_errors():
    yield ErrorCase((((4,), "f32"), ((3, 4), "f32"), ((3,), "f32")), {"dims": (1,)}, InvalidProblemError,
                    r"amax_backward: argument 'grad': expected shape \(3,\)", "bad-grad")
    yield ErrorCase((((3,), "i32"),) * 3, {}, UnsupportedError, r"dtype i32", "int-dtype")


# The shape classes every reduction row of the bench covers besides its main [16384, 4096] rows (issue #16 item 4:
# rows 1..1M x columns 1..1M): one 16M-long row, 1M rows of 16, 16 rows of 1M reduced over dim 0, 1M rows of 16
# reduced over dim 0 (16 outputs), in bf16; f16 on the main shape.  ``dim_attr`` names the op's axis attribute.
_CLASSES = (("last-[1,16777216]", (1, 1 << 24), 1), ("last-[1048576,16]", (1 << 20, 16), 1),
            ("first-[16,1048576]", (16, 1 << 20), 0), ("first-[1048576,16]", (1 << 20, 16), 0))


def shape_class_workloads(name: str, dim_attr: str = "dims", attrs=None) -> tuple:
    a = dict(attrs or {})
    ax = (lambda d: (d,)) if dim_attr == "dims" else (lambda d: d)
    w = [Workload(f"{name}-{tag}-bf16", (shape,), DType.bf16, dict(a, **{dim_attr: ax(d)}))
         for tag, shape, d in _CLASSES]
    w.append(Workload(f"{name}-last-[16384,4096]-f16", ((16384, 4096),), DType.f16, dict(a, **{dim_attr: ax(1)})))
    return tuple(w)


def _workloads(name, kind):
    w = []
    dts = (DType.bf16, DType.f32)
    if kind in ("sum", "mean"):
        for dt in dts:
            w.append(Workload(f"{name}-last-[16384,4096]-{dt}", ((16384, 4096),), dt, {"dims": (1,)}, backward=True))
            w.append(Workload(f"{name}-first-[16384,4096]-{dt}", ((16384, 4096),), dt, {"dims": (0,)}))
        w.append(Workload(f"{name}-first-[4096,16384]-bf16", ((4096, 16384),), DType.bf16, {"dims": (0,)}))
        w.append(Workload(f"{name}-all-64M-f32", ((64 * 1024 * 1024,),), DType.f32, {"dims": None}))
    elif kind == "ext":
        for dt in dts:
            w.append(Workload(f"{name}-last-[16384,4096]-{dt}", ((16384, 4096),), dt, {"dims": (1,)},
                              backward=name == "amax"))
    else:
        w.append(Workload(f"{name}-last-[16384,4096]-bf16", ((16384, 4096),), DType.bf16, {"dim": 1}))
    if name in ("sum", "mean", "amax"):
        w.extend(shape_class_workloads(name))
    elif name == "argmax":
        w.extend(shape_class_workloads(name, "dim"))
    return tuple(w)


def _cost(desc):
    x = desc.inputs[0]
    return x.nbytes + sum(t.nbytes for t in desc.outputs), x.numel


def _bw_cost(desc):
    return sum(t.nbytes for t in desc.inputs) + desc.outputs[0].nbytes, 3 * desc.inputs[1].numel


def sum_tol(dt):
    # accumulation over up to ~10^3 terms in f32 (f64 for f64): |err| <~ n * eps * max|x|, so the absolute
    # part is raised for results that cancel to near zero (f32: 1e3 * 6e-8 * 3 ~ 2e-4 worst case).
    rtol, atol = {DType.f64: (1e-10, 1e-10), DType.f32: (1e-5, 2e-5)}.get(dt, (None, None))
    if rtol is None:
        from .._core.spec import default_tol

        return default_tol(dt)
    return rtol, atol


def exact_tol(dt):
    return (0.0, 0.0)   # selections (amax, argmax, any, count_nonzero) are exact


@dataclass(frozen=True)
class RedDef:
    name: str
    kind: str                   # a key of ATTRS
    torch_name: str
    jax_name: str | None
    peer: Callable
    dropin: Callable
    grad: Callable | None
    saves: tuple = ()
    dtypes: tuple = FLOAT_TYPES
    samples: Callable | None = None     # name -> (rng -> samples); default: by kind
    tol: Callable | None = None         # default: sum_tol for sum/mean kinds, exact otherwise
    dropin_result: Callable | None = None
    aliases: tuple = ()


REDUCTIONS: dict[str, RedDef] = {}
SPECS: dict[str, OpSpec] = {}
_SAMPLES = {"sum": _sum_samples, "mean": _sum_samples, "ext": _ext_samples, "arg": _arg_samples}


def register_reductions(defs, workloads: Callable) -> None:
    """One OpSpec per RedDef (this module's ops and those of ``reduction_prod_nan_logic_minmax``)."""
    for r in defs:
        REDUCTIONS[r.name] = r
        SPECS[r.name] = register_spec(OpSpec(
            name=r.name, family="reduction", arg_names=("x",), check=_make_check(r.name, r.kind), dtypes=r.dtypes,
            attrs=ATTRS[r.kind], torch_peer=r.peer, torch_name=r.torch_name, dropin=r.dropin,
            dropin_result=r.dropin_result, torch_aliases=r.aliases,
            jax_name=r.jax_name, grad=r.grad, saves=r.saves, differentiable=(0,) if r.grad else (),
            samples=(r.samples or _SAMPLES[r.kind])(r.name), errors=_errors(r.name, r.kind, r.dtypes),
            tol=r.tol or (sum_tol if r.kind in ("sum", "mean") else exact_tol),
            workloads=workloads(r.name, r.kind), cost=_cost, category="reduction",
            doc=f"{r.torch_name} semantics; see the module docstring.",
        ))


register_reductions([
    RedDef("sum", "sum", "torch.sum", "jax.numpy.sum", _peer_sum("sum"), _dropin_sum, _g_sum, dtypes=ALL_TYPES),
    RedDef("mean", "mean", "torch.mean", "jax.numpy.mean", _peer_sum("mean"), _dropin_sum, _g_mean),
    RedDef("amax", "ext", "torch.amax", "jax.numpy.max", _peer_ext("amax"), _dropin_ext, _g_ext, ("inputs", "outputs"),
           dtypes=ALL_TYPES),
    RedDef("amin", "ext", "torch.amin", "jax.numpy.min", _peer_ext("amin"), _dropin_ext, _g_ext, ("inputs", "outputs"),
           dtypes=ALL_TYPES),
    RedDef("argmax", "arg", "torch.argmax", "jax.numpy.argmax", _peer_arg("argmax"), _dropin_arg, None,
           dtypes=NUM_TYPES),
    RedDef("argmin", "arg", "torch.argmin", "jax.numpy.argmin", _peer_arg("argmin"), _dropin_arg, None,
           dtypes=NUM_TYPES),
], _workloads)
SPECS["mean_backward"] = register_spec(OpSpec(
    name="mean_backward", family="reduction", arg_names=("grad",), check=_check_mean_backward,
    dtypes=FLOAT_TYPES, attrs=(FWD_SHAPE, dims_attr(fwd_rank), KEEPDIM, _DTYPE), torch_peer=_peer_mean_bw,
    torch_name="torch autograd rule of mean (grad expanded / count)", samples=_mean_bw_samples,
    errors=_mean_bw_errors, cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, d.outputs[0].numel),
    category="reduction", doc="gradient of mean: grad broadcast to the input's shape, divided by the count",
))

SPECS["amax_backward"] = register_spec(OpSpec(
    name="amax_backward", family="reduction", arg_names=("grad", "x", "out"), check=_check_amax_backward,
    dtypes=FLOAT_TYPES, attrs=(dims_attr(1), KEEPDIM, Attr("nan", "bool", False)), torch_peer=_peer_amax_bw,
    torch_name="torch autograd rule of amax/amin (scale_grad_by_count)", samples=_amax_bw_samples,
    errors=_amax_bw_errors, cost=_bw_cost, category="reduction",
    # one division g / count, rounded once to the dtype: the default per-dtype tolerance
    doc="gradient of amax/amin: grad split evenly among the elements equal to the result (nan=True: NaN "
        "elements match a NaN result, torch's evenly_distribute_backward of max()/min() without dim)",
))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "amax_backward", "broadcast_to", "mean_backward")
