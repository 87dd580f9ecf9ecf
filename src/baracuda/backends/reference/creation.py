"""NumPy bodies of the creation family: the values in float64 (complex128), converted once to the output dtype
(the scalar conversions and the ranges' terms come from the spec module, shared with the Triton kernels)."""
from __future__ import annotations

import numpy as np

from ...ops.creation import arange_terms, cuda_int_terms, fill_of, space_kernel, space_terms
from . import register_reference


def _constant(d, *inputs):
    t = d.outputs[0]
    v = fill_of(d)
    return np.empty(t.shape, t.dtype.numpy) if v is None else np.full(t.shape, v, t.dtype.numpy)


def _arange(d):
    t = d.outputs[0]
    start, step = arange_terms(d.attr_dict, t.dtype)
    i = np.arange(t.shape[0], dtype=np.int64)
    if t.dtype.is_integer:
        return start + step * i            # int64 arithmetic (wrapping, as torch's); narrower types wrap too
    return start + step * i.astype(np.float64)


def _line(d):
    """linspace's values in float64 (complex128): torch's symmetric form, the bounds in the output dtype."""
    n = d.attr("steps")
    start, end, step = space_terms(d.op, d.attr_dict, d.outputs[0].dtype)
    i = np.arange(n, dtype=np.float64)
    return np.where(i < n // 2, start + step * i, end - step * (n - 1 - i))


def _cuda_int_space(d):
    """torch's CUDA kernel of an integer linspace / logspace: float32 terms (``cuda_int_terms``), value i the fused
    multiply-add start + step * float(i) (first half) or end - step * float(steps - 1 - i), rounded to float32 --
    the product of two float32 is exact in float64, so float64 then float32 rounds the sum as the FMA does except
    where the float64 sum lands exactly on a float32 tie (double rounding, ~2^-28 of sums) --; logspace: powf."""
    n = d.attr("steps")
    s, e, step = cuda_int_terms(d.op, d.attr_dict, d.outputs[0].dtype)
    i = np.arange(n, dtype=np.int64)
    fi = i.astype(np.float32).astype(np.float64)
    fk = (n - 1 - i).astype(np.float32).astype(np.float64)
    v = np.where(i < n // 2, s + step * fi, e - step * fk).astype(np.float32)
    if d.op == "logspace":      # powf, correctly rounded here (libdevice's __nv_powf: within 2 ulp of it)
        v = np.power(np.float64(np.float32(d.attr("base"))), v.astype(np.float64)).astype(np.float32)
    return np.trunc(v).astype(np.int64)


def _space(d):
    dt = d.outputs[0].dtype
    if space_kernel(d) == "cuda":
        return _cuda_int_space(d)
    v = _line(d)
    if d.op == "logspace":
        base = d.attr("base")
        v = np.exp(v * np.log(complex(base))) if dt.is_complex else np.power(base, v)
    return np.trunc(v).astype(np.int64) if dt.is_integer else v      # integer types: toward zero, as torch


def _eye(d):
    t = d.outputs[0]
    return np.eye(*t.shape, dtype=t.dtype.numpy)


for _name in ("full", "zeros", "ones", "empty", "full_like", "zeros_like", "ones_like", "empty_like"):
    register_reference(_name, _constant, upcast_inputs=False)
register_reference("arange", _arange)
register_reference("linspace", _space)
register_reference("logspace", _space)
register_reference("eye", _eye)
