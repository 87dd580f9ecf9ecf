"""NumPy float64 bodies of gumbel_softmax and sparsemax (+ backward), and the NumPy Philox-4x32-10 that
reproduces tl.randint bit for bit (the Gumbel uniforms of both backends are identical for a seed)."""
from __future__ import annotations

import numpy as np

from . import register_reference

_M32 = np.uint64(0xFFFFFFFF)
_KEY_A, _KEY_B = np.uint64(0x9E3779B9), np.uint64(0xBB67AE85)
_ROUND_A, _ROUND_B = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)


def philox_u32(seed: int, counter: np.ndarray, rounds: int = 10) -> np.ndarray:
    """First uint32 of Philox-4x32 on counters (c0, c1, 0, 0) = (counter lo, counter hi), key = seed (lo, hi)."""
    c = counter.astype(np.uint64)
    c0, c1 = c & _M32, (c >> np.uint64(32)) & _M32
    c2 = np.zeros_like(c0)
    c3 = np.zeros_like(c0)
    k0, k1 = np.uint64(seed & 0xFFFFFFFF), np.uint64((seed >> 32) & 0xFFFFFFFF)
    for _ in range(rounds):
        pa, pb = _ROUND_A * c0, _ROUND_B * c2      # < 2^64: exact in uint64
        c0, c1, c2, c3 = ((pb >> np.uint64(32)) ^ c1 ^ k0) & _M32, pb & _M32, ((pa >> np.uint64(32)) ^ c3 ^ k1) & _M32, \
            pa & _M32
        k0, k1 = (k0 + _KEY_A) & _M32, (k1 + _KEY_B) & _M32
    return c0.astype(np.uint32)


def gumbel_uniform(seed: int, shape) -> np.ndarray:
    """U in (0, 1) for every element of ``shape`` (row-major counter), exactly as the Triton kernel draws it."""
    n = int(np.prod(shape))
    r = philox_u32(seed, np.arange(n, dtype=np.uint64))
    k = (r >> np.uint32(9)).astype(np.float64)
    return ((2.0 * k + 1.0) * 2.0 ** -24).reshape(shape)


def _soft(desc, x):
    ax = desc.attr("dim") if x.ndim else 0
    z = x.reshape(x.shape or (1,))
    u = gumbel_uniform(desc.attr("seed"), z.shape)
    z = (z - np.log(-np.log(u))) / desc.attr("tau")
    if z.size == 0:
        return z, z, ax
    e = np.exp(z - z.max(axis=ax, keepdims=True))
    return e / e.sum(axis=ax, keepdims=True), z, ax


def _gumbel(desc, x):
    y, z, ax = _soft(desc, x)
    if desc.attr("hard") and z.size:
        idx = np.argmax(z, axis=ax)
        hot = np.zeros_like(y)
        np.put_along_axis(hot, np.expand_dims(idx, ax), 1.0, axis=ax)
        y = (hot - y) + y
    return y.reshape(x.shape)


def _gumbel_bw(desc, g, x):
    y, _, ax = _soft(desc, x)
    g = g.reshape(y.shape)
    return (y * (g - np.sum(g * y, axis=ax, keepdims=True)) / desc.attr("tau")).reshape(x.shape)


def sparsemax_f64(x, ax):
    """Sort-based sparsemax (the textbook algorithm) along axis ``ax``."""
    if x.size == 0:
        return x.copy()
    z = np.moveaxis(x, ax, -1)
    zs = -np.sort(-z, axis=-1)
    k = np.arange(1, z.shape[-1] + 1)
    cs = np.cumsum(zs, axis=-1)
    ok = 1.0 + k * zs > cs
    kz = np.sum(ok, axis=-1, keepdims=True)
    tau = (np.take_along_axis(cs, kz - 1, axis=-1) - 1.0) / kz
    return np.moveaxis(np.maximum(z - tau, 0.0), -1, ax)


def _sparsemax(desc, x):
    return sparsemax_f64(x.reshape(x.shape or (1,)), desc.attr("dim") if x.ndim else 0).reshape(x.shape)


def _sparsemax_bw(desc, g, y):
    ax = desc.attr("dim") if g.ndim else 0
    g2, y2 = g.reshape(g.shape or (1,)), y.reshape(y.shape or (1,))
    s = (y2 > 0).astype(np.float64)
    with np.errstate(all="ignore"):
        m = np.sum(g2 * s, axis=ax, keepdims=True) / np.maximum(np.sum(s, axis=ax, keepdims=True), 1.0)
    return (s * (g2 - m)).reshape(g.shape)


for _name, _fn in {"gumbel_softmax": _gumbel, "gumbel_softmax_backward": _gumbel_bw, "sparsemax": _sparsemax,
                   "sparsemax_backward": _sparsemax_bw}.items():
    register_reference(_name, _fn)
