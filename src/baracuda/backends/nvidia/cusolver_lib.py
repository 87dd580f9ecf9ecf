"""What every cuSOLVER-backed implementation shares (the linear-algebra families): nvmath-python's dense bindings
(``nvmath.bindings.cusolverDn``), one handle per (thread, device) bound to torch's current stream, the per-dtype
routine names, device workspaces sized by cuSOLVER's ``*_buffer_size`` queries, and the ``info`` check.

nvmath's bindings take raw device pointers (``tensor.data_ptr()``) and plain ints; cuSOLVER is column-major, so a
row-major (..., m, n) torch matrix is cuSOLVER's (n, m) matrix: implementations pass the transpose they mean (a
symmetric / Hermitian operand needs none; a general one is solved as A^T or copied to column-major first) and say
which in their route.  Workspaces are torch allocations on the current stream (the caching allocator makes them
cheap); the ``info`` arrays are int32 device tensors, read back only where the op's contract needs the value (the
``_ex`` forms return it; the plain forms check it and raise torch's error).
"""
from __future__ import annotations

import threading

from ..._core.dtypes import DType
from .streams import raw_stream

__all__ = ["dn", "handle", "stream_handle", "prefix", "routine", "fill_mode", "workspace", "UPPER", "LOWER", "cublas",
           "cublas_handle", "cublas_routine", "pointers", "colmajor", "BATCHED_MAX_N"]

# cublasFillMode_t (cuSOLVER takes cuBLAS's enums): which triangle of a column-major matrix is read / written
LOWER, UPPER = 0, 1
# the letter of the routine family per dtype (cusolverDnSpotrf, cusolverDnDpotrf, cusolverDnCpotrf, cusolverDnZpotrf)
_PREFIX = {DType.f32: "s", DType.f64: "d", DType.c64: "c", DType.c128: "z"}
_TLS = threading.local()
# cuBLAS's batched LU family (getrfBatched / getrsBatched / trsmBatched) runs every matrix of a batch in one launch;
# above this order one cuSOLVER call per matrix (a blocked factorization) is the faster of the two
BATCHED_MAX_N = 128


def dn():
    """The ``nvmath.bindings.cusolverDn`` module (imported on first use; the backend's availability check,
    ``backends.nvmath_import_error("cusolverDn")``, has already said why it would not be importable)."""
    from nvmath.bindings import cusolverDn

    return cusolverDn


def prefix(dtype: DType) -> str:
    """The routine-family letter of ``dtype``; KeyError for a dtype cuSOLVER's legacy API lacks."""
    return _PREFIX[dtype]


def routine(name: str, dtype: DType):
    """The binding ``<letter><name>`` of ``dtype`` (``routine("potrf", DType.f32)`` -> ``cusolverDn.spotrf``)."""
    return getattr(dn(), prefix(dtype) + name)


def fill_mode(row_major_lower: bool) -> int:
    """The cuSOLVER fill mode that reads the row-major lower (True) or upper triangle: transposition swaps them."""
    return UPPER if row_major_lower else LOWER


def stream_handle(lib, device_index: int | None = None) -> int:
    """This thread's handle of ``lib`` (a binding module with ``create`` / ``set_stream``: nvmath's cusolverDn,
    cublas) on ``device_index`` (the current device when None), bound to torch's current stream there (set only
    when the stream changed)."""
    import torch

    if device_index is None:
        device_index = torch.cuda.current_device()
    hs = getattr(_TLS, "handles", None)
    if hs is None:
        hs = _TLS.handles = {}
    entry = hs.get((lib.__name__, device_index))
    if entry is None:
        with torch.cuda.device(device_index):
            entry = hs[(lib.__name__, device_index)] = [lib.create(), None]
    stream = raw_stream(device_index)
    if entry[1] != stream:
        lib.set_stream(entry[0], stream)
        entry[1] = stream
    return entry[0]


def cublas():
    """The ``nvmath.bindings.cublas`` module (the batched small-matrix routines cuSOLVER's dense API lacks)."""
    from nvmath.bindings import cublas as mod

    return mod


def cublas_handle(device_index: int | None = None) -> int:
    """This thread's cuBLAS handle on ``device_index``, bound to torch's current stream."""
    return stream_handle(cublas(), device_index)


def cublas_routine(name: str, dtype: DType):
    """cuBLAS's ``<letter><name>`` of ``dtype`` (``cublas_routine("getrf_batched", DType.f32)`` -> sgetrfBatched)."""
    return getattr(cublas(), prefix(dtype) + name)


def pointers(t):
    """A device int64 array of the addresses of ``t``'s matrices (``t``: (B, ...), one matrix per leading index):
    the pointer arrays of the batched APIs.  Keep it alive until the call's launch is queued."""
    import torch

    step = t.stride(0) * t.element_size()
    return t.data_ptr() + step * torch.arange(t.shape[0], dtype=torch.int64, device=t.device)


def colmajor(t):
    """A fresh copy of (B, m, n) row-major matrices laid out column-major: (B, n, m) contiguous (its [b] is A[b]^T).
    Always a copy, never ``contiguous()``: the libraries overwrite it, and a (B, n, 1) right-hand side (or any operand
    already dense in that order) would come back as the caller's own tensor -- the solves overwrote their inputs on
    the H100 (2026-11-27) -- and with torch's lazy-conjugation bit kept (a library reading ``data_ptr()`` would see
    the unconjugated values)."""
    import torch

    return t.transpose(-1, -2).clone(memory_format=torch.contiguous_format).resolve_conj()


def handle(device_index: int | None = None) -> int:
    """This thread's cuSOLVER handle on ``device_index``, bound to torch's current stream."""
    return stream_handle(dn(), device_index)


def workspace(nbytes: int, device):
    """A device byte buffer of at least ``nbytes`` (never empty, so its pointer is valid) on ``device``."""
    import torch

    return torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=device)
