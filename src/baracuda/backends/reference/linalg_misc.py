"""NumPy float64 / complex128 bodies of ops/linalg_misc.py: matrix_norm, cond, matrix_rank, pinv, matrix_exp,
matrix_power, vander, cross, vecdot, lstsq and their backward ops, batched over the leading dims.

Independent of the GPU path where it matters: matrix_exp is Higham's Pade [13/13] with scaling and squaring here
(the GPU evaluates a Taylor polynomial: two algorithms that agree to rounding); inverses and solves are LAPACK's
(numpy.linalg.inv / svd) where the GPU uses QR and a doubling triangular inverse.
"""
from __future__ import annotations

import math

import numpy as np

from ..._core.dtypes import DType
from . import register_reference

__all__ = ["expm", "norm_of", "norm_grad", "pinv_of", "pinv_grad", "tolerance"]


def _mh(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _to_end(a, dim):
    return np.moveaxis(a, dim, (-2, -1))


def _from_end(g, dim):
    return np.moveaxis(g, (-2, -1), dim)


def _keep(r, dim, keepdim):
    return np.expand_dims(r, tuple(sorted(dim))) if keepdim else r


# -- matrix_norm -----------------------------------------------------------------------------------------------
def norm_of(a, ord):
    """The matrix norm of each (..., m, n) matrix of ``a`` (torch.linalg.matrix_norm's ords)."""
    if ord == "fro":
        return np.sqrt(np.sum(np.abs(a) ** 2, axis=(-2, -1)))
    if ord in ("nuc", 2.0, -2.0):
        s = np.linalg.svd(a, compute_uv=False) if a.size else np.zeros(a.shape[:-2] + (0,))
        if ord == "nuc":
            return s.sum(-1)
        if s.shape[-1] == 0:
            return np.zeros(a.shape[:-2])
        return s[..., 0] if ord == 2.0 else s[..., -1]
    sums = np.abs(a).sum(-2 if abs(ord) == 1 else -1)      # column sums (1-norm) / row sums (inf-norm)
    if sums.shape[-1] == 0:
        return np.zeros(a.shape[:-2])
    return sums.max(-1) if ord > 0 else sums.min(-1)


def _sgn(a):
    m = np.abs(a)
    return np.where(m == 0, 0, a / np.where(m == 0, 1, m))


def norm_grad(a, out, g, ord):
    """d matrix_norm(a, ord) / da * g (torch's conventions: ties of the max / min share the gradient equally)."""
    g = np.asarray(g)[..., None, None]
    if ord == "fro":
        return g * a / np.where(out == 0, 1, out)[..., None, None] * (out != 0)[..., None, None]
    if ord in ("nuc", 2.0, -2.0):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        if ord == "nuc":
            return g * (u @ vh)
        i = 0 if ord == 2.0 else -1
        return g * (u[..., :, i, None] @ vh[..., i, None, :])
    axis = -2 if abs(ord) == 1 else -1
    sums = np.abs(a).sum(axis, keepdims=True)
    best = sums.max(-1 if axis == -2 else -2, keepdims=True) if ord > 0 else sums.min(-1 if axis == -2 else -2, keepdims=True)
    hit = (sums == best)
    return g * _sgn(a) * hit / hit.sum(axis=(-2, -1), keepdims=True)


def _matrix_norm(d, a):
    dim, keep = d.attr("dim"), d.attr("keepdim")
    return _keep(norm_of(_to_end(a, dim), d.attr("ord")), dim, keep).astype(np.float64)


def _matrix_norm_bw(d, a, out, g):
    dim, keep = d.attr("dim"), d.attr("keepdim")
    if keep:
        out, g = np.squeeze(out, tuple(sorted(dim))), np.squeeze(g, tuple(sorted(dim)))
    return _from_end(norm_grad(_to_end(a, dim), out, g, d.attr("ord")), dim)


# -- cond ------------------------------------------------------------------------------------------------------
def _inv_or_inf(a):
    """inv(a) per matrix; a singular one gives an all-inf inverse (cond is then inf, as torch)."""
    out = np.empty_like(a)
    flat_a, flat_o = a.reshape((-1,) + a.shape[-2:]), out.reshape((-1,) + a.shape[-2:])
    for i in range(flat_a.shape[0]):
        try:
            flat_o[i] = np.linalg.inv(flat_a[i])
        except np.linalg.LinAlgError:
            flat_o[i] = np.inf
    return out


def _cond(d, a):
    p = d.attr("p")
    if p in (None, 2.0, -2.0):
        s = np.linalg.svd(a, compute_uv=False)
        with np.errstate(divide="ignore"):
            return s[..., 0] / s[..., -1] if p != -2.0 else s[..., -1] / s[..., 0]
    inv = _inv_or_inf(a)
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(inv).any((-2, -1)), np.inf, norm_of(a, p) * norm_of(np.where(np.isinf(inv), 0, inv), p))


def _cond_bw(d, a, out, g):
    p = d.attr("p")
    if p in (None, 2.0, -2.0):
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        gs = np.zeros_like(s)
        hi, lo = (0, -1) if p != -2.0 else (-1, 0)
        gs[..., hi] = g / s[..., lo]
        gs[..., lo] = -g * s[..., hi] / s[..., lo] ** 2
        return u @ (gs[..., :, None] * vh)
    inv = np.linalg.inv(a)
    na, ni = norm_of(a, p), norm_of(inv, p)
    g_inv = norm_grad(inv, ni, g * na, p)                      # d/d inv, then d inv = -inv dA inv
    return norm_grad(a, na, g * ni, p) - _mh(inv) @ g_inv @ _mh(inv)


# -- pinv / matrix_rank ----------------------------------------------------------------------------------------
def tolerance(smax, atol, rtol, m, n, eps):
    """torch's cutoff: max(atol, rtol * smax); rtol defaults to eps * max(m, n) when atol is None or 0, else 0."""
    if rtol is None:
        rtol = eps * max(m, n) if not atol else 0.0
    return np.maximum(atol or 0.0, rtol * smax)


def _eps(d):
    """The machine epsilon of the input's precision (f32 for f32 / c64)."""
    return float(np.finfo(np.float32 if d.inputs[0].dtype in (DType.f32, DType.c64) else np.float64).eps)


def _spectrum(a, hermitian):
    """(singular values or |eigenvalues|, and the factors for pinv): SVD, or eigh of the lower triangle."""
    if hermitian:
        low = np.tril(a, -1)
        h = low + _mh(low) + np.real(np.diagonal(a, axis1=-2, axis2=-1))[..., None] * np.eye(a.shape[-1])
        w, v = np.linalg.eigh(h)
        return np.abs(w), (v, w, _mh(v))
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    return s, (u, s, vh)


def pinv_of(a, atol, rtol, hermitian, eps):
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2] + (n, m), a.dtype)
    s, (u, w, vh) = _spectrum(a, hermitian)
    tol = tolerance(s.max(-1, keepdims=True), atol, rtol, m, n, eps)
    inv = np.where(s > tol, 1 / np.where(s > tol, w, 1), 0)
    return _mh(vh) @ (inv[..., :, None] * _mh(u))


def _pinv(d, a):
    return pinv_of(a, d.attr("atol"), d.attr("rtol"), d.attr("hermitian"), _eps(d))


def _matrix_rank(d, a):
    m, n = a.shape[-2:]
    if a.size == 0:
        return np.zeros(a.shape[:-2], np.int64)
    s = _spectrum(a, d.attr("hermitian"))[0]
    tol = tolerance(s.max(-1, keepdims=True), d.attr("atol"), d.attr("rtol"), m, n, _eps(d))
    return (s > tol).sum(-1).astype(np.int64)


def pinv_grad(a, p, g):
    """torch's pinv_backward: the gradient of A -> pinv(A) (constant rank)."""
    m, n = a.shape[-2:]
    ph, gh = _mh(p), _mh(g)
    if m <= n:
        k = gh @ p
        kph = k @ ph
        return -_mh(p @ k) + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a)
    k = p @ gh
    phk = ph @ k
    return -_mh(k @ p) + (gh - a @ k) @ p @ ph + phk - phk @ p @ a


def _pinv_bw(d, a, p, g):
    return pinv_grad(a, p, g)


# -- matrix_exp ------------------------------------------------------------------------------------------------
_PADE13 = (64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800., 129060195264000.,
           10559470521600., 670442572800., 33522128640., 1323241920., 40840800., 960960., 16380., 182., 1.)
_THETA13 = 5.371920351148152     # Higham (2005), table 2.3: the 1-norm bound of the [13/13] approximant in f64


def expm(a):
    """exp of each matrix: Pade [13/13] with scaling and squaring (Higham 2005, algorithm 2.3's last branch)."""
    n = a.shape[-1]
    if a.size == 0:
        return a.copy()
    norm = np.abs(a).sum(-2).max(-1)
    s = int(max(0, math.ceil(math.log2(max(float(norm.max()), 1e-300) / _THETA13))))
    x = a / 2.0 ** s
    b, eye = _PADE13, np.broadcast_to(np.eye(n), a.shape)
    x2 = x @ x
    x4 = x2 @ x2
    x6 = x4 @ x2
    u = x @ (x6 @ (b[13] * x6 + b[11] * x4 + b[9] * x2) + b[7] * x6 + b[5] * x4 + b[3] * x2 + b[1] * eye)
    v = x6 @ (b[12] * x6 + b[10] * x4 + b[8] * x2) + b[6] * x6 + b[4] * x4 + b[2] * x2 + b[0] * eye
    r = np.linalg.solve(v - u, v + u)
    for _ in range(s):
        r = r @ r
    return r


def block_adjoint(a, g):
    """[[A^H, G], [0, A^H]]: f of it holds the gradient of A -> f(A) at G in its upper-right block (Mathias 1996)."""
    n = a.shape[-1]
    big = np.zeros(a.shape[:-2] + (2 * n, 2 * n), np.result_type(a, g))
    big[..., :n, :n] = big[..., n:, n:] = _mh(a)
    big[..., :n, n:] = g
    return big


def _matrix_exp_bw(d, a, g):
    n = a.shape[-1]
    return expm(block_adjoint(a, g))[..., :n, n:]


# -- matrix_power ----------------------------------------------------------------------------------------------
def _inv(op, a):
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        from ...ops.linalg_common import LinAlgError
        raise LinAlgError(op, "the input is not invertible (singular)") from None


def _matrix_power(d, a):
    k = d.attr("n")
    return np.linalg.matrix_power(_inv("matrix_power", a) if k < 0 else a, abs(k))


def power_grad(b, g, k):
    """sum_{j < k} (B^H)^j G (B^H)^(k-1-j): the gradient of B -> B^k at G."""
    bh = _mh(b)
    pw = [np.broadcast_to(np.eye(b.shape[-1]), b.shape)]
    for _ in range(k - 1):
        pw.append(pw[-1] @ bh)
    return sum(pw[j] @ g @ pw[k - 1 - j] for j in range(k)) if k else np.zeros_like(b)


def _matrix_power_bw(d, a, g):
    k = d.attr("n")
    if k >= 0:
        return power_grad(a, g, k)
    inv = _inv("matrix_power_backward", a)
    return -_mh(inv) @ power_grad(inv, g, -k) @ _mh(inv)


# -- vander / cross / vecdot -----------------------------------------------------------------------------------
def _vander(d, x):
    x = np.reshape(x, np.shape(x) or (1,))          # a 0-d x is one point (torch's)
    if x.dtype.kind in "iu":
        x = x.astype(np.int64)                        # torch's cumprod promotion
    return x[..., :, None] ** np.arange(d.attr("N")).astype(x.dtype)


def _vander_bw(d, x, g):
    j = np.arange(1, d.attr("N"))
    x1 = np.reshape(x, np.shape(x) or (1,))
    return (g[..., 1:] * np.conj(j * x1[..., :, None] ** (j - 1))).sum(-1).reshape(np.shape(x))


def _cross(d, x, y):
    x, y = np.broadcast_arrays(x, y)
    return np.cross(x, y, axis=d.attr("dim"))


def _vecdot(d, x, y):
    return (np.conj(x) * y).sum(d.attr("dim"))


# -- lstsq -----------------------------------------------------------------------------------------------------
def _lstsq(d, a, b):
    """(solution, residuals, rank, singular_values) with torch's per-driver outputs (ops/linalg_misc.py): the
    minimum-norm least-squares solution through the SVD, singular values <= rcond * max treated as 0 (gels: A has
    full rank, every one is kept)."""
    m, n = a.shape[-2:]
    a, b = _bcast(a, b)
    outs = d.outputs
    s = np.linalg.svd(a, compute_uv=False) if a.size else np.zeros(a.shape[:-2] + (min(m, n),))
    rcond = d.attr("rcond")
    smax = s.max(-1, keepdims=True) if s.shape[-1] else np.zeros(s.shape[:-1] + (1,))
    cut = (rcond if rcond is not None and rcond > 0 else _eps(d) * max(m, n)) * smax
    rank = (s > cut).sum(-1).astype(np.int64)
    x = _pinv_cut(a, cut if d.attr("driver") != "gels" else 0.0) @ b if a.size else np.zeros(outs[0].shape, a.dtype)
    res = (np.abs(a @ x - b) ** 2).sum(-2) if np.prod(outs[1].shape) else np.zeros(outs[1].shape)
    return (x, res.reshape(outs[1].shape), rank.reshape(outs[2].shape) if np.prod(outs[2].shape) or not outs[2].shape
            else np.zeros(outs[2].shape, np.int64), s.reshape(outs[3].shape) if outs[3].shape != (0,) else np.zeros(0))


def _pinv_cut(a, cut):
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    inv = np.where(s > cut, 1 / np.where(s > cut, s, 1), 0)
    return _mh(vh) @ (inv[..., :, None] * _mh(u))


def _bcast(a, b):
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return np.broadcast_to(a, batch + a.shape[-2:]), np.broadcast_to(b, batch + b.shape[-2:])


def _lstsq_bw(d, a, b, g, gr):
    """Through X = pinv(A) B (torch's): gA = pinv_backward(gX B^H), gB = pinv(A)^H gX; the residuals r = colsum |E|^2,
    E = A X - B, add 2 E diag(gr) X^H to gA and -2 E diag(gr) to gB (A^H E = 0 removes X's own variation)."""
    a, b = _bcast(a, b)
    p = np.linalg.pinv(a)
    ga, gb = pinv_grad(a, p, g @ _mh(b)), _mh(p) @ g
    if np.size(gr):
        x = p @ b
        e = (a @ x - b) * gr[..., None, :]
        ga, gb = ga + 2 * e @ _mh(x), gb - 2 * e
    return ga, gb


register_reference("matrix_norm", _matrix_norm)
register_reference("matrix_norm_backward", _matrix_norm_bw)
register_reference("cond", _cond)
register_reference("cond_backward", _cond_bw)
register_reference("pinv", _pinv)
register_reference("pinv_backward", _pinv_bw)
register_reference("matrix_rank", _matrix_rank)
register_reference("matrix_exp", lambda d, a: expm(a))
register_reference("matrix_exp_backward", _matrix_exp_bw)
register_reference("matrix_power", _matrix_power)
register_reference("matrix_power_backward", _matrix_power_bw)
register_reference("vander", _vander)
register_reference("vander_backward", _vander_bw)
register_reference("cross", _cross)
register_reference("vecdot", _vecdot)
register_reference("lstsq", _lstsq)
register_reference("lstsq_backward", _lstsq_bw)
