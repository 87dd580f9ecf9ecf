"""NumPy body of top_k_top_p_sampling (ops/random_sampling.py): the thresholds from a sort of each row (the
definition; the Triton kernel finds the same threshold without sorting), the draw from the Philox stream."""
from __future__ import annotations

import numpy as np

from . import register_reference
from .random import stream_key, stream_u32, unit_f32


def keep_threshold(p: np.ndarray, k: int, top_p: float, min_p: float) -> float:
    """t = min(max(t_kp, min_p * max(p)), max(p)): t_kp the largest row value with #{p >= t} >= k or
    mass{p >= t} >= top_p * sum."""
    V = p.size
    desc = np.sort(p)[::-1]
    k_eff = k if 0 < k < V else V
    t = desc[k_eff - 1]                       # the k-th largest: #{p >= t} >= k
    if top_p < 1.0:
        last = np.searchsorted(-desc, -desc, side="right") - 1     # the last index of each value's tie group
        mass = np.cumsum(desc)[last]                               # mass{p >= v}, ties counted whole
        ok = mass >= top_p * p.sum()                               # (true at the smallest value: the whole row)
        t = max(t, desc[np.argmax(ok)])       # the largest value (first in descending order) whose mass reaches P
    return min(max(t, min_p * desc[0]), desc[0])


def _sample(desc, probs, top_k, top_p, min_p, *state):
    B = probs.shape[0]
    u = unit_f32(stream_u32(*stream_key(desc, state), B))
    out = np.zeros(B, dtype=np.int64)
    for r in range(B):
        p = np.maximum(probs[r], 0.0)       # negative weights count as 0
        t = keep_threshold(p, int(top_k[r]), float(top_p[r]), float(min_p[r]))
        kept = np.where(p >= t, p, 0.0)
        c = np.cumsum(kept)
        i = int(np.searchsorted(c, u[r] * c[-1], side="right"))
        out[r] = min(i, int(np.flatnonzero(kept > 0)[-1]) if (kept > 0).any() else int(np.argmax(p)))
    return out


register_reference("top_k_top_p_sampling", _sample)
