"""Triton cross_entropy on N-D inputs with few classes (a segmentation map such as 16 x 19 x 512 x 512): the
nd_small path of loss.py's cross_entropy / cross_entropy_backward plans.

Program p takes one n and BJ consecutive positions j (grid N * cdiv(D, BJ); see nd_small) and walks their classes
in [BJ, K] tiles: each class of a tile is a unit-stride run of BJ elements, so every thread loads 16-byte vectors
of positions and reduces over the classes in its own registers.  _ce_nd: the online (max, sum) of the row-tile
kernels, the position losses ('none') or one (loss, weight) pair per program for loss._fold, and the positions'
logsumexp (cross_entropy's lse output); _ce_nd_grad: dx from the saved lse in one pass: 1 HBM read + 1 write.  The
statistics, the loss and the gradient formulas are loss.py's jit helpers, shared with the row-tile kernels.
"""
from __future__ import annotations

import triton
import triton.language as tl

from .ce_kernels import (_FORCE, _emit_block, _geometry, _grad_coef, _grad_range, _loss_of, _ncd, _num_sms, _row_loss,
                         _row_scale, _rows_info, _stats_range, softmax_base, store_lse)
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2


@triton.jit
def _nd_pos(D, NBJ, sxn, sxd, stn, std, BJ: tl.constexpr, I64: tl.constexpr):
    """Program p of the N-D small-class path: n = p // NBJ and the BJ positions j of its block.  Returns n, j, the
    row indices n D + j, j < D, the x and target offsets and a zero (int64 under I64, for the class offsets:
    c * sxc passes 2^31 when C * D does)."""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    n = pid // NBJ
    j = (pid - n * NBJ) * BJ + tl.arange(0, BJ)
    return n, j, n * D + j, j < D, n * sxn + j * sxd, n * stn + j * std, n * 0


@fast_kernel
def _ce_nd(x_ptr, t_ptr, w_ptr, loss_ptr, lse_ptr, ws_ptr, eps_ptr, R, C, D, NBJ, sxn, sxc, sxd, stn, std, IGNORE,
           HAS_W: tl.constexpr, SMOOTH: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr, K: tl.constexpr,
           BJ: tl.constexpr, XT: tl.constexpr, I64: tl.constexpr):
    """Forward: the position losses ('none') or one (loss, weight) sum per program (_fold), one pass over the
    program's [BJ, C] block in [BJ, K] tiles.  The target logit: XT (default), a masked sum over the tiles (~4
    more instructions an element, but no dependent load at the end: faster on the H100, see nd_small); else
    _row_loss's gather after the pass, as the row-tile kernels do (in bounds: the class is clamped, the load
    masked)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)
    _n, j, rows, jm, xo, to, zero = _nd_pos(D, NBJ, sxn, sxd, stn, std, BJ, I64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, j, D, C, to, IGNORE, HAS_W, False, CT)
    tc32 = tc.to(tl.int32)   # in [0, C): 32-bit compares against the classes
    m, s, a, b, xt = _stats_range(x_ptr, w_ptr, w_ptr, xo, xo, jm, zero, C, C, sxc, 0, tc32, EPS, HAS_W, False, SMOOTH,
                                  F64, K, True, XT, BJ)
    if XT:
        loss = _loss_of(xt, keep, bad, wt, m, s, a, b, EPS, C, False, SMOOTH, F64)
    else:
        loss = _row_loss(x_ptr, xo, sxc, keep, bad, tc, wt, m, s, a, b, EPS, C, False, SMOOTH, F64)
    _emit_block(loss, wt, bad, rows, jm, R, loss_ptr, ws_ptr, NONE, CT, BJ)
    store_lse(lse_ptr, rows, jm, m, s, F64)


@fast_kernel
def _ce_nd_grad(g_ptr, lse_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, eps_ptr, R, C, D, NBJ, sxn, sxc, sxd, stn, std,
                IGNORE, HAS_W: tl.constexpr, SMOOTH: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr,
                K: tl.constexpr, BJ: tl.constexpr, I64: tl.constexpr):
    """Backward: dx = (exp(x - lse) * coef - w y') * scale (contiguous [N, C, D]) from the forward's lse, one pass
    over the program's [BJ, C] block: 1 HBM read + 1 write.  Label smoothing with class weights needs
    b = sum_c w_c in coef: a sum over the [C] weights (tiny, cached), not over the logits.  ws_ptr: the mean's
    denominator (RED = 2)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)
    n, j, rows, jm, xo, to, zero = _nd_pos(D, NBJ, sxn, sxd, stn, std, BJ, I64)
    lse = tl.load(lse_ptr + rows, mask=jm, other=0.0).to(CT)
    m, inv = softmax_base(x_ptr, xo, jm, lse, zero, C, sxc, F64, K, True, BJ)   # first: fewer values live across it
    keep, _bad, tc, wt = _rows_info(t_ptr, w_ptr, j, D, C, to, IGNORE, HAS_W, False, CT)
    b = tl.zeros([BJ], CT) + C
    if SMOOTH and HAS_W:
        b = tl.zeros([BJ], CT) + _wsum(w_ptr, C, CT)
    sc = _row_scale(g_ptr, ws_ptr, rows, keep, R, RED, CT)
    coef = _grad_coef(wt, b, EPS, C, False, SMOOTH)
    do = n * C * D + j
    _grad_range(x_ptr, t_ptr, w_ptr, dx_ptr, xo, to, do, D, jm, zero, C, C, sxc, 0, tc.to(tl.int32), wt, m, inv, coef,
                sc, EPS, HAS_W, False, SMOOTH, F64, K, True)


@triton.jit
def _wsum(w_ptr, C, CT: tl.constexpr):
    """sum_c w_c over the C <= 256 (_ND_MAX_C) class weights: one masked [256] load (every program reads the same
    C words, from L1 / L2), no loop (a loop here kept 8 bytes on the stack at sm_90)."""
    c = tl.arange(0, 256)
    return tl.sum(tl.load(w_ptr + c, mask=c < C, other=0.0).to(CT), 0)


_ND_MAX_C = 256


def nd_small(desc):
    """(K, BJ, num_warps) of the N-D small-class cross_entropy path, None where it doesn't apply (D > 1, class-index
    targets, C <= 256).  A program takes BJ = 512 positions (256 f64; D rounded up when smaller, and halved down
    to 128 while the grid has fewer than 4 programs an SM) on BJ * itemsize / 512 warps (<= 4) and walks their
    classes in [BJ, K] tiles (K = 4 forward, 8 backward): each thread holds 16-byte vectors of consecutive positions
    of each of the tile's classes, so the class reductions stay in its registers (no shuffles, no shared memory,
    no per-position math repeated across threads).  Measured on the H100 (bench/ce_nd_ab.py ->
    bench/results/2026-11-24-h100/ce_nd_ab.json: 16 x 19 x 512 x 512 bf16 / f32, 8 x 150 x 128 x 128 bf16): 512
    positions match 1024 in bf16 and beat it in f32 (forward 0.146 vs 0.265 ms); K = 8 wins in the backward
    (0.164 vs 0.187, 0.311 vs 0.347, 0.062 vs 0.090 ms), K = 4 in the forward (bf16 0.150 vs 0.206); the target
    logit summed over the tiles against a gather after the pass was faster in one run and slower in another
    (0.157 vs 0.185, 0.150 vs 0.116 ms bf16): kept as the default.  Off while a test
    forces the row-tile path's tiles (``forced(tile=...)``) or under ``forced(nd_small=False)``; ``nd_k`` /
    ``nd_bj`` / ``nd_warps`` force the shape, ``nd_xt_sum=False`` the gathered target logit (see _ce_nd)."""
    if desc.op not in ("cross_entropy", "cross_entropy_backward") or not _FORCE.get("nd_small", True) \
            or any(k in _FORCE for k in ("tile", "rows", "split")):
        return None
    _, x, t, _ = _geometry(desc)
    n, c, d = _ncd(x.shape)
    if d <= 1 or not 1 <= c <= _ND_MAX_C or t.dtype.is_floating:
        return None
    size = x.dtype.itemsize
    k = _FORCE.get("nd_k", min(next_power_of_2(c), 8 if desc.op.endswith("_backward") else 4))
    bj = min(256 if size == 8 else 512, max(16, next_power_of_2(d)))
    while bj > 128 and n * cdiv(d, bj) < 4 * _num_sms():
        bj //= 2
    bj = _FORCE.get("nd_bj", bj)
    return k, bj, _FORCE.get("nd_warps", max(1, min(4, bj * size // 512)))
