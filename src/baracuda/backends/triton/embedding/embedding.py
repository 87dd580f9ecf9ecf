"""embedding and embedding_backward plans (kernels.py; the routes in runs.py).

Forward: one program per 32 tokens x 128 columns copies the rows (max_norm: ``_row_scales`` first computes each
token's factor in f32 / f64, and the copy multiplies by it).  Expected on the H100: 16384 rows of 4096 bf16 =
134 MB read + 134 MB written, a copy at ~2.6-2.9 TB/s (~100 us).

Backward (dense [V, D]):
* sorted (deterministic): torch.sort of the 16k ids (stable) + a binary search per row for its run, then one
  program per (row, 128 columns) sums its run in token order and writes every row once (zeros included): the
  128256 x 4096 bf16 bench problem moves 1.05 GB of output + 134 MB of gradient, ~0.4 ms at 3 TB/s; torch's
  sort-based CUDA kernel zero-fills, then sums partial segments, then casts.
* atomic (f32 / f64 outputs, not scale_grad_by_freq, when determinism is not required): zero fill + one float
  atomic add per token element.
"""
from __future__ import annotations

import torch

from ...._core.dtypes import DType
from .._lib.geometry import cdiv
from .._lib.binding import run_of
from .._lib.register import register_triton
from . import kernels as K
from .runs import (BD, BT, INTERP, tiles, Workspace, as_storage, atomic_route, check_ids, ct, fold, precision, raise_flag,
                   rows2d, runs_layout, scatter, sort_runs)


# -- forward --------------------------------------------------------------------------------------------------
def _fw_layout(desc) -> Workspace:
    n = desc.inputs[0].numel
    return Workspace().add("flag", 1).add("scale", n)


def _bind_fw(desc, pref=None):
    v, d = desc.inputs[1].shape
    n = desc.inputs[0].numel
    lay = _fw_layout(desc)
    max_norm, p = desc.attr("max_norm"), desc.attr("norm_type")
    wdt = desc.inputs[1].dtype
    c = ct(wdt)
    bt, bd = tiles(d, 512, 8192)   # 4096 bf16 columns: 16 tokens x 512 columns a program

    def run(desc_, inputs, outputs, ws):
        ids = inputs[0].reshape(-1).contiguous()
        w = as_storage(inputs[1])
        out = outputs[0]
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        flag = lay.view(ws, "flag", torch.int64)
        flag.zero_()
        scale = lay.view(ws, "scale", torch.float64 if wdt == DType.f64 else torch.float32)
        if n and d:
            if max_norm is not None:
                K._row_scales[(cdiv(n, BT),)](ids, w, scale, n, v, d, w.stride(0), w.stride(1), max_norm, p,
                                              L2=p == 2.0, CT=c, INTERP=INTERP, BT=BT, BD=BD, num_warps=4)
            K._emb_fwd[(cdiv(n, bt), cdiv(d, bd))](ids, w, as_storage(tgt), scale, flag, n, v, d, w.stride(0),
                                                   w.stride(1), RENORM=max_norm is not None, CT=c, BT=bt, BD=bd,
                                                   num_warps=4)
            raise_flag("embedding", "input", flag, v, pref)
        elif n:
            check_ids("embedding", "input", ids, v, flag, pref)
        if tgt is not out:
            out.copy_(tgt)
    return run


def _supports_fw(desc):
    if desc.attr("max_norm") is not None and desc.attr("norm_type") in (float("inf"), float("-inf"), 0.0):
        return "max_norm with an infinite or zero norm_type is not implemented in the Triton kernel"
    return None


# -- backward -------------------------------------------------------------------------------------------------
def _bw_layout(desc) -> Workspace:
    n = desc.inputs[1].numel
    return runs_layout(n, desc.attr("num_weights"), Workspace().add("flag", 1))


def _atomic(desc, pref):
    return atomic_route(desc, pref, desc.dtype, freq=desc.attr("scale_grad_by_freq"))


def _bind_bw(desc, pref=None):
    v = desc.attr("num_weights")
    d = desc.inputs[0].shape[-1]
    pad, freq = desc.attr("padding_idx"), desc.attr("scale_grad_by_freq")
    lay = _bw_layout(desc)
    atomic = _atomic(desc, pref)

    def run(desc_, inputs, outputs, ws):
        g, ids = rows2d(inputs[0], d), inputs[1].reshape(-1).contiguous()
        out = outputs[0]
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        flag = lay.view(ws, "flag", torch.int64)
        flag.zero_()
        check_ids("embedding_backward", "indices", ids, v, flag, pref)
        if atomic:
            scatter(g, ids, tgt, pad=pad)
        else:
            perm, offs = sort_runs(ids, v, ws, lay)
            fold(g, tgt, perm, offs, K.SUM, mean=freq, pad=pad)
        if tgt is not out:
            out.copy_(tgt)
    return run


def _route_bw(desc, pref):
    return ("triton:embedding_backward:atomic-f32" if _atomic(desc, pref)
            else "triton:embedding_backward:sorted-segmented(deterministic)")


register_triton("embedding", run_of(_bind_fw), bind=_bind_fw, supports=_supports_fw,
                workspace=lambda desc: _fw_layout(desc).size, route="triton:embedding:row-copy",
                precision=lambda desc, pref=None: precision(desc, False))
register_triton("embedding_backward", run_of(_bind_bw), bind=_bind_bw, workspace=lambda desc: _bw_layout(desc).size,
                route=_route_bw, precision=lambda desc, pref=None: precision(desc, _atomic(desc, pref)))
