"""segment_sum / mean / prod / max / min and segment_backward plans (kernels.py; routes in runs.py).

Forward: segment_sum over f32 / f64 data with unsorted ids and no determinism required takes float atomics into the
zeroed output (16M x 64 f32 into 1M segments: 4.3 GB read + 0.27 GB of atomics, expected ~1.5-2 ms on the H100).
Everything else takes the sorted runs: ids sorted (skipped for indices_are_sorted=True), one program per
(segment, 128 columns) folds its run in position order: deterministic, and the only way for max / min / prod
(no float atomics there).  Out-of-range ids sort outside every run (dropped, as JAX).

Backward (one kernel per position after the statistics it needs, each a fold over the runs): mean reads the
run lengths; max / min count the ties of each segment's extreme; prod takes the product of the non-zeros and
the count of zeros.
"""
from __future__ import annotations

import torch

from ...._core.dtypes import FLOAT_TYPES, DType
from ....ops.segment import identity_of, segment_geometry
from .._lib.geometry import cdiv
from .._lib.register import register_triton
from . import kernels as K
from .runs import Workspace, tiles, atomic_route, ct, fold, precision, runs_layout, scatter, sort_runs

_MODE = {"sum": K.SUM, "mean": K.SUM, "prod": K.PROD, "max": K.MAX, "min": K.MIN}


def _geo(desc):
    data, ids = (desc.inputs[1], desc.inputs[2]) if desc.op == "segment_backward" else desc.inputs[:2]
    n, d = segment_geometry(data, ids)
    return n, d, desc.attr("num_segments")


def _reduction(desc):
    return desc.attr("reduction") if desc.op == "segment_backward" else desc.op[len("segment_"):]


def _atomic(desc, pref):
    return (desc.op == "segment_sum" and
            atomic_route(desc, pref, desc.dtype, presorted=desc.attr("indices_are_sorted")))


def _layout(desc) -> Workspace:
    n, d, s = _geo(desc)
    lay = runs_layout(n, s)
    if desc.op == "segment_backward" and _reduction(desc) in ("max", "min", "prod"):
        lay.add("aux", s * d, 8).add("aux2", s * d, 8)
    return lay


def _bind(desc, pref=None):
    n, d, s = _geo(desc)
    red = _reduction(desc)
    lay = _layout(desc)
    atomic = _atomic(desc, pref)
    presorted = desc.attr("indices_are_sorted")
    bw = desc.op == "segment_backward"

    def forward(data, ids, out, ws):
        x = data.reshape(n, d)
        if atomic:
            scatter(x, ids, out)
            return
        perm, offs = sort_runs(ids, s, ws, lay, presorted)
        fold(x, out, perm, offs, _MODE[red], mean=red == "mean", ident=float(identity_of(red, desc.dtype)))

    def backward(g, data, ids, y, dx, ws):
        x = data.reshape(n, d).contiguous()
        perm, offs = sort_runs(ids, s, ws, lay, presorted)
        aux = aux2 = offs
        mode = {"sum": 0, "mean": 1, "max": 2, "min": 2, "prod": 3}[red]
        f = torch.float64 if desc.dtype == DType.f64 else torch.float32
        if red in ("max", "min"):
            aux = lay.view(ws, "aux", f)[: s * d].reshape(s, d)
            fold(x, aux, perm, offs, K.TIES, ref=y)
        elif red == "prod":
            aux = lay.view(ws, "aux", f)[: s * d].reshape(s, d)
            aux2 = lay.view(ws, "aux2", f)[: s * d].reshape(s, d)
            fold(x, aux, perm, offs, K.NZPROD, ident=1.0)
            fold(x, aux2, perm, offs, K.ZEROS)
        if n and d:
            bt, bd = tiles(d, 128)
            K._seg_grad[(cdiv(n, bt), cdiv(d, bd))](g, x, ids, offs, y, aux, aux2, dx, n, s, d, x.stride(0),
                                                    MODE=mode, CT=ct(desc.dtype), BT=bt, BD=bd, num_warps=4)

    def run(desc_, inputs, outputs, ws):
        out = outputs[0]
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        if bw:
            g, data, ids, y = inputs
            backward(g.reshape(s, d).contiguous(), data, ids.reshape(-1).contiguous(), y.reshape(s, d).contiguous(),
                     tgt.reshape(n, d), ws)
        else:
            forward(inputs[0], inputs[1].reshape(-1).contiguous(), tgt.reshape(s, d), ws)
        if tgt is not out:
            out.copy_(tgt)
    return run


def _run(desc, inputs, outputs, ws):
    _bind(desc)(desc, inputs, outputs, ws)


def _route(desc, pref):
    if _atomic(desc, pref):
        return f"triton:{desc.op}:atomic-f32"
    return f"triton:{desc.op}:{'presorted' if desc.attr('indices_are_sorted') else 'sorted'}-segmented(deterministic)"


for _op in ("segment_sum", "segment_mean", "segment_prod", "segment_max", "segment_min", "segment_backward"):
    register_triton(_op, _run, bind=_bind, route=_route, workspace=lambda desc: _layout(desc).size,
                    dtypes=frozenset(FLOAT_TYPES),
                    dtypes_note="integer segment reductions run on the reference backend (no Triton kernel yet)",
                    precision=lambda desc, pref=None: precision(desc, _atomic(desc, pref)))
