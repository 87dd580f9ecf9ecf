"""Triton kernels of the softmax family (forward and fused backward; softmin = softmax negating x on load).

Every tensor is viewed as (outer, R, inner) with its own strides, R being the normalized axis.

* inner == 1, R <= MAX_SINGLE ("rows"): the whole row lives in registers: one read, one write
  (bf16 16384x4096: 2 B read + 2 B written per element, the floor; ~2.9-3.0 TB/s expected on H100).
  Short rows pack several rows per program so each program still moves >= ~8 KB.
* inner == 1, R > MAX_SINGLE (32k elements; 8k in f64) ("online"): pass 1 keeps a running max and a
  rescaled sum over 4096-wide tiles (one exp per element), pass 2 re-reads the tile and writes: 2 reads +
  1 write.  While at least one row per SM fits in ~24 MB of L2 (rows <= ~190 KB) the fused form
  (SPLITS == 1) is a persistent grid sized so the rows in flight stay in L2 and pass 2 is an L2 hit
  (4096x65536 bf16: 192 programs x 128 KB rows).  Longer rows, or fewer rows than SMs (SPLITS > 1): each
  row is cut into chunks of ~4 tiles (32 KB bf16), stage 1 writes per-chunk (max, sum) into the workspace
  and stage 2 folds them in a fixed order and writes: deterministic, no atomics, thousands of small
  programs (~32 registers, 8 per SM) keep enough bytes in flight; 3 HBM passes cap it at ~2/3 of the copy
  roofline (512x262144 bf16: was 37% fused with 132 x 512 KB rows overflowing L2).  Stage 2 walks the
  chunks in reverse so the first it re-reads are the last ones stage 1 streamed (still in L2).
* inner > 1 ("cols", non-last dim): tiles of [BLOCK_R, BLOCK_I] with the contiguous inner axis across
  lanes (coalesced), online statistics per column, then a write pass.  No permute/contiguous copies.
Inputs that cannot be viewed as (outer, R, inner) with strides are made contiguous first (one extra copy).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from .._lib.register import register_triton
from .._lib.math import exp_acc as _ex
from .._lib.math import log_acc as _lg
from . import coop as _long
from .._lib.config import num_sms, overrides
from .._lib.geometry import outer_r_inner as _geom
from .._lib.strided import span as _span
from .._lib.geometry import view3 as _view3
from .._lib.interp import INTERPRETING, loop
from .._lib.launch import bind_kernel, fast_kernel, meta
from .._lib.geometry import cdiv, next_power_of_2

# Loops over a runtime trip count are _lib.interp.loop: a `for` on the GPU, its interpreter twin under
# TRITON_INTERPRET=1.


# -- configuration (a plain function so tests can force the multi-tile / split paths cheaply) -----
@dataclass(frozen=True)
class Config:
    path: str           # "rows" | "online" | "cols" | "coop"
    block: int          # rows: next_pow2(R); online: TILE; cols: BLOCK_R; coop: CHUNK
    rows_per_prog: int  # rows path; cols: BLOCK_I
    splits: int         # online path: programs per row (> 1: two-stage split kernels + workspace); coop: chunks
    num_warps: int
    programs: int = 0   # online path, splits == 1: persistent grid size (rows are strided over it)


_FORCE, forced = overrides("""Force ``max_single`` / ``tile`` / ``splits`` / ``block_r`` in :func:`choose` (tests).""")


_num_sms = num_sms


def choose(outer: int, R: int, inner: int, itemsize: int, f64: bool = False) -> Config:
    """The launch configuration of an (outer, R, inner) problem.  itemsize: bytes per element in memory
    (the widest operand); f64: computes in float64 (twice the registers per element)."""
    # up to 32k elements the row stays in registers: one HBM read + one write (bf16 32768: 64 KB per row,
    # 32 warps x 32 elements per thread, 63 registers, no spills on sm_90; f32 the same register count)
    max_single = _FORCE.get("max_single", 8192 if f64 else 32768)
    if inner > 1:
        bi = 64 if inner >= 64 else next_power_of_2(inner)
        br = _FORCE.get("block_r", max(1, min(next_power_of_2(R), 4096 // bi)))
        return Config("cols", br, bi, 1, 4)
    if R <= max_single:
        block = next_power_of_2(max(R, 1))
        # ~2048+ elements per program; warps grow with the row (16 f32 registers per thread per operand,
        # 32 at 32k)
        rows = max(1, min(2048 // block, next_power_of_2(max(outer, 1))))
        warps = 4 if block <= 2048 else 8 if block <= 4096 else 16 if block <= 8192 else 32
        return Config("rows", block, rows, 1, warps)
    row_bytes = R * itemsize
    sms = _num_sms()
    fused = outer >= sms and row_bytes * sms <= (24 << 20)
    # rows that overflow L2 (or too few of them): on the GPU, one read + one write with the row's chunks
    # exchanging statistics between co-resident programs (softmax_long.py); the interpreter runs programs
    # one at a time, so there (and when a row has more chunks than SMs) the split path below
    chunk = _FORCE.get("chunk", _long.CHUNK)
    if not fused and _FORCE.get("coop", not INTERPRETING) and _long.splits(R, chunk) <= _long.capacity():
        return Config("coop", chunk, 1, _long.splits(R, chunk), _long.WARPS)
    # fused rows >= 64k: 8192-wide tiles and 16 warps, so each of the ~1.5 programs per SM the L2 budget
    # allows keeps 16 KB of loads in flight; split chunks: 4096 x 8 warps (~32 registers, 8 programs/SM)
    big = fused and R >= 65536
    tile = _FORCE.get("tile", 8192 if big else 4096)
    warps = 16 if big else 8
    ntiles = cdiv(R, tile)
    # fused (one program per row, persistent) only while >= 1 row per SM fits in ~24 MB of L2, so that the
    # second read of the row is an L2 hit.  Otherwise (few rows, or rows > ~190 KB: 512x262144 bf16 ran at
    # 37% of the copy roofline fused, 132 x 512 KB rows overflowing L2 and 16 KB in flight per SM) split
    # every row into chunks of ~4 tiles (32 KB bf16): stage 1 reads, stage 2 re-reads + writes, 3 HBM
    # passes at full occupancy (thousands of 8-warp programs), <= 2/3 of the copy rate counted as 2 passes
    auto = 1 if fused else max(cdiv(2 * sms, max(outer, 1)), cdiv(ntiles, 4))
    splits = _FORCE.get("splits", auto)
    # persistent grid: as many rows in flight as fit in ~24 MB of L2 (half of H100's 50 MB), at least one
    # program per SM, at most 8 per SM: pass 2 re-reads a row that pass 1 brought into L2 moments before
    progs = _FORCE.get("programs", max(sms, min(8 * sms, (24 << 20) // max(row_bytes, 1))))
    return Config("online", tile, 1, max(1, min(splits, ntiles)), warps, progs)


# -- device helpers ------------------------------------------------------------------------------
@triton.jit
def _safe(m):
    # a running max of -inf (nothing finite seen yet) must not produce exp(-inf - -inf) = NaN
    return tl.where(m == float("-inf"), 0.0, m)


# -- forward -------------------------------------------------------------------------------------
@fast_kernel
def _fw_rows(x_ptr, y_ptr, n_rows, R, sxo, sxr, LOG: tl.constexpr, F64: tl.constexpr, NEG: tl.constexpr,
             ROWS: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < R)[None, :]
    x = tl.load(x_ptr + rows[:, None] * sxo + cols[None, :] * sxr, mask=mask, other=float("-inf"))
    x = x.to(y_ptr.dtype.element_ty).to(CT)   # dtype=: torch casts the input first
    if NEG:   # softmin: softmax(-x); padding stays -inf
        x = tl.where(mask, -x, x)
    z = x - tl.max(x, 1)[:, None]
    e = _ex(z, F64)
    s = tl.sum(e, 1)
    if LOG:
        y = z - _lg(s, F64)[:, None]
    else:
        y = e / s[:, None]
    tl.store(y_ptr + rows[:, None] * R + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_stats(x_ptr, y_ptr, row, start, end, sxo, sxr, F64: tl.constexpr, NEG: tl.constexpr, TILE: tl.constexpr):
    """Online (max, sum exp(x - max)) over x[row, start:end], one exp per element."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    m = tl.max(tl.full([TILE], float("-inf"), CT), 0)
    s = tl.sum(tl.zeros([TILE], CT), 0)
    for off in loop(start, end, TILE):
        m, s = _stats_step(x_ptr, y_ptr, row, off, end, sxo, sxr, m, s, F64, NEG, TILE)
    return m, s


@triton.jit
def _stats_step(x_ptr, y_ptr, row, off, end, sxo, sxr, m, s, F64: tl.constexpr, NEG: tl.constexpr,
                TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    x = tl.load(x_ptr + row * sxo + c * sxr, mask=c < end, other=float("-inf"))
    x = x.to(y_ptr.dtype.element_ty).to(CT)
    if NEG:
        x = tl.where(c < end, -x, x)
    m_new = tl.maximum(m, tl.max(x, 0))
    ms = _safe(m_new)
    s = s * _ex(m - ms, F64) + tl.sum(_ex(x - ms, F64), 0)
    return m_new, s


@triton.jit
def _row_write(x_ptr, y_ptr, row, start, end, R, sxo, sxr, m, s, LOG: tl.constexpr, F64: tl.constexpr,
               NEG: tl.constexpr,
               TILE: tl.constexpr):
    lse = m + _lg(s, F64)
    inv = 1.0 / s
    for off in loop(start, end, TILE):
        _write_step(x_ptr, y_ptr, row, off, end, R, sxo, sxr, m, lse, inv, LOG, F64, NEG, TILE)


@triton.jit
def _write_step(x_ptr, y_ptr, row, off, end, R, sxo, sxr, m, lse, inv, LOG: tl.constexpr, F64: tl.constexpr,
                NEG: tl.constexpr,
                TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    mask = c < end
    x = tl.load(x_ptr + row * sxo + c * sxr, mask=mask, other=0.0).to(y_ptr.dtype.element_ty).to(CT)
    if NEG:
        x = -x
    if LOG:
        y = x - lse
    else:
        y = _ex(x - m, F64) * inv
    tl.store(y_ptr + row * R + c, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _combine(ws_ptr, row, n_rows, NSPLIT, F64: tl.constexpr, SP: tl.constexpr):
    """Fold the per-chunk (max, sum) pairs of ``row`` in a fixed order (deterministic)."""
    k = tl.arange(0, SP)
    km = k < NSPLIT
    ms = tl.load(ws_ptr + row * NSPLIT + k, mask=km, other=float("-inf"))
    ss = tl.load(ws_ptr + n_rows * NSPLIT + row * NSPLIT + k, mask=km, other=0.0)
    m = tl.max(ms, 0)
    s = tl.sum(ss * _ex(ms - _safe(m), F64), 0)
    return m, s


@triton.jit
def _fw_row_fused(x_ptr, y_ptr, row, R, sxo, sxr, LOG: tl.constexpr, F64: tl.constexpr, NEG: tl.constexpr,
                  TILE: tl.constexpr,
                  I64: tl.constexpr):
    if I64:
        row = row.to(tl.int64)
    m, s = _row_stats(x_ptr, y_ptr, row, 0, R, sxo, sxr, F64, NEG, TILE)
    _row_write(x_ptr, y_ptr, row, 0, R, R, sxo, sxr, m, s, LOG, F64, NEG, TILE)


@fast_kernel
def _fw_fused(x_ptr, y_ptr, n_rows, R, sxo, sxr, LOG: tl.constexpr, F64: tl.constexpr, NEG: tl.constexpr,
              TILE: tl.constexpr,
              I64: tl.constexpr):
    # persistent: program p handles rows p, p + P, ...; P is sized so P rows fit in L2 and the
    # second read of each row (pass 2) is an L2 hit
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for row in loop(pid, n_rows, nprog):
        _fw_row_fused(x_ptr, y_ptr, row, R, sxo, sxr, LOG, F64, NEG, TILE, I64)


@fast_kernel
def _fw_split(x_ptr, y_ptr, ws_ptr, n_rows, R, CHUNK, sxo, sxr, LOG: tl.constexpr, F64: tl.constexpr,
              NEG: tl.constexpr,
              TILE: tl.constexpr, STAGE: tl.constexpr, SP: tl.constexpr, I64: tl.constexpr):
    # few long rows, several programs per row. STAGE 1: chunk (max, sum) -> workspace; 2: fold + write
    nsplit = tl.num_programs(1)
    if STAGE == 2:  # reverse order: re-read first what stage 1 streamed last (L2-resident)
        row = n_rows - 1 - tl.program_id(0)
        split = nsplit - 1 - tl.program_id(1)
    else:
        row = tl.program_id(0)
        split = tl.program_id(1)
    if I64:
        row = row.to(tl.int64)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, R)
    if STAGE == 1:
        m, s = _row_stats(x_ptr, y_ptr, row, start, end, sxo, sxr, F64, NEG, TILE)
        tl.store(ws_ptr + row * nsplit + split, m)
        tl.store(ws_ptr + n_rows * nsplit + row * nsplit + split, s)
    else:
        m, s = _combine(ws_ptr, row, n_rows, nsplit, F64, SP)
        _row_write(x_ptr, y_ptr, row, start, end, R, sxo, sxr, m, s, LOG, F64, NEG, TILE)


@triton.jit
def _cols_stats_step(xb, r0, R, sxr, im, m, s, F64: tl.constexpr, NEG: tl.constexpr, OUT_T: tl.constexpr,
                     BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = r0 + tl.arange(0, BR)
    mask = (r < R)[:, None] & im[None, :]
    x = tl.load(xb + r[:, None] * sxr, mask=mask, other=float("-inf")).to(OUT_T).to(CT)
    if NEG:
        x = tl.where(mask, -x, x)
    m_new = tl.maximum(m, tl.max(x, 0))
    ms = _safe(m_new)
    s = s * _ex(m - ms, F64) + tl.sum(_ex(x - ms[None, :], F64), 0)
    return m_new, s


@triton.jit
def _cols_write_step(xb, yb, r0, R, INNER, sxr, im, m, lse, inv, LOG: tl.constexpr, F64: tl.constexpr,
                     NEG: tl.constexpr,
                     BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = r0 + tl.arange(0, BR)
    mask = (r < R)[:, None] & im[None, :]
    x = tl.load(xb + r[:, None] * sxr, mask=mask, other=0.0).to(yb.dtype.element_ty).to(CT)
    if NEG:
        x = -x
    if LOG:
        y = x - lse[None, :]
    else:
        y = _ex(x - m[None, :], F64) * inv[None, :]
    tl.store(yb + r[:, None] * INNER, y.to(yb.dtype.element_ty), mask=mask)


@fast_kernel
def _fw_cols(x_ptr, y_ptr, R, INNER, NIB, sxo, sxr, sxi, LOG: tl.constexpr, F64: tl.constexpr, NEG: tl.constexpr,
             BR: tl.constexpr, BI: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    o = pid // NIB
    i = (pid % NIB) * BI + tl.arange(0, BI)
    im = i < INNER
    xb = x_ptr + o * sxo + i[None, :] * sxi
    yb = y_ptr + o * R * INNER + i[None, :]
    m = tl.full([BI], float("-inf"), CT)
    s = tl.zeros([BI], CT)
    for r0 in loop(0, R, BR):
        m, s = _cols_stats_step(xb, r0, R, sxr, im, m, s, F64, NEG, y_ptr.dtype.element_ty, BR)
    lse = m + _lg(s, F64)
    inv = 1.0 / s
    for r0 in loop(0, R, BR):
        _cols_write_step(xb, yb, r0, R, INNER, sxr, im, m, lse, inv, LOG, F64, NEG, BR)


# -- backward: softmax  dx = y * (g - sum(g*y));  log_softmax  dx = g - exp(y) * sum(g) ----------
@triton.jit
def _bw_val(g, y, d, LOG: tl.constexpr, F64: tl.constexpr):
    if LOG:
        return g - _ex(y, F64) * d
    else:
        return y * (g - d)


@fast_kernel
def _bw_rows(g_ptr, y_ptr, dx_ptr, n_rows, R, sgo, sgr, syo, syr, LOG: tl.constexpr, F64: tl.constexpr,
             ROWS: tl.constexpr, BLOCK: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)
    if I64:
        rows = rows.to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = (rows < n_rows)[:, None] & (cols < R)[None, :]
    g = tl.load(g_ptr + rows[:, None] * sgo + cols[None, :] * sgr, mask=mask, other=0.0).to(CT)
    y = tl.load(y_ptr + rows[:, None] * syo + cols[None, :] * syr, mask=mask, other=0.0).to(CT)
    if LOG:
        d = tl.sum(g, 1)
    else:
        d = tl.sum(g * y, 1)
    dx = _bw_val(g, y, d[:, None], LOG, F64)
    tl.store(dx_ptr + rows[:, None] * R + cols[None, :], dx.to(dx_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bw_acc_step(gb, yb, off, end, sgr, syr, acc, LOG: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    # gb/yb: row base pointers; a [TILE] (rows) or [BR, BI] (cols, TILE = BR with gb/yb [1, BI]) accumulator
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    mask = c < end
    g = tl.load(gb + c * sgr, mask=mask, other=0.0).to(CT)
    if LOG:
        acc += g
    else:
        acc += g * tl.load(yb + c * syr, mask=mask, other=0.0).to(CT)
    return acc


@triton.jit
def _bw_write_step(gb, yb, db, off, end, sgr, syr, d, LOG: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    c = off + tl.arange(0, TILE)
    mask = c < end
    g = tl.load(gb + c * sgr, mask=mask, other=0.0).to(CT)
    y = tl.load(yb + c * syr, mask=mask, other=0.0).to(CT)
    tl.store(db + c, _bw_val(g, y, d, LOG, F64).to(db.dtype.element_ty), mask=mask)


@triton.jit
def _bw_row_dot(gb, yb, start, end, sgr, syr, LOG: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    """sum(g * y) (softmax) or sum(g) (log_softmax) over [start, end) of one row."""
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    acc = tl.zeros([TILE], CT)
    for off in loop(start, end, TILE):
        acc = _bw_acc_step(gb, yb, off, end, sgr, syr, acc, LOG, F64, TILE)
    return tl.sum(acc, 0)


@triton.jit
def _bw_row_write(gb, yb, db, start, end, sgr, syr, d, LOG: tl.constexpr, F64: tl.constexpr, TILE: tl.constexpr):
    for off in loop(start, end, TILE):
        _bw_write_step(gb, yb, db, off, end, sgr, syr, d, LOG, F64, TILE)


@triton.jit
def _bw_row_fused(g_ptr, y_ptr, dx_ptr, row, R, sgo, sgr, syo, syr, LOG: tl.constexpr, F64: tl.constexpr,
                  TILE: tl.constexpr, I64: tl.constexpr):
    if I64:
        row = row.to(tl.int64)
    gb = g_ptr + row * sgo
    yb = y_ptr + row * syo
    d = _bw_row_dot(gb, yb, 0, R, sgr, syr, LOG, F64, TILE)
    _bw_row_write(gb, yb, dx_ptr + row * R, 0, R, sgr, syr, d, LOG, F64, TILE)


@fast_kernel
def _bw_fused(g_ptr, y_ptr, dx_ptr, n_rows, R, sgo, sgr, syo, syr, LOG: tl.constexpr, F64: tl.constexpr,
              TILE: tl.constexpr, I64: tl.constexpr):
    # persistent over rows, as _fw_fused (the second read of g and y should hit L2)
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    for row in loop(pid, n_rows, nprog):
        _bw_row_fused(g_ptr, y_ptr, dx_ptr, row, R, sgo, sgr, syo, syr, LOG, F64, TILE, I64)


@fast_kernel
def _bw_split(g_ptr, y_ptr, dx_ptr, ws_ptr, n_rows, R, CHUNK, sgo, sgr, syo, syr, LOG: tl.constexpr,
              F64: tl.constexpr, TILE: tl.constexpr, STAGE: tl.constexpr, SP: tl.constexpr, I64: tl.constexpr):
    # STAGE 1: chunk dot -> workspace; 2: fold the row's dots in a fixed order, write the chunk
    nsplit = tl.num_programs(1)
    if STAGE == 2:
        row = n_rows - 1 - tl.program_id(0)
        split = nsplit - 1 - tl.program_id(1)
    else:
        row = tl.program_id(0)
        split = tl.program_id(1)
    if I64:
        row = row.to(tl.int64)
    start = split * CHUNK
    end = tl.minimum(start + CHUNK, R)
    gb = g_ptr + row * sgo
    yb = y_ptr + row * syo
    if STAGE == 1:
        tl.store(ws_ptr + row * nsplit + split, _bw_row_dot(gb, yb, start, end, sgr, syr, LOG, F64, TILE))
    else:
        k = tl.arange(0, SP)
        d = tl.sum(tl.load(ws_ptr + row * nsplit + k, mask=k < nsplit, other=0.0), 0)
        _bw_row_write(gb, yb, dx_ptr + row * R, start, end, sgr, syr, d, LOG, F64, TILE)


@fast_kernel
def _bw_cols(g_ptr, y_ptr, dx_ptr, R, INNER, NIB, sgo, sgr, sgi, syo, syr, syi, LOG: tl.constexpr,
             F64: tl.constexpr, BR: tl.constexpr, BI: tl.constexpr, I64: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    o = pid // NIB
    i = (pid % NIB) * BI + tl.arange(0, BI)
    im = i < INNER
    gb = g_ptr + o * sgo + i[None, :] * sgi
    yb = y_ptr + o * syo + i[None, :] * syi
    db = dx_ptr + o * R * INNER + i[None, :]
    acc = tl.zeros([BR, BI], CT)
    for r0 in loop(0, R, BR):
        acc = _bwc_acc_step(gb, yb, r0, R, sgr, syr, im, acc, LOG, F64, BR)
    d = tl.sum(acc, 0)
    for r0 in loop(0, R, BR):
        _bwc_write_step(gb, yb, db, r0, R, INNER, sgr, syr, im, d, LOG, F64, BR)


@triton.jit
def _bwc_acc_step(gb, yb, r0, R, sgr, syr, im, acc, LOG: tl.constexpr, F64: tl.constexpr, BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = r0 + tl.arange(0, BR)
    mask = (r < R)[:, None] & im[None, :]
    g = tl.load(gb + r[:, None] * sgr, mask=mask, other=0.0).to(CT)
    if LOG:
        acc += g
    else:
        acc += g * tl.load(yb + r[:, None] * syr, mask=mask, other=0.0).to(CT)
    return acc


@triton.jit
def _bwc_write_step(gb, yb, db, r0, R, INNER, sgr, syr, im, d, LOG: tl.constexpr, F64: tl.constexpr,
                    BR: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    r = r0 + tl.arange(0, BR)
    mask = (r < R)[:, None] & im[None, :]
    g = tl.load(gb + r[:, None] * sgr, mask=mask, other=0.0).to(CT)
    y = tl.load(yb + r[:, None] * syr, mask=mask, other=0.0).to(CT)
    tl.store(db + r[:, None] * INNER, _bw_val(g, y, d[None, :], LOG, F64).to(db.dtype.element_ty), mask=mask)


# -- host side -----------------------------------------------------------------------------------
def _f64(desc) -> bool:
    return desc.outputs[0].dtype == DType.f64 or (desc.op.endswith("_backward") and desc.inputs[0].dtype == DType.f64)


def _config(desc) -> Config:
    outer, R, inner = _geom(desc.inputs[0].shape, desc.attr("dim"))
    itemsize = max(t.dtype.itemsize for t in desc.inputs + desc.outputs)
    return choose(outer, R, inner, itemsize, _f64(desc))


def _workspace(desc) -> int:
    c = _config(desc)
    if c.path == "coop":
        outer, R, _ = _geom(desc.inputs[0].shape, desc.attr("dim"))
        return _long.workspace_bytes(outer, R, desc.op.endswith("_backward"), _f64(desc), c.block)
    if c.path != "online" or c.splits == 1:
        return 0
    outer, _, _ = _geom(desc.inputs[0].shape, desc.attr("dim"))
    per = 1 if desc.op.endswith("_backward") else 2   # (max, sum) forward, dot backward
    return per * outer * c.splits * (8 if _f64(desc) else 4)


def _bind(desc, pref=None):
    """Everything that depends only on the descriptor, computed once per plan; returns run()."""
    dim = desc.attr("dim")
    outer, R, inner = _geom(desc.inputs[0].shape, dim)
    f64 = _f64(desc)
    c = _config(desc)
    bw = desc.op.endswith("_backward")
    kw = dict(LOG=desc.op.startswith("log_"), F64=f64, num_warps=c.num_warps)
    if not bw:
        kw["NEG"] = desc.op == "softmin"
    if c.path == "coop":
        ckw = dict(LOG=kw["LOG"], F64=f64, **({} if bw else {"NEG": kw["NEG"]}))

        def run_coop(desc_, inputs, outputs, ws):
            out = outputs[0]
            target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
            views = [_view3(x, dim) for x in inputs]
            i64 = max([target.numel()] + [_span(v[0]) for v in views]) >= 2 ** 31 - 65536
            args = tuple(v[0] for v in views) + (target,) + tuple(s for v in views for s in v[1][:2])
            _long.launch(bw, args, ws, outer, R, f64, dict(ckw, I64=i64), c.block)
            if target is not out:
                out.copy_(target)
        return run_coop
    if c.path == "cols":
        nib = cdiv(inner, c.rows_per_prog)
        kern, grid = (_bw_cols if bw else _fw_cols), (outer * nib,)
        head = (R, inner, nib)
        kw.update(BR=c.block, BI=c.rows_per_prog)
        stages = (None,)
    elif c.path == "rows":
        kern, grid = (_bw_rows if bw else _fw_rows), (cdiv(outer, c.rows_per_prog),)
        head = (outer, R)
        kw.update(ROWS=c.rows_per_prog, BLOCK=c.block)
        stages = (None,)
    else:
        chunk = cdiv(cdiv(R, c.block), c.splits) * c.block
        splits = cdiv(R, chunk)
        kw.update(TILE=c.block)
        if splits == 1:
            kern, grid = (_bw_fused if bw else _fw_fused), (min(outer, c.programs),)
            head = (outer, R)
            stages = (None,)
        else:
            kern, grid = (_bw_split if bw else _fw_split), (outer, splits)
            head = (outer, R, chunk)
            kw.update(SP=next_power_of_2(splits))
            stages = (1, 2)
    split = c.path == "online" and stages != (None,)
    nstrides = 3 if c.path == "cols" else 2   # (outer, R[, inner]) strides per input
    wdt = torch.float64 if f64 else torch.float32

    fast = None
    if not split:
        # every operand contiguous (the common call): views, strides and index width fixed here, once
        mviews = [_view3(meta(t.shape), dim) for t in desc.inputs]
        i64c = max([desc.outputs[0].numel] + [_span(v[0]) for v in mviews]) >= 2 ** 31 - 65536
        ctail = tuple(head) + tuple(s for v in mviews for s in v[1][:nstrides])
        fast = bind_kernel(kern, grid, ctail, I64=i64c, **kw)
    n_in = len(desc.inputs)

    def run(desc_, inputs, outputs, ws):
        out = outputs[0]
        if fast is not None and out.is_contiguous() and inputs[0].is_contiguous() and (
                n_in == 1 or inputs[1].is_contiguous()):
            fast(*inputs, out)
            return
        target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        views = [_view3(x, dim) for x in inputs]
        i64 = max([target.numel()] + [_span(v[0]) for v in views]) >= 2 ** 31 - 65536
        args = [v[0] for v in views] + [target] + ([_ws_view(ws, wdt)] if split else []) + list(head)
        args += [s for v in views for s in v[1][:nstrides]]
        for stage in stages:
            extra = {} if stage is None else {"STAGE": stage}
            kern[grid](*args, I64=i64, **kw, **extra)
        if target is not out:
            out.copy_(target)

    return run


def _ws_view(ws, dt):
    n = ws.numel() // (8 if dt == torch.float64 else 4) * (8 if dt == torch.float64 else 4)
    return ws.reshape(-1)[:n].view(dt)


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    c = _config(desc)
    tag = {"rows": f"rows{c.block}x{c.rows_per_prog}", "cols": f"cols{c.block}x{c.rows_per_prog}",
           "coop": f"coop{c.block}x{c.splits}",
           "online": f"online{c.block}" + (f"-split{c.splits}" if c.splits > 1 else f"-persistent{c.programs}")}[c.path]
    return f"triton:{desc.op}:{tag}"


for _op in ("softmax", "log_softmax", "softmin", "softmax_backward", "log_softmax_backward"):
    register_triton(_op, _run, route=_route, workspace=_workspace, bind=_bind)
