"""FastKernel (backends/triton: a launched kernel relaunched through its compiled C launcher) against Triton's own
path: same results across alignments, integer and float arguments, reuse; under the interpreter it is Triton's
path itself.  On the GPU the relaunch is counted: one cache entry per specialization, none per float value."""
import os

import pytest
import torch
import triton
import triton.language as tl

from baracuda.backends.triton._lib.launch import FastKernel

DEV = "cuda" if torch.cuda.is_available() else "cpu"
if DEV == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
    pytest.skip("Triton kernels need a GPU or TRITON_INTERPRET=1", allow_module_level=True)


@triton.jit
def _axpy_body(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, alpha * x + y, mask=m)


_axpy = FastKernel(_axpy_body)


def test_fast_kernel_matches_the_formula_across_arguments():
    g = torch.Generator(device=DEV).manual_seed(0)
    base_x = torch.randn(300, device=DEV, generator=g)
    base_y = torch.randn(300, device=DEV, generator=g)
    for n, off, alpha in [(256, 0, 2.0), (256, 0, -0.5), (256, 1, 3.0), (100, 0, 1.5), (256, 0, 0.25),
                          (100, 3, -2.0), (256, 0, 2.0)]:
        x, y = base_x[off:off + n], base_y[off:off + n]
        out = torch.empty(n, device=DEV)
        for _ in range(2):        # first call: Triton's path; the second the relaunch (on a GPU)
            out.fill_(float("nan"))
            _axpy[(triton.cdiv(n, 128),)](x, y, out, n, alpha, BLOCK=128)
            torch.testing.assert_close(out, alpha * x + y, rtol=1e-6, atol=1e-6)
    if DEV == "cuda":
        # keys: (n, alignment of x and y) = (256, aligned), (256, offset 1), (100, aligned), (100, offset 3)
        assert len(_axpy.cache) == 4, list(_axpy.cache)


def test_fast_kernel_forwards_attributes_and_callable_grids():
    assert _axpy.arg_names == _axpy_body.arg_names
    x = torch.randn(64, device=DEV)
    out = torch.empty_like(x)
    _axpy[lambda meta: (triton.cdiv(64, meta["BLOCK"]),)](x, x, out, 64, 1.0, BLOCK=32)
    torch.testing.assert_close(out, 2 * x)
