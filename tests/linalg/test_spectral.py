"""Spectral decompositions: what the generic suite cannot express -- the gauge (results independent of the LAPACK
build), eigh's gradient (torch's, not folded onto the triangle the forward reads: checked by finite differences of
a symmetrized input), repeated singular values (inf / nan as torch), qr's non-differentiable modes, the complex
phase-dependent loss (torch raises; baracuda differentiates through its gauge)."""
from __future__ import annotations

import numpy as np
import pytest

import baracuda as bc

torch = pytest.importorskip("torch")
import baracuda.torch as bt  # noqa: E402

RNG = np.random.default_rng(19)


def _t(x, grad=False):
    return torch.tensor(x, requires_grad=grad)


def test_svd_reconstructs_and_vectors_are_gauged():
    a = RNG.standard_normal((2, 5, 3))
    for full in (False, True):
        u, s, vh = bt.linalg.svd(_t(a), full_matrices=full)
        k = 3
        rec = u[..., :k] @ torch.diag_embed(s) @ vh[..., :k, :]
        torch.testing.assert_close(rec, _t(a), rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(u.mH @ u, torch.eye(u.shape[-1], dtype=u.dtype).expand_as(u.mH @ u))
        piv = u[..., :k].abs().argmax(-2, keepdim=True)
        assert (torch.gather(u[..., :k], -2, piv) > 0).all()     # the largest entry of each vector is positive


def test_eigh_gradient_is_the_derivative_of_the_symmetrized_input():
    # f(X) = loss(eigh(sym(X))): torch's eigh gradient G gives df/dX = sym(G) (the forward reads one triangle, so
    # finite differences of eigh itself would see only that triangle)
    x = RNG.standard_normal((4, 4))
    gl, gv = RNG.standard_normal(4), RNG.standard_normal((4, 4))

    def loss(xx):
        w, v = bt.linalg.eigh(_t((xx + xx.T) / 2))
        return float((w * _t(gl)).sum() + (v * _t(gv)).sum())

    xt = _t(x, True)
    w, v = bt.linalg.eigh((xt + xt.T) / 2)
    ((w * _t(gl)).sum() + (v * _t(gv)).sum()).backward()
    eps, fd = 1e-6, np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        fd[idx] = (loss(x + d) - loss(x - d)) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), fd, rtol=1e-6, atol=1e-6)


def test_eigh_gradient_matches_torch_on_a_nonsymmetric_input():
    a = RNG.standard_normal((3, 3))
    for uplo in ("L", "U"):
        ours, theirs = _t(a, True), _t(a, True)
        gw, gv = _t(RNG.standard_normal(3)), _t(RNG.standard_normal((3, 3)))
        w, v = bt.linalg.eigh(ours, UPLO=uplo)
        ((w * gw).sum() + (v * gv).sum()).backward()
        tw, tv = torch.linalg.eigh(theirs, UPLO=uplo)
        sign = torch.sign(torch.gather(tv, 0, tv.abs().argmax(0, keepdim=True)))
        ((tw * gw).sum() + (tv * sign * gv).sum()).backward()
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-9, atol=1e-9)


def test_repeated_singular_values_give_nonfinite_vector_gradients_like_torch():
    a = _t(np.eye(3), True)
    u, s, vh = bt.linalg.svd(a)
    (u.sum() + vh.sum()).backward()
    assert not torch.isfinite(a.grad).all()
    b = _t(np.eye(3), True)
    bt.linalg.svdvals(b).sum().backward()            # the singular values alone: finite, torch's U Vh
    torch.testing.assert_close(b.grad, torch.eye(3, dtype=torch.float64))


def test_complex_phase_dependent_loss_differentiates_through_the_gauge():
    a = RNG.standard_normal((3, 3)) + 1j * RNG.standard_normal((3, 3))
    x = _t(a, True)
    u, s, vh = bt.linalg.svd(x)
    u[0, 0].imag.backward()           # torch raises for this loss; ours is a function of A (the gauge fixed)
    eps, fd = 1e-6, np.zeros_like(a)
    f = lambda m: float(bt.linalg.svd(_t(m))[0][0, 0].imag)
    for idx in np.ndindex(a.shape):
        for unit in (1.0, 1j):
            d = np.zeros_like(a)
            d[idx] = eps * unit
            fd[idx] += unit * (f(a + d) - f(a - d)) / (2 * eps)
    np.testing.assert_allclose(x.grad.numpy(), fd, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode,shape", [("r", (3, 3)), ("complete", (4, 3))])
def test_qr_modes_torch_cannot_differentiate_raise(mode, shape):
    x = _t(RNG.standard_normal(shape), True)
    q, r = bt.linalg.qr(x, mode=mode)
    with pytest.raises(Exception, match="qr: argument 'mode'"):
        r.sum().backward()


def test_qr_r_mode_returns_an_empty_q_like_torch():
    q, r = bt.linalg.qr(_t(RNG.standard_normal((4, 3))), mode="r")
    assert q.shape == (0,) and r.shape == (3, 3)


def test_eigvals_order_and_values_match_torch():
    a = RNG.standard_normal((2, 5, 5))
    torch.testing.assert_close(bt.linalg.eigvals(_t(a)), torch.linalg.eigvals(_t(a)))


def test_householder_product_rebuilds_qr():
    a = RNG.standard_normal((5, 3))
    ref = torch.geqrf(_t(a))
    torch.testing.assert_close(bt.linalg.householder_product(*ref), torch.linalg.householder_product(*ref))


def _hh_grads(fn, a, tau, g):
    ta, tt = _t(a, True), _t(tau, True)
    return torch.autograd.grad(fn(ta, tt), (ta, tt), _t(g))


@pytest.mark.parametrize("cplx", [False, True])
def test_householder_product_gradient_is_torchs_and_the_finite_differences(cplx):
    # k = 2 < n = 3: A's third column, its diagonal and upper part get zero gradient (torch's: only the reflectors'
    # strictly lower entries are read); conjugate-Wirtinger gradients of L = Re sum(conj(g) Q) for complex inputs
    mk = lambda s: RNG.standard_normal(s) + (1j * RNG.standard_normal(s) if cplx else 0)   # noqa: E731
    a, tau, g = mk((2, 5, 3)), mk((2, 2)), mk((2, 5, 3))
    ga, gt = _hh_grads(bt.linalg.householder_product, a, tau, g)
    wa, wt = _hh_grads(torch.linalg.householder_product, a, tau, g)
    # float64 both ways (torch's LAPACK-based rule vs baracuda's reference sweep): ~1e-14 observed
    torch.testing.assert_close(ga, wa, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gt, wt, rtol=1e-10, atol=1e-10)
    assert not ga[..., :, 2].any() and not ga.triu().any()

    def loss(aa, tt):
        with torch.no_grad():
            return float((torch.conj(_t(g)) * bt.linalg.householder_product(_t(aa), _t(tt))).real.sum())

    eps = 1e-6
    for x, got in ((a, ga), (tau, gt)):
        fd = np.zeros(x.shape, dtype=x.dtype)
        for idx in np.ndindex(x.shape):
            for unit in ((1, 1j) if cplx else (1,)):
                d = np.zeros(x.shape, dtype=x.dtype)
                d[idx] = eps * unit
                hi, lo = (loss(a + d, tau), loss(a - d, tau)) if x is a else (loss(a, tau + d), loss(a, tau - d))
                fd[idx] += unit * (hi - lo) / (2 * eps)
        # central differences of a degree-<=4 polynomial at eps = 1e-6: truncation ~1e-12, rounding ~1e-10
        np.testing.assert_allclose(got.numpy(), fd, rtol=1e-7, atol=1e-7)


def test_householder_product_gradient_sums_a_broadcast_batch_and_flows_through_orgqr():
    a, tau, g = RNG.standard_normal((1, 4, 3)), RNG.standard_normal((2, 3)), RNG.standard_normal((2, 4, 3))
    ga, gt = _hh_grads(bt.orgqr, a, tau, g)
    wa, wt = _hh_grads(lambda x, t: torch.linalg.householder_product(x.expand(2, 4, 3), t), a, tau, g)
    torch.testing.assert_close(ga, wa, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(gt, wt, rtol=1e-10, atol=1e-10)


def test_errors_name_op_argument_and_what_was_given():
    with pytest.raises(bc.InvalidProblemError, match=r"eigh: argument 'A': expected square"):
        bt.linalg.eigh(torch.randn(3, 4))
    with pytest.raises(bc.InvalidProblemError, match=r"argument 'UPLO'"):
        bt.linalg.eigh(torch.randn(3, 3), UPLO="X")
    with pytest.raises(bc.UnsupportedError, match=r"svd: argument 'A' has dtype f16"):
        bt.linalg.svd(torch.randn(3, 3).half())


def test_legacy_torch_svd_returns_v_and_torch_qr_takes_some():
    a = RNG.standard_normal((2, 5, 3))
    for some in (True, False):
        u, s, v = bt.svd(_t(a), some=some)
        k = 3
        torch.testing.assert_close(u[..., :k] @ torch.diag_embed(s) @ v[..., :k].mH, _t(a))
        assert type(bt.svd(_t(a))) is torch.return_types.svd and v.shape[-2:] == ((3, 3))
        q, r = bt.qr(_t(a), some=some)
        tq, tr = torch.linalg.qr(_t(a), mode="reduced" if some else "complete")
        torch.testing.assert_close(q, tq)
        torch.testing.assert_close(r, tr)
