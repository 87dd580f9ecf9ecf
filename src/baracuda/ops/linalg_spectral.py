"""Spectral decompositions (issue 19): qr, householder_product, svd / svdvals, eigh / eigvalsh, eig / eigvals, and
the backward ops of svd, eigh, eig and qr.  torch.linalg's semantics, batched over the leading dims, f32/f64/c64/c128.

The gauge.  Singular vectors and eigenvectors are defined up to a unit factor per vector (a sign for real
matrices, a phase for complex ones), and LAPACK builds (torch's MKL, NumPy's OpenBLAS) and cuSOLVER pick different
ones (NumPy and torch disagree on the signs of 30-45 % of random 1-6 x 1-6 matrices).  baracuda returns one gauge on
every backend: each vector is scaled so that its largest-magnitude entry is real and positive (an SVD: U's columns,
Vh's rows take the same factors); full_matrices=True's extra columns of U / rows of Vh (any orthonormal basis of the
complement is valid) are the last columns of the complete Householder QR of the first k, gauged.  So results agree
across backends and the gradient is that of a function of A: where torch raises for a loss that depends on the
phase (complex svd / eigh / eig), baracuda differentiates through its gauge (the loss then cannot depend on it).
eig's eigenvalue order is LAPACK geev's (torch's and NumPy's agree); eigh's and svd's are sorted (ascending /
descending), as torch's.

Backward (torch's FunctionsManual.cpp formulas, after the pullback through the gauge; repeated singular values /
eigenvalues divide by 0 -> inf / nan, as torch):
svd_backward(U, S, Vh, gU, gS, gVh, full_matrices, has_u, has_vh) -> gA     (full_matrices: the extra vectors'
    cotangents are ignored, as torch)
eigh_backward(V, L, gV, gL, has_v) -> gA     (torch's: not projected onto the UPLO triangle the forward reads)
eig_backward(V, L, gV, gL, has_v, real) -> gA     (real: A was real, the gradient is the real part)
qr_backward(Q, R, gQ, gR, has_q, has_r) -> gA     (reduced mode; complete mode when m <= n; torch's errors otherwise)
householder_product_backward(grad, A, tau) -> (gA, gtau)     (gA: the strictly lower part of A's first k columns
    (the reflectors' v) only, zero elsewhere, as torch; broadcast batch dims summed back to A's / tau's shape)
"""
from __future__ import annotations

import numpy as np

from .._core.derive import backward_spec, declare_rule_ops
from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec
from .linalg_common import LINALG_DTYPES, batch_of, broadcast_batch, matrix, same_dtype, square

__all__ = ["register_linalg", "real_of", "complex_of", "linalg_operands", "linalg_tol", "linalg_grad_tol", "no_out", "torch_result", "ts"]

_REAL = {DType.f32: DType.f32, DType.f64: DType.f64, DType.c64: DType.f32, DType.c128: DType.f64}
_CPLX = {DType.f32: DType.c64, DType.f64: DType.c128, DType.c64: DType.c64, DType.c128: DType.c128}


def real_of(dt: DType) -> DType:
    return _REAL[dt]


def complex_of(dt: DType) -> DType:
    return _CPLX[dt]


def linalg_operands(op: str, inputs, names, dtypes=LINALG_DTYPES):
    """The operand count and key dtype check every linalg op of these families starts with."""
    if len(inputs) != len(names):
        raise InvalidProblemError(op, "inputs", f"{len(names)} operands ({', '.join(names)})", len(inputs))
    if inputs[0].dtype not in dtypes:
        raise UnsupportedError(op, f"argument '{names[0]}' has dtype {inputs[0].dtype}; the op is defined for "
                                   f"{', '.join(map(str, dtypes))}")
    return inputs


def ts(shape, dt):
    return TensorSpec(tuple(shape), dt)


# -- forward checks --------------------------------------------------------------------------------------------
QR_MODES = ("reduced", "complete", "r")


def _check_qr(inputs, attrs):
    (a,) = linalg_operands("qr", inputs, ("A",))
    m, n = matrix("qr", "A", a)
    b, k, dt = batch_of(a), min(m, n), a.dtype
    mode = attrs["mode"]
    q = (0,) if mode == "r" else b + (m, m if mode == "complete" else k)
    r = b + (m if mode == "complete" else k, n)
    return attrs, (ts(q, dt), ts(r, dt))


def _check_hh(inputs, attrs):
    op = "householder_product"
    a, tau = linalg_operands(op, inputs, ("A", "tau"))
    m, n = matrix(op, "A", a)
    same_dtype(op, a, tau=tau)
    if len(tau.shape) < 1 or tau.shape[-1] > n or n > m:
        raise InvalidProblemError(op, "tau", f"(*batch, k) with k <= n <= m (A is {m} x {n})", f"shape {tau.shape}")
    b = broadcast_batch(op, ("A", "tau"), a, tau, core=(2, 1))
    return attrs, (ts(b + (m, n), a.dtype),)


def _check_svd(op):
    def check(inputs, attrs):
        (a,) = linalg_operands(op, inputs, ("A",))
        m, n = matrix(op, "A", a)
        b, k, dt = batch_of(a), min(m, n), a.dtype
        s = ts(b + (k,), real_of(dt))
        if op == "svdvals":
            return attrs, (s,)
        full = attrs["full_matrices"]
        return attrs, (ts(b + ((m, m) if full else (m, k)), dt), s, ts(b + ((n, n) if full else (k, n)), dt))
    return check


def _check_eig(op):
    def check(inputs, attrs):
        (a,) = linalg_operands(op, inputs, ("A",))
        n = square(op, "A", a)
        b, dt = batch_of(a), a.dtype
        vals = ts(b + (n,), real_of(dt) if op.startswith("eig") and "h" in op else complex_of(dt))
        vecs = ts(b + (n, n), dt if op == "eigh" else complex_of(dt))
        return attrs, ((vals, vecs) if op in ("eigh", "eig") else (vals,))
    return check


# -- backward checks -------------------------------------------------------------------------------------------
def _check_like(op, names, inputs, wants):
    for name, t, (shape, dt) in zip(names, inputs, wants):
        if tuple(t.shape) != tuple(shape) or t.dtype != dt:
            raise InvalidProblemError(op, name, f"shape {tuple(shape)} dtype {dt}", f"shape {t.shape} dtype {t.dtype}")


def _check_svd_bw(inputs, attrs):
    op = "svd_backward"
    names = ("U", "S", "Vh", "gU", "gS", "gVh")
    u, s, vh = linalg_operands(op, inputs, names)[:3]
    m, n = u.shape[-2], vh.shape[-1]
    b, k, dt = batch_of(u), min(m, n), u.dtype
    ku, kv = (m, n) if attrs["full_matrices"] else (k, k)
    wants = [(b + (m, ku), dt), (b + (k,), real_of(dt)), (b + (kv, n), dt)]
    _check_like(op, names, inputs, wants + wants)
    return attrs, (ts(b + (m, n), dt),)


def _check_eig_bw(op):
    def check(inputs, attrs):
        names = ("V", "L", "gV", "gL")
        dts = (DType.c64, DType.c128) if op == "eig_backward" else LINALG_DTYPES
        v = linalg_operands(op, inputs, names, dts)[0]
        n = square(op, "V", v)
        b, dt = batch_of(v), v.dtype
        lam = (b + (n,), dt if op == "eig_backward" else real_of(dt))
        _check_like(op, names, inputs, [(v.shape, dt), lam] * 2)
        return attrs, (ts(b + (n, n), real_of(dt) if attrs.get("real") else dt),)
    return check


def _check_qr_bw(inputs, attrs):
    op = "qr_backward"
    names = ("Q", "R", "gQ", "gR")
    q, r = linalg_operands(op, inputs, names)[:2]
    m, n = q.shape[-2], r.shape[-1]
    b, dt = batch_of(q), q.dtype
    if q.shape[-1] != min(m, n) or r.shape[-2] != min(m, n):
        raise InvalidProblemError(op, "Q", "reduced factors Q (m, k), R (k, n)", f"{q.shape}, {r.shape}")
    _check_like(op, names, inputs, [(q.shape, dt), (r.shape, dt)] * 2)
    return attrs, (ts(b + (m, n), dt),)


# -- backward rules --------------------------------------------------------------------------------------------
def _zeros_for(ctx, t):
    t = ctx.spec_of(t)
    return ctx.op("zeros", shape=tuple(t.shape), dtype=t.dtype)


def _g_svd(ctx, d, grads, s):
    gu, gs, gvh = grads
    u, sv, vh = d.outputs
    if gu is None and gs is None and gvh is None:
        return (None,)
    gin = [g if g is not None else _zeros_for(ctx, t) for g, t in zip(grads, d.outputs)]
    return (ctx.op("svd_backward", s["out0"], s["out1"], s["out2"], *gin, full_matrices=d.attr("full_matrices"),
                   has_u=gu is not None, has_vh=gvh is not None),)


def _g_svdvals(ctx, d, grads, s):
    if grads[0] is None:
        return (None,)
    u, sv, vh = ctx.op("svd", s["A"], full_matrices=False)
    return (ctx.op("svd_backward", u, sv, vh, _zeros_for(ctx, u), grads[0], _zeros_for(ctx, vh),
                   full_matrices=False, has_u=False, has_vh=False),)


def _eig_rule(op, bw):
    def rule(ctx, d, grads, s):
        if all(g is None for g in grads):
            return (None,)
        kw = {"real": not d.inputs[0].dtype.is_complex} if bw == "eig_backward" else {}
        if op in ("eigh", "eig"):
            lam, v = s["out0"], s["out1"]
            gl, gv = grads
            has_v = gv is not None
        else:
            lam, v = ctx.op("eigh" if op == "eigvalsh" else "eig", s["A"], **d.attr_dict)
            gl, gv, has_v = grads[0], None, False
        gl = gl if gl is not None else _zeros_for(ctx, d.outputs[0])
        gv = gv if gv is not None else _zeros_for(ctx, v)
        return (ctx.op(bw, v, lam, gv, gl, has_v=has_v, **kw),)
    return rule


def _g_qr(ctx, d, grads, s):
    mode = d.attr("mode")
    m, n = d.inputs[0].shape[-2:]
    if mode == "r":
        raise InvalidProblemError("qr", "mode", "'reduced' (or 'complete' with m <= n) to differentiate: the gradient "
                                  "depends on Q, which mode='r' does not compute", repr(mode))
    if mode == "complete" and m > n:
        raise InvalidProblemError("qr", "mode", "'reduced': QR is not differentiable when mode='complete' and m > n",
                                  repr(mode))
    gq, gr = grads
    if gq is None and gr is None:
        return (None,)
    gin = [g if g is not None else _zeros_for(ctx, t) for g, t in zip(grads, d.outputs)]
    return (ctx.op("qr_backward", s["out0"], s["out1"], *gin, has_q=gq is not None, has_r=gr is not None),)


def _g_hh(ctx, d, grads, s):
    if grads[0] is None:
        return (None, None)
    return tuple(ctx.op("householder_product_backward", grads[0], s["A"], s["tau"]))


# -- torch peers (the gauge applied in torch, differentiably) --------------------------------------------------
def _tgauge(v, piv_from=None):
    import torch

    src = v if piv_from is None else piv_from
    if src.shape[-2] == 0:
        return v, torch.ones(src.shape[:-2] + (1,) + src.shape[-1:], dtype=v.dtype)
    piv = src.detach().abs().argmax(dim=-2, keepdim=True)
    p = torch.gather(src, -2, piv)
    ph = torch.where(p.abs() == 0, torch.ones_like(p), p.conj() / p.abs())
    return v * ph, ph


def _tcomplement(q):
    import torch

    full = torch.linalg.qr(q.detach(), mode="complete")[0]
    return _tgauge(full[..., q.shape[-1]:])[0]


def _peer_svd(a, full_matrices=True):
    import torch

    u, s, vh = torch.linalg.svd(a, full_matrices=False)
    u, ph = _tgauge(u)
    vh = vh * ph.conj().transpose(-1, -2)
    if full_matrices:
        u = torch.cat([u, _tcomplement(u)], -1)
        vh = torch.cat([vh, _tcomplement(vh.mH).mH], -2)
    return u, s, vh


def _peer_eigh(a, UPLO="L"):
    import torch

    w, v = torch.linalg.eigh(a, UPLO=UPLO)
    return w, _tgauge(v)[0]


def _peer_eig(a):
    import torch

    w, v = torch.linalg.eig(a)
    return w, _tgauge(v)[0]


def _peer_hh_bw(g, a, tau):
    import torch

    a, tau = a.detach().requires_grad_(True), tau.detach().requires_grad_(True)
    return torch.autograd.grad(torch.linalg.householder_product(a, tau), (a, tau), g)


def _peer_qr(a, mode="reduced"):
    import torch

    q, r = torch.linalg.qr(a, mode=mode)
    return (q.reshape(0) if mode == "r" else q), r


# -- drop-ins --------------------------------------------------------------------------------------------------
def no_out(op, out):
    if out is not None:
        raise UnsupportedError(op, "out= is not supported (the op returns new tensors)")


def torch_result(kind):
    def result(out):
        import torch

        return getattr(torch.return_types, kind)(out)
    return result


_SVD_DRIVERS = (None, "gesvd", "gesvdj", "gesvda")


def _dropin_svd(A, full_matrices=True, *, driver=None, out=None):
    no_out("svd", out)
    if driver not in _SVD_DRIVERS:    # a CUDA algorithm hint in torch; every backend returns the same gauged SVD
        raise InvalidProblemError("svd", "driver", "None, 'gesvd', 'gesvdj' or 'gesvda'", repr(driver))
    return (A,), {"full_matrices": bool(full_matrices)}


def _dropin_svdvals(A, *, driver=None, out=None):
    no_out("svdvals", out)
    if driver not in _SVD_DRIVERS:
        raise InvalidProblemError("svdvals", "driver", "None, 'gesvd', 'gesvdj' or 'gesvda'", repr(driver))
    return (A,), {}


def _dropin_uplo(op):
    def dropin(A, UPLO="L", *, out=None):
        no_out(op, out)
        return (A,), {"UPLO": UPLO}
    return dropin


def _dropin_eig(op):
    def dropin(A, *, out=None):
        no_out(op, out)
        return (A,), {}
    return dropin


def _dropin_qr(A, mode="reduced", *, out=None):
    no_out("qr", out)
    return (A,), {"mode": mode}


def _dropin_hh(input, tau, *, out=None):
    no_out("householder_product", out)
    return (input, tau), {}


# -- samples ---------------------------------------------------------------------------------------------------
def _mat_samples(shapes, attrs_list=({},)):
    def samples(rng):
        for i, shape in enumerate(shapes):
            for attrs in attrs_list:
                # (qr's mode='r' / complete and eigh's UPLO='U' once more: the first attributes' samples check gradients)
                yield Sample((rng.standard_normal(shape),), dict(attrs), name=f"{shape}-{attrs}",
                             grad=attrs is attrs_list[0])
        yield Sample((rng.standard_normal((0, 3, 3)),), dict(attrs_list[0]), name="empty", grad=False)
    return samples


_RECT = [(3, 3), (2, 4, 3), (3, 5), (1, 2, 2)]
_SQ = [(3, 3), (2, 4, 4), (1, 2, 2)]


def _svd_samples(rng):
    for shape in _RECT:
        yield Sample((rng.standard_normal(shape),), {"full_matrices": False}, name=f"{shape}-thin")
    for shape in _RECT[1:3]:   # the extra vectors' cotangents are ignored (torch): no finite-difference check
        yield Sample((rng.standard_normal(shape),), {"full_matrices": True}, name=f"{shape}-full", grad=False)
    yield Sample((rng.standard_normal((0, 3)),), {"full_matrices": False}, name="empty", grad=False)


def _hh_samples(rng):
    for m, n, k in [(4, 3, 3), (5, 3, 2), (3, 3, 3)]:
        yield Sample((rng.standard_normal((2, m, n)), rng.uniform(0.5, 1.5, (2, k))), name=f"{m}x{n}-k{k}")


def _bw_samples(op):
    """Consistent factors (the forward's own output on a random A) and random cotangents."""
    def samples(rng):
        from ..backends.reference import linalg_spectral as ref

        shapes = {"svd_backward": [(3, 3), (2, 4, 3), (3, 5)], "qr_backward": [(3, 3), (2, 4, 3), (3, 5)]}.get(op, [(3, 3), (2, 4, 4)])
        for shape in shapes:
            a = rng.standard_normal(shape)
            if op == "svd_backward":
                outs, attrs = ref.svd_gauged(a, False), {"full_matrices": False, "has_u": True, "has_vh": True}
            elif op == "qr_backward":
                outs, attrs = np.linalg.qr(a), {"has_q": True, "has_r": True}
            elif op == "eigh_backward":
                w, v = ref.eigh_gauged(a, "L")
                outs, attrs = (v, w), {"has_v": True}
            else:
                w, v = ref.eig_gauged(a)
                outs, attrs = (v, w), {"has_v": True, "real": False}
            gs = tuple(rng.standard_normal(np.shape(o)) for o in outs)
            yield Sample(tuple(outs) + gs, attrs, name=f"{shape}", grad=False)
    return samples


# -- errors, tolerances, workloads, cost -----------------------------------------------------------------------
def _errors(op, nonsquare_ok):
    def errors():
        f = ((3, 3), "f32")
        extra = (((3,), "f32"),) if op == "householder_product" else ()
        yield ErrorCase((((3, 3), "f16"),) + tuple(((3,), "f16") for _ in extra), {}, UnsupportedError,
                        rf"{op}: argument 'A' has dtype f16", "half")
        yield ErrorCase((((3, 3), "i32"),) + tuple(((3,), "i32") for _ in extra), {}, UnsupportedError,
                        rf"{op}: argument 'A' has dtype i32", "int")
        yield ErrorCase((((3,), "f32"),) + extra, {}, InvalidProblemError, rf"{op}: argument 'A'", "vector")
        if not nonsquare_ok:
            yield ErrorCase((((3, 4), "f32"),), {}, InvalidProblemError, rf"{op}: argument 'A': expected square", "rect")
        if op == "qr":
            yield ErrorCase((f,), {"mode": "full"}, InvalidProblemError, r"qr: argument 'mode'", "bad-mode")
        if op in ("eigh", "eigvalsh"):
            yield ErrorCase((f,), {"UPLO": "X"}, InvalidProblemError, rf"{op}: argument 'UPLO'", "bad-uplo")
        if op == "householder_product":
            yield ErrorCase((((3, 4), "f32"), ((3,), "f32")), {}, InvalidProblemError,
                            r"householder_product: argument 'tau'", "wide")
            yield ErrorCase((((4, 3), "f32"), ((3,), "f64")), {}, DTypeMismatchError, r"householder_product: argument 'tau'",
                            "mixed")
    return errors


def _bw_errors(op, n_in):
    def errors():
        yield ErrorCase(tuple(((3, 3), "i32") for _ in range(n_in)), {}, UnsupportedError, rf"{op}: argument", "int")
    return errors


def linalg_tol(dt):
    # LAPACK in float64 vs cuSOLVER in the dtype: backward-stable algorithms on n <= 6 well-conditioned samples
    # (condition numbers < 1e3 for the random samples): the factors agree to ~n * cond * eps of the dtype
    return {DType.f64: (1e-9, 1e-9), DType.c128: (1e-9, 1e-9)}.get(dt, (1e-3, 1e-4))


def linalg_grad_tol(dt):
    # divided by singular-value / eigenvalue gaps (>= ~0.1 in the samples): an extra factor 10-100 of rounding
    return {DType.f64: (1e-8, 1e-8), DType.c128: (1e-8, 1e-8)}.get(dt, (5e-3, 5e-3))


def _cost(factor):
    def cost(desc):
        a = desc.inputs[0]
        m, n = a.shape[-2:]
        batch = a.numel // max(m * n, 1)
        return (sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs),
                int(factor * batch * max(m, n) * min(m, n) ** 2))
    return cost


def _workloads(op):
    if op not in ("qr", "svd", "eigh"):
        return ()
    ws = [Workload(f"{op}-[4096,4096]-{dt}", ((4096, 4096),), dt, {}, backward=op != "qr")
          for dt in (DType.f32, DType.f64)]
    if op != "qr":
        ws.append(Workload(f"{op}-[65536,32,32]-f32", ((65536, 32, 32),), DType.f32, {}, backward=True))
    return tuple(ws)


SPECS: dict[str, OpSpec] = {}


def register_linalg(specs: dict, **kw):
    """Register one linalg spec into ``specs`` with the family's defaults (dtypes, tolerances, no attributes)."""
    kw.setdefault("family", "linalg")
    kw.setdefault("dtypes", LINALG_DTYPES)
    kw.setdefault("category", "linalg")
    kw.setdefault("tol", linalg_tol)
    kw.setdefault("grad_tol", linalg_grad_tol)
    kw.setdefault("attrs", ())
    specs[kw["name"]] = register_spec(OpSpec(**kw))


def _reg(**kw):
    register_linalg(SPECS, **kw)


_UPLO = Attr("UPLO", "str", "L", choices=("L", "U"))
_FULL = Attr("full_matrices", "bool", True)

_reg(name="qr", arg_names=("A",), check=_check_qr, attrs=(Attr("mode", "str", "reduced", choices=QR_MODES),),
     torch_peer=_peer_qr, torch_name="torch.linalg.qr", dropin=_dropin_qr, dropin_result=torch_result("linalg_qr"),
     grad=_g_qr, saves=("outputs",), differentiable=(0,),
     samples=_mat_samples(_RECT, ({"mode": "reduced"}, {"mode": "complete"}, {"mode": "r"})),
     errors=_errors("qr", True), workloads=_workloads("qr"), cost=_cost(4 / 3),
     doc="Householder QR (geqrf + orgqr / ungqr): Q (m, k) R (k, n) reduced, Q (m, m) R (m, n) complete, "
         "R alone (Q empty) for mode='r'; R's diagonal has LAPACK's signs (torch's).")
_reg(name="householder_product", arg_names=("A", "tau"), check=_check_hh, torch_name="torch.linalg.householder_product",
     torch_peer=lambda a, tau: __import__("torch").linalg.householder_product(a, tau),
     dropin=_dropin_hh, grad=_g_hh, saves=("inputs",), differentiable=(0, 1), samples=_hh_samples,
     errors=_errors("householder_product", True), cost=_cost(2),
     doc="The first n columns of H_1 ... H_k (LAPACK orgqr / ungqr); H_i = I - tau_i v_i v_i^H, v_i = (0, .., 1, "
         "A[i+1:, i]).")
SPECS["householder_product_backward"] = register_spec(backward_spec(
    SPECS["householder_product"], torch_peer=_peer_hh_bw, tol=linalg_grad_tol, cost=_cost(6),
    doc="(gA, gtau) of Q = H_1 ... H_k E from grad = gQ (torch's orgqr gradient): gA is nonzero only strictly below "
        "the diagonal of A's first k columns (the reflectors' v; the diagonal is the implicit 1); batch dims that "
        "the forward broadcast are summed back to A's / tau's shape."))
_reg(name="svd", arg_names=("A",), check=_check_svd("svd"), attrs=(_FULL,), torch_peer=_peer_svd,
     torch_name="torch.linalg.svd", dropin=_dropin_svd, dropin_result=torch_result("linalg_svd"), grad=_g_svd,
     saves=("outputs",), differentiable=(0,), samples=_svd_samples, errors=_errors("svd", True),
     workloads=_workloads("svd"), cost=_cost(12),
     doc="A = U diag(S) Vh, S descending, in baracuda's gauge (module doc).")
_reg(name="svdvals", arg_names=("A",), check=_check_svd("svdvals"),
     torch_peer=lambda a: __import__("torch").linalg.svdvals(a), torch_name="torch.linalg.svdvals",
     dropin=_dropin_svdvals, grad=_g_svdvals, saves=("inputs",), differentiable=(0,),
     samples=_mat_samples(_RECT), errors=_errors("svdvals", True), cost=_cost(4),
     doc="The singular values, descending (real).")
_reg(name="eigh", arg_names=("A",), check=_check_eig("eigh"), attrs=(_UPLO,), torch_peer=_peer_eigh,
     torch_name="torch.linalg.eigh", dropin=_dropin_uplo("eigh"), dropin_result=torch_result("linalg_eigh"),
     grad=_eig_rule("eigh", "eigh_backward"), saves=("outputs",), differentiable=(0,), grad_is_derivative=False,
     samples=_mat_samples(_SQ, ({"UPLO": "L"}, {"UPLO": "U"})), errors=_errors("eigh", False),
     workloads=_workloads("eigh"), cost=_cost(9),
     doc="Eigenvalues (ascending, real) and eigenvectors of the Hermitian matrix read from the UPLO triangle. "
         "The gradient is torch's (not folded onto that triangle; tests/linalg checks it by finite differences "
         "of a symmetrized input).")
_reg(name="eigvalsh", arg_names=("A",), check=_check_eig("eigvalsh"), attrs=(_UPLO,),
     torch_peer=lambda a, UPLO="L": __import__("torch").linalg.eigvalsh(a, UPLO=UPLO), torch_name="torch.linalg.eigvalsh",
     dropin=_dropin_uplo("eigvalsh"), grad=_eig_rule("eigvalsh", "eigh_backward"), saves=("inputs",),
     differentiable=(0,), grad_is_derivative=False, samples=_mat_samples(_SQ, ({"UPLO": "L"}, {"UPLO": "U"})),
     errors=_errors("eigvalsh", False), cost=_cost(4), doc="Eigenvalues of a Hermitian matrix, ascending.")
_reg(name="eig", arg_names=("A",), check=_check_eig("eig"), torch_peer=_peer_eig, torch_name="torch.linalg.eig",
     dropin=_dropin_eig("eig"), dropin_result=torch_result("linalg_eig"), grad=_eig_rule("eig", "eig_backward"),
     saves=("outputs",), differentiable=(0,), samples=_mat_samples(_SQ), errors=_errors("eig", False),
     cost=_cost(25), doc="Eigenvalues and unit eigenvectors (complex) of a general matrix (geev).")
_reg(name="eigvals", arg_names=("A",), check=_check_eig("eigvals"),
     torch_peer=lambda a: __import__("torch").linalg.eigvals(a), torch_name="torch.linalg.eigvals",
     dropin=_dropin_eig("eigvals"), grad=_eig_rule("eigvals", "eig_backward"), saves=("inputs",), differentiable=(0,),
     samples=_mat_samples(_SQ), errors=_errors("eigvals", False), cost=_cost(10),
     doc="Eigenvalues (complex) of a general matrix, geev's order.")
_reg(name="svd_backward", arg_names=("U", "S", "Vh", "gU", "gS", "gVh"), check=_check_svd_bw,
     attrs=(Attr("full_matrices", "bool", False), Attr("has_u", "bool", True), Attr("has_vh", "bool", True)),
     torch_name="torch autograd rule of linalg.svd (svd_backward)", samples=_bw_samples("svd_backward"),
     errors=_bw_errors("svd_backward", 6), cost=_cost(8), doc="torch's svd_backward after the gauge pullback.")
_reg(name="eigh_backward", arg_names=("V", "L", "gV", "gL"), check=_check_eig_bw("eigh_backward"),
     attrs=(Attr("has_v", "bool", True),), torch_name="torch autograd rule of linalg.eigh (linalg_eig_backward)",
     samples=_bw_samples("eigh_backward"), errors=_bw_errors("eigh_backward", 4), cost=_cost(6),
     doc="torch's linalg_eig_backward (hermitian) after the gauge pullback.")
_reg(name="eig_backward", arg_names=("V", "L", "gV", "gL"), check=_check_eig_bw("eig_backward"),
     dtypes=(DType.c64, DType.c128), attrs=(Attr("has_v", "bool", True), Attr("real", "bool", False)),
     torch_name="torch autograd rule of linalg.eig (linalg_eig_backward)", samples=_bw_samples("eig_backward"),
     errors=_bw_errors("eig_backward", 4), cost=_cost(8),
     doc="torch's linalg_eig_backward after the gauge pullback; real=True: the real part (a real A).")
_reg(name="qr_backward", arg_names=("Q", "R", "gQ", "gR"), check=_check_qr_bw,
     attrs=(Attr("has_q", "bool", True), Attr("has_r", "bool", True)),
     torch_name="torch autograd rule of linalg.qr (linalg_qr_backward)", samples=_bw_samples("qr_backward"),
     errors=_bw_errors("qr_backward", 4), cost=_cost(4), doc="torch's linalg_qr_backward (m >= n and wide).")

declare_rule_ops(__name__, "eig", "eig_backward", "eigh", "eigh_backward", "householder_product_backward",
                 "qr_backward", "svd", "svd_backward", "zeros")
