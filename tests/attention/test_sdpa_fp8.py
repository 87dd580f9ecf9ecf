"""FP8 (e4m3) sdpa / sdpa_backward (ops/attention_fp8.py): q, k, v f8e4m3 with per-tensor or per-head descales.

The oracle is torch in float64 on the dequantized values (q * q_descale[h], ...): F.scaled_dot_product_attention's
math formula and its autograd for dq / dk / dv -- independent of the NumPy reference, which is checked against it too.

CPU section (Triton's interpreter, TRITON_INTERPRET=1): tiny problems (S <= 40, D 32), per-tensor and per-head
descales, GQA, causal, bshd, a float mask, the reduced-precision plan (P V in e4m3); forward and backward.
GPU section (skipped without CUDA): B2 Hq8 Hkv2 S1024 D128, causal; the error against float64 is at most 2x (plus a
floor) that of torch's bf16 SDPA run on the dequantized values rounded to bf16.
"""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend, MathPrecision  # noqa: E402
from baracuda.testing import backends_for, forced_plan, reference_f64  # noqa: E402
from baracuda.testing.checks import DEVICE  # noqa: E402

F8 = torch.float8_e4m3fn
TRITON = Backend.TRITON in backends_for("sdpa", DEVICE)
interp = pytest.mark.skipif(not TRITON or DEVICE.type == "cuda",
                            reason="the CPU section needs the Triton interpreter (TRITON_INTERPRET=1)")
gpu = pytest.mark.skipif(DEVICE.type != "cuda" or not TRITON, reason="GPU section: needs CUDA and Triton")


def _case(B, Hq, Hkv, Sq, Sk, D, Dv, per_head, seed=0, layout="bhsd", dev="cpu"):
    """fp8 q, k, v (values of N(0, 1) * 2, e4m3-rounded) and f32 descales ([1] or per head, in [0.25, 2])."""
    g = torch.Generator().manual_seed(seed)
    shp = (lambda H, S, d: (B, H, S, d)) if layout == "bhsd" else (lambda H, S, d: (B, S, H, d))
    q, k, v = ((2 * torch.randn(*shp(H, S, d), generator=g)).to(F8).to(dev)
               for H, S, d in ((Hq, Sq, D), (Hkv, Sk, D), (Hkv, Sk, Dv)))
    ds = [(0.25 + 1.75 * torch.rand(h if per_head else 1, generator=g)).to(dev) for h in (Hq, Hkv, Hkv)]
    return (q, k, v), ds


def _dequant(xs, ds, layout):
    """The dequantized q, k, v in float64, bhsd."""
    out = []
    for x, d in zip(xs, ds):
        x = x.to(torch.float64)
        x = x if layout == "bhsd" else x.transpose(1, 2)
        out.append(x * d.to(torch.float64)[None, :, None, None])
    return out


def _oracle(xs, ds, layout, causal, go=None, mask=None):
    """(out, lse, (dq, dk, dv)) in float64 bhsd by torch: the formula, autograd through it."""
    q, k, v = (t.detach().requires_grad_(go is not None) for t in _dequant(xs, ds, layout))
    G = q.shape[1] // k.shape[1]
    s = (q @ k.repeat_interleave(G, 1).transpose(-1, -2)) / math.sqrt(q.shape[-1])
    if mask is not None:
        s = s + mask.to(torch.float64)
    if causal:
        i, j = torch.arange(s.shape[-2])[:, None], torch.arange(s.shape[-1])[None, :]
        s = s.masked_fill(j.to(s.device) > i.to(s.device), -math.inf)
    lse = torch.logsumexp(s, -1)
    out = torch.softmax(s, -1) @ v.repeat_interleave(G, 1)
    grads = None
    if go is not None:
        gb = go.to(torch.float64) if layout == "bhsd" else go.to(torch.float64).transpose(1, 2)
        grads = torch.autograd.grad(out, (q, k, v), gb)
    return out.detach(), lse.detach(), grads


def _np(t):
    """A CPU tensor as NumPy (f8e4m3 through ml_dtypes, bf16 as f32: exact)."""
    if t.dtype == F8:
        import ml_dtypes

        return t.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn)
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


def _bhsd(t, layout):
    return t.to(torch.float64) if layout == "bhsd" else t.to(torch.float64).transpose(1, 2)


def _err(got, want):
    return (got.to(torch.float64).cpu() - want.cpu()).abs().max().item()


def _run(xs, ds, attrs, extras=(), pref=None, seed=1):
    """Our forward and backward (Triton) and the oracle's."""
    lay = attrs.get("layout", "bhsd")
    fwd = forced_plan(bc.Descriptor.like("sdpa", *xs, *extras, *ds, has_descale=True, **attrs), DEVICE,
                      Backend.TRITON, **(pref or {}))
    assert not isinstance(fwd, str), fwd
    out, lse = fwd.run(*xs, *extras, *ds)
    assert out.dtype == torch.bfloat16 and lse.dtype == torch.float32
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed)).to(torch.bfloat16).to(out.device)
    bw_in = (go, *xs, out, lse, *extras, *ds)
    bwd = forced_plan(bc.Descriptor.like("sdpa_backward", *bw_in, has_descale=True, **attrs), DEVICE, Backend.TRITON)
    assert not isinstance(bwd, str), bwd
    grads = bwd.run(*bw_in)
    assert all(g.dtype == torch.bfloat16 for g in grads)
    ro, rl, rg = _oracle(xs, ds, lay, attrs.get("causal", "none") != "none", go, extras[0] if extras else None)
    return fwd, (out, lse, grads), (ro, rl, rg), go


def _bf16_errors(xs, ds, attrs, extras, go, ref):
    """The errors (out, dq, dk, dv) against ``ref`` of our bf16 kernels run on the dequantized values rounded to
    bf16: the baseline of the precision contract."""
    lay = attrs.get("layout", "bhsd")
    xb = [(_bhsd(x, lay) * d.double()[None, :, None, None]).to(torch.bfloat16) for x, d in zip(xs, ds)]
    xb = xb if lay == "bhsd" else [x.transpose(1, 2) for x in xb]
    ex = tuple(m.to(torch.bfloat16) for m in extras)
    fwd = forced_plan(bc.Descriptor.like("sdpa", *xb, *ex, **attrs), DEVICE, Backend.TRITON)
    out, lse = fwd.run(*xb, *ex)
    bw = (go, *xb, out, lse, *ex)
    grads = forced_plan(bc.Descriptor.like("sdpa_backward", *bw, **attrs), DEVICE, Backend.TRITON).run(*bw)
    return [_err(_bhsd(a, lay), w) for a, w in zip((out, *grads), (ref[0], *ref[2]))]


def _check(ours, ref, lay, what, base=None):
    """out within 2^-6 of max |out|, gradients within 2^-5 of their largest entry (the inputs are harsh: scores of
    std ~7, P nearly one-hot, so rounding P / dS / out to bf16 (2^-9 relative) before the products and the cancelling
    dS = P (dP - delta) give errors of a few bf16 quanta of the largest entry: 8x that); lse within 1e-4 (f32
    arithmetic on a few units).  ``base``: the bf16 kernels' errors on the same values; ours must be <= 2x + 2^-8 of
    the largest entry (the contract: FP8 inputs cost no accuracy beyond bf16 attention's)."""
    (out, lse, grads), (ro, rl, rg) = ours, ref
    errs = [_err(_bhsd(out, lay), ro)]
    assert errs[0] <= 2 ** -6 * ro.abs().max().item(), f"{what}: out {errs[0]}"
    assert _err(lse, rl) <= 1e-4 * max(1.0, rl.abs().max().item()), f"{what}: lse"
    for name, g, w in zip(("dq", "dk", "dv"), grads, rg):
        assert torch.isfinite(g).all(), f"{what}: {name} not finite"
        errs.append(_err(_bhsd(g, lay), w))
        assert errs[-1] <= 2 ** -5 * w.abs().max().item(), f"{what}: {name} {errs[-1]}"
    if base is not None:
        for name, e, b, w in zip(("out", "dq", "dk", "dv"), errs, base, (ro, *rg)):
            assert e <= 2 * b + 2 ** -8 * w.abs().max().item(), f"{what}: {name} {e} vs bf16's {b}"


# the reduced-precision plan rounds P to e4m3 (2^-4 relative, entries below 2^-10 flushed): 2^-3 of max |out|
FP8_PV = 2 ** -3

_CASES = [
    # name, (B, Hq, Hkv, Sq, Sk, D, Dv), per_head, attrs
    ("per-tensor", (1, 2, 2, 24, 40, 32, 32), False, {}),
    ("per-head-gqa-causal", (1, 4, 2, 40, 40, 32, 32), True, {"causal": "top_left"}),
    ("per-head-bshd-dv", (2, 2, 1, 17, 33, 32, 16), True, {"layout": "bshd"}),
]


@interp
@pytest.mark.parametrize("case", _CASES, ids=lambda c: c[0])
def test_fp8_fwd_bwd_interpreter(case):
    name, dims, per_head, attrs = case
    lay = attrs.get("layout", "bhsd")
    xs, ds = _case(*dims, per_head, layout=lay)
    fwd, ours, ref, go = _run(xs, ds, attrs)
    assert fwd.sku.precision.math == MathPrecision.BF16
    assert "fp8,pv-bf16" in fwd.sku.route
    _check(ours, ref, lay, name, _bf16_errors(xs, ds, attrs, (), go, ref))


@interp
def test_fp8_float_mask_interpreter():
    xs, ds = _case(1, 2, 1, 20, 24, 32, 32, True, seed=3)
    mask = torch.randn(20, 24, generator=torch.Generator().manual_seed(4))     # f32, added to the score
    fwd, ours, ref, go = _run(xs, ds, {"has_mask": True}, extras=(mask,))
    _check(ours, ref, "bhsd", "float mask")


@interp
def test_fp8_reduced_precision_pv_interpreter():
    """allow_reduced_precision: P V in e4m3 (math fp8), within its looser bound; the default is tighter."""
    xs, ds = _case(1, 4, 2, 40, 40, 32, 32, True, seed=5)
    attrs = {"causal": "top_left"}
    vt = xs[2].transpose(2, 3).contiguous().transpose(2, 3)   # key-contiguous v (the K-major e4m3 operand layout)
    for v in (xs[2], vt):
        fwd, (out, lse, _), (ro, rl, _), _ = _run((*xs[:2], v), ds, attrs, pref={"allow_reduced_precision": True})
        assert fwd.sku.precision.math == MathPrecision.FP8 and "pv-fp8" in fwd.sku.route
        vmax = ro.abs().max().item()
        assert _err(out, ro) <= FP8_PV * vmax
        assert _err(lse, rl) <= 1e-4 * max(1.0, rl.abs().max().item())


def test_fp8_reference_matches_torch():
    """The NumPy reference (dequantize, then the f64 formula) against the torch oracle, forward and backward."""
    xs, ds = _case(2, 4, 2, 7, 9, 8, 4, True, seed=7)
    d = bc.Descriptor.like("sdpa", *xs, *ds, has_descale=True, causal="top_left")
    out, lse = reference_f64(d, [_np(t) for t in (*xs, *ds)])
    go = torch.randn(2, 4, 7, 4, generator=torch.Generator().manual_seed(8)).to(torch.bfloat16)
    ro, rl, rg = _oracle(xs, ds, "bhsd", True, go)
    assert _err(torch.as_tensor(out), ro) < 1e-12 and _err(torch.as_tensor(lse), rl) < 1e-12
    bw = (go, *xs, torch.as_tensor(out).to(torch.bfloat16), torch.as_tensor(lse).float(), *ds)
    db = bc.Descriptor.like("sdpa_backward", *bw, has_descale=True, causal="top_left")
    # out / lse rounded to bf16 / f32 for the saved operands: delta = rowsum(dO * out) moves by ~2^-9 relative
    for g, w in zip(reference_f64(db, [_np(t) for t in bw]),
                    rg):
        assert _err(torch.as_tensor(g), w) <= 2 ** -7 * w.abs().max().item()


def test_fp8_descale_semantics_and_refusals():
    """No descale operands = descale 1; out_dtype f16; cuDNN refuses FP8 with its reason."""
    xs, ds = _case(1, 2, 2, 5, 6, 8, 8, False, seed=9)
    d1 = bc.Descriptor.like("sdpa", *xs)
    one = [torch.ones(1)] * 3
    d2 = bc.Descriptor.like("sdpa", *xs, *one, has_descale=True)
    a, b = reference_f64(d1, [_np(t) for t in xs]), reference_f64(d2, [_np(t) for t in (*xs, *one)])
    assert all(_err(torch.as_tensor(x), torch.as_tensor(y)) == 0 for x, y in zip(a, b))
    assert bc.Descriptor.like("sdpa", *xs, out_dtype="f16").outputs[0].dtype == bc.DType.f16
    from baracuda.backends.nvidia.cudnn_sdpa import supports
    assert "FP8" in supports(d1)


@gpu
@pytest.mark.parametrize("per_head", [False, True], ids=["per-tensor", "per-head"])
def test_fp8_gpu_vs_bf16_error(per_head):
    """Error against float64 <= 2x torch bf16 SDPA's on the dequantized values rounded to bf16 (+ a floor of 2^-10
    of the largest entry where bf16's own error is tiny)."""
    import torch.nn.functional as F

    xs, ds = _case(2, 8, 2, 1024, 1024, 128, 128, per_head, dev="cuda")
    fwd, (out, lse, grads), (ro, rl, rg), go = _run(xs, ds, {"causal": "top_left"})
    qb, kb, vb = (t.to(torch.bfloat16).requires_grad_() for t in _dequant(xs, ds, "bhsd"))
    ob = F.scaled_dot_product_attention(qb, kb, vb, is_causal=True, enable_gqa=True)
    gb = torch.autograd.grad(ob, (qb, kb, vb), go)
    for name, ours_, bf, want in (("out", out, ob, ro), *zip(("dq", "dk", "dv"), grads, gb, rg)):
        floor = 2 ** -10 * want.abs().max().item()
        assert _err(ours_, want) <= 2 * _err(bf, want) + floor, name


@gpu
def test_fp8_gpu_reduced_precision():
    xs, ds = _case(2, 8, 2, 1024, 1024, 128, 128, True, dev="cuda")
    fwd, (out, _, _), (ro, _, _), _ = _run(xs, ds, {"causal": "top_left"}, pref={"allow_reduced_precision": True})
    assert _err(out, ro) <= FP8_PV * ro.abs().max().item()


@interp
def test_fp8_backward_plan_interpreter():
    """The spec's grad rule (BackwardPlan, as autograd runs it) with a float mask and per-head descales: gradients of
    the dequantized q / k / v in bf16, none for the mask and the descales."""
    xs, ds = _case(1, 4, 2, 20, 24, 32, 32, True, seed=3)
    mask = torch.randn(20, 24, generator=torch.Generator().manual_seed(4))
    d = bc.Descriptor.like("sdpa", *xs, mask, *ds, has_mask=True, has_descale=True, causal="top_left")
    pref = bc.PlanPreference(prefer=(Backend.TRITON,))
    out, lse = bc.Plan.select(d, DEVICE, pref).run(*xs, mask, *ds)
    bw = bc.BackwardPlan.select(d, DEVICE, pref)
    arrays, names = [*xs, mask, *ds], d.spec.arg_names
    saved = {n: arrays[names.index(n)] if n in names else (out if n == "out0" else lse) for n in bw.saves}
    go = torch.randn(out.shape, generator=torch.Generator().manual_seed(5)).to(torch.bfloat16)
    got = bw.run(go, None, **saved)
    assert got[3:] == (None,) * 4
    _, _, rg = _oracle(xs, ds, "bhsd", True, go, mask)
    for name, g, w in zip(("dq", "dk", "dv"), got, rg):
        assert g.dtype == torch.bfloat16 and _err(g, w) <= 2 ** -5 * w.abs().max().item(), name
