"""The serving entry points of ``baracuda.torch.nn.functional`` (flash_attn_varlen, attention_decode,
PagedAttention): values against torch's SDPA in float64 over hand-gathered sequences / pages, gradients of the varlen
call against torch autograd of that dense formula, FlashAttention's argument conventions, in-place page appends
and the errors of a wrong call."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as TF  # noqa: E402

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing.checks import TDEV  # noqa: E402

F = bt.nn.functional
F64 = dict(dtype=torch.float64, device=TDEV)
# float64 on the CPU (reference backend) or the GPU's f32 kernels would differ; the GPU runs these in float32 with
# flash's online softmax against torch's materialized one: a few 1e-6 relative
TOL = dict(rtol=1e-10, atol=1e-12) if TDEV == "cpu" else dict(rtol=2e-5, atol=2e-6)
DT = torch.float64 if TDEV == "cpu" else torch.float32


def _dense(q, k, v, causal, scale=None, window=(None, None)):
    """One sequence, q [Sq, Hq, D], k / v [Sk, Hkv, D]: torch's SDPA with the causal / window band aligned
    bottom-right (FlashAttention's convention), GQA by repeating the kv heads."""
    sq, sk, hq, hk = q.shape[0], k.shape[0], q.shape[1], k.shape[1]
    i = torch.arange(sq, device=q.device)[:, None] + (sk - sq)
    j = torch.arange(sk, device=q.device)[None, :]
    keep = torch.ones(sq, sk, dtype=torch.bool, device=q.device)
    if causal:
        keep &= j <= i
    if window[0] is not None:
        keep &= j >= i - window[0]
    if window[1] is not None:
        keep &= j <= i + window[1]
    kk, vv = (t.transpose(0, 1).repeat_interleave(hq // hk, 0) for t in (k, v))
    return TF.scaled_dot_product_attention(q.transpose(0, 1), kk, vv, attn_mask=keep, scale=scale).transpose(0, 1)


@pytest.mark.parametrize("causal,window", [(False, (-1, -1)), (True, (-1, -1)), (False, (2, 1)), (True, (3, -1))])
def test_flash_attn_varlen_matches_per_sequence_attention_and_its_gradients(causal, window):
    g = torch.Generator().manual_seed(0)
    lq, lk = [3, 1, 5], [4, 6, 5]
    cq = torch.tensor([0, 3, 4, 9], dtype=torch.int32, device=TDEV)
    ck = torch.tensor([0, 4, 10, 15], dtype=torch.int32, device=TDEV)
    q = torch.randn(9, 4, 8, generator=g).to(**dict(F64, dtype=DT)).requires_grad_()
    k = torch.randn(15, 2, 8, generator=g).to(**dict(F64, dtype=DT)).requires_grad_()
    v = torch.randn(15, 2, 6, generator=g).to(**dict(F64, dtype=DT)).requires_grad_()
    out, lse = F.flash_attn_varlen(q, k, v, cq, ck, 5, 6, causal=causal, window_size=window, softmax_scale=0.4,
                                   return_lse=True)
    assert out.shape == (9, 4, 6) and lse.shape == (4, 9)
    win = tuple(None if w < 0 else w for w in window)
    want = torch.cat([_dense(q[a:a + n], k[b:b + m], v[b:b + m], causal, 0.4, win)
                      for a, b, n, m in zip(cq[:-1].tolist(), ck[:-1].tolist(), lq, lk)])
    torch.testing.assert_close(out, want, **TOL)
    go = torch.randn(out.shape, generator=g).to(out)
    got = torch.autograd.grad(out, (q, k, v), go)
    exp = torch.autograd.grad(want, (q, k, v), go)
    for a, b in zip(got, exp):
        torch.testing.assert_close(a, b, **TOL)


def test_flash_attn_varlen_argument_errors():
    q = torch.randn(4, 2, 8, device=TDEV)
    cu = torch.tensor([0, 4], dtype=torch.int32, device=TDEV)
    with pytest.raises(TypeError, match=r"sdpa_varlen: argument 'window_size': expected a pair of ints"):
        F.flash_attn_varlen(q, q, q, cu, cu, 4, 4, window_size=3)
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'window_size\[0\]': expected -1 \(unbounded\)"):
        F.flash_attn_varlen(q, q, q, cu, cu, 4, 4, window_size=(-2, 0))
    with pytest.raises(bc.InvalidProblemError, match="max_seqlen_q"):
        F.flash_attn_varlen(q, q, q, cu, cu, -1, 4)


def test_attention_decode_matches_dense_attention_over_each_rows_valid_keys():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(3, 2, 4, 16, generator=g).to(**dict(F64, dtype=DT))
    kc, vc = (torch.randn(3, 9, 2, 16, generator=g).to(**dict(F64, dtype=DT)) for _ in range(2))
    lens = torch.tensor([9, 4, 2], dtype=torch.int32, device=TDEV)
    out = F.attention_decode(q, kc, vc, lens)
    for b, n in enumerate(lens.tolist()):
        torch.testing.assert_close(out[b], _dense(q[b], kc[b, :n], vc[b, :n], True), **TOL)


def _pages(g):
    pages_k, pages_v = (torch.randn(6, 4, 2, 16, generator=g).to(**dict(F64, dtype=DT)) for _ in range(2))
    # request 0: pages [5, 0] (4 + 3 tokens), request 1: pages [2] (2 tokens), request 2: pages [1, 4, 3] (4+4+1)
    table = (torch.tensor([0, 1, 4, 6]), torch.tensor([0, 2, 3, 6]), torch.tensor([5, 0, 2, 1, 4, 3]),
             torch.tensor([3, 2, 1]))
    return pages_k, pages_v, tuple(t.to(TDEV) for t in table)


def test_paged_attention_plans_once_and_runs_decode_and_prefill_per_layer():
    g = torch.Generator().manual_seed(2)
    pk, pv, (qo, kvp, kvi, last) = _pages(g)
    pa = F.PagedAttention(causal=True)
    pa.plan(qo, kvp, kvi, last)
    for layer in range(2):          # the same plan serves every layer
        q = torch.randn(6, 4, 16, generator=g).to(**dict(F64, dtype=DT))
        out = pa.run(q, pk, pv)
        for b in range(3):
            pages = kvi[kvp[b]:kvp[b + 1]].tolist()
            n = (len(pages) - 1) * 4 + int(last[b])
            keys = torch.cat([pk[p] for p in pages])[:n]
            vals = torch.cat([pv[p] for p in pages])[:n]
            rows = slice(int(qo[b]), int(qo[b + 1]))
            torch.testing.assert_close(out[rows], _dense(q[rows], keys, vals, True), **TOL)


def test_paged_append_writes_the_new_tokens_in_place_through_the_page_table():
    g = torch.Generator().manual_seed(3)
    pk, _, table = _pages(g)
    before = pk.clone()
    pa = F.PagedAttention()
    pa.plan(*table)
    new = torch.randn(2, 2, 16, generator=g).to(pk)
    res = pa.append(pk, new, torch.tensor([0, 2], device=TDEV), torch.tensor([7, 9], device=TDEV))
    assert res is pk
    want = before.clone()
    want[0, 3] = new[0]          # request 0, position 7: its 2nd page (0), row 3
    want[3, 1] = new[1]          # request 2, position 9: its 3rd page (3), row 1
    assert torch.equal(pk, want)


def test_paged_attention_needs_a_plan_and_tensors():
    pa = F.PagedAttention()
    with pytest.raises(bc.InvalidProblemError, match=r"paged_attention: argument 'plan': expected plan\("):
        pa.run(torch.randn(1, 2, 8), torch.randn(1, 4, 2, 8), torch.randn(1, 4, 2, 8))
    with pytest.raises(TypeError, match=r"paged_attention: argument 'kv_indices': expected a Tensor, got list"):
        pa.plan(torch.tensor([0, 1]), torch.tensor([0, 1]), [0], torch.tensor([1]))


def test_serving_entry_points_are_not_torch_names():
    """They live in baracuda.torch.nn.functional but are not published torch names (bt.mode routes nothing to
    them: torch has no such function)."""
    for n in ("flash_attn_varlen", "attention_decode", "PagedAttention"):
        assert hasattr(F, n) and f"nn.functional.{n}" not in bt.PUBLISHED
