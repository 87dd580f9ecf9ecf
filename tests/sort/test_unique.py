"""unique / unique_consecutive / mode beyond the generic suite: the block scan across blocks vs torch, slices along
a dim, the one-program unique at its size limit and the refusal past it, mode's tie rule and index, the drop-ins'
result shapes after the host read of the distinct count, Tensor.unique under bt.mode()."""
from __future__ import annotations

import pytest
import torch

import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.testing.checks import on_device as _dev, plan_or_skip as _plan

BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _run(op, x, backend, **attrs):
    out = _plan(op, _dev(x), backend=backend, **attrs).run(_dev(x))
    return tuple(o.cpu() for o in out)


def _trim(out, dim=None):
    vals, inv, counts, num = out
    k = int(num)
    return (vals[:k] if dim is None else vals.narrow(dim, 0, k)), inv, counts[:k]


@pytest.mark.parametrize("backend", BACKENDS)
def test_unique_consecutive_spans_blocks_like_torch(backend):
    """3000 elements in runs (three 1024-element scan blocks, runs across block boundaries)."""
    g = torch.Generator().manual_seed(8)
    x = torch.randint(0, 4, (1000,), generator=g).repeat_interleave(3).reshape(30, 100)
    got = _trim(_run("unique_consecutive", x, backend))
    want = torch.unique_consecutive(x, return_inverse=True, return_counts=True)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dim", [0, 1])
def test_unique_consecutive_along_a_dim(backend, dim):
    x = torch.tensor([[1, 1, 2, 2, 2], [0, 0, 5, 5, 1], [0, 0, 5, 5, 1], [3, 3, 3, 0, 0]])
    got = _trim(_run("unique_consecutive", x, backend, dim=dim), dim)
    want = torch.unique_consecutive(x, return_inverse=True, return_counts=True, dim=dim)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.int64, torch.float16, torch.bool])
def test_unique_at_the_one_program_limit(backend, dtype):
    """4096 elements: the largest input one program sorts (the padding lanes hold the dtype's largest value)."""
    g = torch.Generator().manual_seed(9)
    x = torch.randint(0, 2 if dtype == torch.bool else 300, (4096,), generator=g).to(dtype)
    got = _trim(_run("unique", x, backend))
    want = torch.unique(x, return_inverse=True, return_counts=True)
    assert all(torch.equal(a, b) for a, b in zip(got, want))


def test_triton_unique_says_why_it_refuses_long_inputs():
    from baracuda._core.spec import Descriptor
    from baracuda.testing import forced_plan
    from baracuda.testing.checks import DEVICE

    why = forced_plan(Descriptor.like("unique", torch.zeros(4097, dtype=torch.int64)), DEVICE, Backend.TRITON)
    assert isinstance(why, str) and "global sort" in why, why


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_smallest_most_frequent_value_and_its_last_index(backend):
    x = torch.tensor([[3.0, 1.0, 1.0, 2.0, 3.0, 0.0, 3.0, 1.0],      # 1 and 3 three times: 1, last at 7
                      [5.0, 4.0, 4.0, 5.0, 6.0, 6.0, 9.0, 9.0],      # four pairs: 4, last at 2
                      [7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0]])
    vals, idx = _run("mode", x, backend, dim=1)
    assert vals.tolist() == [1.0, 4.0, 7.0] and idx.tolist() == [7, 2, 7]
    want = torch.mode(x, 1)           # torch agrees on rows this short (its sort keeps the order of equal values)
    assert torch.equal(vals, want.values) and torch.equal(idx, want.indices)


@pytest.mark.parametrize("backend", BACKENDS)
def test_mode_long_rows_values_match_torch(backend):
    """200 rows of 300 (five 64-element tiles a row); the index: the last position of the mode (torch's own index
    is one of its positions, which one depending on its unstable sort)."""
    g = torch.Generator().manual_seed(10)
    x = torch.randint(0, 20, (3, 300), generator=g).to(torch.int32)
    vals, idx = _run("mode", x, backend, dim=-1)
    assert torch.equal(vals, torch.mode(x, -1).values)
    pos = torch.arange(300).expand(3, 300)
    assert torch.equal(idx, torch.where(x == vals[:, None], pos, -1).amax(1))


def test_dropins_return_torch_shapes():
    x = torch.tensor([[3, 1, 2], [1, 3, 3]])
    assert torch.equal(bt.unique(x), torch.unique(x))
    for ri in (False, True):
        for rc in (False, True):
            got, want = bt.unique(x, return_inverse=ri, return_counts=rc), torch.unique(x, return_inverse=ri,
                                                                                         return_counts=rc)
            got, want = (got, want) if isinstance(want, tuple) else ((got,), (want,))
            assert len(got) == len(want) and all(torch.equal(a, b) for a, b in zip(got, want)), (ri, rc)
    got = bt.unique_consecutive(x, return_counts=True, dim=1)
    want = torch.unique_consecutive(x, return_counts=True, dim=1)
    assert all(torch.equal(a, b) for a, b in zip(got, want))
    with bt.mode() as m:
        got = x.unique(return_counts=True)
    assert all(torch.equal(a, b) for a, b in zip(got, torch.unique(x, return_counts=True)))
    assert m.routed == {"Tensor.unique": 1}
