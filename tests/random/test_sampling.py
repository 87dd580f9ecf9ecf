"""top_k_top_p_sampling: the kept set is the intersection of torch's sort-based top-k, top-p and min-p filters
(applied jointly to the original distribution), the sort-free Triton kernel draws the same token as the reference,
and the draws follow the renormalized kept distribution."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.backends.reference.random_sampling import keep_threshold
from baracuda.testing import test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _dev(x):
    return x.to("cuda") if DEVICE.type == "cuda" else x


def torch_kept(p: torch.Tensor, k: int, top_p: float, min_p: float) -> torch.Tensor:
    """The peer: torch's sort-based filters (the vLLM / HF formulation), intersected."""
    V = p.numel()
    keep = torch.ones(V, dtype=torch.bool)
    if 0 < k < V:
        keep &= p >= torch.topk(p, k).values[-1]
    if top_p < 1:
        s, i = torch.sort(p, descending=True)
        c = torch.cumsum(s, 0)
        n = int(torch.searchsorted(c, top_p * p.sum()).item()) + 1     # the shortest prefix reaching top_p
        keep &= p >= s[min(n, V) - 1]
    keep &= p >= min_p * p.max()
    return keep


def _run(probs, k, p, m, pref, seed=1, offset=0):
    args = (probs, np.asarray(k, np.int64), np.asarray(p, np.float64), np.asarray(m, np.float64))
    d = bc.Descriptor.like("top_k_top_p_sampling", *args, seed=seed, offset=offset)
    if pref is REF:
        return bc.Plan.select(d, "cpu", REF).run(*args)
    return bc.Plan.select(d, DEVICE, TRITON).run(*(_dev(torch.from_numpy(a)) for a in args)).cpu().numpy()


@pytest.mark.parametrize("k,top_p,min_p", [(5, 1.0, 0.0), (0, 0.7, 0.0), (0, 1.0, 0.2), (20, 0.9, 0.05),
                                           (3, 0.99, 0.0), (200, 0.5, 0.3)])
def test_kept_set_is_torchs_joint_filters(k, top_p, min_p):
    rng = np.random.default_rng(k)
    for _ in range(5):
        p = rng.uniform(0, 1, 300) ** 4
        t = keep_threshold(p, k, top_p, min_p)
        want = torch_kept(torch.from_numpy(p), k, top_p, min_p).numpy()
        np.testing.assert_array_equal(p >= t, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_triton_draws_the_reference_token_long_rows(dtype):
    rng = np.random.default_rng(3)
    probs = (rng.uniform(0, 1, (6, 5000)) ** 3).astype(dtype)
    k, p, m = [0, 40, 5000, 1, 7, 100], [0.9, 1.0, 0.3, 1.0, 0.8, 0.95], [0.0, 0.0, 0.1, 0.0, 0.02, 0.5]
    for seed in (1, 2 ** 40 + 5):
        np.testing.assert_array_equal(_run(probs, k, p, m, TRITON, seed, 3), _run(probs, k, p, m, REF, seed, 3))


def test_degenerate_filters_pick_the_argmax():
    rng = np.random.default_rng(5)
    probs = rng.uniform(0, 1, (3, 64))
    want = probs.argmax(1)
    for pref in (REF, TRITON):
        np.testing.assert_array_equal(_run(probs, [1, 1, 1], [1.0] * 3, [0.0] * 3, pref), want)
        np.testing.assert_array_equal(_run(probs, [0] * 3, [0.0] * 3, [0.0] * 3, pref), want)
        np.testing.assert_array_equal(_run(probs, [0] * 3, [1.0] * 3, [1.0] * 3, pref), want)


def test_draws_follow_the_renormalized_kept_distribution():
    p = np.array([0.05, 0.3, 0.01, 0.2, 0.14, 0.3])
    B = 30000
    probs = np.repeat(p[None], B, 0)      # one draw per row: stream elements offset + row are independent
    y = _run(probs, [4] * B, [0.9] * B, [0.0] * B, REF, seed=11)
    kept = torch_kept(torch.from_numpy(p), 4, 0.9, 0.0).numpy()
    want = np.where(kept, p, 0) / np.where(kept, p, 0).sum()
    np.testing.assert_allclose(np.bincount(y, minlength=6) / B, want, atol=0.012)
    assert not np.isin(y, np.flatnonzero(~kept)).any()


def test_the_bench_peer_draws_only_tokens_the_filter_keeps():
    """top_k_top_p_sampling's bench peer (torch's sort-based filter + multinomial, timed beside the op, never
    compared value for value) keeps the op's token set: every draw is a token at or above the reference's threshold."""
    from baracuda.ops.random_sampling import _bench_peer

    rng = np.random.default_rng(11)
    probs = rng.random((6, 40)) ** 3
    k, tp, mp = np.array([0, 3, 10, 40, 7, 1]), np.array([0.9, 1.0, 0.3, 0.7, 0.0, 0.5]), np.array([0, 0.2, 0, 0.1, 0, 0])
    ts = [keep_threshold(probs[i], int(k[i]), float(tp[i]), float(mp[i])) for i in range(6)]
    for seed in range(20):
        tok = _bench_peer(torch.tensor(probs), torch.tensor(k), torch.tensor(tp), torch.tensor(mp), seed=seed).numpy()
        for i in range(6):
            assert probs[i, tok[i]] >= ts[i], (seed, i)
