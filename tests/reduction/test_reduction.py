"""Reduction semantics the generic spec-driven suite does not reach: NaN, ties, empty reductions,
``dtype=`` narrowing, accuracy on large-mean data, the two-stage (split) path, the amax tie-split
gradient, the drop-in signatures, and an offline sm_90 compile (registers, spills, vector loads)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import triton

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton import reduction as tri  # noqa: E402
from baracuda.testing import backends_for, forced_plan  # noqa: E402
from baracuda.testing import test_device as _test_device  # noqa: E402

DEVICE = _test_device()
TDEV = "cuda" if DEVICE.type == "cuda" else "cpu"
BACKENDS = backends_for("sum", DEVICE)


def _run(op, x, backend, **attrs):
    desc = bc.Descriptor.like(op, x, **attrs)
    plan = forced_plan(desc, DEVICE, backend)
    assert not isinstance(plan, str), plan
    out = plan.run(x.to(TDEV))
    return out.cpu() if isinstance(out, torch.Tensor) else torch.as_tensor(np.asarray(out))


def _same(got, want, rtol=0.0, atol=0.0):
    torch.testing.assert_close(got.to(want.dtype), want, rtol=rtol, atol=atol, equal_nan=True)


@pytest.fixture
def split(monkeypatch):
    """Force the two-stage path on small problems (splits of >= 8 elements, up to 16 programs)."""
    monkeypatch.setattr(tri, "_MIN_CHUNK", 8)
    monkeypatch.setattr(tri, "_TARGET_PROGRAMS", 16)


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
    import os, re, subprocess, tempfile, triton, triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from baracuda.backends.triton import reduction as r
    BIN = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    def build(outer, R, inner, ptr, item, mode):
        kind, b0, b1, n, S, chunk = r._blocks(outer, R, inner, item, mode == r._ARG)
        sig = {"x_ptr": ptr, "xi_ptr": "*i64", "out_ptr": "*fp32", "oi_ptr": "*i64"}
        ce = dict(MODE=mode, NEG_IN=False, NEG_OUT=False, IDX_IN=False, WRITE_VAL=mode != r._ARG,
                  WRITE_IDX=mode == r._ARG, DIVIDE=False, ACC=tl.float32, I64=False)
        if kind == "row":
            k, ints = r._row_kernel, ["M", "R", "chunk", "sxm", "S", "count"]
            ce.update(sxr=1, BLOCK_M=b0, BLOCK_N=b1)
            per = 16 if mode == r._ARG else r._THREAD_BYTES
            warps = min(8, max(1, triton.next_power_of_2(b0 * b1 * item // (32 * per))))
        else:
            k, ints = r._col_kernel, ["inner", "R", "chunk", "sxo", "sxr", "S", "n_iblk", "count"]
            ce.update(sxi=1, BLOCK_R=b0, BLOCK_I=b1)
            warps = r._COL_WARPS
        sig.update({n_: "i32" for n_ in ints})
        sig.update({n_: "constexpr" for n_ in ce})
        div = [n_ for n_ in sig if sig[n_] != "constexpr" and n_ not in ("S", "n_iblk")]
        attrs = {(k.arg_names.index(n_),): [["tt.divisibility", 16]] for n_ in div}
        c = triton.compile(ASTSource(fn=k, signature=sig, constexprs=ce, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps))
        p = os.path.join(tempfile.mkdtemp(), "k.cubin")
        open(p, "wb").write(c.asm["cubin"])
        res = subprocess.run([os.path.join(BIN, "cuobjdump"), "-res-usage", p], capture_output=True, text=True).stdout
        regs, local = (int(re.search(key + r":(\\d+)", res).group(1)) for key in ("REG", "LOCAL"))
        sass = subprocess.run([os.path.join(BIN, "cuobjdump"), "-sass", p], capture_output=True, text=True).stdout
        assert local == 0, (kind, mode, "spills", res)
        assert regs <= 64, (kind, mode, b0, b1, "regs", regs)      # >= 4 programs of 256 threads per SM
        assert "LDG.E.128" in sass, (kind, mode, "loads not 16 B vectors")
    for mode in (r._SUM, r._MAX, r._ARG):
        build(16384, 4096, 1, "*bf16", 2, mode)       # last axis, one [2, 4096] tile per program
        build(1, 4096, 16384, "*bf16", 2, mode)       # first axis, split, [8, 1024] tiles
        build(1, 16384, 4096, "*fp32", 4, mode)       # first axis f32
        build(1, 64 << 20, 1, "*fp32", 4, mode)       # all-reduce stage 1
    print("ok")
""")


@pytest.mark.skipif(not os.path.exists(os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin",
                                                    "cuobjdump")), reason="Triton's bundled cuobjdump not found")
def test_kernels_compile_for_sm90_without_spills():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _COMPILE_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
