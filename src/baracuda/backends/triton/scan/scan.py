"""Triton kernels of the scan family: one template kernel, parallel scans with ``tl.associative_scan``.

Every operand is viewed as (outer, R, inner) with its own strides (R = the scan axis) and the problem as
LANES independent scans of length R.  A program owns BL lanes and walks its part of R in tiles of BS
positions: each tile is scanned in parallel (``tl.associative_scan``: per-thread serial scans, warp
shuffles, one shared-memory exchange across warps), merged with the running carry of the previous tiles,
stored, and its last element (in scan order) becomes the new carry.  Combine functions: sum, prod
(``tl.cumsum``/``tl.cumprod``), logaddexp, max/min with index (NaN sticky, ties to the later-visited
position), and the affine map (a, b) of the backward recurrences h = a * h_prev + b.

* "rows" (inner == 1, the scan axis contiguous): tiles [BL rows, BS positions] of 16 KB of input
  (4096 f32 / 8192 bf16 elements; BS = min(R, that), short rows stack BL rows), 8 warps, scanned along
  axis 1 with 16 B vector loads.  cumsum f32 [4096, 4096]: one program per row, one tile, 4 B read + 4 B
  written per element in one pass; ~3 programs of 8 warps per SM keep ~48 KB in flight per SM (HBM3 needs
  ~20 KB at ~3 TB/s and ~0.7 us latency): expected ~2.6-2.9 TB/s on an H100 (134 MB in ~50 us; torch
  eager 0.57 TB/s).  bf16 moves 2 + 2 B per element: the same time per byte.
* "cols" (inner > 1): tiles [BS positions, BL lanes] with BL = 128 threads x 16 B of contiguous inner
  elements (512 f32, 1024 bf16), so every thread holds a whole column segment and the scan along axis 0
  stays inside the thread (no shuffles), loads coalesced along the inner axis; no transpose copies.
* "split" (few lanes, long R: fewer than 2 programs per SM otherwise): R is cut into SPLITS chunks of
  whole tiles.  Stage 1 scans each chunk without storing and writes its total (value, index / affine
  pair) to the workspace; stage 2 folds the totals of the preceding chunks (scan order) into its carry
  and scans + stores.  3 passes over HBM instead of 2, but thousands of programs instead of a handful:
  cumsum of one 1M-element f32 row runs 256 programs of 4096 (vs one program walking 256 tiles serially);
  [4096, 4096] f32 along dim 0 (8 column blocks) runs 32 splits x 8 = 256 programs, ~2.0-2.3 TB/s counted
  as 2 passes.  Stage 2 walks the grid in reverse so its first reads hit what stage 1 left in L2.
  Deterministic (fixed combine order, no atomics).

Accumulation: f32 for f16/bf16/f32 (torch does the same on the GPU), f64 for f64, int64 for integer and
bool cumsum/cumprod (wrapping like torch); cummax/cummin compare in f32/f64/int64 (exact for every input).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ....ops.scan import scan_geometry
from .._lib.register import register_triton
from .._lib.config import num_sms, overrides
from .._lib.geometry import view3 as _view3
from .._lib.math import exp, log1p
from .._lib.strided import span
from .._lib.interp import loop
from ...._core.device import triton_interpreting
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

# Triton 3.6's interpreter cannot take range() over runtime ints with NumPy >= 2.4; there the loops are
# `while` loops (same semantics).  On the GPU they stay `for` loops.

SUM, PROD, MAX, MIN, LSE, PROD_BW, LSE_BW, EXT_BW = range(8)
_MODES = {"cumsum": SUM, "cumprod": PROD, "cummax": MAX, "cummin": MIN, "logcumsumexp": LSE,
          "cumprod_backward": PROD_BW, "logcumsumexp_backward": LSE_BW, "cummax_backward": EXT_BW}
_TWO = (MAX, MIN, PROD_BW, LSE_BW, EXT_BW)       # modes whose scan carries a second component
_BW = (PROD_BW, LSE_BW, EXT_BW)


# -- combine functions (first argument = earlier in scan order) ------------------------------------
@triton.jit
def _cmax(v1, i1, v2, i2):
    # the later element wins if it is NaN, or >= a non-NaN running max (torch: ties -> the later index)
    w = (v2 != v2) | ((v1 == v1) & (v2 >= v1))
    return tl.where(w, v2, v1), tl.where(w, i2, i1)


@triton.jit
def _cmin(v1, i1, v2, i2):
    w = (v2 != v2) | ((v1 == v1) & (v2 <= v1))
    return tl.where(w, v2, v1), tl.where(w, i2, i1)


@triton.jit
def _lae(a, b):
    """log(exp(a) + exp(b)) without overflow; (-inf, -inf) -> -inf, +inf absorbs, NaN propagates."""
    mx = tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
    mn = tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
    d = tl.where(mx == mn, 0.0, mn - mx)          # equal infinities: no inf - inf
    return mx + log1p(exp(d))


@triton.jit
def _caff(a1, b1, a2, b2):
    # h -> a2 * (a1 * h + b1) + b2
    return a1 * a2, a2 * b1 + b2


@triton.jit
def _scan(v, w, MODE: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr):
    if MODE == 0:
        v = tl.cumsum(v, AXIS, reverse=REV)
    elif MODE == 1:
        v = tl.cumprod(v, AXIS, reverse=REV)
    elif MODE == 2:
        v, w = tl.associative_scan((v, w), AXIS, _cmax, reverse=REV)
    elif MODE == 3:
        v, w = tl.associative_scan((v, w), AXIS, _cmin, reverse=REV)
    elif MODE == 4:
        v = tl.associative_scan(v, AXIS, _lae, reverse=REV)
    else:
        v, w = tl.associative_scan((v, w), AXIS, _caff, reverse=REV)
    return v, w


@triton.jit
def _merge(cv, cw, v, w, MODE: tl.constexpr):
    """The carry (everything before this tile in scan order) combined into every scanned element."""
    if MODE == 0:
        v = cv + v
    elif MODE == 1:
        v = cv * v
    elif MODE == 2:
        v, w = _cmax(cv, cw, v, w)
    elif MODE == 3:
        v, w = _cmin(cv, cw, v, w)
    elif MODE == 4:
        v = _lae(cv, v)
    else:
        v, w = _caff(cv, cw, v, w)
    return v, w


@triton.jit
def _pick(t, k, AXIS: tl.constexpr):
    """t's element at position k along AXIS (exact: one value plus zeros)."""
    if AXIS == 1:
        kk = tl.arange(0, t.shape[1])[None, :]
    else:
        kk = tl.arange(0, t.shape[0])[:, None]
    return tl.sum(tl.where(kk == k, t, tl.zeros_like(t)), AXIS)


@triton.jit
def _expand(c, AXIS: tl.constexpr):
    if AXIS == 1:
        return c[:, None]
    else:
        return c[None, :]


@triton.jit
def _identity(BL: tl.constexpr, MODE: tl.constexpr, CT: tl.constexpr, PAD: tl.constexpr):
    if MODE == 2 or MODE == 3:
        return tl.full([BL], PAD, CT), tl.zeros([BL], tl.int64)
    elif MODE >= 5:
        return tl.full([BL], 1, CT), tl.zeros([BL], CT)
    else:
        return tl.full([BL], PAD, CT), tl.zeros([BL], tl.int32)


@triton.jit
def _grid(pos, pm, lanes, lm, AXIS: tl.constexpr):
    """(positions, lanes, mask) broadcast to the tile's 2-D layout: [lanes, positions] for AXIS 1, else
    [positions, lanes]."""
    if AXIS == 1:
        return pos[None, :], lanes[:, None], lm[:, None] & pm[None, :]
    else:
        return pos[:, None], lanes[None, :], pm[:, None] & lm[None, :]


@triton.jit
def _carry(v, w, cw, off, end, AXIS: tl.constexpr, REV: tl.constexpr, TWO: tl.constexpr, BS: tl.constexpr):
    """The new carry: the last VALID element in scan order of a merged tile whose first position is off (max/min
    padding is not an identity on ties)."""
    if REV:
        last = 0
    else:
        last = tl.minimum(end - 1 - off, BS - 1)
    cv = _pick(v, last, AXIS)
    if TWO:
        cw = _pick(w, last, AXIS)
    return cv, cw


@triton.jit
def _nth(base, i, n, STEP: tl.constexpr, REV: tl.constexpr):
    """Start of the i-th of n STEP-wide blocks from base, visited in scan order (last block first when REV)."""
    if REV:
        return base + (n - 1 - i) * STEP
    else:
        return base + i * STEP


# -- loads and stores of one tile ----------------------------------------------------------------
@triton.jit
def _load(p1, p2, p3, o, P, Lx, mask, R, s1o, s1r, s1l, s2o, s2r, s2l, s3o, s3r, s3l, OUT_T: tl.constexpr,
          MODE: tl.constexpr, REV: tl.constexpr, CT: tl.constexpr, PAD: tl.constexpr, F64: tl.constexpr):
    """(v, w, f): the scan operands of a tile (padding = the identity) and, backward, the output factor."""
    f = tl.zeros(P.shape, CT) + tl.zeros(Lx.shape, CT)
    if MODE < 5:
        x = tl.load(p1 + o * s1o + P * s1r + Lx * s1l, mask=mask, other=0)
        if MODE < 2:
            x = x.to(OUT_T)          # torch's dtype=: cast to the output dtype first, then accumulate
        v = tl.where(mask, x.to(CT), PAD)
        w = tl.zeros(v.shape, tl.int32)
    else:
        # h_t = a_t * h_(t-1) + g_t along the backward scan; its predecessor in scan order is the NEXT
        # position of the forward op (pp), the output factor uses the PREVIOUS forward position (pf)
        if REV:
            pp = P + 1
        else:
            pp = P - 1
        pf = 2 * P - pp
        mp = mask & (pp >= 0) & (pp < R)
        w = tl.load(p1 + o * s1o + P * s1r + Lx * s1l, mask=mask, other=0).to(CT)
        if MODE == 5:      # cumprod: a = x[pp], f = out[pf] (the exclusive prefix product)
            # (masked loads take other=0 and the 1 is put in after the cast: the interpreter reads a bf16
            # `other=1` as the bit pattern 0x0001)
            v = tl.load(p2 + o * s2o + pp * s2r + Lx * s2l, mask=mp, other=0).to(CT)
            v = tl.where(mp, v, 1.0)
            mf = mask & (pf >= 0) & (pf < R)
            f = tl.load(p3 + o * s3o + pf * s3r + Lx * s3l, mask=mf, other=0).to(CT)
            f = tl.where(mf, f, 1.0)
        elif MODE == 6:    # logcumsumexp: a = exp(y - y[pp]) <= 1, f = exp(x - y) (0 where x = -inf)
            y = tl.load(p3 + o * s3o + P * s3r + Lx * s3l, mask=mask, other=0).to(CT)
            yn = tl.load(p3 + o * s3o + pp * s3r + Lx * s3l, mask=mp, other=0).to(CT)
            d = tl.where(yn == float("-inf"), float("-inf"), y - yn)   # a -inf prefix: y = -inf too
            v = tl.where(mp, exp(d), 1.0)
            x = tl.load(p2 + o * s2o + P * s2r + Lx * s2l, mask=mask, other=0).to(CT)
            f = tl.where(x == float("-inf"), 0.0, exp(x - y))
        else:              # cummax/cummin: segmented sum over runs of equal indices, f = (idx == position)
            i = tl.load(p2 + o * s2o + P * s2r + Lx * s2l, mask=mask, other=0)
            inext = tl.load(p2 + o * s2o + pp * s2r + Lx * s2l, mask=mp, other=-1)
            v = tl.where(mp, tl.where(inext == i, 1.0, 0.0), 1.0).to(CT)
            f = tl.where(i == P, 1.0, 0.0).to(CT)
        w = tl.where(mask, w, 0.0)
    return v, w, f


@triton.jit
def _tile(p1, p2, p3, y_ptr, yi_ptr, o, l, lm, off, end, R, cv, cw, s1o, s1r, s1l, s2o, s2r, s2l, s3o, s3r, s3l,
          syo, syr, syl, MODE: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr, STORE: tl.constexpr,
          BS: tl.constexpr, CT: tl.constexpr, PAD: tl.constexpr, TWO: tl.constexpr, F64: tl.constexpr,
          I64: tl.constexpr):
    k = tl.arange(0, BS)
    pos = off + k
    if I64:
        pos = pos.to(tl.int64)
    P, Lx, mask = _grid(pos, pos < end, l, lm, AXIS)
    v, w, f = _load(p1, p2, p3, o, P, Lx, mask, R, s1o, s1r, s1l, s2o, s2r, s2l, s3o, s3r, s3l,
                    y_ptr.dtype.element_ty, MODE, REV, CT, PAD, F64)
    if MODE == 2 or MODE == 3:   # in-tile positions while scanning (i32), global indices after
        if AXIS == 1:
            w = w + k[None, :]
        else:
            w = w + k[:, None]
    v, w = _scan(v, w, MODE, AXIS, REV)
    if MODE == 2 or MODE == 3:
        w = w.to(tl.int64) + off
    v, w = _merge(_expand(cv, AXIS), _expand(cw, AXIS), v, w, MODE)
    if STORE:
        yp = o * syo + P * syr + Lx * syl
        if MODE >= 5:
            tl.store(y_ptr + yp, tl.where(f == 0, 0.0, w * f).to(y_ptr.dtype.element_ty), mask=mask)
        else:
            tl.store(y_ptr + yp, v.to(y_ptr.dtype.element_ty), mask=mask)
            if TWO:
                tl.store(yi_ptr + yp, w, mask=mask)
    return _carry(v, w, cw, off, end, AXIS, REV, TWO, BS)


@triton.jit
def _fold_block(ws_ptr, wsi_ptr, gl, lm, k0, hi, wsl, wsk, cv, cw, MODE: tl.constexpr, AXIS: tl.constexpr,
                REV: tl.constexpr, KB: tl.constexpr, CT: tl.constexpr, PAD: tl.constexpr, TWO: tl.constexpr):
    k = k0 + tl.arange(0, KB)
    K, G, m = _grid(k, k < hi, gl, lm, AXIS)
    offs = G * wsl + K * wsk
    v = tl.load(ws_ptr + offs, mask=m, other=0)
    if MODE >= 5:
        v = tl.where(m, v, 1.0)
    else:
        v = tl.where(m, v, PAD)
    if TWO:
        w = tl.load(wsi_ptr + offs, mask=m, other=0)
    else:
        w = tl.zeros(v.shape, tl.int32)
    v, w = _scan(v, w, MODE, AXIS, REV)
    v, w = _merge(_expand(cv, AXIS), _expand(cw, AXIS), v, w, MODE)
    return _carry(v, w, cw, k0, hi, AXIS, REV, TWO, KB)


@fast_kernel
def _scan_kernel(p1, p2, p3, y_ptr, yi_ptr, ws_ptr, wsi_ptr, L, R, CHUNK, NSPLIT, NLB,
                 s1o, s1r, s1l, s2o, s2r, s2l, s3o, s3r, s3l, syo, syr, syl, wsl, wsk,
                 MODE: tl.constexpr, AXIS: tl.constexpr, REV: tl.constexpr, STAGE: tl.constexpr,
                 BS: tl.constexpr, BL: tl.constexpr, KB: tl.constexpr, CT: tl.constexpr, PAD: tl.constexpr,
                 TWO: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr):
    pid = tl.program_id(0)
    split = tl.program_id(1)
    if STAGE == 2:   # reverse grid order: the first re-reads are what stage 1 streamed last (L2-resident)
        pid = tl.num_programs(0) - 1 - pid
        split = NSPLIT - 1 - split
    if I64:
        pid = pid.to(tl.int64)
    o = pid // NLB
    l = (pid % NLB) * BL + tl.arange(0, BL)
    lm = l < L
    gl = o * L + l                       # lane id in the workspace
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, R)
    cv, cw = _identity(BL, MODE, CT, PAD)
    if STAGE == 2:   # fold the totals of the chunks before this one (in scan order), KB at a time
        if REV:
            lo = split + 1
            hi = NSPLIT
        else:
            lo = 0
            hi = split
        nb = tl.cdiv(hi - lo, KB)
        for b in loop(0, nb):
            cv, cw = _fold_block(ws_ptr, wsi_ptr, gl, lm, _nth(lo, b, nb, KB, REV), hi, wsl, wsk, cv, cw, MODE,
                                 AXIS, REV, KB, CT, PAD, TWO)
    nt = tl.cdiv(end - start, BS)
    for t in loop(0, nt):
        cv, cw = _tile(p1, p2, p3, y_ptr, yi_ptr, o, l, lm, _nth(start, t, nt, BS, REV), end, R, cv, cw, s1o, s1r,
                       s1l, s2o, s2r, s2l, s3o, s3r, s3l, syo, syr, syl, MODE, AXIS, REV, STAGE != 1, BS, CT, PAD,
                       TWO, F64, I64)
    if STAGE == 1:
        tl.store(ws_ptr + gl * wsl + split * wsk, cv, mask=lm)
        if TWO:
            tl.store(wsi_ptr + gl * wsl + split * wsk, cw, mask=lm)


# -- configuration -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Config:
    axis: int        # 1: "rows" (scan along the contiguous axis), 0: "cols"
    bs: int          # positions per tile
    bl: int          # lanes per tile
    splits: int      # chunks of R (> 1: the two-stage split path with a workspace)
    chunk: int       # positions per chunk (a multiple of bs)
    kb: int          # chunk totals folded per step in stage 2
    num_warps: int


_FORCE, forced = overrides("""Force ``elems`` (tile elements) / ``splits`` in :func:`choose` (tests).""")


def choose(outer: int, R: int, inner: int, itemsize: int, mode: int) -> Config:
    """Tiles of ~16 KB of the widest operand (4096 f32, 8192 bf16 elements; 2048 at most for the two-component
    scans, whose index/affine half doubles the registers).  Under the interpreter tiles default to 256
    elements: the interpreter runs custom combines element by element, and small tiles exercise the loops."""
    elems = 256 if triton_interpreting() else min(8192, 16384 // itemsize)
    if mode in _TWO:
        elems = min(elems, 2048)
    elems = _FORCE.get("elems", elems)
    if inner == 1:
        lanes, axis = outer, 1
        bs = min(next_power_of_2(max(R, 1)), elems)
        bl = max(1, min(elems // bs, next_power_of_2(max(lanes, 1))))
        nlb = cdiv(lanes, bl)
        progs = nlb
        warps = 4 if bs * bl <= 2048 else 8
    else:
        lanes, axis = inner, 0
        # 128 threads x 16 B of contiguous inner elements: each thread owns whole column segments
        bl = min(next_power_of_2(lanes), max(1, 2048 // itemsize), elems)
        bs = max(1, min(elems // bl, next_power_of_2(max(R, 1))))
        progs = outer * cdiv(lanes, bl)
        warps = 4
    ntiles = cdiv(max(R, 1), bs)
    sms = num_sms()
    auto = min(ntiles, cdiv(2 * sms, progs)) if progs < 2 * sms and ntiles > 1 else 1
    splits = max(1, min(_FORCE.get("splits", auto), ntiles))
    chunk = cdiv(ntiles, splits) * bs
    splits = cdiv(max(R, 1), chunk)
    kb = max(1, min(next_power_of_2(splits), max(1, elems // bl)))
    return Config(axis, bs, bl, splits, chunk, kb, warps)


# -- host side ------------------------------------------------------------------------------------------
_TL = {DType.f64: tl.float64, DType.f32: tl.float32, DType.i64: tl.int64}


def _compute(desc, mode) -> DType:
    """The accumulate / compare dtype: f64 for f64, f32 for other floats, i64 for integer and bool."""
    t = desc.outputs[0].dtype if mode in (SUM, PROD) else desc.inputs[0].dtype
    if t == DType.f64:
        return DType.f64
    return DType.f32 if t.is_floating else DType.i64


def _pad(mode, ct: DType):
    if mode == SUM:
        return 0
    if mode == PROD or mode in _BW:
        return 1
    if mode == LSE:
        return float("-inf")
    if ct.is_floating:
        return float("-inf") if mode == MAX else float("inf")
    return -2 ** 63 if mode == MAX else 2 ** 63 - 1     # no int64 value loses to the padding


def _config(desc) -> tuple[Config, int, int, int]:
    outer, R, inner = scan_geometry(desc.inputs[0].shape, desc.attr("dim"))
    itemsize = max(t.dtype.itemsize for t in desc.inputs + desc.outputs)
    return choose(outer, R, inner, itemsize, _MODES[desc.op]), outer, R, inner


def _ws_layout(desc):
    """(bytes of the value region, bytes in all): per lane and chunk one total (+ index / affine b)."""
    c, outer, R, inner = _config(desc)
    if c.splits == 1:
        return 0, 0
    mode = _MODES[desc.op]
    n = outer * inner * c.splits
    vb = n * _compute(desc, mode).itemsize
    vb = (vb + 15) // 16 * 16
    return vb, vb + (n * 8 if mode in _TWO else 0)


def _workspace(desc) -> int:
    return _ws_layout(desc)[1]


def _bind(desc, pref=None):
    """Everything that depends only on the descriptor, computed once per plan; returns run()."""
    mode = _MODES[desc.op]
    dim, rev = desc.attr("dim"), desc.attr("reverse")
    c, outer, R, inner = _config(desc)
    ct = _compute(desc, mode)
    if mode in _BW:
        rev = not rev                       # the backward recurrence runs against the forward scan
    two = mode in _TWO
    if c.axis == 1:
        lanes, O = outer, 1
        ystr = (0, 1, R)
    else:
        lanes, O = inner, outer
        ystr = (R * inner, inner, 1)
    nlb = cdiv(lanes, c.bl)
    grid = (O * nlb, c.splits)
    vb, total = _ws_layout(desc)
    n_lanes = O * lanes
    wstr = (c.splits, 1) if c.axis == 1 else (1, n_lanes)
    wdt = ct.torch
    idt = torch.int64 if mode in (MAX, MIN) else wdt
    kw = dict(MODE=mode, AXIS=c.axis, REV=rev, BS=c.bs, BL=c.bl, KB=c.kb, CT=_TL[ct], PAD=_pad(mode, ct),
              TWO=two, F64=ct == DType.f64, num_warps=c.num_warps)
    stages = (0,) if c.splits == 1 else (1, 2)

    def strides(st):
        so, sr, si = st
        return (0, sr, so) if c.axis == 1 else (so, sr, si)

    def run(desc_, inputs, outputs, ws):
        targets = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs]
        views = [_view3(x, dim) for x in inputs]
        ins = [v[0] for v in views] + [views[0][0]] * (3 - len(views))
        sts = [strides(v[1]) for v in views] + [strides(views[0][1])] * (3 - len(views))
        y = targets[0]
        yi = targets[1] if len(targets) > 1 else y
        if c.splits > 1:
            flat = ws.reshape(-1)
            wsv = flat[:vb].view(wdt)
            wsi = flat[vb:total].view(idt) if two else wsv
        else:
            wsv = wsi = y
        i64 = max([y.numel()] + [span(x) for x in ins]) >= 2 ** 31 - 65536
        args = ins + [y, yi, wsv, wsi, lanes, R, c.chunk, c.splits, nlb]
        args += [s for st in sts for s in st] + list(ystr) + list(wstr)
        for stage in stages:
            _scan_kernel[grid](*args, STAGE=stage, I64=i64, **kw)
        for o, t in zip(outputs, targets):
            if t is not o:
                o.copy_(t)

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    c = _config(desc)[0]
    path = "rows" if c.axis == 1 else "cols"
    tag = f"{path}{c.bl}x{c.bs}" if c.axis == 1 else f"{path}{c.bs}x{c.bl}"
    return f"triton:{desc.op}:{tag}" + (f"-split{c.splits}" if c.splits > 1 else "")


for _op in _MODES:
    register_triton(_op, _run, route=_route, workspace=_workspace, bind=_bind)
