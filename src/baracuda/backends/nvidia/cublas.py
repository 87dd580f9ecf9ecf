"""cuBLAS / cuBLASLt for the GEMM family, through torch's thin entry points.

torch.mm / torch.bmm / torch.matmul call cublasGemmEx / cublasGemmStridedBatchedEx with op flags for
transposed views (a ``.mT`` view costs nothing: the adapter passes ``a.mT`` for trans_a); torch.addmm with
a 1-D contiguous bias calls cublasLtMatmul with the BIAS epilogue, and torch._addmm_activation with the
RELU_BIAS / GELU_BIAS epilogues (cuBLASLt's GELU is the tanh approximation).  Views whose strides cuBLAS
cannot express (no unit stride in the last two axes, stride-0 expands) are copied by torch first: slower,
never wrong.  For activations cuBLASLt lacks (silu, erf-gelu), the GEMM adds the bias and the activation
runs in place on the output with the Triton elementwise template (a second pass: 2 bytes read + 2 written
per bf16 output element); the route says so.

Precision flags: torch reads its cuBLAS math flags at every call, so the adapter sets them for the duration
of one call from the plan's PlanPreference and restores them after (they are process-global: a matmul run
concurrently from another Python thread sees them):
* f32: TF32 tensor cores only when ``allow_reduced_precision``; otherwise true f32 (SGEMM).
* bf16/f16: cuBLAS may reduce split-K partial sums in the half type unless told not to
  (CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION); that is allowed only with ``allow_reduced_precision``,
  so the default promises f32 accumulation throughout.

Host cost: everything that depends only on the descriptor (entry point, transposes, the [B, S, K] fold, which
flag to guard) is decided when the plan binds; a call is the torch call plus, only where the flag differs
from the wanted value, one set and one restore (~0.1 us to read the flag otherwise).  bf16/f16 under the
default (strict) preference do differ from torch's default (reduced reductions allowed), so they pay the
set/restore (~0.5 us); the PlanPreference(allow_reduced_precision=True) plans then match torch's defaults.

Determinism: for a fixed problem, library version and GPU, cuBLAS picks one algorithm and its reductions are
fixed-order (no atomics unless split-K with atomics is chosen, which cuBLAS does not do on one stream with
the default workspace), so ``deterministic=True``.  ``bit_stable=False``: the algorithm cuBLAS(Lt) picks
depends on pointer alignment, workspace size and library version, so the same values at other addresses or
on another install may round differently.
"""
from __future__ import annotations

from ..._core.dtypes import FLOAT_TYPES, DType
from ..._core.registry import Impl, register
from ..._core.sku import Backend, MathPrecision, PrecisionGuarantee
from ...ops.gemm import GEMM_OPS, epilogue_tag, layout_tag, linear_dims

# torch._C accessors of the math flag that matters per dtype: (getter, setter)
_FLAG_FNS = {
    DType.f32: ("_get_cublas_allow_tf32", "_set_cublas_allow_tf32"),
    DType.bf16: ("_get_cublas_allow_bf16_reduced_precision_reduction",
                 "_set_cublas_allow_bf16_reduced_precision_reduction"),
    DType.f16: ("_get_cublas_allow_fp16_reduced_precision_reduction",
                "_set_cublas_allow_fp16_reduced_precision_reduction"),
}


def flag_switch(dt: DType, allow: bool):
    """``(swap, restore)`` for torch's cuBLAS math flag of ``dt`` (None for dtypes without one, f64).

    ``swap()`` sets the flag to ``allow`` and returns what ``restore`` needs to put it back, or None when the
    flag already has that value (then nothing is set or restored: a getter call, ~0.1 us, is all a call
    pays).  The reduced-precision-reduction flags are a bool in older torch and a pair (allow,
    allow_split_k) in newer; the pair keeps its second member.  If the caller set TF32 through torch's
    newer ``fp32_precision`` API, the legacy getter refuses (mixed API state): the new API is used then.
    """
    names = _FLAG_FNS.get(dt)
    if names is None:
        return None
    import torch

    get, put = getattr(torch._C, names[0]), getattr(torch._C, names[1])
    want = bool(allow)
    new_api = "tf32" if want else "ieee"

    def swap():
        try:
            cur = get()
        except RuntimeError:   # TF32 state set through the newer fp32_precision API
            if dt != DType.f32:
                raise
            m = torch.backends.cuda.matmul
            prev = m.fp32_precision
            if prev == new_api:
                return None
            m.fp32_precision = new_api
            return ("fp32_precision", prev)
        if type(cur) is tuple:
            if cur[0] == want:
                return None
            put(want, *cur[1:])
            return cur
        if cur == want:
            return None
        put(want)
        return (cur,)

    def restore(prev):
        if prev[0] == "fp32_precision":
            torch.backends.cuda.matmul.fp32_precision = prev[1]
        else:
            put(*prev)
    return swap, restore


class MathMode:
    """``with MathMode(dtype, allow):`` sets torch's cuBLAS flag for ``dtype`` to ``allow``, restores it after
    (a context-manager form of :func:`flag_switch`; the bound run functions call swap/restore directly)."""

    __slots__ = ("sw", "prev")

    def __init__(self, dt: DType, allow: bool):
        self.sw = flag_switch(dt, allow)
        self.prev = None

    def __enter__(self):
        self.prev = self.sw[0]() if self.sw is not None else None
        return self

    def __exit__(self, *exc):
        if self.prev is not None:
            self.sw[1](self.prev)
            self.prev = None
        return False


def _guarded(call, dt: DType, allow: bool):
    """run(desc, inputs, outputs, ws) around ``call(inputs, outputs)`` with the math flag of ``dt`` set to
    ``allow`` for the call only; no flag handling at all when ``dt`` has none."""
    sw = flag_switch(dt, allow)
    if sw is None:
        def run(d, inputs, outputs, ws):
            call(inputs, outputs)
        return run
    swap, restore = sw

    def run(d, inputs, outputs, ws):
        prev = swap()
        try:
            call(inputs, outputs)
        finally:
            if prev is not None:
                restore(prev)
    return run


def _with_produce(run, produce, dt: DType, allow: bool):
    """``run`` with ``run.produce(inputs) -> [output]``: the GEMM through torch's functional entry point, which
    allocates its own (contiguous) result -- what ``Plan.launcher`` calls when it owns the outputs, saving our
    allocation and torch's out= checks (~3-5 us a call on the H100 host) -- under the same math flag."""
    sw = flag_switch(dt, allow)
    if sw is None:
        run.produce = produce
        return run
    swap, restore = sw

    def guarded(inputs):
        prev = swap()
        try:
            return produce(inputs)
        finally:
            if prev is not None:
                restore(prev)
    run.produce = guarded
    return run


def _allow(pref) -> bool:
    return bool(pref is not None and pref.allow_reduced_precision)


def torch_run(call, produce, desc, pref):
    """The bound run of a plan that calls torch's cuBLAS entry points: ``call(inputs, outputs)`` (into given
    outputs) with ``.produce(inputs) -> [outputs]`` (torch allocates), both under the math flag of ``pref``."""
    allow = _allow(pref)
    return _with_produce(_guarded(call, desc.dtype, allow), produce, desc.dtype, allow)


def cublas_precision(desc, pref=None) -> PrecisionGuarantee:
    dt, rp = desc.dtype, _allow(pref)
    if not dt.is_floating:     # the integer / bool paths (torch.addr, torch.outer): exact, in the dtype
        return PrecisionGuarantee(MathPrecision.INT, dt, True, True)
    if dt == DType.f64:
        return PrecisionGuarantee(MathPrecision.F64, DType.f64, bit_stable=False, deterministic=True)
    if dt == DType.f32:
        return PrecisionGuarantee(MathPrecision.TF32 if rp else MathPrecision.F32, DType.f32, False, True)
    math = MathPrecision.BF16 if dt == DType.bf16 else MathPrecision.F16
    # with reduced-precision reduction allowed, split-K partials may be summed in the half type
    return PrecisionGuarantee(math, dt if rp else DType.f32, False, True)


# -- matmul / mm / bmm -------------------------------------------------------------------------------------
# Everything that depends only on the descriptor (which torch entry point, transposes, the 2-D fold, the flag
# guard) is decided once in bind; run is a few attribute reads and one torch call (host cost ~ torch's own).
def _bind_gemm(desc, pref=None):
    import torch

    ta, tb = desc.attr("trans_a"), desc.attr("trans_b")
    sa, sb = desc.inputs[0].shape, desc.inputs[1].shape
    fn = {"matmul": torch.matmul, "mm": torch.mm, "bmm": torch.bmm}[desc.op]
    if desc.op == "matmul" and len(sa) == 2 and len(sb) == 2:
        fn = torch.mm   # same cuBLAS call, without matmul's shape dispatch
    # [*batch, M, K] @ [K, N] (B shared): torch.matmul folds a into one [batch*M, K] @ [K, N] GEMM on views
    # (no copy when a's leading axes are stride-compatible, e.g. any contiguous [B, S, K]; its out= is viewed
    # the same way).  That fold runs in C++: measured ~3 us cheaper per call than doing the views here.
    if ta or tb:
        def call(inputs, outputs):
            a, b = inputs
            fn(a.mT if ta else a, b.mT if tb else b, out=outputs[0])

        def produce(inputs):
            a, b = inputs
            return [fn(a.mT if ta else a, b.mT if tb else b)]
    else:
        def call(inputs, outputs):
            fn(inputs[0], inputs[1], out=outputs[0])

        def produce(inputs):
            return [fn(inputs[0], inputs[1])]
    return torch_run(call, produce, desc, pref)


# -- linear / linear_act ---------------------------------------------------------------------------------
# cuBLASLt epilogues torch exposes through _addmm_activation: activation -> use_gelu
_LT_ACT = {"relu": False, "gelu_tanh": True}
_LT_DTYPES = (DType.f16, DType.bf16, DType.f32)


def lt_bias_ok(k: int, n: int, dt: DType) -> bool:
    """torch.addmm takes the cuBLASLt bias-epilogue path when the bias is a contiguous [N] vector, beta is 1,
    K > 1 and N > 1 (CUDA >= 12.1), the dtype is f32 / f16 / bf16 and the output is contiguous (the adapters
    guarantee both); otherwise it copies the bias into the output and runs a beta=1 GEMM."""
    return k > 1 and n > 1 and dt in _LT_DTYPES


def _lt_bias_ok(desc) -> bool:
    m, k, n = linear_dims(desc.op, desc.inputs)
    return len(desc.inputs) == 3 and lt_bias_ok(k, n, desc.dtype)


def _plan_linear(desc):
    """-> (gemm kind: 'mm' | 'addmm' | 'addmm_act', fused activation or None, separate activation or None)."""
    act = desc.attr("activation") if desc.op == "linear_act" else None
    save = desc.op == "linear_act" and desc.attr("save_preact")
    has_bias = len(desc.inputs) == 3
    if act is not None and not save and act in _LT_ACT and _lt_bias_ok(desc):
        return "addmm_act", act, None
    return ("addmm" if has_bias else "mm"), None, act


def _bind_linear(desc, pref=None):
    import torch

    m, k, n = linear_dims(desc.op, desc.inputs)
    kind, fused, separate = _plan_linear(desc)
    save = desc.op == "linear_act" and desc.attr("save_preact")
    fold_x = len(desc.inputs[0].shape) != 2      # [*, K] -> [M, K]: a view whenever x's leading axes fold
    fold_y = len(desc.outputs[0].shape) != 2
    if kind == "mm":
        def gemm_call(x2, wt, out, bias):
            torch.mm(x2, wt, out=out)
    elif kind == "addmm":
        def gemm_call(x2, wt, out, bias):
            torch.addmm(bias, x2, wt, out=out)
    else:
        use_gelu = _LT_ACT[fused]

        def gemm_call(x2, wt, out, bias):
            torch._addmm_activation(bias, x2, wt, use_gelu=use_gelu, out=out)
    act_fn = launch = None
    if separate:
        from ..triton.elementwise import launch
        act_fn = _triton_act(separate)

    def as_mn(o):
        """(the [M, N] view the GEMM writes, the tensor to copy back into o or None)."""
        if o.is_contiguous():
            return (o.view(m, n) if fold_y else o), None
        t = torch.empty((m, n), dtype=o.dtype, device=o.device)
        return t, t

    def call(inputs, outputs):
        x = inputs[0]
        x2 = x.reshape(m, k) if fold_x else x     # no copy for a contiguous [B, S, K]
        bias = inputs[2] if len(inputs) == 3 else None
        y2, y_tmp = as_mn(outputs[0])
        pre2, pre_tmp = as_mn(outputs[1]) if save else (y2, None)
        gemm_call(x2, inputs[1].mT, pre2, bias)
        if act_fn is not None:
            launch(act_fn, [pre2], y2)   # in place when pre2 is y2 (elementwise: each element read, then written)
        if y_tmp is not None:
            outputs[0].copy_(y_tmp.view(outputs[0].shape))
        if pre_tmp is not None:
            outputs[1].copy_(pre_tmp.view(outputs[1].shape))
    run = _guarded(call, desc.dtype, _allow(pref))
    if kind == "addmm_act" or separate or save:
        return run
    out_shape = desc.outputs[0].shape
    if kind == "mm":
        def produce(inputs):
            x = inputs[0]
            y = torch.mm(x.reshape(m, k) if fold_x else x, inputs[1].mT)
            return [y.view(out_shape) if fold_y else y]
    else:
        def produce(inputs):
            x = inputs[0]
            y = torch.addmm(inputs[2], x.reshape(m, k) if fold_x else x, inputs[1].mT)
            return [y.view(out_shape) if fold_y else y]
    return _with_produce(run, produce, desc.dtype, _allow(pref))


def _triton_act(act: str):
    from ..triton.gemm import ACT_FN

    return ACT_FN[act]


def _needs_triton(desc) -> bool:
    return desc.op == "linear_act" and _plan_linear(desc)[2] is not None


def _supports(desc):
    if _needs_triton(desc):
        from .. import triton_import_error

        err = triton_import_error()
        if err:
            return f"the {desc.attr('activation')} epilogue runs as a Triton elementwise pass, and {err}"
    return None


# -- routes, priorities ------------------------------------------------------------------------------------
_GEMM_ROUTE = {"matmul": "torch.matmul->cublas", "mm": "torch.mm->cublas",
               "bmm": "torch.bmm->cublas(strided batched)"}
_KIND_ROUTE = {"mm": "torch.mm->cublas", "addmm": "torch.addmm->{lt}",
               "addmm_act": "torch._addmm_activation->cublasLt(bias+{act} epilogue)"}


def tf32_tag(desc, pref) -> str:
    """The route's suffix where an f32 GEMM may use TF32 tensor cores (the preference allows it)."""
    return "[tf32]" if desc.dtype == DType.f32 and _allow(pref) else ""


def _route(desc, pref):
    suffix = tf32_tag(desc, pref)
    if desc.op in GEMM_OPS:
        return _GEMM_ROUTE[desc.op] + suffix
    kind, fused, separate = _plan_linear(desc)
    lt = "cublasLt(bias epilogue)" if _lt_bias_ok(desc) else "cublas(bias copied into out, beta=1)"
    r = _KIND_ROUTE[kind].format(lt=lt, act=fused)
    if separate:
        where = "preact->out" if desc.attr("save_preact") else "in place"
        r += f"+triton:ew({separate}, {where})"
    return r + suffix


def _priority(desc, dev) -> float:
    # cuBLAS first on a GPU for every dtype and epilogue: its kernels are the fastest GEMMs on H100/H200 for
    # plain products and the bias / relu / gelu_tanh epilogues, and GEMM + a separate activation pass still
    # beats Triton's fused silu / erf-gelu epilogue (measured, see backends/triton/gemm.py).
    return 50.0


def _run_default(bind):
    """Impl.run for callers that bypass Plan (no preference): the strict precision."""
    def run(desc, inputs, outputs, ws):
        bind(desc, None)(desc, inputs, outputs, ws)
    return run


# cuBLAS has no integer GEMM, and torch's CUDA matmuls refuse integers ("addmm_cuda" not implemented for 'Long')
INT_NOTE = ("cuBLAS has no integer GEMM and torch's CUDA matmuls refuse integers too ('addmm_cuda' not implemented for "
            "'Long'); the Triton backend runs integer mm / bmm / matmul / linear / kron / trace on CUDA, the reference "
            "backend every integer GEMM form on the CPU")


def register_cublas(op: str, bind, route, supports=None, layout=None, epilogue=None, priority=_priority,
                    dtypes=FLOAT_TYPES) -> Impl:
    """Register ``op``'s cuBLAS implementation: ``bind(desc, pref)`` -> the bound run (``torch_run``); ``dtypes``:
    the floating types unless the plan has an integer path (None: every dtype of the spec)."""
    return register(Impl(op=op, backend=Backend.CUBLAS, run=_run_default(bind), bind=bind, precision=cublas_precision,
                         dtypes=frozenset(dtypes) if dtypes is not None else None,
                         dtypes_note=INT_NOTE if dtypes is not None else "",
                         devices=frozenset({"cuda"}), priority=priority, route=route, supports=supports,
                         layout=layout, epilogue=epilogue, array_api="torch"))


for _op, _bind in [(o, _bind_gemm) for o in GEMM_OPS] + [("linear", _bind_linear), ("linear_act", _bind_linear)]:
    register_cublas(_op, _bind, _route, _supports, layout_tag, epilogue_tag)
