"""The random drop-ins under torch.compile and CUDA-graph capture: their stream is then a device ``state`` operand
drawn by torch's generator (ops/random.py ``drop_in_stream``), not an int seed the graph would repeat.  The
compiled function traces as one graph (no break at the seed), each call draws fresh numbers, torch.manual_seed
reproduces them, and a forward and its backward share one mask."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import UnsupportedError
from baracuda._core.sku import Backend
from baracuda.ops import random as R
from baracuda.testing import test_device

DEVICE = torch.device("cuda" if test_device().type == "cuda" else "cpu")
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))


def _compiled(fn):
    torch._dynamo.reset()
    return torch.compile(fn, backend="aot_eager", fullgraph=True)


@pytest.mark.parametrize("op", ["dropout", "dropout2d", "alpha_dropout"])
def test_compiled_dropout_is_one_graph_with_fresh_masks_per_call(op):
    x = torch.randn(8, 6, 5, 4, device=DEVICE)
    f = _compiled(lambda t: getattr(bt.nn.functional, op)(t, 0.5, True))
    a, b = f(x), f(x)
    assert not torch.equal(a, b)
    torch.manual_seed(11)
    c = f(x)
    torch.manual_seed(11)
    assert torch.equal(c, f(x))
    dropped = R.affine_of(op, 0.5)[2]       # (the value of a dropped element: 0, or alpha dropout's constant)
    kept = a != dropped
    assert 0.35 < kept.float().mean().item() < 0.65


def test_compiled_dropout_backward_uses_the_forward_mask():
    x = torch.randn(64, 33, device=DEVICE, requires_grad=True)
    f = _compiled(lambda t: bt.nn.functional.dropout(t, 0.4, True))
    y = f(x)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, (y != 0).to(x.dtype) / 0.6)
    assert 0.5 < (y != 0).float().mean().item() < 0.7


def test_compiled_bernoulli_and_multinomial_draw_per_call():
    p = torch.full((40, 50), 0.3, device=DEVICE)
    w = torch.rand(16, 10, device=DEVICE) + 0.1
    fb = _compiled(lambda t: bt.bernoulli(t))
    a, b = fb(p), fb(p)
    assert not torch.equal(a, b) and abs(a.mean().item() - 0.3) < 0.05
    fm = _compiled(lambda t: bt.multinomial(t, 3))
    m1, m2 = fm(w), fm(w)
    assert m1.shape == (16, 3) and m1.dtype == torch.int64 and not torch.equal(m1, m2)
    assert all(len(set(r.tolist())) == 3 for r in m1)   # without replacement: distinct categories per row


def test_mode_under_compile_routes_nn_dropout_with_fresh_masks():
    net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Dropout(0.5), torch.nn.Linear(32, 4)).to(DEVICE)
    x = torch.randn(8, 16, device=DEVICE)

    def step(t):
        with bt.mode():
            return net(t)

    f = torch.compile(step, backend="aot_eager", fullgraph=True)
    torch._dynamo.reset()
    a, b = f(x), f(x)
    assert not torch.equal(a, b)


def test_the_state_path_matches_the_op_with_that_state(monkeypatch):
    """The traced path run eagerly (is_compiling forced): the drop-in's result is the op's on [seed, 0], a state
    drawn from torch's generator, and the backward regenerates the same mask."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    x = torch.randn(7, 300, device=DEVICE, requires_grad=True)
    torch.manual_seed(5)
    extra, attrs = R.drop_in_stream("dropout", x.device)
    (st,) = extra
    assert attrs == {"seed": None} and st.dtype == torch.int64 and st.shape == (2,) and st[1].item() == 0
    assert st.device == x.device
    want = bc.Plan.select(bc.Descriptor.like("dropout", x.detach(), st, p=0.3), x.device, TRITON).run(x.detach(), st)
    torch.manual_seed(5)
    with bt.preference(TRITON):
        y = bt.nn.functional.dropout(x, 0.3)
    assert torch.equal(y.detach(), want)
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(x.grad, (want != 0).to(x.dtype) / 0.7)


def test_eager_calls_keep_the_int_seed():
    x = torch.randn(4, 4, device=DEVICE)
    assert not R.graph_safe_draw(x.device)
    extra, attrs = R.drop_in_stream("dropout", x.device)
    assert extra == () and isinstance(attrs["seed"], int) and 0 <= attrs["seed"] < 2 ** 62


def test_flash_attn_varlen_dropout_without_a_seed_refuses_when_traced(monkeypatch):
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    q = torch.randn(6, 2, 8, device=DEVICE)
    cu = torch.tensor([0, 2, 6], dtype=torch.int32, device=DEVICE)
    with pytest.raises(UnsupportedError, match=r"sdpa_varlen.*dropout_p > 0 with no seed"):
        bt.nn.functional.flash_attn_varlen(q, q, q, cu, cu, 4, 4, dropout_p=0.2)


def test_sdpa_dropout_when_traced_runs_the_composition(monkeypatch):
    """The fused kernels take an int seed: a traced / captured call with dropout runs the composition (scores,
    softmax, the drop-in's dropout on a device state, times v): fresh masks per call, torch's scaling."""
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    q = torch.randn(1, 2, 5, 8, device=DEVICE)
    v = torch.ones(1, 2, 5, 8, device=DEVICE)
    with bt.mode():
        a = F.scaled_dot_product_attention(q, q, v, dropout_p=0.5)
        b = F.scaled_dot_product_attention(q, q, v, dropout_p=0.5)
    assert a.shape == (1, 2, 5, 8) and not torch.equal(a, b)
    assert float(a.max()) <= 2.0 + 1e-5      # a row of probabilities summing to 1, kept ones scaled by 1 / (1 - p)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA graphs need a GPU")
def test_captured_dropout_draws_fresh_masks_per_replay_and_its_backward_agrees():
    x = torch.randn(256, 512, device="cuda", requires_grad=True)
    g_out = torch.ones(256, 512, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):      # warm-up (kernel compiles, autograd's first pass) outside the capture
        for _ in range(2):
            x.grad = None
            bt.nn.functional.dropout(x, 0.5).backward(g_out)
    torch.cuda.current_stream().wait_stream(s)
    x.grad = None
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y = bt.nn.functional.dropout(x, 0.5)
        y.backward(g_out)
    masks = []
    for _ in range(3):
        graph.replay()
        torch.cuda.synchronize()
        m = y != 0
        masks.append(m.clone())
        torch.testing.assert_close(x.grad, m.to(x.dtype) * 2.0)
        assert 0.45 < m.float().mean().item() < 0.55
    assert not torch.equal(masks[0], masks[1]) and not torch.equal(masks[1], masks[2])
