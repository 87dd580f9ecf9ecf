"""Triton reductions: sum/mean/amax/amin/argmax/argmin, the fused amax/amin backward, and broadcast_to.

Every reduction is first put in the canonical form ``(outer, R, inner)`` (reduce along R):
  * size-1 axes are dropped and adjacent axes of the same kind (reduced / kept) are merged, from the
    shape alone, so the geometry (and hence the workspace) is a function of the descriptor;
  * if the reduced axes still form more than one group (e.g. dims (0, 2) of [A, B, C, D]), the input is
    permuted to (kept..., reduced...) and made contiguous -- the documented contiguize step: one extra
    read + write of the input, only for these patterns;
  * a group whose axes do not merge in memory (a strided view) is made contiguous first; any other
    strides (e.g. a stride-2 last axis) are passed to the kernels as they are.

Kernels (deterministic, no atomics; accumulate in f32, f64 for f64 outputs):
  * ``_row_kernel`` (inner == 1): BLOCK_M rows per program, a loop over column tiles of BLOCK_N; the
    [BLOCK_M, BLOCK_N] accumulator is reduced across lanes once, after the loop.  A tile is ~16 KB of
    input per iteration (8192 bf16 / 4096 f32 / 2048 f64 elements, 256 threads), which keeps enough bytes
    in flight per SM for HBM3: the target is >= 2.6 TB/s for bf16 [16384, 4096] (2 B read per element,
    the output is 1/4096 of the traffic).
  * ``_col_kernel`` (inner > 1): a [BLOCK_R, BLOCK_I] tile of BLOCK_I contiguous inner elements per
    row of R (512 B of bf16 per row segment: full 128 B transactions), reduced along R.
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
_BIG = tl.constexpr(2 ** 62)    # index of a lane that has not seen a valid element yet
_TARGET_PROGRAMS = 512          # ~4 resident programs on each of the 132 SMs of an H100
_MIN_CHUNK = 512                # rows of R per split: e.g. sum over dim 0 of bf16 [16384, 4096] runs
                                # 16 column blocks x 32 splits = 512 programs of 512 x 256 elements (256 KB)
_TILE = {1: 8192, 2: 8192, 4: 4096, 8: 2048}   # elements per [rows, cols] tile, by input itemsize (~16 KB)


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


# -- per-lane accumulation and the final cross-lane reduction -------------------------------------------
@triton.jit
def _accumulate(acc, acc_i, v, idx, m, MODE: tl.constexpr):
    """Fold one tile ``v`` (masked by ``m``) into the per-lane accumulators."""
    if MODE == 0:
        acc = acc + tl.where(m, v, 0.0)
    elif MODE == 1:
        v = tl.where(m, v, -float("inf"))
        acc = tl.where((v > acc) | (v != v), v, acc)
    else:
        take = m & ((v > acc) | ((v != v) & (acc == acc)) | (acc_i == _BIG))
        acc = tl.where(take, v, acc)
        acc_i = tl.where(take, idx, acc_i)
    return acc, acc_i


@triton.jit
def _load(x_ptr, xi_ptr, off, m, pos, NEG_IN: tl.constexpr, IDX_IN: tl.constexpr, MODE: tl.constexpr,
          ACC: tl.constexpr):
    v = tl.load(x_ptr + off, mask=m, other=0).to(ACC)
    if NEG_IN:
        v = -v
    idx = pos.to(tl.int64)
    if MODE == 2:
        if IDX_IN:
            idx = tl.load(xi_ptr + off, mask=m, other=0)
    return v, idx


@triton.jit
def _finish(acc, acc_i, count, AXIS: tl.constexpr, MODE: tl.constexpr, DIVIDE: tl.constexpr,
            NEG_OUT: tl.constexpr, ACC: tl.constexpr):
    """Reduce the lanes.  max/argmax use only builtin reductions (no custom combine): the max over the
    non-NaN lanes, NaN if any lane is NaN, and the smallest index among the lanes holding the result
    (the first NaN, or the first maximum; untouched lanes hold -inf with index _BIG, so they lose ties)."""
    if MODE == 0:
        res = tl.sum(acc, axis=AXIS)
        if DIVIDE:
            res = res / count              # an empty mean is 0 / 0 = NaN, as torch
        res_i = tl.min(acc_i, axis=AXIS)   # unused (no index output): dead code on the GPU
    else:
        isnan = acc != acc
        has_nan = tl.max(isnan.to(tl.int32), axis=AXIS) > 0
        mx = tl.max(tl.where(isnan, -float("inf"), acc), axis=AXIS)
        res = tl.where(has_nan, float("nan"), mx)
        res_i = tl.min(acc_i, axis=AXIS)
        if MODE == 2:
            if AXIS == 0:
                sel = tl.where(has_nan[None, :], isnan, acc == mx[None, :])
            else:
                sel = tl.where(has_nan[:, None], isnan, acc == mx[:, None])
            res_i = tl.min(tl.where(sel, acc_i, _BIG), axis=AXIS)
    if NEG_OUT:
        res = -res
    return res, res_i


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
    acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    if MODE != 0:
        acc = acc - float("inf")
    acc_i = tl.full([BLOCK_M, BLOCK_N], _BIG, tl.int64)
    for start in range(0, _bound(chunk), BLOCK_N):   # the last split runs masked past R (at most one chunk)
        c = r0 + start + cols
        m = row_ok[:, None] & (c < R)[None, :]
        off = rows[:, None] * sxm + c[None, :] * sxr
        v, idx = _load(x_ptr, xi_ptr, off, m, c[None, :] + tl.zeros([BLOCK_M, BLOCK_N], tl.int32),
                       NEG_IN, IDX_IN, MODE, ACC)
        acc, acc_i = _accumulate(acc, acc_i, v, idx, m, MODE)
    res, res_i = _finish(acc, acc_i, count, 1, MODE, DIVIDE, NEG_OUT, ACC)
    o = rows * S + s
    if WRITE_VAL:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=row_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + o, res_i, mask=row_ok)


@triton.jit
def _col_kernel(x_ptr, xi_ptr, out_ptr, oi_ptr, inner, R, chunk, sxo, sxr, sxi, S, n_iblk, count,
                MODE: tl.constexpr, NEG_IN: tl.constexpr, NEG_OUT: tl.constexpr, IDX_IN: tl.constexpr,
                WRITE_VAL: tl.constexpr, WRITE_IDX: tl.constexpr, DIVIDE: tl.constexpr, ACC: tl.constexpr,
                I64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    s = tl.program_id(1)
    o = pid // n_iblk
    ib = pid % n_iblk
    if I64:
        o = o.to(tl.int64)
    i = ib * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < inner
    r0 = s * chunk           # chunk: a multiple of BLOCK_R when split (S > 1), else R
    rr = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_I], ACC)
    if MODE != 0:
        acc = acc - float("inf")
    acc_i = tl.full([BLOCK_R, BLOCK_I], _BIG, tl.int64)
    base = o * sxo
    for start in range(0, _bound(chunk), BLOCK_R):   # the last split runs masked past R (at most one chunk)
        r = r0 + start + rr
        m = (r < R)[:, None] & i_ok[None, :]
        if I64:
            off = base + r.to(tl.int64)[:, None] * sxr + i[None, :] * sxi
        else:
            off = base + r[:, None] * sxr + i[None, :] * sxi
        v, idx = _load(x_ptr, xi_ptr, off, m, r[:, None] + tl.zeros([BLOCK_R, BLOCK_I], tl.int32),
                       NEG_IN, IDX_IN, MODE, ACC)
        acc, acc_i = _accumulate(acc, acc_i, v, idx, m, MODE)
    res, res_i = _finish(acc, acc_i, count, 0, MODE, DIVIDE, NEG_OUT, ACC)
    oo = (o * S + s) * inner + i
    if WRITE_VAL:
        tl.store(out_ptr + oo, res.to(out_ptr.dtype.element_ty), mask=i_ok)
    if WRITE_IDX:
        tl.store(oi_ptr + oo, res_i, mask=i_ok)


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


def _blocks(outer, R, inner, itemsize):
    """Tile shape and split of one launch: (kernel, b0, b1, n_prog, S, chunk).  b0 x b1 is the tile
    ([rows, cols] for "row", [R, inner] for "col"); S splits of ``chunk`` elements of R each."""
    tile = _TILE[itemsize]
    if inner == 1:
        bn = min(_np2(R), tile)
        bm = max(1, min(tile // bn, _np2(outer)))
        n_prog = triton.cdiv(outer, bm)
    else:
        bi = min(_np2(inner), 256)
        br = max(1, min(tile // bi, _np2(R)))
        n_prog = outer * triton.cdiv(inner, bi)
    S, chunk = 1, max(R, 1)
    if n_prog < _TARGET_PROGRAMS and R >= 2 * _MIN_CHUNK:
        S = min(triton.cdiv(_TARGET_PROGRAMS, n_prog), triton.cdiv(R, _MIN_CHUNK))
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
    _, _, _, _, S, _ = _blocks(outer, R, inner, x.dtype.itemsize)
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
    common = dict(MODE=mode, NEG_IN=neg_in, NEG_OUT=neg_out, IDX_IN=idx_in, WRITE_VAL=write_val,
                  WRITE_IDX=write_idx, DIVIDE=divide, ACC=acc, I64=i64, num_warps=8 if b0 * b1 >= 2048 else 4)
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
    kind, b0, b1, _, S, chunk = _blocks(outer, R, inner, desc.inputs[0].dtype.itemsize)
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
        k2, c0, c1, _, _, _ = _blocks(outer, S, inner, acc_dt.itemsize)
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
    kind, *_, S, _ = _blocks(outer, R, inner, x.dtype.itemsize)
    return f"triton:reduce_{kind}" + (f"_split{S}" if S > 1 else "") + ("+permute" if perm else "")


for _name in REDUCTIONS:
    register_triton(_name, _run, route=_route, workspace=_workspace)
register_triton("amax_backward", _run_ext_bw, route="triton:amax_backward")
register_triton("mean_backward", _run_mean_bw, route="triton:ew_template(div_count)")
register_triton("broadcast_to", _run_broadcast, route="triton:ew_template(identity)")
