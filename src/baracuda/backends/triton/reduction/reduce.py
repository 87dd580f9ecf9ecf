"""Triton reductions: sum/mean/prod/nansum/nanmean, amax/amin/argmax/argmin/max/min/aminmax, any/all/
count_nonzero -- one kernel family (``_row_kernel`` / ``_col_kernel``) whose combine step is the ``MODE``
constexpr, in ``reduce_kernels.py`` -- plus broadcast_to and mean's backward (the other fused backward kernels:
``reduction_bw.py``).

Every reduction is first put in the canonical form ``(outer, R, inner)`` (reduce along R):
  * size-1 axes are dropped and adjacent axes of the same kind (reduced / kept) are merged, from the
    shape alone, so the geometry (and hence the workspace) is a function of the descriptor;
  * if the reduced axes still form more than one group (e.g. dims (0, 2) of [A, B, C, D]), the input is
    permuted to (kept..., reduced...) and made contiguous -- the documented contiguize step: one extra
    read + write of the input, only for these patterns;
  * a group whose axes do not merge in memory (a strided view) is made contiguous first; any other
    strides (e.g. a stride-2 last axis) are passed to the kernels as they are.

Modes (``_OPS`` maps each op to its stage-1 / stage-2 mode, negation and finishing step):
  SUM (sum, mean), PROD, NANSUM (NaN -> 0, and the count of non-NaN elements in the second accumulator, for
  nanmean), COUNT (elements != 0, NaN included: any/all/count_nonzero), MAX (NaN wins: amax/amin, max/min
  without dim), MINMAX (aminmax: max and min of each tile in one read of x), ARG (value and first index, the first NaN wins: argmax/argmin, max/min with dim).  The
  min-type ops run as the max of -x (floats) or ~x (integers: bitwise not reverses the order and cannot
  overflow, unlike -INT_MIN), un-negated on output; ties and NaN keep their positions under both.
  Accumulators: f32 (f64 for f64 results); int64 for integer sums/products, integer extrema and counts.

Kernels (deterministic, no atomics).  SUM/PROD/NANSUM/COUNT/MAX reduce every tile at once (tl.sum /
tl.reduce / tl.max) and fold it into a per-output running value, so no [rows, cols] accumulator lives in
registers: ~32 regs on sm_90 for sum/amax, all of a thread's four 16 B loads issued together, 8 programs
per SM -- bandwidth-bound at HBM3 rates (bf16 [16384, 4096] reads 128 MB: 37 us at the 3.6 TB/s target on
an H200; 2 B read per element, the output is 1/4096 of it).  ARG keeps per-lane running (value, index)
pairs instead, updated elementwise in the loop, and reduces across lanes once at the end (``_lane_fold``).
  * ``_row_kernel`` (inner == 1): [BLOCK_M, BLOCK_N] tiles of 16 KB (2 x 4096 bf16, 1 x 4096 f32) on 8
    warps, 64 B per thread; a row of <= BLOCK_N elements is a single load, no loop.  ARG: 8 KB tiles.
  * ``_col_kernel`` (inner > 1): [BLOCK_R, BLOCK_I] tiles, BLOCK_I = 4 warps x 32 lanes x 16 B (1024 bf16,
    512 f32) contiguous inner elements, so the reduction over R of each tile stays inside a thread.
  * When the natural grid has fewer than ``_TARGET_PROGRAMS`` programs and R is long, R is split into S
    chunks: stage 1 writes (outer, S, inner) partials (values; i64 indices for ARG, i64 non-NaN counts for
    nanmean) into the workspace, stage 2 reduces them with the same kernel.  The partials are combined in
    a fixed order, so the result is bit-identical run to run (no atomics).
  * Narrow columns read flat (``flat_plan``: sum / mean / amax / amin over the leading dims of a float input whose
    kept trailing dims hold 2-64 elements, a power of two, past the split threshold): ``_flat_col_kernel`` folds
    runs of 1024 contiguous elements (whole rows) elementwise, 1024 splits, and stores each split's C partials
    per column; ``_flat_fold_kernel`` folds a column's partials in split order, one program a column.  A strided
    input takes the column kernel.
  * Narrow rows read flat (the same ops over trailing dims of 2-64 elements, a power of two, contiguous):
    ``_flat_row_kernel`` loads 2048 contiguous elements a program as [BM, C] and reduces over C, one launch.
  * argmax / argmin of bf16 / f16 rows whose values are not returned (index outputs, split partials): one int32
    max per tile of (16-bit order key << 16 | 65535 - column) (``reduce_kernels._packed_tile``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.spec import Descriptor
from ....ops.broadcast import reduce_to_parts
from ....ops import reduction_prod_nan_logic_minmax  # noqa: F401  (registers its RedDefs into REDUCTIONS)
from ....ops.reduction import REDUCTIONS, keepdim_shape
from .._lib.register import register_triton
from .._lib.strided import span as _span
from ..elementwise import bound_broadcast, launch
from .._lib.launch import bind_kernel, meta
from .._lib.geometry import cdiv, next_power_of_2
from .expand import expand_pattern, launch_expand
from .reduce_kernels import _col_kernel, _flat_col_kernel, _flat_fold_kernel, _flat_row_kernel, _row_kernel

_SUM, _MAX, _ARG, _PROD, _NANSUM, _COUNT, _MINMAX = 0, 1, 2, 3, 4, 5, 6
_P_NONE, _P_DIV, _P_DIV_CNT, _P_ANY, _P_ALL = 0, 1, 2, 3, 4   # finishing step, applied by the last stage
_TARGET_PROGRAMS = 512          # ~4 resident programs on each of the 132 SMs of an H100/H200
# no split below this many input bytes: a second launch costs the host 5-10 us and the GPU ~2 us, while one
# stage over <= 4 MiB on few programs reads for ~1-3 us (a program streams tens of GB/s; estimate, not an A/B)
_SPLIT_MIN_BYTES = 4 << 20
_MIN_CHUNK = 128                # least elements of R per split: e.g. sum over dim 0 of bf16 [4096, 16384]
                                # runs 16 column blocks x 32 splits = 512 programs of 128 x 1024 elements
                                # (256 KB each); the f32 partials add 32 x 16384 x 4 B x 2 = 4 MB (3 %)
_TILE = {1: 8192, 2: 8192, 4: 4096, 8: 2048}   # elements per tile, by input itemsize: 16 KB per program
_THREAD_BYTES = 64              # row kernel: 4 x 16 B vector loads per thread per tile
_ARG_THREAD_BYTES = 32          # ARG row kernel: 2 x 16 B loads per thread (8 KB tiles on 8 warps)
_COL_WARPS = 4                  # column kernel: 128 threads x 16 B cover BLOCK_I = 1024 bf16 / 512 f32
_STAGE2_COLS = 32               # stage 2 of a column split: 32 partial columns (128 B f32 rows) per program
_FORCE: dict = {}               # tuning sweeps only (bench/reduce_sweep.py): "target", "tile" overrides
# the flat path of narrow columns (flat_plan): elements per load, splits aimed at, the fold's block; chosen by
# bench/narrow_col_probe.py on an H200 (session 12: [1M, 16] bf16 sum 16.0 -> 11.8 us, torch.compile 10.8)
_FLAT_LOAD = 1024
_FLAT_SPLITS = 1024
_FLAT_FOLD = 1024
_FLAT_MAX_COLS = 64
_FLAT_ROW_LOAD = 2048   # narrow rows: elements a program (var's flat rows: session 12)


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
    return next_power_of_2(max(1, int(n)))


def _narrow(bi: int, itemsize: int) -> bool:
    """A column tile narrower than the 4 warps' 16 B lanes: R spans the threads (the ACC2D form)."""
    return bi * itemsize < 32 * 16 * _COL_WARPS


def _blocks(outer, R, inner, itemsize, arg=False, stage2=False):
    """Tile shape and split of one launch: (kernel, b0, b1, n_prog, S, chunk).  b0 x b1 is the tile
    ([rows, cols] for "row", [R, inner] for "col"); S splits of ``chunk`` elements of R each.  ARG tiles
    are smaller: the lane state is a (value, index) pair per element, 2 regs each.  Rows: 8 KB, [1, 4096]
    bf16 on 8 warps = 16 pairs per thread next to 2 x 16 B loads (64 regs on sm_90).  Columns (4 warps):
    4 KB, [2, 1024] bf16 = 16 pairs per thread ([4, 1024] took 108 regs: 2 programs per SM)."""
    tile = _FORCE.get("tile", _TILE[itemsize]) // ((2 if inner == 1 else 4) if arg else 1)
    if inner == 1:
        bn = min(_np2(R), tile)
        bm = max(1, min(tile // bn, _np2(outer)))
        n_prog = cdiv(outer, bm)
    else:
        # stage 2 reads S x inner partials (e.g. 128 x 4096 f32 = 2 MB for a bf16 [16384, 4096] sum over
        # dim 0): 32-column blocks (one 128 B line per row) give it 128 programs, ~16 KB each, one load
        # round trip (~1 us) instead of 4 dependent ones on 32 programs of 128 columns (~3-4 us, 6-8 % of
        # the 50 us the first stage takes at 2.6 TB/s)
        bi = min(_np2(inner), _STAGE2_COLS if stage2 else 32 * (16 // itemsize) * _COL_WARPS)
        if not arg and _narrow(bi, itemsize):
            tile //= 2          # the [BLOCK_R, BLOCK_I] accumulator (ACC2D) takes a register per element
        br = max(1, min(tile // bi, _np2(R)))
        n_prog = outer * cdiv(inner, bi)
    S, chunk = 1, max(R, 1)
    # row splits: 2x the programs (8 per SM at <= 32 regs x 256 threads, 128 KB in flight per SM); their
    # partials are S values per row, free.  Column splits write S x inner partials: stay at ~4 per SM, except for
    # a narrow inner axis (ACC2D: [1M, 16] over dim 0 writes S x 16 partials), which fills the SMs as rows do
    # (at ~4 programs per SM it read at 1.85 TB/s, 0.80x torch.compile)
    target = _FORCE.get("target", _TARGET_PROGRAMS) * (2 if inner == 1 or (not arg and _narrow(min(_np2(inner), 1024), itemsize)) else 1)
    if not stage2 and n_prog < target and R >= 2 * _MIN_CHUNK and \
            outer * R * inner * itemsize >= _SPLIT_MIN_BYTES:   # stage 2 is one pass over the partials
        S = min(cdiv(target, n_prog), cdiv(R, _MIN_CHUNK))
        per = cdiv(R, S)
        step = 1 << (per.bit_length() - 1)          # the R-block never exceeds one split
        if inner == 1:
            bn = min(bn, step)
            step = bn
        else:
            br = min(br, step)
            step = br
        chunk = cdiv(per, step) * step       # a multiple of the R-block (see the kernels' loops)
        S = cdiv(R, chunk)
    if inner == 1:
        return "row", bm, bn, n_prog, S, chunk
    return "col", br, bi, n_prog, S, chunk


@dataclass(frozen=True)
class FlatPlan:
    """The flat path of a narrow reduction.  "cols": [R, C] contiguous, reduced over R in S splits of ``rows``
    rows (a multiple of ``br``), each split's C partials folded by one program per column.  "rows": [M, C]
    contiguous reduced over its C, ``br`` rows (one flat run of br * C elements) a program, one launch."""
    kind: str
    br: int
    rows: int
    S: int

    def fits(self, strides, R: int, inner: int) -> bool:
        """Whether the canonical (outer, R, inner) strides are the contiguous ones this plan reads."""
        if self.kind == "rows":
            return strides[1] == 1 and strides[0] == R
        return strides[1] == inner and strides[2] == 1


def flat_plan(outer, R, inner, itemsize, k, acc, pre) -> FlatPlan | None:
    """The flat path (``_flat_col_kernel``) for sum / mean / amax / amin over the leading dims of a float input
    whose kept trailing dims hold C = inner elements, a power of two from 2 to 64 (bias gradients, first-dim
    sums of [1M, 16]), f32 accumulation, past the split threshold; else None.  The column kernel's [R, C]
    tiles read such rows at ~1.8 of HBM's ~4.5 TB/s on an H200 (0.69-0.78x torch.compile): loads of C
    elements a row under a 2-D index and a column mask.  Read flat, 1024 contiguous elements a load, 1024
    splits, the same rows run at 0.92-1.0x torch.compile ([1M, 16] bf16 / f32) and 1.9x ([262144, 64], [4M, 4]):
    bench/results/2026-11-28-h200/session12/.  The same ops over trailing dims of 2-64 elements (a power of
    two; "rows", ``_flat_row_kernel``): the row kernel's [BLOCK_M, C] tiles ran [1M, 16] bf16 at 0.92-0.95x
    torch.compile (session 13 run A), where var's flat rows (one run of 2048 elements a program) ran 1.04x."""
    def narrow(n, load):
        return 2 <= n <= min(_FLAT_MAX_COLS, load) and not n & (n - 1)
    if k.mode not in (_SUM, _MAX) or k.mode2 != k.mode or acc != DType.f32 or pre is not None or \
            outer * R * inner * itemsize < _SPLIT_MIN_BYTES or not _FORCE.get("flat", True):
        return None
    if outer == 1 and narrow(inner, _FLAT_LOAD // 2):
        br = _FLAT_LOAD // inner
        rows = cdiv(cdiv(R, _FORCE.get("flat_splits", _FLAT_SPLITS)), br) * br
        return FlatPlan("cols", br, rows, cdiv(R, rows))
    if inner == 1 and narrow(R, _FLAT_ROW_LOAD) and _FORCE.get("flat_rows", True):
        br = max(1, _FLAT_ROW_LOAD // R)
        return FlatPlan("rows", br, br, cdiv(outer, br))
    return None


def _flat_of(desc, k):
    x = desc.inputs[0]
    outer, R, inner, perm = geometry(x.shape, _dims_of(desc))
    if perm is not None:
        return None
    return flat_plan(outer, R, inner, x.dtype.itemsize, k, _acc_dtype(desc, k), _pre_dtype(desc))


def _flat_parts(fp: FlatPlan, R: int, C: int, k):
    """The launches as bind_kernel's arguments: [(kernel, grid, tail, constexprs and options)], each taking
    (input, output) tensors first: "cols" (x, partials) then (partials, out); "rows" (x, out).  For "rows" R is
    the number of rows and C their length."""
    mode = 1 if k.mode == _MAX else 0
    if fp.kind == "rows":
        return [(_flat_row_kernel, (fp.S,), (R, float(C)), dict(C=C, BM=fp.br, MODE=mode, NEG=k.neg,
                                                                 DIV=k.post == _P_DIV, num_warps=4))]
    return [(_flat_col_kernel, (fp.S,), (R, fp.rows, fp.S), dict(C=C, BR=fp.br, MODE=mode, NEG=k.neg, num_warps=8)),
            (_flat_fold_kernel, (C,), (fp.S, float(R)), dict(BS=min(_FLAT_FOLD, next_power_of_2(fp.S)), MODE=mode,
                                                           NEG=k.neg, DIV=k.post == _P_DIV, num_warps=4))]


def _flat_shape(fp: FlatPlan, outer: int, R: int, inner: int):
    """(rows, columns) as _flat_parts takes them."""
    return (outer, R) if fp.kind == "rows" else (R, inner)


# -- op table ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Op:
    mode: int            # stage-1 (or single-stage) mode
    mode2: int           # the mode that combines the partials
    neg: bool = False    # min-type: max of -x / ~x
    post: int = _P_NONE
    second: bool = False  # a second accumulator goes through the workspace (ARG index, nanmean count: i64;
                          # MINMAX min: the accumulator type)


_OPS = {
    "sum": _Op(_SUM, _SUM), "mean": _Op(_SUM, _SUM, post=_P_DIV), "prod": _Op(_PROD, _PROD),
    "nansum": _Op(_NANSUM, _SUM), "nanmean": _Op(_NANSUM, _NANSUM, post=_P_DIV_CNT, second=True),
    "amax": _Op(_MAX, _MAX), "amin": _Op(_MAX, _MAX, True),
    "argmax": _Op(_ARG, _ARG, second=True), "argmin": _Op(_ARG, _ARG, True, second=True),
    "any": _Op(_COUNT, _SUM, post=_P_ANY), "all": _Op(_COUNT, _SUM, post=_P_ALL),
    "count_nonzero": _Op(_COUNT, _SUM),
    # one read of x for both: (max, min) per tile; the min rides in the second accumulator
    "aminmax": _Op(_MINMAX, _MINMAX, second=True),
}


def _small(k: _Op) -> bool:
    """ARG and MINMAX carry two values per element or per tile: the smaller tiles of ``_blocks`` (sm_90:
    MINMAX on [8, 1024] bf16 column tiles took 124 regs, [2, 1024] 52; [2, 4096] rows 79, [1, 4096] 63)."""
    return k.mode in (_ARG, _MINMAX)


def _passes(desc):
    """[(_Op, value output index or None, index output index or None)]: the launches of one op."""
    op = desc.op
    if op in ("max", "min"):
        amax = _OPS["amax" if op == "max" else "amin"]
        if desc.attr("dim") is None:
            return [(amax, 0, None)]
        return [(_OPS["argmax" if op == "max" else "argmin"], 0, 1)]
    if op == "aminmax":   # the max is the value output (1), the min the second one (0)
        return [(_OPS[op], 1, 0)]
    if op in ("argmax", "argmin"):
        return [(_OPS[op], None, 0)]
    return [(_OPS[op], 0, None)]


def _dims_of(desc):
    attrs = desc.attr_dict
    if "dim" in attrs:
        dim = attrs["dim"]
        rank = len(desc.inputs[0].shape)
        return tuple(range(rank)) if dim is None else ((dim,) if rank else ())
    return attrs["dims"]


def _acc_dtype(desc, k: _Op) -> DType:
    x = desc.inputs[0].dtype
    if k.mode == _COUNT:
        return DType.i64
    if k.mode in (_MAX, _ARG, _MINMAX):
        return DType.f64 if x == DType.f64 else (DType.f32 if x.is_floating else DType.i64)
    out = desc.outputs[0].dtype
    return DType.f64 if out == DType.f64 else (DType.f32 if out.is_floating else DType.i64)


def _workspace(desc):
    x = desc.inputs[0]
    outer, R, inner, _ = geometry(x.shape, _dims_of(desc))
    if outer * inner == 0:
        return 0
    need = 0
    for k, _, _ in _passes(desc):
        fp = _flat_of(desc, k)
        if fp is not None and fp.kind == "cols":
            need = max(need, fp.S * inner * 4)    # (the column path's own need below: strided inputs take it)
        *_, S, _ = _blocks(outer, R, inner, x.dtype.itemsize, _small(k))
        if S > 1:
            n = outer * S * inner
            vals = (n * _acc_dtype(desc, k).itemsize + 15) // 16 * 16
            need = max(need, vals + (n * 8 if k.second else 0))
    return need


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


_TL = {DType.f64: tl.float64, DType.f32: tl.float32, DType.f16: tl.float16, DType.bf16: tl.bfloat16,
       DType.i64: tl.int64, DType.i32: tl.int32, DType.i16: tl.int16, DType.i8: tl.int8, DType.u8: tl.uint8,
       DType.bool: tl.int1}   # bool: amax/max/aminmax of bool inputs, dtype=bool (x != 0; 0/1 in the i64 accumulator)


_PACK_INF = {DType.bf16: 0x7F80, DType.f16: 0x7C00}


def _launch_parts(kind, b0, b1, geom, strides, S, chunk, count, mode, neg_in, neg_out, idx_in, write_val, write_idx,
                  post, acc, pre, i64, itemsize, in_dtype=None):
    """(kernel, grid, scalar arguments after the 4 tensors (x, xi, out, oi), constexprs and options) of one
    launch."""
    outer, R, inner = geom
    if kind == "row":   # 64 B (4 x 16 B loads; ARG: 32 B) per thread: 8 warps for a full tile, fewer if small
        per_thread = _ARG_THREAD_BYTES if mode == _ARG else _THREAD_BYTES
        warps = min(8, max(1, _np2(b0 * b1 * itemsize // (32 * per_thread))))
    else:
        warps = _COL_WARPS
    flt = acc.is_floating
    idx64 = i64 or idx_in
    common = dict(MODE=mode, NEG_IN=neg_in, NEG_OUT=neg_out, IDX_IN=idx_in, WRITE_VAL=write_val,
                  WRITE_IDX=write_idx, POST=post, ACC=_TL[acc], PRE=_TL[pre or acc], HAS_PRE=pre is not None,
                  FLT=flt, LOW=float("-inf") if flt else -2 ** 63,
                  IDXT=tl.int64 if idx64 else tl.int32, IBIG=2 ** 62 if idx64 else 2 ** 31 - 1,
                  SEC=_TL[acc] if mode == _MINMAX else tl.int64, HIGH=float("inf") if flt else 2 ** 63 - 1, I64=i64,
                  num_warps=warps)
    if kind == "row":
        # PACK (reduce_kernels' note): argmax / argmin of bf16 / f16 whose values are not returned (index outputs,
        # or the split's partials): +inf's bits, else 0
        pack = _PACK_INF.get(in_dtype, 0) if (mode == _ARG and not idx_in and (not write_val or S > 1)
                                               and not pre and _FORCE.get("pack", True)) else 0
        return (_row_kernel, (cdiv(outer, b0), S), (outer, R, chunk, strides[0], strides[1], S, count),
                dict(BLOCK_M=b0, BLOCK_N=b1, PACK=pack, **common))
    n_iblk = cdiv(inner, b1)
    common["ACC2D"] = mode in (_SUM, _MAX, _PROD, _COUNT) and _narrow(b1, itemsize)
    return (_col_kernel, (outer * n_iblk, S), (inner, R, chunk, strides[0], strides[1], strides[2], S, n_iblk, count),
            dict(BLOCK_R=b0, BLOCK_I=b1, **common))


def _launch(kind, b0, b1, x, xi, out, oi, geom, strides, S, chunk, count, mode, neg_in, neg_out, idx_in,
            write_val, write_idx, post, acc, pre, i64, in_dtype=None):
    kernel, grid, tail, kw = _launch_parts(kind, b0, b1, geom, strides, S, chunk, count, mode, neg_in, neg_out,
                                           idx_in, write_val, write_idx, post, acc, pre, i64, x.element_size(),
                                           in_dtype)
    kernel[grid](x, xi, out, oi, *tail, **kw)


def _pre_dtype(desc):
    """dtype= of sum/prod/nansum/mean/nanmean: the input is converted to it before accumulating."""
    dt = desc.attr_dict.get("dtype")
    return dt if dt is not None and dt != desc.inputs[0].dtype else None


def _run(desc, inputs, outputs, ws):
    x = inputs[0]
    shape = desc.inputs[0].shape
    xv, geom, strides = _canon(x, _dims_of(desc), shape)
    outer, R, inner = geom
    pre = _pre_dtype(desc)
    for k, vo, io in _passes(desc):
        fp = _flat_of(desc, k)
        if fp is not None and fp.fits(strides, R, inner):
            _run_flat(fp, xv, outputs[vo], ws, *_flat_shape(fp, outer, R, inner), k)
            continue
        is_arg = _small(k)
        kind, b0, b1, _, S, chunk = _blocks(outer, R, inner, desc.inputs[0].dtype.itemsize, is_arg)
        acc_dt = _acc_dtype(desc, k)
        i64 = max(_span(xv), outer * S * inner) >= 2 ** 31 - 65536
        targets = []
        for j in (vo, io):
            o = outputs[j] if j is not None else None
            targets.append(o if o is None or o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device))
        tv, ti = targets
        tv_ = tv if tv is not None else ti
        ti_ = ti if ti is not None else tv_
        if S == 1:
            _launch(kind, b0, b1, xv, xv, tv_, ti_, geom, strides, 1, chunk, R, k.mode, k.neg, k.neg, False,
                    tv is not None, ti is not None, k.post, acc_dt, pre, i64, desc.inputs[0].dtype)
        else:
            n = outer * S * inner
            vals = ws[: n * acc_dt.itemsize].view(acc_dt.torch)
            off = (n * acc_dt.itemsize + 15) // 16 * 16
            sec = acc_dt if k.mode == _MINMAX else DType.i64      # the workspace holds n x 8 B for it
            idx = ws[off: off + n * sec.itemsize].view(sec.torch) if k.second else vals
            # stage 1: (outer, S, inner) partials, in the negated space for min-type ops
            _launch(kind, b0, b1, xv, xv, vals, idx, geom, strides, S, chunk, R, k.mode, k.neg, False, False,
                    True, k.second, _P_NONE, acc_dt, pre, i64, desc.inputs[0].dtype)
            # stage 2: reduce the S partials of each output, in split order (deterministic)
            k2, c0, c1, _, _, _ = _blocks(outer, S, inner, acc_dt.itemsize, is_arg, stage2=True)
            st2 = (S, 1, 0) if inner == 1 else (S * inner, inner, 1)
            _launch(k2, c0, c1, vals, idx, tv_, ti_, (outer, S, inner), st2, 1, S, R, k.mode2, False, k.neg,
                    k.second, tv is not None, ti is not None, k.post, acc_dt, None, False)
        for j, t in ((vo, tv), (io, ti)):
            if j is not None and t is not outputs[j]:
                outputs[j].copy_(t)


def _run_flat(fp: FlatPlan, x, out, ws, R: int, C: int, k) -> None:
    """The flat path on ``x`` (contiguous; R and C as _flat_parts takes them) into ``out``."""
    tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    parts = _flat_parts(fp, R, C, k)
    bufs = [x, ws[: fp.S * C * 4].view(torch.float32), tgt] if fp.kind == "cols" else [x, tgt]
    for j, (kern, grid, tail, kw) in enumerate(parts):
        kern[grid](bufs[j], bufs[j + 1], *tail, **kw)
    if tgt is not out:
        out.copy_(tgt)


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
    names = []
    for k, _, _ in _passes(desc):
        fp = _flat_of(desc, k)
        if fp is not None:
            names.append(f"reduce_flatcol_split{fp.S}" if fp.kind == "cols" else f"reduce_flatrow{fp.br}")
            continue
        kind, *_, S, _ = _blocks(outer, R, inner, x.dtype.itemsize, _small(k))
        names.append(f"reduce_{kind}" + (f"_split{S}" if S > 1 else ""))
    return "triton:" + "+".join(dict.fromkeys(names)) + ("+permute" if perm else "")


def _bind(desc, pref=None):
    """run() with the launches of a contiguous input bound once (geometry, tile, constexprs: the common call pays
    the pointers and the launch), a split reduction's two stages too (its unbound path cost ~150 us of host a call
    on the H100 host, session 7 run B: bias gradients, narrow first-dim sums); permuted or strided calls take
    ``_run``."""
    x = desc.inputs[0]
    dims = _dims_of(desc)
    outer, R, inner, perm = geometry(x.shape, dims)
    (k, vo, io), = _passes(desc)
    is_arg = _small(k)
    kind, b0, b1, _, S, chunk = _blocks(outer, R, inner, x.dtype.itemsize, is_arg)
    if perm is not None or outer * inner == 0:
        return _run
    fp = _flat_of(desc, k)
    if fp is not None:
        flat = [bind_kernel(*p[:3], **p[3]) for p in _flat_parts(fp, *_flat_shape(fp, outer, R, inner), k)]
        nbytes = fp.S * inner * 4

        def run_flat(desc_, inputs, outputs, ws):
            xt, out = inputs[0], outputs[vo]
            if xt.is_contiguous() and out.is_contiguous():
                if len(flat) == 1:
                    flat[0](xt, out)
                    return
                part = ws[:nbytes].view(torch.float32)
                flat[0](xt, part)
                flat[1](part, out)
                return
            _run(desc_, inputs, outputs, ws)
        return run_flat
    xm, geom, strides = _canon(meta(x.shape), dims, x.shape)
    acc = _acc_dtype(desc, k)
    i64 = max(_span(xm), outer * S * inner) >= 2 ** 31 - 65536
    if S == 1:
        p1 = _launch_parts(kind, b0, b1, geom, strides, 1, chunk, R, k.mode, k.neg, k.neg, False, vo is not None,
                           io is not None, k.post, acc, _pre_dtype(desc), i64, x.dtype.itemsize, x.dtype)
        stages = [bind_kernel(*p1[:3], **p1[3])]
    else:   # as _run's two stages: (outer, S, inner) partials in the workspace, then their fold in split order
        p1 = _launch_parts(kind, b0, b1, geom, strides, S, chunk, R, k.mode, k.neg, False, False, True, k.second,
                           _P_NONE, acc, _pre_dtype(desc), i64, x.dtype.itemsize, x.dtype)
        k2, c0, c1, _, _, _ = _blocks(outer, S, inner, acc.itemsize, is_arg, stage2=True)
        st2 = (S, 1, 0) if inner == 1 else (S * inner, inner, 1)
        p2 = _launch_parts(k2, c0, c1, (outer, S, inner), st2, 1, S, R, k.mode2, False, k.neg, k.second,
                           vo is not None, io is not None, k.post, acc, None, False, acc.itemsize)
        stages = [bind_kernel(*p[:3], **p[3]) for p in (p1, p2)]
        n = outer * S * inner
        off = (n * acc.itemsize + 15) // 16 * 16
        sec = acc if k.mode == _MINMAX else DType.i64

    def run(desc_, inputs, outputs, ws):
        xt = inputs[0]
        tv = outputs[vo] if vo is not None else None
        ti = outputs[io] if io is not None else None
        if xt.is_contiguous() and (tv is None or tv.is_contiguous()) and (ti is None or ti.is_contiguous()):
            tv_ = tv if tv is not None else ti
            ti_ = ti if ti is not None else tv_
            if S == 1:
                stages[0](xt, xt, tv_, ti_)
            else:
                vals = ws[: n * acc.itemsize].view(acc.torch)
                idx = ws[off: off + n * sec.itemsize].view(sec.torch) if k.second else vals
                stages[0](xt, xt, vals, idx)
                stages[1](vals, idx, tv_, ti_)
            return
        _run(desc_, inputs, outputs, ws)
    return run


for _name in REDUCTIONS:
    register_triton(_name, _run, route=_route, workspace=_workspace, bind=_bind)
def _bind_broadcast(desc, pref=None):
    """broadcast_to / mean_backward with a contiguous gradient: the strided template launch bound once."""
    wide = DType.f64 in (desc.dtype, desc.outputs[0].dtype)
    compute = tl.float64 if wide else tl.float32
    if desc.op == "mean_backward":
        shape, dims = desc.attr("shape"), desc.attr("dims")
        body, p0, general = _div_count, float(math.prod(shape[a] for a in dims)), _run_mean_bw
        in_shape = keepdim_shape(shape, dims)
    else:
        body, p0, general, in_shape = _identity, 0.0, _run_broadcast, desc.inputs[0].shape
    pattern = expand_pattern(desc.outputs[0].shape, in_shape)
    if pattern is not None:     # one broadcast block: tiles of stores (expand.py)
        count = p0 if desc.op == "mean_backward" else None

        def run_expand(desc_, inputs, outputs, ws):
            g, out = inputs[0], outputs[0]
            if g.is_contiguous() and out.is_contiguous():
                launch_expand(pattern, g, out, count)
                return
            general(desc_, inputs, outputs, ws)
        return run_expand
    bound = bound_broadcast(body, [in_shape], desc.outputs[0].shape, p0, compute=compute)
    if bound is None:
        return general

    def run(desc_, inputs, outputs, ws):
        g, out = inputs[0], outputs[0]
        if g.is_contiguous() and out.is_contiguous():
            bound(out, g, g, g)     # (the [.., 1, ..] view of a contiguous g has g's address)
            return
        general(desc_, inputs, outputs, ws)
    return run


def _route_broadcast(desc, pref=None):
    if desc.op == "mean_backward":
        in_shape, body = keepdim_shape(desc.attr("shape"), desc.attr("dims")), "div_count"
    else:
        in_shape, body = desc.inputs[0].shape, "identity"
    if expand_pattern(desc.outputs[0].shape, in_shape) is not None:
        return f"triton:expand({body})"
    return f"triton:ew_template({body})"


register_triton("mean_backward", _run_mean_bw, route=_route_broadcast, bind=_bind_broadcast)
register_triton("broadcast_to", _run_broadcast, route=_route_broadcast, bind=_bind_broadcast)


# -- reduce_to: the mode's reduction kernels over the axes that broadcasting added (a copy when there are none) --
def _red_of(desc):
    dims, _ = reduce_to_parts(desc)
    return Descriptor(desc.attr("mode"), desc.inputs, {"dims": dims, "keepdim": True}) if dims else None


def _run_reduce_to(desc, inputs, outputs, ws):
    rd = _red_of(desc)
    if rd is None:
        outputs[0].copy_(inputs[0])
        return
    out = outputs[0]
    tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    _run(rd, inputs, [tgt.view(rd.outputs[0].shape)], ws)
    if tgt is not out:
        out.copy_(tgt)


def _route_reduce_to(desc, pref):
    rd = _red_of(desc)
    return "triton:copy" if rd is None else _route(rd, pref)


register_triton("reduce_to", _run_reduce_to, route=_route_reduce_to,
                workspace=lambda d: 0 if _red_of(d) is None else _workspace(_red_of(d)))
