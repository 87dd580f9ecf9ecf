"""Complex64/128 elementwise kernels: one template (``_cew_kernel``) parametrized by a per-op complex body, as
the real template is by its real bodies.

Triton has no complex dtype, so a complex operand is read through its float view (``torch.view_as_real``:
interleaved (re, im) pairs): each program loads a [BLOCK, 2] tile per complex operand (one 8-byte access per
c64 element, 16-byte for c128, vectorized like any contiguous load) and splits it into re / im vectors; real
operands (a real tensor promoted against a complex one, where's bool condition) load one value and take
im = 0 in registers, never a converted copy.  c64 computes in f32, c128 in f64.  A complex unary op moves
8 B in + 8 B out per c64 element, a binary one 24 B: bandwidth-bound like the real ops at H100's ~3 TB/s,
~190 G c64 elements/s for a unary op; the transcendental bodies (a few libdevice calls each) stay under that.

Bodies: ``(ar, ai, br, bi, cr, ci, p0, p1, p2) -> (yr, yi)`` (unary ops ignore b and c; real or bool results
return (y, y) and the template stores the first).  Holomorphic backward helpers reuse forward-style bodies:
with ``HOLO`` the body computes f'(z) of the saved operand b and the template returns g * conj(f'(z)),
torch's gradient convention.  Under the interpreter the scalar math comes from ``_math``'s portable versions.

Strided/broadcast operands: the output shape is collapsed to <= 6 dims and each operand brings its strides in
complex elements (0 on broadcast axes); the float view is addressed at 2 * offset.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.elementwise import ew_compute_dtype
from .._lib.interp import INTERPRETING
from .._lib.interp import f64_arg as _param
from .._lib.math import asinh, atan2, copysign, cos, cosh, exp, expm1, hypot, log, log1p, sin, sinh, sqrt, tan
from .._lib.strided import padded, span, strided_offset
from .._lib.strided import expanded_strides as _expanded_strides
from .._lib.strided import flat_offsets as _flat_offsets
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv as ceil_div   # (cdiv here is complex division)

__all__ = ["COMPLEX_BODIES", "REAL_BODIES", "run_complex", "bind_complex", "ew_precision"]

_LN2, _LN10 = 0.6931471805599453, 2.302585092994046


# -- complex scalar math (each part a tensor in the compute dtype) ---------------------------------------
@triton.jit
def cmul(ar, ai, br, bi):
    return ar * br - ai * bi, ar * bi + ai * br


@triton.jit
def cdiv(a, b, c, d):
    """(a + ib) / (c + id), Smith's scaling as c10::complex (no overflow of c^2 + d^2); /0 gives inf/NaN."""
    ac = tl.abs(c)
    ad = tl.abs(d)
    big = ac >= ad
    rat = tl.where(big, d / c, c / d)
    scl = 1.0 / tl.where(big, c + d * rat, d + c * rat)
    yr = tl.where(big, (a + b * rat) * scl, (a * rat + b) * scl)
    yi = tl.where(big, (b - a * rat) * scl, (b * rat - a) * scl)
    zero = (ac == 0) & (ad == 0)
    return tl.where(zero, a / ac, yr), tl.where(zero, b / ad, yi)


@triton.jit
def isinf(x):
    return (x == x) & ((x - x) != 0)     # inf - inf is NaN; no float('inf') constant needed in the kernel


@triton.jit
def mz(a, b):
    """a * b where a zero factor wins over an infinite or NaN one (C99's csin(0 + i inf) = 0 + i inf, ...)."""
    return tl.where(a == 0, a, tl.where(b == 0, b, a * b))


@triton.jit
def cexp(x, y):
    e = exp(x)
    real = y == 0                         # exp(x + 0i) = e^x + 0i exactly, also for x = +-inf
    re = tl.where(real, e, mz(e, cos(y)))
    im = tl.where(real, y, mz(e, sin(y)))
    big = (x > 0) & isinf(x) & ((y - y) != 0)        # exp(+inf + i inf or NaN) = inf + i NaN (C99)
    return tl.where(big, x, re), tl.where(big, y - y, im)


@triton.jit
def clog(x, y):
    return log(hypot(x, y)), atan2(y, x)


@triton.jit
def csqrt(x, y):
    """Principal root; branch cut on the negative real axis follows the sign of y (csqrt(-4 - 0i) = -2i)."""
    t = sqrt(0.5 * tl.abs(x) + 0.5 * hypot(x, y))     # halves first: no overflow of |x| + |z|
    t2 = tl.where(t == 0, 1.0, 2.0 * t)
    pos = x >= 0
    re = tl.where(pos, t, tl.abs(y) / t2)
    im = tl.where(pos, y / t2, copysign(t, y))     # the sign of y, -0.0 included: the cut's lower side
    im = tl.where((t == 0) & (y == 0), y, im)
    inf_y = isinf(y)                                    # sqrt(x + i inf) = inf + i inf, even for x = NaN
    return tl.where(inf_y, tl.abs(y), re), tl.where(inf_y, y, im)


@triton.jit
def ctanh(x, y):
    """Kahan's formula (tan, sinh, one division); |x| > 20 is +-1 to the last bit in f32 and f64."""
    t = tan(y)
    b = 1.0 + t * t
    s = sinh(x)
    r = sqrt(1.0 + s * s)
    den = 1.0 + b * s * s
    big = tl.abs(x) > 20.0
    re = tl.where(big, tl.where(x < 0, -1.0, 1.0), b * r * s / den)
    im = tl.where(big, 4.0 * sin(y) * cos(y) * exp(-2.0 * tl.abs(x)), t / den)
    return tl.where(x == 0, x, re), tl.where(x == 0, t, im)      # tanh(0 + iy) = i tan(y), for any y


@triton.jit
def casin(x, y):
    """Kahan: asin z = atan2(x, Re(s1 s2)) + i asinh(Im(conj(s1) s2)), s1 = sqrt(1 - z), s2 = sqrt(1 + z)."""
    s1r, s1i = csqrt(1.0 - x, y * -1.0)
    s2r, s2i = csqrt(1.0 + x, y)
    return atan2(x, s1r * s2r - s1i * s2i), asinh(s1r * s2i - s1i * s2r)


@triton.jit
def cacos(x, y):
    s1r, s1i = csqrt(1.0 - x, y * -1.0)
    s2r, s2i = csqrt(1.0 + x, y)
    return 2.0 * atan2(s1r, s2r), asinh(s2r * s1i - s2i * s1r)


@triton.jit
def catanh(x, y):
    """re = sign(x) log1p(4|x| / ((1 - |x|)^2 + y^2)) / 4, im = atan2(2y, (1 - x)(1 + x) - y^2) / 2.  The real
    part is odd in x: computing it for |x| keeps log1p's argument >= 0 (for x < 0 it would approach -1 near
    z = -1 +- small, e.g. atan near +-i, and lose ~4 digits in f32)."""
    ax = tl.abs(x)
    one_m = 1.0 - ax
    re = 0.25 * log1p(4.0 * ax / (one_m * one_m + y * y))
    im = 0.5 * atan2(2.0 * y, one_m * (1.0 + ax) - y * y)
    inf_y = isinf(y)                                           # atanh(x + i inf) = 0 + i pi/2 sign(y)
    return tl.where(x < 0, -re, re), tl.where(inf_y, copysign(tl.zeros_like(y) + 1.5707963267948966, y), im)


@triton.jit
def cpow(ar, ai, br, bi):
    """exp(b log a); 0^b is 0 (1 for b = 0), as torch's std::pow."""
    lr, li = clog(ar, ai)
    mr, mi = cmul(br, bi, lr, li)
    yr, yi = cexp(mr, mi)
    a0 = (ar == 0) & (ai == 0)
    b0 = (br == 0) & (bi == 0)
    yr = tl.where(b0, 1.0, tl.where(a0, 0.0, yr))
    yi = tl.where(b0 | a0, 0.0, yi)
    return yr, yi


@triton.jit
def csgn(x, y):
    h = hypot(x, y)
    hs = tl.where(h == 0, 1.0, h)
    return tl.where(h == 0, 0.0, x / hs), tl.where(h == 0, 0.0, y / hs)


# -- bodies: (ar, ai, br, bi, cr, ci, p0, p1, p2) -> (yr, yi) ----------------------------------------------
@triton.jit
def _neg(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar * -1.0, ai * -1.0           # keeps the sign of zeros (0 - x would not)


@triton.jit
def _conj(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar, ai * -1.0


@triton.jit
def _real(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar, ar


@triton.jit
def _imag(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ai, ai


@triton.jit
def _abs(ar, ai, br, bi, cr, ci, p0, p1, p2):
    h = hypot(ar, ai)                     # |1e30 + 1e30i| in f32 is 1.41e30, not inf
    return h, h


@triton.jit
def _angle(ar, ai, br, bi, cr, ci, p0, p1, p2):
    t = atan2(ai, ar)
    return t, t


@triton.jit
def _sgn(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return csgn(ar, ai)


@triton.jit
def _scale(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar * p0, ai * p0


@triton.jit
def _square(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cmul(ar, ai, ar, ai)


@triton.jit
def _recip_scaled(ar, ai, br, bi, cr, ci, p0, p1, p2):     # p0 / z
    return cdiv(tl.zeros_like(ar) + p0, tl.zeros_like(ai), ar, ai)


@triton.jit
def _sqrt(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return csqrt(ar, ai)


@triton.jit
def _rsqrt(ar, ai, br, bi, cr, ci, p0, p1, p2):
    sr, si = csqrt(ar, ai)
    return cdiv(tl.zeros_like(ar) + 1.0, tl.zeros_like(ai), sr, si)


@triton.jit
def _exp(ar, ai, br, bi, cr, ci, p0, p1, p2):                # exp(p0 z): exp (p0 = 1), exp2 (p0 = ln 2)
    return cexp(ar * p0, ai * p0)


@triton.jit
def _expm1(ar, ai, br, bi, cr, ci, p0, p1, p2):
    h = sin(0.5 * ai)
    real = ai == 0
    return tl.where(real, expm1(ar), expm1(ar) * cos(ai) - 2.0 * h * h), tl.where(real, ai, exp(ar) * sin(ai))


@triton.jit
def _log(ar, ai, br, bi, cr, ci, p0, p1, p2):                # log(z) * p0: log, log2, log10
    lr, li = clog(ar, ai)
    return lr * p0, li * p0


@triton.jit
def _log1p(ar, ai, br, bi, cr, ci, p0, p1, p2):
    # 0.5 log1p(2x + x^2 + y^2) keeps the digits of small z; far out, log |1 + z| (no overflow of the squares)
    big = tl.abs(ar) + tl.abs(ai) > 1e15
    re = tl.where(big, log(hypot(1.0 + ar, ai)), 0.5 * log1p(ar * (2.0 + ar) + ai * ai))
    return re, atan2(ai, 1.0 + ar)


@triton.jit
def _sin(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return mz(sin(ar), cosh(ai)), mz(sinh(ai), cos(ar))


@triton.jit
def _cos(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return mz(cos(ar), cosh(ai)), mz(sin(ar), sinh(ai)) * -1.0


@triton.jit
def _nsin(ar, ai, br, bi, cr, ci, p0, p1, p2):              # -sin z (cos' derivative)
    return mz(sin(ar), cosh(ai)) * -1.0, mz(sinh(ai), cos(ar)) * -1.0


@triton.jit
def _sinh(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return mz(sinh(ar), cos(ai)), mz(sin(ai), cosh(ar))


@triton.jit
def _cosh(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return mz(cosh(ar), cos(ai)), mz(sinh(ar), sin(ai))


@triton.jit
def _tanh(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ctanh(ar, ai)


@triton.jit
def _tan(ar, ai, br, bi, cr, ci, p0, p1, p2):                # tan z = -i tanh(iz)
    u, v = ctanh(ai * -1.0, ar)
    return v, u * -1.0


@triton.jit
def _asin(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return casin(ar, ai)


@triton.jit
def _acos(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cacos(ar, ai)


@triton.jit
def _asinh(ar, ai, br, bi, cr, ci, p0, p1, p2):              # asinh z = -i asin(iz)
    u, v = casin(ai * -1.0, ar)
    return v, u * -1.0


@triton.jit
def _acosh(ar, ai, br, bi, cr, ci, p0, p1, p2):
    # Kahan: re = asinh(Re(conj(s1) s2)), im = 2 atan2(Im s1, Re s2), s1 = sqrt(z - 1), s2 = sqrt(z + 1)
    s1r, s1i = csqrt(ar - 1.0, ai)
    s2r, s2i = csqrt(ar + 1.0, ai)
    return asinh(s1r * s2r + s1i * s2i), 2.0 * atan2(s1i, s2r)


@triton.jit
def _atanh(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return catanh(ar, ai)


@triton.jit
def _atan(ar, ai, br, bi, cr, ci, p0, p1, p2):               # atan z = -i atanh(iz)
    u, v = catanh(ai * -1.0, ar)
    return v, u * -1.0


@triton.jit
def _sigmoid(ar, ai, br, bi, cr, ci, p0, p1, p2):
    er, ei = cexp(ar * -1.0, ai * -1.0)
    return cdiv(tl.zeros_like(ar) + 1.0, tl.zeros_like(ai), 1.0 + er, ei)


@triton.jit
def _isnan(ar, ai, br, bi, cr, ci, p0, p1, p2):
    r = (ar != ar) | (ai != ai)
    return r, r


@triton.jit
def _isinf(ar, ai, br, bi, cr, ci, p0, p1, p2):
    r = isinf(ar) | isinf(ai)
    return r, r


@triton.jit
def _isfinite(ar, ai, br, bi, cr, ci, p0, p1, p2):
    r = ((ar - ar) == 0) & ((ai - ai) == 0)
    return r, r


@triton.jit
def _pow_scalar(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cpow(ar, ai, tl.zeros_like(ar) + p0, tl.zeros_like(ai))


@triton.jit
def _add(ar, ai, br, bi, cr, ci, p0, p1, p2):      # a + alpha b, alpha = p0 + i p1 (a complex product)
    mr, mi = cmul(tl.zeros_like(br) + p0, tl.zeros_like(bi) + p1, br, bi)
    return ar + mr, ai + mi


def _alpha_sel(sign):
    """add / sub: torch computes a + alpha * b with alpha a complex number (a - alpha b is a + (-alpha) b), so a real
    alpha's zero imaginary part meets b's infinities as torch's does (1 + inf i -> nan + inf i)."""
    return lambda d: (_add, sign * complex(d.attr("alpha")).real, sign * complex(d.attr("alpha")).imag, 0.0, False)


@triton.jit
def _mul(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cmul(ar, ai, br, bi)


@triton.jit
def _div(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cdiv(ar, ai, br, bi)


@triton.jit
def _pow(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return cpow(ar, ai, br, bi)


@triton.jit
def _eq(ar, ai, br, bi, cr, ci, p0, p1, p2):
    r = (ar == br) & (ai == bi)
    return r, r


@triton.jit
def _ne(ar, ai, br, bi, cr, ci, p0, p1, p2):
    r = (ar != br) | (ai != bi)
    return r, r


@triton.jit
def _isclose(ar, ai, br, bi, cr, ci, p0, p1, p2):           # torch: |a - b| <= atol + |rtol b| (complex moduli)
    close = (ar == br) & (ai == bi)
    nan_a = (ar != ar) | (ai != ai)
    nan_b = (br != br) | (bi != bi)
    close = close | (((tl.zeros_like(ar) + p2) != 0) & nan_a & nan_b)
    actual = hypot(ar - br, ai - bi)
    ok = ((actual - actual) == 0) & (actual <= p1 + hypot(p0 * br, p0 * bi))
    r = close | ok
    return r, r


@triton.jit
def _lerp(ar, ai, br, bi, cr, ci, p0, p1, p2):               # scalar weight p0
    return ar + p0 * (br - ar), ai + p0 * (bi - ai)


@triton.jit
def _lerp_tensor(ar, ai, br, bi, cr, ci, p0, p1, p2):        # torch's two-sided formula, |w| < 0.5 picks the side
    dr = br - ar
    di = bi - ai
    small = hypot(cr, ci) < 0.5
    lr, li = cmul(cr, ci, dr, di)
    hr, hi = cmul(dr, di, 1.0 - cr, ci * -1.0)
    return tl.where(small, ar + lr, br - hr), tl.where(small, ai + li, bi - hi)


@triton.jit
def _where(ar, ai, br, bi, cr, ci, p0, p1, p2):
    c = ar != 0
    return tl.where(c, br, cr), tl.where(c, bi, ci)


@triton.jit
def _addcmul(ar, ai, br, bi, cr, ci, p0, p1, p2):
    mr, mi = cmul(br, bi, cr, ci)
    return ar + p0 * mr, ai + p0 * mi


@triton.jit
def _addcdiv(ar, ai, br, bi, cr, ci, p0, p1, p2):
    qr, qi = cdiv(br, bi, cr, ci)
    return ar + p0 * qr, ai + p0 * qi


@triton.jit
def _polar(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar * cos(br), ar * sin(br)


@triton.jit
def _from_parts(ar, ai, br, bi, cr, ci, p0, p1, p2):
    return ar, br


# derivatives f'(z) of the saved operand, for HOLO backward helpers (the template applies g * conj(f'))
@triton.jit
def _d_ident(ar, ai, br, bi, cr, ci, p0, p1, p2):            # f' = p0 y (exp: 1, exp2: ln 2), square: 2 x
    return ar * p0, ai * p0


@triton.jit
def _d_plus1(ar, ai, br, bi, cr, ci, p0, p1, p2):            # expm1: y + 1
    return ar + 1.0, ai


@triton.jit
def _d_recip1p(ar, ai, br, bi, cr, ci, p0, p1, p2):          # log1p: 1 / (1 + x)
    return cdiv(tl.zeros_like(ar) + 1.0, tl.zeros_like(ai), 1.0 + ar, ai)


@triton.jit
def _d_rsqrt(ar, ai, br, bi, cr, ci, p0, p1, p2):            # -y^3 / 2
    sr, si = cmul(ar, ai, ar, ai)
    cr3, ci3 = cmul(sr, si, ar, ai)
    return -0.5 * cr3, -0.5 * ci3


@triton.jit
def _d_recip(ar, ai, br, bi, cr, ci, p0, p1, p2):            # -y^2
    sr, si = cmul(ar, ai, ar, ai)
    return sr * -1.0, si * -1.0


@triton.jit
def _d_tanh(ar, ai, br, bi, cr, ci, p0, p1, p2):             # 1 - y^2
    sr, si = cmul(ar, ai, ar, ai)
    return 1.0 - sr, si * -1.0


@triton.jit
def _d_tan(ar, ai, br, bi, cr, ci, p0, p1, p2):              # 1 + tan(x)^2
    u, v = ctanh(ai * -1.0, ar)
    sr, si = cmul(v, u * -1.0, v, u * -1.0)
    return 1.0 + sr, si


@triton.jit
def _d_sigmoid(ar, ai, br, bi, cr, ci, p0, p1, p2):          # y (1 - y)
    return cmul(ar, ai, 1.0 - ar, ai * -1.0)


@triton.jit
def _d_invsqrt(ar, ai, br, bi, cr, ci, p0, p1, p2):          # p0 / sqrt(p1 + p2 x^2): asin, acos, asinh, acosh
    sr, si = cmul(ar, ai, ar, ai)
    qr, qi = csqrt(p1 + p2 * sr, p2 * si)
    return cdiv(tl.zeros_like(ar) + p0, tl.zeros_like(ai), qr, qi)


@triton.jit
def _d_invquad(ar, ai, br, bi, cr, ci, p0, p1, p2):          # 1 / (p1 + p2 x^2): atan, atanh
    sr, si = cmul(ar, ai, ar, ai)
    return cdiv(tl.zeros_like(ar) + 1.0, tl.zeros_like(ai), p1 + p2 * sr, p2 * si)


@triton.jit
def _d_pow_scalar(ar, ai, br, bi, cr, ci, p0, p1, p2):       # e x^(e - 1), 0 for e = 0
    yr, yi = cpow(ar, ai, tl.zeros_like(ar) + (p0 - 1.0), tl.zeros_like(ai))
    return tl.where(p0 == 0, 0.0, p0 * yr), tl.where(p0 == 0, 0.0, p0 * yi)


# backward helpers that are not g * conj(f'(z)): operands (g, saved...)
@triton.jit
def _abs_bw(ar, ai, br, bi, cr, ci, p0, p1, p2):             # Re(g) z / |z| (0 at 0)
    sr, si = csgn(br, bi)
    return ar * sr, ar * si


@triton.jit
def _angle_bw(ar, ai, br, bi, cr, ci, p0, p1, p2):           # Re(g) i z / |z|^2 (0 at 0)
    a2 = br * br + bi * bi
    den = tl.where(a2 == 0, 1.0, a2)
    return tl.where(a2 == 0, 0.0, ar * (bi * -1.0) / den), tl.where(a2 == 0, 0.0, ar * br / den)


@triton.jit
def _sgn_bw(ar, ai, br, bi, cr, ci, p0, p1, p2):             # (g - Re(conj(g) s) s) / |z|, s = z / |z|
    h = hypot(br, bi)
    hs = tl.where(h == 0, 1.0, h)
    sr = br / hs
    si = bi / hs
    t = ar * sr + ai * si
    return tl.where(h == 0, 0.0, (ar - t * sr) / hs), tl.where(h == 0, 0.0, (ai - t * si) / hs)


@triton.jit
def _where_bw(ar, ai, br, bi, cr, ci, p0, p1, p2):           # (g, cond): p0 = 1 keeps cond, 0 keeps ~cond
    keep = (br != 0) == (p0 != 0)
    return tl.where(keep, ar, 0.0), tl.where(keep, ai, 0.0)


@triton.jit
def _div_bw_b(ar, ai, br, bi, cr, ci, p0, p1, p2):           # -g conj(a / b^2)
    sr, si = cmul(cr, ci, cr, ci)
    qr, qi = cdiv(br, bi, sr, si)
    return (ar * qr + ai * qi) * -1.0, (ai * qr - ar * qi) * -1.0


@triton.jit
def _pow_bw_a(ar, ai, br, bi, cr, ci, p0, p1, p2):           # g conj(b a^(b-1)), 0 for b = 0
    pr, pi = cpow(br, bi, cr - 1.0, ci)
    dr, di = cmul(cr, ci, pr, pi)
    b0 = (cr == 0) & (ci == 0)
    return tl.where(b0, 0.0, ar * dr + ai * di), tl.where(b0, 0.0, ai * dr - ar * di)


@triton.jit
def _pow_bw_b(ar, ai, br, bi, cr, ci, p0, p1, p2):           # g conj(a^b log a), 0 where a = 0 and Re b >= 0
    pr, pi = cpow(br, bi, cr, ci)
    lr, li = clog(br, bi)
    dr, di = cmul(pr, pi, lr, li)
    z = (br == 0) & (bi == 0) & (cr >= 0)
    return tl.where(z, 0.0, ar * dr + ai * di), tl.where(z, 0.0, ai * dr - ar * di)


# -- the template ----------------------------------------------------------------------------------------
@triton.jit
def _load(ptr, off, two, mask, CPLX: tl.constexpr, CT: tl.constexpr):
    if CPLX:
        v = tl.load(ptr + (2 * off)[:, None] + two[None, :], mask=mask[:, None]).to(CT)
        re, im = tl.split(v)
    else:
        re = tl.load(ptr + off, mask=mask).to(CT)
        im = tl.zeros_like(re)
    return re, im


@fast_kernel
def _cew_kernel(out_ptr, a_ptr, b_ptr, c_ptr, n, p0: tl.float64, p1: tl.float64, p2: tl.float64,
                S1, S2, S3, S4, S5, a0, a1, a2, a3, a4, a5, b0, b1, b2, b3, b4, b5, c0, c1, c2, c3, c4, c5,
                FN: tl.constexpr, NIN: tl.constexpr, CA: tl.constexpr, CB: tl.constexpr, CC: tl.constexpr,
                OUTC: tl.constexpr, HOLO: tl.constexpr, STRIDED: tl.constexpr, CT: tl.constexpr,
                I64: tl.constexpr, BLOCK: tl.constexpr, INTERP: tl.constexpr):
    offs, mask = _flat_offsets(n, I64, BLOCK)
    two = tl.arange(0, 2)
    if STRIDED:
        oa = strided_offset(offs, S1, S2, S3, S4, S5, a0, a1, a2, a3, a4, a5)
        ob = strided_offset(offs, S1, S2, S3, S4, S5, b0, b1, b2, b3, b4, b5)
        oc = strided_offset(offs, S1, S2, S3, S4, S5, c0, c1, c2, c3, c4, c5)
    else:
        oa = offs
        ob = offs
        oc = offs
    q0 = _param(p0, CT, INTERP)
    q1 = _param(p1, CT, INTERP)
    q2 = _param(p2, CT, INTERP)
    ar, ai = _load(a_ptr, oa, two, mask, CA, CT)
    if NIN >= 2:
        br, bi = _load(b_ptr, ob, two, mask, CB, CT)
    else:
        br = ar
        bi = ai
    if NIN >= 3:
        cr, ci = _load(c_ptr, oc, two, mask, CC, CT)
    else:
        cr = ar
        ci = ai
    if HOLO:     # (g, saved): g * conj(f'(saved))
        dr, di = FN(br, bi, cr, ci, cr, ci, q0, q1, q2)
        yr = ar * dr + ai * di
        yi = ai * dr - ar * di
    else:
        yr, yi = FN(ar, ai, br, bi, cr, ci, q0, q1, q2)
    ty = out_ptr.dtype.element_ty
    if OUTC:
        y = tl.join(yr.to(ty), yi.to(ty))
        tl.store(out_ptr + (2 * offs)[:, None] + two[None, :], y, mask=mask[:, None])
    else:
        tl.store(out_ptr + offs, yr.to(ty), mask=mask)


def _flat(x: torch.Tensor) -> torch.Tensor:
    """The tensor the kernel addresses: the float view of a complex tensor (conj/neg bits resolved first)."""
    if x.is_complex():
        return torch.view_as_real(x.resolve_conj().resolve_neg())
    return x


def launch(fn, inputs, out, p0=0.0, p1=0.0, p2=0.0, ct=tl.float32, holo=False) -> None:
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    n = target.numel()
    if n == 0:
        return
    shape = tuple(target.shape)
    ins = [x.resolve_conj().resolve_neg() if x.is_complex() else x for x in inputs]
    strided = not all(tuple(x.shape) == shape and x.is_contiguous() for x in ins)
    S, st = [1] * 6, [[0] * 6 for _ in range(3)]
    if strided:
        p = padded(shape, [_expanded_strides(x, shape) for x in ins])
        if p is None:   # > 6 dims after collapsing (rare): a documented contiguize step
            ins = [x.expand(shape).contiguous() for x in ins]
            strided = False
        else:
            S, sts = p
            st[:len(sts)] = sts
    flats = [_flat(x) for x in ins]
    i64 = max([2 * n] + [span(f) for f in flats]) >= 2 ** 31 - 65536
    cplx = [x.is_complex() for x in ins]
    nin = len(ins)
    while len(flats) < 3:
        flats.append(flats[0])
        cplx.append(cplx[0])
    # 2048 complex elements per program on the contiguous path (16 KB of c64 per operand, 8 warps);
    # the strided path does 6-dim index math per element: 1024 per program, 4 warps
    block = 1024 if strided else 2048
    _cew_kernel[(ceil_div(n, block),)](
        _flat(target), flats[0], flats[1], flats[2], n, float(p0), float(p1), float(p2), *S[1:], *st[0], *st[1],
        *st[2], FN=fn, NIN=nin, CA=cplx[0], CB=cplx[1], CC=cplx[2], OUTC=target.is_complex(), HOLO=holo,
        STRIDED=strided, CT=ct, I64=i64, BLOCK=block, INTERP=INTERPRETING, num_warps=4 if strided else 8)
    if target is not out:
        out.copy_(target)


# -- selection -------------------------------------------------------------------------------------------
def _c(fn, p0=0.0, p1=0.0, p2=0.0, holo=False):
    return lambda d: (fn, p0, p1, p2, holo)


def _h(fn, p0=1.0, p1=0.0, p2=0.0):
    return _c(fn, p0, p1, p2, holo=True)


def _pow_scalar_sel(d):
    e = float(d.attr("exponent"))
    if e == 2.0:
        return _square, 0.0, 0.0, 0.0, False
    if e == 0.5:
        return _sqrt, 0.0, 0.0, 0.0, False
    return _pow_scalar, e, 0.0, 0.0, False


def _isclose_sel(d):
    return _isclose, d.attr("rtol"), d.attr("atol"), float(d.attr("equal_nan")), False


# op -> (desc) -> (body, p0, p1, p2, holo)
COMPLEX_BODIES = {
    "neg": _c(_neg), "conj": _c(_conj), "real": _c(_real), "imag": _c(_imag), "abs": _c(_abs), "angle": _c(_angle),
    "sgn": _c(_sgn), "mul_scalar": lambda d: (_scale, d.attr("scalar"), 0.0, 0.0, False), "square": _c(_square),
    "reciprocal": _c(_recip_scaled, 1.0), "sqrt": _c(_sqrt), "rsqrt": _c(_rsqrt), "exp": _c(_exp, 1.0), "exp2": _c(_exp, _LN2),
    "expm1": _c(_expm1), "log": _c(_log, 1.0), "log2": _c(_log, 1.0 / _LN2), "log10": _c(_log, 1.0 / _LN10),
    "log1p": _c(_log1p), "sin": _c(_sin), "cos": _c(_cos), "tan": _c(_tan), "sinh": _c(_sinh), "cosh": _c(_cosh),
    "tanh": _c(_tanh), "asin": _c(_asin), "acos": _c(_acos), "atan": _c(_atan), "asinh": _c(_asinh),
    "acosh": _c(_acosh), "atanh": _c(_atanh), "sigmoid": _c(_sigmoid), "isnan": _c(_isnan), "isinf": _c(_isinf),
    "isfinite": _c(_isfinite), "pow_scalar": _pow_scalar_sel,
    "add": _alpha_sel(1.0), "sub": _alpha_sel(-1.0),
    "mul": _c(_mul), "div": _c(_div), "true_divide": _c(_div), "pow": _c(_pow), "eq": _c(_eq), "ne": _c(_ne),
    "isclose": _isclose_sel, "lerp": lambda d: (_lerp, d.attr("weight"), 0.0, 0.0, False),
    "lerp_tensor": _c(_lerp_tensor), "where": _c(_where),
    "addcmul": lambda d: (_addcmul, d.attr("value"), 0.0, 0.0, False),
    "addcdiv": lambda d: (_addcdiv, d.attr("value"), 0.0, 0.0, False),
    "polar": _c(_polar), "complex": _c(_from_parts),
    # backward helpers
    "exp_backward": _h(_d_ident), "exp2_backward": _h(_d_ident, _LN2), "expm1_backward": _h(_d_plus1),
    "log_backward": _h(_recip_scaled), "log2_backward": _h(_recip_scaled, 1.0 / _LN2),
    "log10_backward": _h(_recip_scaled, 1.0 / _LN10), "log1p_backward": _h(_d_recip1p),
    "sqrt_backward": _h(_recip_scaled, 0.5), "rsqrt_backward": _h(_d_rsqrt), "reciprocal_backward": _h(_d_recip),
    "sin_backward": _h(_cos), "cos_backward": _h(_nsin), "tan_backward": _h(_d_tan), "sinh_backward": _h(_cosh),
    "cosh_backward": _h(_sinh), "tanh_backward": _h(_d_tanh), "sigmoid_backward": _h(_d_sigmoid),
    "asin_backward": _h(_d_invsqrt, 1.0, 1.0, -1.0), "acos_backward": _h(_d_invsqrt, -1.0, 1.0, -1.0),
    "asinh_backward": _h(_d_invsqrt, 1.0, 1.0, 1.0), "acosh_backward": _h(_d_invsqrt, 1.0, -1.0, 1.0),
    "atan_backward": _h(_d_invquad, 1.0, 1.0, 1.0), "atanh_backward": _h(_d_invquad, 1.0, 1.0, -1.0),
    "square_backward": _h(_d_ident, 2.0),
    "pow_scalar_backward": lambda d: (_d_pow_scalar, float(d.attr("exponent")), 0.0, 0.0, True),
    "abs_backward": _c(_abs_bw), "angle_backward": _c(_angle_bw), "sgn_backward": _c(_sgn_bw),
    "where_backward": lambda d: (_where_bw, 1.0 if d.attr("branch") == 1 else 0.0, 0.0, 0.0, False),
    "div_backward_b": _c(_div_bw_b), "pow_backward_a": _c(_pow_bw_a), "pow_backward_b": _c(_pow_bw_b),
}

_CT = {DType.c64: tl.float32, DType.c128: tl.float64}


def run_complex(desc, inputs, outputs, ws) -> None:
    fn, p0, p1, p2, holo = COMPLEX_BODIES[desc.op](desc)
    launch(fn, list(inputs), outputs[0], p0, p1, p2, ct=_CT[ew_compute_dtype(desc)], holo=holo)


def bind_complex(desc, pref):
    """Per-plan run (as the real template's ``_bind``): when every operand has the output's shape, the
    contiguous launch is prepared once and relaunched through ``Launcher`` with the float views' pointers
    (one view_as_real per complex tensor per call); other layouts and conj/neg views take ``launch``."""
    from .._lib.launch import Launcher

    shape, n = desc.outputs[0].shape, desc.outputs[0].numel
    if n == 0 or any(t.shape != shape for t in desc.inputs):
        return run_complex
    fn, p0, p1, p2, holo = COMPLEX_BODIES[desc.op](desc)
    cplx = [t.dtype.is_complex for t in desc.inputs]
    nin = len(cplx)
    cplx += [cplx[0]] * (3 - nin)
    tail = (n, float(p0), float(p1), float(p2)) + (1,) * 5 + (0,) * 18
    const = dict(FN=fn, NIN=nin, CA=cplx[0], CB=cplx[1], CC=cplx[2], OUTC=desc.outputs[0].dtype.is_complex,
                 HOLO=holo, STRIDED=False, CT=_CT[ew_compute_dtype(desc)], I64=2 * n >= 2 ** 31 - 65536,
                 BLOCK=2048, INTERP=INTERPRETING)
    bound = Launcher(_cew_kernel).bind((ceil_div(n, 2048),), tail, const, num_warps=8)

    def run(d, inputs, outputs, ws):
        out = outputs[0]
        if not (out.is_contiguous() and all(x.is_contiguous() and not (x.is_conj() or x.is_neg()) for x in inputs)):
            return run_complex(d, inputs, outputs, ws)
        xs = [torch.view_as_real(x) if x.is_complex() else x for x in inputs]
        xs += [xs[0]] * (3 - nin)   # unused operand slots (never read: NIN is a constexpr)
        bound(torch.view_as_real(out) if out.is_complex() else out, *xs)
    return run


def ew_precision(desc, pref=None) -> PrecisionGuarantee:
    """f64 (and c128) math computes in f64; every other dtype in f32 (half types load/store in their dtype)."""
    ct = ew_compute_dtype(desc)
    if ct in (DType.f64, DType.c128):
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)
    return PrecisionGuarantee(MathPrecision.F32, DType.f32, True, True)


# real-dtype bodies of the new rows (conj / real of a real tensor, angle of a real tensor, their backward)
@triton.jit
def _r_ident(x, p0, p1, p2):
    return x


@triton.jit
def _r_angle(x, p0, p1, p2):   # torch: pi (p0, an f64 kernel scalar: a literal would be f32) for x < 0, else 0
    return tl.where(x != x, x, tl.where(x < 0, p0, 0.0))


@triton.jit
def _r_zero_bw(g, x, p0, p1, p2):   # angle / sgn of a real tensor: piecewise constant, zero gradient
    return tl.zeros_like(g)


REAL_BODIES = {
    "conj": lambda d, is_int: (_r_ident, 0.0, 0.0, 0.0), "real": lambda d, is_int: (_r_ident, 0.0, 0.0, 0.0),
    "angle": lambda d, is_int: (_r_angle, math.pi, 0.0, 0.0),
    "angle_backward": lambda d, is_int: (_r_zero_bw, 0.0, 0.0, 0.0),
    "sgn_backward": lambda d, is_int: (_r_zero_bw, 0.0, 0.0, 0.0),
}
