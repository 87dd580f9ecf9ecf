"""NumPy float64 / complex128 bodies of the solves, inverses and determinants (ops/linalg_solve.py, linalg_det.py).

Each solve forms the matrix its factor operands describe (L L^H, P L U, the Bunch-Kaufman product; the triangle a
triangular solve reads) and solves with numpy.linalg.solve on the broadcast batch: the oracle states what is solved,
not how.  Singularity is judged by the LU of linalg_factor (info = the first zero pivot, LAPACK's), so the plain forms
raise LinAlgError exactly where the _ex forms return a non-zero info; a singular element's solution is NaN.
"""
from __future__ import annotations

import numpy as np

from ...ops.linalg_solve import is_vector_rhs
from . import register_reference
from .linalg_factor import adj, ldl_reconstruct, lu_factor_np, lu_unpack_np, raise_info


def _solve_bcast(a, b, left=True):
    """X with op A X = B (left) or X A = B, batch dims broadcast; NaN for a singular element."""
    if not left:
        return adj(_solve_bcast(adj(a), adj(b), True))
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    dt = np.result_type(a, b)
    x = np.full(batch + b.shape[-2:], np.nan, dt)
    _, _, info = lu_factor_np(a)
    ok = info == 0
    if np.any(ok):
        x[ok] = np.linalg.solve(a[ok], b[ok])
    return x


def _rhs(a, b, left, vector):
    return (b[..., :, None] if left else b[..., None, :]) if vector else b


def _unrhs(x, left, vector):
    return (x[..., :, 0] if left else x[..., 0, :]) if vector else x


def _solve(ex):
    def body(d, a, b):
        left = d.attr("left")
        vec = is_vector_rhs(d.inputs[0], d.inputs[1])
        x = _unrhs(_solve_bcast(a, _rhs(a, b, left, vec), left), left, vec)
        info = lu_factor_np(a)[2]
        info = np.broadcast_to(info, d.outputs[1].shape if ex else info.shape)
        # the LU factors and pivots the backward reads: lu_factor of A broadcast to X's batch
        lu, piv, _ = lu_factor_np(np.broadcast_to(a, d.outputs[-2].shape))
        if not ex:
            raise_info(d.op, "solve", info)
            return x, lu, piv
        return x, info, lu, piv
    return body


def _triangle(a, upper, unit):
    t = np.triu(a) if upper else np.tril(a)
    if unit:
        n = a.shape[-1]
        t = t - np.diagonal(t, axis1=-2, axis2=-1)[..., None] * np.eye(n) + np.eye(n)
    return t


def _trsm(d, a, b):
    t = _triangle(a, d.attr("upper"), d.attr("unitriangular"))
    return _solve_bcast(t, b, d.attr("left"))


def _chol_solve(d, b, L):
    up = d.attr("upper")
    t = _triangle(L, up, False)
    return _solve_bcast(adj(t) @ t if up else t @ adj(t), b)


def _lu_solve(d, lu, piv, b):
    P, L, U = lu_unpack_np(lu, piv)
    a = P @ L @ U
    return _solve_bcast(adj(a) if d.attr("adjoint") else a, b, d.attr("left"))


def _ldl_solve(d, ld, piv, b):
    return _solve_bcast(ldl_reconstruct(ld, piv, d.attr("hermitian")), b)


def _inv(ex):
    def body(d, a):
        info = lu_factor_np(a)[2]
        x = _solve_bcast(a, np.broadcast_to(np.eye(a.shape[-1]), a.shape))
        if not ex:
            raise_info(d.op, "inv", info)
            return x
        return x, info
    return body


def _det(d, a):
    lu, piv, _ = lu_factor_np(a)
    n = a.shape[-1]
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    flips = np.sum(piv != np.arange(1, n + 1), axis=-1)
    psign = np.where(flips % 2 == 1, -1.0, 1.0)
    if d.op == "det":
        return psign * np.prod(diag, axis=-1)
    absd = np.abs(diag)
    with np.errstate(divide="ignore", invalid="ignore"):
        logabs = np.sum(np.log(absd), axis=-1)
        unit = np.where(absd == 0, 0.0, diag / np.where(absd == 0, 1.0, absd))
    sign = psign * np.prod(unit, axis=-1)
    if d.op == "slogdet":
        return sign, logabs
    with np.errstate(invalid="ignore", divide="ignore"):
        if np.iscomplexobj(a):   # log(det) = log|det| + i arg(det); det == 0: -inf
            return np.where(sign == 0, -np.inf + 0j, logabs + 1j * np.angle(sign))
        return np.where(sign < 0, np.nan, logabs)


for _ex in (False, True):
    register_reference("solve_ex" if _ex else "solve", _solve(_ex))
    register_reference("inv_ex" if _ex else "inv", _inv(_ex))
register_reference("solve_triangular", _trsm)
register_reference("cholesky_solve", _chol_solve)
register_reference("lu_solve", _lu_solve)
register_reference("ldl_solve", _ldl_solve)
for _op in ("det", "slogdet", "logdet"):
    register_reference(_op, _det)
