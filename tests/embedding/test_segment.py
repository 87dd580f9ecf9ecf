"""Segment-family checks the generic suite does not make: JAX's rules (out-of-range ids dropped, empty segments =
the identity, NaN through max / min), the routes (atomic vs sorted vs presorted) and what require_deterministic
selects, the sorted route's bit-stability, and the gradients (ties shared, prod with zeros) against torch's
scatter_reduce autograd."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.ops.segment import SEGMENT_REDUCTIONS, _peer  # noqa: E402
from baracuda.testing import backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, assert_same, run_on  # noqa: E402

BACKENDS = backends_for("segment_sum", DEVICE)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("red", SEGMENT_REDUCTIONS)
def test_out_of_range_ids_are_dropped_and_empty_segments_hold_the_identity(backend, red):
    x = torch.tensor([[1., 2.], [3., -4.], [5., 6.], [7., 8.], [-9., 10.]], dtype=torch.float64)
    ids = torch.tensor([0, 3, -1, 0, 99])         # 3: out of range for num_segments=3; -1 and 99 too
    got = run_on(f"segment_{red}", x, ids, backend=backend, num_segments=3)
    keep = {"sum": x[0] + x[3], "mean": (x[0] + x[3]) / 2, "prod": x[0] * x[3], "max": torch.maximum(x[0], x[3]),
            "min": torch.minimum(x[0], x[3])}[red]
    ident = {"sum": 0.0, "mean": 0.0, "prod": 1.0, "max": -math.inf, "min": math.inf}[red]
    assert_same(got[0], keep)
    assert_same(got[1:], torch.full((2, 2), ident, dtype=torch.float64))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_nan_wins_max_and_min_like_jnp(backend):
    x = torch.tensor([1., float("nan"), 3., 2.])
    ids = torch.tensor([0, 0, 1, 1])
    for red in ("max", "min"):
        got = run_on(f"segment_{red}", x, ids, backend=backend, num_segments=2)
        assert math.isnan(got[0]) and got[1] == (3. if red == "max" else 2.)


def test_routes_and_require_deterministic():
    if Backend.TRITON not in BACKENDS:
        pytest.skip("no Triton backend here")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 3, generator=g)
    ids = torch.randint(0, 6, (50,), generator=g)
    d = bc.Descriptor.like("segment_sum", x, ids, num_segments=6)
    atomic = forced_plan(d, DEVICE, Backend.TRITON)
    det = forced_plan(d, DEVICE, Backend.TRITON, require_deterministic=True)
    assert "atomic" in atomic.sku.route and not atomic.precision.deterministic
    assert "sorted" in det.sku.route and det.precision.deterministic
    pre = forced_plan(bc.Descriptor.like("segment_sum", x, ids.sort().values, num_segments=6, indices_are_sorted=True),
                      DEVICE, Backend.TRITON)
    assert "presorted" in pre.sku.route and pre.precision.deterministic
    for red in ("max", "min", "prod", "mean"):
        p = forced_plan(bc.Descriptor.like(f"segment_{red}", x, ids, num_segments=6), DEVICE, Backend.TRITON)
        assert p.precision.deterministic, red
    want = _peer("sum")(x.double(), ids, 6)
    xs, idt = x.to(TDEV), ids.to(TDEV)
    a = det.run(xs, idt)
    assert_same(a.cpu().double(), want, rtol=1e-5, atol=1e-5)
    assert_same(atomic.run(xs, idt).cpu().double(), want, rtol=1e-5, atol=1e-5)
    assert torch.equal(det.run(xs, idt), a)
    srt = ids.sort(stable=True)
    assert_same(pre.run(x[srt.indices].to(TDEV), srt.values.to(TDEV)).cpu().double(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("red", SEGMENT_REDUCTIONS)
def test_gradient_like_torch_scatter_reduce(backend, red):
    g = torch.Generator().manual_seed(1)
    x = torch.randint(-2, 3, (14, 3), generator=g).double()      # ties (max / min) and zeros (prod)
    if red in ("sum", "mean"):
        x = torch.randn(14, 3, generator=g, dtype=torch.float64)
    ids = torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 5, -1, 4, 4])
    out = _peer(red)(x, ids, 5)
    go = torch.randn(out.shape, generator=g, dtype=torch.float64)
    got = run_on("segment_backward", go, x, ids, out, backend=backend, reduction=red, num_segments=5)
    with torch.enable_grad():
        xx = x.clone().requires_grad_()
        (want,) = torch.autograd.grad(_peer(red)(xx, ids, 5), xx, go)
    assert_same(got, want, rtol=1e-12, atol=1e-12)
    assert (got[10:12] == 0).all()                    # dropped positions


def test_plan_api_needs_num_segments():
    with pytest.raises(bc.InvalidProblemError, match=r"segment_sum: argument 'num_segments'"):
        bc.Descriptor.make("segment_sum", ((4, 2), "f32"), ((4,), "i64"))
