"""FlashAttention backward in Triton: three kernels, no atomics (deterministic, bit-stable).

1. ``_bwd_pre_kernel``: delta[b, h, i] = rowsum(dO * O) - grad_lse (f32), so dS = P * (dP - delta).
2. ``_bwd_dkdv_kernel``: one program per (key block, batch * kv head) holds its K / V tile and the f32 dK / dV
   accumulators and walks, for each of the kv head's Hq / Hkv query heads in turn, the query blocks of its band
   (the same ``_flash.band`` as the forward, seen from the key side).  GQA's reduction over the group's query heads
   is that loop: fixed order, no atomics.  The scores are computed transposed ([keys, queries]: S^T = K Q^T), so
   P^T and dS^T feed dV += P^T dO and dK += dS^T Q directly; ``_flash.scores`` takes the indices as broadcast
   tensors, so the same score / mask code serves both orientations.
3. ``_bwd_dq_kernel``: one program per (query block, batch * query head), the forward's loop: dQ += dS K.

P is recomputed from the saved lse (exp2(s - lse * log2 e); a row with lse = -inf has no allowed key and gets
P = 0), the dropout mask regenerated from (seed, offset) by the forward's own ``dropout_keep``, softcap's
derivative 1 - tanh^2 applied to dS.  dQ and dK carry the scale.
"""
from __future__ import annotations

import dataclasses

import torch
import triton
import triton.language as tl

from .._lib.geometry import cdiv
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from ._flash import LOG2E, band, band_off, descales, dot, dropout_keep, load_tile, scores, seq_range, tile_on, wide
from .flash_fwd import (Problem, TileCfg, bhsd_strides, cu_args, descriptor, feature_args, feature_constexprs,
                        fit_tiles, head_blocks, lse_strides, needs_i64, tma_ok, tma_wanted)

__all__ = ["bwd_configs", "flash_backward"]


@triton.jit
def _p_ds(qk, dp, ii, jj, lse2, delta, Sq, Sk, off, WL, WR, scale, scale2, cap, slope, mask_p, smi, smj, bm_p,
          sbi, sbj, bsize, pdrop, seed, ctr, CK,
          MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
          ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr):
    """(P for dV (dropped and rescaled), dS w.r.t. the raw score q.k / scale) of a tile in either orientation."""
    s, t = scores(qk, ii, jj, Sq, Sk, off, WL, WR, scale, scale2, cap, slope, mask_p, smi, smj, bm_p, sbi, sbj,
                  bsize, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK)
    p = tl.exp2(s - lse2)
    if DROPOUT:
        keep = dropout_keep(seed, ctr, ii, jj, CK, pdrop)
        rs = 1.0 / (1.0 - pdrop)
        pv = tl.where(keep, p * rs, 0.0)
        dp = tl.where(keep, dp * rs, 0.0)
    else:
        pv = p
    ds = p * (dp - delta)
    if SOFTCAP:
        ds = ds * (1.0 - t * t)
    return pv, ds


@triton.jit
def _row_stats(LSE, DELTA, lbase, dbase, offs, sls, Sq, CHECK: tl.constexpr):
    """lse * log2(e) (+inf where lse = -inf: those rows see no key, P = 0) and delta of rows ``offs``."""
    if CHECK:
        lse = tl.load(lbase + offs * sls, mask=offs < Sq, other=0.0).to(tl.float32)
        delta = tl.load(dbase + offs, mask=offs < Sq, other=0.0)
    else:
        lse = tl.load(lbase + offs * sls).to(tl.float32)
        delta = tl.load(dbase + offs)
    lse2 = tl.where(lse == float("-inf"), float("inf"), lse * LOG2E)
    return lse2, delta


@fast_kernel
def _bwd_pre_kernel(O, DO, GLSE, DELTA, CUQ, scq, sob, soh, sos, sod, sgb, sgh, sgs, sgd, seb, seh, ses,
                    slb, slh, sls, Hq, SQ,
                    HAS_GLSE: tl.constexpr, VARLEN: tl.constexpr, BM: tl.constexpr, DV: tl.constexpr,
                    BDV: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    q0, Sq = seq_range(CUQ, scq, b, SQ, VARLEN)
    offs = pid_m * BM + tl.arange(0, BM)
    dv = tl.arange(0, BDV)
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    r64 = q0.to(tl.int64)
    ii = offs[:, None]
    o = load_tile(O + b64 * sob + h64 * soh + r64 * sos + ii * sos + dv[None, :] * sod, ii, Sq, dv[None, :], DV,
                  BDV, True)
    g = load_tile(DO + b64 * sgb + h64 * sgh + r64 * sgs + ii * sgs + dv[None, :] * sgd, ii, Sq, dv[None, :], DV,
                  BDV, True)
    delta = tl.sum(o.to(tl.float32) * g.to(tl.float32), 1)
    if HAS_GLSE:
        delta = delta - tl.load(GLSE + b64 * seb + h64 * seh + (r64 + offs) * ses, mask=offs < Sq,
                                other=0.0).to(tl.float32)
    tl.store(DELTA + b64 * slb + h64 * slh + (r64 + offs) * sls, delta, mask=offs < Sq)


@triton.jit
def _dkdv_step(dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, i0, offs_n, Sq, Sk, off, sqs, sqd, sgs,
               sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed,
               ctr, CK, vd, qd, MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
               ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
               I64: tl.constexpr, BM: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
               BDV: tl.constexpr, PREC: tl.constexpr):
    """One query block's contribution to a key block's dK / dV (transposed orientation: rows = keys)."""
    offs_m = i0 + tl.arange(0, BM)
    if I64:
        offs_m = offs_m.to(tl.int64)
    d = tl.arange(0, BD)
    e = tl.arange(0, BDV)
    q = load_tile(qbase + offs_m[:, None] * sqs + d[None, :] * sqd, offs_m[:, None], Sq, d[None, :], D, BD, MASKED)
    do = load_tile(dobase + offs_m[:, None] * sgs + e[None, :] * sgd, offs_m[:, None], Sq, e[None, :], DV, BDV,
                   MASKED)
    lse2, delta = _row_stats(LSE, DELTA, lbase, dbase, offs_m, sls, Sq, MASKED)
    BN: tl.constexpr = k.shape[0]
    q16 = wide(q, do.dtype)             # (FP8: k and v come widened by the caller)
    qkT = dot(k, tl.trans(q16), tl.zeros([BN, BM], tl.float32), PREC)
    dpT = dot(v, tl.trans(do), tl.zeros([BN, BM], tl.float32), PREC)
    if q.dtype == tl.float8e4nv:        # dP of the dequantized v: dO (v_descale v)^T
        dpT = dpT * vd
    pT, dsT = _p_ds(qkT, dpT, offs_m[None, :], offs_n[:, None], lse2[None, :], delta[None, :], Sq, Sk, off, WL,
                    WR, scale, scale2, cap, slope, mask_p, smi, smj, bm_p, sbi, sbj, bsize, pdrop, seed, ctr, CK,
                    MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT)
    dv = dot(pT.to(do.dtype), do, dv, PREC)
    if q.dtype == tl.float8e4nv:        # dK of the dequantized k sums dS^T (q_descale[h] q) over the heads h
        dk = dot((dsT * qd).to(do.dtype), q16, dk, PREC)
    else:
        dk = dot(dsT.to(q.dtype), q, dk, PREC)
    return dk, dv


@triton.jit
def _dkdv_span(dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, lo, hi, j0, offs_n, Sq, Sk, off, sqs, sqd,
               sgs, sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
               seed, ctr, CK, vd, qd, MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr,
               SOFTCAP: tl.constexpr, ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr,
               DROPOUT: tl.constexpr, I64: tl.constexpr, BM: tl.constexpr, D: tl.constexpr, DV: tl.constexpr,
               BD: tl.constexpr, BDV: tl.constexpr, PREC: tl.constexpr):
    for i0 in loop(lo, hi, BM):
        if BMASK == 1:
            if tile_on(bm_p, i0, j0, sbi, sbj, bsize, BMASK):
                dk, dv = _dkdv_step(
                    dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, i0, offs_n, Sq, Sk, off, sqs, sqd, sgs,
                    sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                    seed, ctr, CK, vd, qd, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BM, D, DV,
                    BD, BDV, PREC)
        else:
            dk, dv = _dkdv_step(
                dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, i0, offs_n, Sq, Sk, off, sqs, sqd, sgs,
                sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                seed, ctr, CK, vd, qd, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BM, D, DV,
                BD, BDV, PREC)
    return dk, dv


@fast_kernel
def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV_, CUQ, CUK, scq, sck,
                     sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sgb, sgh, sgs, sgd,
                     sdkb, sdkh, sdks, sdkd, sdvb, sdvh, sdvs, sdvd, slb, slh, sls, stb, sth, sts,
                     Hq, GROUP, SQ, SK,
                     MASKP, smb, smh, smi, smj, SLOPES, sab, sah, BMP, sbb, sbh, sbi, sbj, bsize,
                     scale, scale2, cap, WL, WR, pdrop, seed, doff, CQ, CK, QDS, KDS, VDS, sqds, skds, svds,
                     TOP_LEFT: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
                     ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
                     VARLEN: tl.constexpr, I64: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                     D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, PREC: tl.constexpr):
    pid_n = tl.program_id(0)
    bhk = tl.program_id(1)
    FP8: tl.constexpr = Q.dtype.element_ty == tl.float8e4nv
    Hkv = Hq // GROUP
    b = bhk // Hkv
    hk = bhk % Hkv
    q0, Sq = seq_range(CUQ, scq, b, SQ, VARLEN)
    k0, Sk = seq_range(CUK, sck, b, SK, VARLEN)
    j0 = pid_n * BN
    if j0 >= Sk:
        return
    b64 = b.to(tl.int64)
    hk64 = hk.to(tl.int64)
    r64 = q0.to(tl.int64)
    c64 = k0.to(tl.int64)
    offs_n = j0 + tl.arange(0, BN)
    if I64:
        offs_n = offs_n.to(tl.int64)
    d = tl.arange(0, BD)
    e = tl.arange(0, BDV)
    nn = offs_n[:, None]
    k = load_tile(K + b64 * skb + hk64 * skh + c64 * sks + nn * sks + d[None, :] * skd, nn, Sk, d[None, :], D, BD,
                  True)
    v = load_tile(V + b64 * svb + hk64 * svh + c64 * svs + nn * svs + e[None, :] * svd, nn, Sk, e[None, :], DV,
                  BDV, True)
    k = wide(k, DO.dtype.element_ty)   # FP8: k and v widened to bf16 / f16 once (exact): this kernel's dots are
    v = wide(v, DO.dtype.element_ty)   # 16-bit (an e4m3 S^T = K Q^T costs more registers than it saves here)
    dk = tl.zeros([BN, BD], tl.float32)
    dv = tl.zeros([BN, BDV], tl.float32)
    off = band_off(Sq, Sk, TOP_LEFT)
    lo, flo, fhi, hi = band(j0, BN, BM, Sq, -off, WR, WL, HAS_WR, HAS_WL)
    for g in loop(0, GROUP):
        h = hk * GROUP + g
        h64 = h.to(tl.int64)
        qbase = Q + b64 * sqb + h64 * sqh + r64 * sqs
        dobase = DO + b64 * sgb + h64 * sgh + r64 * sgs
        lbase = LSE + b64 * slb + h64 * slh + r64 * sls
        dbase = DELTA + b64 * stb + h64 * sth + r64 * sts
        mask_p = MASKP + b64 * smb + h64 * smh
        bm_p = BMP + b64 * sbb + h64 * sbh
        if ALIBI:
            slope = tl.load(SLOPES + b64 * sab + h64 * sah).to(tl.float32)
        else:
            slope = 0.0
        ctr = doff + (b64 * Hq + h64) * CQ * CK
        qd, kd, vd = descales(QDS, KDS, VDS, sqds, skds, svds, h, hk, FP8)
        if FP8:         # this head's descales fold into its score scale
            sc = scale * (qd * kd)
            sc2 = scale2 * (qd * kd)
        else:
            sc = scale
            sc2 = scale2
        dk, dv = _dkdv_span(dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, lo, flo, j0, offs_n, Sq, Sk, off,
                            sqs, sqd, sgs, sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, sc, sc2,
                            cap, WL, WR, pdrop, seed, ctr, CK, vd, qd, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK,
                            BMASK, DROPOUT, I64, BM, D, DV, BD, BDV, PREC)
        dk, dv = _dkdv_span(dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, flo, fhi, j0, offs_n, Sq, Sk,
                            off, sqs, sqd, sgs, sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, sc,
                            sc2, cap, WL, WR, pdrop, seed, ctr, CK, vd, qd, False, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK,
                            BMASK, DROPOUT, I64, BM, D, DV, BD, BDV, PREC)
        dk, dv = _dkdv_span(dk, dv, k, v, qbase, dobase, LSE, DELTA, lbase, dbase, fhi, hi, j0, offs_n, Sq, Sk, off,
                            sqs, sqd, sgs, sgd, sls, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, sc, sc2,
                            cap, WL, WR, pdrop, seed, ctr, CK, vd, qd, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK,
                            BMASK, DROPOUT, I64, BM, D, DV, BD, BDV, PREC)
    dk = dk * scale
    mk = nn < Sk
    if D == BD:
        tl.store(DK + b64 * sdkb + hk64 * sdkh + c64 * sdks + nn * sdks + d[None, :] * sdkd,
                 dk.to(DK.dtype.element_ty), mask=mk)
    else:
        tl.store(DK + b64 * sdkb + hk64 * sdkh + c64 * sdks + nn * sdks + d[None, :] * sdkd,
                 dk.to(DK.dtype.element_ty), mask=mk & (d[None, :] < D))
    if DV == BDV:
        tl.store(DV_ + b64 * sdvb + hk64 * sdvh + c64 * sdvs + nn * sdvs + e[None, :] * sdvd,
                 dv.to(DV_.dtype.element_ty), mask=mk)
    else:
        tl.store(DV_ + b64 * sdvb + hk64 * sdvh + c64 * sdvs + nn * sdvs + e[None, :] * sdvd,
                 dv.to(DV_.dtype.element_ty), mask=mk & (e[None, :] < DV))


@triton.jit
def _dq_step(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, j0, offs_m, Sq, Sk, off, sks, skd, svs, svd,
             mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK, vd, qd,
             MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
             ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
             I64: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
             BDV: tl.constexpr, PREC: tl.constexpr, TMA: tl.constexpr):
    """One key block's contribution to a query block's dQ (k / v through KD / VD at ``tk`` under TMA)."""
    offs_n = j0 + tl.arange(0, BN)
    if I64:
        offs_n = offs_n.to(tl.int64)
    d = tl.arange(0, BD)
    e = tl.arange(0, BDV)
    if TMA:
        k = KD.load([tk[0], tk[1], j0, 0]).reshape(BN, BD)
        v = VD.load([tk[0], tk[1], j0, 0]).reshape(BN, BDV)
    else:
        k = load_tile(kbase + offs_n[:, None] * sks + d[None, :] * skd, offs_n[:, None], Sk, d[None, :], D, BD,
                      MASKED)
        v = load_tile(vbase + offs_n[:, None] * svs + e[None, :] * svd, offs_n[:, None], Sk, e[None, :], DV, BDV,
                      MASKED)
    BM: tl.constexpr = q.shape[0]
    qk = dot(q, tl.trans(k), tl.zeros([BM, BN], tl.float32), PREC)
    dp = dot(do, tl.trans(wide(v, do.dtype)), tl.zeros([BM, BN], tl.float32), PREC)
    if v.dtype == tl.float8e4nv:
        dp = dp * vd
    p, ds = _p_ds(qk, dp, offs_m[:, None], offs_n[None, :], lse2[:, None], delta[:, None], Sq, Sk, off, WL, WR,
                  scale, scale2, cap, slope, mask_p, smi, smj, bm_p, sbi, sbj, bsize, pdrop, seed, ctr, CK, MASKED,
                  HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT)
    kk = wide(k, do.dtype)          # (the k descale is applied to the final dQ)
    return dot(ds.to(kk.dtype), kk, dq, PREC)


@triton.jit
def _dq_span(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, lo, hi, i0, offs_m, Sq, Sk, off, sks, skd, svs, svd,
             mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK, vd, qd,
             MASKED: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
             ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
             I64: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr,
             BDV: tl.constexpr, PREC: tl.constexpr, TMA: tl.constexpr):
    for j0 in loop(lo, hi, BN):
        if BMASK == 1:
            if tile_on(bm_p, i0, j0, sbi, sbj, bsize, BMASK):
                dq = _dq_step(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, j0, offs_m, Sq, Sk, off, sks, skd,
                              svs, svd,
                              mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                              seed, ctr, CK, vd, qd, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT,
                              I64, BN, D, DV, BD, BDV, PREC, TMA)
        else:
            dq = _dq_step(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, j0, offs_m, Sq, Sk, off, sks, skd, svs, svd,
                          mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop,
                          seed, ctr, CK, vd, qd, MASKED, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN,
                          D, DV, BD, BDV, PREC, TMA)
    return dq


@fast_kernel
def _bwd_dq_kernel(Q, K, V, DO, KD, VD, LSE, DELTA, DQ, CUQ, CUK, scq, sck,
                   sqb, sqh, sqs, sqd, skb, skh, sks, skd, svb, svh, svs, svd, sgb, sgh, sgs, sgd,
                   sdqb, sdqh, sdqs, sdqd, slb, slh, sls, stb, sth, sts, Hq, GROUP, SQ, SK,
                   MASKP, smb, smh, smi, smj, SLOPES, sab, sah, BMP, sbb, sbh, sbi, sbj, bsize,
                   scale, scale2, cap, WL, WR, pdrop, seed, doff, CQ, CK, QDS, KDS, VDS, sqds, skds, svds,
                   TOP_LEFT: tl.constexpr, HAS_WL: tl.constexpr, HAS_WR: tl.constexpr, SOFTCAP: tl.constexpr,
                   ALIBI: tl.constexpr, MASK: tl.constexpr, BMASK: tl.constexpr, DROPOUT: tl.constexpr,
                   VARLEN: tl.constexpr, I64: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                   D: tl.constexpr, DV: tl.constexpr, BD: tl.constexpr, BDV: tl.constexpr, PREC: tl.constexpr,
                   TMA: tl.constexpr):
    pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
    bh = tl.program_id(1)
    b = bh // Hq
    h = bh % Hq
    q0, Sq = seq_range(CUQ, scq, b, SQ, VARLEN)
    k0, Sk = seq_range(CUK, sck, b, SK, VARLEN)
    i0 = pid_m * BM
    if i0 >= Sq:
        return
    b64 = b.to(tl.int64)
    h64 = h.to(tl.int64)
    hk64 = (h // GROUP).to(tl.int64)
    r64 = q0.to(tl.int64)
    c64 = k0.to(tl.int64)
    kbase = K + b64 * skb + hk64 * skh + c64 * sks
    vbase = V + b64 * svb + hk64 * svh + c64 * svs
    mask_p = MASKP + b64 * smb + h64 * smh
    bm_p = BMP + b64 * sbb + h64 * sbh
    if ALIBI:
        slope = tl.load(SLOPES + b64 * sab + h64 * sah).to(tl.float32)
    else:
        slope = 0.0
    ctr = doff + bh.to(tl.int64) * CQ * CK
    FP8: tl.constexpr = Q.dtype.element_ty == tl.float8e4nv
    qd, kd, vd = descales(QDS, KDS, VDS, sqds, skds, svds, h, h // GROUP, FP8)
    dqs = scale * kd    # dQ of the dequantized q: scale * dS (k_descale k)
    if FP8:
        scale = scale * (qd * kd)
        scale2 = scale2 * (qd * kd)
    offs_m = i0 + tl.arange(0, BM)
    if I64:
        offs_m = offs_m.to(tl.int64)
    mm = offs_m[:, None]
    d = tl.arange(0, BD)
    e = tl.arange(0, BDV)
    q = load_tile(Q + b64 * sqb + h64 * sqh + r64 * sqs + mm * sqs + d[None, :] * sqd, mm, Sq, d[None, :], D, BD,
                  True)
    do = load_tile(DO + b64 * sgb + h64 * sgh + r64 * sgs + mm * sgs + e[None, :] * sgd, mm, Sq, e[None, :], DV,
                   BDV, True)
    lse2, delta = _row_stats(LSE, DELTA, LSE + b64 * slb + h64 * slh + r64 * sls,
                             DELTA + b64 * stb + h64 * sth + r64 * sts, offs_m, sls, Sq, True)
    dq = tl.zeros([BM, BD], tl.float32)
    tk = (b, h // GROUP)
    off = band_off(Sq, Sk, TOP_LEFT)
    lo, flo, fhi, hi = band(i0, BM, BN, Sk, off, WL, WR, HAS_WL, HAS_WR)
    dq = _dq_span(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, lo, flo, i0, offs_m, Sq, Sk, off, sks, skd, svs,
                  svd, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK,
                  vd, qd, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN, D, DV, BD, BDV, PREC,
                  TMA)
    dq = _dq_span(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, flo, fhi, i0, offs_m, Sq, Sk, off, sks, skd, svs,
                  svd, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK,
                  vd, qd, False, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN, D, DV, BD, BDV, PREC,
                  TMA)
    dq = _dq_span(dq, q, do, lse2, delta, kbase, vbase, KD, VD, tk, fhi, hi, i0, offs_m, Sq, Sk, off, sks, skd, svs,
                  svd, mask_p, smi, smj, slope, bm_p, sbi, sbj, bsize, scale, scale2, cap, WL, WR, pdrop, seed, ctr, CK,
                  vd, qd, True, HAS_WL, HAS_WR, SOFTCAP, ALIBI, MASK, BMASK, DROPOUT, I64, BN, D, DV, BD, BDV, PREC,
                  TMA)
    dq = (dq * dqs).to(DQ.dtype.element_ty)
    qb = DQ + b64 * sdqb + h64 * sdqh + r64 * sdqs + mm * sdqs + d[None, :] * sdqd
    if D == BD:
        tl.store(qb, dq, mask=mm < Sq)
    else:
        tl.store(qb, dq, mask=(mm < Sq) & (d[None, :] < D))


# ---------------------------------------------------------------------------------------------------- host side

# (dK/dV tile: bn = key rows per program, bm = query rows per step; dQ tile: bm = query rows per program, bn = key
# rows per step) per padded head dim, bf16/f16.  The dK/dV program keeps K, V (16-bit) and two f32 accumulators of
# [bn, D] in registers: bn = 128, D = 128, 8 warps is 2 * 64 + 2 * 32 registers of state per thread, so the query
# step is 32 rows (sm_90: 243 registers, no spill; 64 rows spill 48-96 bytes).  D = 256 halves the key block.
# Measured on the H100 (bench/flash_tile_sweep.py): 4-warp 64x64 / 32x64 tiles beat the 8-warp 128-key ones the
# register counts suggested: D128 64x64 w4 s2 417 TF/s non-causal, 343 causal, 374 GQA (32x128 w8: 326 / 326 / 323);
# D64 32x64 w4 s3 327 (247); D256 32x32 w4 s2 151 (134).
_BWD16_PLAIN = {64: (TileCfg(32, 64, 4, 3), TileCfg(64, 32, 4, 3)),
                128: (TileCfg(64, 64, 4, 2), TileCfg(64, 64, 4, 2)),
                256: (TileCfg(32, 32, 4, 2), TileCfg(32, 32, 4, 2))}
# every feature at once (mask, ALiBi, softcap, dropout, window: the worst case): 16-row query steps, 32-key dQ
# steps (D128 dK/dV still spills 8 bytes; D64 239 registers, D256 250)
_BWD16 = {64: (TileCfg(16, 128, 8, 2), TileCfg(128, 32, 8, 2)),
          128: (TileCfg(16, 128, 8, 2), TileCfg(128, 32, 8, 2)),
          256: (TileCfg(32, 32, 8, 2), TileCfg(32, 32, 8, 2))}
_BWDTF32 = {64: (TileCfg(32, 64, 4, 2), TileCfg(64, 32, 4, 2)),
            128: (TileCfg(32, 64, 8, 2), TileCfg(64, 32, 8, 2)),
            256: (TileCfg(16, 32, 8, 1), TileCfg(32, 16, 8, 1))}
# exact f32 (FMA-unit dots): 8 warps, small tiles (sm_90: 71-164 registers, no spill)
_BWD32 = {64: (TileCfg(64, 32, 8, 2), TileCfg(64, 32, 8, 2)),
          128: (TileCfg(16, 32, 8, 2), TileCfg(32, 32, 8, 2)),
          256: (TileCfg(16, 32, 8, 1), TileCfg(32, 16, 8, 2))}


def bwd_configs(p: Problem, dtype, tma: bool | None = None) -> tuple[TileCfg, TileCfg]:
    """(dK/dV config, dQ config) of a problem; TMA (``tma_wanted``): the dQ loop's k / v tiles through descriptors
    (the dK/dV kernel keeps its pointer loads: with descriptors it measured no faster on the H100, and its D128
    64x64 tile spills either way, 240 bytes with pointers and 136 with descriptors on sm_90)."""
    bd, bdv = head_blocks(p.D, p.Dv, p.fp8)
    if tma is None:
        tma = tma_wanted(p, dtype)
    if dtype != torch.float32:
        table = _BWD16_PLAIN if p.plain else _BWD16
    else:
        table = _BWDTF32 if p.prec == "tf32" else _BWD32
    kv, qc = table[64 if max(bd, bdv) <= 64 else 128 if max(bd, bdv) <= 128 else 256]
    return fit_tiles(kv, p.Sq, p.Sk, p.block_size), dataclasses.replace(fit_tiles(qc, p.Sq, p.Sk, p.block_size),
                                                                        tma=tma)


def delta_numel(p: Problem, Tq: int | None = None) -> int:
    """f32 elements of the delta buffer: one per query row and head (the workspace)."""
    return p.Hq * Tq if p.varlen else p.B * p.Hq * p.Sq


def flash_backward(p: Problem, do, q, k, v, out, lse, dq, dk, dv, cfgs, glse=None, delta=None) -> None:
    """dq, dk, dv of the problem (tensors of its layout) from the saved out / lse and the upstream do (and glse,
    the lse output's gradient); ``delta`` an f32 buffer of ``delta_numel`` elements (allocated when None)."""
    lay = p.layout
    kvc, qc = cfgs
    if p.B * p.Hq * p.Sq == 0:      # no query rows: dq is empty and no key sees a gradient
        dk.zero_()
        dv.zero_()
        return
    Tq = q.shape[0] if p.varlen else None
    if delta is None:
        delta = torch.empty(delta_numel(p, Tq), dtype=torch.float32, device=q.device)
    delta = delta[:delta_numel(p, Tq)].view((p.Hq, Tq) if p.varlen else (p.B, p.Hq, p.Sq))
    i64 = needs_i64(p, *((t, lay) for t in (q, k, v, do, dq, dk, dv, out)))
    cu = cu_args(p, q)
    _, bdv = head_blocks(p.D, p.Dv, p.fp8)
    ls, ts = lse_strides(lse, p.varlen), lse_strides(delta, p.varlen)
    gl = glse if glse is not None else lse
    pre_bm = 64
    _bwd_pre_kernel[(cdiv(p.Sq, pre_bm), p.B * p.Hq)](
        out, do, gl, delta, cu[0], cu[2], *bhsd_strides(out, lay), *bhsd_strides(do, lay),
        *lse_strides(gl, p.varlen), *ts, p.Hq, p.Sq,
        HAS_GLSE=glse is not None, VARLEN=p.varlen, BM=pre_bm, DV=p.Dv, BDV=bdv, num_warps=4)
    feats = feature_args(p, q)
    common = (*bhsd_strides(q, lay), *bhsd_strides(k, lay), *bhsd_strides(v, lay), *bhsd_strides(do, lay))
    if p.Sk == 0:
        dq.zero_()      # (dk, dv are empty)
        return
    if qc.tma and not tma_ok(lay, q, k, v, do):     # a misaligned view: the pointer kernels' tiles
        kvc, qc = bwd_configs(p, q.dtype if not p.fp8 else do.dtype, tma=False)
    bd, bdv = head_blocks(p.D, p.Dv, p.fp8)
    kv = (descriptor(k, lay, qc.bn, bd), descriptor(v, lay, qc.bn, bdv)) if qc.tma else (k, v)
    _bwd_dkdv_kernel[(cdiv(p.Sk, kvc.bn), p.B * p.Hkv)](
        q, k, v, do, lse, delta, dk, dv, *cu, *common, *bhsd_strides(dk, lay), *bhsd_strides(dv, lay),
        *ls, *ts, p.Hq, p.group, p.Sq, p.Sk, *feats, **feature_constexprs(p, kvc.bm, kvc.bn, i64),
        num_warps=kvc.warps, num_stages=kvc.stages)
    _bwd_dq_kernel[(cdiv(p.Sq, qc.bm), p.B * p.Hq)](
        q, k, v, do, *kv, lse, delta, dq, *cu, *common, *bhsd_strides(dq, lay), *ls, *ts, p.Hq, p.group, p.Sq,
        p.Sk, *feats, **feature_constexprs(p, qc.bm, qc.bn, i64), TMA=qc.tma, num_warps=qc.warps, num_stages=qc.stages)
