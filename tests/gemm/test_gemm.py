"""GEMM family semantics beyond the generic spec tests: strided / transposed views, out= layouts, the TF32
preference, epilogues, the cuBLAS adapter logic (run on CPU torch), backward paths, and an offline sm90
compile check of the Triton kernel (no GPU needed: Triton's bundled ptxas)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.device import triton_interpreting
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend, MathPrecision
from baracuda.testing import assert_close, forced_plan, test_device

torch = pytest.importorskip("torch")

DEV = test_device()
TDEV = "cuda" if DEV.type == "cuda" else "cpu"
GPU_BACKENDS = [Backend.CUBLAS, Backend.TRITON] if DEV.type == "cuda" else [Backend.TRITON]
needs_triton = pytest.mark.skipif(DEV.type == "cpu" and not triton_interpreting(),
                                  reason="Triton on the CPU needs TRITON_INTERPRET=1")
TOL = {torch.float32: (1e-5, 5e-5), torch.float64: (1e-12, 1e-12), torch.bfloat16: (1.6e-2, 8e-3)}


def _t(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype).to(TDEV)


def _ref(a, b):
    return torch.matmul(a.double().cpu(), b.double().cpu()).numpy()


def _impl(op, backend):
    return next(i for i in implementations(op) if i.backend == backend)


def _run(op, backend, *xs, pref_kw=None, out=None, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    plan = forced_plan(desc, DEV, backend, **(pref_kw or {}))
    assert not isinstance(plan, str), plan
    return plan.run(*xs, out=out) if out is not None else plan.run(*xs), plan


# -- strided and transposed views -----------------------------------------------------------------------
def _views():
    """(name, a, b): the same logical [5, 7] @ [7, 6] product through different storage layouts."""
    a, b = _t(5, 7, seed=1), _t(7, 6, seed=2)
    yield "contiguous", a, b
    yield "a.T-view", _t(7, 5, seed=1).T, b                      # column-major A (stride (1, 5))
    yield "b.T-view", a, _t(6, 7, seed=2).T                      # column-major B
    yield "both-T", _t(7, 5, seed=3).T, _t(6, 7, seed=4).T
    yield "sliced-cols", _t(5, 14, seed=5)[:, ::2], _t(7, 18, seed=6)[:, 3:9]    # non-unit / offset strides
    yield "no-unit-stride", _t(10, 21, seed=7)[::2, ::3], _t(14, 12, seed=8)[::2, ::2]  # neither stride is 1
    yield "expanded-row", _t(1, 7, seed=9).expand(5, 7), b       # stride 0 (every row the same)


@needs_triton
@pytest.mark.parametrize("backend", GPU_BACKENDS, ids=str)
@pytest.mark.parametrize("name,a,b", list(_views()), ids=[v[0] for v in _views()])
def test_strided_views(backend, name, a, b):
    out, _ = _run("mm", backend, a, b)
    assert_close(out, _ref(a, b), *TOL[torch.float32], f"mm {name}")
    out, _ = _run("matmul", backend, a, b)
    assert_close(out, _ref(a, b), *TOL[torch.float32], f"matmul {name}")


@needs_triton
@pytest.mark.parametrize("backend", GPU_BACKENDS, ids=str)
def test_transpose_flags_equal_transposed_views(backend):
    at, bt = _t(7, 5, seed=1), _t(6, 7, seed=2)        # stored transposed
    want = _ref(at.T, bt.T)
    for ta, tb, a, b in [(True, True, at, bt), (True, False, at, bt.T), (False, True, at.T, bt)]:
        out, plan = _run("mm", backend, a, b, trans_a=ta, trans_b=tb)
        assert_close(out, want, *TOL[torch.float32], f"trans_a={ta} trans_b={tb}")
        assert plan.sku.layout == ("c" if ta else "r") + ("c" if tb else "r") + "r"


@needs_triton
@pytest.mark.parametrize("backend", GPU_BACKENDS, ids=str)
def test_batched_broadcast_strides(backend):
    a = _t(2, 1, 4, 6, seed=1)[..., ::2, :]          # [2, 1, 2, 6] with a row stride of 12
    b = _t(3, 6, 5, seed=2).transpose(-1, -2).contiguous().transpose(-1, -2)   # column-major batch
    out, _ = _run("matmul", backend, a, b)
    assert_close(out, _ref(a, b), *TOL[torch.float32], "broadcast batch")
    x = _t(3, 4, 6, seed=3)
    w = _t(6, 5, seed=4)                             # shared B: the Triton launcher folds the batch into M
    out, _ = _run("matmul", backend, x, w)
    assert_close(out, _ref(x, w), *TOL[torch.float32], "folded batch")
    x5 = _t(2, 2, 3, 4, 6, seed=5)[:, :, ::2]        # > 2 batch axes that do not merge: host loop
    b5 = _t(2, 1, 2, 6, 3, seed=6)
    out, _ = _run("matmul", backend, x5, b5)
    assert_close(out, _ref(x5, b5), *TOL[torch.float32], "rank-5 batch")


@needs_triton
@pytest.mark.parametrize("backend", GPU_BACKENDS, ids=str)
def test_out_layouts(backend):
    a, b = _t(9, 5, seed=1), _t(5, 7, seed=2)
    want = _ref(a, b)
    buf = torch.full((7, 9), float("nan"), device=TDEV)
    out_t = buf.T                                   # a transposed (column-major) out= view
    _run("mm", backend, a, b, out=out_t)
    assert_close(out_t, want, *TOL[torch.float32], "column-major out")
    wide = torch.full((9, 14), float("nan"), device=TDEV)
    _run("mm", backend, a, b, out=wide[:, ::2])      # strided out=
    assert_close(wide[:, ::2], want, *TOL[torch.float32], "strided out")
    assert torch.isnan(wide[:, 1::2]).all(), "wrote outside the out= view"


@needs_triton
def test_triton_f32_error_bound_vs_sum_abs():
    """Per-element bound err <= c * gamma_K * (|a| @ |b|) (Higham), K = 96: the honest f32 GEMM tolerance."""
    a, b = _t(20, 96, seed=11), _t(96, 24, seed=12)
    out, _ = _run("mm", Backend.TRITON, a, b)
    err = np.abs(out.double().cpu().numpy() - _ref(a, b))
    bound = 96 * 2.0 ** -24 * (a.double().abs().cpu() @ b.double().abs().cpu()).numpy()
    assert (err <= 2 * bound).all()


# -- 1-D operands (torch.matmul semantics) ---------------------------------------------------------------
@needs_triton
@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((4,), (2, 4, 3)), ((2, 3, 4), (4,)), ((4,), (4, 3))])
def test_vector_operands(sa, sb):
    a, b = _t(*sa, seed=1), _t(*sb, seed=2)
    for backend in GPU_BACKENDS + [Backend.REFERENCE]:
        if backend == Backend.REFERENCE and DEV.type == "cuda":
            continue
        out, _ = _run("matmul", backend, a, b)
        assert tuple(out.shape) == tuple(torch.matmul(a, b).shape)
        assert_close(out, _ref(a, b), *TOL[torch.float32], f"{sa} @ {sb} {backend}")


# -- epilogues -----------------------------------------------------------------------------------------
_ACT_PEER = {"relu": lambda x: torch.relu(x), "gelu": lambda x: torch.nn.functional.gelu(x),
             "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
             "silu": lambda x: torch.nn.functional.silu(x)}


@needs_triton
@pytest.mark.parametrize("backend", GPU_BACKENDS, ids=str)
@pytest.mark.parametrize("act", list(_ACT_PEER))
@pytest.mark.parametrize("bias,save", [(True, False), (False, True)])
def test_linear_act_epilogue(backend, act, bias, save):
    x, w = _t(2, 9, 12, seed=1), _t(20, 12, seed=2)
    xs = (x, w, _t(20, seed=3)) if bias else (x, w)
    res, plan = _run("linear_act", backend, *xs, activation=act, save_preact=save)
    pre = torch.nn.functional.linear(*(t.double().cpu() for t in xs))
    y = res[0] if save else res
    assert_close(y, _ACT_PEER[act](pre).numpy(), *TOL[torch.float32], f"{act} y")
    if save:
        assert_close(res[1], pre.numpy(), *TOL[torch.float32], f"{act} preact")
    assert plan.sku.epilogue == "+".join((["bias"] if bias else []) + [act]) + ("+preact" if save else "")


def test_linear_act_refuses_no_activation():
    with pytest.raises(bc.InvalidProblemError, match="for no activation use the op 'linear'"):
        bc.Descriptor.make("linear_act", ((4, 3), "f32"), ((2, 3), "f32"), activation="none")


# -- precision preference (TF32) -------------------------------------------------------------------------
def _f32_desc():
    return bc.Descriptor.make("mm", ((64, 32), "f32"), ((32, 16), "f32"))


@pytest.mark.parametrize("backend", [Backend.CUBLAS, Backend.TRITON], ids=str)
def test_tf32_only_when_allowed(backend):
    desc = _f32_desc()
    impl = _impl("mm", backend)
    strict, loose = bc.PlanPreference(), bc.PlanPreference(allow_reduced_precision=True)
    assert impl.precision(desc, strict).math == MathPrecision.F32
    assert impl.precision(desc, loose).math == MathPrecision.TF32
    assert "tf32" not in impl.route_of(desc, strict)
    assert "tf32" in impl.route_of(desc, loose)
    half = bc.Descriptor.make("mm", ((64, 32), "bf16"), ((32, 16), "bf16"))
    assert impl.precision(half, loose).math == MathPrecision.BF16   # TF32 concerns f32 only
    f64 = bc.Descriptor.make("mm", ((8, 8), "f64"), ((8, 8), "f64"))
    assert impl.precision(f64, loose).math == MathPrecision.F64


def test_cublas_promises_f32_accumulation_unless_allowed():
    impl = _impl("mm", Backend.CUBLAS)
    half = bc.Descriptor.make("mm", ((64, 32), "bf16"), ((32, 16), "bf16"))
    p = impl.precision(half, bc.PlanPreference())
    assert p.accumulator == bc.DType.f32 and p.deterministic and not p.bit_stable
    assert impl.precision(half, bc.PlanPreference(allow_reduced_precision=True)).accumulator == bc.DType.bf16


@pytest.mark.skipif(DEV.type == "cuda", reason="CPU explain: cuBLAS refused with its reason")
def test_explain_on_cpu_lists_refusals_and_precision():
    desc = _f32_desc()
    ex = bc.explain(desc, "cpu", bc.PlanPreference(allow_reduced_precision=True))
    rows = {r[0]: r for r in ex.rows}
    assert rows["cublas"][2] == "refused" and "CUDA device" in rows["cublas"][3]
    assert ex.chosen[0] == "reference"
    if triton_interpreting():
        assert rows["triton"][2] == "eligible" and "math=tf32" in rows["triton"][3]
        strict = {r[0]: r for r in bc.explain(desc, "cpu").rows}
        assert "math=f32" in strict["triton"][3]


def test_math_mode_sets_and_restores_flags():
    from baracuda.backends.nvidia.cublas import MathMode

    m = torch.backends.cuda.matmul
    before = (m.allow_tf32, m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction)
    try:
        m.allow_tf32 = False
        with MathMode(bc.DType.f32, True):
            assert m.allow_tf32 is True
        assert m.allow_tf32 is False
        m.allow_bf16_reduced_precision_reduction = True
        with MathMode(bc.DType.bf16, False):
            assert m.allow_bf16_reduced_precision_reduction is False
        assert m.allow_bf16_reduced_precision_reduction is True
        with MathMode(bc.DType.f64, False):    # nothing to set for f64
            pass
    finally:
        m.allow_tf32, m.allow_bf16_reduced_precision_reduction, m.allow_fp16_reduced_precision_reduction = before


# -- the cuBLAS adapter's logic: on a GPU on CUDA tensors (real cuBLAS(Lt) and the Triton activation pass); on
# the CPU on CPU tensors (the same torch entry points; the Triton pass under TRITON_INTERPRET=1) ----------------
@needs_triton
@pytest.mark.parametrize("act,bias,save", [("gelu_tanh", True, False), ("relu", True, False), ("silu", True, False),
                                           ("gelu", False, False), ("relu", False, True), ("silu", True, True)])
def test_cublas_adapter_logic(act, bias, save):
    from baracuda.backends.nvidia import cublas

    x, w, b = _t(3, 5, 8, seed=1), _t(6, 8, seed=2), _t(6, seed=3)
    xs = (x, w, b) if bias else (x, w)
    desc = bc.Descriptor.like("linear_act", *xs, activation=act, save_preact=save)
    outs = [torch.empty(t.shape, dtype=t.dtype.torch, device=TDEV) for t in desc.outputs]
    cublas._bind_linear(desc, bc.PlanPreference())(desc, list(xs), outs, None)
    pre = torch.nn.functional.linear(*(t.double().cpu() for t in xs))
    fused = act in ("relu", "gelu_tanh") and bias and not save
    want = _ACT_PEER[act](pre)
    if fused and act == "gelu_tanh" and TDEV == "cpu":
        # torch's CPU _addmm_activation(use_gelu=True) applies erf-gelu; on CUDA it is the cuBLASLt GELU epilogue
        # (tanh approximation) or, on its fallback path, gelu(approximate="tanh") - so on CPU tensors only the
        # adapter's plumbing (fold, transpose, out=) is checked against the same torch call
        want = torch._addmm_activation(b.double(), x.double().reshape(-1, 8), w.double().T,
                                       use_gelu=True).reshape(3, 5, 6)
    assert_close(outs[0], want.numpy(), *TOL[torch.float32], f"cublas adapter {act}")
    if save:
        assert_close(outs[1], pre.numpy(), *TOL[torch.float32], "cublas adapter preact")
    route = _impl("linear_act", Backend.CUBLAS).route_of(desc, bc.PlanPreference())
    assert ("cublasLt(bias+" in route) == fused and ("triton:ew" in route) == (not fused)


def test_cublas_adapter_strided_out_and_unfoldable_x():
    """Non-contiguous out= buffers get a scratch result copied back; an x whose rows do not fold is copied by
    reshape (never wrong, only slower)."""
    from baracuda.backends.nvidia import cublas

    x = _t(3, 10, 8, seed=1)[:, ::2]                   # [3, 5, 8], rows do not fold into one stride
    w, b = _t(6, 8, seed=2), _t(6, seed=3)
    desc = bc.Descriptor.like("linear", x, w, b)
    buf = torch.full((6, 3, 5), float("nan"), device=TDEV)
    out = buf.permute(1, 2, 0)                         # [3, 5, 6], not contiguous
    run = cublas._bind_linear(desc, bc.PlanPreference())
    run(desc, [x, w, b], [out], None)
    want = torch.nn.functional.linear(x.double().cpu(), w.double().cpu(), b.double().cpu()).numpy()
    assert_close(out, want, *TOL[torch.float32], "strided out")
    (made,) = run.produce([x, w, b])       # the drop-in's path: torch allocates the (contiguous) result
    assert tuple(made.shape) == (3, 5, 6) and made.is_contiguous()
    assert_close(made, want, *TOL[torch.float32], "linear (produce)")
    plain = bc.Descriptor.like("linear", x, w)
    (made,) = cublas._bind_linear(plain, bc.PlanPreference()).produce([x, w])
    assert_close(made, torch.nn.functional.linear(x.double().cpu(), w.double().cpu()).numpy(), *TOL[torch.float32],
                 "linear without bias (produce)")


@pytest.mark.parametrize("sa,sb,attrs", [((2, 7, 5), (3, 7), {"trans_a": True, "trans_b": True}),
                                         ((2, 4, 7), (7, 3), {}), ((2, 4, 7), (3, 7), {"trans_b": True}),
                                         ((5, 7), (7, 3), {}), ((7,), (7, 3), {})])
def test_cublas_gemm_adapter(sa, sb, attrs):
    """Including the [batch, M, K] @ [K, N] fold to one 2-D GEMM (contiguous a: views; strided a: matmul)."""
    from baracuda.backends.nvidia import cublas

    a, b = _t(*sa, seed=1), _t(*sb, seed=2)
    desc = bc.Descriptor.like("matmul", a, b, **attrs)
    run = cublas._bind_gemm(desc, bc.PlanPreference())
    want = _ref(a.mT if attrs.get("trans_a") else a, b.mT if attrs.get("trans_b") else b)
    out = torch.empty(desc.outputs[0].shape, device=TDEV)
    run(desc, [a, b], [out], None)
    assert_close(out, want, *TOL[torch.float32], "cublas adapter matmul")
    (made,) = run.produce([a, b])          # the drop-in's path: torch allocates the (contiguous) result
    assert made.shape == out.shape and made.dtype == out.dtype and made.is_contiguous()
    assert_close(made, want, *TOL[torch.float32], "cublas adapter matmul (produce)")
    if len(sa) == 3 and not attrs.get("trans_a"):
        a_strided = _t(sa[0], 2 * sa[1], sa[2], seed=1)[:, ::2]
        out = torch.empty(desc.outputs[0].shape, device=TDEV)
        run(desc, [a_strided, b], [out], None)
        assert_close(out, _ref(a_strided, b.mT if attrs.get("trans_b") else b), *TOL[torch.float32], "strided a")


# -- heuristics -----------------------------------------------------------------------------------------
def test_priorities_prefer_cublas():
    """Measured on H200: cuBLAS(Lt) + a separate activation pass beats the fused Triton epilogue, so cuBLAS
    comes first for every GEMM op and activation (Triton stays selectable by preference / autotune)."""
    cuda = bc.Device("cuda")
    tri, cub = _impl("linear_act", Backend.TRITON), _impl("linear_act", Backend.CUBLAS)
    for act in ("silu", "gelu", "gelu_tanh", "relu"):
        d = bc.Descriptor.make("linear_act", ((64, 32), "bf16"), ((16, 32), "bf16"), ((16,), "bf16"), activation=act)
        assert cub.prio(d, cuda) > tri.prio(d, cuda), act
    d = bc.Descriptor.make("mm", ((64, 32), "bf16"), ((32, 16), "bf16"))
    assert _impl("mm", Backend.CUBLAS).prio(d, cuda) > _impl("mm", Backend.TRITON).prio(d, cuda)


def test_save_preact_default_follows_the_backward():
    """Default: keep the pre-activation where the backward needs it (not relu), as eager does: no recompute GEMM."""
    shapes = (((8, 6), "f32"), ((4, 6), "f32"), ((4,), "f32"))
    for act, save in [("gelu_tanh", True), ("gelu", True), ("silu", True), ("relu", False)]:
        d = bc.Descriptor.make("linear_act", *shapes, activation=act)
        assert d.attr("save_preact") is save and len(d.outputs) == (2 if save else 1), act
        ops = [s.op for s in bc.BackwardPlan.select(d, "cpu").skus]
        assert "linear" not in ops, (act, ops)    # the backward never recomputes the pre-activation
    d = bc.Descriptor.make("linear_act", *shapes, activation="silu", save_preact=False)
    assert len(d.outputs) == 1 and "linear" in [s.op for s in bc.BackwardPlan.select(d, "cpu").skus]


def test_tile_config_choice():
    """GPU tile heuristic (pure function of the problem and the SM count; H100/H200: 132 SMs)."""
    from baracuda.backends.triton.gemm.gemm import CONFIGS, choose_config

    large, medium, shallow = (CONFIGS[("half", s)] for s in ("large", "medium", "shallow"))
    assert choose_config("half", 8192, 8192, 1, 8192, 132) == large
    assert choose_config("half", 8192, 4096, 1, 4096, 132) == large           # linear 8192x4096->4096
    assert choose_config("half", 2048, 2048, 32, 128, 132) == shallow         # bmm K=128: store-bound
    # bmm backward dA = dC @ B^T: N = 128 would fill half of a 256-wide tile (every column computed twice)
    assert choose_config("half", 2048, 128, 32, 2048, 132) == medium
    assert choose_config("half", 128, 2048, 32, 2048, 132) == large           # dB = A^T @ dC: M = 128 fits
    assert choose_config("half", 512, 512, 1, 512, 132).bm == 64             # 16 large tiles: too few for 132 SMs


def test_cost_model():
    d = bc.Descriptor.make("bmm", ((32, 2048, 128), "bf16"), ((32, 128, 2048), "bf16"))
    nbytes, flops = d.spec.bytes_flops(d)
    assert flops == 2 * 2048 * 2048 * 128 * 32
    assert nbytes == 2 * (2 * 32 * 2048 * 128 + 32 * 2048 * 2048)
    d = bc.Descriptor.make("linear_act", ((8, 16, 64), "bf16"), ((32, 64), "bf16"), ((32,), "bf16"), activation="silu")
    assert d.spec.bytes_flops(d)[1] == 2 * 128 * 32 * 64


# -- backward paths ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("sa,sb,attrs", [((2, 3, 4), (4, 5), {}), ((2, 3, 4), (5, 4), {"trans_b": True}),
                                         ((3, 1, 4, 5), (2, 5, 3), {}), ((2, 4, 3), (4, 5), {"trans_a": True}),
                                         ((4,), (2, 4, 3), {}), ((2, 3, 4), (4,), {}), ((6,), (6,), {})])
def test_matmul_backward_vs_autograd(sa, sb, attrs):
    """Batch-fold (b shared), broadcast reduction, transposes and vectors, f64 on the reference backend."""
    a, b = _t(*sa, dtype=torch.float64, seed=1).cpu(), _t(*sb, dtype=torch.float64, seed=2).cpu()
    desc = bc.Descriptor.like("matmul", a, b, **attrs)
    g = torch.randn(desc.outputs[0].shape, dtype=torch.float64)
    ga, gb = bc.BackwardPlan.select(desc, "cpu").run(g, a=a, b=b)
    at, bt = a.clone().requires_grad_(), b.clone().requires_grad_()
    y = torch.matmul(at.mT if attrs.get("trans_a") else at, bt.mT if attrs.get("trans_b") else bt)
    wa, wb = torch.autograd.grad((y * g).sum(), [at, bt])
    assert_close(ga, wa.numpy(), 1e-12, 1e-12, "dA")
    assert_close(gb, wb.numpy(), 1e-12, 1e-12, "dB")


@pytest.mark.parametrize("act,save", [("gelu", False), ("silu", False), ("gelu_tanh", True), ("relu", False)])
def test_linear_act_backward_paths_vs_autograd(act, save):
    x, w, b = (_t(*s, dtype=torch.float64, seed=i).cpu() for i, s in enumerate([(2, 3, 5), (4, 5), (4,)]))
    desc = bc.Descriptor.like("linear_act", x, w, b, activation=act, save_preact=save)
    bw = bc.BackwardPlan.select(desc, "cpu")
    outs = bc.Plan.select(desc, "cpu").run(x, w, b)
    outs = outs if isinstance(outs, tuple) else (outs,)
    gy = torch.randn(outs[0].shape, dtype=torch.float64)
    saved = {"x": x, "weight": w, "bias": b}
    saved.update({"out0": outs[0], "out1": outs[1]} if save else {"out": outs[0]})
    grads = bw.run(*((gy, None) if save else (gy,)), **saved)
    ts = [t.clone().requires_grad_() for t in (x, w, b)]
    y = _ACT_PEER[act](torch.nn.functional.linear(*ts))
    want = torch.autograd.grad((y * gy).sum(), ts)
    for got, ref, n in zip(grads, want, ("x", "weight", "bias")):
        assert_close(got, ref.numpy(), 1e-10, 1e-10, f"{act} d{n}")
    ops = [s.op for s in bw.skus]
    assert ("linear" in ops) == (act in ("gelu", "silu", "gelu_tanh") and not save), ops   # recompute only then


# -- GPU: TF32 really follows the preference ------------------------------------------------------------------
@pytest.mark.skipif(DEV.type != "cuda", reason="needs a GPU")
@pytest.mark.parametrize("backend", [Backend.CUBLAS, Backend.TRITON], ids=str)
def test_gpu_tf32_numerics_follow_preference(backend):
    a, b = _t(256, 512, seed=1), _t(512, 256, seed=2)
    ref = _ref(a, b)
    scale = (a.double().abs() @ b.double().abs()).cpu().numpy()
    strict, _ = _run("mm", backend, a, b)
    loose, _ = _run("mm", backend, a, b, pref_kw={"allow_reduced_precision": True})
    e_strict = np.abs(strict.double().cpu().numpy() - ref) / scale
    e_loose = np.abs(loose.double().cpu().numpy() - ref) / scale
    assert e_strict.max() < 512 * 2.0 ** -24           # true f32
    assert e_loose.max() < 2e-3                         # TF32: ~2^-11 per product
    assert e_loose.max() > 4 * e_strict.max()           # and it really was TF32


# -- offline GPU compile of the Triton kernel (sm90), no GPU needed --------------------------------------------
_COMPILE_CHECK = textwrap.dedent("""
    import os, re, subprocess, tempfile, triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from baracuda.backends.triton.gemm import gemm as g
    k = g._gemm_kernel
    PTXAS = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    def build(ptr, cfg, prec, act, bias, layout="rc"):
        # layout: storage of A and B ("r": row-major, unit stride along K for A / along N for B; "c": the
        # transposed view, as trans_a / trans_b and the backward rules pass them); linear is "rc"
        sig = {n: ptr for n in ["a_ptr", "b_ptr", "c_ptr", "bias_ptr", "p_ptr"]}
        names = ["M", "N", "K", "NB1", "TILES", "sa0", "sa1", "sam", "sak", "sb0", "sb1", "sbk", "sbn",
                 "sc0", "sc1", "scm", "scn", "spm", "spn", "s_bias"]
        sig.update({n: "i32" for n in names})
        ce = {"scn": 1, ("sak" if layout[0] == "r" else "sam"): 1, ("sbn" if layout[1] == "r" else "sbk"): 1}
        ce.update(ACT=g.ACT_FN[act], HAS_BIAS=bias, SAVE_PRE=False, PREC=prec,
                  ACC=tl.float32, INT=False, EVEN_K=True, HINT_M=True, HINT_N=True, I64=False, DOT_F32=False,
                  BM=cfg.bm, BN=cfg.bn, BK=cfg.bk, GROUP_M=cfg.group_m)
        sig.update({n: "constexpr" for n in ce})
        div = [n for n in list(sig) if sig[n] != "constexpr" and n not in ("NB1", "TILES", "spn", "s_bias")]
        attrs = {(k.arg_names.index(n),): [["tt.divisibility", 16]] for n in div}
        c = triton.compile(ASTSource(fn=getattr(k, "jit", k), signature=sig, constexprs=ce, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options=dict(num_warps=cfg.warps, num_stages=cfg.stages))
        stage = (cfg.bm + cfg.bn) * cfg.bk * (2 if ptr == "*bf16" else 4)
        ptx = c.asm["ptx"]
        assert "wgmma.mma_async" in ptx, ("no wgmma", layout)
        assert c.metadata.shared >= cfg.stages * stage, ("not pipelined", layout, c.metadata.shared, stage)
        # 16-byte async copies (cp.async ..., 16): the operand loads are vectorized along the unit stride
        assert re.search(r"cp\.async\.cg\.shared\.global[^;]*, (16|0x10)", ptx), ("loads not 16 B", layout)
        with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
            f.write(ptx)
        r = subprocess.run([PTXAS, "-v", "--gpu-name=sm_90a", f.name, "-o", os.devnull], capture_output=True, text=True)
        os.unlink(f.name)
        regs = int(re.search(r"Used (\d+) registers", r.stderr).group(1))
        assert " 0 bytes spill stores" in r.stderr, ("spills", layout, r.stderr)
        return c.metadata.shared, regs
    for layout in ("rr", "rc", "cr", "cc"):   # every trans_a / trans_b combination pipelines the same way
        build("*bf16", g.CONFIGS[("half", "large")], "ieee", "silu" if layout == "rc" else "none", layout == "rc",
              layout)
    build("*fp32", g.CONFIGS[("tf32", "large")], "tf32", "gelu_tanh", True)
    # shallow K: two CTAs must fit on one SM (228 KB shared memory, 64K registers) so that one's stores
    # overlap the other's loads
    cfg = g.CONFIGS[("half", "shallow")]
    shared, regs = build("*bf16", cfg, "ieee", "none", False, "rr")
    assert 2 * (shared + 1024) <= 228 * 1024 and 2 * regs * 32 * cfg.warps <= 65536, (shared, regs)
    print("ok")
""")


@pytest.mark.skipif(not os.path.exists(os.path.join(os.path.dirname(__import__("triton").__file__),
                                                    "backends", "nvidia", "bin", "ptxas")),
                    reason="Triton's bundled ptxas not found")
def test_triton_kernel_compiles_for_sm90_pipelined():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _COMPILE_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# -- the integer GEMM path, compiled offline for sm_90 ------------------------------------------------------------
_INT_SM90 = textwrap.dedent("""
    import torch
    import baracuda as bc
    from baracuda._core.registry import implementations
    from baracuda._core.sku import Backend
    from baracuda.testing.sm90 import offline_launches
    # (op, shapes): tails on M/N/K, a 16-divisible K (EVEN_K), a batch, linear's bias
    CASES = [("mm", ((37, 21), (21, 35))), ("mm", ((64, 32), (32, 64))), ("bmm", ((3, 33, 16), (3, 16, 17))),
             ("linear", ((37, 21), (35, 21), (35,))), ("kron", ((3, 4), (5, 2))), ("trace", ((9, 7),))]
    for dt in (torch.int64, torch.int32, torch.int8, torch.uint8):
        for op, shapes in CASES:
            xs = [torch.empty(s, dtype=dt) for s in shapes]
            desc = bc.Descriptor.like(op, *xs)
            outs = [torch.empty(o.shape, dtype=o.dtype.torch) for o in desc.outputs]
            impl = next(i for i in implementations(op) if i.backend == Backend.TRITON)
            print("compiling", op, shapes, dt, flush=True)
            run = impl.bind(desc, None) if impl.bind else impl.run
            with offline_launches() as launches:
                run(desc, xs, outs, None)
            assert launches, (op, dt)
            for k in launches:
                regs, stack = k.resources()
                print("   ", k.name, "warps", k.num_warps, "regs", regs, "stack", stack, flush=True)
                assert stack == 0, (op, dt, "spills", stack)
    print("ok")
""")


@pytest.mark.skipif(__import__("baracuda.testing.sm90", fromlist=["unavailable"]).unavailable() is not None,
                    reason="no offline sm_90 compile here")
def test_integer_kernels_compile_for_sm90_without_spills():
    """The Triton integer paths (the GEMM kernel's int64 multiply-adds, kron's int64 product, trace's int64 sum)
    compile for the H100 from the plans' own host code, with no register spills."""
    from baracuda.testing.sm90 import failure_report, run_isolated

    r = run_isolated(_INT_SM90)
    assert r.returncode == 0 and r.stdout.rstrip().endswith("ok"), failure_report(r)
