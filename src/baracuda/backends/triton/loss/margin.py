"""Triton row kernels of the margin losses (ops/loss_margin.py).

Layout: operands are viewed as [R, C] rows (a copy only when the last dim is not unit-stride or the leading dims
don't collapse).  One program handles ROWS rows and walks C in TILE-wide steps (TILE x ROWS ~ 2K elements: >= 8 KB
of loads in flight per program for f32).  The forward keeps per-row running sums in registers, writes the row
loss ('none') or one partial per program to the workspace, and loss.py's one-program fold sums the partials in a
fixed order (deterministic, no atomics).
  cosine_embedding / triplet / multilabel_soft_margin forward: every operand read once (the floor: bf16 16384 x
  1024 triplet moves 100 MB, ~35 us at ~3 TB/s).  multi_margin: one gather of x[y] per row, then one pass.
  Backward: a stats pass (row dot products / norms / the hinge sum of multi_margin) and a write pass that re-reads
  the row block from L2 (it is ROWS x C x itemsize, at most a few hundred KB per program in flight) and writes
  every gradient in the same pass: ~1 HBM read + 1 write per operand.  multilabel_soft_margin's backward is a
  single pass (its gradient is pointwise given the row's grad).
  multilabel_margin: a prep kernel writes each row's target mask is_t [R, C] (int8, in the workspace) by a
  scatter of the listed classes (duplicates store the same byte: a benign race), then the loss / gradient
  kernels do the O(C^2) pairs in [T, T] tiles with one program per row.

Class indices: multi_margin targets outside [0, C) and multilabel entries outside [-1, C) never address memory
(they are clamped for the loads and masked out of the scatter); the kernel stores 1 into a flag word of the
workspace (zeroed before the launch) and the host reads it after the launch (a 4-byte copy; skipped under
CUDA-graph capture, where the row's NaN loss is the signal) and raises InvalidProblemError (checked flag).
The backward ops check the same flag.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.loss_margin import ROW_LOSSES
from .._lib.register import register_triton
from .._lib.config import overrides
from .._lib.math import exp, log, log1p, sqrt
from .._lib.interp import loop
from .ce_kernels import _RED, _ws_view
from .pointwise import _pw_fold
from .pointwise_template import _check_flag, aux_arg
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("""Force ``tile`` / ``rows`` in :func:`choose` (tests: multi-tile rows under the interpreter).""")
_KIND = {"cosine_embedding_loss": 0, "triplet_margin_loss": 1, "multi_margin_loss": 2, "multilabel_margin_loss": 3,
         "multilabel_soft_margin_loss": 4}


def choose(r: int, c: int):
    """(TILE, ROWS, num_warps): ~2K-element steps; long rows walk C in 2048-wide tiles."""
    tile = _FORCE.get("tile", min(next_power_of_2(max(c, 1)), 2048))
    rows = _FORCE.get("rows", max(1, min(2048 // tile, next_power_of_2(max(r, 1)))))
    return tile, rows, 4 if tile * rows <= 1024 else 8


@triton.jit
def _sig(x):
    return 1.0 / (1.0 + exp(-x))


@triton.jit
def _emit(loss, rows, R, out_ptr, ws_ptr, NONE: tl.constexpr):
    rm = rows < R
    if NONE:
        tl.store(out_ptr + rows, loss.to(out_ptr.dtype.element_ty), mask=rm)
    else:
        tl.store(ws_ptr + tl.program_id(0), tl.sum(tl.where(rm, loss, 0.0), 0))


@triton.jit
def _rowgrad(g_ptr, rows, R, div, RED: tl.constexpr, CT: tl.constexpr):
    if RED == 0:
        g = tl.load(g_ptr + rows, mask=rows < R, other=0.0).to(CT)
    elif RED == 1:
        g = tl.load(g_ptr + rows * 0).to(CT)
    else:
        g = tl.load(g_ptr + rows * 0).to(CT) / div
    return g


@triton.jit
def _pnorm_acc(d, p, PK: tl.constexpr):
    if PK == 2:
        return d * d
    elif PK == 1:
        return tl.abs(d)
    else:
        a = tl.abs(d)
        return tl.where(a == 0.0, 0.0, exp(p * log(tl.where(a == 0.0, 1.0, a))))


@triton.jit
def _pnorm_fin(s, p, PK: tl.constexpr):
    if PK == 2:
        return sqrt(s)
    elif PK == 1:
        return s
    else:
        return tl.where(s == 0.0, 0.0, exp(log(tl.where(s == 0.0, 1.0, s)) / p))


@triton.jit
def _pnorm_grad(d, nrm, p, PK: tl.constexpr):
    """d ||d||_p / d d (0 where the norm is 0, as torch's norm backward)."""
    sg = tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
    safe = tl.where(nrm == 0.0, 1.0, nrm)
    if PK == 2:
        u = d / safe
    elif PK == 1:
        u = sg
    else:
        a = tl.abs(d)
        u = sg * tl.where(a == 0.0, 0.0, exp((p - 1.0) * (log(tl.where(a == 0.0, 1.0, a)) - log(safe))))
    return tl.where(nrm == 0.0, 0.0, u)


@triton.jit
def _row_stats(a_ptr, b_ptr, c_ptr, rows, R, C, sa, sb, sc, off, s0, s1, s2, prm_ptr, KIND: tl.constexpr,
               PK: tl.constexpr, SWAP: tl.constexpr, CT: tl.constexpr, TILE: tl.constexpr):
    """One TILE step of the per-row sums: cosine (x1.x2, |x1|^2, |x2|^2); triplet (sum |a-p+eps|^p, a-n, p-n)."""
    cols = off + tl.arange(0, TILE)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    a = tl.load(a_ptr + rows[:, None] * sa + cols[None, :], mask=m, other=0.0).to(CT)
    b = tl.load(b_ptr + rows[:, None] * sb + cols[None, :], mask=m, other=0.0).to(CT)
    if KIND == 0:
        s0 += tl.sum(a * b, 1)
        s1 += tl.sum(a * a, 1)
        s2 += tl.sum(b * b, 1)
    else:
        eps = tl.load(prm_ptr + 2)
        p = tl.load(prm_ptr + 1)
        c = tl.load(c_ptr + rows[:, None] * sc + cols[None, :], mask=m, other=0.0).to(CT)
        s0 += tl.sum(tl.where(m, _pnorm_acc(a - b + eps, p, PK), 0.0), 1)
        s1 += tl.sum(tl.where(m, _pnorm_acc(a - c + eps, p, PK), 0.0), 1)
        if SWAP:
            s2 += tl.sum(tl.where(m, _pnorm_acc(b - c + eps, p, PK), 0.0), 1)
    return s0, s1, s2


@triton.jit
def _pair_loss(s0, s1, s2, t, prm_ptr, KIND: tl.constexpr, PK: tl.constexpr, SWAP: tl.constexpr):
    """(loss, dl/dstat coefficients): cosine -> (loss, dl/dcos, cos, den, m1, m2); triplet -> (loss, act, shares..)."""
    margin = tl.load(prm_ptr)
    if KIND == 0:
        m1 = s1 + 1e-12
        m2 = s2 + 1e-12
        den = sqrt(m1 * m2)
        cos = s0 / den
        neg = cos - margin
        loss = tl.where(t == 1.0, 1.0 - cos, 0.0) + tl.where(t == -1.0, tl.maximum(neg, 0.0), 0.0)
        dc = tl.where(t == 1.0, -1.0, 0.0) + tl.where((t == -1.0) & (neg >= 0.0), 1.0, 0.0)
        return loss, dc, cos, den, m1, m2
    else:
        p = tl.load(prm_ptr + 1)
        dp = _pnorm_fin(s0, p, PK)
        dn0 = _pnorm_fin(s1, p, PK)
        cn = tl.full(dp.shape, 1.0, dp.dtype)
        ds = dn0
        dn = dn0
        if SWAP:   # min(d(a, n), d(p, n)); a tie shares the gradient half and half (torch's minimum)
            ds = _pnorm_fin(s2, p, PK)
            cn = tl.where(dn0 < ds, 1.0, tl.where(dn0 == ds, 0.5, 0.0))
            dn = tl.minimum(dn0, ds)
        v = margin + dp - dn
        act = tl.where(v >= 0.0, 1.0, 0.0)
        return tl.maximum(v, 0.0), act, cn, dp, ds, dn0


@triton.jit
def _pair_stats(a_ptr, b_ptr, c_ptr, t_ptr, prm_ptr, rows, R, C, sa, sb, sc, KIND: tl.constexpr, PK: tl.constexpr,
                SWAP: tl.constexpr, CT: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr):
    """The row statistics pass of the forward and the backward: _pair_loss of the rows' sums."""
    s0 = tl.zeros([ROWS], CT)
    s1 = tl.zeros([ROWS], CT)
    s2 = tl.zeros([ROWS], CT)
    for off in loop(0, C, TILE):
        s0, s1, s2 = _row_stats(a_ptr, b_ptr, c_ptr, rows, R, C, sa, sb, sc, off, s0, s1, s2, prm_ptr, KIND, PK,
                                SWAP, CT, TILE)
    if KIND == 0:
        t = tl.load(t_ptr + rows, mask=rows < R, other=0).to(CT)
    else:
        t = s0
    return _pair_loss(s0, s1, s2, t, prm_ptr, KIND, PK, SWAP)


@fast_kernel
def _pair_fw(a_ptr, b_ptr, c_ptr, t_ptr, out_ptr, ws_ptr, prm_ptr, R, C, sa, sb, sc, KIND: tl.constexpr,
             PK: tl.constexpr, SWAP: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr,
             TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    loss, _k1, _k2, _k3, _k4, _k5 = _pair_stats(a_ptr, b_ptr, c_ptr, t_ptr, prm_ptr, rows, R, C, sa, sb, sc, KIND, PK,
                                                SWAP, CT, ROWS, TILE)
    _emit(loss, rows, R, out_ptr, ws_ptr, NONE)


@triton.jit
def _pair_bw_step(a_ptr, b_ptr, c_ptr, d0_ptr, d1_ptr, d2_ptr, rows, R, C, sa, sb, sc, off, g, k0, k1, k2, k3, k4, k5,
                  prm_ptr, KIND: tl.constexpr, PK: tl.constexpr, SWAP: tl.constexpr, CT: tl.constexpr,
                  TILE: tl.constexpr):
    cols = off + tl.arange(0, TILE)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    o = rows[:, None] * C + cols[None, :]
    a = tl.load(a_ptr + rows[:, None] * sa + cols[None, :], mask=m, other=0.0).to(CT)
    b = tl.load(b_ptr + rows[:, None] * sb + cols[None, :], mask=m, other=0.0).to(CT)
    if KIND == 0:   # k0 = dl/dcos, k1 = cos, k2 = den, k3 = m1, k4 = m2
        gc = (g * k0)[:, None]
        da = gc * (b / k2[:, None] - (k1 / k3)[:, None] * a)
        db = gc * (a / k2[:, None] - (k1 / k4)[:, None] * b)
        tl.store(d0_ptr + o, da.to(d0_ptr.dtype.element_ty), mask=m)
        tl.store(d1_ptr + o, db.to(d1_ptr.dtype.element_ty), mask=m)
    else:           # k0 = active, k1 = share of d(a,n), k2 = d(a,p), k3 = d(p,n), k4 = d(a,n), k5 = 1 - k1
        p = tl.load(prm_ptr + 1)
        eps = tl.load(prm_ptr + 2)
        c = tl.load(c_ptr + rows[:, None] * sc + cols[None, :], mask=m, other=0.0).to(CT)
        ga = (g * k0)[:, None]
        up = _pnorm_grad(a - b + eps, k2[:, None], p, PK)
        un = _pnorm_grad(a - c + eps, k4[:, None], p, PK)
        cn = k1[:, None]
        da = ga * (up - cn * un)
        db = -ga * up
        dc = ga * cn * un
        if SWAP:
            us = _pnorm_grad(b - c + eps, k3[:, None], p, PK)
            cs = k5[:, None]
            db -= ga * cs * us
            dc += ga * cs * us
        tl.store(d0_ptr + o, da.to(d0_ptr.dtype.element_ty), mask=m)
        tl.store(d1_ptr + o, db.to(d1_ptr.dtype.element_ty), mask=m)
        tl.store(d2_ptr + o, dc.to(d2_ptr.dtype.element_ty), mask=m)


@fast_kernel
def _pair_bw(g_ptr, a_ptr, b_ptr, c_ptr, t_ptr, d0_ptr, d1_ptr, d2_ptr, prm_ptr, R, C, sa, sb, sc, div,
             KIND: tl.constexpr, PK: tl.constexpr, SWAP: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr,
             ROWS: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    _l, k0, k1, k2, k3, k4 = _pair_stats(a_ptr, b_ptr, c_ptr, t_ptr, prm_ptr, rows, R, C, sa, sb, sc, KIND, PK, SWAP,
                                         CT, ROWS, TILE)
    k5 = 1.0 - k1
    g = _rowgrad(g_ptr, rows, R, div, RED, CT)
    for off in loop(0, C, TILE):
        _pair_bw_step(a_ptr, b_ptr, c_ptr, d0_ptr, d1_ptr, d2_ptr, rows, R, C, sa, sb, sc, off, g, k0, k1, k2, k3,
                      k4, k5, prm_ptr, KIND, PK, SWAP, CT, TILE)


# -- multi_margin_loss ----------------------------------------------------------------------------------------
@triton.jit
def _mm_head(x_ptr, t_ptr, w_ptr, rows, R, C, sx, HAS_W: tl.constexpr, CT: tl.constexpr):
    """Per row: (bad index, safe class index, x[y], w[y]); never reads out of bounds."""
    rm = rows < R
    t = tl.load(t_ptr + rows, mask=rm, other=0).to(tl.int64)
    bad = rm & ((t < 0) | (t >= C))
    tc = tl.where(rm & ~bad, t, 0)
    xy = tl.load(x_ptr + rows * sx + tc, mask=rm, other=0.0).to(CT)
    if HAS_W:
        wy = tl.load(w_ptr + tc, mask=rm, other=0.0).to(CT)
    else:
        wy = tl.where(rm, 1.0, 0.0).to(CT)
    return bad, tc, xy, wy


@triton.jit
def _mm_terms(x_ptr, rows, R, C, sx, off, tc, xy, margin, P2: tl.constexpr, CT: tl.constexpr, TILE: tl.constexpr):
    """(h, dh/dz, mask) of one tile: z = margin - x[y] + x[j] for j != y, counted where z > 0 (torch's strict >)."""
    cols = off + tl.arange(0, TILE)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    x = tl.load(x_ptr + rows[:, None] * sx + cols[None, :], mask=m, other=0.0).to(CT)
    z = margin - xy[:, None] + x
    on = m & (cols[None, :] != tc[:, None]) & (z > 0.0)
    if P2:
        return tl.where(on, z * z, 0.0), tl.where(on, 2.0 * z, 0.0), cols, m
    else:
        return tl.where(on, z, 0.0), tl.where(on, 1.0, 0.0), cols, m


@triton.jit
def _mm_sum(x_ptr, rows, R, C, sx, tc, xy, margin, DER: tl.constexpr, P2: tl.constexpr, CT: tl.constexpr,
            ROWS: tl.constexpr, TILE: tl.constexpr):
    """Per row: sum_j h (DER=False: the forward) or sum_j dh/dz (DER=True: the backward's first pass)."""
    acc = tl.zeros([ROWS], CT)
    for off in loop(0, C, TILE):
        h, d, _c, _m = _mm_terms(x_ptr, rows, R, C, sx, off, tc, xy, margin, P2, CT, TILE)
        acc += tl.sum(d if DER else h, 1)
    return acc


@fast_kernel
def _mm_fw(x_ptr, t_ptr, w_ptr, out_ptr, ws_ptr, flag_ptr, prm_ptr, R, C, sx, HAS_W: tl.constexpr, P2: tl.constexpr,
           NONE: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    margin = tl.load(prm_ptr)
    bad, tc, xy, wy = _mm_head(x_ptr, t_ptr, w_ptr, rows, R, C, sx, HAS_W, CT)
    acc = _mm_sum(x_ptr, rows, R, C, sx, tc, xy, margin, False, P2, CT, ROWS, TILE)
    loss = tl.where(bad, float("nan"), acc * wy / C)
    _emit(loss, rows, R, out_ptr, ws_ptr, NONE)
    tl.store(flag_ptr + rows * 0, tl.full([ROWS], 1.0, CT), mask=bad)


@triton.jit
def _mm_write(x_ptr, dx_ptr, rows, R, C, sx, off, tc, xy, margin, s, sc, P2: tl.constexpr, CT: tl.constexpr,
              TILE: tl.constexpr):
    _h, d, cols, m = _mm_terms(x_ptr, rows, R, C, sx, off, tc, xy, margin, P2, CT, TILE)
    d = tl.where(cols[None, :] == tc[:, None], -s[:, None], d) * sc[:, None]
    tl.store(dx_ptr + rows[:, None] * C + cols[None, :], d.to(dx_ptr.dtype.element_ty), mask=m)


@fast_kernel
def _mm_bw(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, flag_ptr, prm_ptr, R, C, sx, div, HAS_W: tl.constexpr,
           P2: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr):
    # pass 1 sums the row's dh/dz (the target column's gradient is minus that sum), pass 2 writes the row: the
    # target column is written by the same store as the others (no second writer, no ordering hazard)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    margin = tl.load(prm_ptr)
    bad, tc, xy, wy = _mm_head(x_ptr, t_ptr, w_ptr, rows, R, C, sx, HAS_W, CT)
    s = _mm_sum(x_ptr, rows, R, C, sx, tc, xy, margin, True, P2, CT, ROWS, TILE)
    sc = _rowgrad(g_ptr, rows, R, div, RED, CT) * wy / C
    sc = tl.where(bad, float("nan"), sc)
    for off in loop(0, C, TILE):
        _mm_write(x_ptr, dx_ptr, rows, R, C, sx, off, tc, xy, margin, s, sc, P2, CT, TILE)
    tl.store(flag_ptr + rows * 0, tl.full([ROWS], 1.0, CT), mask=bad)


# -- multilabel_margin_loss -----------------------------------------------------------------------------------
@triton.jit
def _ml_stop_step(t_ptr, r, st, off, C, stop, badv, T: tl.constexpr):
    j = off + tl.arange(0, T)
    tv = tl.load(t_ptr + r * st + j, mask=j < C, other=0).to(tl.int64)
    stop = tl.minimum(stop, tl.where((j < C) & (tv < 0), j, C))
    badv = badv | ((j < C) & ((tv < -1) | (tv >= C))).to(tl.int32)
    return stop, badv


@triton.jit
def _ml_scatter_step(t_ptr, ist_ptr, r, st, off, s, C, T: tl.constexpr):
    j = off + tl.arange(0, T)
    tv = tl.load(t_ptr + r * st + j, mask=j < s, other=0).to(tl.int64)
    ok = (j < s) & (tv >= 0) & (tv < C)
    tl.store(ist_ptr + r * C + tl.where(ok, tv, 0), tl.full([T], 1, tl.int8), mask=ok)


@fast_kernel
def _ml_prep(t_ptr, ist_ptr, stop_ptr, flag_ptr, C, st, T: tl.constexpr):
    """One row: stop = position of the first negative entry (C if none; -1 marks a row with an entry outside
    [-1, C)); then the scatter is_t[r, t_j] = 1 for the listed entries (ist zeroed by the host)."""
    r = tl.program_id(0).to(tl.int64)
    stop = tl.zeros([T], tl.int64) + C
    badv = tl.zeros([T], tl.int32)
    for off in loop(0, C, T):
        stop, badv = _ml_stop_step(t_ptr, r, st, off, C, stop, badv, T)
    s = tl.min(stop, 0)
    bad = tl.max(badv, 0) > 0
    for off in loop(0, s, T):
        _ml_scatter_step(t_ptr, ist_ptr, r, st, off, s, C, T)
    one = tl.arange(0, 1)
    tl.store(stop_ptr + r + one, tl.where(bad, -1, s).to(tl.int32) + one * 0)
    tl.store(flag_ptr + one, tl.full([1], 1.0, flag_ptr.dtype.element_ty), mask=(one == 0) & bad)


@triton.jit
def _ml_entries(x_ptr, t_ptr, r, C, sx, st, j0, s, CT: tl.constexpr, T: tl.constexpr):
    """(valid mask, class index, x[class]) of the listed entries j0 .. j0 + T (safe indices)."""
    j = j0 + tl.arange(0, T)
    jv = j < s
    tv = tl.load(t_ptr + r * st + j, mask=jv, other=0).to(tl.int64)
    tv = tl.where(jv, tv, 0)
    return jv, tv, tl.load(x_ptr + r * sx + tv, mask=jv, other=0.0).to(CT)


@triton.jit
def _ml_cols(x_ptr, ist_ptr, r, C, sx, c0, CT: tl.constexpr, T: tl.constexpr):
    """(columns, in range, x[c], c is not a target) of the classes c0 .. c0 + T (False past C)."""
    c = c0 + tl.arange(0, T)
    cm = c < C
    xc = tl.load(x_ptr + r * sx + c, mask=cm, other=0.0).to(CT)
    return c, cm, xc, tl.load(ist_ptr + r * C + c, mask=cm, other=1) == 0


@triton.jit
def _ml_fw_step(x_ptr, t_ptr, ist_ptr, r, C, sx, st, sv, k0, acc, CT: tl.constexpr, T: tl.constexpr):
    """acc[k] += sum over the listed j of max(0, 1 - x[t_j] + x[k]), k = k0 .. k0 + T not a target."""
    _k, _km, xk, ntk = _ml_cols(x_ptr, ist_ptr, r, C, sx, k0, CT, T)
    for j0 in loop(0, sv, T):
        jv, tv, xt = _ml_entries(x_ptr, t_ptr, r, C, sx, st, j0, sv, CT, T)
        z = 1.0 - xt[:, None] + xk[None, :]
        acc += tl.sum(tl.where(jv[:, None] & ntk[None, :] & (z > 0.0), z, 0.0), 0)
    return acc


@fast_kernel
def _ml_fw(x_ptr, t_ptr, ist_ptr, stop_ptr, out_ptr, ws_ptr, R, C, sx, st, NONE: tl.constexpr, F64: tl.constexpr,
           T: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    s = tl.load(stop_ptr + r).to(tl.int64)
    sv = tl.maximum(s, 0)
    acc = tl.zeros([T], CT)
    for k0 in loop(0, C, T):
        acc = _ml_fw_step(x_ptr, t_ptr, ist_ptr, r, C, sx, st, sv, k0, acc, CT, T)
    loss = tl.zeros([1], CT) + tl.sum(acc, 0) / C
    loss = tl.where(s < 0, float("nan"), loss)
    _emit(loss, r + tl.arange(0, 1), R, out_ptr, ws_ptr, NONE)


@triton.jit
def _ml_bw_step(x_ptr, t_ptr, ist_ptr, dx_ptr, r, C, sx, st, sv, c0, g, CT: tl.constexpr, T: tl.constexpr):
    """dx of the classes c0 .. c0 + T: a = #{listed j: 1 - x[t_j] + x[c] > 0}, cnt = times c is listed,
    b = #{k not a target: 1 - x[c] + x[k] > 0}."""
    a = tl.zeros([T], CT)
    cnt = tl.zeros([T], CT)
    b = tl.zeros([T], CT)
    c, cm, xc, ntc = _ml_cols(x_ptr, ist_ptr, r, C, sx, c0, CT, T)
    for j0 in loop(0, sv, T):
        jv, tv, xt = _ml_entries(x_ptr, t_ptr, r, C, sx, st, j0, sv, CT, T)
        a += tl.sum(tl.where(jv[:, None] & (1.0 - xt[:, None] + xc[None, :] > 0.0), 1.0, 0.0), 0)
        cnt += tl.sum(tl.where(jv[:, None] & (tv[:, None] == c[None, :]), 1.0, 0.0), 0)
    for k0 in loop(0, C, T):
        _k, _km, xk, ntk = _ml_cols(x_ptr, ist_ptr, r, C, sx, k0, CT, T)
        b += tl.sum(tl.where(ntk[None, :] & (1.0 - xc[:, None] + xk[None, :] > 0.0), 1.0, 0.0), 1)
    d = (tl.where(ntc, a, 0.0) - cnt * b) * g
    tl.store(dx_ptr + r * C + c, d.to(dx_ptr.dtype.element_ty), mask=cm)


@fast_kernel
def _ml_bw(g_ptr, x_ptr, t_ptr, ist_ptr, stop_ptr, dx_ptr, R, C, sx, st, div, RED: tl.constexpr, F64: tl.constexpr,
           T: tl.constexpr):
    # dx[c] = (!is_t[c]) #{listed j: 1 - x[t_j] + x[c] > 0} - cnt[c] #{k not a target: 1 - x[c] + x[k] > 0},
    # cnt[c] = how often c is listed; times grad / C.  O(C^2) per row in [T, T] tiles.
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = tl.program_id(0).to(tl.int64)
    s = tl.load(stop_ptr + r).to(tl.int64)
    sv = tl.maximum(s, 0)
    g = tl.sum(_rowgrad(g_ptr, r + tl.arange(0, 1), R, div, RED, CT), 0) / C
    g = tl.where(s < 0, float("nan"), g)
    for c0 in loop(0, C, T):
        _ml_bw_step(x_ptr, t_ptr, ist_ptr, dx_ptr, r, C, sx, st, sv, c0, g, CT, T)


# -- multilabel_soft_margin_loss ------------------------------------------------------------------------------
@fast_kernel
def _ms_fw(x_ptr, y_ptr, w_ptr, out_ptr, ws_ptr, R, C, wBC, wC, HAS_W: tl.constexpr, NONE: tl.constexpr,
           F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    acc = tl.zeros([ROWS], CT)
    for off in loop(0, C, TILE):
        acc += tl.sum(_ms_terms(x_ptr, y_ptr, w_ptr, rows, R, C, wBC, wC, off, HAS_W, CT, TILE), 1)
    _emit(acc / C, rows, R, out_ptr, ws_ptr, NONE)


@triton.jit
def _ms_load(x_ptr, y_ptr, w_ptr, rows, R, C, wBC, wC, off, HAS_W: tl.constexpr, CT: tl.constexpr, TILE: tl.constexpr):
    cols = off + tl.arange(0, TILE)
    m = (rows < R)[:, None] & (cols < C)[None, :]
    i = rows[:, None] * C + cols[None, :]
    x = tl.load(x_ptr + i, mask=m, other=0.0).to(CT)
    y = tl.load(y_ptr + i, mask=m, other=0.0).to(CT)
    if HAS_W:
        w = tl.load(w_ptr + (i // wBC) * wC + i % wC, mask=m, other=0.0).to(CT)
    else:
        w = tl.where(m, 1.0, 0.0).to(CT)
    return x, y, w, i, m


@triton.jit
def _ms_terms(x_ptr, y_ptr, w_ptr, rows, R, C, wBC, wC, off, HAS_W: tl.constexpr, CT: tl.constexpr,
              TILE: tl.constexpr):
    x, y, w, _i, m = _ms_load(x_ptr, y_ptr, w_ptr, rows, R, C, wBC, wC, off, HAS_W, CT, TILE)
    sp = tl.maximum(-x, 0.0) + log1p(exp(-tl.abs(x)))   # softplus(-x)
    return tl.where(m, w * (sp + (1.0 - y) * x), 0.0)


@fast_kernel
def _ms_bw(g_ptr, x_ptr, y_ptr, w_ptr, dx_ptr, dy_ptr, R, C, wBC, wC, div, HAS_W: tl.constexpr, RED: tl.constexpr,
           F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = (tl.program_id(0) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    g = (_rowgrad(g_ptr, rows, R, div, RED, CT) / C)[:, None]
    for off in loop(0, C, TILE):
        _ms_write(x_ptr, y_ptr, w_ptr, dx_ptr, dy_ptr, rows, R, C, wBC, wC, off, g, HAS_W, CT, TILE)


@triton.jit
def _ms_write(x_ptr, y_ptr, w_ptr, dx_ptr, dy_ptr, rows, R, C, wBC, wC, off, g, HAS_W: tl.constexpr,
              CT: tl.constexpr, TILE: tl.constexpr):
    x, y, w, i, m = _ms_load(x_ptr, y_ptr, w_ptr, rows, R, C, wBC, wC, off, HAS_W, CT, TILE)
    tl.store(dx_ptr + i, (g * w * (_sig(x) - y)).to(dx_ptr.dtype.element_ty), mask=m)
    tl.store(dy_ptr + i, (-g * w * x).to(dy_ptr.dtype.element_ty), mask=m)


# -- host side ------------------------------------------------------------------------------------------------
_ML_T = 64   # multilabel_margin pair tile: [64, 64] = 4096 pairs per step


def _rows2d(t, r, c):
    """t as [r, c] rows with a unit-stride last dim (a copy otherwise)."""
    v = t.reshape(r, c)
    return v if (c <= 1 or v.stride(1) == 1) else v.contiguous()


def _geometry(desc):
    base = desc.op.replace("_backward", "")
    bw = desc.op.endswith("_backward")
    ops = desc.inputs[1:] if bw else desc.inputs
    x = ops[0]
    c = x.shape[-1]
    r = math.prod(x.shape[:-1])
    return base, bw, ops, x, r, c


def _layout(desc):
    """Workspace words (of the compute dtype): [partials][flag][stop: R words][is_t: R*C bytes, in words]."""
    base, bw, ops, x, r, c = _geometry(desc)
    isz = 8 if x.dtype == DType.f64 else 4
    tile, rows, _ = choose(r, c)
    if base == "multilabel_margin_loss":
        rows = 1
    nparts = 0 if (bw or desc.attr("reduction") == "none") else max(1, cdiv(r, rows))
    flag = int(base in ("multi_margin_loss", "multilabel_margin_loss"))
    stop = r if base == "multilabel_margin_loss" else 0
    ist = cdiv(r * c, isz) if base == "multilabel_margin_loss" else 0
    return nparts, flag, stop, ist, isz


def _workspace(desc) -> int:
    nparts, flag, stop, ist, isz = _layout(desc)
    return (nparts + flag + stop + ist) * isz


def _bind(desc, pref=None):
    base, bw, ops, x, R, C = _geometry(desc)
    kind = _KIND[base]
    f64 = x.dtype == DType.f64
    red = desc.attr("reduction")
    at = desc.attr_dict
    tile, rows, warps = choose(R, C)
    nparts, nflag, nstop, nist, isz = _layout(desc)
    div = R if red == "mean" else 1
    none = red == "none"
    common = dict(F64=f64)
    pv = float(at.get("p", 2.0))
    pk = 2 if pv == 2.0 else 1 if pv == 1.0 else 0
    prm_vals = (at.get("margin", 0.0), pv, at.get("eps", 0.0))
    params: dict = {}

    def prm_of(dev):
        p = params.get(dev)
        if p is None:
            p = params[dev] = torch.tensor(prm_vals, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return p

    def views(ws):
        if ws is None:   # 'none' reduction of an op without index checks: no workspace
            return None, None, None, None
        w = _ws_view(ws, f64)
        flag = w[nparts:nparts + 1] if nflag else None
        raw = ws.reshape(-1)
        o = (nparts + nflag) * isz
        stop = raw[o:o + nstop * isz].view(torch.int32)[:R] if nstop else None
        ist = raw[o + nstop * isz:o + nstop * isz + R * C] if nist else None
        return w, flag, stop, ist

    def launch_fw(inputs, tgt, w, flag, stop, ist):
        dev = inputs[0].device
        if kind in (0, 1):
            a, b = _rows2d(inputs[0], R, C), _rows2d(inputs[1], R, C)
            cc = _rows2d(inputs[2], R, C) if kind == 1 else a
            t = inputs[2].reshape(-1).contiguous() if kind == 0 else a
            _pair_fw[(cdiv(R, rows),)](a, b, cc, t, tgt, w, prm_of(dev), R, C, a.stride(0), b.stride(0),
                                              cc.stride(0), KIND=kind, PK=pk, SWAP=bool(at.get("swap", False)),
                                              NONE=none, ROWS=rows, TILE=tile, num_warps=warps, **common)
        elif kind == 2:
            xv, t = _rows2d(inputs[0], R, C), inputs[1].reshape(-1).contiguous()
            wt = inputs[2].contiguous() if len(inputs) > 2 else xv
            _mm_fw[(cdiv(R, rows),)](xv, t, wt, tgt, w, flag, prm_of(dev), R, C, xv.stride(0),
                                            HAS_W=len(inputs) > 2, P2=at["p"] == 2, NONE=none, ROWS=rows, TILE=tile,
                                            num_warps=warps, **common)
        elif kind == 3:
            xv, t = _rows2d(inputs[0], R, C), _rows2d(inputs[1], R, C)
            _ml_fw[(R,)](xv, t, ist, stop, tgt, w, R, C, xv.stride(0), t.stride(0), NONE=none, T=min(_ML_T, tile),
                         num_warps=8, **common)
        else:
            xv, y = inputs[0].reshape(R, C).contiguous(), inputs[1].reshape(R, C).contiguous()
            wt, wbc, wc = aux_arg(inputs[2], tuple(x.shape), tuple(inputs[2].shape)) if len(inputs) > 2 else (xv, 1, 1)
            _ms_fw[(cdiv(R, rows),)](xv, y, wt, tgt, w, R, C, wbc, wc, HAS_W=len(inputs) > 2, NONE=none,
                                            ROWS=rows, TILE=tile, num_warps=warps, **common)

    def ml_prep(t_in, flag, stop, ist):
        ist.zero_()
        t = _rows2d(t_in, R, C)
        _ml_prep[(R,)](t, ist, stop, flag, C, t.stride(0), T=min(_ML_T, tile), num_warps=4)

    def fw(desc_, inputs, outputs, ws):
        out = outputs[0]
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        w, flag, stop, ist = views(ws)
        if flag is not None:
            flag.zero_()
        w = tgt if w is None else w
        if R:
            if kind == 3:
                ml_prep(inputs[1], flag, stop, ist)
            launch_fw(inputs, tgt, w, flag, stop, ist)
        if not none:
            _pw_fold[(1,)](w, tgt, nparts if R else 0, div, MEAN=red == "mean", F64=f64, BLOCK=1024,
                           num_warps=4)
        if tgt is not out:
            out.copy_(tgt)
        if R and kind in (2, 3):
            _check_flag(desc.op, flag, (_WHAT[base](C),), pref)

    def bwd(desc_, inputs, outputs, ws):
        if not R:
            return
        g = inputs[0].reshape(-1).contiguous() if none else inputs[0]
        ins = inputs[1:]
        dev = ins[0].device
        outs = list(outputs)
        tg = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outs]
        dp = tg + [tg[0]] * (3 - len(tg))
        w, flag, stop, ist = views(ws)
        if flag is not None:
            flag.zero_()
        rd = _RED[red]
        grid = (cdiv(R, rows),)
        if kind in (0, 1):
            a, b = _rows2d(ins[0], R, C), _rows2d(ins[1], R, C)
            cc = _rows2d(ins[2], R, C) if kind == 1 else a
            t = ins[2].reshape(-1).contiguous() if kind == 0 else a
            _pair_bw[grid](g, a, b, cc, t, dp[0], dp[1], dp[2], prm_of(dev), R, C, a.stride(0), b.stride(0),
                           cc.stride(0), div, KIND=kind, PK=pk, SWAP=bool(at.get("swap", False)), RED=rd, ROWS=rows,
                           TILE=tile, num_warps=warps, **common)
        elif kind == 2:
            xv, t = _rows2d(ins[0], R, C), ins[1].reshape(-1).contiguous()
            wt = ins[2].contiguous() if len(ins) > 2 else xv
            _mm_bw[grid](g, xv, t, wt, dp[0], flag, prm_of(dev), R, C, xv.stride(0), div, HAS_W=len(ins) > 2,
                         P2=at["p"] == 2, RED=rd, ROWS=rows, TILE=tile, num_warps=warps, **common)
        elif kind == 3:
            ml_prep(ins[1], flag, stop, ist)
            xv, t = _rows2d(ins[0], R, C), _rows2d(ins[1], R, C)
            _ml_bw[(R,)](g, xv, t, ist, stop, dp[0], R, C, xv.stride(0), t.stride(0), div, RED=rd,
                         T=min(_ML_T, tile), num_warps=8, **common)
        else:
            xv, y = ins[0].reshape(R, C).contiguous(), ins[1].reshape(R, C).contiguous()
            wt, wbc, wc = aux_arg(ins[2], tuple(x.shape), tuple(ins[2].shape)) if len(ins) > 2 else (xv, 1, 1)
            _ms_bw[grid](g, xv, y, wt, dp[0], dp[1], R, C, wbc, wc, div, HAS_W=len(ins) > 2, RED=rd, ROWS=rows,
                         TILE=tile, num_warps=warps, **common)
        for o, t_ in zip(outs, tg):
            if o is not t_:
                o.copy_(t_)
        if kind in (2, 3):
            _check_flag(desc.op, flag, (_WHAT[base](C),), pref)

    return bwd if bw else fw


_WHAT = {"multi_margin_loss": lambda c: ("target", f"class indices in [0, {c})", "an index out of range"),
         "multilabel_margin_loss": lambda c: ("target", f"entries in [-1, {c})", "an entry out of range")}


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    base, bw, ops, x, r, c = _geometry(desc)
    tile, rows, _ = choose(r, c)
    if base == "multilabel_margin_loss":
        return f"triton:{desc.op}:pairs{min(_ML_T, tile)}"
    return f"triton:{desc.op}:rows{tile}x{rows}"


for _base in ROW_LOSSES:
    for _op in (_base, f"{_base}_backward"):
        register_triton(_op, _run, workspace=_workspace, bind=_bind, route=_route)
