"""What the FlashAttention kernels share: the band of key (or query) blocks a tile meets, the score of a tile with
every mask feature applied, and the dropout keep-mask.  The forward, the dQ kernel and the dK/dV kernel call these
same functions, so a score or a mask is defined once.

Indices are passed as broadcastable 2-D tensors (``ii`` query rows, ``jj`` key columns): [BM, 1] x [1, BN] in the
forward / dQ orientation, [1, BM] x [BN, 1] in the dK/dV kernel's transposed one, and every helper is elementwise
over their broadcast, so the transposed kernel needs no second copy of the logic.

FP8 (e4m3) q / k / v: the kernels see it from the pointers' element type (a compile-time fact, no extra
constexpr).  Q K^T is an e4m3 tensor-core dot (the raw stored values; q_descale * k_descale folds into the score
scale); every other dot takes its FP8 operand converted to bf16 in registers (exact: e4m3's 3 mantissa bits and
exponent range fit bf16) with v_descale folded into dP / the output, except the forward's P V under PREC "fp8"
(the plan's reduced-precision choice): P (in [0, 1] after the max subtraction) rounded to e4m3 and an e4m3 dot,
FlashAttention-3's recipe.

Scores are in the log2 domain (s * log2(e)): the online softmax uses exp2, and without softcap / ALiBi / a float
mask the scale and log2(e) are one multiply (``scale2``).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import INTERPRETING
from .._lib.math import tanh

LOG2E = tl.constexpr(1.4426950408889634)
LN2 = tl.constexpr(0.6931471805599453)
# Triton 3.6's interpreter multiplies bf16 dot operands as raw bit patterns (garbage); there the operands are
# upcast to f32 first (exact), as gemm.py does.  The compiled GPU kernel never takes that branch.
_BF16_DOT_F32 = tl.constexpr(INTERPRETING)

# mask kinds (constexpr MASK): none, bool (True = take part), float (added to the score)
MASK_NONE, MASK_BOOL, MASK_FLOAT = 0, 1, 2
# block-mask kinds (constexpr BMASK): none, one entry per tile (the kernel skips False tiles), per element
BMASK_NONE, BMASK_TILE, BMASK_ELEM = 0, 1, 2


@triton.jit
def band(t0, BT: tl.constexpr, BO: tl.constexpr, n_other, c, A, B, HAS_A: tl.constexpr, HAS_B: tl.constexpr):
    """The blocks of the other index a tile of this index meets.

    This index t in [t0, t0 + BT) may see other index o iff t + c - A <= o <= t + c + B (a missing bound is
    unbounded) and 0 <= o < n_other.  Returns (lo, flo, fhi, hi): blocks of BO starting in [lo, flo) and [fhi, hi)
    need the element test, blocks in [flo, fhi) are allowed for every pair of the tile (no test, no bounds check);
    lo, flo, fhi are multiples of BO, lo <= flo <= fhi, and nothing outside [lo, hi) is allowed.  Forward / dQ:
    this = query i, other = key j, c = off, A = window_left, B = window_right.  dK/dV: this = key, other = query,
    c = -off, A = window_right, B = window_left.
    """
    if HAS_A:
        lo = tl.maximum(t0 + c - A, 0)
        flo = tl.maximum(t0 + (BT - 1) + c - A, 0)      # the first o every row of the tile may see
    else:
        lo = t0 * 0
        flo = t0 * 0
    if HAS_B:
        hi = tl.minimum(tl.maximum(t0 + (BT - 1) + c + B + 1, 0), n_other)
        fhi = tl.maximum(t0 + c + B + 1, 0) // BO * BO  # blocks ending at or before the first row's last o
    else:
        hi = t0 * 0 + n_other
        fhi = t0 * 0 + n_other
    lo = lo // BO * BO
    hi = tl.maximum(hi, lo)
    hi_r = (hi + BO - 1) // BO * BO
    flo = tl.minimum(tl.maximum((flo + BO - 1) // BO * BO, lo), hi_r)
    fhi = tl.minimum(fhi, n_other // BO * BO)
    fhi = tl.minimum(tl.maximum(fhi, flo), hi_r)
    return lo, flo, fhi, hi


@triton.jit
def band_off(Sq, Sk, TOP_LEFT: tl.constexpr):
    """off of the causal / window band (j allowed iff i + off - WL <= j <= i + off + WR): 0 for top-left
    alignment, Sk - Sq (bottom-right) otherwise."""
    if TOP_LEFT:
        return Sq * 0
    else:
        return Sk - Sq


@triton.jit
def scores(qk, ii, jj, Sq, Sk, off, WL, WR, scale, scale2, cap, slope,
           mask_p, smi, smj, bm_p, sbi, sbj, bsize,
           MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
           ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr):
    """(s, t): the log2-domain score of raw dot products ``qk`` at rows ii / columns jj with every feature, -inf
    where excluded; t = tanh(scale * qk / cap) for the softcap's derivative (0 without softcap).

    MASKED: the tile is not known to lie inside the band and the bounds (the band's element test and
    i < Sq, j < Sk).  The bool / float mask and an element block mask apply to every tile."""
    if SOFTCAP or ALIBI or (MASK == 2):
        x = qk * scale
        if SOFTCAP:
            t = tanh(x / cap)
            x = cap * t
        else:
            t = 0.0
        if ALIBI:
            x = x - slope * tl.abs(ii + (Sk - Sq) - jj).to(tl.float32)
        if MASK == 2:
            inb = (ii < Sq) & (jj < Sk)
            x = x + tl.load(mask_p + ii * smi + jj * smj, mask=inb, other=0.0).to(tl.float32)
        s = x * LOG2E
    else:
        s = qk * scale2
        t = 0.0
    if MASKED:
        keep = (ii < Sq) & (jj < Sk)
        if HAS_WL:
            keep = keep & (jj >= ii + off - WL)
        if HAS_WR:
            keep = keep & (jj <= ii + off + WR)
        if MASK == 1:
            keep = keep & (tl.load(mask_p + ii * smi + jj * smj, mask=keep, other=0) != 0)
        if BMASK == 2:
            keep = keep & (tl.load(bm_p + (ii // bsize) * sbi + (jj // bsize) * sbj, mask=keep, other=0) != 0)
        s = tl.where(keep, s, float("-inf"))
    else:
        if MASK == 1 or BMASK == 2:
            inb = (ii < Sq) & (jj < Sk)
            keep = inb
            if MASK == 1:
                keep = keep & (tl.load(mask_p + ii * smi + jj * smj, mask=inb, other=0) != 0)
            if BMASK == 2:
                keep = keep & (tl.load(bm_p + (ii // bsize) * sbi + (jj // bsize) * sbj, mask=inb, other=0) != 0)
            s = tl.where(keep, s, float("-inf"))
    return s, t


@triton.jit
def tile_on(bm_p, i0, j0, sbi, sbj, bsize, BMASK: tl.constexpr):
    """Whether the tile at (i0, j0) takes part: the block mask's entry when tiles align with its blocks (BMASK 1),
    else True (an element block mask is applied inside ``scores``)."""
    if BMASK == 1:
        return tl.load(bm_p + (i0 // bsize) * sbi + (j0 // bsize) * sbj) != 0
    else:
        return True


@triton.jit
def dropout_keep(seed, ctr, ii, jj, CK, pdrop):
    """keep(i, j) iff tl.rand(seed, n) >= p with n = ctr + i * CK + j (ctr = offset + (b * Hq + h) * CQ * CK as
    int64: the contract's counter)."""
    n = ctr + ii.to(tl.int64) * CK + jj.to(tl.int64)
    return tl.rand(seed, n) >= pdrop


@triton.jit
def dot(a, b, acc, PREC: tl.constexpr):
    """a @ b + acc in f32; f32 operands at PREC ("ieee" exact or "tf32"), 16-bit operands natively."""
    if a.dtype == tl.float32:
        return tl.dot(a, b, acc, input_precision=PREC)
    elif _BF16_DOT_F32 and a.dtype == tl.bfloat16:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
    else:
        return tl.dot(a, b, acc)


@triton.jit
def wide(x, dt: tl.constexpr):
    """An FP8 tile converted to ``dt`` (bf16 / f16: exact) for a dot with a 16-bit operand; other tiles unchanged."""
    if x.dtype == tl.float8e4nv:
        return x.to(dt)
    else:
        return x


@triton.jit
def pv_dot(p, v, acc, PREC: tl.constexpr):
    """acc + P V: P rounded to V's dtype (16-bit), or for an FP8 V to e4m3 (PREC "fp8": one e4m3 dot) or to bf16
    with V widened to bf16 (exact)."""
    if v.dtype == tl.float8e4nv and PREC == "fp8":
        return tl.dot(p.to(tl.float8e4nv), v, acc)
    else:
        vv = wide(v, tl.bfloat16)
        return dot(p.to(vv.dtype), vv, acc, PREC)


@triton.jit
def descales(QDS, KDS, VDS, sqds, skds, svds, h, hk, FP8: tl.constexpr):
    """(q_descale[h], k_descale[hk], v_descale[hk]) of an FP8 problem ([1] descales: stride 0), else 1s."""
    if FP8:
        return tl.load(QDS + h * sqds), tl.load(KDS + hk * skds), tl.load(VDS + hk * svds)
    else:
        return 1.0, 1.0, 1.0


@triton.jit
def seq_range(cu_p, stride, b, S_fixed, VARLEN: tl.constexpr):
    """(start, length) of batch b's sequence: cu_seqlens[b], cu_seqlens[b + 1] - cu_seqlens[b] for varlen (a
    strided cu_seqlens view is read in place), else (0, S_fixed)."""
    if VARLEN:
        s0 = tl.load(cu_p + b * stride).to(tl.int32)
        return s0, tl.load(cu_p + (b + 1) * stride).to(tl.int32) - s0
    else:
        return b * 0, S_fixed + b * 0


@triton.jit
def load_tile(ptrs, rows, n_rows, cols, NCOLS: tl.constexpr, BC: tl.constexpr, CHECK_ROWS: tl.constexpr):
    """A tile of rows x cols (broadcastable index tensors, either orientation), zero outside: the row test only
    where the tile may cross the sequence end, the column test only where the head dim is padded (NCOLS < BC)."""
    if CHECK_ROWS:
        if NCOLS == BC:
            return tl.load(ptrs, mask=rows < n_rows, other=0.0)
        else:
            return tl.load(ptrs, mask=(rows < n_rows) & (cols < NCOLS), other=0.0)
    else:
        if NCOLS == BC:
            return tl.load(ptrs)
        else:
            return tl.load(ptrs, mask=cols < NCOLS, other=0.0)
