"""Scan-family checks the generic suite does not make: torch's tie / NaN / inf rules, integer and bool
promotion, dtype=, the multi-tile and split (two-stage + workspace) paths of the Triton kernel forced on
small shapes, gradients with zeros (cumprod) and -inf (logcumsumexp) against torch.autograd, the drop-ins,
the workload configurations and an offline sm_90 compile (registers, spills, vector loads)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.backends.triton.scan import scan as ts  # noqa: E402
from baracuda.testing import assert_close, backends_for  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, needs_sm90, run_sm90_script  # noqa: E402
from baracuda.testing.checks import assert_same as _same, run_on as _run  # noqa: E402

BACKENDS = backends_for("cumsum", DEVICE)


def _flip_peer(fn, x, dim):
    v, i = fn(x.flip(dim), dim)
    return v.flip(dim), (x.shape[dim] - 1) - i.flip(dim)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16, torch.float64, torch.int32, torch.uint8, torch.bool])
def test_cummax_cummin_ties_nan_like_torch(backend, dt):
    x = torch.tensor([[1., 3., 3., 2., 3., float("nan"), 5., float("nan"), 1.],
                      [3., 1., 1., 2., 1., 0., 0., 7., 7.],
                      [float("-inf")] * 4 + [2., 2., float("inf"), 1., float("inf")]])
    if not dt.is_floating_point:
        x = torch.nan_to_num(x, nan=4.0, posinf=9.0, neginf=0.0)
    x = x.to(dt)
    for op in ("cummax", "cummin"):
        fn = getattr(torch, op)
        for dim in (0, 1):
            v, i = _run(op, x, backend=backend, dim=dim)
            tv, ti = fn(x, dim)
            _same(v, tv)
            _same(i, ti)
            v, i = _run(op, x, backend=backend, dim=dim, reverse=True)
            tv, ti = _flip_peer(fn, x, dim)
            _same(v, tv)
            _same(i, ti)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_integer_bool_promotion_and_dtype_argument(backend):
    xi = torch.tensor([[3, -2, 5, 7, -1], [1, 1, 0, 2, 9]], dtype=torch.int32)
    xb = xi > 1
    xu = xi.abs().to(torch.uint8)
    for op in ("cumsum", "cumprod"):
        fn = getattr(torch, op)
        for x in (xi, xb, xu):
            got = _run(op, x, backend=backend, dim=1)
            assert got.dtype == torch.int64
            _same(got, fn(x, 1))
        _same(_run(op, xi, backend=backend, dim=0, dtype=bc.DType.f32), fn(xi, 0, dtype=torch.float32))
        # (seeded: an unseeded draw's product of 7 values reached 114394 in one CI run, past f16's 65504; the
        # reference rounds to the result's f16 at the end, so an overflow is inf on both sides)
        xf = torch.randn(3, 7, generator=torch.Generator().manual_seed(5)) * 4
        got = _run(op, xf, backend=backend, dim=1, dtype=bc.DType.f16)   # cast first, then scan
        want = fn(xf.double().to(torch.float16).double(), 1).to(torch.float16).double()
        assert got.dtype == torch.float16
        assert_close(got, want.numpy(), 1e-2, 1e-3, f"{op} dtype=f16")
    big = torch.full((1, 40), 2 ** 62, dtype=torch.int64)   # int64 wraps like torch
    _same(_run("cumsum", big, backend=backend, dim=1), torch.cumsum(big, 1))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("dt", [torch.float32, torch.bfloat16])
def test_logcumsumexp_infinities_like_torch(backend, dt):
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[-inf, -inf, 0., 1., -inf, 2.],
                      [-inf] * 6,
                      [1., inf, 2., -inf, inf, 0.],
                      [0., nan, 1., 2., 3., 4.],
                      [80., 80., 80., -80., 1e4 if dt == torch.float32 else 100., 0.]]).to(dt)
    for dim in (0, 1):
        for rev in (False, True):
            got = _run("logcumsumexp", x, backend=backend, dim=dim, reverse=rev)
            xs = x.flip(dim) if rev else x
            want = torch.logcumsumexp(xs.double(), dim)
            want = want.flip(dim) if rev else want
            tol = (2e-5, 2e-5) if dt == torch.float32 else (1.6e-2, 1e-2)
            assert_close(got, want.numpy(), *tol, f"logcumsumexp dim={dim} rev={rev}")


def test_zero_d_and_length_one():
    x = torch.tensor(2.5)
    for op in ("cumsum", "cumprod", "logcumsumexp"):
        assert _run(op, x, dim=0).item() == pytest.approx(2.5)
    v, i = _run("cummax", x, dim=-1)
    assert v.item() == 2.5 and i.item() == 0 and i.dim() == 0
    _same(_run("cumsum", torch.ones(5, 1), dim=1), torch.ones(5, 1))


# -- the kernel's paths, forced on small shapes (the interpreter runs custom combines element by element) --
FORCES = [({"elems": 16}, "multi-tile"), ({"elems": 8, "splits": 5}, "split5")]
SHAPES = [((3, 45), -1), ((2, 13, 3), 1), ((1, 70), 1)]


def _forced(op, xs, force, **attrs):
    with ts.forced(**force):
        got = _run(op, *xs, **attrs)
    want = _run(op, *[x.double() if x.is_floating_point() else x for x in xs], backend=Backend.REFERENCE, **attrs)
    return got, want


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="no Triton on this machine")
@pytest.mark.parametrize("force,fname", FORCES, ids=[f[1] for f in FORCES])
@pytest.mark.parametrize("shape,dim", SHAPES, ids=[str(s) for s in SHAPES])
@pytest.mark.parametrize("rev", [False, True])
def test_forced_paths_forward(force, fname, shape, dim, rev):
    rng = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=rng)
    xt = x.clone()
    xt.view(-1)[::7] = float("-inf")       # -inf ties: the max/min padding must not win a tie
    for op, xin in (("cumsum", x), ("cumprod", 1 + 0.1 * x), ("cummax", xt), ("cummin", -xt),
                    ("logcumsumexp", xt)):
        got, want = _forced(op, (xin,), force, dim=dim, reverse=rev)
        got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
        for g, w in zip(got, want):
            assert_close(g, w.numpy(), 2e-5, 2e-5, f"{op} {fname} {shape} dim={dim} rev={rev}")
    xi = (x * 3).to(torch.int32)
    got, want = _forced("cumsum", (xi,), force, dim=dim, reverse=rev)
    _same(got, want)


@pytest.mark.skipif(Backend.TRITON not in BACKENDS, reason="no Triton on this machine")
@pytest.mark.parametrize("force,fname,rev", [(FORCES[0][0], FORCES[0][1], False), (FORCES[1][0], FORCES[1][1], True)],
                         ids=["multi-tile", "split5-rev"])
def test_forced_paths_backward(force, fname, rev):
    shape, dim = (2, 13, 3), 1
    x = torch.randn(*shape, dtype=torch.float64)
    x.view(-1)[::5] = 0.0
    g = torch.randn(*shape, dtype=torch.float64)
    for op in ("cumprod", "logcumsumexp"):
        if op == "logcumsumexp":
            x = torch.randn(*shape, dtype=torch.float64)
        y = getattr(torch, op)(x.flip(dim) if rev else x, dim)
        y = y.flip(dim) if rev else y
        got, want = _forced(f"{op}_backward", (g, x, y), force, dim=dim, reverse=rev)
        assert_close(got, want.numpy(), 1e-10, 1e-10, f"{op}_backward {fname}")
    xt = torch.randint(-2, 3, shape).double()
    v, i = (_flip_peer(torch.cummax, xt, dim) if rev else torch.cummax(xt, dim))
    got, want = _forced("cummax_backward", (g, i), force, dim=dim, reverse=rev)
    assert_close(got, want.numpy(), 1e-10, 1e-10, f"cummax_backward {fname}")


# -- gradients against torch.autograd on the edge cases ------------------------------------------------
def _bw(op, x, g, backend, **attrs):
    desc = bc.Descriptor.like(op, x, **attrs)
    pref = bc.PlanPreference(prefer=(backend,))
    fwd = bc.Plan.select(desc, DEVICE, pref).run(x.to(TDEV))
    outs = fwd if isinstance(fwd, tuple) else (fwd,)
    bw = bc.BackwardPlan.select(desc, DEVICE, pref)
    names = desc.spec.arg_names
    saved = {n: (x.to(TDEV) if n in names else outs[0 if n == "out" else int(n[3:])]) for n in bw.saves}
    gs = [g.to(TDEV)] + [None] * (len(outs) - 1)
    return bw.run(*gs, **saved)[0].cpu()


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_cumprod_grad_with_zeros_like_torch(backend):
    x = torch.tensor([[2., 0., 3., 0., 4.], [0., 1.5, -2., 1., 3.], [1., 2., 3., 4., 0.], [-1., 2., 0.5, 3., 1.]],
                     dtype=torch.float64)
    g = torch.randn(4, 5, dtype=torch.float64)
    for rev in (False, True):
        xt = x.clone().requires_grad_()
        y = torch.cumprod(xt.flip(1), 1).flip(1) if rev else torch.cumprod(xt, 1)
        (want,) = torch.autograd.grad(y, xt, g)
        got = _bw("cumprod", x, g, backend, dim=1, reverse=rev)
        assert_close(got, want.numpy(), 1e-12, 1e-12, f"cumprod grad rev={rev}")
        got32 = _bw("cumprod", x.float(), g.float(), backend, dim=1, reverse=rev)
        assert_close(got32, want.numpy(), 2e-5, 2e-5, f"cumprod grad f32 rev={rev}")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_logcumsumexp_grad_neg_inf(backend):
    """torch's formula gives NaN for -inf inputs; ours gives 0 there (an input at -inf has zero weight in every
    sum) and torch's value everywhere else."""
    inf = float("inf")
    x = torch.tensor([[-inf, -inf, 1., 0.5, -inf, 2.], [0.3, -inf, 1., 2., -1., 0.]], dtype=torch.float64)
    g = torch.randn(2, 6, dtype=torch.float64)
    xt = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(torch.logcumsumexp(xt, 1), xt, g)
    got = _bw("logcumsumexp", x, g, backend, dim=1)
    fin = torch.isfinite(x)
    assert torch.all(got[~fin] == 0)
    assert_close(got[fin], want[fin].numpy(), 1e-12, 1e-12, "logcumsumexp grad (finite inputs)")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_cummax_grad_ties_scatter_add(backend):
    x = torch.tensor([[1., 3., 3., 2., 3., 0.], [5., 1., 5., 5., 0., 6.]], dtype=torch.float64)
    g = torch.randn(2, 6, dtype=torch.float64)
    for op in ("cummax", "cummin"):
        for rev in (False, True):
            xt = x.clone().requires_grad_()
            y = getattr(torch, op)(xt.flip(1), 1)[0].flip(1) if rev else getattr(torch, op)(xt, 1)[0]
            (want,) = torch.autograd.grad(y, xt, g)
            got = _bw(op, x, g, backend, dim=1, reverse=rev)
            assert_close(got, want.numpy(), 1e-12, 1e-12, f"{op} grad rev={rev}")


# -- drop-ins --------------------------------------------------------------------------------------
def test_dropins():
    import baracuda.torch as bt

    x = torch.randn(3, 6, dtype=torch.float64)
    r = bt.cummax(x, 1)
    assert isinstance(r, torch.return_types.cummax)
    _same(r.values, torch.cummax(x, 1).values)
    _same(r.indices, torch.cummax(x, 1).indices)
    assert isinstance(bt.cummin(x, dim=0), torch.return_types.cummin)
    assert bt.cumsum(x.to(torch.int32), 0).dtype == torch.int64
    assert bt.cumprod(x, 1, dtype=torch.float32).dtype == torch.float32
    for fn in (bt.cumsum, bt.cumprod, bt.cummax, bt.logcumsumexp):
        with pytest.raises(NotImplementedError, match="out= is not supported"):
            fn(x, 1, out=torch.empty_like(x))
    xt = x.clone().requires_grad_()
    (bt.cumprod(xt, 1) * torch.arange(6.)).sum().backward()
    xr = x.clone().requires_grad_()
    (torch.cumprod(xr, 1) * torch.arange(6.)).sum().backward()
    assert_close(xt.grad, xr.grad.numpy(), 1e-12, 1e-12, "cumprod drop-in autograd")
    xt.grad = None
    bt.cummax(xt, 1).values.sum().backward()
    xr.grad = None
    torch.cummax(xr, 1).values.sum().backward()
    _same(xt.grad, xr.grad)


# -- configurations of the benchmark workloads (no GPU needed) -------------------------------------------
def test_configs_for_the_workloads(monkeypatch):
    monkeypatch.setattr(ts, "triton_interpreting", lambda: False)
    c = ts.choose(4096, 4096, 1, 4, ts.SUM)      # f32 last axis: one 16 KB tile per row, no split
    assert (c.axis, c.bs, c.bl, c.splits, c.num_warps) == (1, 4096, 1, 1, 8)
    c = ts.choose(4096, 4096, 1, 2, ts.SUM)      # bf16: two rows per 8192-element tile
    assert (c.bs, c.bl, c.splits) == (4096, 2, 1)
    c = ts.choose(1, 1 << 20, 1, 4, ts.SUM)      # one long row: 256 chunks of one tile, one fold step
    assert c.splits == 256 and c.chunk == 4096 and c.kb >= c.splits
    c = ts.choose(1, 4096, 4096, 4, ts.SUM)      # first axis: 512-lane column blocks, split along R
    assert c.axis == 0 and c.bl == 512 and c.bs == 8 and 8 * c.splits >= 256
    c = ts.choose(4096, 4096, 1, 4, ts.MAX)      # (value, index) scans: 2048-element tiles on 4 warps
    assert c.bs * c.bl == 2048 and c.num_warps == 4


# -- offline sm_90 compile of the main configurations ---------------------------------------------------
_SM90_CHECK = """
import re, triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from baracuda.backends.triton.scan import scan as m
from baracuda.testing.sm90 import resources
INTS = ["L", "R", "CHUNK", "NSPLIT", "NLB", "s1o", "s1r", "s1l", "s2o", "s2r", "s2l", "s3o", "s3r", "s3l",
        "syo", "syr", "syl", "wsl", "wsk"]

def compile_case(mode, axis, xt, yt, ct, wt, it, stage, c, pad, two):
    ce = dict(MODE=mode, AXIS=axis, REV=False, STAGE=stage, BS=c.bs, BL=c.bl, KB=c.kb, CT=ct, PAD=pad, TWO=two,
              F64=False, I64=False)
    ce.update(dict(s1r=1, s2r=1, s3r=1, syr=1, s1o=0, s2o=0, s3o=0, syo=0) if axis == 1 else
              dict(s1l=1, s2l=1, s3l=1, syl=1))
    sig = dict(p1=xt, p2=xt, p3=xt, y_ptr=yt, yi_ptr=it, ws_ptr=wt, wsi_ptr=it)
    sig.update({n: "i32" for n in INTS if n not in ce})
    sig.update({n: "constexpr" for n in ce})
    k = m._scan_kernel
    div = [n for n in sig if sig[n] != "constexpr" and n not in ("NSPLIT", "NLB", "wsk", "wsl")]
    attrs = {(k.arg_names.index(n),): [["tt.divisibility", 16]] for n in div}
    cc = triton.compile(ASTSource(fn=getattr(k, "jit", k), signature=sig, constexprs=ce, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                        options=dict(num_warps=c.num_warps))
    regs, stack = resources(cc)
    v4 = len(re.findall(r"ld\\.global[.\\w]*\\.v4", cc.asm["ptx"]))
    return regs, stack, v4

m.triton_interpreting = lambda: False
ninf = float("-inf")
cases = [  # name, mode, axis, x, y, ct, ws, idx, stage, geometry (outer, R, inner, itemsize), pad, two, max regs
    ("cumsum f32 last", m.SUM, 1, "*fp32", "*fp32", tl.float32, "*fp32", "*fp32", 0, (4096, 4096, 1, 4), 0, False, 64),
    ("cumsum bf16 last", m.SUM, 1, "*bf16", "*bf16", tl.float32, "*fp32", "*bf16", 0, (4096, 4096, 1, 2), 0, False, 128),
    ("cumsum f32 first s1", m.SUM, 0, "*fp32", "*fp32", tl.float32, "*fp32", "*fp32", 1, (1, 4096, 4096, 4), 0, False, 128),
    ("cumsum f32 first s2", m.SUM, 0, "*fp32", "*fp32", tl.float32, "*fp32", "*fp32", 2, (1, 4096, 4096, 4), 0, False, 192),
    ("cumsum f32 row s2", m.SUM, 1, "*fp32", "*fp32", tl.float32, "*fp32", "*fp32", 2, (1, 1 << 20, 1, 4), 0, False, 128),
    ("cummax f32 last", m.MAX, 1, "*fp32", "*fp32", tl.float32, "*fp32", "*i64", 0, (4096, 4096, 1, 4), ninf, True, 168),
    ("logcumsumexp f32 last", m.LSE, 1, "*fp32", "*fp32", tl.float32, "*fp32", "*fp32", 0, (4096, 4096, 1, 4), ninf, False, 128),
]
for name, mode, axis, xt, yt, ct, wt, it, stage, geom, pad, two, cap in cases:
    c = m.choose(*geom, mode)
    regs, stack, v4 = compile_case(mode, axis, xt, yt, ct, wt, it, stage, c, pad, two)
    print(name, c, "regs", regs, "stack", stack, "v4", v4)
    assert stack == 0 and regs <= cap and v4 > 0, (name, regs, stack, v4)
print("ok")
"""


@needs_sm90
def test_kernels_compile_for_sm90_without_spills():
    run_sm90_script(_SM90_CHECK)
