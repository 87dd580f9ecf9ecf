"""Softmax family: softmax, log_softmax and their fused backward ops (issue 2).

softmax(x, dim, dtype=None)      y = exp(x - max) / sum(exp(x - max))  along ``dim``
log_softmax(x, dim, dtype=None)  y = x - max - log(sum(exp(x - max)))
softmin(x, dim, dtype=None)      y = softmax(-x): the same kernels, negating on load
                                 (backward: softmax_backward(-grad, y))
``dtype`` follows torch's ``dtype=`` argument: the input is cast to it first and the output has it (the drop-ins
take integer/bool inputs with ``dtype=`` as torch does, cast to it before the call; softmin refuses bool).

Backward (each one fused kernel: one read of grad and out, one write of grad_in; saves the OUTPUT):
softmax_backward(grad, out, dim, dtype=None)      grad_in = out * (grad - sum(grad * out))
log_softmax_backward(grad, out, dim, dtype=None)  grad_in = grad - exp(out) * sum(grad)
``dtype`` there is the gradient's dtype (torch's ``input_dtype`` of _softmax_backward_data): the input's
dtype when the forward upcast with ``dtype=``.
"""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import backward_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg, float_operands

__all__ = ["SOFTMAX_OPS"]

SOFTMAX_OPS = ("softmax", "log_softmax")


# dim: an axis of the (first) operand; dtype: None or a float dtype (torch's dtype= / input_dtype)
_ATTRS = (Attr("dim", "axis", expected="an int (the axis to normalize over; implicit dim is not supported)"),
          Attr("dtype", "dtype", None, optional=True, choices=FLOAT_TYPES,
               expected=f"None or one of {', '.join(map(str, FLOAT_TYPES))}"))


def _check_fw(op: str):
    def check(inputs, attrs):
        if len(inputs) != 1:
            raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
        (x,) = inputs
        _SPECS[op].check_dtypes(inputs)
        check_nonneg(op, ("x",), (x.shape,))
        return attrs, (TensorSpec(x.shape, attrs["dtype"] or x.dtype),)
    return check


def _forward_of(saved, attrs):
    """The forward problem of a backward call (grad, out; dtype = the input's dtype where the forward upcast):
    x of out's shape and that dtype, and the forward's dtype= (out's dtype) where it differs."""
    (y,) = saved
    dt = attrs["dtype"]
    return (TensorSpec(y.shape, dt or y.dtype),), dict(attrs, dtype=None if dt is None else y.dtype)


# -- backward rules: one fused op each, fed with the saved OUTPUT --------------------------------
def _g_softmax(ctx, d, grads, s):
    dt = d.inputs[0].dtype
    return (ctx.op("softmax_backward", grads[0], s["out"], dim=d.attr("dim"),
                   dtype=None if dt == d.outputs[0].dtype else dt),)


def _g_softmin(ctx, d, grads, s):
    # d softmax(-x) / dx = -J^T g = J^T (-g): the softmax backward of the negated gradient
    dt = d.inputs[0].dtype
    return (ctx.op("softmax_backward", ctx.op("neg", grads[0]), s["out"], dim=d.attr("dim"),
                   dtype=None if dt == d.outputs[0].dtype else dt),)


def _g_log_softmax(ctx, d, grads, s):
    dt = d.inputs[0].dtype
    return (ctx.op("log_softmax_backward", grads[0], s["out"], dim=d.attr("dim"),
                   dtype=None if dt == d.outputs[0].dtype else dt),)


# -- torch peers and drop-in adapters ------------------------------------------------------------
def _tdt(dtype):
    return None if dtype is None else as_dtype(dtype).torch


def _peer(name):
    def peer(x, dim, dtype=None):
        import torch.nn.functional as F

        return getattr(F, name)(x, dim=dim, dtype=_tdt(dtype))
    return peer


def _peer_bw(aten):
    def peer(g, y, dim, dtype=None):
        import torch

        return getattr(torch.ops.aten, aten)(g, y, dim, _tdt(dtype) or g.dtype)
    return peer


def _dropin(name):
    # torch.nn.functional.softmax(input, dim=None, _stacklevel=3, dtype=None)
    def dropin(input, dim=None, _stacklevel=3, dtype=None):
        if dim is None:
            raise InvalidProblemError(name, "dim", "an explicit dim (torch's implicit dim choice is deprecated; "
                                      f"call {name}(x, dim=-1) for the last axis)", "None")
        if name == "softmin" and dtype is not None and not input.dtype.is_floating_point:
            if input.dtype == DType.bool.torch:
                raise UnsupportedError(name, "argument 'input' has dtype bool; softmin is softmax(-input) and torch "
                                       "does not negate bool tensors")
            # torch's softmin is softmax(-input, dtype): the negation wraps in the integer dtype (-x of uint8 is
            # 256 - x, -(-128) of int8 is -128) before the cast; this op negates again, hence -(cast(-input))
            input = (-input).to(dtype).neg()
        # torch casts an integer/bool input to dtype= first (without dtype= the op refuses it: float only)
        ins = (input,) if dtype is None else float_operands(input, bools=True, to=dtype)
        return ins, {"dim": dim, "dtype": None if dtype is None else as_dtype(dtype)}
    return dropin



# -- samples, errors, workloads, cost ------------------------------------------------------------
_FW_SHAPES = [((), -1), ((7,), 0), ((5, 1), -1), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4, 5), 1), ((2, 3, 4, 5), -1),
              ((33, 65), -1), ((4, 300), 1), ((0, 4), 1), ((3, 0), 0)]


def _fw_samples(rng):
    for shape, dim in _FW_SHAPES:
        yield Sample((3.0 * rng.standard_normal(shape),), {"dim": dim}, name=f"{shape}dim{dim}")
    # dtype=f64: exact for every input dtype (f64 output), so the generic tolerances hold
    yield Sample((rng.standard_normal((3, 9)),), {"dim": 1, "dtype": DType.f64}, name="(3,9)dtype=f64")


def _out_values(op):
    """The saved output of a forward sample, in NumPy (the backward samples' ``out``)."""
    def values(ins, attrs):
        (z,) = ins
        ax = attrs["dim"] % max(z.ndim, 1)
        zz = z.reshape(z.shape or (1,))
        with np.errstate(all="ignore"):
            m = np.max(zz, axis=ax, keepdims=True) if zz.size else zz
            lse = m + np.log(np.sum(np.exp(zz - m), axis=ax, keepdims=True)) if zz.size else zz
        return ((np.exp(zz - lse) if op == "softmax" else zz - lse).reshape(z.shape),)
    return values


def _errors(op):
    def errors():
        from .._core.errors import UnsupportedError

        f = ((3, 4), "f32")
        yield ErrorCase((((3, 4), "i32"),), {"dim": 1}, UnsupportedError, r"dtype i32; the op is defined for",
                        "int-dtype")
        yield ErrorCase((f,), {"dim": 2}, InvalidProblemError,
                        rf"{op}: argument 'dim': expected an axis in \[-2, 1\]",
                        "bad-dim")
        yield ErrorCase((f,), {}, InvalidProblemError, rf"{op}: argument 'dim': expected an int", "no-dim")
        yield ErrorCase((f,), {"dim": 1, "dtype": "i32"}, InvalidProblemError,
                        r"argument 'dtype': expected None or",
                        "int-dtype-attr")
        yield ErrorCase((f,), {"dim": 1, "bogus": 1}, InvalidProblemError, r"argument 'bogus'", "bad-attr")
    return errors


_WL_SHAPES = ((16384, 4096), (4096, 32768), (1024, 131072), (512, 262144))


def _workloads(op):
    w = [Workload(f"{op}-{r}x{c}-bf16", ((r, c),), DType.bf16, {"dim": -1}, backward=True) for r, c in _WL_SHAPES]
    w.append(Workload(f"{op}-16384x4096-f32", ((16384, 4096),), DType.f32, {"dim": -1}, backward=True))
    return tuple(w)


def _cost(flops_per_elem):
    def cost(desc):
        nbytes = sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs)
        return nbytes, flops_per_elem * math.prod(desc.outputs[0].shape)
    return cost


def _tol(dt):
    # one rounding of the output dtype, plus the f32 accumulation of the row sum for f32 (rows up to 300 here)
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-6), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


def _tol_lsm_bw(dt):
    # grad - exp(out) * sum(grad): the result is a difference of terms as large as |exp(out) * sum(grad)|
    # (~300 for the generic suite's arbitrary `out` of N(0,1) over 300-wide rows), so f32's absolute error is
    # ~300 * 2^-24 * a few roundings ~ 5e-5 even where the result itself is small.
    return (2e-5, 5e-5) if dt == DType.f32 else _tol(dt)


_SPECS: dict[str, OpSpec] = {}
for _op, _aten, _grad in (("softmax", "_softmax_backward_data", _g_softmax),
                          ("log_softmax", "_log_softmax_backward_data", _g_log_softmax)):
    _SPECS[_op] = register_spec(OpSpec(
        name=_op, family="softmax", arg_names=("x",), check=_check_fw(_op), dtypes=FLOAT_TYPES,
        attrs=_ATTRS, torch_peer=_peer(_op), torch_name=f"torch.nn.functional.{_op}",
        dropin=_dropin(_op), jax_name=f"jax.nn.{_op}", grad=_grad, saves=("outputs",), differentiable=(0,),
        samples=_fw_samples, errors=_errors(_op), tol=_tol, workloads=_workloads(_op),
        cost=_cost(5 if _op == "softmax" else 4), category="softmax",
        doc=f"{_op} along `dim` (numerically stable; torch's dtype= argument).",
    ))
    _bw = f"{_op}_backward"
    # saves the OUTPUT; dtype= is the gradient's dtype (the forward's input dtype); the dtype= samples are left out
    _SPECS[_bw] = register_spec(backward_spec(
        _SPECS[_op], saved=("out",), forward_of=_forward_of, saved_values=_out_values(_op),
        sample_filter=lambda s: s.attrs.get("dtype") is None, torch_peer=_peer_bw(_aten), torch_name=f"aten.{_aten}",
        tol=_tol_lsm_bw if _op == "log_softmax" else _tol, cost=_cost(4),
        doc=f"fused backward of {_op} from grad and the saved output (one read of each, one write)."))

_SPECS["softmin"] = register_spec(OpSpec(
    name="softmin", family="softmax", arg_names=("x",), check=_check_fw("softmin"), dtypes=FLOAT_TYPES,
    attrs=_ATTRS, torch_peer=_peer("softmin"), torch_name="torch.nn.functional.softmin",
    dropin=_dropin("softmin"), grad=_g_softmin, saves=("outputs",), differentiable=(0,),
    samples=_fw_samples, errors=_errors("softmin"), tol=_tol,
    workloads=(Workload("softmin-16384x4096-bf16", ((16384, 4096),), DType.bf16, {"dim": -1}, backward=True),),
    cost=_cost(5), category="softmax", doc="softmin along `dim`: softmax(-x) in the softmax kernels."))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "log_softmax_backward", "neg", "softmax_backward")
