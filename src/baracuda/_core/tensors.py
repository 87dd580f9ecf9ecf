"""Arrays in, arrays out: NumPy, torch (CPU/CUDA), CuPy, JAX and anything with ``__dlpack__`` or
``__cuda_array_interface__``, converted zero-copy to what a backend computes on (NumPy for the
reference backend, torch tensors for the GPU backends) and back to the caller's type.
"""
from __future__ import annotations

import enum

import numpy as np

from .device import Device
from .dtypes import DType, as_dtype
from .errors import ArgumentTypeError, DTypeMismatchError

__all__ = ["ArrayKind", "kind_of", "shape_dtype_device", "to_numpy", "to_torch", "restore", "strides_of",
           "array_kind", "device_text", "dtype_of"]


class ArrayKind(enum.Enum):
    NUMPY = "numpy"
    TORCH = "torch"
    CUPY = "cupy"
    JAX = "jax"
    DLPACK = "dlpack"            # any other __dlpack__ producer; results come back as torch tensors
    CUDA_ARRAY = "cuda_array"    # __cuda_array_interface__ only; results come back as torch tensors


_KIND_BY_TYPE: dict[type, ArrayKind] = {}


def kind_of(x) -> ArrayKind:
    t = type(x)
    k = _KIND_BY_TYPE.get(t)
    if k is None:
        k = _classify(t, x)
        _KIND_BY_TYPE[t] = k
    return k


def _classify(t: type, x) -> ArrayKind:
    if issubclass(t, np.ndarray):
        return ArrayKind.NUMPY
    mod = t.__module__ or ""
    if mod.startswith("torch"):
        import torch

        if isinstance(x, torch.Tensor):
            return ArrayKind.TORCH
    if mod.startswith("cupy"):
        return ArrayKind.CUPY
    if mod.startswith("jax") or mod.startswith("jaxlib"):
        return ArrayKind.JAX
    if hasattr(x, "__dlpack__"):
        return ArrayKind.DLPACK
    if hasattr(x, "__cuda_array_interface__"):
        return ArrayKind.CUDA_ARRAY
    raise TypeError(f"expected an array (NumPy, torch, CuPy, JAX, DLPack or CUDA array interface), got {t.__name__}")


ARRAY_TYPES = "an array (NumPy, torch, CuPy, JAX, DLPack or CUDA array interface)"


def given(x) -> str:
    """What an argument of the wrong type is, for an error message: its type, and its value where short."""
    if x is None:
        return "None"
    r = repr(x)
    return type(x).__name__ + (f" {r}" if len(r) <= 40 and not r.startswith("<") else "")


def array_kind(op: str, arg: str, x) -> ArrayKind:
    """``kind_of(x)``, or ArgumentTypeError naming ``op`` and ``arg`` for anything that is not an array (a list, None,
    a Python or NumPy scalar)."""
    try:
        return kind_of(x)
    except TypeError:
        raise ArgumentTypeError(op, arg, ARRAY_TYPES, given(x)) from None


def device_text(x, kind: ArrayKind) -> str:
    """Where an array lives, as torch writes it ('cpu', 'cuda:0', 'meta')."""
    if kind is ArrayKind.NUMPY:
        return "cpu"
    if kind is ArrayKind.TORCH:
        return str(x.device)
    return str(to_torch(x).device)


def dtype_of(op: str, arg: str, x, want) -> DType:
    """The DType of array ``x``; DTypeMismatchError (expected ``want``) for a dtype baracuda has no equivalent of."""
    try:
        return as_dtype(x.dtype)
    except (TypeError, ValueError, KeyError):
        raise DTypeMismatchError(op, arg, str(want), str(x.dtype).replace("torch.", "")) from None


def _torch():
    import torch

    return torch


# NumPy cannot hand ml_dtypes arrays to torch directly: reinterpret through a same-width integer.
_VIEW_INT = {DType.bf16: (np.int16, "int16"), DType.f8e4m3: (np.uint8, "uint8"), DType.f8e5m2: (np.uint8, "uint8")}


def _torch_dtype_view(t, dt: DType):
    torch = _torch()
    if dt in _VIEW_INT:
        return t.view(getattr(torch, _VIEW_INT[dt][1])).numpy().view(dt.numpy)
    return t.numpy()


def shape_dtype_device(x) -> tuple[tuple[int, ...], DType, Device]:
    k = kind_of(x)
    if k is ArrayKind.NUMPY:
        return x.shape, as_dtype(x.dtype), Device("cpu")
    if k is ArrayKind.TORCH:
        d = x.device
        return tuple(x.shape), as_dtype(x.dtype), Device(d.type, d.index or 0) if d.type == "cuda" else Device("cpu")
    t = to_torch(x)
    return tuple(t.shape), as_dtype(t.dtype), Device(t.device.type, t.device.index or 0) if t.is_cuda else Device("cpu")


def strides_of(x) -> tuple[int, ...]:
    """Strides in elements."""
    if kind_of(x) is ArrayKind.NUMPY:
        return tuple(s // x.itemsize for s in x.strides)
    return tuple(to_torch(x).stride())


def to_numpy(x) -> np.ndarray:
    """Zero-copy view as a NumPy array for host arrays; device arrays are copied to the host."""
    k = kind_of(x)
    if k is ArrayKind.NUMPY:
        return x
    if k is ArrayKind.TORCH:
        t = x.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        return _torch_dtype_view(t, as_dtype(t.dtype))
    if k is ArrayKind.JAX:
        return np.asarray(x)
    t = to_torch(x)
    return to_numpy(t)


def to_torch(x, device: Device | None = None):
    """Zero-copy torch view (host arrays stay on the host unless ``device`` says cuda)."""
    torch = _torch()
    k = kind_of(x)
    if k is ArrayKind.TORCH:
        t = x
    elif k is ArrayKind.NUMPY:
        dt = as_dtype(x.dtype)
        if x.size == 0:     # nothing to share; NumPy gives empty arrays zero strides, torch the contiguous ones
            t = torch.empty(x.shape, dtype=dt.torch, device="cpu")   # (not the default device)
        else:
            if any(s < 0 for s in x.strides) or not x.flags.writeable:
                x = x.copy()  # torch cannot view negative strides or read-only memory: a documented host copy
            t = torch.from_numpy(x.view(_VIEW_INT[dt][0])).view(dt.torch) if dt in _VIEW_INT else torch.from_numpy(x)
    elif k is ArrayKind.CUDA_ARRAY:
        t = torch.as_tensor(x, device="cuda")
    else:
        t = torch.from_dlpack(x)
    if device is not None and device.type == "cuda" and t.device.type != "cuda":
        t = t.to(f"cuda:{device.index}")
    return t


def restore(kind: ArrayKind, result, device: Device | None = None):
    """Return a backend result (NumPy array or torch tensor) in the caller's array type."""
    is_np = isinstance(result, np.ndarray)
    if kind is ArrayKind.NUMPY:
        if is_np:
            return result
        return to_numpy(result)
    if kind is ArrayKind.TORCH or kind in (ArrayKind.DLPACK, ArrayKind.CUDA_ARRAY):
        if is_np:
            t = to_torch(result)
            if device is not None and device.type == "cuda":
                t = t.to(f"cuda:{device.index}")
            return t
        return result
    t = to_torch(result, device) if is_np else result
    if kind is ArrayKind.CUPY:
        import cupy

        return cupy.from_dlpack(t)
    if kind is ArrayKind.JAX:
        import jax.dlpack

        if t.device.type == "cpu":
            import jax.numpy as jnp

            return jnp.asarray(to_numpy(t))
        return jax.dlpack.from_dlpack(t)
    raise AssertionError(kind)
