"""Thin adapters from descriptors to NVIDIA libraries (cuBLAS/cuBLASLt via torch's thin matmul calls)."""
from ..._core.registry import import_submodules  # noqa: E402

import_submodules(__name__)
