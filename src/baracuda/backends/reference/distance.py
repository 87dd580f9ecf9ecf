"""NumPy float64 bodies of the distance ops (the oracle; explicit pairwise differences, clarity over speed)."""
from __future__ import annotations

import math

import numpy as np

from . import register_reference


def _pnorm(diff, p, axis=-1, keepdims=False):
    a = np.abs(diff)
    if p == np.inf:
        return np.max(a, axis=axis, keepdims=keepdims) if a.shape[axis] else np.zeros(np.sum(a, axis, keepdims=keepdims).shape)
    if p == 0:
        return np.sum(a != 0, axis=axis, keepdims=keepdims).astype(np.float64)
    if p == 1:
        return np.sum(a, axis=axis, keepdims=keepdims)
    if p == 2:
        return np.sqrt(np.sum(a * a, axis=axis, keepdims=keepdims))
    return np.sum(a ** p, axis=axis, keepdims=keepdims) ** (1.0 / p)


def _dgrad(diff, dist, p):
    """d dist / d diff for one pair (torch's _cdist_backward / _pdist_backward conventions)."""
    s = np.sign(diff)
    a = np.abs(diff)
    if p == 0:
        return np.zeros_like(diff)
    if p == 1:
        return s
    if p == 2:
        return np.where(dist == 0, 0.0, diff / np.where(dist == 0, 1.0, dist))
    if math.isinf(p):
        return s * (a == dist)
    if p < 2:
        r = np.where(dist == 0, 0.0, s * a ** (p - 1) / dist ** (p - 1))
        return np.where((diff == 0) & (p < 1), 0.0, r)
    return np.where(dist == 0, 0.0, diff * a ** (p - 2) / dist ** (p - 1))


def _cos(d, x1, x2):
    dim, eps = d.attr("dim"), d.attr("eps")
    a, b = np.broadcast_arrays(x1, x2)
    n1 = np.maximum(np.sqrt(np.sum(a * a, axis=dim, keepdims=True)), eps)
    n2 = np.maximum(np.sqrt(np.sum(b * b, axis=dim, keepdims=True)), eps)
    return np.sum((a / n1) * (b / n2), axis=dim)


def _cos_bw(d, g, x1, x2):
    dim, eps = d.attr("dim"), d.attr("eps")
    a, b = np.broadcast_arrays(x1, x2)
    n1 = np.sqrt(np.sum(a * a, axis=dim, keepdims=True))
    n2 = np.sqrt(np.sum(b * b, axis=dim, keepdims=True))
    c1, c2 = np.maximum(n1, eps), np.maximum(n2, eps)
    s12 = np.sum(a * b, axis=dim, keepdims=True)
    g = np.expand_dims(g, dim)
    u1 = np.where(n1 == 0, 0.0, a / np.where(n1 == 0, 1.0, n1))
    u2 = np.where(n2 == 0, 0.0, b / np.where(n2 == 0, 1.0, n2))
    return g * (b / (c1 * c2) - s12 * u1 / (c1 * c1 * c2)), g * (a / (c1 * c2) - s12 * u2 / (c2 * c2 * c1))


def _pairwise(d, x1, x2):
    diff = x1 - x2 + d.attr("eps")
    return _pnorm(diff, d.attr("p"), -1, d.attr("keepdim")) if diff.shape[-1] or not math.isinf(d.attr("p")) else \
        np.zeros(diff.shape[:-1] + ((1,) if d.attr("keepdim") else ()))


def _pdist(d, x):
    i, j = np.triu_indices(x.shape[0], 1)
    return _pnorm(x[i] - x[j], d.attr("p"))


def _pdist_bw(d, g, x, out):
    n = x.shape[0]
    i, j = np.triu_indices(n, 1)
    t = g[:, None] * _dgrad(x[i] - x[j], out[:, None], d.attr("p"))
    dx = np.zeros_like(x)
    np.add.at(dx, i, t)
    np.add.at(dx, j, -t)
    return dx


def _cdist(d, x1, x2):
    diff = x1[..., :, None, :] - x2[..., None, :, :]
    out = np.zeros(np.broadcast_shapes(x1.shape[:-2], x2.shape[:-2]) + (x1.shape[-2], x2.shape[-2]))
    if out.size and x1.shape[-1]:
        out[...] = _pnorm(diff, d.attr("p"))
    return out


def _cdist_bw(d, g, x1, x2, out):
    t = g[..., None] * _dgrad(x1[..., :, None, :] - x2[..., None, :, :], out[..., None], d.attr("p"))
    return np.sum(t, axis=-2) if d.attr("wrt") == 0 else -np.sum(t, axis=-3)


BODIES = {"cosine_similarity": _cos, "cosine_similarity_backward": _cos_bw, "pairwise_distance": _pairwise,
          "pdist": _pdist, "pdist_backward": _pdist_bw, "cdist": _cdist, "cdist_backward": _cdist_bw}

for _name, _fn in BODIES.items():
    def _run(desc, *xs, _fn=_fn):
        with np.errstate(all="ignore"):   # 0 ** negative p -> inf, masked 0 / 0: as torch
            return _fn(desc, *xs)
    register_reference(_name, _run)
