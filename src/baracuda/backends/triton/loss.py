"""Triton kernels of the loss family: cross_entropy / nll_loss forward and their fused backward.

cross_entropy forward (one kernel per block of ROWS rows, online over C in TILE-wide tiles): a running
  max and rescaled sum of exp (one exp per logit), plus, with label smoothing, sum_c w_c x_c, and for
  probability targets sum_c w_c y'_c x_c and sum_c w_c y'_c.  The logits are read exactly once: bf16
  4096x128256 moves 1.05 GB, ~0.35 ms at ~3 TB/s on H100.  Per-row losses and row weights go to the
  workspace; a one-program second stage folds them in a fixed order (deterministic, no atomics; 4096 rows
  are a few microseconds).
cross_entropy backward (persistent grid over row blocks): pass 1 recomputes (max, sum) of the row, pass 2
  re-reads the row and writes dlogits = (softmax * sum(w y') - w y') * scale in the same pass.  The grid is
  sized so the rows in flight fit in ~24 MB of L2 (bf16 128256-wide rows: 250 KB, 132 programs ~ 33 MB),
  so pass 2 is mostly an L2 hit: ~1 HBM read + 1 write, ~0.7 ms for 4096x128256 bf16.  FW+BW ~3 passes
  over the logits where eager torch makes ~7 (log_softmax read+write, a zero-filled grad + scatter,
  log_softmax_backward 2 reads + 1 write), so expect ~2.3-3x.
  mean: a one-program pre-pass sums w[t_i] over the kept rows (N loads, negligible) into the workspace.
nll_loss forward reads one element per row (a gather); backward writes the dense [N, C] gradient in
  TILE-wide tiles (one write pass, the floor).

Out-of-range targets: the kernels never read out of bounds: a class index outside [0, C) (other than
ignore_index) is clamped to 0 for the loads, its row's loss is NaN, and the kernel stores 1 into a flag
word of the workspace (zeroed by the host before the launch; every writer stores the same value, so the
race is benign).  The host reads the flag after the launch (one 4-byte device-to-host copy) and raises
InvalidProblemError.  Under CUDA-graph capture the read is skipped (a sync is not allowed there): the NaN
loss is the signal.
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from ..._core.device import triton_interpreting
from ..._core.dtypes import DType
from ..._core.errors import InvalidProblemError
from . import register_triton
from ._math import exp_acc as _ex
from ._math import log_acc as _lg
from ._config import num_sms, overrides

_WHILE = triton_interpreting()   # see softmax.py: `while` loops under the interpreter, `for` on the GPU
_FORCE, forced = overrides("""Force ``tile`` / ``rows`` / ``programs`` in :func:`choose` (tests: multi-tile rows under the interpreter).""")


_num_sms = num_sms


def choose(n: int, c: int, itemsize: int):
    """(TILE, ROWS, num_warps, programs): TILE columns x ROWS rows per step; ~2-8K elements per step so each
    program keeps >= 8 KB of loads in flight; persistent programs sized for L2 reuse in the backward."""
    tile = _FORCE.get("tile", min(triton.next_power_of_2(max(c, 1)), 8192 if c >= 65536 else 4096))
    rows = _FORCE.get("rows", max(1, min(2048 // tile, triton.next_power_of_2(max(n, 1)))))
    elems = tile * rows
    warps = 4 if elems <= 2048 else 8 if elems <= 4096 else 16
    sms = _num_sms()
    row_bytes = max(c * itemsize * rows, 1)
    progs = _FORCE.get("programs", max(sms, min(8 * sms, (24 << 20) // row_bytes)))
    return tile, rows, warps, progs


@triton.jit
def _rows_info(t_ptr, w_ptr, rows, N, C, stn, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr, CT: tl.constexpr):
    """Per row: (kept, bad, safe class index, w[t] (0 where not kept)). Never reads out of bounds."""
    rmask = rows < N
    if PROB:
        keep = rmask
        bad = rows < 0
        tc = rows * 0
        wt = tl.where(keep, 1.0, 0.0).to(CT)
    else:
        t = tl.load(t_ptr + rows * stn, mask=rmask, other=IGNORE).to(tl.int64)
        valid = rmask & (t != IGNORE)
        bad = valid & ((t < 0) | (t >= C))
        keep = valid & (t >= 0) & (t < C)
        tc = tl.where(keep, t, 0)
        if HAS_W:
            wt = tl.load(w_ptr + tc, mask=keep, other=0.0).to(CT)
        else:
            wt = tl.where(keep, 1.0, 0.0).to(CT)
    return keep, bad, tc, wt


@triton.jit
def _stats(x_ptr, t_ptr, w_ptr, rows, N, C, sxn, sxc, stn, stc, tc, eps_ptr, HAS_W: tl.constexpr, PROB: tl.constexpr,
           SMOOTH: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr, WHILE: tl.constexpr):
    """Online over the row: (max, sum exp(x - max), A, B) where
    index targets: A = sum_c w_c x_c, B = sum_c w_c (only with SMOOTH);  prob targets: A = sum w y' x, B = sum w y'."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    m = tl.full([ROWS], float("-inf"), CT)
    s = tl.zeros([ROWS], CT)
    a = tl.zeros([ROWS], CT)
    b = tl.zeros([ROWS], CT)
    rmask = rows < N
    if WHILE:
        off = 0
        while off < C:
            m, s, a, b = _stats_step(x_ptr, t_ptr, w_ptr, rows, rmask, off, C, sxn, sxc, stn, stc, m, s, a, b, eps_ptr,
                                     HAS_W, PROB, SMOOTH, F64, TILE)
            off += TILE
    else:
        for off in range(0, C, TILE):
            m, s, a, b = _stats_step(x_ptr, t_ptr, w_ptr, rows, rmask, off, C, sxn, sxc, stn, stc, m, s, a, b, eps_ptr,
                                     HAS_W, PROB, SMOOTH, F64, TILE)
    return m, s, a, b


@triton.jit
def _stats_step(x_ptr, t_ptr, w_ptr, rows, rmask, off, C, sxn, sxc, stn, stc, m, s, a, b, eps_ptr, HAS_W: tl.constexpr,
                PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    # a and b are kept relative to the running max (a = sum v_c (m - x_c), v_c = w_c or w_c y'_c, b = sum v_c):
    # sum_c v_c (lse - x_c) = b log(s) + a then never subtracts two lse-sized numbers (|x| ~ 1e4 in f32
    # would otherwise lose 3 digits)
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)   # label smoothing, in the compute dtype
    c = off + tl.arange(0, TILE)
    cm = c < C
    mask = rmask[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxn + c[None, :] * sxc, mask=mask, other=float("-inf")).to(CT)
    m_new = tl.maximum(m, tl.max(x, 1))
    ms = tl.where(m_new == float("-inf"), 0.0, m_new)
    s = s * _ex(m - ms, F64) + tl.sum(_ex(x - ms[:, None], F64), 1)
    if SMOOTH or PROB:
        if HAS_W:
            wc = tl.load(w_ptr + c, mask=cm, other=0.0).to(CT)[None, :]
        else:
            wc = tl.where(cm, 1.0, 0.0).to(CT)[None, :]
        if PROB:
            y = tl.load(t_ptr + rows[:, None] * stn + c[None, :] * stc, mask=mask, other=0.0).to(CT)
            v = tl.where(mask, wc * (y * (1.0 - EPS) + EPS / C), 0.0)
        else:
            v = tl.where(mask, wc, 0.0)
        shift = tl.where(m == float("-inf"), 0.0, ms - m)   # b == 0 while nothing was seen
        a = a + b * shift + tl.sum(v * tl.where(mask, ms[:, None] - x, 0.0), 1)
        b += tl.sum(v, 1)
    return m_new, s, a, b


@triton.jit
def _ce_fw(x_ptr, t_ptr, w_ptr, loss_ptr, ws_ptr, N, C, sxn, sxc, stn, stc, IGNORE, eps_ptr, HAS_W: tl.constexpr,
           PROB: tl.constexpr, SMOOTH: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr,
           TILE: tl.constexpr, I64: tl.constexpr, WHILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)   # label smoothing, in the compute dtype
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, N, C, stn, IGNORE, HAS_W, PROB, CT)
    m, s, a, b = _stats(x_ptr, t_ptr, w_ptr, rows, N, C, sxn, sxc, stn, stc, tc, eps_ptr, HAS_W, PROB, SMOOTH, F64,
                        ROWS, TILE, WHILE)
    ls = _lg(s, F64)   # lse = m + ls
    if PROB:
        loss = b * ls + a
    else:
        xt = tl.load(x_ptr + rows * sxn + tc * sxc, mask=keep, other=0.0).to(CT)
        loss = (1.0 - EPS) * wt * ((m - xt) + ls)
        if SMOOTH:
            loss += EPS / C * (b * ls + a)
    loss = tl.where(keep, loss, 0.0)
    loss = tl.where(bad, float("nan"), loss)
    rmask = rows < N
    if NONE:
        tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=rmask)
    else:
        tl.store(ws_ptr + rows, loss, mask=rmask)
        tl.store(ws_ptr + N + rows, wt, mask=rmask)
    tl.store(ws_ptr + 2 * N + rows * 0, tl.full([ROWS], 1.0, CT), mask=bad)


@triton.jit
def _fold(ws_ptr, out_ptr, N, MEAN: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr, WHILE: tl.constexpr):
    """One program: sum of ws[0:N] (losses) and ws[N:2N] (row weights) in a fixed order -> the reduced loss."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    al = tl.zeros([BLOCK], CT)
    aw = tl.zeros([BLOCK], CT)
    if WHILE:
        off = 0
        while off < N:
            i = off + tl.arange(0, BLOCK)
            al += tl.load(ws_ptr + i, mask=i < N, other=0.0)
            aw += tl.load(ws_ptr + N + i, mask=i < N, other=0.0)
            off += BLOCK
    else:
        for off in range(0, N, BLOCK):
            i = off + tl.arange(0, BLOCK)
            al += tl.load(ws_ptr + i, mask=i < N, other=0.0)
            aw += tl.load(ws_ptr + N + i, mask=i < N, other=0.0)
    total = tl.sum(al, 0)
    if MEAN:
        total = total / tl.sum(aw, 0)
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _denom(t_ptr, w_ptr, ws_ptr, N, C, stn, IGNORE, HAS_W: tl.constexpr, PROB: tl.constexpr, F64: tl.constexpr,
           BLOCK: tl.constexpr, WHILE: tl.constexpr):
    """One program: sum_i w[t_i] over the kept rows (the mean's denominator; N for probability targets)."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    acc = tl.zeros([BLOCK], CT)
    if WHILE:
        off = 0
        while off < N:
            _k, _b, _t, wt = _rows_info(t_ptr, w_ptr, off + tl.arange(0, BLOCK), N, C, stn, IGNORE, HAS_W, PROB, CT)
            acc += wt
            off += BLOCK
    else:
        for off in range(0, N, BLOCK):
            _k, _b, _t, wt = _rows_info(t_ptr, w_ptr, off + tl.arange(0, BLOCK), N, C, stn, IGNORE, HAS_W, PROB, CT)
            acc += wt
    tl.store(ws_ptr, tl.sum(acc, 0))


@triton.jit
def _row_scale(g_ptr, ws_ptr, rows, keep, N, RED: tl.constexpr, CT: tl.constexpr):
    # RED: 0 none (grad per row), 1 sum, 2 mean (grad / denominator from the pre-pass)
    if RED == 0:
        g = tl.load(g_ptr + rows, mask=rows < N, other=0.0).to(CT)
    elif RED == 1:
        g = tl.load(g_ptr + rows * 0).to(CT)
    else:
        g = tl.load(g_ptr + rows * 0).to(CT) / tl.load(ws_ptr + rows * 0)
    return tl.where(keep, g, 0.0)


@triton.jit
def _ce_bw_block(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, blk, N, C, sxn, sxc, stn, stc, IGNORE, eps_ptr,
                 HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr,
                 ROWS: tl.constexpr, TILE: tl.constexpr, I64: tl.constexpr, WHILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)   # label smoothing, in the compute dtype
    rows = blk * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, N, C, stn, IGNORE, HAS_W, PROB, CT)
    m, s, a, b = _stats(x_ptr, t_ptr, w_ptr, rows, N, C, sxn, sxc, stn, stc, tc, eps_ptr, HAS_W, PROB, SMOOTH, F64,
                        ROWS, TILE, WHILE)
    m = tl.where(m == float("-inf"), 0.0, m)   # rows past N
    inv = 1.0 / s
    sc = _row_scale(g_ptr, ws_ptr, rows, keep, N, RED, CT)
    # d = p * coef - (wy), per element; coef = sum_c w_c y'_c:
    #   index targets: (1 - eps) w_t + eps / C * sum w;  probability targets: b (from the stats pass)
    if PROB:
        coef = b
    else:
        coef = (1.0 - EPS) * wt
        if SMOOTH:
            coef += EPS / C * b
    if WHILE:
        off = 0
        while off < C:
            _ce_bw_step(x_ptr, t_ptr, w_ptr, dx_ptr, rows, off, N, C, sxn, sxc, stn, stc, tc, wt, m, inv, coef, sc, eps_ptr,
                        HAS_W, PROB, SMOOTH, F64, TILE)
            off += TILE
    else:
        for off in range(0, C, TILE):
            _ce_bw_step(x_ptr, t_ptr, w_ptr, dx_ptr, rows, off, N, C, sxn, sxc, stn, stc, tc, wt, m, inv, coef, sc, eps_ptr,
                        HAS_W, PROB, SMOOTH, F64, TILE)


@triton.jit
def _ce_bw_step(x_ptr, t_ptr, w_ptr, dx_ptr, rows, off, N, C, sxn, sxc, stn, stc, tc, wt, m, inv, coef, sc, eps_ptr,
                HAS_W: tl.constexpr, PROB: tl.constexpr, SMOOTH: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    EPS = tl.load(eps_ptr)   # label smoothing, in the compute dtype
    c = off + tl.arange(0, TILE)
    cm = c < C
    mask = (rows < N)[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxn + c[None, :] * sxc, mask=mask, other=0.0).to(CT)
    p = _ex(x - m[:, None], F64) * inv[:, None]   # x - m is exact; m + log(s) would round at |x| ~ 1e4
    if HAS_W:
        wc = tl.load(w_ptr + c, mask=cm, other=0.0).to(CT)[None, :]
    else:
        wc = 1.0
    if PROB:
        y = tl.load(t_ptr + rows[:, None] * stn + c[None, :] * stc, mask=mask, other=0.0).to(CT)
        d = p * coef[:, None] - wc * (y * (1.0 - EPS) + EPS / C)
    else:
        d = p * coef[:, None] - tl.where(c[None, :] == tc[:, None], (1.0 - EPS) * wt[:, None], 0.0)
        if SMOOTH:
            d -= EPS / C * wc
    d = d * sc[:, None]
    tl.store(dx_ptr + rows[:, None] * C + c[None, :], d.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _ce_bw(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, N, C, sxn, sxc, stn, stc, IGNORE, eps_ptr, HAS_W: tl.constexpr,
           PROB: tl.constexpr, SMOOTH: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr, ROWS: tl.constexpr,
           TILE: tl.constexpr, I64: tl.constexpr, WHILE: tl.constexpr):
    # persistent over row blocks: a block's second read (the write pass) hits L2 (see the module docstring)
    nblk = tl.cdiv(N, ROWS)
    if WHILE:
        blk = tl.program_id(0)
        while blk < nblk:
            _ce_bw_block(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, blk, N, C, sxn, sxc, stn, stc, IGNORE, eps_ptr,
                         HAS_W, PROB, SMOOTH, RED, F64, ROWS, TILE, I64, WHILE)
            blk += tl.num_programs(0)
    else:
        for blk in range(tl.program_id(0), nblk, tl.num_programs(0)):
            _ce_bw_block(g_ptr, x_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, blk, N, C, sxn, sxc, stn, stc, IGNORE, eps_ptr,
                         HAS_W, PROB, SMOOTH, RED, F64, ROWS, TILE, I64, WHILE)


# -- nll_loss -------------------------------------------------------------------------------------
@triton.jit
def _nll_fw(x_ptr, t_ptr, w_ptr, loss_ptr, ws_ptr, N, C, sxn, sxc, stn, IGNORE, HAS_W: tl.constexpr,
            NONE: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if I64:
        rows = rows.to(tl.int64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, N, C, stn, IGNORE, HAS_W, False, CT)
    xt = tl.load(x_ptr + rows * sxn + tc * sxc, mask=keep, other=0.0).to(CT)
    loss = tl.where(keep, -wt * xt, 0.0)
    loss = tl.where(bad, float("nan"), loss)
    rmask = rows < N
    if NONE:
        tl.store(loss_ptr + rows, loss.to(loss_ptr.dtype.element_ty), mask=rmask)
    else:
        tl.store(ws_ptr + rows, loss, mask=rmask)
        tl.store(ws_ptr + N + rows, wt, mask=rmask)
    tl.store(ws_ptr + 2 * N + rows * 0, tl.full([BLOCK], 1.0, CT), mask=bad)


@triton.jit
def _nll_bw(g_ptr, t_ptr, w_ptr, dx_ptr, ws_ptr, N, C, stn, IGNORE, HAS_W: tl.constexpr, RED: tl.constexpr,
            F64: tl.constexpr, ROWS: tl.constexpr, TILE: tl.constexpr, I64: tl.constexpr):
    # grid (row blocks, column tiles): one dense write of dinput (the floor), the target column gets -w_t * scale
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    keep, bad, tc, wt = _rows_info(t_ptr, w_ptr, rows, N, C, stn, IGNORE, HAS_W, False, CT)
    sc = _row_scale(g_ptr, ws_ptr, rows, keep, N, RED, CT)
    c = tl.program_id(1) * TILE + tl.arange(0, TILE)
    d = tl.where((c[None, :] == tc[:, None]) & keep[:, None], (-wt * sc)[:, None], 0.0)
    mask = (rows < N)[:, None] & (c < C)[None, :]
    tl.store(dx_ptr + rows[:, None] * C + c[None, :], d.to(dx_ptr.dtype.element_ty), mask=mask)


# -- host side ------------------------------------------------------------------------------------
_RED = {"none": 0, "sum": 1, "mean": 2}


def _geometry(desc):
    bw = desc.op.endswith("_backward")
    x = desc.inputs[1 if bw else 0]
    t = desc.inputs[2 if bw else 1]
    has_w = len(desc.inputs) == (4 if bw else 3)
    return bw, x, t, has_w


def _f64(desc) -> bool:
    return _geometry(desc)[1].dtype == DType.f64


def _workspace(desc) -> int:
    bw, x, _, _ = _geometry(desc)
    n = x.shape[0]
    return (1 if bw else 2 * n + 1) * (8 if _f64(desc) else 4)


def _check_flag(op, ws, c, ignore):
    if torch.cuda.is_available() and ws.is_cuda and torch.cuda.is_current_stream_capturing():
        return   # no sync under graph capture: the NaN loss of the bad rows is the signal
    if bool(ws.item() != 0):
        raise InvalidProblemError(op, "target", f"class indices in [0, {c}) or ignore_index={ignore}",
                                  "an index out of range")


def _ws_view(ws, f64):
    dt = torch.float64 if f64 else torch.float32
    size = 8 if f64 else 4
    return ws.reshape(-1)[: ws.numel() // size * size].view(dt)


def _bind(desc, pref=None):
    bw, x, t, has_w = _geometry(desc)
    n, c = x.shape
    f64 = _f64(desc)
    prob = t.dtype.is_floating
    nll = desc.op.startswith("nll_loss")
    red = desc.attr("reduction")
    ignore = desc.attr("ignore_index")
    eps = 0.0 if nll else desc.attr("label_smoothing")
    tile, rows, warps, progs = choose(n, c, x.dtype.itemsize)
    i64 = n * c >= 2 ** 31 - 65536
    common = dict(HAS_W=has_w, F64=f64, I64=i64)
    eps_t: dict = {}

    def eps_of(dev):   # a Python float argument would be typed f32: f64 kernels load eps from a tensor
        e = eps_t.get(dev)
        if e is None:
            e = eps_t[dev] = torch.full((1,), eps, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return e
    fold_block = 1024

    def fw(desc_, inputs, outputs, ws):
        xt, tt = inputs[0], inputs[1]
        wt = inputs[2].contiguous() if has_w else xt   # [C]: a copy is negligible next to [N, C]
        out = outputs[0]
        loss = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        w = _ws_view(ws, f64)
        w[2 * n:2 * n + 1].zero_()
        if n:
            stn, stc = (tt.stride(0), tt.stride(1)) if prob else (tt.stride(0), 0)
            if nll:
                blk = 1024
                _nll_fw[(triton.cdiv(n, blk),)](xt, tt, wt, loss, w, n, c, xt.stride(0), xt.stride(1), stn, ignore,
                                                NONE=red == "none", BLOCK=blk, **common)
            else:
                _ce_fw[(triton.cdiv(n, rows),)](xt, tt, wt, loss, w, n, c, xt.stride(0), xt.stride(1), stn, stc,
                                                ignore, eps_of(xt.device), PROB=prob, SMOOTH=eps > 0, NONE=red == "none", ROWS=rows,
                                                TILE=tile, WHILE=_WHILE, num_warps=warps, **common)
        if red != "none":
            _fold[(1,)](w, loss, n, MEAN=red == "mean", F64=f64, BLOCK=fold_block, WHILE=_WHILE, num_warps=4)
        if loss is not out:
            out.copy_(loss)
        if n and not prob:
            _check_flag(desc.op, w[2 * n], c, ignore)

    def bwd(desc_, inputs, outputs, ws):
        g, xt, tt = inputs[0].contiguous(), inputs[1], inputs[2]   # grad: [N] or a scalar
        wt = inputs[3].contiguous() if has_w else xt
        out = outputs[0]
        dx = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        w = _ws_view(ws, f64)
        if n == 0:
            return
        stn, stc = (tt.stride(0), tt.stride(1)) if prob else (tt.stride(0), 0)
        if red == "mean":
            _denom[(1,)](tt, wt, w, n, c, stn, ignore, HAS_W=has_w, PROB=prob, F64=f64, BLOCK=fold_block,
                         WHILE=_WHILE, num_warps=4)
        if nll:
            _nll_bw[(triton.cdiv(n, rows), triton.cdiv(c, tile))](g, tt, wt, dx, w, n, c, stn, ignore, RED=_RED[red],
                                                                   ROWS=rows, TILE=tile, num_warps=warps, **common)
        else:
            grid = (min(triton.cdiv(n, rows), progs),)
            _ce_bw[grid](g, xt, tt, wt, dx, w, n, c, xt.stride(0), xt.stride(1), stn, stc, ignore, eps_of(xt.device), PROB=prob,
                         SMOOTH=eps > 0, RED=_RED[red], ROWS=rows, TILE=tile, WHILE=_WHILE, num_warps=warps, **common)
        if dx is not out:
            out.copy_(dx)

    return bwd if bw else fw


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    bw, x, t, _ = _geometry(desc)
    tile, rows, _, progs = choose(x.shape[0], x.shape[1], x.dtype.itemsize)
    kind = "online" if x.shape[1] > tile else "row"
    return f"triton:{desc.op}:{kind}{tile}x{rows}" + (f"-persistent{progs}" if bw and not desc.op.startswith("nll") else "")


for _op in ("cross_entropy", "cross_entropy_backward", "nll_loss", "nll_loss_backward"):
    register_triton(_op, _run, route=_route, workspace=_workspace, bind=_bind)


# == pointwise regression losses (mse / l1 / smooth_l1 / huber) =======================================
# Forward: each program reduces BLOCK elements of f(x - y) to one partial in the workspace (or stores f for
# reduction='none'); a one-program fold sums the partials in a fixed order (deterministic, no atomics).  Bytes:
# 2 reads per element (+ 1 write for 'none'), the floor: bf16 16384x4096 = 268 MB, ~0.09 ms at 3 TB/s.
# Backward: one pass, grad_in = f'(x - y) * scale.  Inputs are flattened (a non-contiguous one is copied first).
_PW_KIND = {"mse_loss": 0, "l1_loss": 1, "smooth_l1_loss": 2, "huber_loss": 3}
_PW_BLOCK = 4096


@triton.jit
def _pw_f(d, par, KIND: tl.constexpr):
    a = tl.abs(d)
    sgn = tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
    if KIND == 0:
        f = d * d
        fp = 2.0 * d
    elif KIND == 1:
        f = a
        fp = sgn
    elif KIND == 2:   # smooth_l1 (par = beta; beta == 0 is l1: `a < 0` never holds)
        small = a < par
        f = tl.where(small, 0.5 * d * d / tl.where(small, par, 1.0), a - 0.5 * par)
        fp = tl.where(small, d / tl.where(small, par, 1.0), sgn)
    else:             # huber (par = delta)
        small = a < par
        f = tl.where(small, 0.5 * d * d, par * (a - 0.5 * par))
        fp = tl.where(small, d, par * sgn)
    return f, fp


@triton.jit
def _pw_fw(x_ptr, y_ptr, out_ptr, ws_ptr, prm_ptr, n, KIND: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr,
           BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0).to(tl.int64)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    d = tl.load(x_ptr + i, mask=m, other=0.0).to(CT) - tl.load(y_ptr + i, mask=m, other=0.0).to(CT)
    f, _ = _pw_f(d, tl.load(prm_ptr), KIND)
    if NONE:
        tl.store(out_ptr + i, f.to(out_ptr.dtype.element_ty), mask=m)
    else:
        tl.store(ws_ptr + pid, tl.sum(tl.where(m, f, 0.0), 0))


@triton.jit
def _pw_fold(ws_ptr, out_ptr, nparts, n, MEAN: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr,
             WHILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    acc = tl.zeros([BLOCK], CT)
    if WHILE:
        off = 0
        while off < nparts:
            i = off + tl.arange(0, BLOCK)
            acc += tl.load(ws_ptr + i, mask=i < nparts, other=0.0)
            off += BLOCK
    else:
        for off in range(0, nparts, BLOCK):
            i = off + tl.arange(0, BLOCK)
            acc += tl.load(ws_ptr + i, mask=i < nparts, other=0.0)
    total = tl.sum(acc, 0)
    if MEAN:
        total = total / n
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@triton.jit
def _pw_bw(g_ptr, x_ptr, y_ptr, dx_ptr, prm_ptr, n, KIND: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr,
           BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    d = tl.load(x_ptr + i, mask=m, other=0.0).to(CT) - tl.load(y_ptr + i, mask=m, other=0.0).to(CT)
    _, fp = _pw_f(d, tl.load(prm_ptr), KIND)
    if RED == 0:
        g = tl.load(g_ptr + i, mask=m, other=0.0).to(CT)
    elif RED == 1:
        g = tl.load(g_ptr).to(CT)
    else:
        g = tl.load(g_ptr).to(CT) / n
    tl.store(dx_ptr + i, (fp * g).to(dx_ptr.dtype.element_ty), mask=m)


def _pw_workspace(desc) -> int:
    if desc.op.endswith("_backward") or desc.attr("reduction") == "none":
        return 0
    n = desc.inputs[-1].numel
    return max(1, triton.cdiv(n, _PW_BLOCK)) * (8 if desc.inputs[-1].dtype == DType.f64 else 4)


def _pw_bind(desc, pref=None):
    base = desc.op.replace("_backward", "")
    bw = desc.op.endswith("_backward")
    kind = _PW_KIND[base]
    f64 = desc.inputs[-1].dtype == DType.f64
    n = desc.inputs[-1].numel
    red = desc.attr("reduction")
    par = desc.attr_dict.get("beta", desc.attr_dict.get("delta", 0.0))
    nparts = triton.cdiv(n, _PW_BLOCK)
    params: dict = {}

    def prm_of(dev):   # beta / delta in the compute dtype (a Python float argument would be typed f32)
        p = params.get(dev)
        if p is None:
            p = params[dev] = torch.full((1,), par, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return p

    def run(desc_, inputs, outputs, ws):
        out = outputs[0]
        x, y = _flat(inputs[-2]), _flat(inputs[-1])
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        prm = prm_of(x.device)
        if bw:
            if n:
                g = _flat(inputs[0]) if red == "none" else inputs[0]
                _pw_bw[(nparts,)](g, x, y, tgt, prm, n, KIND=kind, RED=_RED[red], F64=f64, BLOCK=_PW_BLOCK,
                                  num_warps=8)
        elif red == "none":
            if n:
                _pw_fw[(nparts,)](x, y, tgt, x, prm, n, KIND=kind, NONE=True, F64=f64, BLOCK=_PW_BLOCK, num_warps=8)
        else:
            w = _ws_view(ws, f64)
            if n:
                _pw_fw[(nparts,)](x, y, tgt, w, prm, n, KIND=kind, NONE=False, F64=f64, BLOCK=_PW_BLOCK, num_warps=8)
            _pw_fold[(1,)](w, tgt, nparts, n, MEAN=red == "mean", F64=f64, BLOCK=1024, WHILE=_WHILE, num_warps=4)
        if tgt is not out:
            out.copy_(tgt)

    return run


def _flat(t):
    """A unit-stride 1-D view of t (a copy when t is not dense)."""
    f = t.reshape(-1)
    return f if f.numel() <= 1 or f.stride(0) == 1 else f.contiguous()


def _pw_run(desc, inputs, outputs, ws):
    _pw_bind(desc)(desc, inputs, outputs, ws)


for _base in _PW_KIND:
    for _op in (_base, f"{_base}_backward"):
        register_triton(_op, _pw_run, workspace=_pw_workspace, bind=_pw_bind,
                        route=lambda d, p: f"triton:{d.op}:flat{_PW_BLOCK}"
                        + ("" if d.op.endswith("_backward") or d.attr("reduction") == "none" else "+fold"))
