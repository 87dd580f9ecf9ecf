"""Convolution family: one implicit-GEMM kernel (implicit_gemm.py) for the forward, data-gradient and
weight-gradient passes of every 1/2/3-d (transposed) convolution, registered in plans.py; im2col / col2im gather
kernels in fold.py.  A library backend (cuDNN) registers beside these as another implementation of the same ops."""
from . import fold, implicit_gemm, plans

__all__ = ["fold", "implicit_gemm", "plans"]
