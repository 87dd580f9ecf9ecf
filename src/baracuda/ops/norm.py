"""Normalization family: rms_norm and layer_norm over the trailing ``normalized_shape`` (issue 4).

rms_norm(x[, weight], normalized_shape, eps)        y = x * rsqrt(mean(x^2) + eps) * weight
layer_norm(x[, weight[, bias]], normalized_shape, eps)  y = (x - mean) * rsqrt(var + eps) * weight + bias
Statistics are computed in f32 (f64 for f64), like torch.  ``eps=None`` (rms_norm) is torch's default: the
machine epsilon of the input dtype.

add_rms_norm(x, residual, weight, normalized_shape, eps) -> (s, y): s = x + residual (rounded to the
dtype, as the unfused pair would) and y = rms_norm(s): the pre-norm transformer's residual step in one pass.
add_layer_norm(x, residual, weight[, bias], normalized_shape, eps) -> (s, y): the same with layer_norm.

Backward: one fused op each, ``rms_norm_backward(grad, x[, weight])`` -> (dx[, dweight]) and
``layer_norm_backward(grad, x[, weight])`` -> (dx[, dweight, dbias]; ``has_bias`` says whether dbias is
wanted).  The row statistics are recomputed in the backward kernel from x, which it reads anyway (the row is
in registers), instead of being saved as extra forward outputs: the bytes moved are the same (mean/rstd are
4 B per row) and every output of the forward op stays a real result with a gradient.
"""
from __future__ import annotations

import math

from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg

__all__ = ["NORM_OPS"]

NORM_OPS = ("rms_norm", "layer_norm")
_MAX_AFFINE = {"rms_norm": 1, "layer_norm": 2}   # weight / weight+bias


_NS = Attr("normalized_shape", "shape", expected="a tuple of ints")
# any real eps or None, as torch (a negative one makes rows with var + eps < 0 NaN, as there)
_EPS = Attr("eps", "float", None, optional=True, expected="a real number or None")
_ATTRS = (_NS, _EPS)


def _norm_shape(op, x, attrs):
    ns = attrs["normalized_shape"]
    if not ns or len(ns) > len(x.shape) or tuple(x.shape[len(x.shape) - len(ns):]) != ns:
        raise InvalidProblemError(op, "normalized_shape", f"a non-empty trailing part of the input shape {x.shape}", ns)
    return ns


def _eps(op, attrs, dt):
    """eps=None resolves here to torch's default (rms_norm: the input dtype's machine epsilon; layer_norm:
    1e-5), so the descriptor always carries the number the kernels use."""
    eps = attrs["eps"]
    if eps is None:
        import ml_dtypes

        return float(ml_dtypes.finfo(dt.numpy).eps) if "rms" in op else 1e-5
    return eps


def _check_fw(op):
    def check(inputs, attrs):
        if not 1 <= len(inputs) <= 1 + _MAX_AFFINE[op]:
            raise InvalidProblemError(op, "inputs", f"1 to {1 + _MAX_AFFINE[op]} operands (x, weight, bias)",
                                      len(inputs))
        x = inputs[0]
        _SPECS[op].check_dtypes(inputs)
        check_nonneg(op, ("x",), (x.shape,))
        ns = _norm_shape(op, x, attrs)
        for n, t in zip(("weight", "bias"), inputs[1:]):
            if t.shape != ns:
                raise InvalidProblemError(op, n, f"shape {ns} (normalized_shape)", t.shape)
            if t.dtype != x.dtype:
                raise DTypeMismatchError(op, n, str(x.dtype), str(t.dtype))
        return {"normalized_shape": ns, "eps": _eps(op, attrs, x.dtype)}, (TensorSpec(x.shape, x.dtype),)
    return check


def _check_bw(op):
    fw = op[: -len("_backward")]

    def check(inputs, attrs):
        if len(inputs) not in (2, 3):
            raise InvalidProblemError(op, "inputs", "2 or 3 operands (grad, x[, weight])", len(inputs))
        g, x = inputs[:2]
        _SPECS[op].check_dtypes(inputs)
        check_nonneg(op, ("grad", "x"), (g.shape, x.shape))
        if g.shape != x.shape:
            raise InvalidProblemError(op, "x", f"the shape of 'grad' {g.shape}", x.shape)
        for n, t in zip(("x", "weight"), inputs[1:]):
            if t.dtype != g.dtype:
                raise DTypeMismatchError(op, n, str(g.dtype), str(t.dtype))
        ns = _norm_shape(op, x, attrs)
        if len(inputs) == 3 and inputs[2].shape != ns:
            raise InvalidProblemError(op, "weight", f"shape {ns} (normalized_shape)", inputs[2].shape)
        a = {"normalized_shape": ns, "eps": _eps(op, attrs, x.dtype)}
        outs = [TensorSpec(x.shape, x.dtype)]
        if len(inputs) == 3:
            outs.append(TensorSpec(ns, x.dtype))
        if fw == "layer_norm":
            a["has_bias"] = attrs["has_bias"]
            if a["has_bias"]:
                if len(inputs) != 3:
                    raise InvalidProblemError(op, "has_bias", "False without a weight operand", True)
                outs.append(TensorSpec(ns, x.dtype))
        return a, tuple(outs)
    return check


# -- backward rules ------------------------------------------------------------------------------
def _g_rms(ctx, d, grads, s):
    a = dict(normalized_shape=d.attr("normalized_shape"), eps=d.attr("eps"))
    ins = (grads[0], s["x"]) + ((s["weight"],) if len(d.inputs) == 2 else ())
    r = ctx.op("rms_norm_backward", *ins, **a)
    return tuple(r) if isinstance(r, tuple) else (r,)


def _g_ln(ctx, d, grads, s):
    a = dict(normalized_shape=d.attr("normalized_shape"), eps=d.attr("eps"), has_bias=len(d.inputs) == 3)
    ins = (grads[0], s["x"]) + ((s["weight"],) if len(d.inputs) >= 2 else ())
    r = ctx.op("layer_norm_backward", *ins, **a)
    return tuple(r) if isinstance(r, tuple) else (r,)


def _check_add(op):
    """add_rms_norm: (x, residual, weight); add_layer_norm: (x, residual, weight[, bias])."""
    nmax = 4 if op == "add_layer_norm" else 3

    def check(inputs, attrs):
        if not 3 <= len(inputs) <= nmax:
            raise InvalidProblemError(op, "inputs", f"{'3 or 4' if nmax == 4 else '3'} operands (x, residual, weight"
                                      f"{'[, bias]' if nmax == 4 else ''})", len(inputs))
        x, r = inputs[:2]
        _SPECS[op].check_dtypes(inputs)
        check_nonneg(op, ("x",), (x.shape,))
        if r.shape != x.shape:
            raise InvalidProblemError(op, "residual", f"the shape of 'x' {x.shape}", r.shape)
        ns = _norm_shape(op, x, attrs)
        for n, t in zip(("weight", "bias"), inputs[2:]):
            if t.shape != ns:
                raise InvalidProblemError(op, n, f"shape {ns} (normalized_shape)", t.shape)
        for n, t in zip(("residual", "weight", "bias"), inputs[1:]):
            if t.dtype != x.dtype:
                raise DTypeMismatchError(op, n, str(x.dtype), str(t.dtype))
        out = TensorSpec(x.shape, x.dtype)
        return {"normalized_shape": ns, "eps": _eps(op, attrs, x.dtype)}, (out, out)
    return check


def _g_add_norm(ctx, d, grads, s):
    """s = x + residual feeds both outputs: ds = norm_backward(gy, s) + gs, and dx = dresidual = ds."""
    gs, gy = grads
    a = dict(normalized_shape=d.attr("normalized_shape"), eps=d.attr("eps"))
    naff = len(d.inputs) - 2
    if gy is None:
        return (gs, gs) + (None,) * naff
    if d.op == "add_rms_norm":
        r = ctx.op("rms_norm_backward", gy, s["out0"], s["weight"], **a)
    else:
        r = ctx.op("layer_norm_backward", gy, s["out0"], s["weight"], has_bias=naff == 2, **a)
    ds, rest = r[0], tuple(r[1:])
    if gs is not None:
        ds = ctx.op("add", ds, gs)
    return (ds, ds) + rest


def _peer_add_rms(x, r, w, *, normalized_shape, eps):
    import torch.nn.functional as F

    s = x + r
    return s, F.rms_norm(s, normalized_shape, w, eps)


def _peer_add_ln(x, r, w, b=None, *, normalized_shape, eps):
    import torch.nn.functional as F

    s = x + r
    return s, F.layer_norm(s, normalized_shape, w, b, eps)


# -- peers and drop-ins --------------------------------------------------------------------------
def _peer_rms(x, weight=None, *, normalized_shape, eps):
    import torch.nn.functional as F

    return F.rms_norm(x, normalized_shape, weight, eps)


def _peer_ln(x, weight=None, bias=None, *, normalized_shape, eps):
    import torch.nn.functional as F

    return F.layer_norm(x, normalized_shape, weight, bias, 1e-5 if eps is None else eps)


def _dropin_rms(input, normalized_shape, weight=None, eps=None):
    ins = (input,) if weight is None else (input, weight)
    return ins, {"normalized_shape": tuple(normalized_shape), "eps": eps}


def _dropin_ln(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if bias is not None and weight is None:   # same result as torch: an explicit unit weight
        import torch

        weight = torch.ones(tuple(normalized_shape), dtype=input.dtype, device=input.device)
    ins = (input,) + tuple(t for t in (weight, bias) if t is not None)
    return ins, {"normalized_shape": tuple(normalized_shape), "eps": eps}


# -- samples, errors, workloads ------------------------------------------------------------------
_SHAPES = [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((7,), (7,)), ((4, 1), (1,)), ((33, 65), (65,)), ((0, 4), (4,)),
           ((2, 300), (300,))]


def _fw_samples(op):
    def samples(rng):
        for naff in range(_MAX_AFFINE[op] + 1):
            for shape, ns in _SHAPES:
                ins = (rng.standard_normal(shape) * 2 + 0.5,) + tuple(rng.standard_normal(ns) for _ in range(naff))
                yield Sample(ins, {"normalized_shape": ns, "eps": 1e-5}, name=f"{shape}{ns}aff{naff}")
        yield Sample((rng.standard_normal((3, 6)),), {"normalized_shape": (6,), "eps": None}, name="eps=None")
    return samples


_BW_SHAPES = [((3, 5), (5,)), ((2, 3, 4), (3, 4)), ((4, 1), (1,)), ((0, 4), (4,)), ((2, 300), (300,))]


def _bw_samples(op):
    # fewer shapes than the forward: the interpreter runs one backward program per row (CI time)
    def samples(rng):
        for shape, ns in _BW_SHAPES:
            for w in (False, True):
                ins = (rng.standard_normal(shape), rng.standard_normal(shape) * 2 + 0.5)
                ins += (rng.standard_normal(ns),) if w else ()
                attrs = {"normalized_shape": ns, "eps": 1e-5}
                for hb in ((False, True) if (op == "layer_norm_backward" and w) else (False,)):
                    if op == "layer_norm_backward":
                        attrs = dict(attrs, has_bias=hb)
                    yield Sample(ins, dict(attrs), name=f"{shape}w{w}b{hb}", grad=False)
    return samples


def _errors(op, bw):
    def errors():
        from .._core.errors import UnsupportedError

        pre = (((3, 4), "f32"),) if bw else ()
        yield ErrorCase(pre + (((3, 4), "f32"),), {"normalized_shape": (3,)}, InvalidProblemError,
                        rf"{op}: argument 'normalized_shape': expected a non-empty trailing part", "bad-shape")
        yield ErrorCase(pre + (((3, 4), "f32"), ((5,), "f32")), {"normalized_shape": (4,)}, InvalidProblemError,
                        rf"{op}: argument 'weight': expected shape \(4,\)", "bad-weight")
        yield ErrorCase(pre + (((3, 4), "f32"), ((4,), "f16")), {"normalized_shape": (4,)}, DTypeMismatchError,
                        r"expected dtype f32, got f16", "weight-dtype")
        yield ErrorCase(pre + (((3, 4), "i32"),), {"normalized_shape": (4,)}, UnsupportedError, r"dtype i32", "int")
    return errors


def _workloads(op, bw):
    n_aff = 1 if op.startswith("rms") else 2
    if bw:
        return (Workload(f"{op}-16384x4096-bf16", ((16384, 4096), (16384, 4096), (4096,)), DType.bf16,
                         {"normalized_shape": (4096,), "eps": 1e-5} | ({"has_bias": True} if n_aff == 2 else {})),)
    return tuple(Workload(f"{op}-16384x4096-{dt}", ((16384, 4096),) + ((4096,),) * n_aff, dt,
                          {"normalized_shape": (4096,), "eps": 1e-5}, backward=True) for dt in (DType.bf16, DType.f32))


def _cost(desc):
    nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
    return nbytes, 6 * math.prod(desc.inputs[0].shape)


def _bw_tol(dt):
    # dx is a difference of row means of products (N up to 300 here); dweight sums over the rows
    return {DType.f64: (1e-9, 1e-10), DType.f32: (5e-5, 5e-5), DType.f16: (2e-2, 1e-2),
            DType.bf16: (3e-2, 3e-2)}[dt]


def _add_samples(op):
    def samples(rng):
        for shape, ns in _SHAPES:
            for nb in ((0, 1) if op == "add_layer_norm" else (0,)):
                yield Sample((rng.standard_normal(shape), rng.standard_normal(shape) + 0.5, rng.standard_normal(ns))
                             + tuple(rng.standard_normal(ns) for _ in range(nb)),
                             {"normalized_shape": ns, "eps": 1e-5}, name=f"{shape}{ns}b{nb}")
    return samples


def _add_errors(op):
    def errors():
        yield ErrorCase((((3, 4), "f32"), ((3, 5), "f32"), ((4,), "f32")), {"normalized_shape": (4,)},
                        InvalidProblemError, r"argument 'residual': expected the shape", "bad-residual")
        yield ErrorCase((((3, 4), "f32"), ((3, 4), "f32")), {"normalized_shape": (4,)}, InvalidProblemError,
                        rf"{op}: argument 'inputs': expected 3", "no-weight")
        yield ErrorCase((((3, 4), "f32"), ((3, 4), "f32"), ((4,), "f32"), ((5,), "f32")), {"normalized_shape": (4,)},
                        InvalidProblemError, rf"{op}: argument '{'bias' if op == 'add_layer_norm' else 'inputs'}'",
                        "bad-bias")
    return errors


_SPECS: dict[str, OpSpec] = {}
for _op, _peer, _naff in (("add_rms_norm", _peer_add_rms, 1), ("add_layer_norm", _peer_add_ln, 2)):
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="norm", arg_names=("x", "residual", "weight", "bias")[: 2 + _naff], check=_check_add(_op),
        dtypes=FLOAT_TYPES, attrs=_ATTRS, torch_peer=_peer, grad=_g_add_norm,
        saves=("weight", "out0"), differentiable=(0, 1, 2, 3)[: 2 + _naff], samples=_add_samples(_op),
        errors=_add_errors(_op),
        workloads=(Workload(f"{_op}-16384x4096-bf16", ((16384, 4096), (16384, 4096)) + ((4096,),) * _naff, DType.bf16,
                            {"normalized_shape": (4096,), "eps": 1e-5}, backward=True),),
        cost=_cost, grad_tol=_bw_tol, category="norm",
        doc=f"fused residual add + {_op[4:]}: returns (x + residual, {_op[4:]}(x + residual) * weight"
            f"{' + bias' if _naff == 2 else ''}), one read of x and residual."))
for _op, _grad, _peer, _dropin in (("rms_norm", _g_rms, _peer_rms, _dropin_rms),
                                   ("layer_norm", _g_ln, _peer_ln, _dropin_ln)):
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="norm", arg_names=("x", "weight", "bias")[: 1 + _MAX_AFFINE[_op]], check=_check_fw(_op),
        dtypes=FLOAT_TYPES, attrs=_ATTRS, torch_peer=_peer, torch_name=f"torch.nn.functional.{_op}",
        dropin=_dropin, grad=_grad, saves=("inputs",), differentiable=(0, 1, 2)[: 1 + _MAX_AFFINE[_op]],
        samples=_fw_samples(_op), errors=_errors(_op, False), workloads=_workloads(_op, False), cost=_cost,
        grad_tol=_bw_tol, category="norm", doc=f"{_op} over the trailing normalized_shape (fused Triton kernel)."))
    _bw = f"{_op}_backward"
    _SPECS[_bw] = register_spec(OpSpec(
        name=_bw, family="norm", arg_names=("grad", "x", "weight"), check=_check_bw(_bw), dtypes=FLOAT_TYPES,
        attrs=_ATTRS + ((Attr("has_bias", "bool", False),) if _op == "layer_norm" else ()), samples=_bw_samples(_bw), errors=_errors(_bw, True), tol=_bw_tol,
        workloads=_workloads(_bw, True), cost=_cost, category="norm",
        doc=f"fused backward of {_op}: dx, and dweight/dbias reduced deterministically (no atomics)."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "add", "layer_norm_backward", "rms_norm_backward")
