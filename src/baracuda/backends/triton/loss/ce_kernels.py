"""Triton kernels of the loss family: cross_entropy / nll_loss forward and their fused backward.

Layout: the input is viewed as [N, C, D] (D = d1 * d2 * ..., 1 for 2-D inputs; a copy only when the trailing
dims don't collapse to one stride); a "row" r = (n, j) is one class vector, R = N * D rows.  2-D inputs take a
specialized path (ND=False: row offset r * stride, no division) so unit-stride rows get 16-byte vector loads.

cross_entropy forward: two kernels + a fold.
  _ce_part: grid (row blocks, SPLIT): program (b, k) reads columns [k CHUNK, (k+1) CHUNK) of ROWS rows in
    TILE-wide steps and keeps the online (max, sum exp(x - max)) plus, with label smoothing, sum_c w_c (m - x_c)
    and sum_c w_c (for probability targets the same sums weighted by w_c y'_c): 4 words per (row, split) in
    the workspace.  Long rows of a few rows are split across programs (SPLIT > 1) so the grid holds >= 8
    programs per SM; with 4096 x 128256 the 4096 row programs already do (SPLIT = 1).
  _ce_fin: merges the SPLIT partials of each row, gathers x[r, t_r] and writes the row loss (or the loss and
    the row weight for sum / mean, then the one-program _fold sums them in a fixed order: deterministic).
  The logits are read exactly once: bf16 4096 x 128256 = 1.05 GB, ~0.25-0.3 ms at 3.5-4.2 TB/s on H200
  (the 2026-11-22 bench measured 0.32 ms for the previous one-kernel version: the pass is the floor).
cross_entropy backward (the route names the path): dx = (exp(x - lse) coef - w y') scale from the forward's saved
  lse (its second output), rows whose |lse| >= LSE_FAR recomputing their max and sum (softmax_base; ops/loss.py).
  lse (class-index targets without smoothing-with-weights, any width, 2-D or N-D): one _ce_grad launch, 1 read +
    1 write, no waiting between programs.  4096 x 128256 bf16: 2 x 1.05 GB, ~0.70 ms at 3 TB/s, against the
    0.99 ms the co-resident single-read kernel measured (0.79x torch.compile, bench/results/2026-11-27-h100).
  fused (probability targets or smoothing with class weights, one tile covers the row): coef's row sum from the
    tile the kernel writes from (an L1 hit): still one launch.
  rowsum (the same forms on rows wider than a tile): _ce_part's partial sums first (1 read), then _ce_grad.
  mean: + the denominator pre-pass (_denom, one program of R target loads; block sums + _fold past 64K rows).
  ce_coop.py's single-read kernel now serves cross_entropy_with_grad only (forward and gradient in one read).
cross_entropy on N-D inputs with few classes (D > 1, class-index targets, C <= 256): loss_ce_nd.py, positions on
  the contiguous axis and the classes in registers, built from this module's jit helpers.  The row tiles here
  ([64 rows, 32 classes] at C = 19) split the classes over lanes and warps and reached 12% / 27% of the H100's copy
  rate on such maps.
nll_loss forward reads one element per row (a gather); backward writes the dense gradient in
  [ROWS, TILE] tiles (one write pass, the floor).  The pointwise regression losses are in loss_pointwise.py.

Out-of-range targets: the kernels never read out of bounds: a class index outside [0, C) (other than
ignore_index) is clamped to 0 for the loads, its row's loss is NaN, and the kernel stores 1 into a flag
word of the workspace (zeroed by the host before the launch; every writer stores the same value, so the
race is benign).  _core/checks.py turns the flag into InvalidProblemError (deferred by default, without a host
synchronization; see PlanPreference.check_values).  Under CUDA-graph capture it is not read: the NaN loss is
the signal.
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.errors import InvalidProblemError
from ....ops.loss import LSE_FAR
from .._lib.math import exp_acc as _ex
from .._lib.math import log_acc as _lg
from .._lib.geometry import outer_r_inner
from .._lib.config import num_sms, overrides
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("""Force ``tile`` / ``rows`` / ``split`` in :func:`choose` (tests: multi-tile and split rows under the interpreter).""")


_num_sms = num_sms


def choose(r: int, c: int, d: int, itemsize: int):
    """(TILE, ROWS, num_warps, SPLIT, CHUNK) for R rows of C classes (D: the trailing-dims extent).

    2-D rows (unit stride along C): TILE = up to 4096 columns per step (8 KB bf16 / 16 KB f32 per program-step,
    8 warps: 16 elements = 2-4 16-byte vectors per thread); short rows stack ROWS rows per step (~2K elements).
    N-D (D > 1): the rows are the contiguous direction (stride 1 along j), so ROWS = up to 64 rows x a
    TILE of classes.  SPLIT: column chunks per row so the grid holds >= 8 programs per SM (at most
    cdiv(C, 2 TILE): each chunk keeps >= 2 steps)."""
    if d > 1:
        rows = _FORCE.get("rows", min(64, next_power_of_2(max(r, 1))))
        tile = _FORCE.get("tile", min(next_power_of_2(max(c, 1)), max(2, 2048 // rows)))
    else:
        tile = _FORCE.get("tile", min(next_power_of_2(max(c, 1)), 4096))
        rows = _FORCE.get("rows", max(1, min(2048 // tile, next_power_of_2(max(r, 1)))))
    elems = tile * rows
    warps = 4 if elems <= 2048 else 8
    nblk = max(1, cdiv(r, rows))
    split = _FORCE.get("split", max(1, min(cdiv(8 * _num_sms(), nblk), cdiv(c, 2 * tile))))
    chunk = cdiv(cdiv(c, split), tile) * tile
    split = max(1, cdiv(c, chunk))
    return tile, rows, warps, split, chunk


@triton.jit
def _roff(rows, D, sn, sd, ND: tl.constexpr, RB: tl.constexpr):
    """Offset of row r = (n, j) of an [N, *, D] operand with strides (sn, *, sd).  ND: 0 2-D; 1 N-D; 2 N-D with
    D % RB == 0 and blocks of RB rows starting at multiples of RB: a block then shares n and its j run
    contiguously, which the hints tell the compiler (the j direction has unit stride in a contiguous input, so
    the [RB, TILE] tiles are loaded along j with 16-byte vectors instead of D-strided scalars)."""
    if ND == 2:
        n = tl.max_constancy(rows // D, RB)
        j = tl.max_contiguous(tl.multiple_of(rows % D, RB), RB)
        return n * sn + j * sd
    elif ND:
        return (rows // D) * sn + (rows % D) * sd
    else:
        return rows * sn


@triton.jit
def _row_block(RB: tl.constexpr, I64: tl.constexpr):
    """The RB rows of this program (axis 0 of the grid); int64 when the operands pass 2^31 elements."""
    rows = tl.program_id(0) * RB + tl.arange(0, RB)
    if I64:
        rows = rows.to(tl.int64)
    return rows


@triton.jit
def _emit_rows(loss, wt, bad, rows, R, loss_ptr, ws_ptr, NONE: tl.constexpr, CT: tl.constexpr, RB: tl.constexpr):
    """Row losses to the output ('none') or, with the row weights, to ws[0:R], ws[R:2R] for _fold; the
    out-of-range flag to ws[2R]."""
    rmask = rows < R
    if NONE:
        tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=rmask)
    else:
        tl.store(ws_ptr + rows, loss, mask=rmask)
        tl.store(ws_ptr + R + rows, wt, mask=rmask)
    tl.store(ws_ptr + 2 * R + rows * 0, tl.full([RB], 1.0, CT), mask=bad)


@triton.jit
def _rows_info(t_ptr, w_ptr, rows, R, C, toff, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr, CT: tl.constexpr):
    """Per row: (kept, bad, safe class index, w[t] (0 where not kept)). Never reads out of bounds."""
    rmask = rows < R
    if PROB:
        keep = rmask
        bad = rows < 0
        tc = rows * 0
        wt = tl.where(keep, 1.0, 0.0).to(CT)
    else:
        t = tl.load(t_ptr + toff, mask=rmask, other=IGNORE).to(tl.int64)
        valid = rmask & (t != IGNORE)
        bad = valid & ((t < 0) | (t >= C))
        keep = valid & (t >= 0) & (t < C)
        tc = tl.where(keep, t, 0)
        if HAS_W:
            wt = tl.load(w_ptr + tc, mask=keep, other=0.0).to(CT)
        else:
            wt = tl.where(keep, 1.0, 0.0).to(CT)
    return keep, bad, tc, wt


@triton.jit
def _exp0(x, F64: tl.constexpr, FTZ: tl.constexpr):
    """exp(x) for x <= 0 (x - max): FTZ (f32) through ex2.approx.ftz, 2 instructions an element against 5 for
    tl.exp's ex2.approx with its denormal fix-up (a result below 2^-126 flushes to 0: nothing next to a sum >= 1, and
    a gradient entry under 1e-38)."""
    if FTZ and not F64:
        return tl.exp2(x * 1.4426950408889634)
    else:
        return _ex(x, F64)


@triton.jit
def _tile(x_ptr, xo, rmask, off, hi, sxc, other, CT: tl.constexpr, TILE: tl.constexpr):
    """The [rows, TILE] tile of classes [off, off + TILE) (those < hi) of the rows at offsets xo, in the compute
    dtype (other where masked): (x, c, cm, mask)."""
    c = off + tl.arange(0, TILE)
    cm = c < hi
    mask = rmask[:, None] & cm[None, :]
    x = tl.load(x_ptr + xo[:, None] + c[None, :] * sxc, mask=mask, other=other).to(CT)
    return x, c, cm, mask


@triton.jit
def _stats_step(x_ptr, t_ptr, w_ptr, xo, to, rmask, off, hi, C, sxc, stc, m, s, a, b, xt, tc, EPS,
                HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr,
                FTZ: tl.constexpr, XT: tl.constexpr):
    """One tile of the online statistics; XT: also the target logit (class tc) as a masked sum, into xt."""
    x, c, cm, mask = _tile(x_ptr, xo, rmask, off, hi, sxc, float("-inf"), tl.float64 if F64 else tl.float32, TILE)
    if XT:
        xt += tl.sum(tl.where(mask & (c[None, :] == tc[:, None]), x, 0.0), 1)
    m, s, a, b = _stats_of(x, c, cm, mask, t_ptr, w_ptr, to, stc, C, m, s, a, b, EPS, HAS_W, PROB, SMOOTH, F64, FTZ)
    return m, s, a, b, xt


@triton.jit
def _stats_range(x_ptr, t_ptr, w_ptr, xo, to, rmask, lo, hi, C, sxc, stc, tc, EPS, HAS_W: tl.constexpr,
                 PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr, FTZ: tl.constexpr,
                 XT: tl.constexpr, RB: tl.constexpr):
    """(m, s, a, b, xt) of classes [lo, hi) of RB rows, TILE classes a step (see _stats_of); xt: XT, the target
    logit (class tc) summed over the tiles, else 0."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    m = tl.full([RB], float("-inf"), CT)
    s = tl.zeros([RB], CT)
    a = tl.zeros([RB], CT)
    b = tl.zeros([RB], CT)
    xt = tl.zeros([RB], CT)
    for off in loop(lo, hi, TILE):
        m, s, a, b, xt = _stats_step(x_ptr, t_ptr, w_ptr, xo, to, rmask, off, hi, C, sxc, stc, m, s, a, b, xt, tc,
                                     EPS, HAS_W, PROB, SMOOTH, F64, TILE, FTZ, XT)
    return m, s, a, b, xt


@triton.jit
def _stats_of(x, c, cm, mask, t_ptr, w_ptr, to, stc, C, m, s, a, b, EPS, HAS_W: tl.constexpr, PROB: tl.constexpr,
              SMOOTH: tl.constexpr, F64: tl.constexpr, FTZ: tl.constexpr):
    """(m, s, a, b) updated with a loaded [rows, classes] tile x (-inf where masked) of classes c (in range: cm).
    a and b are kept relative to the running max (a = sum v_c (m - x_c), v_c = w_c or w_c y'_c, b = sum v_c):
    sum_c v_c (lse - x_c) = b log(s) + a then never subtracts two lse-sized numbers (|x| ~ 1e4 in f32
    would otherwise lose 3 digits)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    m_new = tl.maximum(m, tl.max(x, 1))
    ms = tl.where(m_new == float("-inf"), 0.0, m_new)
    s = s * _ex(m - ms, F64) + tl.sum(_exp0(x - ms[:, None], F64, FTZ), 1)
    if SMOOTH or PROB:
        if HAS_W:
            wc = tl.load(w_ptr + c, mask=cm, other=0.0).to(CT)[None, :]
        else:
            wc = tl.where(cm, 1.0, 0.0).to(CT)[None, :]
        if PROB:
            y = tl.load(t_ptr + to[:, None] + c[None, :] * stc, mask=mask, other=0.0).to(CT)
            v = tl.where(mask, wc * (y * (1.0 - EPS) + EPS / C), 0.0)
        else:
            v = tl.where(mask, wc, 0.0)
        shift = tl.where(m == float("-inf"), 0.0, ms - m)   # b == 0 while nothing was seen
        a = a + b * shift + tl.sum(v * tl.where(mask, ms[:, None] - x, 0.0), 1)
        b += tl.sum(v, 1)
    return m_new, s, a, b


@fast_kernel
def _ce_part(x_ptr, t_ptr, w_ptr, part_ptr, eps_ptr, loss_ptr, lse_ptr, ws_ptr, R, C, D, CHUNK, sxn, sxc, sxd, stn, stc,
             std,
             IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, ND: tl.constexpr,
             F64: tl.constexpr, FIN: tl.constexpr, NONE: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr,
             I64: tl.constexpr):
    """Partial row statistics (m, s, a, b) over one column chunk -> part[(k * 4 + q) * R + r].
    FIN (forward, SPLIT = 1: the chunk is the whole row): the row losses instead, straight to the output
    ('none') or summed per program with the row weights into ws[pid], ws[nblk + pid] for _fold, and the rows'
    logsumexp to lse_ptr (cross_entropy's second output, saved for the backward): no partials
    (16-32 bytes per row written and read back, as much as the logits themselves when C is small) and no
    one-program pass over R rows (a 512 x 512 segmentation map has 4M rows)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)   # label smoothing, in the compute dtype
    rows = _row_block(ROWS, I64)
    k = tl.program_id(1)
    rmask = rows < R
    xo = _roff(rows, D, sxn, sxd, ND, ROWS)
    to = _roff(rows, D, stn, std, ND, ROWS)
    lo = k * CHUNK
    hi = tl.minimum(lo + CHUNK, C)
    m, s, a, b, _xt = _stats_range(x_ptr, t_ptr, w_ptr, xo, to, rmask, lo, hi, C, sxc, stc, rows, EPS, HAS_W, PROB,
                                   SMOOTH, F64, TILE, False, False, ROWS)
    if FIN:
        keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, R, C, to, IGNORE, HAS_W, PROB, CT)
        loss = _row_loss(x_ptr, xo, sxc, keep, bad, tc, wt, m, s, a, b, EPS, C, PROB, SMOOTH, F64)
        _emit_block(loss, wt, bad, rows, rmask, R, loss_ptr, ws_ptr, NONE, CT, ROWS)
        store_lse(lse_ptr, rows, rmask, m, s, F64)
    else:
        p = part_ptr + k * 4 * R + rows
        tl.store(p, m, mask=rmask)
        tl.store(p + R, s, mask=rmask)
        tl.store(p + 2 * R, a, mask=rmask)
        tl.store(p + 3 * R, b, mask=rmask)


@triton.jit
def store_lse(lse_ptr, rows, rmask, m, s, F64: tl.constexpr):
    """The rows' logsumexp m + log(s) (-inf for a row of -inf: m = -inf, s = 0) -> lse_ptr[rows]."""
    tl.store(lse_ptr + rows, (m + _lg(s, F64)).to(lse_ptr.dtype.element_ty), mask=rmask)


@triton.jit
def _row_loss(x_ptr, xo, sxc, keep, bad, tc, wt, m, s, a, b, EPS, C, PROB: tl.constexpr, SMOOTH: tl.constexpr,
              F64: tl.constexpr):
    """The row's loss from its statistics, the target logit gathered (index targets)."""
    if PROB:
        xt = 0.0
    else:
        xt = tl.load(x_ptr + xo + tc * sxc, mask=keep, other=0.0).to(m.dtype)
    return _loss_of(xt, keep, bad, wt, m, s, a, b, EPS, C, PROB, SMOOTH, F64)


@triton.jit
def _loss_of(xt, keep, bad, wt, m, s, a, b, EPS, C, PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr):
    """The row's loss from its statistics and target logit xt (NaN on out-of-range targets, 0 on ignored rows):
    index targets (1 - eps) w_t (lse - x_t) + eps / C sum_c w_c (lse - x_c), probability targets
    sum_c w_c y'_c (lse - x_c)."""
    ls = _lg(s, F64)   # lse = m + ls
    if PROB:
        loss = b * ls + a
    else:
        loss = (1.0 - EPS) * wt * ((tl.where(keep, m, 0.0) - xt) + ls)
        if SMOOTH:
            loss += EPS / C * (b * ls + a)
    loss = tl.where(keep, loss, 0.0)
    return tl.where(bad, float("nan"), loss)


@triton.jit
def _emit_block(loss, wt, bad, rows, rmask, R, loss_ptr, ws_ptr, NONE: tl.constexpr, CT: tl.constexpr,
                RB: tl.constexpr):
    """Row losses to the output ('none') or this program's (loss sum, row-weight sum) to ws[pid], ws[P + pid]
    (P programs on a 1-D grid, summed by _fold); the out-of-range flag to ws[2R]."""
    if NONE:
        tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=rmask)
    else:
        pid = tl.program_id(0)
        tl.store(ws_ptr + pid, tl.sum(loss, 0))
        tl.store(ws_ptr + tl.num_programs(0) + pid, tl.sum(wt, 0))
    tl.store(ws_ptr + 2 * R + rows * 0, tl.full([RB], 1.0, CT), mask=bad)


@triton.jit
def _merged(part_ptr, rows, rmask, R, SPLIT: tl.constexpr, F64: tl.constexpr):
    """The row's (m, s, a, b) from its SPLIT partials (the online-softmax merge; empty chunks have m = -inf)."""
    m = tl.load(part_ptr + rows, mask=rmask, other=float("-inf"))
    s = tl.load(part_ptr + R + rows, mask=rmask, other=0.0)
    a = tl.load(part_ptr + 2 * R + rows, mask=rmask, other=0.0)
    b = tl.load(part_ptr + 3 * R + rows, mask=rmask, other=0.0)
    for k in tl.static_range(1, SPLIT):
        p = part_ptr + k * 4 * R + rows
        mk = tl.load(p, mask=rmask, other=float("-inf"))
        mn = tl.maximum(m, mk)
        ms = tl.where(mn == float("-inf"), 0.0, mn)
        s = s * _ex(m - ms, F64) + tl.load(p + R, mask=rmask, other=0.0) * _ex(mk - ms, F64)
        bk = tl.load(p + 3 * R, mask=rmask, other=0.0)
        a = a + b * tl.where(m == float("-inf"), 0.0, ms - m) + tl.load(p + 2 * R, mask=rmask, other=0.0) \
            + bk * tl.where(mk == float("-inf"), 0.0, ms - mk)
        b += bk
        m = mn
    return m, s, a, b


@fast_kernel
def _ce_fin(x_ptr, t_ptr, w_ptr, part_ptr, loss_ptr, lse_ptr, ws_ptr, eps_ptr, R, C, D, sxn, sxc, sxd, stn, std, IGNORE,
            HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, NONE: tl.constexpr, ND: tl.constexpr,
            F64: tl.constexpr, SPLIT: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)
    rows = _row_block(BLOCK, I64)
    rmask = rows < R
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, R, C, _roff(rows, D, stn, std, ND > 0, BLOCK), IGNORE, HAS_W,
                                   PROB, CT)
    m, s, a, b = _merged(part_ptr, rows, rmask, R, SPLIT, F64)
    loss = _row_loss(x_ptr, _roff(rows, D, sxn, sxd, ND > 0, BLOCK), sxc, keep, bad, tc, wt, m, s, a, b, EPS, C,
                     PROB, SMOOTH, F64)
    _emit_rows(loss, wt, bad, rows, R, loss_ptr, ws_ptr, NONE, CT, BLOCK)
    store_lse(lse_ptr, rows, rmask, m, s, F64)


@triton.jit
def _fold_sums(ws_ptr, N, TWO: tl.constexpr, CT: tl.constexpr, BLOCK: tl.constexpr):
    """(sum of ws[0:N], sum of ws[N:2N] when TWO else 0), BLOCK words a step in a fixed order (deterministic)."""
    a0 = tl.zeros([BLOCK], CT)
    a1 = tl.zeros([BLOCK], CT)
    for off in loop(0, N, BLOCK):
        i = off + tl.arange(0, BLOCK)
        a0 += tl.load(ws_ptr + i, mask=i < N, other=0.0)
        if TWO:
            a1 += tl.load(ws_ptr + N + i, mask=i < N, other=0.0)
    return tl.sum(a0, 0), tl.sum(a1, 0)


@fast_kernel
def _fold(ws_ptr, out_ptr, N, MEAN: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """One program: sum of ws[0:N] (losses) and ws[N:2N] (row weights) in a fixed order -> the reduced loss."""
    total, wsum = _fold_sums(ws_ptr, N, MEAN, tl.float64 if F64 else tl.float32, BLOCK)
    if MEAN:
        total = total / wsum
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@fast_kernel
def _denom(t_ptr, w_ptr, ws_ptr, N, C, D, stn, std, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr,
           ND: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """One program: sum_r w[t_r] over the kept rows (the mean's denominator; R for probability targets)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    acc = tl.zeros([BLOCK], CT)
    for off in loop(0, N, BLOCK):
        r = off + tl.arange(0, BLOCK)
        to = _roff(r, D, stn, std, ND > 0, BLOCK)
        _k, _b, _t, wt = _rows_info(t_ptr, w_ptr, r, N, C, to, IGNORE, HAS_W, PROB, CT)
        acc += wt
    tl.store(ws_ptr, tl.sum(acc, 0))


@fast_kernel
def _denom_blk(t_ptr, w_ptr, out_ptr, N, C, D, stn, std, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr,
               ND: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """Program i: sum of w[t_r] over the kept rows of block i (then _fold sums the blocks: no one-program pass
    over millions of N-D rows)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    _k, _b, _t, wt = _rows_info(t_ptr, w_ptr, r, N, C, _roff(r, D, stn, std, ND > 0, BLOCK), IGNORE, HAS_W, PROB, CT)
    tl.store(out_ptr + tl.program_id(0), tl.sum(wt, 0))


@triton.jit
def _row_scale(g_ptr, ws_ptr, rows, keep, N, RED: tl.constexpr, CT: tl.constexpr):
    # RED: 0 none (grad per row), 1 sum, 2 mean (grad / denominator from the pre-pass)
    if RED == 0:
        g = tl.load(g_ptr + rows, mask=rows < N, other=0.0).to(CT)
    elif RED == 1:
        g = tl.load(g_ptr + rows * 0).to(CT)
    else:
        g = tl.load(g_ptr + rows * 0).to(CT) / tl.load(ws_ptr + rows * 0)
    return tl.where(keep, g, 0.0)


@fast_kernel
def _ce_grad(g_ptr, lse_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, part_ptr, ws_ptr, eps_ptr, R, C, D, CHUNK, sxn, sxc, sxd, stn,
             stc, std, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, RED: tl.constexpr,
             ND: tl.constexpr, F64: tl.constexpr, SPLIT: tl.constexpr, FUSED: tl.constexpr, NEED_B: tl.constexpr,
             ROWS: tl.constexpr, TILE: tl.constexpr, I64: tl.constexpr):
    """One streaming pass over a column chunk: dx = (p * coef - w y') * scale, p = exp(x - lse) from the forward's
    saved lse.  coef = sum_c w_c y'_c: (1 - eps) w_t + eps / C * b with b = sum_c w_c = C without class weights;
    NEED_B (probability targets, or label smoothing with class weights): b is a row sum, taken from the tile
    itself (FUSED: one tile covers the row, SPLIT = 1; its second load is an L1 hit) or from _ce_part's partials.
    Without NEED_B every form is 1 HBM read + 1 write in this one launch."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)
    rows = _row_block(ROWS, I64)
    k = tl.program_id(1)
    rmask = rows < R
    xo = _roff(rows, D, sxn, sxd, ND, ROWS)
    lse = tl.load(lse_ptr + rows, mask=rmask, other=0.0).to(CT)
    m, inv = softmax_base(x_ptr, xo, rmask, lse, 0, C, sxc, F64, TILE, False, ROWS)
    to = _roff(rows, D, stn, std, ND, ROWS)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, R, C, to, IGNORE, HAS_W, PROB, CT)
    if NEED_B:
        if FUSED:
            m0 = tl.full([ROWS], float("-inf"), CT)
            z0 = tl.zeros([ROWS], CT)
            _m, _s, _a, b, _xt = _stats_step(x_ptr, t_ptr, w_ptr, xo, to, rmask, 0, C, C, sxc, stc, m0, z0, z0, z0, z0,
                                             tc, EPS, HAS_W, PROB, SMOOTH, F64, TILE, False, False)
        else:
            _m, _s, _a, b = _merged(part_ptr, rows, rmask, R, SPLIT, F64)
    else:
        b = tl.zeros([ROWS], CT) + C
    sc = _row_scale(g_ptr, ws_ptr, rows, keep, R, RED, CT)
    coef = _grad_coef(wt, b, EPS, C, PROB, SMOOTH)
    if ND:
        do = _roff(rows, D, C * D, 1, ND, ROWS)   # dx is written contiguous [N, C, D]
        sdc = D
    else:
        do = rows * C
        sdc = 1
    lo = k * CHUNK
    _grad_range(x_ptr, t_ptr, w_ptr, dx_ptr, xo, to, do, sdc, rmask, lo, tl.minimum(lo + CHUNK, C), C, sxc, stc, tc,
                wt, m, inv, coef, sc, EPS, HAS_W, PROB, SMOOTH, F64, TILE, False)


_FAR = tl.constexpr(LSE_FAR)


@triton.jit
def softmax_base(x_ptr, xo, rmask, lse, zero, C, sxc, F64: tl.constexpr, TILE: tl.constexpr, FTZ: tl.constexpr,
                 RB: tl.constexpr):
    """(m, inv) with p = exp(x - m) * inv: m = the saved lse and inv = 1, except on rows with |lse| >= LSE_FAR or
    a non-finite lse (ops/loss.py), whose own max and sum come from a pass over their classes (the other rows'
    loads are masked off: no traffic unless such a row is in the block)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    far = rmask & ~(tl.abs(lse) < _FAR)
    m = lse
    inv = tl.full([RB], 1.0, CT)
    if tl.max(far.to(tl.int32), 0) > 0:
        mf, sf, _a, _b, _xt = _stats_range(x_ptr, x_ptr, x_ptr, xo, xo, far, zero, C, C, sxc, 0, xo, 0.0, False,
                                           False, False, F64, TILE, FTZ, False, RB)
        m = tl.where(far, tl.where(mf == float("-inf"), 0.0, mf), lse)
        inv = tl.where(far, 1.0 / sf, 1.0)
    return m, inv


@triton.jit
def _grad_range(x_ptr, t_ptr, w_ptr, dx_ptr, xo, to, do, sdc, rmask, lo, hi, C, sxc, stc, tc, wt, m, inv, coef, sc, EPS,
                HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr,
                FTZ: tl.constexpr):
    """dx of classes [lo, hi), TILE classes a step (see _grad_step)."""
    for off in loop(lo, hi, TILE):
        _grad_step(x_ptr, t_ptr, w_ptr, dx_ptr, xo, to, do, sdc, rmask, off, hi, C, sxc, stc, tc, wt, m, inv, coef,
                   sc, EPS, HAS_W, PROB, SMOOTH, F64, TILE, FTZ)


@triton.jit
def _grad_coef(wt, b, EPS, C, PROB: tl.constexpr, SMOOTH: tl.constexpr):
    """coef = sum_c w_c y'_c: index targets (1 - eps) w_t + eps / C * sum w;  probability targets: b."""
    if PROB:
        coef = b
    else:
        coef = (1.0 - EPS) * wt
        if SMOOTH:
            coef += EPS / C * b
    return coef


@triton.jit
def _grad_step(x_ptr, t_ptr, w_ptr, dx_ptr, xo, to, do, sdc, rmask, off, hi, C, sxc, stc, tc, wt, m, inv, coef, sc, EPS,
               HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr,
               FTZ: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    x, c, cm, mask = _tile(x_ptr, xo, rmask, off, hi, sxc, 0.0, CT, TILE)
    p = _exp0(x - m[:, None], F64, FTZ) * inv[:, None]   # m: the row max (inv = 1 / sum) or the lse (inv = 1)
    if HAS_W:
        wc = tl.load(w_ptr + c, mask=cm, other=0.0).to(CT)[None, :]
    else:
        wc = 1.0
    if PROB:
        y = tl.load(t_ptr + to[:, None] + c[None, :] * stc, mask=mask, other=0.0).to(CT)
        d = p * coef[:, None] - wc * (y * (1.0 - EPS) + EPS / C)
    else:
        d = p * coef[:, None] - tl.where(c[None, :] == tc[:, None], (1.0 - EPS) * wt[:, None], 0.0)
        if SMOOTH:
            d -= EPS / C * wc
    d = d * sc[:, None]
    tl.store(dx_ptr + do[:, None] + c[None, :] * sdc, d.to(dx_ptr.dtype.element_ty), mask=mask)


# -- nll_loss -------------------------------------------------------------------------------------
@fast_kernel
def _nll_fw(x_ptr, t_ptr, w_ptr, loss_ptr, ws_ptr, R, C, D, sxn, sxc, sxd, stn, std, IGNORE, HAS_W: tl.constexpr,
            NONE: tl.constexpr, ND: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = _row_block(BLOCK, I64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, R, C, _roff(rows, D, stn, std, ND > 0, BLOCK), IGNORE, HAS_W,
                                   False, CT)
    xt = tl.load(x_ptr + _roff(rows, D, sxn, sxd, ND > 0, BLOCK) + tc * sxc, mask=keep, other=0.0).to(CT)
    loss = tl.where(keep, -wt * xt, 0.0)
    loss = tl.where(bad, float("nan"), loss)
    _emit_rows(loss, wt, bad, rows, R, loss_ptr, ws_ptr, NONE, CT, BLOCK)


@fast_kernel
def _nll_bw(g_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, R, C, D, stn, std, IGNORE, HAS_W: tl.constexpr, RED: tl.constexpr,
            ND: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr, I64: tl.constexpr):
    # grid (row blocks, column tiles): one dense write of dinput (the floor), the target column gets -w_t * scale
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = _row_block(ROWS, I64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, R, C, _roff(rows, D, stn, std, ND, ROWS), IGNORE, HAS_W, False,
                                   CT)
    sc = _row_scale(g_ptr, ws_ptr, rows, keep, R, RED, CT)
    c = tl.program_id(1) * TILE + tl.arange(0, TILE)
    d = tl.where((c[None, :] == tc[:, None]) & keep[:, None], (-wt * sc)[:, None], 0.0)
    mask = (rows < R)[:, None] & (c < C)[None, :]
    if ND:
        do = _roff(rows, D, C * D, 1, ND, ROWS)
        sdc = D
    else:
        do = rows * C
        sdc = 1
    tl.store(dx_ptr + do[:, None] + c[None, :] * sdc, d.to(dx_ptr.dtype.element_ty), mask=mask)


# -- host side ------------------------------------------------------------------------------------
_RED = {"none": 0, "sum": 1, "mean": 2}
_FIN_BLOCK = 256


def _geometry(desc):
    """(backward?, input, target, has class weights) of a loss descriptor: the backward ops take grad first, then
    (cross_entropy_backward) the forward's lse, then the forward's operands."""
    bw = desc.op.endswith("_backward")
    k = (2 if desc.op == "cross_entropy_backward" else 1) if bw else 0
    x, t = desc.inputs[k], desc.inputs[k + 1]
    return bw, x, t, len(desc.inputs) == k + 3


def _ncd(shape) -> tuple[int, int, int]:
    """(N, C, D) of an [N, C, d1, ...] (or unbatched [C]) input."""
    if len(shape) == 1:
        return 1, shape[0], 1
    return outer_r_inner(shape, 1)


def _check_flag(op, ws, c, ignore, pref):
    """Raise on an out-of-range class index flagged by the kernels (now or deferred: _core/checks.py)."""
    flagged(ws, pref, lambda _: InvalidProblemError(op, "target", f"class indices in [0, {c}) or ignore_index={ignore}",
                                                  "an index out of range"))


def _ws_view(ws, f64):
    dt = torch.float64 if f64 else torch.float32
    size = 8 if f64 else 4
    return ws.reshape(-1)[: ws.numel() // size * size].view(dt)
