"""masked_fill / masked_scatter / masked_select / nonzero / argwhere / nonzero_static beyond the generic suite: the
block scan across several blocks, wrong counts and short sources (the named error, no write past the output),
nonzero_static's padding and truncation vs torch, broadcast masks, the drop-ins and the in-place forms under
bt.mode() (masked_fill_ on an attention mask, index_add_)."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing.checks import on_device as _dev, plan_or_skip as _plan

BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _run(op, *ins, backend, **attrs):
    ins = tuple(_dev(t) for t in ins)
    out = _plan(op, *ins, backend=backend, **attrs).run(*ins)
    return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_scan_spans_blocks(backend):
    """3 x 1000 elements (three 1024-element scan blocks, a block boundary inside a row): every op vs torch."""
    g = torch.Generator().manual_seed(1)
    x = torch.randn(3, 1000, generator=g)
    mask = torch.rand(3, 1000, generator=g) < 0.3
    xz = torch.where(mask, x, torch.zeros(()))
    c = int(mask.sum())
    assert torch.equal(_run("masked_select", x, mask, backend=backend, count=c), torch.masked_select(x, mask))
    assert torch.equal(_run("nonzero", xz, backend=backend, count=c), torch.nonzero(xz))
    assert torch.equal(_run("argwhere", xz, backend=backend, count=c), torch.argwhere(xz))
    got = _run("nonzero", xz, backend=backend, count=c, as_tuple=True)
    assert all(torch.equal(a, b) for a, b in zip(got, torch.nonzero(xz, as_tuple=True)))
    src = torch.randn(c + 5, generator=g)
    assert torch.equal(_run("masked_scatter", x, mask, src, backend=backend), x.masked_scatter(mask, src))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("size,fill", [(0, -1), (3, -1), (40, 5)])
def test_nonzero_static_pads_and_truncates_like_torch(backend, size, fill):
    x = torch.tensor([[0.0, 1.5, 0.0, -2.0], [3.0, 0.0, 0.0, 0.25], [0.0, 0.0, 0.0, 0.0]])
    got = _run("nonzero_static", x, backend=backend, size=size, fill_value=fill)
    assert torch.equal(got, torch.nonzero_static(x, size=size, fill_value=fill))


@pytest.mark.parametrize("backend", BACKENDS)
def test_wrong_count_raises_and_writes_only_the_output(backend):
    """A count attribute that is not the mask's: InvalidProblemError naming the op, 'count', the count found; the
    kernel writes no element past the given length (a guard element after an out= view stays)."""
    mask = torch.tensor([True, False, True, True, False, True])
    x = torch.arange(6.0)
    buf = _dev(torch.full((4,), -7.0))
    with pytest.raises(InvalidProblemError, match=r"masked_select: argument 'count': expected count=3.*got 4 True"):
        _plan("masked_select", _dev(x), _dev(mask), backend=backend, count=3).run(_dev(x), _dev(mask), out=buf[:3])
        bc.check_errors()
    assert buf.cpu()[3].item() == -7.0
    with pytest.raises(InvalidProblemError, match=r"nonzero: argument 'count': expected count=5.*got 4 True"):
        _run("nonzero", mask, backend=backend, count=5)
        bc.check_errors()


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_scatter_short_source_raises(backend):
    """More True positions than source elements: the named error (torch: 'Number of elements of source < number
    of ones in mask'); nothing is read past the source."""
    mask = torch.tensor([[True, True], [False, True]])
    with pytest.raises(InvalidProblemError, match=r"masked_scatter: argument 'source': expected at least as many "
                                                  r"elements \(2\).*got 3 True"):
        _run("masked_scatter", torch.zeros(2, 2), mask, torch.ones(2), backend=backend)
        bc.check_errors()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32, torch.int8, torch.bool])
def test_masked_fill_broadcast_mask(backend, dt):
    """An attention-style mask [2, 1, 5, 7] under [2, 3, 5, 7] scores (and a transposed input view)."""
    g = torch.Generator().manual_seed(2)
    x = (torch.randn(2, 3, 7, 5, generator=g) * 3).to(dt).transpose(2, 3)
    mask = torch.rand(2, 1, 5, 7, generator=g) < 0.5
    v = 1 if dt == torch.bool else -100        # (the Plan API takes a number: 1 is True for bool)
    assert torch.equal(_run("masked_fill", x, mask, backend=backend, value=v), x.masked_fill(mask, v))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", ["mask_bcast_heads", "mask_bcast_row", "x_bcast", "x_strided_inner"])
def test_masked_fill_long_rows(backend, case):
    """Rows of >= 4096 contiguous elements take the Triton plan's row kernel (the outer index unravelled once per
    program; each operand's row contiguous or broadcast); a row that is strided in x takes the flat kernel."""
    g = torch.Generator().manual_seed(4)
    L = 4100                                   # two row blocks, the second partial
    x = torch.randn(2, 3, L, generator=g).to(torch.bfloat16)
    mask = torch.rand(2, 1, L, generator=g) < 0.5
    if case == "mask_bcast_row":               # one flag per row, broadcast along it (MI = 0)
        mask = torch.rand(2, 3, 1, generator=g) < 0.5
    elif case == "x_bcast":                    # x broadcast over the outer dims (outer stride 0)
        x = torch.randn(1, 1, L, generator=g).to(torch.bfloat16).expand(2, 3, L)
    elif case == "x_strided_inner":            # every other element of a wider row: no contiguous run
        x = torch.randn(2, 3, 2 * L, generator=g).to(torch.bfloat16)[..., ::2]
    got = _run("masked_fill", x, mask, backend=backend, value=-7.5)
    assert torch.equal(got, x.masked_fill(mask, -7.5))
    if backend == Backend.TRITON:       # several steps per program, the last one partial
        from baracuda.backends.triton.indexing_index.masked import forced

        with forced(block=1024, iters=3):
            assert torch.equal(_run("masked_fill", x, mask, backend=backend, value=-7.5), x.masked_fill(mask, -7.5))


def test_drop_ins_match_torch():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(4, 6, generator=g)
    mask = torch.rand(4, 6, generator=g) < 0.4
    xz = x.masked_fill(~mask, 0)
    assert torch.equal(bt.masked_select(x, mask), torch.masked_select(x, mask))
    assert torch.equal(bt.nonzero(xz), torch.nonzero(xz))
    for a, b in zip(bt.nonzero(xz, as_tuple=True), torch.nonzero(xz, as_tuple=True)):
        assert torch.equal(a, b)
    assert torch.equal(bt.argwhere(xz), torch.argwhere(xz))
    assert torch.equal(bt.nonzero_static(xz, size=30), torch.nonzero_static(xz, size=30))
    v = torch.tensor(2.5, requires_grad=True)
    xx = x.clone().requires_grad_(True)
    y = bt.masked_fill(xx, mask, v)
    y.sum().backward()
    assert torch.equal(y.detach(), x.masked_fill(mask, 2.5))
    assert v.grad.item() == mask.sum().item() and torch.equal(xx.grad, (~mask).to(x.dtype))


def test_in_place_forms_route_under_mode():
    """masked_fill_ (HF attention masks), index_add_, index_fill_, index_copy_ and masked_scatter_ run through
    baracuda under bt.mode() and write into the tensor itself."""
    g = torch.Generator().manual_seed(4)
    scores = torch.randn(2, 3, 4, 4, generator=g)
    mask = torch.rand(2, 1, 4, 4, generator=g) < 0.5
    want = scores.masked_fill(mask, -1e4)
    x = torch.randn(5, 3, generator=g)
    idx, src = torch.tensor([4, 0, 4]), torch.randn(3, 3, generator=g)
    want_add = x.index_add(0, idx, src, alpha=2)
    want_fill = want_add.index_fill(1, torch.tensor([2]), 0.5)
    with bt.mode() as m:
        s = scores.clone()
        ptr = s.data_ptr()
        r = s.masked_fill_(mask, -1e4)
        xa = x.clone()
        xa.index_add_(0, idx, src, alpha=2)
        xa.index_fill_(1, torch.tensor([2]), 0.5)
    assert r is s and s.data_ptr() == ptr and torch.equal(s, want)
    assert torch.allclose(xa, want_fill, rtol=1e-6, atol=1e-6)
    for name in ("Tensor.masked_fill_", "Tensor.index_add_", "Tensor.index_fill_"):
        assert m.routed[name] == 1, (name, m.routed)
