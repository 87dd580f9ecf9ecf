"""torch.compile of code that calls baracuda at more than one shape: the second call of a compiled function at a
new shape retraces with symbolic sizes (torch's automatic dynamic shapes; ``dynamic=True`` does so from the start).
The backward custom op carries the forward operands' sizes as SymInts (``_schema.sig_string``), so the graph is
traced, and values and gradients equal eager's at every shape.  bt.mode() entered inside a compiled function
routes the same way."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import baracuda.torch as bt
from baracuda.testing import test_device

DEVICE = torch.device("cuda" if test_device().type == "cuda" else "cpu")
torch.manual_seed(0)
_W = torch.randn(32, 16, device=DEVICE, requires_grad=True)
_G = torch.randn(32, device=DEVICE, requires_grad=True)


def _mlp_norm(t):
    h = bt.nn.functional.gelu(bt.nn.functional.linear(t, _W))
    return bt.softmax(bt.nn.functional.layer_norm(h, (32,), _G), -1)


def _loss(t):
    logits = bt.nn.functional.linear(t, _W)
    return bt.nn.functional.cross_entropy(logits, torch.arange(t.shape[0], device=t.device) % 32)


def _reductions(t):
    return bt.sum(t, 0) + bt.cumsum(t, 0)[-1] + bt.sort(t, 0).values[0]


def _under_mode(t):
    with bt.mode():
        return F.silu(F.linear(t, _W)).softmax(-1) * 2.0


@pytest.mark.parametrize("fn", [_mlp_norm, _loss, _reductions, _under_mode], ids=lambda f: f.__name__[1:])
@pytest.mark.parametrize("dynamic", [None, True], ids=["automatic", "dynamic"])
def test_compiled_function_at_several_shapes_matches_eager(fn, dynamic):
    torch._dynamo.reset()
    cf = torch.compile(fn, backend="aot_eager", dynamic=dynamic, fullgraph=True)
    for n in (8, 12, 20):
        x = torch.randn(n, 16, device=DEVICE, requires_grad=True)
        y = cf(x)
        got = torch.autograd.grad(y.sum(), (x, _W), allow_unused=True)
        ye = fn(x)
        want = torch.autograd.grad(ye.sum(), (x, _W), allow_unused=True)
        torch.testing.assert_close(y, ye, rtol=1e-5, atol=1e-6)
        for g, w in zip(got, want):
            assert (g is None) == (w is None)
            if g is not None:
                torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


def test_call_state_is_an_instance_attribute_on_every_thread():
    """bt.mode's per-thread call state starts in the instance's __dict__ on every thread: Dynamo guards on that
    dict, and a first write of a class default inside a traced frame failed its own guard (an AssertionError out of
    torch.compile: GPT-2's loss under a bt.mode() entered inside the compiled function, on a fresh thread)."""
    import threading

    from baracuda.torch._call import STATE

    seen = {}
    t = threading.Thread(target=lambda: seen.update(vars(STATE)))
    t.start()
    t.join()
    assert seen == {"depth": 0, "grad_check": False}


def test_mode_inside_a_compiled_function_on_a_fresh_thread():
    import threading

    errors = []

    def run():
        try:
            torch._dynamo.reset()
            x = torch.randn(6, 16, device=DEVICE, requires_grad=True)
            t = torch.arange(6, device=DEVICE) % 4
            f = torch.compile(lambda a: _ce_under_mode(a, t), backend="aot_eager", fullgraph=True)
            torch.testing.assert_close(f(x), F.cross_entropy(F.linear(x, _W[:4]), t), rtol=1e-5, atol=1e-6)
        except BaseException as e:      # (reported on the main thread)
            errors.append(e)

    th = threading.Thread(target=run)
    th.start()
    th.join()
    assert not errors, errors


def _ce_under_mode(a, t):
    with bt.mode():
        return F.cross_entropy(F.linear(a, _W[:4]), t)
