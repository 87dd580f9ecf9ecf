"""The GPU backward ops of the spectral decompositions and householder_product (backends/nvidia/spectral_backward.py:
torch arithmetic, registered for CUDA) run here on CPU torch tensors through their implementations' run functions, against the NumPy
reference (the float64 oracle) on real and complex factors, every combination of present cotangents and the wide /
tall / square shapes.  eig_backward's cuSOLVER QR of V^H is torch's CPU QR here (the composition's only library
call; the qr op's own GPU tests cover geqrf + orgqr)."""
from __future__ import annotations

import numpy as np
import pytest

import baracuda  # noqa: F401  (loads the registry)
from baracuda._core.dtypes import DType
from baracuda._core.oracle import reference_f64
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda._core.spec import Descriptor, TensorSpec
from baracuda.backends.reference import linalg_spectral as ref

torch = pytest.importorskip("torch")
from baracuda.backends.nvidia import spectral_backward as sb  # noqa: E402

RNG = np.random.default_rng(1919)


def _mat(shape, cplx):
    a = RNG.standard_normal(shape)
    return a + 1j * RNG.standard_normal(shape) if cplx else a


def _check(op, arrays, attrs, run=None):
    """The implementation's run on CPU tensors == the reference (float64 / complex128 throughout)."""
    arrays = [np.ascontiguousarray(a) for a in arrays]
    specs = tuple(TensorSpec(a.shape, DType.c128 if np.iscomplexobj(a) else DType.f64) for a in arrays)
    desc = Descriptor(op, specs, tuple(sorted(attrs.items())))
    outs = [torch.empty(o.shape, dtype=torch.complex128 if o.dtype.is_complex else torch.float64)
            for o in desc.outputs]
    if run is None:
        run = next(i for i in implementations(op) if i.backend != Backend.REFERENCE).run
    run(desc, [torch.tensor(a) for a in arrays], outs, None)
    # float64 on both sides, n <= 5 with singular-value / eigenvalue gaps ~0.1: ~1e-13 relative observed
    for out, want in zip(outs, reference_f64(desc, arrays), strict=True):
        np.testing.assert_allclose(out.numpy(), want, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("n", [1, 3, 5, 8])
def test_tri_inv_inverts_upper_and_lower(n):
    r = np.triu(_mat((2, n, n), True)) + 3 * np.eye(n)
    inv = sb.tri_inv(torch.tensor(r)).numpy()
    np.testing.assert_allclose(inv @ r, np.broadcast_to(np.eye(n), r.shape), atol=1e-12)
    low = np.swapaxes(r, -1, -2)
    np.testing.assert_allclose(sb.tri_inv(torch.tensor(low), upper=False).numpy() @ low,
                               np.broadcast_to(np.eye(n), r.shape), atol=1e-12)


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (3, 5)])
@pytest.mark.parametrize("has", [(True, True), (True, False), (False, True), (False, False)])
def test_svd_backward_matches_the_reference(shape, cplx, has):
    u, s, vh = ref.svd_gauged(_mat(shape, cplx), False)
    gs = [_mat(np.shape(x), cplx and x is not s) for x in (u, s, vh)]
    _check("svd_backward", [u, s, vh, *gs], {"full_matrices": False, "has_u": has[0], "has_vh": has[1]})


@pytest.mark.parametrize("cplx", [False, True])
def test_svd_backward_full_matrices_ignores_the_extra_vectors(cplx):
    u, s, vh = ref.svd_gauged(_mat((4, 2), cplx), True)
    gs = [_mat(np.shape(x), cplx and x is not s) for x in (u, s, vh)]
    _check("svd_backward", [u, s, vh, *gs], {"full_matrices": True, "has_u": True, "has_vh": True})


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("has_v", [True, False])
def test_eigh_backward_matches_the_reference(cplx, has_v):
    w, v = ref.eigh_gauged(_mat((2, 4, 4), cplx), "L")
    _check("eigh_backward", [v, w, _mat(v.shape, cplx), RNG.standard_normal(w.shape)], {"has_v": has_v})


def _torch_qr(a):
    return torch.linalg.qr(a)   # stands in for cuSOLVER's geqrf + orgqr on the CPU


@pytest.mark.parametrize("real", [False, True])
@pytest.mark.parametrize("has_v", [True, False])
def test_eig_backward_matches_the_reference(real, has_v):
    w, v = ref.eig_gauged(_mat((2, 4, 4), not real))
    _check("eig_backward", [v, w, _mat(v.shape, True), _mat(w.shape, True)], {"has_v": has_v, "real": real},
           run=sb.eig_run(False, _torch_qr))


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("shape", [(2, 4, 3), (3, 3), (3, 5)])
@pytest.mark.parametrize("has", [(True, True), (True, False), (False, True)])
def test_qr_backward_matches_the_reference(shape, cplx, has):
    q, r = np.linalg.qr(_mat(shape, cplx))
    _check("qr_backward", [q, r, _mat(q.shape, cplx), _mat(r.shape, cplx)], {"has_q": has[0], "has_r": has[1]})


@pytest.mark.parametrize("cplx", [False, True])
@pytest.mark.parametrize("a_shape,tau_shape", [((2, 5, 3), (2, 3)), ((4, 4), (2,)), ((1, 4, 3), (2, 3)),
                                               ((3, 2), (0,))])
def test_householder_product_backward_matches_the_reference(a_shape, tau_shape, cplx):
    # the WY form's products vs the reference's sweep over the reflectors; random tau (not unit reflectors), k < n,
    # A's batch broadcast against tau's (summed back), no reflectors at all
    a, tau = _mat(a_shape, cplx), _mat(tau_shape, cplx)
    g = _mat(np.broadcast_shapes(a_shape[:-2], tau_shape[:-1]) + a_shape[-2:], cplx)
    _check("householder_product_backward", [g, a, tau], {})


@pytest.mark.parametrize("cplx", [False, True])
def test_householder_product_backward_of_geqrf_reflectors_matches_the_reference(cplx):
    a, tau = torch.geqrf(torch.tensor(_mat((2, 5, 4), cplx)))    # unitary reflectors, orgqr's real use
    _check("householder_product_backward", [_mat((2, 5, 4), cplx), a.numpy(), tau.numpy()], {})


def test_the_gpu_backward_ops_are_registered_for_cuda_with_their_composition():
    for op, backend in (("svd_backward", Backend.CUBLAS), ("eigh_backward", Backend.CUBLAS),
                        ("qr_backward", Backend.CUBLAS), ("eig_backward", Backend.CUSOLVER),
                        ("householder_product_backward", Backend.CUBLAS)):
        impl = next(i for i in implementations(op) if i.backend == backend)
        assert impl.devices == frozenset({"cuda"})
        assert "cublas" in impl.route_of(_desc(op), None)


def _desc(op):
    v = ((2, 3, 3), "c64")
    lam = ((2, 3), "c64" if op == "eig_backward" else "f32")
    if op == "svd_backward":
        return Descriptor.make(op, v, lam, v, v, lam, v)
    if op == "qr_backward":
        return Descriptor.make(op, v, v, v, v)
    if op == "householder_product_backward":
        return Descriptor.make(op, v, v, ((2, 3), "c64"))
    return Descriptor.make(op, v, lam, v, lam)
