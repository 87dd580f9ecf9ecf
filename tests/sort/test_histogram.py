"""histc / histogram / bincount beyond the generic suite: torch's edge rules (the maximum in the last bin,
out-of-range values and NaN ignored, equal bounds widened), many blocks vs torch, the data range found on the
device, a bincount value out of range (the named error, nothing written out of bounds), the drop-ins' result types
and the weights' dtype rule, and what the plans say of their determinism."""
from __future__ import annotations

import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing.checks import on_device as _dev, plan_or_skip as _plan

BACKENDS = (Backend.REFERENCE, Backend.TRITON)


def _run(op, *ins, backend, **attrs):
    ins = tuple(_dev(t) for t in ins)
    out = _plan(op, *ins, backend=backend, **attrs).run(*ins)
    return tuple(o.cpu() for o in out) if isinstance(out, tuple) else out.cpu()


@pytest.mark.parametrize("backend", BACKENDS)
def test_histc_edge_rules_match_torch(backend):
    x = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.0, 4.0, -0.5, 9.0, float("nan")])
    for bins, lo, hi in ((4, 0.0, 4.0), (3, 1.0, 3.0), (5, 0, 0), (2, 2.5, 2.5)):
        got = _run("histc", x[:-1] if lo == hi else x, backend=backend, bins=bins, min=lo, max=hi)
        want = torch.histc(x[:-1] if lo == hi else x, bins=bins, min=lo, max=hi)
        assert torch.equal(got, want), (bins, lo, hi)
    same = torch.full((6,), 2.0)                # equal data bounds: [1, 3]
    assert torch.equal(_run("histc", same, backend=backend, bins=4), torch.histc(same, bins=4))


@pytest.mark.parametrize("backend", BACKENDS)
def test_histc_and_histogram_span_blocks(backend):
    """5000 values (five 1024-value binning blocks, two 4096-value range blocks) vs torch."""
    x = torch.randn(5000, generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    assert torch.equal(_run("histc", x, backend=backend, bins=37), torch.histc(x, bins=37))
    w = torch.rand(5000, dtype=torch.float64)
    hist, edges = _run("histogram", x, w, backend=backend, bins=12, density=True)
    want = torch.histogram(x, 12, weight=w, density=True)
    torch.testing.assert_close(hist, want.hist, rtol=1e-12, atol=0)    # (float atomics: order-dependent sums)
    # torch's linspace vectorizes its two halves as base + step * lane: a few ulps from the float64 formula
    torch.testing.assert_close(edges, want.bin_edges, rtol=4e-16, atol=4e-16)
    e = torch.tensor([-3.0, -1.0, 0.0, 0.5, 4.0], dtype=torch.float64)
    hist, edges = _run("histogram", x, e, backend=backend, bins=None)
    assert torch.equal(hist, torch.histogram(x, e).hist) and torch.equal(edges, e)


@pytest.mark.parametrize("backend", BACKENDS)
def test_counts_span_local_histogram_programs(backend):
    """40000 values: three programs of the local-histogram count kernel (16384 values each, the last partial), for
    equal widths (histc), edges (histogram) and bincount (1000 bins: at the local kernel's bound; 1500: the atomic
    kernel) against torch, whose counts are exact."""
    g = torch.Generator().manual_seed(9)
    x = torch.randn(40000, generator=g, dtype=torch.float64)
    assert torch.equal(_run("histc", x, backend=backend, bins=100), torch.histc(x, bins=100))
    e = torch.linspace(-2.0, 2.5, 300, dtype=torch.float64)
    assert torch.equal(_run("histogram", x, e, backend=backend, bins=None)[0], torch.histogram(x, e).hist)
    for length in (1000, 1500):
        v = torch.randint(0, length, (40000,), generator=g)
        assert torch.equal(_run("bincount", v, backend=backend, length=length), torch.bincount(v, minlength=length))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("bad", [-3, 5])
def test_bincount_value_out_of_range_raises_and_writes_nothing_outside(backend, bad):
    x = torch.tensor([0, 2, bad, 1])
    buf = _dev(torch.full((7,), -9, dtype=torch.int64))
    with pytest.raises(InvalidProblemError, match=rf"bincount: argument 'input': expected non-negative integers < "
                                                  rf"length=5.*got {bad}"):
        _plan("bincount", _dev(x), backend=backend, length=5).run(_dev(x), out=buf[:5])
        bc.check_errors()
    assert buf.cpu()[5:].tolist() == [-9, -9]


def test_dropins_match_torch():
    g = torch.Generator().manual_seed(6)
    x = torch.randn(300, generator=g)
    assert torch.equal(bt.histc(x, bins=7), torch.histc(x, bins=7))
    assert torch.equal(bt.histc(x, 9, -1, 1), torch.histc(x, 9, -1, 1))
    r = bt.histogram(x, 6, range=(-2.0, 2.0))
    assert isinstance(r, torch.return_types.histogram)
    want = torch.histogram(x, 6, range=(-2.0, 2.0))
    # (torch's float32 edges round its float32 arithmetic: -6e-8 for the middle edge 0; ours are the float64 values
    # rounded once)
    assert torch.equal(r.hist, want.hist) and torch.allclose(r.bin_edges, want.bin_edges, rtol=1e-6, atol=1e-6)
    i = torch.randint(0, 9, (50,), generator=g)
    assert torch.equal(bt.bincount(i), torch.bincount(i)) and torch.equal(bt.bincount(i, minlength=20),
                                                                          torch.bincount(i, minlength=20))
    for wdt in (torch.float32, torch.float16, torch.float64, torch.int32):
        w = torch.rand(50, generator=g).to(wdt)
        got, want = bt.bincount(i, w), torch.bincount(i, w)
        assert got.dtype == want.dtype, wdt                        # f32 -> f32, every other weight -> f64
        torch.testing.assert_close(got, want)
    assert torch.equal(bt.bincount(torch.zeros(0, dtype=torch.int64), minlength=3), torch.zeros(3, dtype=torch.int64))


def test_weighted_plans_say_they_are_not_deterministic():
    x = torch.randn(10)
    counts = _plan("histc", x, backend=Backend.TRITON, bins=4)
    weighted = _plan("bincount", torch.tensor([0, 1]), torch.rand(2), backend=Backend.TRITON, length=2)
    assert counts.precision.deterministic and not weighted.precision.deterministic


@pytest.mark.parametrize("backend", BACKENDS)
def test_histogramdd_matches_torch(backend):
    g = torch.Generator().manual_seed(11)
    x = torch.randn(700, 3, generator=g, dtype=torch.float64)
    w = torch.rand(700, generator=g, dtype=torch.float64)
    out = _run("histogramdd", x, w, backend=backend, bins=(4, 3, 5), range=(-2.0, 2.0, -1.0, 1.0, -3.0, 3.0),
               density=True)
    want = torch.histogramdd(x, [4, 3, 5], range=[-2.0, 2.0, -1.0, 1.0, -3.0, 3.0], weight=w, density=True)
    torch.testing.assert_close(out[0], want.hist, rtol=1e-12, atol=0)
    for e, we in zip(out[1:], want.bin_edges):
        torch.testing.assert_close(e, we, rtol=4e-16, atol=4e-16)
    got = _run("histogramdd", x, backend=backend, bins=(6,))                 # the data's ranges, found on the device
    assert torch.equal(got[0], torch.histogramdd(x, 6).hist)
    edges = [torch.tensor([-1.0, 0.0, 2.5], dtype=torch.float64), torch.tensor([-3.0, -0.5, 0.5, 3.0],
                                                                                dtype=torch.float64),
             torch.tensor([-2.0, 2.0], dtype=torch.float64)]
    got = _run("histogramdd", x, *edges, w, backend=backend, bins=None, density=True)
    want = torch.histogramdd(x, edges, weight=w, density=True)
    torch.testing.assert_close(got[0], want.hist, rtol=1e-12, atol=0)
    assert all(torch.equal(a, b) for a, b in zip(got[1:], edges))


def test_histc_histogram_bincount_are_routed_under_the_mode():
    x = torch.randn(40)
    i = torch.randint(0, 5, (30,))
    with bt.mode() as m:
        h, hh, b = torch.histc(x, bins=6), x.histogram(4), i.bincount()
    assert torch.equal(h, torch.histc(x, bins=6)) and torch.equal(hh.hist, torch.histogram(x, 4).hist)
    assert torch.equal(b, torch.bincount(i))
    assert m.routed == {"torch.histc": 1, "Tensor.histogram": 1, "Tensor.bincount": 1}, m.summary()
