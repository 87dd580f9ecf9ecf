"""The decoding ops' samples, error cases, tolerances, benchmark workloads and cost models (ops/attention_decode.py
holds their specs).  Page tables are built by ``page_table`` (also the tests' and the benchmark's)."""
from __future__ import annotations

import math

import numpy as np

from .._core.dtypes import DType
from .._core.errors import DTypeMismatchError, InvalidProblemError, UnsupportedError
from .._core.spec import ErrorCase, Sample, Workload

__all__ = ["page_table", "decode_samples", "paged_samples", "append_samples", "paged_append_samples",
           "merge_samples", "attn_tol", "append_tol", "merge_tol"]


def page_table(rng, lens, page_size, spare=2, dtype=np.int32):
    """A random page table for requests of ``lens`` keys: (kv_indptr, kv_indices, kv_last_page_len, P) with the
    pages of all requests a random permutation of a pool of P = sum(pages) + spare pages (unused pages hold
    values no request may read)."""
    n = [math.ceil(L / page_size) for L in lens]
    P = sum(n) + spare
    perm = rng.permutation(P)[:sum(n)]
    indptr = np.concatenate([[0], np.cumsum(n)]).astype(dtype)
    last = np.array([L - (k - 1) * page_size if k else 0 for L, k in zip(lens, n)], dtype)
    return indptr, perm.astype(dtype), last, P


def _qkv(rng, lead_q, lead_k, hq, hkv, d, dv):
    return (rng.standard_normal(tuple(lead_q) + (hq, d)), rng.standard_normal(tuple(lead_k) + (hkv, d)),
            rng.standard_normal(tuple(lead_k) + (hkv, dv)))


# (B, Sq, Hq, Hkv, D, Dv, Smax, kv_lens or None, attrs)
_DECODE = [(2, 1, 4, 2, 16, 16, 24, None, {}),
           (3, 3, 6, 2, 8, 12, 20, [20, 5, 1], {}),
           (2, 2, 2, 2, 16, 16, 33, [33, 17], {"window_left": 5, "softcap": 2.0, "scale": 0.3}),
           (3, 4, 4, 1, 16, 8, 12, [12, 0, 6], {"causal": False}),
           (2, 1, 8, 2, 16, 16, 40, [40, 23], {"k_scale": 0.5, "v_scale": 2.0, "window_left": 0}),
           (0, 1, 4, 2, 16, 16, 8, None, {}),
           (2, 2, 2, 1, 8, 8, 0, None, {})]


def decode_samples(rng):
    for B, Sq, Hq, Hkv, D, Dv, S, lens, attrs in _DECODE:
        q, k, v = _qkv(rng, (B, Sq), (B, S), Hq, Hkv, D, Dv)
        ins = (q, k, v) if lens is None else (q, k, v, np.array(lens, np.int32))
        a = dict(attrs, has_kv_lens=lens is not None)
        yield Sample(ins, a, name=f"B{B}Sq{Sq}H{Hq}/{Hkv}D{D}/{Dv}S{S}{'-lens' if lens else ''}"
                                  f"{''.join(f'-{k}{v}' for k, v in attrs.items())}", grad=False)


# (nq per request, kv lens, page size, Hq, Hkv, D, Dv, attrs)
_PAGED = [([1, 1, 1], [7, 1, 12], 4, 4, 2, 16, 16, {}),
          ([5, 0, 3], [9, 4, 3], 4, 4, 2, 8, 16, {}),
          ([2, 3, 2], [0, 10, 5], 4, 2, 1, 16, 16, {"causal": False, "window_left": 3, "softcap": 1.5}),
          ([1, 4], [8, 11], 3, 6, 2, 16, 8, {"scale": 0.5, "k_scale": 0.75, "v_scale": 1.5}),
          ([], [], 4, 2, 1, 8, 8, {})]


def paged_inputs(rng, nq, lens, ps, hq, hkv, d, dv, index_dtype=np.int32):
    """(q, qo_indptr, k_pages, v_pages, kv_indptr, kv_indices, kv_last_page_len) for requests with nq queries and
    lens keys each, pages of ps rows in a random order."""
    kvp, kvi, last, P = page_table(rng, lens, ps, dtype=index_dtype)
    qo = np.concatenate([[0], np.cumsum(nq)]).astype(index_dtype)
    q, kp, vp = _qkv(rng, (int(qo[-1]),), (P, ps), hq, hkv, d, dv)
    return q, qo, kp, vp, kvp, kvi, last


def paged_samples(rng):
    for i, (nq, lens, ps, hq, hkv, d, dv, attrs) in enumerate(_PAGED):
        yield Sample(paged_inputs(rng, nq, lens, ps, hq, hkv, d, dv, np.int64 if i == 1 else np.int32), dict(attrs),
                     name=f"nq{nq}L{lens}ps{ps}H{hq}/{hkv}D{d}/{dv}{''.join(f'-{k}{v}' for k, v in attrs.items())}",
                     grad=False)


# (B, Smax, H, D, Snew, positions, attrs)
_APPEND = [(2, 10, 2, 8, 3, [0, 7], {}), (3, 6, 1, 16, 1, [5, 0, 2], {"scale": 0.25}),
           (2, 4, 2, 8, 0, [4, 1], {}), (0, 4, 2, 8, 1, [], {})]


def append_samples(rng):
    for i, (B, S, H, D, n, pos, attrs) in enumerate(_APPEND):
        yield Sample((rng.standard_normal((B, S, H, D)), rng.standard_normal((B, n, H, D)),
                      np.array(pos, np.int64 if i == 1 else np.int32)), dict(attrs),
                     name=f"B{B}S{S}H{H}D{D}new{n}{''.join(f'-{k}{v}' for k, v in attrs.items())}", grad=False)


def paged_append_samples(rng):
    # (lens of the requests' pages, page size, H, D, (batch index, position) per new token, attrs)
    for lens, ps, H, D, toks, attrs in (
            ([8, 12], 4, 2, 8, [(0, 5), (1, 11), (1, 0), (0, 6)], {}),
            ([3, 0, 7], 3, 1, 16, [(2, 6), (0, 2)], {"scale": 2.0}),
            ([4], 4, 2, 8, [], {})):
        kvp, kvi, _, P = page_table(rng, lens, ps)
        t = np.array(toks, np.int32).reshape(-1, 2)
        yield Sample((rng.standard_normal((P, ps, H, D)), rng.standard_normal((len(toks), H, D)), t[:, 0].copy(),
                      t[:, 1].copy(), kvp, kvi), dict(attrs), name=f"L{lens}ps{ps}H{H}D{D}T{len(toks)}", grad=False)


def merge_samples(rng):
    # (N, T, H, D, fraction of -inf parts); the gradient samples have finite parts (torch's logsumexp backward of
    # an all -inf row is NaN; ours is 0: tests/attention/test_decode.py checks it against finite differences)
    for N, T, H, D, frac in ((3, 4, 2, 8, 0.0), (2, 3, 1, 16, 0.0), (1, 2, 2, 4, 0.0), (4, 5, 2, 8, 0.4),
                             (2, 0, 2, 8, 0.0), (0, 2, 1, 4, 0.0)):
        lse = 3 * rng.standard_normal((N, T, H))
        lse[rng.random((N, T, H)) < frac] = -np.inf
        if frac and T:
            lse[:, 0, 0] = -np.inf          # a row with no part at all: out 0, lse -inf
        yield Sample((rng.standard_normal((N, T, H, D)), lse), {}, name=f"N{N}T{T}H{H}D{D}inf{frac}",
                     grad=frac == 0.0)


# -- error cases ----------------------------------------------------------------------------------------------------
def decode_errors():
    q, k = ((2, 1, 4, 16), "f16"), ((2, 10, 2, 16), "f16")
    lens = ((2,), "i32")
    yield ErrorCase((q, k, k, lens), {}, InvalidProblemError, r"sdpa_decode: argument 'inputs': expected 3 operands",
                    "lens-without-flag")
    yield ErrorCase((((2, 9, 4, 16), "f16"), k, k), {}, InvalidProblemError,
                    r"sdpa_decode: argument 'q': expected at most 8 query tokens", "long-q")
    yield ErrorCase((q, ((2, 10, 3, 16), "f16"), ((2, 10, 3, 16), "f16")), {}, InvalidProblemError,
                    r"argument 'k': expected a kv head count dividing q's 4 heads", "gqa")
    yield ErrorCase((q, ((2, 10, 2, 8), "f16"), k), {}, InvalidProblemError, r"argument 'k': expected head dim D=16",
                    "head-dim")
    yield ErrorCase((q, ((3, 10, 2, 16), "f16"), k), {}, InvalidProblemError, r"argument 'k': expected batch 2", "batch")
    yield ErrorCase((q, k, ((2, 9, 2, 16), "f16")), {}, InvalidProblemError, r"argument 'v': expected leading dims",
                    "v-len")
    yield ErrorCase((q, ((2, 10, 2, 16), "bf16"), k), {}, DTypeMismatchError,
                    r"argument 'k': expected dtype q's dtype f16 or f8e4m3", "k-dtype")
    yield ErrorCase((q, ((2, 10, 2, 16), "f8e4m3"), k), {}, DTypeMismatchError,
                    r"argument 'v': expected dtype f8e4m3 \(the dtype of 'k'\)", "v-dtype")
    yield ErrorCase((q, k, k, ((2,), "f32")), {"has_kv_lens": True}, DTypeMismatchError,
                    r"argument 'kv_lens': expected dtype int32 or int64, got f32", "lens-dtype")
    yield ErrorCase((q, k, k, ((3,), "i32")), {"has_kv_lens": True}, InvalidProblemError,
                    r"argument 'kv_lens': expected a 1-d tensor of length 2", "lens-shape")
    yield ErrorCase((((2, 1, 4, 16), "i32"), k, k), {}, UnsupportedError, r"sdpa_decode: argument 'q' has dtype i32",
                    "int-q")
    yield ErrorCase((q, k, k), {"softcap": -1.0}, InvalidProblemError, r"sdpa_decode: argument 'softcap'", "softcap")
    yield ErrorCase((q, k, k), {"window_left": -2}, InvalidProblemError, r"argument 'window_left'", "window")
    yield ErrorCase((q, k, k), {"k_scale": 0.0}, InvalidProblemError, r"argument 'k_scale'", "k-scale")
    yield ErrorCase((((2, 4, 16), "f16"), k, k), {}, InvalidProblemError, r"argument 'q': expected a 4-d", "q-rank")


def paged_errors():
    q, ind, pg = ((3, 4, 16), "f16"), ((4,), "i32"), ((8, 4, 2, 16), "f16")
    last = ((3,), "i32")
    ok = (q, ind, pg, pg, ind, ((6,), "i32"), last)

    def w(i, x):
        return ok[:i] + (x,) + ok[i + 1:]

    yield ErrorCase(ok[:6], {}, InvalidProblemError, r"paged_attention: argument 'inputs': expected 7", "count")
    yield ErrorCase(w(1, ((4,), "f32")), {}, DTypeMismatchError, r"argument 'qo_indptr': expected dtype int32 or int64",
                    "qo-dtype")
    yield ErrorCase(w(4, ((5,), "i32")), {}, InvalidProblemError, r"argument 'kv_indptr': expected a 1-d tensor of "
                    r"length 4", "kv-indptr-len")
    yield ErrorCase(w(6, ((2,), "i64")), {}, InvalidProblemError, r"argument 'kv_last_page_len': expected a 1-d "
                    r"tensor of length 3", "last-len")
    yield ErrorCase(w(5, ((2, 3), "i32")), {}, InvalidProblemError, r"argument 'kv_indices': expected a 1-d", "idx-2d")
    yield ErrorCase(w(1, ((0,), "i32")), {}, InvalidProblemError, r"argument 'qo_indptr': expected B \+ 1 >= 1",
                    "empty-indptr")
    yield ErrorCase(w(2, ((8, 0, 2, 16), "f16")), {}, InvalidProblemError, r"argument 'k_pages': expected a page size",
                    "page-0")
    yield ErrorCase(w(3, ((8, 4, 2, 16), "f32")), {}, DTypeMismatchError, r"argument 'k_pages': expected dtype q's|"
                    r"argument 'v_pages': expected dtype f16", "v-dtype")
    yield ErrorCase(w(2, ((8, 4, 3, 16), "f16")), {}, InvalidProblemError, r"argument 'v_pages': expected|"
                    r"argument 'k_pages': expected a kv head count", "heads")
    yield ErrorCase(w(0, ((3, 4, 16, 1), "f16")), {}, InvalidProblemError, r"argument 'q': expected a 3-d", "q-rank")


def append_errors():
    c, n, p = ((2, 10, 2, 8), "f16"), ((2, 3, 2, 8), "f16"), ((2,), "i32")
    yield ErrorCase((c, n), {}, InvalidProblemError, r"kv_append: argument 'inputs': expected 3 operands", "count")
    yield ErrorCase((c, ((2, 3, 1, 8), "f16"), p), {}, InvalidProblemError, r"kv_append: argument 'new': expected "
                    r"shape \[B=2, Snew, Hkv=2, D=8\]", "heads")
    yield ErrorCase((c, ((2, 11, 2, 8), "f16"), p), {}, InvalidProblemError, r"argument 'new': expected at most "
                    r"Smax=10", "too-many")
    yield ErrorCase((c, n, ((2,), "f32")), {}, DTypeMismatchError, r"argument 'positions': expected dtype int32",
                    "pos-dtype")
    yield ErrorCase((c, n, ((3,), "i64")), {}, InvalidProblemError, r"argument 'positions': expected a 1-d tensor of "
                    r"length 2", "pos-len")
    yield ErrorCase((((2, 10, 2, 8), "i32"), n, p), {}, UnsupportedError, r"kv_append: argument 'cache' has dtype "
                    r"i32", "int-cache")
    yield ErrorCase((c, ((2, 3, 2, 8), "i16"), p), {}, DTypeMismatchError, r"argument 'new': expected dtype a "
                    r"floating", "int-new")
    yield ErrorCase((c, n, p), {"scale": 0.0}, InvalidProblemError, r"kv_append: argument 'scale'", "scale")


def paged_append_errors():
    pg, n, t, ip, ix = ((6, 4, 2, 8), "f16"), ((3, 2, 8), "f16"), ((3,), "i32"), ((3,), "i32"), ((5,), "i32")
    yield ErrorCase((pg, n, t, t, ip), {}, InvalidProblemError, r"paged_kv_append: argument 'inputs': expected 6",
                    "count")
    yield ErrorCase((pg, ((3, 2, 4), "f16"), t, t, ip, ix), {}, InvalidProblemError,
                    r"argument 'new': expected shape \[T, Hkv=2, D=8\]", "new-shape")
    yield ErrorCase((pg, n, ((2,), "i32"), t, ip, ix), {}, InvalidProblemError,
                    r"argument 'batch_indices': expected a 1-d tensor of length 3", "bi-len")
    yield ErrorCase((pg, n, t, ((3,), "f16"), ip, ix), {}, DTypeMismatchError,
                    r"argument 'positions': expected dtype int32 or int64", "pos-dtype")
    yield ErrorCase((pg, n, t, t, ((0,), "i32"), ix), {}, InvalidProblemError,
                    r"argument 'kv_indptr': expected B \+ 1 >= 1", "indptr")
    yield ErrorCase((((6, 0, 2, 8), "f16"), n, t, t, ip, ix), {}, InvalidProblemError,
                    r"argument 'pages': expected a page size >= 1", "page-0")


def merge_errors():
    o, lse = ((3, 4, 2, 8), "f16"), ((3, 4, 2), "f32")
    yield ErrorCase((o,), {}, InvalidProblemError, r"attention_merge: argument 'inputs': expected 2", "count")
    yield ErrorCase((o, ((3, 4, 1), "f32")), {}, InvalidProblemError, r"argument 'lse': expected shape \[N, T, H\]",
                    "lse-shape")
    yield ErrorCase((o, ((3, 4, 2), "bf16")), {}, DTypeMismatchError, r"argument 'lse': expected dtype f32 or o's",
                    "lse-dtype")
    yield ErrorCase((((3, 4, 8), "f16"), ((3, 4), "f32")), {}, InvalidProblemError, r"argument 'o': expected a 4-d",
                    "rank")
    yield ErrorCase((((3, 4, 2, 8), "i32"), lse), {}, UnsupportedError, r"argument 'o' has dtype i32", "int")


# -- tolerances -----------------------------------------------------------------------------------------------------
def attn_tol(dt):
    # Half types: the kernels round the probabilities to q's dtype for the P @ V product (flash attention's
    # practice) -- 2^-9 (bf16) / 2^-12 (f16) relative per weight, at most that times max|v| (~3 for N(0, 1) values)
    # in the output -- and round the output once.  f32: IEEE dot products; the scores' scaling by log2(e) (|s| <~
    # 16: 2^-20 absolute in the exponent, ~1e-6 relative in p) and ex2.approx's 2 ulps.
    return {DType.f64: (1e-10, 1e-12), DType.f32: (2e-5, 2e-5), DType.f16: (1e-2, 3e-3),
            DType.bf16: (1.6e-2, 2e-2)}[dt]


def append_tol(dt):
    # a copy of new / scale rounded once to the cache's dtype; the kernels divide in f32 (f64 for f64) before the
    # rounding: one extra ulp of the cache's dtype at most (a double rounding)
    return {DType.f64: (1e-15, 0.0), DType.f32: (2e-7, 0.0), DType.f16: (2 ** -10, 0.0), DType.bf16: (2 ** -7, 0.0),
            DType.f8e4m3: (2 ** -2, 2 ** -8)}[dt]


def merge_tol(dt):
    # a convex combination in f32 (f64) rounded once to o's dtype; f32: exp's few ulps on the weights
    return {DType.f64: (1e-10, 1e-12), DType.f32: (1e-5, 1e-5), DType.f16: (1e-2, 1e-3),
            DType.bf16: (1.6e-2, 1e-2)}[dt]


# -- cost models and workloads ------------------------------------------------------------------------------------
def _attn_cost(desc, kv, n_queries, n_requests, kv_rows):
    """Bytes: q, out and lse, the keys and values the requests own (kv_rows rows of Hkv heads), the index operands;
    flops: 2 (D + Dv) per (query head, key of its request).  kv: the positions of the k and v operands."""
    q, kc, vc = desc.inputs[0], desc.inputs[kv[0]], desc.inputs[kv[1]]
    hkv, d, dv = kc.shape[-2], kc.shape[-1], vc.shape[-1]
    kv_bytes = kv_rows * hkv * (d + dv) * kc.dtype.itemsize
    idx = sum(t.nbytes for t in desc.inputs if t.dtype in (DType.i32, DType.i64))
    out = sum(t.nbytes for t in desc.outputs)
    keys = kv_rows / max(n_requests, 1)
    return q.nbytes + kv_bytes + idx + out, int(2 * n_queries * q.shape[-2] * keys * (d + dv))


def decode_cost(desc):
    # the whole cache is the bytes model (kv_lens is data: Smax is the upper bound the benchmark's full rows reach)
    B, Sq = desc.inputs[0].shape[:2]
    return _attn_cost(desc, (1, 2), B * Sq, B, B * desc.inputs[1].shape[1])


def paged_cost(desc):
    # every page a request owns, full (the last page's fill is data): nnz * page_size rows
    nnz, ps = desc.inputs[5].shape[0], desc.inputs[2].shape[1]
    return _attn_cost(desc, (2, 3), desc.inputs[0].shape[0], desc.inputs[1].shape[0] - 1, nnz * ps)


def append_cost(desc):
    """Out of place (the benchmark's form): the cache read and written, the new rows read; flops 0.  The in-place
    serving path (out=cache) moves only the new rows and the indices."""
    return 2 * desc.inputs[0].nbytes + sum(t.nbytes for t in desc.inputs[1:]), 0


def merge_cost(desc):
    o, lse = desc.inputs
    return sum(t.nbytes for t in desc.inputs) + sum(t.nbytes for t in desc.outputs), 3 * o.numel


_I32 = DType.i32
# the decode row: batch 64, KV 8192, H 32/8, D 128, paged with pages of 16, bf16 (2 GiB of K/V)
DECODE_WORKLOADS = (Workload("sdpa_decode-b64-kv8192-h32x8-d128-bf16",
                             ((64, 1, 32, 128), (64, 8192, 8, 128), (64, 8192, 8, 128)), DType.bf16),)
PAGED_WORKLOADS = (
    Workload("paged_attention-decode-b64-kv8192-h32x8-d128-page16-bf16",
             ((64, 32, 128), ((65,), _I32), (32768, 16, 8, 128), (32768, 16, 8, 128), ((65,), _I32),
              ((32768,), _I32), ((64,), _I32)), DType.bf16),
    Workload("paged_attention-prefill-b8-q512-kv4096-h32x8-d128-page16-bf16",
             ((4096, 32, 128), ((9,), _I32), (2048, 16, 8, 128), (2048, 16, 8, 128), ((9,), _I32),
              ((2048,), _I32), ((8,), _I32)), DType.bf16))
APPEND_WORKLOADS = (Workload("kv_append-b64-s2048-h8-d128-bf16",
                             ((64, 2048, 8, 128), (64, 1, 8, 128), ((64,), _I32)), DType.bf16),)
PAPPEND_WORKLOADS = (Workload("paged_kv_append-t64-p8192x16-h8-d128-bf16",
                              ((8192, 16, 8, 128), (64, 8, 128), ((64,), _I32), ((64,), _I32), ((65,), _I32),
                               ((8192,), _I32)), DType.bf16),)
MERGE_WORKLOADS = (Workload("attention_merge-2x8192x32x128-bf16", ((2, 8192, 32, 128), ((2, 8192, 32), DType.f32)),
                            DType.bf16, backward=True),)


def _even_split(total, parts):
    """``parts`` counts summing to ``total`` (as even as possible)."""
    base = np.full(parts, total // max(parts, 1), np.int64)
    base[: total - int(base.sum())] += 1
    return base


def set_inputs(set_bench_inputs):
    """The benchmark's inputs for the ops whose index operands need valid values (page tables, positions)."""

    def paged(desc, device, gen):
        import torch

        q, qo, kp = desc.inputs[:3]
        B, nnz, ps = qo.shape[0] - 1, desc.inputs[5].shape[0], kp.shape[1]
        g = dict(generator=gen, device=gen.device)
        pages = _even_split(nnz, B)
        qo_v = np.concatenate([[0], np.cumsum(_even_split(q.shape[0], B))])
        idx = torch.randperm(kp.shape[0], **g)[:nnz]
        it = desc.inputs[1].dtype.torch
        return [torch.randn(q.shape, **g).to(q.dtype.torch).to(device), torch.tensor(qo_v, dtype=it, device=device),
                torch.randn(kp.shape, **g).to(kp.dtype.torch).to(device),
                torch.randn(desc.inputs[3].shape, **g).to(kp.dtype.torch).to(device),
                torch.tensor(np.concatenate([[0], np.cumsum(pages)]), dtype=desc.inputs[4].dtype.torch, device=device),
                idx.to(desc.inputs[5].dtype.torch).to(device),
                torch.full((B,), ps, dtype=desc.inputs[6].dtype.torch, device=device)]

    def append(desc, device, gen):
        import torch

        c, n, p = desc.inputs
        g = dict(generator=gen, device=gen.device)
        pos = torch.randint(0, c.shape[1] - n.shape[1] + 1, p.shape, **g)
        return [torch.randn(c.shape, **g).to(c.dtype.torch).to(device),
                torch.randn(n.shape, **g).to(n.dtype.torch).to(device), pos.to(p.dtype.torch).to(device)]

    def paged_append(desc, device, gen):
        import torch

        pg, n, bi, pos, kvp, kvi = desc.inputs
        B, nnz, ps, T = kvp.shape[0] - 1, kvi.shape[0], pg.shape[1], n.shape[0]
        g = dict(generator=gen, device=gen.device)
        pages = _even_split(nnz, B)
        b = np.arange(T) % max(B, 1)                       # one new token per request (decode), the last row free
        p = pages[b] * ps - 1
        return [torch.randn(pg.shape, **g).to(pg.dtype.torch).to(device),
                torch.randn(n.shape, **g).to(n.dtype.torch).to(device),
                torch.tensor(b, dtype=bi.dtype.torch, device=device), torch.tensor(p, dtype=pos.dtype.torch,
                                                                                  device=device),
                torch.tensor(np.concatenate([[0], np.cumsum(pages)]), dtype=kvp.dtype.torch, device=device),
                torch.randperm(pg.shape[0], **g)[:nnz].to(kvi.dtype.torch).to(device)]

    set_bench_inputs("paged_attention", paged)
    set_bench_inputs("kv_append", append)
    set_bench_inputs("paged_kv_append", paged_append)
