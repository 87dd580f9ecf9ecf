"""Indexing along one dim (issue 17): index_select, index_add, index_copy, index_fill, index_reduce.

Every op views its operands as (outer, N, inner) along ``dim``: ``index`` (1-D or 0-d, int64 or int32 where torch
takes int32) picks rows of the N axis; ``source`` has K = index.numel() rows in their place.  Semantics are torch's:

* index_select(input, dim, index): out[.., k, ..] = input[.., index[k], ..]; out.shape[dim] = K (a 0-d input stays 0-d).
* index_add(input, dim, index, source, alpha=1): out = input; out[.., index[k], ..] += alpha * source[.., k, ..].
* index_copy(input, dim, index, source): out[.., index[k], ..] = source[.., k, ..] (int64 index only, as torch;
  with repeated indices the last k wins, as torch on the CPU — torch's CUDA kernel leaves it unspecified).
* index_fill(input, dim, index, value): out[.., index[k], ..] = value (int64 index only, as torch).
* index_reduce(input, dim, index, source, reduce, include_self=True): reduce in prod / mean / amax / amin over the
  rows sent to each destination (and the input's row when include_self); rows no index names keep the input's.

Index range (torch's): index_fill wraps negative indices (torch does); the others take [0, N) as torch does and
an index outside it is an ``InvalidProblemError`` naming the op, the argument, the value and the range (the GPU
kernels never touch memory for it: they flag it and the plan raises through ``_core/checks.py: flagged``).

Gradients (torch's formulas): index_select -> index_add of grad into zeros; index_add -> (grad,
alpha * index_select(grad)); index_copy -> (index_fill(grad, 0), index_select(grad)); index_fill -> index_fill(grad,
0); index_reduce -> ``index_reduce_backward`` (amax/amin: the gradient split evenly among the values equal to the
result, as torch — whose count includes the input's own value even with include_self=False; prod: the product of
the others; mean: grad / count).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec, set_bench_inputs
from ._common import check_nonneg, no_out
from .indexing import zeros_view

__all__ = ["INDEX_OPS", "VALUE_TYPES", "INDEX_TYPES", "index_error", "dim_geometry"]

INDEX_TYPES = (DType.i64, DType.i32)
INT_VALUES = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
VALUE_TYPES = FLOAT_TYPES + INT_VALUES + (DType.bool,)
REDUCES = ("prod", "mean", "amax", "amin")


def index_error(op: str, arg: str, value: int, n: int, wrap: bool) -> InvalidProblemError:
    """The error of an out-of-range index: the op, the argument, the offending value and the valid range."""
    rng = f"[{-n}, {n})" if wrap else f"[0, {n})"
    return InvalidProblemError(op, arg, f"indices in {rng} (the size of the indexed dim)", f"index {value}")


def dim_geometry(shape, dim) -> tuple[int, int, int]:
    """(outer, N, inner) of ``shape`` along ``dim`` (a 0-d shape is (1, 1, 1))."""
    import math

    shape = tuple(shape) or (1,)
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


@dataclass(frozen=True)
class IndexDef:
    name: str
    source: bool               # takes a source operand (index_add / index_copy / index_reduce)
    index_types: tuple          # torch's accepted index dtypes
    wrap: bool                  # negative indices wrap (torch: index_fill only)
    dtypes: tuple
    grad: Callable
    extra: tuple = ()           # more attributes
    saves: tuple = ("index",)


def _index_shape(op, x, index):
    if index.dtype not in INDEX_DEFS[op].index_types:
        want = " or ".join(map(str, INDEX_DEFS[op].index_types))
        raise DTypeMismatchError(op, "index", want, str(index.dtype))
    if len(index.shape) > 1:
        raise InvalidProblemError(op, "index", "a 1-D or 0-d tensor (a vector of indices)", f"shape {index.shape}")
    return index.numel


def _make_check(op):
    d_ = None

    def check(inputs, attrs):
        nonlocal d_
        d_ = d_ or INDEX_DEFS[op]
        names = ("input", "index", "source") if d_.source else ("input", "index")
        if op == "index_fill":
            inputs = fill_value_operand(op, inputs, attrs)
        if len(inputs) != len(names):
            raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
        x, index = inputs[0], inputs[1]
        check_nonneg(op, names, [t.shape for t in inputs])
        if x.dtype not in d_.dtypes:
            raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                       f"{', '.join(map(str, d_.dtypes))}")
        k = _index_shape(op, x, index)
        dim = attrs["dim"]
        rows = list(x.shape)
        if rows:
            rows[dim] = k
        elif k != 1 and op == "index_select":
            raise InvalidProblemError(op, "index", "one index for a 0-d input", f"{k} indices")
        if d_.source:
            src = inputs[2]
            if src.dtype != x.dtype:
                raise DTypeMismatchError(op, "source", str(x.dtype), str(src.dtype))
            want = tuple(rows) if x.shape else (() if k == 1 else (k,))
            if tuple(src.shape) != want and not (not x.shape and src.shape == (k,)):
                raise InvalidProblemError(op, "source", f"shape {want} (input's with dim {dim} of size "
                                          f"index.numel() = {k})", tuple(src.shape))
        if op == "index_add" and not x.dtype.is_floating and not float(attrs["alpha"]).is_integer():
            raise InvalidProblemError(op, "alpha", f"an integer for the integral input dtype {x.dtype}",
                                      attrs["alpha"])
        if op == "index_fill" and attrs["value"] is not None and not x.dtype.is_floating \
                and not float(attrs["value"]).is_integer():
            raise InvalidProblemError(op, "value", f"an integer for the integral input dtype {x.dtype}",
                                      attrs["value"])
        out = tuple(rows) if op == "index_select" else x.shape
        return attrs, (TensorSpec(out, x.dtype),)
    return check


def fill_value_operand(op, inputs, attrs):
    """index_fill / masked_fill take the fill value as a number (attribute ``value``) or as a 0-d tensor (a third
    operand, differentiable: torch's Tensor overload); exactly one of them.  Returns the other operands."""
    if len(inputs) == 3:
        v = inputs[2]
        if attrs["value"] is not None:
            raise InvalidProblemError(op, "value", "a number or a 0-d tensor operand, not both", "both")
        if v.shape != ():
            raise InvalidProblemError(op, "value", "a 0-d tensor (or a number)", f"a tensor of shape {v.shape}")
        if v.dtype not in VALUE_TYPES:
            raise UnsupportedError(op, f"argument 'value' has dtype {v.dtype}")
        return inputs[:2]
    if len(inputs) == 2 and attrs["value"] is None:
        raise InvalidProblemError(op, "value", "a number or a 0-d tensor", "neither")
    return inputs


def fill_value_grad(ctx, g, filled):
    """The gradient of a tensor fill value: the sum of the gradient over the filled positions (sum(g - filled), with
    ``filled`` the gradient with those positions zeroed)."""
    return ctx.op("sum", ctx.op("sub", g, filled), dims=None, keepdim=False)


# -- backward rules ----------------------------------------------------------------------------------
def _g_select(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None)
    x = d.inputs[0]
    z = zeros_view(ctx, x.shape, x.dtype)
    return (ctx.op("index_add", z, s["index"], ctx.reshape(g, _src_shape(d)), dim=d.attr("dim")), None)


def _src_shape(d):
    """The shape a source / selected block has (a 0-d input's: the source's own)."""
    x = d.inputs[0]
    if d.op != "index_select" and len(d.inputs) > 2:
        return d.inputs[2].shape
    return d.outputs[0].shape if x.shape else ()


def _select(ctx, d, g, index):
    r = ctx.op("index_select", g, index, dim=d.attr("dim"))
    return ctx.reshape(r, _src_shape(d))


def _g_add(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)
    gs = None
    if ctx.needs[2]:
        gs = _select(ctx, d, g, s["index"])
        if d.attr("alpha") != 1:
            gs = ctx.op("mul_scalar", gs, scalar=d.attr("alpha"))
    return (g, None, gs)


def _g_copy(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)
    gx = ctx.op("index_fill", g, s["index"], dim=d.attr("dim"), value=0.0) if ctx.needs[0] else None
    gs = _select(ctx, d, g, s["index"]) if ctx.needs[2] else None
    return (gx, None, gs)


def _g_fill(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)[:len(d.inputs)]
    gx = ctx.op("index_fill", g, s["index"], dim=d.attr("dim"), value=0.0)
    if len(d.inputs) == 3:
        return (gx, None, fill_value_grad(ctx, g, gx) if ctx.needs[2] else None)
    return (gx, None)


def _g_reduce(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None, None, None)
    gx, gs = ctx.op("index_reduce_backward", g, s["input"], s["index"], s["source"], s["out"], dim=d.attr("dim"),
                    reduce=d.attr("reduce"), include_self=d.attr("include_self"))
    return (gx, None, gs)


# -- torch peers and drop-ins -------------------------------------------------------------------------
def _peer(name):
    def peer(x, index, *rest, dim, **kw):
        import torch

        index = index.long() if index.dtype == torch.int32 else index
        if not x.dim() and rest and rest[0].dim() and name != "index_fill":   # (our 0-d input takes a (1,) source as well)
            rest = (rest[0].reshape(()),)
        if name == "index_reduce":
            return torch.index_reduce(x, dim, index, rest[0], kw["reduce"], include_self=kw["include_self"])
        if name == "index_fill" and not rest:
            return torch.index_fill(x, dim, index, kw["value"])
        if name == "index_fill" and rest:
            return torch.index_fill(x, dim, index, rest[0].to(x.dtype) if rest[0].dtype != x.dtype else rest[0])
        return getattr(torch, name)(x, dim, index, *rest, **kw)
    return peer


def _scalar(name, arg, v):
    """A number (a bool as 0 / 1: torch's Scalar); tensors go through ``value_operands``."""
    return int(v) if isinstance(v, bool) else v


def value_operands(ops: tuple, value):
    """(operands, attrs) of a fill value: a tensor is one more operand (torch's Tensor overload, differentiable),
    a number the ``value`` attribute."""
    import torch

    if isinstance(value, torch.Tensor):
        return ops + (value,), {"value": None}
    return ops, {"value": int(value) if isinstance(value, bool) else value}


def _di_select(input, dim, index, *, out=None):
    no_out("index_select", out)
    return (input, index), {"dim": dim}


def _di_add(input, dim, index, source, *, alpha=1, out=None):
    no_out("index_add", out)
    return (input, index, source), {"dim": dim, "alpha": _scalar("index_add", "alpha", alpha)}


def _di_copy(input, dim, index, source, *, out=None):
    no_out("index_copy", out)
    return (input, index, source), {"dim": dim}


def _di_fill(input, dim, index, value):
    ops, attrs = value_operands((input, index), value)
    return ops, {"dim": dim, **attrs}


def _di_reduce(input, dim, index, source, reduce, *, include_self=True, out=None):
    no_out("index_reduce", out)
    return (input, index, source), {"dim": dim, "reduce": reduce, "include_self": include_self}


# -- samples, errors, workloads -------------------------------------------------------------------------
_CASES = (((5, 4), 0, 7), ((3, 6), 1, 4), ((2, 5, 3), 1, 6), ((2, 5, 3), -1, 2), ((4, 3), 0, 0), ((7,), 0, 3))


def _samples(op):
    d_ = INDEX_DEFS[op]
    def samples(rng):
        for shape, dim, k in _CASES:
            n = shape[dim]
            unique = op in ("index_copy",)
            idx = rng.permutation(n)[:min(k, n)] if unique else rng.integers(0, n, size=k)
            if op == "index_fill" and idx.size:
                idx[0] -= n                   # a negative index: index_fill wraps it (torch)
            idx = idx.astype(np.int64)
            x = rng.standard_normal(shape)
            attrs = {"dim": dim}
            ins = [x, idx]
            if d_.source:
                rows = list(shape)
                rows[dim] = idx.size
                ins.append(rng.standard_normal(rows))
            if op == "index_add":
                attrs["alpha"] = 2 if k % 2 else 1
            if op == "index_fill":
                attrs["value"] = -1.5 if k % 2 else 2
            if op == "index_reduce":
                for j, red in enumerate(REDUCES):
                    yield Sample(tuple(ins), {**attrs, "reduce": red, "include_self": j % 2 == 0},
                                 name=f"{shape}-d{dim}-k{k}-{red}")
                continue
            yield Sample(tuple(ins), attrs, name=f"{shape}-d{dim}-k{k}")
        # int32 indices where torch takes them; a 0-d index; a 0-d input
        if d_.index_types != (DType.i64,):
            ins = [rng.standard_normal((4, 5)), np.array([3, 0, 3], np.int32)]
            if d_.source:
                ins.append(rng.standard_normal((4, 3)))
            extra = {"reduce": "amax"} if op == "index_reduce" else {}
            yield Sample(tuple(ins), {"dim": 1, **extra}, name="i32-index")
        if op == "index_fill":
            yield Sample((rng.standard_normal((4, 3)), np.array([2, 0, 2], np.int64), rng.standard_normal(())),
                         {"dim": 0}, name="tensor-value")
        ins = [rng.standard_normal((3, 4)), np.array(2, np.int64)]
        if d_.source:
            ins.append(rng.standard_normal((1, 4)))
        extra = {"reduce": "prod"} if op == "index_reduce" else {"value": 3} if op == "index_fill" else {}
        yield Sample(tuple(ins), {"dim": 0, **extra}, name="0d-index")
    return samples


def _errors(op):
    d_ = INDEX_DEFS[op]
    def errors():
        src = (((2, 4), "f32"),) if d_.source else ()
        extra = {"reduce": "mean"} if op == "index_reduce" else {"value": 1.0} if op == "index_fill" else {}
        ok = (((3, 4), "f32"), ((2,), "i64")) + src
        yield ErrorCase(ok, {"dim": 2, **extra}, InvalidProblemError, rf"{op}: argument 'dim'", "bad-dim")
        yield ErrorCase((((3, 4), "f32"), ((2, 1), "i64")) + src, {"dim": 0, **extra}, InvalidProblemError,
                        rf"{op}: argument 'index': expected a 1-D or 0-d", "2d-index")
        yield ErrorCase((((3, 4), "f32"), ((2,), "f32")) + src, {"dim": 0, **extra}, DTypeMismatchError,
                        rf"{op}: argument 'index': expected dtype", "float-index")
        if d_.index_types == (DType.i64,):
            yield ErrorCase((((3, 4), "f32"), ((2,), "i32")) + src, {"dim": 0, **extra}, DTypeMismatchError,
                            rf"{op}: argument 'index': expected dtype i64", "i32-index")
        if d_.source:
            yield ErrorCase((((3, 4), "f32"), ((2,), "i64"), ((3, 4), "f32")), {"dim": 0, **extra},
                            InvalidProblemError, rf"{op}: argument 'source': expected shape \(2, 4\)", "src-shape")
            yield ErrorCase((((3, 4), "f32"), ((2,), "i64"), ((2, 4), "f16")), {"dim": 0, **extra},
                            DTypeMismatchError, rf"{op}: argument 'source': expected dtype", "src-dtype")
        if op == "index_reduce":
            yield ErrorCase(ok, {"dim": 0, "reduce": "sum"}, InvalidProblemError, r"argument 'reduce'", "bad-reduce")
        if op == "index_add":
            yield ErrorCase((((3, 4), "i32"), ((2,), "i64"), ((2, 4), "i32")), {"dim": 0, "alpha": 0.5},
                            InvalidProblemError, r"index_add: argument 'alpha': expected an integer", "float-alpha")
    return errors


def _tol(op):
    def tol(dt):
        # data movement is exact; index_add / index_reduce combine in the dtype's accumulator (f32 for halves,
        # rounded once) in an order that may differ from the f64 reference: a few ulps of the row's magnitude
        if op in ("index_add", "index_reduce") and dt == DType.f32:
            return 1e-5, 1e-5
        return default_tol(dt) if op in ("index_add", "index_reduce") else (0.0, 0.0)
    return tol


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 0


def _workloads(op):
    if op == "index_select":
        # the row: rows of 4096 bf16 gathered from a [65536, 4096] table by 16384 indices (128 MiB out)
        return (Workload("index_select-rows-[65536,4096]-bf16-16384", ((65536, 4096), ((16384,), DType.i64)),
                         DType.bf16, {"dim": 0}, backward=True),)
    if op == "index_add":
        # the row: 16M source rows of 64 f32 added into 1M destination rows
        return (Workload("index_add-[1048576,64]-f32-16M", ((1 << 20, 64), ((1 << 24,), DType.i64), (1 << 24, 64)),
                         DType.f32, {"dim": 0}),
                Workload("index_add-det-[1048576,64]-f32-16M", ((1 << 20, 64), ((1 << 24,), DType.i64), (1 << 24, 64)),
                         DType.f32, {"dim": 0}, pref={"require_deterministic": True}))
    return ()


def _bench_inputs(desc, device, gen):
    """In-range indices (random integers over the dtype would be out of range)."""
    import torch

    kw = dict(generator=gen, device=gen.device)
    x = desc.inputs[0]
    n = x.shape[desc.attr("dim")] if x.shape else 1
    out = [torch.randn(x.shape, **kw).to(x.dtype.torch).to(device),
           torch.randint(0, max(n, 1), desc.inputs[1].shape, **kw).to(desc.inputs[1].dtype.torch).to(device)]
    for t in desc.inputs[2:]:
        out.append(torch.randn(t.shape, **kw).to(t.dtype.torch).to(device))
    return out


_DIM = Attr("dim", "axis", expected="an int (the indexed dim)")
INDEX_DEFS: dict[str, IndexDef] = {d.name: d for d in [
    IndexDef("index_select", False, INDEX_TYPES, False, VALUE_TYPES, _g_select),
    IndexDef("index_add", True, INDEX_TYPES, False, VALUE_TYPES, _g_add, (Attr("alpha", "number", 1),)),
    IndexDef("index_copy", True, (DType.i64,), False, VALUE_TYPES, _g_copy),
    IndexDef("index_fill", False, (DType.i64,), True, VALUE_TYPES, _g_fill,
             (Attr("value", "number", None, optional=True),)),
    IndexDef("index_reduce", True, INDEX_TYPES, False, FLOAT_TYPES + INT_VALUES, _g_reduce,
             (Attr("reduce", "str", choices=REDUCES), Attr("include_self", "bool", True)),
             saves=("inputs", "outputs")),
]}
INDEX_OPS = tuple(INDEX_DEFS)
_DROPINS = {"index_select": _di_select, "index_add": _di_add, "index_copy": _di_copy, "index_fill": _di_fill,
            "index_reduce": _di_reduce}

for _d in INDEX_DEFS.values():
    register_spec(OpSpec(
        name=_d.name, family="indexing",
        arg_names=("input", "index", "source") if _d.source else ("input", "index", "value") if _d.name == "index_fill"
        else ("input", "index"),
        check=_make_check(_d.name), dtypes=_d.dtypes, attrs=(_DIM,) + _d.extra, torch_peer=_peer(_d.name),
        torch_name=f"torch.{_d.name}", dropin=_DROPINS[_d.name], jax_name=None, grad=_d.grad, saves=_d.saves,
        differentiable=(0, 2) if _d.source or _d.name == "index_fill" else (0,), samples=_samples(_d.name), errors=_errors(_d.name),
        tol=_tol(_d.name), workloads=_workloads(_d.name), cost=_cost, category="indexing",
        # index_select's gradient sums the gradient rows of repeated indices (index_add): a reduction's tolerance
        grad_tol=_tol("index_add") if _d.name == "index_select" else None,
        doc=f"torch.{_d.name}: see the module docstring of baracuda.ops.indexing_index."))
    set_bench_inputs(_d.name, _bench_inputs)
del _d


def index_reduce_np(x, idx, src, dim, reduce, include_self):
    """index_reduce in float64 NumPy (the reference backend's body; the backward samples' saved output)."""
    x3 = np.asarray(x, np.float64).reshape(dim_geometry(np.shape(x), dim))
    s3 = np.asarray(src, np.float64).reshape(x3.shape[0], -1, x3.shape[2])
    idx = np.asarray(idx).reshape(-1)
    out = x3.copy()
    for n in range(x3.shape[1]):
        ks = np.nonzero(idx == n)[0]
        if ks.size == 0:
            continue
        vals = s3[:, ks, :]
        if include_self:
            vals = np.concatenate([x3[:, n:n + 1, :], vals], axis=1)
        with np.errstate(all="ignore"):
            out[:, n, :] = {"prod": np.prod, "mean": np.mean, "amax": np.max, "amin": np.min}[reduce](vals, axis=1)
    return out.reshape(np.shape(x))


# -- index_reduce_backward ---------------------------------------------------------------------------
def _check_reduce_bw(inputs, attrs):
    op = "index_reduce_backward"
    names = ("grad", "input", "index", "source", "out")
    if len(inputs) != 5:
        raise InvalidProblemError(op, "inputs", "5 operands (grad, input, index, source, out)", len(inputs))
    g, x, index, src, out = inputs
    fw_attrs = {k: attrs[k] for k in ("dim", "reduce", "include_self")}
    _, (o,) = _make_check("index_reduce")((x, index, src), fw_attrs)
    if x.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the gradient is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")
    for n, t in (("grad", g), ("out", out)):
        if t.shape != o.shape or t.dtype != o.dtype:
            raise InvalidProblemError(op, n, f"{o} (the forward's output)", str(t))
    return attrs, (TensorSpec(x.shape, x.dtype), TensorSpec(src.shape, src.dtype))


def _peer_reduce_bw(g, x, index, src, out, dim, reduce, include_self=True):
    import torch

    with torch.enable_grad():
        xx, ss = x.detach().requires_grad_(True), src.detach().requires_grad_(True)
        y = _peer("index_reduce")(xx, index, ss, dim=dim, reduce=reduce, include_self=include_self)
        gx, gs = torch.autograd.grad(y, (xx, ss), g, allow_unused=True)
    return (torch.zeros_like(x) if gx is None else gx, torch.zeros_like(src) if gs is None else gs)


def _reduce_bw_samples(rng):
    for s in _samples("index_reduce")(rng):
        x, idx, src = s.inputs
        a = s.attrs
        out = index_reduce_np(x, idx, src, a["dim"] % max(x.ndim, 1), a["reduce"], a.get("include_self", True))
        yield Sample((rng.standard_normal(out.shape), x, idx, src, out), dict(a), name=s.name)


register_spec(OpSpec(
    name="index_reduce_backward", family="indexing", arg_names=("grad", "input", "index", "source", "out"),
    check=_check_reduce_bw, dtypes=FLOAT_TYPES,
    attrs=(_DIM, Attr("reduce", "str", choices=REDUCES), Attr("include_self", "bool", True)),
    torch_peer=_peer_reduce_bw, torch_name="torch autograd rule of index_reduce", samples=_reduce_bw_samples,
    tol=_tol("index_reduce"), cost=_cost, category="indexing",
    doc="gradient of index_reduce (input, source) as torch's: amax/amin split among ties, prod of the others, mean / count"))

declare_rule_ops(__name__, "full", "sum", "sub", "index_put", "advanced_index", "index_add", "index_select", "index_fill", "mul_scalar", "index_reduce_backward")


# -- index_put / advanced_index ----------------------------------------------------------------------
# index_put(input, indices, values, accumulate=False): out = input; out[indices] = values (+= with accumulate).
# The op takes integer index tensors (int64 / int32) for the leading len(indices) dims, broadcast together to B;
# values broadcast to B + input.shape[len(indices):]; negative indices wrap (torch).  Operands are
# (input, values, indices[0], indices[1], ...): the variadic tail last.  The drop-in turns a bool / uint8 mask index
# into its nonzero() coordinates (a host read of the count, as torch does); None entries (slices) are refused.
# advanced_index(input, *indices) = input[indices] (ATen's index.Tensor, the gradient of index_put's values);
# repeated indices without accumulate: the last value wins (torch on the CPU; unspecified on CUDA).
class PutNames(tuple):
    """arg_names (input, values, indices[0], ...) / (input, indices[0], ...): fixed names, then a variadic tail."""

    def __new__(cls, fixed, tail="indices"):
        self = super().__new__(cls, tuple(fixed) + (tail,))
        self.n_fixed, self.tail = len(fixed), tail
        return self

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self[k] for k in range(*i.indices(1 << 20)))
        return tuple.__getitem__(self, i) if i < self.n_fixed else f"{self.tail}[{i - self.n_fixed}]"

    def __contains__(self, name):
        return tuple.__contains__(self, name) or (isinstance(name, str) and name.startswith(self.tail + "["))

    def index(self, name, *args):
        if isinstance(name, str) and name.startswith(self.tail + "["):
            return self.n_fixed + int(name[len(self.tail) + 1:-1])
        return tuple.index(self, name, *args)


def put_geometry(op, x, idx_specs):
    """(B, rest) of an index_put / advanced_index: the broadcast index shape and the trailing dims."""
    from ._common import broadcast_shapes

    if not idx_specs:
        raise InvalidProblemError(op, "indices", "at least one index tensor", "none")
    if len(idx_specs) > max(len(x.shape), 1 if not x.shape else 0) and not (not x.shape and len(idx_specs) == 1):
        raise InvalidProblemError(op, "indices", f"at most {len(x.shape)} index tensors (input's dims)",
                                  len(idx_specs))
    for j, t in enumerate(idx_specs):
        if t.dtype not in INDEX_TYPES:
            raise DTypeMismatchError(op, f"indices[{j}]", "i64 or i32 (a bool mask: the drop-in's nonzero)", str(t.dtype))
    b = broadcast_shapes(op, [f"indices[{j}]" for j in range(len(idx_specs))], [t.shape for t in idx_specs])
    return b, tuple(x.shape[len(idx_specs):])


def _check_put(inputs, attrs):
    op = "index_put"
    if len(inputs) < 3:
        raise InvalidProblemError(op, "inputs", "input, values and at least one index tensor", len(inputs))
    x, v = inputs[0], inputs[1]
    check_nonneg(op, ("input", "values"), (x.shape, v.shape))
    if x.dtype not in VALUE_TYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; the op is defined for "
                                   f"{', '.join(map(str, VALUE_TYPES))}")
    if v.dtype != x.dtype:
        raise DTypeMismatchError(op, "values", str(x.dtype), str(v.dtype))
    b, rest = put_geometry(op, x, inputs[2:])
    from ._common import broadcast_shapes

    target = b + rest
    if len(v.shape) > len(target) or broadcast_shapes(op, ("indexed", "values"), (target, v.shape)) != target:
        raise InvalidProblemError(op, "values", f"a shape broadcastable to {target} (the indexed shape)", v.shape)
    return attrs, (TensorSpec(x.shape, x.dtype),)


def _check_adv(inputs, attrs):
    op = "advanced_index"
    if len(inputs) < 2:
        raise InvalidProblemError(op, "inputs", "input and at least one index tensor", len(inputs))
    x = inputs[0]
    if x.dtype not in VALUE_TYPES:
        raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}")
    b, rest = put_geometry(op, x, inputs[1:])
    return attrs, (TensorSpec(b + rest, x.dtype),)


def _g_put(ctx, d, grads, s):
    g = grads[0]
    n = len(d.inputs)
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None,) * n
    idx = [s[f"indices[{j}]"] for j in range(n - 2)]
    gx = None
    if ctx.needs[0]:
        v = d.inputs[1]
        gx = g if d.attr("accumulate") else ctx.op("index_put", g, zeros_view(ctx, v.shape, v.dtype), *idx,
                                                    accumulate=False)
    gv = ctx.reduce_to(ctx.op("advanced_index", g, *idx), d.inputs[1].shape) if ctx.needs[1] else None
    return (gx, gv) + (None,) * (n - 2)


def _g_adv(ctx, d, grads, s):
    g = grads[0]
    n = len(d.inputs)
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None,) * n
    idx = [s[f"indices[{j}]"] for j in range(n - 1)]
    x = d.inputs[0]
    return (ctx.op("index_put", zeros_view(ctx, x.shape, x.dtype), g, *idx, accumulate=True),) + (None,) * (n - 1)


def _peer_put(x, values, *indices, accumulate=False):
    import torch

    return torch.index_put(x, tuple(i.long() for i in indices), values, accumulate=accumulate)


def _peer_adv(x, *indices):
    return x[tuple(i.long() for i in indices)]


def host_count(t) -> int:
    """The number of True / nonzero elements of ``t``, read on the host (baracuda's count_nonzero plan under the
    preference in effect: torch's own masked_select and nonzero synchronize the same way)."""
    from .._core.device import as_device
    from .._core.options import current_preference
    from .._core.plan import plan_for
    from .._core.spec import Descriptor

    if t.numel() == 0:
        return 0
    p = plan_for(Descriptor.like("count_nonzero", t), as_device(t.device), current_preference())
    return int(p.run(t).item())


def mask_indices(indices):
    """torch's index tuple with every bool / uint8 mask replaced by its nonzero() coordinates (one index tensor per
    mask dim; a host read of the count, as torch does); None is refused."""
    import torch

    out = []
    for j, t in enumerate(indices):
        if t is None or not isinstance(t, torch.Tensor):
            raise UnsupportedError("index_put", f"indices[{j}] is {type(t).__name__}: only index tensors "
                                   "(no None / slices) are supported by the drop-in")
        if t.dtype in (torch.bool, torch.uint8):
            from .._core.device import as_device
            from .._core.options import current_preference
            from .._core.plan import plan_for
            from .._core.spec import Descriptor

            d = Descriptor.like("nonzero", t, count=host_count(t), as_tuple=True)
            res = plan_for(d, as_device(t.device), current_preference()).run(t)
            out.extend(res if isinstance(res, tuple) else (res,))
        else:
            out.append(t)
    return tuple(out)


def _di_put(input, indices, values, accumulate=False):
    if not isinstance(indices, (tuple, list)):
        raise UnsupportedError("index_put", "indices must be a tuple or list of tensors")
    return (input, values) + mask_indices(indices), {"accumulate": accumulate}


def _put_samples(op):
    def samples(rng):
        cases = (((5, 4), [(3,)], False), ((5, 4), [(2, 3), (3,)], True), ((4, 3, 2), [(4,), (1,)], False),
                 ((6,), [(7,)], True), ((3, 4), [(2, 1)], True))
        for shape, ishapes, acc in cases:
            x = rng.standard_normal(shape)
            idx = [rng.integers(-shape[j], shape[j], size=s).astype(np.int64) for j, s in enumerate(ishapes)]
            if op == "index_put" and not acc:   # distinct destinations: the result does not depend on the order
                total = int(np.prod(np.broadcast_shapes(*ishapes)))
                flat = rng.permutation(int(np.prod(shape[:len(ishapes)])))[:total]
                idx = [np.broadcast_to(c.reshape(-1)[:total].reshape(np.broadcast_shapes(*ishapes)), np.broadcast_shapes(*ishapes)).copy()
                       for c in np.unravel_index(flat, shape[:len(ishapes)])]
            b = np.broadcast_shapes(*[i.shape for i in idx])
            target = b + tuple(shape[len(idx):])
            if op == "index_put":
                v = rng.standard_normal(target[1:] if acc and len(target) > 1 else target)
                yield Sample((x, v) + tuple(idx), {"accumulate": acc}, name=f"{shape}-{ishapes}-acc{acc}")
            else:
                yield Sample((x,) + tuple(idx), {}, name=f"{shape}-{ishapes}")
        yield Sample((rng.standard_normal((4, 3)),) + ((rng.standard_normal((3,)),) if op == "index_put" else ())
                     + (np.array([1, 3], np.int32),), {"accumulate": True} if op == "index_put" else {},
                     name="i32-index")
    return samples


def _put_errors(op):
    def errors():
        v = (((2, 4), "f32"),) if op == "index_put" else ()
        yield ErrorCase((((3, 4), "f32"),) + v + (((2,), "f32"),), {}, DTypeMismatchError,
                        rf"{op}: argument 'indices\[0\]': expected dtype i64 or i32", "float-index")
        yield ErrorCase((((3, 4), "f32"),) + v + (((2,), "i64"), ((3,), "i64")), {}, InvalidProblemError,
                        rf"{op}: argument 'indices\[1\]'", "bad-broadcast")
        yield ErrorCase((((3, 4), "f32"),) + v + (((2,), "i64"),) * 3, {}, InvalidProblemError,
                        rf"{op}: argument 'indices': expected at most 2", "too-many")
        if op == "index_put":
            yield ErrorCase((((3, 4), "f32"), ((3, 4), "f32"), ((2,), "i64")), {}, InvalidProblemError,
                            r"index_put: argument 'values': expected a shape broadcastable", "values-shape")
            yield ErrorCase((((3, 4), "f32"), ((2, 4), "f16"), ((2,), "i64")), {}, DTypeMismatchError,
                            r"index_put: argument 'values': expected dtype f32", "values-dtype")
    return errors


def _put_tol(dt):
    # index_put with accumulate sums repeated destinations (in f32 for halves, f64 for f64): a reduction's tolerance
    return (1e-5, 1e-5) if dt == DType.f32 else default_tol(dt)


register_spec(OpSpec(
    name="index_put", family="indexing", arg_names=PutNames(("input", "values")), check=_check_put,
    dtypes=VALUE_TYPES, attrs=(Attr("accumulate", "bool", False),), torch_peer=_peer_put, torch_name="torch.index_put",
    dropin=_di_put, grad=_g_put, saves=lambda d: tuple(f"indices[{j}]" for j in range(len(d.inputs) - 2)),
    differentiable=(0, 1), samples=_put_samples("index_put"), errors=_put_errors("index_put"), tol=_put_tol,
    cost=_cost, category="indexing", doc="torch.index_put: see the comment above its spec in baracuda.ops.indexing_index."))
register_spec(OpSpec(
    name="advanced_index", family="indexing", arg_names=PutNames(("input",)), check=_check_adv, dtypes=VALUE_TYPES,
    attrs=(), torch_peer=_peer_adv, torch_name="torch.Tensor.__getitem__ (integer index tensors)", grad=_g_adv,
    saves=lambda d: tuple(f"indices[{j}]" for j in range(len(d.inputs) - 1)), differentiable=(0,),
    samples=_put_samples("advanced_index"), errors=_put_errors("advanced_index"), tol=lambda dt: (0.0, 0.0),
    grad_tol=_put_tol, cost=_cost, category="indexing",
    doc="input[indices] for integer index tensors on the leading dims (ATen's index.Tensor)"))
