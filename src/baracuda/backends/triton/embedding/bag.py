"""embedding_bag and embedding_bag_backward plans (kernels.py).

Forward: one program per (bag, 128 columns) folds its tokens (sum / mean / max with the first maximum's row id);
max_norm: the tokens' factors first (``_row_scales``), and the renormalised rows written as the third output.
Backward: ``_bag_prep`` gives every token its bag and weight (per_sample_weights, 1 / kept count for mean, 0 for
padding), then the token rows are summed by id exactly as embedding's backward (atomic or sorted, runs.py);
max mode scatters grad[b, j] to row max_indices[b, j] by float atomics (f32 / f64, determinism not required), or
folds each row's tokens (kernels.MAXBAG: a bag counted once per row) on the sorted route.
"""
from __future__ import annotations

import torch

from ...._core.dtypes import DType
from ....ops.embedding import bad_index_error
from ...._core.checks import flagged
from ...._core.errors import InvalidProblemError
from .._lib.geometry import cdiv
from .._lib.binding import run_of
from .._lib.register import register_triton
from . import kernels as K
from .runs import BD, BT, INTERP, tiles, Workspace, atomic_route, ct, fold, precision, runs_layout, scatter, sort_runs

_MODES = {"sum": 0, "mean": 1, "max": 2}


def _raise(op, flag, v, n, pref):
    flagged(flag[0:1], pref, lambda x: bad_index_error(op, "input", x - 1 if x > 0 else x, v))
    flagged(flag[1:2], pref, lambda x: InvalidProblemError(
        op, "offsets", f"a non-decreasing sequence starting at 0 within [0, {n}]", "offsets that are not"))


def _fw_layout(desc) -> Workspace:
    return Workspace().add("flag", 2).add("scale", desc.inputs[0].shape[0])


def _bind_fw(desc, pref=None):
    n = desc.inputs[0].shape[0]
    v, d = desc.inputs[1].shape
    noff = desc.inputs[2].shape[0]
    b = desc.outputs[0].shape[0]
    mode, pad, max_norm = _MODES[desc.attr("mode")], desc.attr("padding_idx"), desc.attr("max_norm")
    lay = _fw_layout(desc)
    wdt = desc.inputs[1].dtype
    c = ct(wdt)
    bd = tiles(d, 512)[1]

    def run(desc_, inputs, outputs, ws):
        ids, w, off = inputs[0].contiguous(), inputs[1], inputs[2].contiguous()
        psw = inputs[3].contiguous() if len(inputs) == 4 else w
        tgts = [o if o.is_contiguous() else torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs]
        out = tgts[0]
        maxi = tgts[1] if mode == 2 else out
        rows = tgts[-1] if max_norm is not None else out
        flag = lay.view(ws, "flag", torch.int64)
        flag.zero_()
        scale = lay.view(ws, "scale", torch.float64 if wdt == DType.f64 else torch.float32)
        if max_norm is not None and n and d:
            p = desc.attr("norm_type")
            K._row_scales[(cdiv(n, BT),)](ids, w, scale, n, v, d, w.stride(0), w.stride(1), max_norm, p,
                                          L2=p == 2.0, CT=c, INTERP=INTERP, BT=BT, BD=BD, num_warps=4)
        if b:
            K._bag_fwd[(b, max(cdiv(d, bd), 1))](ids, off, w, psw, scale, out, maxi, rows, flag, n, noff, v, d,
                                                 w.stride(0), w.stride(1), -1 if pad is None else pad, MODE=mode,
                                                 HAS_PSW=len(inputs) == 4, RENORM=max_norm is not None, CT=c, BD=bd,
                                                 num_warps=4)
        _raise("embedding_bag", flag, v, n, pref)
        for o, t in zip(outputs, tgts):
            if t is not o:
                o.copy_(t)
    return run


def _bw_layout(desc) -> Workspace:
    n = desc.inputs[1].shape[0]
    return runs_layout(n, desc.attr("num_weights"), Workspace().add("flag", 2).add("srow", n).add("wt", n))


def _atomic(desc, pref):
    return atomic_route(desc, pref, desc.dtype, freq=desc.attr("scale_grad_by_freq"))


def _bind_bw(desc, pref=None):
    n = desc.inputs[1].shape[0]
    noff = desc.inputs[2].shape[0]
    v, d = desc.attr("num_weights"), desc.inputs[0].shape[1]
    b = desc.inputs[0].shape[0]
    mode, pad, freq = desc.attr("mode"), desc.attr("padding_idx"), desc.attr("scale_grad_by_freq")
    padv = -1 if pad is None else pad
    lay = _bw_layout(desc)
    atomic = _atomic(desc, pref)
    c = ct(desc.dtype)
    has_psw = len(desc.inputs) == 5

    def run(desc_, inputs, outputs, ws):
        g, ids, off = inputs[0].contiguous(), inputs[1].contiguous(), inputs[2].contiguous()
        dw = outputs[0]
        tgt = dw if dw.is_contiguous() else torch.empty(dw.shape, dtype=dw.dtype, device=dw.device)
        flag = lay.view(ws, "flag", torch.int64)
        flag.zero_()
        srow = lay.view(ws, "srow", torch.int64)
        wt = lay.view(ws, "wt", torch.float64 if desc.dtype == DType.f64 else torch.float32)
        srow.fill_(-1)
        wt.zero_()
        psw = inputs[3].contiguous() if has_psw else wt
        if b:
            K._bag_prep[(b,)](ids, off, psw, srow, wt, flag, n, noff, v, padv, MEAN=mode == "mean",
                              HAS_PSW=has_psw, BT=128, num_warps=4)
        _raise("embedding_bag_backward", flag, v, n, pref)
        if mode == "max" and atomic:
            tgt.zero_()
            if b and d:
                K._bag_max_bw[(b, cdiv(d, BD))](g, inputs[3].contiguous(), tgt, v, d, padv, CT=c, BD=BD, num_warps=4)
        elif mode == "max":
            perm, offs = sort_runs(ids, v, ws, lay)
            fold(g, tgt, perm, offs, K.MAXBAG, srow=srow, ref=inputs[3].contiguous(), pad=pad)
        elif atomic:
            scatter(g, ids, tgt, srow=srow, wt=wt, pad=pad)
        else:
            perm, offs = sort_runs(ids, v, ws, lay)
            fold(g, tgt, perm, offs, K.SUM, srow=srow, wt=wt, mean=freq, pad=pad)
        if has_psw:
            w = inputs[4] if inputs[4].stride(-1) == 1 else inputs[4].contiguous()
            dp = outputs[1]
            dpt = dp if dp.is_contiguous() else torch.empty(dp.shape, dtype=dp.dtype, device=dp.device)
            if n:
                K._psw_grad[(cdiv(n, BT),)](g, ids, srow, w, dpt, n, v, d, w.stride(0) if d else 0, padv,
                                            ROWS=desc.attr("token_rows"), CT=c, BT=BT, BD=BD, num_warps=4)
            if dpt is not dp:
                dp.copy_(dpt)
        if tgt is not dw:
            dw.copy_(tgt)
    return run


def _route_bw(desc, pref):
    return ("triton:embedding_bag_backward:atomic-f32" if _atomic(desc, pref)
            else "triton:embedding_bag_backward:sorted-segmented(deterministic)")


register_triton("embedding_bag", run_of(_bind_fw), bind=_bind_fw, workspace=lambda desc: _fw_layout(desc).size,
                route=lambda desc, pref=None: f"triton:embedding_bag:{desc.attr('mode')}",
                supports=lambda desc: None if desc.attr("max_norm") is None or desc.attr("norm_type") not in
                (0.0, float("inf"), float("-inf")) else "max_norm with an infinite or zero norm_type",
                precision=lambda desc, pref=None: precision(desc, False))
register_triton("embedding_bag_backward", run_of(_bind_bw), bind=_bind_bw,
                workspace=lambda desc: _bw_layout(desc).size, route=_route_bw,
                precision=lambda desc, pref=None: precision(desc, _atomic(desc, pref)))
