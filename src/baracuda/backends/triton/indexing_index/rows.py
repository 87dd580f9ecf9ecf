"""Triton index_select / index_fill / index_add / index_copy / index_reduce over the (outer, N, inner) view.

Two kernels:

* ``_rows_kernel``: one [BR, BC] tile of (outer x K) index rows x inner columns per program.  Each row loads its
  index once, wraps it where the op wraps, and then SELECT copies input row -> output row, FILL stores the value
  into the input row, ADD atomically adds alpha * source row (float index_add; precision deterministic=False).
  The output of FILL / ADD starts as a copy of the input.
* ``_seg_kernel`` (deterministic; every index_reduce mode, index_copy, integer index_add and index_add under
  PlanPreference(require_deterministic=True)): the indices are normalized (out-of-range -> -1) and sorted stably
  with their positions, and every destination row's run [starts[n], starts[n + 1]) found once by a vectorized
  binary search (``_bounds_kernel``: N + 1 lanes in parallel, not per tile: a per-tile search is two chains of
  log2 K dependent loads in every program, latency that left the fold at a third of HBM bandwidth); each program
  owns [BR, BC] destination rows x columns and folds the source rows of each run in index order (f32 for half types,
  f64 for f64, int64 for integers): no atomics, the same bits every run; index_copy takes the run's last row (the
  CPU's "last wins").  The sort is torch.sort (stable) until baracuda's own sort lands.

Every offset is int64 (rows of 16M x 64 pass 2^31).  An index outside the op's range is never dereferenced: the
load address is clamped, the store masked, and a flag word (the workspace) keeps the largest offending index
(encoded 2|v| + sign + 1 by atomic max); the plan raises through ``_core/checks.py: flagged``.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.indexing_index import INDEX_DEFS, dim_geometry, index_error
from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.register import register_triton, simt_precision
from ..layout.move import bits, copy_into, scalar

_TILE_BYTES = 16384
_MODES = {"select": 0, "fill": 1, "add": 2}
_SEG = {"add": 0, "copy": 1, "prod": 2, "mean": 3, "amax": 4, "amin": 5}


@triton.jit
def flag_bad(flag_ptr, v, bad):
    """Keep the largest offending value (2|v| + (v < 0) + 1) in the flag word."""
    key = tl.where(bad, 2 * tl.abs(v) + (v < 0).to(tl.int64) + 1, 0)
    mx = tl.max(key, axis=0)
    if mx > 0:
        tl.atomic_max(flag_ptr, mx, sem="relaxed")


def decode_flag(v) -> int:
    a = int(v) - 1
    return -(a // 2) if a % 2 else a // 2


@triton.jit
def _tile(pid, rows, inner, n_cb, BR: tl.constexpr, BC: tl.constexpr):
    pid = pid.to(tl.int64)
    rb = pid // n_cb
    cb = pid - rb * n_cb
    r = rb * BR + tl.arange(0, BR).to(tl.int64)
    c = cb * BC + tl.arange(0, BC).to(tl.int64)
    return r, c, r < rows, c < inner


@fast_kernel
def _rows_kernel(out_ptr, x_ptr, idx_ptr, src_ptr, val_ptr, flag_ptr, rows, K, N, inner, n_cb, sidx,
                 sxo, sxn, sxi, sso, ssk, ssi, soo, son, soi,
                 MODE: tl.constexpr, WRAP: tl.constexpr, ALPHA: tl.constexpr, ACC: tl.constexpr,
                 BR: tl.constexpr, BC: tl.constexpr):
    r, c, rm, cm = _tile(tl.program_id(0), rows, inner, n_cb, BR, BC)
    o = r // K
    k = r - o * K
    i = tl.load(idx_ptr + k * sidx, mask=rm, other=0).to(tl.int64)
    if WRAP:
        i = tl.where(i < 0, i + N, i)
    ok = rm & (i >= 0) & (i < N)
    flag_bad(flag_ptr, tl.load(idx_ptr + k * sidx, mask=rm, other=0).to(tl.int64), rm & ~ok)
    i = tl.where(ok, i, 0)
    m = ok[:, None] & cm[None, :]
    c2 = c[None, :]
    if MODE == 0:
        v = tl.load(x_ptr + (o * sxo + i * sxn)[:, None] + c2 * sxi, mask=m, other=0)
        tl.store(out_ptr + (o * soo + k * son)[:, None] + c2 * soi, v, mask=rm[:, None] & cm[None, :])
    elif MODE == 1:
        v = tl.load(val_ptr)
        tl.store(out_ptr + (o * soo + i * son)[:, None] + c2 * soi,
                 tl.zeros([BR, BC], dtype=out_ptr.dtype.element_ty) + v, mask=m)
    else:
        v = tl.load(src_ptr + (o * sso + k * ssk)[:, None] + c2 * ssi, mask=m, other=0)
        if ALPHA:
            v = (v.to(ACC) * tl.load(val_ptr).to(ACC)).to(out_ptr.dtype.element_ty)
        red_add(out_ptr + (o * soo + i * son)[:, None] + c2 * soi, v, mask=m)


@fast_kernel
def _normalize_kernel(keys_ptr, idx_ptr, flag_ptr, K, N, sidx, WRAP: tl.constexpr, BLOCK: tl.constexpr):
    k = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    km = k < K
    v = tl.load(idx_ptr + k * sidx, mask=km, other=0).to(tl.int64)
    i = v
    if WRAP:
        i = tl.where(v < 0, v + N, v)
    ok = (i >= 0) & (i < N)
    flag_bad(flag_ptr, v, km & ~ok)
    tl.store(keys_ptr + k, tl.where(ok, i, -1), mask=km)


@triton.jit
def _lower_bound(keys_ptr, K, target, steps):
    """First position j in the sorted keys with keys[j] >= target (vectorized over target)."""
    lo = target * 0
    hi = lo + K
    s = 0
    while s < steps:
        s += 1
        act = lo < hi
        mid = (lo + hi) // 2
        kv = tl.load(keys_ptr + mid, mask=act, other=0)
        lo = tl.where(act & (kv < target), mid + 1, lo)
        hi = tl.where(act & (kv >= target), mid, hi)
    return lo


@fast_kernel
def _bounds_kernel(keys_ptr, starts_ptr, K, N, steps, BLOCK: tl.constexpr):
    """starts[n] = the first position of the sorted keys >= n, for n in [0, N] (row n's run ends at starts[n + 1];
    the -1 keys of out-of-range indices sort before every row)."""
    n = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    tl.store(starts_ptr + n, _lower_bound(keys_ptr, K, n, steps), mask=n <= N)


@fast_kernel
def _seg_kernel(out_ptr, x_ptr, starts_ptr, perm_ptr, src_ptr, val_ptr, rows, N, inner, n_cb,
                sxo, sxn, sxi, sso, ssk, ssi, soo, son, soi,
                MODE: tl.constexpr, SELF: tl.constexpr, ALPHA: tl.constexpr, ACC: tl.constexpr,
                INT: tl.constexpr, BOOL: tl.constexpr, BR: tl.constexpr, BC: tl.constexpr):
    r, c, rm, cm = _tile(tl.program_id(0), rows, inner, n_cb, BR, BC)
    o = r // N
    n = r - o * N
    # (starts[n] and starts[n + 1] as one [BR, 2] tile: two [BR] loads of them trip Triton 3.6's layout pass)
    two = tl.arange(0, 2)[None, :]
    b = tl.load(starts_ptr + n[:, None] + two, mask=rm[:, None], other=0)
    lo = tl.sum(tl.where(two == 0, b, 0), 1)
    cnt = tl.sum(tl.where(two == 0, -b, b), 1)
    m2 = rm[:, None] & cm[None, :]
    c2 = c[None, :]
    xv = tl.load(x_ptr + (o * sxo + n * sxn)[:, None] + c2 * sxi, mask=m2, other=0)
    alpha = tl.load(val_ptr).to(ACC)
    if SELF:
        acc = xv.to(ACC)
        t = 0
    else:                                     # the run's first source row starts the fold
        k0 = tl.load(perm_ptr + lo, mask=cnt > 0, other=0)
        acc = tl.load(src_ptr + (o * sso + k0 * ssk)[:, None] + c2 * ssi, mask=m2 & (cnt > 0)[:, None],
                      other=0).to(ACC)
        t = 1
    top = tl.max(cnt, axis=0)
    while t < top:
        act = t < cnt
        kk = tl.load(perm_ptr + lo + t, mask=act, other=0)
        v = tl.load(src_ptr + (o * sso + kk * ssk)[:, None] + c2 * ssi, mask=m2 & act[:, None], other=0).to(ACC)
        a2 = act[:, None]
        if MODE == 0:
            if ALPHA:
                v = v * alpha
            acc = tl.where(a2, acc + v, acc)
        elif MODE == 1:
            acc = tl.where(a2, v, acc)
        elif MODE == 2:
            acc = tl.where(a2, acc * v, acc)
        elif MODE == 3:
            acc = tl.where(a2, acc + v, acc)
        elif MODE == 4:
            acc = tl.where(a2 & ((v > acc) | (v != v)), v, acc)
        else:
            acc = tl.where(a2 & ((v < acc) | (v != v)), v, acc)
        t += 1
    if MODE == 3:
        den = (cnt + SELF)[:, None]
        if INT:
            q = acc // den
            acc = q - ((q * den != acc) & (acc < 0)).to(ACC)
        else:
            acc = acc / den.to(ACC)
    if BOOL:                                  # (bools are bytes here: a sum is True when non-zero)
        acc = (acc != 0).to(ACC)
    res = tl.where((cnt > 0)[:, None], acc.to(out_ptr.dtype.element_ty), xv)
    tl.store(out_ptr + (o * soo + n * son)[:, None] + c2 * soi, res, mask=m2)


# -- host side ------------------------------------------------------------------------------------------
def _acc(dt):
    if dt == torch.float64:
        return tl.float64
    if dt.is_floating_point:
        return tl.float32
    return tl.int64


def _tiles(inner, rows, size):
    bc = min(next_power_of_2(max(inner, 1)), max(16, _TILE_BYTES // size // 8))
    br = max(1, min(_TILE_BYTES // size // bc, next_power_of_2(max(rows, 1)), 64))
    return br, bc


def _v3(t, shape3):
    """(t as an (outer, N, inner) view, its 3 strides); a copy when the dims do not merge."""
    v = t.reshape(shape3) if t.numel() else t.new_empty(shape3)
    return v, v.stride()


def _kind(desc):
    if desc.op == "index_select":
        return "select"
    if desc.op == "index_fill":
        return "fill"
    if desc.op == "index_add":
        return "add"
    return "seg"


def _deterministic(desc, pref) -> bool:
    """index_add of f64 / f32 / f16 runs the atomic kernel unless determinism is required; everything else is
    ordered (bf16 too: bf16 atomics would round every partial sum to 8 bits, the fold adds in f32 and rounds once)."""
    if desc.op == "index_put" and not desc.attr("accumulate"):
        return True
    if desc.op not in ("index_add", "index_put") or desc.dtype not in (DType.f64, DType.f32, DType.f16):
        return True
    return pref is not None and pref.require_deterministic


def _precision(desc, pref=None) -> PrecisionGuarantee:
    if _deterministic(desc, pref):
        return simt_precision(desc, pref)
    math_ = MathPrecision.F64 if desc.dtype == DType.f64 else MathPrecision.F32
    return PrecisionGuarantee(math_, desc.dtype if desc.dtype == DType.f64 else DType.f32, False, False)


def _bind(desc, pref):
    op = desc.op
    d_ = INDEX_DEFS[op]
    outer, n, inner = dim_geometry(desc.inputs[0].shape, desc.attr("dim"))
    k = desc.inputs[1].numel
    kind = _kind(desc)
    if kind == "seg" or (kind == "add" and _deterministic(desc, pref)):
        kind = "seg:" + (desc.attr("reduce") if op == "index_reduce" else "copy" if op == "index_copy" else "add")
    alpha = desc.attr("alpha") if op == "index_add" else 1
    incl = desc.attr("include_self") if op == "index_reduce" else True

    def run(desc_, inputs, outputs, ws):
        x, index, out = inputs[0], inputs[1], outputs[0]
        flag = ws.view(torch.int64)[:1]
        flag.zero_()
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if kind == "select":       # (no scalar operand: two fill launches less per call)
            val = None
        elif len(inputs) == 3 and op == "index_fill":    # a 0-d tensor value, converted on the device
            val = inputs[2].reshape(1).to(res.dtype)
        else:
            val = scalar(desc.attr("value") if op == "index_fill" else alpha, res)
        src = inputs[2] if d_.source else None
        apply_rows(kind, res, x, index.reshape(-1), src, val, flag, (outer, n, inner), k, d_.wrap, alpha != 1, incl)
        if res is not out:
            copy_into(out, res)
        if k:
            flagged(flag, pref, lambda v: index_error(op, "index", decode_flag(v), n, d_.wrap))

    return run


def apply_rows(kind, res, x, idx, src, val, flag, geom, k, wrap, alpha, incl=True):
    """The row kernels on (outer, N, inner) views: kind 'select' (res is (outer, K, inner)), 'fill', 'add'
    (atomic) or 'seg:<add|copy|prod|mean|amax|amin>' (sorted segments) writing res (outer, N, inner) from x, the
    K indices ``idx`` (1-D, any stride), the (outer, K, inner) ``src`` and the 1-element ``val`` (fill value or
    alpha); out-of-range indices set ``flag``.  index_put and advanced_index reuse it on (1, P, rest)."""
    outer, n, inner = geom
    if res.numel() == 0 and k == 0:
        return
    sidx = idx.stride(0) if idx.numel() else 1
    x3, sx = _v3(x, (outer, n, inner))
    if kind == "select":
        o3, so = _v3(res, (outer, k, inner))
    else:
        o3, so = _v3(res, (outer, n, inner))
    src3, ss = _v3(src, (outer, k, inner)) if src is not None else (x3, (0, 0, 0))
    acc = _acc(res.dtype)
    if kind.startswith("seg:"):
        _run_seg(o3, so, x3, sx, src3, ss, idx, sidx, flag, val, acc, outer, n, k, inner, _SEG[kind[4:]], wrap,
                 incl, alpha)
    elif outer * k * inner:
        if kind != "select":
            copy_into(o3, x3)
        rows = outer * k
        br, bc = _tiles(inner, rows, res.element_size())
        n_cb = cdiv(inner, bc)
        movable = kind != "add"
        ob, xb = (bits(o3), bits(x3)) if movable else (o3, x3)
        vb = ob if val is None else bits(val) if movable else val     # (select never reads it)
        _rows_kernel[(cdiv(rows, br) * n_cb,)](ob, xb, idx, src3, vb, flag, rows, k, n, inner, n_cb, sidx,
                                               *sx, *ss, *so, MODE=_MODES[kind], WRAP=wrap,
                                               ALPHA=alpha, ACC=acc, BR=br, BC=bc, num_warps=4)
    elif kind != "select":
        copy_into(o3, x3)


def _run_seg(o3, so, x3, sx, src3, ss, idx, sidx, flag, val, acc, outer, n, k, inner, mode, wrap, incl, alpha):
    if outer * n * inner == 0:
        return
    keys = torch.empty(max(k, 1), dtype=torch.int64, device=x3.device)
    if k:
        _normalize_kernel[(cdiv(k, 1024),)](keys, idx, flag, k, n, sidx, WRAP=wrap, BLOCK=1024, num_warps=4)
    keys, perm = torch.sort(keys[:k], stable=True)
    if not k:
        keys, perm = torch.full((1,), -1, dtype=torch.int64, device=x3.device), torch.zeros(1, dtype=torch.int64, device=x3.device)
    starts = torch.empty(n + 1, dtype=torch.int64, device=x3.device)
    _bounds_kernel[(cdiv(n + 1, 1024),)](keys, starts, k, n, max(1, (k + 1).bit_length()), BLOCK=1024, num_warps=4)
    rows = outer * n
    br, bc = _tiles(inner, rows, 8 if acc in (tl.float64, tl.int64) else 4)
    n_cb = cdiv(inner, bc)
    is_bool = o3.dtype == torch.bool
    if is_bool:   # (bools move as bytes)
        o3, x3, src3, val = bits(o3), bits(x3), bits(src3), bits(val)
    _seg_kernel[(cdiv(rows, br) * n_cb,)](o3, x3, starts, perm, src3, val, rows, n, inner, n_cb,
                                          *sx, *ss, *so, MODE=mode, SELF=incl,
                                          ALPHA=alpha, ACC=acc, INT=acc == tl.int64, BOOL=is_bool, BR=br, BC=bc, num_warps=4)


def _run(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


def _route(desc, pref):
    if desc.op == "index_add" and not _deterministic(desc, pref):
        return "triton:index_add:atomic"
    return f"triton:{desc.op}:" + ("rows" if desc.op in ("index_select", "index_fill") else "sorted-segments")


for _op in ("index_select", "index_fill", "index_add", "index_copy", "index_reduce"):
    register_triton(_op, _run, route=_route, workspace=lambda d: 8, bind=_bind, precision=_precision)
