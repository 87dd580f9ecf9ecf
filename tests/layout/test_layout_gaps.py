"""Torch semantics the generic suite cannot express: cat/stack dtype promotion, slice_scatter with a step,
repeat_interleave with a repeats tensor (drop-in forms, output_size, gradients), on both backends."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.testing import forced_plan, test_device

bt = pytest.importorskip("baracuda.torch")
DEVICE = test_device()
DEV = "cuda" if DEVICE.type == "cuda" else "cpu"
BACKENDS = [Backend.REFERENCE, Backend.TRITON]


def _run(backend, op, *xs, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *xs, **attrs), DEVICE, backend)
    assert not isinstance(p, str), p
    out = p.run(*xs)
    return torch.as_tensor(out) if not isinstance(out, torch.Tensor) else out


def _t(shape, dtype):
    if dtype == torch.bool:
        return torch.rand(shape, device=DEV) > 0.5
    if dtype.is_floating_point:
        return torch.randn(shape, device=DEV).to(dtype)
    return torch.randint(-50 if dtype != torch.uint8 else 0, 100, shape, device=DEV, dtype=dtype)


PAIRS = [(torch.float16, torch.float32), (torch.bfloat16, torch.float16), (torch.int64, torch.float16),
         (torch.bool, torch.int32), (torch.uint8, torch.int8), (torch.int32, torch.bfloat16),
         (torch.float64, torch.bfloat16), (torch.bool, torch.bfloat16)]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("a,b", PAIRS, ids=lambda d: str(d).replace("torch.", ""))
def test_cat_stack_promote_like_torch(backend, a, b):
    x, y = _t((3, 20), a), _t((2, 20), b)
    want = torch.cat([x, y], 0)
    got = _run(backend, "cat", x, y, dim=0)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want.cpu())
    y3 = _t((3, 20), b)
    want = torch.stack([x, y3], 1)
    got = _run(backend, "stack", x, y3, dim=1)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want.cpu())


def test_cat_mixed_dropin_grads_in_input_dtypes():
    x = torch.randn(2, 3, dtype=torch.float16, device=DEV, requires_grad=True)
    y = torch.randn(4, 3, dtype=torch.float32, device=DEV, requires_grad=True)
    out = bt.cat([x, y], 0)
    assert out.dtype == torch.float32
    g = torch.randn(6, 3, device=DEV)
    gx, gy = torch.autograd.grad(out, [x, y], g)
    assert gx.dtype == torch.float16 and gy.dtype == torch.float32
    assert torch.equal(gx, g[:2].half()) and torch.equal(gy, g[2:])
    i = torch.arange(3, device=DEV).reshape(1, 3)                 # an integer input: promoted, no gradient
    out = bt.cat([i, x], 0)
    assert out.dtype == torch.float16 and torch.equal(out, torch.cat([i, x], 0))
    (gx,) = torch.autograd.grad(out.float().sum(), [x])
    assert torch.equal(gx, torch.ones_like(x))
    s = bt.stack([x[:, :2].float(), y[:2, :2]], 0)
    assert torch.equal(s, torch.stack([x[:, :2].float(), y[:2, :2]], 0))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dim,start,end,step", [(0, 1, 9, 3), (1, None, None, 2), (2, -20, None, 4), (1, 2, 3, 5)])
def test_slice_scatter_step(backend, dim, start, end, step):
    x = torch.randn(9, 6, 24, device=DEV)
    n = len(range(*slice(start, end, step).indices(x.shape[dim])))
    shape = list(x.shape)
    shape[dim] = n
    src = torch.randn(shape, device=DEV)
    want = torch.slice_scatter(x, src, dim, start, end, step)
    assert torch.equal(_run(backend, "slice_scatter", x, src, dim=dim, start=start, end=end, step=step).cpu(), want.cpu())
    idx = (slice(None),) * dim + (slice(start, end, step),)
    assert torch.equal(_run(backend, "slice", x, dim=dim, start=start, end=end, step=step).cpu(), x[idx].cpu())


def test_slice_scatter_step_dropin_autograd():
    x = torch.randn(7, 5, dtype=torch.float64, device=DEV, requires_grad=True)
    src = torch.randn(3, 5, dtype=torch.float64, device=DEV, requires_grad=True)
    got = bt.slice_scatter(x, src, 0, 1, None, 2)
    want = torch.slice_scatter(x, src, 0, 1, None, 2)
    assert torch.equal(got, want)
    g = torch.randn_like(want)
    for a, b in zip(torch.autograd.grad(got, [x, src], g), torch.autograd.grad(want, [x, src], g)):
        assert torch.equal(a, b)
    with pytest.raises(bc.InvalidProblemError, match="argument 'step'"):
        bt.slice_scatter(x, src, 0, 1, None, 0)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("shape,dim,reps", [
    ((5, 3, 20), 1, [2, 0, 5]),                # rows of 20: the tiled copy
    ((6, 40), 0, [1, 0, 3, 7, 0, 2]),
    ((2, 3, 4), None, list(range(24))),         # flat, skewed counts
    ((4, 33), 1, [3]),                          # one count for every element
    ((3, 4), 0, [0, 0, 0]),                     # empty result
], ids=str)
def test_repeat_interleave_tensor(backend, shape, dim, reps):
    x = torch.randn(shape, device=DEV)
    r = torch.tensor(reps, device=DEV)
    want = torch.repeat_interleave(x, r, dim)
    n = want.shape[0 if dim is None else dim]
    got = _run(backend, "repeat_interleave", x, r, dim=dim, output_size=n)
    assert torch.equal(got.cpu(), want.cpu())
    g = torch.randn_like(want)
    gb = _run(backend, "repeat_interleave_backward", g, r, dim=dim, shape=shape)
    xr = x.clone().requires_grad_()
    (gw,) = torch.autograd.grad(torch.repeat_interleave(xr, r, dim), xr, g)
    torch.testing.assert_close(gb.cpu(), gw.cpu(), rtol=1e-6, atol=1e-6)


def test_repeat_interleave_int32_and_strided_inputs():
    x = torch.randn(6, 40, device=DEV).t()                       # strided x
    r = torch.tensor([2, 1, 0, 3] * 10, dtype=torch.int32, device=DEV)[::2]   # strided int32 counts (20)
    x = x[:20]
    want = torch.repeat_interleave(x, r, 0)
    for backend in BACKENDS:
        assert torch.equal(_run(backend, "repeat_interleave", x, r, dim=0, output_size=want.shape[0]).cpu(), want.cpu())


def test_repeat_interleave_dropin_forms_and_autograd():
    x = torch.randn(4, 3, dtype=torch.float64, device=DEV, requires_grad=True)
    r = torch.tensor([1, 3, 0, 2], device=DEV)
    got = bt.repeat_interleave(x, r, 0)
    want = torch.repeat_interleave(x, r, 0)
    assert torch.equal(got, want)
    assert torch.equal(bt.repeat_interleave(x, r, dim=0, output_size=6), want)
    g = torch.randn_like(want)
    assert torch.equal(torch.autograd.grad(got, x, g)[0], torch.autograd.grad(want, x, g)[0])
    assert torch.equal(bt.repeat_interleave(r), torch.repeat_interleave(r))                # the 1-argument form
    assert torch.equal(bt.repeat_interleave(x, torch.tensor(2, device=DEV), 1), torch.repeat_interleave(x, 2, 1))
    assert torch.equal(bt.repeat_interleave(x, 2), torch.repeat_interleave(x, 2))          # int repeats still work


def test_repeat_interleave_reference_checks_values():
    x, r = torch.randn(3, 2), torch.tensor([1, -1, 2])
    p = bc.Plan.select(bc.Descriptor.like("repeat_interleave", x, r, dim=0, output_size=2), "cpu")
    with pytest.raises(bc.InvalidProblemError, match="non-negative counts"):
        p.run(x, r)
    r = torch.tensor([1, 1, 2])
    p = bc.Plan.select(bc.Descriptor.like("repeat_interleave", x, r, dim=0, output_size=5), "cpu")
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'output_size': expected the sum of the repeats \(4\)"):
        p.run(x, r)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.int8, torch.uint8,
                                torch.bool])
@pytest.mark.parametrize("value", [-1.7, 2.5, float("inf"), 0.0, 300])
def test_fill_matches_torch_scalar_conversion(dt, value):
    """torch.fill: integer targets truncate toward zero and refuse overflow (torch raises too); bool is value != 0."""
    import baracuda.torch as bt

    x = torch.zeros(5, dtype=dt)
    try:
        want = torch.fill(x, value)
    except RuntimeError:
        with pytest.raises(bc.InvalidProblemError, match="fill: argument 'value'"):
            bt.fill(x, value)
        return
    torch.testing.assert_close(bt.fill(x, value), want, rtol=0, atol=0)


# -- narrow (the slice op's torch.narrow adapter), diag(out=), roll of a 0-d tensor ---------------------------------
@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_narrow_adapter_follows_torch(backend):
    """The slice op's torch.narrow adapter: a negative start counts from the end, a 0-d tensor start is taken, and
    what torch.narrow refuses (start out of [-size, size], start + length past the size, a negative length) is
    refused -- a slice would have clamped it silently."""
    x = torch.randn(4, 10, device=DEV)
    spec = bc.get_spec("slice")
    for dim, start, length in [(1, -3, 3), (1, -3, 2), (-1, 2, 5), (1, torch.tensor(2), 3), (0, -4, 4), (1, 10, 0),
                               (0, torch.tensor(-1), 1)]:
        ops, attrs = spec.dropin(x, dim, start, length)
        got = _run(backend, "slice", *ops, **attrs)
        assert torch.equal(got, torch.narrow(x, dim, start, length)), (dim, start, length)
    for dim, start, length in [(1, 8, 5), (1, -11, 2), (1, 11, 0), (1, 3, -1), (1, torch.tensor([1]), 2),
                               (1, torch.tensor(1.0), 2)]:
        with pytest.raises((RuntimeError, IndexError, TypeError)):
            torch.narrow(x, dim, start, length)
        with pytest.raises(bc.InvalidProblemError, match="narrow: argument"):
            spec.dropin(x, dim, start, length)


def test_diag_writes_into_out_like_torch():
    """diag(x, out=buf) writes the result into buf and returns it (the matrix of a vector, the diagonal of a matrix),
    resizes a buffer of another shape with torch's warning, refuses another dtype, and the result has no gradient."""
    v = torch.randn(4, device=DEV, requires_grad=True)
    m = torch.randn(3, 5, device=DEV)
    for x, k, buf in [(v, 1, torch.full((5, 5), 7.0, device=DEV)), (m, -1, torch.full((2,), 7.0, device=DEV)),
                      (m, 0, torch.empty(0, device=DEV))]:
        got = bt.diag(x, k, out=buf)
        assert got is buf and torch.equal(buf, torch.diag(x.detach(), k))
        assert not buf.requires_grad
    buf = torch.zeros(2, 2, device=DEV)
    with pytest.warns(UserWarning, match="resized"):
        bt.diag(m, out=buf)
    assert torch.equal(buf, torch.diag(m))
    with pytest.raises(RuntimeError):
        torch.diag(m, out=torch.zeros(3, dtype=torch.float64, device=DEV))
    with pytest.raises(bc.InvalidProblemError, match="diag: argument 'out': expected dtype f32"):
        bt.diag(m, out=torch.zeros(3, dtype=torch.float64, device=DEV))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_roll_of_a_0d_tensor_is_the_value(backend):
    """torch.roll of a 0-d tensor returns the value for any single shift; with dims it raises (no dim to roll)."""
    x = torch.tensor(3.5, device=DEV)
    for shifts in (1, -4, 0):
        assert torch.equal(_run(backend, "roll", x, shifts=shifts), torch.roll(x, shifts))
        assert torch.equal(bt.roll(x, shifts), torch.roll(x, shifts))
    g = torch.tensor(2.0, device=DEV, requires_grad=True)
    bt.roll(g, 2).backward()
    assert g.grad.item() == 1.0
    with pytest.raises(IndexError):
        torch.roll(x, 1, 0)
    with pytest.raises(bc.InvalidProblemError, match="roll: argument 'dims': expected no dims for a 0-d tensor"):
        bt.roll(x, 1, 0)
