"""Reduction semantics the generic spec-driven suite does not reach: NaN, ties, empty reductions,
``dtype=`` narrowing, accuracy on large-mean data, the two-stage (split) path, the amax tie-split
gradient, the drop-in signatures, and an offline sm_90 compile (registers, spills, vector loads)."""
from __future__ import annotations

import math
import os
import textwrap

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.testing import backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, force_reduction_split, needs_sm90, run_on  # noqa: E402
from baracuda.testing.checks import run_sm90_script  # noqa: E402
from baracuda.testing.checks import assert_same as _same  # noqa: E402

BACKENDS = backends_for("sum", DEVICE)


def _run(op, x, backend, **attrs):
    return run_on(op, x, backend=backend, **attrs)


@pytest.fixture
def split(monkeypatch):
    """Force the two-stage path on small problems (splits of >= 8 elements, up to 16 programs)."""
    force_reduction_split(monkeypatch)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64])
def test_nan_propagates_like_torch(backend, dt):
    x = torch.randn(5, 37).to(dt)
    x[1, 3] = float("nan")
    x[1, 20] = float("nan")
    x[3, 0] = float("nan")
    x[0, :] = float("-inf")
    for dim in (0, 1):
        for op in ("amax", "amin", "sum", "mean"):
            _same(_run(op, x, backend, dims=dim), getattr(torch, op)(x, dim=dim), 1e-2, 1e-2)
        for op in ("argmax", "argmin"):
            _same(_run(op, x, backend, dim=dim), getattr(torch, op)(x, dim=dim))  # first NaN's index
    _same(_run("argmax", x, backend), torch.argmax(x))
    _same(_run("amin", x, backend), torch.amin(x))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_ties_first_index(backend):
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0, 3.0], [-5.0, -5.0, 0.0, -5.0, 1.0], [2.0, 2.0, 2.0, 2.0, 2.0]])
    for dim in (0, 1, None):
        _same(_run("argmax", x, backend, dim=dim), torch.argmax(x, dim=dim))
        _same(_run("argmin", x, backend, dim=dim), torch.argmin(x, dim=dim))
    y = torch.full((3, 300), float("-inf"))   # every element is -inf: index 0, as torch
    _same(_run("argmax", y, backend, dim=1), torch.argmax(y, dim=1))


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("split", [False, True])
def test_packed_argmax_matches_torch(monkeypatch, dt, split):
    """argmax / argmin of 16-bit floats as one int32 max of (order key, ~column) per tile: signed zeros tie
    (the first wins), the first NaN of either sign wins, -inf-only rows give 0, subnormals order, rows of several
    tiles; the same indices as torch and as the (value, index) tile path (pack off)."""
    from baracuda.backends.triton.reduction import reduce as tri

    g = torch.Generator().manual_seed(11)
    x = torch.randn(7, 9000, generator=g).to(dt)
    x[0, :] = 0.0
    x[0, 5] = -0.0
    x[0, 2] = -0.0               # ties of signed zeros: index 0 for both
    x[1, 8000] = float("nan")
    x[1, 6000] = -float("nan")   # the first NaN, whatever its sign
    x[2, :] = float("-inf")
    sub = 1.0 if dt == torch.bfloat16 and os.environ.get("TRITON_INTERPRET") == "1" else 0.25
    x[3, :] = torch.finfo(dt).tiny * sub    # subnormals (the interpreter's bf16 loads flush them: normals there)
    x[3, 4444] = torch.finfo(dt).tiny * 2 * sub
    x[3, 111] = -torch.finfo(dt).tiny * 2 * sub
    x[4, 8999] = float("inf")
    x[5, 3] = x[5].max()         # a tie with the later maximum
    if split:                    # packed partials (values from their keys), folded by the pair path
        force_reduction_split(monkeypatch)
        assert "split" in forced_plan(bc.Descriptor.like("argmax", x, dim=1), DEVICE, Backend.TRITON).sku.route
    for op in ("argmax", "argmin"):
        want = getattr(torch, op)(x, dim=1)
        got = _run(op, x, Backend.TRITON, dim=1)
        _same(got, want)
        monkeypatch.setitem(tri._FORCE, "pack", False)
        _same(_run(op, x, Backend.TRITON, dim=1), want)
        monkeypatch.delitem(tri._FORCE, "pack")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_empty_reductions(backend):
    x = torch.empty(0, 4)
    _same(_run("sum", x, backend, dims=0), torch.zeros(4))
    assert torch.isnan(_run("mean", x, backend, dims=0)).all()
    _same(_run("sum", x, backend), torch.tensor(0.0))
    assert _run("amax", x, backend, dims=1).shape == (0,)
    for op in ("amax", "amin", "argmax", "argmin"):
        attr = "dim" if op.startswith("arg") else "dims"
        with pytest.raises(bc.InvalidProblemError, match=rf"{op}: argument 'dim': expected reduction dim 0 to have non-zero"):
            bc.Descriptor.like(op, x, **{attr: 0})
        with pytest.raises(bc.InvalidProblemError, match=rf"{op}: argument 'dim': .*input.numel\(\) == 0"):
            bc.Descriptor.like(op, x)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_dtype_argument(backend):
    x64 = torch.randn(6, 40, dtype=torch.float64)
    # narrowing: the input is converted to f32 first, accumulated and returned in f32 (torch)
    got = _run("sum", x64, backend, dims=1, dtype=bc.DType.f32)
    assert got.dtype == torch.float32
    _same(got, torch.sum(x64, dim=1, dtype=torch.float32), 1e-5, 1e-5)
    xb = torch.randn(6, 40).to(torch.bfloat16)
    got = _run("mean", xb, backend, dims=(0, 1), dtype=bc.DType.f32)
    assert got.dtype == torch.float32
    _same(got, torch.mean(xb.double()).float(), 1e-6, 1e-6)   # widened before accumulating: no bf16 rounding


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_large_mean_accuracy(backend):
    g = torch.Generator().manual_seed(0)
    x = 1e6 + torch.randn(8, 4096, generator=g)
    exact = x.double().sum(dim=1)
    got = _run("sum", x, backend, dims=1)
    assert ((got.double() - exact).abs() / exact.abs()).max() < 2e-6
    got = _run("mean", x.t().contiguous(), backend, dims=0)   # the column kernel
    assert ((got.double() - exact / 4096).abs() / 1e6).max() < 2e-6


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((3, 50), 1), ((50, 3), 0), ((2, 41, 5), 1), ((203,), None)])
def test_split_two_stage(split, shape, dims):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=g)
    x.view(-1)[7] = 9.0
    x.view(-1)[-2] = 9.0      # ties across splits: the first one wins
    desc = bc.Descriptor.like("argmax", x, dim=dims if isinstance(dims, int) else None)
    assert "split" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route
    d = dims if isinstance(dims, int) else None
    _same(_run("argmax", x, Backend.TRITON, dim=d), torch.argmax(x, dim=d))
    _same(_run("argmin", x, Backend.TRITON, dim=d), torch.argmin(x, dim=d))
    kw = {} if dims is None else {"dim": dims}
    for op in ("sum", "mean", "amax", "amin"):
        a = _run(op, x, Backend.TRITON, dims=dims)
        _same(a, getattr(torch, op)(x, **kw), 1e-5, 1e-5)
        if op == "sum":
            assert torch.equal(a, _run(op, x, Backend.TRITON, dims=dims))   # deterministic: same bits
    x.view(-1)[-1] = float("nan")
    _same(_run("amax", x, Backend.TRITON, dims=dims), torch.amax(x, **({"dim": dims} if dims is not None else {})))
    _same(_run("argmax", x, Backend.TRITON, dim=d), torch.argmax(x, dim=d))


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
def test_split_workspace_is_declared(split):
    desc = bc.Descriptor.make("argmax", ((203,), "bf16"))
    plan = forced_plan(desc, DEVICE, Backend.TRITON)
    S = int(plan.sku.route.rsplit("split", 1)[1])   # 203 in splits of 8 (32 programs, the R-block is 8)
    assert S == 26
    assert plan.workspace_size >= S * (4 + 8)   # f32 partial values + i64 partial indices
    with pytest.raises(bc.WorkspaceTooSmallError):
        plan.run(torch.randn(203).to(torch.bfloat16).to(TDEV), workspace=torch.empty(8, dtype=torch.uint8, device=TDEV))


@pytest.mark.parametrize("op", ["amax", "amin"])
def test_amax_gradient_split_among_ties(op):
    import baracuda.torch as bt

    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, -1.0, -1.0, 5.0]], dtype=torch.float64)
    for dims in ((1,), (0,), (0, 1)):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        y = bt.call(op, [a], {"dims": dims, "keepdim": False})
        w = torch.randn_like(y)
        (y * w).sum().backward()
        (getattr(torch, op)(b, dim=dims) * w).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-12)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
def test_amax_backward_triton_ties_and_layouts():
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, -1.0, -1.0, 5.0]])
    for dims in ((1,), (0,), (0, 1)):
        out = torch.amax(x, dim=dims)
        g = torch.randn_like(out)
        desc = bc.Descriptor.like("amax_backward", g, x, out, dims=dims)
        got = forced_plan(desc, DEVICE, Backend.TRITON).run(g.to(TDEV), x.to(TDEV), out.to(TDEV)).cpu()
        xr = x.clone().requires_grad_()
        (torch.amax(xr, dim=dims) * g).sum().backward()
        torch.testing.assert_close(got, xr.grad, rtol=1e-6, atol=1e-7)


def test_dropin_signatures():
    import baracuda.torch as bt

    x = torch.randn(3, 4, 5, dtype=torch.float64, device=TDEV)
    cases = [
        ("sum", (x,), {}), ("sum", (x, 1), {"keepdim": True}), ("sum", (x, (0, 2)), {"dtype": torch.float32}),
        ("sum", (x,), {"dim": [-1]}), ("mean", (x, -1), {}), ("mean", (x, None, True), {}),
        ("amax", (x,), {}), ("amax", (x, (1, 2), True), {}), ("amin", (x, 0), {}),
        ("argmax", (x,), {}), ("argmax", (x, 1), {"keepdim": True}), ("argmin", (x, -1), {}),
        ("argmax", (x, None, True), {}), ("broadcast_to", (x[:, :1], (2, 3, 4, 5)), {}),
    ]
    for name, args, kw in cases:
        want = getattr(torch, name)(*args, **kw)
        got = getattr(bt, name)(*args, **kw)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, args, kw)
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6)


# -- offline sm_90 compile of the benchmark configurations (Triton's bundled ptxas/cuobjdump, no GPU) -----
_COMPILE_CHECK = textwrap.dedent("""
    import triton, triton.language as tl
    from baracuda.backends.triton.reduction import reduce as r
    from baracuda.testing.checks import compile_sm90
    def build(outer, R, inner, ptr, item, mode, acc=tl.float32, out="*fp32", pack=True):
        kind, b0, b1, n, S, chunk = r._blocks(outer, R, inner, item, mode in (r._ARG, r._MINMAX))
        flt = acc in (tl.float32, tl.float64)
        sec = "*fp32" if mode == r._MINMAX else "*i64"
        sig = {"x_ptr": ptr, "xi_ptr": sec, "out_ptr": out, "oi_ptr": sec}
        ce = dict(MODE=mode, NEG_IN=False, NEG_OUT=False, IDX_IN=False, WRITE_VAL=mode != r._ARG,
                  WRITE_IDX=mode in (r._ARG, r._MINMAX), POST=0, ACC=acc, PRE=acc, HAS_PRE=False, FLT=flt,
                  LOW=float("-inf") if flt else -2 ** 63, IDXT=tl.int32, IBIG=2 ** 31 - 1,
                  SEC=acc if mode == r._MINMAX else tl.int64, HIGH=float("inf") if flt else 2 ** 63 - 1, I64=False)
        if kind == "row":
            k, ints = r._row_kernel, ["M", "R", "chunk", "sxm", "S", "count"]
            ce.update(sxr=1, BLOCK_M=b0, BLOCK_N=b1, PACK=0x7F80 if pack and mode == r._ARG and ptr == "*bf16" else 0)
            per = r._ARG_THREAD_BYTES if mode == r._ARG else r._THREAD_BYTES
            warps = min(8, max(1, triton.next_power_of_2(b0 * b1 * item // (32 * per))))
        else:
            k, ints = r._col_kernel, ["inner", "R", "chunk", "sxo", "sxr", "S", "n_iblk", "count"]
            ce.update(sxi=1, BLOCK_R=b0, BLOCK_I=b1)
            warps = r._COL_WARPS
        sig.update({n_: "i32" for n_ in ints})
        b = compile_sm90(k, sig, ce, warps, [n_ for n_ in sig if n_ not in ("S", "n_iblk")])
        assert b["local"] == 0, (kind, mode, "spills", b["res"])
        assert b["regs"] <= 64, (kind, mode, b0, b1, "regs", b["regs"])      # >= 4 programs of 256 threads per SM
        assert "LDG.E.128" in b["sass"], (kind, mode, "loads not 16 B vectors")
    for mode in (r._SUM, r._MAX, r._ARG):
        build(16384, 4096, 1, "*bf16", 2, mode)       # last axis, one [2, 4096] tile per program (ARG: [1, 4096])
        build(1, 4096, 16384, "*bf16", 2, mode)       # first axis, split, [8, 1024] tiles
        build(1, 16384, 4096, "*fp32", 4, mode)       # first axis f32
        build(1, 64 << 20, 1, "*fp32", 4, mode)       # all-reduce stage 1
    for mode in (r._PROD, r._NANSUM, r._MINMAX):
        build(16384, 4096, 1, "*fp32", 4, mode)
        build(1, 16384, 4096, "*bf16", 2, mode)
    build(16384, 4096, 1, "*i1", 1, r._COUNT, tl.int64, "*i1")          # any/all over bool rows
    build(16384, 4096, 1, "*i32", 4, r._ARG, tl.int64, "*i32")          # integer argmax
    build(16384, 4096, 1, "*bf16", 2, r._ARG, pack=False)                # max(dim)'s values and indices
    print("ok")
""")


@needs_sm90
def test_kernels_compile_for_sm90_without_spills():
    run_sm90_script(_COMPILE_CHECK)


# -- prod, nansum, nanmean, any/all/count_nonzero, aminmax, max/min(dim) -----------------------------------
def _bt():
    import baracuda.torch as bt

    return bt


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_integer_widening_and_dtype_arg(backend):
    x = torch.tensor([[3, -2, 7], [100, 5, -1]], dtype=torch.int32)
    for op in ("sum", "prod", "nansum"):
        for dims in (0, 1, None):
            got = _run(op, x, backend, dims=dims)
            want = getattr(torch, op)(x) if dims is None else getattr(torch, op)(x, dims)
            assert got.dtype == torch.int64 == want.dtype
            _same(got, want)
    b = torch.tensor([[True, False, True], [True, True, True]])
    _same(_run("sum", b, backend, dims=1), torch.sum(b, 1))
    _same(_run("prod", b, backend, dims=1), torch.prod(b, 1))
    big = torch.full((4, 40), 2 ** 40, dtype=torch.int64)          # wraps modulo 2^64, as torch
    _same(_run("prod", big, backend, dims=1), torch.prod(big, 1))
    f = torch.tensor([[1.7, -2.9, 3.2], [0.5, 0.5, 0.5]])
    got = _run("sum", f, backend, dims=1, dtype=bc.DType.i32)        # converted (truncated) first
    assert got.dtype == torch.int32
    _same(got, torch.sum(f, 1, dtype=torch.int32))
    u = torch.tensor([[200, 100], [255, 1]], dtype=torch.uint8)
    _same(_run("sum", u, backend, dims=1), torch.sum(u, 1))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_integer_extrema(backend):
    lo, hi = -2 ** 63, 2 ** 63 - 1
    x = torch.tensor([[5, lo, 7, hi, hi], [lo, lo, 0, -1, 3]], dtype=torch.int64)
    for op in ("amax", "amin"):
        _same(_run(op, x, backend, dims=1), getattr(torch, op)(x, 1))
    for op in ("argmax", "argmin"):
        _same(_run(op, x, backend, dim=1), getattr(torch, op)(x, 1))   # first of the tied extremes
    v, i = _run("min", x, backend, dim=1)
    _same(v, torch.min(x, 1).values)
    _same(i, torch.min(x, 1).indices)
    u = torch.tensor([[0, 255, 255], [7, 0, 0]], dtype=torch.uint8)
    _same(_run("argmin", u, backend, dim=1), torch.argmin(u, 1))
    mn, mx = _run("aminmax", u, backend, dim=1)
    _same(mn, torch.aminmax(u, dim=1).min)
    _same(mx, torch.aminmax(u, dim=1).max)


def _bool_case(shape, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(shape, generator=g) > 0.5
    x.view(-1)[0], x.view(-1)[-1] = True, False   # both values present
    return x


def _check_bool_extrema(x, backend, dims_list):
    for dims in dims_list:
        kw = {} if dims is None else {"dim": dims}
        for op in ("amax", "amin"):
            got = _run(op, x, backend, dims=dims)
            want = getattr(torch, op)(x, **({"dim": dims} if dims is not None else {}))
            assert got.dtype == torch.bool == want.dtype, op
            _same(got, want)
        d = dims if isinstance(dims, int) else None
        for op in ("max", "min"):
            if d is None:
                got, want = _run(op, x, backend), getattr(torch, op)(x)
                assert got.dtype == torch.bool
                _same(got, want)
                continue
            (v, i), w = _run(op, x, backend, dim=d), getattr(torch, op)(x, d)
            assert v.dtype == torch.bool and i.dtype == torch.int64
            _same(v, w.values)
            _same(i, w.indices)                      # the first extreme's index
        mn, mx = _run("aminmax", x, backend, dim=d)
        w = torch.aminmax(x, dim=d)
        assert mn.dtype == mx.dtype == torch.bool
        _same(mn, w.min)
        _same(mx, w.max)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bool_extrema_stay_bool(backend):
    """amax/amin/max/min/aminmax of bool: bool results (torch), indices of the first True / False."""
    _check_bool_extrema(_bool_case((6, 37), 3), backend, (0, 1, None))
    _check_bool_extrema(_bool_case((3, 4, 5), 4), backend, (1, (0, 2)))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bool_dtype_argument(backend):
    """sum/prod/nansum(dtype=bool) convert first (x != 0; NaN counts as True except in nansum, which zeroes it
    first) and reduce in bool: a sum is any, a product all."""
    g = torch.Generator().manual_seed(5)
    f = torch.randn(5, 19, generator=g)
    f[f.abs() < 0.4] = 0.0
    f[1, :] = 0.0
    f[1, 5] = float("nan")                     # the only non-zero of row 1: sum True, nansum False
    f[2, 3], f[3, :] = float("nan"), 1.5
    f[4, 2] = float("nan")
    i = (f.nan_to_num() * 3).to(torch.int32)
    b = f > 0
    for x in (f, i, b):
        for dims in (0, 1, None):
            kw = {} if dims is None else {"dim": dims}
            for op in ("sum", "prod", "nansum"):
                if op == "prod" and dims is None:
                    want = torch.prod(x, dtype=torch.bool)
                else:
                    want = _torch_bool_reduce(op, x, kw)
                got = _run(op, x, backend, dims=dims, dtype=bc.DType.bool)
                assert got.dtype == torch.bool, (op, x.dtype)
                _same(got, want)


def _torch_bool_reduce(op, x, kw):
    """torch's ``op(x, dtype=torch.bool)``; nansum as torch 2.13 computes it (NaN dropped, then any): torch 2.11's
    CPU nansum has no bool kernel."""
    if op == "nansum":
        return torch.sum(torch.nan_to_num(x, nan=0.0) if x.is_floating_point() else x, **kw, dtype=torch.bool)
    return getattr(torch, op)(x, **kw, dtype=torch.bool)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((3, 50), 1), ((50, 3), 0), ((203,), None)])
def test_split_two_stage_bool(split, shape, dims):
    x = _bool_case(shape, 6)
    desc = bc.Descriptor.like("amin", x, dims=dims)
    assert "split" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route
    _check_bool_extrema(x, Backend.TRITON, (dims,))
    f = torch.where(x, 2.5, 0.0)
    f.view(-1)[4] = float("nan")
    kw = {} if dims is None else {"dim": dims}
    for op in ("sum", "nansum"):
        _same(_run(op, f, Backend.TRITON, dims=dims, dtype=bc.DType.bool), _torch_bool_reduce(op, f, kw))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_nan_reductions(backend):
    x = torch.randn(4, 37, dtype=torch.float64)
    x[0, :] = float("nan")                 # all NaN: nansum 0, nanmean NaN
    x[1, 3] = x[1, 9] = float("nan")
    x[2, 0], x[2, 1] = float("inf"), float("-inf")   # inf - inf stays NaN in nansum
    for dim in (0, 1, None):
        kw = {} if dim is None else {"dim": dim}
        for op in ("nansum", "nanmean"):
            _same(_run(op, x, backend, dims=dim), getattr(torch, op)(x, **kw), 1e-12, 1e-12)
    assert torch.isnan(_run("nanmean", torch.empty(0, 3), backend, dims=0)).all()
    _same(_run("nansum", torch.empty(0, 3), backend, dims=0), torch.zeros(3))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_logical_reductions(backend):
    x = torch.tensor([[0.0, float("nan"), 0.0], [0.0, 0.0, 0.0], [1.0, -0.0, 2.0], [0.5, 3.0, -1.0]])
    for op in ("any", "all"):
        for dims in (0, 1, (0, 1), None):
            want = getattr(torch, op)(x) if dims is None else getattr(torch, op)(x, dim=dims)
            got = _run(op, x, backend, dims=dims)
            assert got.dtype == torch.bool
            _same(got, want)
        e = torch.empty(0, 3)
        _same(_run(op, e, backend, dims=0), getattr(torch, op)(e, dim=0))   # any: False, all: True
        u = torch.tensor([[0, 3], [1, 1]], dtype=torch.uint8)
        got = _run(op, u, backend, dims=1)
        assert got.dtype == torch.uint8                                     # torch keeps uint8
        _same(got, getattr(torch, op)(u, dim=1))
    for dims in (0, 1, (0, 1), None):
        got = _run("count_nonzero", x, backend, dims=dims)
        want = torch.count_nonzero(x) if dims is None else torch.count_nonzero(x, dim=dims)
        assert got.dtype == torch.int64
        _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_max_min_with_indices(backend):
    x = torch.tensor([[1.0, 3.0, 3.0, float("nan"), float("nan")], [2.0, -1.0, 2.0, -1.0, 0.0]])
    for op in ("max", "min"):
        for dim in (0, 1, -1):
            for keep in (False, True):
                v, i = _run(op, x, backend, dim=dim, keepdim=keep)
                w = getattr(torch, op)(x, dim, keepdim=keep)
                _same(v, w.values)
                _same(i, w.indices)
        _same(_run(op, x[1], backend), getattr(torch, op)(x[1]))
    mn, mx = _run("aminmax", x, backend)
    w = torch.aminmax(x)
    _same(mn, w.min)
    _same(mx, w.max)
    with pytest.raises(bc.InvalidProblemError, match="aminmax: argument 'dim': expected a non-empty input"):
        bc.Descriptor.like("aminmax", torch.empty(0, 3))
    with pytest.raises(bc.InvalidProblemError, match="max: argument 'dim': expected reduction dim 0 to have non-zero"):
        bc.Descriptor.like("max", torch.empty(0, 3), dim=0)


def test_prod_gradient_with_zeros():
    """torch's rule: no zero -> g * out / x; one zero -> only the zero's position gets the product of the
    others; two zeros -> 0 everywhere; per slice, for one dim, several dims and all of them."""
    bt = _bt()
    x = torch.tensor([[2.0, 0.0, 3.0, 4.0], [1.0, 2.0, 3.0, 4.0], [0.0, 5.0, 0.0, 2.0]], dtype=torch.float64)
    for dims in (1, 0, None):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        y = bt.call("prod", [a], {"dims": dims, "keepdim": False})
        w = torch.randn_like(y)
        (y * w).sum().backward()
        yt = torch.prod(b) if dims is None else torch.prod(b, dims)
        (yt * w).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=1e-12)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("dims", [(1,), (0,), (0, 1)])
def test_prod_backward_triton(dims):
    x = torch.tensor([[2.0, 0.0, 3.0, 4.0], [1.0, 2.0, -3.0, 4.0], [0.0, 5.0, 0.0, 2.0], [1.5, 0.5, 2.0, 0.0]])
    out = torch.prod(x.reshape(-1)) if len(dims) == 2 else torch.prod(x, dims[0])
    g = torch.randn_like(out)
    desc = bc.Descriptor.like("prod_backward", g, x, dims=dims)
    got = forced_plan(desc, DEVICE, Backend.TRITON).run(g.to(TDEV), x.to(TDEV)).cpu()
    xr = x.clone().requires_grad_()
    y = torch.prod(xr.reshape(-1)) if len(dims) == 2 else torch.prod(xr, dims[0])
    (y * g).sum().backward()
    torch.testing.assert_close(got, xr.grad, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("op", ["max", "min"])
def test_max_dim_gradient_goes_to_the_index(op):
    bt = _bt()
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0], [5.0, -1.0, -1.0, 5.0]], dtype=torch.float64)
    for dim in (0, 1):
        a = x.clone().requires_grad_()
        b = x.clone().requires_grad_()
        r = getattr(bt, op)(a, dim)
        assert isinstance(r, getattr(torch.return_types, op))
        w = torch.randn_like(r.values)
        (r.values * w).sum().backward()
        (getattr(torch, op)(b, dim).values * w).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0)
    # no dim: the value, gradient split among ties (and among NaNs for a NaN result)
    y = torch.tensor([1.0, float("nan"), 4.0, float("nan")], dtype=torch.float64)
    for t in (x, y):
        a, b = t.clone().requires_grad_(), t.clone().requires_grad_()
        getattr(bt, op)(a).backward()
        getattr(torch, op)(b).backward()
        torch.testing.assert_close(a.grad, b.grad, rtol=0, atol=0, equal_nan=True)


def test_aminmax_and_nan_gradients():
    bt = _bt()
    x = torch.tensor([[1.0, 3.0, 3.0, 0.0], [float("nan"), 2.0, 1.0, 1.0]], dtype=torch.float64)
    a, b = x.clone().requires_grad_(), x.clone().requires_grad_()
    r = bt.aminmax(a, dim=1)
    assert isinstance(r, torch.return_types.aminmax)
    (r.min * 2 + r.max).sum().backward()
    # the peer through amin/amax (same derivative; torch 2.11, on the GPU machine, has none for aminmax)
    (torch.amin(b, dim=1) * 2 + torch.amax(b, dim=1)).sum().backward()
    torch.testing.assert_close(a.grad, b.grad, equal_nan=True)
    for op in ("nansum", "nanmean"):
        z = torch.tensor([[1.0, float("nan"), 2.0], [float("nan")] * 3], dtype=torch.float64)
        a, b = z.clone().requires_grad_(), z.clone().requires_grad_()
        getattr(bt, op)(a, 1).sum().backward()
        getattr(torch, op)(b, 1).sum().backward()
        torch.testing.assert_close(a.grad, b.grad, equal_nan=True)


def test_new_dropin_signatures():
    bt = _bt()
    x = torch.randn(3, 4, 5, dtype=torch.float64, device=TDEV)
    x[0, 1, 2] = 0.0
    i = torch.randint(-3, 4, (3, 4), device=TDEV)
    cases = [
        ("prod", (x,), {}), ("prod", (x, 1), {"keepdim": True}), ("prod", (i,), {}), ("prod", (i, 0), {"dtype": torch.float32}),
        ("nansum", (x, (0, 2)), {}), ("nanmean", (x,), {"dim": -1, "keepdim": True}), ("nansum", (i,), {}),
        ("any", (x,), {}), ("any", (x, 1), {}), ("all", (x, (0, 2), True), {}), ("count_nonzero", (x,), {}),
        ("count_nonzero", (x, (0, 1)), {}), ("aminmax", (x,), {"dim": 1}), ("aminmax", (x,), {}),
        ("max", (x,), {}), ("max", (x, 1), {}), ("min", (x, -1, True), {}), ("max", (i, 0), {}),
    ]
    for name, args, kw in cases:
        want = getattr(torch, name)(*args, **kw)
        got = getattr(bt, name)(*args, **kw)
        assert type(got) is type(want), (name, args, kw)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.dtype == w.dtype and g.shape == w.shape, (name, args, kw)
            torch.testing.assert_close(g, w, rtol=1e-6, atol=1e-6)
    with pytest.raises(TypeError, match=r"invalid combination of arguments"):   # torch: TypeError too
        bt.max(x, x, True)
    with pytest.raises(TypeError, match="dim must be an int"):
        bt.prod(x, (0, 1))


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((3, 50), 1), ((50, 3), 0), ((2, 41, 5), 1), ((203,), None)])
def test_split_two_stage_new_modes(split, shape, dims):
    g = torch.Generator().manual_seed(2)
    x = torch.rand(shape, generator=g) + 0.5
    x.view(-1)[5] = float("nan")
    x.view(-1)[11] = 0.0
    kw = {} if dims is None else {"dim": dims}
    for op in ("nansum", "nanmean", "any", "all", "count_nonzero"):
        desc = bc.Descriptor.like(op, x, dims=dims)
        assert "split" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route
        _same(_run(op, x, Backend.TRITON, dims=dims), getattr(torch, op)(x, **kw), 1e-5, 1e-5)
    y = torch.where(torch.isnan(x), torch.ones_like(x), x) * 0.05 + 0.98    # a product that stays representable
    _same(_run("prod", y, Backend.TRITON, dims=dims), torch.prod(y) if dims is None else torch.prod(y, dims), 1e-5, 0)
    d = dims if isinstance(dims, int) else None
    for op in ("max", "min"):
        outs = _run(op, x, Backend.TRITON, dim=d) if d is not None else (_run(op, x, Backend.TRITON),)
        want = getattr(torch, op)(x, d) if d is not None else (getattr(torch, op)(x),)
        for o, w in zip(outs, want):
            _same(o, w)
    x.view(-1)[5] = 0.25                       # aminmax: one pass, min in the second accumulator
    mn, mx = _run("aminmax", x, Backend.TRITON, dim=d)
    w = torch.aminmax(x, dim=d)
    _same(mn, w.min)
    _same(mx, w.max)
    x.view(-1)[-3] = float("nan")
    _same(_run("aminmax", x, Backend.TRITON, dim=d)[0], torch.aminmax(x, dim=d).min)
    xi = (x.nan_to_num() * 10).to(torch.int32)
    _same(_run("argmin", xi, Backend.TRITON, dim=d), torch.argmin(xi, dim=d))
    mn, mx = _run("aminmax", xi, Backend.TRITON, dim=d)
    _same(mn, torch.aminmax(xi, dim=d).min)
    _same(mx, torch.aminmax(xi, dim=d).max)
    _same(_run("sum", xi, Backend.TRITON, dims=dims), torch.sum(xi, **kw))


@pytest.mark.skipif(Backend.TRITON not in backends_for("mean_backward", DEVICE), reason="no Triton on this device")
@pytest.mark.parametrize("shape, dims, dt", [((6, 40), (1,), torch.float32), ((33, 5), (0,), torch.bfloat16),
                                             ((3, 7, 9), (1,), torch.float64), ((4, 5), (0, 1), torch.float32)])
def test_broadcast_store_kernel(shape, dims, dt):
    """mean's gradient and broadcast_to through the tiled broadcast store (one kept / broadcast block: trailing,
    leading, middle, everything), against torch's expand / count."""
    g = torch.randn([s for i, s in enumerate(shape) if i not in dims], dtype=dt, device=TDEV)
    desc = bc.Descriptor.like("mean_backward", g, shape=shape, dims=dims, keepdim=False)
    plan = forced_plan(desc, DEVICE, Backend.TRITON)
    assert "expand" in plan.sku.route, plan.sku.route
    kd = [1 if i in dims else s for i, s in enumerate(shape)]
    ct = torch.float64 if dt == torch.float64 else torch.float32     # the op divides in its compute dtype
    want = (g.to(ct).reshape(kd).expand(shape) / math.prod(shape[a] for a in dims)).to(dt)
    # one rounding of a bf16 output apart at most (the interpreter's f32 -> bf16 conversion need not be torch's
    # round-to-nearest-even); f32: the same division in the same dtype, exact; f64 on a GPU: one ulp (Triton's f64
    # division is not correctly rounded there -- 49 of 189 quotients by 7 one ulp off torch's on the H100, session 7
    # run G -- and tl.math.div_rn takes f32 only; the interpreter divides exactly)
    rtol = 2 ** -7 if dt == torch.bfloat16 else 2 ** -52 if dt == torch.float64 and DEVICE.type == "cuda" else 0
    torch.testing.assert_close(plan.run(g), want, rtol=rtol, atol=0)
    b = bc.Descriptor.like("broadcast_to", g.reshape(kd), shape=shape, dtype=torch.float64)
    bplan = forced_plan(b, DEVICE, Backend.TRITON)
    assert "expand" in bplan.sku.route
    torch.testing.assert_close(bplan.run(g.reshape(kd)), g.reshape(kd).double().expand(shape), rtol=0, atol=0)


@pytest.fixture
def flat(monkeypatch):
    """Force the flat narrow-column path on small problems: loads of 64 elements, up to 8 splits."""
    from baracuda.backends.triton.reduction import reduce as tri

    monkeypatch.setattr(tri, "_SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(tri, "_FLAT_LOAD", 64)
    monkeypatch.setattr(tri, "_FLAT_SPLITS", 8)
    monkeypatch.setattr(tri, "_FLAT_FOLD", 4)      # the fold loops over several blocks
    monkeypatch.setattr(tri, "_FLAT_ROW_LOAD", 64)  # narrow rows: 64 / C rows a program


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((203, 16), (1,)), ((5, 7, 8), (2,)), ((9, 4, 8), (1, 2)), ((100, 2), (1,)),
                                        ((37, 64), (1,))])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
def test_flat_narrow_rows(flat, shape, dims, dt):
    """sum / mean / amax / amin over trailing dims of 2-64 elements (a power of two) on the flat-rows path (a
    ragged last program): against torch in float64 (2 ulps of the output dtype), NaN only in its row, the same
    bits twice, and a transposed input (the row kernel) with the same values."""
    g = torch.Generator().manual_seed(8)
    x = (torch.randn(shape, generator=g) * 3).to(dt)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dt]
    C = math.prod(shape[d] for d in dims)
    for op in ("sum", "mean", "amax", "amin"):
        desc = bc.Descriptor.like(op, x, dims=dims)
        assert "flatrow" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route, op
        got = _run(op, x, Backend.TRITON, dims=dims)
        want = getattr(torch, op)(x.double(), dims)
        assert got.dtype == dt and got.shape == want.shape
        acc = C * 2 ** -24 * x.double().abs().sum(dims) / (C if op == "mean" else 1) if op in ("sum", "mean") else 0
        err = (got.double() - want).abs()
        assert (err <= 2 * tol * want.abs() + acc).all(), (op, err.max())
        assert torch.equal(got, _run(op, x, Backend.TRITON, dims=dims))
    xn = x.clone()
    xn.view(-1)[C + 1] = float("nan")      # row 1 of the flattened [M, C]
    for op in ("amax", "amin"):
        got = _run(op, xn, Backend.TRITON, dims=dims).reshape(-1)
        want = getattr(torch, op)(xn, dims).reshape(-1)
        assert torch.isnan(got).tolist() == torch.isnan(want).tolist() and torch.isnan(got[1]), op
        assert torch.equal(got[~torch.isnan(got)], want[~torch.isnan(want)])
    if len(shape) == 2:
        xt = x.t().contiguous().t()
        _same(_run("sum", xt, Backend.TRITON, dims=dims), _run("sum", x, Backend.TRITON, dims=dims), tol, tol)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="Triton not available")
@pytest.mark.parametrize("shape,dims", [((203, 16), 0), ((50, 4, 8), (0,)), ((1000, 2), 0), ((3, 7, 32), (0, 1)),
                                        ((37, 1, 4), 0)])
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float16])
def test_flat_narrow_columns(flat, shape, dims, dt):
    """sum / mean / amax / amin over the leading dims of [R, C] (C a power of two <= 64) on the flat path: against
    torch in float64 (the output rounded once: 2 ulps of the output dtype), NaN winning amax / amin in its column
    only, the same bits on a second run, and a transposed (strided) input on the column path with the same
    values."""
    g = torch.Generator().manual_seed(7)
    x = (torch.randn(shape, generator=g) * 3).to(dt)
    tol = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7, torch.float16: 2 ** -10}[dt]
    for op in ("sum", "mean", "amax", "amin"):
        desc = bc.Descriptor.like(op, x, dims=dims if isinstance(dims, tuple) else (dims,))
        assert "flatcol" in forced_plan(desc, DEVICE, Backend.TRITON).sku.route, op
        got = _run(op, x, Backend.TRITON, dims=dims)
        want = getattr(torch, op)(x.double(), dims).to(dt)
        assert got.dtype == dt and got.shape == want.shape
        # f32 accumulation: |error| <= R u sum|x| (u = 2^-24, a worst-case bound for any summation order), then
        # the rounding to dt (tol: its ulp relative to the value; 2 of them: under the interpreter the final cast
        # truncates); the extrema are exact before that rounding
        R = x.numel() // want.numel()
        acc = R * 2 ** -24 * x.double().abs().sum(dims) / (R if op == "mean" else 1) if op in ("sum", "mean") else 0
        err = (got.double() - want.double()).abs()
        assert (err <= 2 * tol * want.double().abs() + acc).all(), (op, err.max())
        assert torch.equal(got, _run(op, x, Backend.TRITON, dims=dims))     # deterministic
    xn = x.clone()
    xn.view(-1)[5] = float("nan")      # column 5 % C
    col = 5 % shape[-1]
    for op in ("amax", "amin"):
        got = _run(op, xn, Backend.TRITON, dims=dims).reshape(-1)
        want = getattr(torch, op)(xn, dims).reshape(-1)
        assert torch.isnan(got).tolist() == torch.isnan(want).tolist(), op
        assert torch.isnan(got[col]) and torch.equal(got[~torch.isnan(got)], want[~torch.isnan(want)])
    if len(shape) == 2:        # a transposed input: the column path on its strides, same values
        xt = x.t().contiguous().t()
        _same(_run("sum", xt, Backend.TRITON, dims=dims), _run("sum", x, Backend.TRITON, dims=dims), tol, tol)
