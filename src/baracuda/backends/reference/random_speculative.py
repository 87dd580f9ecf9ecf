"""NumPy bodies of speculative_sampling / speculative_sampling_greedy (ops/random_speculative.py): the acceptance
tests in float64 and the fixed-point draw on the Philox stream's words, the rule exactly as the spec states it (the
Triton kernel computes the same integers, so both pick the same tokens)."""
from __future__ import annotations

import numpy as np

from ...ops.random_speculative import FIXED_BITS, draft_error, row_stride
from . import register_reference
from .random import stream_key, stream_u32, unit_f32

_SCALE = float(2 ** FIXED_BITS)


def fixed_point(w: np.ndarray) -> np.ndarray:
    """q = floor(clamp(w, 0, 1) * 2^40) as int64 (the multiply by a power of two is exact)."""
    return np.floor(np.clip(w, 0.0, 1.0) * _SCALE).astype(np.int64)


def fixed_draw(q: np.ndarray, word: int) -> int:
    """The first v whose running sum of q exceeds T = floor(u Q / 2^24), u the word's top 24 bits (exact int64:
    Q = hi 2^24 + lo, T = hi u + floor(lo u / 2^24))."""
    Q = int(q.sum())
    u = int(word) >> 8
    t = (Q >> 24) * u + (((Q & 0xFFFFFF) * u) >> 24)
    return int(np.searchsorted(np.cumsum(q), t, side="right"))


def _speculate(desc, ids, *rest):
    greedy = desc.op == "speculative_sampling_greedy"
    n_ops = 2 if greedy else 3
    state = rest[n_ops - 1:]
    tgt = rest[n_ops - 2]
    draft = None if greedy else rest[0]
    B, K = ids.shape
    V = tgt.shape[2]
    bad = (ids < 0) | (ids >= V)
    if bad.any():
        raise draft_error(desc.op, int(ids[bad][0]), V)
    seed, off = stream_key(desc, state)
    out = np.full((B, K + 1), -1, dtype=np.int64)
    acc = np.zeros(B, dtype=np.int32)
    for b in range(B):
        w = stream_u32(seed, off + b * row_stride(K), row_stride(K))
        n = 0
        while n < K:
            x = int(ids[b, n])
            q = 1.0 if greedy else float(draft[b, n, x])
            if not unit_f32(w[2 * n]) * q < tgt[b, n, x]:
                break
            n += 1
        if n < K:
            sub = np.zeros(V)
            if greedy:
                sub[int(ids[b, n])] = 1.0
            else:
                sub = draft[b, n]
            qv = fixed_point(tgt[b, n] - sub)
            word = w[2 * n + 1]
        else:
            qv = fixed_point(tgt[b, K])
            word = w[2 * K]
        if qv.sum() == 0:
            qv = fixed_point(tgt[b, n])
        tok = fixed_draw(qv, word) if qv.sum() else 0
        out[b, :n] = ids[b, :n]
        out[b, n] = tok
        acc[b] = n
    return out, acc


register_reference("speculative_sampling", _speculate)
register_reference("speculative_sampling_greedy", _speculate)
