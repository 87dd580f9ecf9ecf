"""Sort-family checks the generic suite does not make: torch's order (stable ties, NaN largest, -0.0 == +0.0,
descending stability) on every dtype, the long-row path (block sort + merge passes), the chunked topk and the radix-select topk
forced at small sizes, topk's large-k path, sort_backward's out-of-range index error, gradients through
the saved indices against torch.autograd, and the drop-ins."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda._core.errors import InvalidProblemError  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton.sort.rows import forced  # noqa: E402
from baracuda.testing import backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, grad_pair, needs_sm90, run_sm90_script, run_on as _run  # noqa: E402

BACKENDS = backends_for("sort", DEVICE)
TRITON = [b for b in BACKENDS if b == Backend.TRITON]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8]
# register sort (rows <= nmax), and the block sort + merge path with blocks of 4 and merge tiles of 8
PATHS = {"registers": {}, "merge": {"nmax": 4, "tile": 8}}


def _data(dt, shape, g):
    """Small integers (many ties) with NaN, +-inf and both zeros in the float dtypes."""
    x = torch.randint(-4, 5, shape, generator=g).to(torch.float64)
    if dt.is_floating_point:
        flat = x.view(-1)
        n = flat.numel()
        for j, v in zip(torch.randperm(n, generator=g)[:6].tolist(),
                        [float("nan"), -0.0, 0.0, float("inf"), float("-inf"), float("nan")]):
            flat[j] = v
    elif dt == torch.uint8:
        x = x.abs()
    return x.to(dt)


def _same(got, want):
    torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("dt", DTYPES, ids=str)
def test_sort_is_torchs_stable_sort(backend, path, dt):
    if backend != Backend.TRITON and path != "registers":
        pytest.skip("the forced path is Triton's")
    g = torch.Generator().manual_seed(1)
    with forced(**PATHS[path]):
        for shape, dim in [((3, 37), 1), ((5, 3, 6), 0), ((1, 17), -1), ((2, 1), 1)]:
            x = _data(dt, shape, g)
            for desc in (False, True):
                v, i = _run("sort", x, backend=backend, dim=dim, descending=desc)
                tv, ti = torch.sort(x, dim=dim, descending=desc, stable=True)
                _same(i, ti)
                _same(v, tv)
                # -0.0 and +0.0 are one key: the stable order keeps their input order, and the values keep their sign
                if dt.is_floating_point:
                    assert torch.equal(torch.signbit(v), torch.signbit(tv))
                _same(_run("argsort", x, backend=backend, dim=dim, descending=desc), ti)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bool_and_msort(backend):
    g = torch.Generator().manual_seed(2)
    x = torch.randint(0, 2, (4, 19), generator=g).bool()
    v, i = _run("sort", x, backend=backend, descending=True)
    tv, ti = torch.sort(x, descending=True, stable=True)
    _same(i, ti)
    assert torch.equal(v, tv)
    y = _data(torch.float32, (9, 4), g)
    v, i = _run("msort", y, backend=backend)
    _same(v, torch.msort(y))


@pytest.mark.parametrize("backend", TRITON, ids=str)
def test_long_row_merge_path_many_passes(backend):
    """A row of 1000 with blocks of 8: 7 merge passes (the last one writing the outputs), one unpaired tail run."""
    g = torch.Generator().manual_seed(3)
    x = torch.randint(-50, 50, (2, 1000), generator=g).float()
    x[0, 17] = float("nan")
    with forced(nmax=8, tile=64):
        for desc in (False, True):
            v, i = _run("sort", x, backend=backend, descending=desc)
            tv, ti = torch.sort(x, descending=desc, stable=True)
            _same(i, ti)
            _same(v, tv)
        # a 64-bit dtype: (key, index) pairs through the same passes
        xd = x.double()
        _same(_run("sort", xd, backend=backend)[1], torch.sort(xd, stable=True)[1])


# topk's paths at small sizes: the chunked bitonic walk (chunks of 8, and k above kmax=4 through the full sort), and
# the radix select (chunks of 8 positions: a row of 45 is six chunks, one partial; keys of <= 32 bits)
TOPK_PATHS = {"chunked": dict(chunk=8, kmax=4, nmax=16, tile=8, select=False),
              "select": dict(select=True, select_chunk=8)}


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("path", list(TOPK_PATHS))
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int32, torch.int16,
                                torch.int8, torch.uint8], ids=str)
def test_topk_nan_largest_ties_lowest_index(backend, path, dt):
    """topk keeps the first k entries of torch's stable sort on every path: NaN largest, ties at the k-th key by
    lowest position, every 8-bit digit pass of the select."""
    if backend != Backend.TRITON and path != "chunked":
        pytest.skip("the forced path is Triton's")
    g = torch.Generator().manual_seed(4)
    x = _data(dt, (3, 45), g)
    if dt.is_floating_point:      # wide values too (every digit of the key matters), and ties
        x[1] = (torch.randn(45, generator=g) * 1e3).to(dt)
        x[1, 5:9] = x[1, 30]
    with forced(**TOPK_PATHS[path]):
        for k in (1, 3, 4, 7, 16, 45):
            for largest in (True, False):
                v, i = _run("topk", x, backend=backend, k=k, largest=largest)
                tv, ti = torch.sort(x, descending=largest, stable=True)
                _same(i, ti[:, :k])
                _same(v, tv[:, :k])


def test_topk_values_match_torch_topk():
    """Without ties the indices are unique: they equal torch.topk's (which picks any tied position)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(4, 100, generator=g)
    for k in (1, 10, 100):
        for largest in (True, False):
            ours, ref = bt.topk(x, k, largest=largest), torch.topk(x, k, largest=largest)
            _same(ours.values, ref.values)
            _same(ours.indices, ref.indices)


@pytest.mark.parametrize("op", ["sort", "topk", "msort"])
def test_gradients_through_the_saved_indices(op):
    g = torch.Generator().manual_seed(6)
    x = torch.randperm(60, generator=g).double().reshape(5, 12) / 7.0
    if op == "sort":
        grad_pair(lambda t: bt.sort(t, dim=0, descending=True)[0], lambda t: torch.sort(t, dim=0, descending=True)[0], x)
    elif op == "topk":
        grad_pair(lambda t: bt.topk(t, 4, dim=1)[0], lambda t: torch.topk(t, 4, dim=1)[0], x)
    else:
        grad_pair(bt.msort, torch.msort, x)


@pytest.mark.parametrize("backend", backends_for("sort_backward", DEVICE), ids=str)
def test_sort_backward_out_of_range_index_raises_and_writes_nothing_outside(backend):
    g = torch.randn(3, 4)
    idx = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [0, 9, 2, 1]])
    with pytest.raises(InvalidProblemError, match=r"sort_backward: argument 'indices'.*got 9"):
        _run("sort_backward", g, idx, backend=backend, dim=1, size=4)
        bc.check_errors()       # (on the GPU the value check is deferred by default)
    ok = torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0], [1, 0, 3, 2]])
    out = _run("sort_backward", g, ok, backend=backend, dim=1, size=6)
    _same(out, torch.zeros(3, 6).scatter(1, ok, g))


def test_dropins_return_torch_types():
    x = torch.randn(3, 5)
    assert isinstance(bt.sort(x), torch.return_types.sort)
    assert isinstance(bt.topk(x, 2), torch.return_types.topk)
    assert isinstance(bt.argsort(x, descending=True), torch.Tensor)
    assert isinstance(bt.msort(x), torch.Tensor)
    _same(bt.sort(x, stable=True, dim=0).indices, torch.sort(x, stable=True, dim=0).indices)


@needs_sm90
def test_workload_kernels_compile_for_sm90_without_spills():
    """The bench workloads' configurations (rows of 8192 f32 / 4096 f64 in registers, the block + merge path, topk
    chunks of 1024 and 4096, the order statistics' pick) compile for sm_90 with no stack (no spills)."""
    run_sm90_script('''
import torch
import baracuda as bc
from baracuda._core.registry import implementations
from baracuda.testing.sm90 import offline_launches, resources
cases = [("sort", torch.zeros(2, 8192), {}), ("sort", torch.zeros(2, 4096, dtype=torch.float64), {}),
         ("sort", torch.zeros(1, 20000), {}), ("topk", torch.zeros(2, 32768, dtype=torch.bfloat16), {"k": 1024}),
         ("topk", torch.zeros(2, 32768, dtype=torch.bfloat16), {"k": 8}), ("median", torch.zeros(2, 8192), {"dim": 1})]
for op, x, a in cases:
    d = bc.Descriptor.like(op, x, **a)
    impl = [i for i in implementations(op) if "triton" in str(i.backend).lower()][0]
    outs = [torch.empty(t.shape, dtype=t.dtype.torch) for t in d.outputs]
    ws = torch.empty(max(impl.workspace(d), 8), dtype=torch.uint8)
    with offline_launches() as launches:
        impl.run(d, [x], outs, ws)
    for ln in launches:
        regs, stack = resources(ln.compiled)
        print(op, tuple(x.shape), ln.name, regs, stack, flush=True)
        assert stack == 0, (op, ln.name, regs, stack)
print("ok")
''')
