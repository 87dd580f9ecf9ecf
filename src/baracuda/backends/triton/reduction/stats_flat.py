"""var / std / var_mean / std_mean read flat (the reduction_stats family's fast paths; ``stats.py`` routes to them):
narrow columns (2-64 kept trailing elements: shifted sums per split, folded per column with Chan's formula), short
rows (2-64 reduced trailing elements: one flat load, two passes in the registers) and wide columns (the reduction
family's column tiles, the same fold; one split finished in the first stage).  ``_chan`` is the (count, mean, M2)
merge the generic stats kernel shares."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.reduction_stats import MOMENT_OPS
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.math import sqrt as _sqrt
from .reduce import _blocks, geometry


@triton.jit
def _chan(na, ma, qa, nb, mb, qb):
    """(count, mean, M2) of the union of two disjoint sets (Chan et al.); empty sets are neutral."""
    n = na + nb
    f = tl.where(n > 0, nb / tl.where(n > 0, n, 1.0), 0.0)
    delta = mb - ma
    return n, ma + delta * f, qa + qb + delta * delta * na * f



# -- var / std of narrow rows and columns read flat (bench/var_narrow_probe.py, session 12 on an H200: [1M, 16]
# bf16 over dim 0 61 -> 16 us (torch.compile 14.5), over dim 1 44 -> 9.6 us (compile 10.2); [262144, 64] 135 -> 19
# and 28.5 -> 10 us (compile 42 / 108)) ------------------------------------------------------------------------
_FLAT_LOAD = 1024       # columns: contiguous elements a load
_FLAT_SPLITS = 1024     # columns: splits aimed at
_FLAT_FOLD = 1024       # columns: partials a block of the fold
_FLAT_ROWS = 2048       # rows: elements a program (2048 / C rows)
_FLAT_MAX = 64          # the narrow extent: a power of two from 2 to this


@fast_kernel
def _var_cols_kernel(x_ptr, s1_ptr, s2_ptr, R, rows_per, S, C: tl.constexpr, BR: tl.constexpr):
    """Stage 1 of var over the R rows of a contiguous [R, C]: split s's sums of d = x - K and d^2, K = the column's
    first element (a shift that keeps d O(spread): the moments' cancellation stays small), over runs of BR * C
    contiguous elements, stored per column (s1[c, s], s2[c, s])."""
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    k = tl.load(x_ptr + offs % C).to(tl.float32)
    a1 = tl.zeros([BR * C], tl.float32)
    a2 = tl.zeros([BR * C], tl.float32)
    for start in loop(0, rows_per, BR):
        r = r0 + start
        m = offs < (R - r) * C
        v = tl.load(x_ptr + r * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32)
        d = tl.where(m, v - k, 0.0)
        a1 += d
        a2 += d * d
    c = tl.arange(0, C)
    tl.store(s1_ptr + c * S + s, tl.sum(tl.reshape(a1, [BR, C]), axis=0))
    tl.store(s2_ptr + c * S + s, tl.sum(tl.reshape(a2, [BR, C]), axis=0))


@triton.jit
def _moment_store(x_ptr, v_ptr, m_ptr, c, cm, n, mu, q, corr, SQRT: tl.constexpr, WRITE1: tl.constexpr):
    """Columns c's results from their (count, mean of x - K, M2): var = M2 / max(N - correction, 0) (std: its
    root), the mean K + mean(x - K), K = the column's first element."""
    r = q / tl.maximum(n - corr, 0.0)
    if SQRT:
        r = _sqrt(r)
    tl.store(v_ptr + c, r.to(v_ptr.dtype.element_ty), mask=cm)
    if WRITE1:
        tl.store(m_ptr + c, (tl.load(x_ptr + c, mask=cm, other=0).to(tl.float32) + mu).to(m_ptr.dtype.element_ty),
                 mask=cm)


@fast_kernel
def _var_wide_kernel(x_ptr, s1_ptr, s2_ptr, v_ptr, m_ptr, R, C, rows_per, S, corr, BR: tl.constexpr,
                     BC: tl.constexpr, FINAL: tl.constexpr, SQRT: tl.constexpr, WRITE1: tl.constexpr):
    """Stage 1 of var over the R rows of a contiguous [R, C] of wide rows (C > 64): the reduction family's column
    tiles ([BR, BC], BC contiguous columns, 16 B a thread), each tile's shifted sums reduced over its rows at once
    and added to a per-column running pair (no per-element accumulators, no division per tile), stored per column as
    _var_cols_kernel's (s1[c, s], s2[c, s]) for the same fold.  FINAL (one split: the columns alone fill the GPU,
    e.g. [16, 1M]): the results written here, no partials and no fold."""
    c = tl.program_id(0) * BC + tl.arange(0, BC)
    s = tl.program_id(1)
    cm = c < C
    k = tl.load(x_ptr + c, mask=cm, other=0).to(tl.float32)
    a1 = tl.zeros([BC], tl.float32)
    a2 = tl.zeros([BC], tl.float32)
    rr = tl.arange(0, BR)
    r0 = s.to(tl.int64) * rows_per
    for start in loop(0, rows_per, BR):
        r = r0 + start + rr
        m = (r < R)[:, None] & cm[None, :]
        v = tl.load(x_ptr + r[:, None] * C + c[None, :], mask=m, other=0, eviction_policy="evict_first")
        d = tl.where(m, v.to(tl.float32) - k[None, :], 0.0)
        a1 += tl.sum(d, axis=0)
        a2 += tl.sum(d * d, axis=0)
    if FINAL:
        n = tl.zeros([BC], tl.float32) + R
        mu = a1 / tl.maximum(n, 1.0)
        _moment_store(x_ptr, v_ptr, m_ptr, c, cm, n, mu, tl.maximum(a2 - a1 * mu, 0.0), corr, SQRT, WRITE1)
    else:
        tl.store(s1_ptr + c * S + s, a1, mask=cm)
        tl.store(s2_ptr + c * S + s, a2, mask=cm)


@fast_kernel
def _var_cols_fold(x_ptr, s1_ptr, s2_ptr, v_ptr, m_ptr, R, C, rows_per, S, corr, BC: tl.constexpr,
                   BS: tl.constexpr, SQRT: tl.constexpr, WRITE1: tl.constexpr):
    """Stage 2: the S (count, mean, M2) partials of BC columns merged with Chan's formula (blocks of BS, then a
    tree), in a fixed order (BC * BS <= _FLAT_FOLD: few partials a column take several columns a program; one
    program a column gave [16, 1M] 1M programs of one partial: 0.65 ms, 0.03x eager)."""
    c = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = c < C
    n = tl.zeros([BC, BS], tl.float32)
    mu = tl.zeros([BC, BS], tl.float32)
    q = tl.zeros([BC, BS], tl.float32)
    for s0 in loop(0, S, BS):
        sp = s0 + tl.arange(0, BS)
        ok = sp < S
        ns = tl.where(ok, tl.minimum(rows_per, R - sp.to(tl.int64) * rows_per), 0).to(tl.float32)
        ns = tl.broadcast_to(ns[None, :], [BC, BS])
        mm = cm[:, None] & ok[None, :]
        a1 = tl.load(s1_ptr + c[:, None] * S + sp[None, :], mask=mm, other=0.0)
        a2 = tl.load(s2_ptr + c[:, None] * S + sp[None, :], mask=mm, other=0.0)
        ms = tl.where(ns > 0, a1 / tl.where(ns > 0, ns, 1.0), 0.0)
        n, mu, q = _chan(n, mu, q, ns, ms, tl.maximum(a2 - a1 * ms, 0.0))
    N, MU, Q = tl.reduce((n, mu, q), 1, _chan)
    _moment_store(x_ptr, v_ptr, m_ptr, c, cm, N, MU, Q, corr, SQRT, WRITE1)


@fast_kernel
def _var_rows_kernel(x_ptr, v_ptr, m_ptr, n_rows, corr, C: tl.constexpr, BM: tl.constexpr, SQRT: tl.constexpr,
                     WRITE1: tl.constexpr):
    """var of BM rows of C contiguous elements read as one run: the mean, then M2 from the registers (two exact
    passes)."""
    r0 = tl.program_id(0).to(tl.int64) * BM
    offs = tl.arange(0, BM * C)
    m = offs < (n_rows - r0) * C
    x = tl.reshape(tl.load(x_ptr + r0 * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32),
                   [BM, C])
    mean = tl.sum(x, axis=1) / C
    d = x - mean[:, None]
    r = tl.sum(d * d, axis=1) / tl.maximum(C - corr, 0.0)
    if SQRT:
        r = _sqrt(r)
    rows = r0 + tl.arange(0, BM)
    tl.store(v_ptr + rows, r.to(v_ptr.dtype.element_ty), mask=rows < n_rows)
    if WRITE1:
        tl.store(m_ptr + rows, mean.to(m_ptr.dtype.element_ty), mask=rows < n_rows)


def flat_moment(desc):
    """("cols", BR, rows per split, S) / ("rows", BM) for var / std(_mean) of a real f32 / bf16 / f16 input whose
    kept trailing dims (columns, past the split threshold) or reduced trailing dims (rows) hold 2-64 elements, a
    power of two; ("wide", BR, rows per split, S, BC) for columns of more than 64 (the reduction family's column
    tiles and split, past the split threshold: var over dim 0 of [16384, 4096] bf16 took 215 us in run_stats'
    per-tile Chan merges, 0.20x torch.compile on an H200); else None (``run_stats``)."""
    from .reduce import _SPLIT_MIN_BYTES

    x = desc.inputs[0]
    if x.dtype not in (DType.f32, DType.bf16, DType.f16) or desc.op not in MOMENT_OPS:
        return None
    outer, R, inner, perm = geometry(x.shape, desc.attr("dims"))
    if perm is not None or outer * inner * R == 0:
        return None

    def narrow(n):
        return 2 <= n <= _FLAT_MAX and not n & (n - 1)
    if outer == 1 and narrow(inner) and R * inner * x.dtype.itemsize >= _SPLIT_MIN_BYTES:
        br = _FLAT_LOAD // inner
        rows = cdiv(cdiv(R, _FLAT_SPLITS), br) * br
        return ("cols", br, rows, cdiv(R, rows))
    if outer == 1 and inner > _FLAT_MAX and R * inner * x.dtype.itemsize >= _SPLIT_MIN_BYTES:
        _, br, bc, _, S, chunk = _blocks(outer, R, inner, x.dtype.itemsize)    # (the sum's column tiles)
        return ("wide", br, chunk, S, bc)
    if inner == 1 and narrow(R):
        return ("rows", max(1, _FLAT_ROWS // R))
    return None


def _run_flat_moment(fl, desc, x, outputs, ws):
    outer, R, inner, _ = geometry(desc.inputs[0].shape, desc.attr("dims"))
    targets = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs]
    v, m = targets[0], targets[-1]
    kw = dict(SQRT=desc.op.startswith("std"), WRITE1=len(outputs) > 1)
    corr = float(desc.attr("correction"))
    if fl[0] in ("cols", "wide"):
        _, br, rows, S = fl[:4]
        s1 = s2 = x                     # (wide, one split: no partials)
        if fl[0] == "cols" or S > 1:
            s1 = ws[: S * inner * 4].view(torch.float32)
            s2 = ws[(S * inner * 4 + 15) // 16 * 16:][: S * inner * 4].view(torch.float32)
        if fl[0] == "cols":
            _var_cols_kernel[(S,)](x, s1, s2, R, rows, S, C=inner, BR=br, num_warps=4)
        else:
            _var_wide_kernel[(cdiv(inner, fl[4]), S)](x, s1, s2, v, m, R, inner, rows, S, corr, BR=br, BC=fl[4],
                                                      FINAL=S == 1, num_warps=4, **kw)
        if fl[0] == "cols" or S > 1:
            bs = min(_FLAT_FOLD, next_power_of_2(S))
            bc = min(_FLAT_FOLD // bs, next_power_of_2(inner))
            _var_cols_fold[(cdiv(inner, bc),)](x, s1, s2, v, m, R, inner, rows, S, corr, BC=bc, BS=bs, num_warps=4,
                                               **kw)
    else:
        bm = fl[1]
        _var_rows_kernel[(cdiv(outer, bm),)](x, v, m, outer, corr, C=R, BM=bm, num_warps=4, **kw)
    for o, t in zip(outputs, targets):
        if t is not o:
            o.copy_(t)
