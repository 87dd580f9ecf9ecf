"""searchsorted / bucketize / isin beyond the generic suite: torch's NaN behaviour, many blocks and long
sequences vs torch, the sorter (and a sorter index out of range: the named error, no read out of bounds), the
drop-ins' promotion and scalar forms."""
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
    return _plan(op, *ins, backend=backend, **attrs).run(*ins).cpu()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("right", [False, True])
def test_searchsorted_spans_blocks_and_matches_torch(backend, right):
    """2 rows of 300 boundaries with repeats, 2 x 1500 queries (two 1024-query blocks), some exactly on a
    boundary, some outside the range."""
    g = torch.Generator().manual_seed(3)
    seq = torch.randint(-50, 50, (2, 300), generator=g).float().sort(dim=-1).values
    q = torch.randint(-60, 60, (2, 1500), generator=g).float()
    got = _run("searchsorted", seq, q, backend=backend, right=right)
    assert torch.equal(got, torch.searchsorted(seq, q, right=right))


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_queries_and_nan_boundaries_follow_torch(backend):
    seq = torch.tensor([-1.0, 0.0, 2.0, float("nan"), float("nan")])
    q = torch.tensor([float("nan"), -2.0, 2.0, 3.0, float("inf")])
    for right in (False, True):
        got = _run("searchsorted", seq, q, backend=backend, right=right)
        assert torch.equal(got, torch.searchsorted(seq, q, right=right)), right


@pytest.mark.parametrize("backend", BACKENDS)
def test_bad_sorter_raises_naming_the_value(backend):
    seq = torch.tensor([3.0, 1.0, 2.0])
    sorter = torch.tensor([1, 7, 0])
    with pytest.raises(InvalidProblemError, match=r"searchsorted: argument 'sorter': expected indices in \[0, 3\).*7"):
        _run("searchsorted", seq, torch.tensor([1.5, 2.5]), sorter, backend=backend)
        bc.check_errors()


@pytest.mark.parametrize("backend", BACKENDS)
def test_isin_many_test_elements_and_invert(backend):
    g = torch.Generator().manual_seed(4)
    x = torch.randint(0, 400, (3, 250), generator=g)
    t = torch.randint(0, 400, (150,), generator=g)          # 3 chunks of 64 test elements
    for inv in (False, True):
        assert torch.equal(_run("isin", x, t, backend=backend, invert=inv), torch.isin(x, t, invert=inv))
    nan = torch.tensor([float("nan"), 1.0])
    assert torch.equal(_run("isin", nan, nan, backend=backend), torch.isin(nan, nan))    # NaN is in nothing


def test_dropins_promote_and_take_scalars_like_torch():
    seq = torch.tensor([1, 3, 5, 7])
    assert torch.equal(bt.searchsorted(seq, 4), torch.searchsorted(seq, 4))
    q = torch.tensor([[2.5, 3.0, 9.0]])
    assert torch.equal(bt.searchsorted(seq, q, side="right"), torch.searchsorted(seq, q, side="right"))
    out = bt.searchsorted(seq, q, out_int32=True)
    assert out.dtype == torch.int32 and torch.equal(out, torch.searchsorted(seq, q, out_int32=True))
    assert torch.equal(bt.bucketize(3, seq), torch.bucketize(3, seq))
    assert torch.equal(bt.bucketize(q, seq, right=True), torch.bucketize(q, seq, right=True))
    assert torch.equal(bt.isin(seq, 3), torch.isin(seq, 3)) and torch.equal(bt.isin(5, seq), torch.isin(5, seq))
    assert torch.equal(bt.isin(seq, q), torch.isin(seq, q))
