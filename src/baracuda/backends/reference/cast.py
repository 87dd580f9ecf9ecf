"""NumPy bodies of the cast family: torch's conversion rules written out (see ops/cast.py)."""
from __future__ import annotations

import numpy as np

from ..._core.dtypes import DType
from . import register_reference

_SUB_F32 = (DType.f16, DType.bf16, DType.f8e4m3, DType.f8e5m2)
_E4M3_MAX = 448.0


def _to_float(x: np.ndarray, dst: DType) -> np.ndarray:
    """float/int/bool (exact in f64, or int64) -> float ``dst`` with torch's rounding."""
    if dst == DType.f64:
        return x.astype(np.float64)
    x32 = x.astype(np.float32)   # i64 -> f32 and f64 -> f32: one round-to-nearest-even (numpy = IEEE)
    if dst == DType.f32:
        return x32
    if dst == DType.f8e4m3:
        # torch saturates to the largest finite e4m3fn (448), inf included; NaN stays NaN
        with np.errstate(invalid="ignore"):
            x32 = np.clip(x32, np.float32(-_E4M3_MAX), np.float32(_E4M3_MAX))
    return x32.astype(dst.numpy)


def _to_int(x: np.ndarray, dst: DType) -> np.ndarray:
    if x.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            x = np.trunc(x).astype(np.int64)   # toward zero, through int64 (torch's u8 rule)
    return x.astype(np.int64).astype(dst.numpy)   # two's-complement wrap


def _to_dtype(desc, x):
    src, dst = desc.inputs[0].dtype, desc.attr("dtype")
    if dst == DType.bool:
        return x != 0
    if src.is_complex and not dst.is_complex:
        x = x.real
    if src == DType.bool:
        x = x.astype(np.int64)
    if dst.is_complex:
        comp = DType.f64 if dst == DType.c128 else DType.f32
        if src.is_complex:   # part by part (re + 1j * im would turn an infinite im into a NaN re)
            out = np.empty(x.shape, dst.numpy)
            out.real, out.imag = _to_float(x.real, comp), _to_float(x.imag, comp)
            return out
        return _to_float(x, comp).astype(dst.numpy)
    if dst.is_floating:
        return _to_float(x, dst)
    return _to_int(x, dst)


def _pack(desc, x):
    v = x.astype(np.int64) & 0xF
    return (v[..., 0::2] | (v[..., 1::2] << 4)).astype(np.uint8)


def _unpack(desc, x):
    v = x.astype(np.int64)
    out = np.stack([v & 0xF, (v >> 4) & 0xF], axis=-1).reshape(x.shape[:-1] + (2 * x.shape[-1],))
    if desc.attr("signed"):
        out = np.where(out >= 8, out - 16, out)
    dst = desc.attr("dtype")
    return out.astype(np.float64) if dst.is_floating else out


def _affine(desc, x):
    return desc.attr("a") * x + desc.attr("b")


register_reference("to_dtype", _to_dtype)
register_reference("pack_int4", _pack)
register_reference("unpack_int4", _unpack)
register_reference("affine", _affine)
