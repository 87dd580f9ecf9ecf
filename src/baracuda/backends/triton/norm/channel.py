"""Triton kernels of group_norm / instance_norm and batch_norm (+ backward); local_response_norm and normalize are in
local.py.

Statistics are accumulated in f32 (f64 for f64) as exact per-tile moments merged with Chan's formula
(count, mean, M2): one read of x for the statistics, no E[x^2] - E[x]^2 cancellation.  Every reduction that
spans programs writes per-program partials to the workspace and folds them in a fixed order in a second
kernel: deterministic, no atomics.

group_norm / instance_norm: one program per (sample, group) row of L = C/G x S contiguous elements, tiles
  [BC channels, BS spatial].  Forward: stats pass (1 read) + normalize pass (2nd read, an L2 hit while the
  rows in flight fit: 132 SMs x a 128 KB row ~ 17 MB) + 1 write, i.e. ~2 HBM passes over x+y: bf16
  [16,512,64,64] g32 (64 MB each way) ~ 45 us at ~2.9 TB/s.  mean/rstd (N, G) are saved for the backward:
  pass 1 reads grad and x once for the row sums and the per-(sample, channel) dweight/dbias partials,
  pass 2 re-reads them (L2) and writes dx.  Grid = N x G programs: fine for N x G >= ~2 x SMs; a split-row
  variant for tiny N x G (N=1, G=32) is not done.
batch_norm (training): per-channel statistics over N x S.  Stage 1 (grid channel-blocks x P splits of the
  (n, spatial-block) tiles): partial moments -> workspace [3, P, C].  Stage 2: one program per channel block
  folds the P partials in order, writes mean/rstd and the running-stat update.  Stage 3 (same grid as stage
  1) normalizes: 2 reads + 1 write of x-sized tensors, like cuDNN's two-pass kernel (bf16 [64,256,56,56]:
  ~100 MB per pass, ~100 us expected).  Eval: stage 2 turns the running stats into (mean, rstd), stage 3.
  Backward: stage 1 partial sums of g and g*xhat, stage 2 folds them (dweight, dbias), stage 3 writes dx.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.config import num_sms, overrides
from .._lib.math import sqrt as _sqrt
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.scalars import join_f64 as _f2
from .._lib.scalars import split_f64 as _split
from .layer import _col_sum
from .._lib.launch import bind_kernel, fast_kernel, meta
from .._lib.strided import all_contiguous
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("""Force ``splits`` (batch_norm partial programs) or tile sizes ``bs`` / ``br`` (tests).""")


@triton.jit
def _merge(cnt, mean, m2, n_t, mean_t, m2_t):
    """Chan's parallel merge of (count, mean, M2) moments."""
    tot = cnt + n_t
    d = mean_t - mean
    f = n_t / tl.maximum(tot, 1.0)
    return tot, mean + d * f, m2 + m2_t + d * d * cnt * f


# -- group_norm ---------------------------------------------------------------------------------------
@fast_kernel
def _gn_fw(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, G, Cg, S, eps_hi, eps_lo, HAS_W: tl.constexpr,
           HAS_B: tl.constexpr, F64: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    eps = _f2(eps_hi, eps_lo, F64)
    row = tl.program_id(0).to(tl.int64)
    grp = row % G
    base = row * Cg * S
    zero = tl.sum(tl.zeros([BS], CT), 0)
    cnt, mean, m2 = zero, zero, zero
    ci = 0
    while ci * BC < Cg:   # while + block counters: runs under the interpreter; ci * BC keeps BC-divisibility
        cc = ci * BC + tl.arange(0, BC)
        si = 0
        while si * BS < S:
            ss = si * BS + tl.arange(0, BS)
            mask = (cc < Cg)[:, None] & (ss < S)[None, :]
            x = tl.load(x_ptr + base + cc[:, None] * S + ss[None, :], mask=mask, other=0.0).to(CT)
            n_t = (tl.minimum(Cg - ci * BC, BC) * tl.minimum(S - si * BS, BS)).to(CT)   # valid lanes, no reduction
            mt = tl.sum(tl.sum(x, 1), 0) / n_t
            d = tl.where(mask, x - mt, 0.0)
            cnt, mean, m2 = _merge(cnt, mean, m2, n_t, mt, tl.sum(tl.sum(d * d, 1), 0))
            si += 1
        ci += 1
    rstd = 1.0 / _sqrt(m2 / cnt + eps)
    tl.store(mean_ptr + row, mean.to(mean_ptr.dtype.element_ty))
    tl.store(rstd_ptr + row, rstd.to(rstd_ptr.dtype.element_ty))
    ci = 0
    while ci * BC < Cg:
        cc = ci * BC + tl.arange(0, BC)
        cm = cc < Cg
        sc = tl.full([BC], 1.0, CT) * rstd
        sh = -mean * sc
        if HAS_W:
            w = tl.load(w_ptr + grp * Cg + cc, mask=cm, other=0.0).to(CT)
            sc = sc * w
            sh = sh * w
        if HAS_B:
            sh = sh + tl.load(b_ptr + grp * Cg + cc, mask=cm, other=0.0).to(CT)
        si = 0
        while si * BS < S:
            ss = si * BS + tl.arange(0, BS)
            mask = cm[:, None] & (ss < S)[None, :]
            off = base + cc[:, None] * S + ss[None, :]
            x = tl.load(x_ptr + off, mask=mask, other=0.0).to(CT)
            tl.store(y_ptr + off, (x * sc[:, None] + sh[:, None]).to(y_ptr.dtype.element_ty), mask=mask)
            si += 1
        ci += 1


@fast_kernel
def _gn_bw(g_ptr, x_ptr, mean_ptr, rstd_ptr, w_ptr, c0_ptr, c1_ptr, dx_ptr, ws_ptr, G, Cg, S, NC,
           HAS_W: tl.constexpr, EXTRA: tl.constexpr, F64: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr):
    # pass 1: row sums of w*g and w*g*xhat, per-(n, c) partials of g*xhat and g -> ws [2, N, C]
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    row = tl.program_id(0).to(tl.int64)
    grp = row % G
    n = row // G
    base = row * Cg * S
    mean = tl.load(mean_ptr + row).to(CT)
    rstd = tl.load(rstd_ptr + row).to(CT)
    zero = tl.sum(tl.zeros([BS], CT), 0)
    s1, s2 = zero, zero
    ci = 0
    while ci * BC < Cg:
        cc = ci * BC + tl.arange(0, BC)
        cm = cc < Cg
        if HAS_W:
            w = tl.load(w_ptr + grp * Cg + cc, mask=cm, other=0.0).to(CT)
        else:
            w = tl.full([BC], 1.0, CT)
        dwp = tl.zeros([BC], CT)
        dbp = tl.zeros([BC], CT)
        si = 0
        while si * BS < S:
            ss = si * BS + tl.arange(0, BS)
            mask = cm[:, None] & (ss < S)[None, :]
            off = base + cc[:, None] * S + ss[None, :]
            g = tl.load(g_ptr + off, mask=mask, other=0.0).to(CT)
            xh = tl.where(mask, (tl.load(x_ptr + off, mask=mask, other=0.0).to(CT) - mean) * rstd, 0.0)
            gx = tl.sum(g * xh, 1)
            gs = tl.sum(g, 1)
            dwp += gx
            dbp += gs
            s1 += tl.sum(gs * w, 0)
            s2 += tl.sum(gx * w, 0)
            si += 1
        if HAS_W:
            tl.store(ws_ptr + n * G * Cg + grp * Cg + cc, dwp, mask=cm)
            tl.store(ws_ptr + NC + n * G * Cg + grp * Cg + cc, dbp, mask=cm)
        ci += 1
    L = Cg * S
    a = s1 / L
    b = s2 / L
    e0 = zero
    e1 = zero
    if EXTRA:   # the gradient through the mean/rstd outputs: + c0 + c1 * xhat
        e0 = tl.load(c0_ptr + row).to(CT)
        e1 = tl.load(c1_ptr + row).to(CT)
    # pass 2: dx = rstd * (w*g - mean(w*g) - xhat * mean(w*g*xhat))
    ci = 0
    while ci * BC < Cg:
        cc = ci * BC + tl.arange(0, BC)
        cm = cc < Cg
        if HAS_W:
            w = tl.load(w_ptr + grp * Cg + cc, mask=cm, other=0.0).to(CT)
        else:
            w = tl.full([BC], 1.0, CT)
        si = 0
        while si * BS < S:
            ss = si * BS + tl.arange(0, BS)
            mask = cm[:, None] & (ss < S)[None, :]
            off = base + cc[:, None] * S + ss[None, :]
            g = tl.load(g_ptr + off, mask=mask, other=0.0).to(CT)
            xh = (tl.load(x_ptr + off, mask=mask, other=0.0).to(CT) - mean) * rstd
            dx = rstd * (g * w[:, None] - a - xh * b) + e0 + e1 * xh
            tl.store(dx_ptr + off, dx.to(dx_ptr.dtype.element_ty), mask=mask)
            si += 1
        ci += 1


def _spatial_block(s: int, cap: int) -> int:
    """The widest power-of-two spatial block <= cap whose padding wastes <= 1/8 of the lanes (56x56 = 3136:
    256, 13 blocks = 3328 lanes, instead of 1024 x 4 = 4096 lanes with 23% idle), at least 128 wide."""
    bs = min(next_power_of_2(max(s, 1)), cap)
    while bs > 128 and cdiv(s, bs) * bs * 8 > 9 * s:
        bs //= 2
    return _FORCE.get("bs", bs)


def _tile(c, s, f64):
    """[BC, BS] tile of <= 4096 (f64: 2048) elements: spatial first (contiguous), the rest channels."""
    cap = 2048 if f64 else 4096
    bs = _spatial_block(s, min(cap, 1024))
    bc = max(1, min(next_power_of_2(max(c, 1)), cap // bs))
    return bc, bs, 4 if bc * bs <= 1024 else 8


def _ct(desc):
    return torch.float64 if desc.inputs[0].dtype == DType.f64 else torch.float32


def _gn_groups(desc):
    shape = desc.inputs[0].shape
    return desc.attr("num_groups") if desc.op.startswith("group_norm") else shape[1]


def _bind_gn(desc, pref=None):
    shape = desc.inputs[0].shape
    n, c = shape[0], shape[1]
    s = math.prod(shape[2:])
    g = _gn_groups(desc)
    cg = c // g
    f64 = desc.inputs[0].dtype == DType.f64
    bc, bs, warps = _tile(cg, s, f64)
    naff = len(desc.inputs) - 1

    def run(desc_, inputs, outputs, ws):
        x = inputs[0].contiguous()
        y, mean, rstd = outputs
        w = inputs[1].contiguous() if naff > 0 else x
        b = inputs[2].contiguous() if naff > 1 else x
        if n * g:
            _gn_fw[(n * g,)](x, w, b, y, mean, rstd, g, cg, s, *_split(desc.attr("eps")), HAS_W=naff > 0, HAS_B=naff > 1,
                             F64=f64, BC=bc, BS=bs, num_warps=warps)
    return run


def _bind_gn_bw(desc, pref=None):
    shape = desc.inputs[0].shape
    n, c = shape[0], shape[1]
    s = math.prod(shape[2:])
    g = desc.attr("num_groups")
    cg = c // g
    f64 = desc.inputs[0].dtype == DType.f64
    bc, bs, warps = _tile(cg, s, f64)
    extra = desc.attr("extra")
    has_w = len(desc.inputs) - 2 * extra == 5
    ct = _ct(desc)

    def run(desc_, inputs, outputs, ws):
        gr, x, mean, rstd = (t.contiguous() for t in inputs[:4])
        w = inputs[4].contiguous() if has_w else x
        c0, c1 = (inputs[-2].contiguous(), inputs[-1].contiguous()) if extra else (x, x)
        part = ws.view(ct) if has_w and ws is not None else outputs[0]
        if n * g:
            _gn_bw[(n * g,)](gr, x, mean, rstd, w, c0, c1, outputs[0], part, g, cg, s, n * c, HAS_W=has_w,
                             EXTRA=extra, F64=f64, BC=bc, BS=bs, num_warps=warps)
        for j, o in enumerate(outputs[1:]):
            if n == 0:
                o.zero_()
            else:
                bcs = min(32, next_power_of_2(c))
                _col_sum[(cdiv(c, bcs),)](part[j * n * c:], o, n, c, BP=64, BC=bcs, num_warps=4)
    return run


def _ws_gn_bw(desc):
    shape = desc.inputs[0].shape
    has_w = len(desc.inputs) - 2 * desc.attr("extra") == 5
    return 2 * shape[0] * shape[1] * (8 if desc.inputs[0].dtype == DType.f64 else 4) if has_w else 0


# -- batch_norm ---------------------------------------------------------------------------------------
@triton.jit
def _bn_tile(q, nsb, cc, cm, S, sN, sC, sS, BS: tl.constexpr):
    # tile q = (sample n, spatial block): (q % nsb) * BS keeps the BS-divisibility that vectorizes the loads
    n = q // nsb
    ss = (q % nsb) * BS + tl.arange(0, BS)
    mask = cm[:, None] & (ss < S)[None, :]
    off = n.to(tl.int64) * sN + cc[:, None] * sC + ss[None, :].to(tl.int64) * sS
    return off, mask, n, ss


@fast_kernel
def _bn_stats(x_ptr, ws_ptr, C, S, NQ, QPP, nsb, sN, sC, sS, P, F64: tl.constexpr, BC: tl.constexpr,
              BS: tl.constexpr):
    # each lane of the [BC, BS] tile keeps its own Welford moments over the program's tiles (no cross-lane work
    # per tile); the lanes of a channel are merged once at the end (Chan's formula, a tree)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    p = tl.program_id(1)
    cnt = tl.zeros([BC, BS], CT)
    mean = tl.zeros([BC, BS], CT)
    m2 = tl.zeros([BC, BS], CT)
    q = p * QPP
    end = tl.minimum(q + QPP, NQ)
    while q < end:
        off, mask, _n, _s = _bn_tile(q, nsb, cc, cm, S, sN, sC, sS, BS)
        x = tl.load(x_ptr + off, mask=mask, other=0.0).to(CT)
        c1 = cnt + mask.to(CT)
        d = x - mean
        mean = mean + tl.where(mask, d / tl.maximum(c1, 1.0), 0.0)
        m2 = m2 + tl.where(mask, d * (x - mean), 0.0)
        cnt = c1
        q += 1
    # (a lane that saw nothing has count 0: the merge gives it no weight)
    cnt_c, mean_c, m2_c = tl.reduce((cnt, mean, m2), 1, _merge)
    tl.store(ws_ptr + p * C + cc, cnt_c, mask=cm)
    tl.store(ws_ptr + (P + p) * C + cc, mean_c, mask=cm)
    tl.store(ws_ptr + (2 * P + p) * C + cc, m2_c, mask=cm)


@fast_kernel
def _bn_finalize(ws_ptr, rm_ptr, rv_ptr, mean_ptr, rstd_ptr, nrm_ptr, nrv_ptr, C, P, M, eps_hi, eps_lo, mom_hi,
                 mom_lo, TRAIN: tl.constexpr, RUN: tl.constexpr, F64: tl.constexpr, BC: tl.constexpr,
                 PB: tl.constexpr):
    # folds the P partial moments of each channel, PB partials a step: a [PB, BC] tile of each loaded at once and
    # merged as a tree, the steps in order (a fixed order: deterministic; one partial a step was a chain of P
    # dependent loads, ~30 us at P = 132); writes mean/rstd (dtype) and the f32 (mean, rstd) the normalize stage
    # reads at ws[3P*C:]
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    eps = _f2(eps_hi, eps_lo, F64)
    mom = _f2(mom_hi, mom_lo, F64)
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    if TRAIN:
        cnt = tl.zeros([BC], CT)
        mean = tl.zeros([BC], CT)
        m2 = tl.zeros([BC], CT)
        pp = tl.arange(0, PB)
        p = 0
        while p < P:
            rows = p + pp
            msk = (rows < P)[:, None] & cm[None, :]
            off = rows[:, None] * C + cc[None, :]
            # (a masked partial has count 0: the merge gives it no weight)
            n_c, m_c, q_c = tl.reduce((tl.load(ws_ptr + off, mask=msk, other=0.0),
                                       tl.load(ws_ptr + P * C + off, mask=msk, other=0.0),
                                       tl.load(ws_ptr + 2 * P * C + off, mask=msk, other=0.0)), 0, _merge)
            cnt, mean, m2 = _merge(cnt, mean, m2, n_c, m_c, q_c)
            p += PB
        var = m2 / M
        if RUN:
            rm = tl.load(rm_ptr + cc, mask=cm, other=0.0).to(CT)
            rv = tl.load(rv_ptr + cc, mask=cm, other=0.0).to(CT)
            tl.store(nrm_ptr + cc, ((1.0 - mom) * rm + mom * mean).to(nrm_ptr.dtype.element_ty), mask=cm)
            tl.store(nrv_ptr + cc, ((1.0 - mom) * rv + mom * (m2 / (M - 1))).to(nrv_ptr.dtype.element_ty), mask=cm)
    else:
        mean = tl.load(rm_ptr + cc, mask=cm, other=0.0).to(CT)
        var = tl.load(rv_ptr + cc, mask=cm, other=0.0).to(CT)
    rstd = 1.0 / _sqrt(var + eps)
    tl.store(mean_ptr + cc, mean.to(mean_ptr.dtype.element_ty), mask=cm)
    tl.store(rstd_ptr + cc, rstd.to(rstd_ptr.dtype.element_ty), mask=cm)
    tl.store(ws_ptr + 3 * P * C + cc, mean, mask=cm)
    tl.store(ws_ptr + 3 * P * C + C + cc, rstd, mask=cm)


@fast_kernel
def _bn_apply(x_ptr, w_ptr, b_ptr, y_ptr, st_ptr, C, S, NQ, QPP, nsb, sN, sC, sS, soN, soC, soS, HAS_W: tl.constexpr,
              HAS_B: tl.constexpr, F64: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    mean = tl.load(st_ptr + cc, mask=cm, other=0.0)
    sc = tl.load(st_ptr + C + cc, mask=cm, other=0.0)
    if HAS_W:
        sc = sc * tl.load(w_ptr + cc, mask=cm, other=0.0).to(CT)
    sh = -mean * sc
    if HAS_B:
        sh = sh + tl.load(b_ptr + cc, mask=cm, other=0.0).to(CT)
    q = tl.program_id(1) * QPP
    end = tl.minimum(q + QPP, NQ)
    while q < end:
        off, mask, n, ss = _bn_tile(q, nsb, cc, cm, S, sN, sC, sS, BS)
        x = tl.load(x_ptr + off, mask=mask, other=0.0).to(CT)
        yo = n.to(tl.int64) * soN + cc[:, None] * soC + ss[None, :].to(tl.int64) * soS
        tl.store(y_ptr + yo, (x * sc[:, None] + sh[:, None]).to(y_ptr.dtype.element_ty), mask=mask)
        q += 1


@fast_kernel
def _bn_bw_sums(g_ptr, x_ptr, mean_ptr, rstd_ptr, ws_ptr, C, S, NQ, QPP, nsb, sgN, sgC, sgS, sN, sC, sS, P,
                F64: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr):
    # per-lane sums over the program's tiles, reduced across the lanes once at the end
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    p = tl.program_id(1)
    mean = tl.load(mean_ptr + cc, mask=cm, other=0.0).to(CT)
    rstd = tl.load(rstd_ptr + cc, mask=cm, other=0.0).to(CT)
    sg = tl.zeros([BC, BS], CT)
    sgx = tl.zeros([BC, BS], CT)
    q = p * QPP
    end = tl.minimum(q + QPP, NQ)
    while q < end:
        off, mask, _n, _s = _bn_tile(q, nsb, cc, cm, S, sN, sC, sS, BS)
        goff, _m, _n2, _s2 = _bn_tile(q, nsb, cc, cm, S, sgN, sgC, sgS, BS)
        g = tl.load(g_ptr + goff, mask=mask, other=0.0).to(CT)
        x = tl.load(x_ptr + off, mask=mask, other=0.0).to(CT)
        sg += g
        sgx += g * (x - mean[:, None])      # (masked lanes: g = 0, nothing added)
        q += 1
    tl.store(ws_ptr + p * C + cc, rstd * tl.sum(sgx, 1), mask=cm)
    tl.store(ws_ptr + (P + p) * C + cc, tl.sum(sg, 1), mask=cm)


@fast_kernel
def _bn_bw_fold(ws_ptr, dw_ptr, db_ptr, C, P, WANT_W: tl.constexpr, WANT_B: tl.constexpr, F64: tl.constexpr,
                BC: tl.constexpr, PB: tl.constexpr):
    # the P partial sums of each channel, a [PB, BC] tile a step (as _bn_finalize)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    sgx = tl.zeros([BC], CT)
    sg = tl.zeros([BC], CT)
    pp = tl.arange(0, PB)
    p = 0
    while p < P:
        rows = p + pp
        msk = (rows < P)[:, None] & cm[None, :]
        off = rows[:, None] * C + cc[None, :]
        sgx += tl.sum(tl.load(ws_ptr + off, mask=msk, other=0.0), 0)
        sg += tl.sum(tl.load(ws_ptr + P * C + off, mask=msk, other=0.0), 0)
        p += PB
    tl.store(ws_ptr + 2 * P * C + cc, sgx, mask=cm)
    tl.store(ws_ptr + 2 * P * C + C + cc, sg, mask=cm)
    if WANT_W:
        tl.store(dw_ptr + cc, sgx.to(dw_ptr.dtype.element_ty), mask=cm)
    if WANT_B:
        tl.store(db_ptr + cc, sg.to(db_ptr.dtype.element_ty), mask=cm)


@fast_kernel
def _bn_bw_dx(g_ptr, x_ptr, mean_ptr, rstd_ptr, w_ptr, c0_ptr, c1_ptr, dx_ptr, st_ptr, C, S, NQ, QPP, nsb, sgN,
              sgC, sgS, sN, sC, sS, soN, soC, soS, M, TRAIN: tl.constexpr, HAS_W: tl.constexpr, EXTRA: tl.constexpr,
              F64: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    cc = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cc < C
    mean = tl.load(mean_ptr + cc, mask=cm, other=0.0).to(CT)
    rstd = tl.load(rstd_ptr + cc, mask=cm, other=0.0).to(CT)
    k = rstd
    if HAS_W:
        k = k * tl.load(w_ptr + cc, mask=cm, other=0.0).to(CT)
    if TRAIN:
        mgx = tl.load(st_ptr + cc, mask=cm, other=0.0) / M
        mg = tl.load(st_ptr + C + cc, mask=cm, other=0.0) / M
    if EXTRA:   # the gradient through the mean/rstd/running-stat outputs: + c0 + c1 * xhat
        e0 = tl.load(c0_ptr + cc, mask=cm, other=0.0).to(CT)
        e1 = tl.load(c1_ptr + cc, mask=cm, other=0.0).to(CT)
    q = tl.program_id(1) * QPP
    end = tl.minimum(q + QPP, NQ)
    while q < end:
        off, mask, n, ss = _bn_tile(q, nsb, cc, cm, S, sN, sC, sS, BS)
        goff, _m, _n2, _s2 = _bn_tile(q, nsb, cc, cm, S, sgN, sgC, sgS, BS)
        g = tl.load(g_ptr + goff, mask=mask, other=0.0).to(CT)
        if TRAIN or EXTRA:
            xh = (tl.load(x_ptr + off, mask=mask, other=0.0).to(CT) - mean[:, None]) * rstd[:, None]
        if TRAIN:
            dx = k[:, None] * (g - mg[:, None] - xh * mgx[:, None])
        else:
            dx = k[:, None] * g
        if EXTRA:
            dx = dx + e0[:, None] + e1[:, None] * xh
        yo = n.to(tl.int64) * soN + cc[:, None] * soC + ss[None, :].to(tl.int64) * soS
        tl.store(dx_ptr + yo, dx.to(dx_ptr.dtype.element_ty), mask=mask)
        q += 1


def _bn_geom(desc):
    """(n, c, s, ...) of the [n, c, s] view the kernels walk, and ``rows``: an [N, C] input (BatchNorm1d, or
    channels-last activations flattened to [N * spatial, C] by the drop-in) is walked as [1, C, N] with the
    channels contiguous, in [BC channels, BS rows] tiles whose rows are whole 128-256 B segments (as [N, C, 1] each
    tile would be one row of BC elements, a program's loop ~N / splits steps deep)."""
    shape = desc.inputs[0].shape
    n, c = shape[0], shape[1]
    s = math.prod(shape[2:])
    f64 = desc.inputs[0].dtype == DType.f64
    rows = s == 1 and n > 1
    if rows:
        n, s = 1, n
        bc = max(1, min(next_power_of_2(max(c, 1)), 32 if f64 else 64))
        bs = _FORCE.get("bs", max(1, min(next_power_of_2(s), (1024 if f64 else 2048) // bc)))
    else:
        bs = _spatial_block(s, 1024)
        bc = max(1, min(next_power_of_2(max(c, 1)), 2048 // bs, 1024 if f64 else 2048))
    ncb = cdiv(c, bc) if c else 0
    nsb = cdiv(s, bs) if s else 0
    nq = n * nsb
    # ~4 programs per SM over the channel blocks x splits, each with >= 1 tile
    splits = _FORCE.get("splits", max(1, min(nq, (4 * num_sms()) // max(ncb, 1))))
    qpp = cdiv(nq, splits) if nq else 0
    splits = cdiv(nq, qpp) if nq else 1
    warps = 4 if bc * bs <= 1024 else 8
    return n, c, s, f64, bc, bs, ncb, nsb, nq, splits, qpp, warps, rows


def _fold_block(c, splits):
    """(BC, PB) of the kernels folding the per-split partials of each channel (_bn_finalize, _bn_bw_fold): 64
    channels a program (C / 64 programs, not one for C <= 256), [16, 64] tiles of partials a step."""
    return min(64, next_power_of_2(max(c, 1))), min(16, next_power_of_2(max(splits, 1)))


def _x3(t, n, c, s, rows=False):
    """``t`` as the [n, c, s] view the kernels walk, and its strides (``rows``: an [s, c] matrix, transposed)."""
    v = t.reshape(s, c).t().unsqueeze(0) if rows else t.reshape(n, c, s)
    return v, v.stride(0), v.stride(1), v.stride(2)


def _ws_bn(desc):
    n, c, s, f64, bc, bs, ncb, nsb, nq, splits, qpp, warps, rows = _bn_geom(desc)
    per = 8 if f64 else 4
    if desc.op == "batch_norm":
        return (3 * splits + 2) * c * per
    return (2 * splits + 2) * c * per


def _bind_bn(desc, pref=None):
    n, c, s, f64, bc, bs, ncb, nsb, nq, splits, qpp, warps, rows = _bn_geom(desc)
    ct = _ct(desc)
    ins = len(desc.inputs)
    naff = min(ins - 1, 2)
    train = desc.attr("training")
    run_stats = ins == 5
    bcf, pb = _fold_block(c, splits)
    eps, mom = desc.attr("eps"), desc.attr("momentum")
    m = n * s
    fast = None
    if nq and c:
        # every operand contiguous (the common call): strides fixed here, the three launches bound once (a call
        # then costs a data_ptr per tensor and the C launch, not Triton's ~20-argument specialization, 3x a call)
        geo = (c, s, nq, qpp, nsb, *_x3(meta(desc.inputs[0].shape), n, c, s, rows)[1:])
        fast = (bind_kernel(_bn_stats, (ncb, splits), geo + (splits,), F64=f64, BC=bc, BS=bs, num_warps=warps)
                if train else None,
                bind_kernel(_bn_finalize, (cdiv(c, bcf),), (c, splits, m, *_split(eps), *_split(mom)), TRAIN=train,
                            RUN=run_stats and train, F64=f64, BC=bcf, PB=pb, num_warps=4),
                bind_kernel(_bn_apply, (ncb, splits), geo + geo[5:], HAS_W=naff > 0, HAS_B=naff > 1, F64=f64, BC=bc,
                            BS=bs, num_warps=warps))

    def run(desc_, inputs, outputs, ws):
        if fast is not None and all_contiguous(inputs):     # (outputs: contiguous, _guarded)
            x, wsv = inputs[0], ws.view(ct)
            rm, rv = (inputs[3], inputs[4]) if run_stats else (x, x)
            y, mean, rstd = outputs[:3]
            nrm, nrv = (outputs[3], outputs[4]) if len(outputs) == 5 else (mean, rstd)
            if train:
                fast[0](x, wsv)
            fast[1](wsv, rm, rv, mean, rstd, nrm, nrv)
            fast[2](x, inputs[1] if naff > 0 else x, inputs[2] if naff > 1 else x, y, wsv[3 * splits * c:])
            return
        x, sN, sC, sS = _x3(inputs[0], n, c, s, rows)
        w = inputs[1].contiguous() if naff > 0 else x
        b = inputs[2].contiguous() if naff > 1 else x
        rm, rv = (inputs[3].contiguous(), inputs[4].contiguous()) if run_stats else (x, x)
        y, mean, rstd = outputs[:3]
        nrm, nrv = (outputs[3], outputs[4]) if len(outputs) == 5 else (mean, rstd)
        wsv = ws.view(ct)
        if train and nq:
            _bn_stats[(ncb, splits)](x, wsv, c, s, nq, qpp, nsb, sN, sC, sS, splits, F64=f64, BC=bc, BS=bs,
                                     num_warps=warps)
        if c:
            _bn_finalize[(cdiv(c, bcf),)](wsv, rm, rv, mean, rstd, nrm, nrv, c, splits, m, *_split(eps), *_split(mom),
                                                 TRAIN=train, RUN=run_stats and train, F64=f64, BC=bcf, PB=pb,
                                                 num_warps=4)
        if nq:
            _, *so = _x3(y, n, c, s, rows)
            _bn_apply[(ncb, splits)](x, w, b, y, wsv[3 * splits * c:], c, s, nq, qpp, nsb, sN, sC, sS, *so,
                                     HAS_W=naff > 0, HAS_B=naff > 1, F64=f64, BC=bc, BS=bs, num_warps=warps)
    return run


def _bind_bn_bw(desc, pref=None):
    n, c, s, f64, bc, bs, ncb, nsb, nq, splits, qpp, warps, rows = _bn_geom(desc)
    ct = _ct(desc)
    extra = desc.attr("extra")
    has_w = len(desc.inputs) - 2 * extra == 5
    train = desc.attr("training")
    want_w, want_b = len(desc.outputs) >= 2, len(desc.outputs) == 3
    bcf, pb = _fold_block(c, splits)
    fast = None
    if nq and c:     # every operand contiguous: bound once (as the forward's)
        st = _x3(meta(desc.inputs[0].shape), n, c, s, rows)[1:]
        sums = train or want_w
        fast = (bind_kernel(_bn_bw_sums, (ncb, splits), (c, s, nq, qpp, nsb, *st, *st, splits), F64=f64, BC=bc, BS=bs,
                            num_warps=warps) if sums else None,
                bind_kernel(_bn_bw_fold, (cdiv(c, bcf),), (c, splits), WANT_W=want_w, WANT_B=want_b, F64=f64, BC=bcf,
                            PB=pb, num_warps=4) if sums else None,
                bind_kernel(_bn_bw_dx, (ncb, splits), (c, s, nq, qpp, nsb, *st, *st, *st, max(n * s, 1)), TRAIN=train,
                            HAS_W=has_w, EXTRA=extra, F64=f64, BC=bc, BS=bs, num_warps=warps))

    def run(desc_, inputs, outputs, ws):
        if fast is not None and all_contiguous(inputs):     # (outputs: contiguous, _guarded)
            g, x, mean, rstd = inputs[:4]
            w = inputs[4] if has_w else x
            c0, c1 = (inputs[-2], inputs[-1]) if extra else (x, x)
            dx = outputs[0]
            dw = outputs[1] if want_w else dx
            db = outputs[2] if want_b else dx
            wsv = ws.view(ct)
            if fast[0] is not None:
                fast[0](g, x, mean, rstd, wsv)
                fast[1](wsv, dw, db)
            fast[2](g, x, mean, rstd, w, c0, c1, dx, wsv[2 * splits * c:])
            return
        g, sgN, sgC, sgS = _x3(inputs[0], n, c, s, rows)
        x, sN, sC, sS = _x3(inputs[1], n, c, s, rows)
        mean, rstd = inputs[2].contiguous(), inputs[3].contiguous()
        w = inputs[4].contiguous() if has_w else x
        c0, c1 = (inputs[-2].contiguous(), inputs[-1].contiguous()) if extra else (x, x)
        dx = outputs[0]
        dw = outputs[1] if want_w else dx
        db = outputs[2] if want_b else dx
        wsv = ws.view(ct)
        if nq and (train or want_w):
            _bn_bw_sums[(ncb, splits)](g, x, mean, rstd, wsv, c, s, nq, qpp, nsb, sgN, sgC, sgS, sN, sC, sS, splits,
                                       F64=f64, BC=bc, BS=bs, num_warps=warps)
        if c and (train or want_w):
            if nq:
                _bn_bw_fold[(cdiv(c, bcf),)](wsv, dw, db, c, splits, WANT_W=want_w, WANT_B=want_b, F64=f64,
                                                    BC=bcf, PB=pb, num_warps=4)
            else:
                for o in outputs[1:]:
                    o.zero_()
        if nq:
            _, *so = _x3(dx, n, c, s, rows)
            _bn_bw_dx[(ncb, splits)](g, x, mean, rstd, w, c0, c1, dx, wsv[2 * splits * c:], c, s, nq, qpp, nsb, sgN,
                                     sgC, sgS, sN, sC, sS, *so, max(n * s, 1), TRAIN=train, HAS_W=has_w, EXTRA=extra,
                                     F64=f64, BC=bc, BS=bs, num_warps=warps)
    return run


for _op, _bind, _ws in (("group_norm", _bind_gn, None), ("instance_norm", _bind_gn, None),
                        ("group_norm_backward", _bind_gn_bw, _ws_gn_bw), ("batch_norm", _bind_bn, _ws_bn),
                        ("batch_norm_backward", _bind_bn_bw, _ws_bn)):
    register_triton(_op, _run_of(_guarded(_bind)), bind=_guarded(_bind), workspace=_ws, route=f"triton:{_op}")
