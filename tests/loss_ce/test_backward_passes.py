"""The trailing backward rows read their input once (issue 16, item 4): cross_entropy_backward from the forward's
saved lse, amax/amin and var/std backward from one tile per reduced row.  Values against float64 torch autograd
(every cross_entropy form, amax ties, var corrections incl. N - correction <= 0), and the number of Triton kernels
each backward plan launches, counted under the interpreter (no GPU needed)."""
from __future__ import annotations

import contextlib

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda._core.spec import saved_names
from baracuda.backends.triton._lib.interp import INTERPRETING
from baracuda.testing import assert_close
from baracuda.testing.checks import DEVICE, class_targets as _targets, on_device as _dev

PREF = bc.PlanPreference(prefer=(Backend.TRITON,))


@contextlib.contextmanager
def _launches():
    """Counts the Triton kernel launches in the block (the interpreter runs each launch through
    InterpretedFunction.run)."""
    from triton.runtime import interpreter

    seen: list = []
    real = interpreter.InterpretedFunction.run

    def run(self, *a, **k):
        seen.append(getattr(self.fn, "__name__", "?"))
        return real(self, *a, **k)

    interpreter.InterpretedFunction.run = run
    try:
        yield seen
    finally:
        interpreter.InterpretedFunction.run = real


def _backward(op, xs, gouts, **attrs):
    """(forward plan outputs, backward gradients, kernel names the backward launched) through the Plan API."""
    desc = bc.Descriptor.like(op, *xs, **attrs)
    outs = bc.Plan.select(desc, DEVICE, PREF).run(*xs)
    outs = outs if isinstance(outs, tuple) else (outs,)
    bw = bc.BackwardPlan(desc, DEVICE, PREF, needs=(True,) + (False,) * (len(xs) - 1))   # d input only
    # one fused backward op (cross_entropy's plan also holds the lse gradient's softmax / mul / add: traced for every
    # output's gradient, replayed only for those given; the launches count)
    assert bw.skus[0].op.endswith("_backward") and bw.skus[0].backend == Backend.TRITON, bw.skus
    assert len(bw.skus) == 1 or op == "cross_entropy", bw.skus
    names = desc.spec.arg_names
    saved = {n: xs[names.index(n)] if n in names else outs[0 if n == "out" else int(n[3:])]
             for n in saved_names(desc)}
    gs = [None if g is None else _dev(g) for g in gouts]
    with _launches() as seen:
        got = bw.run(*gs, **saved)
    return outs, got, seen


def _torch_grad(fn, x, *rest, gout):
    x64 = x.detach().double().requires_grad_(True)
    y = fn(x64, *rest)
    (y * gout.double()).sum().backward()
    return x64.grad


# -- cross_entropy: every form, p from the saved lse -------------------------------------------------------------
_CE_FORMS = [  # (shape, target kind, weighted, attrs, kernels in the backward)
    ((6, 13), "index", False, {"reduction": "none"}, 1),
    ((6, 13), "index", True, {"reduction": "sum", "ignore_index": 2}, 1),
    ((6, 13), "index", False, {"reduction": "mean", "label_smoothing": 0.1}, 2),     # + the mean's denominator
    ((6, 13), "index", True, {"reduction": "none", "label_smoothing": 0.2}, 1),      # fused tile: b from the tile
    ((5, 70), "index", True, {"reduction": "sum", "label_smoothing": 0.2}, 2),       # long rows: + a row-sum pass
    ((5, 70), "index", False, {"reduction": "none"}, 1),                             # long rows, lse only
    ((5, 70), "prob", False, {"reduction": "sum"}, 2),
    ((6, 13), "prob", True, {"reduction": "mean", "label_smoothing": 0.1}, 2),
    ((2, 5, 7), "index", True, {"reduction": "none", "label_smoothing": 0.1}, 1),    # N-D small classes
    ((2, 5, 7), "index", False, {"reduction": "mean", "ignore_index": 1}, 2),
    ((2, 4, 3), "prob", False, {"reduction": "none"}, 1),
    ((9,), "index", False, {"reduction": "none"}, 1),                                # unbatched
]


@pytest.mark.skipif(not INTERPRETING and DEVICE.type != "cuda", reason="Triton runs under the interpreter or a GPU")
@pytest.mark.parametrize("form", _CE_FORMS, ids=lambda f: f"{f[0]}-{f[1]}-w{int(f[2])}-{f[3]}")
def test_cross_entropy_backward_from_saved_lse(form):
    """dx from the lse the forward saved (the forward's second output, the rows' logsumexp in f32), against torch
    autograd in float64, and the launches of the backward plan (one kernel but for the mean's denominator and the
    row sums of w y' that probability targets / smoothing with class weights need on rows beyond one tile)."""
    from baracuda.backends.triton.loss.ce_kernels import forced

    shape, kind, weighted, attrs, kernels = form
    g = torch.Generator().manual_seed(sum(shape))
    x = 2 * torch.randn(shape, generator=g)
    c = shape[0] if len(shape) == 1 else shape[1]
    rows = () if len(shape) == 1 else (shape[0],) + shape[2:]
    if kind == "prob":
        t = torch.softmax(torch.randn(shape, generator=g), 0 if len(shape) == 1 else 1)
    else:
        t = _targets(g, rows, c, ignore=attrs.get("ignore_index", -100)) if rows else torch.tensor(3)
    w = torch.rand(c, generator=g) + 0.1 if weighted else None
    xs = [_dev(x), _dev(t)] + ([_dev(w)] if w is not None else [])
    red = attrs["reduction"]
    gout = torch.randn(rows if red == "none" else (), generator=g)
    glse = torch.randn(rows, generator=g)
    with forced(tile=16) if c > 16 else contextlib.nullcontext():   # rows of 70: 5 tiles (split under the GPU too)
        (loss, lse), (dx, *_), seen = _backward("cross_entropy", xs, [gout, None], **attrs)
        _, (dx2, *_), _ = _backward("cross_entropy", xs, [gout, glse], **attrs)
    cdim = 0 if len(shape) == 1 else 1
    assert_close(lse.cpu(), torch.logsumexp(x.double(), cdim).numpy(), 2e-6, 2e-6, "lse")
    tt = t.double() if kind == "prob" else t

    def peer(a, lse_g=None):
        y = F.cross_entropy(a, tt, weight=None if w is None else w.double(), **attrs)
        return y if lse_g is None else (y, torch.logsumexp(a, cdim))

    assert_close(dx.cpu(), _torch_grad(peer, x, gout=gout).numpy(), 4e-5, 4e-6, f"dx {form}")
    x64 = x.double().requires_grad_(True)
    y, ls = peer(x64, glse)
    ((y * gout.double()).sum() + (ls * glse.double()).sum()).backward()
    assert_close(dx2.cpu(), x64.grad.numpy(), 4e-5, 4e-6, f"dx with the lse's gradient {form}")
    if INTERPRETING:
        assert len(seen) == kernels, seen


# -- amax / amin: ties split evenly, one read -------------------------------------------------------------------
@pytest.mark.skipif(not INTERPRETING and DEVICE.type != "cuda", reason="Triton runs under the interpreter or a GPU")
@pytest.mark.parametrize("op", ["amax", "amin"])
@pytest.mark.parametrize("shape,dims", [((5, 40), (1,)), ((40, 6), (0,)), ((3, 9000), (1,)), ((3, 4, 5), (0, 2))])
def test_extremum_backward_ties(op, shape, dims):
    """Values rounded to halves so that maxima tie (ties share the gradient evenly, as torch); 9000-wide rows take
    the two-pass form (longer than one tile), the others one tile read once.  One kernel either way."""
    g = torch.Generator().manual_seed(3)
    x = torch.round(2 * torch.randn(shape, generator=g)) / 2
    if shape == (3, 9000):
        x[0, ::100] = x[0].max()    # 90 ties in a long row
    out_shape = tuple(1 if i in dims else s for i, s in enumerate(shape))
    gout = torch.randn(tuple(s for i, s in enumerate(out_shape) if i not in dims), generator=g)
    _, (dx,), seen = _backward(op, [_dev(x)], [gout], dims=dims)
    want = _torch_grad(lambda a: getattr(torch, op)(a, dim=dims), x, gout=gout)
    assert_close(dx.cpu(), want.numpy(), 1e-6, 1e-7, f"{op} {shape} {dims}")
    if INTERPRETING:
        assert seen == ["_bw_kernel"], seen
        from baracuda.backends.triton.reduction.stats import single_tile
        r = int(np.prod([shape[d] for d in dims]))
        assert (r <= single_tile(4)) == (shape != (3, 9000))


# -- var / std: corrections, N - correction <= 0, one read --------------------------------------------------------
@pytest.mark.skipif(not INTERPRETING and DEVICE.type != "cuda", reason="Triton runs under the interpreter or a GPU")
@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("corr", [0.0, 1.0, 2.0])
@pytest.mark.parametrize("shape,dims,keep", [((4, 33), (1,), False), ((6, 5, 3), (0, 2), True), ((2, 9000), (1,), False),
                                             ((3, 2), (1,), False)])
def test_moment_backward(op, corr, shape, dims, keep):
    """dx = g 2 (x - mean) / (N - correction) (std: / 2 std) against torch autograd in float64, for correction
    0 / 1 / 2 (N = 2 with correction 2: N - correction = 0, torch's unclamped inf / NaN), any dims and keepdim;
    9000-wide rows take the two-pass form.  One kernel."""
    g = torch.Generator().manual_seed(4)
    x = 1e3 + torch.randn(shape, generator=g)   # a large mean: x - mean from the shifted sum keeps its digits
    out = getattr(torch, op)(x, dim=dims, correction=corr, keepdim=keep)
    gout = torch.randn(out.shape, generator=g)
    _, (dx,), seen = _backward(op, [_dev(x)], [gout], dims=dims, correction=corr, keepdim=keep)
    x64 = x.double().requires_grad_(True)
    (getattr(torch, op)(x64, dim=dims, correction=corr, keepdim=keep) * gout.double()).sum().backward()
    want = x64.grad.numpy()
    got = dx.cpu().numpy()
    assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    assert_close(got[fin], want[fin], 2e-4, 1e-6, f"{op} {shape} {dims} corr={corr}")
    if INTERPRETING:
        assert seen == ["_var_bw_kernel"], seen
