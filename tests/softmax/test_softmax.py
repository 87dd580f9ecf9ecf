"""Softmax-family checks the generic suite does not make: extreme values, -inf rows, the dtype= argument,
the long-row (multi-tile, persistent, split + workspace) and non-last-dim multi-tile paths of the Triton
kernels (forced to small tiles so the interpreter stays fast), and the drop-in adapters."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import triton

import baracuda as bc
from baracuda._core.device import as_device, triton_interpreting
from baracuda._core.errors import InvalidProblemError
from baracuda._core.sku import Backend
from baracuda.testing import assert_close, forced_plan, noncontig, test_device

DEVICE = test_device()
CPU = as_device("cpu")
FW = ("softmax", "log_softmax")
TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 2e-6), torch.float16: (1e-2, 1e-3),
       torch.bfloat16: (1.6e-2, 1e-2)}


def _triton_mod():
    from baracuda.backends.triton.softmax import softmax as m

    return m


def _plan(op, *xs, backend=Backend.TRITON, device=DEVICE, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    p = forced_plan(desc, device, backend)
    if isinstance(p, str):
        pytest.skip(p)
    return p


def _ref(op, *xs, **attrs):
    """The NumPy f64 reference, always planned and run on the host (inputs moved there)."""
    xs = [x.cpu() for x in xs]
    xs64 = [x.double() for x in xs]
    a = dict(attrs)
    if a.get("dtype") is not None:  # the reference rounds to dtype= itself; run it at f64 on pre-rounded input
        xs64 = [x.to(bc.as_dtype(a["dtype"]).torch).double() for x in xs]
        a["dtype"] = None
    return _plan(op, *xs64, backend=Backend.REFERENCE, device=CPU, **a).run(*xs64)


def _dev(x):
    return x.to("cuda") if DEVICE.type == "cuda" else x


def assert_same_as_contiguous(strided, contig, what):
    """A strided input gives the contiguous result: bit-identical under the interpreter; on the GPU the
    compiler gives stride-1 rows a vectorized (16 B per thread) register layout and strided rows a scalar
    one, so the row reductions add in a different order: equal to a few ulps, not bit for bit."""
    strided, contig = strided.nan_to_num(), contig.nan_to_num()
    if triton_interpreting() or DEVICE.type != "cuda":
        assert torch.equal(strided, contig), what
    else:
        eps = torch.finfo(contig.dtype).eps
        assert_close(strided, contig.double().numpy(), 8 * eps, 8 * eps * contig.abs().max().item(), what)


def _check(op, x, dim, dtype=None, tol=None):
    x = _dev(x)
    got = _plan(op, x, dim=dim, dtype=dtype).run(x)
    want = _ref(op, x.cpu(), dim=dim, dtype=dtype)
    rtol, atol = tol or TOL[got.dtype]
    assert_close(got.cpu(), want.numpy(), rtol, atol, f"{op} {tuple(x.shape)} dim={dim} {x.dtype}")
    return got


@pytest.mark.parametrize("op", FW)
@pytest.mark.parametrize("dt", [torch.float32, torch.float16, torch.bfloat16])
def test_extreme_values(op, dt):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(6, 37, generator=g) * 1e4).to(dt)
    x[0] = 1e4                         # a constant row of large values
    x[1, :5] = -1e4
    _check(op, x, -1)
    _check(op, x, 0)


@pytest.mark.parametrize("op", FW)
def test_neg_inf_rows_like_torch(op):
    x = torch.randn(4, 9, dtype=torch.float32)
    x[0] = float("-inf")               # a row of -inf gives NaN, as torch
    x[1, ::2] = float("-inf")          # partial -inf: zero probability there
    x[2, 3] = float("inf")
    got = _dev_run(op, x, -1)
    want = getattr(torch.nn.functional, op)(x, dim=-1)
    assert torch.isnan(got[0]).all()
    assert_close(got, want.numpy(), 2e-5, 2e-6, f"{op} with infinities")


def _dev_run(op, x, dim, **attrs):
    x = _dev(x)
    return _plan(op, x, dim=dim, **attrs).run(x).cpu()


@pytest.mark.parametrize("op", FW)
def test_dtype_argument(op):
    x = torch.randn(5, 33, dtype=torch.bfloat16)
    got = _check(op, x, -1, dtype=bc.DType.f32)
    assert got.dtype == torch.float32
    peer = getattr(torch.nn.functional, op)(x, dim=-1, dtype=torch.float32)
    assert_close(got.cpu(), peer.double().numpy(), 2e-5, 2e-6, f"{op} dtype=f32 vs torch")
    got = _check(op, torch.randn(5, 33, dtype=torch.float32), 0, dtype=bc.DType.bf16)   # downcast first
    assert got.dtype == torch.bfloat16


@pytest.mark.parametrize("op", FW)
def test_dtype_argument_backward(op):
    """dtype= upcasts in the forward; the gradient comes back in the input's dtype (one fused kernel)."""
    x = torch.randn(3, 20, dtype=torch.bfloat16)
    desc = bc.Descriptor.like(op, x, dim=1, dtype="f32")
    pref = bc.PlanPreference(prefer=(Backend.TRITON,))
    y = bc.Plan.select(desc, DEVICE, pref).run(_dev(x))
    g = torch.randn(3, 20, dtype=torch.float32)
    bw = bc.BackwardPlan.select(desc, DEVICE, pref)
    assert len(bw.skus) == 1 and bw.saves == ("out",)
    (dx,) = bw.run(_dev(g), out=y)
    assert dx.dtype == torch.bfloat16
    xt = x.float().requires_grad_()
    getattr(torch.nn.functional, op)(xt, dim=1).backward(g)
    assert_close(dx.cpu(), xt.grad.double().numpy(), 1.6e-2, 1e-2, f"{op} backward with dtype=")


LONG = [((3, 70), -1, dict(max_single=16, tile=16, splits=1)),                     # fused, 5 tiles per row
        ((5, 40), 1, dict(max_single=16, tile=16, splits=1, programs=2)),           # persistent: 3 rows / program
        ((2, 2, 50), -1, dict(max_single=16, tile=8, splits=4)),                    # split + workspace
        ((1, 2, 64), 2, dict(max_single=16, tile=16, splits=9)),                    # more splits than tiles
        ((3, 50, 7), 1, dict(block_r=16)),                                          # non-last dim, 4 R-tiles
        ((70, 2, 3), 0, dict(block_r=32))]


@pytest.mark.parametrize("shape,dim,force", LONG, ids=lambda v: str(v))
@pytest.mark.parametrize("op", FW)
def test_long_rows_forced_paths(op, shape, dim, force):
    tm = _triton_mod()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(*shape, generator=g) * 4
    x.select(dim, 0).fill_(float("-inf"))   # the first tile of every row is partly -inf
    with tm.forced(coop=False, **force):
        p = _plan(op, x, dim=dim)
        path = p.sku.route
        if force.get("splits", 1) > 1:
            assert "split" in path and p.workspace_size > 0, path
        elif "tile" in force:
            assert "online" in path and "split" not in path and p.workspace_size == 0, path
        got = p.run(_dev(x)).cpu()
        want = _ref(op, x, dim=dim)
        assert_close(got, want.numpy(), 2e-5, 2e-6, f"{op} {shape} forced {force} ({path})")
        assert_same_as_contiguous(p.run(noncontig(_dev(x))).cpu(), got, f"{op} strided input")
        # backward of the same geometry through the fused backward kernels
        bop = f"{op}_backward"
        gy = torch.randn(*shape, generator=g)
        pb = _plan(bop, gy, got, dim=dim)
        dx = pb.run(_dev(gy), _dev(got)).cpu()
        wb = _ref(bop, gy, got, dim=dim)
        rtol, atol = (2e-5, 5e-5) if op == "log_softmax" else (2e-5, 2e-6)
        assert_close(dx, wb.numpy(), rtol, atol, f"{bop} {shape} forced {force} ({pb.sku.route})")


def test_all_neg_inf_row_on_long_paths():
    tm = _triton_mod()
    x = torch.randn(3, 40)
    x[1] = float("-inf")
    for force in (dict(max_single=8, tile=8), dict(max_single=8, tile=8, splits=3)):
        with tm.forced(coop=False, **force):
            for op in FW:
                got = _dev_run(op, x, -1)
                assert torch.isnan(got[1]).all() and not torch.isnan(got[[0, 2]]).any(), (op, force)


def test_row_length_one_and_empty():
    for op in FW:
        got = _dev_run(op, torch.randn(4, 1), -1)
        want = torch.zeros(4, 1) if op == "log_softmax" else torch.ones(4, 1)
        assert torch.equal(got, want)
        assert _dev_run(op, torch.randn(0, 5), 1).shape == (0, 5)


def test_configs_for_the_workloads():
    """The shapes of the benchmark workloads take the intended paths (no GPU needed to check)."""
    tm = _triton_mod()
    assert tm.choose(16384, 4096, 1, 2).path == "rows"
    c = tm.choose(4096, 32768, 1, 2)   # the 64 KB row stays in registers: one read, one write
    assert c.path == "rows" and c.block == 32768 and c.num_warps == 32
    c = tm.choose(4096, 65536, 1, 2)   # 128 KB rows: 132 of them fit in L2, fused persistent
    assert c.path == "online" and c.splits == 1 and c.programs >= 132
    for outer, r in ((8, 1 << 20), (512, 262144), (1024, 131072)):   # few rows / rows overflowing L2: split
        with tm.forced(coop=False):
            c = tm.choose(outer, r, 1, 2)
        assert c.path == "online" and c.splits > 1 and outer * c.splits >= 2 * 132, (outer, r, c)
        with tm.forced(coop=True):   # on the GPU: single-read chunks exchanging statistics (softmax_long.py)
            c = tm.choose(outer, r, 1, 2)
        assert c.path == "coop" and c.splits * c.block >= r and c.splits <= 132, (outer, r, c)


def test_dropin_adapters():
    spec = bc.Descriptor.make("softmax", ((2, 3), "f32"), dim=1).spec
    x = torch.randn(2, 3)
    ins, attrs = spec.dropin(x, 1, dtype=torch.float64)
    assert ins == (x,) and attrs == {"dim": 1, "dtype": bc.DType.f64}
    ins, attrs = spec.dropin(x, dim=-1)
    assert attrs == {"dim": -1, "dtype": None}
    for op in FW:
        s = bc.Descriptor.make(op, ((2, 3), "f32"), dim=1).spec
        with pytest.raises(InvalidProblemError, match="explicit dim"):
            s.dropin(x)


@pytest.mark.parametrize("op", [*FW, "softmin"])
@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.uint8, torch.bool])
def test_dropin_integer_input_with_dtype_is_cast_first(op, dt):
    """torch converts an integer/bool input to dtype= first (the kernels then read floats); without dtype= the op
    refuses it, as torch; softmin of bool is refused (softmin negates its input), and softmin of an integer input
    negates it in its own dtype first (wrapping: uint8 x != 0 weighs as 256 - x, int8 -128 stays -128)."""
    import baracuda.torch as bt

    g = torch.Generator().manual_seed(11)
    x = torch.randint(0, 2, (4, 9), generator=g).bool() if dt == torch.bool else \
        torch.randint(0 if dt == torch.uint8 else -6, 7, (4, 9), generator=g).to(dt)
    if dt == torch.int32:
        x[1, 2] = -2 ** 31                     # -x wraps to itself in softmin
    F, B = torch.nn.functional, bt.nn.functional
    if op == "softmin" and dt == torch.bool:
        with pytest.raises(RuntimeError):
            F.softmin(x, 1, dtype=torch.float32)
        with pytest.raises(bc.UnsupportedError, match="softmin: argument 'input' has dtype bool"):
            B.softmin(x, 1, dtype=torch.float32)
        return
    # float32: log_softmax near 0 is a difference of terms up to ~8 (x - max - log-sum): a few ulps of 8 absolute
    # (seen: 2e-7 between the H100's Triton kernel and torch's CPU kernel)
    for fdt, tol in ((torch.float64, (1e-12, 1e-14)), (torch.float32, (2e-6, 2e-6))):
        for dim in (0, 1):
            want = getattr(F, op)(x, dim, dtype=fdt)
            got = getattr(B, op)(_dev(x), dim, dtype=fdt).cpu()
            assert got.dtype == want.dtype == fdt
            torch.testing.assert_close(got, want, rtol=tol[0], atol=tol[1])
    with pytest.raises(RuntimeError):
        getattr(F, op)(x, 1)
    with pytest.raises(bc.UnsupportedError, match=f"{op}: argument 'x' has dtype"):
        getattr(B, op)(x, 1)


@pytest.mark.parametrize("shape,dim,force", LONG[::2] + [((4, 33), -1, {})], ids=lambda v: str(v))
def test_softmin_paths_and_backward(shape, dim, force):
    tm = _triton_mod()
    x = torch.randn(*shape) * 4
    x.select(dim, 0).fill_(float("inf"))   # softmin: +inf is the value with zero weight
    with tm.forced(coop=False, **force):
        got = _dev_run("softmin", x, dim)
    assert_close(got, torch.nn.functional.softmin(x.double(), dim).numpy(), 2e-5, 2e-6, f"softmin {shape}")
    xt = x.clone().requires_grad_()
    g = torch.randn(*shape)
    (torch.nn.functional.softmin(xt, dim) * g).sum().backward()
    desc = bc.Descriptor.like("softmin", x, dim=dim)
    bw = bc.BackwardPlan.select(desc, DEVICE, bc.PlanPreference(prefer=(Backend.TRITON,)))
    (dx,) = bw.run(_dev(g), out=_dev(got))
    assert_close(dx.cpu(), xt.grad.double().numpy(), 2e-5, 2e-6, f"softmin backward {shape}")


# -- offline sm90 compile of the long-row kernels (no GPU needed: Triton's bundled ptxas / cuobjdump) -----------
_SM90_CHECK = """
import os, re, subprocess, tempfile, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from baracuda.backends.triton.softmax import softmax as m
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

def usage(k, sig, ce, div, warps, **opts):
    sig = dict(sig, **{n: "constexpr" for n in ce})
    attrs = {(k.arg_names.index(n),): [["tt.divisibility", 16]] for n in div}
    c = triton.compile(ASTSource(fn=getattr(k, "jit", k), signature=sig, constexprs=ce, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps, **opts))
    f = tempfile.NamedTemporaryFile(suffix=".cubin", delete=False)
    f.write(c.asm["cubin"])
    f.close()
    res = subprocess.run([os.path.join(bindir, "cuobjdump"), "-res-usage", f.name], capture_output=True, text=True).stdout
    return int(re.search(r"REG:(\\d+)", res).group(1)), int(re.search(r"STACK:(\\d+)", res).group(1))

c = m.choose(4096, 32768, 1, 2)
for log in (False, True):   # the 32k-element bf16 row in registers: 1024 threads x <= 64 registers, no spills
    regs, stack = usage(m._fw_rows, {"x_ptr": "*bf16", "y_ptr": "*bf16", "n_rows": "i32", "R": "i32", "sxo": "i32"},
                        dict(sxr=1, LOG=log, F64=False, NEG=False, ROWS=1, BLOCK=c.block, I64=False),
                        ["x_ptr", "y_ptr", "R", "sxo"], c.num_warps)
    assert regs <= 64 and stack == 0, ("rows", log, regs, stack)
with m.forced(coop=False):
    c = m.choose(512, 262144, 1, 2)
for st in (1, 2):           # split chunks: <= 32 registers at 8 warps lets 8 programs share an SM
    regs, stack = usage(m._fw_split, {"x_ptr": "*bf16", "y_ptr": "*bf16", "ws_ptr": "*fp32", "n_rows": "i32",
                                      "R": "i32", "CHUNK": "i32", "sxo": "i32"},
                        dict(sxr=1, LOG=False, F64=False, NEG=False, TILE=c.block, STAGE=st, SP=16, I64=False), ["x_ptr", "y_ptr", "ws_ptr", "R", "CHUNK", "sxo"], c.num_warps)
    assert regs <= 32 and stack == 0, ("split", st, regs, stack)
from baracuda.backends.triton.softmax import coop as L
c = m.choose(512, 262144, 1, 2)
assert c.path == "coop"
# single-read chunks at 8 warps: forward capped at 64 registers without spills (4 programs per SM), backward
# <= 128 (2 per SM); they wait on each other, so residency is computed from these numbers at run time
regs, stack = usage(L._fw_coop, {"x_ptr": "*bf16", "y_ptr": "*bf16", "part_ptr": "*fp32", "cnt_ptr": "*i32",
                                 "n_rows": "i32", "R": "i32", "sxo": "i32", "NSPLIT": "i32"},
                    dict(sxr=1, LOG=False, F64=False, NEG=False, CHUNK=c.block, SP=32, I64=False),
                    ["x_ptr", "y_ptr", "part_ptr", "cnt_ptr", "R", "sxo", "NSPLIT"], L.WARPS, maxnreg=L.FW_MAXNREG)
assert regs <= 64 and stack == 0, ("coop fw", regs, stack)
print("coop fw regs", regs, stack)
regs, stack = usage(L._bw_coop, {"g_ptr": "*bf16", "y_ptr": "*bf16", "dx_ptr": "*bf16", "part_ptr": "*fp32",
                                 "cnt_ptr": "*i32", "n_rows": "i32", "R": "i32", "sgo": "i32", "syo": "i32",
                                 "NSPLIT": "i32"},
                    dict(sgr=1, syr=1, LOG=False, F64=False, CHUNK=c.block, SP=32, I64=False),
                    ["g_ptr", "y_ptr", "dx_ptr", "part_ptr", "cnt_ptr", "R", "sgo", "syo", "NSPLIT"], L.WARPS)
assert regs <= 128 and stack == 0, ("coop bw", regs, stack)
print("coop bw regs", regs, stack)
print("ok")
"""
_CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


@pytest.mark.skipif(not os.path.exists(_CUOBJDUMP), reason="Triton's bundled cuobjdump not found")
def test_long_row_kernels_compile_for_sm90_without_spills():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _SM90_CHECK], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]
