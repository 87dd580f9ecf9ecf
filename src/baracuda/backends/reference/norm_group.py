"""NumPy float64 bodies of group_norm, instance_norm, batch_norm, local_response_norm, normalize (+ backward)."""
from __future__ import annotations

import numpy as np

from . import register_reference


def _affine(y, shape, c, aff):
    bshape = (1, c) + (1,) * (len(shape) - 2)
    if len(aff) > 0:
        y = y * aff[0].reshape(bshape)
    if len(aff) > 1:
        y = y + aff[1].reshape(bshape)
    return y


def _gn(desc, x, *aff):
    n, c = x.shape[:2]
    g = desc.attr("num_groups") if desc.op == "group_norm" else c
    x3 = x.reshape(n, g, int(np.prod(x.shape[1:])) // g)
    with np.errstate(all="ignore"):
        # an empty group (no spatial elements): mean 0 and a NaN variance, so rstd is NaN (torch's
        # native_group_norm)
        mean = x3.mean(axis=2) if x3.size else np.zeros((n, g))
        var = ((x3 - mean[:, :, None]) ** 2).mean(axis=2) if x3.size else np.full((n, g), np.nan)
        rstd = 1.0 / np.sqrt(var + desc.attr("eps"))
    y = ((x3 - mean[:, :, None]) * rstd[:, :, None]).reshape(x.shape)
    return _affine(y, x.shape, c, aff), mean, rstd


def _extra(desc, rest):
    """(weight tuple, c0, c1) from the operands after rstd (c0, c1 present with extra=True)."""
    if desc.attr("extra"):
        return rest[:-2], rest[-2], rest[-1]
    return rest, None, None


def _gn_bw(desc, g, x, mean, rstd, *rest):
    w, c0, c1 = _extra(desc, rest)
    n, c = x.shape[:2]
    G = desc.attr("num_groups")
    s = int(np.prod(x.shape[2:]))
    x4 = x.reshape(n, G, c // G, s)
    g4 = g.reshape(n, G, c // G, s)
    xhat = (x4 - mean[:, :, None, None]) * rstd[:, :, None, None]
    wg = g4 * (w[0].reshape(1, G, c // G, 1) if w else 1.0)
    L = (c // G) * s
    with np.errstate(all="ignore"):
        mg = wg.sum(axis=(2, 3), keepdims=True) / max(L, 1)
        mgx = (wg * xhat).sum(axis=(2, 3), keepdims=True) / max(L, 1)
    dx = rstd[:, :, None, None] * (wg - mg - xhat * mgx)
    if c0 is not None:
        dx = dx + c0[:, :, None, None] + c1[:, :, None, None] * xhat
    res = [dx.reshape(x.shape)]
    if w:
        res.append((g4 * xhat).sum(axis=(0, 3)).reshape(c))
    if desc.attr("has_bias"):
        res.append(g4.sum(axis=(0, 3)).reshape(c))
    return tuple(res)


def _chan(x):
    """(C, M) view: every channel's values over N x spatial."""
    return np.moveaxis(x, 1, 0).reshape(x.shape[1], -1)


def _bn(desc, x, *ins):
    c = x.shape[1]
    aff = ins[: min(len(ins), 2)]
    run = ins[2:4]
    eps, mom = desc.attr("eps"), desc.attr("momentum")
    bshape = (1, c) + (1,) * (x.ndim - 2)
    if desc.attr("training"):
        xc = _chan(x)
        m = xc.shape[1]
        mean = xc.mean(axis=1)
        var = ((xc - mean[:, None]) ** 2).mean(axis=1)
    else:
        mean, var = run
    rstd = 1.0 / np.sqrt(var + eps)
    y = _affine((x - mean.reshape(bshape)) * rstd.reshape(bshape), x.shape, c, aff)
    out = (y, mean, rstd)
    if desc.attr("training") and run:
        out += ((1 - mom) * run[0] + mom * mean, (1 - mom) * run[1] + mom * var * (m / (m - 1)))
    return out


def _bn_bw(desc, g, x, mean, rstd, *rest):
    w, c0, c1 = _extra(desc, rest)
    c = x.shape[1]
    bshape = (1, c) + (1,) * (x.ndim - 2)
    xhat = (x - mean.reshape(bshape)) * rstd.reshape(bshape)
    gc, xh = _chan(g), _chan(xhat)
    wv = w[0] if w else np.ones(c)
    db = gc.sum(axis=1)
    dw = (gc * xh).sum(axis=1)
    if desc.attr("training"):
        m = max(gc.shape[1], 1)
        dx = (rstd * wv).reshape(bshape) * (g - (db / m).reshape(bshape) - xhat * (dw / m).reshape(bshape))
    else:
        dx = g * (rstd * wv).reshape(bshape)
    if c0 is not None:
        dx = dx + c0.reshape(bshape) + c1.reshape(bshape) * xhat
    res = [dx]
    if w:
        res.append(dw)
    if desc.attr("has_bias"):
        res.append(db)
    return tuple(res)


def _lrn_den(desc, x):
    """(k + alpha/size * window sum of x^2) over channels, window [c - size//2, c + (size-1)//2], zero padded."""
    size = desc.attr("size")
    c = x.shape[1]
    sq = x * x
    pad = np.zeros(x.shape[:1] + (c + size - 1,) + x.shape[2:])
    pad[:, size // 2: size // 2 + c] = sq
    s = sum(pad[:, j: j + c] for j in range(size))
    if desc.attr("floor_mean"):
        return desc.attr("k") + desc.attr("alpha") * np.floor(s / size)
    return desc.attr("k") + desc.attr("alpha") / size * s


def _lrn(desc, x):
    return x * _lrn_den(desc, x) ** -desc.attr("beta")


def _lrn_bw(desc, g, x):
    size, beta = desc.attr("size"), desc.attr("beta")
    d = _lrn_den(desc, x)
    t = g * x * d ** (-beta - 1)
    c = x.shape[1]
    # channel j is in the window of c for c in [j - (size-1)//2, j + size//2]
    pad = np.zeros(x.shape[:1] + (c + size - 1,) + x.shape[2:])
    pad[:, (size - 1) // 2: (size - 1) // 2 + c] = t
    s = sum(pad[:, j: j + c] for j in range(size))
    return g * d ** -beta - 2.0 * desc.attr("alpha") * beta / size * x * s


def _pnorm(x, p, ax):
    if np.isinf(p):
        return (np.max if p > 0 else np.min)(np.abs(x), axis=ax, keepdims=True)
    if p == 0:     # torch.norm's p = 0: the count of nonzeros
        return np.sum(x != 0, axis=ax, keepdims=True).astype(np.float64)
    with np.errstate(divide="ignore"):    # p < 0 and a zero entry: inf in the sum, a 0 norm (as torch)
        return np.sum(np.abs(x) ** p, axis=ax, keepdims=True) ** (1.0 / p)


def _one_d(fn):
    """A 0-d x as the 1-element row it is (torch's dim 0 / -1 of a scalar)."""
    def body(desc, *xs):
        if np.ndim(xs[-1]):
            return fn(desc, *xs)
        return fn(desc, *[np.reshape(a, 1) for a in xs]).reshape(())
    return body


@_one_d
def _normalize(desc, x):
    if x.size == 0:
        return x
    return x / np.maximum(_pnorm(x, desc.attr("p"), desc.attr("dim")), desc.attr("eps"))


@_one_d
def _normalize_bw(desc, g, x):
    if x.size == 0:
        return g
    p, ax, eps = desc.attr("p"), desc.attr("dim"), desc.attr("eps")
    n = _pnorm(x, p, ax)
    den = np.maximum(n, eps)
    gx = np.sum(g * x, axis=ax, keepdims=True)
    if np.isinf(p):
        hit = (np.abs(x) == n).astype(np.float64)
        dn = np.sign(x) * hit / np.sum(hit, axis=ax, keepdims=True)
    elif p == 0:   # a count: no gradient (torch's norm backward returns none)
        dn = np.zeros_like(x)
    else:          # sign(x) |x|^(p-1) / n^(p-1), 0 at x == 0 (torch masks it for p < 1) and where n == 0
        with np.errstate(all="ignore"):
            dn = np.where(x != 0, np.sign(x) * (np.abs(x) / n) ** (p - 1), 0.0)
        dn = np.where(n > 0, dn, 0.0)
    return g / den - np.where(n >= eps, gx / (den * den), 0.0) * dn


for _name, _fn in {"group_norm": _gn, "instance_norm": _gn, "group_norm_backward": _gn_bw, "batch_norm": _bn,
                   "batch_norm_backward": _bn_bw, "local_response_norm": _lrn,
                   "local_response_norm_backward": _lrn_bw, "normalize": _normalize,
                   "normalize_backward": _normalize_bw}.items():
    register_reference(_name, _fn)
