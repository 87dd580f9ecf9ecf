"""apply_penalties (ops/random_penalties.py) without a dense count matrix: a copy of the logits, then one program
per row that touches only the history's distinct tokens.

Why not vLLM's dense form (a [B, V] count matrix zeroed, scatter-added, then read beside the logits): at B = 64,
V = 128256 it moves 4 B V bytes of zeroing + 4 B V of counts on top of the logits' read and write (f32: 2x the
traffic of the copy, bf16: 3x), whatever the history length.  Here the traffic is the copy (one read and one write
of the logits, at copy bandwidth) plus, per row, the history (L ids) and two scalars per distinct token.

The row program: the history's ids as int32 keys ``id * 2 + (position >= prompt_len)`` (out-of-history lanes and
bad ids: the largest key) sorted in registers (``tl.sort``, a bitonic network), so each distinct token is one run,
its prompt occurrences first.  A run's last lane (its successor differs: ``tl.gather``) holds the token; the
run's output count is the inclusive count of output keys there minus the exclusive count at the run's first lane
(found by a running max of the first lanes' positions).  That lane loads the token's logit, applies the
repetition / frequency / presence formula in f32 (f64 for f64 logits) and stores it over the copy: each token is
written by one lane of one program, after the copy kernel (stream order), so nothing races.

Histories up to ``HISTORY_CAP`` = 8192 ids (int32 keys, 16 warps: no spill on sm_90; int64 keys spilled 48 B
there) and vocabularies below 2^30 (the keys' range); longer histories are refused with the reason (a multi-block
sort of the history is what remains).

Value checks: ids outside [0, V) within seq_lens set the indexing family's flag word (``flag_bad_index``, word 0)
and are skipped (never dereferenced); a row with bad lengths stores row + 1 in word 1 and is clamped
(0 <= prompt <= seq <= L); ``flagged`` raises either as the reference's error.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ....ops.random_penalties import length_error, token_error
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..indexing.kernels import decode_index_flag, flag_bad_index

__all__ = ["HISTORY_CAP"]
HISTORY_CAP = 8192
_NO_KEY = tl.constexpr(0x7FFFFFFF)     # sorts after every real key (int32 keys: V < 2^30)


@triton.jit
def _max(a, b):
    return tl.maximum(a, b)


@fast_kernel
def _penalty_kernel(x_ptr, y_ptr, ids_ptr, pl_ptr, sl_ptr, r_ptr, f_ptr, q_ptr, flag_ptr, V, L, sx0, sx1, si0, si1,
                    spl, ssl, sr, sf, sq, F64: tl.constexpr, BL: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    s = tl.load(sl_ptr + b * ssl).to(tl.int64)
    p = tl.load(pl_ptr + b * spl).to(tl.int64)
    tl.store(flag_ptr + 1, b + 1, mask=(p < 0) | (p > s) | (s > L))
    s = tl.minimum(tl.maximum(s, 0), L)
    p = tl.minimum(tl.maximum(p, 0), s)
    i = tl.arange(0, BL)
    inh = i < s
    t = tl.load(ids_ptr + b * si0 + i * si1, mask=inh, other=0).to(tl.int64)
    ok = (t >= 0) & (t < V)
    flag_bad_index(flag_ptr, t, inh & ~ok)
    key = tl.where(inh & ok, t.to(tl.int32) * 2 + (i >= p).to(tl.int32), _NO_KEY)
    key = tl.sort(key, 0)
    tok = key >> 1
    out = key & 1
    nxt = tl.gather(key, tl.minimum(i + 1, BL - 1), 0)
    prv = tl.gather(key, tl.maximum(i - 1, 0), 0)
    last = (key != _NO_KEY) & ((i == BL - 1) | ((nxt >> 1) != tok))
    first = (i == 0) | ((prv >> 1) != tok)
    start = tl.associative_scan(tl.where(first, i, 0), 0, _max)
    c = tl.cumsum(out, 0)
    cnt = c - tl.gather(c - out, start, 0)
    tc = tl.where(last, tok, 0).to(tl.int64)
    lg = tl.load(x_ptr + b * sx0 + tc * sx1, mask=last, other=0.0).to(CT)
    r = tl.load(r_ptr + b * sr).to(CT)
    f = tl.load(f_ptr + b * sf).to(CT)
    q = tl.load(q_ptr + b * sq).to(CT)
    lg = tl.where(lg > 0, lg / r, lg * r)
    lg = lg - f * cnt.to(CT) - q * (cnt > 0).to(CT)
    tl.store(y_ptr + b * V + tc, lg.to(y_ptr.dtype.element_ty), mask=last)


def _stride0(t):
    """A per-row operand's row stride: 0 for a 0-d tensor (one value for every row)."""
    return t.stride(0) if t.dim() else 0


def _bind(desc, pref=None):
    (B, V), L = desc.inputs[0].shape, desc.inputs[1].shape[1]
    bl = max(next_power_of_2(max(L, 1)), 16)
    f64 = desc.dtype == DType.f64

    def run(desc_, inputs, outputs, ws):
        x, ids, pl, sl = inputs[:4]
        y = outputs[0]
        y.copy_(x)
        if B == 0 or L == 0:
            return
        flag = torch.zeros(2, dtype=torch.int64, device=y.device)
        pens = inputs[4:]
        _penalty_kernel[(B,)](x, y, ids, pl, sl, *pens, flag, V, L, x.stride(0), x.stride(1), ids.stride(0),
                              ids.stride(1), pl.stride(0), sl.stride(0), *map(_stride0, pens), F64=f64, BL=bl,
                              num_warps=min(max(bl // 256, 4), 16))
        flagged(flag[0:1], pref, lambda v: token_error(decode_index_flag(v), V))
        flagged(flag[1:2], pref, lambda v: length_error(int(v) - 1, L))
    return run


def _supports(desc):
    L = desc.inputs[1].shape[1]
    if desc.inputs[0].shape[1] >= 2 ** 30:
        return f"a vocabulary of {desc.inputs[0].shape[1]} >= 2**30 (the sorted keys are int32: id * 2 + is_output)"
    if L > HISTORY_CAP:
        return (f"a history of {L} > {HISTORY_CAP} ids: one program sorts a row's history in registers (a multi-block "
                "sort of the history is what remains)")
    return None


register_triton("apply_penalties", _run_of(_guarded(_bind)), bind=_guarded(_bind), supports=_supports,
                route="triton:apply_penalties (copy + sorted-history fix-up)")
