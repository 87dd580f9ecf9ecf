"""Bespoke Triton kernels. On a GPU they compile for the device; on the CPU they run under Triton's
interpreter (TRITON_INTERPRET=1), which is how CI checks them."""
from __future__ import annotations

from ._lib.register import register_triton, simt_precision, torch_dtype_to_tl  # noqa: F401  (public)

# The one loader: each family package imports its own modules (which register their implementations through
# _lib.register); the families share only _lib (see ARCHITECTURE.md).
from . import cast, distance, elementwise, gemm, layout, loss, norm, reduction, scan, softmax  # noqa: F401
