"""Triton pointwise regression losses (mse / l1 / smooth_l1 / huber) and their backward ops.

Forward: each program reduces BLOCK elements of f(x - y) to one partial in the workspace (or stores f for
reduction='none'); a one-program fold sums the partials in a fixed order (deterministic, no atomics).  Bytes:
2 reads per element (+ 1 write for 'none'), the floor: bf16 16384x4096 = 268 MB, ~0.09 ms at 3 TB/s.
Backward: one pass, grad_in = f'(x - y) * scale.  Inputs are flattened (a non-contiguous one is copied first).
_pw_fold (the partial sums' fixed-order fold) and _flat are shared with loss_pointwise, loss_margin and loss_ctc.
"""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from .._lib.register import register_triton
from ...._core.dtypes import DType
from .ce_kernels import _RED, _fold_sums, _ws_view
from .._lib.launch import fast_kernel
from .._lib.geometry import cdiv

_PW_KIND = {"mse_loss": 0, "l1_loss": 1, "smooth_l1_loss": 2, "huber_loss": 3}
_PW_BLOCK = 4096


@triton.jit
def _pw_f(d, par, KIND: tl.constexpr):
    a = tl.abs(d)
    sgn = tl.where(d > 0, 1.0, tl.where(d < 0, -1.0, 0.0))
    if KIND == 0:
        f = d * d
        fp = 2.0 * d
    elif KIND == 1:
        f = a
        fp = sgn
    elif KIND == 2:   # smooth_l1 (par = beta; beta == 0 is l1: `a < 0` never holds)
        small = a < par
        f = tl.where(small, 0.5 * d * d / tl.where(small, par, 1.0), a - 0.5 * par)
        fp = tl.where(small, d / tl.where(small, par, 1.0), sgn)
    else:             # huber (par = delta)
        small = a < par
        f = tl.where(small, 0.5 * d * d, par * (a - 0.5 * par))
        fp = tl.where(small, d, par * sgn)
    return f, fp


@fast_kernel
def _pw_fw(x_ptr, y_ptr, out_ptr, ws_ptr, prm_ptr, n, KIND: tl.constexpr, NONE: tl.constexpr, F64: tl.constexpr,
           BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    pid = tl.program_id(0).to(tl.int64)
    i = pid * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    d = tl.load(x_ptr + i, mask=m, other=0.0).to(CT) - tl.load(y_ptr + i, mask=m, other=0.0).to(CT)
    f, _ = _pw_f(d, tl.load(prm_ptr), KIND)
    if NONE:
        tl.store(out_ptr + i, f.to(out_ptr.dtype.element_ty), mask=m)
    else:
        tl.store(ws_ptr + pid, tl.sum(tl.where(m, f, 0.0), 0))


@fast_kernel
def _pw_fold(ws_ptr, out_ptr, nparts, n, MEAN: tl.constexpr, F64: tl.constexpr, BLOCK: tl.constexpr):
    """One program: sum of the nparts partials in a fixed order (divided by n for the mean)."""
    total, _w = _fold_sums(ws_ptr, nparts, False, tl.float64 if F64 else tl.float32, BLOCK)
    if MEAN:
        total = total / n
    tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))


@fast_kernel
def _pw_bw(g_ptr, x_ptr, y_ptr, dx_ptr, prm_ptr, n, KIND: tl.constexpr, RED: tl.constexpr, F64: tl.constexpr,
           BLOCK: tl.constexpr):
    CT: tl.constexpr = tl.float64 if F64 else tl.float32
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    d = tl.load(x_ptr + i, mask=m, other=0.0).to(CT) - tl.load(y_ptr + i, mask=m, other=0.0).to(CT)
    _, fp = _pw_f(d, tl.load(prm_ptr), KIND)
    tl.store(dx_ptr + i, (fp * _upstream(g_ptr, i, m, n, RED, CT)).to(dx_ptr.dtype.element_ty), mask=m)


@triton.jit
def _upstream(g_ptr, i, m, div, RED: tl.constexpr, CT: tl.constexpr):
    """The upstream gradient of elementwise loss terms i: per element (RED 0, reduction='none'), the scalar
    (1, 'sum') or the scalar / div (2, 'mean')."""
    if RED == 0:
        return tl.load(g_ptr + i, mask=m, other=0.0).to(CT)
    elif RED == 1:
        return tl.load(g_ptr).to(CT)
    else:
        return tl.load(g_ptr).to(CT) / div


def _pw_workspace(desc) -> int:
    if desc.op.endswith("_backward") or desc.attr("reduction") == "none":
        return 0
    n = desc.inputs[-1].numel
    return max(1, cdiv(n, _PW_BLOCK)) * (8 if desc.inputs[-1].dtype == DType.f64 else 4)


def _pw_bind(desc, pref=None):
    base = desc.op.replace("_backward", "")
    bw = desc.op.endswith("_backward")
    kind = _PW_KIND[base]
    f64 = desc.inputs[-1].dtype == DType.f64
    n = desc.inputs[-1].numel
    red = desc.attr("reduction")
    par = desc.attr_dict.get("beta", desc.attr_dict.get("delta", 0.0))
    nparts = cdiv(n, _PW_BLOCK)
    params: dict = {}

    def prm_of(dev):   # beta / delta in the compute dtype (a Python float argument would be typed f32)
        p = params.get(dev)
        if p is None:
            p = params[dev] = torch.full((1,), par, dtype=torch.float64 if f64 else torch.float32, device=dev)
        return p

    def run(desc_, inputs, outputs, ws):
        out = outputs[0]
        x, y = _flat(inputs[-2]), _flat(inputs[-1])
        tgt = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
        prm = prm_of(x.device)
        if bw:
            if n:
                g = _flat(inputs[0]) if red == "none" else inputs[0]
                _pw_bw[(nparts,)](g, x, y, tgt, prm, n, KIND=kind, RED=_RED[red], F64=f64, BLOCK=_PW_BLOCK,
                                  num_warps=8)
        elif red == "none":
            if n:
                _pw_fw[(nparts,)](x, y, tgt, x, prm, n, KIND=kind, NONE=True, F64=f64, BLOCK=_PW_BLOCK, num_warps=8)
        else:
            w = _ws_view(ws, f64)
            if n:
                _pw_fw[(nparts,)](x, y, tgt, w, prm, n, KIND=kind, NONE=False, F64=f64, BLOCK=_PW_BLOCK, num_warps=8)
            _pw_fold[(1,)](w, tgt, nparts, n, MEAN=red == "mean", F64=f64, BLOCK=1024, num_warps=4)
        if tgt is not out:
            out.copy_(tgt)

    return run


def _flat(t):
    """A unit-stride 1-D view of t (a copy when t is not dense)."""
    f = t.reshape(-1)
    return f if f.numel() <= 1 or f.stride(0) == 1 else f.contiguous()


def _pw_run(desc, inputs, outputs, ws):
    _pw_bind(desc)(desc, inputs, outputs, ws)


for _base in _PW_KIND:
    for _op in (_base, f"{_base}_backward"):
        register_triton(_op, _pw_run, workspace=_pw_workspace, bind=_pw_bind,
                        route=lambda d, p: f"triton:{d.op}:flat{_PW_BLOCK}"
                        + ("" if d.op.endswith("_backward") or d.attr("reduction") == "none" else "+fold"))
