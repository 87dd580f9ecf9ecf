"""The one-warp f32 linalg kernels (linalg/warp.py) on the GPU -- they are compiled-only (Gluon has no interpreter),
so these tests need CUDA; CI on the CPU compiles them offline (test_warp_sm90.py) and runs small.py's kernels under
the interpreter for the same ops.  Oracles: float64 (torch on the CPU) for values and gradients, the reference
backend's unblocked getf2 (float64) for pivots and info on tie-heavy small-integer matrices.  Tolerances: f32 LU of
n <= 32 with partial pivoting -- elementwise 2e-4 relative + 1e-4 absolute on O(1) entries (growth of random
matrices at n = 32 stays below ~10: ~n * growth * eps32 ~ 4e-5)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.testing import forced_plan

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="compiled-only kernels: needs a CUDA device")
CUDA = bc.Device("cuda", 0) if torch.cuda.is_available() else None
RTOL, ATOL = 2e-4, 1e-4


def _run(op, *xs, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *xs, **attrs), CUDA, Backend.TRITON)
    assert not isinstance(p, str), p
    assert "warp" in p.sku.route, p.sku
    return p.run(*xs)


def _mats(batch, n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch + (n, n), generator=g, dtype=torch.float64)


@pytest.mark.parametrize("n", [1, 2, 5, 17, 31, 32])
def test_lu_factor_matches_float64_getrf(n):
    a = _mats((3, 4), n, n)
    lu, piv, info = _run("lu_factor_ex", a.float().cuda())
    lu64, piv64, info64 = torch.linalg.lu_factor_ex(a)
    assert torch.equal(piv.cpu(), piv64) and torch.equal(info.cpu(), info64)
    torch.testing.assert_close(lu.cpu().double(), lu64, rtol=RTOL, atol=ATOL)


def test_pivots_info_on_ties_singular_steps_and_nan_are_getf2s():
    rng = np.random.default_rng(11)
    a = rng.integers(-2, 3, (32, 6, 6)).astype(np.float64)
    a[3, :, 2] = a[3, :, 1]                 # singular: two equal columns
    a[5, 4] = 0.0                           # a zero row
    a[7] = np.triu(a[7]) + 3 * np.eye(6)    # no pivoting needed
    a[9, 2, 0] = np.nan                     # a NaN is the largest |a|
    a[10, :, 0] = 0.0                       # a zero first column: info 1, getf2 carries on
    big = rng.integers(-1, 2, (8, 32, 32)).astype(np.float64)          # 32 x 32 with many ties
    for arr in (a, big):
        want = forced_plan(bc.Descriptor.like("lu_factor_ex", arr), bc.Device("cpu"), Backend.REFERENCE).run(arr)
        got = _run("lu_factor_ex", torch.from_numpy(arr).float().cuda())
        np.testing.assert_array_equal(got[1].cpu().numpy(), np.asarray(want[1]))
        np.testing.assert_array_equal(got[2].cpu().numpy(), np.asarray(want[2]))
        ok = np.isfinite(np.asarray(want[0])).all(axis=(-1, -2))     # (a NaN spreads through its matrix)
        # (small integers: the eliminations are exact but for a few rounded fractions, f32 eps ~6e-8 each)
        np.testing.assert_allclose(got[0].cpu().double().numpy()[ok], np.asarray(want[0])[ok], rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("n,k,left,vector", [(32, 1, True, True), (32, 1, True, False), (7, 3, True, False),
                                             (32, 8, True, False), (20, 9, True, False), (32, 40, True, False),
                                             (32, 5, False, False), (3, 1, False, False)])
def test_solve_matches_float64(n, k, left, vector):
    a = _mats((6,), n, 1) + 2 * torch.eye(n, dtype=torch.float64)
    g = torch.Generator().manual_seed(2)
    b = torch.randn((6, n) if vector else ((2, 6, n, k) if left else (2, 6, k, n)), generator=g,
                    dtype=torch.float64)
    x = bt.linalg.solve(a.float().cuda(), b.float().cuda(), left=left)
    want = torch.linalg.solve(a, b, left=left)
    torch.testing.assert_close(x.cpu().double(), want, rtol=RTOL, atol=ATOL)
    _run("solve", a.float().cuda(), b.float().cuda(), left=left)    # (the warp plan is the one chosen above)


def test_solve_ex_reports_singular_matrices_and_solve_raises():
    a = _mats((4,), 32, 3)
    a[2, :, 5] = 0.0
    b = torch.randn(4, 32, 2, dtype=torch.float64)
    x, info = bt.linalg.solve_ex(a.float().cuda(), b.float().cuda())
    assert info.cpu().tolist() == torch.linalg.solve_ex(a, b)[1].tolist()
    assert info[2].item() > 0
    with pytest.raises(Exception, match="singular"):
        bt.linalg.solve(a.float().cuda(), b.float().cuda())
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


@pytest.mark.parametrize("left,adjoint", [(True, False), (True, True), (False, False), (False, True)])
@pytest.mark.parametrize("n,k", [(32, 1), (13, 20)])
def test_lu_solve_matches_float64(n, k, left, adjoint):
    a = _mats((5,), n, 4)
    lu, piv = torch.linalg.lu_factor(a)
    g = torch.Generator().manual_seed(5)
    b = torch.randn((5, n, k) if left else (5, k, n), generator=g, dtype=torch.float64)
    x = bt.linalg.lu_solve(lu.float().cuda(), piv.cuda(), b.float().cuda(), left=left, adjoint=adjoint)
    want = torch.linalg.lu_solve(lu, piv, b, left=left, adjoint=adjoint)
    torch.testing.assert_close(x.cpu().double(), want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("left", [True, False])
def test_solve_gradients_match_float64(left):
    a = (_mats((8,), 32, 6) + 3 * torch.eye(32, dtype=torch.float64))
    b = torch.randn((8, 32, 2) if left else (8, 2, 32), dtype=torch.float64, generator=torch.Generator().manual_seed(7))
    g = torch.randn_like(b)
    a32, b32 = a.float().cuda().requires_grad_(), b.float().cuda().requires_grad_()
    got = torch.autograd.grad(bt.linalg.solve(a32, b32, left=left), (a32, b32), g.float().cuda())
    a64, b64 = a.clone().requires_grad_(), b.clone().requires_grad_()
    want = torch.autograd.grad(torch.linalg.solve(a64, b64, left=left), (a64, b64), g)
    # (the gradients are two more f32 solves and an outer product: ~3x the forward's error at cond(A) ~ 10)
    for u, v in zip(got, want):
        torch.testing.assert_close(u.cpu().double(), v, rtol=1e-3, atol=1e-3)


@pytest.mark.parametrize("n", [1, 6, 32])
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_matches_float64_and_reads_one_triangle(n, upper):
    g = torch.Generator().manual_seed(9)
    m = torch.randn(7, n, n, generator=g, dtype=torch.float64)
    s = m @ m.mT + n * torch.eye(n, dtype=torch.float64)
    junk = s.clone()
    junk.triu_(1) if not upper else junk.tril_(-1)      # the triangle cholesky must not read: garbage there
    a = s + 1e3 * junk
    l, info = bt.linalg.cholesky_ex(a.float().cuda(), upper=upper)
    want = torch.linalg.cholesky(s, upper=upper)
    assert not info.any()
    torch.testing.assert_close(l.cpu().double(), want, rtol=RTOL, atol=ATOL)
    _run("cholesky_ex", a.float().cuda(), upper=upper)


def test_cholesky_info_is_the_first_non_positive_minor():
    s = torch.eye(32, dtype=torch.float64).repeat(4, 1, 1)
    s[1, 5, 5] = -1.0
    s[2, 31, 31] = 0.0
    s[3, 0, 0] = float("nan")
    _, info = bt.linalg.cholesky_ex(s.float().cuda())
    assert info.cpu().tolist() == [0, 6, 32, 1] == torch.linalg.cholesky_ex(s)[1].tolist()


@pytest.mark.parametrize("n", [1, 9, 32])
def test_inv_matches_float64_and_inv_ex_reports_singular(n):
    a = _mats((5,), n, 12) + 2 * torch.eye(n, dtype=torch.float64)
    x = bt.linalg.inv(a.float().cuda())
    torch.testing.assert_close(x.cpu().double(), torch.linalg.inv(a), rtol=RTOL, atol=ATOL)
    _run("inv_ex", a.float().cuda())
    a[3, :, 0] = 0.0
    _, info = bt.linalg.inv_ex(a.float().cuda())
    assert info.cpu().tolist() == torch.linalg.inv_ex(a)[1].tolist() and info[3].item() == 1


@pytest.mark.parametrize("n", [1, 5, 32])
def test_det_slogdet_logdet_match_float64(n):
    a = _mats((6,), n, 13)
    a[1] = -a[1] if n % 2 else a[1].flip(0)          # (a negative determinant where a[1]'s was positive, or swapped)
    a[2, :, 0] = 0.0                                   # singular: det 0, slogdet (0, -inf), logdet -inf
    x = a.float().cuda()
    # det: the product of 32 f32 pivots, each within ~n * eps32 ~ 2e-6 relative -> 1e-4; log|det| is a sum of 32 logs
    # of O(1..10): ~1e-5 relative, 1e-4 absolute near 0; the singular matrix's det is 0 to within f32 rounding (atol)
    torch.testing.assert_close(bt.linalg.det(x).cpu().double(), torch.linalg.det(a), rtol=1e-4, atol=1e-6)
    sgn, la = bt.linalg.slogdet(x)
    wsgn, wla = torch.linalg.slogdet(a)
    assert torch.equal(sgn.cpu().double(), wsgn)
    torch.testing.assert_close(la.cpu().double(), wla, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(bt.logdet(x).cpu().double(), torch.logdet(a), rtol=1e-5, atol=1e-4, equal_nan=True)
    for op in ("det", "slogdet", "logdet"):
        _run(op, x)
