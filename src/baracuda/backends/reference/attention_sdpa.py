"""NumPy float64 bodies of sdpa / sdpa_backward / sdpa_varlen / sdpa_varlen_backward: the materialized [Sq, Sk]
scores of every (batch, head), the oracle the flash kernels are tested against; and the dropout keep mask from
``tl_rand`` (Triton's tl.rand bit for bit; its NumPy Philox lives in reference/random.py, shared by the library)."""
from __future__ import annotations

import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.attention_fp8 import DESCALE_NAMES
from . import register_reference
from .random import tl_rand


def dropout_keep(seed: int, counters: np.ndarray, p: float) -> np.ndarray:
    """The dropout keep mask: u >= float32(p) (the kernel compares in float32)."""
    return tl_rand(seed, counters) >= np.float32(p)


def dense_counters(offset: int, B: int, Hq: int, Sq: int, Sk: int, rows: int | None = None, cols: int | None = None,
                   b0: int = 0) -> np.ndarray:
    """int64 counters [B, Hq, Sq, Sk]: offset + ((b * Hq + h) * rows + i) * cols + j, b from b0 (rows / cols: Sq / Sk
    for sdpa, max_seqlen_q / _k for varlen)."""
    rows, cols = Sq if rows is None else rows, Sk if cols is None else cols
    b = np.arange(b0, b0 + B, dtype=np.int64)[:, None, None, None]
    h = np.arange(Hq, dtype=np.int64)[None, :, None, None]
    i = np.arange(Sq, dtype=np.int64)[None, None, :, None]
    j = np.arange(Sk, dtype=np.int64)[None, None, None, :]
    return offset + ((b * Hq + h) * rows + i) * cols + j


# -- the dense problem, bhsd, float64 --------------------------------------------------------------------------
def band_allowed(Sq: int, Sk: int, attrs: dict, arange):
    """The causal / window part of the exclusions, [Sq, Sk] bool (True = allowed), in the array library of
    ``arange`` (n -> a 1-d integer array: NumPy's for the reference, torch's for the peer)."""
    i = arange(Sq)[:, None]
    j = arange(Sk)[None, :]
    off = 0 if attrs["causal"] == "top_left" else Sk - Sq
    ok = (i >= 0) & (j >= 0)
    if attrs["causal"] != "none":
        ok &= j <= i + off
    if attrs["window_left"] is not None:
        ok &= j >= i + off - attrs["window_left"]
    if attrs["window_right"] is not None:
        ok &= j <= i + off + attrs["window_right"]
    return ok


def _allowed(Sq: int, Sk: int, a: dict) -> np.ndarray:
    """[Sq, Sk]: causal and window exclusions (True = allowed)."""
    return band_allowed(Sq, Sk, a, np.arange)


def _scores(q, k, extras: dict, a: dict):
    """(s, t): s [B, Hq, Sq, Sk] the final scores (-inf where excluded), t = tanh(raw / softcap) (None without
    softcap: the backward's derivative 1 - t^2)."""
    B, Hq, Sq, _ = q.shape
    Sk, G = k.shape[2], Hq // max(k.shape[1], 1)
    s = a["scale"] * np.einsum("bhid,bhjd->bhij", q, np.repeat(k, G, axis=1))
    t = None
    if a["softcap"]:
        t = np.tanh(s / a["softcap"])
        s = a["softcap"] * t
    ok = np.broadcast_to(_allowed(Sq, Sk, a), s.shape)
    slopes = extras.get("alibi_slopes")
    if slopes is not None:
        dist = np.abs(np.arange(Sq)[:, None] + (Sk - Sq) - np.arange(Sk)[None, :])
        s = s - (slopes[:, None, None] if slopes.ndim == 1 else slopes[:, :, None, None]) * dist
    m = extras.get("mask")
    if m is not None:
        if m.dtype == bool:
            ok = ok & m
        else:
            s = s + m
    bm = extras.get("block_mask")
    if bm is not None:
        bs = a["block_size"]
        ok = ok & np.repeat(np.repeat(bm, bs, axis=2), bs, axis=3)[:, :, :Sq, :Sk]
    return np.where(ok, s, -np.inf), t


def _probs(s, lse):
    """P = exp(s - lse), 0 in a row with every key excluded (lse = -inf) and at excluded keys."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isfinite(lse)[..., None] & np.isfinite(s), np.exp(s - lse[..., None]), 0.0)


def _keep(a: dict, shape, counters):
    """keep / (1 - p) (the dropout factor of each P entry), or None without dropout."""
    p = a["dropout_p"]
    if not p:
        return None
    return dropout_keep(a["seed"], counters, p) / (1.0 - p)


def attend(q, k, v, extras: dict, a: dict, counters=None):
    """(out [B, Hq, Sq, Dv], lse [B, Hq, Sq]) of one dense bhsd problem in float64."""
    s, _ = _scores(q, k, extras, a)
    with np.errstate(divide="ignore"):
        m = np.max(s, axis=-1, initial=-np.inf)
        mf = np.where(np.isfinite(m), m, 0.0)
        lse = mf + np.log(np.sum(np.exp(s - mf[..., None]), axis=-1))
    P = _probs(s, lse)
    f = _keep(a, s.shape, counters)
    if f is not None:
        P = P * f
    G = q.shape[1] // max(k.shape[1], 1)
    return P @ np.repeat(v, G, axis=1), lse


def attend_backward(go, q, k, v, out, lse, extras: dict, a: dict, counters=None, glse=None):
    """(dq, dk, dv) of one dense bhsd problem from the saved out / lse (as the kernel: P from the given lse)."""
    s, t = _scores(q, k, extras, a)
    P = _probs(s, lse)
    Hkv = k.shape[1]
    G = q.shape[1] // max(Hkv, 1)
    kk, vv = np.repeat(k, G, axis=1), np.repeat(v, G, axis=1)
    f = _keep(a, s.shape, counters)
    Pd = P if f is None else P * f
    dv = Pd.swapaxes(-1, -2) @ go
    dP = go @ vv.swapaxes(-1, -2)
    if f is not None:
        dP = dP * f
    delta = np.sum(go * out, axis=-1)
    if glse is not None:
        delta = delta - np.where(np.isfinite(lse), glse, 0.0)
    ds = P * (dP - delta[..., None])
    if t is not None:
        ds = ds * (1.0 - t * t)          # d(c tanh(x / c)) / dx
    ds = a["scale"] * ds
    dq = ds @ kk
    dk = ds.swapaxes(-1, -2) @ q

    def per_kv(x):   # sum the G query heads of each kv head (GQA / MQA)
        return x.reshape(x.shape[0], Hkv, G, *x.shape[2:]).sum(axis=2)
    return dq, per_kv(dk), per_kv(dv)


# -- sdpa / sdpa_backward ----------------------------------------------------------------------------------------
def _extra_dict(a: dict, xs) -> dict:
    names = ("mask",) * a["has_mask"] + ("alibi_slopes",) * a["has_alibi"] + \
        ("block_mask",) * (a["block_size"] is not None) + DESCALE_NAMES * bool(a.get("has_descale"))
    return dict(zip(names, xs))


def dequantized(q, k, v, extras: dict):
    """q, k, v (bhsd float64) times their descale operands (FP8 inputs: [1] or one per head), which leave
    ``extras``; the values the op attends over."""
    ds = [extras.pop(n, None) for n in DESCALE_NAMES]
    return tuple(t if d is None else t * np.asarray(d, np.float64)[None, :, None, None] for t, d in zip((q, k, v), ds))


def _bhsd(layout: str, *ts):
    return tuple(t.swapaxes(1, 2) for t in ts) if layout == "bshd" else ts


def _resolved(a: dict, D: int) -> dict:
    """The attributes with scale None resolved (samples carry the user's attributes, descriptors the numbers)."""
    return a if a.get("scale") is not None else dict(a, scale=1.0 / np.sqrt(D) if D else 1.0)


def sdpa_f64(qkv, extras: dict, a: dict):
    """(out in a["layout"], lse) of sdpa in float64 (arrays in the op's layout, extras by name)."""
    extras = dict(extras)
    q, k, v = dequantized(*_bhsd(a["layout"], *(np.asarray(t, dtype=np.float64) for t in qkv)), extras)
    a = _resolved(a, q.shape[-1])
    counters = dense_counters(a["offset"], *q.shape[:3], k.shape[2]) if a["dropout_p"] else None
    out, lse = attend(q, k, v, extras, a, counters)
    return _bhsd(a["layout"], out)[0], lse


def _sdpa(desc, q, k, v, *extras):
    a = desc.attr_dict
    return sdpa_f64((q, k, v), _extra_dict(a, extras), a)


def _sdpa_backward(desc, go, q, k, v, out, lse, *rest):
    a = desc.attr_dict
    glse = rest[-1] if a["has_grad_lse"] else None
    extras = rest[:-1] if a["has_grad_lse"] else rest
    go, q, k, v, out = _bhsd(a["layout"], *(np.asarray(t, dtype=np.float64) for t in (go, q, k, v, out)))
    ex = _extra_dict(a, extras)
    q, k, v = dequantized(q, k, v, ex)
    counters = dense_counters(a["offset"], *q.shape[:3], k.shape[2]) if a["dropout_p"] else None
    r = attend_backward(go, q, k, v, out, np.asarray(lse, np.float64), ex, a, counters, glse)
    return _bhsd(a["layout"], *r)


register_reference("sdpa", _sdpa)
register_reference("sdpa_backward", _sdpa_backward)


# -- sdpa_varlen / sdpa_varlen_backward: the dense problem per packed sequence ----------------------------------
def cu_bounds(op: str, name: str, cu, total: int, max_len: int, what: str) -> list[int]:
    """The values of a cu_seqlens operand, checked: starting at 0, non-decreasing, ending at ``total``, every
    length <= ``max_len`` (InvalidProblemError naming the argument)."""
    c = np.asarray(cu).astype(np.int64)
    if c[0] != 0:
        raise InvalidProblemError(op, name, "offsets starting at 0", c.tolist())
    lens = np.diff(c)
    if np.any(lens < 0):
        raise InvalidProblemError(op, name, "non-decreasing offsets", c.tolist())
    if c[-1] != total:
        raise InvalidProblemError(op, name, f"offsets ending at {what}={total}", c.tolist())
    if lens.size and lens.max() > max_len:
        mx = "max_seqlen_q" if name.endswith("_q") else "max_seqlen_k"
        raise InvalidProblemError(op, name, f"sequence lengths <= {mx}={max_len}", lens.tolist())
    return c.tolist()


def _sequences(op, q, k, cu_q, cu_k, slopes, a):
    """Per sequence b: (q rows, k rows, extras, dropout counters) of its dense [1, H, S, .] problem."""
    cq = cu_bounds(op, "cu_seqlens_q", cu_q, q.shape[0], a["max_seqlen_q"], "Tq")
    ck = cu_bounds(op, "cu_seqlens_k", cu_k, k.shape[0], a["max_seqlen_k"], "Tk")
    for b in range(len(cq) - 1):
        rq, rk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        ex = {} if slopes is None else {"alibi_slopes": slopes if slopes.ndim == 1 else slopes[b]}
        cnt = dense_counters(a["offset"], 1, q.shape[1], cq[b + 1] - cq[b], ck[b + 1] - ck[b], a["max_seqlen_q"],
                             a["max_seqlen_k"], b0=b) if a["dropout_p"] else None
        yield rq, rk, ex, cnt


def _seq(t, rows):
    """Rows of a packed [T, H, .] tensor as a [1, H, S, .] problem."""
    return t[rows].swapaxes(0, 1)[None]


def sdpa_varlen_f64(ins, extras, a: dict):
    """(out [Tq, Hq, Dv], lse [Hq, Tq]) of sdpa_varlen in float64 (ins: q, k, v, cu_seqlens_q, cu_seqlens_k)."""
    q, k, v = (np.asarray(t, dtype=np.float64) for t in ins[:3])
    a = _resolved(a, q.shape[-1])
    out = np.zeros(q.shape[:2] + v.shape[2:])
    lse = np.full((q.shape[1], q.shape[0]), -np.inf)
    for rq, rk, ex, cnt in _sequences("sdpa_varlen", q, k, ins[3], ins[4], extras[0] if extras else None, a):
        o, l_ = attend(_seq(q, rq), _seq(k, rk), _seq(v, rk), ex, a, cnt)
        out[rq], lse[:, rq] = o[0].swapaxes(0, 1), l_[0]
    return out, lse


def _sdpa_varlen(desc, q, k, v, cu_q, cu_k, *extras):
    return sdpa_varlen_f64((q, k, v, cu_q, cu_k), extras, desc.attr_dict)


def _sdpa_varlen_backward(desc, go, q, k, v, cu_q, cu_k, out, lse, *rest):
    a = desc.attr_dict
    glse = rest[-1] if a["has_grad_lse"] else None
    extras = rest[:-1] if a["has_grad_lse"] else rest
    dq, dk, dv = np.zeros(q.shape), np.zeros(k.shape), np.zeros(v.shape)
    for rq, rk, ex, cnt in _sequences(desc.op, q, k, cu_q, cu_k, extras[0] if extras else None, a):
        g = None if glse is None else glse[:, rq][None]
        r = attend_backward(_seq(go, rq), _seq(q, rq), _seq(k, rk), _seq(v, rk), _seq(out, rq), lse[:, rq][None],
                            ex, a, cnt, g)
        for acc, rows, x in zip((dq, dk, dv), (rq, rk, rk), r):
            acc[rows] += x[0].swapaxes(0, 1)
    return dq, dk, dv


register_reference("sdpa_varlen", _sdpa_varlen)
register_reference("sdpa_varlen_backward", _sdpa_varlen_backward)
