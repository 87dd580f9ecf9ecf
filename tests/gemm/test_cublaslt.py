"""The cuBLASLt backend (nvmath-python's bindings) of linear / linear_act: its place in the plan order and its
refusals anywhere; on a GPU with nvmath-python, its epilogues against float64 torch (the generic suite also runs
every linear / linear_act sample it takes through it, contiguous and not)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda._core.registry import implementations  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends import nvmath_import_error  # noqa: E402
from baracuda.backends.nvidia import cublaslt  # noqa: E402


def _desc(op, x, w, b=None, **attrs):
    arrs = [np.zeros(x, np.float32), np.zeros(w, np.float32)] + ([np.zeros(b, np.float32)] if b else [])
    return bc.Descriptor.like(op, *arrs, **attrs)


def test_order_and_refusals():
    cuda = type("D", (), {"type": "cuda"})()
    impls = {i.backend: i for i in implementations("linear_act")}
    d = _desc("linear_act", (5, 16), (8, 16), (8,), activation="gelu_tanh", save_preact=True)
    plain = _desc("linear_act", (5, 16), (8, 16), (8,), activation="gelu_tanh", save_preact=False)
    # first where its epilogue writes the saved pre-activation (one kernel for the route's two), else when preferred
    assert impls[Backend.CUBLASLT].prio(d, cuda) > impls[Backend.CUBLAS].prio(d, cuda)
    assert impls[Backend.CUBLAS].prio(plain, cuda) > impls[Backend.CUBLASLT].prio(plain, cuda)
    assert "GELU_AUX_BIAS" in impls[Backend.CUBLASLT].route_of(d, None)
    text = str(bc.explain(d, "cpu", bc.PlanPreference()))
    assert "cublaslt" in text and "cuBLASLt needs a CUDA device" in text
    if nvmath_import_error("cublasLt") is None:
        sup = cublaslt._supports
        assert "silu" in sup(_desc("linear_act", (5, 16), (8, 16), activation="silu"))
        assert "bit mask" in sup(_desc("linear_act", (5, 16), (8, 16), activation="relu", save_preact=True))
        assert "multiples of 4" in sup(_desc("linear", (5, 7), (8, 7)))
        assert sup(_desc("linear", (5, 16), (8, 16), (8,))) is None
    else:
        assert "nvmath-python" in cublaslt._supports(d)
    names = {(a, b, s): cublaslt._epilogue_name(_desc("linear_act" if a else "linear", (5, 16), (8, 16),
                                                      (8,) if b else None,
                                                      **({"activation": a, "save_preact": s} if a else {})))
             for a, b, s in [(None, False, None), (None, True, None), ("relu", True, False),
                             ("gelu_tanh", False, True), ("gelu_tanh", True, False)]}
    assert list(names.values()) == ["DEFAULT", "BIAS", "RELU_BIAS", "GELU_AUX", "GELU_BIAS"]


gpu = pytest.mark.skipif(not torch.cuda.is_available() or nvmath_import_error("cublasLt") is not None,
                         reason="needs a CUDA device and nvmath-python's cuBLASLt bindings")


@gpu
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("case", ["linear", "linear+b", "relu+b", "gelu_tanh+b+pre", "gelu_tanh+pre"])
def test_epilogues_match_float64(dt, case):
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(3, 37, 64, generator=g).to("cuda", dt)
    w = (torch.randn(48, 64, generator=g) / 8).to("cuda", dt)
    b = torch.randn(48, generator=g).to("cuda", dt) if "+b" in case else None
    act = None if case.startswith("linear") else case.split("+")[0]
    save = "+pre" in case
    pref = bc.PlanPreference(prefer=(Backend.CUBLASLT,))
    xs = [x, w] + ([b] if b is not None else [])
    op = "linear" if act is None else "linear_act"
    attrs = {} if act is None else {"activation": act, "save_preact": save}
    plan = bc.Plan.select(bc.Descriptor.like(op, *xs, **attrs), "cuda", pref)
    assert plan.sku.backend == Backend.CUBLASLT
    out = plan.run(*xs)
    outs = out if isinstance(out, tuple) else (out,)
    pre = torch.nn.functional.linear(x.double(), w.double(), None if b is None else b.double())
    want = {None: pre, "relu": torch.relu(pre),
            "gelu_tanh": torch.nn.functional.gelu(pre, approximate="tanh")}[act]
    tol = 2e-2 if dt == torch.bfloat16 else 1e-5
    torch.testing.assert_close(outs[0].double(), want, rtol=tol, atol=tol)
    if save:
        torch.testing.assert_close(outs[1].double(), pre, rtol=tol, atol=tol)
    # a view at an odd offset and a strided weight: copied to aligned contiguous operands, same values
    xv = torch.empty(x.numel() + 1, dtype=dt, device="cuda")[1:].view_as(x).copy_(x)
    out2 = plan.run(xv, w.t().contiguous().t(), *xs[2:])
    torch.testing.assert_close((out2 if isinstance(out2, tuple) else (out2,))[0], outs[0], rtol=0, atol=0)


@gpu
def test_drop_in_under_the_preference_trains():
    """F.linear through the cuBLASLt plan inside a preference: forward and gradients as torch's (bf16)."""
    g = torch.Generator(device="cpu").manual_seed(1)
    x = torch.randn(64, 256, generator=g).to("cuda", torch.bfloat16).requires_grad_()
    lin = torch.nn.Linear(256, 128).to("cuda", torch.bfloat16)
    with bc.preference(bc.PlanPreference(prefer=(Backend.CUBLASLT,))):
        y = bt.nn.functional.linear(x, lin.weight, lin.bias)
    y.float().square().sum().backward()
    gx, gw = x.grad.clone(), lin.weight.grad.clone()
    x.grad = lin.weight.grad = None
    torch.nn.functional.linear(x, lin.weight, lin.bias).float().square().sum().backward()
    torch.testing.assert_close(gx, x.grad, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(gw, lin.weight.grad, rtol=2e-2, atol=2e-2)
