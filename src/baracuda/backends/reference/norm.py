"""NumPy float64 bodies of the normalization family."""
from __future__ import annotations

import numpy as np

from . import register_reference


def _rows(desc, x):
    n = int(np.prod(desc.attr("normalized_shape")))
    return x.reshape(-1, n), n


def _rms_stats(desc, x2):
    return 1.0 / np.sqrt(np.mean(x2 * x2, axis=1, keepdims=True) + desc.attr("eps"))


def _ln_stats(desc, x2):
    mean = np.mean(x2, axis=1, keepdims=True)
    xc = x2 - mean
    return xc, 1.0 / np.sqrt(np.mean(xc * xc, axis=1, keepdims=True) + desc.attr("eps"))


def _rms_norm(desc, x, w=None):
    x2, n = _rows(desc, x)
    y = x2 * _rms_stats(desc, x2) if x2.size else x2
    if w is not None:
        y = y * w.reshape(1, n)
    return y.reshape(x.shape)


def _layer_norm(desc, x, w=None, b=None):
    x2, n = _rows(desc, x)
    if x2.size:
        xc, rstd = _ln_stats(desc, x2)
        y = xc * rstd
    else:
        y = x2
    if w is not None:
        y = y * w.reshape(1, n)
    if b is not None:
        y = y + b.reshape(1, n)
    return y.reshape(x.shape)


def _bw(desc, g, x, w, xhat, rstd, centered):
    """dx = rstd * (wg - [mean(wg)] - xhat * mean(wg * xhat)), dweight = sum(g * xhat), dbias = sum(g)."""
    n = xhat.shape[1]
    wg = g * (w.reshape(1, n) if w is not None else 1.0)
    dx = wg - xhat * np.mean(wg * xhat, axis=1, keepdims=True)
    if centered:
        dx = dx - np.mean(wg, axis=1, keepdims=True)
    res = [(rstd * dx).reshape(x.shape)]
    ns = desc.attr("normalized_shape")
    if w is not None:
        res.append(np.sum(g * xhat, axis=0).reshape(ns))
    if centered and w is not None and desc.attr("has_bias"):
        res.append(np.sum(g, axis=0).reshape(ns))
    return tuple(res)


def _rms_norm_bw(desc, g, x, w=None):
    x2, n = _rows(desc, x)
    g2 = g.reshape(-1, n)
    rstd = _rms_stats(desc, x2) if x2.size else np.zeros((0, 1))
    return _bw(desc, g2, x, w, x2 * rstd, rstd, False)


def _layer_norm_bw(desc, g, x, w=None):
    x2, n = _rows(desc, x)
    g2 = g.reshape(-1, n)
    if x2.size:
        xc, rstd = _ln_stats(desc, x2)
    else:
        xc, rstd = x2, np.zeros((0, 1))
    return _bw(desc, g2, x, w, xc * rstd, rstd, True)


def _add_rms_norm(desc, x, r, w):
    s = (x + r).astype(desc.outputs[0].dtype.numpy).astype(np.float64)   # s is rounded, as torch's x + r
    return s, _rms_norm(desc, s, w)


def _add_layer_norm(desc, x, r, w, b=None):
    s = (x + r).astype(desc.outputs[0].dtype.numpy).astype(np.float64)
    return s, _layer_norm(desc, s, w, b)


for _name, _fn in {"add_rms_norm": _add_rms_norm, "add_layer_norm": _add_layer_norm, "rms_norm": _rms_norm, "layer_norm": _layer_norm,
                   "rms_norm_backward": _rms_norm_bw,
                   "layer_norm_backward": _layer_norm_bw}.items():
    register_reference(_name, _fn)
