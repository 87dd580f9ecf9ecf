"""The backward ops of the spectral decompositions (svd_backward, eigh_backward, eig_backward, qr_backward,
householder_product_backward) on the GPU, as torch tensor arithmetic: products through cuBLAS (torch.matmul), the
rest elementwise; no torch.linalg.

The formulas are the reference's (backends/reference/linalg_spectral.py: torch's FunctionsManual.cpp after the
pullback through baracuda's gauge), written once here for torch tensors of any device, so tests run them on CPU
tensors against the NumPy reference.  The two solves the formulas contain are restructured:
  qr_backward   gA = (gQ + Q copyltu(M)) R^{-H}: R is triangular, its inverse by ``tri_inv`` (blocked products)
  eig_backward  gA = V^{-H} X: V^H = Q R by cuSOLVER's geqrf + orgqr (cusolver_spectral.qr_factors), then
                V^{-H} X = R^{-1} (Q^H X) -- so eig_backward is a cuSOLVER plan; the others are cuBLAS plans.
householder_product_backward is not the reference's sequential sweep over the k reflectors but the compact WY
form differentiated in one pass of batched products (``householder_backward``), its one inverse that of a unit
upper triangular k x k matrix by ``tri_inv``.

``tri_inv`` inverts a batch of triangular matrices by recursive doubling: the inverse of [[A, B], [0, D]] is
[[A^-1, -A^-1 B D^-1], [0, D^-1]]; starting from the 1 x 1 diagonal blocks (1 / r_ii), each level joins all pairs
of diagonal blocks of size b into blocks of size 2b with two batched b x b products (log2 n levels, ~n^3 / 3 flops
in GEMMs for the last levels, no sequential substitution).  The order n is padded to a power of two with an
identity block (at most 2x the work of the last level).  Forward error: that of the triangular inverse, ~cond(R)
eps (Higham, ASNA 2nd ed. sec. 14.2: the recursive method's bound is the one of the column-oriented methods).
"""
from __future__ import annotations

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.broadcast import reduce_dims
from ...ops.linalg_common import LINALG_DTYPES
from .cublas import MathMode

__all__ = ["tri_inv", "svd_backward", "eig_backward", "qr_backward", "householder_backward", "qr_solver", "bind_guarded",
           "default_run", "gemm_precision"]


def _mh(x):
    return x.transpose(-1, -2).conj()


def _diag(x):
    return x.diagonal(dim1=-2, dim2=-1)


def _diag_mm(a, b):
    """diag(a @ b) without the product: sum_i a[k, i] b[i, k] (O(n^2) instead of a GEMM of O(n^3))."""
    return (a * b.transpose(-1, -2)).sum(-1)


def _embed(v):
    import torch

    return torch.diag_embed(v)


def _offdiag(x):
    """x with its diagonal zeroed (a copy)."""
    x = x.clone()
    _diag(x).zero_()
    return x


def _denom(lam):
    """E[i, j] = lam_j - lam_i, 1 on the diagonal (overwritten later, as torch)."""
    e = lam[..., None, :] - lam[..., :, None]
    _diag(e).fill_(1)
    return e


def tri_inv(r, upper: bool = True):
    """The inverse of each triangular matrix of ``r`` (..., n, n) (read from its ``upper`` / lower triangle),
    by recursive doubling with batched products (module doc).  A zero on the diagonal gives inf / nan, as a
    triangular solve does."""
    import torch

    if not upper:
        return tri_inv(r.transpose(-1, -2), True).transpose(-1, -2)
    n = r.shape[-1]
    batch = r.shape[:-2]
    size = 1
    while size < n:
        size *= 2
    t = torch.zeros(batch + (size, size), dtype=r.dtype, device=r.device)
    t[..., :n, :n] = r.triu()
    if size > n:
        _diag(t)[..., n:] = 1
    blocks = (1 / _diag(t))[..., :, None, None]                 # (..., size, 1, 1): the inverted 1 x 1 blocks
    b = 1
    while b < size:
        j = size // (2 * b)
        # the (b x b) off-diagonal block B of each diagonal block of size 2b: rows [2b i, 2b i + b), cols + b
        tb = t.reshape(batch + (j, 2 * b, j, 2 * b)).diagonal(dim1=-4, dim2=-2)   # (..., 2b, 2b, j)
        off = tb[..., :b, b:, :].movedim(-1, -3)                                  # (..., j, b, b)
        a_inv, d_inv = blocks[..., 0::2, :, :], blocks[..., 1::2, :, :]
        upper_right = -(a_inv @ off @ d_inv)
        top = torch.cat([a_inv, upper_right], -1)
        bottom = torch.cat([torch.zeros_like(d_inv), d_inv], -1)
        blocks = torch.cat([top, bottom], -2)
        b *= 2
    return blocks[..., 0, :n, :n]


def qr_solver(qr):
    """``solve_h(V, X) = V^{-H} X`` from a QR factorization ``qr(A) -> (Q, R)`` (reduced mode) of V^H:
    V^H = Q R, so V^{-H} X = R^{-1} Q^H X."""
    def solve_h(v, x):
        q, r = qr(_mh(v))
        return tri_inv(r) @ (_mh(q) @ x)
    return solve_h


def _pullback(g, v, s):
    """The reference's gauge_pullback on torch tensors: g[piv, j] -= i Im(s_j) / |v[piv, j]| (complex only)."""
    import torch

    if not v.is_complex() or v.shape[-2] == 0:
        return g
    av = v.abs()
    piv = av.argmax(dim=-2, keepdim=True)          # the first largest entry, as the forward's gauge
    vp = torch.gather(av, -2, piv)
    add = torch.complex(torch.zeros_like(vp), -s.imag[..., None, :] / torch.where(vp == 0, torch.ones_like(vp), vp))
    return g.clone().scatter_add_(-2, piv, add.to(g.dtype))


def svd_backward(gu, gs, gvh, u, s, vh, has_u, has_vh):
    """torch's svd_backward on the thin factors after the gauge pullback (the reference's, line for line)."""
    import torch

    m, n = u.shape[-2], vh.shape[-1]
    cplx = u.is_complex()
    if cplx and (has_u or has_vh):
        ph = (_diag_mm(_mh(u), gu) if has_u else 0) + (_diag_mm(vh, _mh(gvh)) if has_vh else 0)
        gu, has_u = _pullback(gu if has_u else torch.zeros_like(u), u, ph), True
    if not has_u and not has_vh:
        return u @ (gs[..., :, None] * vh)
    skew = lambda x: x - _mh(x)   # noqa: E731
    uhgu = skew(_mh(u) @ gu) if has_u else None
    vhgv = skew(vh @ _mh(gvh)) if has_vh else None
    e = _denom(s * s)
    if has_u and has_vh:
        ret = (uhgu * s[..., None, :] + s[..., :, None] * vhgv) / e
    elif has_u:
        ret = uhgu * s[..., None, :] / e
    else:
        ret = s[..., :, None] * vhgv / e
    ret = _offdiag(ret) + _embed(gs.to(ret.dtype))
    if cplx and has_u:
        ret = ret + _embed(_diag(uhgu) / (2 * s))
    if m > n and has_u:
        gusinv = gu / s[..., None, :]
        return (u @ ret + gusinv - u @ (_mh(u) @ gusinv)) @ vh
    if m < n and has_vh:
        sinvgvh = gvh / s[..., :, None]
        return u @ (ret @ vh + sinvgvh - (sinvgvh @ _mh(vh)) @ vh)
    return u @ ret @ vh


def eig_backward(gl, gv, lam, v, has_v, hermitian, solve_h=None):
    """torch's linalg_eig_backward (eigh: hermitian) after the gauge pullback; ``solve_h(V, X) = V^{-H} X`` for
    the general case (``qr_solver``)."""
    if not has_v:
        if hermitian:
            return v @ (gl[..., :, None] * _mh(v))
        return solve_h(v, gl[..., :, None] * _mh(v))
    if v.is_complex():   # (a real V has no gauge: no pullback, and no product for its diagonal)
        gv = _pullback(gv, v, _diag_mm(_mh(v), gv))
    vhgv = _mh(v) @ gv
    if hermitian:
        vhgv = 0.5 * (vhgv - _mh(vhgv))
    else:
        vhgv = vhgv - (_mh(v) @ v) * _diag(vhgv).real[..., None, :]
    ret = _offdiag(vhgv / _denom(lam.conj())) + _embed(gl.to(vhgv.dtype))
    if hermitian:
        return v @ ret @ _mh(v)
    return solve_h(v, ret @ _mh(v))


def qr_backward(gq, gr, q, r, has_q, has_r):
    """torch's linalg_qr_backward (reduced mode; wide A through X = Q U, Y = Q V), R^{-H} by ``tri_inv``."""
    import torch

    m, n = q.shape[-2], r.shape[-1]
    if m < n:
        u, v = r[..., :, :m], r[..., :, m:]
        gv = gr[..., :, m:]
        gq2 = (gq if has_q else 0) + (q @ v) @ _mh(gv)
        gx = qr_backward(gq2, gr[..., :, :m], q, u, True, has_r)
        return torch.cat([gx, q @ gv], -1)
    mm = (r @ _mh(gr) if has_r else 0) - (_mh(gq) @ q if has_q else 0)
    low = mm.tril(-1)
    mm = low + _mh(low) + _embed(_diag(mm).real.to(low.dtype))
    ga = q @ mm + (gq if has_q else 0)
    return ga @ _mh(tri_inv(r))


def householder_backward(g, a, tau):
    """(gA, gtau) of Q = H_1 ... H_k E (E: the first n columns of I) from gQ = ``g``, through the compact WY form
    H_1 ... H_k = I - V T V^H: V (m, k) the reflectors (unit diagonal, A's strictly lower part), and
    T = M^{-1} D with D = diag(tau), M = I + D striu(V^H V) unit upper triangular (T^{-1} = D^{-1} + striu(V^H V),
    Joffrain et al. 2006, written without dividing by tau so tau_i = 0 is fine).  So Q = E - V Z, Z = M^{-1} D W,
    W = V^H E, and the chain rule back through Z, M, D, W, N = striu(V^H V) (conjugate-Wirtinger cotangents):
        gV = -g Z^H,  gZ = -V^H g,  gY = M^{-H} gZ (Y = D W),  gM = -gY Z^H,
        gtau = rowsum(gY conj(W)) + rowsum(gM conj(N)),  gW = conj(D) gY,  gN = conj(D) gM,
        gV[:n] += gW^H,  gV += V (P + P^H) with P = striu(gN);
    gA = the strictly lower part of gV (A's first k columns).  Broadcast batch dims are summed back."""
    import torch

    m, n = a.shape[-2:]
    k = tau.shape[-1]
    batch = torch.broadcast_shapes(a.shape[:-2], tau.shape[:-1], g.shape[:-2])
    ab, tb = a.expand(batch + (m, n)), tau.expand(batch + (k,))
    eye = torch.eye(m, k, dtype=a.dtype, device=a.device)
    v = ab[..., :, :k].tril(-1) + eye
    nn = (_mh(v) @ v).triu(1)
    mm = tb[..., :, None] * nn + torch.eye(k, dtype=a.dtype, device=a.device)
    minv = tri_inv(mm)
    w = _mh(v[..., :n, :])
    z = minv @ (tb[..., :, None] * w)
    gv = -(g @ _mh(z))
    gy = _mh(minv) @ -(_mh(v) @ g)
    gm = -(gy @ _mh(z))
    gt = (gy * w.conj()).sum(-1) + (gm * nn.conj()).sum(-1)
    tc = tb.conj()[..., :, None]
    gv[..., :n, :] += _mh(tc * gy)
    p = (tc * gm).triu(1)
    gv = gv + v @ (p + _mh(p))
    ga = torch.zeros(batch + (m, n), dtype=a.dtype, device=a.device)
    ga[..., :, :k] = gv.tril(-1)
    return _sum_to(ga, a.shape), _sum_to(gt, tau.shape)


def _sum_to(x, shape):
    """``x`` summed over the dims broadcasting added to ``shape`` (the forward's broadcast batch)."""
    dims = reduce_dims(tuple(x.shape), tuple(shape))
    return x.sum(dim=dims).reshape(shape) if dims else x


# -- the ops' runs (torch tensors of any device; registered for CUDA) ------------------------------------------
def run_svd_bw(desc, inputs, outputs, ws=None):
    u, s, vh, gu, gs, gvh = inputs
    if desc.attr("full_matrices"):
        k = s.shape[-1]
        gu, gvh, u, vh = gu[..., :k], gvh[..., :k, :], u[..., :k], vh[..., :k, :]
    outputs[0].copy_(svd_backward(gu, gs, gvh, u, s, vh, desc.attr("has_u"), desc.attr("has_vh")))


def eig_run(hermitian, qr=None):
    def run(desc, inputs, outputs, ws=None):
        v, lam, gv, gl = inputs
        ga = eig_backward(gl, gv, lam, v, desc.attr("has_v"), hermitian, None if qr is None else qr_solver(qr))
        outputs[0].copy_(ga if outputs[0].is_complex() else ga.real)
    return run


def run_qr_bw(desc, inputs, outputs, ws=None):
    q, r, gq, gr = inputs
    outputs[0].copy_(qr_backward(gq, gr, q, r, desc.attr("has_q"), desc.attr("has_r")))


def run_hh_bw(desc, inputs, outputs, ws=None):
    g, a, tau = inputs
    ga, gt = householder_backward(g, a, tau)
    outputs[0].copy_(ga)
    outputs[1].copy_(gt)


def _cusolver_qr(a):
    from .cusolver_spectral import qr_factors

    return qr_factors(a, "reduced")


def gemm_precision(desc, pref=None) -> PrecisionGuarantee:
    f64 = desc.dtype in (DType.f64, DType.c128)
    tf32 = not f64 and pref is not None and pref.allow_reduced_precision
    math = MathPrecision.F64 if f64 else (MathPrecision.TF32 if tf32 else MathPrecision.F32)
    return PrecisionGuarantee(math, DType.f64 if f64 else DType.f32, bit_stable=False, deterministic=True)


def bind_guarded(run):
    """The bound run under torch's cuBLAS TF32 flag of the preference (f32 / c64 GEMMs: true f32 unless allowed)."""
    def bind(desc, pref=None):
        allow = bool(pref is not None and pref.allow_reduced_precision)
        flag = DType.f32 if desc.dtype in (DType.f32, DType.c64) else desc.dtype

        def bound(d, inputs, outputs, ws):
            with MathMode(flag, allow):
                run(d, inputs, outputs, ws)
        return bound
    return bind


def default_run(bind):
    """Impl.run for callers that bypass Plan (no preference): the strict precision."""
    def run(desc, inputs, outputs, ws=None):
        bind(desc, None)(desc, inputs, outputs, ws)
    return run


def _route(desc, pref=None) -> str:
    op = desc.op
    gemm = "torch.matmul->cublas"
    if op in ("qr_backward", "householder_product_backward"):
        return f"{gemm}+tri_inv(doubling, {gemm})"
    if op == "eig_backward":
        return f"{gemm}+cusolver:geqrf+orgqr(V^H)+tri_inv(doubling, {gemm})"
    return gemm + "+torch elementwise"


for _op, _run, _backend in (("svd_backward", run_svd_bw, Backend.CUBLAS), ("eigh_backward", eig_run(True), Backend.CUBLAS),
                            ("qr_backward", run_qr_bw, Backend.CUBLAS),
                            ("householder_product_backward", run_hh_bw, Backend.CUBLAS),
                            ("eig_backward", eig_run(False, _cusolver_qr), Backend.CUSOLVER)):
    _dts = (DType.c64, DType.c128) if _op == "eig_backward" else LINALG_DTYPES
    register(Impl(op=_op, backend=_backend, run=default_run(bind_guarded(_run)), bind=bind_guarded(_run), precision=gemm_precision,
                  dtypes=frozenset(_dts), devices=frozenset({"cuda"}), priority=20.0, route=_route,
                  array_api="torch"))
