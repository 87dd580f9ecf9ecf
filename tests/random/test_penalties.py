"""apply_penalties: the reference is vLLM's dense formulation in torch (the spec's torch peer, checked on every sample
by tests/generic); here the Triton kernel's sorted-history fix-up against the reference on histories with many
repeats and prompt / output overlap, a long history, the per-row and 0-d penalty forms, and out-of-range ids /
bad lengths: the named error on both backends, the untouched tokens still the copy of the logits."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.testing import assert_close, test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _case(rng, B, V, L, scalar=False, dtype=np.float32):
    logits = (rng.standard_normal((B, V)) * 3).astype(dtype)
    ids = rng.integers(0, V, size=(B, L)).astype(np.int32)
    slens = rng.integers(L // 2, L + 1, size=B).astype(np.int64)
    plens = (slens * rng.uniform(0, 1, B)).astype(np.int64)
    shape = () if scalar else (B,)
    pens = [rng.uniform(a, b, size=shape).astype(np.float32) for a, b in ((0.5, 2.0), (-0.5, 1.0), (-0.5, 1.0))]
    return [logits, ids, plens, slens] + pens


def _run(args, pref, check="sync"):
    d = bc.Descriptor.like("apply_penalties", *args)
    p = bc.PlanPreference(prefer=pref.prefer, check_values=check)
    if pref is REF:
        return bc.Plan.select(d, "cpu", p).run(*args)
    dev = [torch.from_numpy(np.asarray(a)).to(DEVICE.type) for a in args]
    return bc.Plan.select(d, DEVICE, p).run(*dev).cpu().numpy()


@pytest.mark.parametrize("B,V,L,scalar", [(3, 7, 40, False), (2, 500, 300, True), (1, 2000, 700, False)])
def test_triton_matches_the_reference(B, V, L, scalar):
    args = _case(np.random.default_rng(L), B, V, L, scalar)
    # f32: one division and two subtractions in f32 against float64 (a few ulps of |logit| <= ~15)
    assert_close(_run(args, TRITON), _run(args, REF), 1e-5, 1e-5, f"apply_penalties {B}x{V} L={L}")


def test_penalties_follow_the_definition_on_a_hand_case():
    logits = np.array([[2.0, -1.0, 0.5, 3.0, -2.0]], np.float32)
    # prompt: 0, 1; output: 1, 3, 3 (token 2 and 4 never seen)
    ids = np.array([[0, 1, 1, 3, 3, 4, 4]], np.int64)
    args = [logits, ids, np.array([2]), np.array([5]), np.array([2.0], np.float32), np.array([0.5], np.float32),
            np.array([0.25], np.float32)]
    want = np.array([[2.0 / 2, -1.0 * 2 - 0.5 - 0.25, 0.5, 3.0 / 2 - 1.0 - 0.25, -2.0]])
    for pref in (REF, TRITON):
        assert_close(_run(args, pref), want, 1e-6, 1e-6, f"hand case {pref.prefer}")


@pytest.mark.parametrize("pref", [REF, TRITON], ids=["reference", "triton"])
def test_out_of_range_id_raises_and_writes_nothing_out_of_bounds(pref):
    rng = np.random.default_rng(1)
    args = _case(rng, 2, 9, 6)
    args[3][:] = 6
    args[2][:] = 2
    args[1][1, 4] = 9          # one past the vocabulary, inside row 1's history
    with pytest.raises(bc.InvalidProblemError, match=r"apply_penalties: argument 'token_ids'.*\[0, 9\).*index 9"):
        _run(args, pref)
    if pref is TRITON:         # checks off: the row is still computed, the bad id skipped
        got = _run(args, pref, check="off")
        ids = args[1][1, :6]
        seen = set(ids[ids < 9].tolist())
        unseen = [v for v in range(9) if v not in seen]
        np.testing.assert_array_equal(got[1, unseen], args[0][1, unseen])
    args[1][1, 4] = -1
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'token_ids'.*index -1"):
        _run(args, pref)


@pytest.mark.parametrize("pref", [REF, TRITON], ids=["reference", "triton"])
def test_bad_lengths_raise(pref):
    args = _case(np.random.default_rng(2), 3, 9, 6)
    args[3][2] = 7             # seq_len past the 6 columns
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'seq_lens'.*row 2"):
        _run(args, pref)
    args[3][2] = 3
    args[2][2] = 4             # prompt longer than the history
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'seq_lens'.*row 2"):
        _run(args, pref)


def test_long_histories_are_refused_with_the_reason():
    d = bc.Descriptor.make("apply_penalties", ((2, 10), "f32"), ((2, 9000), "i64"), ((2,), "i64"), ((2,), "i64"),
                           ((2,), "f32"), ((2,), "f32"), ((2,), "f32"))
    ex = bc.explain(d, DEVICE, TRITON)
    assert "8192" in str(ex)
