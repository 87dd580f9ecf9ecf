"""Triton data-movement kernels shared by the layout family: an index-mapped copy ``move()`` that picks one
of three kernels (tiled rows, tiled transpose, per-element gather), a dtype-converting variant of each
(cat/stack promotion), and fill.

Every layout op is described to ``move()`` as a per-output-dim index map: output element (i0..i5) reads
input offset ``base + sum_d T_d * b(i_d // V_d + O_d)`` (``b``: MODE 0 none, 1 constant fill, 2 reflect,
3 replicate, 4 circular).  Tensors are reinterpreted as same-width integers (bf16 -> int16, f64 -> int64,
bool -> uint8), so one compiled kernel per element width serves every dtype bit-exactly (NaN payloads,
-0.0); only a converting copy (cat/stack of mixed dtypes, which promote like torch) passes typed pointers
and converts in registers (``.to`` = round to nearest even, as torch's copy_).

Kernels, all with int64 offsets when any address can pass 2^31 elements:

* ``_tile_kernel`` (rows): a [BR, BC] tile of output rows x columns of the last output dim.  The six
  div/mods that map an index to an offset run once per ROW (BR of them) and once per COLUMN (BC), never per
  element; each element costs one add.  Columns: COL_ID 1 identity, 2 a shifted run with bounds masks
  (constant padding/cropping of the last dim: no clamp, the addresses stay contiguous), 0 the general map
  (flip/repeat/reflect of the last dim: scalar but still coalesced loads, ~60-80% of copy bandwidth
  expected).  When the last dim is an identity map on an input dim of stride 1
  (pad/repeat/tile/flip/roll/slice along non-last dims, permutes that keep the last axis, cat, stack) the
  columns are contiguous in both tensors, and the host passes VEC = 16 B / itemsize as a divisibility hint
  when every row offset is a multiple of it: 16-byte vector loads and stores, full 128-byte lines.  Each
  program moves 16 KiB in and 16 KiB out (BR * BC = 16 KiB / itemsize: 8 x 16-byte vectors per thread at
  4 warps, ~32 data registers), several programs are resident per SM, i.e. >100 KiB of loads in flight per
  SM, well above the ~30 KiB/SM that Little's law asks for at 3.35 TB/s (H100) and ~1 us latency.  Expected:
  ~85-90% of copy bandwidth (~2.8 TB/s H100, ~4 TB/s H200, read+write), versus 5-40% for the gather below.
* ``_transpose_kernel``: a pure strided copy whose last output dim is NOT contiguous in the input but
  another output dim P is (|stride| 1): e.g. permute(0, 2, 1) / transpose(-1, -2) / rot90 of the last two
  dims.  A [BP, BL] tile is loaded with pointers contiguous along P (coalesced, 16-byte vectors when the
  strides allow) and stored with pointers contiguous along L; Triton's coalescing pass gives the load and
  the store their own blocked layouts and converts between them through shared memory (the tile: 16 KiB).
  BP and BL are >= 128 bytes so both sides touch whole lines: reads and writes are both fully coalesced,
  expected ~80-90% of copy bandwidth (the shared-memory round trip is not the limit at 16 KiB/tile).
* ``_gather_kernel``: the general per-element gather (any of the above, plus small last dims), ~6 integer
  div/mod per element: the fallback, and the only path for last dims shorter than 16 elements in the
  non-transposable cases.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from .._lib.config import overrides
from .._lib.strided import RANK, collapse, span, tile_rows_cols, unravel
from .._lib.launch import bind_kernel, fast_kernel
from .._lib.geometry import cdiv, next_power_of_2

_FORCE, forced = overrides("Force layout-copy choices in tests: i64=True (int64 offsets on small tensors), "
                           "path='gather' (the per-element fallback instead of the tiled kernels).")

_BLOCK = 2048
_FILL_BLOCK = 4096
_TILE_BYTES = 16384          # per program, each direction (see the module docstring)
_INT_OF_SIZE = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
MODES = {"none": 0, "constant": 1, "reflect": 2, "replicate": 3, "circular": 4}
_LIMIT = 2 ** 31 - 2 ** 16   # offsets at or above this use int64 (keeps a tile's overshoot in range)


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
def _cvt(v, out_ptr, VIA_F32: tl.constexpr):
    """v in the output's element type; integers/bool into f16/bf16 go through f32 like torch's
    (c10::Half/BFloat16 are constructed from float).  A no-op for the bit copies (same integer type)."""
    if VIA_F32:
        v = v.to(tl.float32)
    return v.to(out_ptr.dtype.element_ty)


@fast_kernel
def _gather_kernel(out_ptr, src_ptr, fill_ptr, n, base, diag,
                   S1, S2, S3, S4, S5, D0, D1, D2, D3, D4, D5,
                   N0, N1, N2, N3, N4, N5, T0, T1, T2, T3, T4, T5,
                   O0, O1, O2, O3, O4, O5, V0, V1, V2, V3, V4, V5,
                   MODE: tl.constexpr, TRI: tl.constexpr, I64: tl.constexpr, BLOCK: tl.constexpr,
                   VIA_F32: tl.constexpr = False):
    pid = tl.program_id(0)
    if I64:
        offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    else:
        offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    i0, i1, i2, i3, i4, i5 = unravel(offs, S1, S2, S3, S4, S5)
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
    tl.store(out_ptr + dst, _cvt(v, out_ptr, VIA_F32), mask=mask)


@fast_kernel
def _tile_kernel(out_ptr, src_ptr, fill_ptr, n_rows, L, n_cb, base, diag,
                 S1, S2, S3, S4, D0, D1, D2, D3, D4, DL,
                 N0, N1, N2, N3, N4, NL, T0, T1, T2, T3, T4, TL,
                 O0, O1, O2, O3, O4, OL, V0, V1, V2, V3, V4, VL,
                 MODE: tl.constexpr, COL_MODE: tl.constexpr, COL_ID: tl.constexpr, OUT_ROWS: tl.constexpr,
                 TRI: tl.constexpr, I64: tl.constexpr, VEC_IN: tl.constexpr, VEC_OUT: tl.constexpr,
                 BR: tl.constexpr, BC: tl.constexpr, VIA_F32: tl.constexpr = False):
    """Output rows (dims 0..4 of the output, row-major) x columns (the last output dim), one [BR, BC] tile
    per program; grid = row blocks * column blocks (1-D: no 65535 limit)."""
    r, c = tile_rows_cols(n_cb, I64, BR, BC)
    rmask = r < n_rows
    cmask = c < L
    # per-row part: 4 div/mod + the boundary map of 5 dims, amortized over BC columns
    i4 = r % S4
    q = r // S4
    i3 = q % S3
    q = q // S3
    i2 = q % S2
    q = q // S2
    i1 = q % S1
    i0 = q // S1
    rok = rmask
    s0, rok = _dim(i0, N0, T0, O0, V0, rok, MODE)
    s1, rok = _dim(i1, N1, T1, O1, V1, rok, MODE)
    s2, rok = _dim(i2, N2, T2, O2, V2, rok, MODE)
    s3, rok = _dim(i3, N3, T3, O3, V3, rok, MODE)
    s4, rok = _dim(i4, N4, T4, O4, V4, rok, MODE)
    srow = base + s0 + s1 + s2 + s3 + s4
    if VEC_IN > 1:
        srow = tl.multiple_of(srow, VEC_IN)
    # per-column part: identity (contiguous: vectorizable) or the last dim's own map
    if COL_ID == 1:
        scol = c
        cok = cmask
    elif COL_ID == 2:    # constant padding / cropping of the last dim: a shifted run, masked (no clamp, so the
        j = c + OL       # addresses stay contiguous and Triton can still vectorize when the shift is aligned)
        scol = j
        cok = cmask & (j >= 0) & (j < NL)
    else:
        scol, cok = _dim(c, NL, TL, OL, VL, cmask, COL_MODE)
    ok = rok[:, None] & cok[None, :]
    if TRI == 1:
        ok = ok & (c[None, :] - i4[:, None] >= diag)
    elif TRI == 2:
        ok = ok & (c[None, :] - i4[:, None] <= diag)
    v = tl.load(src_ptr + (srow[:, None] + scol[None, :]), mask=ok)
    if MODE == 1 or COL_MODE == 1 or TRI > 0:
        v = tl.where(ok, v, tl.load(fill_ptr))
    if OUT_ROWS:      # contiguous output: row r starts at r * L
        drow = r * L
        dcol = c
    else:
        drow = i0 * D0 + i1 * D1 + i2 * D2 + i3 * D3 + i4 * D4
        dcol = c * DL
    if VEC_OUT > 1:
        drow = tl.multiple_of(drow, VEC_OUT)
    tl.store(out_ptr + (drow[:, None] + dcol[None, :]), _cvt(v, out_ptr, VIA_F32),
             mask=rmask[:, None] & cmask[None, :])


@fast_kernel
def _transpose_kernel(out_ptr, src_ptr, P, L, n_pb, n_lb, base, TP, TL, DP, DL,
                      S1, S2, S3, T0, T1, T2, T3, D0, D1, D2, D3,
                      I64: tl.constexpr, BP: tl.constexpr, BL: tl.constexpr, VIA_F32: tl.constexpr = False):
    """out[b, p, l] = src[b, p, l] where p is contiguous in src (|TP| = 1) and l in out (DL = 1 in the common
    case); b = up to 4 batch dims.  Grid: batch * P blocks * L blocks, L blocks fastest (neighbouring programs
    read neighbouring columns of the same source rows: L2 reuse of partially used lines)."""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    lb = pid % n_lb
    q = pid // n_lb
    pb = q % n_pb
    b = q // n_pb
    b3 = b % S3
    b = b // S3
    b2 = b % S2
    b = b // S2
    b1 = b % S1
    b0 = b // S1
    sbase = base + b0 * T0 + b1 * T1 + b2 * T2 + b3 * T3
    dbase = b0 * D0 + b1 * D1 + b2 * D2 + b3 * D3
    p = pb * BP + tl.arange(0, BP)
    l_ = lb * BL + tl.arange(0, BL)
    if I64:
        p = p.to(tl.int64)
        l_ = l_.to(tl.int64)
    m = (p < P)[:, None] & (l_ < L)[None, :]
    v = tl.load(src_ptr + (sbase + p[:, None] * TP + l_[None, :] * TL), mask=m)
    tl.store(out_ptr + (dbase + p[:, None] * DP + l_[None, :] * DL), _cvt(v, out_ptr, VIA_F32), mask=m)


@fast_kernel
def _fill_kernel(out_ptr, fill_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK).to(tl.int64)
    v = tl.load(fill_ptr)
    tl.store(out_ptr + offs, tl.zeros([BLOCK], dtype=out_ptr.dtype.element_ty) + v, mask=offs < n)


# -- host side ------------------------------------------------------------------------------------------
def scalar(value, like):
    """value as a 1-element device tensor of like's dtype (float -> int truncates, as NumPy and torch casts).

    Made on the device by fill kernels, never by a host-to-device copy: a pageable H2D copy blocks the host
    until the stream drains (the GPU then idles while Python prepares the next launch; the cat of two KV
    blocks measured 46% of copy bandwidth that way) and cannot be captured in a CUDA graph."""
    if isinstance(value, (int, bool)) and not like.dtype.is_floating_point and not like.dtype.is_complex \
            and like.dtype != torch.bool:
        info = torch.iinfo(like.dtype)
        if info.min <= int(value) <= info.max:     # exact, also for int64 beyond 2^53
            return torch.full((1,), int(value), dtype=like.dtype, device=like.device)
    return torch.full((1,), float(value), dtype=torch.float64, device=like.device).to(like.dtype)


def _views(out, x):
    """Pointers for the kernels: integer views of the same width (bit copies), typed when converting."""
    if out.dtype == x.dtype:
        return bits(out), bits(x)
    return out, x


def _vec(itemsize, values):
    """Largest power-of-two element count v <= 16 bytes dividing every value (a divisibility hint)."""
    v = max(1, 16 // itemsize)
    while v > 1 and any(int(a) % v for a in values):
        v //= 2
    return v


def _col_block(L, cap):
    """Largest power-of-two column block <= cap whose tail wastes at most 1/8 of a row."""
    c = min(cap, next_power_of_2(L))
    while c > 16 and cdiv(L, c) * c - L > L // 8:
        c //= 2
    return c


# plain copies (no fill, no triangle) already decided: (shapes, strides, dtypes, map) -> go(out, x).  A layout op
# relaunches the same copies call after call (a cat's pieces, a slice's backward), and deciding one costs more host
# time than the launch itself (collapse, spans, tile sizes: ~30-60 us of Python on the H100 host); the bound launch
# passes the tensors' addresses to the compiled kernel with everything else fixed.
_DECIDED: dict = {}


def move(out, x, dims, base=0, mode="none", fill=None, tri=0, diag=0):
    """out (any strides)[i...] = x[b(i_d // V_d + O_d)...], dims = [(N_d, T_d, O_d, V_d)] per output dim."""
    n = out.numel()
    if n == 0:
        return
    dims = [tuple(d) for d in dims]
    key = None
    if mode == "none" and not tri and not _FORCE:
        key = (out.shape, out.stride(), x.shape, x.stride(), out.dtype, x.dtype, tuple(dims), base)
        go = _DECIDED.get(key)
        if go is not None:
            return go(out, x)
    go = _decide(out, x, n, dims, base, mode, fill, tri, diag)
    if key is not None:
        if len(_DECIDED) >= 4096:
            _DECIDED.clear()
        _DECIDED[key] = go
    go(out, x)


def _bound(kernel, grid, tail, kw, n_ptr=3):
    """go(out, x) for ``kernel[grid](ob, xb[, fill=ob], *tail, **kw)`` relaunched with only the pointers new."""
    b = bind_kernel(kernel.jit, grid, tail, **kw)
    if n_ptr == 3:
        def go(out, x):
            ob, xb = _views(out, x)
            b(ob, xb, ob)
    else:
        def go(out, x):
            b(*_views(out, x))
    return go


def _decide(out, x, n, dims, base, mode, fill, tri, diag):
    """How ``move`` copies: ``go(out, x)`` (a launch with every size, stride and constexpr fixed)."""
    shape, dst_st = list(out.shape), list(out.stride())
    if len(shape) > RANK:
        raise AssertionError("layout move: rank > 6 reaches the kernel (supports() should refuse)")
    ob, xb = _views(out, x)
    if mode == "constant" or tri:
        fill_t = scalar(0 if fill is None else fill, out)
        fill_b = bits(fill_t) if ob.dtype != out.dtype else fill_t
    else:
        fill_b = None    # (ob is passed: never read, the kernels load the fill only for constant padding / triangles)
    reach = max(span(out), span(x) + abs(base), n) + max([abs(d[2] * d[1]) for d in dims] + [0])
    # (int64 offsets, convert through f32): the kernels' two host-decided flags
    i64 = (reach >= _LIMIT or _FORCE.get("i64", False),
           out.dtype in (torch.float16, torch.bfloat16) and x.dtype != out.dtype)
    pure = mode == "none" and tri == 0 and all(d[2] == 0 and d[3] == 1 for d in dims)
    if _FORCE.get("path") == "gather":
        return _gather(fill_b, n, shape, dst_st, dims, base, mode, tri, diag, i64)
    if pure:
        # merge dims that are contiguous in both (a permute of [8,4096,32,128] by (0,2,1,3) becomes 4-d rows
        # of 128; a full transpose of a contiguous 3-d tensor becomes [B, M, N] -> [B, N, M])
        sizes, (dst_st, src_st) = collapse(tuple(shape), [dst_st, [d[1] for d in dims]])
        shape, dims = sizes, [(s, t, 0, 1) for s, t in zip(sizes, src_st)]
        if len(shape) == 1 and dims[0][1] == 1 and dst_st[0] == 1 and base == 0 and out.dtype == x.dtype:
            # both dense in the same order (a contiguous input of contiguous/permute-of-identity, a
            # contiguous cat piece): one device memcpy
            def go(out, x):
                ob, xb = _views(out, x)
                ob.as_strided((n,), (1,), ob.storage_offset()).copy_(xb.as_strided((n,), (1,),
                                                                                   xb.storage_offset()))
            return go
        go = _try_transpose(ob, shape, dst_st, dims, base, i64)
        if go is not None:
            return go
        w = _TILE_BYTES // ob.element_size()
        if len(shape) < RANK and shape[-1] >= 2 * w and shape[-1] % w == 0:
            # one long run (a 1-D flip, a dense copy): split it into rows of w so each program gets a full tile
            k, t, dl = shape[-1] // w, dims[-1][1], dst_st[-1]
            shape = shape[:-1] + [k, w]
            dims = dims[:-1] + [(k, t * w, 0, 1), (w, t, 0, 1)]
            dst_st = dst_st[:-1] + [dl * w, dl]
    if mode == "circular" and tri == 0 and dims and len(shape) < RANK and dims[-1][2] == 0 and dims[-1][3] == 1 \
            and shape[-1] > dims[-1][0] >= 16 and shape[-1] % dims[-1][0] == 0:
        # repeat/tile of the last dim: output columns (k, N) read input column b for every k, so the last dim
        # becomes an identity map (contiguous, vectorizable) and the k copies a row dim with stride 0
        nl, t, _, _ = dims[-1]
        k, dl = shape[-1] // nl, dst_st[-1]
        shape = list(shape[:-1]) + [k, nl]
        dims = list(dims[:-1]) + [(k, 0, 0, 1), (nl, t, 0, 1)]
        dst_st = list(dst_st[:-1]) + [dl * nl, dl]
    if shape and shape[-1] >= 16:
        return _tile(ob, fill_b, shape, dst_st, dims, base, mode, tri, diag, i64, out.is_contiguous())
    return _gather(fill_b, n, shape, dst_st, dims, base, mode, tri, diag, i64)


def _launch(kernel, grid, tail, kw, fill_b):
    """go(out, x) for a launch with the fill tensor ``fill_b`` (a constant pad's value, or ob: never read)."""
    if fill_b is None:
        return _bound(kernel, grid, tail, kw)

    def go(out, x):
        ob, xb = _views(out, x)
        kernel[grid](ob, xb, fill_b, *tail, **kw)
    return go


def _gather(fill_b, n, shape, dst_st, dims, base, mode, tri, diag, i64):
    pad = RANK - len(shape)
    shape = [1] * pad + list(shape)
    dst_st = [0] * pad + list(dst_st)
    dims = [(1, 0, 0, 1)] * pad + list(dims)
    N, T, O, V = (list(c) for c in zip(*dims))
    return _launch(_gather_kernel, (cdiv(n, _BLOCK),), (n, base, diag, *shape[1:], *dst_st, *N, *T, *O, *V),
                   dict(MODE=MODES[mode], TRI=tri, I64=i64[0], VIA_F32=i64[1], BLOCK=_BLOCK, num_warps=4), fill_b)


def _tile(ob, fill_b, shape, dst_st, dims, base, mode, tri, diag, i64, out_contig):
    pad = RANK - len(shape)
    shape = [1] * pad + list(shape)
    dst_st = [0] * pad + list(dst_st)
    dims = [(1, 0, 0, 1)] * pad + list(dims)
    N, T, O, V = (list(c) for c in zip(*dims))
    L = shape[-1]
    n_rows = math.prod(shape[:-1])
    col_id = T[-1] == 1 and O[-1] == 0 and V[-1] == 1 and N[-1] == L   # columns contiguous in the source
    shifted = T[-1] == 1 and V[-1] == 1 and mode in ("none", "constant") and not col_id
    size = ob.element_size()
    bc = _col_block(L, max(16, _TILE_BYTES // size // 8))
    br = max(1, _TILE_BYTES // size // bc)
    br = min(br, next_power_of_2(n_rows))
    # divisibility hints: every row offset is a multiple of vec when the row strides, the boundary offsets
    # and the base are (the boundary maps only pick a row index; the stride multiplies it)
    vin = _vec(size, T[:-1] + [base] + ([O[-1]] if shifted else [])) if (col_id or shifted) else 1
    vout = _vec(size, [L]) if out_contig else (_vec(size, dst_st[:-1]) if dst_st[-1] == 1 else 1)
    n_cb = cdiv(L, bc)
    grid = (cdiv(n_rows, br) * n_cb,)
    return _launch(_tile_kernel, grid, (n_rows, L, n_cb, base, diag, *shape[1:5], *dst_st, *N, *T, *O, *V),
                   dict(MODE=MODES[mode], COL_MODE=0 if col_id else MODES[mode],
                        COL_ID=1 if col_id else (2 if shifted else 0), OUT_ROWS=out_contig, TRI=tri, I64=i64[0],
                        VIA_F32=i64[1], VEC_IN=vin, VEC_OUT=vout, BR=br, BC=bc, num_warps=4), fill_b)


def _try_transpose(ob, shape, dst_st, dims, base, i64):
    """The tiled transpose for a pure strided copy whose last output dim is strided in the source (None where it
    does not apply)."""
    r = len(shape)
    if r < 2 or r > 5 or abs(dims[-1][1]) == 1 or dst_st[-1] != 1:
        return None
    cands = [k for k in range(r - 1) if abs(dims[k][1]) == 1 and shape[k] >= 16]
    if not cands or shape[-1] < 16:
        return None
    p = max(cands, key=lambda k: shape[k])
    size = ob.element_size()
    line = max(16, 128 // size)                 # elements per 128-byte line
    bp = min(line, next_power_of_2(shape[p]))
    bl = min(max(line, _TILE_BYTES // size // bp), next_power_of_2(shape[-1]))
    batch = [k for k in range(r - 1) if k != p]
    bs = [1] * (4 - len(batch)) + [shape[k] for k in batch]
    bt = [0] * (4 - len(batch)) + [dims[k][1] for k in batch]
    bd = [0] * (4 - len(batch)) + [dst_st[k] for k in batch]
    n_pb, n_lb = cdiv(shape[p], bp), cdiv(shape[-1], bl)
    grid = (math.prod(bs) * n_pb * n_lb,)
    return _bound(_transpose_kernel, grid, (shape[p], shape[-1], n_pb, n_lb, base, dims[p][1], dims[-1][1], dst_st[p],
                                            1, *bs[1:], *bt, *bd),
                  dict(I64=i64[0], VIA_F32=i64[1], BP=bp, BL=bl, num_warps=8), n_ptr=2)


def copy_into(dst, src):
    """dst[...] = src[...] (same shape, any strides; src's dtype converted to dst's when they differ)."""
    if dst.numel() == 0:
        return
    if dst.dtype == src.dtype and dst.is_contiguous() and src.is_contiguous():
        dst.copy_(src)     # one device memcpy (cudaMemcpyAsync D2D): the seeds' fast path
        return
    move(dst, src, [(s, st, 0, 1) for s, st in zip(src.shape, src.stride())])


def fill(out, value):
    n = out.numel()
    if n == 0:
        return
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    f = scalar(value, out)
    _fill_kernel[(cdiv(n, _FILL_BLOCK),)](bits(target), bits(f), n, BLOCK=_FILL_BLOCK, num_warps=8)
    if target is not out:
        copy_into(out, target)
