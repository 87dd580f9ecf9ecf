"""Segment reductions (issue 17, item 3): JAX's ``jax.ops.segment_sum / segment_prod / segment_max / segment_min``
plus ``segment_mean``, forward and backward.

segment_<r>(data [*ids.shape, *rest], segment_ids [*ids.shape] int32/int64; num_segments, indices_are_sorted,
            unique_indices) -> out [num_segments, *rest]
  out[s] = reduce over every position p with segment_ids[p] == s of data[p]; ``segment_ids`` is a prefix of
  data's shape (usually data's first dimension), flattened.

Semantics (JAX's, decided where JAX leaves a choice):
* ``num_segments`` is REQUIRED: the output's shape must be known from shapes alone (a plan is built before any
  value is read).  JAX's default ``max(segment_ids) + 1`` reads the data: pass it explicitly.
* Segment ids outside [0, num_segments) are DROPPED (JAX's scatter with mode='drop'): they contribute nothing
  and are not an error; no kernel reads or writes out of bounds for them.
* An empty segment holds the reduction's identity: 0 (sum, mean), 1 (prod), -inf / the dtype's minimum (max),
  +inf / the dtype's maximum (min), as JAX.  ``segment_mean`` (not in JAX) is segment_sum / max(count, 1)
  (torch_scatter's scatter_mean: an empty segment is 0).
* NaN propagates through sum / mean / prod; max / min follow ``jnp.maximum`` (NaN wins).
* ``indices_are_sorted=True`` promises ascending ids: the GPU plan then skips its sort (the results for an
  unsorted input are unspecified, as JAX's).  ``unique_indices`` is a hint that changes no result.
* Integer data sums / products wrap in the data's dtype (JAX); mean of integers truncates toward zero.

Gradients (``segment_backward``, one fused op for the five reductions, fed the forward's data and output):
* sum:  dx_p = g[id_p];  mean: g[id_p] / count(id_p)
* max / min: the gradient of a segment is shared equally by the positions that reach its extreme
  (dx_p = g[id_p] * [x_p == out[id_p]] / ties(id_p)) — JAX's scatter_max rule, and torch's scatter_reduce amax.
* prod: dx_p = g[id_p] * (product of the segment's other elements), exact with zeros (no division by x_p):
  out / x_p where the segment has no zero, the product of its non-zeros at its single zero, 0 otherwise.
  (JAX only differentiates segment_prod for unique_indices=True; this covers every case.)
* dropped positions (out-of-range ids) get a zero gradient.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec, set_bench_inputs

__all__ = ["SEGMENT_REDUCTIONS", "SEGMENT_TYPES", "INDEX_TYPES", "segment_geometry", "identity_of"]

SEGMENT_REDUCTIONS = ("sum", "mean", "prod", "max", "min")
INDEX_TYPES = (DType.i64, DType.i32)
SEGMENT_TYPES = FLOAT_TYPES + (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)

_COMMON = (Attr("num_segments", "int", ge=0, expected="an int >= 0 (required: the output has num_segments rows)"),
           Attr("indices_are_sorted", "bool", False), Attr("unique_indices", "bool", False))


def identity_of(reduction: str, dtype: DType):
    """The value of an empty segment (JAX's scatter identities)."""
    if reduction in ("sum", "mean"):
        return 0
    if reduction == "prod":
        return 1
    if dtype.is_floating:
        return -math.inf if reduction == "max" else math.inf
    info = np.iinfo(dtype.numpy)
    return int(info.min) if reduction == "max" else int(info.max)


def segment_geometry(data: TensorSpec, ids: TensorSpec) -> tuple[int, int]:
    """(N positions, D elements per position) of a segment op's data."""
    k = len(ids.shape)
    return math.prod(data.shape[:k]), math.prod(data.shape[k:])


def _check_ids(op, data, ids):
    if ids.dtype not in INDEX_TYPES:
        raise DTypeMismatchError(op, "segment_ids", "int64 or int32 segment ids", str(ids.dtype))
    if tuple(data.shape[:len(ids.shape)]) != tuple(ids.shape) or len(ids.shape) == 0:
        raise InvalidProblemError(op, "segment_ids", f"a shape of >= 1 dims that prefixes data's {data.shape}",
                                  ids.shape)


def _make_check(op):
    def check(inputs, attrs):
        if len(inputs) != 2:
            raise InvalidProblemError(op, "inputs", "2 operands (data, segment_ids)", len(inputs))
        data, ids = inputs
        if data.dtype not in SEGMENT_TYPES:
            raise UnsupportedError(op, f"argument 'data' has dtype {data.dtype}; the op is defined for "
                                   f"{', '.join(map(str, SEGMENT_TYPES))}")
        _check_ids(op, data, ids)
        rest = data.shape[len(ids.shape):]
        return attrs, (TensorSpec((attrs["num_segments"],) + tuple(rest), data.dtype),)
    return check


def _check_bw(inputs, attrs):
    op = "segment_backward"
    if len(inputs) != 4:
        raise InvalidProblemError(op, "inputs", "4 operands (grad, data, segment_ids, out)", len(inputs))
    g, data, ids, out = inputs
    if data.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument 'data' has dtype {data.dtype}; the op is defined for "
                               f"{', '.join(map(str, FLOAT_TYPES))}")
    _check_ids(op, data, ids)
    want = (attrs["num_segments"],) + tuple(data.shape[len(ids.shape):])
    for name, t in (("grad", g), ("out", out)):
        if tuple(t.shape) != want:
            raise InvalidProblemError(op, name, f"shape {want} ([num_segments, *data.shape[ids.ndim:]])", t.shape)
        if t.dtype != data.dtype:
            raise DTypeMismatchError(op, name, str(data.dtype), str(t.dtype))
    return attrs, (TensorSpec(data.shape, data.dtype),)


def _grad(reduction):
    def rule(ctx, d, grads, s):
        g = grads[0]
        if g is None or not d.inputs[0].dtype.is_floating:
            return (None, None)
        return (ctx.op("segment_backward", g, s["data"], s["segment_ids"], s["out"], reduction=reduction,
                       num_segments=d.attr("num_segments")), None)
    return rule


def _peer(reduction):
    """torch's scatter_reduce over the kept positions (include_self=False), empty segments set to JAX's identity."""
    def peer(data, ids, num_segments, indices_are_sorted=False, unique_indices=False):
        import torch

        k = ids.dim()
        x = data.reshape((-1,) + tuple(data.shape[k:]))
        i = ids.reshape(-1).long()
        keep = (i >= 0) & (i < num_segments)
        x, i = x[keep], i[keep]
        # torch's amax/amin backward counts self's ties even with include_self=False: start from the identity
        out = torch.full((num_segments,) + tuple(x.shape[1:]), identity_of(reduction, _dt(data.dtype)),
                         dtype=data.dtype, device=data.device)
        idx = i.reshape((-1,) + (1,) * (x.dim() - 1)).expand_as(x)
        red = {"max": "amax", "min": "amin"}.get(reduction, reduction)
        out = out.scatter_reduce(0, idx, x, red, include_self=False)
        cnt = torch.zeros(num_segments, dtype=torch.long, device=data.device).index_add_(0, i, torch.ones_like(i))
        empty = (cnt == 0).reshape((-1,) + (1,) * (x.dim() - 1))
        return torch.where(empty, torch.full_like(out, identity_of(reduction, _dt(data.dtype))), out)
    return peer


def _dt(torch_dtype):
    from .._core.dtypes import as_dtype

    return as_dtype(torch_dtype)


def _peer_bw(g, data, ids, out, reduction, num_segments, indices_are_sorted=False, unique_indices=False):
    import torch

    with torch.enable_grad():
        x = data.detach().requires_grad_(True)
        y = _peer(reduction)(x, ids, num_segments)
        (dx,) = torch.autograd.grad(y, x, g, allow_unused=True)
    return torch.zeros_like(data) if dx is None else dx


# -- samples, errors, tolerances, workloads ---------------------------------------------------------------------
def _ids(rng, n, s, drop=True):
    ids = rng.integers(0, max(s, 1), size=n).astype(np.int64)
    if n >= s + 2:                       # every segment present (max / min: no infinite output in a gradient check)
        ids[:s] = np.arange(s)
        if drop:
            ids[s], ids[s + 1] = s, -1   # out of range: dropped
        ids = rng.permutation(ids)
    return ids


def _fw_samples(reduction):
    def samples(rng):
        yield Sample((rng.standard_normal((9, 3)), _ids(rng, 9, 4)), {"num_segments": 4}, name="9x3-s4")
        yield Sample((rng.standard_normal((7,)), _ids(rng, 7, 3, drop=False)), {"num_segments": 5}, name="7-s5-empty",
                     grad=reduction not in ("max", "min"))
        ids = np.sort(_ids(rng, 12, 5, drop=False))
        yield Sample((rng.standard_normal((12, 2, 3)), ids), {"num_segments": 5, "indices_are_sorted": True},
                     name="12x2x3-sorted")
        yield Sample((rng.standard_normal((3, 4, 5)), _ids(rng, 12, 6).reshape(3, 4).astype(np.int32)),
                     {"num_segments": 6}, name="3x4x5-2d-ids-i32")
        yield Sample((rng.standard_normal((6, 3)), np.arange(6)[::-1].copy()), {"num_segments": 6, "unique_indices": True},
                     name="6x3-unique")
        yield Sample((rng.standard_normal((0, 3)), np.zeros(0, np.int64)), {"num_segments": 3}, name="empty-data",
                     grad=False)
        yield Sample((rng.standard_normal((5, 2)), _ids(rng, 5, 2)), {"num_segments": 0}, name="zero-segments",
                     grad=False)
        if reduction in ("max", "min"):   # ties (integer-valued data): the gradient is shared
            x = rng.integers(-1, 2, size=(10, 2)).astype(np.float64)
            yield Sample((x, _ids(rng, 10, 3, drop=False)), {"num_segments": 3}, name="ties", grad=False)
        if reduction == "prod":           # zeros: one and two per segment
            x = rng.standard_normal((10, 2))
            ids = np.array([0, 0, 0, 1, 1, 1, 2, 2, 3, 3])
            x[0, 0] = x[3, 1] = x[4, 1] = x[6, 0] = 0.0
            yield Sample((x, ids), {"num_segments": 4}, name="zeros")
    return samples


def _bw_samples(rng):
    for red in SEGMENT_REDUCTIONS:
        for s in _fw_samples(red)(rng):
            data, ids = s.inputs
            out = _np_segment(red, data, ids, s.attrs["num_segments"])
            g = rng.standard_normal(out.shape)
            yield Sample((g, data, ids, out), dict(s.attrs, reduction=red), name=f"{red}-{s.name}", grad=False)


def _np_segment(red, data, ids, ns):
    """The float64 forward (NumPy): used by the backward's samples and the reference backend."""
    k = ids.ndim
    x = np.asarray(data).reshape((-1,) + data.shape[k:])
    i = np.asarray(ids).reshape(-1).astype(np.int64)
    floating = x.dtype.kind == "f"
    out = np.full((ns,) + x.shape[1:], identity_of(red, DType.f64 if floating else _np_dt(x.dtype)),
                  dtype=np.float64 if floating else x.dtype)
    acc = np.float64 if floating else np.int64
    for s in range(ns):
        sel = x[i == s]
        if not len(sel):
            continue
        if red in ("sum", "mean"):
            v = sel.astype(acc).sum(0)
            if red == "mean":
                v = v / len(sel) if floating else np.trunc(v / len(sel)).astype(np.int64)
        elif red == "prod":
            v = sel.astype(acc).prod(0)
        else:
            fn = np.max if red == "max" else np.min
            v = fn(sel, 0)          # NaN propagates (jnp.maximum)
        out[s] = v.astype(out.dtype) if not floating else v
    return out


def _np_dt(npdt):
    from .._core.dtypes import as_dtype

    return as_dtype(npdt)


def _errors(op):
    def errors():
        d, i = ((6, 3), "f32"), ((6,), "i64")
        yield ErrorCase((d, i), {}, InvalidProblemError, rf"{op}: argument 'num_segments'", "no-num-segments")
        yield ErrorCase((d, i), {"num_segments": -1}, InvalidProblemError, r"argument 'num_segments'", "negative")
        yield ErrorCase((d, i), {"num_segments": 2.0}, InvalidProblemError, r"argument 'num_segments'", "float")
        yield ErrorCase((d, ((6,), "f32")), {"num_segments": 3}, DTypeMismatchError, r"argument 'segment_ids'",
                        "float-ids")
        yield ErrorCase((d, ((5,), "i64")), {"num_segments": 3}, InvalidProblemError,
                        r"argument 'segment_ids': expected a shape", "ids-shape")
        yield ErrorCase((((6, 3), "c64"), i), {"num_segments": 3}, UnsupportedError, r"argument 'data' has dtype c64",
                        "complex")
        yield ErrorCase((d, i), {"num_segments": 3, "bogus": 1}, InvalidProblemError, r"argument 'bogus'", "attr")
    return errors


def _bw_errors():
    g, d, i = ((3, 2), "f32"), ((6, 2), "f32"), ((6,), "i64")
    a = {"num_segments": 3, "reduction": "sum"}
    yield ErrorCase((g, d, i, ((4, 2), "f32")), a, InvalidProblemError, r"argument 'out': expected shape", "out-shape")
    yield ErrorCase((g, d, i, ((3, 2), "f16")), a, DTypeMismatchError, r"argument 'out'", "out-dtype")
    yield ErrorCase((g, d, i, g), dict(a, reduction="median"), InvalidProblemError, r"argument 'reduction'", "red")
    yield ErrorCase((g, ((6, 2), "i32"), i, g), a, UnsupportedError, r"argument 'data' has dtype i32", "int")


def _tol(dt):
    # sum / mean / prod accumulate in f32 (f64 for f64) and round once; the samples' segments hold <= 12 terms
    # of |x| ~ 1: f32 within 1e-5; half types: the default (one rounding of the output dtype)
    if dt == DType.f32:
        return 1e-5, 1e-5
    if dt == DType.f64:
        return 1e-10, 1e-10
    return default_tol(dt)


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), desc.inputs[0].numel


_JAX = {"sum": "jax.ops.segment_sum", "prod": "jax.ops.segment_prod", "max": "jax.ops.segment_max",
        "min": "jax.ops.segment_min", "mean": None}

SPECS = {}
for _r in SEGMENT_REDUCTIONS:
    _op = f"segment_{_r}"
    _wl = ()
    if _r == "sum":
        # issue 17's table: 16M rows x 64 f32 into 1M segments (unsorted ids: the atomic plan; sorted: segmented)
        _wl = (Workload("segment_sum-16Mx64-f32", ((1 << 24, 64), ((1 << 24,), DType.i64)), DType.f32,
                        {"num_segments": 1 << 20}, backward=True),
               Workload("segment_sum-16Mx64-f32-sorted", ((1 << 24, 64), ((1 << 24,), DType.i64)), DType.f32,
                        {"num_segments": 1 << 20, "indices_are_sorted": True}))
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="segment", arg_names=("data", "segment_ids"), check=_make_check(_op), dtypes=SEGMENT_TYPES,
        attrs=_COMMON, torch_peer=_peer(_r), jax_name=_JAX[_r], grad=_grad(_r), saves=("data", "segment_ids", "out"),
        differentiable=(0,), samples=_fw_samples(_r), errors=_errors(_op), tol=_tol, workloads=_wl, cost=_cost,
        category="segment",
        doc=f"JAX segment_{_r}: reduce data's rows by segment id into num_segments rows (out-of-range ids dropped, "
            f"empty segments = {identity_of(_r, DType.f32)}); see the module docstring."))

SPECS["segment_backward"] = register_spec(OpSpec(
    name="segment_backward", family="segment", arg_names=("grad", "data", "segment_ids", "out"), check=_check_bw,
    dtypes=FLOAT_TYPES, attrs=(Attr("reduction", "str", choices=SEGMENT_REDUCTIONS),) + _COMMON, torch_peer=_peer_bw,
    torch_name="torch autograd rule of scatter_reduce", samples=_bw_samples, errors=_bw_errors, tol=_tol,
    cost=_cost, category="segment",
    workloads=(Workload("segment_backward-sum-16Mx64-f32", (((1 << 20, 64)), (1 << 24, 64), ((1 << 24,), DType.i64),
                                                             (1 << 20, 64)), DType.f32,
                        {"num_segments": 1 << 20, "reduction": "sum"}),),
    doc="gradient of segment_<reduction> w.r.t. data from the saved data and output (see the module docstring)."))


def _set_bench_inputs():
    def maker(desc, device, gen):
        import torch

        kw = dict(generator=gen, device=gen.device)
        ns = desc.attr("num_segments")
        ids_pos = 1 if desc.op != "segment_backward" else 2
        ins = []
        for j, t in enumerate(desc.inputs):
            if j == ids_pos:
                ids = torch.randint(0, max(ns, 1), t.shape, **kw)
                if desc.attr("indices_are_sorted"):
                    ids = ids.reshape(-1).sort().values.reshape(t.shape)
                ins.append(ids.to(t.dtype.torch).to(device))
            else:
                ins.append(torch.randn(t.shape, **kw).to(t.dtype.torch).to(device))
        return ins

    for op in SPECS:
        set_bench_inputs(op, maker)


_set_bench_inputs()
del _r, _op, _wl

declare_rule_ops(__name__, "segment_backward")
