"""NumPy float64 bodies of ctc_loss / ctc_loss_backward: the alpha / beta recursions per sequence, in log space."""
from __future__ import annotations

import numpy as np

from ...ops.loss_ctc import ctc_geometry, validate_ctc
from . import register_reference


def _lse(*xs):
    m = np.maximum.reduce(xs)
    ms = np.where(np.isneginf(m), 0.0, m)
    with np.errstate(divide="ignore"):
        return ms + np.log(sum(np.exp(x - ms) for x in xs))


def _shift(a, k):
    """a[s - k] (-inf where s < k); k < 0 shifts the other way."""
    out = np.full_like(a, -np.inf)
    if k > 0:
        out[k:] = a[:-k]
    else:
        out[:k] = a[-k:]
    return out


def _sequences(desc, lp, tg, il, tl_):
    """Per sequence: (log_probs [T_n, C], extended labels l' [2L+1], skip mask: alpha_t(s) may come from s-2)."""
    t, n, c, batched, padded, _ = ctc_geometry((lp.shape, np.shape(tg)))
    blank = desc.attr("blank")
    offs = validate_ctc(desc.op, t, c, padded, tg, il, tl_, blank)
    lp3 = lp if batched else lp[:, None, :]
    flat = np.asarray(tg).astype(np.int64).reshape(-1)
    il1, tl1 = np.atleast_1d(il).astype(np.int64), np.atleast_1d(tl_).astype(np.int64)
    for k in range(n):
        lab = np.full(2 * tl1[k] + 1, blank, np.int64)
        lab[1::2] = flat[offs[k]:offs[k] + tl1[k]]
        skip = np.zeros(lab.shape, bool)
        skip[2:] = (lab[2:] != blank) & (lab[2:] != lab[:-2])
        yield k, lp3[:il1[k], k, :], lab, skip, tl1[k]


def _alpha(x, lab, skip):
    a = np.full((x.shape[0], len(lab)), -np.inf)
    if x.shape[0] == 0:
        return a
    a[0, :2] = x[0, lab[:2]]
    for t in range(1, x.shape[0]):
        p = a[t - 1]
        a[t] = x[t, lab] + _lse(p, _shift(p, 1), np.where(skip, _shift(p, 2), -np.inf))
    return a


def _nll(a, tlen):
    if a.shape[0] == 0:
        return 0.0 if tlen == 0 else np.inf
    return -_lse(a[-1, -1], a[-1, -2] if a.shape[1] > 1 else -np.inf)


def _per_seq(desc, lp, tg, il, tl_):
    out = []
    for k, x, lab, skip, tlen in _sequences(desc, lp, tg, il, tl_):
        a = _alpha(x, lab, skip)
        out.append((k, x, lab, skip, tlen, a, float(_nll(a, tlen))))
    return out


def _ctc(desc, lp, tg, il, tl_):
    rows = _per_seq(desc, lp, tg, il, tl_)
    loss = np.array([r[-1] for r in rows])
    tl1 = np.atleast_1d(tl_).astype(np.int64)
    if desc.attr("zero_infinity"):
        loss = np.where(np.isinf(loss), 0.0, loss)
    red = desc.attr("reduction")
    if red == "none":
        return loss.reshape(desc.outputs[0].shape)
    if red == "sum":
        return np.asarray(loss.sum())
    with np.errstate(all="ignore"):
        return np.asarray((loss / np.maximum(tl1, 1)).mean())


def _ctc_bw(desc, g, lp, tg, il, tl_):
    rows = _per_seq(desc, lp, tg, il, tl_)
    out = np.zeros(lp.shape if lp.ndim == 3 else (lp.shape[0], 1, lp.shape[1]))
    red = desc.attr("reduction")
    n = len(rows)
    g = np.asarray(g, np.float64).reshape(-1)
    for k, x, lab, skip, tlen, a, nll in rows:
        sc = g[k] if red == "none" else (g[0] if red == "sum" else g[0] / (max(tlen, 1) * n))
        if x.shape[0] == 0 or (desc.attr("zero_infinity") and np.isinf(nll)):
            continue
        b = np.full_like(a, -np.inf)
        tn = x.shape[0]
        b[-1, -2:] = x[-1, lab[-2:]] if len(lab) > 1 else x[-1, lab[-1:]]
        skip_up = np.zeros(lab.shape, bool)   # beta_t(s) may come from s + 2
        skip_up[:-2] = skip[2:]
        for t in range(tn - 2, -1, -1):
            q = b[t + 1]
            b[t] = x[t, lab] + _lse(q, _shift(q, -1), np.where(skip_up, _shift(q, -2), -np.inf))
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.exp(a + b - x[:, lab] + nll)      # [T_n, 2L+1] state occupancies
        out[:tn, k, :] = sc * np.exp(x)                # torch's convention: + exp(log_probs) (module doc)
        for s, c in enumerate(lab):
            out[:tn, k, c] -= sc * e[:, s]
    return out.reshape(lp.shape)


register_reference("ctc_loss", _ctc)
register_reference("ctc_loss_backward", _ctc_bw)
