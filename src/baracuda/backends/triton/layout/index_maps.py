"""Triton layout ops: each op is an index map handed to ``layout_copy.move()`` (which picks the tiled
row copy, the tiled transpose or the per-element gather: see that module for the kernels and their expected
bandwidth), plus the pad fold (the backward of non-constant padding).

cat of two [32, 8, 4096, 128] bf16 KV blocks along dim 2 is two row copies of 256 rows x 524288 elements:
1 GiB read + 1 GiB written, ~0.7 ms at 3 TB/s.  A copy whose source and destination are both one contiguous
block (write_slice's KV-cache append, a contiguous input of slice_scatter) is a single device memcpy
(torch's copy_ of two contiguous same-dtype tensors is cudaMemcpyAsync), as in the seeds.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ....ops.layout_join import cat_inputs, pad_pairs
from .._lib.register import register_triton
from .._lib.strided import RANK
from .move import MODES, copy_into, fill, move
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_BLOCK = 2048


@fast_kernel
def _fold_kernel(out_ptr, g_ptr, total, n, m, inner, a, b, c0, mc, MAXP: tl.constexpr, MODE: tl.constexpr,
                 ACC: tl.constexpr, BLOCK: tl.constexpr):
    """Backward of padding along one dim: out[o, j, k] = sum of g[o, p, k] over the p that read input j.
    At most 3 terms for reflect/circular (pad < n resp. <= n); replicate's edge elements loop over the pad.
    Negative pads crop: the interior p = j + a only where 0 <= p < m; circular wraps the kept [c0, c0 + mc)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < total
    k = offs % inner
    r = offs // inner
    j = r % n
    base = (r // n) * m * inner + k
    acc = tl.load(g_ptr + base + (j + a) * inner, mask=mask & (j + a >= 0) & (j + a < m), other=0).to(ACC)
    if MODE == 2:      # reflect: p = a - j (1 <= j <= a) and p = a + 2(n-1) - j (in the right pad)
        v1 = mask & (j >= 1) & (j <= a)
        acc += tl.load(g_ptr + base + (a - j) * inner, mask=v1, other=0).to(ACC)
        p2 = a + 2 * (n - 1) - j
        v2 = mask & (j <= n - 2) & (p2 < m)
        acc += tl.load(g_ptr + base + p2 * inner, mask=v2, other=0).to(ACC)
    elif MODE == 4:    # circular: p = j + a - mc (left pad) and p = j + a + mc (right pad), j kept
        kept = mask & (j >= c0) & (j < c0 + mc)
        p1 = j + a - mc
        acc += tl.load(g_ptr + base + p1 * inner, mask=kept & (p1 >= 0), other=0).to(ACC)
        p2 = j + a + mc
        acc += tl.load(g_ptr + base + p2 * inner, mask=kept & (p2 < m), other=0).to(ACC)
    else:              # replicate: edge j = 0 takes p in [0, a), j = n-1 takes p in [a+n, m)
        for t in tl.static_range(0, MAXP):   # pad widths are small; one compile per width
            acc += tl.load(g_ptr + base + t * inner, mask=mask & (j == 0) & (t < a), other=0).to(ACC)
            acc += tl.load(g_ptr + base + (a + n + t) * inner, mask=mask & (j == n - 1) & (t < b), other=0).to(ACC)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


# -- per-op index maps ----------------------------------------------------------------------------------
def _view_dims(x):
    return [[s, st, 0, 1] for s, st in zip(x.shape, x.stride())]


def _flip_dims(x, dims, flips):
    base = 0
    for d in flips:
        base += (x.shape[d] - 1) * x.stride(d)
        dims[d][1] = -dims[d][1]
    return base


def run_view(desc, inputs, outputs, ws):
    x, out = inputs[0], outputs[0]
    op = desc.op
    dims = _view_dims(x)
    base, mode, tri, diag = 0, "none", 0, 0
    fill_v = None
    if op in ("permute", "transpose", "movedim"):
        perm = _perm(desc)
        dims = [dims[p] for p in perm]
    elif op == "slice":     # x[start::step] along dim: base start * T, stride step * T
        k = desc.attr("dim")
        base = desc.attr("start") * dims[k][1]
        dims[k][1] *= desc.attr("step")
    elif op in ("flip", "fliplr", "flipud"):
        flips = desc.attr("dims") if op == "flip" else ((1,) if op == "fliplr" else (0,))
        base = _flip_dims(x, dims, flips)
    elif op == "roll":
        if desc.attr("dims") is None:
            return _roll_flat(desc, x, out)
        if len(desc.attr("dims")) == 1:
            return _roll_two_copies(x, out, desc.attr("dims")[0], desc.attr("shifts")[0])
        for s, d in zip(desc.attr("shifts"), desc.attr("dims")):
            dims[d][2] -= s
        mode = "circular"
    elif op == "rot90":
        k, (a, b) = desc.attr("k"), desc.attr("dims")
        flips = {1: (b,), 2: (a, b), 3: (a,)}.get(k, ())
        base = _flip_dims(x, dims, flips)
        if k % 2:
            dims[a], dims[b] = dims[b], dims[a]
    elif op in ("repeat", "tile"):
        reps = desc.attr("repeats")
        dims = [[1, 0, 0, 1]] * (len(reps) - x.dim()) + dims
        mode = "circular"
    elif op == "repeat_interleave":
        if desc.attr("dim") is None:
            flat = out.new_empty(x.shape) if not x.is_contiguous() else x
            if flat is not x:
                copy_into(flat, x)
            dims = [[flat.numel(), 1, 0, desc.attr("repeats")]]
            return move(out, flat.reshape(-1), dims)
        dims[desc.attr("dim")][3] = desc.attr("repeats")
    elif op in ("triu", "tril"):
        tri, diag = (1 if op == "triu" else 2), desc.attr("diagonal")
    elif op == "pad":
        pairs = pad_pairs(x.dim(), desc.attr("pad"))
        mode = desc.attr("mode")
        if mode == "circular":   # a negative pad crops first: circular wraps the cropped view (torch)
            for d, (a, b) in enumerate(pairs):
                if a < 0 or b < 0:
                    x = x.narrow(d, max(-a, 0), x.shape[d] - max(-a, 0) - max(-b, 0))
            dims = _view_dims(x)
            pairs = [(max(a, 0), max(b, 0)) for a, b in pairs]
        for d, (a, _) in enumerate(pairs):
            dims[d][2] = -a
        fill_v = desc.attr("value") if mode == "constant" else None
        if x.numel() == 0:
            return fill(out, fill_v or 0)
    move(out, x, [tuple(d) for d in dims], base=base, mode=mode, fill=fill_v, tri=tri, diag=diag)


def _perm(desc):
    if desc.op == "permute":
        return desc.attr("dims")
    r = len(desc.inputs[0].shape)
    if desc.op == "transpose":
        p = list(range(r))
        if r:
            a, b = desc.attr("dim0"), desc.attr("dim1")
            p[a], p[b] = p[b], p[a]
        return p
    from ....ops.layout import _movedim_perm

    return _movedim_perm(r, desc.attr("source"), desc.attr("destination"))


def _roll_two_copies(x, out, d, shift):
    """A roll along one dim is two block copies (out[s:] = x[:n-s], out[:s] = x[n-s:]): each is a plain
    row copy (identity columns, 16-byte vectors) or, for contiguous 1-D runs, a device memcpy, instead of
    a modulo per row/column."""
    n = x.shape[d]
    if out.numel() == 0:
        return
    s = shift % n
    if s == 0:
        return copy_into(out, x)
    copy_into(out.narrow(d, s, n - s), x.narrow(d, 0, n - s))
    copy_into(out.narrow(d, 0, s), x.narrow(d, n - s, s))


def _roll_flat(desc, x, out):
    flat = x if x.is_contiguous() else out.new_empty(x.shape)
    if flat is not x:
        copy_into(flat, x)
    _roll_two_copies(flat.reshape(-1), out.view(-1), 0, desc.attr("shifts")[0])


def _run_cat(desc, inputs, outputs, ws):
    out, dim = outputs[0], desc.attr("dim")
    off = 0
    for i in cat_inputs(desc.inputs) or [0]:
        x = inputs[i]
        k = x.shape[dim]
        copy_into(out.narrow(dim, off, k), x)
        off += k


def _run_stack(desc, inputs, outputs, ws):
    for i, x in enumerate(inputs):
        copy_into(outputs[0].select(desc.attr("dim"), i), x)


def _run_fill(desc, inputs, outputs, ws):
    fill(outputs[0], desc.attr("value"))


def _run_scatter(desc, inputs, outputs, ws):
    x, src = inputs
    out, dim = outputs[0], desc.attr("dim")
    step = desc.attr("step") if desc.op == "slice_scatter" else 1
    if desc.op == "select_scatter":
        region = out.select(dim, desc.attr("index"))
        start, end = desc.attr("index"), desc.attr("index") + 1
    else:
        start = desc.attr("start")
        end = desc.attr("end") if desc.op == "slice_scatter" else start + src.shape[dim]
        region = out[(slice(None),) * dim + (slice(start, end, step),)]
    if out.data_ptr() != x.data_ptr() or out.stride() != x.stride():   # out=dst: in place, slab only
        if step > 1:    # a strided slab: copy all of x (one pass), then overwrite every step-th row
            copy_into(out, x)
        else:           # everything outside [start, end) along dim, then the slab
            if start > 0:
                copy_into(out.narrow(dim, 0, start), x.narrow(dim, 0, start))
            if end < x.shape[dim]:
                copy_into(out.narrow(dim, end, x.shape[dim] - end), x.narrow(dim, end, x.shape[dim] - end))
    copy_into(region, src)


def _run_pad_backward(desc, inputs, outputs, ws):
    g, out = inputs[0], outputs[0]
    shape = desc.attr("shape")
    pairs = pad_pairs(len(shape), desc.attr("pad"))
    todo = [d for d, (a, b) in enumerate(pairs) if a or b]
    acc_t = torch.float64 if g.dtype == torch.float64 else torch.float32
    cur = g if g.is_contiguous() else g.contiguous()
    if not todo:
        return copy_into(out, g)
    for step, d in enumerate(todo):
        a, b = pairs[d]
        m, n = cur.shape[d], shape[d]
        inner = math.prod(cur.shape[d + 1:])
        new_shape = cur.shape[:d] + (n,) + cur.shape[d + 1:]
        last = step == len(todo) - 1
        nxt = torch.empty(new_shape, dtype=out.dtype if last else acc_t, device=g.device)
        total = nxt.numel()
        if total:
            _fold_kernel[(cdiv(total, _BLOCK),)](
                nxt, cur, total, n, m, inner, a, b, max(-a, 0), n - max(-a, 0) - max(-b, 0),
                MAXP=max(a, b, 0) if desc.attr("mode") == "replicate" else 0, MODE=MODES[desc.attr("mode")],
                ACC=tl.float64 if acc_t == torch.float64 else tl.float32, BLOCK=_BLOCK, num_warps=4)
        cur = nxt
    copy_into(out, cur)


def diagonal_view(t, offset, d1, d2):
    """The diagonal of dims (d1, d2) of t as a strided view (torch.diagonal's layout, built explicitly)."""
    return torch.diagonal(t, offset, d1, d2)


def _run_diagonal(desc, inputs, outputs, ws):
    x, out = inputs[0], outputs[0]
    op = desc.op
    if op == "diagonal":
        return copy_into(out, diagonal_view(x, desc.attr("offset"), desc.attr("dim1"), desc.attr("dim2")))
    if op == "diag" and x.dim() == 2:
        return copy_into(out, diagonal_view(x, desc.attr("diagonal"), 0, 1))
    fill(out, 0)
    if op == "diag":
        offset, d1, d2 = desc.attr("diagonal"), 0, 1
    else:
        offset, d1, d2 = desc.attr("offset"), desc.attr("dim1"), desc.attr("dim2")
    copy_into(diagonal_view(out, offset, d1, d2), x)


def rank_ok(desc):
    if any(len(t.shape) > RANK for t in desc.inputs + desc.outputs):
        return f"rank > {RANK} is not supported by the Triton layout kernels"
    return None


_VIEW_OPS = ("contiguous", "permute", "transpose", "movedim", "slice", "flip", "fliplr", "flipud", "roll", "rot90",
             "repeat", "tile", "triu", "tril", "pad")     # (+ repeat_interleave: layout_rinter.py)
for _name in _VIEW_OPS:
    register_triton(_name, run_view, supports=rank_ok, route="triton:layout_move")
register_triton("cat", _run_cat, supports=rank_ok, route="triton:layout_rows_copy")
register_triton("stack", _run_stack, supports=rank_ok, route="triton:layout_rows_copy")
register_triton("fill", _run_fill, route="triton:fill")
for _name in ("diagonal", "diagonal_backward", "diag_embed", "diag"):
    register_triton(_name, _run_diagonal, supports=rank_ok, route="triton:layout_gather")
register_triton("pad_backward", _run_pad_backward, route="triton:pad_fold")
for _name in ("slice_scatter", "select_scatter", "write_slice"):
    register_triton(_name, _run_scatter, supports=rank_ok, route="triton:layout_rows_copy")
