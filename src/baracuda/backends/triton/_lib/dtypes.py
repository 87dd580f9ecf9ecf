"""Accumulator dtypes of the statistical kernels: f64 when any operand is f64, else f32."""
from __future__ import annotations

import triton.language as tl

from ...._core.dtypes import DType

ACC_TL = {DType.f32: tl.float32, DType.f64: tl.float64}


def acc_dtype(*dts) -> DType:
    return DType.f64 if DType.f64 in dts else DType.f32
