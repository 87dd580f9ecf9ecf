"""Triton kernels of the normalization family: fused rms_norm / layer_norm forward and backward.

The input is viewed as (M, N) rows, N = prod(normalized_shape) <= 16384 (8192 for f64): each row lives in
registers, so the forward reads x once and writes y once (bf16 16384x4096: 2 B + 2 B per element, plus the
weight from L2; ~2.9 TB/s expected on H100), with statistics in f32.

Backward: program p owns a contiguous block of rows; per row it reads grad and x once, recomputes the row's
statistics from the registers, writes dx, and accumulates grad * xhat (and grad, for dbias) into per-program
[N] f32 partial sums held in registers; the next row's grad and x are prefetched while the current one is
reduced and stored (see _bw_step).  The partials go to the workspace ([P, N] each) and a second small
kernel sums them over P in a fixed order: deterministic, no atomics.  P = 2 x SMs keeps the workspace
traffic small (264 x 4096 x 4 B = 4.3 MB per partial vs 402 MB of grad/x/dx for 16384x4096 bf16).
"""
from __future__ import annotations


import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.config import num_sms, overrides
from .._lib.scalars import join_f64 as _eps
from .._lib.interp import loop
from .._lib.launch import bind_kernel, fast_kernel, meta
from .._lib.strided import all_contiguous
from .._lib.geometry import cdiv, next_power_of_2

# Triton 3.6's interpreter cannot take range() over runtime ints with NumPy >= 2.4: there the row loops
# are `while` loops (same semantics); on the GPU they are `for` loops.
_BW_ELEMS = {2: 16, 4: 8, 8: 4}   # backward: row elements per thread per operand, by bytes per element
_FORCE, forced = overrides("""Force ``programs`` (backward row blocks) or ``max_n`` in the configuration (tests).""")
_num_sms = num_sms


def _geom(desc):
    ns = desc.attr("normalized_shape")
    n = 1
    for d in ns:
        n *= d
    m = desc.inputs[0].numel // n if n else 0
    return m, n


def _f64(desc) -> bool:
    return desc.inputs[0].dtype == DType.f64


def choose(m: int, n: int, f64: bool):
    """(BLOCK, rows per forward program, num_warps, backward programs)."""
    block = next_power_of_2(n)
    rows = max(1, min(2048 // block, next_power_of_2(max(m, 1))))
    warps = 4 if block <= 2048 else 8 if block <= 4096 else 16
    progs = _FORCE.get("programs", max(1, min(m, 2 * _num_sms())))
    return block, rows, warps, progs


def _supports(desc):
    m, n = _geom(desc)
    limit = _FORCE.get("max_n", 8192 if _f64(desc) else 16384)
    if n > limit:
        return f"normalized size {n} > {limit}: the row must fit in registers (use the reference backend)"
    return None


@triton.jit
def _row_stats(x, mask, N, eps, RMS: tl.constexpr):
    """(xhat, rstd) of rows x [ROWS, BLOCK] (masked entries are 0 and stay 0)."""
    if RMS:
        xc = x
    else:
        xc = tl.where(mask, x - (tl.sum(x, 1) / N)[:, None], 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, 1) / N + eps)
    return xc * rstd[:, None], rstd


@fast_kernel
def _norm_fw(x_ptr, w_ptr, b_ptr, y_ptr, r_ptr, s_ptr, M, N, sxm, sxn, sw, sb, srm, srn, eps_hi, eps_lo,
             RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, RES: tl.constexpr, F64: tl.constexpr,
             ROWS: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    # RES: fused residual add, s = x + r (rounded to the dtype and stored), y = norm(s): 2 reads + 2 writes
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    cm = cols < N
    mask = (rows < M)[:, None] & cm[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxm + cols[None, :] * sxn, mask=mask, other=0.0).to(CT)
    if RES:
        r = tl.load(r_ptr + rows[:, None] * srm + cols[None, :] * srn, mask=mask, other=0.0).to(CT)
        sv = (x + r).to(s_ptr.dtype.element_ty)
        tl.store(s_ptr + rows[:, None] * N + cols[None, :], sv, mask=mask)
        x = sv.to(CT)
    y, rstd = _row_stats(x, mask, N, _eps(eps_hi, eps_lo, F64), RMS)
    if HAS_W:
        y = y * tl.load(w_ptr + cols * sw, mask=cm, other=0.0).to(CT)[None, :]
    if HAS_B:
        y = y + tl.load(b_ptr + cols * sb, mask=cm, other=0.0).to(CT)[None, :]
    tl.store(y_ptr + rows[:, None] * N + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


# -- backward ----------------------------------------------------------------------------------------
# One row per step as 1-D [BLOCK] vectors: the row reductions are full reductions to scalars and the
# dweight/dbias accumulators share the layout of g and x (no shared-memory layout conversions per row).
# The next row's g and x are loaded (raw dtype, 8 B per column in bf16) before the current row is
# reduced and stored: each program always has ~16 KB (bf16 N=4096) of loads in flight, 2 programs per SM
# give ~32 KB/SM ~ latency x (4.25 TB/s / 132 SMs), where the un-prefetched loop idled during its
# reduction/store phase (0.18 ms, 53% of the copy roofline, on H200 bf16 16384x4096).
@triton.jit
def _bw_load(g_ptr, x_ptr, row, end, cols, cm, sgm, sgn, sxm, sxn, I64: tl.constexpr):
    ok = cm & (row < end)
    if I64:
        row = row.to(tl.int64)
    g = tl.load(g_ptr + row * sgm + cols * sgn, mask=ok, other=0.0)
    x = tl.load(x_ptr + row * sxm + cols * sxn, mask=ok, other=0.0)
    return g, x


@triton.jit
def _bw_step(g_ptr, x_ptr, dx_ptr, row, end, gr, xr, w, cols, cm, N, sgm, sgn, sxm, sxn, eps, dw, db,
             RMS: tl.constexpr, HAS_W: tl.constexpr, F64: tl.constexpr, I64: tl.constexpr):
    """dx of row ``row`` (its g and x already loaded as gr, xr); prefetches row + 1; returns the updated
    partial sums and the prefetched row."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    g = gr.to(CT)
    x = xr.to(CT)
    gn, xn = _bw_load(g_ptr, x_ptr, row + 1, end, cols, cm, sgm, sgn, sxm, sxn, I64)
    if RMS:
        xc = x
    else:
        xc = tl.where(cm, x - tl.sum(x, 0) / N, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(xc * xc, 0) / N + eps)
    xhat = xc * rstd
    if HAS_W:
        wg = g * w.to(CT)
    else:
        wg = g
    if RMS:
        dx = (wg - xhat * (tl.sum(wg * xhat, 0) / N)) * rstd
    else:
        dx = (wg - xhat * (tl.sum(wg * xhat, 0) / N) - tl.sum(wg, 0) / N) * rstd
    if I64:
        row = row.to(tl.int64)
    tl.store(dx_ptr + row * N + cols, dx.to(dx_ptr.dtype.element_ty), mask=cm)
    return dw + g * xhat, db + g, gn, xn


@fast_kernel
def _norm_bw(g_ptr, x_ptr, w_ptr, dx_ptr, ws_ptr, M, N, RPP, sgm, sgn, sxm, sxn, sw, eps_hi, eps_lo,
             RMS: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr,
             I64: tl.constexpr):
    # program p owns rows [p*RPP, (p+1)*RPP): one pass over g and x, per-program [BLOCK] partial sums of
    # g*xhat (dweight) and g (dbias) in registers, written once to the workspace at the end
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    eps = _eps(eps_hi, eps_lo, F64)
    p = tl.program_id(0)
    nprog = tl.num_programs(0)
    start = p * RPP
    end = tl.minimum(start + RPP, M)
    cols = tl.arange(0, BLOCK)
    cm = cols < N
    if HAS_W:
        w = tl.load(w_ptr + cols * sw, mask=cm, other=0.0)   # raw dtype: half the registers in bf16
    else:
        w = tl.full([BLOCK], 1.0, CT)
    dw = tl.zeros([BLOCK], CT)
    db = tl.zeros([BLOCK], CT)
    gr, xr = _bw_load(g_ptr, x_ptr, start, end, cols, cm, sgm, sgn, sxm, sxn, I64)
    for row in loop(start, end):
        dw, db, gr, xr = _bw_step(g_ptr, x_ptr, dx_ptr, row, end, gr, xr, w, cols, cm, N, sgm, sgn, sxm, sxn,
                                  eps, dw, db, RMS, HAS_W, F64, I64)
    if HAS_W:   # per-program partials; summed over programs by _col_sum (fixed order)
        tl.store(ws_ptr + p * N + cols, dw, mask=cm)
        if HAS_B:
            tl.store(ws_ptr + nprog * N + p * N + cols, db, mask=cm)


@fast_kernel
def _col_sum(ws_ptr, out_ptr, P, N, BP: tl.constexpr, BC: tl.constexpr):
    # [P, N] partials -> [N]: BC = 32 f32 columns (one 128 B line per partial row) per program gives
    # N/32 = 128 programs at N = 4096 (the previous 256-wide blocks ran 16 programs over 4.3 MB)
    CT: tl.constexpr = ws_ptr.dtype.element_ty
    cols = tl.program_id(0) * BC + tl.arange(0, BC)
    cm = cols < N
    acc = tl.zeros([BP, BC], CT)
    for p0 in loop(0, P, BP):
        pr = p0 + tl.arange(0, BP)
        acc += tl.load(ws_ptr + pr[:, None] * N + cols[None, :], mask=(pr < P)[:, None] & cm[None, :], other=0.0)
    tl.store(out_ptr + cols, tl.sum(acc, 0).to(out_ptr.dtype.element_ty), mask=cm)


def _rows2d(t, m, n):
    t2 = t.reshape(m, n)   # a view whenever the normalized dims merge (else a copy)
    return t2, t2.stride(0), t2.stride(1)


def _vec(t, n):
    v = t.reshape(n)
    return v, v.stride(0)


def _workspace(desc) -> int:
    if not desc.op.endswith("_backward") or len(desc.inputs) < 3:
        return 0
    m, n = _geom(desc)
    progs = choose(m, n, _f64(desc))[3]
    return len(desc.outputs[1:]) * progs * n * (8 if _f64(desc) else 4)


def _bind(desc, pref=None):
    m, n = _geom(desc)
    f64 = _f64(desc)
    block, rows, warps, progs = choose(m, n, f64)
    rms = "rms" in desc.op
    eps = float(desc.attr("eps"))
    eps_hi = float(torch.tensor(eps, dtype=torch.float32, device="cpu"))
    eps_lo = eps - eps_hi   # exact in f64; see _eps
    i64 = desc.inputs[0].numel >= 2 ** 31 - 65536
    wdt = torch.float64 if f64 else torch.float32

    if not desc.op.endswith("_backward"):
        res = desc.op.startswith("add_")

        n_aff = len(desc.inputs) - (2 if res else 1)
        # every operand contiguous (the common call): strides fixed here, once; the tensors passed as they are
        # (the kernel reads pointers and these strides, so the 2-d / 1-d views of the general path are not needed)
        _, cxm, cxn = _rows2d(meta(desc.inputs[0].shape), m, n)
        ctail = (m, n, cxm, cxn, 1 if n_aff > 0 else 0, 1 if n_aff > 1 else 0, cxm if res else 0, cxn if res else 0,
                 eps_hi, eps_lo)
        fast = bind_kernel(_norm_fw, (cdiv(m, rows),), ctail, RMS=rms, HAS_W=n_aff > 0, HAS_B=n_aff > 1, RES=res,
                           F64=f64, ROWS=rows, BLOCK=block, I64=i64, num_warps=warps) if m and n else None

        def run_fw(desc_, inputs, outputs, ws):
            if fast is not None and all_contiguous(inputs) and all_contiguous(outputs):
                x = inputs[0]
                r = inputs[1] if res else x
                w = inputs[-n_aff] if n_aff else x
                b = inputs[-1] if n_aff > 1 else x
                y, s = (outputs[1], outputs[0]) if res else (outputs[0], outputs[0])
                fast(x, w, b, y, r, s)
                return
            x, xs_m, xs_n = _rows2d(inputs[0], m, n)
            if res:
                r, rs_m, rs_n = _rows2d(inputs[1], m, n)
                aff = inputs[2:]
            else:
                r, rs_m, rs_n = x, 0, 0
                aff = inputs[1:]
            w, sw = _vec(aff[0], n) if len(aff) > 0 else (x, 0)
            b, sb = _vec(aff[1], n) if len(aff) > 1 else (x, 0)
            outs = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                    for o in outputs]
            y, s = (outs[1], outs[0]) if res else (outs[0], outs[0])
            _norm_fw[(cdiv(m, rows),)](x, w, b, y, r, s, m, n, xs_m, xs_n, sw, sb, rs_m, rs_n, eps_hi,
                                              eps_lo, RMS=rms,
                                              HAS_W=len(aff) > 0, HAS_B=len(aff) > 1, RES=res, F64=f64, ROWS=rows,
                                              BLOCK=block, I64=i64, num_warps=warps)
            for o, t in zip(outputs, outs):
                if t is not o:
                    o.copy_(t)
        return run_fw

    has_w = len(desc.inputs) == 3
    has_b = len(desc.outputs) == 3
    rpp = cdiv(m, progs) if m else 0
    nprog = cdiv(m, rpp) if m else 0
    # elements per thread per operand: 16 (16-bit), 8 (f32), 4 (f64) keep the prefetching backward at
    # <= ~128 registers with no spills on sm_90 (ptxas: bf16 N=4096 8 warps 127 regs, f32 16 warps 89-97);
    # N = 16384 (and f64 8192) needs more than 32 warps allow and spills a little
    bw_warps = max(4, min(32, block // (32 * _BW_ELEMS[desc.inputs[0].dtype.itemsize])))

    fast = col = None
    if nprog and n:
        _, cm, cn = _rows2d(meta(desc.inputs[0].shape), m, n)
        fast = bind_kernel(_norm_bw, (nprog,), (m, n, rpp, cm, cn, cm, cn, 1 if has_w else 0, eps_hi, eps_lo),
                           RMS=rms, HAS_W=has_w, HAS_B=has_b, F64=f64, BLOCK=block, I64=i64, num_warps=bw_warps)
        bc = min(32, next_power_of_2(n))
        col = bind_kernel(_col_sum, (cdiv(n, bc),), (nprog, n), BP=64, BC=bc, num_warps=4)

    def run_bw(desc_, inputs, outputs, ws):
        if fast is not None and all_contiguous(inputs) and all_contiguous(outputs):
            g, x = inputs[0], inputs[1]
            if has_w:
                k = 8 if f64 else 4
                part = ws.view(wdt) if ws.numel() % k == 0 else ws.reshape(-1)[: ws.numel() // k * k].view(wdt)
                fast(g, x, inputs[2], outputs[0], part)
                for j, o in enumerate(outputs[1:]):
                    col(part[j * nprog * n:] if j else part, o)
            else:
                fast(g, x, x, outputs[0], outputs[0])
            return
        g, sgm, sgn = _rows2d(inputs[0], m, n)
        x, sxm, sxn = _rows2d(inputs[1], m, n)
        w, sw = _vec(inputs[2], n) if has_w else (x, 0)
        outs = [o if o.is_contiguous() else torch.empty_like(o, memory_format=torch.contiguous_format)
                for o in outputs]
        part = None
        if has_w:
            k = (8 if f64 else 4)
            part = ws.reshape(-1)[: ws.numel() // k * k].view(wdt)
        if nprog:
            _norm_bw[(nprog,)](g, x, w, outs[0], part if part is not None else outs[0], m, n, rpp, sgm, sgn, sxm, sxn,
                               sw, eps_hi, eps_lo, RMS=rms, HAS_W=has_w, HAS_B=has_b, F64=f64, BLOCK=block, I64=i64, num_warps=bw_warps)
        for j, o in enumerate(outs[1:]):
            if nprog == 0:
                o.zero_()
                continue
            bc = min(32, next_power_of_2(n))
            _col_sum[(cdiv(n, bc),)](part[j * nprog * n:], o, nprog, n, BP=64, BC=bc,
                                            num_warps=4)
        for o, t in zip(outputs, outs):
            if t is not o:
                o.copy_(t)
    return run_bw


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    m, n = _geom(desc)
    block, rows, warps, progs = choose(m, n, _f64(desc))
    if desc.op.endswith("_backward"):
        return f"triton:{desc.op}:rows{block}-p{progs}"
    return f"triton:{desc.op}:rows{block}x{rows}"


for _op in ("rms_norm", "layer_norm", "add_rms_norm", "add_layer_norm", "rms_norm_backward", "layer_norm_backward"):
    register_triton(_op, _run, route=_route, workspace=_workspace, bind=_bind, supports=_supports)
