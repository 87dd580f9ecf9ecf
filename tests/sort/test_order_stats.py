"""Order-statistic checks the generic suite does not make: torch's NaN rules (median propagates and points at
the first NaN, nanmedian skips NaNs, kthvalue counts NaN as the largest), quantile's five interpolations
against torch with q lists and NaN rows, the long-row sort paths (merge, radix) under them, gradients against
torch.autograd (evenly split for median() without dim, lerp weights for quantile) and the drop-ins."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda.torch as bt  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton.sort.rows import forced  # noqa: E402
from baracuda.testing import backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, grad_pair, run_on as _run  # noqa: E402

BACKENDS = backends_for("median", DEVICE)
INTERPS = ("linear", "lower", "higher", "midpoint", "nearest")
# the register sort, and blocks of 4 + merge passes under every statistic (the radix path: test_..._radix_path)
PATHS = {"registers": {}, "merge": {"nmax": 4, "tile": 8, "radix": False}}


def _same(got, want, tol=0.0):
    torch.testing.assert_close(got, want, rtol=tol, atol=tol, equal_nan=True)


def _nan_rows(g, dt=torch.float32):
    x = torch.randn(5, 11, generator=g, dtype=torch.float64)
    x[0, 3] = x[0, 7] = float("nan")
    x[2, 10] = float("nan")
    x[4, :] = float("nan")
    return x.to(dt)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64], ids=str)
def test_median_nanmedian_kthvalue_nan_rules(backend, path, dt):
    if backend != Backend.TRITON and path != "registers":
        pytest.skip("the forced path is Triton's")
    g = torch.Generator().manual_seed(1)
    x = _nan_rows(g, dt)
    with forced(**PATHS[path]):
        v, i = _run("median", x, backend=backend, dim=1)
        tv, ti = torch.median(x, 1)
        _same(v, tv)
        _same(i[:4], ti[:4])        # an all-NaN row: torch's index is its selection's (ours: the first NaN)
        assert i[4].item() == 0
        v, i = _run("nanmedian", x, backend=backend, dim=1)
        tv, ti = torch.nanmedian(x, 1)
        _same(v, tv)
        _same(i[:4], ti[:4])
        for k in (1, 6, 9, 11):
            v, i = _run("kthvalue", x[:4], backend=backend, k=k, dim=1)
            sv, si = torch.sort(x[:4], dim=1, stable=True)
            _same(v, sv[:, k - 1])
            _same(i, si[:, k - 1])
        _same(_run("median", x, backend=backend), torch.median(x))
        _same(_run("nanmedian", x[:4], backend=backend), torch.nanmedian(x[:4]))


def test_statistics_on_the_radix_path():
    """The order statistics on the long-row radix path (forced: rows of 11 in blocks of 8; bf16: two digit passes, the
    quantiles' f32: four): NaN rules, kthvalue's stable ties, quantiles, median() over the flattened 55 elements."""
    g = torch.Generator().manual_seed(6)
    x = _nan_rows(g, torch.bfloat16)
    with forced(radix=True, nmax=4, radix_block=8):
        v, i = _run("median", x, dim=1)
        tv, ti = torch.median(x, 1)
        _same(v, tv)
        _same(i[:4], ti[:4])
        v, i = _run("nanmedian", x, dim=1)
        tv, ti = torch.nanmedian(x, 1)
        _same(v, tv)
        _same(i[:4], ti[:4])
        v, i = _run("kthvalue", x[:4], k=6, dim=1)
        sv, si = torch.sort(x[:4], dim=1, stable=True)
        _same(v, sv[:, 5])
        _same(i, si[:, 5])
        _same(_run("median", x), torch.median(x))
        y = x.float()
        q = torch.tensor([0.0, 0.3, 0.5, 1.0])
        _same(_run("nanquantile", y, q=tuple(q.tolist()), dim=1), torch.nanquantile(y, q, dim=1), 2e-6)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.int32, torch.int64, torch.uint8, torch.int8], ids=str)
def test_integer_median_kthvalue(backend, dt):
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 9, (4, 3, 8), generator=g).to(dt)
    for dim in (0, 1, 2):
        v, i = _run("median", x, backend=backend, dim=dim, keepdim=True)
        sv, si = torch.sort(x, dim=dim, stable=True)
        m = (x.shape[dim] - 1) // 2
        _same(v, sv.narrow(dim, m, 1))
        _same(i, si.narrow(dim, m, 1))
    _same(_run("median", x, backend=backend), torch.median(x))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("interp", INTERPS)
def test_quantile_like_torch(backend, path, interp):
    if backend != Backend.TRITON and path != "registers":
        pytest.skip("the forced path is Triton's")
    g = torch.Generator().manual_seed(3)
    x = _nan_rows(g)
    q = torch.tensor([0.0, 0.1, 0.25, 0.5, 0.7, 0.9, 1.0])
    with forced(**PATHS[path]):
        for op in ("quantile", "nanquantile"):
            fn = getattr(torch, op)
            got = _run(op, x, backend=backend, q=tuple(q.tolist()), dim=1, interpolation=interp)
            # f32 ranks and lerp as torch's: the same neighbours, values within f32 rounding
            _same(got, fn(x, q, dim=1, interpolation=interp), 2e-6)
            got = _run(op, x[:4].T, backend=backend, q=0.3, dim=0, keepdim=True, interpolation=interp)
            _same(got, fn(x[:4].T, 0.3, dim=0, keepdim=True, interpolation=interp), 2e-6)
        y = x[1:4].double()
        _same(_run("quantile", y, backend=backend, q=(0.2, 0.5), interpolation=interp),
              torch.quantile(y, torch.tensor([0.2, 0.5], dtype=torch.float64), interpolation=interp), 1e-12)


@pytest.mark.parametrize("interp", INTERPS)
def test_quantile_gradient_like_torch(interp):
    g = torch.Generator().manual_seed(4)
    x = torch.randperm(48, generator=g).double().reshape(4, 12) / 5.0
    q = torch.tensor([0.1, 0.5, 0.77], dtype=torch.float64)
    grad_pair(lambda t: bt.quantile(t, q, dim=1, interpolation=interp),
              lambda t: torch.quantile(t, q, dim=1, interpolation=interp), x)
    grad_pair(lambda t: bt.nanquantile(t, 0.35, interpolation=interp),
              lambda t: torch.nanquantile(t, 0.35, interpolation=interp), x)


def test_selection_gradients_like_torch():
    g = torch.Generator().manual_seed(5)
    x = torch.randperm(30, generator=g).double().reshape(5, 6)
    grad_pair(lambda t: bt.kthvalue(t, 2, 0)[0], lambda t: torch.kthvalue(t, 2, 0)[0], x)
    grad_pair(lambda t: bt.median(t, 1)[0], lambda t: torch.median(t, 1)[0], x)
    grad_pair(lambda t: bt.nanmedian(t, 1, keepdim=True)[0], lambda t: torch.nanmedian(t, 1, keepdim=True)[0], x)
    # median() without dim: the gradient is split evenly among the elements equal to the result (ties)
    y = torch.tensor([[1.0, 2.0, 2.0], [3.0, 2.0, 0.0]], dtype=torch.float64)
    grad_pair(bt.median, torch.median, y)


def test_dropins_return_torch_types():
    x = torch.randn(4, 5)
    assert isinstance(bt.median(x, 1), torch.return_types.median)
    assert isinstance(bt.nanmedian(x, 0), torch.return_types.nanmedian)
    assert isinstance(bt.kthvalue(x, 2), torch.return_types.kthvalue)
    assert bt.median(x).dim() == 0
    with pytest.raises(ValueError, match="q must be a scalar or 1D tensor"):
        bt.quantile(x, torch.zeros(2, 2))
    with pytest.raises(Exception, match="q"):
        bt.quantile(x, 1.5)
