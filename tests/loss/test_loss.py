"""Loss-family checks the generic suite does not make: ignore_index rows, label smoothing with weights,
probability targets, out-of-range targets (an error, never an out-of-bounds read), long rows through the
multi-tile (online) path with a forced small tile, and the drop-in adapters (legacy size_average/reduce)."""
from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, class_targets as _targets, grad_pair, loss_pair, on_device as _dev
from baracuda.testing.checks import plan_or_skip as _plan

TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 2e-6), torch.float16: (1e-2, 1e-3),
       torch.bfloat16: (1.6e-2, 1e-2)}
BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _grad(fn, x, *rest, **kw):
    x = x.detach().double().clone().requires_grad_(True)
    y = fn(x, *[r.double() if r is not None and r.is_floating_point() else r for r in rest], **kw)
    gout = torch.ones_like(y) if y.dim() == 0 else torch.linspace(-1, 1, y.numel(), dtype=torch.float64).reshape(y.shape)
    (y * gout).sum().backward()
    return y.detach(), x.grad, gout


def _check_ce(x, t, w=None, backend=Backend.TRITON, op="cross_entropy", peer=F.cross_entropy, **attrs):
    """Forward and backward of baracuda's op vs torch's autograd in f64 on the same rounded inputs."""
    want, want_dx, gout = _grad(peer, x, t, w, **attrs)
    ins = [_dev(x), _dev(t)] + ([_dev(w)] if w is not None else [])
    got, dx = loss_pair(op, ins, gout, backend, **attrs)
    rtol, atol = TOL[x.dtype]
    assert_close(got.cpu(), want.numpy(), rtol, atol, f"{op} fw {attrs}")
    assert_close(dx.cpu(), want_dx.numpy(), 2 * rtol, 2 * atol, f"{op} bw {attrs}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_ignore_index_weights_smoothing(backend, red):
    g = torch.Generator().manual_seed(0)
    x = 3 * torch.randn(9, 13, generator=g)
    w = torch.rand(13, generator=g) + 0.1
    t = _targets(g, 9, 13, ignore=4)
    for ls in (0.0, 0.15):
        _check_ce(x, t, w, backend, reduction=red, ignore_index=4, label_smoothing=ls)
        _check_ce(x, t, None, backend, reduction=red, ignore_index=4, label_smoothing=ls)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_probability_targets(backend, red):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(6, 11, generator=g)
    p = torch.softmax(torch.randn(6, 11, generator=g), -1)
    w = torch.rand(11, generator=g) + 0.1
    _check_ce(x, p, w, backend, reduction=red, label_smoothing=0.2)
    _check_ce(x, p, None, backend, reduction=red)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nll_loss(backend):
    g = torch.Generator().manual_seed(2)
    x = torch.log_softmax(torch.randn(10, 17, generator=g), -1)
    t = _targets(g, 10, 17)
    w = torch.rand(17, generator=g) + 0.1
    for red in ("none", "sum", "mean"):
        _check_ce(x, t, w, backend, op="nll_loss", peer=F.nll_loss, reduction=red)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("op", ["cross_entropy", "nll_loss"])
@pytest.mark.parametrize("bad", [7, -1, 1000])
def test_out_of_range_target_raises(backend, op, bad):
    x = _dev(torch.randn(4, 7))
    t = _dev(torch.tensor([0, bad, -100, 3]))
    with pytest.raises(InvalidProblemError, match=r"argument 'target': expected class indices in \[0, 7\)"):
        _plan(op, x, t, backend=backend).run(x, t)
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("red", ["none", "mean"])
def test_long_rows_forced_small_tile(dt, red):
    """Rows of 150 classes through 16-wide tiles split over 3 programs per row (chunks of 64 columns): the online
    (max, sum) merge over tiles and across chunks, the target and the smoothing sums spanning tiles and chunks."""
    from baracuda.backends.triton.loss import ce_kernels as m

    g = torch.Generator().manual_seed(3)
    x = (4 * torch.randn(5, 150, generator=g)).to(dt)
    t = _targets(g, 5, 150)
    w = (torch.rand(150, generator=g) + 0.1).to(dt)
    with m.forced(tile=16, rows=2, split=3):
        assert "tile16x2-split3" in _plan("cross_entropy", _dev(x), _dev(t), reduction=red).sku.route
        _check_ce(x, t, w, reduction=red, label_smoothing=0.1)
        _check_ce(x, torch.softmax(torch.randn(5, 150, generator=g), -1).to(dt), None, reduction=red)
        _check_ce(torch.log_softmax(x.double(), -1).to(dt), t, w, op="nll_loss", peer=F.nll_loss, reduction=red)


def test_extreme_logits():
    """Logits of +-1e4 (bf16 range): the online max keeps exp finite; the loss is exact up to rounding."""
    x = torch.tensor([[1e4, -1e4, 0.0, 5.0], [-1e4, -1e4, -1e4, -1e4 + 1]])
    t = torch.tensor([0, 3])
    _check_ce(x, t, reduction="none")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dt", [torch.float32, torch.float64])
def test_masked_class_is_finite(backend, dt):
    """A -inf logit (a masked class) with class-index targets: the loss and its gradient are finite, as torch's
    (the masked class's term is 0 * inf only if formed; smoothing makes the loss inf, again as torch), also N-D."""
    g = torch.Generator().manual_seed(6)
    for shape in ((5, 9), (2, 9, 3)):
        x = 2 * torch.randn(shape, generator=g, dtype=dt)
        x[:, 4] = float("-inf")
        x[0, 7] = float("-inf")
        t = _targets(g, shape[:1] + shape[2:], 9)
        t[t == 4] = 1
        t[0] = 2
        w = torch.rand(9, generator=g, dtype=dt) + 0.1
        for red in ("none", "sum", "mean"):
            _check_ce(x, t, w, backend, reduction=red)
            _check_ce(x, t, None, backend, reduction=red, label_smoothing=0.1)   # an inf loss, finite gradient
        y, dx, _ = _grad(F.cross_entropy, x, t)
        assert torch.isfinite(y) and torch.isfinite(dx).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_logits_near_float32_max(backend):
    """Logits of +-3e38 (float32's range ends at 3.4e38): two equal maxima give log 2, not the 0 that forming
    lse = 3e38 + log 2 (== 3e38) and subtracting the logit would."""
    x = torch.tensor([[3e38, -3e38, 3e38], [-3e38, 3e38, 1.0]])
    t = torch.tensor([0, 2])
    _check_ce(x, t, None, backend, reduction="none")
    got = bt.nn.functional.cross_entropy(x, t, reduction="none")
    assert abs(got[0].item() - 0.6931471805599453) < 1e-6 and got[1].item() == pytest.approx(3e38, rel=1e-6)


def test_probability_target_gradient():
    """cross_entropy is differentiable in its probability target (torch's composite: -(1 - eps) w log p scaled by
    the reduction), for every reduction, with weights, smoothing and N-D inputs; the fused training path
    (which returns d input only) steps aside when the target requires grad."""
    g = torch.Generator().manual_seed(7)
    for shape in ((4, 6), (2, 6, 3), (6,)):
        cdim = 0 if len(shape) == 1 else 1
        x = torch.randn(shape, generator=g, dtype=torch.float64)
        p = torch.softmax(torch.randn(shape, generator=g, dtype=torch.float64), cdim)
        w = torch.rand(6, generator=g, dtype=torch.float64) + 0.1
        for kw in ({"reduction": "mean"}, {"reduction": "sum", "weight": w, "label_smoothing": 0.2},
                   {"reduction": "none", "weight": w}):
            def ours(a, b, kw=kw):
                return bt.nn.functional.cross_entropy(a, b, **kw)

            def theirs(a, b, kw=kw):
                return F.cross_entropy(a, b, **kw)
            grad_pair(ours, theirs, x, p)


def test_dropin_signature_and_legacy_args():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(6, 5, generator=g, dtype=torch.float64)
    t = _targets(g, 6, 5)
    w = torch.rand(5, generator=g, dtype=torch.float64) + 0.1
    for kw in ({}, {"reduction": "sum"}, {"size_average": False}, {"reduce": False}, {"label_smoothing": 0.1},
               {"ignore_index": 2, "reduction": "none"}):
        tt = t.masked_fill(t == -100, 2) if "ignore_index" in kw else t
        torch.testing.assert_close(bt.nn.functional.cross_entropy(x, tt, w, **kw), F.cross_entropy(x, tt, w, **kw))
    kw = {"size_average": False}
    lp = torch.log_softmax(x, -1)
    torch.testing.assert_close(bt.nn.functional.nll_loss(lp, t, None, **kw), F.nll_loss(lp, t, None, **kw))


def test_dropin_autograd_bf16_device():
    g = torch.Generator().manual_seed(5)
    x = _dev(torch.randn(8, 37, generator=g).to(torch.bfloat16)).requires_grad_(True)
    t = _dev(_targets(g, 8, 37))
    y = bt.nn.functional.cross_entropy(x, t, label_smoothing=0.1)
    y.backward()
    x2 = x.detach().double().requires_grad_(True)
    F.cross_entropy(x2, t, label_smoothing=0.1).backward()
    assert_close(y.detach().float().cpu(), F.cross_entropy(x2, t, label_smoothing=0.1).detach().cpu().numpy(), 1.6e-2, 1e-2)
    assert_close(x.grad.float().cpu(), x2.grad.cpu().numpy(), 3.2e-2, 2e-2, "dropin grad")


# -- linear_cross_entropy ---------------------------------------------------------------------------
def _lce_inputs(g, n, h, v, dt, bias=False, ignore=-100):
    x = torch.randn(n, h, generator=g).to(dt)
    w = (torch.randn(v, h, generator=g) / h ** 0.5).to(dt)
    t = _targets(g, n, v, ignore=ignore)
    return [x, w, t] + ([(0.3 * torch.randn(v, generator=g)).to(dt)] if bias else [])


def _lce_peer(ins, **attrs):
    from baracuda.ops.loss_ce import _peer

    return _peer(*[a.double() if a.is_floating_point() else a for a in ins], **attrs)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attrs", [{}, {"softcap": 3.0, "z_loss": 1e-2, "label_smoothing": 0.1},
                                   {"reduction": "sum", "ignore_index": 5, "label_smoothing": 0.3}])
def test_linear_cross_entropy_chunks_and_tiles(dt, attrs):
    """Several token chunks (forced chunk=3), multi-tile rows (tile=16 over V=70) and a persistent grid with fewer
    programs than row blocks: loss, dx, dW, db vs torch autograd of the unfused composition (f64)."""
    from baracuda.backends.triton.loss import linear_ce as m
    from baracuda.ops.loss_ce import _tol

    g = torch.Generator().manual_seed(6)
    ins = _lce_inputs(g, 11, 8, 70, dt, bias=True, ignore=attrs.get("ignore_index", -100))
    want = _lce_peer(ins, **attrs)
    with m.forced(chunk=3, tile=16, rows=2, programs=1):
        p = _plan("linear_cross_entropy", *[_dev(a) for a in ins], **attrs)
        assert "chunk3-tile16x2" in p.sku.route
        got = p.run(*[_dev(a) for a in ins])
    for name, o, r in zip(("loss", "dx", "dW", "db"), got, want):
        assert_close(o.cpu(), r.numpy(), *_tol(bc.as_dtype(dt)), f"linear_cross_entropy {name} {attrs}")


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_cross_entropy_autograd(backend):
    """Through baracuda.torch: loss.backward() scales the forward's saved gradients by grad_out."""
    g = torch.Generator().manual_seed(7)
    ins = [_dev(a.double()) if a.is_floating_point() else _dev(a) for a in _lce_inputs(g, 6, 5, 9, torch.float64, True)]
    leaves = [a.clone().requires_grad_(True) if a.is_floating_point() else a for a in ins]
    with bt.preference(bc.PlanPreference(prefer=(backend,))):
        out = bt.call("linear_cross_entropy", leaves, {"softcap": 2.0, "z_loss": 0.1})
    (3.0 * out[0]).backward()
    want = _lce_peer([a.cpu() for a in ins], softcap=2.0, z_loss=0.1)
    for leaf, r in zip([leaves[0], leaves[1], leaves[3]], want[1:]):
        assert_close(leaf.grad.cpu(), 3.0 * r.numpy(), 1e-9, 1e-12, "linear_cross_entropy autograd")


@pytest.mark.parametrize("backend", BACKENDS)
def test_linear_cross_entropy_bad_target(backend):
    ins = [_dev(a) for a in _lce_inputs(torch.Generator().manual_seed(8), 4, 3, 6, torch.float32)]
    ins[2] = _dev(torch.tensor([0, 6, 1, -100]))
    with pytest.raises(InvalidProblemError, match=r"expected class indices in \[0, 6\)"):
        _plan("linear_cross_entropy", *ins, backend=backend).run(*ins)
        bc.check_errors()


@pytest.mark.skipif(DEVICE.type != "cuda", reason="the single-read (coop) chunk kernel runs on the GPU only "
                    "(its programs wait for each other; the interpreter runs them one at a time)")
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attrs", [{}, {"reduction": "sum", "ignore_index": 5, "label_smoothing": 0.3}])
def test_linear_cross_entropy_coop_chunks(dt, attrs):
    """V = 20000 (three 8192-class chunks per row): the chunk's CE runs the coop kernel in place over the chunk's
    logits, over three token chunks (16, 16, 5 rows): loss, dx, dW, db vs the unfused composition in f64; an
    out-of-range target gives a NaN loss with check_values='off' and an error by default."""
    from baracuda.backends.triton.loss import linear_ce as m
    from baracuda.ops.loss_ce import _tol

    g = torch.Generator().manual_seed(16)
    ins = _lce_inputs(g, 37, 16, 20000, dt, bias=True, ignore=attrs.get("ignore_index", -100))
    want = _lce_peer(ins, **attrs)
    dev = [_dev(a) for a in ins]
    with m.forced(chunk=16):
        p = _plan("linear_cross_entropy", *dev, backend=Backend.TRITON, **attrs)
        assert "chunk16-coop8192x3" in p.sku.route
        got = p.run(*dev)
        for name, o, r in zip(("loss", "dx", "dW", "db"), got, want):
            assert_close(o.cpu(), r.numpy(), *_tol(bc.as_dtype(dt)), f"linear_cross_entropy coop {name} {attrs}")
        dev[2] = dev[2].clone()
        dev[2][20] = 20000                           # in the second token chunk
        off = bc.Plan.select(bc.Descriptor.like("linear_cross_entropy", *dev, **attrs), DEVICE,
                             bc.PlanPreference(prefer=(Backend.TRITON,), check_values="off"))
        assert off.sku.backend == Backend.TRITON
        assert torch.isnan(off.run(*dev)[0]).item()
        with pytest.raises(InvalidProblemError, match=r"expected class indices in \[0, 20000\)"):
            p.run(*dev)
            bc.check_errors()


def test_linear_cross_entropy_gemm_math_flag():
    """The chunk GEMMs run under the cuBLAS math flag the plan's preference asks for, whatever the caller's
    global setting (bf16: no reduced-precision split-K sums unless allow_reduced_precision), the caller's flag is
    back after the run, and plan.precision promises what that flag gives."""
    from baracuda.backends.triton.loss import linear_ce as m

    seen = []
    real = torch.mm

    def spy(*a, **k):
        seen.append(torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction)
        return real(*a, **k)

    ins = [_dev(a) for a in _lce_inputs(torch.Generator().manual_seed(9), 5, 4, 7, torch.bfloat16)]
    mm = torch.backends.cuda.matmul
    before = mm.allow_bf16_reduced_precision_reduction
    try:
        for allow in (False, True):
            mm.allow_bf16_reduced_precision_reduction = not allow
            p = bc.Plan.select(bc.Descriptor.like("linear_cross_entropy", *ins), DEVICE,
                               bc.PlanPreference(prefer=(Backend.TRITON,), allow_reduced_precision=allow))
            assert p.sku.backend == Backend.TRITON
            assert p.precision.accumulator == (bc.DType.bf16 if allow else bc.DType.f32)
            seen.clear()
            m.torch.mm = spy
            try:
                p.run(*ins)
            finally:
                m.torch.mm = real
            assert seen and all(s is allow for s in seen), (allow, seen)
            assert mm.allow_bf16_reduced_precision_reduction is (not allow)
    finally:
        mm.allow_bf16_reduced_precision_reduction = before


def test_linear_cross_entropy_chunk_split():
    """Token chunks: cdiv(n, chunk) of them in whole 256-row tiles where that divides (8192 tokens at 1536 a chunk:
    4 x 1280 + 2 x 1536, not 5 x 1536 + 512), contiguous and covering every row, none over the chunk; uniform
    otherwise or under forced(balance=False)."""
    from baracuda.backends.triton.loss.linear_ce import chunks, forced

    for n, chunk in ((8192, 1536), (8200, 1536), (5000, 1024), (11, 3), (1000, 256), (0, 5), (300, 512)):
        got = chunks(n, chunk)
        assert [s for s, _ in got] == [sum(c for _, c in got[:i]) for i in range(len(got))]
        assert sum(c for _, c in got) == n and all(0 < c <= chunk for _, c in got)
        assert len(got) == -(-n // chunk)
    assert [c for _, c in chunks(8192, 1536)] == [1280] * 4 + [1536] * 2
    assert [c for _, c in chunks(11, 3)] == [3, 3, 3, 2]
    with forced(balance=False):
        assert [c for _, c in chunks(8192, 1536)] == [1536] * 5 + [512]


def test_linear_cross_entropy_workspace_budget():
    """At the 8192 x 4096 x 128256 bf16 workload the chunk's logits are 1/4 of the full logits; with dx and dW
    the peak formula of ops/loss_ce.py gives ~1.64 GB above the inputs, ~22% of eager's ~7.4 GB (issue: <= 25%)."""
    from baracuda._core.registry import implementations

    d = bc.Descriptor.make("linear_cross_entropy", ((8192, 4096), "bf16"), ((128256, 4096), "bf16"), ((8192,), "i64"))
    impl = next(i for i in implementations(d.op) if i.backend == Backend.TRITON)
    full = 8192 * 128256 * 2
    ws = impl.workspace_of(d)
    assert ws <= full // 4 + 65536 + 4096
    assert ws + (8192 + 128256) * 4096 * 2 <= 0.25 * (3 * full + 128256 * 4096 * 2)


# -- pointwise regression losses ---------------------------------------------------------------------
PW = ("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss")


@pytest.mark.parametrize("op", PW)
@pytest.mark.parametrize("red", ["sum", "mean"])
def test_pointwise_multi_program_fold(op, red):
    """3 x 5000 elements = 4 programs of 4096: per-program partials folded in a fixed order (bit-identical reruns)."""
    g = torch.Generator().manual_seed(9)
    x, y = torch.randn(3, 5000, generator=g), torch.randn(3, 5000, generator=g)
    p = _plan(op, _dev(x), _dev(y), reduction=red)
    a, b = p.run(_dev(x), _dev(y)), p.run(_dev(x), _dev(y))
    assert torch.equal(a, b)
    want = getattr(F, op)(x.double(), y.double(), reduction=red)
    assert_close(a.cpu(), want.numpy(), 2e-5, 2e-6, f"{op} {red}")


def test_pointwise_dropins():
    g = torch.Generator().manual_seed(10)
    x, y = torch.randn(4, 6, generator=g, dtype=torch.float64), torch.randn(4, 6, generator=g, dtype=torch.float64)
    f = bt.nn.functional
    for got, want in ((f.smooth_l1_loss(x, y, beta=0.3), F.smooth_l1_loss(x, y, beta=0.3)),
                      (f.huber_loss(x, y, "sum", 0.7), F.huber_loss(x, y, "sum", 0.7)),
                      (f.mse_loss(x, y, reduce=False), F.mse_loss(x, y, reduce=False)),
                      (f.l1_loss(x, y, None, None, "sum"), F.l1_loss(x, y, None, None, "sum"))):
        torch.testing.assert_close(got, want)
    with pytest.raises(NotImplementedError, match="weight= argument"):
        f.mse_loss(x, y, weight=torch.ones(4, 6, dtype=torch.float64))


def test_linear_cross_entropy_unbatched_input():
    """A 1-D input (torch takes 1-D or 2-D) is one row with a 0-d class index: loss and gradients as torch."""
    g = torch.Generator().manual_seed(8)
    x = torch.randn(5, generator=g, dtype=torch.float64)
    w = torch.randn(7, 5, generator=g, dtype=torch.float64)
    for t, red in ((torch.tensor(3), "mean"), (torch.tensor(6), "sum")):
        grad_pair(lambda a, b, t=t, red=red: bt.nn.functional.linear_cross_entropy(a, b, t, reduction=red),
                  lambda a, b, t=t, red=red: F.linear_cross_entropy(a, b, t, reduction=red), x, w)


def _lce_case(g, n, h, classes, target, bias=False):
    """x (n, h) or (h,) for n None, linear_weight (C, d_1..d_K, h), a bias of the classes' shape, and a target:
    class indices (some -100) or class probabilities (softmax rows over dim 1, the class dim)."""
    x = torch.randn(*((n,) if n is not None else ()), h, generator=g, dtype=torch.float64)
    w = torch.randn(*classes, h, generator=g, dtype=torch.float64) / h ** 0.5
    logits_shape = ((n,) if n is not None else ()) + tuple(classes)
    if target == "index":
        t = torch.randint(0, classes[0], logits_shape[:1] + logits_shape[2:] if n is not None else (), generator=g)
        if t.dim():
            t[torch.rand(t.shape, generator=g) < 0.25] = -100
    else:
        t = torch.randn(logits_shape, generator=g, dtype=torch.float64).softmax(1 if n is not None else 0)
    return (x, w) + ((0.5 * torch.randn(classes, generator=g, dtype=torch.float64),) if bias else ()), t


@pytest.mark.parametrize("target", ["index", "prob"])
@pytest.mark.parametrize("n,classes", [(6, (5,)), (None, (5,)), (4, (3, 2)), (5, (2, 1, 3, 2))])
@pytest.mark.parametrize("kw", [dict(reduction="none"), dict(reduction="mean", label_smoothing=0.2),
                                dict(reduction="sum", bias=True), dict(reduction="mean", weight=True),
                                dict(reduction="none", weight=True, label_smoothing=0.1, bias=True)])
def test_linear_cross_entropy_composed_forms(target, n, classes, kw):
    """The forms the fused op does not take (a K-dim linear_weight (C, d_1..d_K, H) whose dims after C act as
    cross_entropy's spatial dims, class probabilities, reduction='none', class weights), with bias and label
    smoothing: baracuda's linear + cross_entropy give torch's values and float64 gradients (input, linear_weight,
    linear_bias)."""
    kw = dict(kw)
    g = torch.Generator().manual_seed(11)
    xs, t = _lce_case(g, n, 7, classes, target, bias=kw.pop("bias", False))
    if kw.pop("weight", False):
        kw["weight"] = torch.rand(classes[0], generator=g, dtype=torch.float64) + 0.5

    def run(f):
        return lambda x, w, b=None: f(x, w, t, linear_bias=b, **kw)

    with warnings.catch_warnings():
        warnings.simplefilter("error")      # (no warning of ours for a call we take)
        grad_pair(run(bt.nn.functional.linear_cross_entropy), run(F.linear_cross_entropy), *xs)


def test_linear_cross_entropy_fused_forms_stay_fused():
    """A 2-D linear_weight with class indices and reduction 'mean'/'sum' runs the fused op alone; the other forms
    run linear and cross_entropy; torch's ``options`` (its chunking) changes nothing and warns nothing here
    (torch's own function warns that it ignores them for a K-dim weight)."""
    g = torch.Generator().manual_seed(12)
    (x, w), t = _lce_case(g, 6, 4, (5,), "index")
    (_, wk), tk = _lce_case(g, 6, 4, (3, 2), "index")
    opts = torch.nn.LinearCrossEntropyOptions()
    f = bt.nn.functional.linear_cross_entropy
    for call_, ops in ((lambda: f(x, w, t, reduction="sum", options=opts), ["linear_cross_entropy"]),
                       (lambda: f(x, w, t, reduction="none"), ["linear", "cross_entropy"]),
                       (lambda: f(x, wk, tk, options=opts), ["linear", "cross_entropy"])):
        with torch.no_grad(), bt.record(check=False) as log, warnings.catch_warnings():
            warnings.simplefilter("error")
            call_()
        assert [r["op"] for r in log if r["kind"] == "fw"] == ops
    with pytest.warns(UserWarning, match="options"):
        want = F.linear_cross_entropy(x, wk, tk, options=opts)
    torch.testing.assert_close(f(x, wk, tk, options=opts), want, rtol=1e-12, atol=1e-12)


def test_linear_cross_entropy_composed_errors():
    """torch's refusals are ours (naming the op and the argument); baracuda's softcap / z_loss need the fused form."""
    g = torch.Generator().manual_seed(13)
    (x, w), t = _lce_case(g, 4, 6, (3, 2), "index")
    probs = torch.rand(4, 3, 2, generator=g, dtype=torch.float64)
    cases = [((x, w[..., :5], t), {}, "linear_weight"),                       # in_features
             ((x, w, t), {"linear_bias": torch.zeros(3, dtype=torch.float64)}, "linear_bias"),
             ((x[0], w, t[0]), {}, "input"),                                  # K-dim needs a batched input
             ((x, w, probs), {"ignore_index": 1}, "ignore_index"),            # probabilities take no ignore_index
             ((x[None], w, t), {}, "input"),                                  # 3-D input
             ((x, w[0, 0], t), {"reduction": "none"}, "linear_weight")]       # 1-D weight
    for args, kw, arg in cases:
        with pytest.raises(Exception):
            F.linear_cross_entropy(*args, **kw)
        with pytest.raises(InvalidProblemError, match=f"linear_cross_entropy: argument '{arg}'"):
            bt.nn.functional.linear_cross_entropy(*args, **kw)
    with pytest.raises(bc.UnsupportedError, match="softcap"):
        bt.nn.functional.linear_cross_entropy(x, w, t, softcap=2.0)
