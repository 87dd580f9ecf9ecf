"""The N-D small-class cross_entropy path (loss.py nd_small: _ce_nd / _ce_nd_grad, BJ positions of one n per
program, their classes in [BJ, K] tiles) against torch in f64: index targets with weights, ignore_index and label
smoothing, every reduction, bf16 / f32 / f64, partial class tiles, several position blocks per n with a partial
last one, strided views, out-of-range targets, zero-size problems, the route, and an offline sm90 compile
(16-byte vectors along j, no spills, no shared-memory round trips in the class loops)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F
import triton

import baracuda as bc
from baracuda._core.errors import InvalidProblemError
from baracuda.testing import assert_close
from baracuda.testing.checks import class_targets as _targets, loss_pair, on_device as _dev, plan_or_skip as _plan

TOL = {torch.float64: (1e-10, 1e-12), torch.float32: (2e-5, 2e-6), torch.bfloat16: (1.6e-2, 1e-2)}


def _route(shape, dt) -> tuple[str, str]:
    """The route fragments nd_small should pick (forward, backward) for an [N, C, d1, ...] input of dtype dt."""
    from baracuda.backends.triton._lib.config import num_sms

    n, c, d = shape[0], shape[1], 1
    for s in shape[2:]:
        d *= s
    bj = min(256 if dt.itemsize == 8 else 512, max(16, triton.next_power_of_2(d)))
    while bj > 128 and n * triton.cdiv(d, bj) < 4 * num_sms():
        bj //= 2
    return tuple(f"nd-small-k{min(k, triton.next_power_of_2(c))}x{bj}" for k in (4, 8))


def _check(x, t, w=None, route="nd-small-", **attrs):
    """Forward and backward (input gradient) vs torch autograd in f64 on the same rounded inputs.  route: a
    fragment of both plans' routes, or (forward's, backward's)."""
    route_fw, route_bw = route if isinstance(route, tuple) else (route, route)
    x64 = x.detach().double().requires_grad_(True)
    want = F.cross_entropy(x64, t, w.double() if w is not None else None, **attrs)
    gout = torch.ones_like(want) if want.dim() == 0 else torch.linspace(-1, 1, want.numel(), dtype=torch.float64
                                                                         ).reshape(want.shape)
    (want * gout).sum().backward()
    ins = [_dev(x), _dev(t)] + ([_dev(w)] if w is not None else [])
    plans: list = []
    got, dx = loss_pair("cross_entropy", ins, gout, plans=plans, **attrs)
    assert route_fw in plans[0].sku.route, plans[0].sku.route
    assert route_bw in plans[1].sku.route, plans[1].sku.route
    rtol, atol = TOL[x.dtype]
    assert got.shape == want.shape
    assert_close(got.cpu(), want.detach().numpy(), rtol, atol, f"fw {attrs}")
    assert dx.shape == x.shape
    assert_close(dx.cpu(), x64.grad.numpy(), 2 * rtol, 2 * atol, f"bw {attrs}")


# 5 classes: a partial second tile of 4; 130 classes: 33 tiles; D = 300: one block of 512 (bf16 / f32) or two of
# 256 (f64), the last partial
@pytest.mark.parametrize("shape", [(2, 5, 7, 9), (3, 19, 33), (1, 130, 40), (3, 19, 20, 15)])
@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32, torch.float64])
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_nd_small_classes(shape, dt, red):
    g = torch.Generator().manual_seed(sum(shape))
    c = shape[1]
    x = (3 * torch.randn(*shape, generator=g)).to(dt)
    t = _targets(g, (shape[0],) + shape[2:], c, ignore=1)
    w = (torch.rand(c, generator=g) + 0.1).to(dt)
    for weight in (None, w):
        for ls in (0.0, 0.2):
            _check(x, t, weight, route=_route(shape, dt), reduction=red, ignore_index=1, label_smoothing=ls)
    _check(x, t.masked_fill(t == 1, -100), None, route=_route(shape, dt), reduction=red)   # the default ignore_index


@pytest.mark.parametrize("dt", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("force", [{"nd_bj": 16}, {"nd_bj": 32, "nd_k": 8, "nd_warps": 2},
                                   {"nd_k": 1, "nd_xt_sum": False}, {"nd_bj": 16, "nd_k": 16, "nd_xt_sum": False}])
def test_nd_small_forced_shapes(dt, force):
    """Several blocks per n (the last partial, D = 50 in blocks of 16 / 32), other tile widths and the forward's
    gathered target logit (nd_xt_sum=False; the default sums it over the tiles)."""
    from baracuda.backends.triton.loss import ce_kernels as m

    g = torch.Generator().manual_seed(10)
    x = (3 * torch.randn(3, 11, 50, generator=g)).to(dt)
    t = _targets(g, (3, 50), 11, ignore=4)
    w = (torch.rand(11, generator=g) + 0.1).to(dt)
    route = tuple(f"nd-small-k{force.get('nd_k', k)}x{force.get('nd_bj', 64)}" for k in (4, 8))
    with m.forced(**force):
        for red in ("none", "sum", "mean"):
            _check(x, t, w, route=route, reduction=red, ignore_index=4, label_smoothing=0.2)
            _check(x, t, None, route=route, reduction=red, ignore_index=4)


@pytest.mark.parametrize("red", ["none", "mean"])
def test_nd_small_strided_views(red):
    """Trailing dims that collapse to stride 2 (a sliced view) and a class-last storage (class stride 1): the same
    kernels through their runtime strides."""
    g = torch.Generator().manual_seed(11)
    x = torch.randn(2, 6, 5, 16, generator=g, dtype=torch.float64)[..., ::2]        # [2, 6, 5, 8], j stride 2
    t = _targets(g, (2, 5, 8), 6)
    assert x.reshape(2, 6, 40).stride() == (480, 80, 2)
    _check(x, t, None, reduction=red, label_smoothing=0.1)
    base = torch.randn(3, 7, 4, generator=g, dtype=torch.float64)                    # [N, D, C] storage
    xp = base.permute(0, 2, 1)                                                        # [N, C, D], class stride 1
    tp = _targets(g, (3, 7), 4)
    _check(xp, tp, torch.rand(4, generator=g, dtype=torch.float64) + 0.1, reduction=red, label_smoothing=0.2)


def test_nd_small_extreme_logits_and_determinism():
    """Logits of +-1e4 (the max keeps exp finite); reduced results are bit-identical across runs (fixed fold)."""
    g = torch.Generator().manual_seed(12)
    x = 1e4 * torch.randn(2, 3, 50, generator=g)
    t = _targets(g, (2, 50), 3)
    _check(x, t, None, reduction="none", label_smoothing=0.1)
    xb = _dev((3 * torch.randn(4, 19, 300, generator=g)).to(torch.bfloat16))
    tb = _dev(_targets(g, (4, 300), 19))
    p = _plan("cross_entropy", xb, tb, reduction="mean", label_smoothing=0.1)
    assert all(torch.equal(a, b) for a, b in zip(p.run(xb, tb), p.run(xb, tb)))


@pytest.mark.parametrize("red", ["none", "mean"])
@pytest.mark.parametrize("bad", [5, -3])
def test_nd_small_out_of_range_target_raises(red, bad):
    x = _dev(torch.randn(2, 5, 3, 4))
    t = torch.randint(0, 5, (2, 3, 4))
    t[1, 2, 3] = bad
    t[0, 0, 0] = -100
    t = _dev(t)
    p = _plan("cross_entropy", x, t, reduction=red)
    assert "nd-small-k4x16" in p.sku.route, p.sku.route
    with pytest.raises(InvalidProblemError, match=r"argument 'target': expected class indices in \[0, 5\)"):
        p.run(x, t)
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)


@pytest.mark.parametrize("shape", [(0, 5, 3, 4), (2, 5, 0), (2, 5, 3, 0)])
@pytest.mark.parametrize("red", ["none", "sum", "mean"])
def test_nd_small_zero_size(shape, red):
    x = torch.randn(*shape, dtype=torch.float64)
    t = torch.zeros((shape[0],) + shape[2:], dtype=torch.int64)
    want = F.cross_entropy(x, t, reduction=red)
    ins = [_dev(x), _dev(t)]
    got, dx = loss_pair("cross_entropy", ins, torch.ones_like(want), reduction=red)
    got = got.cpu()
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got.nan_to_num(), want.nan_to_num())
    assert dx.shape == x.shape


def test_nd_small_selection():
    """Only N-D index targets of <= 256 classes take the path; the benchmark's segmentation map gets blocks of
    512 positions at 2 warps (19 KB of bf16 per program) walked 4 classes at a time."""
    from baracuda.backends.triton.loss import ce_nd as m
    from baracuda.backends.triton.loss.ce_kernels import forced

    def desc(shape, tshape, tdt="i64", op="cross_entropy"):
        return bc.Descriptor.make(op, (shape, "bf16"), (tshape, tdt))

    assert m.nd_small(desc((16, 19, 512, 512), (16, 512, 512))) == (4, 512, 2)
    assert m.nd_small(bc.Descriptor.make("cross_entropy", ((16, 19, 512, 512), "f32"), ((16, 512, 512), "i64"))) \
        == (4, 512, 4)
    assert m.nd_small(desc((2, 256, 9), (2, 9))) == (4, 16, 1)
    bwd = bc.Descriptor.make("cross_entropy_backward", ((), "bf16"), ((2, 9), "f32"), ((2, 256, 9), "bf16"),
                             ((2, 9), "i64"))
    assert m.nd_small(bwd) == (8, 16, 1)                                        # the backward: 8 classes a tile
    assert m.nd_small(desc((2, 3, 300), (2, 300))) == (4, 128, 1)               # too few programs: halved to 128
    assert m.nd_small(desc((2, 2, 9), (2, 9))) == (2, 16, 1)
    assert m.nd_small(desc((2, 257, 9), (2, 9))) is None                     # C > 256: the row-tile path
    assert m.nd_small(desc((2, 5, 9), (2, 5, 9), "bf16")) is None             # probability targets
    assert m.nd_small(desc((8, 5), (8,))) is None                             # 2-D
    assert m.nd_small(desc((2, 5, 9), (2, 9), op="nll_loss")) is None
    with forced(nd_small=False):
        assert m.nd_small(desc((2, 5, 9), (2, 9))) is None
    g = torch.Generator().manual_seed(13)
    x = torch.randn(2, 300, 6, generator=g)
    _check(x, _targets(g, (2, 6), 300), None, route="nd-tile", reduction="mean")
    with forced(nd_small=False):
        _check(torch.randn(2, 5, 6, generator=g), _targets(g, (2, 6), 5), None, route="nd-tile", reduction="sum")


_CHECK = r'''
import os, re, subprocess, tempfile, triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from baracuda.backends.triton.loss import ce_nd as L
bindir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")

def usage(k, sig, ce, warps, div=()):
    names = k.arg_names
    full = {n: "constexpr" if n in ce else sig.get(n, "*fp32") if n.endswith("_ptr") else sig.get(n, "i32")
            for n in names}
    attrs = {(names.index(n),): [["tt.divisibility", 16]] for n in div if n in names}
    c = triton.compile(ASTSource(fn=getattr(k, "jit", k), signature=full, constexprs=ce, attrs=attrs), target=GPUTarget("cuda", 90, 32),
                       options=dict(num_warps=warps))
    f = tempfile.NamedTemporaryFile(suffix=".cubin", delete=False)
    f.write(c.asm["cubin"]); f.close()
    tool = os.path.join(bindir, "cuobjdump")
    res = subprocess.run([tool, "-res-usage", f.name], capture_output=True, text=True).stdout
    sass = subprocess.run([tool, "-sass", f.name], capture_output=True, text=True).stdout
    os.unlink(f.name)
    return (int(re.search(r"REG:(\d+)", res).group(1)), int(re.search(r"STACK:(\d+)", res).group(1)), c.asm["ptx"],
            loops(sass))

def loops(sass):
    """[(instructions, barriers)] of each loop body (a backward branch) of the SASS."""
    ins = [(int(a, 16), t) for a, t in re.findall(r"/\*([0-9a-f]{4})\*/\s+([^;]*);", sass)]
    out = []
    for a, t in ins:
        b = re.search(r"BRA\s.*?0x([0-9a-f]+)", t)
        if b and int(b.group(1), 16) < a:
            body = [u for v, u in ins if int(b.group(1), 16) <= v <= a]
            out.append((len(body), sum("BAR" in u for u in body)))
    return out

# the segmentation-map configuration (C = 19: K = 4, 4 warps, BJ = 1024 bf16 / 512 f32); every option on, and the
# masked-sum target logit, with int64 offsets.  The class loops keep their reductions in registers: no barrier
# (shared memory) without class weights, whose [K] load is broadcast through shared memory.  No spills, but for a
# word or two with every option and int64 offsets.
div = ["x_ptr", "dx_ptr", "t_ptr", "loss_ptr", "g_ptr", "sxn", "sxc", "D", "stn", "R"]
for dt in ("bf16", "fp32"):
    sig = {"x_ptr": "*" + dt, "w_ptr": "*" + dt, "t_ptr": "*i64", "g_ptr": "*" + dt, "dx_ptr": "*" + dt,
           "loss_ptr": "*" + dt}
    for hw, xt, i64 in ((False, False, False), (True, False, False), (True, True, True)):
        ce = dict(sxd=1, std=1, HAS_W=hw, SMOOTH=hw, F64=False, K=4, BJ=2048 // (2 if dt == "bf16" else 4), I64=i64)
        for none in (True, False):
            r, s, ptx, lp = usage(L._ce_nd, sig, dict(ce, NONE=none, XT=xt), 4, div)
            assert (s == 0 or i64 and s <= 16) and ("ld.global.v4" in ptx or "ld.global.nc.v4" in ptx), \
                ("fw", dt, hw, xt, i64, r, s)
            assert len(lp) == 1 and (hw or lp[0][1] == 0), ("fw class loop", dt, lp)
            assert hw or r <= 128, ("fw registers", dt, r)
            print("fw", dt, hw, xt, i64, none, r, s, lp)
        for red in (0, 2):
            r, s, ptx, lp = usage(L._ce_nd_grad, sig, dict(ce, RED=red), 4, div)
            # (class weights + smoothing: 8 bytes of stack since the far-lse recompute branch, ~96 registers)
            assert (s == 0 or (i64 or hw) and s <= (16 if i64 else 8)) and \
                ("ld.global.v4" in ptx or "ld.global.nc.v4" in ptx) and "st.global.v4" in ptx, ("bw", dt, hw, i64, red, r, s)
            # the write loop and the recompute loop of rows with a far lse (softmax_base)
            assert len(lp) == 2 and (hw or lp[0][1] == lp[1][1] == 0), ("bw class loops", dt, lp)
            assert hw or r <= 128, ("bw registers", dt, r)
            print("bw", dt, hw, i64, red, r, s, lp)
print("ok")
'''
_CUOBJDUMP = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")


@pytest.mark.skipif(not os.path.exists(_CUOBJDUMP), reason="Triton's bundled cuobjdump not found")
def test_nd_small_kernels_compile_for_sm90():
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    r = subprocess.run([sys.executable, "-c", _CHECK], env=env, capture_output=True, text=True, timeout=600,
                       check=False)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout[-3000:] + r.stderr[-3000:]
