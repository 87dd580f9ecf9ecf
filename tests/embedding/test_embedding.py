"""Embedding-family checks the generic suite does not make: out-of-range token ids and bad offsets raise the named
error and never touch memory outside the rows; the deterministic backward is what require_deterministic selects
(and says so) and agrees with the atomic one; torch's gradient conventions (padding_idx, scale_grad_by_freq,
max_norm, the bags' per_sample_weights and max) through the drop-ins and autograd; max_norm's in-place write-back."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.testing import backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, assert_same, run_on  # noqa: E402

F = torch.nn.functional
BF = bt.nn.functional
BACKENDS = backends_for("embedding", DEVICE)


def _pref(backend, **kw):
    return bc.PlanPreference(prefer=(backend,), **kw)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("bad", [7, 100, -1])
def test_out_of_range_token_raises_named_error_and_touches_nothing_else(backend, bad):
    g = torch.Generator().manual_seed(0)
    w = torch.randn(7, 5, generator=g)
    ids = torch.tensor([[1, 3], [bad, 6]])
    with pytest.raises(bc.InvalidProblemError, match=rf"embedding: argument 'input': expected indices in \[0, 7\), "
                                                     rf"got index {bad}"):
        run_on("embedding", ids, w, backend=backend)
        bc.check_errors()       # (on the GPU the value check is deferred by default)
    # with the check off the kernel still never reads out of bounds: good rows exact, the bad row zero, the
    # caller's out= buffer written only where the output lies
    if backend == Backend.TRITON:
        plan = forced_plan(bc.Descriptor.like("embedding", ids, w), DEVICE, backend, check_values="off")
        out = torch.full((2, 2, 5), 9.0, device=TDEV)
        plan.run(ids.to(TDEV), w.to(TDEV), out=out)
        assert_same(out[0].cpu(), w[ids[0]])
        assert_same(out[1, 1].cpu(), w[6])
        assert_same(out[1, 0].cpu(), torch.zeros(5))
    with pytest.raises(bc.InvalidProblemError, match=rf"embedding_backward: argument 'indices'.*got index {bad}"):
        run_on("embedding_backward", torch.randn(2, 2, 5), ids, backend=backend, num_weights=7)
        bc.check_errors()


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bag_bad_offsets_and_ids_raise(backend):
    w = torch.randn(6, 3)
    with pytest.raises(bc.InvalidProblemError, match=r"embedding_bag: argument 'offsets'"):
        run_on("embedding_bag", torch.tensor([1, 2, 3]), w, torch.tensor([1, 2]), backend=backend, mode="sum")
        bc.check_errors()
    with pytest.raises(bc.InvalidProblemError, match=r"embedding_bag: argument 'offsets'"):
        run_on("embedding_bag", torch.tensor([1, 2, 3]), w, torch.tensor([0, 2, 1]), backend=backend, mode="sum")
        bc.check_errors()
    with pytest.raises(bc.InvalidProblemError, match=r"embedding_bag: argument 'input'.*got index 6"):
        run_on("embedding_bag", torch.tensor([1, 6, 3]), w, torch.tensor([0, 2]), backend=backend, mode="max")
        bc.check_errors()


@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("freq", [False, True])
def test_deterministic_backward_is_selected_by_preference_and_agrees(dt, freq):
    if Backend.TRITON not in backends_for("embedding_backward", DEVICE):
        pytest.skip("no Triton backend here")
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 9, (40,), generator=g)
    ids[:12] = 4                                      # a hot row
    grad = torch.randn(40, 6, generator=g).to(dt)
    desc = bc.Descriptor.like("embedding_backward", grad, ids, num_weights=9, padding_idx=2, scale_grad_by_freq=freq)
    det = forced_plan(desc, DEVICE, Backend.TRITON, require_deterministic=True)
    dflt = forced_plan(desc, DEVICE, Backend.TRITON)
    assert det.precision.deterministic and "deterministic" in det.sku.route
    atomic = dt in (torch.float32, torch.float64) and not freq
    assert dflt.precision.deterministic is (not atomic)
    assert ("atomic" in dflt.sku.route) is atomic
    want = torch.ops.aten.embedding_dense_backward(grad.double(), ids, 9, 2, freq)
    tol = 1e-2 if dt == torch.bfloat16 else 1e-5
    a = det.run(grad.to(TDEV), ids.to(TDEV))
    assert_same(a.cpu().double(), want, rtol=tol, atol=tol)
    assert_same(dflt.run(grad.to(TDEV), ids.to(TDEV)).cpu().double(), want, rtol=tol, atol=tol)
    assert torch.equal(det.run(grad.to(TDEV), ids.to(TDEV)), a)      # bit-stable
    assert (a[2] == 0).all()


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("kw", [{}, {"padding_idx": 1}, {"padding_idx": -2, "scale_grad_by_freq": True},
                                {"scale_grad_by_freq": True}])
def test_embedding_dropin_values_and_grad_like_torch(backend, kw):
    g = torch.Generator().manual_seed(2)
    w = torch.randn(6, 4, dtype=torch.float64, generator=g)
    ids = torch.tensor([[1, 4, 1], [5, 1, 0]])
    go = torch.randn(2, 3, 4, dtype=torch.float64, generator=g)
    a, b = w.clone().to(TDEV).requires_grad_(), w.clone().requires_grad_()
    with bt.preference(_pref(backend)):
        ours = BF.embedding(ids.to(TDEV), a, **kw)
        ours.backward(go.to(TDEV))
    ref = F.embedding(ids, b, **kw)
    ref.backward(go)
    assert_same(ours.detach().cpu(), ref.detach())
    assert_same(a.grad.cpu(), b.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("norm_type", [2.0, 1.0, 3.0])
def test_max_norm_renormalises_weight_in_place_like_torch(backend, norm_type):
    g = torch.Generator().manual_seed(3)
    w = 3 * torch.randn(8, 5, generator=g)
    ids = torch.tensor([1, 3, 3, 6])
    ours_w, ref_w = w.clone().to(TDEV), w.clone()
    with bt.preference(_pref(backend)):
        ours = BF.embedding(ids.to(TDEV), ours_w, max_norm=1.5, norm_type=norm_type)
    ref = F.embedding(ids, ref_w, max_norm=1.5, norm_type=norm_type)
    assert_same(ours.cpu(), ref, rtol=1e-6, atol=1e-6)
    assert_same(ours_w.cpu(), ref_w, rtol=1e-6, atol=1e-6)   # rows 1, 3, 6 rewritten, the others untouched
    assert torch.equal(ours_w.cpu()[[0, 2, 4, 5, 7]], w[[0, 2, 4, 5, 7]])


def test_sparse_gradient_is_refused():
    with pytest.raises(bc.UnsupportedError, match=r"sparse=True"):
        BF.embedding(torch.tensor([0]), torch.randn(2, 3), sparse=True)
    with pytest.raises(bc.UnsupportedError, match=r"sparse=True"):
        BF.embedding_bag(torch.tensor([0]), torch.randn(2, 3), torch.tensor([0]), sparse=True)


_BAG_CASES = [
    dict(mode="sum"), dict(mode="mean"), dict(mode="max"), dict(mode="mean", padding_idx=2),
    dict(mode="sum", per_sample_weights=True), dict(mode="sum", include_last_offset=True),
    dict(mode="mean", scale_grad_by_freq=True), dict(mode="max", padding_idx=0), dict(mode="sum", two_d=True),
]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("case", _BAG_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_embedding_bag_dropin_values_and_grads_like_torch(backend, case):
    case = dict(case)
    g = torch.Generator().manual_seed(4)
    w = torch.randn(7, 5, dtype=torch.float64, generator=g)
    if case.pop("two_d", False):
        ids, offs = torch.randint(0, 7, (3, 4), generator=g), None
    else:
        ids = torch.tensor([2, 0, 5, 5, 2, 6, 1, 2, 3])
        offs = torch.tensor([0, 3, 3, 7] + ([9] if case.get("include_last_offset") else []))
    psw = None
    if case.pop("per_sample_weights", False):
        psw = torch.randn(ids.shape, dtype=torch.float64, generator=g)
    tensors = [w] + ([psw] if psw is not None else [])
    ours_t = [t.clone().to(TDEV).requires_grad_() for t in tensors]
    ref_t = [t.clone().requires_grad_() for t in tensors]
    kw = dict(case)
    with bt.preference(_pref(backend)):
        ours = BF.embedding_bag(ids.to(TDEV), ours_t[0], None if offs is None else offs.to(TDEV),
                                per_sample_weights=ours_t[1] if psw is not None else None, **kw)
    ref = F.embedding_bag(ids, ref_t[0], offs, per_sample_weights=ref_t[1] if psw is not None else None, **kw)
    assert_same(ours.detach().cpu(), ref.detach(), rtol=1e-12, atol=1e-12)
    go = torch.randn(ref.shape, dtype=torch.float64, generator=g)
    with bt.preference(_pref(backend)):
        ours.backward(go.to(TDEV))
    ref.backward(go)
    if case.get("scale_grad_by_freq"):
        # torch's CPU embedding_bag divides by wrong counts (2.13: in [2, 0, 5 | | 5, 2, 6, 1 | 2, 3] id 3, seen once,
        # gets 1/3); the definition (F.embedding's): each token's gradient / its id's count in the batch
        _, o2b, size, _ = torch.embedding_bag(w, ids, offs, False, 1)
        tok = go[o2b] / size[o2b, None].clamp(min=1)
        ref_t[0].grad = torch.ops.aten.embedding_dense_backward(tok, ids, w.shape[0], -1, True)
    for a, b in zip(ours_t, ref_t):
        assert_same(a.grad.cpu(), b.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_embedding_bag_max_norm_with_per_sample_weights_grads_like_torch(backend):
    g = torch.Generator().manual_seed(6)
    w = 3 * torch.randn(6, 4, dtype=torch.float64, generator=g)
    psw = torch.randn(5, dtype=torch.float64, generator=g)
    ids, offs = torch.tensor([0, 4, 4, 2, 1]), torch.tensor([0, 2])
    ours_t = [w.clone().to(TDEV).requires_grad_(), psw.clone().to(TDEV).requires_grad_()]
    ref_t = [w.clone().requires_grad_(), psw.clone().requires_grad_()]
    go = torch.randn(2, 4, dtype=torch.float64, generator=g)
    with bt.preference(_pref(backend)):
        ours = BF.embedding_bag(ids.to(TDEV), ours_t[0], offs.to(TDEV), max_norm=1.0, mode="sum",
                                per_sample_weights=ours_t[1])
        ours.backward(go.to(TDEV))
    ref = F.embedding_bag(ids, ref_t[0], offs, max_norm=1.0, mode="sum", per_sample_weights=ref_t[1])
    ref.backward(go)
    assert_same(ours.detach().cpu(), ref.detach(), rtol=1e-12, atol=1e-12)
    assert_same(ours_t[0].detach().cpu(), ref_t[0].detach(), rtol=1e-12, atol=1e-12)   # renormalised in place
    for a, b in zip(ours_t, ref_t):
        assert_same(a.grad.cpu(), b.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_embedding_bag_max_norm_writes_rows_back(backend):
    g = torch.Generator().manual_seed(5)
    w = 3 * torch.randn(6, 4, generator=g)
    ids, offs = torch.tensor([0, 4, 4, 2]), torch.tensor([0, 1])
    ours_w, ref_w = w.clone().to(TDEV), w.clone()
    with bt.preference(_pref(backend)):
        ours = BF.embedding_bag(ids.to(TDEV), ours_w, offs.to(TDEV), max_norm=1.0)
    ref = F.embedding_bag(ids, ref_w, offs, max_norm=1.0)
    assert_same(ours.cpu(), ref, rtol=1e-6, atol=1e-6)
    assert_same(ours_w.cpu(), ref_w, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_bag_max_backward_routes_agree_with_repeated_ids_in_a_bag(dt):
    """The sorted route counts a bag once per row even where the bag holds that id several times (torch's rule: the
    bag's gradient goes to its max index once), as the atomic scatter of max_indices does."""
    if Backend.TRITON not in backends_for("embedding_bag_backward", DEVICE):
        pytest.skip("no Triton backend here")
    g = torch.Generator().manual_seed(7)
    w = torch.randn(5, 6, generator=g)
    ids = torch.tensor([3, 3, 1, 3, 0, 0, 4, 2, 2, 2])
    offs = torch.tensor([0, 4, 4, 7])
    out, maxi = torch.embedding_bag(w, ids, offs, False, 2)[0], torch.embedding_bag(w, ids, offs, False, 2)[3]
    go = torch.randn(out.shape, generator=g).to(dt)
    maxi = torch.where(torch.tensor([1, 0, 1, 1])[:, None].bool(), maxi, -1)   # bag 1 is empty
    desc = bc.Descriptor.like("embedding_bag_backward", go, ids, offs, maxi, num_weights=5, mode="max")
    det = forced_plan(desc, DEVICE, Backend.TRITON, require_deterministic=True)
    assert det.precision.deterministic and "deterministic" in det.sku.route
    want = torch.zeros(5, 6, dtype=torch.float64).index_put_((maxi[maxi >= 0], torch.nonzero(maxi >= 0)[:, 1]),
                                                             go.double()[maxi >= 0], accumulate=True)
    tol = 1e-2 if dt == torch.bfloat16 else 1e-6
    args = [t.to(TDEV) for t in (go, ids, offs, maxi)]
    assert_same(det.run(*args).cpu().double(), want, rtol=tol, atol=tol)
    if dt == torch.float32:
        atomic = forced_plan(desc, DEVICE, Backend.TRITON)
        assert not atomic.precision.deterministic
        assert_same(atomic.run(*args).cpu().double(), want, rtol=tol, atol=tol)
