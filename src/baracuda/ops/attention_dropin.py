"""torch's ``F.scaled_dot_product_attention`` signature -> the ``sdpa`` op (its drop-in adapter).

torch's function takes q (N..., Hq, L, E), k (N..., Hkv, S, E), v (N..., Hkv, S, Ev) with any number of leading
dims (2-d included), batch dims that broadcast, ``attn_mask`` (bool: True takes part; or a float added to the
scores, of q's dtype or float32) broadcastable to (N..., L, S), ``is_causal`` (top-left: key j <= query i, not
with a mask), ``scale`` (default 1/sqrt(E)), ``dropout_p`` and ``enable_gqa`` (Hq a multiple of Hkv; without it the
head dims must be equal or broadcast).  The adapter brings every form to the op's 4-d [B, H, S, D] layout with views
(leading dims flattened where they are contiguous, broadcast batch dims expanded with stride 0, a 3-d input given
a head dim of 1) and reshapes the output back, so the kernels read the caller's tensors in place.

Deliberate differences (docs/parity.md): dropout draws its keep mask from the op's counter-based Philox stream
(seeded from torch's CPU generator, so ``torch.manual_seed`` makes it reproducible) instead of torch's stream: the
same distribution, another sample.  A float ``attn_mask`` that requires a gradient (torch's math path gives it one)
runs as a composition of baracuda drop-ins (``_composed.py``), which materializes the scores.
"""
from __future__ import annotations

import math

from .._core.errors import ArgumentTypeError, DTypeMismatchError, InvalidProblemError
from ._common import broadcast_shapes
from .random import draw_seed, graph_safe_draw

_OP = "sdpa"
_NAMES = ("query", "key", "value")


def _check_tensors(query, key, value, attn_mask):
    import torch

    for n, t in zip(_NAMES, (query, key, value)):
        if not isinstance(t, torch.Tensor):
            raise ArgumentTypeError(_OP, n, "a Tensor", type(t).__name__)
        if t.dim() < 2:
            raise InvalidProblemError(_OP, n, "a tensor of at least 2 dims (..., S, E)", tuple(t.shape))
    if not (query.dtype == key.dtype == value.dtype):
        raise DTypeMismatchError(_OP, "key/value", f"query's dtype {query.dtype} for key and value",
                                 f"{key.dtype} and {value.dtype}")
    if attn_mask is not None:
        if not isinstance(attn_mask, torch.Tensor):
            raise ArgumentTypeError(_OP, "attn_mask", "a Tensor or None", type(attn_mask).__name__)
        if attn_mask.dtype not in (torch.bool, query.dtype, torch.float32):
            raise DTypeMismatchError(_OP, "attn_mask", f"bool, float32 or query's dtype {query.dtype}",
                                     str(attn_mask.dtype))
    if query.shape[-1] != key.shape[-1]:
        raise InvalidProblemError(_OP, "key", f"last dim {query.shape[-1]} (query's E)", tuple(key.shape))
    if key.shape[-2] != value.shape[-2]:
        raise InvalidProblemError(_OP, "value", f"{key.shape[-2]} keys (key's S)", tuple(value.shape))


def _batch_shape(query, key, value, enable_gqa):
    """The broadcast leading dims (N..., H) of the three operands, with key/value's head count kept apart when
    it differs from the query's (GQA / MQA)."""
    lead = [tuple(t.shape[:-2]) for t in (query, key, value)]
    if max(map(len, lead)) == 0:
        return (), 1, 1
    nd = max(map(len, lead))
    lead = [(1,) * (nd - len(s)) + s for s in lead]
    hq, hk, hv = (s[-1] for s in lead)
    if hk != hv:
        raise InvalidProblemError(_OP, "value", f"{hk} heads (key's)", hv)
    if hq != hk and 1 not in (hq, hk) and not (enable_gqa and hq % hk == 0):
        raise InvalidProblemError(_OP, "key", f"{hq} heads (query's), or a divisor of it with enable_gqa=True"
                                  if not enable_gqa else f"a number of heads dividing query's {hq}", hk)
    if lead[0][:-1] == lead[1][:-1] == lead[2][:-1]:     # (the common call: torch's broadcast_shapes is ~20 us)
        return lead[0][:-1], hq, hk
    batch = broadcast_shapes(_OP, ("query", "key", "value"), [s[:-1] for s in lead])
    return tuple(batch), hq, hk


def _as_4d(t, batch, heads):
    """t (..., S, E) as [B, H, S, E] with views: broadcast batch dims expanded (stride 0), the leading dims
    flattened (a view where torch's reshape gives one, else its copy)."""
    s, e = t.shape[-2:]
    lead = tuple(t.shape[:-2])
    full = batch + (heads,)
    if len(lead) < len(full):
        t = t.reshape((1,) * (len(full) - len(lead)) + tuple(t.shape))
    if tuple(t.shape[:-2]) != full:
        t = t.expand(full + (s, e))
    return t.reshape(math.prod(batch), heads, s, e) if len(batch) != 1 else t


def _mask_4d(mask, batch, hq, L, S):
    """attn_mask broadcastable to (N..., Hq, L, S) as a rank <= 4 operand broadcastable to [B, Hq, L, S]."""
    import torch

    full = batch + (hq, L, S)
    try:
        torch.broadcast_shapes(tuple(mask.shape), full)
    except RuntimeError:
        raise InvalidProblemError(_OP, "attn_mask", f"a shape broadcastable to {full}", tuple(mask.shape)) from None
    if len(batch) <= 1:
        return mask
    m = mask.reshape((1,) * (len(full) - mask.dim()) + tuple(mask.shape))
    if all(d == 1 for d in m.shape[:-3]):
        return m.reshape(tuple(m.shape[-3:]))
    return m.expand(full).reshape(math.prod(batch), hq, L, S)


def sdpa_dropin(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    import torch

    _check_tensors(query, key, value, attn_mask)
    if attn_mask is not None and is_causal:
        raise InvalidProblemError(_OP, "attn_mask", "None when is_causal=True (torch's rule)", "a mask")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, (int, float)):
        raise ArgumentTypeError(_OP, "dropout_p", "a float", type(dropout_p).__name__)
    if (attn_mask is not None and attn_mask.dtype != torch.bool and attn_mask.requires_grad
            and torch.is_grad_enabled()):
        return None     # torch's math path differentiates the mask: the composition does (_composed.py)
    if dropout_p > 0 and graph_safe_draw(query.device):
        return None     # traced / captured: the kernels take an int seed, the composition's dropout a device state
    L, S, Ev = query.shape[-2], key.shape[-2], value.shape[-1]
    batch, hq, hk = _batch_shape(query, key, value, enable_gqa)
    if hq == 1 < hk:   # one query head against several kv heads: torch broadcasts the query (a stride-0 view)
        hq = hk
    q, k, v = _as_4d(query, batch, hq), _as_4d(key, batch, hk), _as_4d(value, batch, hk)
    ins = (q, k, v)
    attrs = {"layout": "bhsd", "causal": "top_left" if is_causal else "none",
             "scale": None if scale is None else float(scale), "dropout_p": float(dropout_p)}
    if attn_mask is not None:
        ins += (_mask_4d(attn_mask, batch, hq, L, S),)
        attrs["has_mask"] = True
    if dropout_p > 0:
        attrs["seed"] = draw_seed()
        attrs["offset"] = 0
    out_shape = (batch + (hq, L, Ev))[-max(query.dim(), key.dim(), value.dim()):]
    return ins, attrs, lambda outs: outs[0].reshape(out_shape)
