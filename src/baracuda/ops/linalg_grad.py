"""Backward rules of the factorization / solve / determinant ops (linalg_factor.py, linalg_solve.py, linalg_det.py):
torch's formulas (FunctionsManual.cpp), composed of baracuda ops through ``ctx``.

The matrix products, transposes and triangle masks compose ``matmul`` / ``transpose`` / ``tril`` / ``triu`` /
``reduce_to``, which are defined for real dtypes; a complex operand goes through its real and imaginary parts
(``_M``: four real products per complex product).  Conventions: A^H is the conjugate transpose; complex gradients
are torch's (conjugate Wirtinger).

cholesky          gA = L^-H Phi(L^H gL) L^-1, Phi(X) = (tril(X) + tril(X, -1)^H) / 2: Hermitian, both triangles (torch),
                  so it is not the derivative with respect to the independent entries of the triangle the op reads
                  (grad_is_derivative=False: tests/linalg checks it with Hermitian finite differences)
cholesky_solve    gB = cholesky_solve(gX, L); gL = -(C L) (upper: -(L C)), C = gB X^H + X gB^H
cholesky_inverse  gL = -(C L) (upper: -(L C)), C = R (g + g^H) R
lu / lu_factor    torch's linalg_lu_backward: (square, wide) gA = P L^-H [pad(tril(L^H gL - triu(gU) U^H, -1) U1^-H)
                  + triu(gU)], (tall) its transposed analogue with L1, L2 (see _lu_grad); lu_factor's gLU is split
                  into gL (first k columns) and gU (first k rows); lu_unpack: tril(gL, -1) + triu(gU), zero-padded
lu_solve          gB = lu_solve(gX, adjoint flipped); gA as solve's, then gLU = tril(P^T gA U^H, -1) + triu(L^H P^T gA)
solve             gB = lu_solve(LU, pivots, gX, adjoint=True) on the forward's own LU outputs; gA = -gB X^H (left) /
                  -X^H gB (right)
solve_triangular  gB = solve_triangular(A^H, gX); gA as solve's, masked to the triangle
inv               gA = -R^H g R^H
det / slogdet / logdet   c A^-H with c = g conj(det) / g_logabs + i Im(conj(sign) g_sign) / g; A^-1 from ``inv``
                  (a singular A raises LinAlgError there: torch's SVD-based singular case is not implemented)
"""
from __future__ import annotations

from .._core.derive import declare_rule_ops

__all__ = ["is_vector_rhs", "g_cholesky", "g_cholesky_solve", "g_cholesky_inverse", "g_lu", "g_lu_factor", "g_lu_unpack",
           "g_lu_solve", "g_solve", "g_solve_triangular", "g_inv", "g_det"]


class _M:
    """Matrix helpers of one rule: real ops on real operands, on the real and imaginary parts of complex ones."""

    def __init__(self, ctx, d):
        self.ctx, self.cplx = ctx, d.dtype.is_complex

    def _parts(self, fn, *xs):
        c = self.ctx
        if not self.cplx:
            return fn(*xs)
        return c.op("complex", fn(*[c.op("real", x) for x in xs]), fn(*[c.op("imag", x) for x in xs]))

    def mm(self, a, b, ha=False, hb=False):
        """a @ b, a^H (ha) / b^H (hb) taken by matmul's transpose flags (no transposed copy); complex: the parts'
        four real products, the conjugation a sign."""
        c = self.ctx
        if not self.cplx:
            return c.op("matmul", a, b, trans_a=ha, trans_b=hb)
        ar, ai, br, bi = c.op("real", a), c.op("imag", a), c.op("real", b), c.op("imag", b)

        def p(x, y):
            return c.op("matmul", x, y, trans_a=ha, trans_b=hb)
        # (ar + i sa ai)(br + i sb bi), sa = -1 for a^H: re = ar br - sa sb ai bi, im = sb ar bi + sa ai br
        rr, ii, ri, ir = p(ar, br), p(ai, bi), p(ar, bi), p(ai, br)
        re = c.op("add", rr, ii) if ha != hb else c.op("sub", rr, ii)
        if ha and hb:
            im = c.op("neg", c.op("add", ri, ir))
        elif ha:
            im = c.op("sub", ri, ir)
        elif hb:
            im = c.op("sub", ir, ri)
        else:
            im = c.op("add", ri, ir)
        return c.op("complex", re, im)

    def perm(self, P, x, t=False):
        """P x (t: P^T x = P^H x) for a permutation matrix P: real, so two real products for a complex x."""
        pr = self.ctx.op("real", P) if self.cplx else P
        return self._parts(lambda y: self.ctx.op("matmul", pr, y, trans_a=t), x)

    def t(self, x):
        n = len(self.ctx.spec_of(x).shape)
        return self._parts(lambda y: self.ctx.op("transpose", y, dim0=n - 2, dim1=n - 1), x)

    def h(self, x):
        """x^H."""
        x = self.t(x)
        return self.ctx.op("conj", x) if self.cplx else x

    def tril(self, x, k=0):
        return self._parts(lambda y: self.ctx.op("tril", y, diagonal=k), x)

    def triu(self, x, k=0):
        return self._parts(lambda y: self.ctx.op("triu", y, diagonal=k), x)

    def reduce(self, g, shape):
        if tuple(self.ctx.spec_of(g).shape) == tuple(shape):
            return g
        return self._parts(lambda y: self.ctx.reduce_to(y, shape), g)

    def add(self, a, b):
        return self.ctx.op("add", a, b)

    def pad(self, x, rows=0, cols=0):
        """x with ``rows`` zero rows appended below / ``cols`` zero columns on the right (negative: that many
        dropped)."""
        if not rows and not cols:
            return x
        return self._parts(lambda y: self.ctx.op("pad", y, pad=(0, cols, 0, rows)), x)

    def neg(self, a):
        return self.ctx.op("neg", a)

    def half(self, a):
        return self.ctx.op("mul_scalar", a, scalar=0.5)

    def trsm(self, a, b, upper, left=True, unit=False):
        return self.ctx.op("solve_triangular", a, b, upper=upper, left=left, unitriangular=unit)

    def as_matrix(self, v, left):
        """A vector right-hand side (or its gradient) as a one-column (left) / one-row matrix."""
        s = tuple(self.ctx.spec_of(v).shape)
        return self.ctx.reshape(v, s + (1,) if left else s[:-1] + (1, s[-1]))


def is_vector_rhs(a, b) -> bool:
    """torch.linalg.solve's rule: B is a (batch of) vector(s) when 1-D or when its shape is A's minus the last dim."""
    return len(b.shape) == 1 or (len(b.shape) == len(a.shape) - 1 and tuple(b.shape) == tuple(a.shape[:-1]))


# -- cholesky family ---------------------------------------------------------------------------------------------------
def g_cholesky(ctx, d, grads, s):
    m = _M(ctx, d)
    g = grads[0]
    if g is None:
        return (None,)
    up = d.attr("upper")
    L = s["out0"] if "out0" in s else s["out"]
    if up:
        L, g = m.h(L), m.h(g)
    ga = m.tril(m.mm(L, g, ha=True))
    ga = m.half(m.add(ga, m.h(m.tril(ga, -1))))
    ga = m.trsm(m.h(L), ga, upper=True)
    return (m.trsm(L, ga, upper=False, left=False),)


def _chol_term(m, L, c, upper):
    return m.neg(m.mm(L, c) if upper else m.mm(c, L))


def g_cholesky_solve(ctx, d, grads, s):
    m = _M(ctx, d)
    up = d.attr("upper")
    gb = ctx.op("cholesky_solve", grads[0], s["L"], upper=up)
    c = m.mm(gb, s["out"], hb=True)
    c = m.add(c, m.h(c))
    gl = _chol_term(m, s["L"], c, up)
    return m.reduce(gb, d.inputs[0].shape), m.reduce(gl, d.inputs[1].shape)


def _real_diagonal(ctx, x):
    """x with its diagonal's imaginary part dropped (a complex Cholesky factor as cholesky_inverse reads it)."""
    im = ctx.op("imag", x)
    im = ctx.op("add", ctx.op("tril", im, diagonal=-1), ctx.op("triu", im, diagonal=1))
    return ctx.op("complex", ctx.op("real", x), im)


def g_cholesky_inverse(ctx, d, grads, s):
    """The op reads a complex factor's diagonal as its real part: the rule uses that factor, and the imaginary part
    of the diagonal gets no gradient."""
    m = _M(ctx, d)
    r = s["out"]
    L = _real_diagonal(ctx, s["L"]) if m.cplx else s["L"]
    c = m.mm(r, m.mm(m.add(grads[0], m.h(grads[0])), r))
    gl = _chol_term(m, L, c, d.attr("upper"))
    return (_real_diagonal(ctx, gl) if m.cplx else gl,)


# -- LU ---------------------------------------------------------------------------------------------------------------
def _lu_grad(m, P, L, U, gl, gu):
    """torch's linalg_lu_backward for A = P L U, L (r, k) unit lower, U (k, c), k = min(r, c) (gl / gu None: zero).

    r <= c (square or wide, U = [U1 U2]):  gA = P L^-H [pad(tril(L^H gL - triu(gU) U^H, -1) U1^-H) + triu(gU)]
    r > c (tall, L = [L1; L2]):            gA = P [pad(L1^-H triu(gU U^H - L^H tril(gL, -1))) + tril(gL, -1)] U^-H
    pad fills the missing columns (wide) / rows (tall) with zeros: U2's gradient (wide) / L2's (tall) enters through
    the triu(gU) / tril(gL, -1) term alone.  (The square case is either form.)"""
    r, k = m.ctx.spec_of(L).shape[-2:]
    c = m.ctx.spec_of(U).shape[-1]
    if r <= c:
        gu = m.triu(gu) if gu is not None else None
        x = m.tril(_diff(m, m.mm(L, gl, ha=True) if gl is not None else None,
                         m.mm(gu, U, hb=True) if gu is not None else None), -1)
        x = m.trsm(m.h(m.pad(U, cols=k - c)), x, upper=False, left=False)
        ga = m.trsm(m.h(L), _diff(m, m.pad(x, cols=c - k), gu, sign=1), upper=True, unit=True)
    else:
        gl = m.tril(gl, -1) if gl is not None else None
        x = m.triu(_diff(m, m.mm(gu, U, hb=True) if gu is not None else None,
                         m.mm(L, gl, ha=True) if gl is not None else None))
        x = m.trsm(m.h(m.pad(L, rows=k - r)), x, upper=True, unit=True)
        ga = m.trsm(m.h(U), _diff(m, m.pad(x, rows=r - k), gl, sign=1), upper=False, left=False)
    return m.perm(P, ga)


def _diff(m, a, b, sign=-1):
    """a + sign * b, either None (zero; not both)."""
    if b is None:
        return a
    if a is None:
        return b if sign > 0 else m.neg(b)
    return m.add(a, b) if sign > 0 else m.ctx.op("sub", a, b)


def g_lu(ctx, d, grads, s):
    m = _M(ctx, d)
    if grads[1] is None and grads[2] is None:
        return (None,)
    return (_lu_grad(m, s["out0"], s["out1"], s["out2"], grads[1], grads[2]),)


def g_lu_factor(ctx, d, grads, s):
    """gLU (r, c) carries gL (its first k columns) below the diagonal and gU (its first k rows) on and above it (torch's
    lu_factor_ex_backward)."""
    m = _M(ctx, d)
    r, c = d.inputs[0].shape[-2:]
    k = min(r, c)
    P, L, U = ctx.op("lu_unpack", s["out0"], s["out1"])
    g = grads[0]
    return (_lu_grad(m, P, L, U, m.pad(g, cols=k - c), m.pad(g, rows=k - r)),)


def g_lu_unpack(ctx, d, grads, s):
    """gLU = tril(gL, -1) + triu(gU), each zero-padded to LU's (r, c) (torch's lu_unpack_backward)."""
    m = _M(ctx, d)
    r, c = d.inputs[0].shape[-2:]
    k = min(r, c)
    if grads[1] is None and grads[2] is None:
        return None, None
    return _diff(m, m.pad(m.tril(grads[1], -1), cols=c - k) if grads[1] is not None else None,
                 m.pad(m.triu(grads[2]), rows=r - k) if grads[2] is not None else None, sign=1), None


def _solve_ga(m, gb, x, left, adjoint):
    """The gradient of A in op(A) X = B / X op(A) = B given gB (the solve of gX with the adjoint flipped)."""
    if left:
        return m.neg(m.mm(x, gb, hb=True) if adjoint else m.mm(gb, x, hb=True))
    return m.neg(m.mm(gb, x, ha=True) if adjoint else m.mm(x, gb, ha=True))


def g_lu_solve(ctx, d, grads, s):
    m = _M(ctx, d)
    left, adj = d.attr("left"), d.attr("adjoint")
    lu, piv = s["LU"], s["pivots"]
    gb = ctx.op("lu_solve", lu, piv, grads[0], left=left, adjoint=not adj)
    ga = _solve_ga(m, gb, s["out"], left, adj)
    ga = m.reduce(ga, d.inputs[0].shape)
    P, L, U = ctx.op("lu_unpack", lu, piv)
    pga = m.perm(P, ga, t=True)
    glu = m.add(m.tril(m.mm(pga, U, hb=True), -1), m.triu(m.mm(L, pga, ha=True)))
    return glu, None, m.reduce(gb, d.inputs[2].shape)


# -- solve, solve_triangular, inv ------------------------------------------------------------------------------------
def g_solve(ctx, d, grads, s):
    """A^H G = dX (left; G A^H = dX right) through the forward's own LU (its outputs LU and pivots: lu_solve with
    adjoint=True), then dA = -G X^H (left; -X^H G right).  The LU / pivots / info outputs carry no gradient: they
    are the backward's saved factors (the drop-ins never return them), and a gradient given for them is not read."""
    m = _M(ctx, d)
    left = d.attr("left")
    a, b = d.inputs
    k = 2 if d.op == "solve_ex" else 1
    x, lu, piv = s["out0"], s[f"out{k}"], s[f"out{k + 1}"]
    vec = is_vector_rhs(a, b)
    g = m.as_matrix(grads[0], left) if vec else grads[0]
    gbm = ctx.op("lu_solve", lu, piv, g, left=left, adjoint=True)
    xm = m.as_matrix(x, left) if vec else x
    gb = ctx.reshape(gbm, tuple(ctx.spec_of(grads[0]).shape)) if vec else gbm
    ga = _solve_ga(m, gbm, xm, left, False)
    return m.reduce(ga, a.shape), m.reduce(gb, b.shape)


def g_solve_triangular(ctx, d, grads, s):
    m = _M(ctx, d)
    up, left, unit = d.attr("upper"), d.attr("left"), d.attr("unitriangular")
    gb = m.trsm(m.h(s["A"]), grads[0], upper=not up, left=left, unit=unit)
    ga = _solve_ga(m, gb, s["out"], left, False)
    k = 1 if unit else 0
    ga = m.triu(ga, k) if up else m.tril(ga, -k)
    return m.reduce(ga, d.inputs[0].shape), m.reduce(gb, d.inputs[1].shape)


def g_inv(ctx, d, grads, s):
    m = _M(ctx, d)
    r = s["out0"] if "out0" in s else s["out"]
    return (m.neg(m.mm(r, m.mm(grads[0], r, hb=True), ha=True)),)


def g_det(ctx, d, grads, s):
    m = _M(ctx, d)
    c = ctx.op
    if d.op == "slogdet":
        g_sign, g_abs = grads
        if g_abs is None and (g_sign is None or not m.cplx):
            return (None,)
        coef = g_abs
        if m.cplx and g_sign is not None:
            im = c("imag", c("mul", c("conj", s["out0"]), g_sign))
            coef = c("complex", g_abs if g_abs is not None else c("mul_scalar", im, scalar=0.0), im)
        elif m.cplx:
            coef = c("complex", g_abs, c("mul_scalar", g_abs, scalar=0.0))
    elif d.op == "det":
        coef = c("mul", grads[0], c("conj", s["out"]) if m.cplx else s["out"])
    else:
        coef = grads[0]
    shape = tuple(ctx.spec_of(coef).shape)
    inv_h = m.h(c("inv", s["A"]))
    return (c("mul", ctx.reshape(coef, shape + (1, 1)), inv_h),)


declare_rule_ops(__name__, "complex", "real", "imag", "matmul", "sub", "add", "transpose", "conj", "tril", "triu",
                 "neg", "mul_scalar", "mul", "pad", "solve_triangular", "cholesky_solve", "lu_unpack", "lu_solve",
                 "inv")
