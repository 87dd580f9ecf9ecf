"""Test helpers driven by the op specs: backends to test, casting samples, per-dtype comparison,
non-contiguous views, finite differences."""
from __future__ import annotations

import numpy as np

from .._core.device import Device, as_device, cuda_available
from .._core.dtypes import DType, as_dtype
from .._core.options import PlanPreference
from .._core.oracle import reference_f64, to_f64
from .._core.plan import Plan
from .._core.registry import implementations, refusal
from .._core.sku import Backend
from .._core.spec import Descriptor, OpSpec, Sample

__all__ = ["sample_arrays", "test_device", "backends_for", "cast", "assert_close", "noncontig", "reference_f64",
           "forced_plan", "finite_difference_grads", "complex_samples", "samples_for"]


def test_device() -> Device:
    """The device the test suite runs on: the GPU when there is one, else the CPU."""
    return as_device("cuda" if cuda_available() else "cpu")


test_device.__test__ = False   # a helper, not a test: pytest would collect it in every module that imports it


def backends_for(op: str, device: Device) -> list[Backend]:
    """Backends with an implementation of ``op`` whose backend can run on ``device`` at all."""
    from .._core.registry import _BACKENDS

    out = []
    for impl in implementations(op):
        avail = _BACKENDS.get(impl.backend)
        if avail is None or avail(device, PlanPreference(prefer=(impl.backend,))) is None:
            if device.type in impl.devices:
                out.append(impl.backend)
    return out


def forced_plan(desc: Descriptor, device: Device, backend: Backend, **pref_kw) -> Plan | str:
    """The plan of exactly ``backend`` for ``desc``, or the reason that backend refuses it."""
    pref = PlanPreference(prefer=(backend,), **pref_kw)
    for impl in implementations(desc.op):
        if impl.backend == backend:
            why = refusal(impl, desc, device, pref)
            if why:
                return why
            return Plan(desc, device, pref, impl)
    return f"{backend} has no implementation of {desc.op}"


def cast(x: np.ndarray, dtype: DType) -> np.ndarray:
    dtype = as_dtype(dtype)
    if dtype.is_floating or dtype.is_complex:
        return np.asarray(x).astype(dtype.numpy)
    if dtype == DType.bool:
        return np.asarray(np.asarray(x) > 0)   # 0-d stays an array
    return np.asarray(x).astype(dtype.numpy)


def assert_close(actual, expected, rtol: float, atol: float, what: str = ""):
    """|actual - expected| <= atol + rtol * |expected| elementwise; NaN only where expected is NaN."""
    a = to_f64(actual)
    e = np.asarray(expected)
    e = e.astype(np.float64) if e.dtype.kind not in "iubc" else e
    if a.shape != e.shape:
        raise AssertionError(f"{what}: shape {a.shape} != expected {e.shape}")
    if a.dtype.kind in "iub" or e.dtype.kind in "iub":
        bad = a != e
    else:
        with np.errstate(invalid="ignore"):
            nan_a, nan_e = np.isnan(a), np.isnan(e)
            same_inf = (a == e)
            diff = np.abs(a - e)
            bad = (diff > atol + rtol * np.abs(e)) & ~same_inf
            bad = (bad & ~nan_e) | (nan_a != nan_e)
    if bad.any():
        idx = np.argwhere(bad)[:5]
        worst = [(tuple(int(j) for j in i), a[tuple(i)], e[tuple(i)]) for i in idx]
        raise AssertionError(f"{what}: {int(bad.sum())}/{bad.size} elements differ (rtol={rtol}, atol={atol}); "
                             f"first (index, got, expected): {worst}")


def noncontig(x):
    """A non-contiguous view holding the same values (every other element of a wider buffer)."""
    import torch

    if isinstance(x, np.ndarray):
        if x.ndim == 0 or x.size == 0:
            return x
        buf = np.empty(x.shape[:-1] + (2 * x.shape[-1],), x.dtype)
        v = buf[..., ::2]
        v[...] = x
        return v
    if x.dim() == 0 or x.numel() == 0:
        return x
    buf = torch.empty(x.shape[:-1] + (2 * x.shape[-1],), dtype=x.dtype, device=x.device)
    v = buf[..., ::2]
    v.copy_(x)
    return v


def finite_difference_grads(desc: Descriptor, arrays, grads_out, eps: float = 1e-6):
    """Central differences of L = sum Re(conj(grads_out_j) * out_j) w.r.t. each differentiable input (float64 /
    complex128).  For a complex input z = x + iy the result is dL/dx + i dL/dy, torch's convention for
    complex autograd (for real outputs and inputs L is sum(out_j * grads_out_j))."""
    spec: OpSpec = desc.spec
    base = [np.array(to_f64(a)) for a in arrays]
    res = []
    for i in range(len(base)):
        dt = desc.inputs[i].dtype
        if i not in spec.differentiable or not (dt.is_floating or dt.is_complex):
            res.append(None)
            continue
        g = np.zeros_like(base[i])
        for idx in np.ndindex(base[i].shape):      # (nothing for an empty operand)
            for unit in ((1.0, 1j) if dt.is_complex else (1.0,)):
                vals = []
                for sgn in (1, -1):
                    xs = [b.copy() for b in base]
                    xs[i][idx] += sgn * eps * unit
                    outs = reference_f64(desc, xs)
                    vals.append(sum(float(np.sum(np.real(np.conj(go) * to_f64(o))))
                                    for o, go in zip(outs, grads_out) if go is not None))
                g[idx] += unit * (vals[0] - vals[1]) / (2 * eps)
        res.append(g)
    return res


def draw_samples(spec: OpSpec, seed: int = 0) -> list[Sample]:
    rng = np.random.default_rng(seed)
    return list(spec.samples(rng)) if spec.samples else []


def complex_samples(spec: OpSpec, seed: int = 0) -> list[Sample]:
    """The samples a complex dtype is tested on: each float operand of ``draw_samples(spec, seed)`` becomes
    complex128 with its imaginary part taken from the same operand of ``draw_samples(spec, seed + 1)`` (same
    shapes and attributes, independent values from the same domain); other operands are unchanged."""
    from ..backends.reference._complex import to_c128   # re + i im without 1j * inf = nan + inf j

    out = []
    for a, b in zip(draw_samples(spec, seed), draw_samples(spec, seed + 1)):
        xs = tuple(to_c128(x, y) if np.asarray(x).dtype.kind == "f" else x for x, y in zip(a.inputs, b.inputs))
        out.append(Sample(xs, dict(a.attrs), name=f"complex-{a.name}", grad=a.grad))
    return out


def samples_for(spec: OpSpec, dtype) -> list[Sample]:
    """``complex_samples`` for a complex dtype under test, ``draw_samples`` otherwise."""
    return complex_samples(spec) if as_dtype(dtype).is_complex else draw_samples(spec)


def sample_arrays(spec: OpSpec, sample: Sample, dtype) -> tuple[list, dict]:
    """A sample's operands and attributes for the dtype under test: float (and complex) operands take ``dtype``,
    integer ones keep theirs; an op with no operands (a creation op) takes it as its dtype attribute unless the
    sample sets one."""
    dt = as_dtype(dtype)
    acc = DType.f64 if dt == DType.f64 else DType.f32
    arrays = [cast(x, (acc if i in sample.acc else dt) if np.asarray(x).dtype.kind in "fc"
                   else as_dtype(np.asarray(x).dtype)) for i, x in enumerate(sample.inputs)]
    attrs = dict(sample.attrs)
    if all(n == "state" for n in spec.arg_names) and "dtype" in spec.defaults:   # (a random fill's stream state)
        attrs.setdefault("dtype", dt)
    return arrays, attrs
