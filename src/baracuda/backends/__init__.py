"""Backends register their implementations on import; availability is decided per device at run time."""
from __future__ import annotations

import functools

from .._core.device import Device, cuda_available, triton_interpreting
from .._core.options import PlanPreference
from .._core.registry import register_backend
from .._core.sku import Backend


def _reference_available(device: Device, pref: PlanPreference) -> str | None:
    if device.type == "cuda" and Backend.REFERENCE not in pref.prefer:
        return "runs on the host (NumPy); on a CUDA device it is used only when preferred explicitly"
    return None


@functools.lru_cache(maxsize=None)
def triton_import_error() -> str | None:
    try:
        import torch  # noqa: F401
        import triton  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return f"triton/torch not importable ({type(e).__name__}: {e})"
    return None


def _triton_available(device: Device, pref: PlanPreference) -> str | None:
    err = triton_import_error()
    if err:
        return err
    if device.type == "cpu" and not triton_interpreting():
        return "Triton runs on CUDA devices; on the CPU only under TRITON_INTERPRET=1"
    if device.type == "cuda" and not cuda_available():
        return "no CUDA device visible to torch"
    return None


def _cublas_available(device: Device, pref: PlanPreference) -> str | None:
    if device.type != "cuda":
        return "cuBLAS needs a CUDA device"
    if not cuda_available():
        return "no CUDA device visible to torch"
    return None


register_backend(Backend.REFERENCE, _reference_available)
register_backend(Backend.TRITON, _triton_available)
register_backend(Backend.CUBLAS, _cublas_available)

from . import reference  # noqa: E402,F401
from . import nvidia  # noqa: E402,F401

if triton_import_error() is None:
    from . import triton  # noqa: E402,F401
