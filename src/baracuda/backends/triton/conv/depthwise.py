"""Direct depthwise convolution (channel multiplier 1: every group has one image and one response channel) for every
pass, in the image / response vocabulary of ops/conv.py, over the same 5-d strided views as implicit_gemm.py.

A depthwise problem is a grouped GEMM of 1 x 1 x K products: the implicit-GEMM kernel pads each to 16 x 16 tiles of
tl.dot (0.08x torch measured on the H100 for ConvNeXt / MobileNet shapes).  Here each output element is a K-tap dot
product done on the CUDA cores, on a [BP positions, BC channels] tile:
    MODE 0 (CORR)    response[n, c, o] = sum_k image[n, c, o*s - p + k*d] w[c, k]      (+ bias)  forward, transposed dgrad
    MODE 1 (SCATTER) image[n, c, i]    = sum_k response[n, c, (i + p - k*d) / s] w[c, k]     dgrad, transposed forward
                                         (gather form: the terms where the division is exact and in range)
    wgrad            w[c, k] = sum_{n, o} response[n, c, o] image[n, c, o*s - p + k*d]: one program per (tap,
                     channel block, split slot) reduces its positions in registers; split slots write f32 partials
                     summed in slot order by implicit_gemm's split-K kernel (deterministic, bit-stable).
Channels-last operands (channel stride 1) get BC up to 64 channels per tile: each tap's load is a row of contiguous
channel vectors; NCHW operands get BC = 1 and BP positions flattened (N, D, H, W) with W innermost, so a tap's load
runs along the contiguous width.  Accumulation in f32 (f64 for f64).
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
from .._lib.interp import loop
from .implicit_gemm import CORR, _gather_pos, _split3, _split4, _sum_splits_kernel, _window_pos, partial_dtype

__all__ = ["is_depthwise", "DwConfig", "dw_choose", "dw_configs", "dw_launch", "dw_workspace", "forced"]

_FORCE, forced = overrides("Force the depthwise tiles / weight-gradient split in tests: forced(bp=16, bc=2, split=3).")


def is_depthwise(geom) -> bool:
    """One image and one response channel per group (depthwise with channel multiplier 1), more than one group."""
    return geom.ci == 1 and geom.cr == 1 and geom.groups > 1


@triton.jit
def _dw_kernel(src, dst, wt, bias, NB, C, QD, QH, QW, PD_, PH_, PW_, KH, KW, KT,
               SD, SH, SW, PD, PH, PW, DD, DH, DW,
               s_sn, s_sc, s_sd, s_sh, s_sw, s_on, s_oc, s_od, s_oh, s_ow, s_wc, s_wd, s_wh, s_ww, s_b,
               MODE: tl.constexpr, HAS_BIAS: tl.constexpr, ACC: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr):
    """dst[n, c, p] = sum_k src[n, c, window(p, k)] w[c, k]: MODE 0 reads the image at o*s - p + k*d (src = image,
    dst = response), MODE 1 the response at (i + p - k*d) / s (src = response, dst = image)."""
    rp = tl.program_id(0).to(tl.int64) * BP + tl.arange(0, BP)
    rc = tl.program_id(1) * BC + tl.arange(0, BC)
    n, p_d, p_h, p_w = _split4(rp, PD_, PH_, PW_)
    p_ok = rp < NB * PD_ * PH_ * PW_
    c_ok = rc < C
    row = n * s_sn
    col = rc.to(tl.int64) * s_sc
    w_col = rc * s_wc
    acc = tl.zeros((BP, BC), dtype=ACC)
    for kpos in loop(0, KT):
        kd, kh, kw = _split3(kpos, KH, KW)
        q_d, ok_d = _window_pos(p_d, kd, SD, PD, DD, QD, MODE)
        q_h, ok_h = _window_pos(p_h, kh, SH, PH, DH, QH, MODE)
        q_w, ok_w = _window_pos(p_w, kw, SW, PW, DW, QW, MODE)
        ok = p_ok & ok_d & ok_h & ok_w
        a = tl.load(src + (row + q_d * s_sd + q_h * s_sh + q_w * s_sw)[:, None] + col[None, :],
                    mask=ok[:, None] & c_ok[None, :], other=0.0)
        w = tl.load(wt + w_col + kd * s_wd + kh * s_wh + kw * s_ww, mask=c_ok, other=0.0)
        acc += a.to(ACC) * w.to(ACC)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias + rc * s_b, mask=c_ok, other=0.0).to(ACC)[None, :]
    out = dst + (n * s_on + p_d * s_od + p_h * s_oh + p_w * s_ow)[:, None] + (rc.to(tl.int64) * s_oc)[None, :]
    tl.store(out, acc.to(dst.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])


@triton.jit
def _dw_wgrad_kernel(img, resp, wt, NB, C, ID, IH, IW, OD, OH, OW, KH, KW,
                     SD, SH, SW, PD, PH, PW, DD, DH, DW,
                     s_in, s_ic, s_id, s_ih, s_iw, s_rn, s_rc, s_rd, s_rh, s_rw, s_wc, s_wd, s_wh, s_ww,
                     s_split, P_SPLIT, ACC: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr):
    """w[c, k] (or split slot ``part``'s partial sum) = sum over positions of response x shifted image."""
    kpos = tl.program_id(0)
    rc = tl.program_id(1) * BC + tl.arange(0, BC)
    part = tl.program_id(2).to(tl.int64)
    kd, kh, kw = _split3(kpos, KH, KW)
    c_ok = rc < C
    c64 = rc.to(tl.int64)
    P = NB * OD * OH * OW
    p_lo = part * P_SPLIT
    p_hi = tl.minimum(P, p_lo + P_SPLIT)
    acc = tl.zeros((BP, BC), dtype=ACC)
    for p0 in loop(p_lo, p_hi, BP):
        rp = p0 + tl.arange(0, BP)
        p_ok = rp < p_hi
        n, od, oh, ow = _split4(rp, OD, OH, OW)
        g = tl.load(resp + (n * s_rn + od * s_rd + oh * s_rh + ow * s_rw)[:, None] + (c64 * s_rc)[None, :],
                    mask=p_ok[:, None] & c_ok[None, :], other=0.0)
        i_d, ok_d = _gather_pos(od, kd, SD, PD, DD, ID)
        i_h, ok_h = _gather_pos(oh, kh, SH, PH, DH, IH)
        i_w, ok_w = _gather_pos(ow, kw, SW, PW, DW, IW)
        ok = p_ok & ok_d & ok_h & ok_w
        x = tl.load(img + (n * s_in + i_d * s_id + i_h * s_ih + i_w * s_iw)[:, None] + (c64 * s_ic)[None, :],
                    mask=ok[:, None] & c_ok[None, :], other=0.0)
        acc += g.to(ACC) * x.to(ACC)
    out = wt + part * s_split + rc * s_wc + kd * s_wd + kh * s_wh + kw * s_ww
    tl.store(out, tl.sum(acc, 0).to(wt.dtype.element_ty), mask=c_ok)


# -- configuration -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DwConfig:
    bp: int
    bc: int
    warps: int
    split: int = 1


def _p2(v: int, lo: int, hi: int) -> int:
    return max(lo, min(hi, triton.next_power_of_2(max(int(v), 1))))


def _channel_block(c: int, channels_last: bool) -> int:
    """Channels per tile: 1 for NCHW (the width is the vector); channels-last the widest power of two <= 64 dividing
    C (96 -> 32, 144 -> 16: no masked lanes), else C's next power of two up to 64."""
    if not channels_last:
        return 1
    for b in (64, 32, 16):
        if c % b == 0:
            return b
    return _p2(c, 1, 64)


def dw_choose(wgrad: bool, geom, channels_last: bool) -> DwConfig:
    """Tiles of one pass: [BP, BC] = 2048 elements channels-last on the GPU (16 f32 accumulators per thread at 4
    warps: 62-94 registers on sm_90 for the bench's bf16 shapes), 512 x 1 NCHW (225-255 registers at 2048); the
    weight gradient splits its positions over enough slots for two waves, each >= 16 tiles long."""
    c = geom.groups
    bc = _channel_block(c, channels_last)
    positions = geom.n * math.prod(geom.resp if wgrad else geom.image)
    if triton_interpreting():   # few, wide programs (the interpreter pays per operation, hardly per element)
        bp, warps, split = _p2(positions, 16, max(1024 // bc, 16)), 1, 1
    else:
        # NCHW (bc = 1): 512 positions; each carries its own int64 (n, d, h, w) split (2048 spilled on sm_90)
        bp, warps, split = _p2(positions, 16, 2048 // bc if channels_last else 512), 4, 1
        if wgrad:
            programs = math.prod(geom.kernel) * cdiv(c, bc)
            split = max(1, min(cdiv(2 * num_sms(), programs), positions // (16 * bp), 65535))
    return DwConfig(_FORCE.get("bp", bp), _FORCE.get("bc", bc), warps, _FORCE.get("split", split) if wgrad else 1)


def dw_configs(wgrad: bool, geom) -> tuple[DwConfig, DwConfig]:
    """(NCHW tile, channels-last tile) of a pass: ``dw_launch`` picks by the strides of the operand it reads (the
    descriptor does not carry strides: a channels_last descriptor may come with NCHW inputs, and the reverse)."""
    return dw_choose(wgrad, geom, False), dw_choose(wgrad, geom, True)


def dw_workspace(geom, cfgs, wdtype: torch.dtype) -> int:
    """Bytes of the weight gradient's split partials (0 without a split), for the larger split of ``cfgs``."""
    split = max(c.split for c in cfgs)
    return partial_dtype(wdtype).itemsize * split * geom.groups * math.prod(geom.kernel) if split > 1 else 0


def _pick(cfgs, t) -> DwConfig:
    return cfgs[t.shape[1] > 1 and t.stride(1) == 1]


_ACC = {torch.float64: tl.float64}


def dw_launch(mode, geom, img, resp, wt, cfgs, bias=None, parts=None, wgrad=False) -> None:
    """One depthwise pass on 5-d views: ``mode`` CORR writes resp, SCATTER writes img (``wgrad``: wt, through
    ``parts`` when the chosen tile splits).  ``cfgs``: ``dw_configs``' pair, chosen by the channel stride of the
    operand read through the window (the image for the weight gradient)."""
    c = geom.groups
    acc = _ACC.get(img.dtype, tl.float32)
    if wgrad:
        if wt.numel() == 0:
            return
        cfg = _pick(cfgs, img)
        target = parts[: wt.numel()].view(wt.shape) if cfg.split > 1 else wt
        p = geom.n * math.prod(geom.resp)
        p_split = cdiv(cdiv(p, cfg.split), cfg.bp) * cfg.bp
        grid = (math.prod(geom.kernel), cdiv(c, cfg.bc), cfg.split)
        _dw_wgrad_kernel[grid](img, resp, target, geom.n, c, *geom.image, *geom.resp, *geom.kernel[1:],
                               *geom.stride, *geom.pad, *geom.dilation, *img.stride(), *resp.stride(),
                               target.stride(0), *target.stride()[2:], wt.numel(), p_split,
                               ACC=acc, BP=cfg.bp, BC=cfg.bc, num_warps=cfg.warps)
        if cfg.split > 1:
            block = 128 if triton_interpreting() else 1024
            _sum_splits_kernel[(cdiv(wt.numel(), block),)](parts, wt, wt.numel(), cfg.split, *wt.shape[1:],
                                                            *wt.stride(), I64=False, BLOCK=block)
        return
    src, dst, q, out_sp = (img, resp, geom.image, geom.resp) if mode == CORR else (resp, img, geom.resp, geom.image)
    cfg = _pick(cfgs, src)
    positions = geom.n * math.prod(out_sp)
    if positions == 0 or c == 0:
        return
    grid = (cdiv(positions, cfg.bp), cdiv(c, cfg.bc))
    _dw_kernel[grid](src, dst, wt, bias if bias is not None else dst, geom.n, c, *q, *out_sp, *geom.kernel[1:],
                     math.prod(geom.kernel), *geom.stride, *geom.pad, *geom.dilation, *src.stride(), *dst.stride(),
                     wt.stride(0), *wt.stride()[2:], bias.stride(0) if bias is not None else 0,
                     MODE=mode, HAS_BIAS=bias is not None, ACC=acc, BP=cfg.bp, BC=cfg.bc, num_warps=cfg.warps)
