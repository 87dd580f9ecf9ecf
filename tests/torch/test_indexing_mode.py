"""``x[key]`` / ``x[key] = v`` with tensor, list and mask indices under ``bt.mode()`` (torch/_indexing.py): the
same values, shapes, contiguity and gradients as torch's indexing, in every placement rule (adjacent advanced dims
in place, separated ones in front, ints as selects, None / Ellipsis / slices around them); basic keys stay torch's
views (not routed)."""
import pytest

torch = pytest.importorskip("torch")

import baracuda.torch as bt  # noqa: E402

F64 = dict(dtype=torch.float64)
X = torch.randn(3, 4, 5, 6, generator=torch.Generator().manual_seed(0), **F64)
I = torch.tensor([2, 0, -1])
J = torch.tensor([[1], [3]])
M = torch.rand(4, 5, generator=torch.Generator().manual_seed(1)) > 0.5
KEYS = {
    "one-tensor": (I,), "second-dim": (slice(None), I), "adjacent-pair-broadcast": (slice(None), I, J),
    "separated-to-front": (I, slice(None), J), "int-is-a-select": (0, slice(None), I), "ellipsis": (Ellipsis, I),
    "none-and-slice": (None, slice(1, 3), I), "2d-mask": (slice(None), M), "1d-mask": (torch.tensor([True, False, True]),),
    "list": ([0, 2],), "repeated-list-then-int": (slice(None), [1, 1], 2), "separated-with-int": (I, slice(None), J, 0),
    "int32-index": (slice(None), I.to(torch.int32)),
}


@pytest.mark.parametrize("name", list(KEYS))
def test_getitem_matches_torch(name):
    key = KEYS[name]
    ref = X[key]
    with bt.mode(coverage=True) as m:
        got = X[key]
    assert got.shape == ref.shape and torch.equal(got, ref)
    assert got.is_contiguous() == ref.is_contiguous()
    assert m.routed == {"Tensor.__getitem__": 1} and not m.fell_through, m.summary()


@pytest.mark.parametrize("name", list(KEYS))
def test_setitem_matches_torch(name):
    key = KEYS[name]
    v = torch.randn(X[key].shape, generator=torch.Generator().manual_seed(2), **F64)
    want, got = X.clone(), X.clone()
    want[key] = v
    with bt.mode() as m:
        got[key] = v
    assert torch.equal(got, want)
    assert m.routed == {"Tensor.__setitem__": 1}


def test_setitem_scalar_and_broadcast_values():
    want, got = X.clone(), X.clone()
    want[:, I] = 0.5
    want[I, :, J] = torch.arange(6, dtype=torch.float64)
    with bt.mode():
        got[:, I] = 0.5
        got[I, :, J] = torch.arange(6, dtype=torch.float64)
    assert torch.equal(got, want)


@pytest.mark.parametrize("name", ["adjacent-pair-broadcast", "separated-to-front", "2d-mask", "repeated-list-then-int"])
def test_gradients_match_torch(name):
    """Float64 autograd through the routed gather (repeated indices accumulate) and through a routed write."""
    key = KEYS[name]
    w = torch.randn(X[key].shape, generator=torch.Generator().manual_seed(3), **F64)
    a, b = X.clone().requires_grad_(), X.clone().requires_grad_()
    (a[key] * w).sum().backward()
    with bt.mode():
        (b[key] * w).sum().backward()
    torch.testing.assert_close(b.grad, a.grad, rtol=0, atol=0)
    # a write into a non-leaf: the overwritten entries get no gradient, the values get theirs
    v1, v2 = w.clone().requires_grad_(), w.clone().requires_grad_()
    a2, b2 = X.clone().requires_grad_(), X.clone().requires_grad_()
    ya, yb = a2 * 2, b2 * 2
    ya[key] = v1 * 3
    with bt.mode():
        yb[key] = v2 * 3
    ya.sum().backward()
    yb.sum().backward()
    torch.testing.assert_close(b2.grad, a2.grad, rtol=0, atol=0)
    torch.testing.assert_close(v2.grad, v1.grad, rtol=0, atol=0)


def test_basic_keys_stay_torch_views():
    with bt.mode(coverage=True) as m:
        v = X[1:, None, ..., 2]
        s = X[torch.tensor(1)]
    assert v._base is X and s._base is X
    assert not m.routed and not m.fell_through


def test_out_of_range_index_is_an_error():
    with bt.mode():
        with pytest.raises((IndexError, ValueError)):
            X[:, torch.tensor([4])]
