"""The drop-in call path (baracuda/torch/_call.py): one bounded cache of bound calls keyed by a typed call key,
no autograd.Function without grad, refusals cached, the preference per thread, the mode's unrouted calls unprobed."""
import threading

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda.torch import _call

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def test_ten_thousand_shapes_keep_the_cache_at_its_bound():
    _call.cache_clear()
    for n in range(1, 10_001):
        bt.exp(torch.full((n,), 0.5, device=DEVICE))
    info = _call.cache_info()
    assert info.maxsize == _call.CACHE_SIZE and info.currsize == _call.CACHE_SIZE, info
    # the most recent shapes are still bound: a repeat is a hit, not a new selection
    bt.exp(torch.full((10_000,), 0.5, device=DEVICE))
    assert _call.cache_info().hits == info.hits + 1


def test_repeated_call_reuses_one_bound_call():
    x = torch.randn(3, 5, device=DEVICE)
    a = _call.bound("softmax", {"dim": -1}, [x])
    b = _call.bound("softmax", {"dim": -1}, [torch.randn(3, 5, device=DEVICE)])
    assert a is b and a.plan is b.plan
    assert _call.bound("softmax", {"dim": 0}, [x]) is not a
    assert _call.bound("softmax", {"dim": -1}, [x.double()]) is not a


def test_attribute_types_are_part_of_the_key():
    """dim=1.0 equals dim=1 and hashes alike: it must not find the call bound for dim=1 (and is an error)."""
    x = torch.randn(3, 5, device=DEVICE)
    bt.call("softmax", [x], {"dim": 1})
    with pytest.raises(bc.InvalidProblemError, match="dim"):
        bt.call("softmax", [x], {"dim": 1.0})
    with pytest.raises(bc.InvalidProblemError, match="dim"):
        bt.call("softmax", [x], {"dim": True})


def test_a_refused_call_is_cached_with_its_error():
    x = torch.randn(3, device=DEVICE)
    with pytest.raises(bc.InvalidProblemError, match="argument 'bogus'") as first:
        bt.call("exp", [x], {"bogus": 1})
    hits = _call.cache_info().hits
    with pytest.raises(bc.InvalidProblemError, match="argument 'bogus'") as second:
        bt.call("exp", [x], {"bogus": 1})
    assert _call.cache_info().hits == hits + 1
    assert str(first.value) == str(second.value)


def test_no_autograd_function_without_grad(monkeypatch):
    calls = []
    real = _call._eager_apply
    monkeypatch.setattr(_call, "_eager_apply", lambda *a: calls.append(a[0].name) or real(*a))
    x = torch.randn(4, 6, device=DEVICE, dtype=torch.float64)
    xg = x.clone().requires_grad_()
    bt.exp(x)                                  # no input requires grad
    with torch.no_grad():
        bt.exp(xg)                             # grad mode off
    with torch.inference_mode():
        bt.exp(x)
    assert calls == []
    y = bt.exp(xg)                             # the autograd node, and the gradient through it
    assert calls == ["exp"]
    y.sum().backward()
    torch.testing.assert_close(xg.grad, torch.exp(x))
    assert not bt.eq(xg, xg).requires_grad and calls == ["exp"]   # a bool result: no node


def test_preference_is_per_thread():
    """A preference block in one thread changes neither the plans nor the preference of another thread."""
    nothing = bc.PlanPreference(forbid=("triton", "reference", "cublas"))
    inside, done = threading.Event(), threading.Event()
    seen = {}

    def holder():
        with bt.preference(nothing):
            seen["holder"] = bc.current_preference()
            try:
                bt.call("exp", [torch.randn(5, device=DEVICE)], {})
            except bc.UnsupportedError as e:
                seen["holder_error"] = str(e)
            inside.set()
            done.wait(10)

    t = threading.Thread(target=holder)
    t.start()
    assert inside.wait(10)
    try:
        seen["other"] = bc.current_preference()
        x = torch.randn(5, device=DEVICE)
        torch.testing.assert_close(bt.call("exp", [x], {}), torch.exp(x))
    finally:
        done.set()
        t.join()
    assert seen["holder"] is nothing and seen["other"] == bc.PlanPreference()
    assert "forbidden by PlanPreference.forbid" in seen["holder_error"]


def test_plan_select_reads_the_preference_in_effect():
    desc = bc.Descriptor.make("exp", ((4,), "f32"))
    with bc.preference(bc.PlanPreference(prefer=("reference",))):
        assert bc.Plan.select(desc, "cpu").pref.prefer == (bc.Backend.REFERENCE,)
    assert bc.Plan.select(desc, "cpu").pref == bc.PlanPreference()
    with pytest.raises(TypeError, match="PlanPreference"):
        with bc.preference("triton"):
            pass


def test_mode_does_not_probe_unrouted_calls(monkeypatch):
    from baracuda.torch import _mode

    def boom(t):
        raise AssertionError("storage probed without coverage=True")

    monkeypatch.setattr(_mode, "_storage", boom)
    x = torch.randn(8, device=DEVICE)
    with bt.mode() as m:
        torch.special.bessel_j0(x)  # (no baracuda drop-in: not routed)
        y = torch.add(x, x)
    assert m.routed == {"torch.add": 1} and not m.fell_through and not m.native
    torch.testing.assert_close(y, x + x)


def test_scalar_operands_are_reused_and_keep_their_sign():
    x = torch.randn(6, device=DEVICE, dtype=torch.float64)
    a, b = bt.div(x, 0.5), bt.div(x, 0.5)
    torch.testing.assert_close(a, b)
    torch.testing.assert_close(bt.div(torch.ones(2, device=DEVICE), -0.0), torch.full((2,), -np.inf, device=DEVICE))
    torch.testing.assert_close(bt.div(torch.ones(2, device=DEVICE), 0.0), torch.full((2,), np.inf, device=DEVICE))


def test_backward_skips_gradients_nobody_wants():
    """x + mask with a broadcast mask that does not require grad: the backward plan for that mask runs no sum back
    to the mask's shape (torch's needs_input_grad); x's gradient is torch's."""
    x = torch.randn(2, 3, 4, 4, device=DEVICE, dtype=torch.float64, requires_grad=True)
    mask = torch.randn(4, 4, device=DEVICE, dtype=torch.float64)
    scale = torch.tensor(0.5, device=DEVICE, dtype=torch.float64)
    y = bt.mul(bt.add(x, mask), scale)
    g = torch.randn_like(y)
    y.backward(g)
    torch.testing.assert_close(x.grad, g * 0.5)
    b = _call.bound("add", {}, [x, mask])
    bw = b.backward_plan((True, False))
    assert bw is b.backward_plan((True, False)) and bw is not b.backward_plan()
    assert not any(s.op == "sum" for s in bw.skus)
    assert any(s.op == "sum" for s in b.backward_plan().skus)   # both wanted: the mask's gradient is summed
    m = _call.bound("mul", {}, [bt.add(x, mask).detach(), scale])
    assert [s.op for s in m.backward_plan((True, False)).skus] == ["mul"]


def test_frozen_weights_cost_no_gradient_gemm():
    """linear / matmul with a frozen weight (LoRA-style): the backward plan for that mask runs one GEMM (dx), none
    for the weight or bias; the input's gradient is torch's."""
    x = torch.randn(2, 5, 8, device=DEVICE, dtype=torch.float64, requires_grad=True)
    w = torch.randn(6, 8, device=DEVICE, dtype=torch.float64)
    b = torch.randn(6, device=DEVICE, dtype=torch.float64)
    y = bt.nn.functional.linear(x, w, b)
    g = torch.randn_like(y)
    y.backward(g)
    xr = x.detach().clone().requires_grad_()
    torch.nn.functional.linear(xr, w, b).backward(g)
    torch.testing.assert_close(x.grad, xr.grad)
    lin = _call.bound("linear", {}, [x, w, b])
    assert [s.op for s in lin.backward_plan((True, False, False)).skus] == ["mm"]
    assert len(lin.backward_plan().skus) >= 3            # dx, dW and the bias sum when all are wanted
    a = torch.randn(3, 4, 8, device=DEVICE, dtype=torch.float64, requires_grad=True)
    m = torch.randn(8, 5, device=DEVICE, dtype=torch.float64)
    out = bt.matmul(a, m)
    out.backward(torch.ones_like(out))
    torch.testing.assert_close(a.grad, torch.ones(3, 4, 5, device=DEVICE, dtype=torch.float64) @ m.T)
    mm = _call.bound("matmul", {}, [a, m])
    assert len(mm.backward_plan((True, False)).skus) == 1 and len(mm.backward_plan().skus) == 2


@pytest.mark.parametrize("routed", ["drop-in", "mode"])
def test_cat_onto_an_empty_tensor_backward(routed):
    """transformers' DynamicCache concatenates the first keys onto ``torch.tensor([])``: the skipped empty's
    gradient (a zero-operand ``full`` in cat's backward) must reach autograd as a tensor, on the CPU (NumPy
    reference plans) and the GPU (a zero-size output)."""
    k = torch.randn(2, 3, device=DEVICE, requires_grad=True)
    empty = torch.tensor([], device=DEVICE)
    g = torch.randn(2, 3, device=DEVICE)
    if routed == "mode":
        with bt.mode() as m:
            (torch.cat([empty, k], -2) * g).sum().backward()
        assert m.routed["torch.cat"] == 1
    else:
        (bt.cat([empty, k], -2) * g).sum().backward()
    assert torch.equal(k.grad, g)
    # the empty operand requiring grad too: its gradient is an empty tensor, as torch's
    e = torch.tensor([], device=DEVICE, requires_grad=True)
    k.grad = None
    bt.cat([e, k], -2).sum().backward()
    assert isinstance(e.grad, torch.Tensor) and e.grad.shape == (0,) and e.grad.device == k.device
    assert torch.equal(k.grad, torch.ones_like(k))


@pytest.mark.parametrize("dev", ["meta"] + (["cuda"] if torch.cuda.is_available() else []))
def test_a_zero_dim_cpu_tensor_is_a_scalar_beside_another_device(dev):
    """torch's one exception to one-device calls: a 0-d CPU tensor beside tensors elsewhere is a scalar moved to
    their device (``x * torch.tensor(2.0)`` in model code); a dimensioned CPU tensor is still refused."""
    x = torch.randn(3, 4, device=dev)
    s = torch.tensor(2.5, dtype=torch.float64)
    for fn in ("add", "mul", "maximum"):
        got, want = getattr(bt, fn)(x, s), getattr(torch, fn)(x, s)
        assert got.device == want.device and got.dtype == want.dtype and got.shape == want.shape
        if dev != "meta":
            torch.testing.assert_close(got, want)
        got = getattr(bt, fn)(s, x)
        assert got.device == x.device and got.dtype == torch.float32
    with pytest.raises(RuntimeError, match="device"):
        bt.add(x, torch.randn(4))
    if dev == "cuda":
        a = torch.randn(3, 4, device=dev, dtype=torch.float64, requires_grad=True)
        w = torch.tensor(0.5, dtype=torch.float64, requires_grad=True)
        (bt.mul(a, w) * torch.arange(12.0, device=dev).view(3, 4)).sum().backward()
        torch.testing.assert_close(w.grad, (a.detach().cpu() * torch.arange(12.0).view(3, 4)).sum().double())
