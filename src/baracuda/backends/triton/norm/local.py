"""Triton kernels of local_response_norm and normalize (+ backward): norms over a window of channels or a vector.

local_response_norm: tiles [BC, BS] of one sample; the channel window is re-read per offset (size loads per
  element, L1/L2 hits: HBM traffic stays 1 read + 1 write); the backward recomputes each window's
  denominator (size^2 loads per element from cache; compute-bound for size > ~8).
normalize: x viewed as (outer, R, inner) with its strides (no copies); tile [lanes, BR] where lanes are rows
  (inner == 1) or inner positions (inner > 1, coalesced along inner); pass 1 the norm, pass 2 the write
  (the second read hits L1/L2 for rows up to a few KB per lane).
"""
from __future__ import annotations

import math

import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.binding import contiguous_outputs as _guarded
from .._lib.binding import run_of as _run_of
from .._lib.geometry import cdiv, lanes_view, next_power_of_2, outer_r_inner
from .._lib.launch import fast_kernel
from .._lib.math import pow as _pow
from .._lib.math import sqrt as _sqrt
from .._lib.register import register_triton
from .._lib.scalars import join_f64 as _f2
from .._lib.scalars import split_f64 as _split
from .channel import _FORCE     # (one override table for the norm kernels over channels: channel.forced)

# -- local_response_norm --------------------------------------------------------------------------------
@triton.jit
def _lrn_den(x_ptr, base, cc, ss, sm, C, S, size, lo, alpha, k, CT: tl.constexpr, BC: tl.constexpr,
             BS: tl.constexpr, FLOOR: tl.constexpr = False):
    acc = tl.zeros([BC, BS], CT)
    j = 0
    while j < size:
        cj = cc - lo + j
        m = ((cj >= 0) & (cj < C))[:, None] & sm[None, :]
        v = tl.load(x_ptr + base + cj[:, None] * S + ss[None, :], mask=m, other=0.0).to(CT)
        acc += v * v
        j += 1
    if FLOOR:     # an integer input's window mean, rounded down (torch's integer avg_pool)
        return k + alpha * tl.floor(acc / size)
    return k + alpha / size * acc


@fast_kernel
def _lrn_kernel(g_ptr, x_ptr, y_ptr, C, S, size, alpha_hi, alpha_lo, beta_hi, beta_lo, k_hi, k_lo, BW: tl.constexpr, F64: tl.constexpr,
                BC: tl.constexpr, BS: tl.constexpr, FLOOR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    alpha = _f2(alpha_hi, alpha_lo, F64)
    beta = _f2(beta_hi, beta_lo, F64)
    k = _f2(k_hi, k_lo, F64)
    n = tl.program_id(0).to(tl.int64)
    cc = tl.program_id(1) * BC + tl.arange(0, BC)
    ss = tl.program_id(2) * BS + tl.arange(0, BS)
    sm = ss < S
    mask = (cc < C)[:, None] & sm[None, :]
    base = n * C * S
    off = base + cc[:, None] * S + ss[None, :]
    x = tl.load(x_ptr + off, mask=mask, other=0.0).to(CT)
    lo = size // 2
    d = _lrn_den(x_ptr, base, cc, ss, sm, C, S, size, lo, alpha, k, CT, BC, BS, FLOOR)
    if BW:
        g = tl.load(g_ptr + off, mask=mask, other=0.0).to(CT)
        # channels whose window holds c: [c - (size-1)//2, c + size//2]
        t = tl.zeros([BC, BS], CT)
        hi = (size - 1) // 2
        i = 0
        while i < size:
            ci = cc - hi + i
            mi = ((ci >= 0) & (ci < C))[:, None] & sm[None, :]
            oi = base + ci[:, None] * S + ss[None, :]
            gi = tl.load(g_ptr + oi, mask=mi, other=0.0).to(CT)
            xi = tl.load(x_ptr + oi, mask=mi, other=0.0).to(CT)
            di = _lrn_den(x_ptr, base, ci, ss, sm, C, S, size, lo, alpha, k, CT, BC, BS)
            t += tl.where(mi, gi * xi * _pow(di, -beta - 1.0), 0.0)
            i += 1
        out = g * _pow(d, -beta) - (2.0 * alpha * beta / size) * x * t
    else:
        out = x * _pow(d, -beta)
    tl.store(y_ptr + off, out.to(y_ptr.dtype.element_ty), mask=mask)


def _bind_lrn(desc, pref=None):
    shape = desc.inputs[0].shape
    n, c = shape[0], shape[1]
    s = math.prod(shape[2:])
    f64 = desc.inputs[0].dtype == DType.f64
    bs = min(next_power_of_2(max(s, 1)), 256)
    bc = max(1, min(next_power_of_2(max(c, 1)), 1024 // bs))
    bw = desc.op.endswith("_backward")
    a = desc.attr_dict

    def run(desc_, inputs, outputs, ws):
        ts = [t.contiguous() for t in inputs]
        g, x = (ts[0], ts[1]) if bw else (ts[0], ts[0])
        if n and c and s:
            _lrn_kernel[(n, cdiv(c, bc), cdiv(s, bs))](g, x, outputs[0], c, s, a["size"], *_split(a["alpha"]),
                                                                     *_split(a["beta"]), *_split(a["k"]), BW=bw, F64=f64, BC=bc, BS=bs,
                                                                     FLOOR=a["floor_mean"],
                                                                     num_warps=4)
    return run


# -- normalize --------------------------------------------------------------------------------------------
@triton.jit
def _nrm_step(x, mask, acc, KIND: tl.constexpr, p):
    ax = tl.abs(x)
    if KIND == 0:
        return acc + tl.sum(x * x, 1)
    elif KIND == 1:
        return acc + tl.sum(ax, 1)
    elif KIND == 2:
        return tl.maximum(acc, tl.max(ax, 1))
    elif KIND == 5:   # p = -inf: the smallest magnitude
        return tl.minimum(acc, tl.min(tl.where(mask, ax, float("inf")), 1))
    elif KIND == 3:   # any other p != 0: a zero entry adds 0 (p > 0) or inf (p < 0: the norm is then 0, as torch)
        zero_term = tl.where(p < 0, float("inf"), 0.0)
        return acc + tl.sum(tl.where(ax > 0, _pow(ax, p), tl.where(mask, zero_term, 0.0)), 1)
    else:             # p = 0: the count of nonzeros
        return acc + tl.sum(tl.where(ax != 0, 1.0, 0.0), 1)


@triton.jit
def _nrm_fin(acc, KIND: tl.constexpr, p):
    if KIND == 0:
        return _sqrt(acc)
    elif KIND == 3:
        return tl.where(acc > 0, _pow(acc, 1.0 / p), 0.0)
    else:
        return acc


@fast_kernel
def _normalize_kernel(g_ptr, x_ptr, y_ptr, L, R, sa, sl, sr, ga, gl, gr, ya, yl, yr, p_hi, p_lo, eps_hi, eps_lo, NLB,
                      BW: tl.constexpr,
                      KIND: tl.constexpr, F64: tl.constexpr, BL: tl.constexpr, BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    p = _f2(p_hi, p_lo, F64)
    eps = _f2(eps_hi, eps_lo, F64)
    pid = tl.program_id(0).to(tl.int64)   # 1-D grid (axis 1 is limited to 65535 programs)
    a = pid // NLB
    lanes = (pid % NLB) * BL + tl.arange(0, BL)
    lm = lanes < L
    lanes = lanes.to(tl.int64)
    acc = tl.zeros([BL], CT) + (float("inf") if KIND == 5 else 0.0)
    gx = tl.zeros([BL], CT)
    ri = 0
    while ri * BR < R:
        rr = ri * BR + tl.arange(0, BR)
        mask = lm[:, None] & (rr < R)[None, :]
        x = tl.load(x_ptr + a * sa + lanes[:, None] * sl + rr[None, :] * sr, mask=mask, other=0.0).to(CT)
        acc = _nrm_step(x, mask, acc, KIND, p)
        if BW:
            g = tl.load(g_ptr + a * ga + lanes[:, None] * gl + rr[None, :] * gr, mask=mask, other=0.0).to(CT)
            gx += tl.sum(g * x, 1)
        ri += 1
    nrm = _nrm_fin(acc, KIND, p)
    den = tl.maximum(nrm, eps)
    ties = tl.zeros([BL], CT)
    if BW and (KIND == 2 or KIND == 5):
        ri = 0
        while ri * BR < R:
            rr = ri * BR + tl.arange(0, BR)
            mask = lm[:, None] & (rr < R)[None, :]
            x = tl.load(x_ptr + a * sa + lanes[:, None] * sl + rr[None, :] * sr, mask=mask, other=0.0).to(CT)
            ties += tl.sum(tl.where(mask & (tl.abs(x) == nrm[:, None]), 1.0, 0.0), 1)
            ri += 1
    coef = tl.where((nrm >= eps) & (nrm > 0), gx / (den * den), 0.0)
    ri = 0
    while ri * BR < R:
        rr = ri * BR + tl.arange(0, BR)
        mask = lm[:, None] & (rr < R)[None, :]
        x = tl.load(x_ptr + a * sa + lanes[:, None] * sl + rr[None, :] * sr, mask=mask, other=0.0).to(CT)
        if BW:
            g = tl.load(g_ptr + a * ga + lanes[:, None] * gl + rr[None, :] * gr, mask=mask, other=0.0).to(CT)
            sgn = tl.where(x > 0, 1.0, tl.where(x < 0, -1.0, 0.0))
            nn = tl.where(nrm > 0, nrm, 1.0)[:, None]
            if KIND == 0:
                dn = x / nn
            elif KIND == 1:
                dn = sgn
            elif KIND == 2 or KIND == 5:   # +-inf: the (tied) extreme entries share the gradient, as torch
                dn = tl.where(tl.abs(x) == nrm[:, None], sgn, 0.0) / tl.maximum(ties, 1.0)[:, None]
            elif KIND == 3:
                dn = sgn * tl.where(x != 0, _pow(tl.abs(x) / nn, p - 1.0), 0.0)
            else:         # p = 0: the count has no gradient
                dn = x * 0.0
            out = g / den[:, None] - coef[:, None] * dn
        else:
            out = x / den[:, None]
        tl.store(y_ptr + a * ya + lanes[:, None] * yl + rr[None, :] * yr, out.to(y_ptr.dtype.element_ty), mask=mask)
        ri += 1


def _bind_normalize(desc, pref=None):
    shape = desc.inputs[0].shape or (1,)     # a 0-d x: one 1-element row
    dim = desc.attr("dim")
    outer, r, inner = outer_r_inner(shape, dim)
    p = desc.attr("p")
    # kinds: 0 p = 2, 1 p = 1, 2 p = inf, 5 p = -inf, 4 p = 0 (a count), 3 any other p (a pow per entry)
    kind = 0 if p == 2.0 else 1 if p == 1.0 else (2 if p > 0 else 5) if math.isinf(p) else 4 if p == 0 else 3
    f64 = desc.inputs[0].dtype == DType.f64
    br = _FORCE.get("br", min(next_power_of_2(max(r, 1)), 2048 if inner == 1 else 64))
    bl = max(1, min(next_power_of_2(max(outer if inner == 1 else inner, 1)), 4096 // br))
    bw = desc.op.endswith("_backward")

    def run(desc_, inputs, outputs, ws):
        if not desc.inputs[0].shape:
            inputs, outputs = [t.reshape(1) for t in inputs], [t.reshape(1) for t in outputs]
        xi = inputs[1] if bw else inputs[0]
        x, ga, L, sa, sl, sr = lanes_view(xi, outer, r, inner)
        g, _, _, gsa, gsl, gsr = lanes_view(inputs[0], outer, r, inner) if bw else (x, 0, 0, 0, 0, 0)
        y, _, _, ya, yl, yr = lanes_view(outputs[0], outer, r, inner)
        if x.numel():
            nlb = cdiv(L, bl)
            _normalize_kernel[(ga * nlb,)](g, x, y, L, r, sa, sl, sr, gsa, gsl, gsr, ya, yl, yr,
                                           *_split(p if not math.isinf(p) else 0.0), *_split(desc.attr("eps")), nlb,
                                           BW=bw, KIND=kind, F64=f64, BL=bl, BR=br,
                                                        num_warps=4 if bl * br <= 1024 else 8)
    return run

for _op, _bind in (("local_response_norm", _bind_lrn), ("local_response_norm_backward", _bind_lrn),
                   ("normalize", _bind_normalize), ("normalize_backward", _bind_normalize)):
    register_triton(_op, _run_of(_guarded(_bind)), bind=_guarded(_bind), route=f"triton:{_op}")
