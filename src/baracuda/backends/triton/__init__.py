"""Bespoke Triton kernels. On a GPU they compile for the device; on the CPU they run under Triton's
interpreter (TRITON_INTERPRET=1), which is how CI checks them."""
from __future__ import annotations

from ._lib.register import register_triton, simt_precision, torch_dtype_to_tl  # noqa: F401  (public)

# Every family package (a folder here not starting with '_') is imported, in name order; each imports its own
# modules, which register their implementations through _lib.register.  A new family is a new folder: nothing
# here changes.  The families share only _lib (see ARCHITECTURE.md).
import importlib as _importlib
import pkgutil as _pkgutil

FAMILIES = tuple(sorted(m.name for m in _pkgutil.iter_modules(__path__) if m.ispkg and not m.name.startswith("_")))
for _family in FAMILIES:
    _importlib.import_module(f"{__name__}.{_family}")
