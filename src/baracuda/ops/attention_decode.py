"""Attention for decoding and serving (issue 15): split-KV decoding over a contiguous cache, attention over a paged
KV cache (FlashInfer's NHD layout, decode and prefill), cache appends and the cascade merge of partial results.

sdpa_decode(q [B, Sq, Hq, D], k [B, Smax, Hkv, D], v [B, Smax, Hkv, Dv], [kv_lens [B]]) -> out [B, Sq, Hq, Dv], lse
    Row b holds L_b = kv_lens[b] keys (Smax without kv_lens); its Sq (<= 8) queries are its last Sq positions:
    query i sits at p_i = L_b - Sq + i.
paged_attention(q [Tq, Hq, D], qo_indptr [B+1], k_pages [P, page, Hkv, D], v_pages [P, page, Hkv, Dv], kv_indptr
    [B+1], kv_indices [nnz], kv_last_page_len [B]) -> out [Tq, Hq, Dv], lse [Tq, Hq]
    Request b owns pages kv_indices[kv_indptr[b]:kv_indptr[b+1]] (n_b of them) and L_b = (n_b - 1) * page +
    kv_last_page_len[b] keys (0 when n_b = 0); its queries qo_indptr[b]:qo_indptr[b+1] (nq_b) are its last nq_b
    positions, p_i = L_b - nq_b + i (decode: 1 each; prefill: many; causal bottom-right).
Both: GQA (query head h reads kv head h // (Hq / Hkv)); s = scale * k_scale * <q_i, k_j> (scale None: 1/sqrt(D));
softcap > 0: s = softcap * tanh(s / softcap); key j takes part iff j < L_b, (causal) j <= p_i and (window_left not
None) j >= p_i - window_left; out_i = v_scale * sum_j softmax(s)_j v_j, lse_i = logsumexp_j s (natural log, f32;
f64 for f64 q).  A query with no key (p_i < 0, L_b = 0): out 0, lse -inf.  k / v are q's dtype or float8 e4m3
(an FP8 cache: k_scale / v_scale dequantize it).  Inference only (no gradient).

kv_append(cache [B, Smax, Hkv, D], new [B, Snew, Hkv, D], positions [B]) -> cache with rows positions[b] ..
    positions[b] + Snew - 1 of row b replaced by new[b] / scale (rounded to the cache's dtype; saturated to +-448
    for an FP8 cache), 0 <= positions[b] <= Smax - Snew.
paged_kv_append(pages [P, page, Hkv, D], new [T, Hkv, D], batch_indices [T], positions [T], kv_indptr [B+1],
    kv_indices [nnz]) -> pages with token t written at position positions[t] of request batch_indices[t]: page
    kv_indices[kv_indptr[b] + p // page], row p % page (distinct destinations).
    The Plan API never writes its inputs: both return the updated cache; ``plan.run(cache, ..., out=cache)`` (the
    serving path) writes only the new rows when ``out`` is the cache itself.
attention_merge(o [N, T, H, D], lse [N, T, H]) -> out [T, H, D], lse [T, H]: the cascade merge of N partial results
    by their log-sum-exps (out = sum_n exp(lse_n - lse) o_n, lse = logsumexp_n lse_n; -inf parts weigh 0, a row
    with none: out 0, lse -inf).  Differentiable in o and lse.

Index operands are int32 or int64; their values are checked by the reference (InvalidProblemError naming the
operand) and by the Triton kernels on the device (``_core/checks.py``: they never read or write out of bounds).

    >>> import torch, baracuda as bc
    >>> q, k, v = torch.randn(2, 1, 8, 64), torch.randn(2, 100, 2, 64), torch.randn(2, 100, 2, 64)
    >>> lens = torch.tensor([37, 100], dtype=torch.int32)
    >>> d = bc.Descriptor.like("sdpa_decode", q, k, v, lens, has_kv_lens=True)
    >>> out, lse = bc.Plan.select(d, bc.as_device("cpu")).run(q, k, v, lens)
    >>> out.shape, lse.shape
    (torch.Size([2, 1, 8, 64]), torch.Size([2, 1, 8]))
"""
from __future__ import annotations

import math

import numpy as np

from .._core.derive import declare_rule_ops
from .._core.dtypes import FLOAT_TYPES, DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import Attr, ErrorCase, OpSpec, Sample, TensorSpec, Workload, register_spec, set_bench_inputs
from ._common import check_nonneg

__all__ = ["DECODE_OPS", "MAX_DECODE_SQ", "FP8_MAX", "kv_length", "query_positions"]

DECODE_OPS = ("sdpa_decode", "paged_attention", "kv_append", "paged_kv_append", "attention_merge")
MAX_DECODE_SQ = 8          # sdpa_decode's queries per row (speculative decoding's few tokens); more: paged_attention
FP8_MAX = 448.0            # the largest finite float8 e4m3fn value: appends saturate to it
INDEX_TYPES = (DType.i32, DType.i64)
_F8 = DType.f8e4m3

_ATTN_ATTRS = (
    Attr("scale", "float", None, optional=True, expected="None (1/sqrt(D)) or a float"),
    Attr("softcap", "float", 0.0, ge=0.0, doc="0: off; > 0: s = softcap * tanh(s / softcap)"),
    Attr("window_left", "int", None, optional=True, ge=0,
         expected="None (unbounded) or an int >= 0 (keys j >= p_i - window_left take part)"),
    Attr("causal", "bool", True, doc="the queries are the last positions of their row (bottom-right)"),
    Attr("k_scale", "float", 1.0, gt=0.0, doc="dequantization factor of the keys (an FP8 cache's descale)"),
    Attr("v_scale", "float", 1.0, gt=0.0, doc="dequantization factor of the values"),
)


# -- shared shape / dtype checks ------------------------------------------------------------------------------------
def _rank(op, name, t, rank, what):
    if len(t.shape) != rank:
        raise InvalidProblemError(op, name, f"a {rank}-d tensor {what}", t.shape)


def _index(op, name, t, n=None):
    """An index operand: int32 / int64, 1-d, of length n (where given)."""
    if t.dtype not in INDEX_TYPES:
        raise DTypeMismatchError(op, name, "int32 or int64", str(t.dtype))
    if len(t.shape) != 1 or (n is not None and t.shape[0] != n):
        raise InvalidProblemError(op, name, f"a 1-d tensor of length {n}" if n is not None else "a 1-d tensor",
                                  t.shape)


def _float(op, name, t):
    if t.dtype not in FLOAT_TYPES:
        raise UnsupportedError(op, f"argument '{name}' has dtype {t.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES))}")


def _kv_pair(op, q, k, v, names, lead):
    """k / v against q: the leading dims ``lead`` of k and v agree, D matches, Hkv divides Hq, dtypes."""
    kn, vn = names
    _float(op, "q", q)
    if k.dtype not in (q.dtype, _F8):
        raise DTypeMismatchError(op, kn, f"q's dtype {q.dtype} or f8e4m3 (an FP8 cache)", str(k.dtype))
    if v.dtype != k.dtype:
        raise DTypeMismatchError(op, vn, f"{k.dtype} (the dtype of '{kn}')", str(v.dtype))
    if v.shape[:lead + 1] != k.shape[:lead + 1]:
        raise InvalidProblemError(op, vn, f"leading dims {list(k.shape[:lead + 1])} (those of '{kn}')", v.shape)
    hq, hkv = q.shape[-2], k.shape[-2]
    if q.shape[-1] != k.shape[-1]:
        raise InvalidProblemError(op, kn, f"head dim D={q.shape[-1]} (q's)", k.shape)
    if hkv == 0 or hq % hkv:
        raise InvalidProblemError(op, kn, f"a kv head count dividing q's {hq} heads (GQA)", hkv)
    if v.shape[-2] != hkv:
        raise InvalidProblemError(op, vn, f"{hkv} kv heads (those of '{kn}')", v.shape)


def _lse_dtype(q):
    return DType.f64 if q.dtype == DType.f64 else DType.f32


def _check_decode(inputs, attrs):
    op = "sdpa_decode"
    n = 4 if attrs["has_kv_lens"] else 3
    if len(inputs) != n:
        raise InvalidProblemError(op, "inputs", f"{n} operands (q, k, v{', kv_lens' if n == 4 else ''}; "
                                  f"has_kv_lens={attrs['has_kv_lens']})", len(inputs))
    q, k, v = inputs[:3]
    check_nonneg(op, ("q", "k", "v"), (q.shape, k.shape, v.shape))
    _rank(op, "q", q, 4, "[B, Sq, Hq, D]")
    _rank(op, "k", k, 4, "[B, Smax, Hkv, D]")
    _rank(op, "v", v, 4, "[B, Smax, Hkv, Dv]")
    B, Sq, Hq = q.shape[:3]
    if Sq > MAX_DECODE_SQ:
        raise InvalidProblemError(op, "q", f"at most {MAX_DECODE_SQ} query tokens per row (Sq; prefill: "
                                  "paged_attention or sdpa_varlen)", q.shape)
    if k.shape[0] != B:
        raise InvalidProblemError(op, "k", f"batch {B} (q's)", k.shape)
    _kv_pair(op, q, k, v, ("k", "v"), 1)
    if n == 4:
        _index(op, "kv_lens", inputs[3], B)
    return attrs, (TensorSpec((B, Sq, Hq, v.shape[3]), q.dtype), TensorSpec((B, Sq, Hq), _lse_dtype(q)))


def _check_paged(inputs, attrs):
    op = "paged_attention"
    if len(inputs) != 7:
        raise InvalidProblemError(op, "inputs", "7 operands (q, qo_indptr, k_pages, v_pages, kv_indptr, kv_indices,"
                                  " kv_last_page_len)", len(inputs))
    q, qo, kp, vp, kvp, kvi, last = inputs
    check_nonneg(op, _PAGED_ARGS, [t.shape for t in inputs])
    _rank(op, "q", q, 3, "[Tq, Hq, D]")
    _rank(op, "k_pages", kp, 4, "[P, page_size, Hkv, D]")
    _rank(op, "v_pages", vp, 4, "[P, page_size, Hkv, Dv]")
    _index(op, "qo_indptr", qo)
    if qo.shape[0] < 1:
        raise InvalidProblemError(op, "qo_indptr", "B + 1 >= 1 offsets", qo.shape)
    B = qo.shape[0] - 1
    _index(op, "kv_indptr", kvp, B + 1)
    _index(op, "kv_indices", kvi)
    _index(op, "kv_last_page_len", last, B)
    if kp.shape[1] == 0:
        raise InvalidProblemError(op, "k_pages", "a page size >= 1", kp.shape)
    _kv_pair(op, q, kp, vp, ("k_pages", "v_pages"), 1)
    Tq, Hq = q.shape[:2]
    return attrs, (TensorSpec((Tq, Hq, vp.shape[3]), q.dtype), TensorSpec((Tq, Hq), _lse_dtype(q)))


_PAGED_ARGS = ("q", "qo_indptr", "k_pages", "v_pages", "kv_indptr", "kv_indices", "kv_last_page_len")


def _check_append(inputs, attrs):
    op = "kv_append"
    if len(inputs) != 3:
        raise InvalidProblemError(op, "inputs", "3 operands (cache, new, positions)", len(inputs))
    c, new, pos = inputs
    check_nonneg(op, ("cache", "new", "positions"), (c.shape, new.shape, pos.shape))
    _rank(op, "cache", c, 4, "[B, Smax, Hkv, D]")
    _rank(op, "new", new, 4, "[B, Snew, Hkv, D]")
    _cache_dtypes(op, c, new, "cache")
    B, Smax, H, D = c.shape
    if new.shape[0] != B or new.shape[2:] != (H, D):
        raise InvalidProblemError(op, "new", f"shape [B={B}, Snew, Hkv={H}, D={D}] (the cache's B, Hkv, D)",
                                  new.shape)
    if new.shape[1] > Smax:
        raise InvalidProblemError(op, "new", f"at most Smax={Smax} new rows", new.shape)
    _index(op, "positions", pos, B)
    return attrs, (TensorSpec(c.shape, c.dtype),)


def _cache_dtypes(op, c, new, cname):
    if c.dtype not in FLOAT_TYPES + (_F8,):
        raise UnsupportedError(op, f"argument '{cname}' has dtype {c.dtype}; the op is defined for "
                                   f"{', '.join(map(str, FLOAT_TYPES + (_F8,)))}")
    if new.dtype not in FLOAT_TYPES + (_F8,):
        raise DTypeMismatchError(op, "new", "a floating dtype", str(new.dtype))


def _check_paged_append(inputs, attrs):
    op = "paged_kv_append"
    if len(inputs) != 6:
        raise InvalidProblemError(op, "inputs", "6 operands (pages, new, batch_indices, positions, kv_indptr, "
                                  "kv_indices)", len(inputs))
    pg, new, bi, pos, kvp, kvi = inputs
    check_nonneg(op, _PAPPEND_ARGS, [t.shape for t in inputs])
    _rank(op, "pages", pg, 4, "[P, page_size, Hkv, D]")
    _rank(op, "new", new, 3, "[T, Hkv, D]")
    _cache_dtypes(op, pg, new, "pages")
    if pg.shape[1] == 0:
        raise InvalidProblemError(op, "pages", "a page size >= 1", pg.shape)
    if new.shape[1:] != pg.shape[2:]:
        raise InvalidProblemError(op, "new", f"shape [T, Hkv={pg.shape[2]}, D={pg.shape[3]}] (the pages' Hkv, D)",
                                  new.shape)
    T = new.shape[0]
    _index(op, "batch_indices", bi, T)
    _index(op, "positions", pos, T)
    _index(op, "kv_indptr", kvp)
    if kvp.shape[0] < 1:
        raise InvalidProblemError(op, "kv_indptr", "B + 1 >= 1 offsets", kvp.shape)
    _index(op, "kv_indices", kvi)
    return attrs, (TensorSpec(pg.shape, pg.dtype),)


_PAPPEND_ARGS = ("pages", "new", "batch_indices", "positions", "kv_indptr", "kv_indices")


def _check_merge(inputs, attrs):
    op = "attention_merge"
    if len(inputs) != 2:
        raise InvalidProblemError(op, "inputs", "2 operands (o, lse)", len(inputs))
    o, lse = inputs
    check_nonneg(op, ("o", "lse"), (o.shape, lse.shape))
    _float(op, "o", o)
    _rank(op, "o", o, 4, "[N, T, H, D]")
    if lse.shape != o.shape[:3]:
        raise InvalidProblemError(op, "lse", f"shape [N, T, H] = {list(o.shape[:3])} (o's leading dims)", lse.shape)
    if lse.dtype not in (DType.f32, o.dtype):
        raise DTypeMismatchError(op, "lse", f"f32 or o's dtype {o.dtype}", str(lse.dtype))
    return attrs, (TensorSpec(o.shape[1:], o.dtype), TensorSpec(o.shape[1:3], _lse_dtype(o)))


# -- semantics shared with the backends -----------------------------------------------------------------------------
def kv_length(n_pages: int, last: int, page_size: int) -> int:
    """Keys of a request owning ``n_pages`` pages whose last one holds ``last`` rows."""
    return 0 if n_pages == 0 else (n_pages - 1) * page_size + last


def query_positions(L: int, nq: int) -> np.ndarray:
    """The positions of a row's nq queries, its last ones (bottom-right): L - nq .. L - 1."""
    return np.arange(nq) + (L - nq)


# -- torch peers (float64 dense attention over the keys each request owns) ------------------------------------------
def _torch_attend(q, k, v, L, attrs):
    """q [nq, Hq, D], k / v [>= L, Hkv, *] torch tensors -> (out [nq, Hq, Dv], lse [nq, Hq]) by torch's math."""
    import torch

    nq, Hq, D = q.shape
    G = Hq // k.shape[1]
    kk = (k[:L].double() * attrs["k_scale"]).repeat_interleave(G, 1).transpose(0, 1)
    vv = (v[:L].double() * attrs["v_scale"]).repeat_interleave(G, 1).transpose(0, 1)
    scale = attrs["scale"] if attrs["scale"] is not None else 1 / math.sqrt(D)
    s = scale * q.double().transpose(0, 1) @ kk.transpose(1, 2)             # [Hq, nq, L]
    if attrs["softcap"]:
        s = attrs["softcap"] * torch.tanh(s / attrs["softcap"])
    p = torch.arange(nq)[:, None] + (L - nq)
    j = torch.arange(L)[None, :]
    ok = torch.ones(nq, L, dtype=torch.bool)
    if attrs["causal"]:
        ok &= j <= p
    if attrs["window_left"] is not None:
        ok &= j >= p - attrs["window_left"]
    s = s.masked_fill(~ok, -math.inf)
    lse = torch.logsumexp(s, -1)
    w = torch.nan_to_num(torch.exp(s - lse[..., None]), nan=0.0)   # an all-masked row: exp(-inf + inf) -> 0
    return (w @ vv).transpose(0, 1), lse.transpose(0, 1)


def _peer_decode(q, k, v, lens=None, **attrs):
    import torch

    outs = [_torch_attend(q[b], k[b], v[b], int(lens[b]) if lens is not None else k.shape[1], attrs)
            for b in range(q.shape[0])]
    if not outs:
        return (torch.zeros(q.shape[:3] + v.shape[3:], dtype=torch.float64),
                torch.zeros(q.shape[:3], dtype=torch.float64))
    return torch.stack([o for o, _ in outs]), torch.stack([s for _, s in outs])


def _peer_paged(q, qo, kp, vp, kvp, kvi, last, **attrs):
    import torch

    out = torch.zeros(q.shape[:2] + vp.shape[3:], dtype=torch.float64)
    lse = torch.zeros(q.shape[:2], dtype=torch.float64)
    for b in range(qo.shape[0] - 1):
        pages = kvi[int(kvp[b]):int(kvp[b + 1])].long()
        L = kv_length(len(pages), int(last[b]), kp.shape[1])
        k, v = kp[pages].flatten(0, 1), vp[pages].flatten(0, 1)   # the request's keys, in order
        o, s = _torch_attend(q[int(qo[b]):int(qo[b + 1])], k, v, L, attrs)
        out[int(qo[b]):int(qo[b + 1])], lse[int(qo[b]):int(qo[b + 1])] = o, s
    return out, lse


def _peer_append(cache, new, pos, scale=1.0):
    out = cache.clone()
    for b in range(cache.shape[0]):
        out[b, int(pos[b]):int(pos[b]) + new.shape[1]] = _quantized(new[b] / scale, cache.dtype)
    return out


def _quantized(x, dtype):
    import torch

    return x.clamp(-FP8_MAX, FP8_MAX).to(dtype) if dtype == torch.float8_e4m3fn else x.to(dtype)


def _peer_paged_append(pages, new, bi, pos, kvp, kvi, scale=1.0):
    out = pages.clone()
    ps = pages.shape[1]
    for t in range(new.shape[0]):
        b, p = int(bi[t]), int(pos[t])
        out[int(kvi[int(kvp[b]) + p // ps]), p % ps] = _quantized(new[t] / scale, pages.dtype)
    return out


def _peer_merge(o, lse):
    import torch

    m = torch.logsumexp(lse.double(), 0)
    w = torch.nan_to_num(torch.exp(lse.double() - m), nan=0.0)
    return (w[..., None] * o).sum(0).to(o.dtype), m


# -- attention_merge's gradient -------------------------------------------------------------------------------------
def _g_merge(ctx, d, grads, s):
    """out = sum_n w_n o_n, w_n = exp(lse_n - lse_out), lse_out = logsumexp_n lse_n:
    do_n = w_n g;  dlse_n = w_n (<g, o_n> - <g, out> + g_lse)  (w_n = 0 for a -inf part, and for every part of a row
    with none: exp(-inf - -inf) = NaN is zeroed)."""
    o, lse, out, out_lse = s["o"], s["lse"], s["out0"], s["out1"]
    N, T, H, D = d.inputs[0].shape
    g, glse = grads
    w = ctx.op("nan_to_num", ctx.op("exp", ctx.op("sub", lse, ctx.reshape(out_lse, (1, T, H)))), nan=0.0)
    do = dl = None
    if ctx.needs[0] and g is not None:
        do = ctx.op("to_dtype", ctx.op("mul", ctx.reshape(w, (N, T, H, 1)), ctx.reshape(g, (1, T, H, D))),
                    dtype=d.inputs[0].dtype)
    if ctx.needs[1]:
        inner = None
        if g is not None:   # <g, o_n> - <g, out>
            inner = ctx.op("sub", ctx.op("sum", ctx.op("mul", o, ctx.reshape(g, (1, T, H, D))), dims=(3,)),
                           ctx.reshape(ctx.op("sum", ctx.op("mul", out, g), dims=(2,)), (1, T, H)))
        if glse is not None:
            gl = ctx.reshape(glse, (1, T, H))
            inner = gl if inner is None else ctx.op("add", inner, gl)
        if inner is not None:
            dl = ctx.op("to_dtype", ctx.op("mul", w, inner), dtype=d.inputs[1].dtype)
    if do is None and ctx.needs[0]:
        do = ctx.op("zeros_like", o)
    if dl is None and ctx.needs[1]:
        dl = ctx.op("zeros_like", lse)
    return do, dl


declare_rule_ops(__name__, "nan_to_num", "exp", "sub", "to_dtype", "mul", "sum", "add", "zeros_like")

from . import attention_decode_data as _data  # noqa: E402  (samples, errors, workloads, cost, tolerances)

_SPECS: dict[str, OpSpec] = {}
_NOT_DIFF = "inference only: no gradient (the serving path)"
_SPECS["sdpa_decode"] = register_spec(OpSpec(
    name="sdpa_decode", family="attention", arg_names=("q", "k", "v", "kv_lens"), check=_check_decode,
    dtypes=FLOAT_TYPES, attrs=(Attr("has_kv_lens", "bool", False, doc="a 4th operand kv_lens [B] int"),)
    + _ATTN_ATTRS, torch_peer=_peer_decode, samples=_data.decode_samples, errors=_data.decode_errors,
    tol=_data.attn_tol, workloads=_data.DECODE_WORKLOADS, cost=_data.decode_cost, category="attention",
    doc="split-KV decoding attention of Sq <= 8 queries per row over a contiguous KV cache (GQA, per-row lengths, "
        "causal bottom-right, sliding window, softcap, FP8 e4m3 caches with k/v descales); " + _NOT_DIFF))
_SPECS["paged_attention"] = register_spec(OpSpec(
    name="paged_attention", family="attention", arg_names=_PAGED_ARGS, check=_check_paged, dtypes=FLOAT_TYPES,
    attrs=_ATTN_ATTRS, torch_peer=_peer_paged, samples=_data.paged_samples, errors=_data.paged_errors,
    tol=_data.attn_tol, workloads=_data.PAGED_WORKLOADS, cost=_data.paged_cost, category="attention",
    doc="attention over a paged KV cache (FlashInfer's NHD layout: indptr / indices / last-page length), decode "
        "and prefill (queries are each request's last tokens, causal bottom-right), GQA, FP8 caches; " + _NOT_DIFF))
_SPECS["kv_append"] = register_spec(OpSpec(
    name="kv_append", family="attention", arg_names=("cache", "new", "positions"), check=_check_append,
    dtypes=FLOAT_TYPES + (_F8,), attrs=(Attr("scale", "float", 1.0, gt=0.0, doc="stored = new / scale"),),
    torch_peer=_peer_append, samples=_data.append_samples, errors=_data.append_errors, tol=_data.append_tol,
    workloads=_data.APPEND_WORKLOADS, cost=_data.append_cost, category="attention",
    doc="the KV cache with new rows written at per-row positions (quantized by 1/scale for FP8); out=cache "
        "writes only the new rows; " + _NOT_DIFF))
_SPECS["paged_kv_append"] = register_spec(OpSpec(
    name="paged_kv_append", family="attention", arg_names=_PAPPEND_ARGS, check=_check_paged_append,
    dtypes=FLOAT_TYPES + (_F8,), attrs=(Attr("scale", "float", 1.0, gt=0.0, doc="stored = new / scale"),),
    torch_peer=_peer_paged_append, samples=_data.paged_append_samples, errors=_data.paged_append_errors,
    tol=_data.append_tol, workloads=_data.PAPPEND_WORKLOADS, cost=_data.append_cost, category="attention",
    doc="a paged KV cache with new tokens written at (request, position) through the page table; out=pages "
        "writes only the new rows; " + _NOT_DIFF))
_SPECS["attention_merge"] = register_spec(OpSpec(
    name="attention_merge", family="attention", arg_names=("o", "lse"), check=_check_merge, dtypes=FLOAT_TYPES,
    attrs=(), torch_peer=_peer_merge, grad=_g_merge, saves=("o", "lse", "out0", "out1"), differentiable=(0, 1),
    samples=_data.merge_samples, errors=_data.merge_errors, tol=_data.merge_tol, workloads=_data.MERGE_WORKLOADS,
    cost=_data.merge_cost, category="attention",
    doc="cascade attention: merge N partial attention results by their log-sum-exps (-inf parts weigh 0)"))
_data.set_inputs(set_bench_inputs)
