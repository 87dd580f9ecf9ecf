"""cuSOLVER / cuBLAS solves through nvmath's bindings: solve (+_ex) and inv (+_ex) with getrf + getrs, lu_solve with
getrs, cholesky_solve / cholesky_inverse with potrs (+ potrsBatched), solve_triangular with cuBLAS trsm.

Layout (cuSOLVER / cuBLAS are column-major): right-hand sides are copied to column-major (the routines overwrite
them; the copy is the result buffer), X read back as its transpose.  getrs solves op(A) with trans = N / T / C; a
right-side solve X A = B is A^T X^T = B^T (trans = T).  potrs reads the factor as it lies: the row-major lower L is the
column-major upper factor of conj(A), so it solves conj(A) conj(X) = conj(B) (conjugations free for real dtypes).
trsm: row-major A X = B is X^T A^T = B^T column-major (side = right, the triangle flipped).

A batch of small matrices (order up to cusolver_lib.BATCHED_MAX_N) takes cuBLAS's batched routines, one launch for
the batch: getrsBatched, and trsmBatched (twice, for potrs with several right-hand sides: L Y = B, then L^H X = Y).
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ...ops.linalg_factor import check_info
from ...ops.linalg_solve import is_vector_rhs
from .cusolver_factor import colmajor, flat, lu_all, register_cusolver
from .cusolver_lib import (BATCHED_MAX_N, LOWER, UPPER, cublas_handle, cublas_routine, fill_mode, handle, pointers,
                           routine)

_OP_N, _OP_T, _OP_C = 0, 1, 2    # cublasOperation_t


# -- one library call each ---------------------------------------------------------------------------------------
def _getrs(dt, lu_c, piv, b_c, n, nrhs, trans, info):
    """op(A) X = B in place on column-major B (B, nrhs, n) from column-major LU (B, n, n) and pivots (B, n)."""
    if b_c.shape[0] > 1 and n <= BATCHED_MAX_N:
        lu_c = lu_c.contiguous()
        pa, pb = pointers(lu_c), pointers(b_c)
        host_info = np.zeros(1, dtype=np.int32)     # (getrsBatched reports argument errors only, on the host)
        cublas_routine("getrs_batched", dt)(cublas_handle(lu_c.device.index), trans, n, nrhs, pa.data_ptr(), n,
                                            piv.contiguous().data_ptr(), pb.data_ptr(), n, host_info.ctypes.data,
                                            b_c.shape[0])
        if host_info[0] != 0:
            raise RuntimeError(f"cublas getrsBatched: invalid argument {-int(host_info[0])}")
        return
    h = handle(lu_c.device.index)
    for i in range(b_c.shape[0]):
        routine("getrs", dt)(h, trans, n, nrhs, lu_c[i].data_ptr(), n, piv[i].data_ptr(), b_c[i].data_ptr(), n,
                             info[i].data_ptr())


def _potrs(dt, l_, b_c, n, nrhs, uplo, info):
    """(U^H U) X = B in place on column-major B (B, nrhs, n), the factor as potrf left it (B, n, n).  Two triangular
    solves with the factor's triangle where potrs does not fit: a complex factor (torch, like LAPACK's potrs, uses
    its diagonal as stored, imaginary parts included; cuSOLVER's potrs read it otherwise on the H100 -- wrong
    results, 2026-11-27) and a batch of small matrices with several right-hand sides (potrsBatched takes one)."""
    if dt.is_complex or (l_.shape[0] > 1 and nrhs > 1 and n <= BATCHED_MAX_N):
        first, second = (_OP_N, _OP_C) if uplo == LOWER else (_OP_C, _OP_N)
        for op in (first, second):
            _trsm_batched(dt, l_, b_c, _LEFT, uplo, op, _NON_UNIT, n, nrhs)
        return
    h = handle(l_.device.index)
    if l_.shape[0] > 1 and nrhs == 1:   # potrsBatched takes one right-hand side
        pa, pb = pointers(l_), pointers(b_c)
        routine("potrs_batched", dt)(h, uplo, n, 1, pa.data_ptr(), n, pb.data_ptr(), n, info.data_ptr(), l_.shape[0])
        return
    for i in range(l_.shape[0]):
        routine("potrs", dt)(h, uplo, n, nrhs, l_[i].data_ptr(), n, b_c[i].data_ptr(), n, info[i].data_ptr())


_LEFT, _NON_UNIT = 0, 0        # cublasSideMode_t, cublasDiagType_t


def _one(dt):
    """alpha = 1 in ``dt`` (host pointer mode: keep the array alive across the call)."""
    return np.ones(1, dtype=np.complex128 if dt.is_complex else np.float64).astype(dt.numpy)


def _trsm_batched(dt, a, x, side, uplo, trans, diag, m, n):
    """cuBLAS ?trsmBatched in place on the column-major (m, n) matrices of x (B, n, m), A (B, k, k) column-major."""
    a = a.contiguous()
    one, pa, px = _one(dt), pointers(a), pointers(x)
    cublas_routine("trsm_batched", dt)(cublas_handle(a.device.index), side, uplo, trans, diag, m, n, one.ctypes.data,
                                       pa.data_ptr(), a.shape[-1], px.data_ptr(), m, x.shape[0])


def _trsm(dt, a, x, side, uplo, diag, m, n):
    """cuBLAS ?trsm (alpha = 1, host pointer mode) in place on column-major x (B, n, m) with A (B, k, k)."""
    k = a.shape[-1]
    if x.shape[0] > 1 and k <= BATCHED_MAX_N:
        _trsm_batched(dt, a, x, side, uplo, _OP_N, diag, m, n)
        return
    h = cublas_handle(a.device.index)
    one = _one(dt)
    fn = cublas_routine("trsm", dt)
    for i in range(x.shape[0]):
        fn(h, side, uplo, _OP_N, diag, m, n, one.ctypes.data, a[i].data_ptr(), k, x[i].data_ptr(), m)


# -- plans -----------------------------------------------------------------------------------------------------------
def _batch_views(a, b, batch, n, core_b):
    return flat(a.broadcast_to(tuple(batch) + (n, n)), (n, n)), flat(b.broadcast_to(tuple(batch) + core_b), core_b)


def _bind_solve(desc, pref):
    op = desc.op
    aspec, bspec = desc.inputs[0], desc.inputs[-1]
    n = aspec.shape[-1]
    dt = desc.dtype
    left = desc.attr("left")
    vector = op in ("solve", "solve_ex") and is_vector_rhs(aspec, bspec)
    xs = desc.outputs[0]
    batch = xs.shape[:-1] if vector else xs.shape[:-2]
    adjoint = op == "lu_solve" and desc.attr("adjoint")

    def run(d, inputs, outputs, ws):
        a, b = inputs[0], inputs[-1]
        x = outputs[0]
        bm = b.unsqueeze(-1) if vector else b
        xm = x.unsqueeze(-1) if vector else x
        rows, cols = bm.shape[-2:]
        av, bv = _batch_views(a, bm, batch, n, (rows, cols))
        nb = bv.shape[0]
        info = torch.zeros(nb, dtype=torch.int32, device=x.device)
        if op == "lu_solve":
            lu_c = colmajor(av)
            piv = flat(inputs[1].broadcast_to(tuple(batch) + (n,)), (n,)).contiguous()
            finfo = None
        else:
            lu, piv, finfo = lu_all(av, n, n)
            lu_c = lu.transpose(-1, -2)   # (lu_all's column-major buffer)
            # solve's LU / pivots outputs (row-major, as lu_factor's): what its backward's lu_solve reads
            flat(outputs[-2], (n, n)).copy_(lu)
            flat(outputs[-1], (n,)).copy_(piv)
        # left: op(A) X = B, B column-major (nrhs = cols); right: X A = B <=> A^T X^T = B^T, B^T column-major is B
        if left:
            b_c = colmajor(bv)
            trans = (_OP_C if dt.is_complex else _OP_T) if adjoint else _OP_N
            nrhs = cols
        else:
            b_c = bv.contiguous().clone()
            trans = _OP_N if adjoint and dt.is_complex else _OP_T
            if adjoint and dt.is_complex:   # X A^H = B <=> A conj(X)^T = conj(B)^T: solve with conj(B), conj back
                b_c = b_c.conj().resolve_conj()
            elif adjoint:
                trans = _OP_N
            nrhs = rows
        if nb and n and nrhs:
            _getrs(dt, lu_c, piv, b_c, n, nrhs, trans, info)
        res = b_c.transpose(-1, -2) if left else b_c
        if not left and adjoint and dt.is_complex:
            res = res.conj()
        flat(xm, (rows, cols)).copy_(res)
        if finfo is not None:
            _solve_info(op, outputs, finfo, batch, aspec.shape[:-2], pref)
    return run


def _solve_info(op, outputs, info, batch, a_batch, pref):
    full = info.reshape(batch)
    lead = len(batch) - len(a_batch)
    idx = (0,) * lead + tuple(slice(0, 1) if s == 1 else slice(None) for s in a_batch)
    info = full[idx].reshape(a_batch)
    if op == "solve_ex":
        outputs[1].copy_(info)
    elif op == "solve":
        check_info(op, "solve", info, pref)


def _bind_inv(desc, pref):
    op = desc.op
    n = desc.inputs[0].shape[-1]
    dt = desc.dtype

    def run(d, inputs, outputs, ws):
        x = flat(outputs[0], (n, n))
        nb = x.shape[0]
        eye = torch.eye(n, dtype=x.dtype, device=x.device).expand(nb, n, n)
        info = torch.zeros(nb, dtype=torch.int32, device=x.device)
        if op == "cholesky_inverse":
            up = desc.attr("upper")
            f = flat(inputs[0], (n, n))
            f = (f.triu() if up else f.tril()).contiguous()
            if f.is_complex():   # (a factor's diagonal is read as its real part)
                f.diagonal(dim1=-2, dim2=-1).imag.zero_()
            b_c = eye.contiguous()
            if nb and n:
                _potrs(dt, f, b_c, n, n, fill_mode(not up), info)   # conj(A) Y = I: X = conj(Y)
            x.copy_(b_c.transpose(-1, -2).conj())
            return
        lu, piv, finfo = lu_all(flat(inputs[0], (n, n)), n, n)
        b_c = eye.contiguous()
        if nb and n:
            _getrs(dt, lu.transpose(-1, -2), piv, b_c, n, n, _OP_N, info)
        x.copy_(b_c.transpose(-1, -2))
        if op == "inv_ex":
            flat(outputs[1], ()).copy_(finfo)
        else:
            check_info(op, "inv", finfo, pref)
    return run


def _bind_chol_solve(desc, pref):
    bspec, lspec = desc.inputs
    n = lspec.shape[-1]
    dt = desc.dtype
    up = desc.attr("upper")
    batch = desc.outputs[0].shape[:-2]

    def run(d, inputs, outputs, ws):
        b, l_ = inputs
        lv, bv = _batch_views(l_, b, batch, n, b.shape[-2:])
        f = (lv.triu() if up else lv.tril()).contiguous()
        b_c = colmajor(bv.conj())    # conj(A) conj(X) = conj(B), see the module doc
        nb, k = b_c.shape[0], b_c.shape[1]
        info = torch.zeros(nb, dtype=torch.int32, device=b.device)
        if nb and n and k:
            _potrs(dt, f, b_c, n, k, fill_mode(not up), info)
        flat(outputs[0], bv.shape[-2:]).copy_(b_c.transpose(-1, -2).conj())
    return run


def _bind_trsm(desc, pref):
    aspec, bspec = desc.inputs
    n = aspec.shape[-1]
    dt = desc.dtype
    up, left, unit = desc.attr("upper"), desc.attr("left"), desc.attr("unitriangular")
    batch = desc.outputs[0].shape[:-2]

    def run(d, inputs, outputs, ws):
        a, b = inputs
        av, bv = _batch_views(a, b, batch, n, b.shape[-2:])
        x = flat(outputs[0], bv.shape[-2:])
        x.copy_(bv)                       # row-major X (rows, cols) is column-major X^T (cols, rows)
        rows, cols = x.shape[-2:]
        a_c = av.contiguous().resolve_conj()    # row-major A is column-major A^T: the triangle flips
        side = 1 if left else 0           # left: X^T A^T = B^T (cuBLAS side right); right: A^T X^T = B^T (left)
        uplo = LOWER if up else UPPER
        if x.shape[0] and rows and cols:
            _trsm(dt, a_c, x, side, uplo, 1 if unit else 0, cols, rows)
    return run


for _op in ("solve", "solve_ex", "lu_solve"):
    register_cusolver(_op, _bind_solve, "cusolver:getrf+getrs" if _op != "lu_solve" else "cusolver:getrs")
for _op in ("inv", "inv_ex"):
    register_cusolver(_op, _bind_inv, "cusolver:getrf+getrs(identity)")
register_cusolver("cholesky_inverse", _bind_inv, "cusolver:potrs(identity)")
def _route_chol_solve(desc, pref=None) -> str:
    """What _potrs runs for cholesky_solve(B, L): two cuBLAS triangular solves for a complex factor or a batch of
    small matrices with several right-hand sides, else potrs (potrsBatched for a batch of one right-hand side)."""
    b, l_ = desc.inputs
    n, nrhs = l_.shape[-1], b.shape[-1]
    batched = math.prod(desc.outputs[0].shape[:-2]) > 1
    if desc.dtype.is_complex or (batched and nrhs > 1 and n <= BATCHED_MAX_N):
        return "cublas:trsm" + ("Batched" if batched else "") + " x2"
    return "cusolver:potrs" + ("Batched" if batched and nrhs == 1 else "")


register_cusolver("cholesky_solve", _bind_chol_solve, _route_chol_solve)
register_cusolver("solve_triangular", _bind_trsm, "cublas:trsm")
