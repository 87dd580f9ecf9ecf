"""Scan family (issue 4): cumsum, cumprod, cummax, cummin, logcumsumexp along one axis, and their fused
backward ops (cumprod_backward, logcumsumexp_backward, cummax_backward).

Attributes: ``dim`` (required, negative allowed; a 0-d tensor takes 0 / -1), ``reverse`` (default False:
scan from the end of the axis, JAX's ``lax.cumsum(reverse=True)``; torch has no such flag, it equals
``flip(op(flip(x, dim)), dim)``) and, for cumsum/cumprod, torch's ``dtype=`` (the input is cast to it
first, then scanned; output in that dtype).

Semantics follow torch:
* integer and bool inputs scan to int64 in cumsum/cumprod (two's-complement wrap on overflow, as torch);
* cummax/cummin return (values, int64 indices) (``torch.return_types.cummax``); on ties the index is the
  LAST position reaching the running extreme (torch: ``cummax([3, 1, 3]) -> indices [0, 0, 2]``); NaN is
  larger than everything and sticky: the values stay NaN and the index follows the latest NaN.  With
  ``reverse=True`` "latest" means latest visited, i.e. the smallest index (the flip definition).
* logcumsumexp is computed stably (pairwise logaddexp): -inf entries contribute nothing, a row of -inf
  stays -inf, +inf makes the rest +inf, NaN propagates.

Gradients (backward ops fed by the saved tensors; the scan runs the other way):
* cumsum: reverse cumsum of the gradient (cast to the input's dtype first, as torch).
* cumprod: dx_i = P_i * Q_i, P_i = prod_{k before i} x_k (the previous output), Q_i = g_i + x_next * Q_next
  (a linear recurrence): exact with zeros in x (no division, unlike the textbook revcumsum(g*y)/x).
* logcumsumexp: dx_i = exp(x_i - y_i) * T_i, T_i = g_i + exp(y_i - y_next) * T_next; y is monotone along
  the scan, so every factor is <= 1 (stable).  x_i = -inf gives 0 (torch's formula gives NaN there).
* cummax/cummin: scatter-add of g to the indices.  The indices of a cummax are monotone along the scan, so
  each input position k receives the sum of g over one contiguous run (``idx == k``), computed as a
  segmented reverse scan; ``cummax_backward`` assumes indices produced by cummax/cummin.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec, set_bench_inputs
from .._core.derive import declare_rule_ops
from ._common import check_nonneg, no_out

__all__ = ["SCAN_OPS", "SCAN_TYPES", "INT_LIKE"]

INT_LIKE = (DType.i64, DType.i32, DType.i16, DType.i8, DType.u8, DType.bool)
SCAN_TYPES = FLOAT_TYPES + INT_LIKE


# -- shape / dtype rules ------------------------------------------------------------------------
_DIM_REV = (Attr("dim", "axis", expected="an int (the axis to scan along)"), Attr("reverse", "bool", False))
_ARITH_ATTRS = _DIM_REV + (Attr("dtype", "dtype", None, optional=True),)


def _scan_out_dtype(op, x: DType, dt) -> DType:
    """cumsum/cumprod: dtype= if given (the input is cast to it first), else int64 for integer/bool inputs."""
    if dt is None:
        return DType.i64 if x in INT_LIKE else x
    if dt not in SCAN_TYPES:
        raise UnsupportedError(op, f"argument 'dtype' is {dt}; supported: {', '.join(map(str, SCAN_TYPES))}")
    return dt


def _make_check(op: str, kind: str):
    def check(inputs, attrs):
        if len(inputs) != 1:
            raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
        (x,) = inputs
        SPECS[op].check_dtypes(inputs)
        check_nonneg(op, ("x",), (x.shape,))
        a = attrs
        if kind == "arith":
            return a, (TensorSpec(x.shape, _scan_out_dtype(op, x.dtype, a["dtype"])),)
        if kind == "ext":
            return a, (TensorSpec(x.shape, x.dtype), TensorSpec(x.shape, DType.i64))
        return a, (TensorSpec(x.shape, x.dtype),)
    return check


def _make_bw_check(op: str, names: tuple):
    def check(inputs, attrs):
        if len(inputs) != len(names):
            raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
        g = inputs[0]
        check_nonneg(op, names, [t.shape for t in inputs])
        if g.dtype not in FLOAT_TYPES:
            raise UnsupportedError(op, f"argument 'grad' has dtype {g.dtype}; the op is defined for "
                                       f"{', '.join(map(str, FLOAT_TYPES))}")
        for n, t in zip(names[1:], inputs[1:]):
            if t.shape != g.shape:
                raise InvalidProblemError(op, n, f"the shape of 'grad' {g.shape}", t.shape)
            want = DType.i64 if n == "indices" else g.dtype
            if t.dtype != want:
                raise DTypeMismatchError(op, n, str(want), str(t.dtype))
        return attrs, (TensorSpec(g.shape, g.dtype),)
    return check


# -- backward rules ---------------------------------------------------------------------------------
def _floating(d) -> bool:
    return d.inputs[0].dtype.is_floating and d.outputs[0].dtype.is_floating


def _g_cumsum(ctx, d, grads, s):
    g = grads[0]
    if g is None or not _floating(d):
        return (None,)
    x = d.inputs[0].dtype
    # torch: cumsum_backward(grad.to(input dtype)): cast first, then the reverse scan
    return (ctx.op("cumsum", g, dim=d.attr("dim"), reverse=not d.attr("reverse"),
                   dtype=x if d.outputs[0].dtype != x else None),)


def _g_cumprod(ctx, d, grads, s):
    g = grads[0]
    if g is None or not _floating(d):
        return (None,)
    x, out = d.inputs[0].dtype, s["out"]
    if d.outputs[0].dtype != x:   # dtype=: torch casts grad to the input dtype; the saved output follows
        g = ctx.op("to_dtype", g, dtype=x)
        out = ctx.op("to_dtype", out, dtype=x)
    return (ctx.op("cumprod_backward", g, s["x"], out, dim=d.attr("dim"), reverse=d.attr("reverse")),)


def _g_lse(ctx, d, grads, s):
    g = grads[0]
    if g is None:
        return (None,)
    return (ctx.op("logcumsumexp_backward", g, s["x"], s["out"], dim=d.attr("dim"), reverse=d.attr("reverse")),)


def _g_ext(ctx, d, grads, s):
    g = grads[0]
    if g is None or not d.inputs[0].dtype.is_floating:
        return (None,)
    return (ctx.op("cummax_backward", g, s["out1"], dim=d.attr("dim"), reverse=d.attr("reverse")),)


# -- torch peers (reverse = flip, scan, flip) and drop-in adapters -----------------------------------
def _flip(x, dim):
    import torch

    return x if x.dim() == 0 else torch.flip(x, [dim])


def _peer_arith(fn):
    def peer(x, dim, reverse=False, dtype=None):
        import torch

        kw = {"dtype": as_dtype(dtype).torch} if dtype is not None else {}
        f = getattr(torch, fn)
        return _flip(f(_flip(x, dim), dim, **kw), dim) if reverse else f(x, dim, **kw)
    return peer


def _peer_lse(x, dim, reverse=False):
    import torch

    return _flip(torch.logcumsumexp(_flip(x, dim), dim), dim) if reverse else torch.logcumsumexp(x, dim)


def _peer_ext(fn):
    def peer(x, dim, reverse=False):
        import torch

        if not reverse or x.dim() == 0:
            return tuple(getattr(torch, fn)(x, dim))
        v, i = getattr(torch, fn)(_flip(x, dim), dim)
        return _flip(v, dim), (x.shape[dim] - 1) - _flip(i, dim)
    return peer


def _peer_autograd(fw):
    """The torch peer of a backward op: torch.autograd's gradient of the forward peer."""
    def peer(g, x, out, dim, reverse=False):
        import torch

        with torch.enable_grad():
            xx = x.detach().requires_grad_(True)
            y = fw(xx, dim, reverse)
            (dx,) = torch.autograd.grad(y, xx, g, allow_unused=True)
        return torch.zeros_like(x) if dx is None else dx
    return peer


def _peer_ext_bw(g, idx, dim, reverse=False):
    import torch

    if g.dim() == 0:
        return g.clone()
    return torch.zeros_like(g).scatter_add(dim, idx, g)


def _dropin_arith(name):
    def dropin(input, dim, *, dtype=None, out=None):
        no_out(name, out)
        return (input,), {"dim": dim, "dtype": None if dtype is None else as_dtype(dtype)}
    return dropin


def _dropin_plain(name):
    def dropin(input, dim, *, out=None):
        no_out(name, out)
        return (input,), {"dim": dim}
    return dropin


def _result(kind):
    def result(out):
        import torch

        return getattr(torch.return_types, kind)(out)
    return result


# -- samples, errors, tolerances, workloads -----------------------------------------------------------
# small odd shapes: the generic scans run element by element under Triton's interpreter
_CASES = [((7,), 0), ((3, 5), 1), ((3, 5), 0), ((2, 3, 4, 5), 2), ((2, 3, 4, 5), -1), ((5, 37), -1),
          ((37, 5), 0), ((4, 1, 3), 1), ((), 0), ((), -1), ((0, 4), 1), ((3, 0), 1)]


def _fw_samples(op):
    def samples(rng):
        if op == "cumprod":  # exact zeros first: the gradient samples (first 3 small ones) exercise them
            x = rng.standard_normal((7,))
            x[2] = 0.0
            yield Sample((x,), {"dim": 0}, name="(7,)-one-zero")
            x = rng.standard_normal((3, 5))
            x[0, 1] = x[0, 3] = x[2, 4] = 0.0
            yield Sample((x,), {"dim": 1, "reverse": True}, name="(3,5)-zeros-rev")
        for i, (shape, dim) in enumerate(_CASES):
            scale = 3.0 if op == "logcumsumexp" else 1.0
            yield Sample((scale * rng.standard_normal(shape),), {"dim": dim, "reverse": i % 3 == 1},
                         name=f"{shape}-dim{dim}-rev{i % 3 == 1}")
        if op in ("cumsum", "cumprod"):
            yield Sample((rng.standard_normal((3, 9)),), {"dim": 1, "dtype": DType.f64}, name="(3,9)dtype=f64")
        if op == "logcumsumexp":
            x = 3.0 * rng.standard_normal((4, 9))
            x[0, :3] = x[1, :] = x[2, 4] = -np.inf
            # -inf: forward only (torch's gradient there is NaN, ours 0: tests/scan checks it)
            yield Sample((x,), {"dim": 1}, name="(4,9)-neg-inf", grad=False)
            yield Sample((x,), {"dim": 1, "reverse": True}, name="(4,9)-neg-inf-rev", grad=False)
        if op in ("cummax", "cummin"):
            x = rng.integers(-2, 3, size=(5, 11)).astype(np.float64)   # ties in every dtype
            yield Sample((x,), {"dim": 1}, name="(5,11)-ties", grad=False)
            yield Sample((x,), {"dim": 0, "reverse": True}, name="(5,11)-ties-rev", grad=False)
    return samples


def _bw_samples(op):
    """(grad, x, out) / (grad, indices) triples from the f64 forward (written out here: NumPy only)."""
    def samples(rng):
        for i, (shape, dim) in enumerate(_CASES):
            rev = i % 2 == 1
            ax = dim % max(len(shape), 1)
            x = rng.standard_normal(shape)
            if op == "cumprod_backward" and x.size > 3:
                x.reshape(-1)[1::4] = 0.0
            g = rng.standard_normal(shape)
            xx = x.reshape(x.shape or (1,))
            xs = np.flip(xx, ax) if rev else xx
            if op == "cummax_backward":
                idx = _np_cumext(xs, ax, np.greater_equal)[1]
                if rev:
                    idx = (xx.shape[ax] - 1) - np.flip(idx, ax)
                yield Sample((g, idx.reshape(shape)), {"dim": dim, "reverse": rev}, name=f"{shape}-{dim}-{rev}")
                continue
            with np.errstate(all="ignore"):
                y = np.cumprod(xs, ax) if op == "cumprod_backward" else np.logaddexp.accumulate(xs, ax)
            y = np.flip(y, ax) if rev else y
            yield Sample((g, x, y.reshape(shape)), {"dim": dim, "reverse": rev}, name=f"{shape}-{dim}-{rev}")
    return samples


def _np_cumext(x, ax, better):
    """Running extreme along ax with torch's rule (NaN sticky, ties to the later position)."""
    x = np.moveaxis(x, ax, -1)
    v = np.empty_like(x)
    idx = np.zeros(x.shape, np.int64)
    if x.shape[-1]:
        cur, ci = x[..., 0].copy(), np.zeros(x.shape[:-1], np.int64)
        for i in range(x.shape[-1]):
            xi = x[..., i]
            with np.errstate(invalid="ignore"):
                win = np.isnan(xi) | (~np.isnan(cur) & better(xi, cur))
            cur, ci = np.where(win, xi, cur), np.where(win, i, ci)
            v[..., i], idx[..., i] = cur, ci
    return np.moveaxis(v, -1, ax), np.moveaxis(idx, -1, ax)


def _errors(op, kind):
    def errors():
        f = ((3, 4), "f32")
        if kind == "lse":
            yield ErrorCase((((3, 4), "i32"),), {"dim": 1}, UnsupportedError, r"dtype i32; the op is defined for",
                            "int-dtype")
        else:
            yield ErrorCase((((3, 4), "c64"),), {"dim": 1}, UnsupportedError, r"dtype c64; the op is defined for",
                            "complex-dtype")
        yield ErrorCase((f,), {}, InvalidProblemError, rf"{op}: argument 'dim': expected an int", "no-dim")
        yield ErrorCase((f,), {"dim": 2}, InvalidProblemError, rf"{op}: argument 'dim': expected an axis in \[-2, 1\]",
                        "bad-dim")
        yield ErrorCase((f,), {"dim": (0, 1)}, InvalidProblemError, rf"{op}: argument 'dim': expected an int",
                        "tuple-dim")
        yield ErrorCase((f,), {"dim": 1, "reverse": 1}, InvalidProblemError, r"argument 'reverse': expected a bool",
                        "int-reverse")
        yield ErrorCase((f,), {"dim": 1, "bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        if kind == "arith":
            yield ErrorCase((f,), {"dim": 1, "dtype": "c64"}, UnsupportedError, r"argument 'dtype' is c64", "c64-dtype")
        else:
            yield ErrorCase((f,), {"dim": 1, "dtype": "f64"}, InvalidProblemError, r"argument 'dtype'", "no-dtype-attr")
    return errors


def _bw_errors(op, names):
    def errors():
        shapes = [((3, 4), "i64" if n == "indices" else "f32") for n in names]
        yield ErrorCase(tuple(((3, 4), "i32") for _ in names), {"dim": 1}, UnsupportedError,
                        r"argument 'grad' has dtype i32", "int-grad")
        bad = list(shapes)
        bad[1] = ((3, 5), bad[1][1])
        yield ErrorCase(tuple(bad), {"dim": 1}, InvalidProblemError, rf"argument '{names[1]}': expected the shape",
                        "shape-mismatch")
        bad = list(shapes)
        bad[1] = ((3, 4), "f16")
        yield ErrorCase(tuple(bad), {"dim": 1}, DTypeMismatchError, rf"argument '{names[1]}': expected dtype",
                        "dtype-mismatch")
        yield ErrorCase(tuple(shapes), {"dim": 1, "bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
        yield ErrorCase(tuple(shapes), {"dim": -3}, InvalidProblemError, r"argument 'dim'", "bad-dim")
    return errors


def _tol(dt):
    # f32: the scans accumulate in f32 (as torch on the GPU): the error of a prefix is ~ k * 2^-24 * the
    # largest partial (k <= 37 terms of |x| <~ 3 in the samples: <~ 2e-5 absolute where prefixes cancel
    # to ~0); half types round once to 11 / 8 bits from an f32 accumulator: the default tolerance.
    if dt == DType.f32:
        return 2e-5, 2e-5
    if dt == DType.f64:
        return 1e-10, 1e-10
    return default_tol(dt)


def _lse_grad_tol(dt):
    # the backward reads the SAVED output y, rounded to the dtype: exp(x - y) and exp(y_i - y_next) then carry
    # a relative error of |y| * 2^-9 (bf16; 2^-12 f16) each, ~1.5 % for |y| ~ 4 in the samples: 2 x that
    # plus the output rounding; f32/f64: twice the forward tolerance (the generic rule).
    if dt in (DType.bf16, DType.f16):
        return (5e-2, 3e-2) if dt == DType.bf16 else (1e-2, 5e-3)
    return tuple(2 * t for t in _tol(dt))


def _cost(desc):
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), desc.inputs[0].numel


def _workloads(op):
    if op == "cumsum":
        # expected on H100 (3.35 TB/s HBM3, ~3.0 TB/s copy): the last-axis scans move 8 B/element (f32) in one
        # pass: 134 MB in ~50 us (~2.7 TB/s); the first-axis scan runs split (3 passes, partly L2):
        # ~2.0-2.3 TB/s counted as 2 passes; the 1M row is launch-bound (~8 us for 8 MB)
        return (Workload("cumsum-last-[4096,4096]-f32", ((4096, 4096),), DType.f32, {"dim": -1}, backward=True),
                Workload("cumsum-first-[4096,4096]-f32", ((4096, 4096),), DType.f32, {"dim": 0}),
                Workload("cumsum-last-[4096,4096]-bf16", ((4096, 4096),), DType.bf16, {"dim": -1}),
                Workload("cumsum-row-[1,1048576]-f32", ((1, 1 << 20),), DType.f32, {"dim": -1}))
    if op == "cumprod":
        return (Workload("cumprod-last-[4096,4096]-bf16", ((4096, 4096),), DType.bf16, {"dim": -1}, backward=True),)
    if op in ("cummax", "cummin"):
        return (Workload(f"{op}-last-[4096,4096]-f32", ((4096, 4096),), DType.f32, {"dim": -1},
                         backward=op == "cummax"),)
    if op == "logcumsumexp":
        return (Workload("logcumsumexp-last-[4096,4096]-f32", ((4096, 4096),), DType.f32, {"dim": -1}, backward=True),
                Workload("logcumsumexp-last-[4096,4096]-bf16", ((4096, 4096),), DType.bf16, {"dim": -1}))
    return ()


def _bw_workloads(op, names):
    shp = (4096, 4096)
    return (Workload(f"{op}-last-[4096,4096]-f32", tuple((shp, DType.i64) if n == "indices" else shp for n in names),
                     DType.f32, {"dim": -1}),)


@dataclass(frozen=True)
class ScanDef:
    name: str
    kind: str                  # arith (dtype=) | ext (values, indices) | lse
    jax_name: str
    peer: Callable
    dropin: Callable
    grad: Callable
    saves: tuple
    dtypes: tuple = SCAN_TYPES
    result: Callable | None = None


SCAN_OPS: dict[str, ScanDef] = {s.name: s for s in [
    ScanDef("cumsum", "arith", "jax.lax.cumsum", _peer_arith("cumsum"), _dropin_arith("cumsum"), _g_cumsum, ()),
    ScanDef("cumprod", "arith", "jax.lax.cumprod", _peer_arith("cumprod"), _dropin_arith("cumprod"), _g_cumprod,
            ("inputs", "outputs")),
    ScanDef("cummax", "ext", "jax.lax.cummax", _peer_ext("cummax"), _dropin_plain("cummax"), _g_ext, ("out1",),
            result=_result("cummax")),
    ScanDef("cummin", "ext", "jax.lax.cummin", _peer_ext("cummin"), _dropin_plain("cummin"), _g_ext, ("out1",),
            result=_result("cummin")),
    ScanDef("logcumsumexp", "lse", "jax.lax.cumlogsumexp", _peer_lse, _dropin_plain("logcumsumexp"), _g_lse,
            ("inputs", "outputs"), dtypes=FLOAT_TYPES),
]}

SPECS: dict[str, OpSpec] = {}
for _s in SCAN_OPS.values():
    SPECS[_s.name] = register_spec(OpSpec(
        name=_s.name, family="scan", arg_names=("x",), check=_make_check(_s.name, _s.kind), dtypes=_s.dtypes,
        attrs=_ARITH_ATTRS if _s.kind == "arith" else _DIM_REV, torch_peer=_s.peer, torch_name=f"torch.{_s.name}", dropin=_s.dropin,
        dropin_result=_s.result, jax_name=_s.jax_name, grad=_s.grad, saves=_s.saves, differentiable=(0,),
        samples=_fw_samples(_s.name), errors=_errors(_s.name, _s.kind),
        tol=(lambda dt: (0.0, 0.0)) if _s.kind == "ext" else _tol,   # cummax/cummin select exactly
        # cummax/cummin backward sums the gradients of a run in f32 (rounded once): the accumulating tolerance
        grad_tol=_lse_grad_tol if _s.kind == "lse" else _tol if _s.kind == "ext" else None,
        workloads=_workloads(_s.name), cost=_cost, category="scan",
        doc=f"torch.{_s.name} along `dim` (plus JAX's reverse=); see the module docstring.",
    ))

_BW = {
    "cumprod_backward": (("grad", "x", "out"), _peer_autograd(_peer_arith("cumprod")),
                         "gradient of cumprod: prefix product x linear recurrence (exact with zeros)"),
    "logcumsumexp_backward": (("grad", "x", "out"), _peer_autograd(_peer_lse),
                              "gradient of logcumsumexp: exp(x - y) x a decaying linear recurrence"),
    "cummax_backward": (("grad", "indices"), _peer_ext_bw,
                        "gradient of cummax/cummin: scatter-add of grad to the (monotone) indices"),
}
for _name, (_names, _peer, _doc) in _BW.items():
    SPECS[_name] = register_spec(OpSpec(
        name=_name, family="scan", arg_names=_names, check=_make_bw_check(_name, _names), dtypes=FLOAT_TYPES,
        attrs=_DIM_REV, torch_peer=_peer, torch_name="torch autograd rule of " + _name[:-9],
        samples=_bw_samples(_name), errors=_bw_errors(_name, _names),
        tol=_lse_grad_tol if _name.startswith("log") else _tol,
        workloads=_bw_workloads(_name, _names), cost=_cost, category="scan", doc=_doc,
    ))

del _s, _name, _names, _peer, _doc


def scan_geometry(shape, dim) -> tuple[int, int, int]:
    """(outer, R, inner) of a scan along ``dim`` (a 0-d tensor is (1, 1, 1))."""
    shape = tuple(shape) or (1,)
    return math.prod(shape[:dim]), shape[dim], math.prod(shape[dim + 1:])


def _set_bench_inputs():
    """Bench inputs of the backward ops: the saved tensors must be the forward's (cummax indices monotone,
    out = cumprod / logcumsumexp of x), which random data is not."""

    def maker(desc, device, gen):
        import torch

        dim, rev = desc.attr("dim"), desc.attr("reverse")
        g = desc.inputs[0]
        kw = dict(generator=gen, device=gen.device)
        grad = torch.randn(g.shape, **kw).to(g.dtype.torch).to(device)
        x = torch.randn(g.shape, **kw).to(device)
        if desc.op == "cumprod_backward":
            x = 1.0 + 0.01 * x       # products of 4096 values stay representable
        fw = {"cumprod_backward": _peer_arith("cumprod"), "logcumsumexp_backward": _peer_lse,
              "cummax_backward": _peer_ext("cummax")}[desc.op]
        y = fw(x.to(g.dtype.torch), dim, rev)
        if desc.op == "cummax_backward":
            return [grad, y[1]]
        return [grad, x.to(g.dtype.torch), y]

    for op in ("cumprod_backward", "logcumsumexp_backward", "cummax_backward"):
        set_bench_inputs(op, maker)


_set_bench_inputs()


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "cummax_backward", "cumprod_backward", "cumsum", "logcumsumexp_backward")
