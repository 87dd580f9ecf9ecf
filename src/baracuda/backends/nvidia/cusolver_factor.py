"""cuSOLVER factorizations through nvmath's bindings (cusolver_lib): cholesky (+_ex) with potrf / potrfBatched,
lu_factor (+_ex) / lu with getrf (cuBLAS getrfBatched for batches of square matrices up to BATCHED_MAX_N),
ldl_factor (+_ex) with sytrf, det / slogdet / logdet from getrf.

Layout: cuSOLVER is column-major.  Cholesky runs potrf's lower fill mode (2.7x faster than the upper one at 4096^2
on the H100) on the triangle torch reads: upper=True on A's row-major memory as it lies (its column-major lower
triangle is A's upper one; the factor lands as U row-major), upper=False on A's column-major copy (L column-major,
one transposed copy back).  A general operand (getrf, sytrf's lower-triangle pivoting order) is copied to
column-major first (``colmajor``) and the factor copied back.  Every operand the library overwrites is a copy (the
output buffer where it can be).

Each library call is one small function (``potrf``, ``getrf``, ...) so a wrong argument is easy to find; the GPU
tests of tests/linalg run each of them against the float64 reference.
"""
from __future__ import annotations

import math

import torch

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.linalg_common import LINALG_DTYPES
from ...ops.linalg_factor import check_info
from .cusolver_lib import (BATCHED_MAX_N, LOWER, colmajor, cublas_handle, cublas_routine, handle, pointers, routine,
                           workspace)

__all__ = ["colmajor", "getrf", "potrf", "register_cusolver", "flat", "lu_all"]


def register_cusolver(op, bind, route, supports=None, dtypes=LINALG_DTYPES, note=""):
    def precision(desc, pref=None):
        f64 = desc.dtype in (DType.f64, DType.c128)
        return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                                  bit_stable=True, deterministic=True)

    def run(desc, inputs, outputs, ws):
        bind(desc, None)(desc, inputs, outputs, ws)

    register(Impl(op=op, backend=Backend.CUSOLVER, run=run, bind=bind, precision=precision,
                  dtypes=frozenset(dtypes), dtypes_note=note, devices=frozenset({"cuda"}), supports=supports,
                  priority=10.0, route=route, array_api="torch"))


def flat(t, core):
    """(B, *core) view of t (B = the batch's size, also for empty matrices)."""
    core = tuple(core)
    return t.reshape((math.prod(t.shape[:t.dim() - len(core)]),) + core)


# -- one library call each ---------------------------------------------------------------------------------------
def potrf(dt, a, n, uplo, info):
    """In place on each (n, n) matrix of ``a`` (B, n, n) contiguous; info (B,) int32."""
    h = handle(a.device.index)
    if a.shape[0] > 1:
        ptrs = pointers(a)
        routine("potrf_batched", dt)(h, uplo, n, ptrs.data_ptr(), n, info.data_ptr(), a.shape[0])
        return
    lwork = routine("potrf_buffer_size", dt)(h, uplo, n, a.data_ptr(), n)
    ws = workspace(lwork * a.element_size(), a.device)
    routine("potrf", dt)(h, uplo, n, a.data_ptr(), n, ws.data_ptr(), lwork, info.data_ptr())


def getrf(dt, a, m, n, piv, info):
    """In place on each column-major (m, n) matrix of ``a`` (B, n, m) contiguous; piv (B, min(m, n)), info (B,)."""
    if m == n and a.shape[0] > 1 and n <= BATCHED_MAX_N:   # a batch of small square matrices: one cuBLAS launch
        ptrs = pointers(a)
        cublas_routine("getrf_batched", dt)(cublas_handle(a.device.index), n, ptrs.data_ptr(), n, piv.data_ptr(),
                                            info.data_ptr(), a.shape[0])
        return
    h = handle(a.device.index)
    lwork = routine("getrf_buffer_size", dt)(h, m, n, a.data_ptr(), m)
    ws = workspace(lwork * a.element_size(), a.device)
    for i in range(a.shape[0]):
        routine("getrf", dt)(h, m, n, a[i].data_ptr(), m, ws.data_ptr(), piv[i].data_ptr(), info[i].data_ptr())


def _sytrf(dt, a, n, piv, info):
    """Lower Bunch-Kaufman on each column-major (n, n) matrix of ``a`` (B, n, n)."""
    h = handle(a.device.index)
    lwork = routine("sytrf_buffer_size", dt)(h, n, a.data_ptr(), n)
    ws = workspace(lwork * a.element_size(), a.device)
    for i in range(a.shape[0]):
        routine("sytrf", dt)(h, LOWER, n, a[i].data_ptr(), n, piv[i].data_ptr(), ws.data_ptr(), lwork,
                             info[i].data_ptr())


# -- plans -----------------------------------------------------------------------------------------------------------
def _bind_chol(desc, pref):
    ex = desc.op == "cholesky_ex"
    up = desc.attr("upper")
    n = desc.inputs[0].shape[-1]
    dt = desc.dtype

    def run(d, inputs, outputs, ws):
        # cuSOLVER's lower fill mode: 1.68 ms against 4.48 for the upper one at 4096^2 f32 on the H100 (torch 2.06;
        # bench/potrf_probe.py).  It reads the column-major lower triangle, and torch reads the triangle ``upper``
        # names (the other may hold anything).  upper=True: A's row-major memory as it lies, whose column-major lower
        # triangle is A's upper one transposed; its factor conj(U)^T... read row-major is U, in place.  upper=False:
        # the column-major copy of A (its lower triangle is A's), factored to L column-major: L^T row-major, L one
        # transposed copy away.
        out = outputs[0]
        if up:
            out.copy_(inputs[0])
            buf = out
        else:
            buf = colmajor(flat(inputs[0], (n, n)))
        a = flat(buf, (n, n))    # (contiguous)
        info = flat(outputs[1], ()) if ex else torch.zeros(a.shape[0], dtype=torch.int32, device=out.device)
        if a.shape[0] and n:
            potrf(dt, a, n, LOWER, info)
        if not up:
            flat(out, (n, n)).copy_(buf.mT)
        (out.triu_ if up else out.tril_)()
        if not ex:
            check_info(d.op, "chol", info, pref)
    return run


def lu_all(x, m, n, pivot=True):
    """(LU row-major (B, m, n), pivots (B, k), info (B,)) of ``x``'s matrices."""
    a = colmajor(flat(x, (m, n)))
    nb = a.shape[0]
    piv = torch.empty((nb, min(m, n)), dtype=torch.int32, device=x.device)
    info = torch.zeros(nb, dtype=torch.int32, device=x.device)
    if nb and m and n:
        getrf(_dtype_of(x), a, m, n, piv, info)
    return a.transpose(-1, -2), piv, info


def _dtype_of(t):
    from ..._core.dtypes import as_dtype

    return as_dtype(t.dtype)


def _bind_lu(desc, pref):
    a = desc.inputs[0]
    m, n = a.shape[-2:]
    op = desc.op

    def run(d, inputs, outputs, ws):
        lu, piv, info = lu_all(inputs[0], m, n)
        if op == "lu":
            from ..triton.linalg.unpack import unpack_into

            unpack_into(lu.contiguous(), piv, *(flat(o, o.shape[-2:]) for o in outputs))
            return
        flat(outputs[0], (m, n)).copy_(lu)
        flat(outputs[1], (min(m, n),)).copy_(piv)
        if op == "lu_factor_ex":
            flat(outputs[2], ()).copy_(info)
        else:
            check_info(op, "lu", info, pref)
    return run


def _bind_det(desc, pref):
    n = desc.inputs[0].shape[-1]
    op = desc.op

    def run(d, inputs, outputs, ws):
        lu, piv, _ = lu_all(inputs[0], n, n)
        diag = lu.diagonal(dim1=-2, dim2=-1)
        flips = (piv != torch.arange(1, n + 1, dtype=torch.int32, device=piv.device)).sum(-1)
        psign = 1.0 - 2.0 * (flips % 2).to(diag.real.dtype)
        if op == "det":
            flat(outputs[0], ()).copy_(psign * diag.prod(-1))
            return
        absd = diag.abs()
        logabs = absd.log().sum(-1)
        sign = psign * torch.where(absd == 0, 0, diag / torch.where(absd == 0, 1, absd)).prod(-1)
        if op == "slogdet":
            flat(outputs[0], ()).copy_(sign)
            flat(outputs[1], ()).copy_(logabs)
        elif diag.is_complex():
            flat(outputs[0], ()).copy_(torch.where(sign == 0, float("-inf"), logabs + 1j * sign.angle()))
        else:
            flat(outputs[0], ()).copy_(torch.where(sign < 0, float("nan"), logabs))
    return run


def _bind_ldl(desc, pref):
    n = desc.inputs[0].shape[-1]
    dt = desc.dtype
    ex = desc.op == "ldl_factor_ex"

    def run(d, inputs, outputs, ws):
        a = colmajor(flat(inputs[0], (n, n)))
        nb = a.shape[0]
        piv = flat(outputs[1], (n,))
        info = flat(outputs[2], ()) if ex else torch.zeros(nb, dtype=torch.int32, device=a.device)
        if nb and n:
            _sytrf(dt, a, n, piv, info)
        flat(outputs[0], (n, n)).copy_(a.transpose(-1, -2).tril())
        if not ex:
            check_info(d.op, "ldl", info, pref)
    return run


def _no_hermitian_complex(desc):
    if desc.attr("hermitian") and desc.dtype.is_complex:
        return "hermitian=True on complex matrices: cuSOLVER has sytrf (complex symmetric) but no hetrf"
    return None


for _op in ("cholesky", "cholesky_ex"):
    register_cusolver(_op, _bind_chol, lambda d, p: "cusolver:potrfBatched" if d.inputs[0].numel > d.inputs[0].shape[-1] ** 2
                      else "cusolver:potrf")
for _op in ("lu_factor", "lu_factor_ex", "lu"):
    register_cusolver(_op, _bind_lu, "cusolver:getrf" + ("+unpack" if _op == "lu" else ""),
                      supports=lambda d: None if d.attr("pivot") else "pivot=False: cuSOLVER's getrf always pivots "
                                                                         "(the Triton kernels take it for n <= 64)")
for _op in ("det", "slogdet", "logdet"):
    register_cusolver(_op, _bind_det, "cusolver:getrf+diag")
for _op in ("ldl_factor", "ldl_factor_ex"):
    register_cusolver(_op, _bind_ldl, "cusolver:sytrf(lower)", supports=_no_hermitian_complex)

