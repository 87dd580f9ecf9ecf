"""Triton kernels of the creation family.

``_constant_kernel`` writes one constant (full / zeros / ones and their ``_like`` forms) or an identity (eye) as
raw bits: the output is viewed as same-width integers (1, 2, 4 or 8 bytes; complex128 as two 8-byte words per
element) and each word gets the bit pattern of the value, computed once on the host by the same NumPy
conversion as the reference backend, so every dtype (fp8, bf16, complex, bool) is bit-exact with it and no
value is rounded in the kernel.

``_range_kernel`` writes arange / linspace / logspace: integer arange in exact int64 arithmetic, everything else
in float64 (the bounds and steps passed as their float64 bit patterns: Triton hands Python floats to kernels as
f32), then converted once to the output dtype (f16 / bf16 through f32; integer types truncated toward zero, as
torch); an integer linspace / logspace with kernel='cuda' follows torch's CUDA kernel instead (float32 terms and
values, powf: ``_line_f32``).  The kernel is compiled without multiply-add contraction (``enable_fp_fusion=False``), so start + i * step
is the same two roundings as NumPy's and torch's CPU loop: integer linspace / logspace truncate the same doubles.
Complex outputs are written as interleaved (re, im) float planes.

Every kernel writes contiguous int64-indexed blocks of 4096 elements (8 warps); a plan binds its launch once
(the grid, the values, the constexprs): a call is the output allocation and the C launch.  ``empty`` /
``empty_like`` have no kernel: the plan's output allocation is the op.
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.creation import arange_terms, cuda_int_terms, fill_of, space_kernel, space_terms
from .._lib.math import cos, exp, pow, sin
from .._lib.geometry import cdiv
from .._lib.launch import bind_kernel, fast_kernel
from .._lib.register import register_triton

_BLOCK = 4096
_WORD = {1: (np.uint8, torch.uint8), 2: (np.int16, torch.int16), 4: (np.int32, torch.int32), 8: (np.int64, torch.int64)}


@fast_kernel
def _constant_kernel(out_ptr, n, cols, V0, V1, K: tl.constexpr, EYE: tl.constexpr, BLOCK: tl.constexpr):
    """n words; K words per element (2: complex128).  EYE: element e = word // K is on the diagonal of a
    [*, cols] matrix when e // cols == e % cols, where its first word gets V0 and every other word 0; else the
    words alternate V0, V1 (K = 2) or are all V0."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    zero = tl.zeros([BLOCK], dtype=tl.int64)
    if EYE:
        e = offs // K
        v = tl.where((e // cols == e % cols) & (offs % K == 0), zero + V0, zero)
    elif K == 2:
        v = tl.where(offs % 2 == 0, zero + V0, zero + V1)
    else:
        v = zero + V0
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=offs < n)


@triton.jit
def _f64(bits):
    """A float64 kernel argument passed as its bit pattern (an int)."""
    return tl.full([], bits, tl.int64).to(tl.float64, bitcast=True)


@triton.jit
def _line(i, n, half, a, e, s):
    """torch's linspace: start + i * step in the first half, end - (n - 1 - i) * step in the second."""
    fi = i.to(tl.float64)
    return tl.where(i < half, a + s * fi, e - s * (n - 1 - i).to(tl.float64))


@triton.jit
def _store(ptr, offs, v, mask, INT: tl.constexpr, HALF: tl.constexpr):
    """v (float64, or int64 for an integer arange) into the output: integers truncated toward zero, f16 / bf16
    through f32."""
    if INT:
        v = v.to(tl.int64)
    elif HALF:
        v = v.to(tl.float32)
    tl.store(ptr + offs, v.to(ptr.dtype.element_ty), mask=mask)


@triton.jit
def _line_f32(i, n, half, a, e, s):
    """torch's CUDA integer linspace: float32 terms, start + step * float(i) / end - step * float(n - 1 - i) as one
    FMA in float32.  The float32 product is exact in float64, so the float64 sum rounded to float32 is the FMA's
    result except on an exact float32 tie of the float64 sum (~2^-28 of sums); the interpreter computes the same."""
    fi = i.to(tl.float32).to(tl.float64)
    fk = (n - 1 - i).to(tl.float32).to(tl.float64)
    return tl.where(i < half, a + s * fi, e - s * fk).to(tl.float32)


@fast_kernel
def _range_kernel(out_ptr, n, half, A, E, S, AI, EI, SI, LB, LBI, MODE: tl.constexpr, INT: tl.constexpr,
                  HALF: tl.constexpr, CPLX: tl.constexpr, F32: tl.constexpr, BLOCK: tl.constexpr):
    """MODE 0 arange (A start, S step; int64 when INT), 1 linspace, 2 logspace (A start, E end, S step; complex:
    AI / EI / SI the imaginary parts).  LB: logspace's base; complex outputs: LB, LBI are log(base), real and
    imaginary (pi for a negative base).  n elements; CPLX: the output is (re, im) float pairs.  F32: an integer
    linspace / logspace by torch's CUDA kernel (float32 arithmetic, powf)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < n
    i = tl.where(mask, offs, 0)      # (the masked lanes compute element 0: no overflow in unused values)
    if MODE == 0:
        if INT:
            v = tl.full([], A, tl.int64) + i * tl.full([], S, tl.int64)
        else:
            v = _f64(A) + i.to(tl.float64) * _f64(S)
        _store(out_ptr, i, v, mask, INT, HALF)
    else:
        re = _line(i, n, half, _f64(A), _f64(E), _f64(S))
        if CPLX:
            im = _line(i, n, half, _f64(AI), _f64(EI), _f64(SI))
            if MODE == 2:      # base ** z = exp(z * log(base))
                lr, li = _f64(LB), _f64(LBI)
                wr = re * lr - im * li
                wi = re * li + im * lr
                mag = exp(wr)
                re, im = mag * cos(wi), mag * sin(wi)
            _store(out_ptr, 2 * i, re, mask, False, False)
            _store(out_ptr, 2 * i + 1, im, mask, False, False)
        elif F32:
            v = _line_f32(i, n, half, _f64(A), _f64(E), _f64(S))
            if MODE == 2:   # powf's value: the float64 power of the float32 operands, rounded once to float32
                # (libdevice's __nv_powf is off by an ulp at exact powers: 10^2 -> 99.99999, truncated to 99)
                b32 = _f64(LB).to(tl.float32).to(tl.float64)
                v = pow(tl.zeros_like(v.to(tl.float64)) + b32, v.to(tl.float64)).to(tl.float32)
            _store(out_ptr, i, v, mask, INT, HALF)
        else:
            if MODE == 2:
                re = pow(tl.zeros_like(re) + _f64(LB), re)
            _store(out_ptr, i, re, mask, INT, HALF)


# -- host side ------------------------------------------------------------------------------------------------
def _words(value, dt: DType) -> tuple:
    """(word values, words per element, word dtype) of ``value`` stored as ``dt``."""
    a = np.asarray(value, dtype=dt.numpy).reshape(1)
    k = 2 if dt.itemsize == 16 else 1
    npw, tw = _WORD[dt.itemsize // k]
    return [int(w) for w in a.view(npw)], k, tw


def _f64_bits(v: float) -> int:
    return int(np.asarray(float(v), np.float64).view(np.int64))


def _flat(out: torch.Tensor, tw) -> torch.Tensor:
    return out.reshape(-1).view(torch.float64 if out.dtype == torch.complex128 else out.dtype).view(tw)


def _contiguous(launch):
    """A bound launch writing a contiguous output; other outputs (Plan.run(out=) of a strided view) are written
    through a contiguous temporary."""
    def run(desc, inputs, outputs, ws):
        out = outputs[0]
        if out.numel() == 0 or launch is None:
            return
        if out.is_contiguous():
            return launch(out)
        tmp = torch.empty(out.shape, dtype=out.dtype, device=out.device)
        launch(tmp)
        out.copy_(tmp)
    return run


def _bind_constant(desc, pref=None):
    t = desc.outputs[0]
    eye = desc.op == "eye"
    v = 1 if eye else fill_of(desc)
    if v is None or t.numel == 0:      # empty / empty_like: the allocation is the op
        return _contiguous(None)
    words, k, tw = _words(v, t.dtype)
    n = t.numel * k
    bound = bind_kernel(_constant_kernel, (cdiv(n, _BLOCK),),
                        (n, t.shape[1] if eye else 1, words[0], words[1] if k == 2 else 0),
                        K=k, EYE=eye, BLOCK=_BLOCK, num_warps=8)
    return _contiguous(lambda out: bound(_flat(out, tw)))


def _bind_range(desc, pref=None):
    t = desc.outputs[0]
    n, dt = t.numel, t.dtype
    if n == 0:
        return _contiguous(None)
    cplx = dt.is_complex
    if desc.op == "arange":
        start, step = arange_terms(desc.attr_dict, dt)
        ints = dt.is_integer
        scal = (n, 0, start if ints else _f64_bits(start), 0, step if ints else _f64_bits(step), 0, 0, 0, 0, 0)
        mode, f32 = 0, False
    else:
        f32 = space_kernel(desc) == "cuda"
        terms = cuda_int_terms if f32 else space_terms
        a, e, s = (complex(v) for v in terms(desc.op, desc.attr_dict, dt))
        mode = 1 if desc.op == "linspace" else 2
        base = desc.attr("base") if mode == 2 else 0.0
        lb = np.log(complex(base)) if cplx else complex(base)     # complex: log(base); real: pow(base, .)
        scal = (n, n // 2, *(_f64_bits(x) for x in (a.real, e.real, s.real, a.imag, e.imag, s.imag, lb.real,
                                                      lb.imag)))
        ints = dt.is_integer
    bound = bind_kernel(_range_kernel, (cdiv(n, _BLOCK),), scal, MODE=mode, INT=ints,
                        HALF=dt in (DType.f16, DType.bf16), CPLX=cplx, F32=f32, BLOCK=_BLOCK, num_warps=8,
                        enable_fp_fusion=False)
    if cplx:
        return _contiguous(lambda out: bound(torch.view_as_real(out)))
    return _contiguous(bound)


_EXACT = PrecisionGuarantee(MathPrecision.EXACT, DType.f64, True, True)
_F64 = PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)


def _route(desc, pref):
    return "triton:alloc-only" if desc.op in ("empty", "empty_like") else f"triton:{desc.op}"


def _run_of(bind):
    def run(desc, inputs, outputs, ws):
        bind(desc)(desc, inputs, outputs, ws)
    return run


for _op in ("full", "zeros", "ones", "empty", "full_like", "zeros_like", "ones_like", "empty_like", "eye"):
    register_triton(_op, _run_of(_bind_constant), bind=_bind_constant, route=_route,
                    precision=lambda d, p=None: _EXACT)    # (bit patterns: nothing is computed)
for _op in ("arange", "linspace", "logspace"):
    register_triton(_op, _run_of(_bind_range), bind=_bind_range, route=_route,
                    precision=lambda d, p=None: _F64)      # (float64, or exact int64 for integer arange)
