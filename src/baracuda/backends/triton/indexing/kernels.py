"""The indexing kernels: one tiled index-map kernel serves gather, take, take_along_dim and every scatter form,
plus one_hot's.

Geometry (host: ``index_geometry``): the index's shape is the iteration space.  Each operand is described by its
strides over that space: the index, the "value" operand (gather: the output; scatter: src, or a 1-element
tensor with zero strides for a scalar value) and the "target" (gather: the input; scatter: the output or the
accumulator), whose stride along ``dim`` is zeroed and replaced by ``index * DS`` (DS: the target's stride along
dim).  The dims are collapsed where every operand allows it (a marker operand keeps ``dim`` apart) and padded to
six; a program owns a [BR, BC] tile of rows (dims 0..4: five div/mods per ROW) by columns (the last dim: one
multiply per element), so a gather of 4096-wide bf16 rows costs one index load, one data load and one store per
element, all coalesced along the row.

Out-of-range indices (``idx < 0`` or ``>= size``; with WRAP, ``< -size`` or ``>= size``) are never dereferenced:
the address is clamped to 0 and the load / store / atomic masked off, a gathered element is written as 0, and the
offending raw index value is stored into a 1-word int64 flag (encoded ``v + 1`` for v >= 0, ``v`` for v < 0, so
that 0 means "no error"); ``raise_index_flag`` turns it into ``InvalidProblemError`` through
``_core/checks.py: flagged`` (now, deferred or never, as ``PlanPreference.check_values`` says).  Both are public:
other index families may use them.

MODE (constexpr): 0 gather; 1 assign (store); 2 atomic add (f32 / f64 / i64 accumulators); 3 mark (store the
reduction's identity at every target: include_self=False); 4 count (atomic +1 into an int32 counter: mean);
5 / 6 / 7 compare-and-swap loops for prod / amax / amin on the accumulator's bits (Triton has no atomic multiply;
the CAS loop also gives amax / amin torch's NaN propagation, which an integer-punned atomic max would not).
Accumulators: f32 for f32 / f16 / bf16, f64 for f64, int64 for the integer and bool dtypes (their sums wrap
like the narrow type's once cast back: addition modulo 2^k commutes with the truncation).
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.interp import loop
from .._lib.launch import fast_kernel
from .._lib.strided import RANK, collapse, tile_rows_cols

__all__ = ["index_geometry", "launch_index_map", "raise_index_flag", "flag_bad_index", "decode_index_flag",
           "GATHER", "ASSIGN", "ADD", "MARK", "COUNT", "PROD", "AMAX", "AMIN"]

GATHER, ASSIGN, ADD, MARK, COUNT, PROD, AMAX, AMIN = range(8)
_LIMIT = 2 ** 31 - 2 ** 16      # offsets at or above this use int64 (a tile's overshoot stays in range)
_TILE = 4096                    # elements per program (BR * BC)


@triton.jit
def flag_bad_index(flag_ptr, j, bad):
    """Store the raw index value of the ``bad`` lanes into the int64 flag word (encoded: 0 stays "no error")."""
    enc = tl.where(j >= 0, j + 1, j)
    tl.store(flag_ptr + tl.zeros_like(enc), enc, mask=bad)


def decode_index_flag(v) -> int:
    v = int(v)
    return v - 1 if v > 0 else v


def raise_index_flag(op: str, arg: str, flag, size: int, wrap: bool, what: str, pref,
                     decode=decode_index_flag) -> None:
    """Raise (now or deferred) the named out-of-range error if a kernel set ``flag`` (see the module doc;
    ``decode``: the flag's encoding when another family's kernel set it)."""
    from ....ops.indexing import oob_error

    flagged(flag, pref, lambda v: oob_error(op, arg, decode(v), size, wrap, what))


@triton.jit
def _rows(r, D1, D2, D3, D4, A0, A1, A2, A3, A4):
    """Offset of rows ``r`` (row-major over dims 0..4) in an operand with strides A0..A4."""
    i4 = r % D4
    q = r // D4
    i3 = q % D3
    q = q // D3
    i2 = q % D2
    q = q // D2
    i1 = q % D1
    i0 = q // D1
    return i0 * A0 + i1 * A1 + i2 * A2 + i3 * A3 + i4 * A4


@triton.jit
def checked_index(j, m, size, flag_ptr, WRAP: tl.constexpr, I64: tl.constexpr):
    """(ok, jc) of int64 indices ``j`` on lanes ``m`` into a dimension of ``size``: in range (negative ones wrapping
    when WRAP), the out-of-range ones flagged (``flag_bad_index``) and replaced by 0 in jc (never dereferenced);
    jc int32 unless I64."""
    if WRAP:
        ok = (j >= -size) & (j < size)
        jw = tl.where(j < 0, j + size, j)
    else:
        ok = (j >= 0) & (j < size)
        jw = j
    flag_bad_index(flag_ptr, j, m & ~ok)
    ok = m & ok
    jc = tl.where(ok, jw, 0)
    if not I64:
        jc = jc.to(tl.int32)
    return ok, jc


@triton.jit
def combine(cur, v, OP: tl.constexpr, IS_FLOAT: tl.constexpr):
    """cur (op) v for the compare-and-swap scatters: OP 0 product, 1 max, 2 min; with floats NaN wins (torch's
    amax / amin, XLA's max / min)."""
    if OP == 0:
        return cur * v
    if OP == 1:
        r = tl.maximum(cur, v)
    else:
        r = tl.minimum(cur, v)
    if IS_FLOAT:
        r = tl.where(v != v, v, r)
        r = tl.where(cur != cur, cur, r)
    return r


@triton.jit
def cas_combine(bits_ptr, typed_ptr, offs, v, active, dummy, OP: tl.constexpr, IS_FLOAT: tl.constexpr):
    """target[offs] = target[offs] (op) v where ``active``, atomically, by a compare-and-swap loop on the target's
    bits (``bits_ptr``; ``typed_ptr``: the same words typed, ``v`` in that type).  Lanes that are done (or masked)
    swap 0 for 0 at the word ``dummy`` (one past the end), so every lane may issue the CAS."""
    bits_t = bits_ptr.dtype.element_ty
    acc_t = typed_ptr.dtype.element_ty
    cur = tl.load(bits_ptr + offs, mask=active, other=0)
    while tl.max(tl.max(active.to(tl.int32), 1), 0) > 0:
        new = combine(cur.to(acc_t, bitcast=True), v, OP, IS_FLOAT).to(bits_t, bitcast=True)
        cmp = tl.where(active, cur, 0)
        prev = tl.atomic_cas(bits_ptr + tl.where(active, offs, dummy), cmp, tl.where(active, new, 0))
        active = active & (prev != cmp)
        cur = prev


@fast_kernel
def _index_map(val_ptr, idx_ptr, tgt_ptr, flag_ptr, cnt_ptr, n_rows, L, n_cb, size, DS, dummy,
               D1, D2, D3, D4, I0, I1, I2, I3, I4, IL, V0, V1, V2, V3, V4, VL, T0, T1, T2, T3, T4, TL,
               MODE: tl.constexpr, WRAP: tl.constexpr, I64: tl.constexpr, IS_FLOAT: tl.constexpr,
               BR: tl.constexpr, BC: tl.constexpr, ROW_INDEX: tl.constexpr = False):
    """One [BR, BC] tile of the index space; see the module doc for the operands and MODE.  ROW_INDEX: the index
    is constant along the columns (stride 0: ``idx[:, None].expand(-1, D)``, a gather of whole rows): one index
    load per row, and the row's addresses stay contiguous (16-byte accesses when the strides allow)."""
    r, c = tile_rows_cols(n_cb, I64, BR, BC)
    m = (r < n_rows)[:, None] & (c < L)[None, :]
    vo = _rows(r, D1, D2, D3, D4, V0, V1, V2, V3, V4)[:, None] + (c * VL)[None, :]
    to = _rows(r, D1, D2, D3, D4, T0, T1, T2, T3, T4)[:, None] + (c * TL)[None, :]
    if ROW_INDEX:
        io_r = _rows(r, D1, D2, D3, D4, I0, I1, I2, I3, I4)
        j = tl.load(idx_ptr + io_r, mask=r < n_rows, other=0).to(tl.int64)[:, None] + tl.zeros([BR, BC], tl.int64)
    else:
        io = _rows(r, D1, D2, D3, D4, I0, I1, I2, I3, I4)[:, None] + (c * IL)[None, :]
        j = tl.load(idx_ptr + io, mask=m, other=0).to(tl.int64)
    ok, jc = checked_index(j, m, size, flag_ptr, WRAP, I64)
    to = to + jc * DS
    if MODE == 0:
        v = tl.load(tgt_ptr + to, mask=ok, other=0)
        tl.store(val_ptr + vo, v, mask=m)
    elif MODE == 1:
        tl.store(tgt_ptr + to, tl.load(val_ptr + vo, mask=ok), mask=ok)
    elif MODE == 2:
        v = tl.load(val_ptr + vo, mask=ok, other=0).to(tgt_ptr.dtype.element_ty)
        red_add(tgt_ptr + to, v, mask=ok)
    elif MODE == 3:
        v = tl.load(val_ptr + tl.zeros_like(vo))   # the identity: a 1-element tensor
        tl.store(tgt_ptr + to, v, mask=ok)
    elif MODE == 4:
        red_add(cnt_ptr + to, tl.full(to.shape, 1, tl.int32), mask=ok)
    else:
        # MODE 5 / 6 / 7: product / max / min by compare-and-swap on the accumulator (tgt_ptr its bits, cnt_ptr typed)
        v = tl.load(val_ptr + vo, mask=ok, other=0).to(cnt_ptr.dtype.element_ty)
        cas_combine(tgt_ptr, cnt_ptr, to, v, ok, dummy, MODE - 5, IS_FLOAT)


@fast_kernel
def _scatter_seq(val_ptr, idx_ptr, tgt_ptr, flag_ptr, n_rows, R, size, DS, IR, VR,
                 D1, D2, D3, D4, I0, I1, I2, I3, I4, V0, V1, V2, V3, V4, T0, T1, T2, T3, T4,
                 MODE: tl.constexpr, WRAP: tl.constexpr, I64: tl.constexpr, IS_FLOAT: tl.constexpr,
                 BC: tl.constexpr):
    """The deterministic scatter: a program owns BC "columns" of the index space (every coordinate but dim's; no
    other program can reach their targets) and walks dim's R positions in order, with plain loads and stores: the
    same order on every run, so float sums / products are bit-stable and an assignment's last value wins (torch's
    CPU order).  Parallelism is the number of columns (a flat put has one: a correctness path, not a fast one)."""
    pid = tl.program_id(0)
    c = pid * BC + tl.arange(0, BC)
    if I64:
        c = c.to(tl.int64)
    m = c < n_rows
    io = _rows(c, D1, D2, D3, D4, I0, I1, I2, I3, I4)
    vo = _rows(c, D1, D2, D3, D4, V0, V1, V2, V3, V4)
    to = _rows(c, D1, D2, D3, D4, T0, T1, T2, T3, T4)
    for r in loop(0, R):
        j = tl.load(idx_ptr + io + r * IR, mask=m, other=0).to(tl.int64)
        ok, jc = checked_index(j, m, size, flag_ptr, WRAP, I64)
        t = tgt_ptr + to + jc * DS
        v = tl.load(val_ptr + vo + r * VR, mask=ok, other=0).to(tgt_ptr.dtype.element_ty)
        if MODE == 1:
            tl.store(t, v, mask=ok)
        else:
            cur = tl.load(t, mask=ok, other=0)
            if MODE == 2:
                new = cur + v
            else:
                new = combine(cur, v, MODE - 5, IS_FLOAT)
            tl.store(t, new, mask=ok)


def launch_scatter_seq(mode, val, idx, tgt, flag, *, dim, ds, size, wrap, shape, idx_strides, val_strides,
                       tgt_strides, is_float=False):
    """``_scatter_seq`` over the index space ``shape`` (arguments as ``launch_index_map``; ``dim`` None: every
    position is on the walked axis, a flat put)."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return
    shape = tuple(shape) or (1,)
    ops = [list(tuple(idx_strides) or (0,)), list(tuple(val_strides) or (0,)), list(tuple(tgt_strides) or (0,))]
    if dim is None:    # flat: walk every index position (one column)
        dims, sts = collapse(shape, ops)
        if len(dims) > 1:
            raise ValueError("a flat deterministic scatter needs a 1-d index space")
        R, walk, rest_dims, rest = dims[0], [st[0] for st in sts], [], [[] for _ in ops]
    else:
        marker = [1 if d == dim else 0 for d in range(len(shape))]
        dims, sts = collapse(shape, ops + [marker])
        k = next((q for q, v in enumerate(sts[3]) if v == 1), None)
        R = dims[k] if k is not None else 1
        walk = [st[k] for st in sts[:3]] if k is not None else [0, 0, 0]
        keep = [q for q in range(len(dims)) if q != k]
        rest_dims, rest = [dims[q] for q in keep], [[st[q] for q in keep] for st in sts[:3]]
    if len(rest_dims) > 5:
        raise ValueError("more than five non-mergeable dims besides dim (the plan's supports() refuses these)")
    pad = 5 - len(rest_dims)
    rdims = [1] * pad + rest_dims
    rst = [[0] * pad + st for st in rest]
    rows = n // R
    bc = max(16, min(next_power_of_2(rows), 256))
    spans = [1 + sum((d - 1) * abs(s) for d, s in zip(rdims + [R], st + [w])) for st, w in zip(rst, walk)]
    i64 = max(spans + [size * abs(ds) + spans[2], n + 256]) >= _LIMIT
    _scatter_seq[(cdiv(rows, bc),)](val, idx, tgt, flag, rows, R, size, ds, walk[0], walk[1], *rdims[1:], *rst[0],
                                    *rst[1], *rst[2], MODE=mode, WRAP=wrap, I64=i64, IS_FLOAT=is_float, BC=bc,
                                    num_warps=4)


def index_geometry(shape, dim, idx_strides, val_strides, tgt_strides):
    """Collapsed, padded (shape, [idx, val, tgt] strides) over the index space ``shape``; ``tgt_strides`` have 0
    along ``dim`` (the index supplies that offset; None: the target does not follow the index space, take / put);
    None when more than six dims remain."""
    shape = tuple(shape) or (1,)
    idx_strides, val_strides = tuple(idx_strides) or (0,), tuple(val_strides) or (0,)
    tgt = list(tuple(tgt_strides) or (0,))
    marker = [1 if d == dim else 0 for d in range(len(shape))]
    dims, sts = collapse(shape, [list(idx_strides), list(val_strides), tgt, marker])
    if len(dims) > RANK:
        return None
    pad = RANK - len(dims)
    return [1] * pad + dims, [[0] * pad + st for st in sts[:3]]


def launch_index_map(mode, val, idx, tgt, flag, *, dim, ds, size, wrap, shape, idx_strides, val_strides, tgt_strides,
                     cnt=None, dummy=0, is_float=False):
    """Launch ``_index_map`` over the index space ``shape``: ``val`` / ``tgt`` are tensors (or same-width views)
    with ``idx_strides`` / ``val_strides`` / ``tgt_strides`` over that space (tgt's 0 along ``dim``); an index
    value j addresses ``tgt + row offset + j * ds``, valid for j in [0, size) ([-size, size) with ``wrap``)."""
    n = 1
    for s in shape:
        n *= s
    if n == 0:
        return
    geo = index_geometry(shape, dim, idx_strides, val_strides, tgt_strides)
    if geo is None:
        raise ValueError("more than six non-mergeable dims (the plan's supports() refuses these)")
    dims, (ist, vst, tst) = geo
    L = dims[-1]
    rows = n // L
    row_index = ist[-1] == 0 and L > 1
    # a per-element index tile holds int64 indices and three offset vectors: 4096 elements took 190-230 registers
    # per thread at 4 warps on sm_90 (two programs per SM); 1024 keep it near 60.  A row-indexed tile needs 32 at 4096
    tile = _TILE if row_index else _TILE // 4
    bc = min(next_power_of_2(L), 1024)
    br = max(1, min(tile // bc, next_power_of_2(rows)))
    n_cb = cdiv(L, bc)
    spans = [1 + sum((d - 1) * abs(s) for d, s in zip(dims, st)) for st in (ist, vst, tst)]
    i64 = max(spans + [size * abs(ds) + spans[2], n + _TILE]) >= _LIMIT
    _index_map[(cdiv(rows, br) * n_cb,)](
        val, idx, tgt, flag, cnt if cnt is not None else tgt, rows, L, n_cb, size, ds, dummy,
        *dims[1:5], *ist, *vst, *tst, MODE=mode, WRAP=wrap, I64=i64, IS_FLOAT=is_float, BR=br, BC=bc,
        ROW_INDEX=row_index, num_warps=4)


@fast_kernel
def _one_hot_kernel(t_ptr, out_ptr, flag_ptr, n, C, ST, BR: tl.constexpr, BC: tl.constexpr, I64: tl.constexpr):
    """out[i, c] = (t[i] == c) for a [BR, BC] tile; classes outside [0, C) set the flag and write a zero row."""
    pid = tl.program_id(0)
    nb = tl.cdiv(C, BC)
    if I64:
        pid = pid.to(tl.int64)
    rb = pid // nb
    cb = pid - rb * nb
    r = rb * BR + tl.arange(0, BR)
    c = cb * BC + tl.arange(0, BC)
    if I64:
        r = r.to(tl.int64)
    rm = r < n
    t = tl.load(t_ptr + r * ST, mask=rm, other=0).to(tl.int64)
    bad = rm & ((t < 0) | (t >= C))
    flag_bad_index(flag_ptr, t, bad & (cb == 0))
    hot = (t[:, None] == c[None, :]) & ~bad[:, None]
    tl.store(out_ptr + r[:, None] * C + c[None, :], hot.to(tl.int64), mask=rm[:, None] & (c < C)[None, :])


def launch_one_hot(t, out, flag, C):
    n = t.numel()
    if n == 0:
        return
    if C == 0:   # every class is out of range and there is no column to launch on: flag the first one (no sync)
        e = t.reshape(-1)[:1].to(torch.int64)
        flag.copy_(torch.where(e >= 0, e + 1, e).reshape(flag.shape))
        return
    t1 = t.reshape(-1)
    bc = min(next_power_of_2(C), 1024)
    br = max(1, min(_TILE // bc, next_power_of_2(n)))
    i64 = n * C + _TILE >= _LIMIT
    _one_hot_kernel[(cdiv(n, br) * cdiv(C, bc),)](t1, out, flag, n, C, t1.stride(0), BR=br, BC=bc, I64=i64,
                                                 num_warps=4)


def int_view(t: torch.Tensor) -> torch.Tensor:
    """A same-width integer view (bit-exact data movement for every dtype; bool -> uint8)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


__all__ += ["launch_one_hot", "int_view", "launch_scatter_seq", "combine", "cas_combine", "checked_index"]
