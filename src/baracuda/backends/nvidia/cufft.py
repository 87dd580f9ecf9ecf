"""The FFT family on cuFFT through nvmath-python's host API (``nvmath.fft.FFT``: stateful plans).

Every FFT descriptor is ``fft_nd`` (ops/fft.py); fft_layout.py moves the transform axes last into a contiguous
buffer (or reads the input itself when it already is one) and applies the scale / conjugate / resize in one pass
after, so cuFFT only ever sees a contiguous tensor transformed over its last k <= 3 axes -- a layout nvmath always
plans (its constraints: at most 3 FFT axes per plan; the batch axes on one side of them; for R2C / C2R the last FFT
axis the fastest).  More than 3 axes are decomposed into batched transforms of at most 3 (r2c: the real last 3
first, then C2C on the rest of the half spectrum; c2r: C2C on the leading axes first, then C2R on the last 3; the
other axes moved last through a contiguous copy per group).

Plans: one ``nvmath.fft.FFT`` per (fft type, shape, strides, dtype, axes, in place, last-axis parity, device),
created and ``plan()``-ed on first use, kept in a bounded LRU (64 plans), reused with ``reset_operand(t, stream=)``
and ``execute(direction=, stream=)`` on torch's current stream, then ``release_operand()`` (a cached plan keeps no
tensor alive).  C2C runs in place on a buffer of ours
(``FFTOptions(inplace=True)``) and out of place on the caller's tensor; R2C / C2R run out of place
(``result_layout='natural'``: a contiguous result; nvmath copies a C2R operand to an auxiliary buffer first, since
cuFFT overwrites C2R inputs).  The workspace is nvmath's: the plan turns cuFFT's auto-allocation off and allocates
the work area through the operand package's allocator (torch's caching allocator here), stream-ordered, on the
first execute, and keeps it across executes (``release_workspace=False``); so the planner's
``max_workspace_bytes`` does not see it (no ``Impl.workspace``).  Normalization: nvmath.fft has none; it is the
epilogue's multiply (fft_layout.py).

nvmath is imported inside the functions only: this module imports (and registers) without it; the backend's
availability check (``backends.nvmath_import_error("fft")``) says why cuFFT is unavailable, and the cuBLAS DFT path
(fft_gemm.py) serves CUDA devices then.
"""
from __future__ import annotations

import threading
from collections import OrderedDict

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.fft import FORMS, params
from .fft_layout import make_run

__all__ = ["execute", "plan_for", "cache_info", "PLAN_CACHE_SIZE"]

PLAN_CACHE_SIZE = 64
_PLANS: OrderedDict = OrderedDict()
_LOCK = threading.Lock()


def _stream():
    import torch

    return torch.cuda.current_stream()


def plan_for(fft_type: str, t, k: int, inplace: bool, parity: str):
    """The planned ``nvmath.fft.FFT`` for ``t`` transformed over its last ``k`` axes (cached; see module doc)."""
    key = (fft_type, tuple(t.shape), tuple(t.stride()), t.dtype, k, inplace, parity, t.device.index)
    with _LOCK:
        f = _PLANS.get(key)
        if f is not None:
            _PLANS.move_to_end(key)
            return f, False
    import nvmath.fft

    options = nvmath.fft.FFTOptions(fft_type=fft_type, inplace=inplace, last_axis_parity=parity,
                                    result_layout="natural")
    f = nvmath.fft.FFT(t, axes=list(range(t.dim() - k, t.dim())), options=options, stream=_stream())
    f.plan(stream=_stream())
    with _LOCK:
        _PLANS[key] = f
        while len(_PLANS) > PLAN_CACHE_SIZE:
            _PLANS.popitem(last=False)[1].free()
    return f, True


def _run_plan(fft_type: str, t, k: int, inplace: bool, direction, parity: str = "even"):
    """One cuFFT execution over the last k (<= 3) axes of contiguous ``t``; returns the result tensor."""
    f, fresh = plan_for(fft_type, t, k, inplace, parity)
    s = _stream()
    if not fresh:
        f.reset_operand(t, stream=s)
    res = f.execute(direction=direction, stream=s)
    f.release_operand()     # (a cached plan must not keep the caller's tensor alive; the next call resets it)
    return res


def _c2c_groups(t, axes: tuple, forward: bool, owned: bool):
    """C2C over ``axes`` of ``t`` in groups of at most 3: the trailing group in place (when ``owned``), the others
    moved last through a contiguous copy (nvmath wants the batch axes on one side of the FFT axes)."""
    direction = "forward" if forward else "inverse"
    r = t.dim()
    groups = [axes[max(0, i - 3):i] for i in range(len(axes), 0, -3)]
    for g in groups:
        if g == tuple(range(r - len(g), r)):
            t = _run_plan("C2C", t, len(g), owned, direction)
        else:
            m = t.movedim(g, tuple(range(r - len(g), r))).contiguous()
            t = _run_plan("C2C", m, len(g), True, direction).movedim(tuple(range(r - len(g), r)), g)
            t = t.contiguous()
        owned = True
    return t


def execute(kind: str, buf, k: int, forward: bool, s, owned: bool):
    """fft_layout's executor contract over cuFFT (module docstring)."""
    r = buf.dim()
    axes = tuple(range(r - k, r))
    if kind == "c2c":
        return _c2c_groups(buf, axes, forward, owned)
    parity = "odd" if s[-1] % 2 else "even"
    last, lead = axes[-3:], axes[:-3]
    if kind == "r2c":
        y = _run_plan("R2C", buf, len(last), False, None, parity)
        return _c2c_groups(y, lead, True, True) if lead else y
    if lead:
        buf = _c2c_groups(buf, lead, False, owned)
    return _run_plan("C2R", buf.contiguous(), len(last), False, None, parity)


def cache_info() -> dict:
    with _LOCK:
        return {"plans": len(_PLANS), "max": PLAN_CACHE_SIZE}


def _precision(desc, pref=None):
    # cuFFT computes in the dtype's precision; its algorithm choice depends on the plan (sizes, batch), not on the
    # data: the same plan gives the same bits
    f64 = desc.dtype in (DType.f64, DType.c128)
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              True, True)


def _route(desc, pref=None):
    p = params(desc)
    kinds = {"c2c": "C2C", "r2c": "R2C", "c2r": "C2R"}
    groups = (len(p.dim) + 2) // 3
    return f"cufft:nvmath.fft.FFT {kinds[p.kind]} x{groups} plan{'s' if groups > 1 else ''}"


_run, _bind = make_run(execute)
for _op in (*FORMS, "fft_nd"):
    register(Impl(op=_op, backend=Backend.CUFFT, run=_run, bind=_bind, precision=_precision,
                  devices=frozenset({"cuda"}), priority=10.0, route=_route, array_api="torch"))
