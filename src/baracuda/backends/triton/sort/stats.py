"""Order statistics on Triton: kthvalue, median, nanmedian, quantile, nanquantile and quantile_backward.

Each sorts its rows into the workspace (rows.sort_rows: values in x's dtype + int64 positions; stable, NaN
last) and one ``_pick_kernel`` reads what it needs per row: the non-NaN count by a binary search for the
first NaN (log2(n) + 1 probes), then the sorted position(s) of the statistic and, for quantile, torch's
rank in the input's dtype and its lerp.  quantile_backward runs the same kernel with BW: zero dx, then
(1 - w) * g and w * g are atomically added at the two neighbours' input positions (with one q the two adds
of a position commute exactly; several q's hitting one element add in any order: not bitwise stable).
The sort dominates: one read of x, one write + one read of the sorted row (kernels.py for its paths).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.sort import row_geometry
from ....ops.sort_stats import INTERPOLATIONS, quantile_qs
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .rows import _align, moved, rows_target, sort_rows, sort_ws_bytes

KTH, MEDIAN, NANMEDIAN, QUANTILE, NANQUANTILE = range(5)
_MODES = {"kthvalue": KTH, "median": MEDIAN, "nanmedian": NANMEDIAN, "quantile": QUANTILE,
          "nanquantile": NANQUANTILE}


@triton.jit
def _round_half_even(r):
    f = tl.floor(r)
    d = r - f
    odd = (f - 2.0 * tl.floor(f * 0.5)) != 0
    return tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(odd, f + 1.0, f)))


@fast_kernel
def _pick_kernel(sv_ptr, si_ptr, q_ptr, out_ptr, oi_ptr, g_ptr, dx_ptr, R, n, K, STEPS,
                 MODE: tl.constexpr, INTERP: tl.constexpr, FLOAT: tl.constexpr, BW: tl.constexpr,
                 HAS_I: tl.constexpr, BR: tl.constexpr):
    rows = tl.program_id(0) * BR + tl.arange(0, BR)
    j = tl.program_id(1)
    rm = rows < R
    base = rows.to(tl.int64) * n
    nv = tl.zeros([BR], tl.int32) + n
    if FLOAT:                      # the non-NaN count: NaNs sort last
        lo = tl.zeros([BR], tl.int32)
        hi = tl.zeros([BR], tl.int32) + n
        for _ in loop(0, STEPS):
            act = lo < hi
            mid = (lo + hi) // 2
            v = tl.load(sv_ptr + base + tl.minimum(mid, n - 1), mask=rm & act, other=0)
            v = v.to(tl.float32)         # (the interpreter compares half types as bits)
            nan = v != v
            lo = tl.where(act & (nan == 0), mid + 1, lo)
            hi = tl.where(act & nan, mid, hi)
        nv = lo
    if MODE < 3:
        if MODE == 0:
            pos = tl.zeros([BR], tl.int32) + (K - 1)
        elif MODE == 1:
            pos = tl.where(nv < n, nv, (n - 1) // 2)
        else:
            pos = tl.maximum(nv - 1, 0) // 2
        tl.store(out_ptr + rows, tl.load(sv_ptr + base + pos, mask=rm), mask=rm)
        if HAS_I:
            tl.store(oi_ptr + rows, tl.load(si_ptr + base + pos, mask=rm), mask=rm)
    else:
        q = tl.load(q_ptr + j)
        CT = q.dtype
        if MODE == 4:
            rank = q * (nv.to(CT) - 1.0)
            rank = tl.where(rank < 0, 0.0, rank)
        else:
            last = (tl.zeros([BR], tl.int32) + (n - 1)).to(CT)
            rank = tl.where(nv < n, last, q * last)
        if INTERP == 1:
            rank = tl.floor(rank)
        elif INTERP == 2:
            rank = tl.ceil(rank)
        elif INTERP == 4:
            rank = _round_half_even(rank)
        fl = tl.floor(rank)
        below = fl.to(tl.int32)
        if INTERP == 0:
            above = tl.ceil(rank).to(tl.int32)
            w = rank - fl
        elif INTERP == 3:
            above = tl.ceil(rank).to(tl.int32)
            w = tl.zeros([BR], CT) + 0.5
        else:
            above = below
            w = tl.zeros([BR], CT)
        if BW:
            g = tl.load(g_ptr + j * R + rows, mask=rm, other=0)
            ia = tl.load(si_ptr + base + below, mask=rm, other=0)
            ib = tl.load(si_ptr + base + above, mask=rm, other=0)
            red_add(dx_ptr + base + ia, g * (1.0 - w), mask=rm)
            red_add(dx_ptr + base + ib, g * w, mask=rm & (w != 0))
        else:
            a = tl.load(sv_ptr + base + below, mask=rm, other=0)
            b = tl.load(sv_ptr + base + above, mask=rm, other=0)
            val = tl.where(w < 0.5, a + w * (b - a), b - (b - a) * (1.0 - w))   # torch's lerp
            tl.store(out_ptr + j * R + rows, val, mask=rm)


def _geometry(desc):
    x = desc.inputs[-1]
    dim = desc.attr("dim")
    if dim is None:
        return 1, x.numel, None
    return (*row_geometry(x.shape, dim), dim)


def _layout(desc):
    """(sorted values bytes, sorted positions bytes, dx bytes, sort workspace bytes) of the workspace."""
    x = desc.inputs[-1]
    R, n, _ = _geometry(desc)
    dx = _align(R * n * x.dtype.itemsize) if desc.op == "quantile_backward" else 0
    return _align(R * n * x.dtype.itemsize), _align(R * n * 8), dx, sort_ws_bytes(R, n, x.dtype)


def _workspace(desc) -> int:
    return sum(_layout(desc))


def _rows_of(t, dim):
    return t.reshape(1, -1) if dim is None else moved(t, dim)


def _run(desc, inputs, outputs, ws):
    bw = desc.op == "quantile_backward"
    x = inputs[-1]
    R, n, dim = _geometry(desc)
    if R == 0 or n == 0:
        if desc.op in ("median", "nanmedian") and outputs[0].numel():
            outputs[0].fill_(float("nan") if x.is_floating_point() else torch.iinfo(x.dtype).min)
        return
    vb, ib, db, _ = _layout(desc)
    flat = ws.reshape(-1)
    sv = flat[:R * n * x.element_size()].view(x.dtype).view(R, n)
    si = flat[vb:vb + R * n * 8].view(torch.int64).view(R, n)
    sort_rows(_rows_of(x, dim).contiguous(), sv, si, n, False, flat[vb + ib + db:])
    mode = _MODES["nanquantile" if bw and desc.attr("ignore_nan") else "quantile" if bw else desc.op]
    q = out = oi = g = dx = sv
    nq = 1
    if mode >= QUANTILE:
        qs = quantile_qs(desc.attr("q"))
        nq = len(qs)
        q = torch.tensor(qs, dtype=x.dtype).to(x.device, non_blocking=True)
    if bw:
        g = inputs[0].contiguous()
        dx = flat[vb + ib:vb + ib + R * n * x.element_size()].view(x.dtype).view(R, n)
        dx.zero_()
    else:
        targets = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device)
                   for o in outputs]
        out = targets[0]
        oi = targets[1] if len(targets) > 1 else out
    BR = min(128, next_power_of_2(R))
    _pick_kernel[(cdiv(R, BR), nq)](sv, si, q, out, oi, g, dx, R, n, desc.attr("k") if mode == KTH else 0,
                                    n.bit_length(), MODE=mode,
                                    INTERP=INTERPOLATIONS.index(desc.attr("interpolation")) if mode >= QUANTILE
                                    else 0, FLOAT=x.is_floating_point(), BW=bw,
                                    HAS_I=len(outputs) > 1, BR=BR, num_warps=4)
    if bw:
        o = outputs[0]
        if dim is None:
            o.copy_(dx.view(o.shape))
        else:
            o.reshape(o.shape or (1,)).movedim(dim, -1).copy_(dx.view(o.reshape(o.shape or (1,)).movedim(dim, -1)
                                                                        .shape))
        return
    for o, t in zip(outputs, targets):
        if t is not o:
            o.copy_(t)


def _precision(desc, pref=None):
    f64 = desc.inputs[-1].dtype == DType.f64
    m, d = (MathPrecision.F64, DType.f64) if f64 else (MathPrecision.F32, DType.f32)
    # quantile_backward adds with atomics: several q's on one element add in any order
    det = desc.op != "quantile_backward" or len(quantile_qs(desc.attr("q"))) == 1
    return PrecisionGuarantee(m, d, det, det)


def _route(desc, pref=None):
    R, n, _ = _geometry(desc)
    return f"triton:{desc.op}:sort+pick" + ("-atomic" if desc.op == "quantile_backward" else "")


for _op in ("kthvalue", "median", "nanmedian", "quantile", "nanquantile", "quantile_backward"):
    register_triton(_op, _run, route=_route, workspace=_workspace, precision=_precision)
