"""Creation family: tensors made from attributes alone (torch's factory functions).

full / zeros / ones / empty (a shape and a dtype; ``full`` a value), arange / linspace / logspace (a range),
eye (an identity of n x m), and the ``*_like`` forms zeros_like / ones_like / full_like / empty_like, whose one
operand gives only the shape and the default dtype (its values are never read).  None is differentiable: torch's
factories make leaves (``requires_grad=True`` in a drop-in marks the result).

Values follow torch's scalar conversion (``to_scalar``): a value that overflows the dtype is an error (300 into
u8, 1e40 into f32, 70000 into f16, NaN or inf into an integer type, a complex with an imaginary part into a real
type), fractions truncate toward zero into integer types, negative ints wrap into unsigned types (-1 -> 255, as
torch), any nonzero value is True for bool; f16 / bf16 / fp8 receive the value through f32, as torch does.

The ranges are computed in float64 and rounded once to the output dtype (integer outputs: exact int64 for
arange, truncation toward zero of the float64 value for linspace / logspace, as torch's CPU kernels).  torch's
CUDA kernel computes integer linspace / logspace in float32 instead (a float32 step, float32 values; e.g.
linspace(16777217, 16777219, 3) starts at 16777216 there): ``kernel='cuda'`` (the drop-ins' choice on a CUDA
device) follows that arithmetic (``cuda_int_terms``), so a result matches torch on the device it is made on.  torch
computes linspace in the output dtype itself (a float32 step for float32), and arange / linspace for f16 / bf16
in float32, so its results can differ from these by an ulp of the output dtype.  Lengths and errors are torch's
(``arange``: the integer formula for int64 results, ceil((end - start) / step) in double otherwise; a step of 0,
a step against the bounds' order, infinite bounds are errors).

``empty`` / ``empty_like`` leave the memory uninitialized (torch.empty's contract): only their shape, dtype and
device are defined (``OpSpec.values_unspecified``); no kernel runs.  The drop-ins (``ops/_factory.py`` parses
torch's arguments) take torch's signatures: ``*size`` or a sequence, ``out=``, ``dtype=``, ``layout=torch.strided``,
``device=`` (honouring ``torch.set_default_device``), ``requires_grad=``, ``pin_memory=False``, ``memory_format=``
(the ``*_like`` forms give the input's strides, as torch's ``preserve_format``).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import REQUIRED, Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, default_tol, register_spec
from . import _factory as F

__all__ = ["CREATION_TYPES", "RANGE_TYPES", "SPACE_TYPES", "to_scalar", "fill_of", "linspace_step", "cuda_int_terms",
           "space_kernel"]

CREATION_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2, DType.i64, DType.i32,
                  DType.i16, DType.i8, DType.u8, DType.u32, DType.bool, DType.c64, DType.c128)
RANGE_TYPES = (DType.f64, DType.f32, DType.f16, DType.bf16, DType.i64, DType.i32, DType.i16, DType.i8, DType.u8)
SPACE_TYPES = RANGE_TYPES + (DType.c64, DType.c128)
EYE_TYPES = tuple(d for d in CREATION_TYPES if d != DType.u32)     # (torch's eye has no uint32 kernel)

_INT_RANGE = {DType.i64: (-2 ** 63, 2 ** 63 - 1), DType.i32: (-2 ** 31, 2 ** 31 - 1), DType.i16: (-2 ** 15, 2 ** 15 - 1),
              DType.i8: (-128, 127), DType.u8: (0, 255), DType.u32: (0, 2 ** 32 - 1)}
_FLOAT_MAX = {DType.f64: float(np.finfo(np.float64).max), DType.f32: float(np.finfo(np.float32).max),
              DType.f16: 65504.0, DType.bf16: float(ml_dtypes.finfo(ml_dtypes.bfloat16).max), DType.f8e4m3: 448.0,
              DType.f8e5m2: 57344.0}
_PART = {DType.c64: DType.f32, DType.c128: DType.f64}
_NUMBER_T = (bool, int, float, complex, np.bool_, np.integer, np.floating, np.complexfloating)


# -- torch's scalar conversion ----------------------------------------------------------------------------------
def _overflow(op, arg, v, dt):
    return InvalidProblemError(op, arg, f"a value that converts to {dt} without overflow", v)


def _part(op: str, arg: str, p, dt: DType, shown):
    """One real component in dt (c10's checked conversion: overflows are errors, fractions truncate)."""
    if dt.is_integer:
        lo, hi = _INT_RANGE[dt]
        if isinstance(p, float):
            if p != p or p < lo or p > hi:      # (infinities compare out of range too)
                raise _overflow(op, arg, shown, dt)
            return math.trunc(p)
        p = int(p)
        if lo == 0 and -hi <= p < 0:           # an int into an unsigned type wraps (two's complement), as torch
            return p + hi + 1
        if not lo <= p <= hi:
            raise _overflow(op, arg, shown, dt)
        return p
    if isinstance(p, float) and not math.isfinite(p):
        if math.isinf(p) and dt == DType.f8e4m3:     # (e4m3fn has no infinity; NaN converts everywhere)
            raise _overflow(op, arg, shown, dt)
    elif abs(p) > _FLOAT_MAX[dt]:                    # (exact for ints: 2**1024 is no float at all)
        raise _overflow(op, arg, shown, dt)
    f = float(p)
    return float(np.float32(f)) if dt.itemsize < 4 else f      # f16 / bf16 / fp8: through f32, as torch


def to_scalar(op: str, arg: str, v, dt: DType):
    """``v`` (a Python number) as dtype ``dt`` holds it, by torch's checked scalar conversion: bool for bool (any
    nonzero is True), int for integer types, float for real floating types, complex for complex ones."""
    if dt == DType.bool:
        return bool(v != 0)
    if isinstance(v, complex):
        if not dt.is_complex and v.imag != 0:
            raise _overflow(op, arg, v, dt)
        parts = (v.real, v.imag) if dt.is_complex else (v.real,)
    else:
        parts = (v,)
    conv = [_part(op, arg, p, _PART.get(dt, dt), v) for p in parts]
    return complex(conv[0], conv[1] if len(conv) > 1 else 0.0) if dt.is_complex else conv[0]


def _number(op: str, arg: str, v, real: bool = False):
    if not isinstance(v, _NUMBER_T) or (real and isinstance(v, (complex, np.complexfloating))):
        raise InvalidProblemError(op, arg, "a real number" if real else "a number (bool, int, float or complex)",
                                  repr(v))
    return v.item() if isinstance(v, np.generic) else v


def number_attr(name: str, default=REQUIRED, real: bool = False) -> Attr:
    """A Python number kept as given (bool, int, float, complex; ``real``: not complex); NumPy scalars as Python."""
    return Attr(name, "any", default, normalize=lambda op, v, inputs, attrs: _number(op, name, v, real))


def _value_dtype(v) -> DType:
    """torch's dtype of a fill value: bool -> bool, int -> i64, float -> f32 (the drop-ins pass torch's default
    dtype), complex -> c64."""
    return (DType.bool if isinstance(v, bool) else DType.i64 if isinstance(v, int) else
            DType.c64 if isinstance(v, complex) else DType.f32)


def _dtype_in(op: str, dt: DType, allowed) -> DType:
    if dt not in allowed:
        raise UnsupportedError(op, f"dtype {dt}; the op is defined for {', '.join(map(str, allowed))}")
    return dt


def _no_operands(op: str, inputs):
    if inputs:
        raise InvalidProblemError(op, "inputs", "no operands (shape and dtype are attributes)", len(inputs))


_SHAPE = Attr("shape", "shape", REQUIRED)
_DTYPE = Attr("dtype", "dtype", None, optional=True)


def fill_of(desc):
    """The value every element of a constant creation op holds (``full``, ``zeros``, ``ones``, their ``_like``
    forms), in the output's dtype; None for ``empty`` / ``empty_like`` (uninitialized)."""
    base = desc.op[:-5] if desc.op.endswith("_like") else desc.op
    if base == "empty":
        return None
    v = desc.attr("value") if base == "full" else 1 if base == "ones" else 0
    return to_scalar(desc.op, "value", v, desc.outputs[0].dtype)


def linspace_step(start, end, steps: int):
    """torch's linspace step from the bounds already in the output dtype, in double (complex: complex double)."""
    if steps <= 1:
        return 0.0
    if isinstance(start, complex) or isinstance(end, complex):
        return (complex(end) - complex(start)) / (steps - 1)
    return (float(end) - float(start)) / (steps - 1)


# -- specs -----------------------------------------------------------------------------------------------------------
def _register(name, check, attrs, dtypes, samples, errors, workloads, doc, *, arg_names=(), dropin=None,
              peer=None, tol=None, cost=None, unspecified=False):
    return register_spec(OpSpec(
        name=name, family="creation", arg_names=arg_names, check=check, dtypes=dtypes, attrs=attrs,
        torch_peer=peer, torch_name=f"torch.{name}", dropin=dropin, samples=samples, errors=errors,
        tol=tol or (lambda dt: (0.0, 0.0)), workloads=tuple(workloads), doc=doc, values_unspecified=unspecified,
        cost=cost or (lambda d: (d.outputs[0].nbytes, 0))))


def _torch_peer(fn_name, names):
    """The torch factory called with the descriptor's attributes (``names``: positional, in torch's order)."""
    def peer(*xs, **attrs):
        import torch

        from .cast import _widen

        pos = [attrs.pop(n) for n in names]
        dt = attrs.pop("dtype", None)
        attrs.pop("kernel", None)     # (linspace / logspace: torch's kernel is the device's, the CPU here)
        return _widen(getattr(torch, fn_name)(*xs, *pos, **attrs, dtype=dt.torch if dt is not None else None))
    return peer


# full / zeros / ones / empty ------------------------------------------------------------------------------------
def _check_constant(op):
    def check(inputs, attrs):
        _no_operands(op, inputs)
        out = dict(attrs)
        v = attrs.get("value")
        dt = _dtype_in(op, attrs["dtype"] or (_value_dtype(v) if op == "full" else DType.f32), CREATION_TYPES)
        out["dtype"] = dt
        if op == "full":
            out["value"] = to_scalar(op, "value", v, dt)
        return out, (TensorSpec(attrs["shape"], dt),)
    return check


def _constant_samples(op):
    def samples(rng):
        value = {"full": {"value": 1.5}}.get(op, {})
        for shape in ((3, 5), (7,), (), (2, 3, 4), (0, 3)):
            yield Sample((), {"shape": shape, **value}, name=f"{shape}")
        if op == "full":
            yield Sample((), {"shape": (4,), "value": True}, name="bool-value")
            yield Sample((), {"shape": (2, 2), "value": 7}, name="int-value")
    return samples


def _constant_errors(op):
    def errors():
        v = {"value": 1.0} if op == "full" else {}
        yield ErrorCase((), {"shape": (2, -1), **v}, InvalidProblemError, rf"{op}: argument 'shape'", "negative")
        yield ErrorCase((), {"shape": (2,), "dtype": "s4", **v}, UnsupportedError, rf"{op}: dtype s4", "dtype")
        yield ErrorCase((((2,), "f32"),), {"shape": (2,), **v}, InvalidProblemError, "no operands", "operands")
        if op == "full":
            yield ErrorCase((), {"shape": (2,), "value": 300, "dtype": "u8"}, InvalidProblemError,
                            r"full: argument 'value': expected a value that converts to u8 without overflow", "u8")
            yield ErrorCase((), {"shape": (2,), "value": 70000.0, "dtype": "f16"}, InvalidProblemError,
                            r"converts to f16 without overflow", "f16")
            yield ErrorCase((), {"shape": (2,), "value": 1 + 2j, "dtype": "f32"}, InvalidProblemError,
                            r"converts to f32", "complex-to-real")
            yield ErrorCase((), {"shape": (2,), "value": float("nan"), "dtype": "i32"}, InvalidProblemError,
                            r"converts to i32", "nan-to-int")
            yield ErrorCase((), {"shape": (2,), "value": "a"}, InvalidProblemError,
                            r"full: argument 'value': expected a number", "string")
    return errors


_CONST_DOC = {"full": "A tensor of ``shape`` filled with ``value`` (torch.full: the dtype follows the value when not "
                      "given: bool, int64, the default float, complex).",
              "zeros": "A tensor of ``shape`` filled with 0 (torch.zeros).",
              "ones": "A tensor of ``shape`` filled with 1 (torch.ones).",
              "empty": "An uninitialized tensor of ``shape`` (torch.empty): the plan allocates, no kernel runs."}

for _op in ("full", "zeros", "ones", "empty"):
    _attrs = (_SHAPE, number_attr("value"), _DTYPE) if _op == "full" else (_SHAPE, _DTYPE)
    _register(_op, _check_constant(_op), _attrs, CREATION_TYPES, _constant_samples(_op), _constant_errors(_op),
              [Workload(f"{_op}-[8,4096,4096]-bf16", (), DType.bf16,
                        {"shape": (8, 4096, 4096), "dtype": DType.bf16, **({"value": 0.5} if _op == "full" else {})})],
              _CONST_DOC[_op], dropin=F.constant_dropin(_op), unspecified=_op == "empty",
              peer=_torch_peer(_op, ("shape", "value") if _op == "full" else ("shape",)),
              cost=(lambda d: (0, 0)) if _op == "empty" else None)


# zeros_like / ones_like / full_like / empty_like -------------------------------------------------------------------
def _check_like(op):
    def check(inputs, attrs):
        if len(inputs) != 1:
            raise InvalidProblemError(op, "inputs", "1 operand (the tensor whose shape and dtype it takes)",
                                      len(inputs))
        x = inputs[0]
        dt = _dtype_in(op, attrs["dtype"] or x.dtype, CREATION_TYPES)
        out = dict(attrs, dtype=dt)
        if op == "full_like":
            out["value"] = to_scalar(op, "value", attrs["value"], dt)
        return out, (TensorSpec(x.shape, dt),)
    return check


def _like_samples(op):
    def samples(rng):
        value = {"value": 2.5} if op == "full_like" else {}
        for shape in ((3, 4), (5,), (), (2, 3, 4), (0, 2)):
            yield Sample((rng.standard_normal(shape),), dict(value), name=f"{shape}")
        yield Sample((rng.standard_normal((2, 3)),), {"dtype": DType.i32, **value}, name="dtype-i32")
        yield Sample((rng.standard_normal((3,)),), {"dtype": DType.bool, **value}, name="dtype-bool")
    return samples


def _like_errors(op):
    def errors():
        v = {"value": 1.0} if op == "full_like" else {}
        yield ErrorCase((((2,), "f32"), ((2,), "f32")), dict(v), InvalidProblemError, rf"{op}: argument 'inputs'", "two")
        yield ErrorCase((((2,), "f32"),), {"dtype": "s4", **v}, UnsupportedError, rf"{op}: dtype s4", "dtype")
        if op == "full_like":
            yield ErrorCase((((2,), "u8"),), {"value": -1.5}, InvalidProblemError, r"converts to u8", "overflow")
    return errors


for _op in ("zeros_like", "ones_like", "full_like", "empty_like"):
    _attrs = (number_attr("value"), _DTYPE) if _op == "full_like" else (_DTYPE,)
    _register(_op, _check_like(_op), _attrs, CREATION_TYPES, _like_samples(_op), _like_errors(_op),
              [Workload(f"{_op}-[8,4096,4096]-bf16", ((8, 4096, 4096),), DType.bf16,
                        {"value": 0.5} if _op == "full_like" else {})],
              f"torch.{_op}: the input gives the shape and the default dtype (its values are not read; the drop-in "
              "keeps its strides for memory_format=torch.preserve_format, as torch).",
              arg_names=("input",), dropin=F.like_dropin(_op), unspecified=_op == "empty_like",
              peer=_torch_peer(_op, ("value",) if _op == "full_like" else ()),
              cost=(lambda d: (0, 0)) if _op == "empty_like" else None)


# arange / linspace / logspace ---------------------------------------------------------------------------------
def stored(v, dt: DType):
    """A converted scalar (``to_scalar``) as an element of ``dt`` holds it (f16 / bf16 / f32 rounded), as a Python
    number: what torch computes the ranges from (``start.to<scalar_t>()``)."""
    if not (dt.is_floating or dt.is_complex):
        return v
    a = np.asarray(v, dtype=dt.numpy)
    return complex(a.astype(np.complex128)) if dt.is_complex else float(a.astype(np.float64))


def _range_acc(dt: DType) -> DType:
    """torch's accumulator type of arange on the CPU: int64 for integer results, float for f16 / bf16, double."""
    return DType.i64 if dt.is_integer else DType.f32 if dt.itemsize < 4 else DType.f64


def arange_terms(attrs: dict, dt: DType) -> tuple:
    """(start, step) of an arange with ``attrs`` and output dtype ``dt``, in its accumulator type: value i is
    start + i * step (exact int64 arithmetic for integer results, float64 otherwise), then converted to dt."""
    acc = _range_acc(dt)
    return tuple(to_scalar("arange", n, attrs[n], acc) for n in ("start", "step"))


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _wrap64(v: int) -> int:
    return (v + 2 ** 63) % 2 ** 64 - 2 ** 63


def _check_arange(inputs, attrs):
    op = "arange"
    _no_operands(op, inputs)
    start, end, step = attrs["start"], attrs["end"], attrs["step"]
    integral = all(isinstance(v, int) for v in (start, end, step))     # (bool is an int, as torch's isIntegral)
    dt = _dtype_in(op, attrs["dtype"] or (DType.i64 if integral else DType.f32), RANGE_TYPES)
    ds, de, dst = float(start), float(end), float(step)      # torch checks the bounds in double
    if not (dst > 0 or dst < 0):
        raise InvalidProblemError(op, "step", "a nonzero step", step)
    if not (math.isfinite(ds) and math.isfinite(de)):
        raise InvalidProblemError(op, "end", "finite bounds (unsupported range)", f"{start} -> {end}")
    if not ((dst > 0 and de >= ds) or (dst < 0 and de <= ds)):
        raise InvalidProblemError(op, "step", "a step of the sign of end - start (upper bound and lower bound "
                                              "inconsistent with step sign)", f"{step} for {start} -> {end}")
    acc = _range_acc(dt)
    xs, xe, xst = (to_scalar(op, n, attrs[n], acc) for n in ("start", "end", "step"))
    if dt == DType.i64:     # torch's exact formula on the truncated bounds (int64 arithmetic, wrapping)
        if xst == 0:
            raise InvalidProblemError(op, "step", "a step that is nonzero as an int64", step)
        n = _trunc_div(_wrap64(_wrap64(_wrap64(xe - xs) + xst) - (1 if xst > 0 else -1)), xst)
    else:
        size = (de - ds) / dst
        n = math.ceil(size) if math.isfinite(size) else -1
    if not 0 <= n < 2 ** 63:
        raise InvalidProblemError(op, "end", "a length in [0, 2^63) (invalid size, possible overflow?)", n)
    return dict(attrs, dtype=dt), (TensorSpec((n,), dt),)


def space_terms(op: str, attrs: dict, dt: DType) -> tuple:
    """(start, end, step) of a linspace / logspace with ``attrs`` and output dtype ``dt``: the bounds as dt holds them
    (integer types: truncated; a logspace of one step keeps its start in double, as torch), the step in double;
    value i is start + i * step for i < steps // 2, else end - (steps - 1 - i) * step (torch's symmetric form),
    in double.  Converts only what torch converts (nothing for 0 steps, the start for 1)."""
    steps, start = attrs["steps"], attrs["start"]
    if steps == 0:
        return 0.0, 0.0, 0.0
    if steps == 1 and op == "logspace":
        s = to_scalar(op, "start", start, DType.c128 if dt.is_complex else DType.f64)
        return s, s, 0.0
    s = stored(to_scalar(op, "start", start, dt), dt)
    e = stored(to_scalar(op, "end", attrs["end"], dt), dt) if steps > 1 else s
    return s, e, linspace_step(s, e, steps)


def cuda_int_terms(op: str, attrs: dict, dt: DType) -> tuple:
    """(start, end, step) of an integer linspace / logspace as torch's CUDA kernel holds them (more than one step):
    float32 values (as Python floats).  linspace: step = (float(end) - float(start)) / (steps - 1); logspace:
    step = float(end - start) / (steps - 1), all in float32 (RangeFactories.cu).  Value i is then the float32
    start + step * float(i) for i < steps // 2, else end - step * float(steps - 1 - i) -- one fused multiply-add
    (nvcc contracts it), converted toward zero (linspace) or through powf(float(base), .) (logspace)."""
    f32 = np.float32
    s, e = to_scalar(op, "start", attrs["start"], dt), to_scalar(op, "end", attrs["end"], dt)
    diff = f32(e) - f32(s) if op == "linspace" else f32(e - s)
    return float(f32(s)), float(f32(e)), float(f32(diff) / f32(attrs["steps"] - 1))


def space_kernel(desc) -> str:
    """Whose torch kernel the values of a linspace / logspace follow: 'cuda' for an integer result asked with
    kernel='cuda' (the drop-ins ask for it on a CUDA device: torch's CUDA kernel computes integer ranges in
    float32), else 'cpu' (torch's CPU kernel: double; floating results are the float64 values either way)."""
    return "cuda" if desc.attr("kernel") == "cuda" and desc.outputs[0].dtype.is_integer and desc.attr("steps") > 1 \
        else "cpu"


def _check_space(op):
    def check(inputs, attrs):
        _no_operands(op, inputs)
        cplx = isinstance(attrs["start"], complex) or isinstance(attrs["end"], complex)
        dt = _dtype_in(op, attrs["dtype"] or (DType.c64 if cplx else DType.f32), SPACE_TYPES)
        space_terms(op, attrs, dt)        # the bounds convert to the dtype (torch's overflow errors)
        # (the kernel matters for integer results only: floating ones share one descriptor)
        return dict(attrs, dtype=dt, kernel=attrs["kernel"] if dt.is_integer else "cpu"), \
            (TensorSpec((attrs["steps"],), dt),)
    return check


def _space_tol(dt: DType):
    """Floating outputs: the default tolerance of their (real) dtype (values computed in f64 and rounded once on
    both sides; Triton rounds f16 / bf16 through f32); integer outputs: exact (the same f64 arithmetic, truncated;
    the kernels contract no multiply-add)."""
    return default_tol(_PART.get(dt, dt))


def _range_cost(d):
    return d.outputs[0].nbytes, d.outputs[0].numel


def _arange_samples(rng):
    yield Sample((), {"end": 7}, name="end")
    yield Sample((), {"start": 2, "end": 11, "step": 3}, name="start-end-step")
    yield Sample((), {"start": 10, "end": 0, "step": -3}, name="descending")
    yield Sample((), {"start": -3, "end": 3}, name="negative-start")     # (u8: wraps, as torch)
    yield Sample((), {"start": 1.5, "end": 9.25, "step": 2}, name="float-bounds")   # integer types truncate
    yield Sample((), {"start": 4, "end": 4}, name="empty")


def _space_samples(op):
    def samples(rng):
        base = {"base": 2.0} if op == "logspace" else {}
        hi = 2 if op == "logspace" else 100      # (logspace's values stay within every dtype: 10^2)
        yield Sample((), {"start": 0, "end": hi, "steps": 5}, name="up")
        yield Sample((), {"start": 6 if op == "logspace" else 20, "end": 1, "steps": 6, **base}, name="down")
        yield Sample((), {"start": 0.5, "end": 1.75 if op == "logspace" else 9.75, "steps": 4}, name="fractional")
        yield Sample((), {"start": 0.5, "end": 3, "steps": 1}, name="one-step")
        yield Sample((), {"start": 0, "end": 1, "steps": 0}, name="no-steps")
        if op == "linspace":
            yield Sample((), {"start": 3, "end": 40, "steps": 50}, name="more-steps-than-integers")
    return samples


def _space_errors(op):
    def errors():
        yield ErrorCase((), {"start": 0, "end": 1, "steps": -1}, InvalidProblemError,
                        rf"{op}: argument 'steps': expected an int >= 0", "negative-steps")
        yield ErrorCase((), {"start": 0, "end": 1, "steps": 2.0}, InvalidProblemError, r"argument 'steps'", "float")
        yield ErrorCase((), {"start": 0, "end": 1, "steps": 3, "dtype": "bool"}, UnsupportedError,
                        rf"{op}: dtype bool", "bool")
        yield ErrorCase((), {"start": 0, "end": 300, "steps": 3, "dtype": "u8"}, InvalidProblemError,
                        rf"{op}: argument 'end': expected a value that converts to u8", "overflow")
        yield ErrorCase((), {"start": 1j, "end": 2, "steps": 3, "dtype": "f32"}, InvalidProblemError,
                        rf"{op}: argument 'start'", "complex-into-real")
        if op == "logspace":
            yield ErrorCase((), {"start": 0, "end": 1, "steps": 3, "base": 1j}, InvalidProblemError,
                            r"logspace: argument 'base'", "complex-base")
    return errors


def _arange_errors():
    yield ErrorCase((), {"end": 3, "step": 0}, InvalidProblemError, r"arange: argument 'step': expected a nonzero", "zero")
    yield ErrorCase((), {"start": 3, "end": 0}, InvalidProblemError, r"inconsistent with step sign", "sign")
    yield ErrorCase((), {"end": float("inf")}, InvalidProblemError, r"arange: argument 'end': expected finite", "inf")
    yield ErrorCase((), {"end": 5, "step": 0.5, "dtype": "i64"}, InvalidProblemError, r"nonzero as an int64", "trunc0")
    yield ErrorCase((), {"start": 0.0, "end": 1e30, "step": 1e-30}, InvalidProblemError, r"invalid size", "size")
    yield ErrorCase((), {"end": 10 ** 19}, InvalidProblemError, r"converts to i64 without overflow", "int64")
    yield ErrorCase((), {"end": 2j}, InvalidProblemError, r"arange: argument 'end': expected a real number", "complex")
    yield ErrorCase((), {"end": 3, "dtype": "bool"}, UnsupportedError, r"arange: dtype bool", "bool")


_register("arange", _check_arange, (number_attr("start", 0, real=True), number_attr("end", real=True),
                                    number_attr("step", 1, real=True), _DTYPE), RANGE_TYPES, _arange_samples,
          _arange_errors, [Workload("arange-[2^28]-i64", (), DType.i64, {"end": 2 ** 28, "dtype": DType.i64}),
                           Workload("arange-[2^28]-f32", (), DType.f32, {"end": 2 ** 26, "step": 0.25,
                                                                         "dtype": DType.f32})],
          "torch.arange (start + i * step; the length and the errors as torch's).", dropin=F.arange_dropin,
          peer=_torch_peer("arange", ("start", "end", "step")), tol=_space_tol, cost=_range_cost)
for _op in ("linspace", "logspace"):
    _attrs = (number_attr("start"), number_attr("end"), Attr("steps", "int", REQUIRED, ge=0), _DTYPE,
              Attr("kernel", "str", "cpu", choices=("cpu", "cuda"), expected="'cpu' or 'cuda' (whose torch kernel's "
                   "arithmetic an integer result follows)"))
    _register(_op, _check_space(_op), _attrs + ((Attr("base", "float", 10.0),) if _op == "logspace" else ()),
              SPACE_TYPES, _space_samples(_op), _space_errors(_op),
              [Workload(f"{_op}-[2^28]-f32", (), DType.f32, {"start": -3.0, "end": 3.0, "steps": 2 ** 28,
                                                              "dtype": DType.f32})],
              f"torch.{_op} (torch's symmetric form: the first half from start, the second from end"
              + ("; base ** that)." if _op == "logspace" else ")."), dropin=F.space_dropin(_op), tol=_space_tol,
              peer=_torch_peer(_op, ("start", "end", "steps")), cost=_range_cost)


# eye --------------------------------------------------------------------------------------------------------------
def _check_eye(inputs, attrs):
    _no_operands("eye", inputs)
    n, m = attrs["n"], attrs["m"]
    dt = _dtype_in("eye", attrs["dtype"] or DType.f32, EYE_TYPES)
    return dict(attrs, m=n if m is None else m, dtype=dt), (TensorSpec((n, n if m is None else m), dt),)


_register("eye", _check_eye, (Attr("n", "int", REQUIRED, ge=0), Attr("m", "int", None, optional=True, ge=0), _DTYPE),
          EYE_TYPES, lambda rng: [Sample((), {"n": 3}, name="square"), Sample((), {"n": 2, "m": 5}, name="wide"),
                                  Sample((), {"n": 4, "m": 1}, name="tall"), Sample((), {"n": 0}, name="empty"),
                                  Sample((), {"n": 3, "m": 0}, name="no-columns")],
          lambda: [ErrorCase((), {"n": -1}, InvalidProblemError, r"eye: argument 'n': expected an int >= 0", "n"),
                   ErrorCase((), {"n": 2, "m": -1}, InvalidProblemError, r"eye: argument 'm'", "m"),
                   ErrorCase((), {"n": 2.0}, InvalidProblemError, r"eye: argument 'n'", "float"),
                   ErrorCase((), {"n": 2, "dtype": "u32"}, UnsupportedError, r"eye: dtype u32", "u32")],
          [Workload("eye-[16384,16384]-bf16", (), DType.bf16, {"n": 16384, "dtype": DType.bf16})],
          "torch.eye: ones on the main diagonal of an n x m matrix (m defaults to n).", dropin=F.eye_dropin,
          peer=_torch_peer("eye", ("n", "m")))
