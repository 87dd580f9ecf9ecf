"""NumPy float64 bodies of the softmax family (the oracle for the Triton kernels)."""
from __future__ import annotations

import numpy as np

from ...ops.softmax import SOFTMAX_OPS
from . import register_reference


def _prep(desc, x):
    """Round to the dtype= cast first (torch casts the input before computing), then compute in f64."""
    dt = desc.attr("dtype")
    if dt is not None:
        x = x.astype(dt.numpy).astype(np.float64)
    x = x.reshape(x.shape or (1,))
    return x, desc.attr("dim")


def _log_softmax(desc, x):
    shape = x.shape
    z, ax = _prep(desc, x)
    if z.size == 0:
        return z.reshape(shape)
    with np.errstate(all="ignore"):  # a row of -inf gives NaN, as torch
        m = np.max(z, axis=ax, keepdims=True)
        zs = z - m
        return (zs - np.log(np.sum(np.exp(zs), axis=ax, keepdims=True))).reshape(shape)


def _softmax(desc, x):
    shape = x.shape
    z, ax = _prep(desc, x)
    if z.size == 0:
        return z.reshape(shape)
    with np.errstate(all="ignore"):
        e = np.exp(z - np.max(z, axis=ax, keepdims=True))
        return (e / np.sum(e, axis=ax, keepdims=True)).reshape(shape)


def _softmax_bw(desc, g, y):
    shape = g.shape
    ax = desc.attr("dim")
    g, y = g.reshape(shape or (1,)), y.reshape(shape or (1,))
    with np.errstate(all="ignore"):
        return (y * (g - np.sum(g * y, axis=ax, keepdims=True))).reshape(shape)


def _log_softmax_bw(desc, g, y):
    shape = g.shape
    ax = desc.attr("dim")
    g, y = g.reshape(shape or (1,)), y.reshape(shape or (1,))
    with np.errstate(all="ignore"):
        return (g - np.exp(y) * np.sum(g, axis=ax, keepdims=True)).reshape(shape)


BODIES = {"softmax": _softmax, "softmin": lambda desc, x: _softmax(desc, -x), "log_softmax": _log_softmax,
          "softmax_backward": _softmax_bw, "log_softmax_backward": _log_softmax_bw}
assert set(SOFTMAX_OPS) <= set(BODIES)

for _name, _fn in BODIES.items():
    register_reference(_name, _fn)
