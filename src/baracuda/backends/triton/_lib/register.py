"""How a Triton family registers an implementation: ``register_triton(op, run, **kw)`` with the Triton defaults
(SIMT precision, CUDA devices plus the CPU under the interpreter, never the CPU default)."""
from __future__ import annotations

from ...._core.dtypes import DType
from ...._core.registry import Impl, register
from ...._core.sku import Backend, MathPrecision, PrecisionGuarantee


def simt_precision(desc, pref=None) -> PrecisionGuarantee:
    """Half types load/store in their dtype and compute in f32; f64 computes in f64. No atomics."""
    if desc.dtype == DType.f64:
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, True, True)
    return PrecisionGuarantee(MathPrecision.F32, DType.f32, True, True)


def register_triton(op: str, run=None, **kw) -> Impl:
    """Register a Triton implementation; ``run`` defaults to binding on every call (``bind=`` given)."""
    if run is None:
        from .binding import run_of

        run = run_of(kw["bind"])
    kw.setdefault("precision", simt_precision)
    kw.setdefault("devices", frozenset({"cuda", "cpu"}))  # cpu: interpreter only (see backends/__init__.py)
    # On the CPU the interpreter is a correctness tool, never a default: the reference backend wins there.
    kw.setdefault("priority", lambda desc, dev: 10.0 if dev.type == "cuda" else -200.0)
    return register(Impl(op=op, backend=Backend.TRITON, run=run, **kw))


def torch_dtype_to_tl(dt):
    import torch
    import triton.language as tl

    return {torch.float32: tl.float32, torch.float64: tl.float64, torch.float16: tl.float16,
            torch.bfloat16: tl.bfloat16}[dt]
