"""NumPy float64 bodies of the embedding family (see ops/embedding.py): token ids are checked on the host and an
out-of-range one raises the same InvalidProblemError the GPU kernels' device flag raises."""
from __future__ import annotations

import numpy as np

from ...ops.embedding import bad_index_error
from . import register_reference


def check_ids(op: str, arg: str, ids: np.ndarray, limit: int) -> np.ndarray:
    """ids as int64, or the named error for the first out-of-range one."""
    ids = np.asarray(ids).astype(np.int64)
    bad = (ids < 0) | (ids >= limit)
    if bad.any():
        raise bad_index_error(op, arg, ids[bad][0], limit)
    return ids


def renorm(rows: np.ndarray, max_norm, norm_type: float) -> np.ndarray:
    """torch's embedding_renorm_: rows whose norm exceeds max_norm scaled by max_norm / (norm + 1e-7)."""
    if max_norm is None:
        return rows
    norm = np.linalg.norm(rows, ord=norm_type, axis=-1, keepdims=True) if rows.shape[-1] else np.zeros(rows.shape[:-1] + (1,))
    return np.where(norm > max_norm, rows * (max_norm / (norm + 1e-7)), rows)


def _embedding(d, x, w):
    ids = check_ids("embedding", "input", x, w.shape[0])
    return renorm(w[ids], d.attr("max_norm"), d.attr("norm_type"))


def token_grads_to_rows(op, g, ids, v, padding_idx, freq, weights=None):
    """dweight [v, D]: row r = sum over tokens t with ids[t] == r of weights[t] * g[t] (divided by the id's count
    when ``freq``), zero for padding_idx.  g: [T, D] per-token gradient rows."""
    ids = check_ids(op, "indices" if op == "embedding_backward" else "input", ids.reshape(-1), v)
    g = g.reshape(len(ids), g.shape[-1]) * (1.0 if weights is None else weights.reshape(-1, 1))
    if freq:
        cnt = np.bincount(ids, minlength=v)
        g = g / cnt[ids].reshape(-1, 1)
    out = np.zeros((v, g.shape[1]))
    np.add.at(out, ids, g)
    if padding_idx is not None:
        out[padding_idx] = 0.0
    return out


def _embedding_bw(d, g, i):
    return token_grads_to_rows("embedding_backward", g, i, d.attr("num_weights"), d.attr("padding_idx"),
                               d.attr("scale_grad_by_freq"))


register_reference("embedding", _embedding)
register_reference("embedding_backward", _embedding_bw)
