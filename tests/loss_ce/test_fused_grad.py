"""cross_entropy's training path: the drop-in runs cross_entropy_with_grad under eager autograd and scales the
saved gradient in place in the backward (grad_scale skips the pass when the upstream gradient is 1)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import test_device  # noqa: E402

DEV = "cuda" if test_device().type == "cuda" else "cpu"


def _backend_pref():
    # on the CPU the reference backend wins by default; the Triton kernels run under the interpreter when asked
    return bc.PlanPreference(prefer=(bc.Backend.TRITON,))


def _data(n=6, c=37, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (2 * torch.randn(n, c, generator=g)).to(dtype).to(DEV)
    t = torch.randint(0, c, (n,), generator=g).to(DEV)
    t[1] = -100
    w = (0.5 + torch.rand(c, generator=g)).to(dtype).to(DEV)
    return x, t, w


@pytest.mark.parametrize("pref", ["default", "triton"])
@pytest.mark.parametrize("kw", [dict(), dict(reduction="sum"), dict(label_smoothing=0.2), dict(weight=True),
                                dict(weight=True, label_smoothing=0.1, reduction="sum")])
@pytest.mark.parametrize("upstream", [1.0, 0.37])
def test_training_step_matches_torch(pref, kw, upstream):
    x, t, w = _data()
    kw = dict(kw)
    if kw.pop("weight", False):
        kw["weight"] = w
    xa = x.clone().requires_grad_(True)
    xb = x.clone().requires_grad_(True)
    with bt.preference(_backend_pref() if pref == "triton" else bc.PlanPreference()):
        la = bt.nn.functional.cross_entropy(xa, t, **kw)
        assert la.grad_fn is not None and "FusedGrad" in type(la.grad_fn).__name__
        (la * upstream if upstream != 1.0 else la).backward()
    lb = F.cross_entropy(xb, t, **kw)
    (lb * upstream if upstream != 1.0 else lb).backward()
    torch.testing.assert_close(la, lb, rtol=2e-5, atol=2e-6)
    torch.testing.assert_close(xa.grad, xb.grad, rtol=2e-5, atol=2e-6)


def test_float64_gradient_vs_finite_differences():
    x, t, _ = _data(n=3, c=5, dtype=torch.float64)
    x.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda z: bt.nn.functional.cross_entropy(z, t, label_smoothing=0.1), (x,))


def test_retain_graph_second_backward_recomputes():
    x, t, _ = _data()
    xa = x.clone().requires_grad_(True)
    loss = bt.nn.functional.cross_entropy(xa, t)
    loss.backward(retain_graph=True)
    first = xa.grad.clone()
    loss.backward()                      # accumulates: the same gradient again
    torch.testing.assert_close(xa.grad, 2 * first)


def test_paths_not_taken():
    x, t, _ = _data()
    # no grad needed -> the plain forward op (no autograd node)
    assert bt.nn.functional.cross_entropy(x, t).grad_fn is None
    # reduction='none' -> the ordinary custom op (its gradient needs the per-row upstream)
    xa = x.clone().requires_grad_(True)
    out = bt.nn.functional.cross_entropy(xa, t, reduction="none")
    assert "FusedGrad" not in type(out.grad_fn).__name__
    out.sum().backward()
    xb = x.clone().requires_grad_(True)
    F.cross_entropy(xb, t, reduction="none").sum().backward()
    torch.testing.assert_close(xa.grad, xb.grad)
    with torch.no_grad():
        assert bt.nn.functional.cross_entropy(xa, t).grad_fn is None


def test_parameters_take_the_fused_path():
    """A model's weights are nn.Parameters: the LM head's linear cross-entropy (bt.patch's loss) and logits that are
    a Parameter take the fused path, not the ordinary op (whose backward would allocate a second dW)."""
    x, t, _ = _data()
    logits = torch.nn.Parameter(x.clone())
    assert "FusedGrad" in type(bt.nn.functional.cross_entropy(logits, t).grad_fn).__name__
    g = torch.Generator().manual_seed(3)
    h = torch.randn(6, 8, generator=g).to(DEV).requires_grad_(True)
    w = torch.nn.Parameter(torch.randn(37, 8, generator=g).to(DEV))
    loss = bt.nn.functional.linear_cross_entropy(h, w, t)
    assert "FusedGrad" in type(loss.grad_fn).__name__
    loss.backward()
    h2, w2 = h.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)
    F.cross_entropy(h2 @ w2.T, t).backward()
    torch.testing.assert_close(w.grad, w2.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(h.grad, h2.grad, rtol=1e-4, atol=1e-5)


def test_bad_target_raises_on_the_training_path():
    x, t, _ = _data()
    t[2] = 999
    with pytest.raises(bc.InvalidProblemError, match="target"):
        bt.nn.functional.cross_entropy(x.clone().requires_grad_(True), t)
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


@pytest.mark.parametrize("g,h", [(1.0, None), (0.5, None), (0.75, 0.75), (0.3, 0.7)])
def test_grad_scale_in_place(g, h):
    x = torch.randn(1000, device=DEV)
    want = x * g if h is None else (x.double() * (g / h)).float()
    ins = [torch.tensor(g, device=DEV)] + ([] if h is None else [torch.tensor(h, device=DEV)])
    plan = bc.Plan.select(bc.Descriptor.like("grad_scale", x, *ins), DEV, _backend_pref())
    assert plan.sku.backend == bc.Backend.TRITON
    plan.run(x, *ins, out=x)
    torch.testing.assert_close(x, want, rtol=0 if h in (None, g) else 2e-7, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_upstream_guess_across_steps(dtype):
    """The fused forward computes the gradient for the upstream the previous backward saw: steps with a repeated
    upstream (gradient accumulation's 1/k), a changed one, a zero one (never adopted as the guess) and a
    retained-graph second backward all give torch's gradients; the guess follows the upstreams."""
    from baracuda.torch import _fused

    x, t, w = _data(dtype=dtype, seed=5)
    tol = dict(rtol=2e-5, atol=2e-6) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-3)
    plan = None
    for k, up in enumerate([0.25, 0.25, 3.0, 0.0, 0.5, 0.5]):
        xa = x.clone().requires_grad_(True)
        xb = x.clone().requires_grad_(True)
        la = bt.nn.functional.cross_entropy(xa, t, weight=w, label_smoothing=0.1)
        plan = la.grad_fn.bc_plan
        (la * up).backward(retain_graph=k == 5)
        F.cross_entropy(xb.float(), t, weight=w.float(), label_smoothing=0.1).mul(up).backward()
        torch.testing.assert_close(xa.grad.float(), xb.grad.float(), **tol)
        want = {0: 0.25, 1: 0.25, 2: 3.0, 3: 3.0, 4: 0.5, 5: 0.5}[k]
        assert _fused._GUESS[plan].item() == want
    first = xa.grad.clone()
    (la * 2.0).backward()                  # retained graph: recomputed for this upstream, accumulated
    torch.testing.assert_close(xa.grad.float(), first.float() * 5.0, rtol=2e-2 if dtype != torch.float32 else 1e-6,
                               atol=0)


@pytest.mark.parametrize("upstream", [1.0, 0.25])
@pytest.mark.parametrize("bias", [False, True])
def test_linear_cross_entropy_dropin_training_step(upstream, bias):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(10, 8, generator=g, dtype=torch.float64).to(DEV)
    w = (0.3 * torch.randn(13, 8, generator=g, dtype=torch.float64)).to(DEV)
    b = torch.randn(13, generator=g, dtype=torch.float64).to(DEV) if bias else None
    t = torch.randint(0, 13, (10,), generator=g).to(DEV)
    t[4] = -100
    leaves_a = [a.clone().requires_grad_(True) for a in (x, w) + ((b,) if bias else ())]
    leaves_b = [a.clone().requires_grad_(True) for a in (x, w) + ((b,) if bias else ())]
    kw = {"linear_bias": leaves_a[2]} if bias else {}
    la = bt.nn.functional.linear_cross_entropy(leaves_a[0], leaves_a[1], t, label_smoothing=0.1, **kw)
    assert "FusedGrad" in type(la.grad_fn).__name__
    (la * upstream).backward()
    lb = F.cross_entropy(F.linear(leaves_b[0], leaves_b[1], *leaves_b[2:]), t, label_smoothing=0.1)
    (lb * upstream).backward()
    torch.testing.assert_close(la, lb, rtol=1e-10, atol=1e-12)
    for a, c in zip(leaves_a, leaves_b):
        torch.testing.assert_close(a.grad, c.grad, rtol=1e-10, atol=1e-12)


def test_linear_cross_entropy_retain_graph():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 4, generator=g, dtype=torch.float64).to(DEV).requires_grad_(True)
    w = torch.randn(9, 4, generator=g, dtype=torch.float64).to(DEV).requires_grad_(True)
    t = torch.randint(0, 9, (6,), generator=g).to(DEV)
    loss = bt.nn.functional.linear_cross_entropy(x, w, t)
    loss.backward(retain_graph=True)
    gx, gw = x.grad.clone(), w.grad.clone()
    (0.5 * loss).backward()
    torch.testing.assert_close(x.grad, 1.5 * gx)
    torch.testing.assert_close(w.grad, 1.5 * gw)


@pytest.mark.parametrize("c", [37, 17000])
@pytest.mark.parametrize("check", ["sync", "deferred", "off"])
def test_bad_target_check_values(check, c):
    """PlanPreference.check_values: 'sync' raises at the call; 'deferred' (the default) raises at the next
    baracuda call once the flag's copy has landed, or at bc.check_errors(), naming the op of the bad call (the
    call itself returns, its loss NaN); 'off' never reads the flag (NaN loss).  No out-of-bounds read in any
    mode.  Off the GPU (the interpreter) 'deferred' checks at once: reading the flag costs nothing there."""
    from baracuda._core import checks

    if c > 37 and DEV == "cpu":
        pytest.skip("17000 classes exercise the GPU's single-read (coop) route; the interpreter runs the composed "
                    "route, covered at 37 classes")
    x, t, _ = _data(c=c)
    t[2] = c                                   # one past the last class
    pref = bc.PlanPreference(prefer=(bc.Backend.TRITON,), check_values=check)
    assert pref.check_values == check and bc.PlanPreference().check_values == "deferred"
    xa = x.clone().requires_grad_(True)
    match = "cross_entropy.*target.*out of range"
    with bt.preference(pref):
        if check == "sync" or (check == "deferred" and DEV == "cpu"):
            with pytest.raises(bc.InvalidProblemError, match=match):
                bt.nn.functional.cross_entropy(xa, t)
            assert not checks.PENDING
            return
        loss = bt.nn.functional.cross_entropy(xa, t)
        assert len(checks.PENDING) == (check == "deferred")
        assert torch.isnan(loss).item()            # (synchronizes: the flag's copy has landed)
        if check == "deferred":
            with pytest.raises(bc.InvalidProblemError, match=match) as err:
                bt.nn.functional.cross_entropy(x[:1], t[:1])   # the next call reports the earlier bad one
            assert "deferred value check" in "".join(getattr(err.value, "__notes__", []))
        none = bt.nn.functional.cross_entropy(x, t, reduction="none")
        keep = torch.ones_like(t, dtype=torch.bool)
        keep[2] = False
        assert torch.isnan(none[2]).item()
        want = F.cross_entropy(x[keep], t[keep], reduction="none")
        torch.testing.assert_close(none[keep], want.where(t[keep] != -100, 0.0), rtol=1e-5, atol=1e-6)
        if check == "deferred":
            with pytest.raises(bc.InvalidProblemError, match=match):
                bc.check_errors()
        assert not checks.PENDING
        bt.nn.functional.cross_entropy(x[keep], t[keep])    # good input: a check that passes (or none at all)
        bc.check_errors()
        assert not checks.PENDING
