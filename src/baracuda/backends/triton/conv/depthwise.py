"""Direct depthwise convolution (channel multiplier 1: every group has one image and one response channel) for every
pass, in the image / response vocabulary of ops/conv.py, over the same 5-d strided views as implicit_gemm.py.

A depthwise problem is a grouped GEMM of 1 x 1 x K products: the implicit-GEMM kernel pads each to 16 x 16 tiles of
tl.dot (0.08x torch measured on the H100 for ConvNeXt / MobileNet shapes).  Here each output element is a K-tap dot
product done on the CUDA cores, on a [BP positions, BC channels] tile:
    MODE 0 (CORR)    response[n, c, o] = sum_k image[n, c, o*s - p + k*d] w[c, k]      (+ bias)  forward, transposed dgrad
    MODE 1 (SCATTER) image[n, c, i]    = sum_k response[n, c, (i + p - k*d) / s] w[c, k]     dgrad, transposed forward
                                         (gather form: the terms where the division is exact and in range)
    wgrad            w[c, k] = sum_{n, o} response[n, c, o] image[n, c, o*s - p + k*d]
Two kernel sets:
  - tap-unrolled, 1-d / 2-d with <= 64 taps (every bench shape): kernel size, strides and dilations are constexpr.
    The forward / data gradient tile is BP consecutive positions of one sample x BC channels, split into (h, w) once;
    the kw taps are unrolled inside a kh loop (a loop, not unrolled: it bounds the loads the scheduler hoists, 111-142
    registers for 7 x 7 instead of 255 + spills), each tap one scalar offset from the tap-0 address (CORR, and
    SCATTER at stride 1: a correlation the other way); strided SCATTER resolves the exact divisions per kh / kw with
    constexpr strides (shifts and masks).  The weight gradient reads each [BP, BC] response tile once for all taps:
    the taps are a tensor axis of [KT, BP, BC] accumulators (KT = taps padded to a power of two), the image gathered
    as a [KT, BP, BC] tile (overlapping windows hit L1), one program per (channel block, slot of output rows).
  - generic (3-d, > 64 taps): runtime taps, per-position int64 (n, d, h, w) index split; the weight gradient one
    program per (tap, channel block, split slot).
Split slots write f32 partials summed in slot order by implicit_gemm's split-K kernel (deterministic, bit-stable).
Channels-last operands (channel stride 1) get BC up to 64 channels per tile: each tap's load is a row of contiguous
16-byte channel vectors; NCHW operands get BC = 1 and positions along the contiguous width.  Accumulation in f32
(f64 for f64).
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
from .implicit_gemm import (CORR, _gather_pos, _source_pos, _span, _split3, _split4, _sum_splits_kernel, _window_pos,
                            partial_dtype)

__all__ = ["is_depthwise", "unrolled", "DwConfig", "dw_choose", "dw_configs", "dw_launch", "dw_workspace",
           "forced"]

_FORCE, forced = overrides("Force the depthwise tiles / weight-gradient split / paths in tests and sweeps: "
                           "forced(bp=16, bc=2, split=3, warps=8, unrolled=False (the generic kernels), i64=True).")


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


@triton.jit
def _channels_ok(rc, C, BC: tl.constexpr, EVEN_C: tl.constexpr):
    """The channel mask; a constant where BC divides C, so the masks stay uniform along 16-byte channel vectors."""
    if EVEN_C:
        return tl.full([BC], 1, tl.int1)
    return rc < C


@triton.jit
def _tap0(p, S: tl.constexpr, P, MODE: tl.constexpr):
    """The window coordinate of output coordinate p at tap 0 where taps move it linearly (CORR: o*s - p, tap k adds
    k*d; unit-stride SCATTER: i + p, tap k subtracts k*d)."""
    if MODE == 0:
        return p * S - P
    return p + P


@triton.jit
def _dw2_kernel(src, dst, wt, bias, C, QH, QW, PH_, PW_, PH, PW,
                s_sn, s_sc, s_sh, s_sw, s_on, s_oc, s_oh, s_ow, s_wc, s_wh, s_ww, s_b,
                MODE: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr,
                DH: tl.constexpr, DW: tl.constexpr, HAS_BIAS: tl.constexpr, ACC: tl.constexpr, BP: tl.constexpr,
                BC: tl.constexpr, EVEN_C: tl.constexpr, I64: tl.constexpr):
    """``_dw_kernel`` for 1-d / 2-d problems, kernel size, strides and dilations constexpr: a program is BP
    consecutive output positions of one sample (flat over (h, w): no tile padding at any width) x BC channels.
    Positions are split into (h, w) once per tile; the kw taps are unrolled in a loop over kh, a tap then costs a
    scalar offset, a bounds test per position and one load of contiguous channel vectors.  Offsets inside a sample
    are int32 unless it spans >= 2^30 elements (I64); the sample's base is an int64 scalar."""
    tiles = tl.cdiv(PH_ * PW_, BP)
    n = tl.program_id(0) // tiles
    r = (tl.program_id(0) % tiles) * BP + tl.arange(0, BP)
    rc = tl.program_id(1) * BC + tl.arange(0, BC)
    if I64:
        r = r.to(tl.int64)
        rc = rc.to(tl.int64)
    p_h = r // PW_
    p_w = r % PW_
    p_ok = r < PH_ * PW_
    c_ok = _channels_ok(rc, C, BC, EVEN_C)
    src += n.to(tl.int64) * s_sn
    dst += n.to(tl.int64) * s_on
    col = (rc * s_sc)[None, :]
    w_col = wt + rc * s_wc
    acc = tl.zeros((BP, BC), dtype=ACC)
    LINEAR: tl.constexpr = MODE == 0 or (SH == 1 and SW == 1)
    if LINEAR:   # every tap reads at one scalar offset from the tap-0 coordinates
        SIGN: tl.constexpr = 1 if MODE == 0 else -1
        q_h0 = _tap0(p_h, SH, PH, MODE)
        q_w0 = _tap0(p_w, SW, PW, MODE)
        base = src + (q_h0 * s_sh + q_w0 * s_sw)[:, None] + col
    for kh in tl.range(KH):
        step_h = kh * DH
        if I64:
            step_h = step_h.to(tl.int64)
        if LINEAR:
            q_h = q_h0 + SIGN * step_h
            ok_h = p_ok & (q_h >= 0) & (q_h < QH)
        else:
            q_h, ok_h = _source_pos(p_h, kh, SH, PH, DH, QH)
            ok_h = ok_h & p_ok
        for kw in tl.static_range(KW):
            if LINEAR:
                q_w = q_w0 + SIGN * kw * DW
                ok = ok_h & (q_w >= 0) & (q_w < QW)
                ptr = base + SIGN * (step_h * s_sh + (kw * DW) * s_sw)
            else:
                q_w, ok_w = _source_pos(p_w, kw, SW, PW, DW, QW)
                ok = ok_h & ok_w
                ptr = src + (q_h * s_sh + q_w * s_sw)[:, None] + col
            a = tl.load(ptr, mask=ok[:, None] & c_ok[None, :], other=0.0)
            w = tl.load(w_col + kh * s_wh + kw * s_ww, mask=c_ok, other=0.0)
            acc += a.to(ACC) * w.to(ACC)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias + rc * s_b, mask=c_ok, other=0.0).to(ACC)[None, :]
    out = dst + (p_h * s_oh + p_w * s_ow)[:, None] + (rc * s_oc)[None, :]
    tl.store(out, acc.to(dst.dtype.element_ty), mask=p_ok[:, None] & c_ok[None, :])


@triton.jit
def _dw2_wgrad_kernel(img, resp, wt, C, IH, IW, OH, OW, PH, PW,
                      s_in, s_ic, s_ih, s_iw, s_rn, s_rc, s_rh, s_rw, s_wc, s_wh, s_ww, s_split, ROWS, ROWS_SPLIT,
                      KH: tl.constexpr, KW: tl.constexpr, SH: tl.constexpr, SW: tl.constexpr, DH: tl.constexpr,
                      DW: tl.constexpr, KT: tl.constexpr, ACC: tl.constexpr, BP: tl.constexpr, BC: tl.constexpr,
                      EVEN_C: tl.constexpr, I64: tl.constexpr):
    """Every tap of a channel block in one program: w[c, t] (or split slot ``part``'s partial) = sum over the
    output rows [part * ROWS_SPLIT, ...) of response x shifted image.  The taps are a tensor axis (KT: KH * KW padded
    to a power of two), so a [BP positions, BC] response tile is read once for all of them and an image tile
    [KT, BP, BC] is gathered beside it (the overlapping windows hit L1); [KT, BP, BC] f32 accumulators, summed over
    positions once at the end.  A program walks whole output rows (n, oh): the per-row tap bounds are a [KT] vector,
    the per-position ones a [KT, BP] tile."""
    rc = tl.program_id(0) * BC + tl.arange(0, BC)
    part = tl.program_id(1)
    t = tl.arange(0, KT)
    ri = tl.arange(0, BP)
    if I64:
        rc = rc.to(tl.int64)
        t = t.to(tl.int64)
        ri = ri.to(tl.int64)
    kh = t // KW
    kw = t % KW
    t_ok = t < KH * KW
    c_ok = _channels_ok(rc, C, BC, EVEN_C)
    tap_off = (kh * (DH * s_ih) + kw * (DW * s_iw))[:, None]
    col_i = (rc * s_ic)[None, None, :]
    col_r = (rc * s_rc)[None, :]
    acc = tl.zeros((KT, BP, BC), dtype=ACC)
    lo = part * ROWS_SPLIT
    for row in loop(lo, tl.minimum(ROWS, lo + ROWS_SPLIT)):
        n = row // OH
        oh = row % OH
        if I64:
            oh = oh.to(tl.int64)
        ih = oh * SH - PH + kh * DH
        h_ok = t_ok & (ih >= 0) & (ih < IH)
        x_row = img + n.to(tl.int64) * s_in + (oh * SH - PH) * s_ih
        g_row = resp + n.to(tl.int64) * s_rn + oh * s_rh
        for ow0 in loop(0, OW, BP):
            ow = ow0 + ri
            o_ok = ow < OW
            g = tl.load(g_row + (ow * s_rw)[:, None] + col_r, mask=o_ok[:, None] & c_ok[None, :], other=0.0)
            iw = (ow * SW - PW)[None, :] + (kw * DW)[:, None]
            ok = h_ok[:, None] & o_ok[None, :] & (iw >= 0) & (iw < IW)
            x = tl.load(x_row + (tap_off + ((ow * SW - PW) * s_iw)[None, :])[:, :, None] + col_i,
                        mask=ok[:, :, None] & c_ok[None, None, :], other=0.0)
            acc += g.to(ACC)[None, :, :] * x.to(ACC)
    out = wt + part.to(tl.int64) * s_split + (kh * s_wh + kw * s_ww)[:, None] + (rc * s_wc)[None, :]
    tl.store(out, tl.sum(acc, 1).to(wt.dtype.element_ty), mask=t_ok[:, None] & c_ok[None, :])


# -- configuration -------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DwConfig:
    bp: int             # positions per tile (the unrolled weight gradient: per step along an output row)
    bc: int
    warps: int
    split: int = 1
    unrolled: bool = False    # the tap-unrolled 1-d / 2-d kernels (_dw2_kernel, _dw2_wgrad_kernel)


_MAX_TAPS = 64   # unrolled forward code / the weight gradient's [KT, BP, BC] accumulators (8 x 8 at most)


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


def unrolled(geom) -> bool:
    """Whether a problem takes the tap-unrolled kernels: 1-d / 2-d (no depth) with at most 64 taps."""
    return (geom.image[0] == geom.resp[0] == geom.kernel[0] == 1 and math.prod(geom.kernel) <= _MAX_TAPS
            and _FORCE.get("unrolled", True))


def dw_choose(wgrad: bool, geom, channels_last: bool, dtype: torch.dtype = torch.float32) -> DwConfig:
    """Tiles of one pass (GPU, 4 warps; f64 halves them, its registers).  Tap-unrolled forward / data gradient:
    [BP, BC] = 2048 channels-last (16 f32 accumulators a thread: 72-142 registers on sm_90 for the bench shapes; 4096
    cut the instructions per tap by 15% at 136-212 registers, 2 blocks an SM), 1024 x 1 NCHW (95 registers);
    tap-unrolled weight gradient: KT * BP * BC = 4096 (77-124 registers), its output rows split over enough slots for
    ~8 programs an SM.  Generic kernels: [BP, BC] = 2048 channels-last, 512 x 1 NCHW (2048 NCHW spilled: each
    position carries its own int64 (n, d, h, w) split); the weight gradient's positions split over two waves, >= 16
    tiles a slot."""
    c = geom.groups
    bc = _channel_block(c, channels_last)
    fast = unrolled(geom)
    positions = geom.n * math.prod(geom.resp if wgrad else geom.image)
    interp = triton_interpreting()   # few, wide programs (the interpreter pays per operation, hardly per element)
    warps, split = _FORCE.get("warps", 1 if interp else 4), 1
    budget = 1024 if interp else (2048 if dtype == torch.float64 else 4096)
    if fast and wgrad:
        kt = triton.next_power_of_2(math.prod(geom.kernel))
        bp = min(_p2(budget // (kt * bc), 1, 64), _p2(geom.resp[2], 1, 64))
        if not interp:
            rows = geom.n * geom.resp[1]
            # ~8 programs an SM (with 2 waves' worth, 270 programs for 144 channels, the H200 kernel ran at 12.6 %
            # achieved occupancy, 382 us; the slots' partials are KT x C floats each)
            split = max(1, min(cdiv(8 * num_sms(), cdiv(c, bc)), cdiv(rows, 4), 65535))
    else:
        tile = budget if interp else budget // 2
        bp = _p2(positions, 16, max(tile // bc, 16) if channels_last or interp else (tile // 2 if fast else 512))
        if wgrad and not interp:
            programs = math.prod(geom.kernel) * cdiv(c, bc)
            split = max(1, min(cdiv(2 * num_sms(), programs), positions // (16 * bp), 65535))
    return DwConfig(_FORCE.get("bp", bp), _FORCE.get("bc", bc), warps, _FORCE.get("split", split) if wgrad else 1,
                    fast)


def dw_configs(wgrad: bool, geom, dtype: torch.dtype = torch.float32) -> tuple[DwConfig, DwConfig]:
    """(NCHW tile, channels-last tile) of a pass: ``dw_launch`` picks by the strides of the operand it reads (the
    descriptor does not carry strides: a channels_last descriptor may come with NCHW inputs, and the reverse)."""
    return dw_choose(wgrad, geom, False, dtype), dw_choose(wgrad, geom, True, dtype)


def dw_workspace(geom, cfgs, wdtype: torch.dtype) -> int:
    """Bytes of the weight gradient's split partials (0 without a split), for the larger split of ``cfgs``."""
    split = max(c.split for c in cfgs)
    return partial_dtype(wdtype).itemsize * split * geom.groups * math.prod(geom.kernel) if split > 1 else 0


def _pick(cfgs, t) -> DwConfig:
    return cfgs[t.shape[1] > 1 and t.stride(1) == 1]


def _hw(t) -> tuple:
    """(n, c, h, w) strides of a 5-d view (the unrolled kernels' operands have depth 1)."""
    s = t.stride()
    return s[0], s[1], s[3], s[4]


def _i64(*views) -> bool:
    """Whether one sample of an operand reaches past int32 offsets (margin for the masked out-of-window taps)."""
    return _FORCE.get("i64", False) or any(_span(v[0]) >= 2 ** 30 for v in views if v.shape[0] > 0)


_ACC = {torch.float64: tl.float64}


def _wgrad(geom, img, resp, target, cfg, acc) -> None:
    c = geom.groups
    if cfg.unrolled:
        rows = geom.n * geom.resp[1]
        kt = math.prod(geom.kernel)
        _dw2_wgrad_kernel[(cdiv(c, cfg.bc), cfg.split)](
            img, resp, target, c, *geom.image[1:], *geom.resp[1:], *geom.pad[1:], *_hw(img), *_hw(resp),
            target.stride(0), *target.stride()[3:], target.numel(), rows, cdiv(rows, cfg.split),
            KH=geom.kernel[1], KW=geom.kernel[2], SH=geom.stride[1], SW=geom.stride[2], DH=geom.dilation[1],
            DW=geom.dilation[2], KT=triton.next_power_of_2(kt), ACC=acc, BP=cfg.bp, BC=cfg.bc,
            EVEN_C=c % cfg.bc == 0, I64=_i64(img, resp), num_warps=cfg.warps)
        return
    p_split = cdiv(cdiv(geom.n * math.prod(geom.resp), cfg.split), cfg.bp) * cfg.bp
    _dw_wgrad_kernel[(math.prod(geom.kernel), cdiv(c, cfg.bc), cfg.split)](
        img, resp, target, geom.n, c, *geom.image, *geom.resp, *geom.kernel[1:], *geom.stride, *geom.pad,
        *geom.dilation, *img.stride(), *resp.stride(), target.stride(0), *target.stride()[2:], target.numel(),
        p_split, ACC=acc, BP=cfg.bp, BC=cfg.bc, num_warps=cfg.warps)


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
        _wgrad(geom, img, resp, parts[: wt.numel()].view(wt.shape) if cfg.split > 1 else wt, cfg, acc)
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
    b, s_b = (bias, bias.stride(0)) if bias is not None else (dst, 0)
    if cfg.unrolled:
        _dw2_kernel[(geom.n * cdiv(out_sp[1] * out_sp[2], cfg.bp), cdiv(c, cfg.bc))](
            src, dst, wt, b, c, *q[1:], *out_sp[1:], *geom.pad[1:], *_hw(src), *_hw(dst), wt.stride(0),
            *wt.stride()[3:], s_b, MODE=mode, KH=geom.kernel[1], KW=geom.kernel[2], SH=geom.stride[1],
            SW=geom.stride[2], DH=geom.dilation[1], DW=geom.dilation[2], HAS_BIAS=bias is not None, ACC=acc,
            BP=cfg.bp, BC=cfg.bc, EVEN_C=c % cfg.bc == 0, I64=_i64(src, dst), num_warps=cfg.warps)
        return
    _dw_kernel[(cdiv(positions, cfg.bp), cdiv(c, cfg.bc))](
        src, dst, wt, b, geom.n, c, *q, *out_sp, *geom.kernel[1:], math.prod(geom.kernel), *geom.stride, *geom.pad,
        *geom.dilation, *src.stride(), *dst.stride(), wt.stride(0), *wt.stride()[2:], s_b,
        MODE=mode, HAS_BIAS=bias is not None, ACC=acc, BP=cfg.bp, BC=cfg.bc, num_warps=cfg.warps)
