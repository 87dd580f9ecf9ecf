"""NumPy float64 bodies of the decoding ops: dense attention over the keys each request owns (materialized scores),
the cache appends, the cascade merge.  Index values are checked here (InvalidProblemError naming the operand)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np

from ..._core.errors import InvalidProblemError
from ...ops.attention_decode import FP8_MAX, kv_length, query_positions
from . import register_reference


def _attend(desc, q, k, v, L):
    """q [nq, Hq, D], k / v [L, Hkv, *] (float64, already gathered) -> (out [nq, Hq, Dv], lse [nq, Hq])."""
    nq, Hq, D = q.shape
    G = Hq // k.shape[1] if k.shape[1] else 1
    k = np.repeat(k[:L] * desc.attr("k_scale"), G, axis=1)         # [L, Hq, D]: query head h reads kv head h // G
    v = np.repeat(v[:L] * desc.attr("v_scale"), G, axis=1)
    scale = desc.attr("scale")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    s = scale * np.einsum("ihd,jhd->hij", q, k)                    # [Hq, nq, L]
    cap = desc.attr("softcap")
    if cap:
        s = cap * np.tanh(s / cap)
    p = query_positions(L, nq)[:, None]
    j = np.arange(L)[None, :]
    ok = np.ones((nq, L), bool)
    if desc.attr("causal"):
        ok &= j <= p
    if desc.attr("window_left") is not None:
        ok &= j >= p - desc.attr("window_left")
    s = np.where(ok[None], s, -np.inf)
    m = s.max(axis=-1, keepdims=True, initial=-np.inf)
    ms = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - ms)
    z = e.sum(-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        lse = np.where(z > 0, np.log(z) + ms, -np.inf)[..., 0]
        out = np.einsum("hij,jhd->ihd", np.where(z > 0, e / z, 0.0), v)
    return out, lse.T


def _check_range(op, name, vals, lo, hi, what=None):
    """Every value of ``vals`` in [lo, hi]; else InvalidProblemError naming the first bad entry."""
    vals = np.asarray(vals)
    bad = (vals < lo) | (vals > hi)
    if bad.any():
        i = int(np.argmax(bad))
        raise InvalidProblemError(op, name, what or f"values in [{lo}, {hi}]", f"{name}[{i}] = {int(vals[i])}")


def _check_indptr(op, name, ptr, end, exact):
    """Offsets: non-decreasing, from >= 0 (== 0 where exact) to <= end (== end where exact)."""
    ptr = np.asarray(ptr).astype(np.int64)
    if np.any(np.diff(ptr) < 0):
        i = int(np.argmax(np.diff(ptr) < 0))
        raise InvalidProblemError(op, name, "non-decreasing offsets", f"{name}[{i}] = {ptr[i]} > {name}[{i + 1}] = "
                                  f"{ptr[i + 1]}")
    if exact and (ptr[0] != 0 or ptr[-1] != end):
        raise InvalidProblemError(op, name, f"offsets from 0 to {end}", f"{ptr[0]} .. {ptr[-1]}")
    _check_range(op, name, ptr, 0, end, f"offsets in [0, {end}]")
    return ptr


def _decode(desc, q, k, v, lens=None):
    B, Sq, Hq, _ = q.shape
    Smax = k.shape[1]
    if lens is not None:
        _check_range(desc.op, "kv_lens", lens, 0, Smax, f"lengths in [0, Smax={Smax}]")
    out = np.zeros(desc.outputs[0].shape)
    lse = np.zeros(desc.outputs[1].shape)
    for b in range(B):
        out[b], lse[b] = _attend(desc, q[b], k[b], v[b], Smax if lens is None else int(lens[b]))
    return out, lse


def request_pages(op, kvp, kvi, n_pool, page_size, last=None):
    """Checked page tables: (kv_indptr as int64, kv_indices as int64, lengths or None)."""
    kvp = _check_indptr(op, "kv_indptr", kvp, len(kvi), False)
    kvi = np.asarray(kvi).astype(np.int64)
    _check_range(op, "kv_indices", kvi, 0, n_pool - 1, f"page indices in [0, {n_pool})")
    if last is None:
        return kvp, kvi, None
    _check_range(op, "kv_last_page_len", last, 0, page_size, f"values in [0, page_size={page_size}]")
    lens = [kv_length(int(kvp[b + 1] - kvp[b]), int(last[b]), page_size) for b in range(len(kvp) - 1)]
    return kvp, kvi, lens


def _paged(desc, q, qo, kp, vp, kvp, kvi, last):
    op, ps = desc.op, kp.shape[1]
    qo = _check_indptr(op, "qo_indptr", qo, q.shape[0], True)
    kvp, kvi, lens = request_pages(op, kvp, kvi, kp.shape[0], ps, last)
    out = np.zeros(desc.outputs[0].shape)
    lse = np.zeros(desc.outputs[1].shape)
    for b, L in enumerate(lens):
        pages = kvi[kvp[b]:kvp[b + 1]]
        k = kp[pages].reshape((-1,) + kp.shape[2:])                    # the request's keys in order
        v = vp[pages].reshape((-1,) + vp.shape[2:])
        out[qo[b]:qo[b + 1]], lse[qo[b]:qo[b + 1]] = _attend(desc, q[qo[b]:qo[b + 1]], k, v, L)
    return out, lse


def _stored(desc, new, dtype):
    """new / scale, saturated to the FP8 range for an FP8 cache (its rounding happens as the output is written)."""
    x = new / desc.attr("scale")
    return np.clip(x, -FP8_MAX, FP8_MAX) if dtype == np.dtype(ml_dtypes.float8_e4m3fn) else x


def _append(desc, cache, new, pos):
    n = new.shape[1]
    _check_range(desc.op, "positions", pos, 0, cache.shape[1] - n, f"positions in [0, Smax - Snew = "
                 f"{cache.shape[1] - n}]")
    out = cache.copy()
    x = _stored(desc, new, desc.outputs[0].dtype.numpy)
    for b in range(cache.shape[0]):
        out[b, int(pos[b]):int(pos[b]) + n] = x[b]
    return out


def _paged_append(desc, pages, new, bi, pos, kvp, kvi):
    op, ps = desc.op, pages.shape[1]
    kvp, kvi, _ = request_pages(op, kvp, kvi, pages.shape[0], ps)
    B = len(kvp) - 1
    _check_range(op, "batch_indices", bi, 0, B - 1, f"request indices in [0, B={B})")
    dest = []
    for t in range(new.shape[0]):
        b, p = int(bi[t]), int(pos[t])
        cap = int(kvp[b + 1] - kvp[b]) * ps
        if not 0 <= p < cap:
            raise InvalidProblemError(op, "positions", f"a position within request {b}'s {cap} page rows",
                                      f"positions[{t}] = {p}")
        dest.append((int(kvi[kvp[b] + p // ps]), p % ps))
    if len(set(dest)) != len(dest):
        raise InvalidProblemError(op, "positions", "distinct destinations (page, row)", "two tokens written to one row")
    out = pages.copy()
    x = _stored(desc, new, desc.outputs[0].dtype.numpy)
    for t, (pg, r) in enumerate(dest):
        out[pg, r] = x[t]
    return out


def merge(o, lse):
    """The cascade merge (shared with the tests): o [N, ...rows, D], lse [N, ...rows] -> (out, lse)."""
    m = lse.max(axis=0, initial=-np.inf) if lse.shape[0] else np.full(lse.shape[1:], -np.inf)
    ms = np.where(np.isfinite(m), m, 0.0)
    w = np.exp(lse - ms)                                 # -inf parts: 0
    z = w.sum(0)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.where(z[..., None] > 0, np.einsum("n...,n...d->...d", w, np.where(w[..., None] > 0, o, 0.0))
                       / np.where(z > 0, z, 1.0)[..., None], 0.0)
        return out, np.where(z > 0, np.log(z) + ms, -np.inf)


register_reference("sdpa_decode", _decode)
register_reference("paged_attention", _paged)
register_reference("kv_append", _append)
register_reference("paged_kv_append", _paged_append)
register_reference("attention_merge", lambda desc, o, lse: merge(o, lse))
