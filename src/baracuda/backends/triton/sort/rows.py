"""Host side of the sort family's row sorts: sort, argsort, msort, topk and sort_backward on Triton.

The sort axis is moved last (a copy when it is not already the contiguous axis); results land in the
outputs directly when they are contiguous along it, else in a temporary copied back.  ``sort_rows`` is the one
entry the order statistics (stats.py), unique (search/unique.py) and nms share.  Rows past the register limit take
the LSD radix sort for keys of <= 32 bits (radix.py: BITS / 8 passes of 8-bit digits) and the block sort + merge
passes for 64-bit keys (``forced(radix=...)`` picks either for any dtype).  H200, one 2^24 f32 row
(bench/sort_net_ab.py, session 15): radix 3.19 ms, merge passes 6.47, torch 0.81; unique of 16M int64: merge 10.8 ms,
radix 18.6 (8 passes of (int64 value, int32 position)).  Paths and their costs: kernels.py's docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import triton.language as tl

from ...._core.checks import flagged
from ...._core.dtypes import DType, as_dtype
from ...._core.errors import InvalidProblemError
from ....ops.sort import row_geometry
from .._lib.config import overrides
from .._lib.geometry import cdiv, next_power_of_2
from .._lib.geometry import ws_align as _align
from .._lib.launch import fast_kernel
from .._lib.register import register_triton
from .kernels import _merge_kernel, _rows_kernel, _select_kernel, _topk_kernel
from .radix import DIGITS, _radix_hist_kernel, _radix_scan_kernel, _radix_scatter_kernel
from .topk_filter import threshold_filter

_FORCE, forced = overrides("""Force ``nmax`` (the register-sort limit; 0: every row takes a long-row path), ``radix``
(True / False: long rows by the LSD radix sort, or by the block sort + merge passes), ``radix_block`` (the radix passes'
positions per program, a power of 2; default min(4096, nmax)), ``kmax`` / ``chunk`` (topk), ``tile`` (short rows'
minimum tile, the merge passes' tile), ``warps`` (the sort kernels' warps) in :func:`row_config`, ``select`` (True /
False: topk's radix select where its keys allow it, or never) and ``select_chunk`` / ``select_warps`` (its positions per
chunk, warps per program), ``filter`` (True / False: topk's threshold filter where its keys allow it, or never) and
``filter_chunks`` / ``filter_cap`` / ``filter_warps`` / ``filter_gather`` (its chunks per row M, survivor slots per row
C, warps per program, pass 2's lanes per step), ``lv`` / ``xw`` (the register network's load vector bits, -1: no
permutation; cross-warp exchanges by tl.gather, False: by xor_sum: :func:`net_layout`), ``fc`` (False: packed keys
compared as int64, not as int32 carriers); tests run every path at small sizes.""")

_SELECT_KMAX = 1024

_RADIX_BLOCK = 4096     # 78 bitonic rounds of int32s, 16 per thread at 8 warps; 1 KB of counts per block (radix.py)



@dataclass(frozen=True)
class RowConfig:
    kind: int        # 0 float, 1 signed int, 2 unsigned / bool
    bits: int
    pair: bool       # 64-bit keys: (key, index) pairs instead of packed keys
    short: bool      # the whole row sorts in registers
    n_pow: int       # positions per program (short: the padded row; long: the block)
    br: int          # rows per program (short)
    warps: int
    radix: bool = False     # long rows: LSD radix passes (else block sort + merge passes)


def _kind(dt: DType) -> int:
    if dt.is_floating:
        return 0
    return 2 if dt in (DType.u8, DType.bool) else 1


def row_config(R: int, n: int, dt: DType) -> RowConfig:
    bits = dt.itemsize * 8
    pair = bits == 64
    nmax = _FORCE.get("nmax", 4096 if pair else 8192)
    np2 = next_power_of_2(max(n, 1))
    short = np2 <= nmax
    radix = not short and _FORCE.get("radix", bits <= 32)     # (module doc: 64-bit keys keep the merge passes)
    if short:
        tile = _FORCE.get("tile", 1024)
        br = max(1, min(next_power_of_2(max(R, 1)), tile // np2))
    else:       # a block of the radix passes or of the block sort
        br, np2 = 1, _FORCE.get("radix_block", min(_RADIX_BLOCK, max(nmax, 1))) if radix else max(nmax, 1)
    return RowConfig(_kind(dt), bits, pair, short, np2, br, _FORCE.get("warps", 8 if np2 * br >= 4096 else 4), radix)


def sort_ws_bytes(R: int, n: int, dt: DType) -> int:
    """Workspace of a long-row sort: the radix path's count tables and (value, int32 position) ping-pong buffers
    (:func:`_radix_layout`), or the merge path's two buffers of (int64 key, int32 position) per element."""
    c = row_config(R, n, dt)
    if c.short:
        return 0
    if c.radix:
        return sum(_radix_layout(R, n, c))
    return 2 * sum(_ws_half(R * n))


def _radix_layout(R: int, n: int, c: RowConfig) -> list[int]:
    """Bytes of the radix path's workspace regions (each aligned): counts (int32 [R, 256, blocks]), totals (int32
    [R, 256]), then per ping-pong buffer the values (x's dtype) and positions (int32); passes - 1 buffers, at most 2.
    f32 rows: 16 B per element + 1 KB per 4096-element block; bf16: 6 B; uint8 / int8 / bool: the tables only."""
    nb = cdiv(n, c.n_pow)
    parts = [_align(R * DIGITS * nb * 4), _align(R * DIGITS * 4)]
    for _ in range(min(c.bits // 8 - 1, 2)):
        parts += [_align(R * n * (c.bits // 8)), _align(R * n * 4)]
    return parts


def _ws_half(count: int) -> tuple[int, int]:
    """Bytes of one buffer's key and position regions (each aligned)."""
    return _align(count * 8), _align(count * 4)


def net_layout(t, stride: int, warps: int, permute: bool = True, n: int | None = None, bits: int = 64) -> dict:
    """The register network's layout constants for a kernel at ``warps`` warps whose tile is loaded from t (rows
    ``stride`` elements apart): LV, log2 of the elements per load vector (16 bytes when the base pointer and the
    row stride are 16-aligned: Triton's divisibility specialisation; else one element), by which the network
    permutes its hypercube (network.cube_order; -1: no permutation, also when not ``permute``); LW = log2(warps);
    XW, cross-warp exchanges by tl.gather; FC, packed keys as int32 carriers (network.to_carrier: keys of ``bits``
    <= 16 in rows of ``n`` < 2^16 positions, so that no real key is the padding; n None: off).  Speed only: any
    value sorts correctly.  forced(lv=...) / forced(xw=False) / forced(fc=False) override them for A/B runs."""
    if not permute:
        lv = -1
    elif "lv" in _FORCE:
        lv = _FORCE["lv"]
    elif t.data_ptr() % 16 or stride % 16:
        lv = 0
    else:
        lv = (16 // t.element_size()).bit_length() - 1
    fc = n is not None and n < 2 ** 16 and bits <= 16 and _FORCE.get("fc", True)
    return dict(LV=lv, LW=warps.bit_length() - 1, XW=_FORCE.get("xw", True), FC=fc)


def _bits_view(t):
    return t.view(torch.uint8) if t is not None and t.dtype == torch.bool else t


def sort_rows(x2, v, i, K: int, descending: bool, ws) -> None:
    """Write the first K entries of each sorted row of x2 ([R, n], contiguous rows) to v / i ([R, >= K] with
    contiguous rows; either may be None).  ws: a uint8 tensor of at least sort_ws_bytes bytes (long rows)."""
    R, n = x2.shape
    if R == 0 or n == 0 or K == 0:
        return
    dt = as_dtype(x2.dtype)
    c = row_config(R, n, dt)
    x2, v = _bits_view(x2), _bits_view(v)
    if c.radix:
        _radix_rows(x2, v, i, K, descending, ws, c)
        return
    sv = v.stride(0) if v is not None else 0
    si = i.stride(0) if i is not None else 0
    vv = v if v is not None else x2
    ii = i if i is not None else x2
    flags = dict(KIND=c.kind, BITS=c.bits, DESC=descending, PAIR=c.pair, num_warps=c.warps,
                 **net_layout(x2, x2.stride(0), c.warps, n=n, bits=c.bits))
    if c.short:
        _rows_kernel[(cdiv(R, c.br), 1)](x2, vv, ii, x2, x2, R, n, K, x2.stride(0), sv, si, N=c.n_pow,
                                         LN=c.n_pow.bit_length() - 1, BR=c.br, LR=c.br.bit_length() - 1,
                                         BLOCK=False, STORE_V=v is not None, STORE_I=i is not None, **flags)
        return
    kbytes, ibytes = _ws_half(R * n)
    bufs = []
    for b in range(2):
        base = ws.reshape(-1)[b * (kbytes + ibytes):(b + 1) * (kbytes + ibytes)]
        bufs.append((base[:R * n * 8].view(torch.int64), base[kbytes:kbytes + R * n * 4].view(torch.int32)))
    (k0, i0), (k1, i1) = bufs
    _rows_kernel[(R, cdiv(n, c.n_pow))](x2, vv, ii, k0, i0, R, n, K, x2.stride(0), sv, si, N=c.n_pow,
                                        LN=c.n_pow.bit_length() - 1, BR=1, LR=0, BLOCK=True, STORE_V=False,
                                        STORE_I=False, **flags)
    T = _FORCE.get("tile", 1024)
    L = c.n_pow
    src, dst = (k0, i0), (k1, i1)
    while L < n:
        final = 2 * L >= n
        _merge_kernel[(R, cdiv(n, T))](x2, vv, ii, src[0], src[1], dst[0], dst[1], R, n, K, L, L.bit_length(),
                                       x2.stride(0), sv, si, T=T, PAIR=True, FINAL=final,
                                       STORE_V=v is not None, STORE_I=i is not None, num_warps=4)
        src, dst = dst, src
        L *= 2


def _radix_rows(x2, v, i, K: int, descending: bool, ws, c: RowConfig) -> None:
    """The LSD radix sort of x2's rows (radix.py): per 8-bit digit, least significant first, a block histogram, a
    scan of the counts and a stable scatter; the first pass reads x2, the last writes v / i (first K entries)."""
    R, n = x2.shape
    B = c.n_pow
    nb = cdiv(n, B)
    regions, at = [], 0
    for b in _radix_layout(R, n, c):
        regions.append(ws.reshape(-1)[at:at + b])
        at += b
    cnt = regions[0][:R * DIGITS * nb * 4].view(torch.int32)
    tot = regions[1][:R * DIGITS * 4].view(torch.int32)
    bufs = [(regions[r][:R * n * x2.element_size()].view(x2.dtype), regions[r + 1][:R * n * 4].view(torch.int32))
            for r in range(2, len(regions), 2)]
    ch = min(next_power_of_2(nb), 1024)
    dg = min(DIGITS, 4096 // ch)          # the scan's [digits, blocks] tile: 4096 counts
    vv = v if v is not None else x2
    ii = i if i is not None else x2
    keys = dict(KIND=c.kind, BITS=c.bits, DESC=descending)
    src, spos, ssr = x2, cnt, x2.stride(0)
    passes = c.bits // 8
    for p in range(passes):
        last = p == passes - 1
        dv, dpos = (x2, cnt) if last else bufs[p % 2]
        _radix_hist_kernel[(R * nb,)](src, cnt, n, nb, ssr, 8 * p, B=B, **keys, num_warps=c.warps)
        _radix_scan_kernel[(R * (DIGITS // dg),)](cnt, tot, nb, cdiv(nb, ch), DG=dg, CH=ch, num_warps=4)
        _radix_scatter_kernel[(R * nb,)](src, spos, dv, dpos, vv, ii, cnt, tot, n, K, nb, ssr,
                                         v.stride(0) if v is not None else 0, i.stride(0) if i is not None else 0,
                                         8 * p, B=B, LB=B.bit_length() - 1, **keys, FIRST=p == 0, LAST=last,
                                         STORE_V=v is not None, STORE_I=i is not None, num_warps=c.warps,
                                         **net_layout(src, ssr, c.warps))
        src, spos, ssr = dv, dpos, n


def topk_rows(x2, v, i, k: int, largest: bool, ws) -> None:
    """The k first entries of each row's sort (descending when largest) into v / i ([R, >= k]).  Paths: the
    threshold filter (+ the radix select gated to the rows it flags; ws: topk_ws_bytes, allocated here when None),
    the radix select, the chunked walk; k > kmax: the full sort (kernels.py's docstring)."""
    R, n = x2.shape
    if R == 0 or k == 0:
        return
    kmax = _FORCE.get("kmax", 4096)
    if k > kmax:
        sort_rows(x2, v, i, k, largest, ws)
        return
    dt = as_dtype(x2.dtype)
    c = row_config(R, n, dt)
    xb, vb = _bits_view(x2), _bits_view(v)
    filt = uses_filter(n, k, dt)
    if filt or uses_select(n, k, dt):
        kp = next_power_of_2(k)
        ch = _FORCE.get("select_chunk", 2048)
        lo = -(1 << c.bits) if (c.kind == 2 and largest) else 0 if c.kind == 2 else -(1 << (c.bits - 1))
        flags = xb
        if filt:        # the filter, then the radix select for the rows it flagged (on the device: no host sync)
            M, C = filter_shape(n, k, c.bits)
            if ws is None:      # (direct callers: bench probes)
                ws = torch.empty(topk_ws_bytes(R, n, k, dt), dtype=torch.uint8, device=x2.device)
            buf, flags = _filter_bufs(ws, R, C)
            fw = _FORCE.get("filter_warps", 8 if M >= 2048 else 4)
            threshold_filter(xb, vb, i, buf, flags, k, lo, M, C, c.kind, c.bits, largest,
                             fw, _FORCE.get("filter_gather", _FILTER_GATHER.get((c.bits, C), 1024)),
                             net_layout(i, i.stride(0), fw, n=n, bits=c.bits))
        sw = _FORCE.get("select_warps", 4)
        _select_kernel[(R,)](xb, vb, i, flags, R, n, k, cdiv(n, ch), xb.stride(0), vb.stride(0), i.stride(0), lo,
                             CH=ch, KP=kp, LKP=kp.bit_length() - 1, KIND=c.kind, BITS=c.bits, DESC=largest,
                             GATED=filt, num_warps=sw, **net_layout(i, i.stride(0), sw, n=n, bits=c.bits))
        return
    C = max(next_power_of_2(k), min(next_power_of_2(n), _FORCE.get("chunk", 1024)))
    warps = 8 if C >= 1024 else 4     # (C = 1024 at 4 warps: 8 B of stack on sm_90)
    _topk_kernel[(R,)](xb, vb, i, R, n, k, cdiv(n, C), xb.stride(0), vb.stride(0), i.stride(0), C=C,
                       LC=C.bit_length() - 1, KIND=c.kind, BITS=c.bits, DESC=largest, PAIR=c.pair,
                       num_warps=warps,        # (pairs: spills when permuted)
                       **net_layout(xb, xb.stride(0), warps, permute=not c.pair, n=n, bits=c.bits))


def uses_select(n: int, k: int, dt: DType) -> bool:
    """topk's radix select (kernels.py): keys of <= 32 bits, k <= 1024, and a row of at least 4 next_pow2(k)
    positions (a shorter row sorts whole at about the cost of sorting the k candidates)."""
    ok = dt.itemsize <= 4 and 0 < k <= _SELECT_KMAX
    return ok and _FORCE.get("select", n >= max(4 * next_power_of_2(k), 2048))


def uses_filter(n: int, k: int, dt: DType) -> bool:
    """topk's threshold filter (topk_filter.py; the radix select finishes the rows it flags): by default where the
    select would run, on 16- and 32-bit keys (8-bit keys have 256 values: a long row ties ~n / 256 elements at the
    threshold and overflows the survivor slots; their select is one histogram pass)."""
    ok = dt.itemsize <= 4 and 0 < k <= min(_SELECT_KMAX, _FORCE.get("kmax", 4096))
    return ok and _FORCE.get("filter", dt.itemsize >= 2 and n >= max(4 * next_power_of_2(k), 2048))


# the threshold filter's chunks M per row by next_pow2(k), for 16-bit and 32-bit keys: the fastest of 2048 / 4096 /
# 8192 on [8192, 32768] random rows (H200, bench/topk_m_sweep.py, session 13 run E; ms at M = 2048 / 4096 / 8192:
# bf16 k = 8 0.37 / 0.43 / 0.67, k = 1024 2.29 / 1.79 / 1.61; f32 k = 8 0.49 / 0.62 / 0.95, k = 512 1.21 / 1.42 /
# 1.94, k = 1024 2.13 / 2.20 / 2.99).  Fewer chunks read the chunk bests faster; more keep fewer survivors.  bf16
# k = 1024 takes 8192 although its kernel then keeps 16 B of stack on 8 warps: 1.375 ms against 1.551 at 4096 in
# three alternating rounds (H200, bench/topk_m_ab.py, session 16 run F; torch.topk 2.231); the 16-warp form (93
# registers, no stack) took 2.02 ms (bench/topk_warps_ab.py, run A).
_FILTER_M = {16: ((128, 2048), (512, 4096), (1024, 8192)), 32: ((128, 2048), (256, 4096), (1024, 2048))}
# pass 2's lanes per step where not 1024: 16-bit keys with 2048 survivor slots (512 < k <= 1024), whose rows hold
# 1025-2048 survivor chunks (bf16 ties at the bound): 2 steps of 2 tiles instead of 4 of 1, 1240 -> 1199 us at
# [8192, 32768] k = 1024, and 8 B of stack on sm_90 instead of 16 (H200, session 17 run D; 32-bit keys went
# 1889 -> 2862 us that way, and k = 256 527 -> 1194 with more lanes than slots)
_FILTER_GATHER = {(16, 2048): 4096}


def filter_shape(n: int, k: int, bits: int = 16) -> tuple[int, int]:
    """(M chunks, C survivor slots) per row of the threshold filter, powers of 2: M from _FILTER_M by next_pow2(k)
    and the key's bits (at most the row's next_pow2, at least next_pow2(k)); C = max(2 next_pow2(k), 256): random
    rows of 32768 keep ~1.15 k survivors at M = 4096 (a chunk of 8 holds a survivor with probability p:
    M (1 - (1 - p)^8) = k; survivors 8 M p ~ 1.15 k at k = M / 4)."""
    kp = next_power_of_2(k)
    m = next((m for top, m in _FILTER_M[16 if bits <= 16 else 32] if kp <= top), 8192)
    M = max(kp, min(next_power_of_2(n), _FORCE.get("filter_chunks", m)))
    return M, _FORCE.get("filter_cap", max(2 * kp, 256))


def topk_ws_bytes(R: int, n: int, k: int, dt: DType) -> int:
    """Workspace of a topk of k <= kmax: the threshold filter's C int32 survivor slots and one int32 flag per row."""
    if R == 0 or not uses_filter(n, k, dt):
        return 0
    return _align(R * filter_shape(n, k)[1] * 4) + _align(R * 4)


def _filter_bufs(ws, R: int, C: int):
    base = ws.reshape(-1)
    slots = _align(R * C * 4)
    return base[:R * C * 4].view(torch.int32), base[slots:slots + R * 4].view(torch.int32)


def moved(t, dim):
    """t with dim last, as [rows, n] with contiguous rows (a view when possible)."""
    t = t.reshape(t.shape or (1,)).movedim(dim, -1)
    return t.reshape(math.prod(t.shape[:-1]), t.shape[-1])


def rows_target(out, dim):
    """(target [rows, m] with contiguous rows, finish()): out itself when it is contiguous along dim."""
    o = out.reshape(out.shape or (1,)).movedim(dim, -1)
    if o.is_contiguous():
        return o.view(math.prod(o.shape[:-1]), o.shape[-1]), (lambda: None)
    tmp = torch.empty(o.shape, dtype=out.dtype, device=out.device)

    def finish():
        o.copy_(tmp)
    return tmp.view(math.prod(o.shape[:-1]), o.shape[-1]), finish


def _dim(desc):
    return 0 if desc.op == "msort" else desc.attr("dim")


def _workspace(desc) -> int:
    x = desc.inputs[0]
    R, n = row_geometry(x.shape, _dim(desc))
    if desc.op == "topk" and desc.attr("k") <= _FORCE.get("kmax", 4096):
        return topk_ws_bytes(R, n, desc.attr("k"), x.dtype)
    return sort_ws_bytes(R, n, x.dtype)


def _run_sort(desc, inputs, outputs, ws):
    dim = _dim(desc)
    x = inputs[0]
    x2 = moved(x, dim).contiguous()
    targets = [rows_target(o, dim) for o in outputs]
    if desc.op == "argsort":
        v, i = None, targets[0][0]
    else:
        v, i = targets[0][0], targets[1][0]
    if desc.op == "topk":      # (a 0-d input keeps its one value even for k = 0, as torch)
        topk_rows(x2, v, i, i.shape[1], desc.attr("largest"), ws)
    else:
        descending = desc.attr("descending") if desc.op != "msort" else False
        sort_rows(x2, v, i, x2.shape[1], descending, ws)
    for _, finish in targets:
        finish()


@fast_kernel
def _scatter_kernel(g_ptr, idx_ptr, out_ptr, flag_ptr, m, size, sg, sx, so, T: tl.constexpr):
    """out[row, idx[row, j]] = g[row, j] (distinct indices); an out-of-range index is not written, it is stored
    in the flag word (never 0: size >= m, so a row with entries has size >= 1 and 0 is in range)."""
    row = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1) * T + tl.arange(0, T)
    msk = p < m
    idx = tl.load(idx_ptr + row * sx + p, mask=msk, other=0)
    g = tl.load(g_ptr + row * sg + p, mask=msk, other=0)
    ok = msk & (idx >= 0) & (idx < size)
    tl.store(out_ptr + row * so + idx, g, mask=ok)
    tl.store(flag_ptr + tl.zeros([T], tl.int32), idx, mask=msk & (ok == 0))


def _bind_bw(desc, pref=None):
    size = desc.attr("size")

    def error(v):
        return InvalidProblemError("sort_backward", "indices", f"values in [0, {size - 1}] (dim {desc.attr('dim')} "
                                                              f"has size {size})", int(v))

    def run(desc_, inputs, outputs, ws):
        flag = ws.reshape(-1)[:8].view(torch.int64)
        flag.zero_()
        _run_bw(desc, inputs, outputs, flag)
        flagged(flag, pref, error)
    return run


def _run_bw(desc, inputs, outputs, flag):
    dim = desc.attr("dim")
    g2 = moved(inputs[0], dim).contiguous()
    i2 = moved(inputs[1], dim).contiguous()
    (o2, finish) = rows_target(outputs[0], dim)
    o2.zero_()
    R, m = g2.shape
    if R and m:
        _scatter_kernel[(R, cdiv(m, 1024))](g2, i2, o2, flag, m, desc.attr("size"), g2.stride(0), i2.stride(0),
                                            o2.stride(0), T=1024, num_warps=4)
    finish()


def _route(desc, pref=None):
    if desc.op == "sort_backward":
        return "triton:sort_backward:scatter"
    x = desc.inputs[0]
    R, n = row_geometry(x.shape, _dim(desc))
    c = row_config(R, n, x.dtype)
    key = "pairs" if c.pair else "packed"
    if desc.op == "topk" and uses_filter(n, desc.attr("k"), x.dtype):
        return "triton:topk:threshold-filter"
    if desc.op == "topk" and uses_select(n, desc.attr("k"), x.dtype):
        return f"triton:topk:radix-select-{x.dtype.itemsize}x8bit"
    if desc.op == "topk" and desc.attr("k") <= _FORCE.get("kmax", 4096):
        return f"triton:topk:chunked-bitonic-{key}"
    if c.radix:
        return f"triton:{desc.op}:block{c.n_pow}+radix{c.bits // 8}x8bit"
    path = f"registers{c.br}x{c.n_pow}" if c.short else f"block{c.n_pow}+merge"
    return f"triton:{desc.op}:{path}-{key}"


for _op in ("sort", "argsort", "msort", "topk"):
    register_triton(_op, _run_sort, route=_route, workspace=_workspace)
register_triton("sort_backward", lambda d, i, o, ws: _bind_bw(d)(d, i, o, ws), route=_route,
                workspace=lambda d: 8, bind=_bind_bw)
