"""Backends register their implementations on import; availability is decided per device at run time."""
from __future__ import annotations

import functools
import importlib

from .._core.device import Device, cuda_available, triton_interpreting
from .._core.options import PlanPreference
from .._core.registry import register_backend
from .._core.sku import Backend



def with_produce(run, desc, channels_last, like: int = 0):
    """``run`` plus ``run.produce``, which Plan.run without ``out=`` (a drop-in call) uses to allocate the outputs:
    those of 4-d / 5-d shape channels-last where ``channels_last(xs)`` says so (torch's layout rule of the op: a
    pooling of a channels-last input, a channels-last convolution's gradients), the rest contiguous, all on input
    ``like``'s device.  The Plan API's given or default (contiguous) outputs are written as they are."""
    import torch

    specs = [(tuple(t.shape), t.dtype.torch) for t in desc.outputs]
    formats = {4: torch.channels_last, 5: torch.channels_last_3d}

    def produce(xs):
        cl, dev = channels_last(xs), xs[like].device
        outs = [torch.empty(shp, dtype=dt, device=dev, memory_format=formats.get(len(shp), torch.contiguous_format)
                            if cl else torch.contiguous_format) for shp, dt in specs]
        run(desc, xs, outs, None)
        return outs
    run.produce = produce
    return run

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


def _nvidia_library(name: str, loaded=lambda: None):
    """The availability check of an NVIDIA library backend: a CUDA device torch sees, then ``loaded()`` (why the
    library cannot be used in this process, or None)."""
    def available(device: Device, pref: PlanPreference) -> str | None:
        if device.type != "cuda":
            return f"{name} needs a CUDA device"
        if not cuda_available():
            return "no CUDA device visible to torch"
        return loaded()
    return available


# the oldest libcudnn whose SDPA graphs backends/nvidia/cudnn_sdpa.py is written against (cuDNN 9: the fused flash
# forward / backward with diagonal-band masks, GQA and d_qk != d_v)
CUDNN_MIN_VERSION = 90000


@functools.lru_cache(maxsize=None)
def cudnn_import_error() -> str | None:
    """Why NVIDIA's cuDNN frontend cannot be used in this process, or None.  Asked at plan time only (never at
    ``import baracuda``): torch first, whose CUDA wheels load libcudnn.so.9, so the frontend's loader finds that same
    library; then the frontend module ``cudnn`` (pip package nvidia-cudnn-frontend, in baracuda's ``gpu`` extra);
    then the library itself (the frontend imports without it and fails only at its first backend call)."""
    try:
        import torch  # noqa: F401
    except Exception as e:
        return f"torch not importable ({type(e).__name__}: {e})"
    try:
        import cudnn
    except Exception as e:  # ImportError, or a broken install
        return ("NVIDIA's cuDNN frontend is not importable (module 'cudnn' from the pip package nvidia-cudnn-frontend, "
                f"in baracuda's 'gpu' extra: {type(e).__name__}: {e})")
    try:
        version = int(cudnn.backend_version())
    except Exception as e:  # the frontend found no libcudnn: "Unable to find symbol cudnnGetVersion"
        return (f"libcudnn could not be loaded by the cuDNN frontend {getattr(cudnn, '__version__', '?')} "
                f"({type(e).__name__}: {e}); torch's CUDA wheels bring it as nvidia-cudnn-cu12 / nvidia-cudnn-cu13")
    if version < CUDNN_MIN_VERSION:
        return f"libcudnn {version} is older than {CUDNN_MIN_VERSION} (cuDNN 9), the first with these SDPA graphs"
    return None



def library_versions() -> dict[str, str]:
    """The NVIDIA libraries this process can load, each as 'major.minor.patch' -- or, where one cannot be loaded,
    the reason (``baracuda info`` prints both).  cuBLAS / cuBLASLt / cuFFT / cuSOLVER / cuRAND are asked through
    nvmath-python's bindings (``get_property``: the library's own version, not the toolkit's); cuDNN through its
    frontend (``backend_version``: 90100 for 9.1.0)."""
    out: dict[str, str] = {}
    for name, module in (("cuBLAS", "cublas"), ("cuBLASLt", "cublasLt"), ("cuFFT", "cufft"),
                         ("cuSOLVER", "cusolver"), ("cuRAND", "curand")):
        try:
            lib = importlib.import_module(f"nvmath.bindings.{module}")
        except Exception as e:  # noqa: BLE001  (reported, not raised)
            out[name] = f"not available: nvmath-python is not importable ({type(e).__name__})"
            continue
        try:
            out[name] = ".".join(str(int(lib.get_property(k))) for k in (0, 1, 2))   # MAJOR, MINOR, PATCH_LEVEL
        except Exception as e:  # noqa: BLE001  (nvmath's loader found no library)
            out[name] = f"not available: {type(e).__name__}: {str(e)[:120]}"
    why = cudnn_import_error()
    if why is None:
        import cudnn

        v = int(cudnn.backend_version())
        out["cuDNN"] = f"{v // 10000}.{v // 100 % 100}.{v % 100} (frontend {getattr(cudnn, '__version__', '?')})"
    else:
        out["cuDNN"] = f"not available: {why}"
    return out

# nvmath-python's parts: (the library behind the bindings, the pip wheel that brings it)
_NVMATH_LIBS = {"fft": ("libcufft", "nvidia-cufft"), "cusolverDn": ("libcusolver", "nvidia-cusolver"),
                "curand": ("libcurand", "nvidia-curand"), "cublasLt": ("libcublasLt", "nvidia-cublas")}


@functools.lru_cache(maxsize=None)
def nvmath_import_error(part: str) -> str | None:
    """Why nvmath-python's ``part`` (``"fft"``: the cuFFT host API; ``"cusolverDn"``: the dense cuSOLVER bindings;
    ``"curand"``: the cuRAND host-API bindings; ``"cublasLt"``: the cuBLASLt bindings) cannot be used in this
    process, or None.  Asked at plan time only:
    torch first (its CUDA wheels bring libcufft / libcusolver / libcurand, which nvmath's loader finds), then the
    package (pip nvmath-python, in baracuda's 'gpu' extra), then the library behind it (the bindings import without
    it and fail at their first call: ``get_version()``)."""
    try:
        import torch  # noqa: F401
    except Exception as e:
        return f"torch not importable ({type(e).__name__}: {e})"
    try:
        if part == "fft":
            import nvmath.fft  # noqa: F401
            from nvmath.bindings import cufft as lib
        elif part == "curand":
            from nvmath.bindings import curand as lib
        elif part == "cublasLt":
            from nvmath.bindings import cublasLt as lib
        else:
            from nvmath.bindings import cusolver as lib
            from nvmath.bindings import cusolverDn  # noqa: F401
    except Exception as e:  # ImportError, or a broken install
        return (f"nvmath-python is not importable (pip package nvmath-python, in baracuda's 'gpu' extra: "
                f"{type(e).__name__}: {e})")
    try:
        lib.get_version()
    except Exception as e:  # nvmath's loader found no library
        name, wheel = _NVMATH_LIBS[part]
        return (f"{name} could not be loaded by nvmath-python ({type(e).__name__}: {e}); torch's CUDA wheels bring it "
                f"({wheel}), or install nvmath-python[cu12] / [cu13]")
    return None


register_backend(Backend.REFERENCE, _reference_available)
register_backend(Backend.TRITON, _triton_available)
register_backend(Backend.CUBLAS, _nvidia_library("cuBLAS"))
register_backend(Backend.CUDNN, _nvidia_library("cuDNN", cudnn_import_error))
register_backend(Backend.CUFFT, _nvidia_library("cuFFT", lambda: nvmath_import_error("fft")))
register_backend(Backend.CUSOLVER, _nvidia_library("cuSOLVER", lambda: nvmath_import_error("cusolverDn")))
register_backend(Backend.CURAND, _nvidia_library("cuRAND", lambda: nvmath_import_error("curand")))
register_backend(Backend.CUBLASLT, _nvidia_library("cuBLASLt", lambda: nvmath_import_error("cublasLt")))

from . import reference  # noqa: E402,F401
from . import nvidia  # noqa: E402,F401

if triton_import_error() is None:
    from . import triton  # noqa: E402,F401
