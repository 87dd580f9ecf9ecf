"""N-D cross_entropy / nll_loss (class dim 1, as torch) against torch: index and probability targets, weights,
ignore_index, label smoothing, every reduction, the split-row (several programs per row) and N-D tile paths
forced small under the interpreter, inputs whose trailing dims don't collapse, and the drop-in's autograd."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, class_targets as _targets, loss_pair, on_device as _dev
from baracuda.testing.checks import plan_or_skip as _plan

TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 2e-6), torch.bfloat16: (1.6e-2, 1e-2)}
BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _check(x, t, w=None, backend=Backend.TRITON, op="cross_entropy", peer=F.cross_entropy, route=None, **attrs):
    """Forward and backward vs torch autograd in f64 on the same rounded inputs (x may be a strided view)."""
    x64 = x.detach().double().requires_grad_(True)
    rest = [t.double() if t.is_floating_point() else t] + ([w.double()] if w is not None else [])
    want = peer(x64, rest[0], *rest[1:], **attrs)
    gout = torch.ones_like(want) if want.dim() == 0 else torch.linspace(-1, 1, want.numel(), dtype=torch.float64
                                                                         ).reshape(want.shape)
    (want * gout).sum().backward()
    ins = [_dev(x), _dev(t)] + ([_dev(w)] if w is not None else [])
    plans: list = []
    got, dx = loss_pair(op, ins, gout, backend, plans, **attrs)
    if route is not None:
        assert route in plans[0].sku.route, plans[0].sku.route
    rtol, atol = TOL[x.dtype]
    assert_close(got.cpu(), want.detach().numpy(), rtol, atol, f"{op} fw {attrs}")
    assert dx.shape == x.shape
    assert_close(dx.cpu(), x64.grad.numpy(), 2 * rtol, 2 * atol, f"{op} bw {attrs}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_nd_index_targets(backend, red):
    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(2, 7, 3, 4, generator=g)
    t = _targets(g, (2, 3, 4), 7, ignore=2)
    w = torch.rand(7, generator=g) + 0.1
    _check(x, t, w, backend, reduction=red, ignore_index=2, label_smoothing=0.1)
    _check(x, t.masked_fill(t == 2, -100), None, backend, reduction=red)
    lp = torch.log_softmax(x, 1)
    _check(lp, t, w, backend, op="nll_loss", peer=F.nll_loss, reduction=red, ignore_index=2)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("red", ["none", "mean"])
def test_nd_probability_targets(backend, red):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 5, 6, generator=g)
    p = torch.softmax(torch.randn(3, 5, 6, generator=g), 1)
    _check(x, p, torch.rand(5, generator=g) + 0.1, backend, reduction=red, label_smoothing=0.2)
    _check(x, p, None, backend, reduction=red)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_nd_forced_small_tiles_and_split(dt):
    """N-D tiles of 4 rows x 8 classes over C = 37 split into 3 chunks per row: the partial (max, sum) merge across
    chunks on rows whose classes are D apart in memory, and the strided dx write."""
    from baracuda.backends.triton.loss import ce_kernels as m

    g = torch.Generator().manual_seed(2)
    x = (2 * torch.randn(2, 37, 5, generator=g)).to(dt)
    t = _targets(g, (2, 5), 37)
    w = (torch.rand(37, generator=g) + 0.1).to(dt)
    x8 = (2 * torch.randn(3, 37, 8, generator=g)).to(dt)     # D = 8: blocks of 4 rows never straddle n (hinted)
    t8 = _targets(g, (3, 8), 37)
    with m.forced(tile=8, rows=4, split=3):
        for red in ("none", "mean"):
            _check(x, t, w, reduction=red, label_smoothing=0.1, route="nd-tile8x4-split3")
            _check(x, torch.softmax(torch.randn(2, 37, 5, generator=g), 1).to(dt), None, reduction=red)
            _check(x8, t8, w, reduction=red, label_smoothing=0.1, route="nd-tile8x4-split3")
            _check(torch.log_softmax(x8.double(), 1).to(dt), t8, w, op="nll_loss", peer=F.nll_loss, reduction=red)


def test_2d_split_rows_more_chunks_than_tiles():
    """2-D rows split over 4 programs (chunks of 32 = two 16-wide tiles, the last chunk partial): f64 exactness."""
    from baracuda.backends.triton.loss import ce_kernels as m

    g = torch.Generator().manual_seed(3)
    x = 5 * torch.randn(3, 101, generator=g, dtype=torch.float64)
    t = _targets(g, (3,), 101)
    with m.forced(tile=16, rows=1, split=4):
        _check(x, t, None, reduction="sum", label_smoothing=0.3, route="tile16x1-split4")
        _check(x, torch.softmax(torch.randn(3, 101, generator=g, dtype=torch.float64), 1), None, reduction="mean")


def test_split_heuristic():
    """Few long rows are split so the grid keeps >= 8 programs per SM; 4096 x 128256 rows already fill it."""
    from baracuda.backends.triton.loss.ce_kernels import choose

    tile, rows, _, split, chunk = choose(4096, 128256, 1, 2)
    assert (tile, rows, split) == (4096, 1, 1)
    tile, rows, _, split, chunk = choose(64, 128256, 1, 2)
    assert split > 1 and split * chunk >= 128256 and (split - 1) * chunk < 128256 and chunk % tile == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_nd_non_collapsible_and_permuted(backend):
    """Inputs whose trailing dims don't collapse to one stride (a permuted view): one copy, same results."""
    g = torch.Generator().manual_seed(4)
    base = torch.randn(2, 4, 3, 5, generator=g)           # [N, d2, d1, C] storage
    x = base.permute(0, 3, 2, 1)                           # [N, C, d1, d2] view
    t = _targets(g, (2, 3, 4), 5)
    _check(x, t, None, backend, reduction="none")
    _check(x, t, None, backend, reduction="mean", label_smoothing=0.05)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unbatched(backend):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(9, generator=g, dtype=torch.float64)
    _check(x, torch.tensor(4), None, backend, reduction="none", label_smoothing=0.1)
    _check(x, torch.softmax(torch.randn(9, generator=g, dtype=torch.float64), 0), None, backend, reduction="sum")
    _check(torch.log_softmax(x, 0), torch.tensor(2), None, backend, op="nll_loss", peer=F.nll_loss, reduction="mean")


@pytest.mark.parametrize("backend", BACKENDS)
def test_nd_out_of_range_target_raises(backend):
    x = _dev(torch.randn(2, 4, 3))
    t = _dev(torch.tensor([[0, 1, 2], [3, 4, -100]]))
    with pytest.raises(InvalidProblemError, match=r"argument 'target': expected class indices in \[0, 4\)"):
        _plan("cross_entropy", x, t, backend=backend).run(x, t)
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


def test_nd_target_shape_error():
    with pytest.raises(InvalidProblemError, match=r"argument 'target': expected class indices of shape \(2, 3\)"):
        bc.Descriptor.make("cross_entropy", ((2, 5, 3), "f32"), ((2, 5), "i64"))


def test_dropin_nd_autograd():
    g = torch.Generator().manual_seed(6)
    x = _dev(torch.randn(3, 6, 4, generator=g, dtype=torch.float64)).requires_grad_(True)
    t = _dev(_targets(g, (3, 4), 6))
    w = _dev(torch.rand(6, generator=g, dtype=torch.float64) + 0.1)
    y = bt.nn.functional.cross_entropy(x, t, w, label_smoothing=0.1)
    y.backward()
    x2 = x.detach().clone().requires_grad_(True)
    y2 = F.cross_entropy(x2, t, w, label_smoothing=0.1)
    y2.backward()
    torch.testing.assert_close(y, y2)
    torch.testing.assert_close(x.grad, x2.grad)
    lp = torch.log_softmax(x.detach(), 1)
    torch.testing.assert_close(bt.nn.functional.nll_loss(lp, t, reduction="none"), F.nll_loss(lp, t, reduction="none"))


@pytest.mark.skipif(DEVICE.type != "cuda", reason="GPU-sized rows (the interpreter covers the same kernels on small ones)")
@pytest.mark.parametrize("attrs", [{"reduction": "mean"}, {"reduction": "none", "label_smoothing": 0.1},
                                   {"reduction": "sum", "ignore_index": 3, "label_smoothing": 0.2}])
@pytest.mark.parametrize("weighted", [False, True])
def test_long_rows_backward_gpu(attrs, weighted):
    """Rows of 40000 classes, bf16, vs torch in f64: the backward reads the saved lse in one streaming pass (a
    row-sum pass first for smoothing with class weights); reruns are bit-identical."""
    g = torch.Generator().manual_seed(7)
    x = (3 * torch.randn(37, 40000, generator=g)).to(torch.bfloat16)
    t = _targets(g, (37,), 40000, ignore=attrs.get("ignore_index", -100))
    w = (torch.rand(40000, generator=g) + 0.1).to(torch.bfloat16) if weighted else None
    _check(x, t, w, **attrs)
    ins = [_dev(x), _dev(t)] + ([_dev(w)] if w is not None else [])
    gout = _dev(torch.randn(37 if attrs["reduction"] == "none" else (), generator=g).to(torch.bfloat16))
    lse = _plan("cross_entropy", *ins, **attrs).run(*ins)[1]
    p = _plan("cross_entropy_backward", gout, lse, *ins, **attrs)
    assert ("rowsum-" if weighted and attrs.get("label_smoothing") else "lse-") in p.sku.route, p.sku.route
    assert torch.equal(p.run(gout, lse, *ins), p.run(gout, lse, *ins))
