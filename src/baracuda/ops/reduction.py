"""Reductions: sum, mean, amax, amin (any set of axes), argmax, argmin (one axis or all), and the fused
backward of amax/amin (``amax_backward``).

Attribute names are fixed by the core: ``ctx.reduce_to`` calls ``sum`` with ``dims=``/``keepdim=``, so
sum/mean/amax/amin take ``dims`` (None, an int or a tuple of ints; None or () = every axis, as torch),
``keepdim`` and, for sum/mean, ``dtype`` (accumulate and output in that dtype, as torch's ``dtype=``);
argmax/argmin take ``dim`` (None = the flattened input) and ``keepdim``.

Semantics follow torch: an empty sum is 0, an empty mean is NaN, amax/amin/argmax/argmin of an empty
reduction raise; NaN propagates (amax returns NaN, argmax the index of the first NaN); argmax/argmin
return the first index on ties.  The gradient of amax/amin is split evenly among tied maxima
(``(g / count) * (x == out)``, torch's ``scale_grad_by_count``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from ._common import norm_axes, norm_axis

__all__ = ["REDUCTIONS", "reduced_shape", "keepdim_shape", "sum_tol"]


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


def _check_keepdim(op, v):
    if not isinstance(v, (bool, np.bool_)):
        raise InvalidProblemError(op, "keepdim", "a bool", repr(v))
    return bool(v)


def _check_unknown(op, attrs, allowed):
    unknown = set(attrs) - set(allowed)
    if unknown:
        raise InvalidProblemError(op, sorted(unknown)[0], f"one of the attributes {sorted(allowed)}",
                                  "an unknown attribute")


def _nonempty(op, shape, dims, all_axes: bool):
    """amax/amin/argmax/argmin of an empty reduction raise, with torch's wording."""
    if all_axes and math.prod(shape) == 0:
        raise InvalidProblemError(op, "dim", "a reduction dim to be specified for input.numel() == 0",
                                  f"dim=None on an input of shape {tuple(shape)}")
    for d in dims:
        if shape[d] == 0:
            raise InvalidProblemError(op, "dim", f"reduction dim {d} to have non-zero size", "size 0")


def _check_one_input(op, spec, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    spec.check_dtypes(inputs)
    return inputs[0]


def _make_check(name: str, kind: str):
    """kind: 'sum' (sum/mean: dims, keepdim, dtype), 'ext' (amax/amin: dims, keepdim), 'arg' (dim, keepdim)."""
    allowed = {"sum": ("dims", "keepdim", "dtype"), "ext": ("dims", "keepdim"), "arg": ("dim", "keepdim")}[kind]

    def check(inputs, attrs):
        _check_unknown(name, attrs, allowed)
        x = _check_one_input(name, SPECS[name], inputs)
        a = {k: attrs.get(k, DEFAULTS[kind][k]) for k in allowed}
        a["keepdim"] = _check_keepdim(name, a["keepdim"])
        rank = len(x.shape)
        if kind == "arg":
            dim = a["dim"]
            if dim is not None:
                if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
                    raise InvalidProblemError(name, "dim", "None or an int", repr(dim))
                dim = norm_axis(name, "dim", int(dim), rank)
                dims = (dim,) if rank else ()
            else:
                dims = tuple(range(rank))
            a["dim"] = dim
            _nonempty(name, x.shape, dims, dim is None)
            return a, (TensorSpec(reduced_shape(x.shape, dims, a["keepdim"]), DType.i64),)
        dims = _norm_dims(name, a["dims"], rank)
        a["dims"] = dims
        if kind == "ext":
            _nonempty(name, x.shape, dims, len(dims) == rank)
            out_dt = x.dtype
        else:
            dt = a["dtype"]
            if dt is not None:
                try:
                    dt = as_dtype(dt)
                except TypeError as e:
                    raise InvalidProblemError(name, "dtype", "a floating dtype", repr(dt)) from e
                if dt not in FLOAT_TYPES:
                    raise UnsupportedError(name, f"argument 'dtype' is {dt}; supported: "
                                                 f"{', '.join(map(str, FLOAT_TYPES))}")
                a["dtype"] = dt
            out_dt = dt or x.dtype
        return a, (TensorSpec(reduced_shape(x.shape, dims, a["keepdim"]), out_dt),)
    return check


DEFAULTS = {"sum": {"dims": None, "keepdim": False, "dtype": None},
            "ext": {"dims": None, "keepdim": False},
            "arg": {"dim": None, "keepdim": False}}


def _check_amax_backward(inputs, attrs):
    op = "amax_backward"
    _check_unknown(op, attrs, ("dims", "keepdim"))
    if len(inputs) != 3:
        raise InvalidProblemError(op, "inputs", "3 operands (grad, x, out)", len(inputs))
    SPECS[op].check_dtypes(inputs)
    g, x, out = inputs
    dims = _norm_dims(op, attrs.get("dims"), len(x.shape))
    keepdim = _check_keepdim(op, attrs.get("keepdim", False))
    want = reduced_shape(x.shape, dims, keepdim)
    for nm, t in (("grad", g), ("out", out)):
        if t.shape != want:
            raise InvalidProblemError(op, nm, f"shape {want} (x reduced over {dims})", t.shape)
        if t.dtype != x.dtype:
            from .._core.errors import DTypeMismatchError

            raise DTypeMismatchError(op, nm, str(x.dtype), str(t.dtype))
    return {"dims": dims, "keepdim": keepdim}, (TensorSpec(x.shape, x.dtype),)


# -- backward rules -------------------------------------------------------------------------------
def _g_sum(ctx, d, grads, s):
    x = d.inputs[0]
    g = ctx.reshape(grads[0], keepdim_shape(x.shape, d.attr("dims")))
    cast = x.dtype if d.outputs[0].dtype != x.dtype else None
    return (ctx.op("broadcast_to", g, shape=x.shape, dtype=cast),)


def _g_mean(ctx, d, grads, s):
    # one fused pass (broadcast, divide by the count in the compute dtype, cast to x's dtype) rather than a
    # scalar multiply + broadcast: no fp32-rounded 1/count for f64
    x = d.inputs[0]
    return (ctx.op("mean_backward", grads[0], shape=x.shape, dims=d.attr("dims"), keepdim=d.attr("keepdim"),
                   dtype=x.dtype),)


def _check_mean_backward(inputs, attrs):
    op = "mean_backward"
    _check_unknown(op, attrs, ("shape", "dims", "keepdim", "dtype"))
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand (grad)", len(inputs))
    SPECS[op].check_dtypes(inputs)
    g = inputs[0]
    try:
        shape = tuple(int(n) for n in attrs["shape"])
    except (KeyError, TypeError, ValueError):
        raise InvalidProblemError(op, "shape", "the forward input's shape", repr(attrs.get("shape"))) from None
    dims = _norm_dims(op, attrs.get("dims"), len(shape))
    keepdim = _check_keepdim(op, attrs.get("keepdim", False))
    want = reduced_shape(shape, dims, keepdim)
    if g.shape != want:
        raise InvalidProblemError(op, "grad", f"shape {want} ({shape} reduced over {dims})", g.shape)
    dt = attrs.get("dtype")
    dt = g.dtype if dt is None else as_dtype(dt)
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


def _peer_amax_bw(g, x, out, dims=None, keepdim=False):
    d = _tdims(dims)
    d = [a % x.dim() for a in d] if d is not None and x.dim() else list(range(x.dim()))
    shape = keepdim_shape(tuple(x.shape), d)
    gk, ok = g.reshape(shape), out.reshape(shape)
    mask = (x == ok).to(x.dtype)
    cnt = mask.sum(dim=d, keepdim=True) if x.dim() else mask
    return (gk / cnt) * mask


def _dropin_dims(dim):
    if dim is None:
        return None
    if isinstance(dim, int):
        return dim
    return tuple(int(a) for a in dim)


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


def _errors(name, kind):
    def errors():
        yield ErrorCase((((3,), "i32"),), {}, UnsupportedError, r"dtype i32; the op is defined for", "int-dtype")
        yield ErrorCase((((3, 4), "f32"),), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        dimattr = "dim" if kind == "arg" else "dims"
        yield ErrorCase((((3, 4), "f32"),), {dimattr: 2}, InvalidProblemError,
                        rf"{name}: argument 'dim': expected an axis in \[-2, 1\], got 2", "bad-dim")
        if kind != "arg":
            yield ErrorCase((((3, 4), "f32"),), {"dims": (0, -2)}, InvalidProblemError, r"distinct axes", "dup-dims")
        if kind == "sum":
            yield ErrorCase((((3, 4), "f32"),), {"dtype": "i32"}, UnsupportedError, r"argument 'dtype' is i32",
                            "int-out-dtype")
        if kind in ("ext", "arg"):
            yield ErrorCase((((0, 4), "f32"),), {dimattr: 0}, InvalidProblemError,
                            rf"{name}: argument 'dim': expected reduction dim 0 to have non-zero size", "empty-dim")
            yield ErrorCase((((0, 4), "f32"),), {}, InvalidProblemError,
                            rf"{name}: argument 'dim': expected a reduction dim to be specified", "empty-all")
    return errors


def _amax_bw_errors():
    yield ErrorCase((((4,), "f32"), ((3, 4), "f32"), ((3,), "f32")), {"dims": (1,)}, InvalidProblemError,
                    r"amax_backward: argument 'grad': expected shape \(3,\)", "bad-grad")
    yield ErrorCase((((3,), "i32"),) * 3, {}, UnsupportedError, r"dtype i32", "int-dtype")


def _workloads(name, kind):
    w = []
    dts = (DType.bf16, DType.f32)
    if kind == "sum":
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


@dataclass(frozen=True)
class RedDef:
    name: str
    kind: str                   # sum | ext | arg
    torch_name: str
    jax_name: str | None
    peer: Callable
    dropin: Callable
    grad: Callable | None
    saves: tuple = ()


REDUCTIONS: dict[str, RedDef] = {r.name: r for r in [
    RedDef("sum", "sum", "torch.sum", "jax.numpy.sum", _peer_sum("sum"), _dropin_sum, _g_sum),
    RedDef("mean", "sum", "torch.mean", "jax.numpy.mean", _peer_sum("mean"), _dropin_sum, _g_mean),
    RedDef("amax", "ext", "torch.amax", "jax.numpy.max", _peer_ext("amax"), _dropin_ext, _g_ext, ("inputs", "outputs")),
    RedDef("amin", "ext", "torch.amin", "jax.numpy.min", _peer_ext("amin"), _dropin_ext, _g_ext, ("inputs", "outputs")),
    RedDef("argmax", "arg", "torch.argmax", "jax.numpy.argmax", _peer_arg("argmax"), _dropin_arg, None),
    RedDef("argmin", "arg", "torch.argmin", "jax.numpy.argmin", _peer_arg("argmin"), _dropin_arg, None),
]}

_SAMPLES = {"sum": _sum_samples, "ext": _ext_samples, "arg": _arg_samples}

SPECS: dict[str, OpSpec] = {}
for _r in REDUCTIONS.values():
    SPECS[_r.name] = register_spec(OpSpec(
        name=_r.name, family="reduction", arg_names=("x",), check=_make_check(_r.name, _r.kind), dtypes=FLOAT_TYPES,
        defaults=dict(DEFAULTS[_r.kind]), torch_peer=_r.peer, torch_name=_r.torch_name, dropin=_r.dropin,
        jax_name=_r.jax_name, grad=_r.grad, saves=_r.saves, differentiable=(0,) if _r.grad else (),
        samples=_SAMPLES[_r.kind](_r.name), errors=_errors(_r.name, _r.kind),
        tol=sum_tol if _r.kind == "sum" else (lambda dt: (0.0, 0.0)),  # amax/argmax are exact selections
        workloads=_workloads(_r.name, _r.kind), cost=_cost, category="reduction",
        doc=f"{_r.torch_name} semantics; see the module docstring.",
    ))

SPECS["mean_backward"] = register_spec(OpSpec(
    name="mean_backward", family="reduction", arg_names=("grad",), check=_check_mean_backward,
    dtypes=FLOAT_TYPES, defaults={"dims": None, "keepdim": False, "dtype": None}, torch_peer=_peer_mean_bw,
    torch_name="torch autograd rule of mean (grad expanded / count)", samples=_mean_bw_samples,
    errors=_mean_bw_errors, cost=lambda d: (d.inputs[0].nbytes + d.outputs[0].nbytes, d.outputs[0].numel),
    category="reduction", doc="gradient of mean: grad broadcast to the input's shape, divided by the count",
))

SPECS["amax_backward"] = register_spec(OpSpec(
    name="amax_backward", family="reduction", arg_names=("grad", "x", "out"), check=_check_amax_backward,
    dtypes=FLOAT_TYPES, defaults={"dims": None, "keepdim": False}, torch_peer=_peer_amax_bw,
    torch_name="torch autograd rule of amax/amin (scale_grad_by_count)", samples=_amax_bw_samples,
    errors=_amax_bw_errors, cost=_bw_cost, category="reduction",
    # one division g / count, rounded once to the dtype: the default per-dtype tolerance
    doc="gradient of amax/amin: grad split evenly among the elements equal to the result",
))
