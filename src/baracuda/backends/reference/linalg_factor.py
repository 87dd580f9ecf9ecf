"""NumPy float64 / complex128 bodies of the factorizations (ops/linalg_factor.py): written out, batched over the
leading dims, for clarity (numpy.linalg has no LU, no LDL and no info of a failed Cholesky).

* Cholesky: right-looking, column by column, on the Hermitian matrix the read triangle implies (its diagonal's real
  part, as LAPACK potrf); info = the first order whose pivot is not > 0.
* LU: partial pivoting as LAPACK getf2 (the pivot: the first largest |a| -- |re| + |im| for complex, LAPACK's
  i?amax); a zero pivot sets info and is not divided by; pivots 1-based int32.
* LDL: Bunch-Kaufman as LAPACK sytf2 / hetf2 (lower), the unblocked algorithm LAPACK's sytrf runs for n below its
  block size (64), step for step: the same 1x1 / 2x2 choices and interchanges.
"""
from __future__ import annotations

import numpy as np

from ...ops.linalg_common import LinAlgError
from ...ops.linalg_factor import info_message
from . import register_reference

__all__ = ["cholesky_np", "hermitian_of", "lu_factor_np", "lu_unpack_np", "ldl_factor_np", "ldl_reconstruct",
           "raise_info", "adj"]


def adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


def raise_info(op, kind, info):
    info = np.asarray(info)
    if info.size and np.any(info != 0):
        raise LinAlgError(op, info_message(kind, int(info[info != 0].reshape(-1)[0])))


def hermitian_of(a, upper=False):
    """The Hermitian matrix the lower (upper) triangle of ``a`` implies; the diagonal's real part."""
    t = np.triu(a, 1) if upper else np.tril(a, -1)
    d = np.real(np.diagonal(a, axis1=-2, axis2=-1))
    return t + adj(t) + d[..., None] * np.eye(a.shape[-1])


def cholesky_np(a):
    """(L, info) of the Hermitian matrices ``a``'s lower triangles imply."""
    h = hermitian_of(a).copy()
    n = a.shape[-1]
    L = np.zeros_like(h)
    info = np.zeros(a.shape[:-2], np.int32)
    for k in range(n):
        akk = np.real(h[..., k, k])
        ok = akk > 0
        info[~ok & (info == 0)] = k + 1
        dk = np.sqrt(np.where(ok, akk, 1.0))
        col = h[..., k:, k] / dk[..., None]
        col[..., 0] = dk
        L[..., k:, k] = col
        h[..., k + 1:, k + 1:] -= col[..., 1:, None] * np.conj(col[..., None, 1:])
    return L, info


def _cabs1(x):
    return np.abs(x.real) + np.abs(x.imag) if np.iscomplexobj(x) else np.abs(x)


def _swap_rows(a, i, p):
    """Swap row i with row p[b] of every batch element b of ``a`` (..., m, n), in place."""
    ri = a[..., i, :].copy()
    idx = np.broadcast_to(p[..., None, None], a.shape[:-2] + (1, a.shape[-1]))
    rp = np.take_along_axis(a, idx, axis=-2)
    np.put_along_axis(a, idx, ri[..., None, :], axis=-2)
    a[..., i, :] = rp[..., 0, :]


def lu_factor_np(a, pivot=True):
    """(LU, pivots (1-based int32), info) of ``a`` (..., m, n)."""
    A = np.array(a, copy=True)
    m, n = A.shape[-2:]
    k = min(m, n)
    piv = np.zeros(A.shape[:-2] + (k,), np.int32)
    info = np.zeros(A.shape[:-2], np.int32)
    for j in range(k):
        p = (j + np.argmax(_cabs1(A[..., j:, j]), axis=-1)) if pivot else np.full(A.shape[:-2], j)
        p = np.asarray(p, np.int64)
        piv[..., j] = p + 1
        _swap_rows(A, j, p)
        pv = A[..., j, j]
        zero = pv == 0
        info[zero & (info == 0)] = j + 1
        # LAPACK's getf2 / getrf2 rule: the column times the pivot's reciprocal, divided only by a pivot below the
        # smallest normal number (whose reciprocal would overflow); the rounding decides later pivots' ties
        tiny = np.abs(pv) < np.finfo(A.dtype).tiny
        col = A[..., j + 1:, j]
        A[..., j + 1:, j] = np.where(tiny[..., None], col / np.where(zero, 1.0, pv)[..., None],
                                     col * (1.0 / np.where(zero, 1.0, pv))[..., None])
        A[..., j + 1:, j + 1:] -= A[..., j + 1:, j, None] * A[..., j, None, j + 1:]
    return A, piv, info


def lu_unpack_np(lu, piv):
    """(P, L, U) with A = P L U from LAPACK-style LU and 1-based pivots."""
    m, n = lu.shape[-2:]
    k = min(m, n)
    batch = lu.shape[:-2]
    perm = np.broadcast_to(np.arange(m), batch + (m,)).copy()
    for i in range(k):
        p = piv[..., i].astype(np.int64) - 1
        pi = perm[..., i].copy()
        pp = np.take_along_axis(perm, p[..., None], -1)[..., 0]
        np.put_along_axis(perm, p[..., None], pi[..., None], -1)
        perm[..., i] = pp
    P = np.zeros(batch + (m, m), lu.dtype)
    np.put_along_axis(P, perm[..., :, None], 1.0, axis=-1)   # P^T[i, perm[i]] = 1
    P = np.swapaxes(P, -1, -2)
    L = np.tril(lu[..., :, :k], -1) + np.eye(m, k)
    U = np.triu(lu[..., :k, :])
    return P, L, U


# -- Bunch-Kaufman ----------------------------------------------------------------------------------------------------
_ALPHA = (1.0 + np.sqrt(17.0)) / 8.0


def _sytf2(a, herm):
    """LAPACK ?sytf2 / ?hetf2 with uplo='L' on one matrix: (LD, pivots, info)."""
    A = np.array(a, copy=True)
    n = A.shape[-1]
    cj = np.conj if herm else (lambda x: x)
    ab = _cabs1
    piv = np.zeros(n, np.int32)
    info = 0
    if herm:
        A[np.diag_indices(n)] = A.real[np.diag_indices(n)]
    k = 0
    while k < n:
        kstep = 1
        absakk = abs(A[k, k].real) if herm else ab(A[k, k])
        imax, colmax = k, 0.0
        if k < n - 1:
            imax = k + 1 + int(np.argmax(ab(A[k + 1:, k])))
            colmax = ab(A[imax, k])
        if max(absakk, colmax) == 0:
            info = info or k + 1
            kp = k
        else:
            if absakk >= _ALPHA * colmax:
                kp = k
            else:
                jmax = k + int(np.argmax(ab(A[imax, k:imax])))
                rowmax = ab(A[imax, jmax])
                if imax < n - 1:
                    jmax = imax + 1 + int(np.argmax(ab(A[imax + 1:, imax])))
                    rowmax = max(rowmax, ab(A[jmax, imax]))
                aii = abs(A[imax, imax].real) if herm else ab(A[imax, imax])
                if absakk >= _ALPHA * colmax * (colmax / rowmax):
                    kp = k
                elif aii >= _ALPHA * rowmax:
                    kp = imax
                else:
                    kp, kstep = imax, 2
            kk = k + kstep - 1
            if kp != kk:   # interchange rows and columns kk and kp of the trailing matrix
                if kp < n - 1:
                    A[kp + 1:, kk], A[kp + 1:, kp] = A[kp + 1:, kp].copy(), A[kp + 1:, kk].copy()
                for j in range(kk + 1, kp):
                    A[j, kk], A[kp, j] = cj(A[kp, j]), cj(A[j, kk])
                if herm:
                    A[kp, kk] = np.conj(A[kp, kk])
                A[kk, kk], A[kp, kp] = A[kp, kp], A[kk, kk]
                if kstep == 2:
                    A[k + 1, k], A[kp, k] = A[kp, k], A[k + 1, k]
            if kstep == 1:
                if k < n - 1:
                    r1 = 1.0 / (A[k, k].real if herm else A[k, k])
                    c = A[k + 1:, k].copy()
                    A[k + 1:, k + 1:] -= np.tril(r1 * np.outer(c, cj(c)))
                    A[k + 1:, k] = c * r1
                    if herm:
                        A[np.diag_indices(n)] = A.real[np.diag_indices(n)]
            elif k < n - 2:
                if herm:
                    dd = abs(A[k + 1, k])
                    d11, d22 = A[k + 1, k + 1].real / dd, A[k, k].real / dd
                    tt = 1.0 / (d11 * d22 - 1.0)
                    d21 = A[k + 1, k] / dd
                    dd = tt / dd
                else:
                    d21 = A[k + 1, k]
                    d11, d22 = A[k + 1, k + 1] / d21, A[k, k] / d21
                    tt = 1.0 / (d11 * d22 - 1.0)
                    d21 = tt / d21
                for j in range(k + 2, n):
                    if herm:
                        wk = dd * (d11 * A[j, k] - d21 * A[j, k + 1])
                        wkp1 = dd * (d22 * A[j, k + 1] - np.conj(d21) * A[j, k])
                        A[j:, j] -= A[j:, k] * np.conj(wk) + A[j:, k + 1] * np.conj(wkp1)
                        A[j, j] = A[j, j].real
                    else:
                        wk = d21 * (d11 * A[j, k] - A[j, k + 1])
                        wkp1 = d21 * (d22 * A[j, k + 1] - A[j, k])
                        A[j:, j] -= A[j:, k] * wk + A[j:, k + 1] * wkp1
                    A[j, k], A[j, k + 1] = wk, wkp1
        if kstep == 1:
            piv[k] = kp + 1
        else:
            piv[k] = piv[k + 1] = -(kp + 1)
        k += kstep
    return A, piv, info


def ldl_factor_np(a, herm=False):
    """(LD, pivots, info) batched; LD's strict upper triangle is zeroed as torch's is."""
    a = np.asarray(a)
    batch = a.shape[:-2]
    n = a.shape[-1]
    LD = np.zeros_like(a)
    piv = np.zeros(batch + (n,), np.int32)
    info = np.zeros(batch, np.int32)
    for idx in np.ndindex(*batch):
        ld, p, i = _sytf2(a[idx], herm)
        LD[idx], piv[idx], info[idx] = np.tril(ld), p, i
    return LD, piv, info


def ldl_reconstruct(ld, piv, herm=False):
    """The matrix A = L D L^T (L D L^H) that ldl_factor's (LD, pivots) describe: L = P1 L1 P2 L2 ... (LAPACK)."""
    ld = np.asarray(ld)
    out = np.zeros_like(ld)
    n = ld.shape[-1]
    for idx in np.ndindex(*ld.shape[:-2]):
        f, p = ld[idx], np.asarray(piv[idx])
        M = np.eye(n, dtype=f.dtype)
        D = np.zeros((n, n), f.dtype)
        k = 0
        while k < n:
            s = 1 if p[k] > 0 else 2
            kp = abs(int(p[k])) - 1
            Pk = np.eye(n, dtype=f.dtype)
            Pk[[k + s - 1, kp]] = Pk[[kp, k + s - 1]]
            Lk = np.eye(n, dtype=f.dtype)
            Lk[k + s:, k:k + s] = f[k + s:, k:k + s]
            M = M @ Pk @ Lk
            D[k:k + s, k:k + s] = f[k:k + s, k:k + s]
            if s == 2:
                D[k, k + 1] = np.conj(f[k + 1, k]) if herm else f[k + 1, k]
            if herm:
                D[np.arange(k, k + s), np.arange(k, k + s)] = np.real(np.diag(f)[k:k + s])
            k += s
        out[idx] = M @ D @ (adj(M) if herm else M.T)
    return out


# -- registrations ----------------------------------------------------------------------------------------------------
def _chol(ex):
    def body(d, a):
        up = d.attr("upper")
        L, info = cholesky_np(adj(a) if up else a)
        if not ex:
            raise_info(d.op, "chol", info)
        L = adj(L) if up else L
        return (L, info) if ex else L
    return body


def _chol_inv(d, L):
    L = np.triu(L) if d.attr("upper") else np.tril(L)
    L = L - 1j * np.imag(np.diagonal(L, axis1=-2, axis2=-1))[..., None] * np.eye(L.shape[-1]) if np.iscomplexobj(L) else L
    a = adj(L) @ L if d.attr("upper") else L @ adj(L)
    return np.linalg.inv(a)


def _lu(kind):
    def body(d, a):
        lu, piv, info = lu_factor_np(a, d.attr("pivot"))
        if kind == "lu":
            return lu_unpack_np(lu, piv)
        if kind == "plain":
            raise_info(d.op, "lu", info)
            return lu, piv
        return lu, piv, info
    return body


def _ldl(ex):
    def body(d, a):
        ld, piv, info = ldl_factor_np(a, d.attr("hermitian"))
        if not ex:
            raise_info(d.op, "ldl", info)
            return ld, piv
        return ld, piv, info
    return body


register_reference("cholesky", _chol(False))
register_reference("cholesky_ex", _chol(True))
register_reference("cholesky_inverse", _chol_inv)
register_reference("lu_factor", _lu("plain"))
register_reference("lu_factor_ex", _lu("ex"))
register_reference("lu", _lu("lu"))
register_reference("lu_unpack", lambda d, lu, piv: lu_unpack_np(lu, piv))
register_reference("ldl_factor", _ldl(False))
register_reference("ldl_factor_ex", _ldl(True))
