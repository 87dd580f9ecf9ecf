"""Memory order of results (torch parity beyond values): pointwise drop-ins, batch_norm and the convolution's
gradients keep channels-last activations channels-last, as torch's kernels do, so a channels-last network under
``bt.mode()`` runs without layout conversions -- and the results are tensors of their own, not views."""
from __future__ import annotations

import contextlib

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import baracuda.torch as bt  # noqa: E402
from baracuda.testing.checks import on_device as _dev, plan_or_skip  # noqa: E402

F64 = dict(dtype=torch.float64)


def _cl(*shape):
    return _dev(torch.randn(*shape, **F64)).to(memory_format=torch.channels_last)


CASES = {
    "relu": lambda m, x, y: m.relu(x),
    "add": lambda m, x, y: m.add(x, y, alpha=0.5),
    "mul-broadcast-bias": lambda m, x, y: x * _BIAS,
    "where-0d": lambda m, x, y: m.where(x > 0, x, torch.tensor(0.5, **F64)),
    "silu": lambda m, x, y: m.nn.functional.silu(x),
    "addcmul": lambda m, x, y: m.addcmul(x, x, y, value=2.0),
}
_BIAS = torch.randn(3, 1, 1, **F64)


@pytest.mark.parametrize("case", CASES)
def test_pointwise_results_and_gradients_keep_the_operands_memory_order(case):
    global _BIAS
    _BIAS = _dev(_BIAS)
    x, y = _cl(2, 3, 4, 5), _cl(2, 3, 4, 5)
    res = []
    for m in (bt, torch):
        xs = x.clone().requires_grad_()
        out = CASES[case](m, xs, y)
        gy = torch.ones_like(out) * 0.5
        (gx,) = torch.autograd.grad(out, xs, gy)
        res.append((out, gx))
    (o, g), (eo, eg) = res
    assert o.stride() == eo.stride() and g.stride() == eg.stride(), (o.stride(), eo.stride(), g.stride(), eg.stride())
    assert o._base is None
    torch.testing.assert_close(o, eo, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, eg, rtol=1e-12, atol=1e-12)


def test_a_transposed_matrix_gives_a_transposed_result_and_mixed_orders_a_contiguous_one():
    a = _dev(torch.randn(5, 4, **F64)).t()
    assert bt.exp(a).stride() == torch.exp(a).stride() == (1, 4)
    b = _dev(torch.randn(4, 5, **F64))
    r = bt.add(a, b)      # one operand transposed, one not: no common order, the plan's contiguous result
    assert r.is_contiguous()
    torch.testing.assert_close(r, a + b, rtol=0, atol=0)


def test_in_place_writes_into_a_channels_last_tensor_under_the_mode():
    x = _cl(2, 3, 4, 5)
    w = x.clone().requires_grad_()
    grads = []
    for use_mode in (True, False):
        w.grad = None
        with bt.mode() if use_mode else contextlib.nullcontext():
            h = w * 2.0
            h += x
            F.relu(h, inplace=True)
            (h * h).sum().backward()
        grads.append(w.grad.clone())
        assert h.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-12, atol=1e-12)


def test_a_channels_last_block_under_the_mode_runs_without_layout_copies():
    """relu -> conv -> batch_norm -> += residual -> relu_, channels-last, under the mode: the backward makes no
    copy or clone (no layout conversion, no CopySlices) and the input's gradient comes channels-last."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 3, 3, padding=1, bias=False).double().to(memory_format=torch.channels_last)
    bn = torch.nn.BatchNorm2d(3).double()
    conv, bn = conv.to(_dev(torch.zeros(1)).device), bn.to(_dev(torch.zeros(1)).device)
    x = _cl(2, 3, 6, 6).requires_grad_()

    def step():
        h = bn(conv(F.relu(x)))
        h += x
        return F.relu(h, inplace=True).sum()

    from torch.utils._python_dispatch import TorchDispatchMode
    import collections

    counts = collections.Counter()

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func in (torch.ops.aten.copy_.default, torch.ops.aten.clone.default):
                counts[(str(func), tuple(args[0].shape))] += 1
            return func(*args, **(kwargs or {}))
    # (the GPU backends, Triton here: they allocate the convolution's gradients channels-last; the NumPy reference
    # writes contiguous ones, whose weight gradient autograd then copies into the weight's layout)
    import baracuda as bc
    from baracuda._core.sku import Backend

    plan_or_skip("relu", x.detach())     # (skips where Triton does not run: no GPU and no interpreter)
    with bt.mode(), bt.preference(bc.PlanPreference(prefer=(Backend.TRITON,))):
        loss = step()
        with Count():
            loss.backward()
    assert not counts, counts
    assert x.grad.is_contiguous(memory_format=torch.channels_last)
