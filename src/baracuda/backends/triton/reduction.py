"""Triton reductions: sum/mean/amax/amin/argmax/argmin, the fused amax/amin backward, and broadcast_to.

Every reduction is first put in the canonical form ``(outer, R, inner)`` (reduce along R):
  * size-1 axes are dropped and adjacent axes of the same kind (reduced / kept) are merged, from the
    shape alone, so the geometry (and hence the workspace) is a function of the descriptor;
  * if the reduced axes still form more than one group (e.g. dims (0, 2) of [A, B, C, D]), the input is
    permuted to (kept..., reduced...) and made contiguous -- the documented contiguize step: one extra
    read + write of the input, only for these patterns;
  * a group whose axes do not merge in memory (a strided view) is made contiguous first; any other
    strides (e.g. a stride-2 last axis) are passed to the kernels as they are.

Kernels (deterministic, no atomics; accumulate in f32, f64 for f64 outputs).  Every tile is reduced at
once (tl.sum / tl.max / tl.max with return_indices) and folded into a per-output running value, so no
[rows, cols] accumulator lives in registers: ~32 regs on sm_90 for sum/amax, all of a thread's four
16 B loads issued together, 8 programs per SM -- bandwidth-bound at HBM3 rates (bf16 [16384, 4096] reads
128 MB: 37 us at the 3.6 TB/s target on an H200; 2 B read per element, the output is 1/4096 of it).
  * ``_row_kernel`` (inner == 1): [BLOCK_M, BLOCK_N] tiles of 16 KB (2 x 4096 bf16, 1 x 4096 f32) on 8
    warps, 64 B per thread; a row of <= BLOCK_N elements is a single load, no loop.
  * ``_col_kernel`` (inner > 1): [BLOCK_R, BLOCK_I] tiles, BLOCK_I = 4 warps x 32 lanes x 16 B (1024 bf16,
    512 f32) contiguous inner elements, so the reduction over R of each tile stays inside a thread.
  * argmax/argmin use quarter tiles (one 16 B load per thread): see ``_blocks``.
  * When the natural grid has fewer than ``_TARGET_PROGRAMS`` programs and R is long, R is split into S
    chunks: stage 1 writes (outer, S, inner) partials (values, and i64 indices for arg*) into the
    workspace, stage 2 reduces them with the same kernel.  The partials are combined in a fixed order, so
    the result is bit-identical run to run (no atomics).
  * amin/argmin run as amax/argmax of -x (negation is exact, keeps NaN and ties), un-negated on output.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ..._core.device import triton_interpreting
from ..._core.dtypes import DType
from ...ops.reduction import REDUCTIONS, keepdim_shape
from . import register_triton
from .elementwise import launch

_SUM, _MAX, _ARG = 0, 1, 2
_BIG = tl.constexpr(2 ** 62)       # i64 index of "no element seen yet" (stage-2 partial indices, results)
_TARGET_PROGRAMS = 512          # ~4 resident programs on each of the 132 SMs of an H100/H200
_MIN_CHUNK = 128                # least elements of R per split: e.g. sum over dim 0 of bf16 [4096, 16384]
                                # runs 16 column blocks x 32 splits = 512 programs of 128 x 1024 elements
                                # (256 KB each); the f32 partials add 32 x 16384 x 4 B x 2 = 4 MB (3 %)
_TILE = {1: 8192, 2: 8192, 4: 4096, 8: 2048}   # elements per tile, by input itemsize: 16 KB per program
_THREAD_BYTES = 64              # row kernel: 4 x 16 B vector loads per thread per tile
_COL_WARPS = 4                  # column kernel: 128 threads x 16 B cover BLOCK_I = 1024 bf16 / 512 f32


# Under TRITON_INTERPRET=1 (Triton 3.6) scalar kernel arguments are 1-element arrays, and range() over
# them calls int() on a 1-d array, which NumPy >= 2.4 rejects.  Loop bounds go through _bound: under the
# interpreter a plain Python function (kernels run as Python there) returning an int; on the GPU the
# identity, so the compiled kernels are the same single code path.
if triton_interpreting():
    def _bound(n):
        return int(n.handle.data.reshape(-1)[0]) if hasattr(n, "handle") else int(n)
else:
    @triton.jit
    def _bound(n):
        return n


# -- one tile reduced at once, then folded into a per-output running value ------------------------------
# Why per tile (and not a [rows, cols] f32 accumulator reduced after the loop): the accumulator costs one
# register per element in flight (32 for a 16 KB bf16 tile on 256 threads), and the i64 index tensor of
# arg* two more; the first version (56 regs sum / 149 regs argmax on sm_90) ran 4 resident programs per
# SM with only 2 of each thread's 4 vector loads in flight (~32 KB/SM), 42 % of the H200 copy roofline.
# Per-tile reductions keep ~25-35 regs, 8+ programs per SM and all 4 loads issued before the first use
# (>= 128 KB in flight per SM; HBM3 at ~4 TB/s needs ~30 KB/SM at ~1 us latency).
@triton.jit
def _tile_reduce(v, m, idx, AXIS: tl.constexpr, MODE: tl.constexpr, IDX_IN: tl.constexpr):
    """(value, index) of a [A, B] tile along AXIS.  max/argmax: NaN wins (the first NaN for argmax),
    else the max and its smallest index.  Stage 1 (positions = the in-tile arange, masked lanes last):
    builtin (value, index) reductions, tie to the left; the caller ignores tiles with no valid lane.
    Stage 2 (IDX_IN: the partials' i64 indices, increasing along the tile): the smallest index among the
    winners, masked lanes never win."""
    if MODE == 0:
        t = tl.sum(tl.where(m, v, 0.0), axis=AXIS)
        ti = t
    else:
        v = tl.where(m, v, -float("inf"))
        isnan = v != v
        if MODE == 1:
            mx = tl.max(tl.where(isnan, -float("inf"), v), axis=AXIS)
            t = tl.where(tl.max(isnan.to(tl.int32), axis=AXIS) > 0, float("nan"), mx)
            ti = t
        elif IDX_IN:
            mx = tl.max(tl.where(isnan, -float("inf"), v), axis=AXIS)
            if AXIS == 0:
                eq = v == mx[None, :]
            else:
                eq = v == mx[:, None]
            nan_i = tl.min(tl.where(isnan, idx, _BIG), axis=AXIS)
            arg = tl.min(tl.where(m & eq, idx, _BIG), axis=AXIS)
            t = tl.where(nan_i != _BIG, float("nan"), mx)
            ti = tl.where(nan_i != _BIG, nan_i, arg)
        else:
            mx, arg = tl.max(tl.where(isnan, -float("inf"), v), axis=AXIS, return_indices=True,
                             return_indices_tie_break_left=True)
            n, nan_i = tl.max(isnan.to(tl.int32), axis=AXIS, return_indices=True,
                              return_indices_tie_break_left=True)
            t = tl.where(n > 0, float("nan"), mx)
            ti = tl.where(n > 0, nan_i, arg)
    return t, ti


@triton.jit
def _combine(acc, acc_i, t, ti, base, ok, MODE: tl.constexpr):
    """Fold one tile's (value, index) into the running ones; tiles come in increasing index order, so a
    tie keeps the running index (the first), and a NaN, once there, stays.  ok: the tile has valid lanes."""
    if MODE == 0:
        acc = acc + t
    elif MODE == 1:
        acc = tl.where((t > acc) | (t != t), t, acc)
    else:
        take = ok & ((acc_i == _BIG) | (t > acc) | ((t != t) & (acc == acc)))
        acc = tl.where(take, t, acc)
        acc_i = tl.where(take, ti.to(tl.int64) + base, acc_i)
    return acc, acc_i


@triton.jit
def _tile(x_ptr, xi_ptr, off, m, acc, acc_i, base, R, AXIS: tl.constexpr, MODE: tl.constexpr,
          NEG_IN: tl.constexpr, IDX_IN: tl.constexpr, ACC: tl.constexpr):
    """Load one tile (starting at ``base`` along R) and fold it in.  Stage 2 of arg* reads the partials'
    i64 indices (IDX_IN); stage 1 gets i32 in-tile positions from the reductions, plus ``base``."""
    v = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
    if NEG_IN:
        v = -v
    if IDX_IN:
        idx = tl.load(xi_ptr + off, mask=m, other=0)
        t, ti = _tile_reduce(v, m, idx, AXIS, MODE, True)
        acc, acc_i = _combine(acc, acc_i, t, ti, 0, ti != _BIG, MODE)
    else:
        t, ti = _tile_reduce(v, m, 0, AXIS, MODE, False)
        acc, acc_i = _combine(acc, acc_i, t, ti, base, base < R, MODE)
    return acc, acc_i


@triton.jit
def _row_kernel(x_ptr, xi_ptr, out_ptr, oi_ptr, M, R, chunk, sxm, sxr, S, count,
                MODE: tl.constexpr, NEG_IN: tl.constexpr, NEG_OUT: tl.constexpr, IDX_IN: tl.constexpr,
                WRITE_VAL: tl.constexpr, WRITE_IDX: tl.constexpr, DIVIDE: tl.constexpr, ACC: tl.constexpr,
                I64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.program_id(1)
    rows = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    if I64:
        rows = rows.to(tl.int64)
    r0 = s * chunk           # chunk: a multiple of BLOCK_N when split (S > 1), else R
    if I64:
        r0 = r0.to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M], ACC)
    if MODE != 0:
        acc = acc - float("inf")
    acc_i = tl.full([BLOCK_M], _BIG, tl.int64)
    for start in range(0, _bound(chunk), BLOCK_N):   # the last split runs masked past R (at most one chunk)
        c = r0 + start + cols
        m = row_ok[:, None] & (c < R)[None, :]
        off = rows[:, None] * sxm + c[None, :] * sxr
        acc, acc_i = _tile(x_ptr, xi_ptr, off, m, acc, acc_i, r0 + start, R, 1, MODE, NEG_IN,
                           IDX_IN, ACC)
    if DIVIDE:
        acc = acc / count                   # an empty mean is 0 / 0 = NaN, as torch
    if NEG_OUT:
        acc = -acc
    o = rows * S + s
    if WRITE_VAL:
        tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=row_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + o, acc_i, mask=row_ok)


@triton.jit
def _col_kernel(x_ptr, xi_ptr, out_ptr, oi_ptr, inner, R, chunk, sxo, sxr, sxi, S, n_iblk, count,
                MODE: tl.constexpr, NEG_IN: tl.constexpr, NEG_OUT: tl.constexpr, IDX_IN: tl.constexpr,
                WRITE_VAL: tl.constexpr, WRITE_IDX: tl.constexpr, DIVIDE: tl.constexpr, ACC: tl.constexpr,
                I64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    """[BLOCK_R, BLOCK_I] tiles; with BLOCK_I = 32 lanes x 16 B x 4 warps the warps tile the contiguous
    inner axis, so each tile's reduction over R stays inside a thread (no shared memory in the loop)."""
    pid = tl.program_id(0)
    s = tl.program_id(1)
    o = pid // n_iblk
    ib = pid % n_iblk
    if I64:
        o = o.to(tl.int64)
    i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    r0 = s * chunk           # chunk: a multiple of BLOCK_R when split (S > 1), else R
    if I64:
        r0 = r0.to(tl.int64)
    rr = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_I], ACC)
    if MODE != 0:
        acc = acc - float("inf")
    acc_i = tl.full([BLOCK_I], _BIG, tl.int64)
    base = o * sxo
    for start in range(0, _bound(chunk), BLOCK_R):   # the last split runs masked past R (at most one chunk)
        r = r0 + start + rr
        m = (r < R)[:, None] & i_ok[None, :]
        off = base + r[:, None] * sxr + i[None, :] * sxi
        acc, acc_i = _tile(x_ptr, xi_ptr, off, m, acc, acc_i, r0 + start, R, 0, MODE, NEG_IN,
                           IDX_IN, ACC)
    if DIVIDE:
        acc = acc / count
    if NEG_OUT:
        acc = -acc
    oo = (o * S + s) * inner + i
    if WRITE_VAL:
        tl.store(out_ptr + oo, acc.to(out_ptr.dtype.element_ty), mask=i_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + oo, acc_i, mask=i_ok)


# -- geometry (from the descriptor's shape only) --------------------------------------------------------
def _groups(shape, dims):
    groups = []  # [reduced?, [axes]]
    for a, n in enumerate(shape):
        if n == 1:
            continue
        red = a in dims
        if groups and groups[-1][0] == red:
            groups[-1][1].append(a)
        else:
            groups.append([red, [a]])
    return groups


def geometry(shape, dims):
    """(outer, R, inner, permutation or None) of reducing ``dims`` of a tensor of ``shape``."""
    groups = _groups(shape, dims)
    if sum(1 for g in groups if g[0]) > 1:
        kept = tuple(a for a in range(len(shape)) if a not in dims)
        return (math.prod(shape[a] for a in kept), math.prod(shape[a] for a in dims), 1, kept + tuple(dims))
    outer, red, inner, seen = 1, 1, 1, False
    for is_red, axes in groups:
        n = math.prod(shape[a] for a in axes)
        if is_red:
            red, seen = n, True
        elif seen:
            inner *= n
        else:
            outer *= n
    if not seen:  # nothing (of size > 1) to reduce: every element is its own output
        outer, inner = outer * inner, 1
    return outer, red, inner, None


def _np2(n):
    return triton.next_power_of_2(max(1, int(n)))


def _blocks(outer, R, inner, itemsize, arg=False, stage2=False):
    """Tile shape and split of one launch: (kernel, b0, b1, n_prog, S, chunk).  b0 x b1 is the tile
    ([rows, cols] for "row", [R, inner] for "col"); S splits of ``chunk`` elements of R each.  argmax/argmin
    tiles are a quarter (4 KB: one 16 B load per thread): their (value, index) reductions take ~2 regs per
    element and ptxas issues a thread's second load only after the first one's reduction (sm_90: [1, 4096]
    bf16 on 8 warps = 52 regs, 4 programs/SM, ~1 load in flight each; [1, 2048] = 32 regs, 8 programs/SM).
    """
    tile = _TILE[itemsize] // (4 if arg else 1)
    if inner == 1:
        bn = min(_np2(R), tile)
        bm = max(1, min(tile // bn, _np2(outer)))
        n_prog = triton.cdiv(outer, bm)
    else:
        # stage 2 reads S x inner partials (e.g. 128 x 4096 f32 = 2 MB): narrower column blocks (one warp
        # of 16 B wide) give it 32 programs instead of 8, ~1 us instead of ~4 us
        bi = min(_np2(inner), 32 * (16 // itemsize) * (1 if stage2 else _COL_WARPS))
        br = max(1, min(tile // bi, _np2(R)))
        n_prog = outer * triton.cdiv(inner, bi)
    S, chunk = 1, max(R, 1)
    # row splits: 2x the programs (8 per SM at <= 32 regs x 256 threads, 128 KB in flight per SM); their
    # partials are S values per row, free.  Column splits write S x inner partials: stay at ~4 per SM.
    target = _TARGET_PROGRAMS * (2 if inner == 1 else 1)
    if not stage2 and n_prog < target and R >= 2 * _MIN_CHUNK:   # stage 2 is one pass over the partials
        S = min(triton.cdiv(target, n_prog), triton.cdiv(R, _MIN_CHUNK))
        per = triton.cdiv(R, S)
        step = 1 << (per.bit_length() - 1)          # the R-block never exceeds one split
        if inner == 1:
            bn = min(bn, step)
            step = bn
        else:
            br = min(br, step)
            step = br
        chunk = triton.cdiv(per, step) * step       # a multiple of the R-block (see the kernels' loops)
        S = triton.cdiv(R, chunk)
    if inner == 1:
        return "row", bm, bn, n_prog, S, chunk
    return "col", br, bi, n_prog, S, chunk


def _dims_of(desc):
    if desc.op in ("argmax", "argmin"):
        dim = desc.attr("dim")
        rank = len(desc.inputs[0].shape)
        return tuple(range(rank)) if dim is None else ((dim,) if rank else ())
    return desc.attr("dims")


def _acc_dtype(desc):
    out = desc.outputs[0].dtype
    src = desc.inputs[0].dtype if out == DType.i64 else out
    return DType.f64 if src == DType.f64 else DType.f32


def _workspace(desc):
    x = desc.inputs[0]
    outer, R, inner, _ = geometry(x.shape, _dims_of(desc))
    if outer * inner == 0:
        return 0
    _, _, _, _, S, _ = _blocks(outer, R, inner, x.dtype.itemsize, desc.op in ("argmax", "argmin"))
    if S == 1:
        return 0
    n = outer * S * inner
    acc = _acc_dtype(desc).itemsize
    vals = (n * acc + 15) // 16 * 16
    return vals + (n * 8 if desc.op in ("argmax", "argmin") else 0)


def _canon(x, dims, shape):
    """The input as (tensor, (outer, R, inner), (s_outer, s_R, s_inner)); applies the contiguize step."""
    outer, R, inner, perm = geometry(shape, dims)
    if perm is not None:
        x = x.permute(perm).contiguous()
        return x, (outer, R, inner), (R, 1, 0)
    for _ in range(2):
        st = x.stride()
        strides, ok, seen = [0, 0, 0], True, False
        for is_red, axes in _groups(shape, dims):
            for a, b in zip(axes, axes[1:]):
                ok &= st[a] == st[b] * shape[b]
            slot = 1 if is_red else (2 if seen else 0)
            seen |= is_red
            strides[slot] = st[axes[-1]]
        if ok:
            return x, (outer, R, inner), tuple(strides)
        x = x.contiguous()
    raise AssertionError("unreachable: a contiguous tensor always collapses")


def _span(x):
    return 1 + sum((d - 1) * abs(s) for d, s in zip(x.shape, x.stride()) if d > 0)


_TL = {DType.f32: tl.float32, DType.f64: tl.float64}
# op -> (MODE, negate)
_MODES = {"sum": (_SUM, False), "mean": (_SUM, False), "amax": (_MAX, False), "amin": (_MAX, True),
          "argmax": (_ARG, False), "argmin": (_ARG, True)}


def _launch(kind, b0, b1, x, xi, out, oi, geom, strides, S, chunk, count, mode, neg_in, neg_out, idx_in,
            write_val, write_idx, divide, acc, i64):
    outer, R, inner = geom
    if kind == "row":   # 64 B (4 x 16 B loads; arg*: 16 B) per thread: 8 warps for a full tile, fewer if small
        per_thread = 16 if mode == _ARG else _THREAD_BYTES
        warps = min(8, max(1, _np2(b0 * b1 * x.element_size() // (32 * per_thread))))
    else:
        warps = _COL_WARPS
    common = dict(MODE=mode, NEG_IN=neg_in, NEG_OUT=neg_out, IDX_IN=idx_in, WRITE_VAL=write_val,
                  WRITE_IDX=write_idx, DIVIDE=divide, ACC=acc, I64=i64, num_warps=warps)
    if kind == "row":
        grid = (triton.cdiv(outer, b0), S)
        _row_kernel[grid](x, xi, out, oi, outer, R, chunk, strides[0], strides[1], S, count,
                          BLOCK_M=b0, BLOCK_N=b1, **common)
    else:
        n_iblk = triton.cdiv(inner, b1)
        grid = (outer * n_iblk, S)
        _col_kernel[grid](x, xi, out, oi, inner, R, chunk, strides[0], strides[1], strides[2], S, n_iblk, count,
                          BLOCK_R=b0, BLOCK_I=b1, **common)


def _run(desc, inputs, outputs, ws):
    x, out = inputs[0], outputs[0]
    mode, neg = _MODES[desc.op]
    is_arg = mode == _ARG
    shape = desc.inputs[0].shape
    xv, geom, strides = _canon(x, _dims_of(desc), shape)
    outer, R, inner = geom
    kind, b0, b1, _, S, chunk = _blocks(outer, R, inner, desc.inputs[0].dtype.itemsize, is_arg)
    acc_dt = _acc_dtype(desc)
    acc = _TL[acc_dt]
    i64 = max(_span(xv), outer * S * inner) >= 2 ** 31 - 65536
    divide = desc.op == "mean"
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    if S == 1:
        _launch(kind, b0, b1, xv, xv, target, target, geom, strides, 1, chunk, R, mode, neg, neg, False,
                not is_arg, is_arg, divide, acc, i64)
    else:
        n = outer * S * inner
        vals = ws[: n * acc_dt.itemsize].view(acc_dt.torch)
        off = (n * acc_dt.itemsize + 15) // 16 * 16
        idx = ws[off: off + n * 8].view(torch.int64) if is_arg else vals
        # stage 1: (outer, S, inner) partials, in the negated space for amin/argmin
        _launch(kind, b0, b1, xv, xv, vals, idx, geom, strides, S, chunk, R, mode, neg, False, False,
                True, is_arg, False, acc, i64)
        # stage 2: reduce the S partials of each output, in split order (deterministic)
        k2, c0, c1, _, _, _ = _blocks(outer, S, inner, acc_dt.itemsize, is_arg, stage2=True)
        st2 = (S, 1, 0) if inner == 1 else (S * inner, inner, 1)
        _launch(k2, c0, c1, vals, idx, target, target, (outer, S, inner), st2, 1, S, R, mode, False, neg,
                is_arg, not is_arg, is_arg, divide, acc, False)
    if target is not out:
        out.copy_(target)


# -- amax/amin backward: dx = (g / count) * (x == out), count = number of maxima per output --------------
@triton.jit
def _ext_bw_kernel(g_ptr, x_ptr, o_ptr, dx_ptr, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
                   ACC: tl.constexpr, I64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = pid // n_iblk
    if I64:
        o = o.to(tl.int64)
    i = (pid % n_iblk) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    ov = tl.load(o_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    gv = tl.load(g_ptr + o * sgo + i * sgi, mask=i_ok, other=0).to(ACC)
    rr = tl.arange(0, BLOCK_R)
    cnt = tl.zeros([BLOCK_R, BLOCK_I], ACC)
    for start in range(0, _bound(R), BLOCK_R):       # pass 1: count the maxima (ties)
        r = start + rr
        if I64:
            r = r.to(tl.int64)
        m = (r < R)[:, None] & i_ok[None, :]
        v = tl.load(x_ptr + o * sxo + r[:, None] * sxr + i[None, :] * sxi, mask=m, other=0).to(ACC)
        cnt += tl.where(m & (v == ov[None, :]), 1.0, 0.0)
    q = gv / tl.sum(cnt, axis=0)             # count 0 (NaN result) gives inf/NaN, then * 0 = NaN, as torch
    for start in range(0, _bound(R), BLOCK_R):       # pass 2: write the split gradient (re-read hits L2 for rows)
        r = start + rr
        if I64:
            r = r.to(tl.int64)
        m = (r < R)[:, None] & i_ok[None, :]
        v = tl.load(x_ptr + o * sxo + r[:, None] * sxr + i[None, :] * sxi, mask=m, other=0).to(ACC)
        d = q[None, :] * (v == ov[None, :]).to(ACC)
        tl.store(dx_ptr + o * sdo + r[:, None] * sdr + i[None, :] * sdi, d.to(dx_ptr.dtype.element_ty), mask=m)


def _run_ext_bw(desc, inputs, outputs, ws):
    g, x, ov = inputs
    dx = outputs[0]
    dims = desc.attr("dims")
    shape = desc.inputs[1].shape
    outer, R, inner, perm = geometry(shape, dims)
    kshape = keepdim_shape(shape, dims)
    # g and out are 1/R the size of x: made contiguous (outer, inner) at negligible cost
    g = g.reshape(kshape).permute(perm).contiguous() if perm else g.contiguous()
    ov = ov.reshape(kshape).permute(perm).contiguous() if perm else ov.contiguous()
    xv, _, (sxo, sxr, sxi) = _canon(x, dims, shape)
    tshape = tuple(shape[a] for a in perm) if perm else shape
    target = dx if (perm is None and dx.is_contiguous()) else torch.empty(tshape, dtype=dx.dtype, device=dx.device)
    sdo, sdr, sdi, sgo, sgi = R * inner, inner, 1, inner, 1
    if inner == 1:
        # rows: map the rows onto the tile's second axis (outer' = 1, inner' = outer), R stays contiguous
        inner, outer, sxi, sxo, sdi, sdo, sgi, sgo = outer, 1, sxo, 0, R, 0, 1, 0
        br = min(_np2(R), 1024)
        bi = max(1, min(4096 // br, _np2(inner)))
    else:
        bi = min(_np2(inner), 128)
        br = max(1, min(4096 // bi, _np2(R)))
    n_iblk = triton.cdiv(inner, bi)
    acc = tl.float64 if desc.dtype == DType.f64 else tl.float32
    i64 = max(_span(xv), outer * R * inner) >= 2 ** 31 - 65536
    _ext_bw_kernel[(outer * n_iblk,)](g, xv, ov, target, inner, R, sxo, sxr, sxi, sdo, sdr, sdi, sgo, sgi, n_iblk,
                                      ACC=acc, I64=i64, BLOCK_R=br, BLOCK_I=bi, num_warps=8 if br * bi >= 2048 else 4)
    if target is not dx:
        dx.copy_(target.permute([perm.index(a) for a in range(len(perm))]) if perm else target)


# -- broadcast_to: the elementwise template with an identity body (0-stride reads on broadcast axes) -----
@triton.jit
def _identity(x, p0, p1):
    return x


def _run_broadcast(desc, inputs, outputs, ws):
    wide = DType.f64 in (desc.dtype, desc.outputs[0].dtype)
    launch(_identity, [inputs[0]], outputs[0], compute=tl.float64 if wide else tl.float32)


@triton.jit
def _div_count(x, p0, p1):
    return x / p0


def _run_mean_bw(desc, inputs, outputs, ws):
    """mean's gradient: g broadcast to x's shape and divided by the count, one elementwise pass (0-stride reads
    of g).  The count travels as a kernel float (fp32): exact for counts < 2^24 and for powers of two."""
    shape, dims = desc.attr("shape"), desc.attr("dims")
    count = math.prod(shape[a] for a in dims)
    g = inputs[0].reshape(keepdim_shape(shape, dims))
    wide = DType.f64 in (desc.dtype, desc.outputs[0].dtype)
    launch(_div_count, [g], outputs[0], float(count), compute=tl.float64 if wide else tl.float32)


def _route(desc, pref):
    x = desc.inputs[0]
    outer, R, inner, perm = geometry(x.shape, _dims_of(desc))
    kind, *_, S, _ = _blocks(outer, R, inner, x.dtype.itemsize, desc.op in ("argmax", "argmin"))
    return f"triton:reduce_{kind}" + (f"_split{S}" if S > 1 else "") + ("+permute" if perm else "")


for _name in REDUCTIONS:
    register_triton(_name, _run, route=_route, workspace=_workspace)
register_triton("amax_backward", _run_ext_bw, route="triton:amax_backward")
register_triton("mean_backward", _run_mean_bw, route="triton:ew_template(div_count)")
register_triton("broadcast_to", _run_broadcast, route="triton:ew_template(identity)")
