"""Triton masked_fill and the block-scan ops (masked_select, masked_scatter, masked_scatter_backward, nonzero,
argwhere, nonzero_static).

masked_fill: one pass over the broadcast output: out = mask ? value : input, the input and the mask read through
their broadcast strides (a [4, 1, S, S] mask under [4, 32, S, S] scores is read from L2 32 times, from HBM once).

The block scan (no host loop over elements, no host read: CUDA-graph safe):
1. ``_count_kernel``: the number of selected positions of each BLOCK of the row-major broadcast shape.
2. ``_offsets_kernel``: one program turns the counts into exclusive block offsets (int64, 1024 blocks a step) and
   checks the total (masked_select / nonzero: == count; masked_scatter: <= the source's size); a bad total is
   flagged (total + 1 in the flag word) and raised by the plan through ``_core/checks.py: flagged``.
3. ``_emit_kernel``: each block ranks its positions (offset + in-block exclusive cumsum) and writes: SELECT
   out[rank] = x[p] (rank < the output's length), COORD out[rank, :] = the coordinates of p, SCATTER
   out[p] = mask ? source[rank] : x[p] (rank < the source's size), GATHER out[rank] = grad[p] (rank < size).
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ....ops.indexing_masked import count_error
from .._lib.geometry import cdiv
from .._lib.config import overrides
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .._lib.strided import RANK, expanded_strides, padded, strided_offset, strided_offset_i64, unravel
from ..layout.move import bits, copy_into, fill, scalar

_BLOCK = 1024
_MODES = {"masked_select": 0, "nonzero": 1, "argwhere": 1, "nonzero_static": 1, "masked_scatter": 2,
          "masked_scatter_backward": 3}


@triton.jit
def _flat(n, BLOCK: tl.constexpr):
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    return p, p < n


@fast_kernel
def _fill_kernel(out_ptr, x_ptr, m_ptr, val_ptr, n, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5,
                 m0, m1, m2, m3, m4, m5, BLOCK: tl.constexpr):
    p, pm = _flat(n, BLOCK)
    xo = strided_offset(p, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5)
    mo = strided_offset(p, S1, S2, S3, S4, S5, m0, m1, m2, m3, m4, m5)
    sel = tl.load(m_ptr + mo, mask=pm, other=0) != 0
    v = tl.load(x_ptr + xo, mask=pm, other=0)      # (bounds mask only: see _fill_rows_kernel)
    f = tl.load(val_ptr)
    tl.store(out_ptr + p, tl.where(sel, f, v), mask=pm)


@fast_kernel
def _fill_rows_kernel(out_ptr, x_ptr, m_ptr, val_ptr, L, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5,
                      m0, m1, m2, m3, m4, m5, XI: tl.constexpr, MI: tl.constexpr, ITERS: tl.constexpr,
                      BLOCK: tl.constexpr):
    """masked_fill over [outer, L] where the last merged dim (L elements) is contiguous in the output and, per
    operand, contiguous (XI / MI = 1) or broadcast (0): the outer index is unravelled once per program (a scalar),
    the inner offsets are the plain lane index (no per-element division: the flat kernel's unravel of six dims
    made [4, 32, 4096^2] bf16 compute-bound at 45 % of the copy roofline); ITERS blocks of BLOCK per program."""
    o = tl.program_id(1)
    xo = strided_offset_i64(o, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5)     # (o: int32, unravelled once)
    mo = strided_offset_i64(o, S1, S2, S3, S4, S5, m0, m1, m2, m3, m4, m5)
    oo = o.to(tl.int64) * L
    f = tl.load(val_ptr)
    base = tl.program_id(0).to(tl.int64) * (BLOCK * ITERS)
    for it in tl.static_range(ITERS):
        i = base + it * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
        im = i < L
        sel = tl.load(m_ptr + mo + i * MI, mask=im, other=0) != 0
        # x under the bounds mask only: a data-dependent mask (~sel) has no constancy Triton can prove, so the
        # load would split into scalar accesses instead of 16-byte vectors (the DRAM sectors are fetched anyway)
        v = tl.load(x_ptr + xo + i * XI, mask=im, other=0)
        tl.store(out_ptr + oo + i, tl.where(sel, f, v), mask=im)


@fast_kernel
def _count_kernel(cnt_ptr, m_ptr, n, S1, S2, S3, S4, S5, m0, m1, m2, m3, m4, m5, BLOCK: tl.constexpr):
    p, pm = _flat(n, BLOCK)
    mo = strided_offset(p, S1, S2, S3, S4, S5, m0, m1, m2, m3, m4, m5)
    sel = (tl.load(m_ptr + mo, mask=pm, other=0) != 0) & pm
    tl.store(cnt_ptr + tl.program_id(0), tl.sum(sel.to(tl.int64), axis=0))


@fast_kernel
def _offsets_kernel(off_ptr, cnt_ptr, flag_ptr, nb, expect, CHECK: tl.constexpr, BLOCK: tl.constexpr):
    carry = tl.sum(tl.zeros([BLOCK], dtype=tl.int64), axis=0)
    s = 0
    while s < nb:     # (while: the interpreter cannot range() over a runtime scalar)
        o = s + tl.arange(0, BLOCK)
        v = tl.load(cnt_ptr + o, mask=o < nb, other=0)
        tl.store(off_ptr + o, tl.cumsum(v, axis=0) - v + carry, mask=o < nb)
        carry += tl.sum(v, axis=0)
        s += BLOCK
    if CHECK == 1:
        bad = carry != expect
    else:
        bad = carry > expect
    if bad:
        tl.store(flag_ptr, carry + 1)


@fast_kernel
def _emit_kernel(out_ptr, x_ptr, m_ptr, src_ptr, off_ptr, n, limit, ndim,
                 S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5, m0, m1, m2, m3, m4, m5,
                 D1, D2, D3, D4, D5, MODE: tl.constexpr, BLOCK: tl.constexpr):
    p, pm = _flat(n, BLOCK)
    mo = strided_offset(p, S1, S2, S3, S4, S5, m0, m1, m2, m3, m4, m5)
    sel = (tl.load(m_ptr + mo, mask=pm, other=0) != 0) & pm
    s64 = sel.to(tl.int64)
    rank = tl.load(off_ptr + tl.program_id(0)) + tl.cumsum(s64, axis=0) - s64
    ok = sel & (rank < limit)
    if MODE == 0 or MODE == 3:          # SELECT / GATHER: out[rank] = x[p]
        xo = strided_offset(p, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5)
        tl.store(out_ptr + rank, tl.load(x_ptr + xo, mask=ok, other=0), mask=ok)
    elif MODE == 1:                      # COORD: out[rank, d] = coordinate d of p (the input's own dims)
        i0, i1, i2, i3, i4, i5 = unravel(p, D1, D2, D3, D4, D5)
        base = rank * ndim
        first = 6 - ndim
        if first <= 0:
            tl.store(out_ptr + base + 0 - first, i0, mask=ok)
        if first <= 1:
            tl.store(out_ptr + base + 1 - first, i1, mask=ok)
        if first <= 2:
            tl.store(out_ptr + base + 2 - first, i2, mask=ok)
        if first <= 3:
            tl.store(out_ptr + base + 3 - first, i3, mask=ok)
        if first <= 4:
            tl.store(out_ptr + base + 4 - first, i4, mask=ok)
        if first <= 5:
            tl.store(out_ptr + base + 5 - first, i5, mask=ok)
    else:                                # SCATTER: out[p] = mask ? source[rank] : x[p]
        xo = strided_offset(p, S1, S2, S3, S4, S5, x0, x1, x2, x3, x4, x5)
        v = tl.load(x_ptr + xo, mask=pm, other=0)       # (bounds mask only: see _fill_rows_kernel)
        s = tl.load(src_ptr + tl.where(ok, rank, 0), mask=ok, other=0)
        tl.store(out_ptr + p, tl.where(sel, s, v), mask=pm)


# -- host side ------------------------------------------------------------------------------------------
def _geometry(shape, *ts):
    """(n, [S1..S5], [strides per operand]) of the broadcast row-major iteration over ``shape`` (None: more than
    RANK dims after merging)."""
    sts = [expanded_strides(t, shape) for t in ts]
    pd = padded(list(shape) or [1], [s or [0] for s in sts] if shape else [[0] for _ in ts])
    if pd is None:
        return None
    dims, psts = pd
    return math.prod(shape), dims[1:], psts


def _supports(desc):
    shape = desc.outputs[0].shape if desc.op in ("masked_fill", "masked_scatter") else desc.inputs[0].shape
    if desc.op in ("masked_select", "masked_scatter_backward"):
        shape = torch.broadcast_shapes(tuple(desc.inputs[0].shape), tuple(desc.inputs[1].shape))
    if desc.op in ("nonzero", "argwhere", "nonzero_static") and len(shape) > RANK:
        return f"inputs of more than {RANK} dims (the coordinates are unravelled over {RANK} dims)"
    import math as _m
    from .._lib.strided import collapse

    if len(collapse(list(shape), [[_m.prod(shape[i + 1:]) for i in range(len(shape))]])[0]) > RANK:
        return f"more than {RANK} dims that do not merge"
    return None


def _mask_view(t):
    return bits(t) if t.dtype == torch.bool else t


_ROW_BLOCK = 4096
_ROW_ITERS = 2           # (block, iters, warps) = (4096, 2, 8): the best of run I's sweep (session9/runI_*)
_MAX_GRID_Y = 65535
_FORCE, forced = overrides("""Force masked_fill's row kernel: ``block`` (elements per step), ``iters`` (steps per
program), ``warps`` (bench/masked_fill_sweep.py).""")


def _rows(n, dims, sx, sm):
    """(L, outer, outer dims, x / mask outer strides, XI, MI) for _fill_rows_kernel: the last merged dim holds at
    least _ROW_BLOCK elements and each operand walks it with stride 1 or 0; else None (the flat kernel)."""
    L = dims[-1]
    if L < _ROW_BLOCK or sx[-1] not in (0, 1) or sm[-1] not in (0, 1) or n // L > _MAX_GRID_Y:
        return None
    # the outer dims [S0 .. S4] (dims holds S1 .. S5 of the padded shape) padded on the left back to RANK: the
    # kernel takes that shape's S1 .. S5, i.e. S0 .. S4, and strides with a leading 0
    s0 = n // math.prod(dims)
    return L, n // L, [s0] + list(dims[:-1]), [0] + list(sx[:-1]), [0] + list(sm[:-1]), sx[-1], sm[-1]


def _masked_fill(desc, pref):
    def run(desc_, inputs, outputs, ws):
        x, mask = inputs[:2]
        out = outputs[0]
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if res.numel():
            n, dims, (sx, sm) = _geometry(tuple(res.shape), x, mask)
            # the value: a number, or a 0-d tensor operand converted on the device (no host read)
            val = inputs[2].reshape(1).to(res.dtype) if len(inputs) == 3 else scalar(desc.attr("value"), res)
            rows = _rows(n, dims, sx, sm)
            if rows is not None:
                L, outer, odims, osx, osm, xi, mi = rows
                blk, iters, warps = (_FORCE.get("block", _ROW_BLOCK), _FORCE.get("iters", _ROW_ITERS),
                                     _FORCE.get("warps", 8))
                _fill_rows_kernel[(cdiv(L, blk * iters), outer)](bits(res), bits(x), _mask_view(mask), bits(val), L,
                                                                 *odims, *osx, *osm, XI=xi, MI=mi, ITERS=iters,
                                                                 BLOCK=blk, num_warps=warps)
            else:
                _fill_kernel[(cdiv(n, _BLOCK),)](bits(res), bits(x), _mask_view(mask), bits(val), n, *dims, *sx,
                                                 *sm, BLOCK=_BLOCK, num_warps=8)
        if res is not out:
            copy_into(out, res)
    return run


def _scan_op(desc, pref):
    op = desc.op
    mode = _MODES[op]

    def run(desc_, inputs, outputs, ws):
        x = inputs[0]
        mask = x if mode == 1 else inputs[1]
        if op == "masked_scatter_backward":
            shape = tuple(x.shape)
        elif op in ("masked_select", "masked_scatter"):
            shape = tuple(torch.broadcast_shapes(x.shape, mask.shape))
        else:
            shape = tuple(x.shape)
        flag = ws.view(torch.int64)[:1]
        flag.zero_()
        out = outputs[0]
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if op == "nonzero_static":
            fill(res, desc.attr("fill_value"))
        elif op == "masked_scatter_backward":
            fill(res, 0)
        n, dims, (sx, sm) = _geometry(shape, x, mask)
        nb = cdiv(n, _BLOCK)
        if op in ("nonzero", "argwhere", "masked_select"):
            limit, check = desc.attr("count"), 1
        elif op == "nonzero_static":
            limit, check = desc.attr("size"), 0
        elif op == "masked_scatter":
            limit, check = inputs[2].numel(), 2
        else:
            limit, check = res.numel(), 0
        if n:
            cnt = torch.empty(2 * nb, dtype=torch.int64, device=x.device)
            _count_kernel[(nb,)](cnt, _mask_view(mask), n, *dims, *sm, BLOCK=_BLOCK, num_warps=4)
            _offsets_kernel[(1,)](cnt[nb:], cnt, flag, nb, limit, CHECK=check, BLOCK=1024, num_warps=4)
            full = list(shape) or [1]
            dd = [1] * (RANK - len(full)) + full
            target = res
            if mode == 1 and (not shape or (op == "nonzero" and desc.attr("as_tuple"))):
                # (a 0-d input's coordinates are one zero column; as_tuple: one tensor per column)
                target = torch.empty((limit, max(len(shape), 1)), dtype=torch.int64, device=x.device)
            if mode == 2:
                src = inputs[2].contiguous()
                xb, ob, sb = bits(x), bits(target), bits(src)
            elif mode == 1:
                xb, ob, sb = x, target, target
            else:
                xb, ob, sb = bits(x), bits(target), bits(target)
            _emit_kernel[(nb,)](ob, xb, _mask_view(mask), sb, cnt[nb:], n, limit, max(len(shape), 1) if mode == 1 else 0,
                                *dims, *sx, *sm, *dd[1:], MODE=mode, BLOCK=_BLOCK, num_warps=4)
            if target is not res and (shape or desc.attr("as_tuple")):
                for j, o in enumerate(outputs):
                    copy_into(o, target[:, j])
        if res is not out:
            copy_into(out, res)
        if check:
            flagged(flag, pref, lambda v: _count_err(desc, int(v) - 1))
    return run


def _count_err(desc, total):
    if desc.op == "masked_scatter":
        return count_error(desc.op, "source", f"at least as many elements ({desc.inputs[2].numel}) as True mask "
                                              "positions", total)
    return count_error(desc.op, "count", f"count={desc.attr('count')}, the number of True / nonzero elements", total)


def _bind(desc, pref):
    return _masked_fill(desc, pref) if desc.op == "masked_fill" else _scan_op(desc, pref)


def _run(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


for _op in ("masked_fill", "masked_select", "masked_scatter", "masked_scatter_backward", "nonzero", "argwhere",
            "nonzero_static"):
    register_triton(_op, _run, bind=_bind, supports=_supports, workspace=lambda d: 8,
                    route="triton:masked_fill" if _op == "masked_fill" else f"triton:{_op}:block-scan")
