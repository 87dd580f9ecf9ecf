"""FFT helpers (issue 19): fftshift / ifftshift (a roll by n // 2, resp. -(n // 2), along each of ``dim``; None: every
dim) and the sample frequencies fftfreq / rfftfreq (creation ops: ``n``, ``d``, ``dtype``).

fftfreq(n, d)[k] = k / (n d) for k < (n + 1) // 2, (k - n) / (n d) after; rfftfreq(n, d)[k] = k / (n d) for
k <= n // 2 (torch.fft's, numpy.fft's).  torch computes them as arange in the output dtype times the f64 scalar
1 / (n d) rounded to that dtype; the reference computes in float64 and rounds once (f32: within 1 ulp of torch's).
The shifts are exact for every dtype; their gradients are the opposite shift.
"""
from __future__ import annotations

import math

from .._core.dtypes import DType
from .._core.errors import InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .._core.derive import declare_rule_ops
from ._factory import default_float, made, scalar
from ._common import no_out

__all__ = ["shift_amounts", "FREQ_DTYPES", "freq_terms"]

SHIFT_DTYPES = (DType.f64, DType.f32, DType.f16, DType.bf16, DType.c64, DType.c128, DType.i64, DType.i32, DType.i16,
                DType.i8, DType.u8, DType.bool)
FREQ_DTYPES = (DType.f64, DType.f32, DType.f16, DType.bf16)


def shift_amounts(desc) -> tuple[tuple, tuple]:
    """(shifts, dims) of the roll a shift descriptor is: n // 2 forward, -(n // 2) back (ifftshift)."""
    x, dims = desc.inputs[0], desc.attr("dim")
    sign = 1 if desc.op == "fftshift" else -1
    return tuple(sign * (x.shape[d] // 2) for d in dims), tuple(dims)


def _check_shift(op):
    def check(inputs, attrs):
        if len(inputs) != 1:
            raise InvalidProblemError(op, "inputs", "1 operand (input)", len(inputs))
        x = inputs[0]
        if x.dtype not in SHIFT_DTYPES:
            raise UnsupportedError(op, f"argument 'input' has dtype {x.dtype}; supported: "
                                       f"{', '.join(map(str, SHIFT_DTYPES))}")
        return attrs, (TensorSpec(x.shape, x.dtype),)
    return check


def _g_shift(ctx, d, grads, s):
    g = grads[0]
    if g is None or not (d.inputs[0].dtype.is_floating or d.inputs[0].dtype.is_complex):
        return (None,)
    return (ctx.op("ifftshift" if d.op == "fftshift" else "fftshift", g, dim=d.attr("dim")),)


def _shift_peer(op):
    def peer(x, dim):
        import torch

        return getattr(torch.fft, op)(x, dim)
    return peer


def _shift_dropin(op):
    def dropin(input, dim=None):
        return (input,), {"dim": dim}
    dropin.__name__ = op
    return dropin


def _shift_samples(rng):
    yield Sample((rng.standard_normal((5,)),), {}, name="odd-1d")
    yield Sample((rng.standard_normal((4, 5)),), {}, name="all-dims")
    yield Sample((rng.standard_normal((3, 4, 5)),), {"dim": (0, 2)}, name="dims")
    yield Sample((rng.standard_normal((2, 6)),), {"dim": -1}, name="int-dim")
    yield Sample((rng.standard_normal((0, 3)),), {"dim": 1}, name="empty", grad=False)


def _shift_errors(op):
    def errors():
        yield ErrorCase((((3, 4), "f32"),), {"dim": 2}, InvalidProblemError, rf"{op}: argument 'dim': expected an axis",
                        "bad-dim")
        yield ErrorCase((((3, 4), "f32"),), {"dim": (1, 1)}, InvalidProblemError, r"argument 'dim': expected distinct",
                        "dup")
        yield ErrorCase((((3, 4), "f8e4m3"),), {}, UnsupportedError, r"argument 'input' has dtype f8e4m3", "fp8")
    return errors


for _op in ("fftshift", "ifftshift"):
    register_spec(OpSpec(
        name=_op, family="fft", arg_names=("input",), check=_check_shift(_op), dtypes=SHIFT_DTYPES,
        attrs=(Attr("dim", "axes", None),), torch_peer=_shift_peer(_op), torch_name=f"torch.fft.{_op}",
        dropin=_shift_dropin(_op), grad=_g_shift, saves=(), differentiable=(0,), samples=_shift_samples,
        errors=_shift_errors(_op), tol=lambda dt: (0.0, 0.0), category="fft",
        workloads=(Workload(f"{_op}-[64,1024,1024]-c64", ((64, 1024, 1024),), DType.c64, {"dim": (1, 2)}),),
        doc=f"torch.fft.{_op}: a roll by {'' if _op == 'fftshift' else '-'}(n // 2) along each of dim (None: all)."))


# -- fftfreq / rfftfreq ----------------------------------------------------------------------------------------------
def freq_terms(desc) -> tuple[int, int, float]:
    """(length, wrap, scale): value k of the output is (k - n if k >= wrap else k) * scale, scale = 1 / (n d)."""
    n, d = desc.attr("n"), desc.attr("d")
    scale = 1.0 / (n * d) if n * d != 0 else math.copysign(math.inf, d)   # (torch: k * inf, 0 * inf = NaN)
    if desc.op == "rfftfreq":
        return n // 2 + 1, n // 2 + 1, scale
    return n, (n + 1) // 2, scale


def _check_freq(op):
    def check(inputs, attrs):
        if inputs:
            raise InvalidProblemError(op, "inputs", "no operands (n, d and dtype are attributes)", len(inputs))
        dt = attrs["dtype"] or DType.f32
        if dt not in FREQ_DTYPES:
            raise UnsupportedError(op, f"dtype {dt}; supported: {', '.join(map(str, FREQ_DTYPES))}")
        n = attrs["n"]
        return dict(attrs, dtype=dt), (TensorSpec((n // 2 + 1 if op == "rfftfreq" else n,), dt),)
    return check


def _freq_peer(op):
    def peer(n, d, dtype):
        import torch

        return getattr(torch.fft, op)(n, d, dtype=dtype.torch)
    return peer


def _freq_dropin(op):
    def dropin(n, d=1.0, *, out=None, dtype=None, layout=None, device=None, pin_memory=False, requires_grad=False):
        return made(op, {"n": n, "d": scalar(op, d, "d")}, dtype, default_float(), out=out, layout=layout,
                    device=device, pin_memory=pin_memory, requires_grad=requires_grad)
    dropin.__name__ = op
    return dropin


def _freq_samples(rng):
    for n, d in ((8, 1.0), (7, 0.25), (1, 2.0), (0, 1.0), (33, 0.1)):
        yield Sample((), {"n": n, "d": d}, name=f"n{n}-d{d}")


def _freq_errors(op):
    def errors():
        yield ErrorCase((), {"n": -1}, InvalidProblemError, rf"{op}: argument 'n': expected an int >= 0", "neg")
        yield ErrorCase((), {"n": 4, "dtype": "i64"}, UnsupportedError, rf"{op}: dtype i64", "int-dtype")
        yield ErrorCase((), {"n": 4.0}, InvalidProblemError, r"argument 'n': expected an int", "float-n")
    return errors


def _freq_tol(dt):
    # torch multiplies in the output dtype (one rounding of k and one of the product): 2 roundings of that dtype
    return {DType.f64: (1e-15, 0.0), DType.f32: (2.5e-7, 0.0), DType.f16: (2e-3, 0.0), DType.bf16: (1.6e-2, 0.0)}[dt]


for _op in ("fftfreq", "rfftfreq"):
    register_spec(OpSpec(
        name=_op, family="fft", arg_names=(), check=_check_freq(_op), dtypes=FREQ_DTYPES,
        attrs=(Attr("n", "int", ge=0), Attr("d", "float", 1.0), Attr("dtype", "dtype", None, optional=True)),
        torch_peer=_freq_peer(_op), torch_name=f"torch.fft.{_op}", dropin=_freq_dropin(_op),
        samples=_freq_samples, errors=_freq_errors(_op), tol=_freq_tol, category="fft",
        workloads=(Workload(f"{_op}-[2^24]-f32", (), DType.f32, {"n": 1 << 24, "dtype": DType.f32}),),
        cost=lambda d: (d.outputs[0].nbytes, d.outputs[0].numel),
        doc=f"torch.fft.{_op}(n, d): the sample frequencies of an FFT of n points with spacing d."))

del _op

declare_rule_ops(__name__, "fftshift", "ifftshift")
