"""NumPy float64 bodies of the loss family (the oracle for the Triton kernels)."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.loss import LOSS_OPS, LSE_FAR, POINTWISE_LOSSES, lse_rows, rows_shape
from . import register_reference


def _rows(a):
    """[N, C, d1, ...] (or [C]) -> [R, C] with the class dim last, R = N * d1 * ... rows."""
    a = np.asarray(a)
    if a.ndim == 1:
        return a[None, :]
    return np.moveaxis(a, 1, -1).reshape(-1, a.shape[1])


def _unrows(d, shape):
    """Inverse of _rows: [R, C] -> the input's shape."""
    if len(shape) == 1:
        return d.reshape(shape)
    return np.moveaxis(d.reshape((shape[0],) + tuple(shape[2:]) + (shape[1],)), -1, 1)


def _split(desc, xs):
    """(grad, x [R, C], target [R] or [R, C], weight): N-D inputs flattened to rows (class dim last); the backward
    ops' leading saved outputs (cross_entropy_backward's lse) are left off."""
    bw = desc.op.endswith("_backward")
    g = xs[0] if bw else None
    xs = xs[(2 if desc.op == "cross_entropy_backward" else 1):] if bw else xs
    x, t = xs[0], np.asarray(xs[1])
    w = xs[2] if len(xs) > 2 else None
    t = _rows(t) if t.dtype.kind == "f" else t.reshape(-1)
    if g is not None:
        g = np.asarray(g).reshape(-1) if np.ndim(g) else g
    return g, _rows(x), t, w


def _shaped(fn):
    """Wrap a row-wise body: 'none' losses take the rows' shape, input gradients the input's shape;
    cross_entropy also returns the rows' logsumexp."""
    def body(desc, *xs):
        out = fn(desc, *xs)
        shape = desc.outputs[0].shape
        if desc.op.endswith("_backward"):
            return _unrows(out, shape)
        out = np.asarray(out).reshape(shape)
        return (out, lse_rows(xs[0])) if desc.op == "cross_entropy" else out
    return body


def _index_rows(desc, x, t, w):
    """(valid row mask, safe class index, w[t] with 0 on ignored rows). Raises on out-of-range indices."""
    n, c = x.shape
    t = np.asarray(t).astype(np.int64)
    valid = t != desc.attr("ignore_index")
    bad = valid & ((t < 0) | (t >= c))
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidProblemError(desc.op, "target", f"class indices in [0, {c}) or ignore_index="
                                  f"{desc.attr('ignore_index')}", f"target[{i}] = {int(t[i])}")
    ts = np.where(valid, t, 0)
    wv = np.ones(c) if w is None else w
    return valid, ts, np.where(valid, wv[ts], 0.0)


def _log_softmax(x):
    """log_softmax over the class dim, shifted by the row max first: lse - x never forms lse itself, which
    absorbs log(sum) at |x| ~ 3e38 (3e38 + log 2 == 3e38 in float64: the loss would read 0 instead of log 2)."""
    if x.size == 0:
        return x
    with np.errstate(invalid="ignore"):      # a row of -inf only: NaN, as torch
        z = x - x.max(axis=1, keepdims=True)
        return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def _reduce(desc, loss, denom):
    red = desc.attr("reduction")
    if red == "none":
        return loss
    s = loss.sum()
    if red == "sum":
        return np.asarray(s)
    with np.errstate(all="ignore"):
        return np.asarray(s / denom)


def _scale(desc, g, denom, n):
    red = desc.attr("reduction")
    if red == "none":
        return g
    with np.errstate(all="ignore"):
        return np.full(n, g / denom if red == "mean" else g)


def _smoothed(desc, x, t, w):
    """Per row: (lse, target distribution y' [N, C], class weights [C], row weight for the mean)."""
    n, c = x.shape
    eps = desc.attr("label_smoothing")
    wc = np.ones(c) if w is None else w
    if np.asarray(t).dtype.kind == "f":
        y = t * (1 - eps) + eps / c
        return y, wc, np.ones(n), np.ones(n, bool)
    valid, ts, wt = _index_rows(desc, x, t, w)
    y = np.full((n, c), eps / c)
    y[np.arange(n), ts] += 1 - eps
    return y, wc, wt, valid


def _ce(desc, *xs):
    _, x, t, w = _split(desc, xs)
    nls = -_log_softmax(x)
    if np.asarray(t).dtype.kind == "f":
        # torch's -sum_c w_c y'_c log p_c as is: a zero probability on a -inf logit gives NaN there too
        y, wc, wrow, _ = _smoothed(desc, x, t, w)
        return _reduce(desc, (wc * y * nls).sum(axis=1), wrow.sum())
    # class indices: the target term and the smoothing term apart, so a masked (-inf) class the one-hot does
    # not pick adds nothing (0 * inf would be NaN; torch's loss is finite there, inf with smoothing)
    eps, c = desc.attr("label_smoothing"), x.shape[1]
    valid, ts, wt = _index_rows(desc, x, t, w)
    per = (1 - eps) * wt * nls[np.arange(x.shape[0]), ts]
    if eps:
        wc = np.ones(c) if w is None else w
        per = per + eps / c * (wc * nls).sum(axis=1)
    return _reduce(desc, np.where(valid, per, 0.0), wt.sum())


def _ce_bw(desc, *xs):
    g, x, t, w = _split(desc, xs)
    n = x.shape[0]
    y, wc, wrow, valid = _smoothed(desc, x, t, w)
    lse = np.asarray(xs[1], np.float64).reshape(-1, 1)   # the forward's, as given (the op is defined with it)
    with np.errstate(invalid="ignore"):   # a row of -inf only (lse -inf): NaN, as torch
        far = ~(np.abs(lse) < LSE_FAR)   # such rows take the softmax of their own max and sum (ops/loss.py)
        p = np.where(far, np.exp(_log_softmax(x)), np.exp(x - np.where(far, 0.0, lse)))
    wy = wc * y
    d = p * wy.sum(axis=1, keepdims=True) - wy
    sc = np.where(valid, _scale(desc, g, wrow.sum(), n), 0.0)
    return d * sc[:, None]


def _nll(desc, *xs):
    _, x, t, w = _split(desc, xs)
    valid, ts, wt = _index_rows(desc, x, t, w)
    loss = np.where(valid, -wt * x[np.arange(x.shape[0]), ts], 0.0)
    return _reduce(desc, loss, wt.sum())


def _nll_bw(desc, *xs):
    g, x, t, w = _split(desc, xs)
    n = x.shape[0]
    valid, ts, wt = _index_rows(desc, x, t, w)
    d = np.zeros(x.shape)
    sc = np.where(valid, _scale(desc, g, wt.sum(), n), 0.0)
    d[np.arange(n), ts] = -wt * sc
    return d


def _lce(desc, x, w, t, b=None):
    """linear_cross_entropy: (loss, dx, dW[, db]) for grad_out = 1, all in float64 on the full logits."""
    n, v = x.shape[0], w.shape[0]
    l = x @ w.T + (b if b is not None else 0.0)
    cap = desc.attr("softcap")
    u = cap * np.tanh(l / cap) if cap is not None else l
    eps, z = desc.attr("label_smoothing"), desc.attr("z_loss")
    valid, ts, _ = _index_rows(desc, u, t, None)
    lse = lse_rows(u)
    y = np.full((n, v), eps / v)
    y[np.arange(n), ts] += 1 - eps
    per = np.where(valid, (y * (lse[:, None] - u)).sum(axis=1) + z * lse ** 2, 0.0)
    kept = valid.sum()
    mean = desc.attr("reduction") == "mean"
    with np.errstate(all="ignore"):
        loss = per.sum() / kept if mean else per.sum()
        scale = np.where(valid, 1.0 / kept if mean else 1.0, 0.0)
    p = np.exp(u - lse[:, None])
    du = (p * (1 + 2 * z * lse[:, None]) - y) * scale[:, None]
    dl = du * (1 - (u / cap) ** 2) if cap is not None else du
    res = (np.asarray(loss), dl @ w, dl.T @ x)
    return res + ((dl.sum(axis=0),) if b is not None else ())


def _pw_f(base, d, desc):
    """(f(d), f'(d)) of the pointwise losses."""
    a = np.abs(d)
    if base == "mse_loss":
        return d * d, 2 * d
    if base == "l1_loss":
        return a, np.sign(d)
    if base == "smooth_l1_loss":
        b = desc.attr("beta")
        if b == 0.0:
            return a, np.sign(d)
        return np.where(a < b, 0.5 * d * d / b, a - 0.5 * b), np.where(a < b, d / b, np.sign(d))
    dl = desc.attr("delta")
    return np.where(a < dl, 0.5 * d * d, dl * (a - 0.5 * dl)), np.where(a < dl, d, dl * np.sign(d))


def _pw(base):
    def fw(desc, x, y):
        f, _ = _pw_f(base, x - y, desc)
        red = desc.attr("reduction")
        if red == "none":
            return f
        with np.errstate(all="ignore"):
            return np.asarray(f.sum() / f.size if red == "mean" else f.sum())

    def bw(desc, g, x, y):
        _, fp = _pw_f(base, x - y, desc)
        red = desc.attr("reduction")
        with np.errstate(all="ignore"):
            sc = g if red == "none" else (g / x.size if red == "mean" else g)
        return fp * sc
    return fw, bw


BODIES = {k: _shaped(f) for k, f in (("cross_entropy", _ce), ("cross_entropy_backward", _ce_bw), ("nll_loss", _nll),
                                      ("nll_loss_backward", _nll_bw))}
assert set(LOSS_OPS) <= set(BODIES)
BODIES["linear_cross_entropy"] = _lce
for _base in POINTWISE_LOSSES:
    BODIES[_base], BODIES[f"{_base}_backward"] = _pw(_base)

for _name, _fn in BODIES.items():
    register_reference(_name, _fn)
