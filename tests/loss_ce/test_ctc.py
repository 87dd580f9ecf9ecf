"""ctc_loss against torch and float64 finite differences: padded and concatenated targets, unbatched input,
blank != 0, zero_infinity, lengths below T / S, repeated labels, the host data checks, and the drop-in.

Gradients: ops/loss_ctc.py returns torch's: the derivative w.r.t. log_probs plus exp(log_probs) * scale (the
gradient of the logits under a log_softmax); against torch.autograd they agree on any log_probs, and through
log_softmax(z) (how ctc_loss is used) the extra term cancels."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing import assert_close, finite_difference_grads
from baracuda.testing.checks import on_device as _dev, plan_or_skip as _plan

BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _labels(g, shape, c, blank):
    t = torch.randint(0, c - 1, shape, generator=g)
    return t + (t >= blank).long()          # never the blank


def _problem(seed, t=12, n=3, c=6, s=5, blank=0, concat=False, batched=True):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(t, n, c, generator=g, dtype=torch.float64)
    tg = _labels(g, (n, s), c, blank)
    tg[0, 1] = tg[0, 0]                      # a repeated label: the path needs a blank between the copies
    il = torch.tensor([t] + [max(1, t - 2 - k) for k in range(1, n)])
    tl_ = torch.tensor([s] + [max(0, s - 1 - k) for k in range(1, n)])
    if concat:
        tg = torch.cat([tg[k, :tl_[k]] for k in range(n)])
    if not batched:
        z, tg, il, tl_ = z[:, 0], tg[0], il[0], tl_[0]
    return z, tg, il, tl_


def _ours(z, tg, il, tl_, backend, **attrs):
    """baracuda's loss of log_softmax(z) and d/dz (through torch's log_softmax backward)."""
    lp = torch.log_softmax(z, -1)
    ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
    loss = _plan("ctc_loss", *ins, backend=backend, **attrs).run(*ins)
    gout = torch.ones_like(loss) if loss.dim() == 0 else torch.linspace(-1, 1, loss.numel(), dtype=loss.dtype,
                                                                         device=loss.device)
    dlp = _plan("ctc_loss_backward", gout, *ins, backend=backend, **attrs).run(gout, *ins)
    zz = z.clone().requires_grad_(True)
    torch.autograd.backward(torch.log_softmax(zz, -1), dlp.cpu())
    return loss.cpu(), zz.grad, gout.cpu()


def _torch(z, tg, il, tl_, gout, **attrs):
    zz = z.clone().requires_grad_(True)
    loss = F.ctc_loss(torch.log_softmax(zz, -1), tg, il, tl_, **attrs)
    (loss * gout).sum().backward()
    return loss.detach(), zz.grad


CASES = [dict(), dict(concat=True), dict(batched=False), dict(blank=5), dict(blank=2, concat=True)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", range(len(CASES)))
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_vs_torch_through_log_softmax(backend, case, red):
    kw = CASES[case]
    z, tg, il, tl_ = _problem(10 + case, **kw)
    attrs = {"reduction": red, "blank": kw.get("blank", 0)}
    loss, dz, gout = _ours(z, tg, il, tl_, backend, **attrs)
    want, want_dz = _torch(z, tg, il, tl_, gout, **attrs)
    assert_close(loss, want.numpy(), 1e-10, 1e-12, f"ctc fw {kw} {red}")
    assert_close(dz, want_dz.numpy(), 1e-9, 1e-12, f"ctc d/dz {kw} {red}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", [dict(), dict(concat=True, blank=3), dict(batched=False)])
def test_grad_is_torchs_convention(backend, case):
    """On unnormalized log_probs the backward is torch's (its autograd, exactly), which is the derivative w.r.t.
    log_probs (float64 finite differences) plus exp(log_probs) * scale_n on the frames t < T_n."""
    z, tg, il, tl_ = _problem(20, t=5, n=2, c=4, s=2, **case)
    lp = torch.log_softmax(z, -1) + 0.3 * torch.randn(z.shape, generator=torch.Generator().manual_seed(1),
                                                      dtype=z.dtype)
    attrs = {"reduction": "mean", "blank": case.get("blank", 0)}
    arrays = [lp.numpy(), tg.numpy(), il.numpy(), tl_.numpy()]
    desc = bc.Descriptor.like("ctc_loss", *arrays, **attrs)
    fd = finite_difference_grads(desc, arrays, [np.asarray(1.7)])[0]
    ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
    g = _dev(torch.tensor(1.7, dtype=torch.float64))
    got = _plan("ctc_loss_backward", g, *ins, backend=backend, **attrs).run(g, *ins).cpu()
    lpt = lp.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(1.7 * F.ctc_loss(lpt, tg, il, tl_, **attrs), lpt)
    assert_close(got, want.numpy(), 1e-9, 1e-12, f"ctc vs torch autograd {case}")
    lp3, got3 = (lp, got) if lp.dim() == 3 else (lp[:, None], got[:, None])
    n = lp3.shape[1]
    frames = (torch.arange(lp3.shape[0])[:, None] < il.reshape(-1)[None, :]).double()     # [T, N]
    scale = 1.7 / (tl_.reshape(-1).clamp_min(1).double() * n)                            # [N]
    extra = lp3.exp() * (frames * scale)[..., None]
    assert_close((got3 - extra).reshape(got.shape), fd, 1e-6, 1e-7, f"ctc derivative + exp term {case}")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("red", ["none", "mean"])
def test_zero_infinity(backend, red):
    """Impossible alignments (T_n < L; a repeated label in too few frames) give inf, or 0 and a zero gradient."""
    z, _, _, _ = _problem(30, t=4, n=3, c=5)
    tg = torch.tensor([[1, 2, 3], [2, 2, 0], [4, 1, 0]])
    il, tl_ = torch.tensor([2, 2, 4]), torch.tensor([3, 2, 2])
    for zi in (False, True):
        attrs = {"reduction": red, "zero_infinity": zi}
        lp = torch.log_softmax(z, -1)
        ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
        loss = _plan("ctc_loss", *ins, backend=backend, **attrs).run(*ins).cpu()
        want = F.ctc_loss(lp, tg, il, tl_, **attrs)
        assert_close(loss, want.numpy(), 1e-10, 1e-12, f"zero_infinity={zi} {red}")
        if zi:
            _, dz, gout = _ours(z, tg, il, tl_, backend, **attrs)
            _, want_dz = _torch(z, tg, il, tl_, gout, **attrs)
            assert_close(dz, want_dz.numpy(), 1e-9, 1e-12, f"zero_infinity grad {red}")
            assert torch.all(dz[:, :2] == 0)


@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_triton_long_recursion_low_precision(dt):
    """T = 40 steps over 2S+1 = 23 states (a 32-state block), bf16/f32 inputs: the f32 recursion vs float64."""
    z, tg, il, tl_ = _problem(40, t=40, n=3, c=9, s=11)
    lp = torch.log_softmax(z, -1).to(dt)
    ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
    got = _plan("ctc_loss", *ins, reduction="none").run(*ins).cpu()
    want = F.ctc_loss(lp.double(), tg, il, tl_, reduction="none")
    rtol = 2e-5 if dt == torch.float32 else 1.6e-2
    assert_close(got, want.numpy(), rtol, rtol, "ctc long fw")
    g = _dev(torch.ones(3, dtype=dt))
    d = _plan("ctc_loss_backward", g, *ins, reduction="none").run(g, *ins).cpu()
    lp64 = lp.double().requires_grad_(True)
    F.ctc_loss(lp64, tg, il, tl_, reduction="none").sum().backward()
    assert_close(d, lp64.grad.numpy(), 2 * rtol, 2 * rtol, "ctc long bw")


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad,match", [
    ("label", r"argument 'targets': expected labels in \[0, 6\)"),
    ("blank", r"argument 'targets': expected labels other than blank=0"),
    ("il", r"argument 'input_lengths': expected values in \[0, 12\]"),
    ("tl", r"argument 'target_lengths': expected values in \[0, 5\]"),
    ("sum", r"argument 'target_lengths': expected a sum of at most"),
])
def test_data_checks(backend, bad, match):
    z, tg, il, tl_ = _problem(50, concat=bad == "sum")
    lp = torch.log_softmax(z, -1)
    if bad == "label":
        tg[1, 0] = 6
    elif bad == "blank":
        tg[2, 0] = 0
    elif bad == "il":
        il[1] = 13
    elif bad == "tl":
        tl_[0] = 6
    else:
        tl_[0] += 1
    ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
    with pytest.raises(InvalidProblemError, match=match):
        _plan("ctc_loss", *ins, backend=backend).run(*ins)


def test_padding_past_target_length_is_not_checked():
    """Entries past target_lengths[n] in padded targets are padding: any value (even blank or out of range)."""
    z, tg, il, tl_ = _problem(60)
    tg[1, -1], tg[2, -1] = 0, 99
    lp = torch.log_softmax(z, -1)
    ins = [_dev(lp), _dev(tg), _dev(il), _dev(tl_)]
    got = _plan("ctc_loss", *ins, reduction="none").run(*ins).cpu()
    assert_close(got, F.ctc_loss(lp, tg.clamp(0, 5), il, tl_, reduction="none").numpy(), 1e-10, 1e-12, "padding")


def test_dropin_tuple_lengths_and_autograd():
    z, tg, il, tl_ = _problem(70, concat=True)
    zz = _dev(z.clone()).requires_grad_(True)
    loss = bt.nn.functional.ctc_loss(torch.log_softmax(zz, -1), _dev(tg), tuple(il.tolist()), tuple(tl_.tolist()),
                                     blank=0, reduction="mean")
    loss.backward()
    z2 = z.detach().clone().requires_grad_(True)
    want = F.ctc_loss(torch.log_softmax(z2, -1), tg, tuple(il.tolist()), tuple(tl_.tolist()))
    want.backward()
    torch.testing.assert_close(loss.cpu(), want)
    torch.testing.assert_close(zz.grad.cpu(), z2.grad)
