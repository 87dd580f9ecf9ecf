"""Statistical reductions (issue 4): var, std, var_mean, std_mean, vector_norm (+ torch.norm), logsumexp, trace,
and their fused backward ops.

var(x, dims, correction=1, keepdim)   sum((x - mean)^2) / max(0, N - correction), N = elements reduced
std(...)                              sqrt(var)
var_mean / std_mean                   (var|std, mean): two outputs, a plain tuple like torch
vector_norm(x, ord=2, dims, keepdim, dtype)  torch.linalg.vector_norm: ord in R u {inf, -inf}; 0 counts nonzeros
norm(x, ord, dims, keepdim, dtype)    torch.norm's numeric/'fro' forms (the same kernels; the drop-in runs 'nuc' as
    linalg's matrix_norm, torch/_composed.py)
logsumexp(x, dims, keepdim)           max + log(sum(exp(x - max))); a row of -inf gives -inf, one +inf gives +inf
trace(x)                              sum of the main diagonal of a 2-D matrix

``dims`` follows ops/reduction.py (None, an int or a tuple; None or () = every axis).  The moments are computed
in one read of x (shifted Welford/Chan combine in f32, f64 for f64: exact to the rounding of the result for data
with a large mean, never E[x^2] - E[x]^2).

Backward (each a fused op, gradients as torch's autograd formulas):
var_backward(grad, x, out[, grad_mean])  dx = grad * 2 (x - mean) / (N - correction)  [+ grad_mean / N]
    with ``std=True`` the grad is of std: grad / (2 std), 0 where std == 0 (torch's masked_fill).
vector_norm_backward(grad, x, out)       torch's norm_backward per ord (finite ord; inf/-inf are composed from
    amax_backward, which splits the gradient among ties like torch's mask / count).
logsumexp_backward(grad, x, out)         grad * exp(x - out)
trace_backward(grad, shape)              grad * eye(shape)
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype, result_type
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import float_operands, norm_axes, norm_axis
from .reduction import (NUM_TYPES, KEEPDIM, shape_class_workloads, bw_operands, check_reduced, dims_attr, full_dims,
                        keepdim_shape, reduced_shape, sum_tol)

__all__ = ["MOMENT_OPS", "NORM_OPS", "count_of", "norm_grad"]

MOMENT_OPS = ("var", "std", "var_mean", "std_mean")
NORM_OPS = ("vector_norm", "norm")
INF = float("inf")


def _norm_dims(op: str, dims, rank: int) -> tuple[int, ...]:
    """None, (), an int or a sequence -> sorted distinct axes; None/() = every axis (torch); a 0-d tensor
    accepts dim 0 / -1 and reduces nothing (ops/reduction.py's rule)."""
    if dims is not None and not isinstance(dims, (int, np.integer, tuple, list)) or isinstance(dims, bool):
        raise InvalidProblemError(op, "dim", "None, an int or a tuple of ints", repr(dims))
    seq = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims or ())
    if not all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in seq):
        raise InvalidProblemError(op, "dim", "a tuple of ints", repr(dims))
    if rank == 0:
        for a in seq:
            norm_axis(op, "dim", int(a), 0)
        return ()
    return norm_axes(op, "dim", tuple(int(a) for a in seq) or None, rank)


def _tdims(dims):
    """Peers are also called with raw attributes: None / () / int / sequence -> None (all) or a list."""
    if dims is None or (isinstance(dims, (tuple, list)) and len(dims) == 0):
        return None
    return [int(dims)] if isinstance(dims, (int, np.integer)) else [int(a) for a in dims]


def count_of(shape, dims) -> int:
    return math.prod(shape[a] for a in dims) if shape else 1


def _one(op, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    return inputs[0]


# None means the default (1.0 / 2.0), as the drop-ins may pass it
_CORR = Attr("correction", "float", 1.0, optional=True)
_ORD = Attr("ord", "float", 2.0, optional=True)


def _norm_ord(op, o, inputs, attrs):
    """torch.norm's p: a number or 'fro' (the 2-norm over at most 2 dims)."""
    if isinstance(o, str):
        if o != "fro":
            raise UnsupportedError(op, f"argument 'p'={o!r}: only 'fro' and numbers are supported (the nuclear "
                                       "norm is a matrix norm: use torch.linalg.matrix_norm)")
        return o
    return _ORD.validate(op, o)


_MOMENT_ATTRS = (dims_attr(), _CORR, KEEPDIM)
_DTYPE = Attr("dtype", "dtype", None, optional=True, expected="None or a floating dtype")
_NORM_ATTRS = {"vector_norm": (_ORD, dims_attr(), KEEPDIM, _DTYPE),
               # dims kept as given (None) until the 'fro' rule has seen it
               "norm": (Attr("ord", "any", 2.0, optional=True, normalize=_norm_ord),
                        Attr("dims", "axes", None, optional=True, label="dim"), KEEPDIM, _DTYPE)}


# -- var / std / var_mean / std_mean --------------------------------------------------------------
def _moment_attrs(a, rank):
    a["dims"] = full_dims(a["dims"], rank)
    if a["correction"] is None:
        a["correction"] = 1.0
    return a


def _check_moment(op):
    def check(inputs, attrs):
        x = _one(op, inputs)
        a = _moment_attrs(attrs, len(x.shape))
        out = TensorSpec(reduced_shape(x.shape, a["dims"], a["keepdim"]), x.dtype)
        return a, (out,) * (2 if op.endswith("_mean") else 1)
    return check


def _g_moment(ctx, d, grads, s):
    x = d.inputs[0]
    dims, keep, corr = d.attr("dims"), d.attr("keepdim"), d.attr("correction")
    g, gm = grads[0], (grads[1] if len(grads) > 1 else None)
    if g is None:
        return (ctx.op("mean_backward", gm, shape=x.shape, dims=dims, keepdim=keep),)
    ins = (g, s["x"], s["out" if len(grads) == 1 else "out0"]) + ((gm,) if gm is not None else ())
    return (ctx.op("var_backward", *ins, dims=dims, keepdim=keep, correction=corr, std=d.op.startswith("std")),)


def _check_var_bw(inputs, attrs):
    op = "var_backward"
    if len(inputs) not in (3, 4):
        raise InvalidProblemError(op, "inputs", "3 or 4 operands (grad, x, out[, grad_mean])", len(inputs))
    _SPECS[op].check_dtypes(inputs)
    named = dict(zip(("grad", "x", "out", "grad_mean"), inputs))
    x = named.pop("x")
    a = _moment_attrs(attrs, len(x.shape))
    check_reduced(op, x, a["dims"], a["keepdim"], **named)
    return a, (TensorSpec(x.shape, x.dtype),)


def _peer_moment(op):
    def peer(x, dims=None, correction=1.0, keepdim=False):
        import torch

        return getattr(torch, op)(x, dim=_tdims(dims), correction=correction, keepdim=keepdim)
    return peer


def _peer_var_bw(g, x, out, gm=None, *, dims=None, correction=1.0, keepdim=False, std=False):
    d = _tdims(dims)
    d = [a % x.dim() for a in d] if d is not None and x.dim() else list(range(x.dim()))
    ks = keepdim_shape(tuple(x.shape), d)
    n = count_of(tuple(x.shape), d)
    g, out = g.reshape(ks), out.reshape(ks)
    if std:
        g = (g / (2 * out)).masked_fill(out == 0, 0)
    mean = x.mean(dim=d, keepdim=True) if x.dim() else x
    r = (2.0 / (n - correction)) * g * (x - mean)
    return r + gm.reshape(ks) / n if gm is not None else r


def _dropin_moment(op):
    # torch.var(input, dim=None, *, correction=1, keepdim=False) and the legacy (input, dim, unbiased, keepdim)
    # / (input, unbiased) overloads
    def dropin(input, dim=None, unbiased=None, keepdim=False, *, correction=None, out=None):
        if out is not None:
            raise UnsupportedError(op, "argument 'out' is not supported by the drop-in (outputs are allocated)")
        if isinstance(dim, bool):
            dim, unbiased = None, dim
        if unbiased is not None and correction is not None:
            raise InvalidProblemError(op, "correction", "either 'unbiased' or 'correction', not both", "both")
        corr = correction if correction is not None else (1 if unbiased is None else int(bool(unbiased)))
        dims = None if dim is None else (dim if isinstance(dim, int) else tuple(dim))
        return (input,), {"dims": dims, "correction": corr, "keepdim": keepdim}
    return dropin


_DIM_CASES = [((3, 5), 1, 1.0), ((2, 3, 4), (0, 2), 0.0), ((7,), None, 2.5), ((33, 65), -1, 1.0),
              ((33, 65), 0, 0.0), ((2, 3, 4, 5), (1, 2), 1.0), ((), None, 0.0), ((4, 1, 3), 1, 0.0),
              ((0, 4), 1, 1.0), ((0, 4), 0, 1.0), ((3, 300), 1, 1.0), ((4, 1, 3), 1, 1.0)]


def _moment_samples(rng):
    for i, (shape, dims, corr) in enumerate(_DIM_CASES):
        # an offset mean: the two-pass/Welford paths are what is exercised, not a zero mean
        x = rng.standard_normal(shape) * 1.5 + 0.75
        yield Sample((x,), {"dims": dims, "correction": corr, "keepdim": i % 3 == 1}, name=f"{shape}-{dims}-c{corr}",
                     grad=not (shape == (4, 1, 3) and corr == 1.0))   # N - correction = 0: NaN / inf
    yield Sample((rng.standard_normal((3, 5)),), {}, name="defaults", grad=False)


def _moment_errors(op):
    def errors():
        yield ErrorCase((((3,), "i32"),), {}, UnsupportedError, r"dtype i32; the op is defined for", "int-dtype")
        yield ErrorCase((((3, 4), "f32"),), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        yield ErrorCase((((3, 4), "f32"),), {"dims": 2}, InvalidProblemError,
                        rf"{op}: argument 'dim': expected an axis in \[-2, 1\], got 2", "bad-dim")
        yield ErrorCase((((3, 4), "f32"),), {"dims": (0, -2)}, InvalidProblemError, r"distinct axes", "dup-dims")
        if op != "logsumexp":
            yield ErrorCase((((3, 4), "f32"),), {"correction": "1"}, InvalidProblemError,
                            rf"{op}: argument 'correction': expected a real number", "bad-correction")
    return errors


def _var_bw_samples(rng):
    for shape, dims, keep, std, gm in [((3, 5), (1,), False, False, False), ((33, 65), (0,), True, True, True),
                                       ((2, 3, 4, 5), (0, 2), False, True, False), ((7,), None, False, False, True),
                                       ((3, 300), (1,), False, True, True), ((0, 4), (1,), False, False, False)]:
        x = rng.standard_normal(shape) + 0.5
        nd = _norm_dims("var_backward", dims, len(shape))
        with np.errstate(all="ignore"):
            out = np.var(x, axis=nd, ddof=1, keepdims=keep) if x.size else np.zeros(reduced_shape(shape, nd, keep))
        out = np.sqrt(out) if std else out
        rs = np.shape(out)
        ins = (rng.standard_normal(rs), x, np.asarray(out)) + ((rng.standard_normal(rs),) if gm else ())
        yield Sample(ins, {"dims": dims, "keepdim": keep, "std": std}, name=f"{shape}-{dims}-std{std}-gm{gm}",
                     grad=False)


# -- vector_norm / norm ------------------------------------------------------------------------------
def _check_norm(op):
    def check(inputs, attrs):
        x = _one(op, inputs)
        o, d = attrs["ord"], attrs["dims"]
        if o == "fro":
            if d is not None and len(d) > 2:
                raise InvalidProblemError(op, "dim", "at most 2 dims for p='fro'", d)
            o = 2.0
        o = 2.0 if o is None else o
        if math.isnan(o):
            raise InvalidProblemError(op, "ord", "a real number or +-inf", o)
        dims = full_dims(tuple(range(len(x.shape))) if d is None else d, len(x.shape))
        keep = attrs["keepdim"]
        dt = attrs["dtype"]
        if dt is not None:
            if dt not in FLOAT_TYPES or result_type(x.dtype, dt) != dt:
                raise InvalidProblemError(op, "dtype", f"a floating dtype {x.dtype} converts to without narrowing",
                                          str(dt))
        if (o < 0 or o == INF) and any(x.shape[a] == 0 for a in dims):
            raise InvalidProblemError(op, "x", f"a non-empty reduction for ord={o:g} (no identity)",
                                      f"shape {x.shape} reduced over {dims}")
        return ({"ord": o, "dims": dims, "keepdim": keep, "dtype": dt},
                (TensorSpec(reduced_shape(x.shape, dims, keep), dt or x.dtype),))
    return check


def norm_grad(ctx, g, x, out, o, dims, keepdim):
    """d vector_norm(x, o) / dx * g, torch's conventions.  Shared by pairwise_distance (ops/distance.py)."""
    if math.isinf(o):
        # amax(|x|)'s gradient (ties split evenly, as torch's mask / mask.sum), times sign(x)
        xc = x if ctx.spec_of(x).dtype == ctx.spec_of(out).dtype else ctx.op("to_dtype", x, dtype=ctx.spec_of(out).dtype)
        r = ctx.op("mul", ctx.op("amax_backward", g, ctx.op("abs", xc), out, dims=dims, keepdim=keepdim),
                   ctx.op("sign", xc))
        xd = ctx.spec_of(x).dtype
        return r if ctx.spec_of(r).dtype == xd else ctx.op("to_dtype", r, dtype=xd)
    return ctx.op("vector_norm_backward", g, x, out, ord=o, dims=dims, keepdim=keepdim)


def _g_norm(ctx, d, grads, s):
    return (norm_grad(ctx, grads[0], s["x"], s["out"], d.attr("ord"), d.attr("dims"), d.attr("keepdim")),)


def _check_norm_bw(inputs, attrs):
    op = "vector_norm_backward"
    g, x, out = bw_operands(op, _SPECS[op], inputs)
    o = 2.0 if attrs["ord"] is None else attrs["ord"]
    if not math.isfinite(o):
        raise InvalidProblemError(op, "ord", "a finite ord (inf/-inf: amax_backward of |x|, times sign(x))", o)
    dims, keep = full_dims(attrs["dims"], len(x.shape)), attrs["keepdim"]
    check_reduced(op, x, dims, keep, same_dtype=False, grad=g, out=out)
    if out.dtype != g.dtype:
        raise DTypeMismatchError(op, "out", str(g.dtype), str(out.dtype))
    return {"ord": o, "dims": dims, "keepdim": keep}, (TensorSpec(x.shape, x.dtype),)


def _peer_norm(op):
    def peer(x, ord=2.0, dims=None, keepdim=False, dtype=None):
        import torch

        kw = {"dtype": as_dtype(dtype).torch} if dtype is not None else {}
        d = _tdims(dims)
        if op == "norm":
            return torch.norm(x, p=ord, dim=d, keepdim=keepdim, **kw)
        return torch.linalg.vector_norm(x, ord, dim=d, keepdim=keepdim, **kw)
    return peer


def _peer_norm_bw(g, x, out, *, ord=2.0, dims=None, keepdim=False):
    import torch

    d = _tdims(dims)
    d = [a % x.dim() for a in d] if d is not None and x.dim() else list(range(x.dim()))
    ks = keepdim_shape(tuple(x.shape), d)
    g, n = g.reshape(ks), out.reshape(ks)
    p = ord
    if p == 0:
        return torch.zeros_like(x)
    if p == 1:
        return x.sgn() * g
    if p == 2:
        return g * (x / n).masked_fill(n == 0, 0)
    if p < 1:
        return x.sgn() * x.abs().pow(p - 1).masked_fill(x == 0, 0) * g * n.pow(1 - p)
    sc = (g / n.pow(p - 1)).masked_fill(n == 0, 0)
    return (x.sgn() * x.abs().pow(p - 1) if p < 2 else x * x.abs().pow(p - 2)) * sc


def _dropin_vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None, out=None):
    if out is not None:
        raise UnsupportedError("vector_norm", "argument 'out' is not supported by the drop-in (outputs are allocated)")
    dims = None if dim is None else (dim if isinstance(dim, int) else tuple(dim))
    return (x,), {"ord": float(ord), "dims": dims, "keepdim": keepdim, "dtype": dtype}


def _dropin_norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    if out is not None:
        raise UnsupportedError("norm", "argument 'out' is not supported by the drop-in (outputs are allocated)")
    if p == "nuc":
        return None     # the nuclear norm: linalg's matrix_norm (torch/_composed.py)
    dims = None if dim is None else (dim if isinstance(dim, int) else tuple(dim))
    return (input,), {"ord": p if isinstance(p, str) else (2.0 if p is None else float(p)), "dims": dims,
                      "keepdim": keepdim, "dtype": dtype}


_ORDS = (2.0, 1.0, INF, -INF, 0.0, 0.5, 3.0, -1.5, 1.5)


def _norm_samples(op):
    def samples(rng):
        cases = [((3, 5), 1), ((2, 3, 4), (0, 2)), ((7,), None), ((33, 65), 0), ((33, 65), -1), ((2, 3, 4, 5), (1, 2)),
                 ((3, 300), 1), ((), None), ((4, 1, 3), 1)]
        ords = _ORDS if op == "vector_norm" else (2.0, "fro", 1.0, INF)
        for i, o in enumerate(ords):
            shape, dims = cases[i % len(cases)]
            x = rng.standard_normal(shape)
            if shape == (3, 5):
                x[0, 1] = 0.0   # a zero element: the subgradient conventions (p < 1 and sign(0))
            yield Sample((x,), {"ord": o, "dims": dims, "keepdim": i % 2 == 1}, name=f"{shape}-ord{o}")
        for shape, dims in cases[5:7]:
            yield Sample((rng.standard_normal(shape),), {"dims": dims}, name=f"{shape}-{dims}")
        yield Sample((np.zeros((2, 3)),), {"ord": 2.0, "dims": 1}, name="zeros")   # grad 0 at 0 (masked)
        yield Sample((rng.standard_normal((0, 4)),), {"ord": 2.0, "dims": 0}, name="empty")
        yield Sample((rng.standard_normal((3, 5)),), {"ord": 2.0, "dims": 1, "dtype": DType.f64}, name="dtype=f64")
        yield Sample((rng.standard_normal((3, 5)),), {}, name="defaults", grad=False)
    return samples


def _norm_errors(op):
    def errors():
        yield ErrorCase((((3,), "i32"),), {}, UnsupportedError, r"dtype i32; the op is defined for", "int-dtype")
        yield ErrorCase((((3, 4), "f32"),), {"bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        yield ErrorCase((((3, 4), "f32"),), {"dims": 2}, InvalidProblemError, r"expected an axis in", "bad-dim")
        yield ErrorCase((((3, 4), "f64"),), {"dtype": "f32"}, InvalidProblemError,
                        rf"{op}: argument 'dtype': expected a floating dtype f64 converts to without narrowing",
                        "narrowing")
        yield ErrorCase((((0, 4), "f32"),), {"ord": INF, "dims": 0}, InvalidProblemError,
                        r"a non-empty reduction for ord=inf", "empty-inf")
        if op == "norm":
            yield ErrorCase((((3, 4), "f32"),), {"ord": "nuc"}, UnsupportedError, r"only 'fro' and numbers", "nuc")
    return errors


def _norm_bw_samples(rng):
    for shape, dims, o in [((3, 5), (1,), 2.0), ((3, 5), (1,), 1.0), ((33, 65), (0,), 0.5), ((7,), None, 3.0),
                           ((2, 3, 4), (0, 2), 1.5), ((3, 5), (1,), 0.0), ((3, 5), (0,), -1.5), ((0, 4), (1,), 2.0)]:
        x = rng.standard_normal(shape)
        if x.size:
            x.reshape(-1)[1] = 0.0
        nd = _norm_dims("vector_norm_backward", dims, len(shape))
        with np.errstate(all="ignore"):
            ax = nd if nd else None
            a = np.abs(x)
            out = np.asarray(np.sum(a != 0, axis=ax) if o == 0 else np.sum(a ** o, axis=ax) ** (1 / o), np.float64)
        yield Sample((rng.standard_normal(np.shape(out)), x, out), {"ord": o, "dims": dims}, name=f"{shape}-ord{o}",
                     grad=False)


# -- logsumexp ------------------------------------------------------------------------------------
def _check_lse(inputs, attrs):
    op = "logsumexp"
    x = _one(op, inputs)
    dims, keep = full_dims(attrs["dims"], len(x.shape)), attrs["keepdim"]
    return {"dims": dims, "keepdim": keep}, (TensorSpec(reduced_shape(x.shape, dims, keep), x.dtype),)


def _check_lse_bw(inputs, attrs):
    op = "logsumexp_backward"
    g, x, out = bw_operands(op, _SPECS[op], inputs)
    dims, keep = full_dims(attrs["dims"], len(x.shape)), attrs["keepdim"]
    check_reduced(op, x, dims, keep, grad=g, out=out)
    return {"dims": dims, "keepdim": keep}, (TensorSpec(x.shape, x.dtype),)


def _g_lse(ctx, d, grads, s):
    return (ctx.op("logsumexp_backward", grads[0], s["x"], s["out"], dims=d.attr("dims"), keepdim=d.attr("keepdim")),)


def _peer_lse(x, dims=None, keepdim=False):
    import torch

    d = _tdims(dims)
    return torch.logsumexp(x, dim=d if d is not None else tuple(range(x.dim())), keepdim=keepdim)


def _peer_lse_bw(g, x, out, *, dims=None, keepdim=False):
    d = _tdims(dims)
    d = [a % x.dim() for a in d] if d is not None and x.dim() else list(range(x.dim()))
    ks = keepdim_shape(tuple(x.shape), d)
    return g.reshape(ks) * (x - out.reshape(ks)).exp()


def _dropin_lse(input, dim, keepdim=False, *, out=None):
    if out is not None:
        raise UnsupportedError("logsumexp", "argument 'out' is not supported by the drop-in (outputs are allocated)")
    # torch: an integer/bool input is converted to the default dtype first
    return float_operands(input, bools=True), {"dims": dim if isinstance(dim, int) else tuple(dim), "keepdim": keepdim}


def _lse_samples(rng):
    for i, (shape, dims) in enumerate([((3, 5), 1), ((2, 3, 4), (0, 2)), ((7,), None), ((33, 65), 0),
                                       ((3, 300), -1), ((2, 3, 4, 5), (1, 2)), ((), None), ((0, 4), 0), ((0, 4), 1)]):
        yield Sample((3.0 * rng.standard_normal(shape),), {"dims": dims, "keepdim": i % 2 == 1}, name=f"{shape}-{dims}")
    x = rng.standard_normal((4, 6))
    x[0, :] = -INF            # -> -inf
    x[1, 2] = INF             # -> +inf
    x[2, 3] = -INF
    yield Sample((x,), {"dims": 1}, name="infs", grad=False)


def _lse_bw_samples(rng):
    for shape, dims in [((3, 5), (1,)), ((33, 65), (0,)), ((2, 3, 4), (0, 2)), ((0, 4), (1,))]:
        x = rng.standard_normal(shape)
        nd = _norm_dims("logsumexp_backward", dims, len(shape))
        out = np.log(np.sum(np.exp(x), axis=nd)) if x.size else np.zeros(reduced_shape(shape, nd, False))
        yield Sample((rng.standard_normal(np.shape(out)), x, np.asarray(out)), {"dims": dims}, name=f"{shape}",
                     grad=False)


# -- trace ----------------------------------------------------------------------------------------
def _check_trace(inputs, attrs):
    op = "trace"
    x = _one(op, inputs)
    if len(x.shape) != 2:
        raise InvalidProblemError(op, "x", "a 2-D matrix", f"shape {x.shape}")
    # integers and bool sum into int64 (wrapping), as torch.trace and torch.sum
    return {}, (TensorSpec((), x.dtype if x.dtype.is_floating else DType.i64),)


def _g_trace(ctx, d, grads, s):
    if not d.inputs[0].dtype.is_floating or grads[0] is None:     # integer input: no gradient (torch)
        return (None,)
    return (ctx.op("trace_backward", grads[0], shape=d.inputs[0].shape),)


def _check_trace_bw(inputs, attrs):
    op = "trace_backward"
    g = _one(op, inputs)
    if g.shape != ():
        raise InvalidProblemError(op, "grad", "a 0-d tensor", f"shape {g.shape}")
    shape = attrs["shape"]
    if len(shape) != 2:
        raise InvalidProblemError(op, "shape", "the 2-D input shape", shape)
    return attrs, (TensorSpec(shape, g.dtype),)


def _peer_trace_bw(g, shape):
    import torch

    return g * torch.eye(*shape, dtype=g.dtype)


def _trace_samples(rng):
    for shape in [(3, 3), (3, 5), (7, 2), (1, 1), (0, 4), (33, 65)]:
        yield Sample((rng.standard_normal(shape),), {}, name=str(shape))


def _trace_errors():
    yield ErrorCase((((3, 4, 5), "f32"),), {}, InvalidProblemError, r"trace: argument 'x': expected a 2-D", "3d")
    yield ErrorCase((((3,), "f32"),), {}, InvalidProblemError, r"trace: argument 'x': expected a 2-D", "1d")


# -- shared: backward-op errors, workloads, costs, tolerances --------------------------------------
def _bw_errors(op, n):
    def errors():
        f = ((3, 4), "f32")
        yield ErrorCase((((4,), "f32"), f, ((3,), "f32"))[:n], {"dims": 1}, InvalidProblemError,
                        rf"{op}: argument 'grad': expected shape \(3,\)", "bad-grad")
        yield ErrorCase(((((3,), "i32"),) * n), {}, UnsupportedError, r"dtype i32", "int-dtype")
    return errors


def _cost(flops):
    """Bytes: every operand once (one read of x, one write of dx for the backward ops); flops per element of x."""
    def cost(desc):
        return (sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs),
                flops * max(t.numel for t in desc.inputs))
    return cost


def _wl(op, attrs=None, dts=(DType.bf16, DType.f32), backward=True, first=True):
    a = dict(attrs or {})
    w = [Workload(f"{op}-last-[16384,4096]-{dt}", ((16384, 4096),), dt, dict(a, dims=(1,)), backward=backward)
         for dt in dts]
    w.append(Workload(f"{op}-last-[512,262144]-bf16", ((512, 262144),), DType.bf16, dict(a, dims=(1,))))
    if first:
        w.append(Workload(f"{op}-first-[16384,4096]-bf16", ((16384, 4096),), DType.bf16, dict(a, dims=(0,))))
    w.append(Workload(f"{op}-all-64M-f32", ((64 * 1024 * 1024,),), DType.f32, dict(a, dims=None)))
    if op == "var":
        w.extend(shape_class_workloads(op, "dims", a))
    return tuple(w)


def _bw_wl(op, attrs, dt=DType.bf16):
    return (Workload(f"{op}-last-[16384,4096]-{dt}", ((16384,), (16384, 4096), (16384,)), dt,
                     dict(attrs, dims=(1,))),)


def _moment_tol(dt):
    # one-read Welford/Chan in f32 (f64 for f64): a few ulps of the result, plus the output rounding for halves
    return sum_tol(dt)


def _bw_tol(dt):
    # dx = scale * (x - mean): the mean's rounding in f32 (~N * 2^-24 relative for N <= 300 terms) is absolute error
    return {DType.f64: (1e-9, 1e-10), DType.f32: (5e-5, 5e-5)}.get(dt) or (2e-2, 2e-2)


_SPECS: dict[str, OpSpec] = {}
for _op in MOMENT_OPS:
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="reduction_stats", arg_names=("x",), check=_check_moment(_op), dtypes=FLOAT_TYPES,
        attrs=_MOMENT_ATTRS, torch_peer=_peer_moment(_op),
        torch_name=f"torch.{_op}", dropin=_dropin_moment(_op), jax_name=f"jax.numpy.{_op[:3]}" if "_" not in _op else None,
        grad=_g_moment, saves=("inputs", "outputs"), differentiable=(0,), samples=_moment_samples,
        errors=_moment_errors(_op), tol=_moment_tol, grad_tol=_bw_tol,
        workloads=_wl(_op, {"correction": 1.0}), cost=_cost(4), category="reduction",
        doc=f"torch.{_op}: one-read shifted Welford/Chan moments (accurate for large means); see the module docstring."))
_SPECS["var_backward"] = register_spec(OpSpec(
    name="var_backward", family="reduction_stats", arg_names=("grad", "x", "out", "grad_mean"), check=_check_var_bw,
    dtypes=FLOAT_TYPES, attrs=(dims_attr(1), _CORR, KEEPDIM, Attr("std", "bool", False)),
    torch_peer=_peer_var_bw, torch_name="torch autograd rule of var/std/var_mean/std_mean",
    samples=_var_bw_samples, errors=_bw_errors("var_backward", 3), tol=_bw_tol,
    workloads=_bw_wl("var_backward", {"correction": 1.0, "std": True}), cost=_cost(5), category="reduction",
    doc="fused gradient of var/std (+ the mean output's gradient): the mean is recomputed in the kernel."))

for _op, _dropin in (("vector_norm", _dropin_vector_norm), ("norm", _dropin_norm)):
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="reduction_stats", arg_names=("x",), check=_check_norm(_op), dtypes=FLOAT_TYPES,
        attrs=_NORM_ATTRS[_op], torch_peer=_peer_norm(_op),
        torch_name="torch.linalg.vector_norm" if _op == "vector_norm" else "torch.norm", dropin=_dropin,
        jax_name="jax.numpy.linalg.vector_norm" if _op == "vector_norm" else None,
        grad=_g_norm, saves=("inputs", "outputs"), differentiable=(0,), samples=_norm_samples(_op),
        errors=_norm_errors(_op), tol=_moment_tol, grad_tol=_bw_tol,
        workloads=_wl(_op, {"ord": 2.0}) if _op == "vector_norm" else (), cost=_cost(3), category="reduction",
        doc=("torch.linalg.vector_norm" if _op == "vector_norm" else "torch.norm (p='fro' or a number)")
        + ": one read, accumulated in f32 (f64 for f64)."))
_SPECS["vector_norm_backward"] = register_spec(OpSpec(
    name="vector_norm_backward", family="reduction_stats", arg_names=("grad", "x", "out"), check=_check_norm_bw,
    dtypes=FLOAT_TYPES, attrs=(_ORD, dims_attr(1), KEEPDIM), torch_peer=_peer_norm_bw,
    torch_name="torch autograd rule of linalg.vector_norm (norm_backward)", samples=_norm_bw_samples,
    errors=_bw_errors("vector_norm_backward", 3), tol=_bw_tol, workloads=_bw_wl("vector_norm_backward", {"ord": 2.0}),
    cost=_cost(6), category="reduction", doc="gradient of a finite-ord vector norm: one elementwise pass."))

_SPECS["logsumexp"] = register_spec(OpSpec(
    name="logsumexp", family="reduction_stats", arg_names=("x",), check=_check_lse, dtypes=FLOAT_TYPES,
    attrs=(dims_attr(), KEEPDIM), torch_peer=_peer_lse, torch_name="torch.logsumexp",
    dropin=_dropin_lse, jax_name="jax.scipy.special.logsumexp", grad=_g_lse, saves=("inputs", "outputs"),
    differentiable=(0,), samples=_lse_samples, errors=_moment_errors("logsumexp"), tol=_moment_tol, grad_tol=_bw_tol,
    workloads=_wl("logsumexp"), cost=_cost(4), category="reduction",
    doc="torch.logsumexp: one read (online max / rescaled sum)."))
_SPECS["logsumexp_backward"] = register_spec(OpSpec(
    name="logsumexp_backward", family="reduction_stats", arg_names=("grad", "x", "out"), check=_check_lse_bw,
    dtypes=FLOAT_TYPES, attrs=(dims_attr(1), KEEPDIM), torch_peer=_peer_lse_bw,
    torch_name="torch autograd rule of logsumexp", samples=_lse_bw_samples, errors=_bw_errors("logsumexp_backward", 3),
    tol=_bw_tol, workloads=_bw_wl("logsumexp_backward", {}), cost=_cost(3), category="reduction",
    doc="gradient of logsumexp: grad * exp(x - out), one elementwise pass."))

_SPECS["trace"] = register_spec(OpSpec(
    # bool sums into int64 (torch's CUDA kernel and OpInfo; torch's CPU kernel, 2.13, refuses bool: accepted here
    # on every device)
    name="trace", family="reduction_stats", arg_names=("x",), check=_check_trace, dtypes=NUM_TYPES + (DType.bool,),
    attrs=(),
    torch_peer=lambda x: x.diagonal().sum(), torch_name="torch.trace", dropin=lambda input: ((input,), {}),
    jax_name="jax.numpy.trace", grad=_g_trace,
    saves=(), differentiable=(0,), samples=_trace_samples, errors=_trace_errors, tol=_moment_tol,
    workloads=(Workload("trace-[8192,8192]-f32", ((8192, 8192),), DType.f32, {}, backward=True),),
    cost=lambda d: (min(d.inputs[0].shape) * d.dtype.itemsize, min(d.inputs[0].shape)), category="reduction",
    doc="torch.trace of a 2-D matrix (strided read of the diagonal only)."))
_SPECS["trace_backward"] = register_spec(OpSpec(
    name="trace_backward", family="reduction_stats", arg_names=("grad",), check=_check_trace_bw, dtypes=FLOAT_TYPES,
    attrs=(Attr("shape", "shape", expected="the 2-D input shape"),),
    torch_peer=_peer_trace_bw, torch_name="torch autograd rule of trace (grad * eye)",
    samples=lambda rng: [Sample((rng.standard_normal(()),), {"shape": s}, name=str(s), grad=False)
                         for s in [(3, 3), (3, 5), (7, 2), (0, 4)]],
    errors=lambda: [ErrorCase((((3,), "f32"),), {"shape": (3, 3)}, InvalidProblemError, r"expected a 0-d", "1d")],
    cost=lambda d: (d.outputs[0].nbytes, 0), category="reduction", doc="grad * eye(shape): one write."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "abs", "amax_backward", "logsumexp_backward", "mul", "sign", "trace_backward", "var_backward",
                 "vector_norm_backward")
