"""The reference backend: NumPy, float64 arithmetic, every op, any machine.

It is the CPU default and the oracle every GPU kernel is tested against, so it is written for
clarity, never for speed: inputs are upcast to float64 (complex128 for complex), the op computed,
and the result rounded once to the output dtype.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee

_PREC = PrecisionGuarantee(MathPrecision.F64, DType.f64, bit_stable=True, deterministic=True)


def upcast(x: np.ndarray) -> np.ndarray:
    if x.dtype.kind == "c":
        return x.astype(np.complex128)
    if x.dtype.kind in "fV" or x.dtype.name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        return x.astype(np.float64)
    return x


def register_reference(op: str, fn: Callable, upcast_inputs: bool = True) -> Impl:
    """fn(desc, *inputs) -> result array (or tuple, one per output), in float64 (or exact integers)."""

    def run(desc, inputs, outputs, ws):
        xs = [upcast(x) for x in inputs] if upcast_inputs else inputs
        res = fn(desc, *xs)
        if not isinstance(res, tuple):
            res = (res,)
        for o, r in zip(outputs, res):
            r = np.asarray(r)
            if o.dtype.kind in "iub" and r.dtype.kind == "f":
                raise AssertionError(f"reference {op}: float result for an integer output")
            o[...] = r.astype(o.dtype) if r.dtype != o.dtype else r

    return register(Impl(op=op, backend=Backend.REFERENCE, run=run, precision=lambda d, p: _PREC,
                         devices=frozenset({"cpu", "cuda"}), priority=-100.0, route="numpy-f64",
                         array_api="numpy"))


from ..._core.registry import import_submodules  # noqa: E402

import_submodules(__name__)
