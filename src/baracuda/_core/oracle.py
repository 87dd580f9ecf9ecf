"""The float64 oracle: an op's result from the NumPy reference backend on inputs upcast to float64.

The tests compare every GPU kernel against it (``baracuda.testing``) and ``baracuda.torch.record(check=True)``
reports each recorded call's error against it; both import it from here (the frontends import no test helpers).
"""
from __future__ import annotations

import numpy as np

from .dtypes import DType
from .options import PlanPreference
from .sku import Backend
from .spec import Descriptor

__all__ = ["to_f64", "reference_f64", "max_rel_err"]

_REFERENCE = PlanPreference(prefer=(Backend.REFERENCE,))


def to_f64(x) -> np.ndarray:
    """Any array as a host NumPy array, floating types upcast to float64 (complex to complex128)."""
    from .tensors import to_numpy

    a = to_numpy(x)
    return a.astype(np.complex128 if a.dtype.kind == "c" else np.float64) if a.dtype.kind not in "iub" else a


def reference_f64(desc: Descriptor, arrays) -> tuple:
    """The reference backend's result on the same (already rounded) inputs upcast to float64."""
    from .plan import Plan

    ins = []
    specs = []
    for x, t in zip(arrays, desc.inputs):
        ins.append(to_f64(x))
        specs.append((t.shape, DType.f64 if t.dtype.is_floating else DType.c128 if t.dtype.is_complex else t.dtype))
    d64 = Descriptor.make(desc.op, *specs, **desc.attr_dict)
    r = Plan.select(d64, device="cpu", pref=_REFERENCE).run(*ins)
    return r if isinstance(r, tuple) else (r,)


def max_rel_err(got, want) -> float:
    """max |got - want| / max finite |want| (0 for empty arrays); NaNs ignored, equal infinities agree (a causal
    mask's -inf against -inf is no error), an infinity against anything else is an infinite error."""
    g, w = to_f64(got), np.asarray(want, dtype=np.float64)
    if g.size == 0:
        return 0.0
    aw = np.abs(w)
    finite = aw[np.isfinite(aw)]
    scale = max(float(finite.max()) if finite.size else 0.0, 1e-30)
    with np.errstate(invalid="ignore"):
        diff = np.where(g == w, 0.0, np.abs(g - w))
    return float(np.nanmax(diff)) / scale if not np.isnan(diff).all() else 0.0
