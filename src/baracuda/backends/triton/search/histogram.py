"""Triton histc / histogram / bincount.

1. Data range (histc with min == max, histogram without range): ``_minmax_kernel`` writes each BLOCK's min and max,
   ``_range_kernel`` (one program) folds them in a fixed order into the (lo, hi) pair the binning reads, widened
   as torch widens equal bounds: no host read (torch reads them on the host), so the plan captures in a CUDA graph.
2. Each value's bin (``_bin_of``) — float64 (x - lo) * bins / (hi - lo) (the reference's arithmetic, so the
   counts match it exactly), a binary search of the edges tensor, or the integer itself (bincount).  Counts of up
   to 1024 bins: ``_count_kernel``, a local histogram per program (tl.histogram over 16K values) and one atomic per
   bin; otherwise ``_bin_kernel``, an atomic add per value: int32 counts (order-independent, deterministic) or the
   weights (f32 / f64 float atomics: the sums depend on the order the atomics land in; the precision says
   deterministic=False).  bincount flags a value outside
   [0, length) (``_core/checks.py: flagged``) and skips it.
   histogramdd: ``_bindd_kernel``, the row-major flat bin of each point (equal widths per dim), the same atomics.
3. ``_finish_kernel`` (one program): the output in its dtype, the density (hist / (sum * width)) and the edges
   (torch.linspace's values, computed in float64).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.histogram import bincount_error, outer_range
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from ..layout.move import bits
from .search import flat_block, lower_upper

_BLOCK = 1024
_MM_BLOCK = 4096
_LOCAL_BINS = 1024      # counts of up to this many bins: _count_kernel's local histograms
_ITERS = 16             # blocks of _BLOCK values per _count_kernel program (one atomic per bin per 16K values)


@fast_kernel
def _minmax_kernel(part_ptr, x_ptr, n, BLOCK: tl.constexpr):
    p, pm = flat_block(n, BLOCK)
    x = tl.load(x_ptr + p, mask=pm, other=0).to(tl.float64)
    ok = pm & (x == x)                                   # NaN is never a bound
    lo = tl.min(tl.where(ok, x, float("inf")), axis=0)
    hi = tl.max(tl.where(ok, x, -float("inf")), axis=0)
    tl.store(part_ptr + 2 * tl.program_id(0), lo)
    tl.store(part_ptr + 2 * tl.program_id(0) + 1, hi)


@fast_kernel
def _range_kernel(rng_ptr, part_ptr, nb, widen, BLOCK: tl.constexpr):
    lo = tl.min(tl.full([BLOCK], float("inf"), tl.float64), axis=0)
    hi = tl.max(tl.full([BLOCK], -float("inf"), tl.float64), axis=0)
    s = 0
    while s < nb:
        o = s + tl.arange(0, BLOCK)
        lo = tl.minimum(lo, tl.min(tl.load(part_ptr + 2 * o, mask=o < nb, other=float("inf")), axis=0))
        hi = tl.maximum(hi, tl.max(tl.load(part_ptr + 2 * o + 1, mask=o < nb, other=-float("inf")), axis=0))
        s += BLOCK
    same = lo == hi
    tl.store(rng_ptr, tl.where(same, lo - widen, lo))
    tl.store(rng_ptr + 1, tl.where(same, hi + widen, hi))


@triton.jit
def _bin_of(x_ptr, e_ptr, rng_ptr, flag_ptr, p, pm, bins, ne, steps, MODE: tl.constexpr):
    """(bin, counted) of the values at positions ``p``; MODE 0: equal widths over rng_ptr's (lo, hi); 1: the ``ne``
    edges at e_ptr; 2: bincount (bins = length; a value outside [0, length) flags and is not counted)."""
    if MODE == 2:
        v = tl.load(x_ptr + p, mask=pm, other=0).to(tl.int64)
        ok = pm & (v >= 0) & (v < bins)
        bad = pm & ~ok
        # the flag word names a bad value: v + 1 (>= 1) for one past the end, v itself (<= -1) for a negative one
        tl.store(flag_ptr + tl.zeros_like(v), tl.where(v < 0, v, v + 1), mask=bad)
        b = tl.where(ok, v, 0)
    elif MODE == 0:
        x = tl.load(x_ptr + p, mask=pm, other=0).to(tl.float64)
        lo = tl.load(rng_ptr)
        hi = tl.load(rng_ptr + 1)
        ok = pm & (x >= lo) & (x <= hi)
        b = tl.minimum(tl.floor((tl.where(ok, x, lo) - lo) * bins / (hi - lo)).to(tl.int64), bins - 1)
    else:
        x = tl.load(x_ptr + p, mask=pm, other=0)
        first = tl.load(e_ptr)
        last = tl.load(e_ptr + ne - 1)
        ok = pm & (x >= first) & (x <= last)
        up = lower_upper(e_ptr, e_ptr, flag_ptr, 0, x, ok, ne, steps, False, True)
        b = tl.minimum(up - 1, bins - 1)
    return tl.where(ok, b, 0), ok


@fast_kernel
def _bin_kernel(acc_ptr, x_ptr, w_ptr, e_ptr, rng_ptr, flag_ptr, n, bins, ne, steps,
                MODE: tl.constexpr, WEIGHTED: tl.constexpr, ACC_F64: tl.constexpr, BLOCK: tl.constexpr):
    """One atomic add per value (weighted sums, and counts of more than _LOCAL_BINS bins)."""
    p, pm = flat_block(n, BLOCK)
    b, ok = _bin_of(x_ptr, e_ptr, rng_ptr, flag_ptr, p, pm, bins, ne, steps, MODE)
    accumulate(acc_ptr, w_ptr, p, b, ok, WEIGHTED, ACC_F64)


@fast_kernel
def _count_kernel(acc_ptr, x_ptr, e_ptr, rng_ptr, flag_ptr, n, bins, ne, steps, ITERS,
                  MODE: tl.constexpr, NB: tl.constexpr, BLOCK: tl.constexpr):
    """Counts of at most NB bins: the program's ITERS blocks go into a local histogram (tl.histogram), then one
    atomic per non-empty bin.  One atomic per value contends on the few bin words (histc of 64M f32 into 100 bins:
    15.1 ms, torch 0.66 ms on the H100, session 8 run I)."""
    h = tl.zeros([NB], tl.int32)
    for it in loop(0, ITERS):
        p = (tl.program_id(0).to(tl.int64) * ITERS + it) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        b, ok = _bin_of(x_ptr, e_ptr, rng_ptr, flag_ptr, p, p < n, bins, ne, steps, MODE)
        h += tl.histogram(b.to(tl.int32), NB, mask=ok)
    o = tl.arange(0, NB)
    red_add(acc_ptr + o, h, mask=(o < bins) & (h != 0))


@triton.jit
def accumulate(acc_ptr, w_ptr, p, b, ok, WEIGHTED: tl.constexpr, ACC_F64: tl.constexpr):
    """acc[b] += weight[p] (or 1) for the ``ok`` lanes: float atomics (f64 / f32) or int32 counts."""
    if WEIGHTED:
        w = tl.load(w_ptr + p, mask=ok, other=0)
        if ACC_F64:
            red_add(acc_ptr + b, w.to(tl.float64), mask=ok)
        else:
            red_add(acc_ptr + b, w.to(tl.float32), mask=ok)
    else:
        red_add(acc_ptr + b, tl.full(b.shape, 1, tl.int32), mask=ok)


@fast_kernel
def _bindd_kernel(acc_ptr, x_ptr, w_ptr, rng_ptr, bins_ptr, e_ptr, eoff_ptr, n, D, steps,
                  EDGES: tl.constexpr, WEIGHTED: tl.constexpr, ACC_F64: tl.constexpr, BLOCK: tl.constexpr):
    """histogramdd: the row-major flat bin of each D-coordinate point (every dim in its range, else not counted);
    EDGES: dim k's edges at e_ptr[eoff[k]:eoff[k + 1]] (a binary search), else equal widths over rng[2k:2k+2]."""
    p, pm = flat_block(n, BLOCK)
    ok = pm
    flat = tl.zeros([BLOCK], tl.int64)
    k = 0
    while k < D:
        x = tl.load(x_ptr + p * D + k, mask=pm, other=0).to(tl.float64)
        nb = tl.load(bins_ptr + k)
        if EDGES:
            base = tl.load(eoff_ptr + k)
            lo = tl.load(e_ptr + base).to(tl.float64)
            hi = tl.load(e_ptr + base + nb).to(tl.float64)
            ok = ok & (x >= lo) & (x <= hi)
            b = lower_upper(e_ptr, e_ptr, e_ptr, base, x, ok, nb + 1, steps, False, True) - 1
        else:
            lo = tl.load(rng_ptr + 2 * k)
            hi = tl.load(rng_ptr + 2 * k + 1)
            ok = ok & (x >= lo) & (x <= hi)
            b = tl.floor((tl.where(ok, x, lo) - lo) * nb / (hi - lo)).to(tl.int64)
        flat = flat * nb + tl.where(ok, tl.minimum(b, nb - 1), 0)
        k += 1
    accumulate(acc_ptr, w_ptr, p, flat, ok, WEIGHTED, ACC_F64)


@triton.jit
def _volume(o, rng_ptr, bins_ptr, e_ptr, eoff_ptr, D, EDGES: tl.constexpr):
    """The volume of flat bin ``o``: the product of its widths (equal widths: the same for every bin)."""
    vol = tl.zeros(o.shape, tl.float64) + 1.0
    rem = o
    k = D - 1
    while k >= 0:
        nb = tl.load(bins_ptr + k)
        if EDGES:
            at = tl.load(eoff_ptr + k) + rem % nb
            vol = vol * (tl.load(e_ptr + at + 1).to(tl.float64) - tl.load(e_ptr + at).to(tl.float64))
        else:
            vol = vol * ((tl.load(rng_ptr + 2 * k + 1) - tl.load(rng_ptr + 2 * k)) / nb)
        rem = rem // nb
        k -= 1
    return vol


@triton.jit
def _total(acc_ptr, n, DENSITY: tl.constexpr, BLOCK: tl.constexpr):
    """The f64 sum of the n bins (a density's denominator; 0 without density)."""
    total = tl.sum(tl.zeros([BLOCK], tl.float64), axis=0)
    if DENSITY:
        s = 0
        while s < n:
            o = s + tl.arange(0, BLOCK)
            total += tl.sum(tl.load(acc_ptr + o, mask=o < n, other=0).to(tl.float64), axis=0)
            s += BLOCK
    return total


@fast_kernel
def _scaledd_kernel(out_ptr, acc_ptr, rng_ptr, bins_ptr, e_ptr, eoff_ptr, nbins, D,
                    EDGES: tl.constexpr, DENSITY: tl.constexpr, OUT_F64: tl.constexpr, BLOCK: tl.constexpr):
    """histogramdd's output: the counts / sums, or hist / (sum * the bin's volume)."""
    total = _total(acc_ptr, nbins, DENSITY, BLOCK)
    s = 0
    while s < nbins:
        o = s + tl.arange(0, BLOCK)
        h = tl.load(acc_ptr + o, mask=o < nbins, other=0).to(tl.float64)
        if DENSITY:
            h = h / (total * _volume(tl.where(o < nbins, o, 0).to(tl.int64), rng_ptr, bins_ptr, e_ptr, eoff_ptr,
                                     D, EDGES))
        if not OUT_F64:
            h = h.to(tl.float32)
        tl.store(out_ptr + o, h, mask=o < nbins)
        s += BLOCK


@fast_kernel
def _finish_kernel(out_ptr, edges_ptr, acc_ptr, e_ptr, rng_ptr, bins,
                   MODE: tl.constexpr, DENSITY: tl.constexpr, EDGES_OUT: tl.constexpr, HIST_OUT: tl.constexpr,
                   OUT_F64: tl.constexpr, BLOCK: tl.constexpr):
    total = _total(acc_ptr, bins, DENSITY, BLOCK)
    if MODE == 0:
        lo = tl.load(rng_ptr)
        hi = tl.load(rng_ptr + 1)
        step = (hi - lo) / bins
    s = 0
    while s < bins + 1:
        o = s + tl.arange(0, BLOCK)
        if MODE == 0:       # torch.linspace: from the start for the first half, from the end for the second
            e0 = tl.where(o < (bins + 1) // 2, lo + step * o, hi - step * (bins - o))
            e1 = tl.where(o + 1 < (bins + 1) // 2, lo + step * (o + 1), hi - step * (bins - o - 1))
            if EDGES_OUT:
                tl.store(edges_ptr + o, e0 if OUT_F64 else e0.to(tl.float32), mask=o < bins + 1)
        else:
            e0 = tl.load(e_ptr + o, mask=o < bins + 1, other=0).to(tl.float64)
            e1 = tl.load(e_ptr + o + 1, mask=o < bins, other=1).to(tl.float64)
            if EDGES_OUT:
                tl.store(edges_ptr + o, e0 if OUT_F64 else e0.to(tl.float32), mask=o < bins + 1)
        if HIST_OUT:
            h = tl.load(acc_ptr + o, mask=o < bins, other=0).to(tl.float64)
            if DENSITY:
                h = h / (total * (e1 - e0))
            if not OUT_F64:     # (f64 -> f32 -> the output's half type: two exact or correctly rounded steps)
                h = h.to(tl.float32)
            tl.store(out_ptr + o, h, mask=o < bins)
        s += BLOCK


def device_values(values, dtype, dev):
    """A small device tensor of host constants, one fill kernel each (a pageable host-to-device copy would not be
    captured by a CUDA graph; the fills are, with the values baked in: they are the plan's attributes)."""
    out = torch.empty(len(values), dtype=dtype, device=dev)
    for i, v in enumerate(values):
        out[i].fill_(v)
    return out


def _data_range(x, rng, widen):
    n = x.numel()
    nb = cdiv(n, _MM_BLOCK)
    part = torch.empty(2 * nb, dtype=torch.float64, device=x.device)
    _minmax_kernel[(nb,)](part, x, n, BLOCK=_MM_BLOCK, num_warps=8)
    _range_kernel[(1,)](rng, part, nb, widen, BLOCK=1024, num_warps=4)


def _run_hist(desc, pref):
    op = desc.op

    def run(desc_, inputs, outputs, ws):
        x = inputs[0].contiguous()
        dev = x.device
        flag = ws.view(torch.int64)[:1]
        flag.zero_()
        mode, edges, w = 0, None, None
        if op == "bincount":
            mode, bins = 2, desc.attr("length")
            w = inputs[1].contiguous() if len(inputs) == 2 else None
        elif op == "histc":
            bins = desc.attr("bins")
            lo, hi = float(desc.attr("min")), float(desc.attr("max"))
            from_data, widen = lo == hi and x.numel() > 0, 1.0
        else:
            bins = desc.attr("bins")
            rest = inputs[1:]
            if bins is None:
                mode, edges, rest = 1, inputs[1].contiguous(), inputs[2:]
                bins = edges.numel() - 1
            w = rest[0].contiguous() if rest else None
            r = desc.attr("range")
            from_data, widen = r is None and x.numel() > 0, 0.5
            lo, hi = r if r is not None else (None, None)
        rng = None
        if mode == 0:
            if from_data:
                rng = torch.empty(2, dtype=torch.float64, device=dev)
                _data_range(x, rng, widen)
            else:
                lo, hi = outer_range(op, lo, hi, empty=True)
                rng = device_values([lo, hi], torch.float64, dev)
        out = outputs[0]
        acc_f64 = w is not None and out.dtype == torch.float64
        if mode == 2 and w is None:
            acc = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=dev)
            acc.zero_()
        else:
            acc_dt = torch.int32 if w is None else torch.float64 if acc_f64 else torch.float32
            acc = torch.zeros(max(bins, 1), dtype=acc_dt, device=dev)
        n = x.numel()
        if n and bins:
            wb = (bits(w) if w.dtype == torch.bool else w) if w is not None else x
            e = edges if edges is not None else x
            r_ = rng if rng is not None else acc
            if w is None and bins <= _LOCAL_BINS:
                per = _BLOCK * _ITERS
                _count_kernel[(cdiv(n, per),)](acc, x, e, r_, flag, n, bins, e.numel(), int(e.numel()).bit_length(),
                                               _ITERS, MODE=mode, NB=next_power_of_2(bins), BLOCK=_BLOCK,
                                               num_warps=4)
            else:
                _bin_kernel[(cdiv(n, _BLOCK),)](acc, x, wb, e, r_, flag, n, bins, e.numel(),
                                                int(e.numel()).bit_length(), MODE=mode, WEIGHTED=w is not None,
                                                ACC_F64=acc_f64, BLOCK=_BLOCK, num_warps=4)
        if op == "bincount":
            if acc is not out:
                out.copy_(acc[:bins] if acc.dtype == out.dtype else acc[:bins].to(out.dtype))
            flagged(flag[:1], pref, lambda v: bincount_error(int(v) - 1 if v > 0 else int(v), bins))
            return
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=dev)
        eo = outputs[1] if len(outputs) == 2 else None
        eres = eo if eo is None or eo.is_contiguous() else torch.empty(eo.shape, dtype=eo.dtype, device=dev)
        _finish_kernel[(1,)](res, eres if eres is not None else res, acc, edges if edges is not None else acc,
                             rng if rng is not None else acc, bins, MODE=mode,
                             DENSITY=op == "histogram" and desc.attr("density"), EDGES_OUT=eres is not None,
                             HIST_OUT=True, OUT_F64=out.dtype == torch.float64,
                             BLOCK=1024, num_warps=4)
        if res is not out:
            out.copy_(res)
        if eres is not eo:
            eo.copy_(eres)
    return run


def _run_histdd(desc, pref):
    bins = desc.attr("bins")
    counts = desc.outputs[0].shape
    r = desc.attr("range")

    def run(desc_, inputs, outputs, ws):
        d = len(counts)
        x = inputs[0].reshape(-1, d).contiguous()
        dev = x.device
        n = x.shape[0]
        edges = inputs[1:1 + d] if bins is None else ()
        w = inputs[-1].contiguous() if len(inputs) == 1 + len(edges) + 1 else None
        nb = device_values(counts, torch.int64, dev)
        if edges:
            ecat = torch.cat([e.contiguous() for e in edges])
            eoff = device_values([sum(c + 1 for c in counts[:k]) for k in range(d)], torch.int64, dev)
            rng = nb
        elif r is None and n:
            ecat = eoff = rng = torch.empty(2 * d, dtype=torch.float64, device=dev)
            for k in range(d):
                _data_range(x[:, k].contiguous(), rng[2 * k:], 0.5)
        else:
            host = [v for k in range(d) for v in outer_range("histogram", *(r[2 * k:2 * k + 2] if r else (None, None)),
                                                               empty=True)]
            ecat = eoff = rng = device_values(host, torch.float64, dev)
        total = math.prod(counts)
        acc_f64 = w is not None and x.dtype == torch.float64
        acc = torch.zeros(total, dtype=torch.int32 if w is None else torch.float64 if acc_f64 else torch.float32,
                          device=dev)
        if n:
            _bindd_kernel[(cdiv(n, _BLOCK),)](acc, x, w if w is not None else x, rng, nb, ecat, eoff, n, d,
                                              int(max(counts) + 1).bit_length(), EDGES=bool(edges),
                                              WEIGHTED=w is not None, ACC_F64=acc_f64, BLOCK=_BLOCK, num_warps=4)
        res = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=dev) for o in outputs]
        out_f64 = x.dtype == torch.float64
        _scaledd_kernel[(1,)](res[0], acc, rng, nb, ecat, eoff, total, d, EDGES=bool(edges),
                              DENSITY=desc.attr("density"), OUT_F64=out_f64, BLOCK=1024, num_warps=4)
        for k in range(d):
            if edges:
                res[1 + k].copy_(edges[k])
            else:
                _finish_kernel[(1,)](res[0], res[1 + k], acc, acc, rng[2 * k:], counts[k], MODE=0, DENSITY=False,
                                     EDGES_OUT=True, HIST_OUT=False, OUT_F64=out_f64, BLOCK=1024, num_warps=4)
        for o, t in zip(outputs, res):
            if t is not o:
                o.copy_(t)
    return run



def _weighted(desc) -> bool:
    dd = len(desc.inputs[0].shape) and desc.op == "histogramdd"
    return bool((desc.op == "bincount" and len(desc.inputs) == 2) or (
        dd and len(desc.inputs) == 2 + (desc.inputs[0].shape[-1] if desc.attr("bins") is None else 0)) or (
        desc.op == "histogram" and len(desc.inputs) == (2 if desc.attr("bins") is not None else 3)))


def _route(desc, pref=None):
    """Local histograms for counts of up to _LOCAL_BINS bins, else an atomic per value."""
    bins = desc.attr("length") if desc.op == "bincount" else desc.attr("bins")
    if bins is None:    # histogram by an edges tensor
        bins = desc.inputs[1].shape[0] - 1
    local = not _weighted(desc) and bins <= _LOCAL_BINS
    return f"triton:{desc.op}:" + ("local-histogram" if local else "atomic-bins")


def _precision(desc, pref=None):
    weighted = _weighted(desc)
    f64 = desc.outputs[0].dtype == DType.f64
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              bit_stable=not weighted, deterministic=not weighted)


for _op in ("histc", "histogram", "bincount"):
    register_triton(_op, bind=_run_hist, workspace=lambda d: 8, precision=_precision, route=_route)
register_triton("histogramdd", bind=_run_histdd,
                precision=_precision, route="triton:histogramdd:atomic-bins")
