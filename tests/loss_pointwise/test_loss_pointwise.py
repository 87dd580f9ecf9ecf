"""Pointwise and margin losses (ops/loss_pointwise.py, ops/loss_margin.py): what the generic suite can't express.
Edge values against torch (BCE's log clamp at 0 and 1, huge logits, zero KL targets, clamped gaussian var,
Stirling's term on both sides of 1), every broadcast form of weight / pos_weight / var (including the expand
fallback), row kernels walking several tiles and row blocks (forced small tiles), class-index errors (never an
out-of-bounds read), deterministic folds and the drop-in adapters with autograd.  Forward and backward vs
torch.autograd in float64 on the same rounded inputs."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda._core.spec import get_spec
from baracuda.backends.triton.loss.margin import forced
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, on_device as _dev, plan_or_skip as _plan

TOL = {torch.float64: (1e-9, 1e-10), torch.float32: (2e-5, 2e-6)}
BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _check(op, ins, backend, dt=torch.float64, grad=True, **attrs):
    """baracuda's forward and backward plans vs torch's peer + autograd (float64, same rounded inputs)."""
    spec = get_spec(op)
    ins = [x.to(dt) if x.is_floating_point() else x for x in ins]
    ref = [x.double().requires_grad_(i in spec.differentiable) if x.is_floating_point() else x
           for i, x in enumerate(ins)]
    want = spec.torch_peer(*ref, **attrs)
    dins = [_dev(x) for x in ins]
    got = _plan(op, *dins, backend=backend, **attrs).run(*dins)
    rtol, atol = TOL[dt]
    assert_close(got.cpu(), want.detach().numpy(), rtol, atol, f"{op} fw {attrs}")
    if not grad:
        return
    gout = torch.linspace(-1, 1, want.numel(), dtype=torch.float64).reshape(want.shape) if want.dim() else \
        torch.tensor(0.7, dtype=torch.float64)
    leaves = [r for r in ref if r.requires_grad]
    wg = torch.autograd.grad((want * gout).sum(), leaves)
    desc = bc.Descriptor.like(op, *dins, **attrs)
    bwp = bc.BackwardPlan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,)))
    gg = bwp.run(_dev(gout.to(dt)), **dict(zip(spec.arg_names, dins)))
    for k, (i, w) in enumerate(zip(spec.differentiable, wg)):
        assert_close(gg[i].cpu(), w.numpy(), 2 * rtol, 2 * atol, f"{op} grad {spec.arg_names[i]} {attrs}")


def _g(seed):
    return torch.Generator().manual_seed(seed)


# -- pointwise ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
def test_bce_log_clamp_edges(backend, dt):
    """x = 0 and 1 exactly: torch clamps each log at -100 (loss 100, not inf); dx divides by max(x(1-x), 1e-12)."""
    x = torch.tensor([[0.0, 1.0, 0.0, 1.0, 0.5], [1e-3, 0.999, 0.25, 0.0, 1.0]])
    y = torch.tensor([[1.0, 0.0, 0.0, 1.0, 0.3], [1.0, 0.0, 0.6, 0.5, 0.5]])
    _check("binary_cross_entropy", [x, y], backend, dt, grad=False, reduction="none")
    _check("binary_cross_entropy", [x[:, :3], y[:, :3]], backend, dt, grad=False, reduction="sum")
    # gradients where finite (torch's d/dtarget is log((1-x)/x): infinite at 0 and 1)
    _check("binary_cross_entropy", [x[1:, :3], y[1:, :3]], backend, dt, reduction="mean")


@pytest.mark.parametrize("backend", BACKENDS)
def test_bce_weight_broadcasts(backend):
    g = _g(1)
    x, y = torch.rand(2, 3, 4, generator=g) * 0.9 + 0.05, torch.rand(2, 3, 4, generator=g)
    for ws in ((4,), (3, 1), (2, 1, 4), (1, 3, 1), (2, 3, 4)):   # (1, 3, 1): two broadcast blocks -> expand fallback
        w = torch.rand(ws, generator=g) + 0.2
        _check("binary_cross_entropy", [x, y, w], backend, reduction="sum")


@pytest.mark.parametrize("backend", BACKENDS)
def test_bce_with_logits_stability_and_weights(backend):
    g = _g(2)
    x = torch.tensor([[-800.0, 800.0, -40.0, 40.0], [0.0, 1e-4, -3.0, 3.0]])
    y = torch.tensor([[1.0, 0.0, 0.3, 0.7], [0.5, 1.0, 0.0, 1.0]])
    pw = torch.tensor([1.0, 2.0, 0.5, 3.0])
    for dt in (torch.float32, torch.float64):
        _check("binary_cross_entropy_with_logits", [x, y], backend, dt, reduction="none")
        _check("binary_cross_entropy_with_logits", [x, y, pw], backend, dt, reduction="sum", has_pos_weight=True)
    w = torch.rand(2, 1, generator=g) + 0.1
    _check("binary_cross_entropy_with_logits", [3 * torch.randn(2, 4, generator=g), y, w, pw], backend,
           reduction="mean", has_pos_weight=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_kl_div_reductions_and_zero_targets(backend):
    g = _g(3)
    x = torch.log_softmax(torch.randn(5, 7, generator=g), -1)
    y = torch.softmax(torch.randn(5, 7, generator=g), -1)
    for red in ("batchmean", "mean", "sum", "none"):
        _check("kl_div", [x, y], backend, reduction=red)
        _check("kl_div", [x, torch.log(y)], backend, reduction=red, log_target=True)
    y0 = y.clone()
    y0[0, :3] = 0.0
    _check("kl_div", [x, y0], backend, grad=False, reduction="sum")   # xlogy(0, 0) = 0
    # torch's target gradient is NaN at target 0 (xlogy's y/y): baracuda matches it
    ins = [_dev(torch.tensor(1.0, dtype=torch.float64)), _dev(x.double()), _dev(y0.double())]
    dx, dy = _plan("kl_div_backward", *ins, backend=backend, reduction="sum").run(*ins)
    assert torch.isnan(dy.cpu()[0, :3]).all() and torch.isfinite(dy.cpu()[1:]).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_poisson_full_stirling_both_sides_of_one(backend):
    g = _g(4)
    y = torch.tensor([[0.0, 0.5, 1.0, 1.0001, 2.0, 7.0]])
    for log_input in (True, False):
        x = torch.randn(1, 6, generator=g) if log_input else torch.rand(1, 6, generator=g) + 0.1
        _check("poisson_nll_loss", [x, y], backend, grad=False, reduction="none", log_input=log_input, full=True)
        # torch's d/dtarget at target == 0 with full=True is NaN (0 * log 0 inside its masked Stirling branch);
        # baracuda gives the masked branch's gradient, 0: compared away from 0
        _check("poisson_nll_loss", [x[:, 1:], y[:, 1:]], backend, reduction="none", log_input=log_input, full=True,
               eps=1e-8)
        _check("poisson_nll_loss", [x, y], backend, reduction="sum", log_input=log_input, full=False, eps=0.3)


@pytest.mark.parametrize("backend", BACKENDS)
def test_gaussian_var_shapes_clamp_and_negative(backend):
    g = _g(5)
    x, y = torch.randn(2, 5, 3, 4, generator=g), torch.randn(2, 5, 3, 4, generator=g)
    for vs in ((2, 5, 3, 4), (2, 5, 3), (2, 5, 3, 1), (2, 1, 3, 4), (1, 5, 3, 4)):
        v = torch.rand(vs, generator=g) + 0.1
        _check("gaussian_nll_loss", [x, y, v], backend, reduction="mean", full=True, eps=1e-6)
    # var below eps: clamped in the loss, yet the gradient flows to var as through torch's no_grad clamp_
    v = torch.tensor([1e-9, 0.0, 0.5, 2e-3]).expand(2, 4).contiguous()
    _check("gaussian_nll_loss", [x[0, 0, :2], y[0, 0, :2], v], backend, reduction="none", eps=1e-2)
    with pytest.raises(InvalidProblemError, match="argument 'var'"):
        vn = -v - 0.1
        _plan("gaussian_nll_loss", _dev(x[0, 0, :2]), _dev(y[0, 0, :2]), _dev(vn), backend=backend).run(
            _dev(x[0, 0, :2]), _dev(y[0, 0, :2]), _dev(vn))
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [1.5, -0.25, float("nan")])
@pytest.mark.parametrize("arg", ["input", "target"])
def test_bad_bce_input_or_target_raises(backend, bad, arg):
    """An input or a target outside [0, 1] (NaN included) is an error naming the argument, as torch's; the
    Triton kernel's flag (deferred on the GPU) says which argument failed."""
    g = _g(11)
    x, y = torch.rand(3, 4, generator=g), torch.rand(3, 4, generator=g)
    (x if arg == "input" else y)[2, 1] = bad
    with pytest.raises(RuntimeError, match=f"all elements of {arg} should be between 0 and 1"):
        F.binary_cross_entropy(x, y)
    with pytest.raises(InvalidProblemError, match=rf"argument '{arg}': expected values in \[0, 1\]"):
        _plan("binary_cross_entropy", _dev(x), _dev(y), backend=backend).run(_dev(x), _dev(y))
        bc.check_errors()
    with pytest.raises(InvalidProblemError, match=rf"argument '{arg}'"):
        bt.nn.functional.binary_cross_entropy(_dev(x), _dev(y), reduction="none")
        bc.check_errors()


@pytest.mark.parametrize("backend", BACKENDS)
def test_hinge_ranking_soft_margin(backend):
    g = _g(6)
    x = torch.randn(3, 7, generator=g) * 2
    s = torch.where(torch.rand(3, 7, generator=g) < 0.5, -1.0, 1.0)
    other = s.clone()
    other[0, :2] = torch.tensor([0.0, 2.0])   # targets other than +-1: both hinge terms / neither
    _check("hinge_embedding_loss", [x, other], backend, reduction="none", margin=0.4)
    _check("margin_ranking_loss", [x, torch.randn(3, 7, generator=g), s], backend, reduction="mean", margin=0.2)
    _check("soft_margin_loss", [x * 10, s], backend, reduction="sum")


@pytest.mark.parametrize("op", ["binary_cross_entropy_with_logits", "soft_margin_loss"])
def test_multi_program_fold_deterministic(op):
    """3 x 5000 elements = 4 programs of 4096: partials folded in a fixed order (bit-identical reruns)."""
    g = _g(7)
    x = torch.randn(3, 5000, generator=g)
    y = torch.rand(3, 5000, generator=g) if op.startswith("binary") else torch.sign(torch.randn(3, 5000, generator=g))
    p = _plan(op, _dev(x), _dev(y), reduction="mean")
    a, b = p.run(_dev(x), _dev(y)), p.run(_dev(x), _dev(y))
    assert torch.equal(a, b)
    assert_close(a.cpu(), getattr(F, op)(x.double(), y.double()).numpy(), 2e-5, 2e-6, op)


# -- row-wise ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS)
def test_row_losses_multi_tile(backend):
    """Rows of 37 in 16-wide tiles and 2-row blocks (the GPU's long-row path, on a tiny problem)."""
    g = _g(8)
    a, p, n = (torch.randn(5, 37, generator=g) for _ in range(3))
    t = torch.tensor([1.0, -1.0, 1.0, -1.0, -1.0])
    with forced(tile=16, rows=2):
        _check("cosine_embedding_loss", [a, a * 0.3 + p, t], backend, reduction="none", margin=-0.1)
        for kw in ({"p": 2.0}, {"p": 1.0, "swap": True}, {"p": 1.5, "swap": True, "margin": 3.0}):
            _check("triplet_margin_loss", [a, p, n], backend, reduction="sum", **kw)
        tc = torch.randint(0, 37, (5,), generator=g)
        w = torch.rand(37, generator=g) + 0.1
        _check("multi_margin_loss", [2 * a, tc], backend, reduction="none", p=1, margin=1.5)
        _check("multi_margin_loss", [2 * a, tc, w], backend, reduction="mean", p=2)
        ml = torch.randint(-1, 37, (5, 37), generator=g)
        ml[0, :4] = torch.tensor([3, 3, 30, -1])   # a repeated class counts twice, as torch
        ml[1, 0] = -1                            # no targets
        ml[2] = torch.randperm(37, generator=g)  # every class a target, no -1
        _check("multilabel_margin_loss", [a, ml], backend, reduction="none")
        y = torch.rand(5, 37, generator=g)
        for ws in ((37,), (5, 1), (5, 37)):
            _check("multilabel_soft_margin_loss", [a, y, torch.rand(ws, generator=g) + 0.1], backend, reduction="mean")


@pytest.mark.parametrize("backend", BACKENDS)
def test_row_losses_1d_and_integer_cosine_target(backend):
    g = _g(9)
    x = torch.randn(6, generator=g)
    _check("cosine_embedding_loss", [x, torch.randn(6, generator=g), torch.tensor(-1.0)], backend, reduction="none")
    _check("cosine_embedding_loss", [x[None], x[None] + 1, torch.tensor([1])], backend, grad=False, reduction="sum")
    _check("multi_margin_loss", [x, torch.tensor(4)], backend, reduction="none")
    _check("multilabel_margin_loss", [x, torch.tensor([5, 0, -1, 2, 2, 2])], backend, reduction="mean")
    _check("multilabel_soft_margin_loss", [torch.randn(2, 3, 6, generator=g), torch.rand(2, 3, 6, generator=g)],
           backend, reduction="none")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op,target", [("multi_margin_loss", [0, 5, 1]), ("multi_margin_loss", [-1, 0, 1]),
                                       ("multilabel_margin_loss", [[0, -1, 9, 0, 0]] * 3),   # after the -1 too
                                       ("multilabel_margin_loss", [[0, -2, 1, 0, 0]] * 3)])
def test_out_of_range_targets_raise(backend, op, target):
    x = torch.randn(3, 5)
    t = torch.tensor(target)
    for name in (op, f"{op}_backward"):
        ins = ([torch.tensor(1.0)] if name.endswith("_backward") else []) + [x, t]
        with pytest.raises(InvalidProblemError, match="argument 'target'"):
            _plan(name, *map(_dev, ins), backend=backend).run(*map(_dev, ins))
            bc.check_errors()


def test_dropins_and_autograd():
    g = _g(10)
    f = bt.nn.functional
    x = torch.rand(4, 6, generator=g, dtype=torch.float64) * 0.9 + 0.05
    y = torch.rand(4, 6, generator=g, dtype=torch.float64)
    w = torch.rand(6, generator=g, dtype=torch.float64)
    torch.testing.assert_close(f.binary_cross_entropy(x, y, w, reduce=False),
                               F.binary_cross_entropy(x, y, w, reduce=False))
    torch.testing.assert_close(f.binary_cross_entropy_with_logits(x, y, pos_weight=w),
                               F.binary_cross_entropy_with_logits(x, y, pos_weight=w))
    torch.testing.assert_close(f.kl_div(x.log(), y, reduction="batchmean"), F.kl_div(x.log(), y, reduction="batchmean"))
    torch.testing.assert_close(f.gaussian_nll_loss(x, y, 0.5), F.gaussian_nll_loss(x, y, torch.full_like(x, 0.5)))
    torch.testing.assert_close(f.poisson_nll_loss(x, y, False, True, None, 1e-3),
                               F.poisson_nll_loss(x, y, False, True, None, 1e-3))
    t = torch.tensor([1, 0, 5, 2])
    torch.testing.assert_close(f.multi_margin_loss(x, t, 2, 0.5, w, size_average=False),
                               F.multi_margin_loss(x, t, 2, 0.5, w, size_average=False))
    a = x.clone().requires_grad_(True)
    a2 = x.clone().requires_grad_(True)
    f.triplet_margin_loss(a, y, y.flip(0), swap=True).backward()
    F.triplet_margin_loss(a2, y, y.flip(0), swap=True).backward()
    torch.testing.assert_close(a.grad, a2.grad)
    b = x.clone().requires_grad_(True)
    b2 = x.clone().requires_grad_(True)
    f.binary_cross_entropy(b, y, w).backward()
    F.binary_cross_entropy(b2, y, w).backward()
    torch.testing.assert_close(b.grad, b2.grad)


def test_integer_inputs_promote_as_torch():
    """Integer inputs (and cosine_embedding_loss's bools) are accepted where torch accepts them, computed in the
    floating dtype torch's arithmetic promotes them to (the default dtype), with torch's values."""
    g = _g(12)
    a, b = torch.randint(-5, 6, (4, 6), generator=g), torch.randint(-5, 6, (4, 6), generator=g)
    y = torch.randint(0, 2, (4,), generator=g) * 2 - 1
    cases = [("margin_ranking_loss", (a[:, 0], b[:, 0], y), {"margin": 0.5}),
             ("poisson_nll_loss", (a.abs(), b.abs()), {"log_input": False}),
             ("poisson_nll_loss", (a.clamp(max=3), b), {"reduction": "sum"}),
             ("cosine_embedding_loss", (a, b, y), {"margin": 0.2, "reduction": "none"}),
             ("cosine_embedding_loss", (a > 0, b > 0, y > 0), {"margin": 0.3}),
             ("triplet_margin_loss", (a, b, a.flip(0)), {"p": 1.0, "reduction": "none"})]
    for name, ins, kw in cases:
        want = getattr(F, name)(*ins, **kw)
        got = getattr(bt.nn.functional, name)(*[_dev(t) for t in ins], **kw)
        assert got.dtype == want.dtype == torch.get_default_dtype(), name
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6, msg=name)
    with pytest.raises(Exception):   # a bool difference: torch raises, so does the drop-in
        bt.nn.functional.margin_ranking_loss(a[:, 0] > 0, b[:, 0] > 0, y)


def test_margin_losses_0d_input():
    """A 0-d input is one unbatched row of one class (torch's reading): multi_margin_loss with a 0-d class index,
    multilabel_margin_loss with a 0-d label row; values and gradients as torch, every reduction."""
    from baracuda.testing.checks import grad_pair

    x = torch.tensor(0.7, dtype=torch.float64)
    for red in ("none", "mean", "sum"):
        for name, t, kw in (("multi_margin_loss", torch.tensor(0), {"p": 2, "margin": 2.0}),
                            ("multilabel_margin_loss", torch.tensor(0), {}),
                            ("multilabel_margin_loss", torch.tensor(-1), {})):
            grad_pair(lambda u, f=getattr(bt.nn.functional, name), t=t, kw=kw: f(u, t, reduction=red, **kw),
                      lambda u, f=getattr(F, name), t=t, kw=kw: f(u, t, reduction=red, **kw), x)


def test_gaussian_nll_target_broadcasts():
    """torch judges var's shape against the input's alone and then broadcasts input, target and var: a target of
    (1,) or () or a larger one; values and gradients (input, target, var) as torch, every reduction."""
    from baracuda.testing.checks import grad_pair

    g = _g(13)

    def r(*s):
        return torch.randn(s, generator=g, dtype=torch.float64)
    for xs, ts, vs in (((5,), (1,), (5,)), ((5,), (), (1,)), ((1,), (5,), (1,)), ((5,), (3, 5), (5,)),
                       ((4, 5), (4, 1), (4,)), ((4, 5), (5,), (4, 1))):
        for red in ("none", "mean", "sum"):
            grad_pair(lambda a, b, v, red=red: bt.nn.functional.gaussian_nll_loss(a, b, v, full=True, reduction=red),
                      lambda a, b, v, red=red: F.gaussian_nll_loss(a, b, v, full=True, reduction=red),
                      r(*xs), r(*ts), r(*vs).abs() + 0.1)
    with pytest.raises(ValueError, match="var"):   # var judged against the (1,) input, not the broadcast shape
        bt.nn.functional.gaussian_nll_loss(r(1), r(5), r(5).abs())
    with pytest.raises(ValueError, match="var"):
        F.gaussian_nll_loss(r(1), r(5), r(5).abs())
