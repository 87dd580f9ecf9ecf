"""Order statistics (issue 17, item 4): kthvalue, median, nanmedian, quantile, nanquantile, and the fused
``quantile_backward``.  All of them are functions of the stable sorted row (ops/sort.py's order: NaN largest).

Semantics follow torch:
* kthvalue(x, k, dim=-1, keepdim=False) -> (values, int64 indices): the k-th smallest (1-based); NaN is the
  largest value, so a row with NaNs gives NaN only when k exceeds its non-NaN count.
* median(x) -> the lower of the two middles of the flattened input (NaN if any NaN; an empty input -> NaN);
  median(x, dim, keepdim) -> (values, indices); a row with a NaN gives NaN and the index of its first NaN.
  nanmedian ignores NaNs (the lower middle of the non-NaN values; an all-NaN row gives NaN at index 0's NaN).
  Ties: the index of the stable sort (the first equal position in input order).
* quantile(x, q, dim=None, keepdim=False, interpolation='linear'): q a float or a sequence of floats in
  [0, 1] (torch's 0-d / 1-d tensor q; a sequence puts a leading dim of len(q) on the output).  The rank
  q * (n - 1) is computed in the input's dtype, as torch does, then floor / ceil / round-half-even
  (lower / higher / nearest) or interpolated between the neighbours (linear: weight rank - floor, with
  torch's lerp; midpoint: weight 0.5).  A row with a NaN gives NaN; nanquantile uses the non-NaN count
  (an all-NaN row gives NaN).  dim=None reduces the flattened input.  f32 / f64 only (as torch).
* Gradients: kthvalue / median(dim) / nanmedian(dim): grad to the selected index (value_select_backward);
  median() / nanmedian() without dim: split evenly among the elements equal to the result (torch's
  evenly_distribute_backward, amax_backward with nan=True); quantile: (1 - w) * grad to the lower and w * grad
  to the upper neighbour's input position (``quantile_backward``, torch's derivative of its sort + lerp).
"""
from __future__ import annotations

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .reduction import reduced_shape
from .sort import TOPK_TYPES, one_operand, sort_dims
from ._common import no_out

__all__ = ["QUANTILE_TYPES", "INTERPOLATIONS", "quantile_shape", "quantile_qs"]

QUANTILE_TYPES = (DType.f32, DType.f64)
INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")
_KEEPDIM = Attr("keepdim", "bool", False)


def _norm_q(op, q, inputs, attrs):
    """q: a real number or a non-empty sequence of them, each in [0, 1] -> float or tuple of floats."""
    scalar = isinstance(q, (int, float, np.integer, np.floating)) and not isinstance(q, (bool, np.bool_))
    vals = (q,) if scalar else q
    if not isinstance(vals, (tuple, list)) or any(
            isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer, np.floating)) for v in vals):
        raise InvalidProblemError(op, "q", "a float or a sequence of floats in [0, 1]", q)
    vals = tuple(float(v) for v in vals)
    if any(not 0.0 <= v <= 1.0 for v in vals):
        raise InvalidProblemError(op, "q", "values in the range [0, 1]", q)
    return vals[0] if scalar else vals


def quantile_qs(q) -> tuple[float, ...]:
    """q (a float or a tuple) as a tuple."""
    return q if isinstance(q, tuple) else (q,)


def quantile_shape(shape, attrs) -> tuple[int, ...]:
    """The output shape of quantile: (len(q),) if q is a sequence, then x reduced over dim (None: all)."""
    dim = attrs["dim"]
    dims = tuple(range(len(shape))) if dim is None else ((dim,) if shape else ())
    out = reduced_shape(tuple(shape), dims, attrs["keepdim"])
    return ((len(attrs["q"]),) if isinstance(attrs["q"], tuple) else ()) + out


# -- shape / dtype rules ------------------------------------------------------------------------------
_one = one_operand


def _selected(op, x, attrs):
    dim = attrs["dim"]
    shape = reduced_shape(x.shape, (dim,) if x.shape else (), attrs["keepdim"])
    return attrs, (TensorSpec(shape, x.dtype), TensorSpec(shape, DType.i64))


def _check_kth(inputs, attrs):
    x = _one("kthvalue", inputs)
    n, k = sort_dims(x.shape, attrs["dim"]), attrs["k"]
    if not 1 <= k <= n:
        raise InvalidProblemError("kthvalue", "k", f"an int in [1, {n}] (the size of dim {attrs['dim']})", k)
    return _selected("kthvalue", x, attrs)


def _check_median(op):
    def check(inputs, attrs):
        x = _one(op, inputs)
        if attrs["dim"] is None:
            shape = (1,) * len(x.shape) if attrs["keepdim"] else ()
            return attrs, (TensorSpec(shape, x.dtype),)
        if x.shape and sort_dims(x.shape, attrs["dim"]) == 0:
            raise InvalidProblemError(op, "x", f"a non-zero size along dim {attrs['dim']}", x.shape)
        return _selected(op, x, attrs)
    return check


def _check_quantile(op):
    def check(inputs, attrs):
        x = _one(op, inputs)
        if x.numel == 0:
            raise InvalidProblemError(op, "x", "a non-empty tensor", x.shape)
        return attrs, (TensorSpec(quantile_shape(x.shape, attrs), x.dtype),)
    return check


def _check_quantile_bw(inputs, attrs):
    op = "quantile_backward"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (grad, x)", len(inputs))
    g, x = inputs
    if x.dtype not in QUANTILE_TYPES:
        raise UnsupportedError(op, f"argument 'x' has dtype {x.dtype}; the op is defined for f32, f64")
    _check_quantile("quantile")((x,), dict(attrs))
    want = quantile_shape(x.shape, attrs)
    if g.shape != want or g.dtype != x.dtype:
        raise InvalidProblemError(op, "grad", f"shape {want} and dtype {x.dtype} (quantile's output)",
                                  f"{g.shape} {g.dtype}")
    return attrs, (TensorSpec(x.shape, x.dtype),)


# -- backward rules ----------------------------------------------------------------------------------------
def _g_select(ctx, d, grads, s):
    x = d.inputs[0]
    if grads[0] is None or not x.dtype.is_floating:
        return (None,)
    if d.attr("dim") is None:   # median() / nanmedian(): torch's evenly_distribute_backward
        return (ctx.op("amax_backward", grads[0], s["x"], s["out"], dims=None, keepdim=d.attr("keepdim"), nan=True),)
    return (ctx.op("value_select_backward", grads[0], s["out1"], shape=x.shape, dim=d.attr("dim"),
                   keepdim=d.attr("keepdim")),)


def _saves_select(desc):
    return ("inputs", "outputs") if desc.attr("dim") is None else ("out1",)


def _g_quantile(ctx, d, grads, s):
    if grads[0] is None:
        return (None,)
    a = {k: d.attr(k) for k in ("q", "dim", "keepdim", "interpolation")}
    return (ctx.op("quantile_backward", grads[0], s["x"], ignore_nan=d.op == "nanquantile", **a),)


# -- torch peers and drop-in adapters ---------------------------------------------------------------------
def _peer_kth(x, k, dim=-1, keepdim=False):
    import torch

    # torch's kthvalue picks any of the tied positions; the peer is the stable sort's k-th
    v, i = torch.sort(x, dim=dim, stable=True)
    v, i = (v, i) if x.dim() == 0 else (v.narrow(dim, k - 1, 1), i.narrow(dim, k - 1, 1))
    return (v, i) if keepdim or x.dim() == 0 else (v.squeeze(dim), i.squeeze(dim))


def _peer_median(fn):
    def peer(x, dim=None, keepdim=False):
        import torch

        f = getattr(torch, fn)
        if dim is None:
            r = f(x)
            return r.reshape([1] * x.dim()) if keepdim else r
        return tuple(f(x, dim, keepdim=keepdim))
    return peer


def _peer_quantile(fn):
    def peer(x, q, dim=None, keepdim=False, interpolation="linear"):
        import torch

        qt = torch.tensor(q, dtype=x.dtype)
        return getattr(torch, fn)(x, qt, dim=dim, keepdim=keepdim, interpolation=interpolation)
    return peer


def _peer_quantile_bw(g, x, q, dim=None, keepdim=False, interpolation="linear", ignore_nan=False):
    import torch

    with torch.enable_grad():
        xx = x.detach().requires_grad_(True)
        y = _peer_quantile("nanquantile" if ignore_nan else "quantile")(xx, q, dim, keepdim, interpolation)
        (dx,) = torch.autograd.grad(y, xx, g)
    return dx


def _dropin_kth(input, k, dim=-1, keepdim=False, *, out=None):
    no_out("kthvalue", out)
    return (input,), {"k": k, "dim": dim, "keepdim": keepdim}


def _dropin_median(name):
    def dropin(input, dim=None, keepdim=False, *, out=None):
        no_out(name, out)
        return (input,), {"dim": dim, "keepdim": keepdim}
    return dropin


def _dropin_quantile(name):
    def dropin(input, q, dim=None, keepdim=False, *, interpolation="linear", out=None):
        import torch

        no_out(name, out)
        if isinstance(q, torch.Tensor):
            if q.dim() > 1:
                raise ValueError(f"{name}() q must be a scalar or 1D tensor")
            if q.dtype != input.dtype:
                raise TypeError(f"{name}() q tensor must be same dtype as the input tensor")
            q = q.item() if q.dim() == 0 else tuple(q.tolist())     # (a host read of q, as torch's value check)
        return (input,), {"q": q, "dim": dim, "keepdim": keepdim, "interpolation": interpolation}
    return dropin


def _result(kind):
    def result(out):
        import torch

        return out if isinstance(out, torch.Tensor) else getattr(torch.return_types, kind)(out)
    return result


# -- samples, errors, workloads ------------------------------------------------------------------------------
_CASES = [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4), -1), ((2, 3, 4), 1), ((4, 37), -1), ((1,), 0), ((), 0)]


def _distinct(rng, shape):
    n = int(np.prod(shape))
    return rng.permutation(n).reshape(shape) * 0.25 - 0.125 * n


def _ties(rng, shape):
    return rng.integers(-3, 4, size=shape).astype(np.float64)


def _with_nan(rng, all_nan_row=True):
    """NaNs in two rows; an all-NaN row too unless the sample compares indices (torch's index of an all-NaN
    nanmedian row is its selection algorithm's, tests/sort checks the value)."""
    x = rng.standard_normal((4, 9))
    x[0, 2] = x[0, 5] = x[2, 8] = np.nan
    if all_nan_row:
        x[3, :] = np.nan
    return x


def _kth_samples(rng):
    for i, (shape, dim) in enumerate(_CASES):
        n = sort_dims(shape, dim)
        for k in sorted({1, (n + 1) // 2, n}):
            yield Sample((_distinct(rng, shape),), {"k": k, "dim": dim, "keepdim": i % 2 == 1},
                         name=f"{shape}-dim{dim}-k{k}")
        yield Sample((_ties(rng, shape),), {"k": 1, "dim": dim}, name=f"{shape}-dim{dim}-ties", grad=False)
    yield Sample((_with_nan(rng),), {"k": 7, "dim": 1}, name="nan", grad=False)


def _median_samples(rng):
    for i, (shape, dim) in enumerate(_CASES):
        yield Sample((_distinct(rng, shape),), {"dim": dim, "keepdim": i % 2 == 1}, name=f"{shape}-dim{dim}")
        yield Sample((_ties(rng, shape),), {"dim": dim}, name=f"{shape}-dim{dim}-ties", grad=False)
    yield Sample((_distinct(rng, (3, 4)),), {}, name="all-even")
    yield Sample((_distinct(rng, (5, 3)),), {"keepdim": True}, name="all-odd-keepdim")
    yield Sample((_ties(rng, (4, 5)),), {}, name="all-ties")
    yield Sample((np.zeros((0, 3)),), {}, name="all-empty", grad=False)
    yield Sample((_with_nan(rng, False),), {"dim": 1}, name="nan-rows", grad=False)
    yield Sample((_with_nan(rng),), {}, name="nan-all", grad=False)


_QS = [0.5, (0.0, 0.25, 0.5, 1.0), (0.1, 0.9), 0.3]


def _quantile_samples(rng):
    for i, (shape, dim) in enumerate(_CASES[:6]):
        for j, interp in enumerate(INTERPOLATIONS):
            yield Sample((_distinct(rng, shape),), {"q": _QS[(i + j) % 4], "dim": dim, "keepdim": (i + j) % 2 == 1,
                                                    "interpolation": interp}, name=f"{shape}-dim{dim}-{interp}")
    yield Sample((_distinct(rng, (3, 5)),), {"q": (0.2, 0.7)}, name="all-linear")
    yield Sample((_distinct(rng, (3, 5)),), {"q": 0.5, "keepdim": True, "interpolation": "midpoint"},
                 name="all-midpoint-keepdim")
    yield Sample((_ties(rng, (4, 7)),), {"q": (0.25, 0.5), "dim": 1}, name="ties", grad=False)
    for interp in ("linear", "nearest"):
        yield Sample((_with_nan(rng),), {"q": (0.0, 0.4, 1.0), "dim": 1, "interpolation": interp},
                     name=f"nan-{interp}", grad=False)


def _quantile_bw_samples(rng):
    for s in _quantile_samples(rng):
        if not s.grad:
            continue
        (x,) = s.inputs
        a = dict(s.attrs)
        a.setdefault("dim", None)
        a.setdefault("keepdim", False)
        a.setdefault("interpolation", "linear")
        norm = {**a, "dim": None if a["dim"] is None else a["dim"] % max(x.ndim, 1)}
        for nan in (False, True):
            yield Sample((rng.standard_normal(quantile_shape(x.shape, norm)), x), {**a, "ignore_nan": nan},
                         name=f"{s.name}-nan{nan}")


def _errors(op):
    def errors():
        f = ((3, 4), "f32")
        extra = {"k": 1} if op == "kthvalue" else {"q": 0.5} if "quantile" in op else {}
        yield ErrorCase((((3, 4), "c64"),), extra, UnsupportedError, r"dtype c64", "complex-dtype")
        yield ErrorCase((f,), {"dim": 2, **extra}, InvalidProblemError, rf"{op}: argument 'dim'", "bad-dim")
        yield ErrorCase((f,), {"bogus": 1, **extra}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        if op == "kthvalue":
            yield ErrorCase((f,), {"k": 5}, InvalidProblemError, r"kthvalue: argument 'k': expected an int in \[1, 4\]",
                            "k-too-large")
            yield ErrorCase((f,), {"k": 0}, InvalidProblemError, r"kthvalue: argument 'k'", "k-zero")
        if op in ("median", "nanmedian"):
            yield ErrorCase((((3, 0), "f32"),), {"dim": 1}, InvalidProblemError,
                            rf"{op}: argument 'x': expected a non-zero size along dim 1", "empty-dim")
        if "quantile" in op:
            yield ErrorCase((((3, 4), "f16"),), {"q": 0.5}, UnsupportedError, r"dtype f16", "f16")
            yield ErrorCase((f,), {"q": 1.5}, InvalidProblemError, rf"{op}: argument 'q': expected values in the "
                                                                   r"range \[0, 1\]", "q-range")
            yield ErrorCase((f,), {"q": "a"}, InvalidProblemError, rf"{op}: argument 'q'", "q-str")
            yield ErrorCase((f,), {"q": 0.5, "interpolation": "cubic"}, InvalidProblemError,
                            r"argument 'interpolation'", "bad-interpolation")
            yield ErrorCase((((0, 4), "f32"),), {"q": 0.5}, InvalidProblemError, r"expected a non-empty tensor",
                            "empty")
    return errors


def _quantile_bw_errors():
    yield ErrorCase((((3,), "f32"), ((3, 4), "f32")), {"q": 0.5, "dim": 0}, InvalidProblemError,
                    r"quantile_backward: argument 'grad': expected shape \(4,\)", "bad-grad")
    yield ErrorCase((((3,), "f16"), ((3, 4), "f16")), {"q": 0.5, "dim": 1}, UnsupportedError, r"argument 'x'",
                    "f16")


def _cost(desc):
    x = desc.inputs[0]
    return (x.nbytes + sum(t.nbytes for t in desc.outputs), int(x.numel * np.log2(max(x.numel, 2))))


def _workloads(op):
    shp = ((8192, 8192),)
    if op == "kthvalue":
        return (Workload("kthvalue-rows-[8192,8192]-f32", shp, DType.f32, {"k": 100, "dim": -1}, backward=True),)
    if op in ("median", "nanmedian"):
        return (Workload(f"{op}-rows-[8192,8192]-f32", shp, DType.f32, {"dim": -1}, backward=op == "median"),)
    if op == "quantile":
        return (Workload("quantile-rows-[8192,8192]-f32", shp, DType.f32, {"q": (0.1, 0.5, 0.9), "dim": -1},
                         backward=True),)
    return ()


_DIM_OPT = Attr("dim", "axis", None, optional=True)
_Q = Attr("q", "any", expected="a float or a sequence of floats in [0, 1]", normalize=_norm_q)
_INTERP = Attr("interpolation", "str", "linear", choices=INTERPOLATIONS)

SPECS: dict[str, OpSpec] = {}
for _op, _attrs, _check, _peer, _dropin, _grad, _saves, _dt, _samples, _doc in [
    ("kthvalue", (Attr("k", "int", expected="an int (1-based rank)"), Attr("dim", "axis", -1), _KEEPDIM), _check_kth,
     _peer_kth, _dropin_kth, _g_select, ("out1",), TOPK_TYPES, _kth_samples,
     "torch.kthvalue (NaN largest; ties: the stable sort's index): (values, int64 indices)"),
    ("median", (_DIM_OPT, _KEEPDIM), _check_median("median"), _peer_median("median"), _dropin_median("median"),
     _g_select, _saves_select, TOPK_TYPES, _median_samples,
     "torch.median: the lower middle; NaN propagates; (values, indices) with dim"),
    ("nanmedian", (_DIM_OPT, _KEEPDIM), _check_median("nanmedian"), _peer_median("nanmedian"),
     _dropin_median("nanmedian"), _g_select, _saves_select, TOPK_TYPES, _median_samples,
     "torch.nanmedian: the lower middle of the non-NaN values; (values, indices) with dim"),
    ("quantile", (_Q, _DIM_OPT, _KEEPDIM, _INTERP), _check_quantile("quantile"), _peer_quantile("quantile"),
     _dropin_quantile("quantile"), _g_quantile, ("inputs",), QUANTILE_TYPES, _quantile_samples,
     "torch.quantile (every interpolation; q float or sequence; NaN propagates)"),
    ("nanquantile", (_Q, _DIM_OPT, _KEEPDIM, _INTERP), _check_quantile("nanquantile"), _peer_quantile("nanquantile"),
     _dropin_quantile("nanquantile"), _g_quantile, ("inputs",), QUANTILE_TYPES, _quantile_samples,
     "torch.nanquantile (quantile of the non-NaN values)"),
]:
    SPECS[_op] = register_spec(OpSpec(
        name=_op, family="sort", arg_names=("x",), check=_check, dtypes=_dt, attrs=_attrs, torch_peer=_peer,
        torch_name=f"torch.{_op}", dropin=_dropin, dropin_result=_result(_op) if "quantile" not in _op else None,
        grad=_grad, saves=_saves, differentiable=(0,), samples=_samples, errors=_errors(_op),
        # selection is exact; quantile interpolates once in the input's dtype (torch's lerp): a few ulps of
        # the neighbours' magnitude (f32: 2^-23 relative, f64 the default)
        tol=(lambda dt: (2e-6, 1e-6) if dt == DType.f32 else (1e-12, 1e-12)) if "quantile" in _op else
        (lambda dt: (0.0, 0.0)),
        grad_tol=None if "quantile" in _op else (lambda dt: (0.0, 0.0)),
        workloads=_workloads(_op), cost=_cost, category="sort", doc=_doc,
    ))

SPECS["quantile_backward"] = register_spec(OpSpec(
    name="quantile_backward", family="sort", arg_names=("grad", "x"), check=_check_quantile_bw,
    dtypes=QUANTILE_TYPES, attrs=(_Q, Attr("dim", "axis", None, optional=True, rank=1), _KEEPDIM, _INTERP, Attr("ignore_nan", "bool", False)),
    torch_peer=_peer_quantile_bw, torch_name="torch autograd rule of quantile / nanquantile (sort + lerp)",
    samples=_quantile_bw_samples, errors=_quantile_bw_errors, category="sort",
    tol=lambda dt: (2e-6, 1e-6) if dt == DType.f32 else (1e-12, 1e-12),
    cost=lambda d: (sum(t.nbytes for t in d.inputs) + d.outputs[0].nbytes, 0),
    doc="gradient of quantile: (1 - w) * grad to the lower, w * grad to the upper neighbour's position",
))

# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__, "amax_backward", "quantile_backward", "value_select_backward")
