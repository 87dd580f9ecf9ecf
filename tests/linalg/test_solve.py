"""Semantics of the linalg solve family the generic tests cannot express: torch's Hermitian cholesky gradient against
Hermitian finite differences, LinAlgError / info for singular and non-positive-definite inputs (reference and the
Triton kernels under the interpreter), the Bunch-Kaufman factor's reconstruction and LAPACK pivot parity, LU without
pivoting, and the drop-ins' return types; the wide / tall LU gradients (finite differences, torch autograd)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.device import as_device
from baracuda._core.sku import Backend
from baracuda.backends.reference.linalg_factor import ldl_factor_np, ldl_reconstruct
from baracuda.ops.linalg_common import LinAlgError
from baracuda.testing import forced_plan
from baracuda._core.device import triton_interpreting

CPU = as_device("cpu")
# Triton on the CPU is the interpreter's (on a GPU machine the generic tests run the kernels on the device)
BACKENDS = [Backend.REFERENCE] + ([Backend.TRITON] if triton_interpreting() else [])


def _plan(op, backend, *arrays, **attrs):
    p = forced_plan(bc.Descriptor.like(op, *arrays, **attrs), CPU, backend)
    assert not isinstance(p, str), p
    return p


def _pd(n, seed=0, batch=()):
    rng = np.random.default_rng(seed)
    b = rng.standard_normal(batch + (n, n))
    return b @ np.swapaxes(b, -1, -2) + n * np.eye(n)


def test_cholesky_gradient_is_the_hermitian_derivative():
    """L(A) = <G, chol(A)> for symmetric perturbations A + t (E + E^T): torch's (symmetric) gradient gives
    <gA, E + E^T>, which central differences of the forward reproduce."""
    a = _pd(4, 1)
    rng = np.random.default_rng(2)
    g = rng.standard_normal((4, 4))
    d = bc.Descriptor.like("cholesky", a)
    L = bc.Plan.select(d, CPU).run(a)
    (ga,) = bc.BackwardPlan.select(d, CPU).run(g, out=L)
    assert np.allclose(ga, ga.T, atol=1e-12)
    for _ in range(3):
        e = rng.standard_normal((4, 4))
        e = e + e.T
        h = 1e-6
        fd = (np.sum(g * np.linalg.cholesky(a + h * e)) - np.sum(g * np.linalg.cholesky(a - h * e))) / (2 * h)
        assert abs(fd - np.sum(ga * e)) < 1e-6 * max(1.0, abs(fd))


@pytest.mark.parametrize("backend", BACKENDS)
def test_not_positive_definite_raises_and_ex_reports_the_minor(backend):
    a = _pd(4, 3, (2,)).astype(np.float32)
    a[1, 2, 2] = -50.0                        # the leading minor of order 3 of batch element 1 fails
    t = torch.from_numpy(a)
    arr = t if backend == Backend.TRITON else a
    with pytest.raises(LinAlgError, match="cholesky: .*leading minor of order 3"):
        _plan("cholesky", backend, a).run(arr)
    _, info = _plan("cholesky_ex", backend, a).run(arr)
    assert np.asarray(info).tolist() == [0, 3]


@pytest.mark.parametrize("backend", BACKENDS)
def test_singular_matrix_info_and_errors(backend):
    a = np.random.default_rng(4).standard_normal((2, 3, 3))
    a[0, :, 2] = a[0, :, 0] + a[0, :, 1]      # rank 2: LU's third pivot is zero (to rounding: exact here)
    a[0] = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]])
    arr = torch.from_numpy(a) if backend == Backend.TRITON else a
    for op in ("inv", "lu_factor"):
        with pytest.raises(LinAlgError, match=f"{op}: "):
            _plan(op, backend, a).run(arr)
    b = np.ones((2, 3, 1))
    with pytest.raises(LinAlgError, match="solve: "):
        _plan("solve", backend, a, b).run(arr, torch.from_numpy(b) if backend == Backend.TRITON else b)
    for op in ("inv_ex", "lu_factor_ex"):
        info = _plan(op, backend, a).run(arr)[-1]
        assert np.asarray(info).tolist() == [3, 0], op
    det = _plan("det", backend, a).run(arr)
    assert abs(float(det[0])) < 1e-12


@pytest.mark.parametrize("herm", [False, True])
def test_ldl_matches_lapack_pivots_and_reconstructs(herm):
    """Pivots equal LAPACK's (torch's CPU ldl_factor runs sytrf) and L D L^T rebuilds A (complex: L D L^H)."""
    rng = np.random.default_rng(5)
    b = rng.standard_normal((3, 6, 6)) + (1j * rng.standard_normal((3, 6, 6)) if herm else 0)
    a = b + (np.conj(np.swapaxes(b, -1, -2)) if herm else np.swapaxes(b, -1, -2))
    a[0, 0, 0] = 1e-3                          # a small first pivot: a 2x2 block
    ld, piv, info = ldl_factor_np(a, herm)
    tld, tpiv = torch.linalg.ldl_factor(torch.from_numpy(a), hermitian=herm)
    assert np.array_equal(piv, tpiv.numpy()) and (piv < 0).any()
    assert np.allclose(np.tril(ld), np.tril(tld.numpy()), atol=1e-10)
    want = np.tril(a) + np.conj(np.swapaxes(np.tril(a, -1), -1, -2)) if herm else a
    assert np.allclose(ldl_reconstruct(ld, piv, herm), want, atol=1e-10)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lu_without_pivoting(backend):
    """pivot=False (torch computes it on CUDA only): pivots 1..n, L U = A."""
    a = _pd(4, 6).astype(np.float64)
    arr = torch.from_numpy(a) if backend == Backend.TRITON else a
    lu, piv = _plan("lu_factor", backend, a, pivot=False).run(arr)
    lu = np.asarray(lu)
    assert np.asarray(piv).tolist() == [1, 2, 3, 4]
    L = np.tril(lu, -1) + np.eye(4)
    assert np.allclose(L @ np.triu(lu), a, atol=1e-12)


def test_dropins_match_torch_and_return_torch_types():
    a = torch.from_numpy(_pd(3, 7, (2,)))
    b = torch.randn(2, 3, 2, dtype=torch.float64)
    assert type(bt.linalg.cholesky_ex(a)).__name__ == "linalg_cholesky_ex"
    p, lo, up = bt.linalg.lu(a)
    torch.testing.assert_close(p @ lo @ up, a)
    lu, piv = bt.linalg.lu_factor(a)
    torch.testing.assert_close(bt.linalg.lu_solve(lu, piv, b), torch.linalg.solve(a, b))
    torch.testing.assert_close(bt.linalg.solve(a, b[..., 0]), torch.linalg.solve(a, b[..., 0]))
    sign, logabs = bt.linalg.slogdet(a)
    torch.testing.assert_close(logabs, torch.linalg.slogdet(a).logabsdet)
    with pytest.raises(RuntimeError, match="not positive-definite"):
        bt.linalg.cholesky_ex(-a, check_errors=True)
    x = a.clone().requires_grad_()
    bt.linalg.det(x).sum().backward()
    y = a.clone().requires_grad_()
    torch.linalg.det(y).sum().backward()
    torch.testing.assert_close(x.grad, y.grad)


def test_vector_rhs_gradient_matches_torch():
    a = torch.from_numpy(_pd(3, 8, (2,))).requires_grad_()
    b = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
    g = torch.randn(2, 3, dtype=torch.float64)
    got = torch.autograd.grad(bt.linalg.solve(a, b), (a, b), g)
    want = torch.autograd.grad(torch.linalg.solve(a, b), (a, b), g)
    for x, y in zip(got, want):
        torch.testing.assert_close(x, y)


@pytest.mark.parametrize("herm", [False, True])
def test_ldl_solve_with_two_by_two_blocks(herm):
    """ldl_solve on a real Bunch-Kaufman factor with 2x2 blocks solves the factored matrix (reference and torch)."""
    rng = np.random.default_rng(9)
    b = rng.standard_normal((5, 5)) + (1j * rng.standard_normal((5, 5)) if herm else 0)
    a = b + (b.conj().T if herm else b.T)
    a[0, 0] = 1e-3
    ld, piv, _ = ldl_factor_np(a, herm)
    assert (piv < 0).any()
    rhs = rng.standard_normal((5, 2)).astype(a.dtype)
    x = bc.Plan.select(bc.Descriptor.like("ldl_solve", ld, piv, rhs, hermitian=herm), CPU).run(ld, piv, rhs)
    assert np.allclose(a @ x, rhs, atol=1e-10)
    t = torch.linalg.ldl_solve(torch.from_numpy(ld), torch.from_numpy(piv), torch.from_numpy(rhs), hermitian=herm)
    assert np.allclose(x, t.numpy(), atol=1e-10)


@pytest.mark.parametrize("dtype", [torch.float64, torch.complex128])
@pytest.mark.parametrize("shape", [(3, 5), (2, 4, 3)], ids=["wide", "tall-batched"])
def test_rectangular_lu_gradients(shape, dtype):
    """torch's wide / tall LU gradients (lu, lu_factor_ex, lu_unpack w.r.t. LU_data): gradcheck's finite differences
    (complex: both Wirtinger parts) on the reference, and torch's autograd on the same cotangents."""
    gen = torch.Generator().manual_seed(11)
    a = torch.randn(shape, dtype=dtype, generator=gen)
    piv = torch.linalg.lu_factor(a).pivots
    fns = {"lu": (lambda x: bt.linalg.lu(x)[1:], lambda x: torch.linalg.lu(x)[1:]),
           "lu_factor_ex": (lambda x: bt.linalg.lu_factor_ex(x)[0], lambda x: torch.linalg.lu_factor_ex(x)[0]),
           "lu_unpack": (lambda x: bt.lu_unpack(x, piv)[1:], lambda x: torch.lu_unpack(x, piv)[1:])}
    with bc.preference(bc.PlanPreference(prefer=["reference"])):
        for name, (ours, theirs) in fns.items():
            x = (torch.linalg.lu_factor(a).LU if name == "lu_unpack" else a).requires_grad_()
            assert torch.autograd.gradcheck(ours, (x,), eps=1e-6, atol=1e-7, rtol=1e-6), name
            got, want = ours(x), theirs(x)
            got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
            cot = [torch.randn(w.shape, dtype=dtype, generator=gen) for w in want]
            torch.testing.assert_close(torch.autograd.grad(got, x, cot)[0], torch.autograd.grad(want, x, cot)[0],
                                       rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("op", ["solve", "solve_ex"])
def test_solve_backward_reuses_the_forward_lu(op):
    """solve's backward solves with the forward's own LU / pivots outputs (lu_solve, adjoint) and factors nothing
    again; the drop-ins still return X (, info) only."""
    a = torch.from_numpy(_pd(4, 3, (2,))).requires_grad_()
    b = torch.randn(2, 4, 3, dtype=torch.float64, requires_grad=True)
    desc = bc.Descriptor.like(op, a.detach(), b.detach())
    assert len(desc.outputs) == (4 if op == "solve_ex" else 3) and desc.spec.saved_outputs == 2
    ops = [s.op for s in bc.BackwardPlan.select(desc, CPU).skus]
    assert "lu_solve" in ops and not {"solve", "solve_ex", "lu_factor", "lu_factor_ex"} & set(ops), ops
    res = getattr(bt.linalg, op)(a, b)
    x = res[0] if op == "solve_ex" else res
    assert isinstance(x, torch.Tensor) and x.shape == (2, 4, 3)
    g = torch.randn_like(x)
    got = torch.autograd.grad(x, (a, b), g)
    xt = getattr(torch.linalg, op)(a, b)
    want = torch.autograd.grad(xt[0] if op == "solve_ex" else xt, (a, b), g)
    for u, v in zip(got, want):
        torch.testing.assert_close(u, v)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="the Triton kernels run under the interpreter here")
def test_pivots_on_ties_and_singular_steps_are_getf2s():
    """Small-integer matrices (columns with tied |a| in several rows, some singular): the Triton kernels' lu_factor_ex
    LU, pivots and info, det, inv_ex's info and values equal the reference's unblocked getf2 (LAPACK's pivot rule).
    The kernels move no rows: they keep each row's position in the matrix getf2 would have swapped, so the first
    largest |a| in that order must be the pivot.  (torch's CPU LAPACK is blocked: its rounding breaks some of these
    ties otherwise, so it is not the oracle here.)"""
    rng = np.random.default_rng(11)
    a = rng.integers(-2, 3, (24, 6, 6)).astype(np.float64)
    a[3, :, 2] = a[3, :, 1]                 # singular: two equal columns
    a[5, 4] = 0.0                           # a zero row
    a[7] = np.triu(a[7]) + 3 * np.eye(6)    # no pivoting needed
    for op in ("lu_factor_ex", "det", "inv_ex"):
        want = _plan(op, Backend.REFERENCE, a).run(a)
        got = _plan(op, Backend.TRITON, a).run(a)
        want, got = (want, got) if isinstance(want, tuple) else ((want,), (got,))
        ok = np.asarray(want[-1]) == 0 if op == "inv_ex" else np.ones(len(a), bool)   # (inv of a singular A: any)
        for w, g in zip(want, got):
            w, g = np.asarray(w), np.asarray(g)
            if w.dtype.kind == "f":
                np.testing.assert_allclose(g[ok], w[ok], rtol=1e-9, atol=1e-9, err_msg=op)
            else:
                np.testing.assert_array_equal(g, w, err_msg=op)


# -- torch.linalg.tensorinv / tensorsolve (twins of inv / solve: _linalg_twins.py) -----------------------------------
@pytest.mark.parametrize("shape,ind", [((4, 6, 8, 3), 2), ((6, 4, 24), 2), ((5, 5), 1), ((6, 2, 3), 1)])
def test_tensorinv_is_the_inverse_of_the_square_reshape_values_and_gradients(shape, ind):
    g = torch.Generator().manual_seed(3)
    A = torch.randn(shape, generator=g, dtype=torch.float64, requires_grad=True)
    got = bt.linalg.tensorinv(A, ind=ind)
    n = int(np.prod(shape[ind:]))
    inv = np.linalg.inv(A.detach().numpy().reshape(n, n))             # float64 NumPy: the independent reference
    assert got.shape == torch.Size(shape[ind:] + shape[:ind])
    np.testing.assert_allclose(got.detach().numpy().reshape(n, n), inv, rtol=1e-10, atol=1e-10)
    up = torch.randn(got.shape, generator=g, dtype=torch.float64)
    (ga,) = torch.autograd.grad(got, A, up)
    (want,) = torch.autograd.grad(torch.linalg.tensorinv(A, ind=ind), A, up)
    torch.testing.assert_close(ga, want)
    small = torch.randn((2, 3, 6), generator=g, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a: bt.linalg.tensorinv(a, ind=2), (small,))


@pytest.mark.parametrize("ashape,bshape,dims", [((2, 3, 6), (2, 3), None), ((3, 2, 6), (2, 3), None),
                                                ((6, 2, 3), (6,), (1, 2)), ((4, 4), (4,), None)])
def test_tensorsolve_solves_the_tensor_system_values_and_gradients(ashape, bshape, dims):
    g = torch.Generator().manual_seed(4)
    A = torch.randn(ashape, generator=g, dtype=torch.float64, requires_grad=True)
    B = torch.randn(bshape, generator=g, dtype=torch.float64, requires_grad=True)
    x = bt.linalg.tensorsolve(A, B, dims=dims)
    want = torch.linalg.tensorsolve(A, B, dims=dims)
    assert x.shape == want.shape
    # the system itself: A (dims moved last) contracted with x over x's dims gives B (element for element in
    # order: A's leading dims need only hold B's count, as torch's reshape)
    Am = A.detach().movedim(dims, tuple(range(A.dim() - len(dims), A.dim()))) if dims else A.detach()
    lhs = np.tensordot(Am.numpy(), x.detach().numpy(), axes=x.dim())
    np.testing.assert_allclose(lhs.reshape(-1), B.detach().numpy().reshape(-1), rtol=1e-10, atol=1e-10)
    up = torch.randn(x.shape, generator=g, dtype=torch.float64)
    got = torch.autograd.grad(x, (A, B), up)
    ref = torch.autograd.grad(want, (A, B), up)
    for a, b in zip(got, ref):
        torch.testing.assert_close(a, b)


def test_tensorinv_tensorsolve_errors_name_the_argument():
    A = torch.randn(2, 3, 4)
    with pytest.raises(bc.InvalidProblemError, match=r"tensorinv: argument 'ind': expected an int in \[1, 3\].*got 0"):
        bt.linalg.tensorinv(A, ind=0)
    with pytest.raises(bc.InvalidProblemError, match=r"tensorinv: argument 'ind'.*got 4"):
        bt.linalg.tensorinv(A, ind=4)
    with pytest.raises(TypeError, match=r"tensorinv: argument 'ind': expected an int, got float"):
        bt.linalg.tensorinv(A, ind=2.0)
    with pytest.raises(bc.InvalidProblemError, match=r"tensorinv: argument 'input'.*a square matrix.*\(2, 3, 4\)"):
        bt.linalg.tensorinv(A)
    with pytest.raises(TypeError, match=r"tensorsolve: argument 'other': expected a tensor, got list"):
        bt.linalg.tensorsolve(A, [1.0])
    with pytest.raises(bc.InvalidProblemError, match=r"tensorsolve: argument 'input'.*square system.*\(2, 3, 5\)"):
        bt.linalg.tensorsolve(torch.randn(2, 3, 5), torch.randn(2, 3))
    with pytest.raises(bc.InvalidProblemError, match=r"tensorsolve: argument 'other': expected at most input's number of dims"):
        bt.linalg.tensorsolve(torch.randn(4), torch.randn(2, 2, 1))
    with pytest.raises(LinAlgError):
        bt.linalg.tensorinv(torch.zeros(2, 2, 4))          # singular: inv's error, as torch's
