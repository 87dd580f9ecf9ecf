"""FlashAttention forward in Triton: one program per (query block, batch * query head).

The program holds its query tile in registers and walks the key/value blocks of its band (``_flash.band``): blocks
wholly inside the causal / window band run without the element test, the diagonal (edge) blocks with it, and
blocks outside the band are never visited.  The softmax is online in the exp2 domain (scale * log2(e) folded into
one multiply), the accumulator f32 (``tl.dot`` with f32 accumulation; f32 inputs at "ieee" unless the plan allows
"tf32").  A row whose every key is excluded ends with l = 0 and writes out = 0, lse = -inf (no NaN: the running
max is replaced by 0 while it is -inf).  Dropout keeps p where tl.rand(seed, n) >= p_drop with the contract's
counter and rescales once at the end; lse is of the undropped scores.

Strides are arguments (any layout, no copies): every operand is addressed as (batch, head, seq, dim) strides;
bshd swaps two of them and varlen's packed [T, H, D] has batch stride 0 with the sequence's start from
cu_seqlens (VARLEN constexpr, the same body).  GQA reads kv head h // (Hq // Hkv).
"""
from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from .._lib.config import has_tma
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from ._flash import (LN2, LOG2E, band, band_off, descales, dot, dropout_keep, load_tile, pv_dot, scores, seq_range,
                     tile_on)

__all__ = ["Problem", "TileCfg", "fwd_config", "flash_forward", "descriptor", "tma_ok", "tma_wanted", "feature_args",
"feature_constexprs", "cu_args"]


@triton.jit
def _fwd_step(acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, j0, ii, Sq, Sk, off, sks, skd, svs, svd,
              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK,
              MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
              ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
              I64: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
              BDV: tl.constexpr, PREC: tl.constexpr, TMA: tl.constexpr, FAST: tl.constexpr):
    """One key/value block of the online softmax (k / v through the descriptors KD / VD at (batch, kv head) ``tk``
    under TMA, else through the pointers)."""
    offs_n = j0 + tl.arange(0, BN)
    if I64:
        offs_n = offs_n.to(tl.int64)
    d = tl.arange(0, BD)
    if TMA:
        k = KD.load([tk[0], tk[1], j0, 0]).reshape(BN, BD)
    else:
        k = load_tile(kbase + offs_n[:, None] * sks + d[None, :] * skd, offs_n[:, None], Sk, d[None, :], D, BD,
                      MASKED)
    BM: tl.constexpr = q.shape[0]
    qk = dot(q, tl.trans(k), tl.zeros([BM, BN], tl.float32), PREC)
    jj = offs_n[None, :]
    if FAST and not (MASKED or SOFTCAP or ALIBI or MASK != 0 or BMASK == 2):
        # every score of this tile is finite and scale > 0: the row max is taken of the raw products and the
        # log2-domain scale folds into the exponent's FMA (one multiply per score less)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * scale2)
        alpha = tl.exp2(m_i - m_new)
        p = tl.exp2(qk * scale2 - m_new[:, None])
    else:
        s, t = scores(qk, ii, jj, Sq, Sk, off, WL, WR, scale, scale2, cap, slope, mask_p, smi, smj, bm_p, sbi, sbj,
                      bsize, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK)
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)     # a row with nothing yet: no -inf - -inf
        alpha = tl.exp2(m_i - m_use)
        p = tl.exp2(s - m_use[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    if DROPOUT:
        p = tl.where(dropout_keep(seed, ctr, ii, jj, CK, pdrop), p, 0.0)
    if TMA:
        v = VD.load([tk[0], tk[1], j0, 0]).reshape(BN, BDV)
    else:
        dv = tl.arange(0, BDV)
        v = load_tile(vbase + offs_n[:, None] * svs + dv[None, :] * svd, offs_n[:, None], Sk, dv[None, :], DV, BDV,
                      MASKED)
    acc = pv_dot(p, v, acc, PREC)
    return acc, l_i, m_new


@triton.jit
def _fwd_span(acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, lo, hi, i0, ii, Sq, Sk, off, sks, skd, svs, svd,
              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK,
              MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
              ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
              I64: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
              BDV: tl.constexpr, PREC: tl.constexpr, TMA: tl.constexpr, FAST: tl.constexpr):
    """The key blocks starting in [lo, hi), all with or all without the element test (MASKED)."""
    for j0 in loop(lo, hi, BN):
        if BMASK == 1:
            if tile_on(bm_p, i0, j0, sbi, sbj, bsize, BMASK):
                acc, l_i, m_i = _fwd_step(
                    acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, j0, ii, Sq, Sk, off, sks, skd, svs, svd, mask_p, smi,
                    smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK, MASKED, HAS_WL,
                    HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN, D, DV, BD, BDV, PREC, TMA, FAST)
        else:
            acc, l_i, m_i = _fwd_step(
                acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, j0, ii, Sq, Sk, off, sks, skd, svs, svd, mask_p, smi, smj,
                slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK, MASKED, HAS_WL,
                HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN, D, DV, BD, BDV, PREC, TMA, FAST)
    return acc, l_i, m_i


@fast_kernel
def _flash_fwd_kernel(Q, K, V, O, QD, KD, VD, OD, LSE, CUQ, CUK, scq, sck,
                      sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sob, soh, sos, sod, slb, slh, sls,
                      Hq, GROUP, SQ, SK, MASKP, smb, smh, smi, smj, SLOPES, sab, sah, BMP, sbb, sbh, sbi, sbj, bsize,
                      scale, scale2, cap, WL, WR, pdrop, seed, doff, CQ, CK, QDS, KDS, VDS, sqds, skds, svds,
                      TOP_LEFT: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
                      ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
                      VARLEN: tl.constexpr, I64: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                      D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, PREC: tl.constexpr,
                      TMA: tl.constexpr, FAST: tl.constexpr):
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)     # the longest causal rows first: a shorter tail
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    q0, Sq = seq_range(CUQ, scq, b, SQ, VARLEN)
    k0, Sk = seq_range(CUK, sck, b, SK, VARLEN)
    i0 = pid_m * BM
    if i0 >= Sq:        # varlen: this sequence is shorter than max_seqlen_q
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    hk64 = (h // GROUP).to(tl.int64)
    qbase = Q + b64 * sqb + h64 * sqh + q0.to(tl.int64) * sqs
    kbase = K + b64 * skb + hk64 * skh + k0.to(tl.int64) * sks
    vbase = V + b64 * svb + hk64 * svh + k0.to(tl.int64) * svs
    mask_p = MASKP + b64 * smb + h64 * smh
    bm_p = BMP + b64 * sbb + h64 * sbh
    if ALIBI:
        slope = tl.load(SLOPES + b64 * sab + h64 * sah).to(tl.float32)
    else:
        slope = 0.0
    ctr = doff + bh.to(tl.int64) * CQ * CK
    FP8: tl.constexpr = Q.dtype.element_ty == tl.float8e4nv
    qd, kd, vd = descales(QDS, KDS, VDS, sqds, skds, svds, h, h // GROUP, FP8)
    if FP8:             # the descales fold into the score scale (and v's into the output below)
        scale = scale * (qd * kd)
        scale2 = scale2 * (qd * kd)
    offs_m = i0 + tl.arange(0, BM)
    if I64:
        offs_m = offs_m.to(tl.int64)
    ii = offs_m[:, None]
    d = tl.arange(0, BD)
    tk = (b, h // GROUP)
    if TMA:
        q = QD.load([b, h, i0, 0]).reshape(BM, BD)
    else:
        q = load_tile(qbase + ii * sqs + d[None, :] * sqd, ii, Sq, d[None, :], D, BD, True)

    off = band_off(Sq, Sk, TOP_LEFT)
    lo, flo, fhi, hi = band(i0, BM, BN, Sk, off, WL, WR, HAS_WL, HAS_WR)
    acc = tl.zeros([BM, BDV], tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    acc, l_i, m_i = _fwd_span(acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, lo, flo, i0, ii, Sq, Sk, off, sks, skd,
                              svs, svd,
                              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                              seed, ctr, CK, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN,
                              D, DV, BD, BDV, PREC, TMA, FAST)
    acc, l_i, m_i = _fwd_span(acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, flo, fhi, i0, ii, Sq, Sk, off, sks, skd,
                              svs, svd,
                              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                              seed, ctr, CK, False, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN,
                              D, DV, BD, BDV, PREC, TMA, FAST)
    acc, l_i, m_i = _fwd_span(acc, l_i, m_i, q, kbase, vbase, KD, VD, tk, fhi, hi, i0, ii, Sq, Sk, off, sks, skd,
                              svs, svd,
                              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                              seed, ctr, CK, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN,
                              D, DV, BD, BDV, PREC, TMA, FAST)
    empty = l_i == 0.0
    inv = 1.0 / tl.where(empty, 1.0, l_i)
    if DROPOUT:
        inv = inv / (1.0 - pdrop)
    if FP8:
        inv = inv * vd
    dv = tl.arange(0, BDV)
    obase = O + b64 * sob + h64 * soh + q0.to(tl.int64) * sos
    out = (acc * inv[:, None]).to(O.dtype.element_ty)
    if TMA:
        OD.store([b, h, i0, 0], out.reshape(1, 1, BM, BDV))
    elif DV == BDV:
        tl.store(obase + ii * sos + dv[None, :] * sod, out, mask=ii < Sq)
    else:
        tl.store(obase + ii * sos + dv[None, :] * sod, out, mask=(ii < Sq) & (dv[None, :] < DV))
    lse = tl.where(empty, float("-inf"), (m_i + tl.log2(tl.where(empty, 1.0, l_i))) * LN2)
    lbase = LSE + b64 * slb + h64 * slh + q0.to(tl.int64) * sls
    tl.store(lbase + offs_m * sls, lse, mask=offs_m < Sq)


# ---------------------------------------------------------------------------------------------------- host side

_I32 = 2 ** 31 - 1


def bhsd_strides(t, layout: str) -> tuple:
    """(batch, head, seq, dim) strides of q/k/v/out (or their gradients): bhsd as is, bshd with seq and head
    swapped, varlen's packed [T, H, D] with batch stride 0 (the sequence start comes from cu_seqlens)."""
    s = t.stride()
    if layout == "bhsd":
        return s
    if layout == "bshd":
        return s[0], s[2], s[1], s[3]
    return 0, s[1], s[0], s[2]


def lse_strides(t, varlen: bool) -> tuple:
    """(batch, head, seq) strides of lse-shaped tensors: [B, Hq, Sq], or varlen's [Hq, Tq]."""
    s = t.stride()
    return (0, s[0], s[1]) if varlen else s


@dataclass
class Problem:
    """One attention call on the device, in the kernels' terms (built by sdpa.py from a descriptor's attributes
    and the operand tensors)."""
    layout: str              # "bhsd" | "bshd" | "thd" (varlen)
    B: int
    Hq: int
    Hkv: int
    Sq: int                  # max_seqlen_q for varlen
    Sk: int
    D: int
    Dv: int
    scale: float
    causal: str              # "none" | "top_left" | "bottom_right"
    window_left: int | None
    window_right: int | None
    softcap: float
    dropout_p: float
    seed: int
    offset: int
    prec: str                # "ieee" | "tf32" (f32 only) | "fp8" (FP8 inputs: P V in e4m3)
    mask: object = None      # broadcast to [B, Hq, Sq, Sk] (a view), bool or float
    slopes: object = None    # [Hq] or [B, Hq]
    block_mask: object = None    # broadcast to [B, Hq, nbq, nbk]
    block_size: int = 0      # 0 when there is no block mask
    cu_q: object = None
    cu_k: object = None
    descales: tuple = ()     # FP8: (q_descale, k_descale, v_descale) f32 tensors, [1] or per head
    fp8: bool = False        # q / k / v are f8e4m3
    extras: bool = False     # a mask or ALiBi slopes will be given (set where the tensors are not known yet)

    @property
    def varlen(self) -> bool:
        return self.layout == "thd"

    @property
    def plain(self) -> bool:
        """No per-element feature beyond the causal / window band (the larger tiles fit in registers)."""
        return not (self.extras or self.mask is not None or self.slopes is not None or self.block_size
                    or self.softcap > 0 or self.dropout_p > 0)

    @property
    def group(self) -> int:
        return self.Hq // self.Hkv

    def band(self):
        """(has_wl, wl, has_wr, wr): the causal / window band's bounds (causal caps the right bound at 0)."""
        wl, wr = self.window_left, self.window_right
        if self.causal != "none":
            wr = 0 if wr is None else min(wr, 0)
        return wl is not None, (wl or 0), wr is not None, (wr or 0)


@dataclass(frozen=True)
class TileCfg:
    bm: int          # query rows per tile
    bn: int          # key rows per tile
    warps: int
    stages: int
    tma: bool = False    # q / k / v / out through TMA tensor descriptors (sm_90+, fixed-length, aligned)

    def tag(self) -> str:
        return f"{self.bm}x{self.bn},w{self.warps},s{self.stages}" + (",tma" if self.tma else "")


# Forward tiles per padded head dim (bf16/f16; sm_90 registers per thread from bench/attention_sm90_regs.py, no
# spills).  The query tile stays in registers next to the f32 accumulator: for D = 128, BM = 128 and 8 warps that
# is 64 + 32 registers per thread before the score tile.  "plain" (no mask, ALiBi, softcap, dropout or block mask:
# causal / window only) takes the larger key block: 128x128 D128 = 254 registers, D64 = 201, D256 128x64 = 253;
# with every feature at once (the worst case) BN halves: D128 128x64 255 registers, D64 203, D256 64x32 248.
# Measured on the H100 (bench/flash_tile_sweep.py, bench/results/2026-11-27-h100/tile_sweep.json): D128 64x64 w4 s3
# 445 TF/s causal / 494 non-causal vs 128x128 w8 s3 424 / 484; D64 128x64 w8 s4 353 vs 290; D256 128x64 w8 s2 434.
_FWD16_PLAIN = {64: TileCfg(128, 64, 8, 4), 128: TileCfg(64, 64, 4, 3), 256: TileCfg(128, 64, 8, 2)}
_FWD16 = {64: TileCfg(128, 64, 8, 3), 128: TileCfg(64, 64, 4, 3), 256: TileCfg(64, 32, 8, 2)}
# TMA (sm_90): q / k / v arrive in shared memory by descriptor copies, no address registers (D128 64x64 w4 s3: 139
# registers vs 168 for the pointer loads).  A minimal plain kernel (bench/flash_tma_probe.py,
# bench/results/2026-11-27-h100/tma_probe.json) ran best at 128x64 w4 s2 (D128 causal 470 TF/s), but in this kernel
# that tile spills 128 bytes (sm_90 offline compile) and ran at 342: the 64-row tile stays.
_FWD16_TMA = {64: TileCfg(128, 64, 8, 3, True), 128: TileCfg(64, 64, 4, 3, True), 256: TileCfg(128, 64, 8, 2, True)}
# tf32 tensor cores: f32 tiles take twice the shared memory per element
_FWDTF32 = {64: TileCfg(64, 64, 4, 2), 128: TileCfg(64, 32, 4, 2), 256: TileCfg(32, 32, 4, 2)}
# exact f32: the dot runs on the FMA units (no tensor cores), whose operand layouts replicate the tiles across
# threads: 8 warps on small tiles (sm_90: D64 64x32 90 registers, D128 32x16 73, D256 32x16 106; 4 warps or 32-key
# blocks spill hundreds of bytes)
_FWD32 = {64: TileCfg(64, 32, 8, 2), 128: TileCfg(32, 16, 8, 2), 256: TileCfg(32, 16, 8, 2)}


def _pick(table: dict, bd: int) -> TileCfg:
    return table[64 if bd <= 64 else 128 if bd <= 128 else 256]


def fit_tiles(cfg: TileCfg, sq: int, sk: int, block_size: int, least: int = 16) -> TileCfg:
    """The table's tile shrunk to short sequences (no point in 128-row tiles for 40 rows) and, for a block
    mask whose blocks are a power of two >= 16, to the block size so each tile reads one block-mask entry."""
    bm = min(cfg.bm, max(least, next_power_of_2(max(sq, 1))))
    bn = min(cfg.bn, max(least, next_power_of_2(max(sk, 1))))
    if block_size >= least and block_size & (block_size - 1) == 0:
        bm, bn = min(bm, block_size), min(bn, block_size)
    return TileCfg(bm, bn, cfg.warps, cfg.stages, cfg.tma)


def head_blocks(D: int, Dv: int, fp8: bool = False) -> tuple[int, int]:
    """The padded head dims: powers of two >= 16, >= 32 for FP8 (an e4m3 dot's reduction is 32 deep)."""
    m = 32 if fp8 else 16
    return max(m, next_power_of_2(D)), max(m, next_power_of_2(Dv))


def tma_wanted(p: Problem, dtype) -> bool:
    """Whether the flash kernels address q / k / v / out through TMA descriptors: only with BARACUDA_FLASH_TMA=1 (off
    by default: on the H100 these kernels ran 5-7 % slower in the forward with descriptors and within noise in the
    backward, bench/results/2026-11-27-h100/attention_tma.md), and then where TMA applies: a device with TMA, 16-bit
    or FP8 operands, fixed-length sequences, head-dim rows of 16-byte multiples (the tensors' own alignment is
    checked per call, ``tma_ok``)."""
    if os.environ.get("BARACUDA_FLASH_TMA", "0") != "1" or p.varlen or dtype == torch.float32 or not has_tma():
        return False
    item = 1 if p.fp8 else 2
    return (p.D * item) % 16 == 0 and (p.Dv * item) % 16 == 0


def fwd_config(p: Problem, dtype, tma: bool | None = None) -> TileCfg:
    bd, bdv = head_blocks(p.D, p.Dv, p.fp8)
    if tma is None:
        tma = tma_wanted(p, dtype)
    if dtype != torch.float32:     # (FP8: the 16-bit tiles; its key block is P V's reduction: >= 32 deep)
        table = (_FWD16_TMA if tma else _FWD16_PLAIN) if p.plain else _FWD16
    else:
        table = _FWDTF32 if p.prec == "tf32" else _FWD32
    cfg = fit_tiles(_pick(table, max(bd, bdv)), p.Sq, p.Sk, p.block_size, 32 if p.fp8 else 16)
    return dataclasses.replace(cfg, tma=tma)


def _bmask_kind(p: Problem, bm: int, bn: int) -> int:
    if p.block_mask is None:
        return 0
    return 1 if p.block_size % bm == 0 and p.block_size % bn == 0 else 2


def feature_args(p: Problem, dummy) -> tuple:
    """The mask / ALiBi / block-mask / score / band / dropout arguments every flash kernel takes, in order."""
    if p.mask is not None:
        mask, (smb, smh, smi, smj) = p.mask, p.mask.stride()
    else:
        mask, smb, smh, smi, smj = dummy, 0, 0, 0, 0
    if p.slopes is not None:
        sl = p.slopes
        sab, sah = (0, sl.stride(0)) if sl.dim() == 1 else sl.stride()
    else:
        sl, sab, sah = dummy, 0, 0
    if p.block_mask is not None:
        bmk, (sbb, sbh, sbi, sbj) = p.block_mask, p.block_mask.stride()
    else:
        bmk, sbb, sbh, sbi, sbj = dummy, 0, 0, 0, 0
    has_wl, wl, has_wr, wr = p.band()
    scale = float(p.scale)
    ds = p.descales or (dummy,) * 3
    return (mask, smb, smh, smi, smj, sl, sab, sah, bmk, sbb, sbh, sbi, sbj, max(p.block_size, 1),
            scale, scale * float(LOG2E.value), float(p.softcap) or 1.0, wl, wr, float(p.dropout_p), int(p.seed),
            int(p.offset), p.Sq, p.Sk, *ds, *(int(t.shape[0] > 1) for t in ds))


def feature_constexprs(p: Problem, bm: int, bn: int, i64: bool) -> dict:
    has_wl, _, has_wr, _ = p.band()
    mask = 0 if p.mask is None else (1 if p.mask.dtype == torch.bool else 2)
    bd, bdv = head_blocks(p.D, p.Dv, p.fp8)
    return dict(TOP_LEFT=p.causal == "top_left", HAS_WL=has_wl, HAS_WR=has_wr, SOFTCAP=p.softcap > 0,
                ALIBI=p.slopes is not None, MASK=mask, BMASK=_bmask_kind(p, bm, bn), DROPOUT=p.dropout_p > 0,
                VARLEN=p.varlen, I64=i64, BM=bm, BN=bn, D=p.D, DV=p.Dv, BD=bd, BDV=bdv, PREC=p.prec)


def needs_i64(p: Problem, *ts) -> bool:
    """Whether a tile's in-sequence offsets (row * row stride, up to the sequence's extent) can pass 2^31: the
    per-(batch, head) base offsets are int64 always, the in-tile ones only when this says so."""
    rows = max(p.Sq, p.Sk) + 256
    for t, lay in ts:
        sb, sh, ss, sd = bhsd_strides(t, lay)
        if rows * abs(ss) + t.shape[-1] * abs(sd) > _I32:
            return True
    return False


def cu_args(p: Problem, dummy) -> tuple:
    """(cu_seqlens_q, cu_seqlens_k, their strides) as the kernels take them (any tensor and 0 when not varlen)."""
    if p.varlen:
        return p.cu_q, p.cu_k, p.cu_q.stride(0), p.cu_k.stride(0)
    return dummy, dummy, 0, 0


def _bhsd_shape(t, lay: str) -> tuple:
    return tuple(t.shape) if lay == "bhsd" else (t.shape[0], t.shape[2], t.shape[1], t.shape[3])


def tma_strides(t, lay: str):
    """The (batch, head, seq, dim) strides a TMA descriptor of ``t`` takes, or None where TMA cannot address it:
    a 16-byte aligned base, a unit dim stride, positive 16-byte multiples elsewhere (a size-1 dimension's stride is
    never used: it gets the tensor's extent)."""
    item = t.element_size()
    st = list(bhsd_strides(t, lay))
    shape = _bhsd_shape(t, lay)
    if t.numel() == 0 or t.data_ptr() % 16 or st[3] != 1:
        return None
    ext = max(abs(x) * n for x, n in zip(st, shape))
    unit = 16 // item
    for i in range(3):
        if shape[i] == 1:
            st[i] = -(-ext // unit) * unit
        elif st[i] <= 0 or st[i] % unit:
            return None
    return st


def tma_ok(lay: str, *ts) -> bool:
    """Whether TMA can address every one of these tensors (``tma_strides``)."""
    return all(tma_strides(t, lay) is not None for t in ts)


def descriptor(t, lay: str, rows: int, cols: int):
    """A 4-d [B, H, S, D] TMA descriptor of a bhsd / bshd tensor, block [1, 1, rows, cols] (zero fill past S, D)."""
    return TensorDescriptor(t, list(_bhsd_shape(t, lay)), tma_strides(t, lay), [1, 1, rows, cols])


def flash_forward(p: Problem, q, k, v, out, lse, cfg: TileCfg) -> None:
    """Launch the forward on (q, k, v) into out / lse (tensors of the problem's layout)."""
    lay = p.layout
    if cfg.tma and not tma_ok(lay, q, k, v, out):     # a misaligned view: the pointer kernel and its tiles
        cfg = fwd_config(p, q.dtype, tma=False)
    i64 = needs_i64(p, (q, lay), (k, lay), (v, lay), (out, lay))
    grid = (cdiv(p.Sq, cfg.bm), p.B * p.Hq)
    if grid[0] * grid[1] == 0:
        return
    if cfg.tma:
        bd, bdv = head_blocks(p.D, p.Dv, p.fp8)
        descs = (descriptor(q, lay, cfg.bm, bd), descriptor(k, lay, cfg.bn, bd), descriptor(v, lay, cfg.bn, bdv),
                 descriptor(out, lay, cfg.bm, bdv))
    else:
        descs = (q, k, v, out)      # (unused: TMA=False)
    _flash_fwd_kernel[grid](
        q, k, v, out, *descs, lse, *cu_args(p, q), *bhsd_strides(q, lay), *bhsd_strides(k, lay),
        *bhsd_strides(v, lay), *bhsd_strides(out, lay), *lse_strides(lse, p.varlen), p.Hq, p.group, p.Sq, p.Sk,
        *feature_args(p, q), **feature_constexprs(p, cfg.bm, cfg.bn, i64), TMA=cfg.tma,
        FAST=p.scale > 0 and not p.fp8, num_warps=cfg.warps, num_stages=cfg.stages)


def default_scale(D: int, scale) -> float:
    return 1.0 / math.sqrt(D) if scale is None else float(scale)
