"""Triton KV-cache appends: kv_append (contiguous cache, per-row positions) and paged_kv_append (through the page
table), one kernel (PAGED constexpr).

A program owns ROWS (token, head) rows of D values: it reads the token's destination (positions[b] + i; or page
kv_indices[kv_indptr[b] + p // page], row p % page), checks it (a bad index raises the flag ``_core/checks.py`` reads
and the row is skipped: nothing is written out of bounds) and writes new / scale rounded to the cache's dtype
(saturated to +-448 for float8 e4m3; without a scale the copy is bit-exact).  Any strides for every tensor.

The Plan API never writes its inputs, so the output is the updated cache: where ``out`` is the cache itself (same
storage and strides: ``plan.run(cache, new, pos, out=cache)``, the serving path) only the new rows are written
(T * Hkv * D elements: 16 KiB for a decode step of 64 tokens, 8 heads of 128 bf16); otherwise the cache is first
copied into ``out`` (the whole cache moves: what the benchmark's out-of-place run measures).
"""
from __future__ import annotations

import torch
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.errors import InvalidProblemError
from ....ops.attention_decode import FP8_MAX
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .decode import dense

_FP8_MAX = tl.constexpr(FP8_MAX)
_MAX_D = 16384


@fast_kernel
def _append_kernel(new_ptr, out_ptr, flag_ptr, pos_ptr, bi_ptr, kvp_ptr, kvi_ptr, scale,
                   R, H, D, TN, SMAX, B, P, PS, NNZ, sn0, sn1, sn2, sn3, so0, so1, so2, so3,
                   PAGED: tl.constexpr, SCALED: tl.constexpr, FP8: tl.constexpr, F64: tl.constexpr,
                   ROWS: tl.constexpr, BD: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    rm = rows < R
    h = rows % H
    t = rows // H                       # the new token: (b, i) = divmod(t, TN) (paged: b = 0, TN = T)
    b = t // TN
    i = t - b * TN
    if PAGED:
        rb = tl.load(bi_ptr + i, mask=rm, other=0)
        p = tl.load(pos_ptr + i, mask=rm, other=0)
        bad_b = rm & ((rb < 0) | (rb >= B))
        rb = tl.where(bad_b, 0, rb)
        p0 = tl.load(kvp_ptr + rb, mask=rm, other=0)
        p1 = tl.load(kvp_ptr + rb + 1, mask=rm, other=0)
        bad_p = rm & ~bad_b & ((p0 < 0) | (p1 > NNZ) | (p1 < p0))
        bad_q = rm & ~bad_b & ~bad_p & ((p < 0) | (p >= (p1 - p0) * PS))
        ok = rm & ~bad_b & ~bad_p & ~bad_q
        pg = tl.load(kvi_ptr + p0 + p // PS, mask=ok, other=0)
        bad_g = ok & ((pg < 0) | (pg >= P))
        ok = ok & ~bad_g
        dst = tl.where(ok, pg, 0).to(tl.int64) * so0 + tl.where(ok, p % PS, 0).to(tl.int64) * so1
        # the flag's value names the operand (_WHAT)
        flag = tl.maximum(tl.maximum(tl.max(bad_b.to(tl.int32), 0), tl.max(bad_p.to(tl.int32), 0) * 2),
                          tl.maximum(tl.max(bad_q.to(tl.int32), 0) * 3, tl.max(bad_g.to(tl.int32), 0) * 4))
    else:
        p = tl.load(pos_ptr + b, mask=rm, other=0)
        bad = rm & ((p < 0) | (p > SMAX - TN))
        ok = rm & ~bad
        dst = b.to(tl.int64) * so0 + tl.where(ok, p + i, 0).to(tl.int64) * so1
        flag = tl.max(bad.to(tl.int32), 0) * 3
    d = tl.arange(0, BD)
    m2 = ok[:, None] & (d < D)[None, :]
    src = (b.to(tl.int64) * sn0 + i.to(tl.int64) * sn1 + h * sn2)[:, None] + d[None, :] * sn3
    x = tl.load(new_ptr + src, mask=m2, other=0.0)
    if SCALED:
        x = x.to(CT) / scale
    if FP8:   # saturate in f32 (f64 -> fp8 has no direct conversion; 3 mantissa bits make the double rounding moot)
        x = tl.minimum(tl.maximum(x.to(tl.float32), -_FP8_MAX), _FP8_MAX)
    tl.store(out_ptr + (dst + h * so2)[:, None] + d[None, :] * so3, x.to(out_ptr.dtype.element_ty), mask=m2)
    tl.store(flag_ptr, flag, mask=flag > 0)


_WHAT = {1: ("batch_indices", "request indices in [0, B)"), 2: ("kv_indptr", "non-decreasing offsets in [0, nnz]"),
         3: ("positions", "positions inside the request's rows (kv_append: in [0, Smax - Snew])"),
         4: ("kv_indices", "page indices in [0, P)")}


def _bind(desc, pref=None):
    paged = desc.op == "paged_kv_append"
    op = desc.op
    scale = desc.attr("scale")
    const = dict(PAGED=paged, SCALED=scale != 1.0, FP8=desc.outputs[0].dtype == DType.f8e4m3,
                 F64=DType.f64 in (desc.inputs[0].dtype, desc.inputs[1].dtype))

    def run(desc_, inputs, outputs, ws):
        cache, new = inputs[:2]
        out = outputs[0]
        if out.data_ptr() != cache.data_ptr() or out.stride() != cache.stride():
            # out of place: the cache first (a copy of the copy where out overlaps it otherwise)
            overlap = out.untyped_storage().data_ptr() == cache.untyped_storage().data_ptr()
            out.copy_(cache.clone() if overlap else cache)
        H, D = cache.shape[2], cache.shape[3]
        if paged:
            bi, pos, kvp, kvi = (dense(x) for x in inputs[2:])
            T = new.shape[0]
            R, TN, B, NNZ = T * H, max(T, 1), kvp.shape[0] - 1, kvi.shape[0]
            sn = (0,) + tuple(new.stride())
        else:
            pos = dense(inputs[2])
            bi = kvp = kvi = pos
            R, TN, B, NNZ = new.shape[0] * new.shape[1] * H, max(new.shape[1], 1), 0, 0
            sn = tuple(new.stride())
        if R == 0 or D == 0:
            return
        flag = ws[:16].view(torch.int32)[:1]
        flag.zero_()
        bd = next_power_of_2(D)
        rows = max(1, min(next_power_of_2(R), 4096 // bd))
        _append_kernel[(cdiv(R, rows),)](new, out, flag, pos, bi, kvp, kvi, float(scale), R, H, D, TN,
                                         cache.shape[1], B, cache.shape[0], cache.shape[1], NNZ, *sn,
                                         *out.stride(), ROWS=rows, BD=bd, **const, num_warps=4)
        flagged(flag, pref, lambda v: InvalidProblemError(op, *_WHAT[int(v)], "a value out of range"))
    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _supports(desc):
    D = desc.inputs[0].shape[3]
    return f"head dim D={D} over {_MAX_D}: a row lives in registers" if D > _MAX_D else None


for _op in ("kv_append", "paged_kv_append"):
    register_triton(_op, _run, bind=_bind, supports=_supports, workspace=lambda d: 16,
                    route=lambda d, p: f"triton:{d.op}(rows written in place where out is the cache)")
