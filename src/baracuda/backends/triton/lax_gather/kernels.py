"""One kernel for lax_gather and every lax_scatter combiner: each element of the "space" (gather: the output;
scatter: the updates) is mapped to its operand offset.

Geometry (host: ``space_geometry``): over the space's dims, three stride vectors -- the value operand's (the output
or the updates), the indices' (their batch dims; 0 on the window dims) and the operand's (the window dims, and the
batch dims that are batching dims: their coordinate is the operand's coordinate there; 0 on the other batch dims).
The dims are collapsed where all three allow it (``_lib.strided.padded``) to six; a program owns a [BR, BC] tile
of rows (dims 0..4: one unravel per ROW) by columns (the last dim: one multiply per element).  The index vector's
K <= 6 components (K constexpr, unrolled) come with scalar arguments S0..S5 (the operand stride of each: kernel
arguments, so Triton sees their divisibility by 16 and a row gather's addresses stay 16-byte vectorizable) and
H0..H5 (the last in-bounds start): each index is loaded, clamped to [0, hi] (CLIP) or checked against it (fill:
the whole window is filled / dropped when one component is out), and adds ``j * stride``.  When the indices do not move along the columns
(ROW_INDEX: a window dim is the last dim, as in a row gather), the K loads are per row, and the row's operand
addresses stay contiguous: a gather of 4096-wide bf16 rows costs one index load per row, one data load and one
store per element.

Out-of-bounds windows are never dereferenced: the address is zeroed and the access masked (fill mode) or the
start clamped (clip mode); these ops have no out-of-range error (JAX defines the result), so there is no flag.

MODE: 0 gather (stores the fill value at filled windows); 1 replace (plain stores: duplicates race, last store
wins); 2 add (tl.atomic_add into an f32 / f64 / int64 accumulator); 3 / 4 / 5 mul / min / max as
compare-and-swap loops on the accumulator's bits (Triton has no atomic multiply; the loop also gives min / max
XLA's NaN propagation, which an integer-punned atomic max would not).
"""
from __future__ import annotations

import triton
import triton.language as tl

from .._lib.atomics import red_add
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.launch import fast_kernel
from .._lib.strided import padded, span, strided_offset, tile_rows_cols
from ..indexing.kernels import cas_combine

__all__ = ["GATHER", "REPLACE", "ADD", "MUL", "MIN", "MAX", "MAX_K", "space_geometry", "launch_lax_map"]

GATHER, REPLACE, ADD, MUL, MIN, MAX = range(6)
_LIMIT = 2 ** 31 - 2 ** 16      # offsets at or above this use int64 (a tile's overshoot stays in range)
MAX_K = 6                       # index-vector components a launch takes (scalar arguments S0..S5, H0..H5)
_TILE = 4096                    # elements per program (BR * BC) of a row-indexed tile


@triton.jit
def _pick(k: tl.constexpr, a0, a1, a2, a3, a4, a5):
    """The k-th of six scalar arguments (k constexpr: the unrolled index-vector loop)."""
    if k == 0:
        return a0
    elif k == 1:
        return a1
    elif k == 2:
        return a2
    elif k == 3:
        return a3
    elif k == 4:
        return a4
    else:
        return a5


@fast_kernel
def _lax_map(val_ptr, idx_ptr, opd_ptr, fill_ptr, typed_ptr, n_rows, L, n_cb, IK, dummy,
             D0, D1, D2, D3, D4, V0, V1, V2, V3, V4, VL, I0, I1, I2, I3, I4, IL, O0, O1, O2, O3, O4, OL,
             S0, S1, S2, S3, S4, S5, H0, H1, H2, H3, H4, H5,
             K: tl.constexpr, MODE: tl.constexpr, CLIP: tl.constexpr, I64: tl.constexpr, IS_FLOAT: tl.constexpr,
             BR: tl.constexpr, BC: tl.constexpr, ROW_INDEX: tl.constexpr):
    """One [BR, BC] tile of the space; see the module doc.  val_ptr: the output (gather) or the updates;
    opd_ptr: the operand (gather), the result / accumulator (scatter; its bits for the CAS modes, typed_ptr
    then the same words typed)."""
    r, c = tile_rows_cols(n_cb, I64, BR, BC)
    rm = r < n_rows
    m = rm[:, None] & (c < L)[None, :]
    vo = strided_offset(r, D0, D1, D2, D3, D4, 0, V0, V1, V2, V3, V4)[:, None] + (c * VL)[None, :]
    oo = strided_offset(r, D0, D1, D2, D3, D4, 0, O0, O1, O2, O3, O4)[:, None] + (c * OL)[None, :]
    io = strided_offset(r, D0, D1, D2, D3, D4, 0, I0, I1, I2, I3, I4)
    ok = m
    for k in tl.static_range(K):
        st = _pick(k, S0, S1, S2, S3, S4, S5)
        hi = _pick(k, H0, H1, H2, H3, H4, H5)
        if ROW_INDEX:
            j = tl.load(idx_ptr + io + k * IK, mask=rm, other=0).to(tl.int64)[:, None]
        else:
            j = tl.load(idx_ptr + io[:, None] + (c * IL)[None, :] + k * IK, mask=m, other=0).to(tl.int64)
        if CLIP:
            j = tl.minimum(tl.maximum(j, 0), hi)
        else:
            ok = ok & (j >= 0) & (j <= hi)
        if I64:
            oo = oo + j * st
        else:
            oo = oo + j.to(tl.int32) * st
    if not CLIP:
        oo = tl.where(ok, oo, 0)
    if MODE == 0:
        v = tl.load(opd_ptr + oo, mask=ok, other=0)
        if not CLIP:
            v = tl.where(ok, v, tl.load(fill_ptr))
        tl.store(val_ptr + vo, v, mask=m)
    elif MODE == 1:
        tl.store(opd_ptr + oo, tl.load(val_ptr + vo, mask=ok), mask=ok)
    elif MODE == 2:
        v = tl.load(val_ptr + vo, mask=ok, other=0).to(opd_ptr.dtype.element_ty)
        red_add(opd_ptr + oo, v, mask=ok)
    else:
        # MODE 3 / 4 / 5: product / min / max by compare-and-swap on the result's bits (indexing's cas_combine)
        v = tl.load(val_ptr + vo, mask=ok, other=0).to(typed_ptr.dtype.element_ty)
        cas_combine(opd_ptr, typed_ptr, oo, v, ok, dummy, 0 if MODE == 3 else (1 if MODE == 5 else 2), IS_FLOAT)


def space_geometry(im, val_strides, idx_strides, opd_strides):
    """(dims, [value, index, operand] strides) of the space ``im.space`` collapsed and padded to six, or None
    when more than six dims remain (``im``: ``ops.lax_gather.IndexMap``; strides of the value tensor over the
    space, of the indices, of the operand / target)."""
    r = len(im.space)
    ist, ost = [0] * r, [0] * r
    batching = dict((idim, od) for od, idim in im.batching)
    for k, d in enumerate(im.batch_dims):
        ist[d] = idx_strides[k]
        if k in batching:
            ost[d] = opd_strides[batching[k]]
    for d, od in zip(im.window_dims, im.window_operand):
        ost[d] = opd_strides[od]
    return padded(im.space, [list(val_strides), ist, ost])


def launch_lax_map(mode, im, val, idx, opd, *, fill=None, typed=None, dummy=0, is_float=False):
    """Launch ``_lax_map`` over the space of ``im``: ``val`` the output / updates (a same-width view), ``idx``
    the indices, ``opd`` the operand / target (a view of the operand's shape: its strides address the index
    vector's components, each clamped / checked against the operand dim minus the window)."""
    n = 1
    for s in im.space:
        n *= s
    if n == 0:
        return
    geo = space_geometry(im, val.stride(), idx.stride()[:-1], opd.stride())
    if geo is None:
        raise ValueError("more than six non-mergeable space dims (the plan's supports() refuses these)")
    dims, (vst, ist, ost) = geo
    L = dims[-1]
    rows = n // L
    K = len(im.index_map)
    row_index = ist[-1] == 0 and L > 1
    # a per-element index tile holds int64 indices and three offset vectors: 1024 elements keep the registers
    # near indexing/kernels.py's measured 60 per thread; a row-indexed gather needs 48 at 4096 (sm_90 offline
    # compile), a row-indexed atomic add 120 at 4096 (a 64-bit address per element): the scatters take 1024
    tile = _TILE if (row_index or K == 0) and mode == GATHER else _TILE // 4
    bc = min(next_power_of_2(L), 1024)
    br = max(1, min(tile // bc, next_power_of_2(rows)))
    n_cb = cdiv(L, bc)
    spans = [span(val), span(idx), span(opd)]
    i64 = max(spans + [n + _TILE]) >= _LIMIT
    ik = idx.stride(-1) if idx.dim() else 0
    if K > MAX_K:
        raise ValueError(f"an index vector of {K} components (at most {MAX_K}: the plan's supports() says so)")
    pad = [0] * (MAX_K - K)
    sts = [opd.stride(od) for od in im.index_map] + pad
    his = [opd.shape[od] - im.window[od] for od in im.index_map] + pad
    _lax_map[(cdiv(rows, br) * n_cb,)](
        val, idx, opd, fill if fill is not None else val, typed if typed is not None else opd, rows, L, n_cb,
        ik, dummy, *dims[:5], *vst, *ist, *ost, *sts, *his, K=K, MODE=mode, CLIP=im.clip, I64=i64,
        IS_FLOAT=is_float, BR=br, BC=bc, ROW_INDEX=row_index, num_warps=4)
