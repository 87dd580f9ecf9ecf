"""Kernel identity (KernelSku) and numerical promise (PrecisionGuarantee): immutable, hashable, one line."""
from __future__ import annotations

import enum
from dataclasses import dataclass

from .dtypes import DType

__all__ = ["Backend", "Arch", "MathPrecision", "PrecisionGuarantee", "KernelSku"]


class Backend(enum.Enum):
    REFERENCE = "reference"   # NumPy, float64 accumulation: the oracle, runs anywhere
    TRITON = "triton"         # bespoke Triton kernels (GPU, or CPU under TRITON_INTERPRET=1)
    CUBLAS = "cublas"         # NVIDIA cuBLAS / cuBLASLt through torch's matmul entry points
    CUBLASLT = "cublaslt"     # NVIDIA cuBLASLt through nvmath-python's bindings (nvmath.bindings.cublasLt): epilogues
    CUDNN = "cudnn"           # NVIDIA cuDNN graphs through the nvidia-cudnn-frontend Python package (module cudnn)
    CUFFT = "cufft"           # NVIDIA cuFFT through nvmath-python (nvmath.fft)
    CUSOLVER = "cusolver"     # NVIDIA cuSOLVER (dense) through nvmath-python's bindings (nvmath.bindings.cusolverDn)
    CURAND = "curand"         # NVIDIA cuRAND (host API) through nvmath-python's bindings (nvmath.bindings.curand)

    def __str__(self) -> str:
        return self.value


class Arch(enum.Enum):
    CPU = "cpu"
    SM80 = "sm80"
    SM89 = "sm89"
    SM90 = "sm90"
    SM100 = "sm100"
    OTHER = "other"

    @classmethod
    def from_capability(cls, major: int, minor: int) -> "Arch":
        cc = major * 10 + minor
        if cc >= 100:
            return cls.SM100
        if cc >= 90:
            return cls.SM90
        if cc >= 89:
            return cls.SM89
        if cc >= 80:
            return cls.SM80
        return cls.OTHER

    def __str__(self) -> str:
        return self.value


class MathPrecision(enum.Enum):
    F64 = "f64"
    F32 = "f32"
    TF32 = "tf32"
    BF16 = "bf16"
    F16 = "f16"
    FP8 = "fp8"
    INT = "int"
    EXACT = "exact"  # data movement / comparisons: no rounding at all

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class PrecisionGuarantee:
    """What a kernel promises about its arithmetic.

    math: the precision of the multiplies/transcendentals; accumulator: the dtype sums are carried in;
    bit_stable: the same inputs give the same bits on the same hardware; deterministic: no atomics or
    order-dependent reductions (a weaker promise than bit_stable only for multi-device runs).
    """

    math: MathPrecision
    accumulator: DType
    bit_stable: bool = True
    deterministic: bool = True

    def __str__(self) -> str:
        flags = ("bit-stable" if self.bit_stable else "not-bit-stable",
                 "deterministic" if self.deterministic else "nondeterministic")
        return f"math={self.math} acc={self.accumulator} {' '.join(flags)}"


@dataclass(frozen=True)
class KernelSku:
    category: str
    op: str
    dtype: DType
    aux_dtype: DType | None
    layout: str | None
    epilogue: str | None
    arch: Arch
    backend: Backend
    route: str            # the concrete kernel or library entry point, e.g. "triton:ew_contig" or "torch.matmul->cublasLt"
    precision: PrecisionGuarantee

    def __str__(self) -> str:
        parts = [f"{self.category}.{self.op}", str(self.dtype)]
        if self.aux_dtype is not None:
            parts.append(f"aux={self.aux_dtype}")
        if self.layout:
            parts.append(f"layout={self.layout}")
        if self.epilogue:
            parts.append(f"epilogue={self.epilogue}")
        parts += [str(self.arch), f"{self.backend}[{self.route}]", f"({self.precision})"]
        return " ".join(parts)
