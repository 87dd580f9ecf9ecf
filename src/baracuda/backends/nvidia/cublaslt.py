"""``linear`` / ``linear_act`` on cuBLASLt through nvmath-python's bindings (``nvmath.bindings.cublasLt``), the
epilogues torch does not reach.

The row-major product y[M, N] = x[M, K] @ W[N, K]^T is cuBLASLt's column-major D[N, M] = op(A) @ B with A = W read
as a K x N matrix (ld K) transposed, B = x read as K x M (ld K) and D = y read as N x M (ld N): no copy for
contiguous x (any leading dims, folded to M rows) and W.  The epilogue (cublasLtEpilogue_t) per descriptor:

=================  ========================  =====================================================
op / activation    epilogue                  what it adds over the torch route (backends/nvidia/cublas.py)
=================  ========================  =====================================================
linear             DEFAULT / BIAS            nothing (the same library call; a cuBLASLt plan of its own)
linear_act relu    RELU / RELU_BIAS          torch's _addmm_activation does the same for a bias
linear_act gelu_t  GELU / GELU_BIAS          no bias needed for the fused activation
gelu_tanh + saved  GELU_AUX / GELU_AUX_BIAS  the pre-activation written by the epilogue as the aux output, where
                                             the torch route runs the GEMM, then a Triton pass (pre -> y)
=================  ========================  =====================================================

Refused (the torch route or Triton take them): f64 (cuBLASLt's f64 GEMM has no epilogue gain), erf-gelu and silu
(no such epilogue), relu with ``save_preact`` (RELU_AUX stores a bit mask, not the pre-activation), leading dims
not multiples of 16 bytes (K, N: cuBLASLt's heuristics need aligned columns for the epilogue kernels), zero sizes.

Bound once per plan (``bind``): the matmul descriptor (compute type f32, or TF32 for f32 under
``allow_reduced_precision``; scale type f32), the three matrix layouts, the preference (workspace cap ``WORKSPACE``,
split-K reductions in the compute type only unless reduced precision is allowed: the torch route's promise of f32
accumulation), and the heuristic's best algorithm.  A call sets the bias / aux pointers on the plan's descriptor
(under a lock: the descriptor is shared by the plan's callers) and launches ``cublasLtMatmul`` on torch's current
stream with the plan's workspace.  Precision as cuBLAS's (``cublas_precision``): deterministic for a fixed
algorithm, not bit-stable across installs.

Priority, measured on the H100 (bf16, M = 8192, K = 4096; bench/cublaslt_bench.py, session 10 runs G and H): with
``save_preact`` (GELU_AUX(_BIAS): one kernel writes y and the pre-activation) 1.667 ms against the torch route's
1.743 ms (GEMM, then a Triton pass): 55, above the route's 50.  Every other form runs the same kind of GEMM as the
torch route, which was faster with its own algorithm choice (plain / bias 0.42 vs 0.37 ms, relu 1.82 vs 1.65,
gelu_tanh 1.68 vs 1.53) and cheaper on the host (33 vs 23 us a call): 45, below it;
``PlanPreference(prefer=(Backend.CUBLASLT,))`` selects it there.
"""
from __future__ import annotations

import ctypes
import threading
import weakref

from ..._core.dtypes import DType
from ..._core.errors import UnsupportedError
from ..._core.registry import Impl, register
from ..._core.sku import Backend
from ...ops.gemm import epilogue_tag, layout_tag, linear_dims
from .cublas import _allow, cublas_precision
from .streams import raw_stream

WORKSPACE = 32 * 1024 * 1024      # bytes offered to cuBLASLt's heuristic (its recommendation on Hopper)
PRIORITY = 45.0            # below the torch route (50) ...
PRIORITY_AUX = 55.0        # ... except where the epilogue writes the saved pre-activation (above it)
_CUDA_T = {DType.bf16: 14, DType.f16: 2, DType.f32: 0}     # cudaDataType_t: CUDA_R_16BF, CUDA_R_16F, CUDA_R_32F
_CUDA_R_32F = 0
_OP_T = 1                                                   # cublasOperation_t CUBLAS_OP_T
_ALGO_BYTES = 64                                            # sizeof(cublasLtMatmulAlgo_t): the result's first field
_REDUCE_COMPUTE_TYPE = 2                                    # CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE
_ACTS = ("relu", "gelu_tanh")
_ALIGN = 256                                                # every operand's address (as torch's fresh allocations)

_HANDLES: dict = {}
_HANDLE_LOCK = threading.Lock()


def _lib():
    from nvmath.bindings import cublasLt

    return cublasLt


def _handle(index: int) -> int:
    h = _HANDLES.get(index)
    if h is None:
        import torch

        with _HANDLE_LOCK:
            h = _HANDLES.get(index)
            if h is None:
                with torch.cuda.device(index):
                    h = _HANDLES[index] = _lib().create()
    return h


def _parts(desc):
    """(activation or None, has bias, saves the pre-activation)."""
    act = desc.attr("activation") if desc.op == "linear_act" else None
    save = desc.op == "linear_act" and bool(desc.attr("save_preact"))
    return act, len(desc.inputs) == 3, save


def _epilogue_name(desc) -> str:
    act, bias, save = _parts(desc)
    base = {None: "", "relu": "RELU", "gelu_tanh": "GELU"}[act] + ("_AUX" if save else "")
    if not base:
        return "BIAS" if bias else "DEFAULT"
    return base + ("_BIAS" if bias else "")


def _supports(desc):
    from .. import nvmath_import_error

    why = nvmath_import_error("cublasLt")
    if why:
        return why
    if desc.dtype not in _CUDA_T:
        return f"cuBLASLt's epilogue GEMMs here take bf16 / f16 / f32, not {desc.dtype} (the torch route runs it)"
    act, _bias, save = _parts(desc)
    if act is not None and act not in _ACTS:
        return f"cuBLASLt has no {act} epilogue (relu and gelu_tanh only)"
    if act == "relu" and save:
        return "relu with save_preact: cuBLASLt's RELU_AUX stores a bit mask, not the pre-activation"
    m, k, n = linear_dims(desc.op, desc.inputs)
    if m * k * n == 0:
        return "a zero-size product (the torch route returns it)"
    per = 16 // desc.dtype.itemsize
    if k % per or n % per:
        return f"in_features and out_features must be multiples of {per} (16-byte columns); got K={k}, N={n}"
    return None


def _set(setter, obj, attr, value, dtype):
    import numpy as np

    buf = np.array([value], dtype=dtype)
    setter(obj, attr, buf.ctypes.data, buf.nbytes)


def _bind(desc, pref=None):
    import numpy as np
    import torch

    lib = _lib()
    A = lib.MatmulDescAttribute
    m, k, n = linear_dims(desc.op, desc.inputs)
    _act, bias, save = _parts(desc)
    allow = _allow(pref)
    from nvmath.bindings import cublas

    ct = cublas.ComputeType
    compute = ct.COMPUTE_32F_FAST_TF32 if desc.dtype == DType.f32 and allow else ct.COMPUTE_32F
    cdt = _CUDA_T[desc.dtype]
    index = torch.cuda.current_device()
    handle = _handle(index)
    mdesc = lib.matmul_desc_create(int(compute), _CUDA_R_32F)
    _set(lib.matmul_desc_set_attribute, mdesc, A.TRANSA, _OP_T, np.int32)
    _set(lib.matmul_desc_set_attribute, mdesc, A.EPILOGUE, int(getattr(lib.Epilogue, _epilogue_name(desc))),
         np.uint32)
    if save:
        _set(lib.matmul_desc_set_attribute, mdesc, A.EPILOGUE_AUX_LD, n, np.int64)
    a_lay = lib.matrix_layout_create(cdt, k, n, k)
    b_lay = lib.matrix_layout_create(cdt, k, m, k)
    d_lay = lib.matrix_layout_create(cdt, n, m, n)
    mpref = lib.matmul_preference_create()
    P = lib.MatmulPreferenceAttribute
    _set(lib.matmul_preference_set_attribute, mpref, P.MAX_WORKSPACE_BYTES, WORKSPACE, np.uint64)
    if not allow:
        _set(lib.matmul_preference_set_attribute, mpref, P.REDUCTION_SCHEME_MASK, _REDUCE_COMPUTE_TYPE, np.uint32)
    for attr in (P.MIN_ALIGNMENT_A_BYTES, P.MIN_ALIGNMENT_B_BYTES, P.MIN_ALIGNMENT_C_BYTES, P.MIN_ALIGNMENT_D_BYTES):
        _set(lib.matmul_preference_set_attribute, mpref, attr, _ALIGN, np.uint32)   # (run() guarantees them)
    heur = lib.MatmulHeuristicResult(1)
    count = np.zeros(1, dtype=np.int32)
    with torch.cuda.device(index):
        lib.matmul_algo_get_heuristic(handle, mdesc, a_lay, b_lay, d_lay, d_lay, mpref, 1, heur.ptr,
                                      count.ctypes.data)
    lib.matmul_preference_destroy(mpref)
    if int(count[0]) == 0:
        _destroy(lib, mdesc, (a_lay, b_lay, d_lay))
        raise UnsupportedError(desc.op, f"cuBLASLt's heuristic found no algorithm for {_epilogue_name(desc)} "
                                        f"(M={m}, K={k}, N={n}, {desc.dtype})")
    ws_needed = ctypes.c_size_t.from_address(heur.ptr + _ALGO_BYTES).value
    scalars = np.array([1.0, 0.0], dtype=np.float32)            # alpha, beta
    alpha, beta = scalars.ctypes.data, scalars.ctypes.data + 4
    ptr = np.zeros(1, dtype=np.uint64)
    lock = threading.Lock()
    set_desc, matmul = lib.matmul_desc_set_attribute, lib.matmul
    bias_attr, aux_attr = A.BIAS_POINTER, A.EPILOGUE_AUX_POINTER
    keep = (heur, scalars, ptr)     # (alive as long as the plan's run)

    def run(d, inputs, outputs, ws):
        x, w = _operand(inputs[0]), _operand(inputs[1])
        outs = [o if o.is_contiguous() and not o.data_ptr() % _ALIGN else
                torch.empty(o.shape, dtype=o.dtype, device=o.device) for o in outputs]
        y = outs[0]
        stream = raw_stream(x.device.index)
        wsp = ws.data_ptr() if ws is not None else 0
        b = _operand(inputs[2]) if bias else None      # (held until the launch)
        with lock:
            if bias:
                ptr[0] = b.data_ptr()
                set_desc(mdesc, bias_attr, ptr.ctypes.data, 8)
            if save:
                ptr[0] = outs[1].data_ptr()
                set_desc(mdesc, aux_attr, ptr.ctypes.data, 8)
            matmul(_handle(x.get_device()), mdesc, alpha, w.data_ptr(), a_lay, x.data_ptr(), b_lay, beta,
                   y.data_ptr(), d_lay, y.data_ptr(), d_lay, heur.ptr, wsp, min(ws_needed, WORKSPACE) if wsp else 0,
                   stream)
        for o, t in zip(outputs, outs):
            if o is not t:
                o.copy_(t)
    run.keep = keep
    weakref.finalize(run, _destroy, lib, mdesc, (a_lay, b_lay, d_lay))   # (the plan's descriptor and layouts)
    return run


def _destroy(lib, mdesc, layouts) -> None:
    lib.matmul_desc_destroy(mdesc)
    for lay in layouts:
        lib.matrix_layout_destroy(lay)


def _operand(t):
    """``t`` contiguous at a ``_ALIGN``-byte aligned address (a copy only where it is not: a view at an offset)."""
    if not t.is_contiguous():
        t = t.contiguous()
    return t if not t.data_ptr() % _ALIGN else t.clone()


def _priority(desc, dev) -> float:
    return PRIORITY_AUX if _parts(desc)[2] else PRIORITY


def _run_default(desc, inputs, outputs, ws):
    _bind(desc, None)(desc, inputs, outputs, ws)


def _route(desc, pref):
    tf32 = "[tf32]" if desc.dtype == DType.f32 and _allow(pref) else ""
    return f"nvmath.bindings.cublasLt.matmul({_epilogue_name(desc)} epilogue){tf32}"


for _op in ("linear", "linear_act"):
    register(Impl(op=_op, backend=Backend.CUBLASLT, run=_run_default, bind=_bind, precision=cublas_precision,
                  dtypes=frozenset(_CUDA_T), dtypes_note="f64 and integer products run on the torch route / Triton",
                  devices=frozenset({"cuda"}), priority=_priority, route=_route, supports=_supports,
                  workspace=lambda desc: WORKSPACE, layout=layout_tag, epilogue=epilogue_tag, array_api="torch"))
