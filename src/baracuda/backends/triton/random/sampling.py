"""randperm and multinomial on the Philox stream (stream.py's element words).

randperm(n): up to 8192 elements (16 warps, 116 registers a thread, no spill on sm_90; 16384 keys spill 384 B)
one program sorts the n keys (word << 32 | index) with tl.sort (a bitonic network in registers) and writes the low
halves: the stable argsort of the words, as the reference.  Longer permutations write the n words to the
workspace as int32s whose order is the words' unsigned order (word ^ 2^31, two's complement), then the sort
family's long-row sort (``sort_rows``: block sort + merge passes, stable) writes their argsort: the same
permutation, bit for bit, for any n (4 + 24 bytes of workspace per element, and 8 more when the output is not
int64: the indices are converted at the end).

multinomial(x, num_samples, replacement): one program per row, the row streamed in chunks of up to 2048
categories.  With replacement: the row sum, then per block of samples t = U * sum and index = #{k : cumsum_k <= t}
(the reference's searchsorted 'right'), counted chunk by chunk.  Without: num_samples passes, each taking the
smallest race key -log(U'_k) / w_k above the previous pick in (key, index) order (w = 0: +inf), so the picks
come out in the order drawn, as the reference's stable argsort.  The keys are f32 (f64 for f64 weights) where the
reference computes them in float64: an index differs only where two keys agree to f32 rounding.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import next_power_of_2
from .._lib.geometry import ws_align as _aligned
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.math import log
from .._lib.register import register_triton
from ..sort.rows import sort_rows, sort_ws_bytes
from .stream import element_words, int_out, stream_args, stream_base, unit, unit_open

__all__ = ["RANDPERM_CAP"]
RANDPERM_CAP = 8192
_CHUNK = 2048


@fast_kernel
def _randperm_kernel(y_ptr, st_ptr, n, seed, offset, HAS_STATE: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK).to(tl.int64)
    key0, off = stream_base(st_ptr, seed, offset, HAS_STATE)
    own, _f, _s, _o = element_words(key0, off + i)
    key = (own.to(tl.uint64) << 32) | i.to(tl.uint64)
    key = tl.where(i < n, key, 0xFFFFFFFFFFFFFFFF)      # padding sorts last
    key = tl.sort(key, 0)
    tl.store(y_ptr + i, int_out((key & 0xFFFFFFFF).to(tl.int64), y_ptr).to(y_ptr.dtype.element_ty), mask=i < n)


@fast_kernel
def _words_kernel(w_ptr, st_ptr, n, seed, offset, HAS_STATE: tl.constexpr, BLOCK: tl.constexpr):
    """The stream words of elements offset .. offset + n - 1 as int32s in the words' unsigned order."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    key0, off = stream_base(st_ptr, seed, offset, HAS_STATE)
    own, _f, _s, _o = element_words(key0, off + i)
    tl.store(w_ptr + i, (own ^ 0x80000000).to(tl.int32, bitcast=True), mask=i < n)


@triton.jit
def _race_key(w, own, F64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    return tl.where(w > 0, -log(unit_open(own).to(CT)) / tl.where(w > 0, w, 1.0), float("inf"))


@fast_kernel
def _multinomial_kernel(x_ptr, y_ptr, st_ptr, K, ns, seed0, offset0, REPLACE: tl.constexpr, F64: tl.constexpr,
                        HAS_STATE: tl.constexpr, CH: tl.constexpr, SB: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    seed, offset = stream_base(st_ptr, seed0, offset0, HAS_STATE)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    xr = x_ptr + row * K
    yr = y_ptr + row * ns
    cols = tl.arange(0, CH).to(tl.int64)
    if REPLACE:
        total = tl.zeros([CH], dtype=CT)
        for k0 in loop(0, K, CH):
            total += tl.load(xr + k0 + cols, mask=k0 + cols < K, other=0.0).to(CT)
        tot = tl.sum(total, 0)
        for s0 in loop(0, ns, SB):
            s = s0 + tl.arange(0, SB).to(tl.int64)
            own, _f, _s, _o = element_words(seed, offset + row * ns + s)
            t = unit(own).to(CT) * tot
            count = tl.zeros([SB], dtype=tl.int64)
            base = tot * 0.0
            for k0 in loop(0, K, CH):
                w = tl.load(xr + k0 + cols, mask=k0 + cols < K, other=0.0).to(CT)
                c = tl.cumsum(w, 0) + base
                le = (c[None, :] <= t[:, None]) & ((k0 + cols) < K)[None, :]
                count += tl.sum(le.to(tl.int64), 1)
                base += tl.sum(w, 0)
            tl.store(yr + s, tl.minimum(count, K - 1), mask=s < ns)
    else:
        pk = tl.full([], float("-inf"), CT)
        pi = tl.full([], -1, tl.int64)
        for j in loop(0, ns):
            bk = tl.full([CH], float("inf"), CT)
            bi = tl.full([CH], 2 ** 62, tl.int64)
            for k0 in loop(0, K, CH):
                k = k0 + cols
                w = tl.load(xr + k, mask=k < K, other=0.0).to(CT)
                own, _f, _s, _o = element_words(seed, offset + row * K + k)
                key = _race_key(w, own, F64)
                ok = (k < K) & ((key > pk) | ((key == pk) & (k > pi)))
                better = ok & ((key < bk) | ((key == bk) & (k < bi)))
                bk = tl.where(better, key, bk)
                bi = tl.where(better, k, bi)
            m = tl.min(bk, 0)
            pi = tl.min(tl.where(bk == m, bi, 2 ** 62), 0)
            pk = m
            tl.store(yr + j, pi)


_WORDS_BLOCK = 1024


def _randperm_ws(desc) -> int:
    """Long permutations: the int32 words, the int64 indices when the output is another dtype, the sort's own."""
    n = desc.attr("n")
    if n <= RANDPERM_CAP:
        return 0
    return _aligned(4 * n) + (0 if desc.outputs[0].dtype == DType.i64 else _aligned(8 * n)) + \
        sort_ws_bytes(1, n, DType.i32)


def _bind_randperm(desc, pref=None):
    n = desc.attr("n")
    block = max(next_power_of_2(max(n, 1)), 16)

    def run(desc_, inputs, outputs, ws):
        if not n:
            return
        st, seed, off, has_state = stream_args(desc, inputs)
        y = outputs[0]
        if n <= RANDPERM_CAP:
            _randperm_kernel[(1,)](y, y if st is None else st, n, seed, off, HAS_STATE=has_state, BLOCK=block,
                                   num_warps=16 if block >= 4096 else 4)
            return
        words = ws[:4 * n].view(torch.int32).view(1, n)
        at = _aligned(4 * n)
        direct = y.dtype == torch.int64
        idx = y.view(1, n)
        if not direct:
            idx = ws[at:at + 8 * n].view(torch.int64).view(1, n)
            at += _aligned(8 * n)
        _words_kernel[(triton.cdiv(n, _WORDS_BLOCK),)](words, words if st is None else st, n, seed, off,
                                                        HAS_STATE=has_state, BLOCK=_WORDS_BLOCK, num_warps=4)
        sort_rows(words, None, idx, n, False, ws[at:])
        if not direct:
            y.copy_(idx.view(n))      # (f32 / f64 / bf16 / f16 / i32 outputs: exact below their integer limits)
    return run


def _bind_multinomial(desc, pref=None):
    x = desc.inputs[0]
    K = x.shape[-1]
    rows = x.numel // K
    ns = desc.attr("num_samples")
    ch = min(next_power_of_2(K), _CHUNK)
    sb = min(next_power_of_2(ns), max(16, 8192 // ch))
    rep = desc.attr("replacement")

    def run(desc_, inputs, outputs, ws):
        if rows:
            st, seed, off, has_state = stream_args(desc, inputs)
            y = outputs[0]
            _multinomial_kernel[(rows,)](inputs[0].contiguous(), y, y if st is None else st, K, ns, seed, off,
                                         REPLACE=rep, F64=x.dtype == DType.f64, HAS_STATE=has_state, CH=ch,
                                         SB=sb if rep else 1, num_warps=8)
    return run


def _randperm_route(desc, pref=None) -> str:
    return "triton:randperm" if desc.attr("n") <= RANDPERM_CAP else "triton:randperm_sorted"


register_triton("randperm", _run_of(_guarded(_bind_randperm)), bind=_guarded(_bind_randperm),
                workspace=_randperm_ws, route=_randperm_route)
register_triton("multinomial", _run_of(_guarded(_bind_multinomial)), bind=_guarded(_bind_multinomial),
                route="triton:multinomial")
