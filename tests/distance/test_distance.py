"""Distances: semantics the generic suite cannot express -- multi-tile pdist/cdist (the tile kernels' edges
and the upper-triangle table), gradients at torch's conventions (zero distances, inf-norm ties, the
cosine eps clamp), broadcasting, and the drop-in signatures (cdist's compute_mode refusal)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, assert_same, grad_pair as _grad_pair  # noqa: E402
from baracuda.testing.checks import run_on as _run  # noqa: E402

BACKENDS = backends_for("cdist", DEVICE)
INF = float("inf")
F = torch.nn.functional


def _same(got, want, rtol=1e-9, atol=1e-9):
    assert_same(got, want, rtol, atol)


def _cdist(a, b, p):
    return torch.cdist(a, b, p=p, compute_mode="donot_use_mm_for_euclid_dist")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("p", [2.0, 1.0, INF, 0.5, 0.0])
def test_multi_tile_cdist_pdist_and_grads(backend, p):
    """70 x 66 pairs: two tiles per axis (64-wide), partial edge tiles, the pdist diagonal tiles."""
    g = torch.Generator().manual_seed(1)
    a = torch.randn(70, 5, generator=g, dtype=torch.float64)
    b = torch.randn(66, 5, generator=g, dtype=torch.float64)
    if p == INF:
        a, b = (2 * a).round() / 2, (2 * b).round() / 2   # exact ties
    a[3] = a[40]                                           # a zero pdist distance
    out = _run("cdist", a, b, backend=backend, p=p)
    _same(out, _cdist(a, b, p))
    pd = _run("pdist", a, backend=backend, p=p)
    _same(pd, F.pdist(a, p))
    gg = torch.randn(out.shape, generator=g, dtype=torch.float64)
    aa, bb = a.clone().requires_grad_(), b.clone().requires_grad_()
    ga, gb = torch.autograd.grad(_cdist(aa, bb, p), (aa, bb), gg)
    _same(_run("cdist_backward", gg, a, b, out, backend=backend, p=p, wrt=0), ga)
    _same(_run("cdist_backward", gg, a, b, out, backend=backend, p=p, wrt=1), gb)
    gp = torch.randn(pd.shape, generator=g, dtype=torch.float64)
    (want,) = torch.autograd.grad(F.pdist(aa, p), (aa,), gp)
    _same(_run("pdist_backward", gp, a, pd, backend=backend, p=p), want)


def test_gradients_match_torch_autograd():
    torch.manual_seed(0)
    x = torch.randn(4, 6, dtype=torch.float64)
    y = torch.randn(6, dtype=torch.float64)
    z = x.clone()
    z[1] = 0.0     # |x1| = 0: torch clamps the norm under no_grad; d|x|/dx is masked to 0
    _grad_pair(lambda a, b: bt.nn.functional.cosine_similarity(a, b, dim=1),
               lambda a, b: F.cosine_similarity(a, b, dim=1), z, x)
    _grad_pair(lambda a, b: bt.cosine_similarity(a, b, dim=-1, eps=1e-3),
               lambda a, b: torch.cosine_similarity(a, b, dim=-1, eps=1e-3), x, y)      # broadcast
    h = (2 * x).round() / 2
    for p in (2.0, 1.0, INF, 0.5, 3.0, 0.0, -1.0):
        _grad_pair(lambda a, b: bt.nn.functional.pairwise_distance(a, b, p=p, keepdim=True),
                   lambda a, b: F.pairwise_distance(a, b, p=p, keepdim=True), h, (2 * y).round() / 2)
    w = torch.randn(2, 1, 5, 6, dtype=torch.float64)
    _grad_pair(lambda a, b: bt.cdist(a, b, p=1.5), lambda a, b: torch.cdist(a, b, p=1.5), w, x)  # batch broadcast
    d = x.clone()
    d[2] = d[0]
    _grad_pair(lambda a: bt.pdist(a), lambda a: torch.pdist(a), d)          # a zero distance: grad 0 there


def test_dropins():
    x = torch.randn(5, 4, dtype=torch.float64)
    y = torch.randn(3, 4, dtype=torch.float64)
    _same(bt.cdist(x, y), torch.cdist(x, y))
    _same(bt.cdist(x, y, 0.0), torch.cdist(x, y, 0.0))
    _same(bt.pdist(x, 1), torch.pdist(x, 1))
    _same(bt.nn.functional.pdist(x), F.pdist(x))
    _same(bt.pairwise_distance(x, x.flip(0)), torch.pairwise_distance(x, x.flip(0)))
    _same(bt.nn.functional.cosine_similarity(x, x.flip(0), 0), F.cosine_similarity(x, x.flip(0), 0))
    _same(bt.cdist(x, y, compute_mode="use_mm_for_euclid_dist"), torch.cdist(x, y), 1e-9, 1e-9)
    with pytest.raises(bc.InvalidProblemError, match="argument 'x2': expected the same number of columns"):
        bt.cdist(x, torch.randn(3, 5, dtype=torch.float64))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_halves_and_strided(backend):
    a = torch.randn(40, 9).to(torch.bfloat16)
    b = torch.randn(30, 9).to(torch.bfloat16)
    _same(_run("cdist", a.t().contiguous().t(), b, backend=backend), _cdist(a.double(), b.double(), 2.0), 2e-2, 2e-2)
    x = torch.randn(8, 300, dtype=torch.float32)
    y = torch.randn(8, 300, dtype=torch.float32)
    _same(_run("cosine_similarity", x[:, ::2], y[:, ::2], backend=backend, dim=1),
          F.cosine_similarity(x[:, ::2].double(), y[:, ::2].double(), dim=1), 1e-5, 1e-6)
    _same(_run("pairwise_distance", x, y, backend=backend, p=INF), F.pairwise_distance(x, y, p=INF), 1e-6, 1e-6)


def test_pairwise_distance_integer_and_0d_inputs():
    """Integer inputs give torch's float result; 0-d inputs (alone or broadcast against a vector) reduce over the
    one remaining dim, as torch (a 0-d result)."""
    g = torch.Generator().manual_seed(8)
    a, b = torch.randint(-4, 5, (3, 5), generator=g), torch.randint(-4, 5, (3, 5), generator=g)
    for kw in ({}, {"p": 1.0, "keepdim": True}, {"p": -1.0}, {"eps": 1.0}):
        want = torch.nn.functional.pairwise_distance(a, b, **kw)
        got = bt.nn.functional.pairwise_distance(a.to(DEVICE.type if DEVICE.type == "cuda" else "cpu"),
                                                 b.to(DEVICE.type if DEVICE.type == "cuda" else "cpu"), **kw)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want, rtol=1e-6, atol=1e-6)
    x = torch.randn(5, dtype=torch.float64)
    for s1, s2 in ((x[0], x[1]), (x, x[2]), (x[3], x)):
        _grad_pair(bt.nn.functional.pairwise_distance, torch.nn.functional.pairwise_distance, s1, s2)


def test_cosine_similarity_0d_inputs():
    """Two 0-d inputs are 1-element vectors (dim 0 or -1; dim 1 is refused, as torch): the result is the sign
    product (0 where a norm clamps), with torch's (zero) gradients."""
    x = torch.tensor([0.7, -2.0, 0.0], dtype=torch.float64)
    for a, b in ((x[0], x[1]), (x[1], x[1]), (x[2], x[0])):
        for dim in (0, -1):
            _grad_pair(lambda u, v, d=dim: bt.nn.functional.cosine_similarity(u, v, dim=d),
                       lambda u, v, d=dim: torch.nn.functional.cosine_similarity(u, v, dim=d), a, b)
    with pytest.raises(Exception, match="dim"):
        bt.nn.functional.cosine_similarity(x[0], x[1], dim=1)


def test_cdist_every_compute_mode():
    """Every compute_mode torch takes is accepted (the distances are computed directly in each): the values and
    gradients agree with torch's, its matrix-multiply modes included, within their rounding; an unknown mode is
    an error."""
    g = torch.Generator().manual_seed(9)
    a = torch.randn(2, 7, 5, generator=g, dtype=torch.float64)
    b = torch.randn(2, 30, 5, generator=g, dtype=torch.float64)   # > 25 rows: torch's 'if necessary' takes mm
    for mode in ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
        for p in (2.0, 1.0):
            ta, tb = a.clone().requires_grad_(), b.clone().requires_grad_()
            oa, ob = a.clone().requires_grad_(), b.clone().requires_grad_()
            want = torch.cdist(ta, tb, p=p, compute_mode=mode)
            got = bt.cdist(oa, ob, p=p, compute_mode=mode)
            gy = torch.randn(want.shape, generator=g, dtype=torch.float64)
            torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
            for x, y in zip(torch.autograd.grad(got, (oa, ob), gy), torch.autograd.grad(want, (ta, tb), gy)):
                torch.testing.assert_close(x, y, rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="compute_mode"):
        bt.cdist(a, b, compute_mode="fast")
