"""kron on the elementwise template: the output viewed as [a0, b0, a1, b1, ...] is a[i0, i1, ...] * b[j0, j1, ...],
so the template multiplies the operand views [a0, 1, a1, 1, ...] and [1, b0, 1, b1, ...] (stride 0 along the other's
axes): each output element written once, each operand element read from cache, no intermediate.  The template
addresses up to 4 collapsed dimensions; a kron with more than 4 non-unit dimensions in that view (rank > 2 operands)
takes its documented fallback (the operands expanded to the output's shape first): correct, slower, and the route
says so.  Integer and bool operands multiply in int64 (wrapping, narrowed mod 2^bits by the store; bool 0/1 products are
logical and), not in the template's default f32."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ....ops.gemm_forms import kron_shapes
from ..elementwise import launch
from .._lib.register import register_triton


@triton.jit
def _times(a, b, p0, p1):
    return a * b


def _views(a, b, pa, pb):
    return (a.reshape(tuple(x for d in pa for x in (d, 1))), b.reshape(tuple(x for d in pb for x in (1, d))))


def _run(desc, inputs, outputs, ws):
    a, b = inputs
    out = outputs[0]
    pa, pb, inter = kron_shapes(tuple(a.shape), tuple(b.shape))
    target = out if out.is_contiguous() else torch.empty(out.shape, dtype=out.dtype, device=out.device)
    compute = None if desc.dtype.is_floating else tl.int64
    launch(_times, list(_views(a, b, pa, pb)), target.view(inter), compute=compute)
    if target is not out:
        out.copy_(target)


def _route(desc, pref):
    inter = kron_shapes(desc.inputs[0].shape, desc.inputs[1].shape)[2]
    wide = sum(d > 1 for d in inter) > 4
    return "triton:ew(a*b) on [a0,b0,a1,b1,..] broadcast views" + (" (> 4 dims: operands expanded first)" if wide
                                                                   else "")


register_triton("kron", _run, route=_route)
