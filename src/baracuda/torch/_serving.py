"""Attention entry points torch has no function for (``baracuda.torch.nn.functional``): FlashAttention's varlen call,
split-KV decoding over a contiguous cache, and FlashInfer-style paged attention as a plan / run object (the page
table planned once per batch, run per layer).  They run the attention family's ops through the one call path
(``call``: autograd where the op is differentiable, the bound-plan cache, torch.compile through the custom op).

    >>> import torch, baracuda.torch as bt
    >>> q = torch.randn(7, 4, 16); kv = torch.randn(7, 2, 16)
    >>> cu = torch.tensor([0, 3, 7], dtype=torch.int32)
    >>> bt.nn.functional.flash_attn_varlen(q, kv, kv, cu, cu, 4, 4, causal=True).shape
    torch.Size([7, 4, 16])
"""
from __future__ import annotations

import torch

from .._core.errors import ArgumentTypeError, InvalidProblemError, UnsupportedError
from .._core.options import current_preference
from .._core.plan import plan_for
from .._core.spec import Descriptor
from ..ops.random import draw_seed, graph_safe_draw
from .._core.device import as_device
from ._call import call

__all__ = ["flash_attn_varlen", "attention_decode", "PagedAttention", "publish"]


def _window(op: str, window_size) -> tuple:
    """FlashAttention's (left, right) window, -1 = unbounded -> the ops' window_left / window_right (None)."""
    if not (isinstance(window_size, (tuple, list)) and len(window_size) == 2
            and all(isinstance(w, int) and not isinstance(w, bool) for w in window_size)):
        raise ArgumentTypeError(op, "window_size", "a pair of ints (left, right), -1 = unbounded", window_size)
    left, right = window_size
    for n, w in (("window_size[0]", left), ("window_size[1]", right)):
        if w < -1:
            raise InvalidProblemError(op, n, "-1 (unbounded) or an int >= 0", w)
    return (None if left < 0 else left), (None if right < 0 else right)


def _seed(op: str, dropout_p: float, seed, device) -> int:
    if dropout_p <= 0:
        return 0
    if seed is None and graph_safe_draw(device):
        raise UnsupportedError(op, "dropout_p > 0 with no seed under torch.compile or CUDA-graph capture: the kernel's "
                               "seed is an int, which the graph would repeat on every call; pass seed= (one mask "
                               "for every call) or run it eagerly")
    return draw_seed() if seed is None else int(seed)


def flash_attn_varlen(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                      softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                      return_lse=False, seed=None):
    """Attention over packed sequences (FlashAttention's ``flash_attn_varlen_func`` semantics): q [Tq, Hq, D],
    k [Tk, Hkv, D], v [Tk, Hkv, Dv], sequence b spanning cu_seqlens[b]:cu_seqlens[b+1]; ``causal`` aligns each
    sequence's queries to the end of its keys (bottom-right); ``window_size`` (left, right) with -1 unbounded;
    ``alibi_slopes`` [Hq] or [B, Hq].  Returns out [Tq, Hq, Dv] (and lse [Hq, Tq], float32, with return_lse).
    Differentiable in q, k, v (the sdpa_varlen_backward kernels)."""
    op = "sdpa_varlen"
    left, right = _window(op, window_size)
    ins = (q, k, v, cu_seqlens_q, cu_seqlens_k) + (() if alibi_slopes is None else (alibi_slopes,))
    attrs = {"max_seqlen_q": max_seqlen_q, "max_seqlen_k": max_seqlen_k, "scale": softmax_scale,
             "causal": "bottom_right" if causal else "none", "window_left": left, "window_right": right,
             "softcap": softcap, "dropout_p": dropout_p, "seed": _seed(op, dropout_p, seed, q.device),
             "has_alibi": alibi_slopes is not None}
    out, lse = call(op, ins, attrs)
    return (out, lse) if return_lse else out


def attention_decode(q, k_cache, v_cache, kv_lens=None, *, softmax_scale=None, causal=True, window_left=None,
                     softcap=0.0, k_scale=1.0, v_scale=1.0, return_lse=False):
    """Split-KV (flash) decoding: q [B, Sq, Hq, D] (Sq 1..8, the last Sq positions of each row), k_cache /
    v_cache [B, Smax, Hkv, D] (any strides; e4m3 caches dequantized by k_scale / v_scale), kv_lens [B] int32 (the
    valid length of each row; None: Smax).  Returns out [B, Sq, Hq, Dv] (and lse [B, Sq, Hq]).  Inference only."""
    ins = (q, k_cache, v_cache) + (() if kv_lens is None else (kv_lens,))
    attrs = {"scale": softmax_scale, "softcap": softcap, "window_left": window_left, "causal": causal,
             "k_scale": k_scale, "v_scale": v_scale, "has_kv_lens": kv_lens is not None}
    out, lse = call("sdpa_decode", ins, attrs)
    return (out, lse) if return_lse else out


class PagedAttention:
    """Attention over a paged KV cache in FlashInfer's NHD layout, planned once per batch and run per layer.

    ``plan(qo_indptr, kv_indptr, kv_indices, kv_last_page_len)`` keeps the batch's page table (int32 / int64 tensors
    on the cache's device): request b owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]], the last one holding
    kv_last_page_len[b] tokens, and its queries are q[qo_indptr[b]:qo_indptr[b+1]] (decode: one each; prefill:
    many, causal to the end of its keys).  ``run(q, k_pages, v_pages)`` with pages [P, page_size, Hkv, D] attends
    every request; the plan of the ``paged_attention`` op is selected on the first run of a shape and reused by
    every layer.  ``append(pages, new, batch_indices, positions)`` writes new tokens through the same page table
    into ``pages`` in place (``paged_kv_append`` with out=pages: only the new rows are written).

        >>> import torch, baracuda.torch as bt
        >>> pages = torch.randn(4, 16, 2, 32)                   # 4 pages of 16 tokens, 2 kv heads, D 32
        >>> pa = bt.nn.functional.PagedAttention(causal=True)
        >>> pa.plan(torch.tensor([0, 1, 2]), torch.tensor([0, 1, 4]), torch.tensor([0, 3, 1, 2]),
        ...         torch.tensor([5, 16]))
        >>> pa.run(torch.randn(2, 4, 32), pages, pages).shape   # 2 decode queries, 4 query heads
        torch.Size([2, 4, 32])
    """

    def __init__(self, *, causal=True, softmax_scale=None, window_left=None, softcap=0.0, k_scale=1.0, v_scale=1.0):
        self.attrs = {"scale": softmax_scale, "softcap": softcap, "window_left": window_left, "causal": causal,
                      "k_scale": k_scale, "v_scale": v_scale}
        self._table = None

    def plan(self, qo_indptr, kv_indptr, kv_indices, kv_last_page_len) -> None:
        names = ("qo_indptr", "kv_indptr", "kv_indices", "kv_last_page_len")
        table = (qo_indptr, kv_indptr, kv_indices, kv_last_page_len)
        for n, t in zip(names, table):
            if not isinstance(t, torch.Tensor):
                raise ArgumentTypeError("paged_attention", n, "a Tensor", type(t).__name__)
        self._table = table

    def _need_plan(self):
        if self._table is None:
            raise InvalidProblemError("paged_attention", "plan", "plan(qo_indptr, kv_indptr, kv_indices, "
                                      "kv_last_page_len) before run / append", "no plan")
        return self._table

    def run(self, q, k_pages, v_pages, return_lse=False):
        qo, kvp, kvi, last = self._need_plan()
        out, lse = call("paged_attention", (q, qo, k_pages, v_pages, kvp, kvi, last), self.attrs)
        return (out, lse) if return_lse else out

    def append(self, pages, new, batch_indices, positions, scale=1.0):
        """Write ``new`` [T, Hkv, D] (token t of request batch_indices[t] at position positions[t]) into ``pages``
        in place; returns ``pages``."""
        _, kvp, kvi, _ = self._need_plan()
        ins = (pages, new, batch_indices, positions, kvp, kvi)
        desc = Descriptor.like("paged_kv_append", *ins, scale=scale)
        plan = plan_for(desc, as_device(pages.device), current_preference())
        plan.run(*ins, out=pages)
        return pages


def publish(put) -> None:
    """Set the serving entry points on ``baracuda.torch.nn.functional`` (not torch names: not routed by the mode)."""
    for fn in (flash_attn_varlen, attention_decode, PagedAttention):
        put("nn.functional." + fn.__name__, fn)
