"""NumPy bodies of the creation family: the values in float64 (complex128), converted once to the output dtype
(the scalar conversions and the ranges' terms come from the spec module, shared with the Triton kernels)."""
from __future__ import annotations

import numpy as np

from ...ops.creation import arange_terms, fill_of, space_terms
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


def _space(d):
    dt = d.outputs[0].dtype
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
