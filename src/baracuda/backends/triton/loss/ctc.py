"""Triton ctc_loss / ctc_loss_backward: one program per sequence running the time recursion over its 2S+1 states.

Forward (_ctc, GRAD=False): the program holds alpha_t over a BLOCK_S >= 2 max(L) + 1 block of states in
  registers; alpha_{t-1}(s-1) and alpha_{t-1}(s-2) are the same vector shifted, which Triton cannot shift in
  registers, so each step stores alpha_t to a per-sequence scratch row (ping-pong, 2 x BLOCK_S words, L1/L2
  resident) and reloads the two shifted views after a block barrier.  Per step: one gather of lp[t, n, l'_s]
  (2S+1 loads, C-strided), a 3-way logsumexp (3 exp + 1 log per state).  T steps are sequential: the op is
  latency-bound (~1-2 us per step on H100: store, barrier, two L1 loads, the gather), so e.g. T = 1000
  takes ~1-2 ms whatever N is, and N sequences run in parallel up to N programs (N <= SMs x ~8).
Backward (GRAD=True): the alpha pass keeps every alpha_t row ([N, T, BLOCK_S] f32 workspace, T N BLOCK_S 4
  bytes: 1000 x 32 x 512 -> 65 MB), then the beta pass runs t = T_n - 1 .. 0 the same way, and per step adds
  -scale_n exp(alpha_t(s) + beta_t(s) - lp[t, l'_s] + loss_n) into d lp[t, n, l'_s].  Several states share a
  class (every even state is blank; repeated labels), so the adds are atomic: they only collide within the
  program (it owns the rows (t, n, :)), into an f32 buffer (d log_probs itself when it is f32 and contiguous,
  else a workspace copied out with one cast).  d lp is zero where t >= T_n or the class is not on the path
  (the buffer is zero-filled first: one write of T N C words).
Host: the lengths and labels are validated on the host (one device-to-host copy of the lengths and targets:
  label out of range, blank among the labels, lengths above T / the padded width), which also gives max(L)
  for BLOCK_S (<= 4096 states: S <= 2047).
"""
from __future__ import annotations

import numpy as np
import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.errors import UnsupportedError
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.loss_ctc import ctc_geometry, validate_ctc
from .._lib.atomics import red_add
from .._lib.register import register_triton
from .._lib.math import exp_acc as _ex
from .._lib.math import log_acc as _lg
from .._lib.interp import loop
from .ce_kernels import _RED
from .pointwise import _pw_fold
from .._lib.launch import fast_kernel
from .._lib.geometry import next_power_of_2

_MAX_STATES = 4096


@triton.jit
def _lse3(a, b, c, F64: tl.constexpr):
    m = tl.maximum(tl.maximum(a, b), c)
    ms = tl.where(m == float("-inf"), 0.0, m)
    return ms + _lg(_ex(a - ms, F64) + _ex(b - ms, F64) + _ex(c - ms, F64), F64)


@triton.jit
def _alpha_step(lp_ptr, base, a, t, s, valid, lab, skip, slt, slc, GRAD: tl.constexpr, F64: tl.constexpr,
                BLOCK_S: tl.constexpr):
    if GRAD:   # every alpha row is kept for the beta pass
        row_prev = base + (t - 1) * BLOCK_S
        row_cur = base + t * BLOCK_S
    else:      # two ping-pong rows
        row_prev = base + ((t - 1) % 2) * BLOCK_S
        row_cur = base + (t % 2) * BLOCK_S
    tl.debug_barrier()   # row_prev was written by the whole program in the previous step
    a1 = tl.load(row_prev + s - 1, mask=valid & (s >= 1), other=float("-inf"))
    a2 = tl.load(row_prev + s - 2, mask=valid & skip, other=float("-inf"))
    x = tl.load(lp_ptr + t.to(tl.int64) * slt + lab * slc, mask=valid, other=0.0).to(a.dtype)
    a = tl.where(valid, _lse3(a, a1, a2, F64) + x, float("-inf"))
    tl.store(row_cur + s, a)
    return a


@triton.jit
def _beta_step(lp_ptr, row_prev, row_cur, arow, g_ptr, b, t, s, ns, valid, lab, skip_up, nll, sc, N, C, slt, slc,
               FIRST: tl.constexpr, F64: tl.constexpr, BLOCK_S: tl.constexpr):
    t64 = t.to(tl.int64)   # T N C may pass 2^31
    x = tl.load(lp_ptr + t64 * slt + lab * slc, mask=valid, other=0.0).to(b.dtype)
    if not FIRST:
        tl.debug_barrier()
        b1 = tl.load(row_prev + s + 1, mask=s + 1 < ns, other=float("-inf"))
        b2 = tl.load(row_prev + s + 2, mask=valid & skip_up, other=float("-inf"))
        b = tl.where(valid, _lse3(b, b1, b2, F64) + x, float("-inf"))
    tl.store(row_cur + s, b)
    a = tl.load(arow + s, mask=valid, other=float("-inf"))
    e = _ex(a + b - x + nll, F64) * sc
    e = tl.where(valid, e, 0.0)
    e = tl.where(sc == 0.0, 0.0, e)   # zeroed sequences (zero_infinity, T_n = 0): no NaN from inf - inf
    red_add(g_ptr + t64 * N * C + lab, -e, mask=valid)
    # torch's convention adds exp(lp[t, n, c]) * scale over every class (module doc of ops/loss_ctc.py), in
    # chunks of the state block; 0 for a zeroed sequence (sc == 0, whatever lp holds)
    for c0 in loop(0, C, BLOCK_S):
        cc = c0 + s
        mc = cc < C
        xc = tl.load(lp_ptr + t64 * slt + cc.to(tl.int64) * slc, mask=mc, other=0.0).to(b.dtype)
        red_add(g_ptr + t64 * N * C + cc, tl.where(sc == 0.0, 0.0, _ex(xc, F64) * sc), mask=mc)
    return b


@fast_kernel
def _ctc(lp_ptr, tg_ptr, off_ptr, il_ptr, tl_ptr, gout_ptr, loss_ptr, ws_ptr, g_ptr, T, N, C, slt, sln, slc, sts, sil,
         stl, blank, GRAD: tl.constexpr, RED: tl.constexpr, ZINF: tl.constexpr, NONE: tl.constexpr,
         F64: tl.constexpr, BLOCK_S: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    n = tl.program_id(0)
    tn = tl.load(il_ptr + n * sil).to(tl.int32)
    ln = tl.load(tl_ptr + n * stl).to(tl.int32)
    off = tl.load(off_ptr + n)
    s = tl.arange(0, BLOCK_S)
    ns = 2 * ln + 1
    valid = s < ns
    odd = (s % 2) == 1
    lab = tl.load(tg_ptr + (off + (s - 1) // 2) * sts, mask=valid & odd, other=blank).to(tl.int64)
    lab = tl.where(valid & odd, lab, blank)
    lab2 = tl.load(tg_ptr + (off + (s - 3) // 2) * sts, mask=valid & odd & (s >= 3), other=blank).to(tl.int64)
    skip = valid & odd & (s >= 3) & (lab2 != lab)   # alpha_t(s) may come from s - 2
    lp_n = lp_ptr + n.to(tl.int64) * sln
    # workspace: GRAD: alpha rows [N, T + 1, BLOCK_S] (row T: beta ping-pong partner); else 2 ping-pong rows
    if GRAD:
        base = ws_ptr + n.to(tl.int64) * (T + 2) * BLOCK_S
    else:
        base = ws_ptr + n.to(tl.int64) * 2 * BLOCK_S
    a = tl.load(lp_n + lab * slc, mask=valid & (s < 2) & (tn > 0), other=float("-inf")).to(CT)
    a = tl.where(valid & (s < 2), a, float("-inf"))
    tl.store(base + s, a)
    for t in loop(1, tn):
        a = _alpha_step(lp_n, base, a, t, s, valid, lab, skip, slt, slc, GRAD, F64, BLOCK_S)
    fin = valid & (s >= ns - 2)
    top = tl.max(tl.where(fin, a, float("-inf")), 0)
    ll = tl.where(top == float("-inf"), float("-inf"),
                  top + _lg(tl.sum(tl.where(fin, _ex(a - top, F64), 0.0), 0), F64))
    nll = -ll
    nll = tl.where(tn == 0, tl.where(ln == 0, 0.0, float("inf")), nll)
    lossv = nll
    if ZINF:
        lossv = tl.where(nll == float("inf"), 0.0, nll)
    if not GRAD:
        if NONE:
            tl.store(loss_ptr + n, lossv.to(loss_ptr.dtype.element_ty))
        else:
            if RED == 2:
                lossv = lossv / tl.maximum(ln, 1).to(CT) / N
            tl.store(loss_ptr + n, lossv)   # f32/f64 partials, folded by loss.py's _pw_fold
    else:
        if RED == 0:
            sc = tl.load(gout_ptr + n).to(CT)
        elif RED == 1:
            sc = tl.load(gout_ptr).to(CT)
        else:
            sc = tl.load(gout_ptr).to(CT) / tl.maximum(ln, 1).to(CT) / N
        if ZINF:
            sc = tl.where(nll == float("inf"), 0.0, sc)
        sc = tl.where(tn == 0, 0.0, sc)
        lab_up2 = tl.load(tg_ptr + (off + (s + 1) // 2) * sts, mask=valid & odd & (s + 2 < ns), other=blank)
        skip_up = valid & odd & (s + 2 < ns) & (lab_up2.to(tl.int64) != lab)   # beta_t(s) may come from s + 2
        ping = base + T * BLOCK_S   # beta ping-pong rows: step k reads row T + (k + 1) % 2, writes row T + k % 2
        g_n = g_ptr + n.to(tl.int64) * C
        tl.debug_barrier()   # the alpha rows were written by the whole program
        # beta_{T_n - 1}: the last two states
        b = tl.load(lp_n + (tn - 1).to(tl.int64) * slt + lab * slc, mask=fin & (tn > 0), other=float("-inf")).to(CT)
        b = tl.where(fin, b, float("-inf"))
        if tn > 0:
            b = _beta_step(lp_n, ping, ping, base + (tn - 1) * BLOCK_S, g_n, b, tn - 1, s, ns, valid, lab, skip_up, nll,
                           sc, N, C, slt, slc, True, F64, BLOCK_S)
        for k in loop(1, tn):
            t = tn - 1 - k
            b = _beta_step(lp_n, ping + ((k + 1) % 2) * BLOCK_S, ping + (k % 2) * BLOCK_S, base + t * BLOCK_S,
                           g_n, b, t, s, ns, valid, lab, skip_up, nll, sc, N, C, slt, slc, False, F64, BLOCK_S)


# -- host side ------------------------------------------------------------------------------------
def _geom(desc):
    bw = desc.op == "ctc_loss_backward"
    lp, tg = desc.inputs[1 if bw else 0], desc.inputs[2 if bw else 1]
    return (bw,) + ctc_geometry((lp.shape, tg.shape)) + (lp.dtype == DType.f64,)


def _max_states(desc):
    """An upper bound of 2 max(L) + 1 known from the shapes (padded: the width; concatenated: the length)."""
    _, t, n, c, _, padded, s, _ = _geom(desc)
    return 2 * s + 1


def _layout(bw, t, n, c, block):
    """Word offsets: (scratch words, then the backward's f32 gradient buffer or the forward's N partials)."""
    scratch = n * ((t + 2) if bw else 2) * block
    return scratch, (t * n * c if bw else n)


def _workspace(desc) -> int:
    bw, t, n, c, _, _, _, f64 = _geom(desc)
    block = next_power_of_2(min(_max_states(desc), _MAX_STATES))
    return sum(_layout(bw, t, n, c, block)) * (8 if f64 else 4)


def _supports(desc, pref=None):
    _, _, _, _, _, padded, s, _ = _geom(desc)
    if padded and 2 * s + 1 > _MAX_STATES:
        return f"padded targets wider than {(_MAX_STATES - 1) // 2} labels (2S+1 > {_MAX_STATES} states)"
    return None


def _bind(desc, pref=None):
    bw, t, n, c, batched, padded, s_w, f64 = _geom(desc)
    blank = desc.attr("blank")
    red = desc.attr("reduction")
    zinf = desc.attr("zero_infinity")
    ct = torch.float64 if f64 else torch.float32
    wsz = 8 if f64 else 4

    def run(desc_, inputs, outputs, ws):
        g = inputs[0] if bw else None
        lp, tg, il, tl_ = inputs[-4:]
        # host checks: one copy of the lengths and labels (small next to log_probs)
        il_h, tl_h, tg_h = il.cpu().numpy(), tl_.cpu().numpy(), tg.cpu().numpy()
        offs = validate_ctc(desc.op, t, c, padded, tg_h, il_h, tl_h, blank)
        lmax = int(np.max(tl_h)) if np.size(tl_h) else 0
        block = next_power_of_2(2 * lmax + 1)
        if block > _MAX_STATES:
            raise UnsupportedError(desc.op, f"targets of {lmax} labels: at most {(_MAX_STATES - 1) // 2} per sequence")
        lp3 = lp if batched else lp[:, None, :]
        tgf = tg.reshape(-1)   # padded [N, S] -> n * S + i (a copy if tg is not dense; offs assume that layout)
        off = torch.from_numpy(np.asarray(offs, np.int64)).to(lp.device)
        il1, tl1 = il.reshape(-1), tl_.reshape(-1)
        out = outputs[0]
        wv = ws.view(torch.uint8)[: (ws.numel() // wsz) * wsz].view(ct)
        nscr, nrest = _layout(bw, t, n, c, block)
        scratch, rest = wv[:nscr], wv[nscr:nscr + nrest]
        common = dict(RED=_RED[red], ZINF=zinf, F64=f64, BLOCK_S=block,
                      num_warps=4 if block <= 512 else 8)
        strides = (lp3.stride(0), lp3.stride(1), lp3.stride(2), tgf.stride(0), il1.stride(0), tl1.stride(0))
        if not bw:
            loss = out if (red != "none" or out.is_contiguous()) else torch.empty_like(out)
            part = rest
            dst = loss.reshape(-1) if red == "none" else part
            _ctc[(n,)](lp3, tgf, off, il1, tl1, lp3, dst, scratch, scratch, t, n, c, *strides, blank, GRAD=False,
                       NONE=red == "none", **common)
            if red != "none":
                _pw_fold[(1,)](part, out, n, 1, MEAN=False, F64=f64, BLOCK=1024, num_warps=4)
            elif loss is not out:
                out.copy_(loss)
            return
        direct = out.dtype == ct and out.is_contiguous() and batched
        gbuf = out if direct else rest.view(t, n, c)
        gbuf.zero_()
        _ctc[(n,)](lp3, tgf, off, il1, tl1, g.reshape(-1).contiguous(), lp3, scratch, gbuf, t, n, c, *strides, blank,
                   GRAD=True, NONE=False, **common)
        if not direct:
            out.copy_(gbuf.view(out.shape))

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    bw, t, n, *_ = _geom(desc)
    return f"triton:{desc.op}:seq-per-program{n}" + ("-alpha+beta" if bw else "-alpha")


def _bw_precision(desc, pref=None) -> PrecisionGuarantee:
    """The backward's atomic adds (states sharing a class) land in any order: not bit-stable, not deterministic
    (PlanPreference(require_deterministic=True) then selects the reference backend)."""
    acc = DType.f64 if desc.dtype == DType.f64 else DType.f32
    return PrecisionGuarantee(MathPrecision.F64 if acc == DType.f64 else MathPrecision.F32, acc, False, False)


register_triton("ctc_loss", _run, route=_route, workspace=_workspace, bind=_bind, supports=_supports,
                capturable=False)
register_triton("ctc_loss_backward", _run, route=_route, workspace=_workspace, bind=_bind, supports=_supports,
                capturable=False,
                precision=_bw_precision)
