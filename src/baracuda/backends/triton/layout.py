"""Triton layout kernels: one N-d gather for every one-input layout op, a row-block copy for the
bandwidth-critical joins (cat, stack, scatters, write_slice), and a fill.

Every layout op moves bits, so tensors are reinterpreted as same-width integers (bf16 -> int16, f64 ->
int64, bool -> uint8): one compiled kernel per element width serves every dtype, and no value is ever
converted (bit-exact, NaN payloads and -0.0 included).

``_gather_kernel``: output element with multi-index (i0..i5) (row-major over <= 6 dims, contiguous or any
destination strides D) reads input offset ``base + sum_d T_d * b(i_d // V_d + O_d)``, where ``b`` is the
boundary map (MODE 0 none, 1 constant fill, 2 reflect, 3 replicate, 4 circular).  That covers contiguous /
permute / transpose / movedim (strides), flip (negative stride + base), slice (offset), roll (circular with
offset -shift), repeat/tile (circular), repeat_interleave (divisor), rot90 (flip + swap), pad (all modes)
and triu/tril (TRI masks the last two dims).  It costs ~6 integer div/mod per element: fine for these
ops, whose inputs are read once, but the hot copies below avoid it.

``_rows_kernel``: ``dst[r, 0:cols] = src[r, 0:cols]`` with row strides, grid (col blocks, rows): no
per-element division, 16-byte vectors when ``cols`` and the strides are multiples of 8 (Triton
specializes integer arguments divisible by 16).  cat of two [32, 8, 4096, 128] bf16 KV blocks along
dim 2 is two launches of 256 rows x 524288 elements: 1 GiB read + 1 GiB written, ~0.7 ms at 3 TB/s.
A copy whose source and destination are both one contiguous block (write_slice's KV-cache append, a
contiguous input of slice_scatter) is a single device memcpy (torch's copy_ of two contiguous
same-dtype tensors is cudaMemcpyAsync), as in the seeds.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from ...ops.layout_join import cat_inputs, pad_pairs
from . import register_triton
from ._strided import RANK, collapse, span

_BLOCK = 2048
_ROWS_BLOCK = 4096
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
_MODE = {"none": 0, "constant": 1, "reflect": 2, "replicate": 3, "circular": 4}


def bits(t: torch.Tensor) -> torch.Tensor:
    """Same-width integer view (any strides)."""
    return t.view(_INT_OF_SIZE[t.element_size()])


@triton.jit
def _dim(i, N, T, O, V, ok, MODE: tl.constexpr):
    j = i // V + O
    if MODE == 1:
        ok = ok & (j >= 0) & (j < N)
        j = tl.minimum(tl.maximum(j, 0), N - 1)
    elif MODE == 2:
        j = tl.abs(j)
        j = tl.where(j >= N, 2 * (N - 1) - j, j)
    elif MODE == 3:
        j = tl.minimum(tl.maximum(j, 0), N - 1)
    elif MODE == 4:
        j = ((j % N) + N) % N
    return j * T, ok


@triton.jit
def _gather_kernel(out_ptr, src_ptr, fill_ptr, n, base, diag,
                   S1, S2, S3, S4, S5, D0, D1, D2, D3, D4, D5,
                   N0, N1, N2, N3, N4, N5, T0, T1, T2, T3, T4, T5,
                   O0, O1, O2, O3, O4, O5, V0, V1, V2, V3, V4, V5,
                   MODE: tl.constexpr, TRI: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    if I64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i5 = offs % S5
    r = offs // S5
    i4 = r % S4
    r = r // S4
    i3 = r % S3
    r = r // S3
    i2 = r % S2
    r = r // S2
    i1 = r % S1
    i0 = r // S1
    ok = mask
    s0, ok = _dim(i0, N0, T0, O0, V0, ok, MODE)
    s1, ok = _dim(i1, N1, T1, O1, V1, ok, MODE)
    s2, ok = _dim(i2, N2, T2, O2, V2, ok, MODE)
    s3, ok = _dim(i3, N3, T3, O3, V3, ok, MODE)
    s4, ok = _dim(i4, N4, T4, O4, V4, ok, MODE)
    s5, ok = _dim(i5, N5, T5, O5, V5, ok, MODE)
    src = base + s0 + s1 + s2 + s3 + s4 + s5
    if TRI == 1:
        ok = ok & (i5 - i4 >= diag)
    elif TRI == 2:
        ok = ok & (i5 - i4 <= diag)
    v = tl.load(src_ptr + src, mask=ok)
    if MODE == 1 or TRI > 0:
        v = tl.where(ok, v, tl.load(fill_ptr))
    dst = i0 * D0 + i1 * D1 + i2 * D2 + i3 * D3 + i4 * D4 + i5 * D5
    tl.store(out_ptr + dst, v, mask=mask)


@triton.jit
def _rows_kernel(dst_ptr, src_ptr, cols, dst_rs, src_rs, I64: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(1)
    if I64:
        row = row.to(tl.int64)
        c = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        c = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = c < cols
    v = tl.load(src_ptr + row * src_rs + c, mask=m)
    tl.store(dst_ptr + row * dst_rs + c, v, mask=m)


@triton.jit
def _fill_kernel(out_ptr, fill_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    v = tl.load(fill_ptr)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty) + v, mask=offs < n)


@triton.jit
def _fold_kernel(out_ptr, g_ptr, total, n, m, inner, a, b, MAXP: tl.constexpr, MODE: tl.constexpr, ACC: tl.constexpr,
                 BLOCK: tl.constexpr):
    """Backward of padding along one dim: out[o, j, k] = sum of g[o, p, k] over the p that read input j.
    At most 3 terms for reflect/circular (pad < n resp. <= n); replicate's edge elements loop over the pad."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    mask = offs < total
    k = offs % inner
    r = offs // inner
    j = r % n
    base = (r // n) * m * inner + k
    acc = tl.load(g_ptr + base + (j + a) * inner, mask=mask).to(ACC)
    if MODE == 2:      # reflect: p = a - j (1 <= j <= a) and p = a + 2(n-1) - j (in the right pad)
        v1 = mask & (j >= 1) & (j <= a)
        acc += tl.load(g_ptr + base + (a - j) * inner, mask=v1, other=0).to(ACC)
        p2 = a + 2 * (n - 1) - j
        v2 = mask & (j <= n - 2) & (p2 < m)
        acc += tl.load(g_ptr + base + p2 * inner, mask=v2, other=0).to(ACC)
    elif MODE == 4:    # circular: p = j + a - n (left pad) and p = j + a + n (right pad)
        p1 = j + a - n
        acc += tl.load(g_ptr + base + p1 * inner, mask=mask & (p1 >= 0), other=0).to(ACC)
        p2 = j + a + n
        acc += tl.load(g_ptr + base + p2 * inner, mask=mask & (p2 < m), other=0).to(ACC)
    else:              # replicate: edge j = 0 takes p in [0, a), j = n-1 takes p in [a+n, m)
        for t in tl.static_range(0, MAXP):   # pad widths are small; one compile per width
            acc += tl.load(g_ptr + base + t * inner, mask=mask & (j == 0) & (t < a), other=0).to(ACC)
            acc += tl.load(g_ptr + base + (a + n + t) * inner, mask=mask & (j == n - 1) & (t < b), other=0).to(ACC)
    tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


# -- launchers ------------------------------------------------------------------------------------------
def gather(out, x, dims, base=0, mode="none", fill=None, tri=0, diag=0):
    """out (any strides) [i...] = x[b(i_d // V_d + O_d)...] with dims = [(N_d, T_d, O_d, V_d)] per out dim."""
    n = out.numel()
    if n == 0:
        return
    ob, xb = bits(out), bits(x)
    shape, dst_st = list(out.shape), list(out.stride())
    dims = list(dims)
    if len(shape) > RANK:
        raise AssertionError("layout gather: rank > 6 reaches the kernel (supports() should refuse)")
    pad = RANK - len(shape)
    shape = [1] * pad + shape
    dst_st = [0] * pad + dst_st
    dims = [(1, 0, 0, 1)] * pad + dims
    N, T, O, V = (list(c) for c in zip(*dims))
    fill_t = _scalar(0 if fill is None else fill, out)
    reach = max(span(out), span(x) + abs(base), n) + max(abs(o) for o in O) * max(abs(t) for t in T)
    i64 = reach >= 2 ** 31 - _BLOCK
    _gather_kernel[(triton.cdiv(n, _BLOCK),)](
        ob, xb, bits(fill_t), n, base, diag, *shape[1:], *dst_st, *N, *T, *O, *V,
        MODE=_MODE[mode], TRI=tri, I64=i64, BLOCK=_BLOCK, num_warps=4)


def copy_into(dst, src):
    """dst[...] = src[...] (same shape and dtype, any strides)."""
    if dst.numel() == 0:
        return
    if dst.is_contiguous() and src.is_contiguous():
        dst.copy_(src)     # one device memcpy (cudaMemcpyAsync D2D): the seeds' fast path
        return
    dims, (dst_st, src_st) = collapse(tuple(dst.shape), [list(dst.stride()), list(src.stride())])
    if len(dims) <= 2 and dst_st[-1] == 1 and src_st[-1] == 1:
        rows = dims[0] if len(dims) == 2 else 1
        cols = dims[-1]
        d_rs = dst_st[0] if len(dims) == 2 else 0
        s_rs = src_st[0] if len(dims) == 2 else 0
        i64 = max(span(dst), span(src)) >= 2 ** 31 - _ROWS_BLOCK
        db, sb = bits(dst), bits(src)
        for r0 in range(0, rows, 65535):   # grid dim 1 is limited to 65535 rows per launch
            nr = min(65535, rows - r0)
            _rows_kernel[(triton.cdiv(cols, _ROWS_BLOCK), nr)](
                _offset(db, r0 * d_rs), _offset(sb, r0 * s_rs), cols, d_rs, s_rs, I64=i64, BLOCK=_ROWS_BLOCK, num_warps=8)
        return
    gather(dst, src, [(s, st, 0, 1) for s, st in zip(src.shape, src.stride())])


def _scalar(value, like):
    """value as a 1-element tensor of like's dtype (float -> int truncates, as NumPy and torch casts)."""
    return torch.tensor([float(value)], dtype=torch.float64).to(like.dtype).to(like.device)


def _offset(t, k):
    """A view of t's storage starting k elements after t's first element (for pointer arithmetic)."""
    return t.as_strided((1,), (1,), t.storage_offset() + k) if k else t


def fill(out, value):
    n = out.numel()
    if n == 0:
        return
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    f = _scalar(value, out)
    _fill_kernel[(triton.cdiv(n, _ROWS_BLOCK),)](bits(target), bits(f), n, BLOCK=_ROWS_BLOCK, num_warps=8)
    if target is not out:
        copy_into(out, target)


# -- per-op index maps ----------------------------------------------------------------------------------
def _view_dims(x):
    return [[s, st, 0, 1] for s, st in zip(x.shape, x.stride())]


def _flip_dims(x, dims, flips):
    base = 0
    for d in flips:
        base += (x.shape[d] - 1) * x.stride(d)
        dims[d][1] = -dims[d][1]
    return base


def _run_view(desc, inputs, outputs, ws):
    x, out = inputs[0], outputs[0]
    op = desc.op
    dims = _view_dims(x)
    base, mode, tri, diag = 0, "none", 0, 0
    fill_v = None
    if op in ("permute", "transpose", "movedim"):
        perm = _perm(desc)
        dims = [dims[p] for p in perm]
    elif op == "slice":
        dims[desc.attr("dim")][2] = desc.attr("start")
    elif op in ("flip", "fliplr", "flipud"):
        flips = desc.attr("dims") if op == "flip" else ((1,) if op == "fliplr" else (0,))
        base = _flip_dims(x, dims, flips)
    elif op == "roll":
        if desc.attr("dims") is None:
            return _roll_flat(desc, x, out)
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
            return gather(out, flat.reshape(-1), dims)
        dims[desc.attr("dim")][3] = desc.attr("repeats")
    elif op in ("triu", "tril"):
        tri, diag = (1 if op == "triu" else 2), desc.attr("diagonal")
    elif op == "pad":
        pairs = pad_pairs(x.dim(), desc.attr("pad"))
        for d, (a, _) in enumerate(pairs):
            dims[d][2] = -a
        mode = desc.attr("mode")
        fill_v = desc.attr("value") if mode == "constant" else None
        if x.numel() == 0:
            return fill(out, fill_v or 0)
    gather(out, x, [tuple(d) for d in dims], base=base, mode=mode, fill=fill_v, tri=tri, diag=diag)


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
    from ...ops.layout import _movedim_perm

    return _movedim_perm(r, desc.attr("source"), desc.attr("destination"))


def _roll_flat(desc, x, out):
    n = x.numel()
    flat = x if x.is_contiguous() else out.new_empty(x.shape)
    if flat is not x:
        copy_into(flat, x)
    gather(out.view(-1), flat.reshape(-1), [(n, 1, -desc.attr("shifts")[0], 1)], mode="circular")


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


def _run_full(desc, inputs, outputs, ws):
    fill(outputs[0], desc.attr("value"))


def _run_scatter(desc, inputs, outputs, ws):
    x, src = inputs
    out, dim = outputs[0], desc.attr("dim")
    if desc.op == "select_scatter":
        region = out.select(dim, desc.attr("index"))
        start, end = desc.attr("index"), desc.attr("index") + 1
    else:
        start = desc.attr("start")
        end = desc.attr("end") if desc.op == "slice_scatter" else start + src.shape[dim]
        region = out.narrow(dim, start, end - start)
    if out.data_ptr() != x.data_ptr() or out.stride() != x.stride():   # out=dst: in place, slab only
        # everything outside [start, end) along dim, then the slab
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
            _fold_kernel[(triton.cdiv(total, _BLOCK),)](
                nxt, cur, total, n, m, inner, a, b,
                MAXP=max(a, b) if desc.attr("mode") == "replicate" else 0, MODE=_MODE[desc.attr("mode")],
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


def _rank_ok(desc):
    if any(len(t.shape) > RANK for t in desc.inputs + desc.outputs):
        return f"rank > {RANK} is not supported by the Triton layout kernels"
    return None


_VIEW_OPS = ("contiguous", "permute", "transpose", "movedim", "slice", "flip", "fliplr", "flipud", "roll", "rot90",
             "repeat", "tile", "repeat_interleave", "triu", "tril", "pad")
for _name in _VIEW_OPS:
    register_triton(_name, _run_view, supports=_rank_ok, route="triton:layout_gather")
register_triton("cat", _run_cat, supports=_rank_ok, route="triton:layout_rows_copy")
register_triton("stack", _run_stack, supports=_rank_ok, route="triton:layout_rows_copy")
register_triton("full", _run_full, route="triton:fill")
for _name in ("diagonal", "diagonal_backward", "diag_embed", "diag"):
    register_triton(_name, _run_diagonal, supports=_rank_ok, route="triton:layout_gather")
register_triton("pad_backward", _run_pad_backward, route="triton:pad_fold")
for _name in ("slice_scatter", "select_scatter", "write_slice"):
    register_triton(_name, _run_scatter, supports=_rank_ok, route="triton:layout_rows_copy")
