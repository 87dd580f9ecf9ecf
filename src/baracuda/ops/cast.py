"""Cast family: ``to_dtype`` (every pair of the cast bank), packed int4 ``pack_int4`` / ``unpack_int4``,
and the seeds' ``affine`` (a*x + b).

``to_dtype`` follows torch's ``Tensor.to(dtype)`` bit for bit:

* float -> narrower float: round to nearest, ties to even.  Targets narrower than f32 (f16, bf16, fp8)
  are reached *through f32*, as torch does (c10's half types are built from a float): f64 -> bf16 can
  therefore round twice (``1 + 2**-8 + 2**-30`` -> 1.0 in torch, and here).
* fp8 e4m3fn has no infinity: torch saturates (|x| beyond 448 after rounding, and +-inf, become +-448),
  NaN stays NaN.  fp8 e5m2 rounds overflow to +-inf like IEEE.  That is torch >= 2.13 (CPU and CUDA share
  one C10_HOST_DEVICE encoder); torch 2.11 and earlier were non-saturating and gave NaN (0x7f) for |x| > 464
  and for +-inf (it still rounded (448, 464] to 448).  baracuda keeps the saturating rule on every torch:
  ``torch_e4m3fn_saturated`` maps an older torch's result onto it for comparisons.
* integers -> float: round to nearest even (i64 -> bf16 goes through f32, like torch).
* float -> integer: truncation toward zero through int64, then two's-complement wrap to the target width
  (torch's u8 rule; torch's own result for signed targets outside their range, and for NaN/inf, is
  C++ undefined behaviour: those inputs are unspecified here too).
* integer -> integer: two's-complement wrap.  anything -> bool: ``x != 0`` (complex: either part).
* complex -> real keeps the real part.  The Plan API does so silently (a cast is a request); the torch
  drop-in warns exactly as torch does (UserWarning "Casting complex values to real discards the
  imaginary part").  real -> complex: imaginary part 0.

Packed int4 layout (``pack_int4``): the last axis pairs up; byte k of a row holds element 2k in its low
nibble (bits 0-3) and element 2k+1 in its high nibble (bits 4-7), each as its 4-bit two's complement
(s4) or unsigned (u4) code.  A row of N elements (N even) packs to N/2 bytes (u8 container).
"""
from __future__ import annotations

import warnings

import numpy as np

from .._core.dtypes import FLOAT_TYPES, DType, as_dtype
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._common import check_nonneg

__all__ = ["CAST_TYPES", "FP8_TYPES", "INT4_SOURCES", "UNPACK_TARGETS", "torch_e4m3fn_saturated"]

FP8_TYPES = (DType.f8e4m3, DType.f8e5m2)
CAST_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2, DType.i64, DType.i32,
              DType.i16, DType.i8, DType.u8, DType.bool, DType.c64, DType.c128)
INT4_SOURCES = (DType.i8, DType.u8, DType.i16, DType.i32, DType.i64)
UNPACK_TARGETS = (DType.i8, DType.i16, DType.i32, DType.i64, DType.f16, DType.bf16, DType.f32)
_COMPLEX_WARNING = "Casting complex values to real discards the imaginary part"


def _one(op, inputs):
    if len(inputs) != 1:
        raise InvalidProblemError(op, "inputs", "1 operand", len(inputs))
    check_nonneg(op, ("x",), [inputs[0].shape])


def _target(op, dt, allowed, name="dtype"):
    if dt not in allowed:
        raise UnsupportedError(op, f"argument '{name}' is {dt}; supported: {', '.join(map(str, allowed))}")
    return dt


def _widen(t):
    """torch peer outputs as NumPy-convertible tensors (bf16/fp8 -> f32 is exact)."""
    import torch

    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn, torch.float8_e5m2):
        return t.to(torch.float32)
    return t


# -- to_dtype ------------------------------------------------------------------------------------
def _check_to(inputs, attrs):
    op = "to_dtype"
    _one(op, inputs)
    TO_DTYPE.check_dtypes(inputs)
    dt = _target(op, attrs["dtype"], CAST_TYPES)
    return attrs, (TensorSpec(inputs[0].shape, dt),)


def _grad_to(ctx, d, grads, s):
    src, dst = d.inputs[0].dtype, d.outputs[0].dtype
    g = grads[0]
    inexact = (src.is_floating or src.is_complex) and (dst.is_floating or dst.is_complex)
    if g is None or not inexact:
        return (None,)
    if dst.is_complex and not src.is_complex:   # real -> complex: a real input gets the real part (torch)
        g = ctx.op("real", g)
    return (ctx.op("to_dtype", g, dtype=src),)


def torch_e4m3fn_saturated(x, y):
    """``y = x.to(float8_e4m3fn)`` from any torch, with the saturating rule of torch >= 2.13: an older
    torch's NaN for a non-NaN source (overflow, +-inf) becomes +-448 with the source's sign."""
    import torch

    if y.dtype != torch.float8_e4m3fn:
        return y
    src = x.real if x.is_complex() else x
    over = torch.isnan(y.float()) & ~torch.isnan(src.float())
    if not bool(over.any()):
        return y
    sat = torch.where(torch.signbit(src.float()), -448.0, 448.0).to(y.device)
    return torch.where(over, sat, y.float()).to(torch.float8_e4m3fn)


def _peer_to(x, dtype):
    return _widen(torch_e4m3fn_saturated(x, x.to(as_dtype(dtype).torch)))


def _dropin_to(self, dtype, non_blocking=False, copy=False, *, memory_format=None):
    """``Tensor.to(dtype, non_blocking=False, copy=False, memory_format=torch.preserve_format)``."""
    import torch

    if not isinstance(dtype, torch.dtype):
        raise TypeError("baracuda to_dtype drop-in: only the Tensor.to(dtype) overload is supported "
                        f"(got {type(dtype).__name__} as the first argument)")
    if memory_format not in (None, torch.preserve_format, torch.contiguous_format):
        raise NotImplementedError(f"baracuda to_dtype drop-in: memory_format={memory_format} is not supported")
    if self.is_complex() and not dtype.is_complex:
        warnings.warn(_COMPLEX_WARNING, UserWarning, stacklevel=2)
    return (self,), {"dtype": as_dtype(dtype)}


# Values chosen to hit every rounding rule: ties, double rounding through f32, fp8 saturation/overflow,
# subnormals, signed zero, inf and NaN.
_SPECIAL = np.array([0.0, -0.0, 1.0, -2.5, 1 + 2 ** -8 + 2 ** -30, 1 + 2 ** -11 + 2 ** -40, 448.0, 460.0, 464.0,
                     480.0, -1e6, 57344.0, 61440.0, 65504.0, 65520.0, 3.0e38, 2 ** -10, 3 * 2 ** -10, 2 ** -17,
                     2 ** -24, 1e-30, np.inf, -np.inf, np.nan])


def _samples_to(rng):
    for dt in CAST_TYPES:
        name = dt.short
        grad = dt == DType.f64
        if dt.is_integer or dt == DType.bool:
            # in range for every integer target (also what a float input rounds to)
            yield Sample((np.round(rng.uniform(-100, 100, (3, 5)) * 4) / 4,), {"dtype": dt}, name=f"{name}-(3,5)",
                         grad=False)
            yield Sample((rng.uniform(0, 120, (7,)),), {"dtype": dt}, name=f"{name}-(7,)", grad=False)
        else:
            yield Sample((_SPECIAL.copy(),), {"dtype": dt}, name=f"{name}-special", grad=False)
            yield Sample((rng.standard_normal((2, 3, 4)) * 10,), {"dtype": dt}, name=f"{name}-(2,3,4)", grad=grad)
        yield Sample((np.zeros((0, 3)),), {"dtype": dt}, name=f"{name}-(0,3)", grad=False)
    yield Sample((np.array(1.5),), {"dtype": DType.bf16}, name="scalar", grad=False)


def _errors_to():
    yield ErrorCase((((3,), "f32"),), {}, InvalidProblemError, r"to_dtype: argument 'dtype': expected a target dtype",
                    "no-dtype")
    yield ErrorCase((((3,), "f32"),), {"dtype": "s4"}, UnsupportedError, r"argument 'dtype' is s4", "packed-target")
    yield ErrorCase((((3,), "u32"),), {"dtype": "f32"}, UnsupportedError, r"argument 'x' has dtype u32", "u32-source")
    yield ErrorCase((((3,), "f32"),), {"dtype": "f32", "copy": True}, InvalidProblemError, r"argument 'copy'",
                    "bad-attr")
    yield ErrorCase((((3,), "f32"),) * 2, {"dtype": "f32"}, InvalidProblemError, r"expected 1 operand", "two-inputs")


def _cost_to(d):
    n = d.inputs[0].numel
    return n * (d.inputs[0].dtype.itemsize + d.outputs[0].dtype.itemsize), 0


_N = 64 * 1024 * 1024
TO_DTYPE = register_spec(OpSpec(
    name="to_dtype", family="cast", arg_names=("x",), check=_check_to, dtypes=CAST_TYPES,
    attrs=(Attr("dtype", "dtype", expected="a target dtype"),),
    torch_peer=_peer_to, torch_name="torch.Tensor.to", dropin=_dropin_to, jax_name="jax.lax.convert_element_type",
    grad=_grad_to, saves=(), differentiable=(0,), samples=_samples_to, errors=_errors_to,
    tol=lambda dt: (0.0, 0.0),    # a cast is bit-exact
    grad_tol=lambda dt: (0.0, 0.0),
    workloads=(Workload("to_dtype-64M-bf16->f32", ((_N,),), DType.bf16, {"dtype": DType.f32}, backward=True),
               Workload("to_dtype-64M-f32->bf16", ((_N,),), DType.f32, {"dtype": DType.bf16}),
               Workload("to_dtype-64M-bf16->f8e4m3", ((_N,),), DType.bf16, {"dtype": DType.f8e4m3}),
               Workload("to_dtype-64M-f8e4m3->bf16", ((_N,),), DType.f8e4m3, {"dtype": DType.bf16}),
               Workload("to_dtype-[8,4096,4096]-f32->bf16", ((8, 4096, 4096),), DType.f32, {"dtype": DType.bf16})),
    cost=_cost_to, doc=__doc__.split("\n\n")[1],
))


# -- pack_int4 / unpack_int4 -----------------------------------------------------------------------
_SIGNED = Attr("signed", "bool", True)


def _check_pack(inputs, attrs):
    op = "pack_int4"
    _one(op, inputs)
    PACK.check_dtypes(inputs)
    shape = inputs[0].shape
    if not shape or shape[-1] % 2:
        raise InvalidProblemError(op, "x", "at least 1 dim with an even last dim (two int4 per byte)", shape)
    return attrs, (TensorSpec(shape[:-1] + (shape[-1] // 2,), DType.u8),)


def _check_unpack(inputs, attrs):
    op = "unpack_int4"
    _one(op, inputs)
    UNPACK.check_dtypes(inputs)
    dt = _target(op, attrs["dtype"], UNPACK_TARGETS)
    shape = inputs[0].shape
    if not shape:
        raise InvalidProblemError(op, "x", "at least 1 dim", shape)
    return attrs, (TensorSpec(shape[:-1] + (2 * shape[-1],), dt),)


def _int4_samples(signed):
    lo, hi = (-8, 8) if signed else (0, 16)

    def draw(rng, shape, dt):
        return rng.integers(lo, hi, shape).astype(dt.numpy)
    return draw


def _samples_pack(rng):
    for signed in (True, False):
        draw = _int4_samples(signed)
        for shape, dt in (((8,), DType.i8), ((3, 6), DType.i32), ((2, 3, 4), DType.i64), ((0, 4), DType.i8),
                          ((2, 6), DType.i16)):
            if signed or dt != DType.i8:
                yield Sample((draw(rng, shape, dt),), {"signed": signed}, name=f"{shape}-{dt}-signed={signed}",
                             grad=False)
        if not signed:
            yield Sample((draw(rng, (4, 2), DType.u8),), {"signed": False}, name="u8", grad=False)


def _samples_unpack(rng):
    for signed in (True, False):
        for dt in (DType.i8, DType.f32, DType.bf16):
            for shape in ((5,), (3, 4), (0, 2)):
                yield Sample((rng.integers(0, 256, shape).astype(np.uint8),), {"signed": signed, "dtype": dt},
                             name=f"{shape}-{dt}-signed={signed}", grad=False)


def _errors_pack():
    yield ErrorCase((((3, 5), "i8"),), {}, InvalidProblemError, r"pack_int4: argument 'x': expected .*even last dim",
                    "odd-last-dim")
    yield ErrorCase((((), "i8"),), {}, InvalidProblemError, r"even last dim", "scalar")
    yield ErrorCase((((4,), "f32"),), {}, UnsupportedError, r"argument 'x' has dtype f32", "float-source")
    yield ErrorCase((((4,), "i8"),), {"signed": "yes"}, InvalidProblemError, r"argument 'signed': expected a bool",
                    "bad-signed")


def _errors_unpack():
    yield ErrorCase((((4,), "i8"),), {}, UnsupportedError, r"argument 'x' has dtype i8", "not-u8")
    yield ErrorCase((((4,), "u8"),), {"dtype": "f64"}, UnsupportedError, r"argument 'dtype' is f64", "bad-target")
    yield ErrorCase((((), "u8"),), {}, InvalidProblemError, r"at least 1 dim", "scalar")


def _peer_pack(x, signed):
    import torch

    v = x.to(torch.int64) & 0xF
    return (v[..., 0::2] | (v[..., 1::2] << 4)).to(torch.uint8)


def _peer_unpack(x, signed, dtype):
    import torch

    v = x.to(torch.int64)
    lo, hi = v & 0xF, (v >> 4) & 0xF
    out = torch.stack([lo, hi], dim=-1).reshape(*x.shape[:-1], 2 * x.shape[-1])
    if signed:
        out = out - 16 * (out >= 8).to(torch.int64)
    return _widen(out.to(as_dtype(dtype).torch))


PACK = register_spec(OpSpec(
    name="pack_int4", family="cast", arg_names=("x",), check=_check_pack, dtypes=INT4_SOURCES,
    attrs=(_SIGNED,), torch_peer=_peer_pack, samples=_samples_pack, errors=_errors_pack,
    workloads=(Workload("pack_int4-[4096,14336]-i8", ((4096, 14336),), DType.i8),),
    doc="Pack int4 values (two per byte, low nibble = even index; values are taken modulo 16).",
))
UNPACK = register_spec(OpSpec(
    name="unpack_int4", family="cast", arg_names=("x",), check=_check_unpack, dtypes=(DType.u8,),
    attrs=(_SIGNED, Attr("dtype", "dtype", DType.i8)), torch_peer=_peer_unpack, samples=_samples_unpack,
    errors=_errors_unpack,
    workloads=(Workload("unpack_int4-[4096,7168]->bf16", ((4096, 7168),), DType.u8, {"dtype": DType.bf16}),),
    doc="Unpack int4 pairs (low nibble = even index) to s4 (signed=True) or u4 values of ``dtype``.",
))


# -- affine ----------------------------------------------------------------------------------------
def _check_affine(inputs, attrs):
    op = "affine"
    _one(op, inputs)
    AFFINE.check_dtypes(inputs)
    return attrs, (TensorSpec(inputs[0].shape, inputs[0].dtype),)


def _grad_affine(ctx, d, grads, s):
    return (ctx.op("mul_scalar", grads[0], scalar=d.attr("a")),)


def _samples_affine(rng):
    for shape in ((7,), (3, 5), (2, 3, 4), (0, 4), ()):
        yield Sample((rng.standard_normal(shape),), {"a": -1.75, "b": 0.5}, name=f"{shape}")
    yield Sample((rng.standard_normal((4, 3)),), {"a": 0.0, "b": 3.0}, name="a=0")


def _errors_affine():
    yield ErrorCase((((3,), "f32"),), {"a": "x"}, InvalidProblemError, r"affine: argument 'a': expected a real",
                    "bad-a")
    yield ErrorCase((((3,), "i32"),), {}, UnsupportedError, r"argument 'x' has dtype i32", "int")


AFFINE = register_spec(OpSpec(
    name="affine", family="cast", arg_names=("x",), check=_check_affine, dtypes=FLOAT_TYPES,
    attrs=(Attr("a", "float", 1.0), Attr("b", "float", 0.0)), torch_peer=lambda x, a, b: x * a + b, torch_name=None,
    grad=_grad_affine, saves=(), differentiable=(0,), samples=_samples_affine, errors=_errors_affine,
    workloads=tuple(Workload(f"affine-64M-{dt}", ((_N,),), dt, {"a": 0.5, "b": 1.0}, backward=True)
                    for dt in (DType.bf16, DType.f32)),
    category="elementwise",
    doc="y = a*x + b with scalar a, b (the seeds' AffinePlan); half types compute in f32, one rounding.",
))


# the op names this module's backward rules compose (ctx.op), checked at import (derive.check_op_references)
declare_rule_ops(__name__,
                 "mul_scalar", "to_dtype")
