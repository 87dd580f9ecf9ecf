"""NumPy complex128 bodies of the elementwise family (merged into ``elementwise.BODIES``).

NumPy's complex functions follow C99 Annex G (principal branches, signed-zero branch cuts) like torch's
std::complex ones.  Backward helpers of holomorphic functions are g * conj(f'(z)) (torch's convention for
complex autograd); the real bodies are linear in g (``g * f'(x)``), so ``holomorphic`` evaluates them at
g = 1 and conjugates, instead of restating every derivative.
"""
from __future__ import annotations

import numpy as np

__all__ = ["COMPLEX_BODIES", "COMPLEX_OVERRIDES", "NOT_HOLOMORPHIC", "holomorphic", "to_c128"]


def _cplx(*xs) -> bool:
    return any(np.iscomplexobj(x) for x in xs)


def to_c128(re, im):
    """re + i im without the NaN that ``re + 1j * im`` makes of an infinite im (1j * inf = nan + inf j)."""
    re, im = np.broadcast_arrays(np.real(re), np.real(im))
    out = np.empty(re.shape, np.complex128)
    out.real, out.imag = re, im
    return out


def _sgn(x):
    """z / |z| part by part (as torch: sgn(0 + i inf) = 0 + i NaN; a complex division would give NaN + i NaN)."""
    a = np.abs(x)
    a1 = np.where(a == 0, 1, a)
    return np.where(a == 0, 0, to_c128(np.real(x) / a1, np.imag(x) / a1))


def holomorphic(fn):
    """A real backward body g * f'(x) -> g * conj(f'(z)) when an operand is complex (unchanged otherwise)."""
    def body(d, g, *xs):
        if not _cplx(g, *xs):
            return fn(d, g, *xs)
        return g * np.conj(fn(d, np.ones_like(g), *xs))
    return body


def _isclose_c(d, a, b):
    rtol, atol, eqnan = d.attr("rtol"), d.attr("atol"), d.attr("equal_nan")
    close = a == b
    if eqnan:
        close = close | (np.isnan(a) & np.isnan(b))
    actual = np.abs(a - b)
    return close | (np.isfinite(actual) & (actual <= atol + np.abs(rtol * b)))


def _angle(d, x):
    if np.iscomplexobj(x):
        return np.angle(x)
    return np.where(np.isnan(x), x, np.where(x < 0, np.pi, 0.0))   # torch: -0.0 -> 0, not pi


def _angle_bw(d, g, x):
    if not np.iscomplexobj(x):
        return np.zeros(np.broadcast(g, x).shape)
    a2 = np.abs(x) ** 2
    return np.where(a2 == 0, 0, np.real(g) * 1j * x / np.where(a2 == 0, 1, a2))


def _abs_bw(d, g, x):
    if not np.iscomplexobj(x):
        return g * np.sign(x)
    return np.real(g) * _sgn(x)


def _sgn_fw(d, x):
    if np.iscomplexobj(x):
        return _sgn(x)
    return x if x.dtype == np.bool_ else np.where(np.isnan(x), 0, np.sign(x)).astype(x.dtype)


def _sgn_bw(d, g, x):
    """(g - Re(conj(g) s) s) / |z| with s = z / |z|; 0 at z = 0 (torch's sgn_backward); 0 for real z."""
    if not np.iscomplexobj(x):
        return np.zeros(np.broadcast(g, x).shape)
    a = np.abs(x)
    s = _sgn(x)
    return np.where(a == 0, 0, (g - np.real(np.conj(g) * s) * s) / np.where(a == 0, 1, a))


def _lerp_c(d, a, b, w):
    diff = b - a
    return np.where(np.abs(w) < 0.5, a + w * diff, b - diff * (1.0 - w))


def _pow_bw_b(d, g, a, b):
    if not _cplx(g, a, b):
        return np.where((a == 0) & (b >= 0), 0.0, g * np.power(a, b) * np.log(a))
    return np.where((a == 0) & (np.real(b) >= 0), 0, g * np.conj(np.power(a, b) * np.log(a)))


# bodies that replace the real ones where a complex operand can occur (each also handles real operands)
COMPLEX_BODIES = {
    "sgn": _sgn_fw,
    "sgn_backward": _sgn_bw,
    "abs_backward": _abs_bw,
    "angle": _angle,
    "angle_backward": _angle_bw,
    "conj": lambda d, x: np.conj(x),
    "real": lambda d, x: np.real(x),
    "imag": lambda d, x: np.imag(x),
    "polar": lambda d, a, b: to_c128(np.real(a) * np.cos(np.real(b)), np.real(a) * np.sin(np.real(b))),
    "complex": lambda d, a, b: to_c128(a, b),
    "pow_backward_b": _pow_bw_b,
}
# complex-capable backward helpers that are not g * f'(z) (the rest get ``holomorphic``)
NOT_HOLOMORPHIC = frozenset({"sgn_backward", "abs_backward", "angle_backward", "where_backward", "pow_backward_b"})
# real bodies that do not carry over to complex operands: op -> the body for complex descriptors
COMPLEX_OVERRIDES = {
    "isnan": lambda d, x: np.isnan(x),
    "isinf": lambda d, x: np.isinf(x),
    "isfinite": lambda d, x: np.isfinite(x),
    "isclose": _isclose_c,
    "lerp_tensor": _lerp_c,
}
