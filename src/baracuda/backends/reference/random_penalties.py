"""NumPy body of apply_penalties (ops/random_penalties.py): a dense per-row presence mask and bincount of the output
part (the definition; the Triton kernel never builds them), in float64.  Bad ids or lengths raise before any write."""
from __future__ import annotations

import numpy as np

from ...ops.random_penalties import length_error, token_error
from . import register_reference


def _penalties(desc, logits, ids, plens, slens, rep, freq, pres):
    B, V = logits.shape
    L = ids.shape[1]
    for b in range(B):
        if not 0 <= int(plens[b]) <= int(slens[b]) <= L:
            raise length_error(b, L)
        hist = ids[b, :int(slens[b])].astype(np.int64)
        bad = (hist < 0) | (hist >= V)
        if bad.any():
            raise token_error(int(hist[bad][0]), V)
    r, f, q = (np.broadcast_to(np.asarray(t, dtype=np.float64), (B,)) for t in (rep, freq, pres))
    out = np.array(logits, dtype=np.float64, copy=True)
    for b in range(B):
        hist = ids[b, :int(slens[b])].astype(np.int64)
        present = np.zeros(V, dtype=bool)
        present[hist] = True
        counts = np.bincount(hist[int(plens[b]):], minlength=V).astype(np.float64)
        row = out[b]
        row = np.where(present, np.where(row > 0, row / r[b], row * r[b]), row)
        out[b] = row - f[b] * counts - q[b] * (counts > 0)
    return out


register_reference("apply_penalties", _penalties)
