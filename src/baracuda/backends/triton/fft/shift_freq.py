"""fftshift / ifftshift as the layout family's roll (its public ``run_view``: one index-mapped copy, two block copies
for one dim; a complex tensor rolled as its (..., 2) real view), and fftfreq / rfftfreq: one kernel writing
(k - n if k >= wrap else k) * scale, in f64 for f64 outputs and f32 else (torch multiplies in the output dtype)."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...._core.dtypes import DType
from ...._core.spec import Descriptor, TensorSpec
from ....ops.fft_shift import freq_terms, shift_amounts
from .._lib.geometry import cdiv
from .._lib.interp import INTERPRETING, f64_arg
from .._lib.register import register_triton
from ..layout.index_maps import rank_ok, run_view

_BLOCK = 1024
_REAL = {DType.c64: DType.f32, DType.c128: DType.f64}


def _roll_desc(desc) -> Descriptor:
    shifts, dims = shift_amounts(desc)
    x = desc.inputs[0]
    shape, dt = (x.shape + (2,), _REAL[x.dtype]) if x.dtype in _REAL else (x.shape, x.dtype)
    attrs = {"shifts": shifts, "dims": dims} if dims else {"shifts": (0,)}
    return Descriptor.make("roll", TensorSpec(shape, dt), **attrs)


def _run_shift(desc, inputs, outputs, ws):
    x, out = inputs[0], outputs[0]
    if x.is_complex():
        x, out = torch.view_as_real(x.resolve_conj()), torch.view_as_real(out)
    run_view(_roll_desc(desc), [x], [out], ws)


def _shift_supports(desc):
    return rank_ok(_roll_desc(desc))


@triton.jit
def _freq_kernel(out_ptr, n, wrap, full, scale: tl.float64, CT: tl.constexpr, INTERP: tl.constexpr,
                 BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    k = tl.where(offs >= wrap, offs - full, offs)
    v = k.to(CT) * f64_arg(scale, CT, INTERP)
    tl.store(out_ptr + offs, v.to(out_ptr.dtype.element_ty), mask=offs < n)


def _run_freq(desc, inputs, outputs, ws):
    out = outputs[0]
    n, wrap, scale = freq_terms(desc)
    if n == 0:
        return
    tmp = out if out.is_contiguous() else torch.empty_like(out, memory_format=torch.contiguous_format)
    ct = tl.float64 if out.dtype == torch.float64 else tl.float32
    _freq_kernel[(cdiv(n, _BLOCK),)](tmp, n, wrap, desc.attr("n"), float(scale), CT=ct, INTERP=INTERPRETING,
                                      BLOCK=_BLOCK)
    if tmp is not out:
        out.copy_(tmp)


for _op in ("fftshift", "ifftshift"):
    register_triton(_op, _run_shift, supports=_shift_supports, route="triton:layout_move (roll)")
for _op in ("fftfreq", "rfftfreq"):
    register_triton(_op, _run_freq, route="triton:fftfreq")
