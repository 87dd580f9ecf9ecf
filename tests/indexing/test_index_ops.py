"""index_select / index_add / index_copy / index_fill / index_reduce beyond the generic suite: out-of-range indices
(the named error, nothing written outside the touched rows), the deterministic index_add selected by
PlanPreference(require_deterministic=True), repeated indices, strided operands and int32 indices against torch,
and the gradients of index_reduce at ties and zeros against torch.autograd."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, on_device as _dev, plan_or_skip as _plan

BACKENDS = (Backend.REFERENCE, Backend.TRITON)
# sums in f32 (the atomic or the sorted fold) against torch's on the CPU: a few ulps of rows of ~4 terms
F32 = (1e-5, 1e-5)


def _x(g, *shape, dt=torch.float32):
    return torch.randn(*shape, generator=g).to(dt)


def _ops(op, x, idx, src):
    attrs = {"index_fill": {"value": 9.0}, "index_reduce": {"reduce": "amax"}, "index_add": {"alpha": 2}}.get(op, {})
    ins = (x, idx) if op in ("index_select", "index_fill") else (x, idx, src)
    return ins, attrs


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["index_select", "index_add", "index_copy", "index_fill", "index_reduce"])
@pytest.mark.parametrize("bad", [5, -6, 1 << 40])
def test_out_of_range_index_raises_and_writes_nothing_outside(backend, op, bad):
    """An index outside the op's range: InvalidProblemError naming the op, 'index', the value and the range; the
    rows the valid indices do not name keep the input (the out= buffer is checked after the error)."""
    g = torch.Generator().manual_seed(1)
    x = _x(g, 5, 3)
    idx = torch.tensor([1, bad, 3])
    ins, attrs = _ops(op, x, idx, _x(g, 3, 3))
    ins = tuple(_dev(t) for t in ins)
    p = _plan(op, *ins, backend=backend, dim=0, **attrs)
    out = _dev(torch.full(p.desc.outputs[0].shape, 7.0))
    rng = "[-5, 5)" if op == "index_fill" else "[0, 5)"
    with pytest.raises(InvalidProblemError, match=rf"{op}: argument 'index': expected indices in \{rng[:-1]}\).*"
                                                   rf"got index {bad}"):
        p.run(*ins, out=out)
        bc.check_errors()
    if backend == Backend.TRITON and op != "index_select":
        untouched = [0, 2, 4]                     # rows no valid index names: the input's values
        assert torch.equal(out.cpu()[untouched], x[untouched])


@pytest.mark.parametrize("backend", BACKENDS)
def test_negative_index_wraps_only_where_torch_does(backend):
    """index_fill wraps -1 to the last row (torch); index_select refuses it (torch: 'index out of range')."""
    x = torch.arange(12.0).reshape(4, 3)
    idx = torch.tensor([-1, 0])
    got = _plan("index_fill", _dev(x), _dev(idx), backend=backend, dim=0, value=-2.0).run(_dev(x), _dev(idx))
    assert torch.equal(got.cpu(), torch.index_fill(x, 0, idx, -2.0))
    with pytest.raises(InvalidProblemError, match=r"got index -1"):
        _plan("index_select", _dev(x), _dev(idx), backend=backend, dim=0).run(_dev(x), _dev(idx))
        bc.check_errors()


def test_index_add_deterministic_variant_is_selected_and_bit_stable():
    """Float index_add: the atomic kernel by default (precision says nondeterministic); under
    require_deterministic the sorted-segment kernel (deterministic; the same bits on every run), both vs torch."""
    g = torch.Generator().manual_seed(2)
    x, src = _x(g, 6, 40), _x(g, 50, 40)
    idx = torch.randint(0, 6, (50,), generator=g)
    ins = (_dev(x), _dev(idx), _dev(src))
    d = bc.Descriptor.like("index_add", *ins, dim=0, alpha=0.5)
    fast = bc.Plan.select(d, DEVICE, bc.PlanPreference(prefer=(Backend.TRITON,)))
    det = bc.Plan.select(d, DEVICE, bc.PlanPreference(prefer=(Backend.TRITON,), require_deterministic=True))
    assert fast.sku.route == "triton:index_add:atomic" and not fast.precision.deterministic
    assert det.sku.route == "triton:index_add:sorted-segments" and det.precision.deterministic
    want = torch.index_add(x.double(), 0, idx, src.double(), alpha=0.5)
    for p in (fast, det):
        assert_close(p.run(*ins).cpu(), want.numpy(), *F32, p.sku.route)
    a, b = det.run(*ins), det.run(*ins)
    assert torch.equal(a, b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_copy_repeated_indices_last_wins(backend):
    """Repeated indices: the last source row wins (torch on the CPU; torch's CUDA kernel leaves it unspecified)."""
    g = torch.Generator().manual_seed(3)
    x, src = _x(g, 4, 5), _x(g, 5, 5)
    idx = torch.tensor([2, 0, 2, 3, 2])
    got = _plan("index_copy", _dev(x), _dev(idx), _dev(src), backend=backend, dim=0).run(_dev(x), _dev(idx), _dev(src))
    assert torch.equal(got.cpu(), torch.index_copy(x, 0, idx, src))
    assert torch.equal(got.cpu()[2], src[4])


@pytest.mark.parametrize("op", ["index_select", "index_add", "index_reduce"])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.int32])
def test_strided_operands_and_int32_index_on_triton(op, dt):
    """Transposed input and source views, an int32 index with a stride, dim 1 of a 3-d tensor: vs torch."""
    g = torch.Generator().manual_seed(4)
    x = (_x(g, 5, 7, 3) * 4).to(dt).transpose(0, 2)                     # (3, 7, 5), strided
    idx = torch.randint(0, 7, (12,), generator=g).to(torch.int32)[::2]  # 6 indices, stride 2
    src = (_x(g, 5, 6, 3) * 4).to(dt).transpose(0, 2)                   # (3, 6, 5)
    attrs = {"index_reduce": {"reduce": "amin", "include_self": False}}.get(op, {})
    ins = (x, idx) if op == "index_select" else (x, idx, src)
    got = _plan(op, *map(_dev, ins), backend=Backend.TRITON, dim=1, **attrs).run(*map(_dev, ins)).cpu()
    i64 = idx.long()
    want = {"index_select": lambda: torch.index_select(x, 1, i64),
            "index_add": lambda: torch.index_add(x.double(), 1, i64, src.double()).to(dt),
            "index_reduce": lambda: torch.index_reduce(x, 1, i64, src, "amin", include_self=False)}[op]()
    tol = (0.0, 0.0) if op != "index_add" or dt == torch.int32 else F32 if dt == torch.float32 else (1.6e-2, 1e-2)
    assert_close(got, want.double().numpy() if dt.is_floating_point else want.numpy(), *tol, op)


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_index(backend):
    x = torch.randn(4, 3)
    idx = torch.zeros(0, dtype=torch.int64)
    assert _plan("index_select", _dev(x), _dev(idx), backend=backend, dim=0).run(_dev(x), _dev(idx)).shape == (0, 3)
    src = torch.zeros(0, 3)
    got = _plan("index_add", _dev(x), _dev(idx), _dev(src), backend=backend, dim=0).run(_dev(x), _dev(idx), _dev(src))
    assert torch.equal(got.cpu(), x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("reduce", ["amax", "amin", "prod", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_gradient_at_ties_and_zeros(backend, reduce, include_self):
    """Ties share the amax/amin gradient evenly (the input's own value counted, as torch) and a zero in a product
    gets the product of the others (two zeros: 0): torch's autograd rules, in f64 (index_reduce_backward on
    ``backend``)."""
    x = torch.tensor([[1.0, 0.0, 2.0], [3.0, 3.0, -1.0], [0.5, 2.0, 2.0]], dtype=torch.float64)
    src = torch.tensor([[3.0, 0.0, 2.0], [1.0, 5.0, 2.0], [3.0, 0.0, 0.0], [0.0, 3.0, -1.0]], dtype=torch.float64)
    idx = torch.tensor([1, 0, 1, 1])
    gout = torch.linspace(-1, 2, 9, dtype=torch.float64).reshape(3, 3)
    xx, ss = x.clone().requires_grad_(True), src.clone().requires_grad_(True)
    y = torch.index_reduce(xx, 0, idx, ss, reduce, include_self=include_self)
    wx, ws = torch.autograd.grad(y, (xx, ss), gout)
    d = bc.Descriptor.like("index_reduce", x, idx, src, dim=0, reduce=reduce, include_self=include_self)
    bw = bc.BackwardPlan.select(d, DEVICE, bc.PlanPreference(prefer=(backend,)))
    gx, _, gs = bw.run(_dev(gout), input=_dev(x), index=_dev(idx), source=_dev(src), out=_dev(y.detach()))
    assert_close(torch.as_tensor(gx).cpu(), wx.numpy(), 1e-12, 1e-12, "grad input")
    assert_close(torch.as_tensor(gs).cpu(), ws.numpy(), 1e-12, 1e-12, "grad source")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["index_put", "advanced_index"])
def test_index_put_out_of_range_names_the_index_tensor(backend, op):
    """index_put / advanced_index: an out-of-range entry of indices[1] raises naming 'indices[1]', the value and
    the wrapped range; index_put leaves every row the valid pairs do not name unchanged."""
    x = torch.arange(20.0).reshape(4, 5)
    i0, i1 = torch.tensor([0, 3, -1]), torch.tensor([1, 9, 2])
    vals = torch.tensor([-1.0, -2.0, -3.0])
    ins = (x, vals, i0, i1) if op == "index_put" else (x, i0, i1)
    ins = tuple(_dev(t) for t in ins)
    p = _plan(op, *ins, backend=backend)
    out = _dev(torch.full(p.desc.outputs[0].shape, 7.0))
    with pytest.raises(InvalidProblemError, match=rf"{op}: argument 'indices\[1\]': expected indices in \[-5, 5\).*"
                                                  r"got index 9"):
        p.run(*ins, out=out)
        bc.check_errors()
    if backend == Backend.TRITON and op == "index_put":
        want = x.clone()
        want[0, 1], want[3, 2] = -1.0, -3.0
        assert torch.equal(out.cpu(), want)


def test_index_put_drop_in_bool_mask_and_accumulate():
    """A bool mask index becomes its nonzero() coordinates (as torch); accumulate sums repeated indices."""
    import baracuda.torch as bt

    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 3, generator=g)
    mask = torch.tensor([True, False, True, True])
    assert torch.equal(bt.index_put(x, (mask,), torch.tensor(2.0)), torch.index_put(x, (mask,), torch.tensor(2.0)))
    idx, v = torch.tensor([1, 1, 3]), torch.randn(3, 3, generator=g)
    assert torch.allclose(bt.index_put(x, (idx,), v, accumulate=True), torch.index_put(x, (idx,), v, accumulate=True))
