"""The column-major copies the cuSOLVER / cuBLAS backends hand to the libraries (CPU-checkable): always a fresh
buffer, never the caller's tensor, with a lazily conjugated operand materialized.  Both were bugs on the H100: a
(B, n, 1) right-hand side came back from ``contiguous()`` as the input itself, so the solves overwrote their inputs,
and a conj view kept its bit, so cuSOLVER read V instead of V^H (eig's backward)."""
import pytest
import torch

from baracuda.backends.nvidia.cusolver_lib import colmajor


@pytest.mark.parametrize("shape", [(2, 3, 1), (2, 1, 3), (1, 1, 1), (2, 4, 3)])
def test_column_major_copy_is_fresh_and_holds_the_transpose(shape):
    fn = colmajor
    x = torch.randn(shape, dtype=torch.float64)
    x0 = x.clone()
    c = fn(x)
    assert c.is_contiguous() and c.shape == shape[:-2] + (shape[-1], shape[-2])
    assert c.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()
    torch.testing.assert_close(c, x.transpose(-1, -2), rtol=0, atol=0)
    c.add_(1.0)                                   # the library overwrites its buffer: the input must not change
    assert torch.equal(x, x0)


def test_column_major_copy_materializes_a_conjugate_view():
    fn = colmajor
    v = torch.randn(2, 3, 3, dtype=torch.complex128)
    vh = v.mH                                     # conj bit set; its transpose is dense (v.conj())
    c = fn(vh)
    assert not c.is_conj()
    raw = torch.view_as_real(c)                   # what a library reading data_ptr() sees
    torch.testing.assert_close(raw, torch.view_as_real(v.conj().resolve_conj()), rtol=0, atol=0)
