"""NumPy float64 bodies of gumbel_softmax and sparsemax (+ backward), with the Gumbel uniforms of the
NumPy Philox-4x32-10 (reference/random.py), bit-identical to tl.randint: both backends draw the same noise for a seed."""
from __future__ import annotations

import numpy as np

from . import register_reference
from .random import philox_u32


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
