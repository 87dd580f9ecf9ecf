"""The single-read long-row softmax kernels (backends/triton/softmax/coop.py) against float64 torch: forward and
backward, every op, chunk boundaries, -inf/NaN rows, non-contiguous rows, reruns bit-identical (GPU only: the
kernels wait on sibling programs, which the interpreter runs one at a time)."""
import pytest
import torch

if not torch.cuda.is_available():
    pytest.skip("needs a CUDA device", allow_module_level=True)

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton.softmax import softmax as tm  # noqa: E402

PREF = bc.PlanPreference(prefer=(Backend.TRITON,))
REF = {"softmax": torch.softmax, "log_softmax": torch.log_softmax, "softmin": lambda x, d: torch.softmax(-x, d)}


def _plan(op, x, dim):
    return bc.Plan.select(bc.Descriptor.like(op, x, dim=dim), "cuda", PREF)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "softmin"])
@pytest.mark.parametrize("shape,dim,chunk,dtype", [((3, 70), -1, 16, torch.float32), ((5, 1000), 1, 128, torch.bfloat16),
                                                   ((2, 4, 300), -1, 64, torch.float64), ((7, 4097), -1, 512, torch.float16),
                                                   ((2, 40000), -1, 8192, torch.float32)])
def test_coop_forward_backward(op, shape, dim, chunk, dtype):
    g0 = torch.Generator(device="cuda").manual_seed(1)
    x = (torch.randn(*shape, device="cuda", generator=g0) * 3).to(dtype)
    x.view(-1, shape[-1])[0, : shape[-1] // 3] = float("-inf") if op != "softmin" else float("inf")
    with tm.forced(coop=True, chunk=chunk, max_single=min(16, chunk)):
        p = _plan(op, x, dim)
        assert "coop" in p.sku.route, p.sku.route
        y = p.run(x)
        y2 = p.run(x)
        want = REF[op](x.double(), dim)
        tol = dict(rtol=2e-2, atol=2e-2) if dtype in (torch.bfloat16, torch.float16) else dict(rtol=2e-5, atol=2e-6)
        torch.testing.assert_close(y.double(), want, **tol)
        assert torch.equal(y, y2), "rerun differs: the fold must be deterministic"
        g = torch.randn(*shape, device="cuda", generator=g0).to(dtype)
        bw = bc.BackwardPlan.select(bc.Descriptor.like(op, x, dim=dim), "cuda", PREF)
        assert any("coop" in s.route for s in bw.skus), [s.route for s in bw.skus]
        (dx,) = bw.run(g, out=y)
    xt = x.double().requires_grad_()
    (REF[op](xt, dim) * g.double()).sum().backward()
    want_dx = torch.nan_to_num(xt.grad, nan=0.0)
    torch.testing.assert_close(torch.nan_to_num(dx.double(), nan=0.0), want_dx, **tol)


def test_coop_noncontiguous_and_nan():
    x = torch.randn(1000, 6, device="cuda").t()      # rows of 1000 with stride 6
    x[2, 17] = float("nan")
    with tm.forced(coop=True, chunk=128, max_single=16):
        y = _plan("softmax", x, 1).run(x)
    want = torch.softmax(x.double(), 1)
    torch.testing.assert_close(y.double(), want, rtol=2e-5, atol=2e-6, equal_nan=True)
    assert torch.isnan(y[2]).all()
