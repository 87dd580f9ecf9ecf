"""group/instance/batch norm, local_response_norm, normalize and add_layer_norm beyond the generic suite:
torch drop-ins (batch_norm's in-place running-stat update), forced multi-tile / multi-split Triton paths with
bit-identical reruns, gradients vs torch autograd in low precision, edge cases (p=inf ties, clamped norms)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
from baracuda._core.spec import saved_names
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, on_device as _dev

TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))


def _tm():
    from baracuda.backends.triton.norm import channel as m

    return m


def _gen():
    return torch.Generator().manual_seed(0)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_batch_norm_dropin_updates_running_stats(training, dt):
    g = _gen()
    x = (torch.randn(6, 3, 5, 4, generator=g) * 2 + 1).to(dt)
    w, b = torch.randn(3, generator=g).to(dt), torch.randn(3, generator=g).to(dt)
    rm, rv = torch.randn(3, generator=g).to(dt), (torch.rand(3, generator=g) + 0.5).to(dt)
    rm_t, rv_t = rm.double().clone(), rv.double().clone()
    want = F.batch_norm(x.double(), rm_t, rv_t, w.double(), b.double(), training, 0.2, 1e-5)
    rm_b, rv_b = _dev(rm.clone()), _dev(rv.clone())
    with bt.preference(TRITON), _tm().forced(splits=3, bs=8):   # 3 partial programs per channel, 3 tiles per row
        y = bt.nn.functional.batch_norm(_dev(x), rm_b, rv_b, _dev(w), _dev(b), training, 0.2, 1e-5)
    tol = (5e-5, 5e-5) if dt == torch.float32 else (3e-2, 3e-2)
    assert_close(y.cpu(), want.numpy(), *tol, "batch_norm y")
    assert_close(rm_b.cpu(), rm_t.numpy(), *tol, "running_mean (updated in place)")
    assert_close(rv_b.cpu(), rv_t.numpy(), *tol, "running_var (unbiased batch variance)")
    if not training:
        assert torch.equal(rm_b.cpu(), rm) and torch.equal(rv_b.cpu(), rv), "eval must not touch the running stats"


@pytest.mark.parametrize("op", ["batch_norm", "group_norm"])
def test_grads_vs_torch_forced_splits(op):
    g = _gen()
    x = torch.randn(4, 6, 9, generator=g, dtype=torch.float64) * 3 + 2
    w, b = torch.randn(6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    gy = torch.randn(4, 6, 9, generator=g, dtype=torch.float64)
    ts = [t.clone().requires_grad_() for t in (x, w, b)]
    if op == "batch_norm":
        ref = F.batch_norm(ts[0], None, None, ts[1], ts[2], True, 0.1, 1e-5)
        attrs = {"training": True, "momentum": 0.1, "eps": 1e-5}
    else:
        ref = F.group_norm(ts[0], 3, ts[1], ts[2], 1e-5)
        attrs = {"num_groups": 3, "eps": 1e-5}
    want = torch.autograd.grad(ref, ts, gy)
    desc = bc.Descriptor.like(op, x, w, b, **attrs)
    with _tm().forced(splits=5, bs=4):
        fw = bc.Plan.select(desc, DEVICE, TRITON)
        bw = bc.BackwardPlan.select(desc, DEVICE, TRITON)
        outs = fw.run(*[_dev(t) for t in (x, w, b)])
        saved = {"x": _dev(x), "weight": _dev(w), "bias": _dev(b), "out1": outs[1], "out2": outs[2]}
        saved = {k: v for k, v in saved.items() if k in saved_names(desc)}     # batch_norm keeps no bias
        got = bw.run(_dev(gy), None, None, **saved)
        again = bw.run(_dev(gy), None, None, **saved)
    assert_close(outs[0].cpu(), ref.detach().numpy(), 1e-10, 1e-10, f"{op} forward")
    for i, (a, r) in enumerate(zip(got, want)):
        assert_close(a.cpu(), r.numpy(), 1e-9, 1e-9, f"{op} grad {i}")
        assert torch.equal(a, again[i]), "backward is not bit-identical across runs"


@pytest.mark.parametrize("use_y", [False, True])   # y unused: torch passes None for its gradient
def test_stat_output_grads_flow_through_autograd(use_y):
    """Gradients of the mean/rstd outputs (exact derivatives) through the torch custom op."""
    g = _gen()
    x = (torch.randn(2, 4, 5, generator=g, dtype=torch.float64) + 1).requires_grad_()
    gy = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    with bt.preference(TRITON):
        y, mean, rstd = bt.call("group_norm", [x], {"num_groups": 2, "eps": 1e-5})
        loss = (mean * 3).sum() + rstd.sum()
        (loss + (y * gy).sum() if use_y else loss).backward()
    xr = x.detach().clone().requires_grad_()
    var, m = torch.var_mean(xr.reshape(2, 2, -1), -1, unbiased=False)
    loss = (m * 3).sum() + torch.rsqrt(var + 1e-5).sum()
    if use_y:
        loss = loss + (F.group_norm(xr, 2, eps=1e-5) * gy).sum()
    loss.backward()
    assert_close(x.grad.numpy(), xr.grad.numpy(), 1e-9, 1e-9, "d(y, mean, rstd)/dx")


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_group_and_instance_norm_dropins(dt):
    g = _gen()
    x = (torch.randn(3, 8, 6, 5, generator=g) * 2 - 1).to(dt)
    w, b = torch.randn(8, generator=g).to(dt), torch.randn(8, generator=g).to(dt)
    tol = (5e-5, 5e-5) if dt == torch.float32 else (3e-2, 3e-2)
    with bt.preference(TRITON), _tm().forced(bs=8):
        y = bt.nn.functional.group_norm(_dev(x), 4, _dev(w), _dev(b), 1e-5)
        yi = bt.nn.functional.instance_norm(_dev(x), weight=_dev(w), bias=_dev(b))
        yb = bt.nn.functional.group_norm(_dev(x), 2, None, _dev(b))   # bias without weight: unit weight
    assert_close(y.cpu(), F.group_norm(x.double(), 4, w.double(), b.double(), 1e-5).numpy(), *tol, "group_norm")
    assert_close(yi.cpu(), F.instance_norm(x.double(), weight=w.double(), bias=b.double()).numpy(), *tol, "instance")
    assert_close(yb.cpu(), F.group_norm(x.double(), 2, None, b.double()).numpy(), *tol, "group_norm bias only")


def _instance_norm_run(fn, x, w, b, rm, rv, gy, **kw):
    """(y, the updated running_mean / running_var, dx, dw, db) of ``fn`` (F.instance_norm's signature) on copies."""
    leaves = [t.clone().requires_grad_() for t in (x, w, b) if t is not None]
    it = iter(leaves)
    xs, ws, bs = next(it), (next(it) if w is not None else None), (next(it) if b is not None else None)
    rm = None if rm is None else rm.clone()
    rv = None if rv is None else rv.clone()
    y = fn(xs, rm, rv, ws, bs, **kw)
    grads = torch.autograd.grad(y, leaves, gy)
    return (y.detach(), rm, rv) + grads


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
@pytest.mark.parametrize("shape", [(3, 4, 5), (2, 3, 2, 3, 4)])       # 1-D and 3-D spatial
@pytest.mark.parametrize("affine", ["both", "weight", "bias", "none"])
@pytest.mark.parametrize("mode", [dict(momentum=0.1), dict(momentum=0.7, eps=1e-3), dict(momentum=1.0),
                                  dict(momentum=0.0), dict(use_input_stats=False, momentum=0.4, eps=1e-2)])
def test_instance_norm_running_stats_match_torch(backend, shape, affine, mode):
    """F.instance_norm with running statistics (torch's track_running_stats): with the input statistics the
    result, the running statistics updated in place (per-instance means and unbiased variances averaged over N,
    with momentum) and the float64 gradients of input / weight / bias are torch's; use_input_stats=False
    normalizes by the running statistics and leaves them alone."""
    g = _gen()
    c = shape[1]
    x = torch.randn(shape, generator=g, dtype=torch.float64) * 2 + 0.5
    w = torch.randn(c, generator=g, dtype=torch.float64) if affine in ("both", "weight") else None
    b = torch.randn(c, generator=g, dtype=torch.float64) if affine in ("both", "bias") else None
    rm, rv = torch.randn(c, generator=g, dtype=torch.float64), torch.rand(c, generator=g, dtype=torch.float64) + 0.5
    gy = torch.randn(shape, generator=g, dtype=torch.float64)
    with bt.preference(bc.PlanPreference(prefer=(backend,))):
        got = _instance_norm_run(bt.nn.functional.instance_norm, x, w, b, rm, rv, gy, **mode)
    want = _instance_norm_run(F.instance_norm, x, w, b, rm, rv, gy, **mode)
    assert len(got) == len(want)
    for name, a, e in zip(("y", "running_mean", "running_var", "dx", "dw", "db"), got, want):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9, msg=lambda m, name=name: f"{name}: {m}")
    if mode.get("use_input_stats", True):
        if mode["momentum"] == 0:    # (the average over N of N equal values: within rounding of the old ones)
            torch.testing.assert_close(got[1:3], (rm, rv), rtol=1e-15, atol=0)
        else:
            assert not torch.equal(got[1], rm), "the running statistics were not updated"
    else:
        assert torch.equal(got[1], rm) and torch.equal(got[2], rv), "eval must not touch the running statistics"


def test_instance_norm_running_stats_training_steps_and_twin():
    """Two training steps in a row update the same buffers twice (the backward of each step still runs: the
    buffers are not saved for it), through F.instance_norm and torch.instance_norm's twin (its own signature)."""
    g = _gen()
    x1, x2 = (torch.randn(2, 3, 6, generator=g) for _ in range(2))
    w, b = torch.randn(3, generator=g).requires_grad_(), torch.randn(3, generator=g).requires_grad_()
    bufs = {}
    for name, fn in (("ours", bt.nn.functional.instance_norm), ("torch", F.instance_norm)):
        rm, rv = torch.zeros(3), torch.ones(3)
        ys = [fn(x, rm, rv, w, b, True, 0.3, 1e-5) for x in (x1, x2)]
        gw, gb = torch.autograd.grad(sum(y.square().sum() for y in ys), (w, b))
        bufs[name] = (rm, rv, gw, gb, *ys)
    for a, e in zip(bufs["ours"], bufs["torch"]):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)
    rm_a, rv_a, rm_b, rv_b = torch.zeros(3), torch.ones(3), torch.zeros(3), torch.ones(3)
    ya = bt.instance_norm(x1, w, b, rm_a, rv_a, True, 0.2, 1e-5, False)
    yb = torch.instance_norm(x1, w, b, rm_b, rv_b, True, 0.2, 1e-5, False)
    for a, e in ((ya, yb), (rm_a, rm_b), (rv_a, rv_b)):
        torch.testing.assert_close(a, e, rtol=1e-5, atol=1e-5)


def test_instance_norm_running_stats_errors_and_empty():
    """torch's refusals (one running statistic without the other, use_input_stats=False without them, a single
    spatial element with the input statistics, momentum None) are ours; an empty input leaves the running
    statistics alone, except an empty batch (N = 0), whose average over N is NaN, as torch's."""
    x = torch.randn(2, 3, 4)
    f = bt.nn.functional.instance_norm
    cases = [(lambda fn: fn(x, torch.zeros(3), None), ValueError, "running"),
             (lambda fn: fn(x, None, torch.ones(3)), ValueError, "running"),
             (lambda fn: fn(x, use_input_stats=False), (ValueError, RuntimeError), "running"),
             (lambda fn: fn(torch.randn(2, 3, 1), torch.zeros(3), torch.ones(3)), ValueError, "spatial"),
             (lambda fn: fn(torch.randn(2, 3), None, None), ValueError, "spatial"),
             (lambda fn: fn(x, torch.zeros(3), torch.ones(3), momentum=None), TypeError, "momentum")]
    for call_, exc, pat in cases:
        with pytest.raises(exc):
            call_(F.instance_norm)
        with pytest.raises(exc, match=pat):
            call_(f)
    for shape in ((0, 3, 4), (2, 3, 0)):
        e = torch.randn(shape)
        rm, rv, rm_t, rv_t = torch.zeros(3), torch.ones(3), torch.zeros(3), torch.ones(3)
        y = f(e, rm, rv)
        want = F.instance_norm(e, rm_t, rv_t)
        assert y.shape == want.shape
        torch.testing.assert_close((rm, rv), (rm_t, rv_t), equal_nan=True)
        assert rm.isnan().all() == (shape[0] == 0)


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
def test_group_norm_negative_eps_and_empty_groups(backend):
    """Any real eps (a group with var + eps < 0 is NaN, as torch), and a group with no elements has mean 0 and
    rstd NaN, as torch.native_group_norm."""
    g = _gen()
    x = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    x[0, :2] *= 0.1
    w = torch.randn(4, generator=g, dtype=torch.float64)
    gy = torch.randn(2, 4, 5, generator=g, dtype=torch.float64)
    xt, wt = x.clone().requires_grad_(), w.clone().requires_grad_()
    want = F.group_norm(xt, 2, wt, None, -0.5)
    wg = torch.autograd.grad(want, (xt, wt), gy)
    assert want.isnan().any() and not want.isnan().all()
    with bt.preference(bc.PlanPreference(prefer=(backend,))):
        xb, wb = _dev(x).requires_grad_(), _dev(w).requires_grad_()
        y = bt.nn.functional.group_norm(xb, 2, wb, None, -0.5)
        got = torch.autograd.grad(y, (xb, wb), _dev(gy))
    torch.testing.assert_close(y.detach().cpu(), want.detach(), rtol=1e-10, atol=1e-10, equal_nan=True)
    for a, e in zip(got, wg):
        torch.testing.assert_close(a.cpu(), e, rtol=1e-9, atol=1e-9, equal_nan=True)
    e = torch.randn(2, 4, 0, dtype=torch.float64)
    desc = bc.Descriptor.like("group_norm", e, num_groups=2, eps=1e-5)
    _, mean, rstd = bc.Plan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,))).run(_dev(e))
    _, tm, tr = torch.native_group_norm(e, None, None, 2, 4, 0, 2, 1e-5)
    torch.testing.assert_close(mean.cpu(), tm, equal_nan=True)
    torch.testing.assert_close(rstd.cpu(), tr, equal_nan=True)
    assert tr.isnan().all()


def test_normalize_edge_cases():
    # p=inf with ties: the gradient is split evenly among the maxima (torch's amax backward)
    x = torch.tensor([[1.0, -3.0, 3.0, 2.0], [0.5, 0.25, -0.5, 0.1]], dtype=torch.float64)
    gy = torch.tensor([[1.0, 2.0, -1.0, 0.5], [0.3, -0.2, 0.7, 1.0]], dtype=torch.float64)
    for p, dim, eps in ((float("inf"), 1, 1e-12), (2.0, 1, 10.0), (3.0, 0, 1e-12), (1.0, 1, 1e-12)):
        xt = x.clone().requires_grad_()
        ref = F.normalize(xt, p, dim, eps)
        (want,) = torch.autograd.grad(ref, xt, gy)
        desc = bc.Descriptor.like("normalize", x, p=p, dim=dim, eps=eps)
        y = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x))
        (dx,) = bc.BackwardPlan.select(desc, DEVICE, TRITON).run(_dev(gy), x=_dev(x))
        assert_close(y.cpu(), ref.detach().numpy(), 1e-12, 1e-12, f"normalize p={p}")
        assert_close(dx.cpu(), want.numpy(), 1e-10, 1e-10, f"normalize grad p={p} eps={eps}")


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
@pytest.mark.parametrize("p", [0.5, 0.0, -1.5, -float("inf"), 3.0])
def test_normalize_any_p_with_zero_entries(backend, p):
    """Any p, as torch.norm: p < 1 (the gradient is 0 at a zero entry), p = 0 (the nonzero count: no gradient
    through the norm), p < 0 (a zero entry makes the norm 0, then the eps clamp), p = -inf (the smallest |x|);
    rows with and without zeros, the reduced dim first and last."""
    g = _gen()
    x = torch.randn(4, 6, generator=g, dtype=torch.float64) * 2
    x[1, 2] = 0.0
    x[2, :] = 0.0
    x[3, 4] = x[3, 1] = -0.75        # a tie in |x| (p = -inf splits the gradient)
    x[3, 5] = 0.75
    gy = torch.randn(4, 6, generator=g, dtype=torch.float64)
    for dim in (1, 0):
        xt = x.clone().requires_grad_()
        ref = F.normalize(xt, p, dim, 1e-3)
        (want,) = torch.autograd.grad(ref, xt, gy)
        desc = bc.Descriptor.like("normalize", x, p=p, dim=dim, eps=1e-3)
        pref = bc.PlanPreference(prefer=(backend,))
        y = bc.Plan.select(desc, DEVICE, pref).run(_dev(x))
        (dx,) = bc.BackwardPlan.select(desc, DEVICE, pref).run(_dev(gy), x=_dev(x))
        assert_close(y.cpu(), ref.detach().numpy(), 1e-12, 1e-12, f"normalize p={p} dim={dim}")
        assert_close(dx.cpu(), want.numpy(), 1e-10, 1e-10, f"normalize grad p={p} dim={dim}")


def test_normalize_chunked_and_inner():
    g = _gen()
    x = torch.randn(3, 37, 5, generator=g)
    with _tm().forced(br=8):   # 5 chunks per row, lanes along the inner axis
        for dim in (1, 2):
            desc = bc.Descriptor.like("normalize", x, p=2.0, dim=dim, eps=1e-12)
            y = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x))
            assert_close(y.cpu(), F.normalize(x.double(), 2.0, dim).numpy(), 2e-6, 2e-6, f"normalize dim={dim}")


def test_local_response_norm_vs_torch_autograd():
    g = _gen()
    x = torch.randn(2, 7, 3, 2, generator=g, dtype=torch.float64).requires_grad_()
    gy = torch.randn(2, 7, 3, 2, generator=g, dtype=torch.float64)
    for size in (1, 2, 5, 9):
        ref = F.local_response_norm(x, size, 0.5, 0.6, 1.2)
        (want,) = torch.autograd.grad(ref, x, gy)
        desc = bc.Descriptor.like("local_response_norm", x.detach(), size=size, alpha=0.5, beta=0.6, k=1.2)
        y = bc.Plan.select(desc, DEVICE, TRITON).run(_dev(x.detach()))
        (dx,) = bc.BackwardPlan.select(desc, DEVICE, TRITON).run(_dev(gy), x=_dev(x.detach()))
        assert_close(y.cpu(), ref.detach().numpy(), 1e-11, 1e-12, f"lrn size={size}")
        assert_close(dx.cpu(), want.numpy(), 1e-10, 1e-11, f"lrn grad size={size}")


def test_add_layer_norm_vs_unfused():
    g = _gen()
    x, r = torch.randn(5, 16, generator=g).bfloat16(), torch.randn(5, 16, generator=g).bfloat16()
    w, b = torch.randn(16, generator=g).bfloat16(), torch.randn(16, generator=g).bfloat16()
    desc = bc.Descriptor.like("add_layer_norm", x, r, w, b, normalized_shape=(16,), eps=1e-5)
    s, y = bc.Plan.select(desc, DEVICE, TRITON).run(*[_dev(t) for t in (x, r, w, b)])
    s_ref = x + r
    if DEVICE.type == "cuda":   # the interpreter's f32 -> bf16 cast is not round-to-nearest-even (1 ulp off)
        assert torch.equal(s.cpu(), s_ref), "the sum is rounded to bf16 like the unfused add"
    assert_close(s.cpu(), s_ref.double().numpy(), 2 ** -7, 0, "s")
    assert_close(y.cpu(), F.layer_norm(s_ref.double(), (16,), w.double(), b.double()).numpy(), 3e-2, 3e-2, "y")


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
def test_local_response_norm_integer_input(backend):
    """An integer input: torch's integer avg_pool rounds the window mean of the squares down, and the result is
    float32 (the default dtype); an empty integer input comes back as it is (its dtype kept)."""
    g = _gen()
    x = torch.randint(-9, 10, (2, 6, 3, 2), generator=g)
    with bt.preference(bc.PlanPreference(prefer=(backend,))):
        for size, kw in ((3, {}), (2, {"alpha": 0.3, "beta": 0.5, "k": 1.25}), (5, {"alpha": 0.05})):
            want = F.local_response_norm(x, size, **kw)
            got = bt.nn.functional.local_response_norm(_dev(x), size, **kw)
            assert got.dtype == want.dtype == torch.float32
            torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
        e = torch.zeros(0, 3, 2, dtype=torch.int64)
        got = bt.nn.functional.local_response_norm(_dev(e), 2)
        assert got.dtype == torch.int64 and got.shape == e.shape


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
def test_batch_norm_training_updates_buffers_and_backward_works(backend):
    """training=True with running statistics: the drop-in writes the new statistics into the caller's buffers
    in place, and the backward still runs (the buffers are not among the saved tensors whose version autograd
    checks); gradients and updated buffers equal torch's."""
    g = _gen()
    x = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
    w, b = torch.randn(3, generator=g, dtype=torch.float64), torch.randn(3, generator=g, dtype=torch.float64)
    gy = torch.randn(4, 3, 5, generator=g, dtype=torch.float64)
    res = []
    for fn in (bt.nn.functional.batch_norm, F.batch_norm):
        ts = [t.clone().requires_grad_() for t in (x, w, b)]
        rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
        with bt.preference(bc.PlanPreference(prefer=(backend,))):
            y = fn(ts[0], rm, rv, ts[1], ts[2], True, 0.3, 1e-5)
            grads = torch.autograd.grad(y, ts, gy)
        res.append((y.detach(), rm, rv) + grads)
    for a, e in zip(*res):
        torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)


def test_batch_norm_empty_input_and_eps_checks():
    """An empty batch (also a 1-D empty input) returns an empty result and leaves the running statistics as
    they are, as torch; eps <= 0 when training (< 0 otherwise) is refused as torch's F.batch_norm does."""
    for shape in ((0,), (0, 3), (0, 3, 2)):
        c = 0 if len(shape) == 1 else 3
        rm, rv = torch.randn(c, dtype=torch.float64), torch.rand(c, dtype=torch.float64) + 0.5
        rm0, rv0 = rm.clone(), rv.clone()
        x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
        for training in (True, False):
            y = bt.nn.functional.batch_norm(x, rm, rv, training=training)
            assert y.shape == shape and torch.equal(rm, rm0) and torch.equal(rv, rv0)
            (gx,) = torch.autograd.grad(y.sum(), x)
            assert gx.shape == shape
    x = torch.randn(4, 3)
    for training, eps in ((True, 0.0), (True, -1.0), (False, -1.0)):
        with pytest.raises(ValueError, match="eps"):
            F.batch_norm(x, None if training else torch.zeros(3), None if training else torch.ones(3),
                         training=training, eps=eps)
        with pytest.raises(ValueError, match="eps"):
            bt.nn.functional.batch_norm(x, None if training else torch.zeros(3), None if training else torch.ones(3),
                                        training=training, eps=eps)
    try:    # torch 2.13 takes eps = 0 in evaluation (2.11 refused it): whichever torch runs, we agree
        want = F.batch_norm(x, torch.zeros(3), torch.ones(3), training=False, eps=0.0)
    except ValueError:
        with pytest.raises(ValueError, match="eps"):
            bt.nn.functional.batch_norm(x, torch.zeros(3), torch.ones(3), training=False, eps=0.0)
        return
    y = bt.nn.functional.batch_norm(x, torch.zeros(3), torch.ones(3), training=False, eps=0.0)
    torch.testing.assert_close(y, want)


@pytest.mark.parametrize("backend", [Backend.REFERENCE, Backend.TRITON])
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_of_channels_last_input_is_channels_last_with_torchs_values(backend, training):
    """Channels-last activations run as the [N * H * W, C] matrix they are (the Triton kernels walk it with the
    channels contiguous, several tiles and partial programs forced); y and dx come back channels-last, as torch's,
    with torch's values, gradients and running statistics."""
    g = _gen()
    x = (torch.randn(3, 5, 4, 3, generator=g, dtype=torch.float64) * 2 + 1).to(memory_format=torch.channels_last)
    w, b = torch.randn(5, generator=g, dtype=torch.float64), torch.randn(5, generator=g, dtype=torch.float64)
    gy = torch.randn(3, 5, 4, 3, generator=g, dtype=torch.float64).to(memory_format=torch.channels_last)
    rm, rv = torch.randn(5, generator=g, dtype=torch.float64), torch.rand(5, generator=g, dtype=torch.float64) + 0.5
    got, want = [], []
    for ns, out in ((bt, got), (torch, want)):
        xs, ws, bs = (t.clone().requires_grad_() for t in (x, w, b))
        rms, rvs = rm.clone(), rv.clone()
        if ns is bt:
            xs, ws, bs, rms, rvs = (_dev(t.detach()).requires_grad_(t.requires_grad) for t in (xs, ws, bs, rms, rvs))
            with bt.preference(bc.PlanPreference(prefer=(backend,))), _tm().forced(splits=3, bs=4):
                y = ns.nn.functional.batch_norm(xs, rms, rvs, ws, bs, training, 0.3, 1e-5)
                (y * _dev(gy)).sum().backward()
        else:
            y = ns.nn.functional.batch_norm(xs, rms, rvs, ws, bs, training, 0.3, 1e-5)
            (y * gy).sum().backward()
        out += [y, xs.grad, ws.grad, bs.grad, rms, rvs]
    assert got[0].is_contiguous(memory_format=torch.channels_last) and got[0]._base is None
    assert got[1].is_contiguous(memory_format=torch.channels_last)
    for a, e, what in zip(got, want, ("y", "dx", "dweight", "dbias", "running_mean", "running_var")):
        torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=1e-9, atol=1e-9, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("n,c", [(37, 5), (300, 70)])
def test_batch_norm_of_a_matrix_walks_its_channels_contiguous(n, c):
    """[N, C] (BatchNorm1d; channels-last activations flattened): the row-tiled walk, tiles and partial programs
    forced to several per channel, against torch in float64."""
    g = _gen()
    x = torch.randn(n, c, generator=g, dtype=torch.float64) * 3 + 2
    gy = torch.randn(n, c, generator=g, dtype=torch.float64)
    xs, xt = _dev(x.clone()).requires_grad_(), x.clone().requires_grad_()
    with bt.preference(TRITON), _tm().forced(splits=4, bs=8):
        y = bt.nn.functional.batch_norm(xs, None, None, training=True)
        (y * _dev(gy)).sum().backward()
    want = F.batch_norm(xt, None, None, training=True)
    (want * gy).sum().backward()
    torch.testing.assert_close(y.detach().cpu(), want.detach(), rtol=1e-9, atol=1e-9)
    torch.testing.assert_close(xs.grad.cpu(), xt.grad, rtol=1e-9, atol=1e-9)
