"""The random family's generator and distributions: the NumPy Philox is tl.philox bit for bit; an element's value
depends on (seed, offset + index) only (block sizes, the aligned four-words-per-Philox path and the per-element
path give the same bits; an offset shifts the stream); the reference and Triton backends draw identical uniform
bits; and the distributions have the right moments and pass Kolmogorov-Smirnov / chi-square tests (fixed seeds:
the statistics are deterministic, the bounds are the 1% critical values)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.sku import Backend
from baracuda.backends.reference.random import philox4, stream_u32, unit_f32
from baracuda.backends.triton._lib.philox import philox
from baracuda.backends.triton.random.stream import _log_unit
from baracuda.testing import test_device

DEVICE = test_device()
TRITON = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))


def _dev(x):
    return x.to("cuda") if DEVICE.type == "cuda" else x


def _forced(**kw):
    from baracuda.backends.triton.random.stream import forced

    return forced(**kw)


def _fill(op, pref=TRITON, device=None, **attrs):
    d = bc.Descriptor.make(op, **attrs)
    y = bc.Plan.select(d, device or (DEVICE if pref is TRITON else "cpu"), pref).run()
    return y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)


def _host(y) -> np.ndarray:
    return y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)


def _ks(sample: np.ndarray, cdf) -> float:
    """The Kolmogorov-Smirnov statistic of ``sample`` against ``cdf`` (scipy is not a dependency)."""
    x = np.sort(sample.astype(np.float64))
    n = x.size
    f = cdf(x)
    return float(max(np.max(np.arange(1, n + 1) / n - f), np.max(f - np.arange(n) / n)))


def _ks_ok(sample, cdf):
    d = _ks(sample, cdf)
    assert d < 1.63 / math.sqrt(sample.size), f"KS statistic {d:.4g} over the 1% critical value"


@pytest.mark.parametrize("wide", [False, True], ids=["tl.philox", "wide"])
def test_numpy_philox_is_tl_philox_bit_for_bit(wide):
    """tl.philox and the widening-multiply form (_lib/philox.py, the fills' aligned path) in a tiny kernel
    (interpreter on the CPU, compiled on a GPU) against philox4, all four words, with a seed whose high half matters
    and counters whose high half is set."""
    import triton
    import triton.language as tl

    @triton.jit
    def k(out, seed, base, N: tl.constexpr, WIDE: tl.constexpr):
        c = base + tl.arange(0, N).to(tl.int64)
        z = tl.zeros([N], dtype=tl.uint32)
        if WIDE:
            w0, w1, w2, w3 = philox(seed, (c & 0xFFFFFFFF).to(tl.uint32), (c >> 32).to(tl.uint32), z, z)
        else:
            w0, w1, w2, w3 = tl.philox(seed, (c & 0xFFFFFFFF).to(tl.uint32), (c >> 32).to(tl.uint32), z, z)
        i = tl.arange(0, N)
        tl.store(out + i, w0)
        tl.store(out + N + i, w1)
        tl.store(out + 2 * N + i, w2)
        tl.store(out + 3 * N + i, w3)

    dev = "cuda" if DEVICE.type == "cuda" else "cpu"
    for seed, base in ((0, 0), (123456789, 5), (2 ** 40 + 7, 2 ** 33 + 11)):
        out = torch.zeros(4 * 64, dtype=torch.int32, device=dev)
        k[(1,)](out, seed, base, N=64, WIDE=wide)
        got = out.cpu().numpy().view(np.uint32).reshape(4, 64)
        want = np.stack(philox4(seed, base + np.arange(64, dtype=np.uint64)))
        np.testing.assert_array_equal(got, want)


def test_the_normal_fills_log_is_within_one_ulp():
    """stream._log_unit (the f32 normal fill's log of U' = (k + 1) 2^-24) against float64 log, in ulps of the f32
    result: every 61st of the 2^24 values U' takes, and both ends and the sqrt(1/2) boundary of its reduction."""
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr, N: tl.constexpr):
        i = tl.arange(0, N)
        tl.store(y_ptr + i, _log_unit(tl.load(x_ptr + i)))

    n = np.unique(np.concatenate([np.arange(1, 1 << 24, 61), [1, 2, 3, (1 << 24) - 1, 1 << 24],
                                  np.arange(11863280, 11863290)]))     # (sqrt(1/2) 2^24 = 11863283.2)
    n = np.concatenate([n, np.full((1 << 19) - n.size, 1 << 24)])
    x = (n.astype(np.float64) * 2.0 ** -24).astype(np.float32)
    dev = "cuda" if DEVICE.type == "cuda" else "cpu"
    y = torch.empty(x.size, dtype=torch.float32, device=dev)
    k[(1,)](torch.as_tensor(x, device=dev), y, N=x.size)
    got, want = y.cpu().numpy().astype(np.float64), np.log(x.astype(np.float64))
    ulps = np.abs(got - want) / np.spacing(np.abs(want).astype(np.float32)).astype(np.float64)
    assert got[x == 1.0].tolist() == [0.0] * int(np.sum(x == 1.0))
    assert np.nanmax(np.where(want == 0, 0, ulps)) <= 1.0


@pytest.mark.parametrize("op,attrs", [("uniform", {}), ("normal", {"mean": 0.5, "std": 2.0}),
                                      ("randint", {"low": -3, "high": 1000}), ("exponential", {"lambd": 3.0})])
def test_same_seed_same_bits_whatever_the_block_size_or_path(op, attrs):
    base = dict(shape=(3, 333), seed=2024, offset=8, **attrs)
    outs = []
    for kw in ({"block": 64}, {"block": 2048}, {"block": 128, "aligned": False}):
        with _forced(**kw):
            outs.append(_fill(op, **base))
    for o in outs[1:]:
        np.testing.assert_array_equal(o.view(np.uint8), outs[0].view(np.uint8))


def test_reference_and_triton_draw_identical_uniform_bits():
    """uniform(0, 1) in f32 is U = (u >> 8) 2^-24 exactly on both backends, for aligned and odd offsets."""
    for offset in (0, 4, 3, 2 ** 33 + 1):
        a = _fill("uniform", shape=(1000,), seed=77, offset=offset)
        b = _fill("uniform", REF, shape=(1000,), seed=77, offset=offset)
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, unit_f32(stream_u32(77, offset, 1000)).astype(np.float32))


def test_an_offset_shifts_the_stream():
    full = _fill("uniform", shape=(600,), seed=5)
    for k in (1, 4, 7, 100):
        np.testing.assert_array_equal(_fill("uniform", shape=(600 - k,), seed=5, offset=k), full[k:])


def test_seeds_give_different_streams_including_the_high_word():
    a = _fill("uniform", REF, shape=(256,), seed=1)
    for s in (2, 1 + 2 ** 32):
        assert np.mean(a == _fill("uniform", REF, shape=(256,), seed=s)) < 0.02


def test_uniform_moments_and_ks():
    x = _fill("uniform", REF, shape=(200000,), seed=3, low=-2.0, high=3.0)
    assert x.min() >= -2.0 and x.max() < 3.0
    assert abs(x.mean() - 0.5) < 4 * 5 / math.sqrt(12 * x.size)
    _ks_ok(x, lambda t: (t + 2.0) / 5.0)
    _ks_ok(_fill("uniform", shape=(20000,), seed=4), lambda t: t)


def test_normal_moments_and_ks():
    erf = np.vectorize(math.erf)
    x = _fill("normal", REF, shape=(200000,), seed=8, mean=1.0, std=2.0, dtype="f64")
    assert abs(x.mean() - 1.0) < 4 * 2.0 / math.sqrt(x.size)
    assert abs(x.std() - 2.0) < 0.02
    z = (x - 1.0) / 2.0
    assert abs(np.mean(z ** 3)) < 0.03 and abs(np.mean(z ** 4) - 3.0) < 0.08    # skewness, kurtosis
    _ks_ok(x, lambda t: 0.5 * (1 + erf((t - 1.0) / (2.0 * math.sqrt(2)))))
    y = _fill("normal", shape=(20000,), seed=9)
    _ks_ok(y, lambda t: 0.5 * (1 + erf(t / math.sqrt(2))))
    # the two halves of each Box-Muller pair are uncorrelated
    assert abs(np.corrcoef(x[0::2] - 1, x[1::2] - 1)[0, 1]) < 0.02


def test_exponential_moments_and_ks():
    x = _fill("exponential", REF, shape=(200000,), seed=12, lambd=2.0)
    assert x.min() >= 0 and abs(x.mean() - 0.5) < 4 * 0.5 / math.sqrt(x.size)
    _ks_ok(x, lambda t: 1 - np.exp(-2.0 * t))


def test_randint_is_uniform_over_its_range_chi_square():
    x = _fill("randint", shape=(30000,), seed=13, low=-5, high=7)
    assert x.dtype == np.int64 and x.min() == -5 and x.max() == 6
    counts = np.bincount(x + 5, minlength=12)
    e = x.size / 12
    chi2 = float(((counts - e) ** 2 / e).sum())
    assert chi2 < 24.7, chi2       # 1% critical value, 11 degrees of freedom
    big = _fill("randint", REF, shape=(1000,), seed=1, low=0, high=2 ** 32)
    assert big.max() > 2 ** 31


def test_bernoulli_tensor_and_scalar_p():
    p = np.linspace(0.0, 1.0, 11)
    x = np.repeat(p[None, :], 4000, axis=0)
    for pref, dev in ((REF, "cpu"), (TRITON, DEVICE)):
        d = bc.Descriptor.like("bernoulli", x, seed=3)
        y = bc.Plan.select(d, dev, pref).run(_dev(torch.from_numpy(x)) if pref is TRITON else x)
        y = y.cpu().numpy() if isinstance(y, torch.Tensor) else y
        assert set(np.unique(y)) <= {0.0, 1.0}
        np.testing.assert_allclose(y.mean(0), p, atol=0.03)
        assert y[:, 0].sum() == 0 and y[:, -1].min() == 1
    d = bc.Descriptor.like("bernoulli", x[:100], seed=3, p=0.25)
    y = bc.Plan.select(d, "cpu", REF).run(x[:100])
    assert abs(y.mean() - 0.25) < 0.03


def test_randperm_is_a_permutation_and_positions_are_uniform():
    for n in (1, 5, 1000):
        for pref in (REF, TRITON):
            y = _fill("randperm", pref, n=n, seed=21)
            np.testing.assert_array_equal(np.sort(y), np.arange(n))
    first = np.array([_fill("randperm", REF, n=6, seed=s)[0] for s in range(3000)])
    counts = np.bincount(first, minlength=6)
    chi2 = float(((counts - 500) ** 2 / 500).sum())
    assert chi2 < 15.1, chi2       # 1% critical value, 5 degrees of freedom


@pytest.mark.parametrize("dtype", [None, "i32", "f32"])
def test_randperm_past_the_one_program_cap_is_the_same_permutation(monkeypatch, dtype):
    """Past the one-program cap the words go through the sort family's long-row sort (forced here to blocks of 8
    and a cap of 64, so the interpreter runs merge passes): the reference's permutation, bit for bit, at every
    output dtype, with a seed and with a state operand.  The other output dtypes cast the same permutation: they run
    one of the lengths (each length takes the interpreter ~10 s)."""
    from baracuda.backends.triton.random import sampling
    from baracuda.backends.triton.sort.rows import forced

    monkeypatch.setattr(sampling, "RANDPERM_CAP", 64)
    extra = {} if dtype is None else {"dtype": dtype}
    with forced(nmax=8, tile=64):
        for n, seed in ((65, 3), (300, 11), (1000, 2 ** 40 + 5)) if dtype is None else ((300, 11),):
            want = _fill("randperm", REF, n=n, seed=seed, **extra)
            d = bc.Descriptor.make("randperm", n=n, seed=seed, **extra)
            plan = bc.Plan.select(d, DEVICE, TRITON)
            assert plan.sku.route == "triton:randperm_sorted" and plan.workspace_size > 0
            got = _host(plan.run())
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        st = torch.tensor([77, 40], dtype=torch.int64)
        d = bc.Descriptor.like("randperm", st, n=200, offset=3, **extra)
        got = bc.Plan.select(d, DEVICE, TRITON).run(st.cuda() if DEVICE.type == "cuda" else st)
        want = bc.Plan.select(d, "cpu", REF).run(st)
        np.testing.assert_array_equal(_host(got), _host(want))
        np.testing.assert_array_equal(_host(want), _fill("randperm", REF, n=200, seed=77, offset=43, **extra))


def test_multinomial_frequencies_follow_the_weights():
    w = np.array([[0.1, 0.0, 0.3, 0.6], [1.0, 1.0, 1.0, 1.0]])
    d = bc.Descriptor.like("multinomial", w, num_samples=20000, replacement=True, seed=4)
    y = bc.Plan.select(d, "cpu", REF).run(w)
    np.testing.assert_allclose(np.bincount(y[0], minlength=4) / 20000, w[0] / w[0].sum(), atol=0.015)
    np.testing.assert_allclose(np.bincount(y[1], minlength=4) / 20000, 0.25, atol=0.015)
    # without replacement: distinct, never a zero weight while a positive one is left, first pick ~ w / sum(w)
    firsts = []
    for s in range(2000):
        d = bc.Descriptor.like("multinomial", w, num_samples=3, replacement=False, seed=s)
        y = bc.Plan.select(d, "cpu", REF).run(w)
        assert len(set(y[0])) == 3 and 1 not in y[0] and len(set(y[1])) == 3
        firsts.append(y[0, 0])
    np.testing.assert_allclose(np.bincount(firsts, minlength=4) / 2000, w[0] / w[0].sum(), atol=0.035)


def test_multinomial_triton_matches_the_reference_long_rows():
    rng = np.random.default_rng(1)
    w = rng.uniform(0, 1, (2, 5000)).astype(np.float32)
    for rep, ns in ((True, 33), (False, 4)):
        d = bc.Descriptor.like("multinomial", w, num_samples=ns, replacement=rep, seed=8, offset=3)
        a = bc.Plan.select(d, DEVICE, TRITON).run(_dev(torch.from_numpy(w))).cpu().numpy()
        np.testing.assert_array_equal(a, bc.Plan.select(d, "cpu", REF).run(w))


def test_consumed_counts_the_elements_an_op_draws():
    from baracuda.ops.random import consumed

    assert consumed(bc.Descriptor.make("uniform", shape=(3, 5), seed=1)) == 15
    x = np.zeros((2, 3, 4, 5), np.float32)
    assert consumed(bc.Descriptor.like("dropout2d", x, seed=1)) == 6
    assert consumed(bc.Descriptor.like("dropout", x, seed=1, training=False)) == 0
    w = np.ones((3, 7), np.float32)
    assert consumed(bc.Descriptor.like("multinomial", w, num_samples=2, seed=1)) == 21
    assert consumed(bc.Descriptor.like("multinomial", w, num_samples=2, replacement=True, seed=1)) == 6


# -- the device-side stream state (CUDA graphs) --------------------------------------------------------------------
def _state_run(op, state, pref=TRITON, xs=(), **attrs):
    d = bc.Descriptor.like(op, *xs, torch.as_tensor(state), **attrs)
    dev = DEVICE if pref is TRITON else "cpu"
    y = bc.Plan.select(d, dev, pref).run(*[_dev(torch.as_tensor(x)) for x in xs], _dev(torch.as_tensor(state)))
    return y.cpu().numpy() if isinstance(y, torch.Tensor) else np.asarray(y)


def test_a_state_operand_draws_the_stream_of_its_seed_and_base_plus_offset():
    """(seed, base) in the state + attribute offset == seed, offset = base + offset as attributes, on both backends
    and whatever the base's alignment (an odd device base takes the per-element path at run time)."""
    for base, off in ((0, 0), (8, 4), (6, 1), (2 ** 35 + 3, 0)):
        want = _fill("normal", shape=(4, 77), seed=2 ** 41 + 9, offset=base + off)
        for pref in (TRITON, REF):
            got = _state_run("normal", np.array([2 ** 41 + 9, base], np.int64), pref, shape=(4, 77), offset=off)
            # (the GPU's f32 normal takes the hardware sin / cos, ~2^-20.5 absolute, times r <= 5.8: ~5e-6)
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-5)
    x = np.random.default_rng(0).standard_normal((6, 50)).astype(np.float32)
    want = bc.Plan.select(bc.Descriptor.like("dropout", x, p=0.3, seed=5, offset=12), "cpu", REF).run(x)
    got = _state_run("dropout", np.array([5, 12], np.int64), xs=(x,), p=0.3)
    np.testing.assert_array_equal(got == 0, want == 0)                 # the same mask
    np.testing.assert_allclose(got, want, rtol=1e-6)                   # x / (1 - p): one f32 rounding


def test_advance_moves_the_state_past_what_an_op_drew():
    from baracuda.ops.random import advance, new_state

    st = new_state(17)
    d = bc.Descriptor.like("uniform", st, shape=(3, 7))
    plan = bc.Plan.select(d, "cpu", TRITON)
    a = plan.run(st).numpy()
    advance(st, d)                      # 21 drawn -> offset 24 (multiples of 4 keep the four-word blocks aligned)
    assert st.tolist() == [17, 24]
    b = plan.run(st).numpy()
    np.testing.assert_array_equal(a, _fill("uniform", shape=(3, 7), seed=17))
    np.testing.assert_array_equal(b, _fill("uniform", shape=(3, 7), seed=17, offset=24))


def test_dropout_backward_reads_the_saved_state():
    x = np.random.default_rng(1).uniform(0.5, 1.5, (5, 40)).astype(np.float32)
    st = torch.tensor([123, 40], dtype=torch.int64)
    d = bc.Descriptor.like("dropout", x, st, p=0.4)
    y = bc.Plan.select(d, "cpu", TRITON).run(torch.from_numpy(x), st)
    (dx,) = bc.BackwardPlan.select(d, "cpu", TRITON).run(torch.ones_like(y), state=st)
    np.testing.assert_allclose(dx.numpy(), (y.numpy() != 0) / 0.6, rtol=1e-6)


@pytest.mark.skipif(DEVICE.type != "cuda", reason="CUDA graphs need a GPU")
def test_cuda_graph_replays_draw_fresh_numbers_after_advance():
    from baracuda.ops.random import advance, new_state

    st = new_state(99, "cuda")
    d = bc.Descriptor.like("uniform", st, shape=(1000,))
    plan = bc.Plan.select(d, DEVICE, TRITON)
    out = torch.empty(1000, device="cuda")
    plan.run(st, out=out)                               # warm-up (compile) outside the capture
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        plan.run(st, out=out)
    got = []
    for _ in range(3):
        g.replay()
        got.append(out.cpu().numpy().copy())
        advance(st, d)
    for i, a in enumerate(got):
        np.testing.assert_array_equal(a, _fill("uniform", REF, shape=(1000,), seed=99, offset=1000 * i))
