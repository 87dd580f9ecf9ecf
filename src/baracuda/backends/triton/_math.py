"""Scalar math shared by the Triton kernels.

On the GPU, transcendental functions go to libdevice (accurate to ~1 ulp in f32).  Triton's interpreter
has no libdevice, so under TRITON_INTERPRET=1 the same names bind to portable versions computed in f64
(accurate, slow; the interpreter is for correctness only).  The GPU suite checks the libdevice path.
"""
from __future__ import annotations

import triton
import triton.language as tl

from ..._core.device import triton_interpreting


@triton.jit
def _tanh_portable(x):
    xd = x.to(tl.float64)
    ax = tl.abs(xd)
    e = tl.exp(-2.0 * ax)
    t = (1.0 - e) / (1.0 + e)
    t = tl.where(ax < 1e-8, ax, t)
    return tl.where(xd < 0, -t, t).to(x.dtype)


@triton.jit
def _exp_portable(x):
    return tl.exp(x)


@triton.jit
def _log_portable(x):
    return tl.log(x)


if triton_interpreting():
    tanh = _tanh_portable
    exp = _exp_portable
    log = _log_portable
else:
    from triton.language.extra import libdevice

    @triton.jit
    def tanh(x):
        return libdevice.tanh(x)

    @triton.jit
    def exp(x):
        return libdevice.exp(x)

    @triton.jit
    def log(x):
        return libdevice.log(x)


@triton.jit
def sigmoid(x):
    return 1.0 / (1.0 + exp(-x))
