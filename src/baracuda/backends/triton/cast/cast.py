"""Triton cast kernels: one template for every ``to_dtype`` pair, plus int4 pack/unpack and affine.

The conversion semantics are torch's (see ops/cast.py).  Hardware conversions are used where they are
exactly torch's (f32 -> f16/bf16 is cvt.rn, int <-> float is round-to-nearest-even).  fp8 is encoded and
decoded with integer bit arithmetic on the byte (``x.view(uint8)``): the sm90 cvt instruction is
``satfinite`` (it would saturate e5m2 overflow to 57344 where torch gives inf) and Triton's interpreter
decodes e5m2 inf/NaN as finite numbers, so bit arithmetic is the one path that is exact in both places.
It costs ~20 integer ops per element, far below the memory time: a bf16 -> fp8 cast moves 3 bytes per
element (~1 T elements/s at 3 TB/s on H100), the SMs can do ~30x that integer work.

Strided inputs (e.g. a transposed view, or the real/imag planes of a complex tensor) are read in place
through a <= 6-dim collapsed (shape, strides); the output is written contiguously, 4096 elements per
program (8 warps: 16 elements per thread, 16-byte vectors for 2-byte dtypes).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.strided import RANK, padded, span, strided_offset
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_BLOCK = 4096


@triton.jit
def _dec_fp8(b, KIND: tl.constexpr):
    """fp8 byte -> f32 (exact). KIND 1: e4m3fn (no inf, 0x7f/0xff NaN), 2: e5m2 (IEEE-like)."""
    v = b.to(tl.uint32)
    sign = (v & 0x80) << 24
    if KIND == 1:
        e = (v >> 3) & 0xF
        m = v & 7
        normal = ((e + 120) << 23) | (m << 20)
        sub = (m.to(tl.float32) * 0.001953125).to(tl.uint32, bitcast=True)   # m * 2^-9
        bits = tl.where(e == 0, sub, normal)
        bits = tl.where((v & 0x7F) == 0x7F, 0x7FC00000, bits)
    else:
        e = (v >> 2) & 0x1F
        m = v & 3
        normal = ((e + 112) << 23) | (m << 21)
        sub = (m.to(tl.float32) * 1.52587890625e-05).to(tl.uint32, bitcast=True)   # m * 2^-16
        bits = tl.where(e == 0, sub, tl.where(e == 31, 0x7F800000 | (m << 21), normal))
    return (bits | sign).to(tl.float32, bitcast=True)


@triton.jit
def _round_shift(M, s):
    """M >> s rounded to nearest, ties to even (1 <= s <= 31)."""
    q = M >> s
    rem = M & ((1 << s) - 1)
    half = 1 << (s - 1)
    up = (rem > half) | ((rem == half) & ((q & 1) == 1))
    return q + up.to(tl.uint32)


@triton.jit
def _enc_fp8(x, KIND: tl.constexpr):
    """f32 -> fp8 byte, round to nearest even; e4m3fn saturates to +-448 (torch), e5m2 overflows to inf."""
    u = x.to(tl.uint32, bitcast=True)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    E = a >> 23
    M = (a & 0x7FFFFF) | 0x800000
    if KIND == 1:
        r = ((a + 0x7FFFF + ((a >> 20) & 1)) >> 20) - 960          # drop 20 bits, rebias 127 -> 7
        r = tl.minimum(r, 0x7E)
        q = _round_shift(M, tl.minimum(141 - tl.minimum(E, 141), 31))   # subnormal: units of 2^-9
        res = tl.where(a < 0x3C800000, q, r)
        res = tl.where(a > 0x7F800000, 0x7F, res)
    else:
        r = ((a + 0xFFFFF + ((a >> 21) & 1)) >> 21) - 448          # drop 21 bits, rebias 127 -> 15
        r = tl.minimum(r, 0x7C)
        q = _round_shift(M, tl.minimum(134 - tl.minimum(E, 134), 31))   # subnormal: units of 2^-16
        res = tl.where(a < 0x38800000, q, r)
        res = tl.where(a > 0x7F800000, 0x7F, res)
    return res | sign


@triton.jit
def _enc_bf16(x):
    """f32 -> bf16 bits, round to nearest even (NaN stays a quiet NaN). Bit arithmetic because Triton's
    interpreter truncates f32 -> bf16; on sm90 this is the same 5 integer ops cvt.rn would replace."""
    u = x.to(tl.uint32, bitcast=True)
    r = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    return tl.where(nan, (u >> 16) | 0x40, r)


@fast_kernel
def _cast_kernel(out_ptr, x_ptr, y_ptr, n, S1, S2, S3, S4, S5, a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5,
                 CT: tl.constexpr, SRC_FP8: tl.constexpr, DST_FP8: tl.constexpr,   # 1 e4m3fn, 2 e5m2, 3 bf16 (bit-encoded)
                  MODE: tl.constexpr,
                 TWO: tl.constexpr, OUT_CPLX: tl.constexpr, STRIDED: tl.constexpr, I64: tl.constexpr,
                 BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if I64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if STRIDED:
        oa = strided_offset(offs, S1, S2, S3, S4, S5, a0, a1, a2, a3, a4, a5)
        ob = strided_offset(offs, S1, S2, S3, S4, S5, b0, b1, b2, b3, b4, b5)
    else:
        oa = offs
        ob = offs
    x = tl.load(x_ptr + oa, mask=mask)
    if SRC_FP8 > 0:
        x = _dec_fp8(x, SRC_FP8)
    x = x.to(CT)
    if MODE == 1:        # float -> integer: truncate toward zero through int64
        y = x.to(tl.int64)
    elif MODE == 2:      # -> bool
        y = x != 0
        if TWO:
            y = y | (tl.load(y_ptr + ob, mask=mask).to(CT) != 0)
    else:
        y = x
    if DST_FP8 == 3:
        y = _enc_bf16(y.to(tl.float32))
    elif DST_FP8 > 0:
        y = _enc_fp8(y.to(tl.float32), DST_FP8)
    if OUT_CPLX == 0:
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)
    else:                # interleaved (re, im) of a complex output
        tl.store(out_ptr + 2 * offs, y.to(out_ptr.dtype.element_ty), mask=mask)
        if OUT_CPLX == 2:
            im = tl.load(y_ptr + ob, mask=mask).to(CT)
        else:
            im = tl.zeros_like(x)
        tl.store(out_ptr + 2 * offs + 1, im.to(out_ptr.dtype.element_ty), mask=mask)


_FP8_CODE = {DType.f8e4m3: 1, DType.f8e5m2: 2}
_ENC_CODE = {**_FP8_CODE, DType.bf16: 3}     # outputs encoded by bit arithmetic (see the kernels)
_ENC_VIEW = {DType.f8e4m3: torch.uint8, DType.f8e5m2: torch.uint8, DType.bf16: torch.int16}
_COMPONENT = {DType.c64: DType.f32, DType.c128: DType.f64}
# the dtype the value passes through: torch reaches every float narrower than f32 through f32
_CT_FLOAT = {DType.f64: tl.float64}


def _plan(src: DType, dst: DType):
    """(compute dtype, mode) for a cast: mode 0 value copy/round, 1 float->int, 2 ->bool."""
    s = _COMPONENT.get(src, src)
    d = _COMPONENT.get(dst, dst)
    s_int = s.is_integer or s == DType.bool
    if d == DType.bool:
        return (tl.int64 if s_int else _CT_FLOAT.get(s, tl.float32)), 2
    if d.is_integer:
        return (tl.int64, 0) if s_int else (_CT_FLOAT.get(s, tl.float32), 1)
    return _CT_FLOAT.get(d, tl.float32), 0


def cast_into(x: torch.Tensor, out: torch.Tensor, src: DType, dst: DType) -> None:
    """out[...] = x.to(dst) with torch's rules; x any strides, out any layout of x's shape."""
    n = x.numel()
    if n == 0:
        return
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    ct, mode = _plan(src, dst)
    y = x
    two = False
    if src.is_complex:
        xr = torch.view_as_real(x)
        x, y = xr[..., 0], xr[..., 1]
        two = True
    if src in _FP8_CODE:
        x = y = x.view(torch.uint8)
    o = target
    out_cplx = 0
    if dst.is_complex:
        o = torch.view_as_real(target)
        out_cplx = 2 if src.is_complex else 1
    if dst in _ENC_VIEW:
        o = target.view(_ENC_VIEW[dst])
    shape = tuple(target.shape)
    strided = not (x.is_contiguous() and y.is_contiguous())
    S, st = [1] * RANK, [[0] * RANK, [0] * RANK]
    if strided:
        p = padded(shape, [list(x.stride()), list(y.stride())])
        if p is None:   # > 6 dims after collapsing (rare): a documented contiguize step
            x, y = x.contiguous(), y.contiguous()
            strided = False
        else:
            S, st = p
    i64 = max(2 * n, span(x), span(y)) >= 2 ** 31 - _BLOCK
    _cast_kernel[(cdiv(n, _BLOCK),)](
        o, x, y, n, *S[1:], *st[0], *st[1], CT=ct, SRC_FP8=_FP8_CODE.get(src, 0), DST_FP8=_ENC_CODE.get(dst, 0),
        MODE=mode, TWO=two and (mode == 2 or out_cplx == 2), OUT_CPLX=out_cplx, STRIDED=strided, I64=i64,
        BLOCK=_BLOCK, num_warps=8)
    if target is not out:
        out.copy_(target)


def _run_to(desc, inputs, outputs, ws):
    cast_into(inputs[0], outputs[0], desc.inputs[0].dtype, desc.attr("dtype"))


# -- int4 ----------------------------------------------------------------------------------------------
@fast_kernel
def _pack_kernel(out_ptr, x_ptr, nbytes, BLOCK: tl.constexpr):
    # 2 source elements in, 1 byte out; x is contiguous so the pair is adjacent
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < nbytes
    lo = tl.load(x_ptr + 2 * offs, mask=mask).to(tl.int32) & 0xF
    hi = tl.load(x_ptr + 2 * offs + 1, mask=mask).to(tl.int32) & 0xF
    tl.store(out_ptr + offs, (lo | (hi << 4)).to(tl.uint8), mask=mask)


@fast_kernel
def _unpack_kernel(out_ptr, x_ptr, nbytes, SIGNED: tl.constexpr, FLOAT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < nbytes
    b = tl.load(x_ptr + offs, mask=mask).to(tl.int32)
    lo = b & 0xF
    hi = (b >> 4) & 0xF
    if SIGNED:
        lo = tl.where(lo >= 8, lo - 16, lo)
        hi = tl.where(hi >= 8, hi - 16, hi)
    ty = out_ptr.dtype.element_ty
    if FLOAT:   # through f32 (exact for |v| <= 16); the interpreter mis-converts int32 -> bf16 directly
        tl.store(out_ptr + 2 * offs, lo.to(tl.float32).to(ty), mask=mask)
        tl.store(out_ptr + 2 * offs + 1, hi.to(tl.float32).to(ty), mask=mask)
    else:
        tl.store(out_ptr + 2 * offs, lo.to(ty), mask=mask)
        tl.store(out_ptr + 2 * offs + 1, hi.to(ty), mask=mask)


def _run_pack(desc, inputs, outputs, ws):
    x = inputs[0].contiguous()   # pairs must be adjacent; a strided source is packed from a contiguous copy
    nb = outputs[0].numel()
    if nb:
        out = outputs[0] if outputs[0].is_contiguous() else torch.empty_like(outputs[0])
        _pack_kernel[(cdiv(nb, _BLOCK),)](out, x, nb, BLOCK=_BLOCK, num_warps=8)
        if out is not outputs[0]:
            outputs[0].copy_(out)


def _run_unpack(desc, inputs, outputs, ws):
    x = inputs[0].contiguous()
    nb = x.numel()
    if nb:
        out = outputs[0] if outputs[0].is_contiguous() else torch.empty_like(outputs[0])
        _unpack_kernel[(cdiv(nb, _BLOCK),)](out, x, nb, SIGNED=desc.attr("signed"),
                                                   FLOAT=desc.attr("dtype").is_floating, BLOCK=_BLOCK,
                                                   num_warps=8)
        if out is not outputs[0]:
            outputs[0].copy_(out)


# -- affine: the elementwise template with an a*x + b body (one rounding, computed in f32/f64) -------
@triton.jit
def _affine_body(x, p0, p1):
    return x * p0 + p1


def _run_affine(desc, inputs, outputs, ws):
    from ..elementwise import launch

    launch(_affine_body, inputs, outputs[0], desc.attr("a"), desc.attr("b"))


register_triton("to_dtype", _run_to, route=lambda d, p: "triton:cast_template")
register_triton("pack_int4", _run_pack, route="triton:pack_int4")
register_triton("unpack_int4", _run_unpack, route="triton:unpack_int4")
register_triton("affine", _run_affine, route="triton:ew_template")
