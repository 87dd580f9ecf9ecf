"""ldl_solve's GPU composition (backends/nvidia/ldl_solve.py: sytrs' steps vectorized over the batch, torch ops
only) run on CPU tensors: against torch's LAPACK ldl_solve and the float64 reference, on factors with many 2x2
pivot blocks (random indefinite matrices), real / complex symmetric / complex hermitian, broadcast batches,
several right-hand sides, and empty problems."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from baracuda._core.oracle import reference_f64  # noqa: E402
from baracuda._core.spec import Descriptor  # noqa: E402
from baracuda.backends.nvidia import ldl_solve as gpu  # noqa: E402


def _factor(shape, dt, herm, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(shape, generator=g, dtype=dt)
    a = a + (a.mH if herm else a.mT)      # indefinite: Bunch-Kaufman picks 2x2 blocks
    ld, piv = torch.linalg.ldl_factor(a, hermitian=herm)
    return a, ld, piv


@pytest.mark.parametrize("dt,herm", [(torch.float64, False), (torch.complex128, True), (torch.complex128, False)])
def test_matches_lapack_and_the_reference_with_2x2_blocks(dt, herm):
    a, ld, piv = _factor((40, 6, 6), dt, herm, 3)
    assert (piv < 0).any(), "the test wants 2x2 blocks"
    b = torch.randn(40, 6, 3, dtype=dt)
    want = torch.linalg.ldl_solve(ld, piv, b, hermitian=herm)
    got = gpu.ldl_solve(ld, piv, b, herm)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    # float64 throughout, n = 6, |A| ~ 3: residuals ~1e-14
    torch.testing.assert_close(a @ got, b, rtol=1e-10, atol=1e-10)
    name = "f64" if dt == torch.float64 else "c128"
    desc = Descriptor.make("ldl_solve", (tuple(ld.shape), name), (tuple(piv.shape), "i32"), (tuple(b.shape), name),
                           hermitian=herm)
    (ref,) = reference_f64(desc, [ld.numpy(), piv.numpy(), b.numpy()])
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-10, atol=1e-10)


def test_the_plan_run_broadcasts_batches_and_takes_empty_problems():
    _, ld, piv = _factor((1, 5, 5), torch.float64, False, 8)
    b = torch.randn(4, 5, 2, dtype=torch.float64)
    desc = Descriptor.make("ldl_solve", ((1, 5, 5), "f64"), ((1, 5), "i32"), ((4, 5, 2), "f64"), hermitian=False)
    out = torch.empty(tuple(desc.outputs[0].shape), dtype=torch.float64)
    gpu._run(desc, [ld, piv, b], [out])
    torch.testing.assert_close(out, torch.linalg.ldl_solve(ld.expand(4, 5, 5), piv.expand(4, 5), b),
                               rtol=1e-10, atol=1e-10)
    for shapes in (((0, 3, 3), (0, 3), (0, 3, 2)), ((2, 3, 3), (2, 3), (2, 3, 0)), ((2, 0, 0), (2, 0), (2, 0, 2))):
        d0 = Descriptor.make("ldl_solve", (shapes[0], "f64"), (shapes[1], "i32"), (shapes[2], "f64"), hermitian=False)
        o0 = torch.full(tuple(d0.outputs[0].shape), 7.0, dtype=torch.float64)
        gpu._run(d0, [torch.zeros(shapes[0], dtype=torch.float64), torch.ones(shapes[1], dtype=torch.int32),
                      torch.zeros(shapes[2], dtype=torch.float64)], [o0])
        assert o0.numel() == 0 or torch.equal(o0, torch.zeros_like(o0))
