"""Batched small-matrix kernels (n <= 64): one program per matrix, the whole matrix in registers.

Every step of the factorizations is a masked reduction / rank-1 update over the register tile (no dynamic register
indexing in Triton): column k of A is ``sum(where(cols == k, A, 0), 1)``, a row swap two masked row sums and two
selects.  n steps of O(N^2) work each: for 65536 matrices of 32x32 that is ~32 x 1024 x 4 flops per matrix with every
operand read once (4 KB per matrix) and written once, the reason a bespoke kernel beats a per-matrix library call.

FACT=0 eliminates above the pivot too (Gauss-Jordan) and swaps no rows: each row remembers its position in the
matrix LAPACK's getf2 would have swapped, so the pivot is the one getf2 picks (the largest |a| among the rows not yet
pivoted, the first in that order on ties: the same pivots, zero-pivot step and info); X's row k is then row p_k of
B over p_k's pivot.  Five masked passes over the tiles a column (column k, the pivot rows of A and B, the two
rank-1 updates) where the LU step with its row swaps, B's swaps and the two triangular solves took about
seventeen.

The multipliers are the column scaled by the pivot's reciprocal, as LAPACK's getf2 / getrf2 scale it (they divide
only by a subnormal pivot, which these kernels do not single out); a zero pivot scales nothing and sets info.  The
rounding matters beyond the last bit: the next pivot is a comparison of |a|, and exact ties in the arithmetic can
break either way with it.

Layouts are the caller's strides: a transposed operand (upper-triangle reads, right-side solves X A = B as
A^T X^T = B^T) is the same kernel on swapped strides.  Real dtypes only (f32, f64): complex matrices go to cuSOLVER.

_chol_kernel    cholesky of A's lower triangle -> L (+ info: the first order whose pivot is not > 0)
_lu_kernel      LU with partial pivoting (the first largest |a|, LAPACK's choice; no row moves, as FACT=0 below:
                each row's final position is where it is stored) -> LU, 1-based int32 pivots, info;
                OUT=1: the determinant, 2: (sign, log|det|), 3: logdet instead of the factors
_solve_kernel   FACT=0: Gauss-Jordan on [A | B] with partial pivoting (solve in one elimination);
                1: A holds a Cholesky factor L: L L^T X = B;
                2: one triangular solve (LOWER, UNIT);  3: A holds LU (+ pivots): A X = B or A^T X = B (ADJ);
                EYE: B is the identity (inv, cholesky_inverse); info of FACT=0 written by column block 0
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.interp import loop


@triton.jit
def _col(A, cols, k):
    return tl.sum(tl.where(cols == k, A, 0), axis=1)


@triton.jit
def _row(A, rows, k):
    """Row k of a [M, N] tile (``rows`` its [M, 1] indices), or element k of a vector (``rows`` its indices): any
    dtype (the 0 takes A's)."""
    return tl.sum(tl.where(rows == k, A, 0), axis=0)


@triton.jit
def _swap_rows(X, rows, k, p):
    xk = _row(X, rows, k)
    xp = _row(X, rows, p)
    return tl.where(rows == k, xp[None, :], tl.where(rows == p, xk[None, :], X))


@triton.jit
def _pivot(A, done, at, r, cols, k, N: tl.constexpr, PIVOT: tl.constexpr):
    """Column k and getf2's pivot for it without row swaps: (c, p, q, pv) -- the column, the pivot row, its position
    q in getf2's swapped matrix (``at``), the pivot value.  PIVOT: the largest |c| (NaN largest) among the rows not
    ``done``, the first in the swapped order on ties; else the row at position k."""
    c = _col(A, cols, k)
    if PIVOT:
        a = tl.abs(c)
        a = tl.where(done, -1.0, tl.where(a != a, float("inf"), a))
        q = tl.min(tl.where(a == tl.max(a, axis=0), at, N), axis=0)
    else:
        q = k
    p = tl.sum(tl.where(at == q, r, 0), axis=0)
    return c, p, q, _row(c, r, p)


@triton.jit
def _retire(at, done, r, p, q, k):
    """Pivot row p takes position k (the row there moves to p's old position q) and is done."""
    return tl.where(r == p, k, tl.where(at == k, q, at)), done | (r == p)


@triton.jit
def _trsv(A, B, r, rows, n, LOWER: tl.constexpr, UNIT: tl.constexpr):
    """op(A) X = B for the lower (upper) triangle of the N x N tile A; X replaces B (N x BK)."""
    for i in loop(0, n):
        if LOWER:
            k = i
        else:
            k = n - 1 - i
        a = _col(A, r[None, :], k)
        x = _row(B, rows, k)
        if not UNIT:
            x = x / _row(a, r, k)
        if LOWER:
            below = r > k
        else:
            below = r < k
        B = tl.where(rows == k, x[None, :], B - tl.where(below[:, None], a[:, None] * x[None, :], 0.0))
    return B


@triton.jit
def _mul(a, b):
    return a * b


@triton.jit
def _chol_kernel(a_ptr, l_ptr, info_ptr, n, sab, sar, sac, slb, slr, slc,
                 HAS_INFO: tl.constexpr, N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, N)
    rows, cols = r[:, None], r[None, :]
    inside = (rows < n) & (cols < n)
    A = tl.load(a_ptr + b * sab + rows * sar + cols * sac, mask=inside & (rows >= cols), other=0.0)
    info = tl.zeros([], tl.int32)
    for k in loop(0, n):
        c = _col(A, cols, k)
        akk = _row(c, r, k)
        ok = akk > 0
        info = tl.where(ok | (info != 0), info, k + 1)
        d = tl.sqrt(tl.where(ok, akk, 1.0))
        l = tl.where(r > k, c / d, tl.where(r == k, d, 0.0))
        A = A - tl.where((rows > k) & (cols > k), l[:, None] * l[None, :], 0.0)
        A = tl.where(cols == k, l[:, None], A)
    tl.store(l_ptr + b * slb + rows * slr + cols * slc, tl.where(rows >= cols, A, 0.0), mask=inside)
    if HAS_INFO:
        tl.store(info_ptr + b, info)


@triton.jit
def _lu_kernel(a_ptr, lu_ptr, piv_ptr, info_ptr, o2_ptr, n, sab, sar, sac, slb, slr, slc, spb,
               PIVOT: tl.constexpr, OUT: tl.constexpr, HAS_INFO: tl.constexpr, N: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    r = tl.arange(0, N)
    rows, cols = r[:, None], r[None, :]
    inside = (rows < n) & (cols < n)
    A = tl.load(a_ptr + b * sab + rows * sar + cols * sac, mask=inside, other=0.0)
    piv = tl.zeros([N], tl.int32)
    info = tl.zeros([], tl.int32)
    done = r >= n                 # (padding rows never pivot)
    at = r                        # each row's position in getf2's swapped matrix (no row moves: module doc)
    for k in loop(0, n):
        c, p, q, pv = _pivot(A, done, at, r, cols, k, N, PIVOT)
        below = (~done) & (r != p)
        l = tl.where(below, c * (1.0 / tl.where(pv == 0, 1.0, pv)), 0.0)   # (by the reciprocal: module doc)
        A = A - tl.where(cols > k, l[:, None] * _row(A, rows, p)[None, :], 0.0)
        A = tl.where((cols == k) & below[:, None], l[:, None], A)
        piv = tl.where(r == k, q + 1, piv)
        info = tl.where((pv == 0) & (info == 0), k + 1, info)
        at, done = _retire(at, done, r, p, q, k)
    if OUT == 0:    # row i of the tile is row at[i] of the packed LU
        tl.store(lu_ptr + b * slb + at[:, None] * slr + cols * slc, A, mask=inside)
        tl.store(piv_ptr + b * spb + r, piv, mask=r < n)
        if HAS_INFO:
            tl.store(info_ptr + b, info)
    else:
        d = tl.where(r < n, tl.sum(tl.where(at[:, None] == cols, A, 0.0), axis=1), 1.0)
        flips = tl.sum(tl.where((r < n) & (piv != r + 1), 1, 0), axis=0)
        psign = tl.where(flips % 2 == 1, -1.0, 1.0)
        if OUT == 1:
            tl.store(lu_ptr + b * slb, psign * tl.reduce(d, 0, _mul))
        else:
            sgn = psign * tl.reduce(tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0)), 0, _mul)
            logabs = tl.sum(tl.log(tl.abs(d)), axis=0)
            if OUT == 2:
                tl.store(lu_ptr + b * slb, sgn)
                tl.store(o2_ptr + b * slb, logabs)
            else:
                tl.store(lu_ptr + b * slb, tl.where(sgn < 0, float("nan"), logabs))


@triton.jit
def _solve_kernel(a_ptr, piv_ptr, b_ptr, x_ptr, info_ptr, n, k_cols,
                  sab, sar, sac, spb, sbb, sbr, sbc, sxb, sxr, sxc,
                  FACT: tl.constexpr, LOWER: tl.constexpr, UNIT: tl.constexpr, ADJ: tl.constexpr,
                  EYE: tl.constexpr, HAS_INFO: tl.constexpr, N: tl.constexpr, BK: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    cb = tl.program_id(1)
    r = tl.arange(0, N)
    rows, cols = r[:, None], r[None, :]
    kc = cb * BK + tl.arange(0, BK)[None, :]
    inside = (rows < n) & (cols < n)
    if FACT == 2:   # only the triangle the op reads (and not its diagonal when unitriangular)
        if LOWER:
            inside = inside & (rows >= cols)
        else:
            inside = inside & (rows <= cols)
    A = tl.load(a_ptr + b * sab + rows * sar + cols * sac, mask=inside, other=0.0)
    bmask = (rows < n) & (kc < k_cols)
    if EYE:
        B = tl.where(bmask & (rows == kc), 1.0, 0.0).to(A.dtype)
    else:
        B = tl.load(b_ptr + b * sbb + rows * sbr + kc * sbc, mask=bmask, other=0.0)
    if FACT == 0:   # Gauss-Jordan without row swaps (module doc)
        info = tl.zeros([], tl.int32)
        done = r >= n                 # (padding rows never pivot)
        at = r                        # each row's position in getf2's swapped matrix
        pos = tl.zeros([N], tl.int32)           # the column each row pivots
        d = tl.full([N], 1.0, A.dtype)          # ... and its pivot
        for k in loop(0, n):
            c, p, q, pv = _pivot(A, done, at, r, cols, k, N, True)
            info = tl.where((pv == 0) & (info == 0), k + 1, info)
            l = tl.where(r == p, 0.0, tl.where(pv == 0, 0.0, c * (1.0 / tl.where(pv == 0, 1.0, pv))))
            A = A - tl.where(cols > k, l[:, None] * _row(A, rows, p)[None, :], 0.0)
            B = B - l[:, None] * _row(B, rows, p)[None, :]
            pos = tl.where(r == p, k, pos)
            d = tl.where(r == p, pv, d)
            at, done = _retire(at, done, r, p, q, k)
        tl.store(x_ptr + b * sxb + pos[:, None] * sxr + kc * sxc, B / d[:, None], mask=bmask)
        if HAS_INFO:
            if cb == 0:
                tl.store(info_ptr + b, info)
    elif FACT == 1:
        A = tl.where(rows >= cols, A, 0.0)
        B = _trsv(A, B, r, rows, n, True, False)
        B = _trsv(tl.trans(A), B, r, rows, n, False, False)
    elif FACT == 2:
        B = _trsv(A, B, r, rows, n, LOWER, UNIT)
    else:
        piv = tl.load(piv_ptr + b * spb + r, mask=r < n, other=1) - 1
        if ADJ:   # A^T = U^T L^T P^T: U^T (lower), L^T (unit upper), then the interchanges in reverse
            At = tl.trans(A)
            B = _trsv(At, B, r, rows, n, True, False)
            B = _trsv(At, B, r, rows, n, False, True)
            for i in loop(0, n):
                k = n - 1 - i
                B = _swap_rows(B, rows, k, _row(piv, r, k))
        else:
            for k in loop(0, n):
                B = _swap_rows(B, rows, k, _row(piv, r, k))
            B = _trsv(A, B, r, rows, n, True, True)
            B = _trsv(A, B, r, rows, n, False, False)
    if FACT != 0:
        tl.store(x_ptr + b * sxb + rows * sxr + kc * sxc, B, mask=bmask)
