"""The GPU paths of ops/linalg_misc.py: torch tensor arithmetic (products through cuBLAS by torch.matmul, the rest
elementwise) over the cuSOLVER factorizations of cusolver_spectral.py; no torch.linalg call.

  matrix_norm   'fro' / 1 / -1 / inf / -inf: elementwise + reductions (cuBLAS plan); 'nuc' / 2 / -2: cuSOLVER SVD
  cond          p None / +-2: the singular values; else norm(A) * norm(A^-1) with A^-1 = R^-1 Q^H (geqrf + orgqr,
                ``tri_inv``), inf where R has a zero on its diagonal
  pinv / matrix_rank   SVD (hermitian: eigh), torch's cutoff
  matrix_exp    scaling and squaring of a Taylor polynomial (Paterson-Stockmeyer: ~2 sqrt(q) products): each matrix
                scaled by 2^-s to a 1-norm <= 1, degree q = 18 (f64: the remainder <= e / 19! ~ 2e-17) or 12 (f32:
                e / 13! ~ 4e-10), then s squarings (per matrix: a batch squares max(s) times, each matrix's own s
                selected; one host read of max(s), so not capturable).  torch evaluates a Taylor polynomial too; the
                reference is Pade [13/13] (an independent algorithm)
  matrix_power  binary powering (ceil(log2 n) + popcount(n) products); n < 0 through A^-1 = R^-1 Q^H
  lstsq         'gels': QR (m >= n: X = R^-1 Q^H B; m < n: A^H = Q R, X = Q R^-H B); the other drivers: the SVD
                with the rcond cutoff (the minimum-norm solution gelsy / gelsd / gelss compute)
  vander, cross, vecdot   torch elementwise / one batched product (vecdot: x^H y as (1, n) @ (n, 1) matrices)
Each backward op is the reference's formula on these pieces.

``FACTORS`` holds the factorizations (cuSOLVER's); tests/linalg/test_misc.py swaps in torch's CPU ones to run every
composition on CPU tensors against the reference.
"""
from __future__ import annotations

import math

from ..._core.registry import Impl, register
from ..._core.sku import Backend
from ...ops.linalg_common import LINALG_DTYPES, LinAlgError
from ...ops.linalg_misc import INT_DTYPES
from .spectral_backward import bind_guarded, default_run, gemm_precision, tri_inv

__all__ = ["FACTORS", "RUNS", "expm", "inv"]


def _svd(a):
    from .cusolver_spectral import svd_factors

    return svd_factors(a, True)


def _eigh(a):
    from .cusolver_spectral import eigh_factors

    return eigh_factors(a, "L", True)


def _qr(a):
    from .cusolver_spectral import qr_factors

    return qr_factors(a, "reduced")


FACTORS = {"svd": _svd, "eigh": _eigh, "qr": _qr}   # (U, S, Vh) thin / (L, V) of the lower triangle / (Q, R) reduced


def _mh(x):
    return x.transpose(-1, -2).conj()


def _eye(n, like):
    import torch

    return torch.eye(n, dtype=like.dtype, device=like.device).expand(like.shape[:-2] + (n, n))


def _eps(t) -> float:
    import torch

    return torch.finfo(t.real.dtype if t.is_complex() else t.dtype).eps


def inv(a, op="inv", singular_ok=False):
    """A^-1 = R^-1 Q^H from A's QR; a zero on R's diagonal: LinAlgError (one host read), or inf / nan entries
    when ``singular_ok``."""
    q, r = FACTORS["qr"](a)
    if not singular_ok and bool((r.diagonal(dim1=-2, dim2=-1) == 0).any()):
        raise LinAlgError(op, "the input is not invertible (a zero pivot of its QR factorization)")
    return tri_inv(r) @ _mh(q)


# -- matrix_norm -----------------------------------------------------------------------------------------------
def _to_end(a, dim):
    return a.movedim(dim, (-2, -1))


def norm_of(a, ord):
    if ord == "fro":
        return (a.abs() ** 2).sum((-2, -1)).sqrt()
    if ord in ("nuc", 2.0, -2.0):
        if a.shape[-1] == 0 or a.shape[-2] == 0:
            return a.abs().sum((-2, -1))
        s = FACTORS["svd"](a)[1]
        return s.sum(-1) if ord == "nuc" else (s[..., 0] if ord == 2.0 else s[..., -1])
    sums = a.abs().sum(-2 if abs(ord) == 1 else -1)
    if sums.shape[-1] == 0:
        return sums.sum(-1)
    return sums.amax(-1) if ord > 0 else sums.amin(-1)


def _sgn(a):
    import torch

    m = a.abs()
    return torch.where(m == 0, torch.zeros_like(a), a / torch.where(m == 0, torch.ones_like(m), m))


def norm_grad(a, out, g, ord):
    import torch

    g = g[..., None, None]
    if ord == "fro":
        o = out[..., None, None]
        return torch.where(o == 0, torch.zeros_like(a), g * a / torch.where(o == 0, torch.ones_like(o), o))
    if ord in ("nuc", 2.0, -2.0):
        u, s, vh = FACTORS["svd"](a)
        if ord == "nuc":
            return g * (u @ vh)
        i = 0 if ord == 2.0 else -1
        return g * (u[..., :, i, None] @ vh[..., i, None, :])
    axis = -2 if abs(ord) == 1 else -1
    sums = a.abs().sum(axis, keepdim=True)
    other = -1 if axis == -2 else -2
    best = sums.amax(other, keepdim=True) if ord > 0 else sums.amin(other, keepdim=True)
    hit = (sums == best).to(a.real.dtype if a.is_complex() else a.dtype)
    return g * _sgn(a) * hit / hit.sum((-2, -1), keepdim=True)


def _run_matrix_norm(desc, inputs, outputs, ws=None):
    dim, keep = desc.attr("dim"), desc.attr("keepdim")
    r = norm_of(_to_end(inputs[0], dim), desc.attr("ord"))
    outputs[0].copy_(r.reshape(outputs[0].shape) if keep else r)


def _run_matrix_norm_bw(desc, inputs, outputs, ws=None):
    a, out, g = inputs
    dim, keep = desc.attr("dim"), desc.attr("keepdim")
    if keep:
        for d in sorted(dim, reverse=True):
            out, g = out.squeeze(d), g.squeeze(d)
    outputs[0].copy_(norm_grad(_to_end(a, dim), out, g, desc.attr("ord")).movedim((-2, -1), dim))


# -- cond ------------------------------------------------------------------------------------------------------
def _run_cond(desc, inputs, outputs, ws=None):
    import torch

    a, p = inputs[0], desc.attr("p")
    if p in (None, 2.0, -2.0):
        s = FACTORS["svd"](a)[1]
        r = s[..., 0] / s[..., -1] if p != -2.0 else s[..., -1] / s[..., 0]
    else:
        ai = inv(a, "cond", singular_ok=True)
        ni = norm_of(torch.nan_to_num(ai, nan=0.0, posinf=0.0, neginf=0.0), p)
        r = torch.where(torch.isfinite(ai).all(-1).all(-1), norm_of(a, p) * ni, torch.full_like(ni, math.inf))
    outputs[0].copy_(r)


def _run_cond_bw(desc, inputs, outputs, ws=None):
    import torch

    a, out, g = inputs
    p = desc.attr("p")
    if p in (None, 2.0, -2.0):
        u, s, vh = FACTORS["svd"](a)
        hi, lo = (0, -1) if p != -2.0 else (-1, 0)
        gs = torch.zeros_like(s)
        gs[..., hi] = g / s[..., lo]
        gs[..., lo] = -g * s[..., hi] / s[..., lo] ** 2
        outputs[0].copy_(u @ (gs[..., :, None] * vh))
        return
    ai = inv(a, "cond_backward")
    na, ni = norm_of(a, p), norm_of(ai, p)
    gi = norm_grad(ai, ni, g * na, p)
    outputs[0].copy_(norm_grad(a, na, g * ni, p) - _mh(ai) @ gi @ _mh(ai))


# -- pinv / matrix_rank ----------------------------------------------------------------------------------------
def _cutoff(smax, atol, rtol, m, n, eps):
    if rtol is None:
        rtol = eps * max(m, n) if not atol else 0.0
    return (rtol * smax).clamp(min=atol or 0.0)


def _spectrum(a, hermitian):
    """(|values|, (left, values, right)) with A = left diag(values) right."""
    if hermitian:
        w, v = FACTORS["eigh"](a)
        return w.abs(), (v, w, _mh(v))
    u, s, vh = FACTORS["svd"](a)
    return s, (u, s, vh)


def pinv_of(a, atol=None, rtol=None, hermitian=False):
    import torch

    m, n = a.shape[-2:]
    if a.numel() == 0:
        return torch.zeros(a.shape[:-2] + (n, m), dtype=a.dtype, device=a.device)
    s, (u, w, vh) = _spectrum(a, hermitian)
    tol = _cutoff(s.amax(-1, keepdim=True), atol, rtol, m, n, _eps(a))
    keep = s > tol
    winv = torch.where(keep, 1 / torch.where(keep, w, torch.ones_like(w)), torch.zeros_like(w))
    return _mh(vh) @ (winv[..., :, None].to(a.dtype) * _mh(u))


def _tol_attrs(desc):
    return desc.attr("atol"), desc.attr("rtol"), desc.attr("hermitian")


def _run_pinv(desc, inputs, outputs, ws=None):
    outputs[0].copy_(pinv_of(inputs[0], *_tol_attrs(desc)))


def _run_matrix_rank(desc, inputs, outputs, ws=None):
    a = inputs[0]
    m, n = a.shape[-2:]
    if a.numel() == 0:
        outputs[0].zero_()
        return
    atol, rtol, herm = _tol_attrs(desc)
    s = _spectrum(a, herm)[0]
    outputs[0].copy_((s > _cutoff(s.amax(-1, keepdim=True), atol, rtol, m, n, _eps(a))).sum(-1))


def pinv_grad(a, p, g):
    m, n = a.shape[-2:]
    ph, gh = _mh(p), _mh(g)
    if m <= n:
        k = gh @ p
        kph = k @ ph
        return -_mh(p @ k) + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a)
    k = p @ gh
    phk = ph @ k
    return -_mh(k @ p) + (gh - a @ k) @ p @ ph + phk - phk @ p @ a


def _run_pinv_bw(desc, inputs, outputs, ws=None):
    outputs[0].copy_(pinv_grad(*inputs))


# -- matrix_exp ------------------------------------------------------------------------------------------------
def _taylor(x, q):
    """sum_{k <= q} x^k / k! by Paterson-Stockmeyer: powers x^0..x^p (p = ceil(sqrt(q + 1))), Horner in x^p."""
    p = max(1, math.ceil(math.sqrt(q + 1)))
    pw = [_eye(x.shape[-1], x), x]
    for _ in range(p - 1):
        pw.append(pw[-1] @ x)
    out = None
    for j in reversed(range((q + p) // p)):
        block = sum(pw[i] / math.factorial(j * p + i) for i in range(p) if j * p + i <= q)
        out = block if out is None else out @ pw[p] + block
    return out


def expm(a):
    import torch

    if a.numel() == 0:
        return a.clone()
    norm = a.abs().sum(-2).amax(-1)                                     # the 1-norm per matrix
    s = torch.clamp(torch.ceil(torch.log2(torch.clamp(norm, min=1e-300))), min=0)
    s = torch.where(torch.isfinite(s), s, torch.zeros_like(s))
    steps = int(s.max().item())
    x = a / torch.exp2(s)[..., None, None].to(a.dtype)
    r = _taylor(x, 18 if a.dtype in (torch.float64, torch.complex128) else 12)
    for k in range(steps):
        r = torch.where((s > k)[..., None, None], r @ r, r)
    return r


def _run_matrix_exp(desc, inputs, outputs, ws=None):
    outputs[0].copy_(expm(inputs[0]))


def _run_matrix_exp_bw(desc, inputs, outputs, ws=None):
    import torch

    a, g = inputs
    n = a.shape[-1]
    big = torch.zeros(a.shape[:-2] + (2 * n, 2 * n), dtype=a.dtype, device=a.device)
    big[..., :n, :n] = big[..., n:, n:] = _mh(a)
    big[..., :n, n:] = g
    outputs[0].copy_(expm(big)[..., :n, n:])


# -- matrix_power ----------------------------------------------------------------------------------------------
def mpow(a, k, op="matrix_power"):
    if k == 0:
        return _eye(a.shape[-1], a).clone()
    if k < 0:
        a, k = inv(a, op), -k
    out, base = None, a
    while k:
        if k & 1:
            out = base if out is None else out @ base
        k >>= 1
        if k:
            base = base @ base
    return out


def _power_grad(b, g, k):
    import torch

    if k == 0:
        return torch.zeros_like(b)
    bh = _mh(b)
    pw = [_eye(b.shape[-1], b)]
    for _ in range(k - 1):
        pw.append(pw[-1] @ bh)
    return sum(pw[j] @ g @ pw[k - 1 - j] for j in range(k))


def _run_matrix_power(desc, inputs, outputs, ws=None):
    outputs[0].copy_(mpow(inputs[0], desc.attr("n")))


def _run_matrix_power_bw(desc, inputs, outputs, ws=None):
    a, g = inputs
    k = desc.attr("n")
    if k >= 0:
        outputs[0].copy_(_power_grad(a, g, k))
        return
    ai = inv(a, "matrix_power_backward")
    outputs[0].copy_(-_mh(ai) @ _power_grad(ai, g, -k) @ _mh(ai))


# -- vander / cross / vecdot -----------------------------------------------------------------------------------
def _run_vander(desc, inputs, outputs, ws=None):
    import torch

    x, n = inputs[0], desc.attr("N")
    x = x.reshape(tuple(x.shape) or (1,))        # a 0-d x is one point (torch's)
    out = outputs[0]
    if out.numel():
        out[..., 0] = 1
        if n > 1:
            out[..., 1:] = torch.cumprod(x[..., :, None].expand(x.shape + (n - 1,)), -1)


def _run_vander_bw(desc, inputs, outputs, ws=None):
    import torch

    x0, g = inputs
    x = x0.reshape(tuple(x0.shape) or (1,))
    n = desc.attr("N")
    if n < 2 or x.numel() == 0:
        outputs[0].zero_()
        return
    j = torch.arange(1, n, dtype=x.real.dtype if x.is_complex() else x.dtype, device=x.device)
    pw = torch.ones(x.shape + (1,), dtype=x.dtype, device=x.device)
    if n > 2:
        pw = torch.cat([pw, torch.cumprod(x[..., :, None].expand(x.shape + (n - 2,)), -1)], -1)
    outputs[0].copy_((g[..., 1:] * (j * pw).conj()).sum(-1).reshape(x0.shape))


def _run_cross(desc, inputs, outputs, ws=None):
    x, y = inputs
    d = desc.attr("dim")
    shape = tuple(outputs[0].shape)
    x, y = x.expand(shape), y.expand(shape)
    c = [x.select(d, i) for i in range(3)], [y.select(d, i) for i in range(3)]
    (x0, x1, x2), (y0, y1, y2) = c
    out = outputs[0]
    out.select(d, 0).copy_(x1 * y2 - x2 * y1)
    out.select(d, 1).copy_(x2 * y0 - x0 * y2)
    out.select(d, 2).copy_(x0 * y1 - x1 * y0)


def _run_vecdot(desc, inputs, outputs, ws=None):
    import torch

    x, y = inputs
    d = desc.attr("dim")
    shape = torch.broadcast_shapes(x.shape, y.shape)
    xm = x.expand(shape).movedim(d, -1)[..., None, :].conj()
    ym = y.expand(shape).movedim(d, -1)[..., :, None]
    outputs[0].copy_((xm @ ym)[..., 0, 0])


# -- lstsq -----------------------------------------------------------------------------------------------------
def _bcast(a, b):
    import torch

    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    return a.expand(batch + a.shape[-2:]), b.expand(batch + b.shape[-2:])


def _run_lstsq(desc, inputs, outputs, ws=None):
    import torch

    a, b = _bcast(*inputs)
    m, n = a.shape[-2:]
    driver, rcond = desc.attr("driver"), desc.attr("rcond")
    x_out, res_out, rank_out, sv_out = outputs
    if a.numel() == 0 or b.numel() == 0:
        for o in outputs:
            o.zero_()
        return
    if driver == "gels":
        if m >= n:
            q, r = FACTORS["qr"](a)
            x = tri_inv(r) @ (_mh(q) @ b)
        else:
            q, r = FACTORS["qr"](_mh(a))
            x = q @ (_mh(tri_inv(r)) @ b)
    else:
        u, s, vh = FACTORS["svd"](a)
        cut = (rcond if rcond is not None and rcond > 0 else _eps(a) * max(m, n)) * s.amax(-1, keepdim=True)
        keep = s > cut
        sinv = torch.where(keep, 1 / torch.where(keep, s, torch.ones_like(s)), torch.zeros_like(s))
        x = _mh(vh) @ (sinv[..., :, None].to(a.dtype) * (_mh(u) @ b))
        if rank_out.numel():
            rank_out.copy_(keep.sum(-1).reshape(rank_out.shape))
        if sv_out.numel():
            sv_out.copy_(s)
    x_out.copy_(x)
    if res_out.numel():
        res_out.copy_(((a @ x - b).abs() ** 2).sum(-2))


def _run_lstsq_bw(desc, inputs, outputs, ws=None):
    a, b, g, gr = inputs
    p = pinv_of(a)
    ga, gb = pinv_grad(a, p, g @ _mh(b)), _mh(p) @ g
    if gr.numel():
        x = p @ b
        e = (a @ x - b) * gr[..., None, :]
        ga, gb = ga + 2 * e @ _mh(x), gb - 2 * e
    outputs[0].copy_(ga)
    outputs[1].copy_(gb)


# -- registration ----------------------------------------------------------------------------------------------
RUNS = {"matrix_norm": _run_matrix_norm, "matrix_norm_backward": _run_matrix_norm_bw, "cond": _run_cond,
        "cond_backward": _run_cond_bw, "pinv": _run_pinv, "pinv_backward": _run_pinv_bw,
        "matrix_rank": _run_matrix_rank, "matrix_exp": _run_matrix_exp, "matrix_exp_backward": _run_matrix_exp_bw,
        "matrix_power": _run_matrix_power, "matrix_power_backward": _run_matrix_power_bw, "vander": _run_vander,
        "vander_backward": _run_vander_bw, "cross": _run_cross, "vecdot": _run_vecdot, "lstsq": _run_lstsq,
        "lstsq_backward": _run_lstsq_bw}


def _solver_use(desc) -> str | None:
    """The cuSOLVER factorization a descriptor needs (None: products and elementwise only)."""
    op = desc.op.replace("_backward", "")
    if op == "matrix_norm":
        return "gesvd" if desc.attr("ord") in ("nuc", 2.0, -2.0) else None
    if op == "matrix_power":
        return "geqrf+orgqr" if desc.attr("n") < 0 else None
    if op in ("pinv", "matrix_rank"):
        return "syevd" if desc.attr("hermitian") else "gesvd"
    if op == "cond":
        return "gesvd" if desc.attr("p") in (None, 2.0, -2.0) else "geqrf+orgqr"
    if op == "lstsq":
        return "geqrf+orgqr" if desc.attr("driver") == "gels" and desc.op == "lstsq" else "gesvd"
    return None


def _route(desc, pref=None) -> str:
    use = _solver_use(desc)
    core = {"cross": "torch elementwise", "vander": "torch cumprod", "vecdot": "torch.matmul->cublas(batched dot)"}
    r = core.get(desc.op, "torch.matmul->cublas+torch elementwise")
    if desc.op.startswith("matrix_exp"):
        r = "taylor(paterson-stockmeyer)+squaring: torch.matmul->cublas"
    if use:
        r = f"cusolver:{use}+" + r + ("+tri_inv(doubling)" if "geqrf" in use else "")
    return r


def _cublas_supports(desc):
    use = _solver_use(desc)
    return None if use is None else f"needs a cuSOLVER factorization ({use}): the cuSOLVER plan runs it"


_ELEMENTWISE = ("vander", "vander_backward", "cross", "vecdot")   # no factorization, no host read: capturable

# ops some of whose descriptors need no factorization (the cuBLAS plan); the others always factor (pinv, rank, cond,
# lstsq: cuSOLVER only, so no backend is registered that refuses every problem of its op)
_SOMETIMES_PLAIN = ("matrix_norm", "matrix_power")


def _backends_of(op: str) -> tuple:
    if op in _ELEMENTWISE or op.startswith("matrix_exp"):
        return (Backend.CUBLAS,)
    if op.replace("_backward", "") in _SOMETIMES_PLAIN:
        return (Backend.CUBLAS, Backend.CUSOLVER)
    return (Backend.CUSOLVER,)


for _op, _run in RUNS.items():
    for _backend in _backends_of(_op):
        register(Impl(op=_op, backend=_backend, run=default_run(bind_guarded(_run)), bind=bind_guarded(_run),
                      precision=gemm_precision, devices=frozenset({"cuda"}),
                      dtypes=frozenset(LINALG_DTYPES + (INT_DTYPES if _op in ("cross", "vander") else ())),
                      supports=_cublas_supports if _backend == Backend.CUBLAS else None,
                      priority=20.0 if _backend == Backend.CUBLAS else 19.0, route=_route, array_api="torch",
                      capturable=_op in _ELEMENTWISE))
