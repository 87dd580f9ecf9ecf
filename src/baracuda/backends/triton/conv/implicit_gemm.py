"""One implicit-GEMM Triton kernel for every pass of every convolution (1-, 2-, 3-d; forward, transposed, data and
weight gradients), in the image / response vocabulary of ops/conv.py.  Tensors are 5-d views (N, C, D, H, W; a 1-d
or 2-d problem has size-1 leading spatial dims) given by element strides, so a channels-last (NHWC / NDHWC) or any
other strided operand is read in place; the GEMM is never materialized (no im2col buffer).

MODE (a constexpr) picks the product; groups ride on grid axis 1 (a grouped GEMM: depthwise is groups = C):
    CORR    rows: N x response positions, columns: response channels Cr, K: kernel offsets x image channels Ci
            (the A tile is the image gathered at o*s - p + k*d, zero outside; B the weight)   -> response
    SCATTER rows: N x image positions,    columns: image channels Ci,    K: kernel offsets x Cr
            (gather form of the adjoint: image position j takes response o = (j + p - k*d) / s where that is an
            integer in range; no atomics, deterministic)                                      -> image
    WCORR   rows: Cr, columns: Ci, K: N x response positions, one kernel offset per grid-axis-2 slot; long K is
            split over SPLIT slots of grid axis 2 writing f32 partials that one small kernel sums in a fixed
            order (deterministic split-K; SPLIT = 1 writes the weight gradient directly)      -> weight
The K loop of CORR / SCATTER is two loops: kernel offsets outside (the gathered row offsets and their bounds are
computed once per offset, a [BM] vector), channel blocks of BK inside (contiguous in channels-last storage: the
16-byte vector loads NHWC wants).  Accumulation is f32 (f64 for f64); bf16 / f16 operands go through tl.dot's
tensor cores, f32 through tl.dot with input_precision "ieee" (TF32 only under allow_reduced_precision), f64
through tl.dot's f64 path (DMMA on sm_90).

Index arithmetic: every division and remainder is of non-negative values (a negative numerator is clamped before
it is divided and masked after): C's truncation and NumPy's floor (the interpreter) then agree.  Offsets are
int32 unless an operand spans >= 2^31 elements (I64).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...._core.device import triton_interpreting
from .._lib.config import num_sms, overrides
from .._lib.geometry import cdiv
from .._lib.interp import INTERPRETING, loop

__all__ = ["CORR", "SCATTER", "WCORR", "ConvConfig", "choose", "launch", "forced", "as5", "partial_dtype"]

CORR, SCATTER, WCORR = 0, 1, 2
MODE_NAMES = {CORR: "corr", SCATTER: "scatter", WCORR: "wcorr"}
_FORCE, forced = overrides("Force the conv tiles / split-K in tests: forced(bm=16, bn=16, bk=16, split=2).")


@triton.jit
def _split4(r, S1, S2, S3):
    """A flat index over (N, S1, S2, S3) (innermost last) -> its four coordinates."""
    c = r % S3
    t = r // S3
    b = t % S2
    t = t // S2
    return t // S1, t % S1, b, c


@triton.jit
def _split3(k, KH, KW):
    return k // (KH * KW), (k // KW) % KH, k % KW


@triton.jit
def _gather_pos(o, k, S, P, D, SIZE):
    """The image coordinate o*s - p + k*d and whether it is inside the image."""
    i = o * S - P + k * D
    return i, (i >= 0) & (i < SIZE)


@triton.jit
def _source_pos(i, k, S, P, D, SIZE):
    """The response coordinate (i + p - k*d) / s feeding image coordinate i, and whether it exists."""
    t = i + P - k * D
    ok = t >= 0
    t = tl.maximum(t, 0)
    o = t // S
    return o, ok & (o * S == t) & (o < SIZE)


@triton.jit
def _window_pos(p, k, S, P, D, SIZE, MODE: tl.constexpr):
    """The coordinate on the window's side for output coordinate p and tap k: the image's (CORR) or the response's
    (SCATTER), and whether it exists."""
    if MODE == 0:
        return _gather_pos(p, k, S, P, D, SIZE)
    return _source_pos(p, k, S, P, D, SIZE)


@triton.jit
def _mma(a, b, acc, PREC: tl.constexpr, ACC: tl.constexpr, DOT_F32: tl.constexpr):
    if DOT_F32:   # interpreter only: its dot multiplies bf16 bit patterns as integers (exact upcast instead)
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=PREC, out_dtype=ACC)


@triton.jit
def _conv_kernel(img, resp, wt, bias,
                 NB, CI, CR, ID, IH, IW, OD, OH, OW, KD, KH, KW,
                 SD, SH, SW, PD, PH, PW, DD, DH, DW,
                 s_in, s_ic, s_id, s_ih, s_iw,
                 s_rn, s_rc, s_rd, s_rh, s_rw,
                 s_wo, s_wi, s_wd, s_wh, s_ww,
                 s_b, s_split, TILES_N, SPLIT, P_SPLIT,
                 MODE: tl.constexpr, HAS_BIAS: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr,
                 DOT_F32: tl.constexpr, I64: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.program_id(1)
    pid_m = pid // TILES_N
    pid_n = pid % TILES_N
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    if I64:
        rm = rm.to(tl.int64)
        rn = rn.to(tl.int64)
        rk = rk.to(tl.int64)
        g = g.to(tl.int64)
    KT = KD * KH * KW
    acc = tl.zeros((BM, BN), dtype=ACC)
    if MODE < 2:
        # CORR (MODE 0) computes response[n, g*CR + col, o] from the image; SCATTER (MODE 1, its gather form) computes
        # image[n, g*CI + col, i] from the response.  One loop serves both: A is the side read through the window
        # (the image for CORR, the response for SCATTER), K runs over A's channels of the group, the columns over
        # the output's; the weight is [g*CR + r, i, *k] in both, read along i or r accordingly.
        if MODE == 0:
            src, dst, KC, NC, sw_k, sw_n = img, resp, CI, CR, s_wi, s_wo
            sa_n, sa_c, sa_d, sa_h, sa_w = s_in, s_ic, s_id, s_ih, s_iw
            so_n, so_c, so_d, so_h, so_w = s_rn, s_rc, s_rd, s_rh, s_rw
            PD_, PH_, PW_, QD, QH, QW = OD, OH, OW, ID, IH, IW
        else:
            src, dst, KC, NC, sw_k, sw_n = resp, img, CR, CI, s_wo, s_wi
            sa_n, sa_c, sa_d, sa_h, sa_w = s_rn, s_rc, s_rd, s_rh, s_rw
            so_n, so_c, so_d, so_h, so_w = s_in, s_ic, s_id, s_ih, s_iw
            PD_, PH_, PW_, QD, QH, QW = ID, IH, IW, OD, OH, OW
        n, p_d, p_h, p_w = _split4(rm, PD_, PH_, PW_)
        m_ok = rm < NB * PD_ * PH_ * PW_
        col_ok = rn < NC
        row_base = n * sa_n + (g * KC) * sa_c
        col_base = (g * CR) * s_wo + rn * sw_n
        for kpos in loop(0, KT):
            if I64:
                kpos = kpos.to(tl.int64)
            kd, kh, kw = _split3(kpos, KH, KW)
            q_d, ok_d = _window_pos(p_d, kd, SD, PD, DD, QD, MODE)
            q_h, ok_h = _window_pos(p_h, kh, SH, PH, DH, QH, MODE)
            q_w, ok_w = _window_pos(p_w, kw, SW, PW, DW, QW, MODE)
            ok = m_ok & ok_d & ok_h & ok_w
            a_row = row_base + q_d * sa_d + q_h * sa_h + q_w * sa_w
            b_col = col_base + kd * s_wd + kh * s_wh + kw * s_ww
            for c0 in loop(0, KC, BK):
                ck = c0 + rk
                ck_ok = ck < KC
                a = tl.load(src + a_row[:, None] + ck[None, :] * sa_c, mask=ok[:, None] & ck_ok[None, :], other=0.0)
                b = tl.load(wt + ck[:, None] * sw_k + b_col[None, :], mask=ck_ok[:, None] & col_ok[None, :],
                            other=0.0)
                acc = _mma(a, b, acc, PREC, ACC, DOT_F32)
        if HAS_BIAS:
            acc += tl.load(bias + (g * NC + rn) * s_b, mask=col_ok, other=0.0).to(ACC)[None, :]
        out = dst + (n * so_n + p_d * so_d + p_h * so_h + p_w * so_w)[:, None] + ((g * NC + rn) * so_c)[None, :]
        tl.store(out, acc.to(dst.dtype.element_ty), mask=m_ok[:, None] & col_ok[None, :])
    else:              # WCORR: weight[g*CR + row, col, k] (or its f32 partial sum of split slot `part`)
        kz = tl.program_id(2)
        if I64:
            kz = kz.to(tl.int64)
        kpos = kz // SPLIT
        part = kz % SPLIT
        kd, kh, kw = _split3(kpos, KH, KW)
        m_ok = rm < CR
        col_ok = rn < CI
        a_base = (g * CR + rm) * s_rc
        b_base = (g * CI + rn) * s_ic
        P = NB * OD * OH * OW
        p_lo = part * P_SPLIT
        p_hi = tl.minimum(P, p_lo + P_SPLIT)
        for p0 in loop(p_lo, p_hi, BK):
            pk = p0 + rk
            p_ok = pk < p_hi
            n, od, oh, ow = _split4(pk, OD, OH, OW)
            a = tl.load(resp + a_base[:, None] + (n * s_rn + od * s_rd + oh * s_rh + ow * s_rw)[None, :],
                        mask=m_ok[:, None] & p_ok[None, :], other=0.0)
            i_d, ok_d = _gather_pos(od, kd, SD, PD, DD, ID)
            i_h, ok_h = _gather_pos(oh, kh, SH, PH, DH, IH)
            i_w, ok_w = _gather_pos(ow, kw, SW, PW, DW, IW)
            ok = p_ok & ok_d & ok_h & ok_w
            b = tl.load(img + (n * s_in + i_d * s_id + i_h * s_ih + i_w * s_iw)[:, None] + b_base[None, :],
                        mask=ok[:, None] & col_ok[None, :], other=0.0)
            acc = _mma(a, b, acc, PREC, ACC, DOT_F32)
        out = wt + part * s_split + ((g * CR + rm) * s_wo)[:, None] + (rn * s_wi)[None, :] + \
            (kd * s_wd + kh * s_wh + kw * s_ww)
        tl.store(out, acc.to(wt.dtype.element_ty), mask=m_ok[:, None] & col_ok[None, :])


@triton.jit
def _sum_splits_kernel(parts, dw, TOTAL, SPLIT, S1, S2, S3, S4, s0, s1, s2, s3, s4,
                       I64: tl.constexpr, BLOCK: tl.constexpr):
    """dw (5-d, any strides) = the sum over SPLIT contiguous slices of TOTAL partials (f32; f64 for f64), in slice
    order."""
    e = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if I64:
        e = e.to(tl.int64)
    ok = e < TOTAL
    acc = tl.zeros((BLOCK,), dtype=parts.dtype.element_ty)
    for s in loop(0, SPLIT):
        acc += tl.load(parts + s * TOTAL + e, mask=ok, other=0.0)
    a4 = e % S4
    t = e // S4
    a3 = t % S3
    t = t // S3
    a2 = t % S2
    t = t // S2
    a1 = t % S1
    a0 = t // S1
    tl.store(dw + a0 * s0 + a1 * s1 + a2 * s2 + a3 * s3 + a4 * s4, acc.to(dw.dtype.element_ty), mask=ok)


# -- configuration ------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvConfig:
    bm: int
    bn: int
    bk: int
    warps: int
    stages: int
    split: int = 1


def _p2(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(max(int(v), 1))))


def gemm_dims(mode: int, geom) -> tuple[int, int, int]:
    """(rows, columns, K) of a pass (per group; WCORR per kernel offset)."""
    if mode == CORR:
        return geom.n * math.prod(geom.resp), geom.cr, geom.ci * math.prod(geom.kernel)
    if mode == SCATTER:
        return geom.n * math.prod(geom.image), geom.ci, geom.cr * math.prod(geom.kernel)
    return geom.cr, geom.ci, geom.n * math.prod(geom.resp)


def choose(mode: int, geom, dtype: torch.dtype, tf32: bool) -> ConvConfig:
    """Tiles per pass and dtype.  Rows get 128 (64 for f32 / f64 FMA math, whose [BM, BN] accumulator and
    operand tiles live in registers); columns and the channel block (K step) shrink to the channel counts (a
    depthwise group has one channel: 16, tl.dot's minimum, not 128 of which 127 are masked)."""
    m, n, k = gemm_dims(mode, geom)
    kchan = k if mode == WCORR else (geom.ci if mode == CORR else geom.cr)
    if triton_interpreting():
        # few, wide programs: the interpreter pays per operation and per program, hardly per element (a 256 x 64
        # tile costs what a 16 x 16 one does), so a test-sized problem is one or two programs per group; tests
        # force small tiles where they check the tails and the multi-tile order
        base = ConvConfig(_p2(m, 16, 1024), _p2(n, 16, 64), _p2(kchan, 16, 256 if mode == WCORR else 64), 1, 1)
    else:
        half = dtype in (torch.bfloat16, torch.float16)
        fma = dtype == torch.float64 or (dtype == torch.float32 and not tf32)
        bm = _p2(m, 16, 64 if fma else 128)
        bn = _p2(n, 16, 64 if fma else 128)
        bk = _p2(kchan, 16, 16 if fma else 64 if half else 32)
        warps = 8 if bm * bn >= 128 * 128 else 4
        base = ConvConfig(bm, bn, bk, warps, 3 if half else 2)
    split = 1
    if mode == WCORR:
        programs = cdiv(m, base.bm) * cdiv(n, base.bn) * geom.groups * math.prod(geom.kernel)
        if not triton_interpreting():
            # deterministic split-K: enough programs for two waves, each still >= 8 K steps long
            split = max(1, min(cdiv(2 * num_sms(), programs), k // (8 * base.bk), 65535 // math.prod(geom.kernel)))
    cfg = ConvConfig(_FORCE.get("bm", base.bm), _FORCE.get("bn", base.bn), _FORCE.get("bk", base.bk), base.warps,
                     base.stages, _FORCE.get("split", split) if mode == WCORR else 1)
    return cfg


# -- launch ---------------------------------------------------------------------------------------------------------
def as5(t: torch.Tensor) -> torch.Tensor:
    """A (N, C, *spatial) tensor as the kernel's 5-d view (leading size-1 spatial dims), no copy."""
    while t.dim() < 5:
        t = t.unsqueeze(2)
    return t


def _span(t: torch.Tensor) -> int:
    return 1 + sum((d - 1) * abs(s) for d, s in zip(t.shape, t.stride()) if d > 0)


_ACC = {torch.float64: tl.float64}


def partial_dtype(dt: torch.dtype) -> torch.dtype:
    """The dtype of the split-K partial sums: the accumulator's (f64 for f64, else f32)."""
    return torch.float64 if dt == torch.float64 else torch.float32


def launch(mode: int, geom, img, resp, wt, cfg: ConvConfig, prec: str, bias=None, parts=None) -> None:
    """Run one pass.  img, resp, wt: 5-d views (the one MODE writes included); ``parts``: a buffer of
    cfg.split * wt.numel() elements of ``partial_dtype(wt.dtype)`` where WCORR splits K (its slices summed into wt
    afterwards)."""
    m, n, _ = gemm_dims(mode, geom)
    out = {CORR: resp, SCATTER: img, WCORR: wt}[mode]
    if out.numel() == 0:
        return
    split = cfg.split if mode == WCORR else 1
    target = wt
    if split > 1:
        target = parts[: wt.numel()].view(wt.shape)
    tiles_n = cdiv(n, cfg.bn)
    grid = (cdiv(m, cfg.bm) * tiles_n, geom.groups, math.prod(geom.kernel) * split if mode == WCORR else 1)
    if grid[0] == 0:
        return
    kp = cfg.bk
    p_split = cdiv(cdiv(geom.n * math.prod(geom.resp), split), kp) * kp
    # the interpreter checks every int32 add / mul for overflow (int64 ones are exempt): int64 there is ~2x faster
    i64 = INTERPRETING or max(_span(img), _span(resp), _span(target), parts.numel() if parts is not None else 0) >= 2 ** 31
    w_str = target.stride()
    _conv_kernel[grid](
        img, resp, target, bias if bias is not None else out,
        geom.n, geom.ci, geom.cr, *geom.image, *geom.resp, *geom.kernel, *geom.stride, *geom.pad, *geom.dilation,
        *img.stride(), *resp.stride(), *w_str, bias.stride(0) if bias is not None else 0, wt.numel(),
        tiles_n, split, p_split,
        MODE=mode, HAS_BIAS=bias is not None, PREC=prec, ACC=_ACC.get(img.dtype, tl.float32),
        DOT_F32=img.dtype == torch.bfloat16 and INTERPRETING, I64=i64, BM=cfg.bm, BN=cfg.bn, BK=cfg.bk,
        num_warps=cfg.warps, num_stages=cfg.stages)
    if split > 1:
        block = 1024 if not INTERPRETING else 128
        total = wt.numel()
        _sum_splits_kernel[(cdiv(total, block),)](parts, wt, total, split, *wt.shape[1:], *wt.stride(),
                                                   I64=split * total >= 2 ** 31, BLOCK=block)
