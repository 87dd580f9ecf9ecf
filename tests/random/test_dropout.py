"""Dropout forms: the backward regenerates exactly the forward's mask from (seed, offset) (no mask is stored),
channel masks span the dims torch's feature dropout spans, the keep rate and alpha dropout's moments are right,
and the drop-ins take torch's signatures, draw their seed from torch's generator (torch.manual_seed reproduces a
run; the values differ from torch's own stream, the distribution is the same) and differentiate."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import UnsupportedError
from baracuda._core.sku import Backend
from baracuda.ops.random import DROPOUT_OPS, affine_of, mask_inner
from baracuda.testing import test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
_SHAPE = {"dropout1d": (3, 4, 9), "dropout2d": (2, 3, 4, 5), "dropout3d": (2, 3, 2, 3, 4),
          "feature_alpha_dropout": (2, 3, 4, 5)}


def _dev(x):
    return x.to("cuda") if DEVICE.type == "cuda" else x


@pytest.mark.parametrize("op", DROPOUT_OPS)
@pytest.mark.parametrize("backend", ["reference", "triton"])
def test_backward_regenerates_the_forward_mask(op, backend):
    shape = _SHAPE.get(op, (5, 67))
    x = np.random.default_rng(0).uniform(0.5, 1.5, shape).astype(np.float32)    # never 0: kept != dropped
    p = 0.35
    d = bc.Descriptor.like(op, x, p=p, seed=99, offset=5)
    pref, dev = (REF, "cpu") if backend == "reference" else (TRITON, DEVICE)
    xin = x if backend == "reference" else _dev(torch.from_numpy(x))
    y = np.asarray(bc.Plan.select(d, dev, pref).run(xin).cpu() if backend == "triton" else
                   bc.Plan.select(d, dev, pref).run(xin))
    s, c1, c0 = affine_of(op, p)
    kept = np.abs(y - c0) > 1e-6
    np.testing.assert_allclose(y[kept], (x * s + c1)[kept], rtol=1e-6)
    g = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    gin = g if backend == "reference" else _dev(torch.from_numpy(g))
    (dx,) = bc.BackwardPlan.select(d, dev, pref).run(gin)
    dx = np.asarray(dx.cpu() if backend == "triton" else dx)
    np.testing.assert_allclose(dx, np.where(kept, g * s, 0.0), rtol=1e-6, atol=0)
    if op not in ("dropout", "alpha_dropout"):    # one draw per channel: a channel is kept or dropped whole
        inner = mask_inner(op, shape)
        k = kept.reshape(-1, inner)
        assert np.all(k.all(1) | ~k.any(1))
        assert 0 < k[:, 0].sum() < k.shape[0]


def test_the_channel_masks_span_torchs_feature_dims():
    assert mask_inner("dropout1d", (3, 9)) == 9 and mask_inner("dropout1d", (2, 3, 9)) == 9
    assert mask_inner("dropout2d", (2, 3, 4, 5)) == 20 and mask_inner("dropout2d", (2, 3, 7)) == 7   # (N, C, L)
    assert mask_inner("dropout3d", (2, 3, 2, 3, 4)) == 24 and mask_inner("dropout3d", (3, 2, 3, 4)) == 24
    assert mask_inner("feature_alpha_dropout", (2, 3, 4)) == 4
    with pytest.raises(bc.InvalidProblemError, match="dropout1d"):
        bc.Descriptor.like("dropout1d", np.zeros((2, 3, 4, 5), np.float32), seed=1)


def test_keep_rate_and_scale():
    x = np.ones((400, 500), np.float32)
    for p in (0.1, 0.5, 0.9):
        y = bc.Plan.select(bc.Descriptor.like("dropout", x, p=p, seed=3), "cpu", REF).run(x)
        assert abs((y == 0).mean() - p) < 0.005
        assert abs(y.mean() - 1.0) < 0.02          # E[y] = x
    assert not bc.Plan.select(bc.Descriptor.like("dropout", x, p=1.0, seed=3), "cpu", REF).run(x).any()


def test_alpha_dropout_keeps_selu_mean_and_variance():
    x = np.random.default_rng(2).standard_normal((1000, 500))
    for op in ("alpha_dropout", "feature_alpha_dropout"):
        y = bc.Plan.select(bc.Descriptor.like(op, x, p=0.3, seed=4), "cpu", REF).run(x)
        assert abs(y.mean()) < 0.02 and abs(y.std() - 1.0) < 0.03, (op, y.mean(), y.std())


def test_dropin_reproducible_under_manual_seed_and_differentiable():
    x = _dev(torch.randn(64, 33, dtype=torch.float32)).requires_grad_()     # (a leaf on the test device)
    with bt.preference(TRITON):
        torch.manual_seed(0)
        a = bt.nn.functional.dropout(x, 0.4)
        torch.manual_seed(0)
        b = bt.nn.functional.dropout(x, 0.4)
        c = bt.nn.functional.dropout(x, 0.4)
    assert torch.equal(a, b) and not torch.equal(a, c)
    a.backward(torch.ones_like(a))
    torch.testing.assert_close(x.grad, (a != 0).to(x.dtype) / 0.6)


def test_dropin_signatures_and_refusals():
    x = torch.randn(2, 3, 4)
    assert torch.equal(bt.nn.functional.dropout(x, 0.5, training=False), x)
    assert torch.equal(bt.nn.functional.dropout(x, 0.0), x)
    with pytest.raises(UnsupportedError, match="inplace"):
        bt.nn.functional.dropout(x, 0.5, True, True)
    with pytest.raises(ValueError, match="between 0 and 1"):
        bt.nn.functional.dropout2d(x, 1.5)
    torch.manual_seed(3)
    y = bt.nn.functional.dropout2d(x, p=0.5)
    kept = (y != 0).reshape(6, 4)
    assert torch.all(kept.all(1) | ~kept.any(1))


def test_mode_routes_torch_dropout_with_the_same_distribution():
    """torch's own stream cannot be matched bit for bit (a deliberate difference): the keep rate and scale agree."""
    x = torch.ones(200, 300)
    with bt.mode():
        torch.manual_seed(0)
        y = F.dropout(x, 0.25)
    torch.manual_seed(0)
    t = F.dropout(x, 0.25)
    assert abs((y == 0).float().mean().item() - 0.25) < 0.01
    torch.testing.assert_close(torch.unique(y), torch.tensor([0.0, 1 / 0.75]))
    assert not torch.equal(y, t)       # our stream (torch's own F.dropout gives t for the same seed), same law


def test_bernoulli_and_multinomial_dropins():
    torch.manual_seed(1)
    a = bt.bernoulli(torch.full((50, 40), 0.3))
    torch.manual_seed(1)
    assert torch.equal(a, bt.bernoulli(torch.full((50, 40), 0.3)))
    assert abs(a.mean().item() - 0.3) < 0.04
    assert abs(bt.bernoulli(torch.zeros(30, 30), 0.7).mean().item() - 0.7) < 0.06
    m = bt.multinomial(torch.tensor([[0.0, 1.0, 3.0], [1.0, 1.0, 1.0]]), 2)
    assert m.shape == (2, 2) and m.dtype == torch.int64 and 0 not in m[0].tolist()
