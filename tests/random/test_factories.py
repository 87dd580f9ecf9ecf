"""The random factory drop-ins: torch.rand / randn / randint / randperm and rand_like / randn_like / randint_like,
on baracuda's Philox stream (the uniform / normal / randint / randperm ops).  torch's signatures, dtypes and
ranges; torch.manual_seed and a generator reproduce a draw; bt.mode() leaves torch's own factories alone; compiled
functions draw fresh numbers per call."""
from __future__ import annotations

import pytest
import torch

import baracuda.torch as bt
from baracuda._core.errors import DeviceMismatchError, UnsupportedError
from baracuda.testing import test_device

DEVICE = torch.device("cuda" if test_device().type == "cuda" else "cpu")


def test_signatures_dtypes_and_ranges_are_torchs():
    torch.manual_seed(0)
    for make, want in ((lambda f: f(2, 3, device=DEVICE), ((2, 3), torch.float32)),
                       (lambda f: f((4,), dtype=torch.float64, device=DEVICE), ((4,), torch.float64)),
                       (lambda f: f(size=(2, 1), device=DEVICE), ((2, 1), torch.float32)),
                       (lambda f: f(0, device=DEVICE), ((0,), torch.float32))):
        for ours, theirs in ((bt.rand, torch.rand), (bt.randn, torch.randn)):
            a, t = make(ours), make(theirs)
            assert (a.shape, a.dtype, a.device) == (t.shape, t.dtype, t.device) == (torch.Size(want[0]), want[1],
                                                                                      t.device)
    u = bt.rand(100_000, device=DEVICE)
    assert 0.0 <= u.min().item() and u.max().item() < 1.0 and abs(u.mean().item() - 0.5) < 0.01
    z = bt.randn(100_000, device=DEVICE, dtype=torch.float64)
    assert abs(z.mean().item()) < 0.02 and abs(z.std().item() - 1.0) < 0.02
    r = bt.randint(10, (5000,), device=DEVICE)
    assert r.dtype == torch.int64 and r.min().item() == 0 and r.max().item() == 9
    r = bt.randint(-3, 4, (5000,), dtype=torch.int32, device=DEVICE)
    assert r.dtype == torch.int32 and r.min().item() == -3 and r.max().item() == 3
    r = bt.randint(low=2, high=5, size=(100,), device=DEVICE)
    assert set(r.tolist()) <= {2, 3, 4}
    p = bt.randperm(1000, device=DEVICE)
    assert p.dtype == torch.int64 and torch.equal(p.sort().values, torch.arange(1000, device=DEVICE))
    assert bt.randperm(6, dtype=torch.float32, device=DEVICE).dtype == torch.float32
    assert bt.rand(3, requires_grad=True, device=DEVICE).requires_grad


def test_manual_seed_and_a_generator_reproduce_a_draw():
    torch.manual_seed(4)
    a = bt.randn(50, device=DEVICE)
    torch.manual_seed(4)
    assert torch.equal(a, bt.randn(50, device=DEVICE))
    assert not torch.equal(a, bt.randn(50, device=DEVICE))
    g = torch.Generator(device=DEVICE).manual_seed(9)
    b = bt.randint(100, (40,), generator=g, device=DEVICE)
    g.manual_seed(9)
    assert torch.equal(b, bt.randint(100, (40,), generator=g, device=DEVICE))


def test_like_forms_take_the_input_shape_dtype_and_device():
    x = torch.ones(3, 4, dtype=torch.float64, device=DEVICE)
    for ours, theirs in ((bt.rand_like, torch.rand_like), (bt.randn_like, torch.randn_like)):
        a, t = ours(x), theirs(x)
        assert (a.shape, a.dtype, a.device) == (t.shape, t.dtype, t.device)
    r = bt.randint_like(x, 5)
    assert r.dtype == torch.float64 and r.shape == x.shape and set(r.unique().tolist()) <= set(range(5))
    r = bt.randint_like(x.long(), 2, 4)
    assert r.dtype == torch.int64 and set(r.unique().tolist()) <= {2, 3}


def test_bad_arguments_raise_torchs_kinds_of_error():
    with pytest.raises(TypeError, match="randint"):
        bt.randint(5)                                        # no size
    with pytest.raises(TypeError, match="argument 'high' must be int"):
        bt.randint(0, 2.5, (3,))
    with pytest.raises(TypeError, match="argument 'n' must be int"):
        bt.randperm(3.0)
    with pytest.raises(TypeError, match="generator"):
        bt.rand(3, generator=7)
    with pytest.raises(UnsupportedError):
        bt.rand_like(torch.ones(2), out=torch.empty(2))
    if DEVICE.type == "cuda":
        with pytest.raises(DeviceMismatchError, match="argument 'generator'"):
            bt.rand(3, device="cuda", generator=torch.Generator())


def test_mode_leaves_torchs_random_factories_to_torch():
    """bt.mode() does not route torch.rand & co. (torch's own are graph-safe; seeded code keeps torch's values)."""
    ones = torch.ones(2)
    torch.manual_seed(3)
    want = [torch.rand(2, 3), torch.randn(4, dtype=torch.float64), torch.randint(0, 9, (3,)), torch.randperm(5),
            torch.rand_like(ones)]
    torch.manual_seed(3)
    with bt.mode(coverage=True) as m:
        got = [torch.rand(2, 3), torch.randn(4, dtype=torch.float64), torch.randint(0, 9, (3,)), torch.randperm(5),
               torch.rand_like(ones)]
    assert not m.routed and not m.fell_through, m.summary()
    for g, w in zip(got, want):
        assert torch.equal(g, w)


def test_compiled_factories_draw_per_call():
    torch._dynamo.reset()
    f = torch.compile(lambda t: t + bt.randn(t.shape, device=t.device) + bt.rand_like(t), backend="aot_eager",
                      fullgraph=True)
    x = torch.zeros(64, device=DEVICE)
    a, b = f(x), f(x)
    assert a.shape == (64,) and not torch.equal(a, b)
