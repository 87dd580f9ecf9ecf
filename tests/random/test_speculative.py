"""speculative_sampling (and its one-hot-draft form): the Triton kernel picks exactly the reference's tokens (f64
acceptance, int64 fixed-point draws) on long rows and with the device-side state; the rule's guarantee holds on
the reference (the first output token is distributed as the target row, the acceptance rate is sum min(p, q));
out-of-range draft ids raise the named error on both backends; the stream bookkeeping (2K + 1 elements a row)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.ops.random import advance, consumed
from baracuda.testing import test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,), check_values="sync")
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _case(rng, B, K, V, dtype=np.float32, greedy=False):
    tgt = _softmax(rng.standard_normal((B, K + 1, V)) * 3).astype(dtype)
    draft = _softmax(np.log(tgt[:, :K].astype(np.float64) + 1e-9) + rng.standard_normal((B, K, V))).astype(dtype)
    ids = np.array([rng.choice(V, p=draft[b, j] / draft[b, j].sum()) for b in range(B) for j in range(K)],
                   dtype=np.int64).reshape(B, K)
    return ("speculative_sampling_greedy", [ids, tgt]) if greedy else ("speculative_sampling", [ids, draft, tgt])


def _run(op, args, pref, **attrs):
    d = bc.Descriptor.like(op, *args, **attrs)
    if pref is REF:
        return bc.Plan.select(d, "cpu", pref).run(*args)
    outs = bc.Plan.select(d, DEVICE, pref).run(*(torch.from_numpy(np.asarray(a)).to(DEVICE.type) for a in args))
    return tuple(o.cpu().numpy() for o in outs)


@pytest.mark.parametrize("greedy", [False, True], ids=["draft-probs", "greedy"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_triton_picks_the_reference_tokens(greedy, dtype):
    op, args = _case(np.random.default_rng(4), 6, 3, 2500, dtype, greedy)
    for seed, offset in ((1, 0), (2 ** 40 + 5, 7)):
        got, want = _run(op, args, TRITON, seed=seed, offset=offset), _run(op, args, REF, seed=seed, offset=offset)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    st = np.array([2 ** 40 + 5, 4], dtype=np.int64)      # the state operand: (seed, base) + offset
    np.testing.assert_array_equal(_run(op, args + [st], TRITON, offset=3)[0], want[0])


def test_output_layout_drafts_then_token_then_padding():
    op, args = _case(np.random.default_rng(5), 50, 4, 12)
    out, acc = _run(op, args, REF, seed=3)
    assert acc.dtype == np.int32 and set(acc.tolist()) > {0, 4}
    for b in range(50):
        n = acc[b]
        np.testing.assert_array_equal(out[b, :n], args[0][b, :n])
        assert 0 <= out[b, n] < 12 and (out[b, n + 1:] == -1).all()


@pytest.mark.parametrize("greedy", [False, True], ids=["draft-probs", "greedy"])
def test_first_token_follows_the_target_and_acceptance_rate_is_sum_min(greedy):
    """Leviathan et al.'s guarantee: whatever the draft, the first emitted token ~ target row 0; P(accept draft 0) =
    sum_v min(p_v, q_v) (greedy: q one-hot at the draft, so p[draft])."""
    rng = np.random.default_rng(6)
    B, V = 20000, 5
    p = np.array([0.1, 0.4, 0.05, 0.3, 0.15])
    q = np.array([0.3, 0.2, 0.2, 0.1, 0.2])
    tgt = np.broadcast_to(np.stack([p, p])[None], (B, 2, V)).copy()
    if greedy:
        ids = np.full((B, 1), 2, dtype=np.int64)
        out, acc = _run("speculative_sampling_greedy", [ids, tgt], REF, seed=12)
        rate = p[2]
    else:
        ids = rng.choice(V, size=(B, 1), p=q).astype(np.int64)
        out, acc = _run("speculative_sampling", [ids, np.broadcast_to(q, (B, 1, V)).copy(), tgt], REF, seed=12)
        rate = np.minimum(p, q).sum()
    # binomial standard errors at B = 20000 are <= 0.0036: 0.012 is over 3 of them
    np.testing.assert_allclose(np.bincount(out[:, 0], minlength=V) / B, p, atol=0.012)
    assert abs((acc == 1).mean() - rate) < 0.012


@pytest.mark.parametrize("pref", [REF, TRITON], ids=["reference", "triton"])
def test_out_of_range_draft_id_raises(pref):
    op, args = _case(np.random.default_rng(7), 3, 2, 9)
    args[0][2, 1] = 9
    with pytest.raises(bc.InvalidProblemError, match=r"speculative_sampling: argument 'draft_token_ids'.*index 9"):
        _run(op, args, pref, seed=1)
    if pref is TRITON:         # checks off: the other rows are the reference's, the bad position is rejected
        off = bc.PlanPreference(prefer=(Backend.TRITON,), check_values="off")
        got = _run(op, args, off, seed=1)
        ok = [a.copy() for a in args]
        ok[0][2, 1] = 0
        want = _run(op, ok, REF, seed=1)
        np.testing.assert_array_equal(got[0][:2], want[0][:2])
        assert got[1][2] <= 1


def test_stream_bookkeeping_two_k_plus_one_elements_a_row():
    op, args = _case(np.random.default_rng(8), 3, 4, 6)
    d = bc.Descriptor.like(op, *args, seed=1)
    assert consumed(d) == 3 * 9
    st = torch.tensor([5, 0], dtype=torch.int64)
    advance(st, d)
    assert st.tolist() == [5, 28]
    full = _run(op, args, REF, seed=1, offset=2)
    for b in range(3):     # row b alone at offset + b (2K + 1) draws what it drew in the batch
        one = _run(op, [a[b:b + 1] for a in args], REF, seed=1, offset=2 + 9 * b)
        np.testing.assert_array_equal(one[0][0], full[0][b])
