"""NumPy float64 bodies of the embedding family (see ops/embedding.py): token ids are checked on the host and an
out-of-range one raises the same InvalidProblemError the GPU kernels' device flag raises."""
from __future__ import annotations

import numpy as np

from ...ops.embedding import bad_index_error
from ...ops.embedding_bag import _np_bag, bag_bounds
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
    if not rows.shape[-1]:
        return rows
    norm = np.linalg.norm(rows, ord=norm_type, axis=-1, keepdims=True)
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


def _bag(d, x, w, off, psw=None):
    ids = check_ids("embedding_bag", "input", x, w.shape[0])
    return _np_bag("embedding_bag", ids, w, off, psw, d.attr("mode"), d.attr("padding_idx"),
                   d.attr("include_last_offset"), d.attr("max_norm"), d.attr("norm_type"), renorm)


def _bag_bw(d, g, x, off, extra=None, w=None):
    """dweight (+ dper_sample_weights): each kept token's gradient row is its bag's (max: per column, where the
    token's id is the bag's max index), scaled by its weight (sum), 1 / the bag's kept count (mean)."""
    op, v = "embedding_bag_backward", d.attr("num_weights")
    ids = check_ids(op, "input", x, v)
    starts, ends = bag_bounds(op, off, len(ids), d.attr("include_last_offset"))
    mode, pad = d.attr("mode"), d.attr("padding_idx")
    dw = np.zeros((v, g.shape[1]))
    cnt = np.bincount(ids, minlength=v) if d.attr("scale_grad_by_freq") else None
    dpsw = np.zeros(len(ids))
    for b, (s0, e0) in enumerate(zip(starts, ends)):
        keep = [k for k in range(s0, e0) if pad is None or ids[k] != pad]
        if mode == "max":
            for j in range(g.shape[1]):
                r = extra[b, j]
                if r >= 0:
                    dw[r, j] += g[b, j] / (cnt[r] if cnt is not None else 1)
            continue
        for k in keep:
            scale = (extra[k] if w is not None else 1.0) / (len(keep) if mode == "mean" else 1)
            dw[ids[k]] += g[b] * scale / (cnt[ids[k]] if cnt is not None else 1)
            if w is not None:
                dpsw[k] = g[b] @ (w[k] if d.attr("token_rows") else w[ids[k]])
    if pad is not None:
        dw[pad] = 0.0
    return (dw, dpsw) if w is not None else dw


register_reference("embedding_bag", _bag)
register_reference("embedding_bag_backward", _bag_bw)
