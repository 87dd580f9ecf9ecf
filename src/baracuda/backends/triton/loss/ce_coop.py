"""Single-read cross_entropy backward for long rows (GPU only): 2-D input, class-index targets.

The streaming backward of loss.py reads the logits twice (_ce_part's statistics, then _ce_grad): with the
forward's read that is 4 passes over N x C for FW + BW.  Here each program keeps one 8192-class chunk of a row
in registers (32 values per thread at 8 warps), publishes the chunk's (max, sum exp) partials, waits for the
other chunks of its row, folds the partials in a fixed order and writes dlogits = (softmax * coef - w_t (1 - eps)
onehot - eps / C w) * scale from the registers: 1 read + 1 write, so FW + BW make the 3-pass floor.
4096 x 128256 bf16: 2 x 1.05 GB -> ~0.5 ms at the H200's ~4.2 TB/s copy rate (the streaming pair: ~0.75 ms;
the previous persistent kernel: 1.42 ms; eager torch: 1.32 ms), FW + BW ~0.8 ms vs eager's 2.35 ms (~2.9x).

The cross-program wait uses softmax_long's protocol (publish = release atomic on a per-row counter after the
partial stores, wait = acquire polling; the grid is persistent, at most what the SMs hold at once, a multiple
of the chunks per row, so the chunks a program waits for are resident in the same round) and its prefetch:
the next round's chunk is loaded before the wait.  Every program of a row folds the same partials in the same
order: deterministic.  The interpreter runs programs one at a time (a wait would never end), so under
TRITON_INTERPRET=1 loss.py takes the streaming pair; these kernels run on the GPU only (tests/loss_ce check
them there, and compile them for sm90 offline).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._lib.config import num_sms, overrides
from .._lib.launch import shared
from .._lib.math import exp_acc as _ex
from .._lib.math import log_acc as _lg
from .._lib.coop import chunk as _chunk
from .._lib.coop import per_sm as _per_sm
from .._lib.coop import publish as _publish
from .._lib.coop import safe_max as _safe
from .._lib.coop import wait as _wait
from .._lib.geometry import cdiv, next_power_of_2

CHUNK = 8192
WARPS = 8
# register cap (f32 compute; f64 is uncapped, it would spill).  Measured on the H100, 4096 x 128256 bf16:
# uncapped (~100-120 regs, 2 programs of 8 warps per SM) 1.19 ms backward / 1.26 ms with LOSS; capped at 80
# (3 per SM, an 8-32 byte spill) 1.05 / 1.04 ms; at 64 the spills cost more than the occupancy gives (1.37 /
# 1.06).  Class weights (+ smoothing) need ~170 registers: capped at 128 (a 64-byte spill) to keep 2 per SM.
# f32 logits (32 KB of a row per program, twice the bf16 registers): at 80 the spills cost more than the third
# program per SM gives — 4096 x 128256 f32 backward 1.91 ms at 80, 1.70 ms at 128 (2 per SM; H100,
# bench/results/2026-11-24-h100/ce_coop_f32.json).
MAXNREG = {False: 80, True: 128}    # 2-byte logits, by "has class weights"; 4-byte logits: 128


def maxnreg(has_w: bool, itemsize: int) -> int:
    return 128 if itemsize >= 4 else MAXNREG[bool(has_w)]
_PER_SM: dict = {}
_FORCE, forced = overrides("Force ``maxnreg`` (GPU tuning runs: 64 / 80 / 96 give 4 / 3 / 2 programs per SM).")


@triton.jit
def _ce_bw_coop(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, part_ptr, cnt_ptr, den_ptr, eps_ptr, wsum_ptr, loss_ptr, R, C,
                sxn, stn, IGNORE, NSPLIT, WOFF, FOFF, HAS_W: tl.constexpr, SMOOTH: tl.constexpr, RED: tl.constexpr,
                F64: tl.constexpr, CHUNK: tl.constexpr, SP: tl.constexpr, I64: tl.constexpr, LOSS: tl.constexpr):
    """LOSS (cross_entropy_with_grad: the forward and the gradient in one read): the row's chunk-0 program also
    writes the row loss to loss_ptr[row] (NaN for an out-of-range target) and its weight to
    loss_ptr[WOFF + row] (for the mean), and flags an out-of-range target in loss_ptr[FOFF]; with label
    smoothing each chunk publishes a third partial, sum_c w_c x_c, for the smoothing term
    eps / C * (lse sum_c w_c - sum_c w_c x_c).  dx may be x itself (fused linear cross-entropy writes the
    gradient over the chunk's logits): the target logit the loss needs is read before the row's chunks are
    published, so before any program of the row can overwrite it."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)
    total = R * NSPLIT
    nprog = tl.num_programs(0)
    k = tl.arange(0, SP)
    w0 = tl.program_id(0)
    row, c = _chunk(w0, NSPLIT, C, CHUNK, I64)
    x_next = tl.load(x_ptr + row * sxn + c, mask=(c < C) & (w0 < total), other=float("-inf"))
    t_next = tl.load(t_ptr + row * stn, mask=w0 < total, other=0)
    for w in range(w0, total, nprog):
        row, c = _chunk(w, NSPLIT, C, CHUNK, I64)
        mask = c < C
        # the row's target (prefetched with the chunk); the target logit is read before the publish
        t = t_next.to(tl.int64)
        keep = (t != IGNORE) & (t >= 0) & (t < C)
        tc = tl.where(keep, t, 0)
        first = w - row * NSPLIT == 0
        if LOSS:
            xt = tl.load(x_ptr + row * sxn + tc, mask=first, other=0.0).to(CT)
        x = x_next.to(CT)
        m = tl.max(x, 0)
        # e = exp(x - m) stays in registers (x is not needed after): the gradient rescales it by exp(m - mr)
        # once the row maximum mr is known, one multiply per element instead of a second exp
        e = _ex(x - _safe(m), F64)
        tl.store(part_ptr + w, m)
        tl.store(part_ptr + total + w, tl.sum(e, 0))
        if LOSS and SMOOTH:
            if HAS_W:
                wc = tl.load(w_ptr + c, mask=mask, other=0.0).to(CT)
            else:
                wc = 1.0
            tl.store(part_ptr + 2 * total + w, tl.sum(tl.where(mask, x * wc, 0.0), 0))
        _publish(cnt_ptr, row)
        rn, cn = _chunk(w + nprog, NSPLIT, C, CHUNK, I64)
        x_next = tl.load(x_ptr + rn * sxn + cn, mask=(cn < C) & (w + nprog < total), other=float("-inf"))
        t_next = tl.load(t_ptr + rn * stn, mask=w + nprog < total, other=0)
        # the row's weight and scale (scalar loads, issued before the wait)
        if HAS_W:
            wt = tl.load(w_ptr + tc, mask=keep, other=0.0).to(CT)
        else:
            wt = tl.where(keep, 1.0, 0.0).to(CT)
        if RED == 0:
            g = tl.load(g_ptr + row).to(CT)
        elif RED == 1:
            g = tl.load(g_ptr).to(CT)
        else:
            g = tl.load(g_ptr).to(CT) / tl.load(den_ptr)
        sc = tl.where(keep, g, 0.0)
        coef = (1.0 - EPS) * wt
        if SMOOTH:
            coef += EPS / C * tl.load(wsum_ptr)
        _wait(cnt_ptr, row, NSPLIT)
        ms = tl.load(part_ptr + row * NSPLIT + k, mask=k < NSPLIT, other=float("-inf"), volatile=True)
        ss = tl.load(part_ptr + total + row * NSPLIT + k, mask=k < NSPLIT, other=0.0, volatile=True)
        mr = _safe(tl.max(ms, 0))
        s = tl.sum(ss * _ex(ms - mr, F64), 0)
        if LOSS:
            if first:      # one program per row writes the row's loss (scalar work)
                lse = mr + _lg(s, F64)
                lr = (1.0 - EPS) * wt * (lse - xt)
                if SMOOTH:
                    sw = tl.load(part_ptr + 2 * total + row * NSPLIT + k, mask=k < NSPLIT, other=0.0, volatile=True)
                    lr += EPS / C * (tl.load(wsum_ptr) * lse - tl.sum(sw, 0))
                bad = (t != IGNORE) & ((t < 0) | (t >= C))
                tl.store(loss_ptr + row, tl.where(bad, float("nan"), tl.where(keep, lr, 0.0)))
                tl.store(loss_ptr + WOFF + row, wt)
                tl.store(loss_ptr + FOFF + row * 0, 1.0, mask=bad)
        # exp(m - mr) is 0 for a chunk of -inf (e is 0 there too), never inf: m <= mr
        d = e * (_ex(m - mr, F64) * coef / s) - tl.where(c == tc, (1.0 - EPS) * wt, 0.0)
        if SMOOTH:
            if HAS_W:
                d -= EPS / C * tl.load(w_ptr + c, mask=mask, other=0.0).to(CT)
            else:
                d -= EPS / C
        tl.store(dx_ptr + row * C + c, (d * sc).to(dx_ptr.dtype.element_ty), mask=mask)


def splits(c: int) -> int:
    return cdiv(c, CHUNK)


def eligible(c: int) -> bool:
    """Every chunk of a row must be resident at once: at most one per SM (the bound stays safe)."""
    return 2 <= splits(c) <= num_sms()


def workspace_words(r: int, c: int, loss: bool = False) -> int:
    """(max, sum[, sum w x]) partials per (row, chunk) + one int32 counter per row (+ 4 words of slack)."""
    return (3 if loss else 2) * r * splits(c) + r + 4


def launch(g, x, t, w, dx, ws_words, den, eps, wsum, r, c, ignore, has_w, smooth, red, f64, loss=None, woff=None,
           foff=None):
    """ws_words: a float view of at least workspace_words(r, c, loss is not None) words; den: the mean's
    denominator (1 word); loss: None, or the row losses at loss[0:r], the row weights at loss[woff:woff + r]
    and the bad-target flag at loss[foff] (default woff = r, foff = 2 r)."""
    nsplit = splits(c)
    npart = (3 if loss is not None else 2) * r * nsplit
    part = ws_words[:npart]
    cnt = ws_words[npart: npart + r + 2].view(torch.int32)[:r]
    cnt.zero_()
    i64 = r * c >= 2 ** 31 - 65536
    args = (g, x, t, w, dx, part, cnt, den, eps, wsum, den if loss is None else loss, r, c, x.stride(0), t.stride(0),
            ignore, nsplit, r if woff is None else woff, 2 * r if foff is None else foff)
    const = dict(HAS_W=has_w, SMOOTH=smooth, RED=red, F64=f64, CHUNK=CHUNK, SP=next_power_of_2(nsplit),
                 I64=i64, LOSS=loss is not None)
    cap = {} if f64 else {"maxnreg": _FORCE.get("maxnreg", maxnreg(has_w, x.element_size()))}
    opts = dict(num_warps=WARPS, **cap)
    key = tuple(sorted(const.items())) + tuple(sorted(opts.items()))
    per_sm = _PER_SM.get(key)
    if per_sm is None:   # compile once to read the kernel's register / shared-memory use (softmax_long does the same)
        compiled = _ce_bw_coop.warmup(*args, grid=(1,), **const, **opts)
        compiled._init_handles()
        per_sm = _PER_SM[key] = _per_sm(compiled.n_regs, WARPS, compiled.metadata.shared)
    progs = max(nsplit, (num_sms() * per_sm) // nsplit * nsplit)
    progs = min(progs, r * nsplit)
    shared(_ce_bw_coop, x.device)((progs,), args, const, **opts)
