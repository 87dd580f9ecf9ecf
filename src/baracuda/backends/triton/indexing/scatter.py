"""scatter / scatter_add / scatter_reduce / put plans: the host side of kernels.py's index map.

Assignment: out = input (one copy), then one launch storing src's bits at the indexed targets.  Reductions run in
an accumulator: ``out`` itself when its dtype is the accumulator's (f32 / f64 / int64 sums: atomics straight into
the output), else the workspace (f32 for the half types, int64 for the narrow integers and bool), initialized from
input; include_self=False first stores the reduction's identity at every target (a launch of its own, so every
mark lands before any value); mean counts the values per target in an int32 workspace (atomic +1) and divides
at the end (floor division for integers, as torch); prod / amax / amin run compare-and-swap loops on the
accumulator's bits.  Workspace: [0, 8) the out-of-range flag, then the accumulator (numel + 1 elements of its dtype,
rounded up to 8 bytes: the last is the CAS loops' dummy word), then the counts (numel int32).

Precision: float sums / means / products depend on the order the atomics land in (deterministic=False);
integer / bool reductions and amax / amin are exact; an assignment with duplicate targets keeps one of their
values, which one depending on scheduling (deterministic=False as well, as torch says of its scatter).
``PlanPreference(require_deterministic=True)`` selects the sequential kernel instead (``_scatter_seq``: each
program owns a set of index columns and walks dim in order with plain loads / stores; bit-stable, the last
duplicate wins; parallel over the columns only, so a flat put or a scatter along a long dim with few columns is
slow there).

A row index -- one index per position along ``dim``, broadcast (stride 0) over every other dim and covering the
output there, as ``idx[:, None].expand(-1, D)`` and gather's backward pass it -- is index_add / index_reduce /
index_copy in disguise.  An f32 / f64 sum (scatter_add, scatter_reduce='sum' with include_self) runs index_add's
atomic row kernel: each source row added to its output row by vectorized atomics into the output, at L2's rate
(16M rows x 64 f32 into [65536, 64]: 3.81 ms by the sorted segments, whose sort of the 16M indices alone took
longer than the adds; H200, session 17).  Every other mode, and a sum under require_deterministic, runs their
sorted-segment kernel (``indexing_index/rows.py``), which folds each output row's sources in index order in the
accumulator and writes every output row once: no atomics (deterministic, the last duplicate wins for an
assignment, as the sequential kernel), no accumulator workspace, and an input that is a broadcast zero (a
backward's) is never read from memory.  Half types stay there too (their sums are folded in f32 and rounded once,
as the non-row path's f32 accumulator; half atomics would round every partial sum).  Integer means stay on the
atomic path (torch sums them in the narrow dtype, which wraps; the fold sums in int64).
"""
from __future__ import annotations

import torch

from ...._core.dtypes import DType
from ...._core.sku import MathPrecision, PrecisionGuarantee
from ....ops.indexing_index import dim_geometry
from ....ops.indexing_scatter import scatter_mode
from .._lib.register import register_triton
from ..indexing_index.rows import apply_rows, decode_flag
from .gather import _supports, flag_of
from .kernels import (ADD, AMAX, AMIN, ASSIGN, COUNT, MARK, PROD, int_view, launch_index_map, launch_scatter_seq,
                      raise_index_flag)

_CAS = {"prod": PROD, "amax": AMAX, "amin": AMIN}


def acc_dtype(dt: DType) -> torch.dtype:
    if dt == DType.f64:
        return torch.float64
    if dt.is_floating:
        return torch.float32
    return torch.int64


def _identity(reduce, acc_t):
    if reduce in ("sum", "mean"):
        return 0
    if reduce == "prod":
        return 1
    lo, hi = (-float("inf"), float("inf")) if acc_t.is_floating_point else (-2 ** 63, 2 ** 63 - 1)
    return lo if reduce == "amax" else hi


def _numel(desc):
    n = 1
    for s in desc.inputs[0].shape:
        n *= s
    return n


def _acc_bytes(desc) -> int:
    """The accumulator's bytes (numel + 1 words: the last is the CAS loops' dummy), rounded up to 8."""
    n = _numel(desc)
    size = acc_dtype(desc.dtype).itemsize
    return -(-size * (n + 1) // 8) * 8


def _workspace(desc):
    reduce, _ = scatter_mode(desc)
    if reduce is None:
        return 8
    return 8 + _acc_bytes(desc) + (4 * _numel(desc) if reduce == "mean" else 0)


def _sequential(desc, pref) -> bool:
    """PlanPreference(require_deterministic=True) and a mode whose atomic result depends on their order (float
    sums / means / products, assignments): the sequential-walk kernel instead."""
    reduce, _ = scatter_mode(desc)
    return bool(pref is not None and pref.require_deterministic) and reduce not in ("amax", "amin")


def _precision(desc, pref=None):
    reduce, _ = scatter_mode(desc)
    dt = desc.dtype
    exact = reduce in ("amax", "amin") or (reduce is not None and not dt.is_floating) or _sequential(desc, pref)
    acc = DType.f64 if dt == DType.f64 else DType.f32 if dt.is_floating else DType.i64
    math_ = MathPrecision.EXACT if reduce is None or exact else (MathPrecision.F64 if dt == DType.f64
                                                                  else MathPrecision.F32)
    return PrecisionGuarantee(math_, acc, bit_stable=exact, deterministic=exact)


_SEGMENTS = {None: "seg:copy", "sum": "seg:add", "mean": "seg:mean", "prod": "seg:prod", "amax": "seg:amax",
             "amin": "seg:amin"}


def row_index(iv, dim, shape):
    """The 1-D index along ``dim`` (a view) when ``iv`` holds one index per position along dim -- stride 0 or
    extent 1 along every other dim, whose extents are ``shape``'s -- else None."""
    if iv.dim() != len(shape) or iv.numel() == 0:
        return None
    for e, (n, st) in enumerate(zip(iv.shape, iv.stride())):
        if e != dim and (n != shape[e] or (st != 0 and n != 1)):
            return None
    return iv.as_strided((iv.shape[dim],), (iv.stride(dim),))


def _views(desc, x, idx, src, res):
    """(input, index, src, result) views in the scatter's own geometry, dim, size, wrap, what."""
    if desc.op == "put":
        n = x.numel()
        return x.reshape(-1), idx.reshape(-1), src.reshape(-1), res.view(-1), 0, n, True, f"an input of {n} elements"
    dim = desc.attr("dim")
    x1 = x.reshape(x.shape or (1,))
    size = x1.shape[dim]
    s1 = None if src is None else src.reshape(src.shape or (1,))
    return x1, idx.reshape(idx.shape or (1,)), s1, res.view(x1.shape), dim, size, False, \
        f"dimension {dim} of size {size}"


def _bind(desc, pref=None):
    reduce, include_self = scatter_mode(desc)
    value = desc.attr("value") if desc.op == "scatter" else None
    acc_t = acc_dtype(desc.dtype)
    is_float = desc.dtype.is_floating
    seq = _sequential(desc, pref)
    rows_ok = desc.op != "put" and (reduce != "mean" or is_float)
    row_kind = "add" if (reduce == "sum" and include_self and not seq and desc.dtype in (DType.f32, DType.f64)) \
        else _SEGMENTS[reduce]
    consts: dict = {}    # (what, device) -> the 1-element value / identity tensor, made once per plan and device

    def const(what, v, dt, device):
        t = consts.get((what, device))
        if t is None:
            t = consts[(what, device)] = torch.full((1,), v, dtype=dt, device=device)
        return t

    def run(desc_, inputs, outputs, ws):
        x, idx = inputs[:2]
        src = inputs[2] if len(inputs) == 3 else None
        out = outputs[0]
        flag = flag_of(ws)
        res = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        xv, iv, sv, rv, dim, size, wrap, what = _views(desc, x, idx, src, res)
        if sv is None:   # the value form: a 1-element src with zero strides
            sv = const("value", value, x.dtype, x.device)
            sst = (0,) * iv.dim()
        else:
            sst = sv.stride()
        ri = row_index(iv, dim, rv.shape) if rows_ok else None
        if ri is not None:      # index_add / index_reduce / index_copy in disguise (module doc)
            src_rows = sv.reshape(()).expand(iv.shape) if src is None else sv[tuple(slice(0, n) for n in iv.shape)]
            apply_rows(row_kind, rv, xv, ri, src_rows, rv.reshape(-1)[:1], flag, dim_geometry(rv.shape, dim),
                       ri.numel(), False, False, include_self)
            if res is not out:
                out.copy_(res)
            raise_index_flag(desc.op, "index", flag, size, wrap, what, pref, decode=decode_flag)
            return
        geo = dict(dim=dim, size=size, wrap=wrap, shape=iv.shape, idx_strides=iv.stride(), val_strides=sst)
        if reduce is None:
            rv.copy_(xv)
            tst = tuple(0 if d == dim else s for d, s in enumerate(rv.stride()))
            launch = launch_scatter_seq if seq else launch_index_map
            launch(ASSIGN, int_view(sv), iv, int_view(rv), flag, ds=rv.stride(dim), tgt_strides=tst, **geo)
        else:
            _reduce(rv, xv, iv, sv, ws, flag, geo)
        if res is not out:
            out.copy_(res)
        if iv.numel():
            raise_index_flag(desc.op, "index", flag, size, wrap, what, pref)

    def _reduce(rv, xv, iv, sv, ws, flag, geo):
        n = rv.numel()
        dim = geo["dim"]
        cas = reduce in _CAS and not seq
        nb = _acc_bytes(desc)
        words = ws.reshape(-1)[8:8 + nb]
        if rv.dtype == acc_t and not cas:   # atomics straight into the output
            acc = rv
        else:
            acc = words.view(acc_t)[:n + 1 if cas else n]
            acc[n:].zero_()                 # the CAS loops' dummy word
            acc = acc[:n].view(rv.shape)
        acc.copy_(xv)
        ds = acc.stride(dim)
        tst = tuple(0 if d == dim else s for d, s in enumerate(acc.stride()))
        src = int_view(sv) if sv.dtype == torch.bool else sv
        if not include_self:
            ident = const("identity", _identity(reduce, acc_t), acc_t, acc.device)
            launch_index_map(MARK, ident, iv, acc, flag, ds=ds, tgt_strides=tst, **geo)
        if reduce == "mean":
            cnt = ws.reshape(-1)[8 + nb:8 + nb + 4 * n].view(torch.int32).view(rv.shape)
            cnt.zero_()
            launch_index_map(COUNT, src, iv, acc, flag, cnt=cnt, ds=ds, tgt_strides=tst, **geo)
        if seq:
            launch_scatter_seq(PROD if reduce == "prod" else ADD, src, iv, acc, flag, is_float=is_float, ds=ds,
                               tgt_strides=tst, **geo)
        elif cas:
            bits = int_view(words.view(acc_t)[:n + 1])
            launch_index_map(_CAS[reduce], src, iv, bits, flag, cnt=words.view(acc_t)[:n + 1], dummy=n,
                             is_float=is_float, ds=ds, tgt_strides=tst, **geo)
        else:
            launch_index_map(ADD, src, iv, acc, flag, ds=ds, tgt_strides=tst, **geo)
        if reduce == "mean":
            den = (cnt + int(include_self)).clamp_min_(1)
            if acc.is_floating_point():
                acc.div_(den)
            else:   # torch sums in the value dtype (a narrow sum wraps) and floor-divides
                if rv.dtype != acc_t:
                    acc.copy_(acc.to(rv.dtype))
                acc.copy_(torch.div(acc, den, rounding_mode="floor"))
        if acc is not rv:
            rv.copy_(acc if rv.dtype != torch.bool else acc != 0)

    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref=None):
    reduce, include_self = scatter_mode(desc)
    how = "assign" if reduce is None else f"{reduce}-{'cas' if reduce in _CAS else 'atomic'}"
    if _sequential(desc, pref):
        how = ("assign" if reduce is None else reduce) + "-sequential"
    return f"triton:{desc.op}:{how}" + ("" if include_self else "-exclude-self")


for _op in ("scatter", "scatter_add", "scatter_reduce", "put"):
    register_triton(_op, _run, bind=_bind, workspace=_workspace, precision=_precision, route=_route,
                    supports=_supports)
