"""top_k_top_p_sampling without sorting (ops/random_sampling.py): one program per row.

Pass 1: the row's sum and max.  Then the keep threshold t_kp = the largest f32 t with #{p >= t} >= k or
mass{p >= t} >= top_p * sum, by a four-way search over t's bit pattern (non-negative floats order as their int32
bits): each pass over the row counts and sums p >= t at three pivots splitting [lo, hi) in quarters, so 16 passes
find the 31-bit pattern where a bisection took 31 (the row, 128256 f32 = 501 KiB, stays in L2 across the passes;
one program per row is latency-bound: the passes, not the bytes, are the cost).  The kept set {p >= t_kp} is the one the reference's sort gives (t_kp is
exactly a row value: the predicate only changes at row values).  t = min(max(t_kp, min_p * max), max).  Last
pass: the first kept index whose running mass exceeds U * mass(kept), U the 24-bit uniform of stream element
offset + row.
Counts and masses are f32 (f64 for f64 rows) where the reference sums in float64: a row differs only where the
top-p mass meets top_p * sum to within that rounding.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .stream import element_words, stream_args, stream_base, unit

__all__ = []
_CHUNK = 4096


@triton.jit
def _weights(xr, k0, cols, V, CT: tl.constexpr):
    """A chunk of the row: negative weights as 0, lanes past the row -1 (below every threshold)."""
    p = tl.load(xr + k0 + cols, mask=k0 + cols < V, other=0.0).to(CT)
    return tl.where(k0 + cols < V, tl.maximum(p, 0.0), -1.0)


@triton.jit
def _count_mass(xr, V, t, cols, CT: tl.constexpr, CH: tl.constexpr):
    n = tl.zeros([CH], dtype=tl.int32)
    s = tl.zeros([CH], dtype=CT)
    for k0 in loop(0, V, CH):
        p = _weights(xr, k0, cols, V, CT)
        ge = p >= t
        n += ge.to(tl.int32)
        s += tl.where(ge, p, 0.0)
    return tl.sum(n, 0), tl.sum(s, 0)


@triton.jit
def _count_mass3(xr, V, t1, t2, t3, cols, CT: tl.constexpr, CH: tl.constexpr):
    """(count, mass) of p >= t at three thresholds t1 <= t2 <= t3, in one pass over the row."""
    n1 = tl.zeros([CH], dtype=tl.int32)
    n2 = tl.zeros([CH], dtype=tl.int32)
    n3 = tl.zeros([CH], dtype=tl.int32)
    s1 = tl.zeros([CH], dtype=CT)
    s2 = tl.zeros([CH], dtype=CT)
    s3 = tl.zeros([CH], dtype=CT)
    for k0 in loop(0, V, CH):
        p = _weights(xr, k0, cols, V, CT)
        g1, g2, g3 = p >= t1, p >= t2, p >= t3
        n1 += g1.to(tl.int32)
        n2 += g2.to(tl.int32)
        n3 += g3.to(tl.int32)
        s1 += tl.where(g1, p, 0.0)
        s2 += tl.where(g2, p, 0.0)
        s3 += tl.where(g3, p, 0.0)
    return tl.sum(n1, 0), tl.sum(s1, 0), tl.sum(n2, 0), tl.sum(s2, 0), tl.sum(n3, 0), tl.sum(s3, 0)


@fast_kernel
def _sampling_kernel(x_ptr, k_ptr, p_ptr, m_ptr, y_ptr, st_ptr, V, seed0, offset0, F64: tl.constexpr,
                     HAS_STATE: tl.constexpr, CH: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    seed, offset = stream_base(st_ptr, seed0, offset0, HAS_STATE)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    IT: tl.constexpr = tl.int64 if F64 else tl.int32
    xr = x_ptr + row * V
    cols = tl.arange(0, CH).to(tl.int64)
    tot = tl.zeros([CH], dtype=CT)
    mx = tl.zeros([CH], dtype=CT)
    for k0 in loop(0, V, CH):
        p = _weights(xr, k0, cols, V, CT)
        tot += tl.maximum(p, 0.0)
        mx = tl.maximum(mx, p)
    total = tl.sum(tot, 0)
    pmax = tl.max(mx, 0)
    k = tl.load(k_ptr + row).to(tl.int32)
    k = tl.where((k <= 0) | (k >= V), V, k)
    top_p = tl.load(p_ptr + row).to(CT)
    min_p = tl.load(m_ptr + row).to(CT)
    target = top_p * total
    # a four-way search over the bit pattern: pred(lo) holds (t = 0 keeps everything), pred(hi) is taken as false;
    # pred is monotone, so lo moves to the highest pivot where it holds and hi to the lowest where it does not
    lo = tl.zeros([], dtype=IT)
    hi = pmax.to(IT, bitcast=True) + 1
    for _ in loop(0, 32 if F64 else 16):
        if hi - lo > 1:
            m2 = lo + (hi - lo) // 2
            m1 = lo + (m2 - lo) // 2
            m3 = m2 + (hi - m2) // 2
            n1, s1, n2, s2, n3, s3 = _count_mass3(xr, V, m1.to(CT, bitcast=True), m2.to(CT, bitcast=True),
                                                  m3.to(CT, bitcast=True), cols, CT, CH)
            ok1 = (n1 >= k) | ((top_p < 1.0) & (s1 >= target))
            ok2 = (n2 >= k) | ((top_p < 1.0) & (s2 >= target))
            ok3 = (n3 >= k) | ((top_p < 1.0) & (s3 >= target))
            new_lo = tl.where(ok3, m3, tl.where(ok2, m2, tl.where(ok1, m1, lo)))
            hi = tl.where(~ok1, m1, tl.where(~ok2, m2, tl.where(~ok3, m3, hi)))
            lo = new_lo
    t = tl.minimum(tl.maximum(lo.to(CT, bitcast=True), min_p * pmax), pmax)
    _n, kept = _count_mass(xr, V, t, cols, CT, CH)
    own, _f, _s, _o = element_words(seed, offset + row)
    goal = unit(own).to(CT) * kept
    base = tl.zeros([], dtype=CT)
    found = tl.full([], 2 ** 62, tl.int64)
    last = tl.full([], -1, tl.int64)
    for k0 in loop(0, V, CH):
        idx = k0 + cols
        p = _weights(xr, k0, cols, V, CT)
        w = tl.where(p >= t, p, 0.0)
        c = tl.cumsum(w, 0) + base
        found = tl.minimum(found, tl.min(tl.where((c > goal) & (w > 0), idx, 2 ** 62), 0))
        last = tl.maximum(last, tl.max(tl.where(w > 0, idx, -1), 0))
        base += tl.sum(w, 0)
    res = tl.where(found < 2 ** 62, found, last)
    tl.store(y_ptr + row, tl.maximum(res, 0))


def _bind(desc, pref=None):
    B, V = desc.inputs[0].shape
    f64 = desc.inputs[0].dtype == DType.f64
    ch = min(next_power_of_2(V), _CHUNK // (2 if f64 else 1))

    def run(desc_, inputs, outputs, ws):
        if B:
            probs, k, p, m = (t.contiguous() for t in inputs[:4])
            st, seed, off, has_state = stream_args(desc, inputs)
            y = outputs[0]
            _sampling_kernel[(B,)](probs, k, p, m, y, y if st is None else st, V, seed, off, F64=f64,
                                   HAS_STATE=has_state, CH=ch, num_warps=8)
    return run


register_triton("top_k_top_p_sampling", _run_of(_guarded(_bind)), bind=_guarded(_bind),
                route="triton:top_k_top_p_sampling")
