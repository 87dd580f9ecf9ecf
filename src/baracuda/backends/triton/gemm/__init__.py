"""GEMM family: matmul/linear with fused epilogues.  ``ACT_FN`` (the epilogue activations) is public: the cuBLAS
backend runs the same activations through the elementwise template."""
from . import gemm, kron
from .gemm import ACT_FN

__all__ = ["ACT_FN", "gemm", "kron"]
