"""NumPy float64 / complex128 bodies of the spectral linear-algebra ops (ops/linalg_spectral.py): numpy.linalg's
LAPACK routines (geqrf/orgqr through ``qr``, gesdd, syevd, geev), batched over the leading dims, then the gauge
baracuda fixes (``gauge_columns``); the backward ops follow torch's formulas (FunctionsManual.cpp's svd_backward,
linalg_eig_backward, linalg_qr_backward) after the pullback through that gauge.
"""
from __future__ import annotations

import numpy as np

from ...ops.broadcast import reduce_dims
from . import register_reference

__all__ = ["gauge_columns", "pivots", "svd_gauged", "eigh_gauged", "eig_gauged", "householder_q",
           "householder_backward", "sum_to"]


def _mh(x):
    return np.conj(np.swapaxes(x, -1, -2))


def pivots(v):
    """The row of each column's largest-magnitude entry (the first such row): the entry the gauge makes real > 0."""
    if v.shape[-2] == 0:
        return np.zeros(v.shape[:-2] + v.shape[-1:], dtype=np.int64)
    return np.argmax(np.abs(v), axis=-2)


def _phase(v, piv):
    """conj(v[piv, j]) / |v[piv, j]| per column (1 where the entry is 0)."""
    if v.shape[-2] == 0:
        return np.ones(v.shape[:-2] + v.shape[-1:], dtype=v.dtype)
    p = np.take_along_axis(v, piv[..., None, :], axis=-2)[..., 0, :]
    a = np.abs(p)
    return np.where(a == 0, 1.0, np.conj(p) / np.where(a == 0, 1.0, a)).astype(v.dtype)


def gauge_columns(v):
    """``v`` with each column scaled by a unit phase (a sign when real) that makes its largest-magnitude entry real
    and positive: singular / eigen vectors are defined up to that factor; baracuda returns this one on every
    backend so results and gradients do not depend on the library's choice."""
    return v * _phase(v, pivots(v))[..., None, :]


def complement(q):
    """An orthonormal basis of the complement of the columns of ``q`` (m x k, orthonormal), as a function of ``q``:
    the last m - k columns of Q of q's complete Householder QR (geqrf + orgqr), gauged.  full_matrices=True returns
    these as the extra columns of U / rows of Vh: any basis is valid (torch's are LAPACK's), so baracuda fixes
    one that every backend computes alike."""
    m = q.shape[-2]
    full = np.linalg.qr(q, mode="complete")[0] if q.shape[-1] else np.broadcast_to(np.eye(m, dtype=q.dtype), q.shape[:-1] + (m,))
    return gauge_columns(full[..., q.shape[-1]:])


def svd_gauged(a, full_matrices):
    """(U, S, Vh): U's k = min(m, n) columns gauged (``gauge_columns``) and the same phases on Vh's rows (A = U S Vh
    holds); full_matrices: the extra columns of U / rows of Vh are ``complement`` of the first k."""
    m, n = a.shape[-2:]
    k = min(m, n)
    if a.size == 0:
        u, s, vh = np.zeros(a.shape[:-2] + (m, k), a.dtype), np.zeros(a.shape[:-2] + (k,)), np.zeros(a.shape[:-2] + (k, n), a.dtype)
    else:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        ph = _phase(u, pivots(u))
        u, vh = u * ph[..., None, :], vh * np.conj(ph)[..., :, None]
    if full_matrices:
        u = np.concatenate([u, complement(u)], axis=-1)
        vh = np.concatenate([vh, _mh(complement(_mh(vh)))], axis=-2)
    return u, s, vh


def _tri(a, uplo):
    """The Hermitian matrix LAPACK reads from the ``uplo`` triangle (the diagonal's real part)."""
    low = np.tril(a, -1) if uplo == "L" else _mh(np.triu(a, 1))
    d = np.real(np.diagonal(a, axis1=-2, axis2=-1))
    return low + _mh(low) + d[..., None] * np.eye(a.shape[-1])


def eigh_gauged(a, uplo):
    if a.shape[-1] == 0:
        return np.zeros(a.shape[:-1]), np.zeros(a.shape, a.dtype)
    w, v = np.linalg.eigh(_tri(a, uplo))
    return w, gauge_columns(v)


def eig_gauged(a):
    n = a.shape[-1]
    if n == 0:
        return np.zeros(a.shape[:-1], np.complex128), np.zeros(a.shape, np.complex128)
    try:
        w, v = np.linalg.eig(a)
    except np.linalg.LinAlgError as e:
        from ...ops.linalg_common import LinAlgError
        raise LinAlgError("eig", f"the algorithm failed to converge ({e})") from None
    return w.astype(np.complex128), gauge_columns(v.astype(np.complex128))


# -- forwards --------------------------------------------------------------------------------------------------
def _qr(d, a):
    mode = d.attr("mode")
    q, r = np.linalg.qr(a, mode="complete" if mode == "complete" else "reduced")
    if mode == "r":
        return np.zeros((0,), a.dtype), r
    return q, r


def _hh_operands(a, tau):
    """A and tau broadcast to their common batch (the forward's broadcast_batch), and that batch."""
    batch = np.broadcast_shapes(a.shape[:-2], tau.shape[:-1])
    return np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(tau, batch + tau.shape[-1:]), batch


def _reflector(a, i, dtype):
    """v_i = (0, .., 0, 1, a[i+1:, i]) (the implicit unit diagonal), batched."""
    v = np.zeros(a.shape[:-2] + a.shape[-2:-1], dtype)
    v[..., i] = 1
    v[..., i + 1:] = a[..., i + 1:, i]
    return v


def _apply_reflector(v, t, x):
    """(I - t v v^H) x for a batch of vectors v, scalars t and matrices x."""
    return x - t[..., None, None] * v[..., :, None] * np.einsum("...m,...mn->...n", np.conj(v), x)[..., None, :]


def householder_q(a, tau):
    """Q = H_1 ... H_k, H_i = I - tau_i v_i v_i^H, v_i = (0.., 1, a[i+1:, i]) (LAPACK's orgqr / ungqr), first n
    columns of the m x m product."""
    m, n = a.shape[-2:]
    a, tau, batch = _hh_operands(a, tau)
    q = np.broadcast_to(np.eye(m, n, dtype=np.result_type(a, tau)), batch + (m, n)).copy()
    for i in reversed(range(tau.shape[-1])):
        q = _apply_reflector(_reflector(a, i, q.dtype), tau[..., i], q)
    return q


def sum_to(x, shape):
    """``x`` summed over the dims broadcasting added to ``shape`` (the forward's broadcast batch)."""
    dims = reduce_dims(tuple(x.shape), tuple(shape))
    return x.sum(axis=dims).reshape(shape) if dims else x


def householder_backward(g, a, tau):
    """(gA, gtau) of Q = L_i H_i R_i (L_i = H_1 .. H_{i-1}, R_i = H_{i+1} .. H_k E) from gQ = g.  H_i's cotangent
    is G_i = L_i^H g R_i^H, so with H_i = I - tau v v^H (conjugate-Wirtinger: dL = Re <g, dQ>):
        gtau_i = -v^H G_i v,     gv_i = -(conj(tau_i) G_i v + tau_i G_i^H v),
    G_i v = P_i (R_i^H v), G_i^H v = R_i (P_i^H v) with P_i = L_i^H g.  A forward sweep stores the P_i
    (P_{i+1} = H_i^H P_i), a reverse sweep runs R_{i-1} = H_i R_i from R_k = E; gA[i+1:, i] = gv_i[i+1:] (the
    diagonal is the implicit 1, the upper part is not read: zero, as torch)."""
    m, n = a.shape[-2:]
    a0, t0 = a, tau
    a, tau, batch = _hh_operands(a, tau)
    dt = np.result_type(a, tau, g)
    g = np.broadcast_to(g, batch + (m, n)).astype(dt)
    k = tau.shape[-1]
    vs = [_reflector(a, i, dt) for i in range(k)]
    ps = [g]
    for i in range(k - 1):
        ps.append(_apply_reflector(vs[i], np.conj(tau[..., i]), ps[-1]))
    ga, gt = np.zeros(batch + (m, n), dt), np.zeros(batch + (k,), dt)
    r = np.broadcast_to(np.eye(m, n, dtype=dt), batch + (m, n)).copy()
    for i in reversed(range(k)):
        v, t, p = vs[i], tau[..., i], ps[i]
        x = np.einsum("...mn,...m->...n", np.conj(r), v)          # R_i^H v
        y = np.einsum("...mn,...m->...n", np.conj(p), v)          # P_i^H v
        gt[..., i] = -np.einsum("...n,...n->...", np.conj(y), x)
        gv = -(np.conj(t)[..., None] * np.einsum("...mn,...n->...m", p, x) +
               t[..., None] * np.einsum("...mn,...n->...m", r, y))
        ga[..., i + 1:, i] = gv[..., i + 1:]
        r = _apply_reflector(v, t, r)
    return sum_to(ga, a0.shape), sum_to(gt, t0.shape)


def _svd(d, a):
    return svd_gauged(a, d.attr("full_matrices"))


def _svdvals(d, a):
    return svd_gauged(a, False)[1]


def _eigh(d, a):
    return eigh_gauged(a, d.attr("UPLO"))


def _eigvalsh(d, a):
    return eigh_gauged(a, d.attr("UPLO"))[0]


def _eig(d, a):
    return eig_gauged(a)


def _eigvals(d, a):
    return eig_gauged(a)[0]


# -- backward ops ----------------------------------------------------------------------------------------------
def gauge_pullback(g, v, s):
    """The cotangent of the raw vectors from that of the gauged ones: v_c = v e^{-i theta}, theta = arg(v[piv]),
    moves theta's part of the loss onto v[piv]: g[piv, j] -= i Im(s_j) / |v[piv, j]|, s_j the loss's derivative
    along the column's phase (diag(V^H gV), plus diag(U^H gU) for an SVD's shared phase); real: nothing."""
    if not np.iscomplexobj(v) or v.shape[-2] == 0:
        return g
    piv = pivots(v)
    vp = np.abs(np.take_along_axis(v, piv[..., None, :], axis=-2))[..., 0, :]
    add = -1j * np.imag(s) / np.where(vp == 0, 1.0, vp)
    g = np.array(g, dtype=np.complex128, copy=True)
    cur = np.take_along_axis(g, piv[..., None, :], axis=-2)
    np.put_along_axis(g, piv[..., None, :], cur + add[..., None, :], axis=-2)
    return g


def _diag(x):
    return np.diagonal(x, axis1=-2, axis2=-1)


def _embed(v):
    return v[..., :, None] * np.eye(v.shape[-1])


def _denom(lam):
    """E[i, j] = lam_j - lam_i, 1 on the diagonal (torch's: the diagonal is overwritten later)."""
    e = lam[..., None, :] - lam[..., :, None]
    return np.where(np.eye(lam.shape[-1], dtype=bool), 1.0, e)


def svd_backward(gu, gs, gvh, u, s, vh, has_u, has_vh):
    """torch's svd_backward on the thin factors (k = min(m, n) columns / rows), after the gauge pullback."""
    m, n = u.shape[-2], vh.shape[-1]
    cplx = np.iscomplexobj(u)
    if cplx and (has_u or has_vh):
        ph = (_diag(_mh(u) @ gu) if has_u else 0) + (_diag(vh @ _mh(gvh)) if has_vh else 0)
        gu, has_u = gauge_pullback(gu if has_u else np.zeros_like(u), u, ph), True
    if not has_u and not has_vh:
        return u @ (gs[..., :, None] * vh)
    skew = lambda x: x - _mh(x)
    uhgu = skew(_mh(u) @ gu) if has_u else None
    vhgv = skew(vh @ _mh(gvh)) if has_vh else None
    e = _denom(s * s)
    if has_u and has_vh:
        ret = (uhgu * s[..., None, :] + s[..., :, None] * vhgv) / e
    elif has_u:
        ret = uhgu * s[..., None, :] / e
    else:
        ret = s[..., :, None] * vhgv / e
    ret = ret * (1 - np.eye(s.shape[-1])) + _embed(gs)
    if cplx and has_u:
        ret = ret + _embed(_diag(uhgu) / (2 * s))
    if m > n and has_u:
        ga = u @ ret
        gusinv = gu / s[..., None, :]
        ga = (ga + gusinv - u @ (_mh(u) @ gusinv)) @ vh
    elif m < n and has_vh:
        ga = ret @ vh
        sinvgvh = gvh / s[..., :, None]
        ga = u @ (ga + sinvgvh - (sinvgvh @ _mh(vh)) @ vh)
    else:
        ga = u @ ret @ vh
    return ga


def eig_backward(gl, gv, lam, v, has_v, hermitian):
    """torch's linalg_eig_backward (eigh: hermitian) after the gauge pullback; gl may be absent (zeros)."""
    if not has_v:
        if hermitian:
            return v @ (gl[..., :, None] * _mh(v))
        return np.linalg.solve(_mh(v), gl[..., :, None] * _mh(v))
    vhgv = _mh(v) @ gv
    gv = gauge_pullback(gv, v, _diag(vhgv))
    vhgv = _mh(v) @ gv
    if hermitian:
        vhgv = 0.5 * (vhgv - _mh(vhgv))
    else:
        vhgv = vhgv - (_mh(v) @ v) * np.real(_diag(vhgv))[..., None, :]
    ret = vhgv / _denom(np.conj(lam))
    ret = ret * (1 - np.eye(lam.shape[-1])) + _embed(gl)
    if hermitian:
        return v @ ret @ _mh(v)
    return np.linalg.solve(_mh(v), ret @ _mh(v))


def qr_backward(gq, gr, q, r, has_q, has_r):
    """torch's linalg_qr_backward (modes reduced, and complete with m <= n)."""
    m, n = q.shape[-2], r.shape[-1]
    if m < n:   # A = [X | Y], R = [U | V]: X = Q U square, Y = Q V
        u, v = r[..., :, :m], r[..., :, m:]
        gv = gr[..., :, m:]
        gy = q @ gv
        gq2 = (gq if has_q else 0) + (q @ v) @ _mh(gv)     # Y = Q V: Q's cotangent through Y
        gx = qr_backward(gq2, gr[..., :, :m], q, u, True, has_r)
        return np.concatenate([gx, gy], axis=-1)
    mm = (r @ _mh(gr) if has_r else 0) - (_mh(gq) @ q if has_q else 0)
    low = np.tril(mm, -1)
    mm = low + _mh(low) + _embed(np.real(_diag(mm)))   # M copied from its lower triangle, a Hermitian matrix
    ga = q @ mm + (gq if has_q else 0)
    return _mh(np.linalg.solve(r, _mh(ga)))            # gA = (gQ + Q copyltu(M)) R^{-H}


def _svd_bw(d, u, s, vh, gu, gs, gvh):
    if d.attr("full_matrices"):
        k = s.shape[-1]
        gu, gvh, u, vh = gu[..., :k], gvh[..., :k, :], u[..., :k], vh[..., :k, :]
    return svd_backward(gu, gs, gvh, u, s, vh, d.attr("has_u"), d.attr("has_vh"))


def _eig_bw(hermitian):
    def run(d, v, lam, gv, gl):
        ga = eig_backward(gl, gv, lam, v, d.attr("has_v"), hermitian)
        return ga if d.outputs[0].dtype.is_complex else np.real(ga)
    return run


def _hh_bw(d, g, a, tau):
    ga, gt = householder_backward(g, a, tau)
    if not d.outputs[0].dtype.is_complex:
        ga, gt = np.real(ga), np.real(gt)
    return ga, gt


def _qr_bw(d, q, r, gq, gr):
    return qr_backward(gq, gr, q, r, d.attr("has_q"), d.attr("has_r"))


register_reference("qr", _qr)
register_reference("householder_product", lambda d, a, tau: householder_q(a, tau))
register_reference("svd", _svd)
register_reference("svdvals", _svdvals)
register_reference("eigh", _eigh)
register_reference("eigvalsh", _eigvalsh)
register_reference("eig", _eig)
register_reference("eigvals", _eigvals)
register_reference("svd_backward", _svd_bw)
register_reference("eigh_backward", _eig_bw(True))
register_reference("eig_backward", _eig_bw(False))
register_reference("qr_backward", _qr_bw)
register_reference("householder_product_backward", _hh_bw)
