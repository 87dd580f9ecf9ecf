"""Triton position encodings: RoPE cos / sin tables (rope_tables) and ALiBi slopes (alibi_slopes).

rope_tables: inv_freq depends on the attributes alone, so it is computed once per plan on the host in float64
(``ops.attention_pos.inv_freq_and_scale``, the reference's own) and handed to the kernel as a small f64 tensor
[inv_freq_0 .. inv_freq_{R/2-1}, attention_factor, 2 pi, 1 / (2 pi)] (constants in the tensor: Triton types
Python float literals and arguments as f32).  A program owns ROWS positions x the R/2 frequencies: the angle
theta = position * inv_freq and its reduction r = theta - 2 pi rint(theta / (2 pi)) are float64 (error
<= ~1e-10 rad at |theta| ~ 1e5: it does not grow into the f32 result), then cos / sin of r in f32 (f64 for
dtype=f64), scaled by the attention factor and stored.  An f32 angle instead is off by |theta| 2^-24 (8e-3 rad at
position 131072): HF's own tables carry that error.  Bytes: the positions read + 2 tables written (f32 [131072,
64] x 2 = 64 MiB: ~21 us at 3 TB/s on the H100); the f64 work is 3 operations per entry (the H100 runs f64 at
half the f32 rate), cos / sin of the reduced f32 angle are libdevice's fast path (no Payne-Hanek reduction).
Positions of any shape are viewed as [N0, N1] (strided in place when that is a view; otherwise reshape copies
the N integers, against N * R / 2 table entries written).

alibi_slopes: one program per 1024 heads computes the exponent -8 (h + 1) / M or -4 (2 (h - M) + 1) / M in f64
(M a power of two: exact) and rounds exp2 of it once to f32.
"""
from __future__ import annotations

import math

import torch
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.attention_pos import inv_freq_and_scale
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.math import cos, exp2, rint, sin
from .._lib.register import register_triton
from .._lib.strided import span

_LIMIT = 2 ** 31 - 1
# table entries a program computes (4 warps), from sm_90 compiles (cuobjdump): f32 1024 (8 a thread: 56 registers;
# 2048 took 109), f64 256 (2 a thread: 48 registers; 2048 took 255 and spilled 952 bytes of stack).  The 40 / 48
# stack bytes left are the same at 48 to 109 registers: libdevice's local array of the large-argument (Payne-Hanek)
# reduction, a path the reduced |r| <= pi never takes, not register spills
_ENTRIES = {False: 1024, True: 256}
_ALIBI_BLOCK = 1024


@fast_kernel
def _tables_kernel(p_ptr, f_ptr, c_ptr, s_ptr, N, N1, sp0, sp1, HALF, F64: tl.constexpr, ROWS: tl.constexpr,
                   BH: tl.constexpr, I64: tl.constexpr):
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    rm = rows < N
    pos = tl.load(p_ptr + (rows // N1) * sp0 + (rows % N1) * sp1, mask=rm, other=0).to(tl.float64)
    k = tl.arange(0, BH)
    km = k < HALF
    inv = tl.load(f_ptr + k, mask=km, other=0.0)
    att = tl.load(f_ptr + HALF)
    two_pi = tl.load(f_ptr + HALF + 1)
    inv_two_pi = tl.load(f_ptr + HALF + 2)
    theta = pos[:, None] * inv[None, :]
    r = theta - rint(theta * inv_two_pi) * two_pi           # |r| <= pi, float64
    if F64:
        c = cos(r) * att
        s = sin(r) * att
    else:
        r32 = r.to(tl.float32)
        a32 = att.to(tl.float32)
        c = cos(r32) * a32
        s = sin(r32) * a32
    o = rows[:, None] * HALF + k[None, :]
    m = rm[:, None] & km[None, :]
    tl.store(c_ptr + o, c, mask=m)
    tl.store(s_ptr + o, s, mask=m)


def _bind_tables(desc, pref=None):
    inv, att = inv_freq_and_scale(desc.attr_dict)
    half = len(inv)
    params = [float(v) for v in inv] + [att, 2 * math.pi, 1 / (2 * math.pi)]
    per_device: dict = {}
    bh = next_power_of_2(max(half, 1))
    f64 = desc.attr("dtype") == DType.f64
    rows = max(1, min(_ENTRIES[f64] // bh, next_power_of_2(max(desc.inputs[0].numel, 1))))

    def run(desc_, inputs, outputs, ws):
        c, s = outputs
        if c.numel() == 0:
            return
        p = inputs[0]
        p = p.reshape(1, 1) if p.dim() == 0 else p.reshape(-1, p.shape[-1])   # a view where one exists
        f = per_device.get(p.device)
        if f is None:
            f = per_device[p.device] = torch.tensor(params, dtype=torch.float64, device=p.device)
        tc = c if c.is_contiguous() else torch.empty(c.shape, dtype=c.dtype, device=c.device)
        ts = s if s.is_contiguous() else torch.empty(s.shape, dtype=s.dtype, device=s.device)
        n = p.numel()
        _tables_kernel[(cdiv(n, rows),)](p, f, tc, ts, n, p.shape[1], *p.stride(), half, F64=f64, ROWS=rows, BH=bh,
                                         I64=max(c.numel(), span(p)) > _LIMIT, num_warps=4)
        for o, t in ((c, tc), (s, ts)):
            if o is not t:
                o.copy_(t)

    return run


def _run_tables(desc, inputs, outputs, ws):
    _bind_tables(desc)(desc, inputs, outputs, ws)


def _tables_precision(desc, pref=None) -> PrecisionGuarantee:
    """The angle and its reduction are f64; cos / sin in the tables' dtype."""
    if desc.attr("dtype") == DType.f64:
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)
    return PrecisionGuarantee(MathPrecision.F32, DType.f64, True, True)


@fast_kernel
def _alibi_kernel(o_ptr, n, M, BLOCK: tl.constexpr):
    h = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    hf = h.to(tl.float64)
    mf = (h * 0 + M).to(tl.float64)          # (M == 1 arrives as a constexpr)
    e = tl.where(h < M, -8.0 * (hf + 1.0) / mf, -4.0 * (2.0 * (hf - mf) + 1.0) / mf)
    tl.store(o_ptr + h, exp2(e).to(tl.float32), mask=h < n)


def _run_alibi(desc, inputs, outputs, ws):
    n = desc.attr("n_heads")
    if n == 0:
        return
    out = outputs[0]
    t = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    _alibi_kernel[(cdiv(n, _ALIBI_BLOCK),)](t, n, 1 << (n.bit_length() - 1), BLOCK=_ALIBI_BLOCK, num_warps=4)
    if t is not out:
        out.copy_(t)


register_triton("rope_tables", _run_tables, bind=_bind_tables, precision=_tables_precision,
                route=lambda d, p: f"triton:rope_tables({d.attr('scaling')})")
register_triton("alibi_slopes", _run_alibi, precision=lambda d, p=None: PrecisionGuarantee(
    MathPrecision.F64, DType.f64, True, True), route="triton:alibi_slopes")
