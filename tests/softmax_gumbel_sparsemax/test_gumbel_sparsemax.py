"""sparsemax vs a float64 torch implementation via sort (torch has no sparsemax), any row length (chunked
rows forced under the interpreter); gumbel_softmax: bit-identical uniforms in both backends, Gumbel
statistics, straight-through gradient, drop-in reproducibility under torch.manual_seed."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.testing import assert_close, test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _dev(x):
    return x.to("cuda") if DEVICE.type == "cuda" else x


def _tm():
    from baracuda.backends.triton.softmax import gumbel_sparsemax as m

    return m


def sparsemax_torch(x: torch.Tensor, dim: int) -> torch.Tensor:
    """The peer: sort-based sparsemax in float64 torch (differentiable through torch.autograd)."""
    z = x.transpose(dim, -1)
    zs, _ = torch.sort(z, dim=-1, descending=True)
    k = torch.arange(1, z.shape[-1] + 1, dtype=z.dtype)
    cs = zs.cumsum(-1)
    kz = ((1 + k * zs) > cs).sum(-1, keepdim=True)
    tau = (cs.gather(-1, kz - 1) - 1) / kz
    return torch.clamp(z - tau, min=0).transpose(dim, -1)


@pytest.mark.parametrize("shape,dim,br", [((4, 9), 1, None), ((3, 50), -1, 16), ((2, 21, 3), 1, 4),
                                          ((1, 3000), 1, 512)])
def test_sparsemax_vs_sort_peer(shape, dim, br):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g, dtype=torch.float64) * 1.5
    gy = torch.randn(*shape, generator=g, dtype=torch.float64)
    xt = x.clone().requires_grad_()
    ref = sparsemax_torch(xt, dim)
    (want,) = torch.autograd.grad(ref, xt, gy)
    desc = bc.Descriptor.like("sparsemax", x, dim=dim)
    kw = {"br": br} if br else {}
    with _tm().forced(**kw):
        y = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x))
        (dx,) = bc.BackwardPlan.select(desc, DEVICE, TRITON).run(_dev(gy), out=y)
    assert_close(y.cpu(), ref.detach().numpy(), 1e-12, 1e-12, "sparsemax")
    assert_close(dx.cpu(), want.numpy(), 1e-12, 1e-12, "sparsemax grad")
    s = y.cpu().sum(dim)
    assert torch.allclose(s, torch.ones_like(s)), "rows sum to 1"


def test_sparsemax_low_precision_and_ties():
    x = torch.tensor([[0.5, 0.5, 0.5, -1.0], [3.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0]], dtype=torch.float32)
    y = bc.Plan.select(bc.Descriptor.like("sparsemax", x, dim=1), DEVICE, TRITON).run(_dev(x))
    assert_close(y.cpu(), sparsemax_torch(x.double(), 1).numpy(), 1e-6, 1e-7, "ties")
    g = torch.Generator().manual_seed(2)
    xb = (torch.randn(8, 700, generator=g) * 0.1).bfloat16()   # a wide support
    yb = bc.Plan.select(bc.Descriptor.like("sparsemax", xb, dim=1), DEVICE, TRITON).run(_dev(xb))
    assert_close(yb.cpu(), sparsemax_torch(xb.double(), 1).numpy(), 1.6e-2, 2e-3, "bf16")


def test_gumbel_uniforms_match_triton_bit_for_bit():
    """The NumPy Philox (reference) and tl.philox (Triton) draw the same uniforms: the f64 outputs agree to
    rounding only if every uniform does (one differing uniform moves its row by O(1))."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(5, 33, generator=g, dtype=torch.float64)
    for seed in (0, 7, 2 ** 40 + 3):
        desc = bc.Descriptor.like("gumbel_softmax", x, tau=0.7, hard=False, dim=1, seed=seed)
        a = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x)).cpu()
        b = bc.Plan.select(desc, "cpu", REF).run(x.numpy())
        assert_close(a, b, 1e-12, 1e-14, f"seed {seed}")
    from baracuda.backends.reference.softmax_gumbel_sparsemax import gumbel_uniform

    u = gumbel_uniform(5, (1000,))
    assert u.min() > 0 and u.max() < 1 and len(np.unique(u)) > 990


def test_gumbel_statistics_and_hard():
    # P(argmax of x + Gumbel = i) = softmax(x)_i
    x = torch.tensor([[1.0, 0.0, -1.0, 0.5]] * 4000, dtype=torch.float64)
    desc = bc.Descriptor.like("gumbel_softmax", x, tau=1.0, hard=True, dim=1, seed=11)
    y = bc.Plan.select(desc, "cpu", REF).run(x.numpy())
    assert set(np.unique(y)) <= {0.0, 1.0} and np.all(y.sum(1) == 1.0)
    freq = y.mean(0)
    p = torch.softmax(x[0], 0).numpy()
    assert np.all(np.abs(freq - p) < 4 * np.sqrt(p * (1 - p) / 4000)), (freq, p)
    xs = torch.randn(3, 10, dtype=torch.float32)
    dh = bc.Descriptor.like("gumbel_softmax", xs, tau=0.5, hard=True, dim=-1, seed=5)
    yt = bc.Plan.select(dh, DEVICE, TRITON).run(_dev(xs)).cpu()
    ys = bc.Plan.select(bc.Descriptor.like("gumbel_softmax", xs, tau=0.5, hard=False, dim=-1, seed=5), DEVICE,
                        TRITON).run(_dev(xs)).cpu()
    assert torch.equal(yt.argmax(-1), ys.argmax(-1))
    assert_close(yt, F.one_hot(ys.argmax(-1), 10).double().numpy(), 1e-6, 1e-7, "hard one-hot")


def test_gumbel_straight_through_grad_and_chunked():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 40, generator=g, dtype=torch.float64)
    gy = torch.randn(3, 40, generator=g, dtype=torch.float64)
    soft = bc.Plan.select(bc.Descriptor.like("gumbel_softmax", x, tau=0.5, hard=False, dim=1, seed=9), "cpu",
                          REF).run(x.numpy())
    s = torch.from_numpy(soft)
    want = s * (gy - (gy * s).sum(1, keepdim=True)) / 0.5   # d softmax(z / tau)
    for hard in (False, True):
        desc = bc.Descriptor.like("gumbel_softmax", x, tau=0.5, hard=hard, dim=1, seed=9)
        with _tm().forced(br=16):   # 3 chunks per row: the noise is regenerated in the write pass
            y = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x)).cpu()
            (dx,) = bc.BackwardPlan.select(desc, DEVICE, TRITON).run(_dev(gy), x=_dev(x))
        assert_close(dx.cpu(), want.numpy(), 1e-12, 1e-12, f"straight-through grad hard={hard}")
        if not hard:
            assert_close(y, soft, 1e-12, 1e-14, "chunked soft")
        else:
            assert torch.equal(y.argmax(1), s.argmax(1))


def test_gumbel_dropin_reproducible_with_manual_seed():
    x = torch.randn(4, 6, requires_grad=True)
    with bt.preference(TRITON):
        torch.manual_seed(123)
        a = bt.nn.functional.gumbel_softmax(x, tau=0.8, hard=True)
        s1 = bt.nn.functional.gumbel_softmax(x, tau=0.8)
        torch.manual_seed(123)
        b = bt.nn.functional.gumbel_softmax(x, tau=0.8, hard=True)
        s2 = bt.nn.functional.gumbel_softmax(x, tau=0.8)
        s3 = bt.nn.functional.gumbel_softmax(x, tau=0.8)
    assert torch.equal(a, b) and torch.equal(s1, s2), "torch.manual_seed reproduces the draws"
    assert not torch.equal(s2, s3), "a new call draws new noise"
    a.sum().backward()
    assert x.grad is not None and torch.allclose(x.grad, torch.zeros_like(x.grad), atol=1e-6)  # sum of softmax
