"""Layout family beyond the generic tests: the in-place KV-cache append, KV-shaped cat, torch drop-ins
(with autograd), torch's error rules."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.testing import forced_plan, test_device

BACKENDS = [Backend.REFERENCE, Backend.TRITON]
DEVICE = test_device()   # cuda on a GPU machine (plans then take CUDA tensors), else cpu (interpreter)
DEV = "cuda" if DEVICE.type == "cuda" else "cpu"


def _plan(backend, op, *xs, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *xs, **attrs), DEVICE, backend)
    assert not isinstance(p, str), p
    return p


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_write_slice_out_of_place_and_in_place(backend):
    cache = torch.randn(12, 2, 4, dtype=torch.bfloat16, device=DEV)
    new = torch.randn(3, 2, 4, dtype=torch.bfloat16, device=DEV)
    p = _plan(backend, "write_slice", cache, new, dim=0, start=5)
    want = cache.clone()
    want[5:8] = new
    before = cache.clone()
    out = p.run(cache, new)
    assert torch.equal(out, want) and torch.equal(cache, before)   # out of place leaves dst alone
    if backend == Backend.TRITON:                                # out=dst: the in-place KV append
        p.run(cache, new, out=cache)
        assert torch.equal(cache, want)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_write_slice_inner_dim(backend):
    kv = torch.randn(2, 2, 6, 4, device=DEV)
    step = torch.randn(2, 2, 1, 4, device=DEV)
    out = _plan(backend, "write_slice", kv, step, dim=2, start=4).run(kv, step)
    want = kv.clone()
    want[:, :, 4:5] = step
    assert torch.equal(out, want)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_cat_kv_shaped(backend):
    a = torch.randn(2, 2, 8, 4, dtype=torch.bfloat16, device=DEV)
    b = torch.randn(2, 2, 3, 4, dtype=torch.bfloat16, device=DEV)
    out = _plan(backend, "cat", a, b, dim=2).run(a, b)
    assert torch.equal(out, torch.cat([a, b], 2))
    at = a.transpose(1, 2)            # strided input: an index-mapped copy (layout_copy.move)
    assert torch.equal(_plan(backend, "cat", at, at, dim=0).run(at, at), torch.cat([at, at], 0))


def test_dropins_published_and_differentiable():
    bt = pytest.importorskip("baracuda.torch")
    x = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    y = bt.nn.functional.pad(x, (2, 1), mode="reflect")
    torch.testing.assert_close(y, torch.nn.functional.pad(x, (2, 1), mode="reflect"))
    g = torch.randn_like(y)
    (gx,) = torch.autograd.grad(y, x, g)
    xr = x.detach().requires_grad_()
    (want,) = torch.autograd.grad(torch.nn.functional.pad(xr, (2, 1), mode="reflect"), xr, g)
    torch.testing.assert_close(gx, want)
    for name, args in (("cat", ([x, x], 1)), ("roll", (x, 2, 1)), ("flip", (x, [0, 2])), ("rot90", (x, 1, [1, 2])),
                       ("tile", (x, (2, 1))), ("repeat_interleave", (x, 2, 1)), ("triu", (x, 1)),
                       ("stack", ([x, x], 0)), ("movedim", (x, 0, 2)), ("permute", (x, (2, 0, 1)))):
        got = getattr(bt, name)(*args)
        want = getattr(torch, name)(*args)
        torch.testing.assert_close(got, want, rtol=0, atol=0, msg=name)
        (g1,) = torch.autograd.grad(got.sum() * 1.0 + (got * got).sum(), x)
        (g2,) = torch.autograd.grad(want.sum() * 1.0 + (want * want).sum(), x)
        torch.testing.assert_close(g1, g2, msg=name)


def test_reflect_pad_rule_matches_torch():
    x = torch.randn(1, 2, 3)
    with pytest.raises(RuntimeError):
        torch.nn.functional.pad(x, (3, 0), mode="reflect")
    with pytest.raises(bc.InvalidProblemError, match="padding smaller than the input size 3"):
        bc.Descriptor.like("pad", x, pad=(3, 0), mode="reflect")
    torch.nn.functional.pad(x, (2, 2), mode="reflect")   # largest legal
    bc.Descriptor.like("pad", x, pad=(2, 2), mode="reflect")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_full_and_zero_size(backend):
    d = bc.Descriptor.make("full", shape=(2, 3), value=-1.5, dtype="bf16")
    p = forced_plan(d, DEVICE, backend)
    assert not isinstance(p, str), p
    out = p.run()
    # no input to follow: the plan's device's array type, whichever backend runs it (NumPy on the CPU)
    if DEV == "cuda":
        assert isinstance(out, torch.Tensor) and out.device.type == DEV and out.dtype == torch.bfloat16
        out = out.float().cpu()
    else:
        assert not isinstance(out, torch.Tensor)
        out = torch.as_tensor(out.astype("float32"))
    assert torch.equal(out, torch.full((2, 3), -1.5))
    e = torch.zeros(0, 4, device=DEV)
    assert _plan(backend, "permute", e, dims=(1, 0)).run(e).shape == (4, 0)
    assert _plan(backend, "pad", e, pad=(1, 1, 2, 0), value=3.0).run(e).eq(3.0).all()


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
@pytest.mark.parametrize("mode", ["reflect", "replicate", "circular"])
def test_negative_pad_crops_as_torch(backend, mode):
    """Negative pads of the non-constant modes crop (torch): reflect / replicate map over the whole input (a
    reflection may read a cropped element), circular wraps the cropped view; values and gradients as torch; a
    circular pad larger than what the cropping leaves is refused (torch's result there is an overlapping
    self-copy)."""
    import baracuda.torch as bt

    g = torch.Generator().manual_seed(4)
    x4 = torch.randn(2, 3, 5, 6, generator=g, dtype=torch.float64)
    pads = [(-1, 2), (2, -1), (-2, -1), (-1, 1, -2, 1), (1, -2, 2, -1), (-2, 3, 0, 0), (-4, 3, 0, 0)]
    with bt.preference(bc.PlanPreference(prefer=(backend,))):
        for pad in pads:
            x = x4 if len(pad) == 4 else x4[0]
            if mode == "circular" and pad == (-4, 3, 0, 0):
                # 3 > the 2 columns left: torch copies the output into itself (an overlap error, or values that
                # depend on the copy order); refused here
                with pytest.raises(ValueError, match="left by the cropping"):
                    bt.nn.functional.pad(x, pad, mode=mode)
                continue
            xa, xb = x.clone().requires_grad_(), x.clone().requires_grad_()
            want = torch.nn.functional.pad(xa, pad, mode=mode)
            got = bt.nn.functional.pad(xb, pad, mode=mode)
            gy = torch.randn(want.shape, generator=g, dtype=torch.float64)
            torch.testing.assert_close(got, want, rtol=0, atol=0)
            (ga,), (gb,) = torch.autograd.grad(want, xa, gy), torch.autograd.grad(got, xb, gy)
            torch.testing.assert_close(gb, ga, rtol=1e-12, atol=1e-12, msg=f"{mode} {pad}")
