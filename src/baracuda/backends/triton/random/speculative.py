"""speculative_sampling / speculative_sampling_greedy (ops/random_speculative.py): one program per row.

The K acceptance tests are scalar work (two gathered probabilities and one Philox word each, the comparison in f64
where U q is exact); every draft id is range-checked (the indexing family's flag word) whether or not the row
stopped before it, as the reference checks them all.  Then one draw over the row n = #accepted of target_probs
(minus draft_probs' row n, or the one-hot of the rejected draft, when a draft was rejected): pass 1 sums the
fixed-point weights floor(clamp(w, 0, 1) 2^40) of the residual and of the target row at once (int64: the sums
are exact, so any chunking gives the reference's Q); pass 2 walks the chosen weights' running sum chunk by chunk
(tl.cumsum of int64 plus the carried base) to the first index past T = floor(u Q / 2^24).  Two reads of one
[V] row of each operand (128256 f32 = 501 KiB: the second read is mostly L2), B programs.
Last, the output row: the accepted drafts, the token, -1 padding, and the count.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.random_speculative import SPECULATIVE_OPS, draft_error, row_stride
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..indexing.kernels import decode_index_flag, flag_bad_index
from .stream import element_words, stream_args, stream_base, unit

__all__ = []
_CHUNK = 2048
_BIG = tl.constexpr(2 ** 62)


@triton.jit
def _fixed(w):
    """floor(clamp(w, 0, 1) * 2^40) as int64 (w float64, non-negative after the clamp: truncation is the floor)."""
    return (tl.minimum(tl.maximum(w, 0.0), 1.0) * 1099511627776.0).to(tl.int64)


@triton.jit
def _weights(t_row, d_row, v, m, xn, rejected, GREEDY: tl.constexpr):
    """(target, residual) fixed-point weights of a chunk of the drawn row: the residual subtracts the draft row
    (greedy: the one-hot of the rejected draft xn) when a draft was rejected, nothing for the bonus draw."""
    pt = tl.load(t_row + v, mask=m, other=0.0).to(tl.float64)
    if GREEDY:
        sub = tl.where(rejected & (v == xn), 1.0, 0.0).to(tl.float64)
    else:
        sub = tl.load(d_row + v, mask=m & rejected, other=0.0).to(tl.float64)
    return _fixed(pt), _fixed(pt - sub)


@fast_kernel
def _speculative_kernel(ids_ptr, d_ptr, t_ptr, out_ptr, acc_ptr, st_ptr, flag_ptr, K, V, RS, seed0, offset0,
                        si0, si1, sd0, sd1, sd2, st0, st1, st2, GREEDY: tl.constexpr, HAS_STATE: tl.constexpr,
                        CH: tl.constexpr, KB: tl.constexpr):
    b = tl.program_id(0).to(tl.int64)
    seed, offset = stream_base(st_ptr, seed0, offset0, HAS_STATE)
    e0 = offset + b * RS          # RS = row_stride(K) = 2K + 1 elements a row
    ids_row = ids_ptr + b * si0
    n = tl.zeros([], dtype=tl.int64)
    done = n < 0
    for j in loop(0, K):
        x = tl.load(ids_row + j * si1).to(tl.int64)
        ok = (x >= 0) & (x < V)
        flag_bad_index(flag_ptr, x, ~ok)
        xc = tl.where(ok, x, 0)
        p = tl.load(t_ptr + b * st0 + j * st1 + xc * st2).to(tl.float64)
        if GREEDY:
            q = tl.full([], 1.0, tl.float64)
        else:
            q = tl.load(d_ptr + b * sd0 + j * sd1 + xc * sd2).to(tl.float64)
        own, _f, _s, _o = element_words(seed, e0 + 2 * j)
        accept = ok & (unit(own).to(tl.float64) * q < p)
        n += (accept & ~done).to(tl.int64)
        done = done | ~accept
    rejected = n < K
    xn = tl.load(ids_row + tl.minimum(n, K - 1) * si1, mask=rejected, other=0).to(tl.int64)
    own2, _f2, _s2, _o2 = element_words(seed, tl.where(rejected, e0 + 2 * n + 1, e0 + 2 * K))
    t_row = t_ptr + b * st0 + n * st1
    d_row = d_ptr + b * sd0 + tl.minimum(n, K - 1) * sd1
    cols = tl.arange(0, CH).to(tl.int64)
    qt = tl.zeros([CH], dtype=tl.int64)
    qr = tl.zeros([CH], dtype=tl.int64)
    for v0 in loop(0, V, CH):
        v = v0 + cols
        wt, wr = _weights(t_row, d_row, v * st2, v < V, xn * st2, rejected, GREEDY)
        qt += wt
        qr += wr
    use_t = tl.sum(qr, 0) == 0
    Q = tl.where(use_t, tl.sum(qt, 0), tl.sum(qr, 0))
    u = (own2 >> 8).to(tl.int64)
    T = (Q >> 24) * u + (((Q & 0xFFFFFF) * u) >> 24)
    base = tl.zeros([], dtype=tl.int64)
    found = tl.full([], _BIG, tl.int64)
    for v0 in loop(0, V, CH):
        v = v0 + cols
        wt, wr = _weights(t_row, d_row, v * st2, v < V, xn * st2, rejected, GREEDY)
        w = tl.where(use_t, wt, wr)
        c = tl.cumsum(w, 0) + base
        found = tl.minimum(found, tl.min(tl.where((c > T) & (v < V), v, _BIG), 0))
        base += tl.sum(w, 0)
    tok = tl.where(Q > 0, found, 0)
    jj = tl.arange(0, KB).to(tl.int64)
    dr = tl.load(ids_row + jj * si1, mask=jj < n, other=-1).to(tl.int64)
    o = tl.where(jj < n, dr, tl.where(jj == n, tok, -1))
    tl.store(out_ptr + b * (K + 1) + jj, o.to(out_ptr.dtype.element_ty), mask=jj <= K)
    tl.store(acc_ptr + b, n.to(tl.int32))


def _bind(desc, pref=None):
    greedy = desc.op == "speculative_sampling_greedy"
    B, K = desc.inputs[0].shape
    V = desc.inputs[1 if greedy else 2].shape[2]
    ch = min(next_power_of_2(V), _CHUNK)
    n_ops = 2 if greedy else 3

    def run(desc_, inputs, outputs, ws):
        if B == 0:
            return
        ids, tgt = inputs[0], inputs[n_ops - 1]
        d = tgt if greedy else inputs[1]
        st, seed, off, has_state = stream_args(desc, inputs)
        out, acc = outputs
        flag = torch.zeros(1, dtype=torch.int64, device=out.device)
        _speculative_kernel[(B,)](ids, d, tgt, out, acc, out if st is None else st, flag, K, V, row_stride(K), seed, off,
                                  ids.stride(0), ids.stride(1), *d.stride(), *tgt.stride(), GREEDY=greedy,
                                  HAS_STATE=has_state, CH=ch, KB=next_power_of_2(K + 1), num_warps=8 if ch >= 1024 else 4)
        flagged(flag, pref, lambda v: draft_error(desc.op, decode_index_flag(v), V))
    return run


def _precision(desc, pref=None):
    # the acceptance comparisons in f64 (exact products for every dtype but f64), the draw in int64 fixed point:
    # no summation-order effect anywhere, so the tokens are the reference's
    return PrecisionGuarantee(MathPrecision.F64, DType.i64, True, True)


for _op in SPECULATIVE_OPS:
    register_triton(_op, _run_of(_guarded(_bind)), bind=_guarded(_bind), precision=_precision,
                    route=f"triton:{_op} (f64 acceptance, int64 fixed-point draw)")
