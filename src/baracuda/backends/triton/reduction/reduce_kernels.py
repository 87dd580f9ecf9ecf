"""The Triton kernels of the reductions (``reduce.py`` holds the geometry, the op table and the launches):
``_row_kernel`` (inner == 1) and ``_col_kernel`` (inner > 1), whose combine step is the ``MODE`` constexpr
(the modes and finishing steps are reduce.py's ``_SUM`` ... and ``_P_*``), and the per-tile / per-lane helpers
they share."""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import loop
from .._lib.launch import fast_kernel

@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _load(ptr, off, m, MODE: tl.constexpr, NEG: tl.constexpr, ACC: tl.constexpr, PRE: tl.constexpr,
          HAS_PRE: tl.constexpr, FLT: tl.constexpr):
    """One tile in the accumulator type.  COUNT keeps the stored type (``x != 0`` must see 0.5 and NaN as
    non-zero); ``dtype=`` (HAS_PRE) converts to that dtype first, as torch does, then to the accumulator."""
    v = tl.load(ptr + off, mask=m, other=0)
    if MODE != 5:
        if HAS_PRE:
            if MODE == 4:       # nansum: NaN is zeroed before the conversion (torch: nansum(nan, dtype=bool) = False)
                v = tl.where(v == v, v, 0)
            v = v.to(PRE)
        v = v.to(ACC)
        if NEG:
            if FLT:
                v = -v
            else:
                v = ~v
    return v


# -- one tile reduced at once, then folded into a per-output running value ------------------------------
# Why per tile (and not a [rows, cols] f32 accumulator reduced after the loop): the accumulator costs one
# register per element in flight (32 for a 16 KB bf16 tile on 256 threads); the first version (56 regs
# sum on sm_90) ran 4 resident programs per SM with only 2 of each thread's 4 vector loads in flight
# (~32 KB/SM), 42 % of the H200 copy roofline.  Per-tile reductions keep ~25-35 regs, 8+ programs per SM
# and all 4 loads issued before the first use (>= 128 KB in flight per SM; HBM3 at ~4 TB/s needs
# ~30 KB/SM at ~1 us latency).
@triton.jit
def _max_nan(a, b):
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)


@triton.jit
def _min_nan(a, b):
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)


# NaN-propagating max / min as ONE reduction tree whose combine is the hardware's NaN-propagating max (PTX
# max.NaN): the earlier form (a max of the non-NaN values and a second max of the NaN flags) ran two
# cross-warp trees per tile, amax bf16 [16384, 4096] at 0.91x torch.compile against sum's 1.02x
@triton.jit
def _nanmax(v, m, AXIS: tl.constexpr, FLT: tl.constexpr, LOW: tl.constexpr):
    """Max along AXIS of the valid lanes; a NaN wins.  (A min is the max of -v / ~v, or _nanmin.)"""
    v = tl.where(m, v, LOW)
    if FLT:
        t = tl.reduce(v, AXIS, _max_nan)
    else:
        t = tl.max(v, axis=AXIS)
    return t


@triton.jit
def _nanmin(v, m, AXIS: tl.constexpr, FLT: tl.constexpr, HIGH: tl.constexpr):
    v = tl.where(m, v, HIGH)
    if FLT:
        t = tl.reduce(v, AXIS, _min_nan)
    else:
        t = tl.min(v, axis=AXIS)
    return t


@triton.jit
def _tile_reduce(v, m, idx, AXIS: tl.constexpr, MODE: tl.constexpr, IDX_IN: tl.constexpr, FLT: tl.constexpr,
                 LOW: tl.constexpr, HIGH: tl.constexpr):
    """(value, second) of a [A, B] tile along AXIS; ``second`` is the non-NaN count for NANSUM (stage 2:
    the sum of the partial counts ``idx``), the min for MINMAX (stage 2: of the partial minima ``idx``),
    unused otherwise.  MAX: NaN wins, else the max."""
    if MODE == 0:
        t = tl.sum(tl.where(m, v, 0), axis=AXIS)
        ti = t
    elif MODE == 3:
        t = tl.reduce(tl.where(m, v, 1), AXIS, _mul)
        ti = t
    elif MODE == 4:
        if IDX_IN:      # partial sums may be NaN (inf - inf) and stay so; partial counts add up
            t = tl.sum(tl.where(m, v, 0), axis=AXIS)
            ti = tl.sum(tl.where(m, idx, 0), axis=AXIS)
        else:
            ok = m & (v == v)
            t = tl.sum(tl.where(ok, v, 0), axis=AXIS)
            ti = tl.sum(ok.to(tl.int32), axis=AXIS)
    elif MODE == 5:
        t = tl.sum((m & (v != 0)).to(tl.int32), axis=AXIS)
        ti = t
    elif MODE == 6:
        t = _nanmax(v, m, AXIS, FLT, LOW)
        if IDX_IN:
            ti = _nanmin(idx, m, AXIS, FLT, HIGH)
        else:
            ti = _nanmin(v, m, AXIS, FLT, HIGH)
    else:
        t = _nanmax(v, m, AXIS, FLT, LOW)
        ti = t
    return t, ti


@triton.jit
def _combine(acc, acc_i, t, ti, MODE: tl.constexpr):
    """Fold one tile's result into the running one (tiles come in increasing index order)."""
    if MODE == 1 or MODE == 6:
        acc = tl.where((t > acc) | (t != t), t, acc)      # a NaN, once there, stays
    elif MODE == 3:
        acc = acc * t
    else:
        acc = acc + t
    if MODE == 4:
        acc_i = acc_i + ti
    elif MODE == 6:
        acc_i = tl.where((ti < acc_i) | (ti != ti), ti, acc_i)
    return acc, acc_i


# -- ARG: per-lane running (value, index), one cross-lane reduction at the end ----------------------------
# Why not per tile like the other modes: a (value, index) reduction of a tile is two dependent cross-warp
# passes through shared memory (the value, then the NaN/first-index fix-up), ~4 barriers per tile; the old
# argmax did that twice per 2048-element tile and reached 26 % of the H200 copy bandwidth on bf16
# [16384, 4096] (0.63x torch eager).  The lane fold is 3 compares + 2 selects per element with no
# communication, so every tile's loads go out back to back, and the cross-lane (value, index) reduction
# runs once per output: a 4096-element bf16 row is one 8 KB tile on 8 warps (2 x 16 B loads per thread,
# 16 (value, index) lane pairs = 32 regs), then one tl.reduce.  Expected: the same ~85-90 % of copy as amax.
@triton.jit
def _lane_fold(la, li, v, i, m, IBIG: tl.constexpr):
    """Elements of a lane come in increasing index order: strictly greater wins (so a tie keeps the first),
    a NaN replaces a number (the first NaN stays), an unset lane (index IBIG) takes any valid element."""
    take = m & ((li == IBIG) | (v > la) | ((v != v) & (la == la)))
    return tl.where(take, v, la), tl.where(take, i, li)


@triton.jit
def _tile_arg(v, c, m, IBIG: tl.constexpr, FLT: tl.constexpr):
    """Per row of a [rows, cols] tile (masked elements already at the lowest value): (value, index) of the
    first NaN if the row has one (FLT), else of the first maximum.  c: the columns' indices.  Integer values
    never pass through a float (int64 near 2^63 would round)."""
    t, j = tl.max(v, 1, return_indices=True, return_indices_tie_break_left=True)
    j = tl.min(c) + j.to(c.dtype)
    if FLT:
        first_nan = tl.min(tl.where(m & (v != v), c[None, :], IBIG), 1)
        has_nan = first_nan != IBIG
        t = tl.where(has_nan, float("nan"), t).to(v.dtype)
        j = tl.where(has_nan, first_nan, j)
    return t, j


# -- PACK: argmax / argmin of bf16 / f16 as ONE int32 max per tile ------------------------------------------
# Why: _tile_arg is two reductions per tile (a (value, index) max, then the first NaN's column): bf16 [16384,
# 4096] argmax ran at 1.55 TB/s on an H200 (0.88x torch eager; amax, one reduction, 4.2 TB/s).  The 16-bit
# value's order-preserving key (every NaN above +inf, -0 = +0) in the high half and 65535 - the column within
# the tile in the low half make the tile's first maximum (or first NaN) the plain int32 maximum.  (The same in
# int64 for f32 keys ran slower than _tile_arg: 108 against 87 us, session 13 run B.)  Values come back from the
# key: exact but for -0 (as +0) and NaN payloads, so it serves index-only outputs and the split's partials
# (compared, never returned); torch.max(dim)'s values take _tile_arg.
@triton.jit
def _packed_tile(x_ptr, off, m, c0, NEG: tl.constexpr, INF: tl.constexpr, BLOCK_N: tl.constexpr):
    """Per row of a [rows, BLOCK_N] tile of 16-bit floats (INF: +inf's bits, 0x7F80 bf16 / 0x7C00 f16; NEG:
    of -x) starting at column c0: (key, column) of its first maximum; key -32768 where no lane is valid."""
    b = tl.load(x_ptr + off, mask=m, other=0).to(tl.int16, bitcast=True).to(tl.int32)
    if NEG:
        b = b ^ -32768                     # the sign bit of the 16-bit value (b is sign-extended)
    mag = b & 0x7FFF
    k = b ^ ((b >> 15) & 0x7FFF)           # two's-complement order = the values' order
    k = tl.where(mag > INF, 0x7FFF, tl.where(mag == 0, 0, k))
    k = tl.where(m, k, -32768)
    best = tl.max((k << 16) | (65535 - tl.arange(0, BLOCK_N))[None, :], 1)
    return best >> 16, c0 + 65535 - (best & 65535)


@triton.jit
def _unpack_key(key, x_ptr, LOW: tl.constexpr, ACC: tl.constexpr):
    """The value of a 16-bit key (x_ptr's element type), in ACC; LOW for the empty key."""
    b = (key ^ ((key >> 15) & 0x7FFF)).to(tl.int16)
    val = b.to(x_ptr.dtype.element_ty, bitcast=True).to(ACC)
    return tl.where(key == -32768, LOW, val)


@triton.jit
def _arg_combine(a, ai, b, bi):
    """Cross-lane (value, index): NaN beats numbers, larger beats smaller, equal (or both NaN): smaller index.
    Unset lanes hold (lowest, IBIG) and so lose to any element."""
    an = a != a
    bn = b != b
    eq = (a == b) | (an & bn)
    take = (b > a) | (bn & (a == a)) | (eq & (bi < ai))
    return tl.where(take, b, a), tl.where(take, bi, ai)


@triton.jit
def _finish(acc, acc_i, count, POST: tl.constexpr, NEG_OUT: tl.constexpr, FLT: tl.constexpr, ACC: tl.constexpr):
    if POST == 1:
        acc = acc / count                   # an empty mean is 0 / 0 = NaN, as torch
    elif POST == 2:
        acc = acc / acc_i.to(ACC)           # nanmean: all-NaN or empty -> 0 / 0 = NaN
    if NEG_OUT:
        if FLT:
            acc = -acc
        else:
            acc = ~acc
    if POST == 3:
        res = acc != 0                      # any
    elif POST == 4:
        res = acc == count                  # all: every element non-zero
    else:
        res = acc
    return res


@fast_kernel
def _row_kernel(x_ptr, xi_ptr, out_ptr, oi_ptr, M, R, chunk, sxm, sxr, S, count,
                MODE: tl.constexpr, NEG_IN: tl.constexpr, NEG_OUT: tl.constexpr, IDX_IN: tl.constexpr,
                WRITE_VAL: tl.constexpr, WRITE_IDX: tl.constexpr, POST: tl.constexpr, ACC: tl.constexpr,
                PRE: tl.constexpr, HAS_PRE: tl.constexpr, FLT: tl.constexpr, LOW: tl.constexpr,
                IDXT: tl.constexpr, IBIG: tl.constexpr, SEC: tl.constexpr, HIGH: tl.constexpr, I64: tl.constexpr,
                PACK: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    if I64:
        rows = rows.to(tl.int64)
    r0 = s * chunk           # chunk: a multiple of BLOCK_N when split (S > 1), else R
    if I64:
        r0 = r0.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    if MODE == 2 and not IDX_IN and PACK != 0:
        kacc = tl.full([BLOCK_M], -32768, tl.int32)
        acc_i = tl.full([BLOCK_M], IBIG, IDXT)
        for start in loop(0, chunk, BLOCK_N):
            c = r0 + start + cols
            m = row_ok[:, None] & (c < R)[None, :]
            tk, tc = _packed_tile(x_ptr, rows[:, None] * sxm + c[None, :] * sxr, m, r0 + start, NEG_IN, PACK,
                                  BLOCK_N)
            take = tk > kacc                   # strictly: an equal key in a later tile keeps the first
            kacc = tl.where(take, tk, kacc)
            acc_i = tl.where(take, tc.to(IDXT), acc_i)
        acc = _unpack_key(kacc, x_ptr, LOW, ACC)
    elif MODE == 2 and not IDX_IN:
        # per tile: the first NaN's column (tl.min) and the first maximum (tl.max with tie-break-left
        # indices, a built-in (value, index) reduction); tiles fold in index order.  [16384, 4096] bf16 on
        # the H100: 0.055 ms (2.4 TB/s) against 0.115 ms for the lane fold below and 0.077 ms for eager torch
        acc = tl.full([BLOCK_M], LOW, ACC)
        acc_i = tl.full([BLOCK_M], IBIG, IDXT)
        for start in loop(0, chunk, BLOCK_N):
            c = r0 + start + cols
            m = row_ok[:, None] & (c < R)[None, :]
            off = rows[:, None] * sxm + c[None, :] * sxr
            v = tl.where(m, _load(x_ptr, off, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT), LOW)
            t, ti = _tile_arg(v, c.to(IDXT), m, IBIG, FLT)
            take = (acc_i == IBIG) | (t > acc) | ((t != t) & (acc == acc))
            acc = tl.where(take, t, acc)
            acc_i = tl.where(take, ti, acc_i)
    elif MODE == 2:   # the split rows' second stage: (value, index) pairs in, the lane fold
        la = tl.full([BLOCK_M, BLOCK_N], LOW, ACC)
        li = tl.full([BLOCK_M, BLOCK_N], IBIG, IDXT)
        for start in loop(0, chunk, BLOCK_N):   # the last split runs masked past R (at most one chunk)
            c = r0 + start + cols
            m = row_ok[:, None] & (c < R)[None, :]
            off = rows[:, None] * sxm + c[None, :] * sxr
            v = _load(x_ptr, off, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT)
            i = tl.load(xi_ptr + off, mask=m, other=IBIG)
            la, li = _lane_fold(la, li, v, i, m, IBIG)
        acc, acc_i = tl.reduce((la, li), 1, _arg_combine)
    else:
        if MODE == 3:
            acc = tl.full([BLOCK_M], 1, ACC)
        elif MODE == 1 or MODE == 6:
            acc = tl.full([BLOCK_M], LOW, ACC)
        else:
            acc = tl.zeros([BLOCK_M], ACC)
        if MODE == 6:
            acc_i = tl.full([BLOCK_M], HIGH, SEC)
        else:
            acc_i = tl.zeros([BLOCK_M], SEC)
        for start in loop(0, chunk, BLOCK_N):
            c = r0 + start + cols
            m = row_ok[:, None] & (c < R)[None, :]
            off = rows[:, None] * sxm + c[None, :] * sxr
            v = _load(x_ptr, off, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT)
            if IDX_IN:
                idx = tl.load(xi_ptr + off, mask=m, other=0)
            else:
                idx = 0
            t, ti = _tile_reduce(v, m, idx, 1, MODE, IDX_IN, FLT, LOW, HIGH)
            acc, acc_i = _combine(acc, acc_i, t, ti, MODE)
    res = _finish(acc, acc_i, count, POST, NEG_OUT, FLT, ACC)
    o = rows * S + s
    if WRITE_VAL:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=row_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + o, acc_i.to(oi_ptr.dtype.element_ty), mask=row_ok)


@fast_kernel
def _col_kernel(x_ptr, xi_ptr, out_ptr, oi_ptr, inner, R, chunk, sxo, sxr, sxi, S, n_iblk, count,
                MODE: tl.constexpr, NEG_IN: tl.constexpr, NEG_OUT: tl.constexpr, IDX_IN: tl.constexpr,
                WRITE_VAL: tl.constexpr, WRITE_IDX: tl.constexpr, POST: tl.constexpr, ACC: tl.constexpr,
                PRE: tl.constexpr, HAS_PRE: tl.constexpr, FLT: tl.constexpr, LOW: tl.constexpr,
                IDXT: tl.constexpr, IBIG: tl.constexpr, SEC: tl.constexpr, HIGH: tl.constexpr, I64: tl.constexpr,
                ACC2D: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """[BLOCK_R, BLOCK_I] tiles; with BLOCK_I = 32 lanes x 16 B x 4 warps the warps tile the contiguous
    inner axis, so each tile's reduction over R stays inside a thread (no shared memory in the loop).
    ACC2D (a narrow inner axis, e.g. sum over dim 0 of [1M, 16]: R then spans the threads, and a per-tile
    reduction would cross warps through shared memory every step): the tiles fold elementwise into a
    [BLOCK_R, BLOCK_I] accumulator, reduced across threads once after the loop (SUM / MAX / PROD / COUNT)."""
    pid = tl.program_id(0)
    s = tl.program_id(1)
    o = pid // n_iblk
    ib = pid % n_iblk
    if I64:
        o = o.to(tl.int64)
    i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    r0 = s * chunk           # chunk: a multiple of BLOCK_R when split (S > 1), else R
    if I64:
        r0 = r0.to(tl.int64)
    rr = tl.arange(0, BLOCK_R)
    base = o * sxo
    if MODE == 2:
        la = tl.full([BLOCK_R, BLOCK_I], LOW, ACC)
        li = tl.full([BLOCK_R, BLOCK_I], IBIG, IDXT)
        for start in loop(0, chunk, BLOCK_R):   # the last split runs masked past R (at most one chunk)
            r = r0 + start + rr
            m = (r < R)[:, None] & i_ok[None, :]
            off = base + r[:, None] * sxr + i[None, :] * sxi
            v = _load(x_ptr, off, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT)
            if IDX_IN:
                k = tl.load(xi_ptr + off, mask=m, other=IBIG)
            else:
                k = tl.broadcast_to(r[:, None].to(IDXT), [BLOCK_R, BLOCK_I])
            la, li = _lane_fold(la, li, v, k, m, IBIG)
        acc, acc_i = tl.reduce((la, li), 0, _arg_combine)
    elif ACC2D:
        if MODE == 3:
            a2 = tl.full([BLOCK_R, BLOCK_I], 1, ACC)
        elif MODE == 1:
            a2 = tl.full([BLOCK_R, BLOCK_I], LOW, ACC)
        else:
            a2 = tl.zeros([BLOCK_R, BLOCK_I], ACC)
        for start in loop(0, chunk, BLOCK_R):
            r = r0 + start + rr
            m = (r < R)[:, None] & i_ok[None, :]
            v = _load(x_ptr, base + r[:, None] * sxr + i[None, :] * sxi, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT)
            if MODE == 0:
                a2 += tl.where(m, v, 0)
            elif MODE == 3:
                a2 *= tl.where(m, v, 1)
            elif MODE == 5:
                a2 += (m & (v != 0)).to(ACC)
            elif FLT:
                a2 = _max_nan(a2, tl.where(m, v, LOW))
            else:
                a2 = tl.maximum(a2, tl.where(m, v, LOW))
        if MODE == 0 or MODE == 5:
            acc = tl.sum(a2, axis=0)
        elif MODE == 3:
            acc = tl.reduce(a2, 0, _mul)
        elif FLT:
            acc = tl.reduce(a2, 0, _max_nan)
        else:
            acc = tl.max(a2, axis=0)
        acc_i = tl.zeros([BLOCK_I], SEC)
    else:
        if MODE == 3:
            acc = tl.full([BLOCK_I], 1, ACC)
        elif MODE == 1 or MODE == 6:
            acc = tl.full([BLOCK_I], LOW, ACC)
        else:
            acc = tl.zeros([BLOCK_I], ACC)
        if MODE == 6:
            acc_i = tl.full([BLOCK_I], HIGH, SEC)
        else:
            acc_i = tl.zeros([BLOCK_I], SEC)
        for start in loop(0, chunk, BLOCK_R):
            r = r0 + start + rr
            m = (r < R)[:, None] & i_ok[None, :]
            off = base + r[:, None] * sxr + i[None, :] * sxi
            v = _load(x_ptr, off, m, MODE, NEG_IN, ACC, PRE, HAS_PRE, FLT)
            if IDX_IN:
                idx = tl.load(xi_ptr + off, mask=m, other=0)
            else:
                idx = 0
            t, ti = _tile_reduce(v, m, idx, 0, MODE, IDX_IN, FLT, LOW, HIGH)
            acc, acc_i = _combine(acc, acc_i, t, ti, MODE)
    res = _finish(acc, acc_i, count, POST, NEG_OUT, FLT, ACC)
    oo = (o * S + s) * inner + i
    if WRITE_VAL:
        tl.store(out_ptr + oo, res.to(out_ptr.dtype.element_ty), mask=i_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + oo, acc_i.to(oi_ptr.dtype.element_ty), mask=i_ok)


# -- narrow columns read flat: reduce.py's "flatcol" path ---------------------------------------------------
@fast_kernel
def _flat_col_kernel(x_ptr, p_ptr, R, rows_per, S, C: tl.constexpr, BR: tl.constexpr, MODE: tl.constexpr,
                     NEG: tl.constexpr):
    """Stage 1 over a contiguous [R, C] input (C a power of two <= 64): program s folds rows
    [s * rows_per, (s + 1) * rows_per) read as flat runs of BR * C contiguous elements (no 2-D index arithmetic,
    no column mask: the loads vectorize whole), elementwise into a [BR * C] f32 accumulator reduced to C values
    once at the end, stored transposed (p[c, s]: each column's S partials contiguous for the fold).
    MODE 0: sum, 1: max with NaN winning (NEG: of -x)."""
    s = tl.program_id(0)
    r0 = s.to(tl.int64) * rows_per
    offs = tl.arange(0, BR * C)
    if MODE == 1:
        acc = tl.full([BR * C], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BR * C], tl.float32)
    for start in loop(0, rows_per, BR):
        r = r0 + start
        m = offs < (R - r) * C
        v = tl.load(x_ptr + r * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32)
        if MODE == 1:
            if NEG:
                v = -v
            acc = _max_nan(acc, tl.where(m, v, float("-inf")))
        else:
            acc += v
    if MODE == 1:
        part = tl.reduce(tl.reshape(acc, [BR, C]), 0, _max_nan)
    else:
        part = tl.sum(tl.reshape(acc, [BR, C]), axis=0)
    tl.store(p_ptr + tl.arange(0, C) * S + s, part)


@fast_kernel
def _flat_fold_kernel(p_ptr, o_ptr, S, count, BS: tl.constexpr, MODE: tl.constexpr, NEG: tl.constexpr,
                      DIV: tl.constexpr):
    """Stage 2 of the flat path: program c folds column c's S partials in split order (deterministic); NEG
    negates the result back (min-type ops), DIV divides it by ``count`` (mean)."""
    c = tl.program_id(0)
    if MODE == 1:
        acc = tl.full([BS], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BS], tl.float32)
    for s0 in loop(0, S, BS):
        q = s0 + tl.arange(0, BS)
        m = q < S
        if MODE == 1:
            acc = _max_nan(acc, tl.load(p_ptr + c * S + q, mask=m, other=float("-inf")))
        else:
            acc += tl.load(p_ptr + c * S + q, mask=m, other=0.0)
    tl.store(o_ptr + c, _flat_out(acc, 0, MODE, NEG, DIV, count).to(o_ptr.dtype.element_ty))


@triton.jit
def _flat_out(acc, AXIS: tl.constexpr, MODE: tl.constexpr, NEG: tl.constexpr, DIV: tl.constexpr, count):
    """The flat paths' last step: acc reduced along AXIS (MODE 1: max with NaN winning, of negated values for
    NEG, negated back; 0: sum, DIV: / count)."""
    if MODE == 1:
        out = tl.reduce(acc, AXIS, _max_nan)
        if NEG:
            out = -out
    else:
        out = tl.sum(acc, axis=AXIS)
        if DIV:
            out = out / count
    return out


@fast_kernel
def _flat_row_kernel(x_ptr, o_ptr, M, count, C: tl.constexpr, BM: tl.constexpr, MODE: tl.constexpr,
                     NEG: tl.constexpr, DIV: tl.constexpr):
    """Rows of C contiguous elements (a power of two <= 64) of a contiguous [M, C]: BM rows read as one flat run
    of BM * C elements, reduced over C in f32 (MODE 0: sum, DIV: / count; 1: max with NaN winning, NEG: min)."""
    r0 = tl.program_id(0).to(tl.int64) * BM
    offs = tl.arange(0, BM * C)
    m = offs < (M - r0) * C
    v = tl.reshape(tl.load(x_ptr + r0 * C + offs, mask=m, other=0, eviction_policy="evict_first").to(tl.float32),
                   [BM, C])
    if MODE == 1 and NEG:
        v = -v
    rows = r0 + tl.arange(0, BM)
    tl.store(o_ptr + rows, _flat_out(v, 1, MODE, NEG, DIV, count).to(o_ptr.dtype.element_ty), mask=rows < M)
