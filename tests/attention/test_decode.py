"""Decoding and serving ops against independent float64 formulas: torch's scaled_dot_product_attention (float64, CPU,
an explicit boolean mask) over the keys each request owns, gathered by hand from the cache or the page table; GQA
ratios, Sq 1..8, variable KV lengths, causal / window / softcap, FP8 caches against the dequantized reference, forced
KV splits (the merge path), paged decode and prefill, the contiguous and paged forms agreeing, zero-size problems;
bad index values raising the error that names the operand (reference and kernels; the kernels never read out of
bounds); kv_append / paged_kv_append in place (out=cache writes only the new rows) and out of place; the cascade
merge (two halves of the keys merged = attention over all of them) and its gradient.  A GPU-only section runs
bigger shapes."""
from __future__ import annotations

import math
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.device import triton_interpreting  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton.attention.decode import forced  # noqa: E402
from baracuda.ops.attention_decode_data import page_table  # noqa: E402
from baracuda.testing import assert_close, backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV  # noqa: E402

F = torch.nn.functional
BACKENDS = backends_for("sdpa_decode", DEVICE)
DT = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# out: the kernels round the probabilities to q's dtype for P @ V (2^-9 bf16, 2^-12 f16 relative per weight, times
# max|v| ~ 3) and round the output once; f32: IEEE dots, ex2.approx.  lse (f32) only sees the scores' f32 sums.
TOL = {"f32": (2e-5, 2e-5), "f16": (1e-2, 3e-3), "bf16": (1.6e-2, 2e-2)}
LSE_TOL = {"f32": (2e-5, 2e-5), "f16": (1e-5, 1e-4), "bf16": (1e-5, 1e-4)}


def _dense(q, k, v, L, scale=None, causal=True, window=None, softcap=0.0, ks=1.0, vs=1.0):
    """One request, float64: q [nq, Hq, D], k / v [>= L, Hkv, *] -> (out [nq, Hq, Dv], lse [nq, Hq]) through torch's
    SDPA with a boolean mask (keys j < L; causal j <= p_i, window j >= p_i - window, p_i = L - nq + i); a query with
    no key: out 0, lse -inf."""
    nq, Hq, D = q.shape
    qd = q.double().transpose(0, 1)[None]                       # [1, Hq, nq, D]
    kd = (k[:L].double() * ks).transpose(0, 1)[None]
    vd = (v[:L].double() * vs).transpose(0, 1)[None]
    sc = 1 / math.sqrt(D) if scale is None else scale
    p = torch.arange(nq)[:, None] + L - nq
    j = torch.arange(L)[None, :]
    ok = torch.ones(nq, L, dtype=torch.bool)
    if causal:
        ok &= j <= p
    if window is not None:
        ok &= j >= p - window
    G = Hq // k.shape[1]
    kg, vg = kd.repeat_interleave(G, 1), vd.repeat_interleave(G, 1)
    s = sc * qd @ kg.transpose(-1, -2)
    if softcap:   # SDPA has no softcap: the capped scores go in as an additive mask on unit-scaled dot products
        bias = softcap * torch.tanh(s / softcap) - s
        out = F.scaled_dot_product_attention(qd, kg, vg, attn_mask=torch.where(ok, bias, -math.inf), scale=sc)
        s = s + bias
    else:
        out = F.scaled_dot_product_attention(qd, kg, vg, attn_mask=ok, scale=sc)
    s = s.masked_fill(~ok, -math.inf)
    lse = torch.logsumexp(s, -1)[0].transpose(0, 1)
    empty = ~ok.any(-1)
    out = out[0].transpose(0, 1).masked_fill(empty[:, None, None], 0.0)
    return out, lse


def _run(op, backend, *xs, out=None, **attrs):
    plan = forced_plan(bc.Descriptor.like(op, *xs, **attrs), DEVICE, backend)
    assert not isinstance(plan, str), plan
    res = plan.run(*[x.to(TDEV) for x in xs], out=out)
    return tuple(r.cpu() for r in res) if isinstance(res, tuple) else res.cpu()


def _close(got, want, dt, what, lse=False):
    rtol, atol = (LSE_TOL if lse else TOL)[dt]
    assert_close(got.double().numpy(), want.numpy(), rtol, atol, what)


def _decode_case(g, B, Sq, Hq, Hkv, D, S, lens, dt, fp8=False):
    q = torch.randn(B, Sq, Hq, D, generator=g).to(DT[dt])
    cdt = torch.float8_e4m3fn if fp8 else DT[dt]
    k = torch.randn(B, S, Hkv, D, generator=g).to(cdt)
    v = torch.randn(B, S, Hkv, D, generator=g).to(cdt)
    return q, k, v, torch.tensor(lens, dtype=torch.int32)


def _dt_cases():
    return ["f32", "bf16"] if triton_interpreting() or DEVICE.type != "cuda" else ["f32", "f16", "bf16"]


# -- sdpa_decode ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("Hq,Hkv,Sq", [(4, 4, 1), (4, 2, 2), (6, 2, 3), (8, 1, 1), (4, 1, 8)])
def test_decode_gqa_ratios_and_query_counts_match_dense_attention(backend, Hq, Hkv, Sq):
    g = torch.Generator().manual_seed(Hq * 10 + Sq)
    lens = [19, Sq, 0, 7][:3]
    q, k, v, L = _decode_case(g, 3, Sq, Hq, Hkv, 16, 19, lens, "f32")
    out, lse = _run("sdpa_decode", backend, q, k, v, L, has_kv_lens=True)
    for b in range(3):
        o, s = _dense(q[b], k[b], v[b], lens[b])
        _close(out[b], o, "f32", f"b{b}")
        _close(lse[b], s, "f32", f"b{b} lse", lse=True)
    assert torch.all(out[2] == 0) and torch.all(lse[2] == -math.inf)        # no key: 0 and -inf, no NaN


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", _dt_cases())
@pytest.mark.parametrize("attrs", [dict(causal=False), dict(window_left=4, softcap=3.0, scale=0.2)], ids=str)
def test_decode_attributes_per_dtype(backend, dt, attrs):
    g = torch.Generator().manual_seed(5)
    lens = [30, 11]
    q, k, v, L = _decode_case(g, 2, 2, 4, 2, 32, 30, lens, dt)
    out, lse = _run("sdpa_decode", backend, q, k, v, L, has_kv_lens=True, **attrs)
    for b in range(2):
        o, s = _dense(q[b], k[b], v[b], lens[b], scale=attrs.get("scale"), causal=attrs.get("causal", True),
                      window=attrs.get("window_left"), softcap=attrs.get("softcap", 0.0))
        _close(out[b], o, dt, f"{dt} b{b}")
        _close(lse[b], s, dt, f"{dt} b{b} lse", lse=True)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_decode_fp8_cache_matches_the_dequantized_reference(backend):
    g = torch.Generator().manual_seed(8)
    lens = [25, 9]
    q, k, v, L = _decode_case(g, 2, 1, 8, 2, 16, 25, lens, "bf16", fp8=True)
    out, lse = _run("sdpa_decode", backend, q, k, v, L, has_kv_lens=True, k_scale=0.5, v_scale=3.0)
    for b in range(2):
        o, s = _dense(q[b], k[b].double(), v[b].double(), lens[b], ks=0.5, vs=3.0)
        _close(out[b], o, "bf16", f"b{b}")
        _close(lse[b], s, "bf16", f"b{b} lse", lse=True)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="no Triton backend here")
@pytest.mark.parametrize("splits", [2, 5])
def test_decode_split_kv_merges_to_the_unsplit_result(splits):
    g = torch.Generator().manual_seed(splits)
    lens = [40, 3, 0]
    q, k, v, L = _decode_case(g, 3, 2, 4, 2, 16, 40, lens, "f32")
    with forced(splits=splits, block_n=16):
        out, lse = _run("sdpa_decode", Backend.TRITON, q, k, v, L, has_kv_lens=True, window_left=20)
    for b in range(3):
        o, s = _dense(q[b], k[b], v[b], lens[b], window=20)
        _close(out[b], o, "f32", f"split {splits} b{b}")
        _close(lse[b], s, "f32", f"split {splits} b{b} lse", lse=True)


def test_decode_zero_size_problems():
    for B, S in ((0, 8), (2, 0)):
        q, k, v = torch.randn(B, 1, 2, 8), torch.randn(B, S, 1, 8), torch.randn(B, S, 1, 8)
        for backend in BACKENDS:
            out, lse = _run("sdpa_decode", backend, q, k, v)
            assert out.shape == (B, 1, 2, 8) and torch.all(out == 0) and torch.all(lse == -math.inf)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_decode_lengths_out_of_range_raise_naming_kv_lens(backend):
    q, k, v = torch.randn(2, 1, 2, 16), torch.randn(2, 8, 1, 16), torch.randn(2, 8, 1, 16)
    for bad in ([9, 1], [-1, 2]):
        with pytest.raises(bc.InvalidProblemError, match=r"sdpa_decode: argument 'kv_lens': expected lengths in "
                                                         r"\[0, Smax"):
            _run("sdpa_decode", backend, q, k, v, torch.tensor(bad, dtype=torch.int32), has_kv_lens=True)
            bc.check_errors()


# -- paged_attention ------------------------------------------------------------------------------------------------
def _paged_case(g, nq, lens, ps, Hq, Hkv, D, dt="f32", idt=torch.int32, fp8=False):
    rng = np.random.default_rng(int(torch.randint(0, 2 ** 31, (1,), generator=g)))
    kvp, kvi, last, P = page_table(rng, lens, ps)
    cdt = torch.float8_e4m3fn if fp8 else DT[dt]
    qo = torch.tensor(np.concatenate([[0], np.cumsum(nq)]), dtype=idt)
    q = torch.randn(int(qo[-1]), Hq, D, generator=g).to(DT[dt])
    kp = torch.randn(P, ps, Hkv, D, generator=g).to(cdt)
    vp = torch.randn(P, ps, Hkv, D, generator=g).to(cdt)
    return q, qo, kp, vp, torch.tensor(kvp, dtype=idt), torch.tensor(kvi, dtype=idt), torch.tensor(last, dtype=idt)


def _gathered(kp, kvp, kvi, b):
    """Request b's keys in order, gathered by hand from its pages."""
    return torch.cat([kp[int(p)] for p in kvi[int(kvp[b]):int(kvp[b + 1])]] or [kp[:0].flatten(0, 1)])


def _check_paged(ins, out, lse, lens, dt="f32", ks=1.0, vs=1.0, **attrs):
    q, qo, kp, vp, kvp, kvi, _ = ins
    for b, L in enumerate(lens):
        a, e = int(qo[b]), int(qo[b + 1])
        o, s = _dense(q[a:e], _gathered(kp, kvp, kvi, b).double(), _gathered(vp, kvp, kvi, b).double(), L, ks=ks,
                      vs=vs, **attrs)
        _close(out[a:e], o, dt, f"request {b}")
        _close(lse[a:e], s, dt, f"request {b} lse", lse=True)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("nq,lens,ps,Hq,Hkv", [([1, 1, 1, 1], [16, 5, 1, 33], 16, 8, 2),     # decode
                                                ([6, 1, 0, 3], [9, 20, 4, 2], 4, 4, 2),       # prefill (and nq > L)
                                                ([3, 2], [7, 12], 3, 3, 1)])                  # odd page size, MQA
def test_paged_decode_and_prefill_match_dense_attention_over_the_gathered_pages(backend, nq, lens, ps, Hq, Hkv):
    g = torch.Generator().manual_seed(sum(lens))
    ins = _paged_case(g, nq, lens, ps, Hq, Hkv, 16)
    out, lse = _run("paged_attention", backend, *ins)
    _check_paged(ins, out, lse, lens)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_paged_fp8_int64_window_softcap(backend):
    g = torch.Generator().manual_seed(3)
    lens = [21, 6]
    ins = _paged_case(g, [2, 3], lens, 8, 4, 2, 16, dt="bf16", idt=torch.int64, fp8=True)
    attrs = dict(window_left=6, softcap=2.5, scale=0.3)
    out, lse = _run("paged_attention", backend, *ins, k_scale=0.25, v_scale=2.0, **attrs)
    _check_paged(ins, out, lse, lens, "bf16", ks=0.25, vs=2.0, window=6, softcap=2.5, scale=0.3)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="no Triton backend here")
def test_paged_split_kv_and_query_tiles():
    g = torch.Generator().manual_seed(11)
    lens = [37, 0, 15]
    ins = _paged_case(g, [5, 2, 7], lens, 4, 4, 2, 16)
    with forced(splits=3, block_n=16, qb=2):
        out, lse = _run("paged_attention", Backend.TRITON, *ins)
    _check_paged(ins, out, lse, lens)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_paged_attention_agrees_with_sdpa_decode_on_the_same_keys(backend):
    """One query per request over a page table holding the same keys as a contiguous cache."""
    g = torch.Generator().manual_seed(4)
    lens = [13, 4, 16]
    q, k, v, L = _decode_case(g, 3, 1, 4, 2, 16, 16, lens, "f32")
    ps, pages = 4, []
    kp, vp = k.reshape(12, ps, 2, 16), v.reshape(12, ps, 2, 16)      # row b's pages are 4b .. 4b + 3
    for b, n in enumerate(lens):
        pages.append(torch.arange(4 * b, 4 * b + math.ceil(n / ps)))
    kvi = torch.cat(pages).int()
    kvp = torch.tensor([0] + list(np.cumsum([len(p) for p in pages])), dtype=torch.int32)
    last = torch.tensor([n - (math.ceil(n / ps) - 1) * ps for n in lens], dtype=torch.int32)
    o1, s1 = _run("sdpa_decode", backend, q, k, v, L, has_kv_lens=True)
    o2, s2 = _run("paged_attention", backend, q[:, 0], torch.arange(4, dtype=torch.int32), kp, vp, kvp, kvi, last)
    _close(o2, o1[:, 0].double(), "f32", "paged vs contiguous")
    _close(s2, s1[:, 0].double(), "f32", "paged vs contiguous lse", lse=True)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("which,value,name", [(5, 99, "kv_indices"), (4, -1, "kv_indptr"), (6, 9, "kv_last_page_len"),
                                              (1, 7, "qo_indptr")])
def test_paged_bad_index_values_raise_naming_the_operand(backend, which, value, name):
    g = torch.Generator().manual_seed(1)
    ins = list(_paged_case(g, [1, 2], [6, 9], 4, 2, 1, 16))
    bad = ins[which].clone()
    bad[-1 if which in (1, 5) else 0] = value
    ins[which] = bad
    with pytest.raises(bc.InvalidProblemError, match=rf"paged_attention: argument '{name}'"):
        _run("paged_attention", backend, *ins)
        bc.check_errors()


# -- appends ----------------------------------------------------------------------------------------------------------
APPEND_BACKENDS = backends_for("kv_append", DEVICE)


@pytest.mark.parametrize("backend", APPEND_BACKENDS, ids=str)
@pytest.mark.parametrize("in_place", [True, False])
def test_kv_append_writes_the_new_rows(backend, in_place):
    g = torch.Generator().manual_seed(2)
    cache = torch.randn(3, 12, 2, 8, generator=g).to(TDEV)
    new = torch.randn(3, 4, 2, 8, generator=g)
    pos = torch.tensor([0, 8, 5], dtype=torch.int32)
    want = cache.cpu().clone()
    for b in range(3):
        want[b, int(pos[b]):int(pos[b]) + 4] = new[b]
    out = cache if in_place else torch.full_like(cache, float("nan"))
    before = cache.clone()
    plan = forced_plan(bc.Descriptor.like("kv_append", cache, new, pos), DEVICE, backend)
    if in_place and backend == Backend.TRITON:   # the serving path copies nothing: the kernel writes the new rows only
        real_copy, mem = torch.Tensor.copy_, cache.untyped_storage().data_ptr()

        def copy_(dst, src, *a, **kw):   # (other copies pass: the deferred index check's 4-byte flag on CUDA)
            if mem in (dst.untyped_storage().data_ptr(), src.untyped_storage().data_ptr()):
                raise AssertionError("the cache was copied")
            return real_copy(dst, src, *a, **kw)

        with mock.patch.object(torch.Tensor, "copy_", copy_):
            res = plan.run(cache, new.to(TDEV), pos.to(TDEV), out=out)
    else:
        res = plan.run(cache, new.to(TDEV), pos.to(TDEV), out=out)
    assert res is out
    assert torch.equal(out.cpu(), want)
    if not in_place:
        assert torch.equal(cache, before)            # the input cache is untouched


@pytest.mark.parametrize("backend", APPEND_BACKENDS, ids=str)
def test_kv_append_fp8_quantizes_by_scale_and_saturates(backend):
    cache = torch.zeros(1, 4, 1, 16).to(torch.float8_e4m3fn)
    new = torch.linspace(-300, 300, 32).reshape(1, 2, 1, 16)
    out = _run("kv_append", backend, cache, new, torch.tensor([1]), scale=0.5)
    want = (new / 0.5).clamp(-448, 448).to(torch.float8_e4m3fn).float()
    assert torch.equal(out[0, 1:3].float(), want[0]) and torch.all(out[0, [0, 3]].float() == 0)


@pytest.mark.parametrize("backend", APPEND_BACKENDS, ids=str)
@pytest.mark.parametrize("in_place", [True, False])
def test_paged_kv_append_writes_through_the_page_table(backend, in_place):
    rng = np.random.default_rng(0)
    kvp, kvi, _, P = page_table(rng, [8, 11], 4)
    g = torch.Generator().manual_seed(0)
    pages = torch.randn(P, 4, 2, 8, generator=g).to(TDEV)
    toks = [(0, 7), (1, 10), (1, 3)]
    new = torch.randn(3, 2, 8, generator=g)
    bi = torch.tensor([t[0] for t in toks], dtype=torch.int32)
    pos = torch.tensor([t[1] for t in toks], dtype=torch.int64)
    want = pages.cpu().clone()
    for t, (b, p) in enumerate(toks):
        want[int(kvi[kvp[b] + p // 4]), p % 4] = new[t]
    out = pages if in_place else torch.full_like(pages, float("nan"))
    plan = forced_plan(bc.Descriptor.like("paged_kv_append", pages, new, bi, pos, torch.tensor(kvp),
                                          torch.tensor(kvi)), DEVICE, backend)
    plan.run(pages, new.to(TDEV), bi.to(TDEV), pos.to(TDEV), torch.tensor(kvp).to(TDEV), torch.tensor(kvi).to(TDEV),
             out=out)
    assert torch.equal(out.cpu(), want)


@pytest.mark.parametrize("backend", APPEND_BACKENDS, ids=str)
def test_append_bad_positions_raise_and_write_nothing_out_of_bounds(backend):
    cache = torch.randn(2, 6, 1, 8)
    with pytest.raises(bc.InvalidProblemError, match=r"kv_append: argument 'positions'"):
        _run("kv_append", backend, cache, torch.randn(2, 2, 1, 8), torch.tensor([5, 0]))
        bc.check_errors()
    kvp, kvi = torch.tensor([0, 1, 3], dtype=torch.int32), torch.tensor([2, 0, 1], dtype=torch.int32)
    pages = torch.randn(3, 4, 1, 8)
    for bi, pos, name in (([2], [0], "batch_indices"), ([0], [4], "positions"), ([1], [-1], "positions")):
        with pytest.raises(bc.InvalidProblemError, match=rf"paged_kv_append: argument '{name}'"):
            _run("paged_kv_append", backend, pages, torch.randn(1, 1, 8), torch.tensor(bi), torch.tensor(pos), kvp, kvi)
            bc.check_errors()


# -- attention_merge ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", backends_for("attention_merge", DEVICE), ids=str)
def test_merging_two_halves_of_the_keys_gives_attention_over_all_of_them(backend):
    g = torch.Generator().manual_seed(6)
    q, k, v = torch.randn(5, 4, 16, generator=g), torch.randn(30, 2, 16, generator=g), torch.randn(30, 2, 16, generator=g)
    parts = [_dense(q, k[a:b], v[a:b], b - a, causal=False) for a, b in ((0, 12), (12, 30))]
    o = torch.stack([p[0] for p in parts]).float()
    lse = torch.stack([p[1] for p in parts]).float()
    out, ls = _run("attention_merge", backend, o, lse)
    full_o, full_l = _dense(q, k, v, 30, causal=False)
    _close(out, full_o, "f32", "merged")
    _close(ls, full_l, "f32", "merged lse", lse=True)


def test_merge_gradient_with_minus_inf_parts_matches_finite_differences():
    """Central differences of L = <g, out> + <g_lse, lse> over the finite lse outputs (a row with no part has lse
    -inf whatever the inputs: it contributes nothing and gets gradient 0, not NaN)."""
    from baracuda.backends.reference.attention_decode import merge

    rng = np.random.default_rng(0)
    o = rng.standard_normal((3, 2, 2, 4))
    lse = rng.standard_normal((3, 2, 2))
    lse[1, 0, 1] = -np.inf
    lse[:, 1, 0] = -np.inf
    g, gl = rng.standard_normal((2, 2, 4)), rng.standard_normal((2, 2))
    fin = np.isfinite(merge(o, lse)[1])

    def loss(o_, l_):
        out, ls = merge(o_, l_)
        return float((g * out).sum() + (gl * np.where(fin, ls, 0.0)).sum())

    want = []
    for x, i in ((o, 0), (lse, 1)):
        d = np.zeros_like(x)
        for idx in np.ndindex(x.shape):
            xp, xm = x.copy(), x.copy()
            xp[idx] += 1e-6
            xm[idx] -= 1e-6
            args_p, args_m = ((xp, lse), (xm, lse)) if i == 0 else ((o, xp), (o, xm))
            d[idx] = (loss(*args_p) - loss(*args_m)) / 2e-6 if np.isfinite(x[idx]) else 0.0
        want.append(d)
    desc = bc.Descriptor.like("attention_merge", o, lse)
    outs = bc.Plan.select(desc, "cpu").run(o, lse)
    got = bc.BackwardPlan.select(desc, "cpu").run(g, gl, o=o, lse=lse, out0=outs[0], out1=outs[1])
    for gg, w in zip(got, want):
        assert np.all(np.isfinite(gg))
        assert_close(gg, w, 1e-6, 1e-6, "merge grad")


# -- GPU only: bigger shapes ----------------------------------------------------------------------------------------
gpu = pytest.mark.skipif(DEVICE.type != "cuda", reason="GPU-only section (no CUDA device)")


@gpu
@pytest.mark.parametrize("dt", ["bf16", "f16"])
@pytest.mark.parametrize("Hq,Hkv,D", [(32, 8, 128), (32, 32, 64), (16, 1, 256)])
def test_gpu_decode_large(dt, Hq, Hkv, D):
    g = torch.Generator().manual_seed(0)
    lens = [4096, 1, 3000, 777]
    q, k, v, L = _decode_case(g, 4, 1, Hq, Hkv, D, 4096, lens, dt)
    out, lse = _run("sdpa_decode", Backend.TRITON, q, k, v, L, has_kv_lens=True)
    for b in range(4):
        o, s = _dense(q[b], k[b], v[b], lens[b])
        _close(out[b], o, dt, f"b{b}")
        _close(lse[b], s, dt, f"b{b} lse", lse=True)


@gpu
@pytest.mark.parametrize("fp8", [False, True])
def test_gpu_paged_decode_and_prefill_large(fp8):
    g = torch.Generator().manual_seed(1)
    lens = [2048, 17, 1500, 4000]
    nq = [1, 1, 128, 1]
    ins = _paged_case(g, nq, lens, 16, 32, 8, 128, dt="bf16", fp8=fp8)
    out, lse = _run("paged_attention", Backend.TRITON, *ins, k_scale=0.5 if fp8 else 1.0)
    _check_paged(ins, out, lse, lens, "bf16", ks=0.5 if fp8 else 1.0)
