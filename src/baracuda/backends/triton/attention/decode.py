"""Triton split-KV attention for decoding and serving: sdpa_decode (contiguous cache) and paged_attention (FlashInfer's
NHD page table), one kernel (PAGED constexpr) and the cascade merge of its splits (merge.py).

Grid (work item, kv head, split).  A work item is one tile of QB query tokens of one request; its program computes
the rows of all G = Hq / Hkv query heads of its kv head (GQA: rows r = token * G + head, padded to BLOCK_M >= 16
for the tensor-core dot), so the keys and values of a (request, kv head) are read once per split, not once per
query head.  Decode (one query per request, G = 4): a 16-row dot of which 4 rows are live -- the MMA is idle
anyway, the kernel is bound by the K/V bytes.  Split s of NS covers a BLOCK_N-aligned NS-th of the keys the tile
can see ([0, L) cut to the causal and window bounds of its queries), with an online softmax in base 2 (the scale
and log2(e) folded); NS > 1 writes f32 partials (o, lse) that ``merge_parts`` reduces (flash decoding).

Paged: request b's work items are tiles T_b .. T_{b+1} - 1 with T_b = (qo_indptr[b] + b (QB - 1)) // QB, a
partition of [0, (Tq + B (QB - 1)) // QB) that gives each request at least ceil(nq_b / QB) tiles without a prefix
sum: a program finds its request by a binary search over qo_indptr (log2(B) cached loads), surplus tiles exit.
Key j of request b lives in page kv_indices[kv_indptr[b] + j // page], row j % page.

FP8 (e4m3) caches are loaded as bytes and converted to q's dtype in registers (exact: e4m3 fits f16 and bf16);
k_scale is folded into the score scale, v_scale into the final normalization.  Index values are checked as they
are read: a bad one (page index outside the pool, offsets out of order or range, a length out of range) is
clamped or masked -- nothing is read or written out of bounds -- and raises a flag that ``_core/checks.py`` turns
into an InvalidProblemError.  Bytes (the issue's decode row, bf16, B 64, KV 8192, Hkv 8, D 128): 2 GiB of K/V
read once, ~1 MiB of q/out; the copy ceiling of 2.99 TB/s bounds it at ~0.72 ms.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.errors import InvalidProblemError
from .._lib.binding import contiguous_outputs, run_of
from .._lib.config import num_sms, overrides
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import INTERPRETING, loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .merge import merge_parts

_FORCE, forced = overrides("force the decode kernels' choices in tests: splits=, block_n=, qb=")
_LOG2E = 1.4426950408889634
_LN2 = tl.constexpr(0.6931471805599453)
_MAX_ROWS = 256      # query rows (tokens x heads of a kv head) of one program
_MAX_D = 256         # head dims held in registers
_FLAG_BYTES = 16


@triton.jit
def _tanh(x):
    """tanh from one exp of -2|x| (no overflow)."""
    e = tl.exp(-2.0 * tl.abs(x))
    t = (1.0 - e) / (1.0 + e)
    return tl.where(x < 0, -t, t)


@triton.jit
def _mma(a, b, IEEE: tl.constexpr, DOT_F32: tl.constexpr):
    """a @ b in f32 (IEEE products for f32 operands).  DOT_F32: the interpreter multiplies bf16 bit patterns as
    integers, so its operands are upcast first (exact)."""
    if DOT_F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
    elif IEEE:
        return tl.dot(a, b, input_precision="ieee")
    else:
        return tl.dot(a, b)


@triton.jit
def _request(w, qo_ptr, kvp_ptr, last_ptr, B, TQ, NQ, NNZ, PS, SMAX, QB: tl.constexpr, PAGED: tl.constexpr,
             HAS_LENS: tl.constexpr, LOG_B: tl.constexpr):
    """Work item w -> (request b, its first query token, its queries nq, the tile index, its key count L, its first
    page offset, flag): offsets and lengths checked and clamped."""
    if PAGED:
        lo = w * 0
        hi = lo + B
        for _ in tl.static_range(LOG_B):        # T_lo <= w < T_hi
            mid = (lo + hi) // 2
            go = (tl.load(qo_ptr + mid) + mid * (QB - 1)) // QB <= w
            lo = tl.where(go, mid, lo)
            hi = tl.where(go, hi, mid)
        b = lo
        q0 = tl.load(qo_ptr + b)
        q1 = tl.load(qo_ptr + b + 1)
        tile = w - (q0 + b * (QB - 1)) // QB
        bad_q = (q0 < 0) | (q1 > TQ) | (q1 < q0)
        nq = tl.where(bad_q, 0, q1 - q0)
        q0 = tl.where(bad_q, 0, q0)
        p0 = tl.load(kvp_ptr + b)
        p1 = tl.load(kvp_ptr + b + 1)
        bad_p = (p0 < 0) | (p1 > NNZ) | (p1 < p0)
        npg = tl.where(bad_p, 0, p1 - p0)
        p0 = tl.where(bad_p, 0, p0)
        last = tl.load(last_ptr + b)
        bad_l = (last < 0) | (last > PS)
        last = tl.minimum(tl.maximum(last, 0), PS)
        L = tl.where(npg > 0, (npg - 1) * PS + last, 0)
        # the offsets start at 0 and end at Tq (every output row is written): the first program checks
        ends = (w == 0) & ((tl.load(qo_ptr) != 0) | (tl.load(qo_ptr + B) != TQ))
        # the flag's value names the operand (_WHAT): 1 qo_indptr, 2 kv_indptr, 3 kv_last_page_len, 4 kv_indices
        flag = tl.maximum(tl.maximum((bad_q | ends).to(tl.int32), bad_p.to(tl.int32) * 2), bad_l.to(tl.int32) * 3)
    else:
        b = w
        q0 = w * 0
        nq = q0 + NQ
        tile = q0
        p0 = q0
        if HAS_LENS:
            L = tl.load(last_ptr + b)
            flag = ((L < 0) | (L > SMAX)).to(tl.int32)
            L = tl.minimum(tl.maximum(L, 0), SMAX)
        else:
            L = q0 + SMAX
            flag = q0
    return b, q0, nq, tile, L, p0, flag


@fast_kernel
def _attn_kernel(q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, flag_ptr, qo_ptr, kvp_ptr, kvi_ptr, last_ptr,
                 B, TQ, NQ, P, PS, NNZ, SMAX, G, D, DV, HQ,
                 sqb, sqt, sqh, sqd, skp, skr, skh, skd, svp, svr, svh, svd, o_split, l_split,
                 qk_scale, softcap, window, v_scale,
                 PAGED: tl.constexpr, HAS_LENS: tl.constexpr, CAUSAL: tl.constexpr, WINDOW: tl.constexpr,
                 SOFTCAP: tl.constexpr, QB: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 BD: tl.constexpr, BDV: tl.constexpr, LOG_B: tl.constexpr, IEEE: tl.constexpr,
                 DOT_F32: tl.constexpr):
    w = tl.program_id(0)
    h = tl.program_id(1)
    s = tl.program_id(2)
    NS = tl.num_programs(2)
    b, q0, nq, tile, L, p0, flag = _request(w, qo_ptr, kvp_ptr, last_ptr, B, TQ, NQ, NNZ, PS, SMAX, QB, PAGED,
                                            HAS_LENS, LOG_B)
    r = tl.arange(0, BLOCK_M)
    qi = r // G
    i = tile * QB + qi                                   # the query's index among its request's nq
    row_ok = (qi < QB) & (i < nq)
    hq = h * G + (r - qi * G)
    d = tl.arange(0, BD)
    dm = d < D
    q = tl.load(q_ptr + (b.to(tl.int64) * sqb + (q0 + i).to(tl.int64) * sqt + hq * sqh)[:, None] + d[None, :] * sqd,
                mask=row_ok[:, None] & dm[None, :], other=0.0)
    pos = L - nq + i                                     # bottom-right: the queries are the request's last tokens
    # the keys this tile can see: [lo, hi), cut to the causal bound of its last query and the window of its first
    live = tile * QB < nq
    hi = L
    if CAUSAL:
        hi = tl.minimum(L, L - nq + tl.minimum(tile * QB + QB, nq))
    lo = hi * 0
    if WINDOW:
        lo = tl.maximum(lo, L - nq + tile * QB - window)
    span = tl.where(live, tl.maximum(hi - lo, 0), 0)
    chunk = tl.cdiv(tl.cdiv(span, NS), BLOCK_N) * BLOCK_N
    k_lo = lo + s * chunk
    k_hi = tl.minimum(lo + span, k_lo + chunk)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BDV], tl.float32)
    dv = tl.arange(0, BDV)
    dvm = dv < DV
    for j0 in loop(k_lo, k_hi, BLOCK_N):
        j = j0 + tl.arange(0, BLOCK_N)
        jm = j < k_hi
        if PAGED:
            pg = tl.load(kvi_ptr + p0 + j // PS, mask=jm, other=0)
            bad = jm & ((pg < 0) | (pg >= P))
            flag = tl.maximum(flag, tl.max(bad.to(tl.int32), 0) * 4)
            jm = jm & ~bad
            pg = tl.where(bad, 0, pg).to(tl.int64)
            row = j % PS
            kb = pg * skp + row * skr
            vb = pg * svp + row * svr
        else:
            kb = b.to(tl.int64) * skp + j.to(tl.int64) * skr
            vb = b.to(tl.int64) * svp + j.to(tl.int64) * svr
        k = tl.load(k_ptr + (kb + h * skh)[:, None] + d[None, :] * skd, mask=jm[:, None] & dm[None, :], other=0.0)
        qk = _mma(q, tl.trans(k.to(q.dtype)), IEEE, DOT_F32)
        sc = qk * qk_scale                               # base 2: scale, k_scale and log2(e) folded on the host
        if SOFTCAP:                                      # c tanh(s / c) log2(e) = c' tanh(s' / c'), c' = c log2(e)
            sc = softcap * _tanh(sc / softcap)
        ok = row_ok[:, None] & jm[None, :]
        if CAUSAL:
            ok = ok & (j[None, :] <= pos[:, None])
        if WINDOW:
            ok = ok & (j[None, :] >= pos[:, None] - window)
        sc = tl.where(ok, sc, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(sc, 1))
        ms = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - ms)
        p = tl.exp2(sc - ms[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + (vb + h * svh)[:, None] + dv[None, :] * svd, mask=jm[:, None] & dvm[None, :], other=0.0)
        acc = acc * alpha[:, None] + _mma(p.to(q.dtype), v.to(q.dtype), IEEE, DOT_F32)
        m_i = m_new
    has = l_i > 0
    l_s = tl.where(has, l_i, 1.0)
    out = acc * (v_scale / l_s)[:, None]
    lse = tl.where(has, (m_i + tl.log2(l_s)) * _LN2, float("-inf"))
    tok = (b * NQ + q0 + i).to(tl.int64)   # the output row: [B, Sq] flattened (NQ = Sq) / Tq (paged: NQ = 0)
    orow = tok * HQ + hq
    tl.store(o_ptr + s * o_split + orow[:, None] * DV + dv[None, :], out.to(o_ptr.dtype.element_ty),
             mask=row_ok[:, None] & dvm[None, :])
    tl.store(lse_ptr + s * l_split + orow, lse, mask=row_ok)
    tl.store(flag_ptr, flag, mask=flag > 0)


# -- host side ------------------------------------------------------------------------------------------------------
def dense(idx):
    """An index operand as the kernels read it: unit stride (a strided one is copied: B + 1 or nnz small ints)."""
    return idx if idx.is_contiguous() else idx.contiguous()


def _geometry(desc):
    """(paged, q rows per request tile QB, work items, kv heads, G, D, Dv, mean keys per request, tokens)."""
    paged = desc.op == "paged_attention"
    q = desc.inputs[0]
    kc = desc.inputs[2 if paged else 1]
    vc = desc.inputs[3 if paged else 2]
    hq, hkv, D, Dv = q.shape[-2], kc.shape[2], kc.shape[3], vc.shape[3]
    G = hq // hkv
    if paged:
        Tq, B = q.shape[0], desc.inputs[1].shape[0] - 1
        mean_q = cdiv(Tq, max(B, 1))
        qb = _FORCE.get("qb", max(1, min(next_power_of_2(max(mean_q, 1)), 64 // G)))
        work = (Tq + B * (qb - 1)) // qb if B else 0
        keys = desc.inputs[5].shape[0] * kc.shape[1] / max(B, 1)
    else:
        B, Sq = q.shape[:2]
        Tq, qb, work, keys = B * Sq, max(Sq, 1), B if Sq else 0, kc.shape[1]
    return paged, qb, work, hkv, G, D, Dv, keys, Tq


def _splits(desc):
    """NS: enough programs to fill the GPU (~8 per SM), each split >= 256 keys, at most 64 splits."""
    paged, qb, work, hkv, G, D, Dv, keys, Tq = _geometry(desc)
    if "splits" in _FORCE:
        return _FORCE["splits"]
    progs = max(work * hkv, 1)
    return max(1, min(64, cdiv(8 * num_sms(), progs), cdiv(int(keys), 256)))


def _workspace(desc):
    paged, qb, work, hkv, G, D, Dv, keys, Tq = _geometry(desc)
    ns = _splits(desc)
    hq = hkv * G
    return _FLAG_BYTES + (4 * ns * Tq * hq * (Dv + 1) if ns > 1 else 0)


def _supports(desc):
    paged, qb, work, hkv, G, D, Dv, keys, Tq = _geometry(desc)
    if qb * G > _MAX_ROWS:
        return f"{qb * G} query rows per kv head and tile (GQA group {G}) over {_MAX_ROWS}"
    if max(D, Dv) > _MAX_D:
        return f"head dim {max(D, Dv)} over {_MAX_D}: a tile's rows live in registers"
    return None


def _bind(desc, pref=None):
    paged, qb, work, hkv, G, D, Dv, keys, Tq = _geometry(desc)
    ns = _splits(desc)
    hq = hkv * G
    bm = max(16, next_power_of_2(qb * G))
    bn = _FORCE.get("block_n", 64 if max(D, Dv) <= 128 else 32)
    scale = desc.attr("scale")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    window = desc.attr("window_left")
    has_lens = not paged and desc.attr("has_kv_lens")
    checks = paged or has_lens
    f32 = desc.dtype == DType.f32
    op = desc.op
    n_b = desc.inputs[1].shape[0] - 1 if paged else 0
    const = dict(PAGED=paged, HAS_LENS=has_lens, CAUSAL=desc.attr("causal"), WINDOW=window is not None,
                 SOFTCAP=desc.attr("softcap") > 0, QB=qb, BLOCK_M=bm, BLOCK_N=bn, BD=max(16, next_power_of_2(D)),
                 BDV=max(16, next_power_of_2(Dv)), LOG_B=max(1, n_b.bit_length()), IEEE=f32,
                 DOT_F32=INTERPRETING and desc.dtype == DType.bf16)
    scalars = (scale * desc.attr("k_scale") * _LOG2E, (float(desc.attr("softcap")) or 1.0) * _LOG2E, window or 0,
               desc.attr("v_scale"))

    def run(desc_, inputs, outputs, ws):
        out, lse = outputs
        if paged:
            q, qo, kc, vc, kvp, kvi, last = inputs
            qo, kvp, kvi, last = (dense(x) for x in (qo, kvp, kvi, last))
            sqb, (sqt, sqh, sqd) = 0, q.stride()
            P, PS, NNZ, SMAX, NQ = kc.shape[0], kc.shape[1], kvi.shape[0], 0, 0
        else:
            q, kc, vc = inputs[:3]
            qo = kvp = kvi = q
            last = dense(inputs[3]) if has_lens else q
            sqb, sqt, sqh, sqd = q.stride()
            P, PS, NNZ, SMAX, NQ = 0, 1, 0, kc.shape[1], q.shape[1]
        if out.numel() == 0 and lse.numel() == 0:
            return
        flag = ws[:_FLAG_BYTES].view(torch.int32)[:1]
        if checks:
            flag.zero_()
        if work and hkv:
            if ns > 1:
                part = ws[_FLAG_BYTES:].view(torch.float32)
                po, pl = part[: ns * Tq * hq * Dv], part[ns * Tq * hq * Dv: ns * Tq * hq * (Dv + 1)]
                dst, split = (po, pl), (Tq * hq * Dv, Tq * hq)
            else:
                dst, split = (out, lse), (0, 0)
            _attn_kernel[(work, hkv, ns)](
                q, kc, vc, dst[0], dst[1], flag, qo, kvp, kvi, last, n_b, Tq, NQ, P, PS, NNZ, SMAX, G, D, Dv, hq,
                sqb, sqt, sqh, sqd, *kc.stride(), *vc.stride(), *split, *scalars, **const, num_warps=4,
                num_stages=2)
            if ns > 1:
                merge_parts(po.view(ns, Tq, hq, Dv), pl.view(ns, Tq, hq), out.view(Tq, hq, Dv), lse.view(Tq, hq))
        else:
            out.zero_()
            lse.fill_(float("-inf"))
        if checks:
            flagged(flag, pref, lambda v: InvalidProblemError(op, *_WHAT[int(v) if paged else 0], "a value out of range"))
    return run


_WHAT = {0: ("kv_lens", "lengths in [0, Smax]"),
         1: ("qo_indptr", "non-decreasing offsets from 0 to Tq"),
         2: ("kv_indptr", "non-decreasing offsets in [0, nnz]"),
         3: ("kv_last_page_len", "values in [0, page_size]"),
         4: ("kv_indices", "page indices in [0, P)")}


def _route(desc, pref=None):
    paged, qb, work, hkv, G = _geometry(desc)[:5]
    fp8 = desc.inputs[2 if paged else 1].dtype == DType.f8e4m3
    return f"triton:{desc.op}(split-KV x{_splits(desc)}, GQA group {G}, {qb} queries a tile{', fp8 cache' if fp8 else ''})"


_bound = contiguous_outputs(_bind)
# register_triton checks every operand's dtype against ``dtypes``: the index operands and FP8 caches are listed
_DTYPES = frozenset({DType.f16, DType.bf16, DType.f32})     # q's (the caches may be f8e4m3)
for _op in ("sdpa_decode", "paged_attention"):
    register_triton(_op, run_of(_bound), bind=_bound, supports=_supports, workspace=_workspace, dtypes=_DTYPES,
                    dtypes_note="f64 decoding is the reference backend's (no f64 tensor-core dot; serving runs in "
                    "half precision)", route=_route)
