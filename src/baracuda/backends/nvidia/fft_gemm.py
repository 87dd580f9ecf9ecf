"""The FFT family on cuBLAS: DFTs as complex GEMMs (a four-step factorization), the GPU path wherever CUDA is.

cuFFT comes through nvmath-python (cufft.py), which a machine may lack; this path needs only torch's cuBLAS
(``torch.matmul`` on complex tensors: cgemm / zgemm).  A length n <= 128, or one with no divisor (a prime up to
4096), is one GEMM with the n x n DFT matrix; a longer one is split n = n1 * n2 (n1 the divisor nearest sqrt(n)):
DFTs of length n1 over the strided sub-sequences, twiddles e^{-+2 pi i t2 k1 / n}, DFTs of length n2, a transpose
(Cooley-Tukey's four-step form), recursively.  Flops: 8 n (sum of the factors) per transform (~8 n * 3 * 256 for
2^24) against cuFFT's 5 n log2 n, and each level transposes through memory: a fallback, several times slower than
cuFFT on large transforms, comparable on small batched ones.  r2c runs the complex transform of the real input
and keeps the half spectrum; c2r weights the half spectrum (bins with a twin x 2, the imaginary parts of bins 0
and n/2 dropped by the real part, as pocketfft / cuFFT) and takes the real part of the inverse.  Matrices and
twiddles are computed in float64 (exact angle reduction: (t k) mod n) and cached per (n, sign, dtype, device).
Lengths with a prime factor > 4096 are refused (a Bluestein chirp-z would serve them: not written).
"""
from __future__ import annotations

import functools
import math

from ..._core.dtypes import DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.fft import FORMS, params
from .fft_layout import make_run

__all__ = ["execute", "dft_last", "largest_prime_factor", "refusal"]

DIRECT_MAX = 128       # one GEMM up to this length (K = n: the GEMM's cost per point grows with n)
PRIME_MAX = 4096       # the largest prime a dense DFT matrix serves (64 MiB of complex128)


def largest_prime_factor(n: int) -> int:
    p, f = 1, 2
    while f * f <= n:
        while n % f == 0:
            p, n = f, n // f
        f += 1
    return max(p, n)


def _split(n: int) -> int | None:
    """The divisor of n nearest sqrt(n) from below (>= 2), None for a prime."""
    for a in range(math.isqrt(n), 1, -1):
        if n % a == 0:
            return a
    return None


@functools.lru_cache(maxsize=128)
def _dft_matrix(n: int, forward: bool, dtype, device):
    """M[t, k] = exp(-+2 pi i t k / n): x @ M is the DFT of x's last axis."""
    import numpy as np
    import torch

    tk = np.outer(np.arange(n), np.arange(n)) % n
    m = np.exp((-2j if forward else 2j) * np.pi * tk / n)
    return torch.from_numpy(m).to(dtype=dtype, device=device)


@functools.lru_cache(maxsize=128)
def _twiddle(n1: int, n2: int, forward: bool, dtype, device):
    """T[t2, k1] = exp(-+2 pi i t2 k1 / (n1 n2))."""
    import numpy as np
    import torch

    n = n1 * n2
    tk = np.outer(np.arange(n2), np.arange(n1)) % n
    return torch.from_numpy(np.exp((-2j if forward else 2j) * np.pi * tk / n)).to(dtype=dtype, device=device)


def dft_last(x, forward: bool):
    """The unnormalized DFT of the last axis of a complex tensor (a fresh contiguous tensor)."""
    n = x.shape[-1]
    n1 = None if n <= DIRECT_MAX else _split(n)
    if n1 is None:
        return x.contiguous() @ _dft_matrix(n, forward, x.dtype, x.device)
    n2, b = n // n1, x.shape[:-1]
    # t = n2 t1 + t2, k = k1 + n1 k2: DFT over t1 for each t2, twiddle, DFT over t2 for each k1
    y = dft_last(x.reshape(*b, n1, n2).transpose(-1, -2), forward)        # (..., t2, k1)
    y = (y * _twiddle(n1, n2, forward, x.dtype, x.device)).transpose(-1, -2)
    y = dft_last(y, forward)                                               # (..., k1, k2)
    return y.transpose(-1, -2).reshape(*b, n)


def _along(t, axis: int, forward: bool):
    return dft_last(t.movedim(axis, -1), forward).movedim(-1, axis)


def _c2c(t, axes, forward: bool):
    for a in axes:
        t = _along(t, a, forward)
    return t


def execute(kind: str, buf, k: int, forward: bool, s, owned: bool):
    """fft_layout's executor contract: the unnormalized transform over the last k axes of ``buf``."""
    import torch

    r = buf.dim()
    lead = tuple(range(r - k, r - 1))
    if kind == "c2c":
        return _c2c(buf, lead + (r - 1,), forward).contiguous()
    if kind == "r2c":
        n = s[-1]
        cplx = torch.complex64 if buf.dtype == torch.float32 else torch.complex128
        y = dft_last(buf.to(cplx), True)[..., :n // 2 + 1]
        return _c2c(y, lead, True).contiguous()
    n, h = s[-1], buf.shape[-1]
    y = _c2c(buf, lead, False)
    full = torch.zeros(y.shape[:-1] + (n,), dtype=y.dtype, device=y.device)
    w = torch.ones(h, dtype=y.real.dtype, device=y.device)
    w[1:n - n // 2] = 2
    full[..., :h] = y * w
    return dft_last(full, False).real.contiguous()


def _supports(desc):
    return refusal(params(desc))


def refusal(p):
    """Why the GEMM path does not take the transform ``p`` (FftParams), or None."""
    worst = max(largest_prime_factor(n) for n in p.s)
    if worst > PRIME_MAX:
        return (f"a transform length has the prime factor {worst} > {PRIME_MAX}: the GEMM path would need a dense "
                f"{worst}x{worst} DFT matrix (no Bluestein chirp-z here; cuFFT serves it)")
    return None


def _precision(desc, pref=None):
    f64 = desc.dtype in (DType.f64, DType.c128)
    return PrecisionGuarantee(MathPrecision.F64 if f64 else MathPrecision.F32, DType.f64 if f64 else DType.f32,
                              False, True)


def _route(desc, pref=None):
    return "cublas:cgemm/zgemm four-step DFT (torch.matmul)"


_run, _bind = make_run(execute)
for _op in (*FORMS, "fft_nd"):
    register(Impl(op=_op, backend=Backend.CUBLAS, run=_run, bind=_bind, precision=_precision, supports=_supports,
                  devices=frozenset({"cuda"}), priority=-10.0, route=_route, array_api="torch"))
