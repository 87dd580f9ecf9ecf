"""Batched f32 Cholesky, LU (and det), solve and lu_solve of n <= 32 with one warp a matrix, one row a lane (Gluon).

small.py's kernels hold the matrix in whatever layout Triton picks, so every step reads column k and the pivot row as
masked reductions over the whole tile: ~6 shuffle stages of 8 registers each, twice a step.  Here the layout is
explicit (Gluon): lane i holds row i of A in 32 registers.  Then
- column k is register k of every lane (the masked sum over a lane's own registers folds away: the neutral -0.0
  keeps it exact, x + -0.0 == x);
- the pivot search is two single-instruction warp reductions (``redux.sync``): the max of |a|'s bits (a non-negative
  float orders as an unsigned integer; NaN as inf: getf2 takes the NaN), then the min of position : lane among the
  rows that reach it (the first in getf2's swapped order on ties);
- the pivot row reaches every lane by ``shfl.sync.idx`` from the pivot's lane, one shuffle a register, only for the
  columns the step still updates (the rest are dead, and the shuffle is pure).  The updates are written as
  ``fma(shuffled, -l, a)``: as ``a - l * shuffled`` the compiler negated each shuffled value with an integer xor.
As in small.py, no row moves (``at``: each row's position in getf2's swapped matrix), so the pivots, the zero-pivot
step (info) and the packed factors are LAPACK's.  n < 32 pads with the identity: padded rows never pivot before
step n (their column entries are 0 and their positions come after every real row's) and are not stored.

_chol_warp_kernel      cholesky of A's lower triangle (read as the whole symmetric matrix, so row k is column k: step k
                       broadcasts it from lane k) -> L, info (the first order whose pivot is not > 0)
_lu_warp_kernel        A -> packed LU (rows stored at their final positions), 1-based int32 pivots, info; OUT=1/2/3:
                       det, (sign, log|det|), logdet instead, as small.py's _lu_kernel
_solve_warp_kernel     A X = B: the LU of A as above with B's rows eliminated alongside, then back substitution;
                       stores X and (program column 0) the LU, pivots and info the backward's lu_solve reads
_lu_solve_warp_kernel  A X = B (ADJ: A^T X = B) from a packed LU and its pivots: the pivots' row permutation as
                       one shuffle per register from each lane's source row, two triangular solves whose step k
                       broadcasts row k from lane k

Compiled kernels only: Gluon has no interpreter, so under TRITON_INTERPRET (CI on the CPU) the plans run small.py's
kernels; tests/linalg/test_warp_sm90.py compiles these for sm_90 offline, the GPU tests run them.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .small import _mul

N = gl.constexpr(32)   # one matrix row per lane of a warp


@gluon.jit
def _from_lane(x, lane):
    """Element-wise: x's same register in lane ``lane`` (a tensor of lane numbers of x's layout), f32 or i32."""
    return gl.inline_asm_elementwise("shfl.sync.idx.b32 $0, $1, $2, 0x1f, 0xffffffff;", "=r,r,r", [x, lane],
                                     dtype=x.dtype, is_pure=True, pack=1)


@gluon.jit
def _reg(X, cols, k):
    """Register k of each lane (column k of a row-per-lane tile): free, the select folds (-0.0 is neutral)."""
    return gl.sum(gl.where(cols == k, X, -0.0), axis=1)


@gluon.jit
def _lanes(like, lane):
    return gl.zeros_like(like, dtype=gl.int32) + lane


@gluon.jit
def _warp_u32(x, OP: gl.constexpr):
    """The warp's unsigned max / min / sum (OP) of int32 ``x`` (one element a lane) in every lane: one
    ``redux.sync``."""
    return gl.inline_asm_elementwise("redux.sync." + OP + ".u32 $0, $1, 0xffffffff;", "=r,r", [x], dtype=gl.int32,
                                     is_pure=True, pack=1)


@gluon.jit
def _pivot_lane(ck, at, done, r):
    """(lane p, its position q): the row getf2 picks for column ``ck`` among the rows not ``done`` -- the largest |a|
    (NaN largest), the first position on ties.  Two warp reductions: the max of |a|'s bits (a non-negative float
    orders as an unsigned integer), then the min of position : lane over the rows that reach it."""
    a = gl.abs(ck)
    bits = gl.where(a != a, float("inf"), a).to(gl.int32, bitcast=True)
    top = _warp_u32(gl.where(done, 0, bits), "max")
    best = _warp_u32(gl.where((~done) & (bits == top), at * 32 + r, -1), "min")
    return best & 31, best >> 5


@gluon.jit
def _indices(L: gl.constexpr):
    """(r, rows, cols) of the row-per-lane tile of layout L: each lane's row number, and the [N, 1] / [1, N] views."""
    r = gl.arange(0, N, layout=gl.SliceLayout(1, L))
    return r, gl.expand_dims(r, 1), gl.expand_dims(gl.arange(0, N, layout=gl.SliceLayout(0, L)), 0)


@gluon.jit
def _store_factors(lu_ptr, piv_ptr, info_ptr, b, slb, slr, slc, spb, A, at, piv, info, r, cols, n):
    """The packed LU (each lane's row at its final position ``at``), the pivots (lane k: pivot k) and info."""
    gl.store(lu_ptr + b * slb + gl.expand_dims(at, 1) * slr + cols * slc, A,
             mask=gl.expand_dims(at < n, 1) & (cols < n))
    gl.store(piv_ptr + b * spb + r, piv, mask=r < n)
    gl.store(info_ptr + b + r * 0, info, mask=r == 0)


@gluon.jit
def _load_square(ptr, n, s_r, s_c, rows, cols):
    """An n x n matrix padded to the identity in the row-per-lane tile."""
    inside = (rows < n) & (cols < n)
    A = gl.load(ptr + rows * s_r + cols * s_c, mask=inside, other=0.0)
    return gl.where(inside | (rows != cols), A, 1.0)


@gluon.jit
def _eliminate(A, B, r, cols, n, NN: gl.constexpr, WITH_B: gl.constexpr, LB: gl.constexpr):
    """getf2 without row moves on A (and B's rows alongside): (A as packed rows, B, at, piv (1-based, lane k holds
    pivot k), info (every lane), the lane of each position (lane k holds position k's))."""
    piv = gl.zeros_like(r)
    info = gl.zeros_like(r)
    SB: gl.constexpr = gl.SliceLayout(1, LB)
    lane_at = r
    at = r
    done = r < 0
    for k in gl.static_range(NN):
        ck = _reg(A, cols, k)
        p, q = _pivot_lane(ck, at, done, r)
        U = _from_lane(A, _lanes(A, gl.expand_dims(p, 1)))
        pv = _reg(U, cols, k)
        below = (~done) & (r != p)
        # the multipliers scale by the pivot's reciprocal, as getf2 does (a zero pivot: no scaling, LAPACK's info)
        lk = gl.where(below, ck * (1.0 / gl.where(pv == 0, 1.0, pv)), 0.0)
        l2 = gl.expand_dims(lk, 1)
        below2 = gl.expand_dims(below, 1)        # (only the rows below: a non-finite pivot row leaves the rest)
        A = gl.where(below2 & (cols > k), gl.fma(U, -l2, A), gl.where(below2 & (cols == k), l2, A))
        if WITH_B:
            UB = _from_lane(B, _lanes(B, gl.expand_dims(gl.convert_layout(p, SB), 1)))
            B = gl.where(gl.expand_dims(gl.convert_layout(below, SB), 1),
                         gl.fma(UB, -gl.expand_dims(gl.convert_layout(lk, SB), 1), B), B)
        piv = gl.where(r == k, q + 1, piv)
        info = gl.where((pv == 0) & (info == 0) & (k < n), k + 1, info)
        lane_at = gl.where(r == k, p, lane_at)
        at = gl.where(r == p, k, gl.where(at == k, q, at))
        done = done | (r == p)
    return A, B, at, piv, info, lane_at


@gluon.jit
def _lu_warp_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, o2_ptr, n, sab, sar, sac, slb, slr, slc, spb,
                    OUT: gl.constexpr):
    """OUT = 0: the factors; 1: det, 2: (sign, log|det|), 3: logdet (NaN for a negative det) instead, into
    lu_ptr[b] (and o2_ptr[b]), as small.py's _lu_kernel: the product of the pivots, the sign of the interchanges."""
    L: gl.constexpr = gl.BlockedLayout([1, N], [32, 1], [1, 1], [1, 0])
    b = gl.program_id(0).to(gl.int64)
    r, rows, cols = _indices(L)
    A = _load_square(a_ptr + b * sab, n, sar, sac, rows, cols)
    A, _, at, piv, info, _ = _eliminate(A, A, r, cols, n, N, False, L)
    if OUT == 0:
        _store_factors(lu_ptr, piv_ptr, info_ptr, b, slb, slr, slc, spb, A, at, piv, info, r, cols, n)
    else:
        # each real row's pivot is its register at its final position (padding rows: 1)
        d = gl.where(r < n, gl.sum(gl.where(cols == gl.expand_dims(at, 1), A, -0.0), axis=1), 1.0)
        flips = _warp_u32(gl.where((r < n) & (piv != r + 1), 1, 0), "add")
        psign = gl.where(flips % 2 == 1, -1.0, 1.0)
        if OUT == 1:
            gl.store(lu_ptr + b * slb + r * 0, psign * gl.reduce(d, 0, _mul), mask=r == 0)
        else:
            sgn = psign * gl.reduce(gl.where(d > 0, 1.0, gl.where(d < 0, -1.0, 0.0)), 0, _mul)
            logabs = gl.sum(gl.log(gl.abs(d)), axis=0)
            if OUT == 2:
                gl.store(lu_ptr + b * slb + r * 0, sgn, mask=r == 0)
                gl.store(o2_ptr + b * slb + r * 0, logabs + gl.zeros_like(sgn), mask=r == 0)
            else:
                gl.store(lu_ptr + b * slb + r * 0, gl.where(sgn < 0, float("nan"), logabs), mask=r == 0)


@gluon.jit
def _solve_warp_kernel(a_ptr, b_ptr, x_ptr, lu_ptr, piv_ptr, info_ptr, n, k_cols,
                       sab, sar, sac, sbb, sbr, sbc, sxb, sxr, sxc, slb, slr, slc, spb, BK: gl.constexpr):
    L: gl.constexpr = gl.BlockedLayout([1, N], [32, 1], [1, 1], [1, 0])
    LB: gl.constexpr = gl.BlockedLayout([1, BK], [32, 1], [1, 1], [1, 0])
    SB: gl.constexpr = gl.SliceLayout(1, LB)
    b = gl.program_id(0).to(gl.int64)
    cb = gl.program_id(1)
    r, rows, cols = _indices(L)
    rb = gl.expand_dims(gl.arange(0, N, layout=SB), 1)
    kc = cb * BK + gl.expand_dims(gl.arange(0, BK, layout=gl.SliceLayout(0, LB)), 0)
    bmask = (rb < n) & (kc < k_cols)
    A = _load_square(a_ptr + b * sab, n, sar, sac, rows, cols)
    B = gl.load(b_ptr + b * sbb + rb * sbr + kc * sbc, mask=bmask, other=0.0)
    A, B, at, piv, info, lane_at = _eliminate(A, B, r, cols, n, N, True, LB)
    # back substitution: step k takes x_k = b / u_kk from the lane at position k; rows above it subtract
    atb = gl.convert_layout(at, SB)
    for k in gl.static_range(N - 1, -1, -1):
        src = _from_lane(lane_at, _lanes(lane_at, k))                  # every lane: the lane at position k
        d = _reg(A, cols, k)
        xk = _from_lane(B * gl.expand_dims(gl.convert_layout(1.0 / d, SB), 1),
                        _lanes(B, gl.expand_dims(gl.convert_layout(src, SB), 1)))
        uk = gl.expand_dims(gl.convert_layout(d, SB), 1)
        B = gl.where(gl.expand_dims(atb == k, 1), xk, gl.where(gl.expand_dims(atb < k, 1), gl.fma(xk, -uk, B), B))
    gl.store(x_ptr + b * sxb + gl.expand_dims(atb, 1) * sxr + kc * sxc, B, mask=bmask)
    if cb == 0:
        _store_factors(lu_ptr, piv_ptr, info_ptr, b, slb, slr, slc, spb, A, at, piv, info, r, cols, n)


@gluon.jit
def _trsv_rows(T, B, r, cols, LOWER: gl.constexpr, UNIT: gl.constexpr, NN: gl.constexpr, LB: gl.constexpr):
    """op(T) X = B for the lower (upper) triangle of the row-per-lane tile T; X replaces B.  Step k broadcasts
    x_k = b_k (/ t_kk) from lane k, rows past it subtract t_ik x_k."""
    SB: gl.constexpr = gl.SliceLayout(1, LB)
    rb = gl.convert_layout(r, SB)
    for i in gl.static_range(NN):
        k = i if LOWER else NN - 1 - i
        t = _reg(T, cols, k)
        if UNIT:
            xk = _from_lane(B, _lanes(B, k))
        else:
            xk = _from_lane(B * gl.expand_dims(gl.convert_layout(1.0 / t, SB), 1), _lanes(B, k))
        if LOWER:
            past = rb > k
        else:
            past = rb < k
        tk = gl.expand_dims(gl.convert_layout(t, SB), 1)
        B = gl.where(gl.expand_dims(rb == k, 1), xk, gl.where(gl.expand_dims(past, 1), gl.fma(xk, -tk, B), B))
    return B


@gluon.jit
def _permuted(B, rb, pv, c, REVERSE: gl.constexpr):
    """B's rows after the pivots' interchanges S_k (rows k and pv[k]): each lane's source row, the interchanges
    composed in order (REVERSE: from the last), then one shuffle a register from it."""
    src = rb
    for i in gl.static_range(N):
        k = N - 1 - i if REVERSE else i
        pk = gl.sum(gl.where(c == k, pv, 0), axis=0)
        src = gl.where(src == k, pk, gl.where(src == pk, k, src))
    return _from_lane(B, _lanes(B, gl.expand_dims(src, 1)))


@gluon.jit
def _lu_solve_warp_kernel(lu_ptr, piv_ptr, b_ptr, x_ptr, n, k_cols, sab, sar, sac, spb, sbb, sbr, sbc,
                          sxb, sxr, sxc, ADJ: gl.constexpr, BK: gl.constexpr):
    """ADJ: the host passes the LU's strides transposed, so lane i holds row i of LU^T (U^T lower, L^T unit upper)."""
    L: gl.constexpr = gl.BlockedLayout([1, N], [32, 1], [1, 1], [1, 0])
    LB: gl.constexpr = gl.BlockedLayout([1, BK], [32, 1], [1, 1], [1, 0])
    b = gl.program_id(0).to(gl.int64)
    cb = gl.program_id(1)
    r, rows, cols = _indices(L)
    c = gl.arange(0, N, layout=gl.SliceLayout(0, L))
    rb = gl.arange(0, N, layout=gl.SliceLayout(1, LB))
    kc = cb * BK + gl.expand_dims(gl.arange(0, BK, layout=gl.SliceLayout(0, LB)), 0)
    bmask = gl.expand_dims(rb < n, 1) & (kc < k_cols)
    T = _load_square(lu_ptr + b * sab, n, sar, sac, rows, cols)
    B = gl.load(b_ptr + b * sbb + gl.expand_dims(rb, 1) * sbr + kc * sbc, mask=bmask, other=0.0)
    # every lane reads all pivots (0-based; padding: no interchange)
    pv = gl.load(piv_ptr + b * spb + c, mask=c < n, other=0) - 1
    pv = gl.where(c < n, pv, c)
    if ADJ:   # A^T = U^T L^T P^T: solve, then X = P Z (the interchanges from the last)
        B = _trsv_rows(T, B, r, cols, True, False, N, LB)
        B = _trsv_rows(T, B, r, cols, False, True, N, LB)
        B = _permuted(B, rb, pv, c, False)    # X = P Z: row i is Z's row S_{n-1} o ... o S_0 (i)
    else:
        B = _permuted(B, rb, pv, c, True)     # P^T B first: row i is B's row S_0 o ... o S_{n-1} (i)
        B = _trsv_rows(T, B, r, cols, True, True, N, LB)
        B = _trsv_rows(T, B, r, cols, False, False, N, LB)
    gl.store(x_ptr + b * sxb + gl.expand_dims(rb, 1) * sxr + kc * sxc, B, mask=bmask)


@gluon.jit
def _chol_warp_kernel(a_ptr, l_ptr, info_ptr, n, sab, sar, sac, slb, slr, slc):
    """potf2 on the symmetric matrix whose lower triangle A holds (the upper read as its mirror): step k takes row k
    (= column k) from lane k, scales it by 1 / l_kk as potf2 does, and updates the whole trailing block, both
    triangles, so that row k' stays column k' for the later steps.  A non-positive (or NaN) pivot sets info and
    continues with l_kk = 1 (the factor past it is unspecified, as torch documents)."""
    L: gl.constexpr = gl.BlockedLayout([1, N], [32, 1], [1, 1], [1, 0])
    b = gl.program_id(0).to(gl.int64)
    r, rows, cols = _indices(L)
    inside = (rows < n) & (cols < n)
    lower = rows >= cols
    A = _load_square(a_ptr + b * sab, n, sar, sac, rows, cols)
    # the upper triangle from the lower's transpose: permute is free (lane j then holds column j of A^T), the layout
    # conversion back to a row a lane goes through shared memory once
    A = gl.where(lower, A, gl.convert_layout(gl.permute(A, (1, 0)), L))
    info = gl.zeros_like(r)
    for k in gl.static_range(N):
        R = _from_lane(A, _lanes(A, k))
        akk = _reg(R, cols, k)
        ok = akk > 0
        info = gl.where(ok | (info != 0) | (k >= n), info, k + 1)
        d = gl.sqrt_rn(gl.where(ok, akk, 1.0))
        rd = 1.0 / d
        lk = _reg(A, cols, k) * rd                         # l_ik of this lane's row
        lk2 = gl.expand_dims(lk, 1)
        # a_ij -= l_ik l_jk with l_jk = a_kj / l_kk: (l_ik / l_kk) a_kj, one multiply a step
        A = gl.where((rows > k) & (cols > k), gl.fma(R, -gl.expand_dims(lk * rd, 1), A),
                     gl.where(cols == k, gl.where(rows > k, lk2, gl.where(rows == k, gl.expand_dims(d, 1), A)), A))
    gl.store(l_ptr + b * slb + rows * slr + cols * slc, gl.where(lower, A, 0.0), mask=inside)
    gl.store(info_ptr + b + r * 0, info, mask=r == 0)
