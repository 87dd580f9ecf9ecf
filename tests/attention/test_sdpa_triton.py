"""The Triton FlashAttention kernels (backends/triton/attention/flash_fwd.py, flash_bwd.py) against float64 formulas.

CPU section (Triton's interpreter, TRITON_INTERPRET=1; skipped where the Triton backend cannot run): tiny problems
(S <= 48, D 16 / 24, a few heads), each feature once, forward and backward against the NumPy float64 reference; the
kernels' block-band logic with 16 x 16 tiles (masked edge blocks, full interior blocks, skipped blocks); rows with no
allowed key; strided views read in place; deterministic GQA dK / dV; routes, precision and refusals.

GPU section (skipped without CUDA; the lead runs it on the H100): the matrix of dtypes x head dims 32..256 (80 / 96 /
160 / 192 padded) x GQA ratios x causal alignments x masks, forward and backward, and the precision contract of the
issue: our error against a float64 formula is <= 2x torch SDPA's error in the same dtype (+ a floor for the cases
where torch's own error is ~0).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend, MathPrecision  # noqa: E402
from baracuda.testing import assert_close, backends_for, forced_plan, reference_f64  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV  # noqa: E402

TRITON = Backend.TRITON in backends_for("sdpa", DEVICE)
interp = pytest.mark.skipif(not TRITON or DEVICE.type == "cuda",
                            reason="the CPU section needs the Triton interpreter (TRITON_INTERPRET=1)")
gpu = pytest.mark.skipif(DEVICE.type != "cuda" or not TRITON, reason="GPU section: needs CUDA and Triton")

# f32 on the interpreter: the dots are exact f32 ("ieee"), exp2 / log2 to an ulp; the outputs are convex
# combinations of v rows (|v| < ~5) and lse a few units: 2e-5 covers the f32 roundings of D <= 24 term dots, the
# online rescaling and the final division.  Gradients sum Sk (Sq) products more: 1e-4.
F32_TOL, F32_GRAD_TOL = (2e-5, 2e-5), (1e-4, 1e-4)


def _rand(g, *shape, dtype=torch.float32):
    return torch.randn(*shape, generator=g, dtype=torch.float64).to(dtype)


def _operands(B, Hq, Hkv, Sq, Sk, D, Dv, layout="bhsd", seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    shp = (lambda H, S, d: (B, H, S, d)) if layout == "bhsd" else (lambda H, S, d: (B, S, H, d))
    return _rand(g, *shp(Hq, Sq, D), dtype=dtype), _rand(g, *shp(Hkv, Sk, D), dtype=dtype), \
        _rand(g, *shp(Hkv, Sk, Dv), dtype=dtype)


def _triton(op, *xs, pref=None, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *xs, **attrs), DEVICE, Backend.TRITON, **(pref or {}))
    assert not isinstance(p, str), p
    return p


def _fwd_bwd(xs, extras, attrs, seed=1):
    """(ours, reference) for the forward (out, lse) and the backward (dq, dk, dv) of one problem."""
    q, k, v = xs
    fwd = _triton("sdpa", q, k, v, *extras, **attrs)
    out, lse = fwd.run(q, k, v, *extras)
    ref_out, ref_lse = reference_f64(fwd.desc, [t.numpy() for t in (q, k, v, *extras)])
    g = torch.Generator().manual_seed(seed)
    go = _rand(g, *out.shape, dtype=q.dtype)
    bw_in = (go, q, k, v, out, lse, *extras)
    bwd = _triton("sdpa_backward", *bw_in, **attrs)
    grads = bwd.run(*bw_in)
    ref_grads = reference_f64(bwd.desc, [t.numpy() for t in bw_in])
    return (out, lse), (ref_out, ref_lse), grads, ref_grads


def _check(xs, extras, attrs, what):
    ours, ref, grads, ref_grads = _fwd_bwd(xs, extras, attrs)
    for name, a, b in zip(("out", "lse"), ours, ref):
        assert not torch.isnan(a).any(), f"{what}: NaN in {name}"
        assert_close(a, b, *F32_TOL, f"{what} {name}")
    for name, a, b in zip(("dq", "dk", "dv"), grads, ref_grads):
        assert torch.isfinite(a).all(), f"{what}: non-finite {name}"
        assert_close(a, b, *F32_GRAD_TOL, f"{what} {name}")


# (name, (B, Hq, Hkv, Sq, Sk, D, Dv), layout, attrs, extras builder) -- each feature once
def _bool_mask(g, B, Hq, Sq, Sk):
    return torch.rand(B, 1, Sq, Sk, generator=g) > 0.3


def _float_mask(g, B, Hq, Sq, Sk):
    return torch.randn(Sq, Sk, generator=g)


def _slopes(g, B, Hq, Sq, Sk):
    return torch.rand(B, Hq, generator=g)


FEATURES = [
    ("plain-gqa", (2, 4, 2, 37, 45, 24, 24), "bhsd", {}, ()),
    ("causal-top-left-bshd", (1, 4, 1, 40, 33, 16, 24), "bshd", {"causal": "top_left"}, ()),
    ("causal-bottom-right-sq>sk", (1, 2, 2, 45, 30, 16, 16), "bhsd", {"causal": "bottom_right"}, ()),
    ("window", (1, 2, 1, 33, 47, 24, 16), "bhsd", {"window_left": 5, "window_right": 3}, ()),
    ("softcap-scale", (1, 2, 2, 20, 28, 16, 16), "bshd", {"softcap": 2.0, "scale": 0.7}, ()),
    ("alibi", (2, 2, 1, 21, 30, 16, 16), "bhsd", {"has_alibi": True}, (_slopes,)),
    ("bool-mask", (2, 2, 2, 24, 40, 16, 16), "bhsd", {"has_mask": True}, (_bool_mask,)),
    ("float-mask", (1, 4, 2, 30, 30, 24, 24), "bhsd", {"has_mask": True, "causal": "top_left"}, (_float_mask,)),
    ("dropout", (1, 2, 1, 24, 31, 16, 16), "bshd", {"dropout_p": 0.3, "seed": 2 ** 35 + 7, "offset": 11}, ()),
]


@interp
@pytest.mark.parametrize("case", FEATURES, ids=lambda c: c[0])
def test_forward_and_backward_match_the_float64_reference(case):
    name, (B, Hq, Hkv, Sq, Sk, D, Dv), layout, attrs, builders = case
    xs = _operands(B, Hq, Hkv, Sq, Sk, D, Dv, layout)
    g = torch.Generator().manual_seed(3)
    extras = tuple(b(g, B, Hq, Sq, Sk) for b in builders)
    _check(xs, extras, dict(attrs, layout=layout), name)


@interp
@pytest.mark.parametrize("layout,causal,view", [("bhsd", "none", "dense"), ("bshd", "bottom_right", "dense"),
                                                ("bhsd", "top_left", "misaligned")])
def test_tma_path_matches_the_pointer_path_and_the_reference(monkeypatch, layout, causal, view):
    """With BARACUDA_FLASH_TMA=1, 16-bit fixed-length problems address q / k / v / out (and the dQ kernel's loop
    tiles) through TMA tensor descriptors (the interpreter emulates them); the route says so.  Against the pointer
    kernels (the default) and the float64 reference: f16 (10-bit mantissa) outputs of unit-scale softmax averages agree to a few ulps
    (2e-3), gradients summing ~40 products to 1e-2.  A view whose rows are not 16-byte aligned (D = 40 slice of a
    41-wide buffer, odd start) takes the pointer kernels at run time with the same answers."""
    B, Hq, Hkv, S, D = 1, 4, 2, 40, 40
    g = torch.Generator().manual_seed(7)
    shp = (lambda H: (B, H, S, D + 1)) if layout == "bhsd" else (lambda H: (B, S, H, D + 1))
    if view == "misaligned":
        q, k, v = (_rand(g, *shp(h), dtype=torch.float16)[..., 1:] for h in (Hq, Hkv, Hkv))
    else:
        q, k, v = (_rand(g, *shp(h), dtype=torch.float16)[..., 1:].contiguous() for h in (Hq, Hkv, Hkv))
    attrs = dict(layout=layout, causal=causal)
    go = _rand(g, *q.shape, dtype=torch.float16)

    def run():
        fwd = _triton("sdpa", q, k, v, **attrs)
        out, lse = fwd.run(q, k, v)
        bwd = _triton("sdpa_backward", go, q, k, v, out, lse, **attrs)
        return fwd, bwd, (out, lse, *bwd.run(go, q, k, v, out, lse))

    monkeypatch.setenv("BARACUDA_FLASH_TMA", "1")
    fwd, bwd, tma = run()
    assert ",tma" in fwd.sku.route and ",tma" in bwd.sku.route, (fwd.sku.route, bwd.sku.route)
    monkeypatch.delenv("BARACUDA_FLASH_TMA")
    fwd0, bwd0, ptr = run()
    assert ",tma" not in fwd0.sku.route and ",tma" not in bwd0.sku.route
    ref_out, ref_lse = reference_f64(fwd.desc, [t.numpy() for t in (q, k, v)])
    ref_grads = reference_f64(bwd.desc, [t.numpy() for t in (go, q, k, v, tma[0], tma[1])])
    refs = (ref_out, ref_lse, *ref_grads)
    for name, a, b, r in zip(("out", "lse", "dq", "dk", "dv"), tma, ptr, refs):
        tol = (2e-3, 2e-3) if name in ("out", "lse") else (1e-2, 1e-2)
        assert_close(a.float(), b.float(), *tol, f"tma vs pointer {name}")
        assert_close(a.float(), torch.as_tensor(r).float(), *tol, f"tma vs reference {name}")


@interp
@pytest.mark.parametrize("block_size", [16, 12], ids=["tile-aligned", "element"])
def test_block_mask_skips_tiles_or_masks_elements(block_size):
    """block_size 16: tiles shrink to 16 and each reads one block-mask entry (False tiles are skipped); 12: the
    entries are looked up per element."""
    B, Hq, Sq, Sk = 1, 2, 40, 44
    xs = _operands(B, Hq, 1, Sq, Sk, 16, 16)
    g = torch.Generator().manual_seed(5)
    bm = torch.rand(B, Hq, -(-Sq // block_size), -(-Sk // block_size), generator=g) > 0.4
    _check(xs, (bm,), {"block_size": block_size}, f"block mask {block_size}")


@interp
@pytest.mark.parametrize("attrs", [{"causal": "top_left", "window_left": 20, "window_right": 5},
                                   {"causal": "bottom_right", "window_left": 17},
                                   {"window_left": 0, "window_right": 0}, {"window_left": 3, "window_right": 40}],
                         ids=["tl-window", "br-left", "diagonal", "wide-right"])
def test_band_blocks_with_16_tiles(attrs):
    """16 x 16 tiles on 48-row problems: every row meets skipped, edge (element-tested) and interior blocks."""
    from baracuda.backends.triton.attention import flash_bwd, flash_fwd

    cfg = flash_fwd.TileCfg(16, 16, 4, 1)
    q, k, v = _operands(1, 2, 1, 48, 41 if attrs.get("causal") == "bottom_right" else 48, 16, 16)
    B, Hq, Sq, D = q.shape
    Sk = k.shape[2]
    p = flash_fwd.Problem("bhsd", B, Hq, 1, Sq, Sk, D, D, 1 / math.sqrt(D), attrs.get("causal", "none"),
                          attrs.get("window_left"), attrs.get("window_right"), 0.0, 0.0, 0, 0, "ieee")
    out, lse = torch.empty_like(q), torch.empty(B, Hq, Sq)
    flash_fwd.flash_forward(p, q, k, v, out, lse, cfg)
    go = _rand(torch.Generator().manual_seed(2), *out.shape)
    dq, dk, dv = torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)
    flash_bwd.flash_backward(p, go, q, k, v, out, lse, dq, dk, dv, (cfg, cfg))
    full = dict({"causal": "none", "window_left": None, "window_right": None}, **attrs)
    d = bc.Descriptor.like("sdpa", q, k, v, **full)
    ro, rl = reference_f64(d, [q.numpy(), k.numpy(), v.numpy()])
    db = bc.Descriptor.like("sdpa_backward", go, q, k, v, out, lse, **full)
    rg = reference_f64(db, [t.numpy() for t in (go, q, k, v, out, lse)])
    for n, a, b in (("out", out, ro), ("lse", lse, rl)):
        assert_close(a, b, *F32_TOL, f"16x16 {attrs} {n}")
    for n, a, b in zip(("dq", "dk", "dv"), (dq, dk, dv), rg):
        assert_close(a, b, *F32_GRAD_TOL, f"16x16 {attrs} {n}")


@interp
def test_rows_without_keys_give_zero_and_minus_inf_and_zero_gradients():
    """A bool mask row with every key False and bottom-right causal with Sq > Sk: out 0, lse -inf, no NaN anywhere,
    zero gradients for those rows."""
    q, k, v = _operands(1, 2, 2, 20, 12, 16, 16)
    mask = torch.ones(20, 12, dtype=torch.bool)
    mask[9] = False
    fwd = _triton("sdpa", q, k, v, mask, has_mask=True, causal="bottom_right")
    out, lse = fwd.run(q, k, v, mask)
    empty = torch.zeros(20, dtype=torch.bool)
    empty[:8] = True        # i + Sk - Sq < 0: no key at all
    empty[9] = True
    assert (out[:, :, empty] == 0).all() and torch.isneginf(lse[:, :, empty]).all()
    assert torch.isfinite(out).all() and torch.isfinite(lse[:, :, ~empty]).all()
    go = torch.randn_like(out)
    dq, dk, dv = _triton("sdpa_backward", go, q, k, v, out, lse, mask, has_mask=True, causal="bottom_right").run(
        go, q, k, v, out, lse, mask)
    assert all(torch.isfinite(t).all() for t in (dq, dk, dv))
    assert (dq[:, :, empty] == 0).all()


@interp
def test_strided_views_are_read_in_place():
    """q / k / v as views of one packed [B, S, 3, H, D] buffer (model code's qkv projection), bhsd through
    transposes: the same results as contiguous copies."""
    g = torch.Generator().manual_seed(7)
    qkv = _rand(g, 2, 19, 3, 2, 16)
    q, k, v = (qkv[:, :, i].transpose(1, 2) for i in range(3))
    assert not q.is_contiguous()
    a = _triton("sdpa", q, k, v, causal="top_left").run(q, k, v)
    b = _triton("sdpa", q.contiguous(), k.contiguous(), v.contiguous(), causal="top_left").run(
        q.contiguous(), k.contiguous(), v.contiguous())
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y, rtol=0, atol=0)


@interp
def test_gqa_backward_is_deterministic():
    """dK / dV of a kv head are summed over its 4 query heads inside one program in a fixed order: two runs give
    the same bits."""
    q, k, v = _operands(1, 8, 2, 24, 24, 16, 16)
    out, lse = _triton("sdpa", q, k, v, causal="top_left").run(q, k, v)
    go = torch.randn_like(out)
    plan = _triton("sdpa_backward", go, q, k, v, out, lse, causal="top_left")
    r1, r2 = plan.run(go, q, k, v, out, lse), plan.run(go, q, k, v, out, lse)
    assert all(torch.equal(a, b) for a, b in zip(r1, r2))
    assert plan.precision.deterministic and plan.precision.bit_stable


@interp
def test_varlen_equals_per_sequence_sdpa():
    """sdpa_varlen over three packed sequences (one empty) = sdpa of each sequence alone, forward and backward."""
    g = torch.Generator().manual_seed(9)
    lq, lk = [5, 0, 13], [7, 4, 10]
    cq = torch.tensor([0] + list(np.cumsum(lq)), dtype=torch.int32)
    ck = torch.tensor([0] + list(np.cumsum(lk)), dtype=torch.int64)
    q, k, v = _rand(g, sum(lq), 4, 16), _rand(g, sum(lk), 2, 16), _rand(g, sum(lk), 2, 16)
    attrs = dict(max_seqlen_q=16, max_seqlen_k=12, causal="bottom_right")
    out, lse = _triton("sdpa_varlen", q, k, v, cq, ck, **attrs).run(q, k, v, cq, ck)
    go = _rand(g, *out.shape)
    dq, dk, dv = _triton("sdpa_varlen_backward", go, q, k, v, cq, ck, out, lse, **attrs).run(
        go, q, k, v, cq, ck, out, lse)
    for b in range(3):
        if lq[b] == 0:
            continue
        sq, sk = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        qb, kb, vb = (t.unsqueeze(0).contiguous() for t in (q[sq], k[sk], v[sk]))
        o, ls = _triton("sdpa", qb, kb, vb, layout="bshd", causal="bottom_right").run(qb, kb, vb)
        assert_close(out[sq], o[0].numpy(), *F32_TOL, f"varlen seq {b} out")
        assert_close(lse[:, sq], ls[0].numpy(), *F32_TOL, f"varlen seq {b} lse")
        gb = go[sq].unsqueeze(0).contiguous()
        g3 = _triton("sdpa_backward", gb, qb, kb, vb, o, ls, layout="bshd", causal="bottom_right").run(
            gb, qb, kb, vb, o, ls)
        for n, a, ref in zip(("dq", "dk", "dv"), (dq[sq], dk[sk], dv[sk]), g3):
            assert_close(a, ref[0].numpy(), *F32_GRAD_TOL, f"varlen seq {b} {n}")


@interp
def test_routes_precision_and_refusals():
    q, k, v = _operands(1, 8, 2, 24, 24, 16, 16)
    exact = _triton("sdpa", q, k, v, causal="top_left")
    assert "flash_fwd[" in exact.sku.route and "ieee" in exact.sku.route and "gqa=4" in exact.sku.route
    assert exact.precision.math == MathPrecision.F32
    tf32 = _triton("sdpa", q, k, v, pref={"allow_reduced_precision": True})
    assert "tf32" in tf32.sku.route and tf32.precision.math == MathPrecision.TF32
    hb = _triton("sdpa", *(t.to(torch.bfloat16) for t in (q, k, v)))
    assert hb.precision.math == MathPrecision.BF16 and "bf16" in hb.sku.route
    d80 = _operands(1, 2, 2, 8, 8, 80, 80)
    assert "d=80->128" in _triton("sdpa", *d80).sku.route
    f64 = forced_plan(bc.Descriptor.like("sdpa", *(t.double() for t in (q, k, v))), DEVICE, Backend.TRITON)
    assert isinstance(f64, str) and "reference only" in f64
    big = forced_plan(bc.Descriptor.like("sdpa", *_operands(1, 1, 1, 4, 4, 288, 288)), DEVICE, Backend.TRITON)
    assert isinstance(big, str) and "head dim 288 over 256" in big


# ------------------------------------------------------------------------------------------------ GPU section
def _dense_f64(q, k, v, mask=None, causal="none", scale=None, softcap=0.0, slopes=None, window=(None, None)):
    """float64 sdpa of bhsd tensors (an independent torch formula: GQA by repeat_interleave, exclusions as -inf)."""
    q, k, v = q.double(), k.double(), v.double()
    B, Hq, Sq, D = q.shape
    Sk = k.shape[2]
    g = Hq // k.shape[1]
    k, v = k.repeat_interleave(g, 1), v.repeat_interleave(g, 1)
    s = (1 / math.sqrt(D) if scale is None else scale) * q @ k.transpose(-1, -2)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(Sq, device=q.device)[:, None]
    j = torch.arange(Sk, device=q.device)[None, :]
    if slopes is not None:
        s = s - slopes.double()[None, :, None, None] * (i + Sk - Sq - j).abs()
    off = 0 if causal == "top_left" else Sk - Sq
    ok = torch.ones(Sq, Sk, dtype=torch.bool, device=q.device)
    if causal != "none":
        ok &= j <= i + off
    if window[0] is not None:
        ok &= j >= i + off - window[0]
    if window[1] is not None:
        ok &= j <= i + off + window[1]
    if mask is not None:
        if mask.dtype == torch.bool:
            ok = ok & mask
        else:
            s = s + mask.double()
    s = s.masked_fill(~ok, float("-inf"))
    p = torch.softmax(s, -1).nan_to_num(0.0)
    return p @ v


def _torch_sdpa(q, k, v, mask, causal, **feat):
    """torch's own SDPA in the inputs' dtype where it expresses the case (GQA, masks, top-left causal), else the
    same dense formula in the inputs' dtype (bottom-right, windows, softcap, ALiBi): the peer whose error sets the
    bar."""
    import torch.nn.functional as F

    if causal != "bottom_right" and not feat:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal == "top_left" and mask is None,
                                              enable_gqa=q.shape[1] != k.shape[1])
    return _dense_f64(q.to(torch.float32), k.to(torch.float32), v.to(torch.float32), mask, causal, **feat).to(q.dtype)


GPU_DIMS = [32, 64, 80, 96, 128, 160, 192, 256]
GPU_DT = {"bf16": torch.bfloat16, "f16": torch.float16, "f32": torch.float32}


def _gpu_case(dt, D, group, causal, mask_kind, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    B, Hkv, Sq, Sk = 2, 2, 200 if causal == "bottom_right" else 256, 333 if causal == "bottom_right" else 256
    Hq = Hkv * group

    def r(*s):
        return torch.randn(*s, generator=g, device="cuda", dtype=torch.float32).to(GPU_DT[dt])
    q, k, v = r(B, Hq, Sq, D), r(B, Hkv, Sk, D), r(B, Hkv, Sk, D)
    mask, attrs, feat = None, {"causal": causal}, {}
    if mask_kind == "bool":
        mask = torch.rand(B, 1, Sq, Sk, generator=g, device="cuda") > 0.2
    elif mask_kind == "float":
        mask = torch.randn(Sq, Sk, generator=g, device="cuda").to(GPU_DT[dt])
    elif mask_kind == "window":
        attrs.update(window_left=40, window_right=8)
        feat["window"] = (40, 8)
    elif mask_kind == "softcap":
        attrs["softcap"] = 5.0
        feat["softcap"] = 5.0
    return (q, k, v), mask, attrs, feat


def _err(a, ref):
    return (a.double() - ref).abs().max().item()


def _contract(ours, torch_peer, ref, what, floor):
    e, et = _err(ours, ref), _err(torch_peer, ref)
    assert e <= 2 * et + floor, f"{what}: error {e:.3g} > 2 x torch's {et:.3g} + {floor:g}"


# every head dim unmasked; the masks at D 64 / 96 / 128 (masks x every head dim would be ~700 kernel compiles)
GPU_MATRIX = [(dt, D, group, causal, mk) for dt in GPU_DT for group in (1, 4)
              for causal in ("none", "top_left", "bottom_right")
              for D, mk in [(D, "none") for D in GPU_DIMS] + [(D, mk) for D in (64, 96, 128)
                                                              for mk in ("bool", "float", "window", "softcap")]]


@gpu
@pytest.mark.parametrize("dt,D,group,causal,mask_kind", GPU_MATRIX, ids=lambda x: str(x))
def test_gpu_matrix_precision_contract(dt, D, group, causal, mask_kind):
    """Forward and backward on the H100: error vs the float64 formula <= 2x torch SDPA's (same dtype) + a floor of
    a few output ulps (torch's error can be ~0 where ours rounds P once more)."""
    (q, k, v), mask, attrs, feat = _gpu_case(dt, D, group, causal, mask_kind)
    extras = (mask,) if mask is not None else ()
    if mask is not None:
        attrs["has_mask"] = True
    qs, ks, vs = (t.detach().requires_grad_() for t in (q, k, v))
    out, lse = _triton("sdpa", q, k, v, *extras, **attrs).run(q, k, v, *extras)
    ref = _dense_f64(*(t.detach().double().requires_grad_() for t in (q, k, v)), mask, causal, **feat)
    peer = _torch_sdpa(qs, ks, vs, mask, causal, **feat)
    floor = {"bf16": 2 ** -8, "f16": 2 ** -11, "f32": 1e-5}[dt]
    _contract(out, peer, ref, f"fwd {dt} D{D} g{group} {causal} {mask_kind}", floor)
    go = torch.randn_like(out)
    grads = _triton("sdpa_backward", go, q, k, v, out, lse, *extras, **attrs).run(go, q, k, v, out, lse, *extras)
    qd, kd, vd = (t.detach().double().requires_grad_() for t in (q, k, v))
    _dense_f64(qd, kd, vd, mask, causal, **feat).backward(go.double())
    peer.backward(go)
    for n, ours, tg, rg in zip(("dq", "dk", "dv"), grads, (qs.grad, ks.grad, vs.grad), (qd.grad, kd.grad, vd.grad)):
        _contract(ours, tg, rg, f"{n} {dt} D{D} g{group} {causal} {mask_kind}", 4 * floor)


@gpu
@pytest.mark.parametrize("D", [64, 128])
def test_gpu_tf32_plan_and_dropout_against_the_reference(D):
    """The tf32 plan (allow_reduced_precision) within tf32's 2^-10 of the float64 formula; dropout against the
    NumPy reference's bit-exact mask."""
    (q, k, v), _, _, _ = _gpu_case("f32", D, 2, "top_left", "none")
    out, _ = _triton("sdpa", q, k, v, pref={"allow_reduced_precision": True}, causal="top_left").run(q, k, v)
    assert _err(out, _dense_f64(q, k, v, causal="top_left")) < 4e-3
    qs, ks, vs = (t[:1, :, :64].contiguous() for t in (q, k, v))
    plan = _triton("sdpa", qs, ks, vs, dropout_p=0.25, seed=123, offset=5)
    o, ls = plan.run(qs, ks, vs)
    ro, rl = reference_f64(plan.desc, [t.cpu().numpy() for t in (qs, ks, vs)])
    assert_close(o.cpu(), ro, 1e-4, 1e-4, f"dropout D{D} out")
    assert_close(ls.cpu(), rl, 1e-5, 1e-5, f"dropout D{D} lse")
    assert TDEV == "cuda"
