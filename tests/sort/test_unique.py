"""unique / unique_consecutive / mode beyond the generic suite: the block scan across blocks vs torch, slices along
a dim, the one-program unique at its size limit and the global-sort path past it, mode's tie rule and index, the
drop-ins' result shapes after the host read of the distinct count, Tensor.unique under bt.mode()."""
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


def test_triton_unique_takes_long_inputs_and_says_so():
    from baracuda._core.spec import Descriptor
    from baracuda.testing import forced_plan
    from baracuda.testing.checks import DEVICE

    plan = forced_plan(Descriptor.like("unique", torch.zeros(4097, dtype=torch.int64)), DEVICE, Backend.TRITON)
    assert not isinstance(plan, str), plan
    assert "sort" in str(plan.sku)


# the sort family's two long-row paths, forced at small sizes: 8-element register blocks + merge passes over 64-element
# tiles, or radix passes over 32-element blocks (the interpreter runs its bitonic ranking slowly: a few dtypes only)
SORTS = {"merge": dict(nmax=8, tile=64, radix=False), "radix": dict(radix=True, nmax=8, radix_block=32)}


@pytest.mark.parametrize("dtype, sort", [(dt, "merge") for dt in (torch.int64, torch.int32, torch.float32,
                                                                   torch.bfloat16, torch.bool)] +
                         [(dt, "radix") for dt in (torch.float32, torch.bfloat16, torch.bool)], ids=str)
def test_unique_past_one_program_sorts_globally_like_torch(dtype, sort):
    """Past the one-program limit: the sort family's global sort, then the runs of the sorted values, the inverse
    scattered through the sort's positions.  The limits are forced small (16 elements in one program; the sort's
    paths as SORTS), so 300 elements take several merge or radix passes and scan blocks under the interpreter; ties,
    -0.0 beside +0.0 and (floats) NaNs, each NaN its own value as torch's.
    torch's CPU sort is not stable: which zero's sign and which NaN run a NaN element gets may differ from it."""
    from baracuda.backends.triton.search import unique as U
    from baracuda.backends.triton.sort import rows as S

    g = torch.Generator().manual_seed(10)
    x = torch.randint(-40, 40, (300,), generator=g).to(dtype)
    if dtype.is_floating_point:
        x[::37] = float("nan")
        x[5], x[6] = -0.0, 0.0
    with U.forced(small=16), S.forced(**SORTS[sort]):
        got = _trim(_run("unique", x, Backend.TRITON))
    want = torch.unique(x, return_inverse=True, return_counts=True)
    (v, inv, cnt), (wv, winv, wcnt) = got, want
    assert v.shape == wv.shape and torch.equal(v.isnan(), wv.isnan())
    assert torch.equal(v[~v.isnan()], wv[~wv.isnan()]) and torch.equal(cnt, wcnt)
    if dtype.is_floating_point:     # -0.0 and +0.0 are one value: ours is the first in input order (a stable sort)
        assert v[v == 0].signbit().item() == x[x == 0][0].signbit().item()
    nan = x.isnan()
    assert torch.equal(inv[~nan], winv[~nan])
    # each NaN is its own value, as torch's; which NaN run a NaN element takes is torch's sort's business (its CPU
    # sort is not stable): ours keep input order, the same set of runs
    assert torch.equal(inv[nan].sort().values, winv[nan].sort().values)
    assert torch.equal(inv[nan], inv[nan].sort().values)


@pytest.mark.parametrize("backend, dim, dtype, sort", [
    (b, dim, dt, "merge") for b in BACKENDS for dim in (0, 1, -1) for dt in (torch.int64, torch.float32, torch.bool)] +
    [(Backend.TRITON, 1, torch.float32, "radix"), (Backend.TRITON, 0, torch.bool, "radix")], ids=str)
def test_unique_along_a_dim_sorts_slices_lexicographically(backend, dim, dtype, sort):
    """Distinct slices along ``dim`` in lexicographic order, each slice's index among them and their counts, as
    torch's: repeated slices, slices equal but for their last or first element (the order is decided by every
    element), -0.0 beside +0.0; on Triton one stable sort per slice element, the last first.  The sort's register
    blocks are forced small (8 positions) so 40 slices take its merge or radix passes (SORTS) under the interpreter."""
    from baracuda.backends.triton.sort import rows as S

    g = torch.Generator().manual_seed(11)
    base = torch.randint(0, 3 if dtype != torch.bool else 2, (40, 3, 2), generator=g)
    base[5] = base[7]
    base[9], base[10] = base[11].clone(), base[11].clone()
    base[9, -1, -1] += 1
    base[10, 0, 0] += 1
    x = base.to(dtype) if dtype != torch.float32 else base.to(dtype) - 1.0
    if dtype == torch.float32:
        x[3] = torch.where(x[4] == 0, -0.0, x[4])       # x[4] with -0.0 for its zeros: the same slice
    x = x.movedim(0, dim)
    with S.forced(**SORTS[sort]):
        got = _trim(_run("unique", x, backend, dim=dim), dim)
    want = torch.unique(x, return_inverse=True, return_counts=True, dim=dim)
    for a, b in zip(got, want):
        assert a.shape == b.shape and torch.equal(a, b), (a, b)


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
