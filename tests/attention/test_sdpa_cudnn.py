"""The cuDNN sdpa backend (backends/nvidia/cudnn_sdpa.py).

CPU part (runs everywhere): every refusal and its reason, the availability reason without the frontend, the
mapping of the op's causal / window attributes onto cuDNN's diagonal band (against the reference's definition of
the allowed keys, through cuDNN's documented band rule), the rows a band leaves without keys, the graph key, the
bias it builds from a mask and the empty-row detection, route / precision / priority.
GPU part (skipped without CUDA, an SM90 device or the frontend): forward and backward against the float64
reference for masks x dtypes x head dims x GQA x causal alignments x layouts, the error bounded by twice torch's
own SDPA error in the same dtype (the issue's precision contract), rows a mask empties, the graph cache and the
plan directory."""
from __future__ import annotations

import itertools
import math
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.registry import implementations  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends import cudnn_import_error  # noqa: E402
from baracuda.backends.nvidia import cudnn_sdpa as C  # noqa: E402
from baracuda.backends.reference.attention_sdpa import _allowed  # noqa: E402
from baracuda.testing import assert_close  # noqa: E402


def _desc(B=2, Hq=4, Hkv=2, Sq=16, Sk=16, D=64, Dv=None, dt="bf16", layout="bhsd", mask=None, op="sdpa", **a):
    Dv = D if Dv is None else Dv
    shp = (lambda h, s, d: (B, h, s, d)) if layout == "bhsd" else (lambda h, s, d: (B, s, h, d))
    q, k, v = (shp(Hq, Sq, D), dt), (shp(Hkv, Sk, D), dt), (shp(Hkv, Sk, Dv), dt)
    extra = [mask] if mask is not None else []
    if a.get("has_alibi"):
        extra.append(((Hq,), "f32"))
    if a.get("block_size"):
        bs = a["block_size"]
        extra.append(((1, 1, -(-Sq // bs), -(-Sk // bs)), "bool"))
    a = dict(a, layout=layout, has_mask=mask is not None)
    if op == "sdpa":
        return bc.Descriptor.make("sdpa", q, k, v, *extra, **a)
    o = (shp(Hq, Sq, Dv), dt)
    lse = ((B, Hq, Sq), "f32")
    glse = [((B, Hq, Sq), "f32")] if a.get("has_grad_lse") else []
    return bc.Descriptor.make("sdpa_backward", o, q, k, v, o, lse, *extra, *glse, **a)


# -- refusals ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw,words", [
    (dict(dropout_p=0.1), "Philox"),
    (dict(softcap=5.0), "softcap"),
    (dict(has_alibi=True), "ALiBi"),
    (dict(block_size=4), "128 x 128"),
    (dict(dt="f32"), "f16 / bf16"),
    (dict(D=60), "multiples of 8"),
    (dict(D=64, Dv=60), "multiples of 8"),
    (dict(D=264), "up to 256"),
    (dict(D=128, Dv=64), "D == Dv"),
    (dict(Sk=0), "no keys"),
    (dict(mask=((16, 16), "f32")), "rounding the mask"),
    (dict(Sq=20, Sk=16, causal="bottom_right"), "without any key"),
    (dict(Sq=20, Sk=16, causal="top_left", window_left=1), "without any key"),
    (dict(Sq=16, Sk=16, window_left=0, window_right=0, causal="none"), None),
    (dict(Sq=20, Sk=16, window_right=8), "Sq > Sk"),
    (dict(Sq=20, Sk=16, window_left=30), "Sq <= Sk"),
    (dict(Sq=8, Sk=16, causal="bottom_right", mask=((8, 16), "bool")), "without a bias"),
    (dict(Sq=16, Sk=16, causal="bottom_right", mask=((16, 16), "bool")), None),      # Sq == Sk: top-left
    (dict(Sq=8, Sk=16, causal="top_left", mask=((8, 16), "bf16")), None),
    (dict(Sq=8, Sk=16, window_left=3), None),                                         # bottom-right, left only
])
@pytest.mark.parametrize("op", ["sdpa", "sdpa_backward"])
def test_supports_reasons(kw, words, op):
    why = C.supports(_desc(op=op, **kw))
    if words is None:
        assert why is None
    else:
        assert why is not None and words in why, why


def test_grad_lse_refused():
    why = C.supports(_desc(op="sdpa_backward", has_grad_lse=True))
    assert "grad_lse" in why


def test_backward_sq_sk_1_refused():
    assert "Sq = Sk = 1" in C.supports(_desc(op="sdpa_backward", Sq=1, Sk=1))
    assert C.supports(_desc(Sq=1, Sk=1)) is None


def test_d192_dv128_and_gqa_accepted():
    assert C.supports(_desc(D=192, Dv=128, Hq=8, Hkv=1)) is None
    assert C.supports(_desc(op="sdpa_backward", D=192, Dv=128, layout="bshd", causal="top_left")) is None


def test_f64_refused_by_dtypes_with_note():
    impl = next(i for i in implementations("sdpa") if i.backend == Backend.CUDNN)
    assert bc.DType.f64 not in impl.dtypes and "f16 / bf16" in impl.dtypes_note
    assert impl.archs == frozenset({bc.Arch.SM90})


# -- availability -------------------------------------------------------------------------------------------------
def test_availability_reason_without_frontend(monkeypatch):
    monkeypatch.setitem(sys.modules, "cudnn", None)    # `import cudnn` raises ImportError
    cudnn_import_error.cache_clear()
    try:
        why = cudnn_import_error()
        assert "nvidia-cudnn-frontend" in why and "'gpu' extra" in why
    finally:
        cudnn_import_error.cache_clear()


def test_cpu_device_refused_with_reason():
    ex = bc.Plan.select(_desc(dt="f16"), device="cpu", pref=bc.PlanPreference()).explain()
    row = next(r for r in ex.rows if r[0] == "cudnn")
    assert row[2] == "refused" and "CUDA device" in row[3]


# -- the band mapping -----------------------------------------------------------------------------------------------
def _cudnn_band_keep(Sq, Sk, align, left, right):
    """cuDNN's documented rule: the diagonal of row i is column i (TOP_LEFT) or i + Sk - Sq (BOTTOM_RIGHT); the right
    bound masks columns beyond diag + right, the left bound masks columns at or before diag - left."""
    i, j = np.arange(Sq)[:, None], np.arange(Sk)[None, :]
    diag = i + (0 if align == "top_left" else Sk - Sq)
    keep = np.ones((Sq, Sk), dtype=bool)
    if right is not None:
        keep &= j <= diag + right
    if left is not None:
        keep &= j > diag - left
    return keep


_BANDS = [(causal, wl, wr) for causal in ("none", "top_left", "bottom_right")
          for wl in (None, 0, 1, 5) for wr in (None, 0, 2)]


@pytest.mark.parametrize("Sq,Sk", [(8, 8), (5, 11), (11, 5), (1, 9)])
@pytest.mark.parametrize("causal,wl,wr", _BANDS)
def test_band_matches_reference(Sq, Sk, causal, wl, wr):
    d = _desc(Sq=Sq, Sk=Sk, causal=causal, window_left=wl, window_right=wr)
    p = C.problem(d)
    want = _allowed(Sq, Sk, {"causal": causal, "window_left": wl, "window_right": wr})
    align, left, right = C.band(p)
    got = np.ones((Sq, Sk), bool) if align is None else _cudnn_band_keep(Sq, Sk, align, left, right)
    np.testing.assert_array_equal(got, want)
    if align is not None:     # cuDNN's bounds: left >= 1, right >= 0
        assert left is None or left >= 1
        assert right is None or right >= 0
        keep = C._band_keep(p, "cpu").numpy()
        np.testing.assert_array_equal(keep, want)
    empty = not want.any(axis=1).all()
    assert (C._band_empty_rows(p) is not None) == empty


# -- the graph key --------------------------------------------------------------------------------------------------
def test_graph_key():
    d = _desc(layout="bshd", causal="top_left", mask=((2, 1, 16, 16), "bool"))
    p = C.problem(d)
    st = C.canonical_strides(p)
    q = torch.empty(2, 16, 4, 64).permute(0, 2, 1, 3)        # a contiguous bshd q seen as [B, H, S, D]
    assert st[0] == q.stride()
    k1 = C.graph_key(p, st, C._bias_dims(p))
    assert k1 == C.graph_key(C.problem(d), C.canonical_strides(C.problem(d)), C._bias_dims(p)) and hash(k1) == hash(
        C.graph_key(p, st, C._bias_dims(p)))
    other = C.graph_key(C.problem(_desc(layout="bhsd", causal="top_left", mask=((2, 1, 16, 16), "bool"))),
                        C.canonical_strides(C.problem(_desc(layout="bhsd", causal="top_left",
                                                            mask=((2, 1, 16, 16), "bool")))), C._bias_dims(p))
    assert other != k1                                          # strides differ
    assert C.graph_key(C.problem(_desc(layout="bshd", mask=((2, 1, 16, 16), "bool"))), st, C._bias_dims(p)) != k1
    assert C.graph_key(C.problem(_desc(layout="bshd", causal="top_left", scale=0.5,
                                       mask=((2, 1, 16, 16), "bool"))), st, C._bias_dims(p)) != k1
    assert C.graph_key(p, st, C._bias_dims(p), cc=(10, 0)) != k1
    assert C._bias_dims(p) == (2, 1, 16, 16)
    assert C._bias_dims(C.problem(_desc(mask=((16,), "bf16")))) == (1, 1, 16, 16)
    assert C.bias_strides((2, 1, 5, 6)) == (40, 40, 8, 1)      # rows padded to 8 elements


# -- bias and empty rows (torch on the CPU: the helpers are device-agnostic) ---------------------------------------
def test_bool_mask_bias_and_empty_rows():
    g = torch.Generator().manual_seed(0)
    m = torch.rand(2, 1, 1, 6, generator=g) < 0.6
    m[1, 0, 0, :] = False                                   # batch 1: every key masked
    p = C.problem(_desc(B=2, Sq=4, Sk=6, mask=((2, 1, 1, 6), "bool"), dt="bf16"))
    b = C._bias(m, p, C._bias_dims(p), torch.bfloat16)
    assert tuple(b.shape) == (2, 1, 4, 6) and b.stride() == C.bias_strides((2, 1, 4, 6))
    want = torch.where(m.expand(2, 1, 4, 6), 0.0, float("-inf"))
    assert torch.equal(b.float(), want)
    empty = C._empty_rows(b, p)
    assert empty.shape == (2, 1, 4) and not empty[0].any() and empty[1].all()


def test_float_mask_in_place_and_band_empty_rows():
    p = C.problem(_desc(B=1, Hq=2, Hkv=2, Sq=4, Sk=8, mask=((1, 2, 4, 8), "bf16"), causal="top_left"))
    m = torch.randn(1, 2, 4, 8).to(torch.bfloat16)
    m[0, 1, 2, :3] = float("-inf")                          # row 2 of head 1: keys 0..2 masked, causal allows 0..2
    m[0, 0, 3, 0] = float("nan")                            # NaN keeps its row (the reference's NaN stays)
    b = C._bias(m, p, C._bias_dims(p), torch.bfloat16)
    assert b.data_ptr() == m.data_ptr()                     # used in place: no copy
    empty = C._empty_rows(b, p)
    assert empty.tolist() == [[[False] * 4, [False, False, True, False]]]


def test_neginf_to_inf():
    lse = torch.tensor([[1.0, float("-inf"), float("nan")]])
    assert C._neginf_to_inf(lse)[0, 1] == float("inf") and C._neginf_to_inf(lse)[0, 0] == 1.0


def test_route_precision_priority():
    d = _desc(causal="bottom_right", Sq=8, Sk=16, mask=((8, 16), "bool"))
    r = C._route(d)
    assert r.startswith("cudnn:sdpa_fprop") and "bottom_right" in r and "where(mask" in r
    bw = _desc(op="sdpa_backward")
    assert "atomic dQ" in C._route(bw) and not C._precision(bw).deterministic
    det = bc.PlanPreference(require_deterministic=True)
    assert "deterministic" in C._route(bw, det) and C._precision(bw, det).deterministic
    pr = C._precision(d)
    assert pr.accumulator == bc.DType.f32 and pr.deterministic and not pr.bit_stable
    tri = [i for i in implementations("sdpa") if i.backend == Backend.TRITON]
    cud = next(i for i in implementations("sdpa") if i.backend == Backend.CUDNN)
    cuda = bc.Device("cuda", 0)
    if tri:     # cuDNN first where it runs (faster on every H100 shape measured), Triton behind it
        assert cud.prio(d, cuda) > tri[0].prio(d, cuda)


def test_graph_construction_with_frontend():
    """The frontend graph of a key (no GPU: constructed and validated by the frontend's Python IR only)."""
    pytest.importorskip("cudnn")
    for d in (_desc(layout="bshd", causal="top_left", Sq=8, Sk=16, mask=((2, 1, 8, 16), "bool")),
              _desc(op="sdpa_backward", Hq=8, Hkv=2, window_left=3, D=192, Dv=128)):
        p = C.problem(d)
        g = C.make_graph(C.graph_key(p, C._canonical_with_bias(p), C._bias_dims(p)))
        g.validate()
        assert {t.get_uid() for t in g.get_outputs()} >= ({C._O, C._STATS} if p.op == "sdpa" else
                                                          {C._DQ, C._DK, C._DV})


@pytest.mark.parametrize("op", ["sdpa", "sdpa_backward"])
def test_band_rules_agree_with_frontend(op):
    """Our statement of cuDNN's band limits (supports' last reasons) against the frontend's own validator, over
    every causal / window combination, Sq <, =, > Sk, with and without a mask."""
    cudnn = pytest.importorskip("cudnn")
    checked = 0
    for (Sq, Sk), (causal, wl, wr), mask in itertools.product([(8, 8), (5, 11), (11, 5), (1, 1)], _BANDS,
                                                               [None, "bf16"]):
        d = _desc(op=op, Sq=Sq, Sk=Sk, causal=causal, window_left=wl, window_right=wr,
                  mask=None if mask is None else ((Sq, Sk), mask))
        p = C.problem(d)
        if C._band_empty_rows(p) is not None:
            continue                      # refused before cuDNN is asked
        g = C.make_graph(C.graph_key(p, C._canonical_with_bias(p), C._bias_dims(p)))
        try:
            g.validate()
            frontend = None
        except (cudnn.cudnnGraphNotSupportedError, ValueError) as e:
            frontend = str(e)
        assert (C._cudnn_band_rules(p) is None) == (frontend is None), (d, C._cudnn_band_rules(p), frontend)
        checked += 1
    assert checked > 100


# -- GPU ---------------------------------------------------------------------------------------------------------
def _gpu_missing():
    if not torch.cuda.is_available():
        return "no CUDA device"
    if torch.cuda.get_device_capability() != (9, 0):
        return "the cuDNN backend is declared for SM90 only"
    return cudnn_import_error()


gpu = pytest.mark.skipif(_gpu_missing() is not None, reason=str(_gpu_missing()))
TDT = {"f16": torch.float16, "bf16": torch.bfloat16}

# (name, layout, (B, Hq, Hkv, Sq, Sk, D, Dv), attrs, mask: (kind, shape) or None)
_GPU_CASES = [
    ("mha-d64", "bhsd", (2, 8, 8, 128, 128, 64, 64), {}, None),
    ("gqa-d128-tl", "bshd", (2, 8, 2, 128, 128, 128, 128), {"causal": "top_left"}, None),
    ("mqa-d128-br-sq<sk", "bhsd", (1, 8, 1, 96, 200, 128, 128), {"causal": "bottom_right"}, None),
    ("tl-sq>sk", "bshd", (2, 4, 2, 160, 100, 64, 64), {"causal": "top_left"}, None),
    ("d256", "bhsd", (1, 4, 4, 128, 128, 256, 256), {"causal": "top_left"}, None),
    ("d192-128", "bshd", (1, 4, 2, 128, 128, 192, 128), {"causal": "top_left"}, None),
    ("d80-window", "bhsd", (2, 4, 2, 128, 160, 80, 80), {"window_left": 32, "window_right": 8}, None),
    ("d96-tl-window", "bshd", (1, 6, 3, 128, 128, 96, 96), {"causal": "top_left", "window_left": 16}, None),
    ("bool-mask-b1", "bhsd", (2, 8, 2, 64, 128, 64, 64), {}, ("bool", (2, 1, 64, 128))),
    ("bool-keypad-causal", "bshd", (2, 4, 4, 128, 128, 64, 64), {"causal": "top_left"}, ("bool", (2, 1, 1, 128))),
    ("float-mask-2d", "bhsd", (2, 4, 2, 100, 100, 128, 128), {"scale": 0.1}, ("float", (100, 100))),
    ("float-mask-full-gqa", "bshd", (1, 8, 2, 64, 96, 64, 64), {"causal": "top_left"}, ("float", (1, 8, 64, 96))),
    ("odd-s", "bhsd", (3, 2, 1, 77, 131, 64, 64), {}, None),
]


def _arrays(case, dt, g):
    name, layout, (B, Hq, Hkv, Sq, Sk, D, Dv), attrs, mask = case
    shp = (lambda h, s, d: (B, h, s, d)) if layout == "bhsd" else (lambda h, s, d: (B, s, h, d))
    q, k, v = (torch.randn(shp(h, s, d), generator=g).to(TDT[dt]) for h, s, d in
               ((Hq, Sq, D), (Hkv, Sk, D), (Hkv, Sk, Dv)))
    extra = []
    if mask is not None:
        kind, mshape = mask
        if kind == "bool":
            m = torch.rand(mshape, generator=g) < 0.7
            m[..., 0] = True                                  # every row keeps a key (causal allows key 0)
        else:
            m = torch.randn(mshape, generator=g).to(TDT[dt])
        extra.append(m)
    a = dict(attrs, layout=layout, has_mask=mask is not None)
    return [q, k, v] + extra, a


def _torch_peer(xs, a, layout, Hq, Hkv, Sq, Sk):
    """torch's SDPA on the GPU in the inputs' dtype (the precision contract's yardstick), bhsd out."""
    import torch.nn.functional as F

    q, k, v = (x if layout == "bhsd" else x.transpose(1, 2) for x in xs[:3])
    allowed = torch.as_tensor(_allowed(Sq, Sk, {"causal": a.get("causal", "none"), "window_left":
                                                a.get("window_left"), "window_right": a.get("window_right")}))
    allowed = allowed.to(q.device)
    bias = torch.where(allowed, 0.0, float("-inf"))
    if len(xs) > 3:
        m = xs[3].to(q.device)
        bias = bias + (torch.where(m, 0.0, float("-inf")) if m.dtype == torch.bool else m.float())
    return F.scaled_dot_product_attention(q, k, v, attn_mask=bias.to(q.dtype), scale=a.get("scale"),
                                          enable_gqa=Hq != Hkv)


def _err(got, want):
    return float((got.double().cpu() - torch.as_tensor(np.asarray(want))).abs().max())


@gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("case", _GPU_CASES, ids=[c[0] for c in _GPU_CASES])
def test_gpu_forward_backward(case, dt):
    name, layout, (B, Hq, Hkv, Sq, Sk, D, Dv), attrs, mask = case
    g = torch.Generator().manual_seed(hash(name) % 2 ** 31)
    xs, a = _arrays(case, dt, g)
    dev = bc.Device("cuda", 0)
    desc = bc.Descriptor.like("sdpa", *xs, **a)
    assert C.supports(desc) is None, C.supports(desc)
    plan = bc.Plan.select(desc, dev, bc.PlanPreference(prefer=(Backend.CUDNN,)))
    assert plan.sku.backend == Backend.CUDNN
    xg = [x.cuda() for x in xs]
    out, lse = plan.run(*xg)
    ref_out, ref_lse = _ref(desc, xs)
    # out: the contract -- at most twice torch's own SDPA error in this dtype; the floor (2^-10 of the largest
    # output, a quarter of a bf16 ulp there) keeps a near-exact torch from making the bound vacuous-strict
    peer = _torch_peer(xg, a, layout, Hq, Hkv, Sq, Sk)
    ref_bhsd = np.asarray(ref_out) if layout == "bhsd" else np.asarray(ref_out).transpose(0, 2, 1, 3)
    floor = 2 ** -10 * float(np.abs(ref_bhsd).max())
    out_bhsd = out if layout == "bhsd" else out.transpose(1, 2)
    assert _err(out_bhsd, ref_bhsd) <= 2 * _err(peer, ref_bhsd) + floor
    # lse: f32 from the rounded inputs' exact scores -- the spec's forward tolerance
    rtol, atol = desc.spec.tol(desc.dtype)
    assert_close(lse.cpu(), ref_lse, rtol, atol, f"{name} {dt} lse")

    # backward from cuDNN's own out / lse (as training runs it), against the reference and torch's autograd
    go = torch.randn(tuple(out.shape), generator=g).to(TDT[dt])
    bdesc = bc.Descriptor.like("sdpa_backward", go, *xs[:3], out.cpu(), lse.cpu(), *xs[3:], **a)
    bplan = bc.Plan.select(bdesc, dev, bc.PlanPreference(prefer=(Backend.CUDNN,)))
    dq, dk, dv = bplan.run(go.cuda(), *xg[:3], out, lse, *xg[3:])
    ref = _ref(bdesc, [go] + xs[:3] + [out.cpu(), lse.cpu()] + xs[3:])
    leaves = [x.detach().clone().requires_grad_(True) for x in xg[:3]]
    peer = _torch_peer(leaves + xg[3:], a, layout, Hq, Hkv, Sq, Sk)
    peer.backward(go.cuda() if layout == "bhsd" else go.cuda().transpose(1, 2))
    for got, want, tl, what in zip((dq, dk, dv), ref, leaves, ("dq", "dk", "dv")):
        floor = 2 ** -9 * float(np.abs(np.asarray(want)).max())
        assert torch.isfinite(got).all(), what
        assert _err(got, want) <= 2 * _err(tl.grad, want) + floor, (what, _err(got, want), _err(tl.grad, want))


def _ref(desc, xs):
    from baracuda._core.oracle import reference_f64

    return reference_f64(desc, [x.float().numpy() if x.dtype in (torch.float16, torch.bfloat16) else x.numpy()
                                for x in xs])


@gpu
def test_gpu_rows_a_mask_empties():
    """A bool mask that excludes whole rows: out 0 and lse -inf there (not NaN), and a finite backward whose dq
    rows there are 0 and whose dk / dv equal those of the problem without those rows."""
    g = torch.Generator().manual_seed(3)
    B, H, S, D = 2, 4, 64, 64
    q, k, v = (torch.randn(B, H, S, D, generator=g).to(torch.bfloat16).cuda() for _ in range(3))
    m = torch.rand(B, 1, S, S, generator=g) < 0.8
    m[..., 0] = True
    m[1, 0, 5] = False                                            # batch 1, row 5: every key
    m = m.cuda()
    dev = bc.Device("cuda", 0)
    pref = bc.PlanPreference(prefer=(Backend.CUDNN,))
    plan = bc.Plan.select(bc.Descriptor.like("sdpa", q, k, v, m, has_mask=True), dev, pref)
    out, lse = plan.run(q, k, v, m)
    assert (out[1, :, 5] == 0).all() and (lse[1, :, 5] == float("-inf")).all()
    assert torch.isfinite(out).all() and torch.isfinite(lse[0]).all()
    go = torch.randn(out.shape, generator=g).to(torch.bfloat16).cuda()
    bplan = bc.Plan.select(bc.Descriptor.like("sdpa_backward", go, q, k, v, out, lse, m, has_mask=True), dev, pref)
    dq, dk, dv = bplan.run(go, q, k, v, out, lse, m)
    assert all(torch.isfinite(t).all() for t in (dq, dk, dv))
    assert (dq[1, :, 5] == 0).all()
    go2 = go.clone()
    go2[1, :, 5] = 0                                              # the row contributes nothing either way
    _, dk2, dv2 = bplan.run(go2, q, k, v, out, lse, m)
    assert torch.equal(dk, dk2) and torch.equal(dv, dv2)


@gpu
def test_gpu_graph_cache_and_plan_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(C.PLAN_DIR_ENV, str(tmp_path))
    C._GRAPHS.clear()
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(1, 4, 80, 64, generator=g).half().cuda() for _ in range(3))
    dev = bc.Device("cuda", 0)
    pref = bc.PlanPreference(prefer=(Backend.CUDNN,))
    desc = bc.Descriptor.like("sdpa", q, k, v, causal="top_left")
    before = C.cache_info()
    out1, _ = bc.Plan.select(desc, dev, pref).run(q, k, v)
    mid = C.cache_info()
    assert mid["built"] == before["built"] + 1 and list(tmp_path.iterdir())
    bc.Plan.select(desc, dev, pref).run(q, k, v)
    assert C.cache_info()["built"] == mid["built"]              # the second plan reuses the graph
    C._GRAPHS.clear()
    out2, _ = bc.Plan.select(desc, dev, pref).run(q, k, v)
    after = C.cache_info()
    assert after["loaded"] == mid["loaded"] + 1 and after["built"] == mid["built"]
    assert torch.equal(out1, out2)
    # strides other than the planned ones: a second graph, same numbers
    qs = torch.randn(1, 80, 4, 64, generator=g).half().cuda().transpose(1, 2)
    qs.copy_(q)
    out3, _ = bc.Plan.select(desc, dev, pref).run(qs, k, v)
    assert torch.equal(out3, out1)


def test_scale_default_is_rsqrt_d():
    assert math.isclose(C.problem(_desc(D=128)).scale, 1 / math.sqrt(128))


def test_a_graph_cudnn_refuses_at_build_is_an_unsupported_error(monkeypatch):
    """cuDNN's own refusal at graph build (its heuristics find no engine; supports() cannot foresee every one)
    reaches the caller as baracuda's UnsupportedError naming the op and cuDNN's reason, never a bare frontend
    exception; nothing is cached.  (A stand-in `cudnn` module: the build path needs no GPU to be exercised.)"""
    import types

    class NotSupported(Exception):
        pass

    fake = types.SimpleNamespace(cudnnGraphNotSupportedError=NotSupported)
    monkeypatch.setitem(sys.modules, "cudnn", fake)
    from baracuda.backends.nvidia import cudnn_graph

    monkeypatch.setattr(cudnn_graph, "handle", lambda device_index: object())
    monkeypatch.setattr(C._CACHE, "_file", lambda key, device_index: None)
    p = C.problem(_desc())
    key = C.graph_key(p, C._canonical_with_bias(p), C._bias_dims(p))
    for err in (NotSupported("no engine for this graph"), RuntimeError("CUDNN_STATUS_NOT_SUPPORTED")):
        def refuse(key, handle, err=err):
            raise err
        monkeypatch.setattr(C._CACHE, "make", refuse)
        with pytest.raises(bc.UnsupportedError, match=rf"sdpa: .*cuDNN refused the graph \({type(err).__name__}"):
            C._built(key, 0)
        assert (key, 0) not in C._GRAPHS
