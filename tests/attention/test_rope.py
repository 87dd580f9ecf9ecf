"""rope: values against an independent float64 formula (each pair as a complex number times e^{i theta}), against
torch's composite model code (HF Llama's rotate_half, GPT-J's rotate_every_two), both pairings, both layouts,
partial rotary dims, per-batch tables, f32 tables with half x, strided x and tables as model code produces them
(q.view(B, S, H, D).transpose(1, 2)), and the backward: float64 gradients against torch.autograd of the composite
and against finite differences, on every backend."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
from baracuda._core.device import triton_interpreting  # noqa: E402
from baracuda._core.registry import implementations  # noqa: E402
from baracuda._core.sku import Backend  # noqa: E402
from baracuda.testing import assert_close, backends_for, forced_plan  # noqa: E402
from baracuda.testing.checks import DEVICE, TDEV, run_on  # noqa: E402

BACKENDS = backends_for("rope", DEVICE)
DT = {"f64": torch.float64, "f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
# The output is a*c - b*s (b*c + a*s) computed in f32 (f64) from the rounded operands and rounded once to x's
# dtype: within half an ulp of the exact value of those operands, i.e. 2^-9 relative for bf16 (8 significant
# bits), 2^-12 for f16, 2^-24 for f32; rtol is twice that.  atol covers the f32 products' own rounding where
# a*c and b*s cancel (|a|, |b| ~ N(0, 1): a few 2^-24).
TOL = {"f64": (1e-12, 1e-13), "f32": (2 ** -23, 1e-6), "f16": (2 ** -11, 1e-6), "bf16": (2 ** -8, 1e-6)}


def _tol(dt, backend):
    """TOL; the Triton interpreter's f32 -> bf16 conversion truncates (a directed rounding: up to one ulp, 2^-7
    relative), on the GPU it rounds to nearest."""
    if dt == "bf16" and backend == Backend.TRITON and triton_interpreting():
        return 2 ** -7, 1e-6
    return TOL[dt]


def _angles(g, lead, S, half):
    inv = 10000.0 ** (-torch.arange(half, dtype=torch.float64) / max(half, 1))
    return torch.arange(S, dtype=torch.float64)[:, None] * inv + torch.rand(tuple(lead) + (S, half), generator=g,
                                                                             dtype=torch.float64)


def _complex_rope(x, theta, layout, interleaved, R):
    """Independent float64 formula: pair (a, b) -> (a + ib) e^{i theta}; x, theta float64 torch tensors."""
    x = x.clone()
    if layout == "bshd":
        theta = theta.unsqueeze(-2)
    elif theta.dim() == 3:
        theta = theta.unsqueeze(1)
    if interleaved:
        a, b = x[..., 0:R:2], x[..., 1:R:2]
    else:
        a, b = x[..., : R // 2], x[..., R // 2:R]
    z = torch.complex(a, b) * torch.polar(torch.ones_like(theta), theta)
    if interleaved:
        x[..., 0:R:2], x[..., 1:R:2] = z.real, z.imag
    else:
        x[..., : R // 2], x[..., R // 2:R] = z.real, z.imag
    return x


def _hf_rotate_half(x, cos, sin, layout, interleaved, R):
    """The torch composite as model code writes it (tables [.., S, R/2] -> HF's [.., S, R] by cat / repeat)."""
    unsq = 2 if layout == "bshd" else 1
    if cos.dim() == 2 and layout == "bshd":
        cos, sin = cos[:, None], sin[:, None]
    elif cos.dim() == 3:
        cos, sin = cos.unsqueeze(unsq), sin.unsqueeze(unsq)
    xr, xp = x[..., :R], x[..., R:]
    if interleaved:
        cos, sin = cos.repeat_interleave(2, -1), sin.repeat_interleave(2, -1)
        rot = torch.stack((-xr[..., 1::2], xr[..., ::2]), -1).flatten(-2)
    else:
        cos, sin = torch.cat((cos, cos), -1), torch.cat((sin, sin), -1)
        rot = torch.cat((-xr[..., R // 2:], xr[..., : R // 2]), -1)
    return torch.cat((xr * cos + rot * sin, xp), -1)


# (B, S, H, D, R, table batch)
CASES = [(2, 7, 3, 80, 64, None), (1, 6, 2, 96, 96, 1), (2, 5, 3, 24, 16, 2), (3, 33, 2, 2, 2, None)]


def _problem(case, layout, seed=0):
    B, S, H, D, R, tb = case
    g = torch.Generator().manual_seed(seed)
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    theta = _angles(g, () if tb is None else (tb,), S, R // 2)
    return x, theta, R


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "B{}S{}H{}D{}R{}tb{}".format(*c))
def test_forward_matches_complex_rotation_and_torch_composite(backend, layout, interleaved, case):
    x, theta, R = _problem(case, layout)
    c, s = torch.cos(theta), torch.sin(theta)
    want = _complex_rope(x, theta, layout, interleaved, R)
    torch.testing.assert_close(_hf_rotate_half(x, c, s, layout, interleaved, R), want, rtol=1e-12, atol=1e-12)
    for name, (tab_dt, x_dt) in {"f64": ("f64", "f64"), "f32": ("f32", "f32"), "bf16": ("bf16", "bf16"),
                                 "f16-f32tab": ("f32", "f16"), "bf16-f32tab": ("f32", "bf16")}.items():
        xl, cl, sl = x.to(DT[x_dt]), c.to(DT[tab_dt]), s.to(DT[tab_dt])
        got = run_on("rope", xl, cl, sl, backend=backend, layout=layout, interleaved=interleaved)
        assert got.dtype == DT[x_dt] and got.shape == x.shape
        # exact float64 value of the rounded operands: the one-rounding bound of TOL applies
        exact = _hf_rotate_half(xl.double(), cl.double(), sl.double(), layout, interleaved, R)
        assert_close(got, exact.numpy(), *_tol(x_dt, backend), f"rope {backend} {name} {layout} inter={interleaved}")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_strided_operands_as_model_code_makes_them(backend):
    """q of a fused QKV projection, viewed [B, S, H, D] and transposed to bhsd (no copy); tables sliced from a
    wider cache (a row stride > R/2) and a transposed [R/2, S] storage."""
    g = torch.Generator().manual_seed(3)
    B, S, H, D = 2, 9, 4, 40
    qkv = torch.randn(B, S, 3 * H * D, generator=g, dtype=torch.float64)
    q = qkv[..., : H * D].view(B, S, H, D).transpose(1, 2)          # [B, H, S, D], not contiguous
    theta = _angles(g, (), S, 16)
    cache_c = torch.cos(torch.cat((theta, theta), -1))[:, :16]       # row stride 32
    sin_t = torch.sin(theta).t().contiguous().t()                    # column-major [S, 16]
    assert not (q.is_contiguous() or cache_c.is_contiguous() or sin_t.is_contiguous())
    for inter in (False, True):
        got = run_on("rope", q, cache_c, sin_t, backend=backend, layout="bhsd", interleaved=inter)
        want = _complex_rope(q, theta, "bhsd", inter, 32)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    out = run_on("rope", q.transpose(1, 2), cache_c, sin_t, backend=backend, layout="bshd")
    torch.testing.assert_close(out, _complex_rope(q.transpose(1, 2), theta, "bshd", False, 32), rtol=1e-12,
                               atol=1e-12)


def test_interleaved_is_half_split_under_a_permutation_of_the_head_dim():
    """Interleaved pairs (2i, 2i+1) are the half-split pairs (i, i + R/2) after gathering even then odd dims."""
    x, theta, R = _problem((2, 5, 3, 12, 8, None), "bshd", seed=5)
    c, s = torch.cos(theta), torch.sin(theta)
    perm = torch.cat((torch.arange(0, R, 2), torch.arange(1, R, 2), torch.arange(R, 12)))
    inter = run_on("rope", x, c, s, backend=Backend.REFERENCE, interleaved=True)
    half = run_on("rope", x[..., perm].contiguous(), c, s, backend=Backend.REFERENCE, interleaved=False)
    torch.testing.assert_close(inter[..., perm], half, rtol=1e-12, atol=1e-12)


def _backward(backend, x, c, s, gy, **attrs):
    desc = bc.Descriptor.like("rope", x, c, s, **attrs)
    pref = bc.PlanPreference(prefer=(backend,))
    bw = bc.BackwardPlan.select(desc, DEVICE, pref)
    r = bw.run(gy.to(TDEV), cos=c.to(TDEV), sin=s.to(TDEV))
    r = r if isinstance(r, tuple) else (r,)
    return r[0].cpu(), r[1:]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("interleaved", [False, True], ids=["half", "interleaved"])
def test_float64_gradient_matches_torch_autograd_and_finite_differences(backend, layout, interleaved):
    x, theta, R = _problem((2, 3, 2, 10, 6, 2), layout, seed=7)
    c, s = torch.cos(theta), torch.sin(theta)
    g = torch.Generator().manual_seed(8)
    gy = torch.randn(x.shape, generator=g, dtype=torch.float64)
    dx, rest = _backward(backend, x, c, s, gy, layout=layout, interleaved=interleaved)
    assert all(t is None for t in rest), "cos / sin are declared without a gradient"
    xt = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(_hf_rotate_half(xt, c, s, layout, interleaved, R), (xt,), gy)
    torch.testing.assert_close(dx, want, rtol=1e-12, atol=1e-12)
    # finite differences of the reference forward (linear in x: central differences are exact up to rounding)
    ref = forced_plan(bc.Descriptor.like("rope", x, c, s, layout=layout, interleaved=interleaved), DEVICE,
                      Backend.REFERENCE)
    flat, fd, eps = x.reshape(-1), torch.empty(x.numel(), dtype=torch.float64), 1e-6
    for i in range(x.numel()):
        xp, xm = flat.clone(), flat.clone()
        xp[i] += eps
        xm[i] -= eps
        yp = ref.run(xp.view(x.shape).to(TDEV), c.to(TDEV), s.to(TDEV)).cpu()
        ym = ref.run(xm.view(x.shape).to(TDEV), c.to(TDEV), s.to(TDEV)).cpu()
        fd[i] = ((yp - ym) * gy).sum() / (2 * eps)
    torch.testing.assert_close(dx.reshape(-1), fd, rtol=1e-7, atol=1e-8)
    # the backward is the inverse rotation: it undoes the forward
    y = run_on("rope", x, c, s, backend=backend, layout=layout, interleaved=interleaved)
    back, _ = _backward(backend, x, c, s, y, layout=layout, interleaved=interleaved)
    torch.testing.assert_close(back, x, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_bf16_backward_against_float64_autograd(backend):
    """bf16 dy with f32 tables: dx is one rotation computed in f32, rounded once (the bf16 bound of _tol)."""
    x, theta, R = _problem((2, 7, 3, 80, 64, None), "bshd", seed=9)
    c, s = torch.cos(theta).float(), torch.sin(theta).float()
    gy = torch.randn(x.shape, generator=torch.Generator().manual_seed(10), dtype=torch.float64).bfloat16()
    dx, _ = _backward(backend, x.bfloat16(), c, s, gy)
    assert dx.dtype == torch.bfloat16
    xt = x.clone().requires_grad_()
    (want,) = torch.autograd.grad(_hf_rotate_half(xt, c.double(), s.double(), "bshd", False, R), (xt,), gy.double())
    assert_close(dx, want.numpy(), *_tol("bf16", backend), "rope bf16 backward")


def test_descriptor_defaults_and_errors():
    d = bc.Descriptor.make("rope", ((2, 7, 3, 80), "bf16"), ((7, 32), "f32"), ((7, 32), "f32"))
    assert d.attr_dict == {"layout": "bshd", "interleaved": False, "rotary_dim": 64, "has_positions": False,
                           "inverse": False}
    assert d.outputs[0] == bc.TensorSpec((2, 7, 3, 80), bc.DType.bf16)
    with pytest.raises(bc.InvalidProblemError, match=r"rope: argument 'cos': expected shape \[S, R/2\]"):
        # the bhsd sequence axis is dim 2: a [B, S, H, D] tensor with layout=bhsd is caught by S
        bc.Descriptor.make("rope", ((2, 7, 3, 80), "f32"), ((7, 32), "f32"), ((7, 32), "f32"), layout="bhsd")
    with pytest.raises(bc.InvalidProblemError, match=r"rope: argument 'rotary_dim': expected an even number"):
        bc.Descriptor.make("rope", ((2, 7, 3, 80), "f32"), ((7, 32), "f32"), ((7, 32), "f32"), rotary_dim=63)


def test_triton_refuses_rows_it_cannot_hold_with_a_reason():
    impl = next(i for i in implementations("rope") if i.backend == Backend.TRITON)
    d = bc.Descriptor.make("rope", ((1, 2, 1, 20000), "f32"), ((2, 32), "f32"), ((2, 32), "f32"))
    assert "head dim D=20000" in impl.supports(d)
    assert impl.supports(bc.Descriptor.make("rope", ((1, 2, 1, 128), "f32"), ((2, 64), "f32"), ((2, 64), "f32"))) \
        is None


# -- explicit positions ---------------------------------------------------------------------------------------
def _pos_problem(B, S, H, D, R, P, tb, pb, layout, pdt=torch.int64, seed=11):
    """x, a table of P rows of angles ([P, R/2] or [tb, P, R/2]), positions [S] or [pb, S] (repeated, unsorted,
    some past S: a decode step reads cache rows far from its index)."""
    g = torch.Generator().manual_seed(seed)
    shape = (B, S, H, D) if layout == "bshd" else (B, H, S, D)
    x = torch.randn(shape, generator=g, dtype=torch.float64)
    theta = _angles(g, () if tb is None else (tb,), P, R // 2)
    pos = torch.randint(0, P, (S,) if pb is None else (pb, S), generator=g).to(pdt)
    return x, theta, pos


def _gathered(theta, pos):
    """The angles of each token ([S, R/2] or [B, S, R/2]) by plain indexing: the no-positions form's table."""
    if theta.dim() == 2:
        return theta[pos.long()]
    if pos.dim() == 1:
        return theta[:, pos.long()]
    return torch.stack([theta[min(b, theta.shape[0] - 1)][pos[min(b, pos.shape[0] - 1)].long()]
                        for b in range(max(theta.shape[0], pos.shape[0]))])


POS_CASES = [(2, 5, 3, 24, 16, 9, None, None), (2, 4, 2, 10, 6, 3, None, 2), (2, 3, 2, 8, 8, 7, 2, 2),
             (2, 6, 1, 12, 8, 8, 1, 1), (3, 4, 2, 6, 6, 5, 3, None)]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
@pytest.mark.parametrize("case", POS_CASES, ids=lambda c: "B{}S{}H{}D{}R{}P{}tb{}pb{}".format(*c))
def test_positions_pick_table_rows_like_the_gathered_table(backend, layout, case):
    """rope(x, cos, sin, positions) == rope(x, cos[positions], sin[positions]) == the complex rotation, for both
    pairings, int32 and int64 positions, f32 tables with bf16 x; inverse=True is the rotation by -theta."""
    x, theta, pos = _pos_problem(*case, layout)
    R = case[4]
    c, s = torch.cos(theta), torch.sin(theta)
    for inter in (False, True):
        want = _complex_rope(x, _gathered(theta, pos), layout, inter, R)
        for pdt in (torch.int32, torch.int64):
            got = run_on("rope", x, c, s, pos.to(pdt), backend=backend, layout=layout, interleaved=inter,
                         has_positions=True)
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        back = run_on("rope", want, c, s, pos, backend=backend, layout=layout, interleaved=inter,
                      has_positions=True, inverse=True)
        torch.testing.assert_close(back, x, rtol=1e-12, atol=1e-12)
    xb, cf, sf = x.bfloat16(), c.float(), s.float()
    got = run_on("rope", xb, cf, sf, pos, backend=backend, layout=layout, has_positions=True)
    exact = _hf_rotate_half(xb.double(), _gathered(cf.double(), pos), _gathered(sf.double(), pos), layout, False, R)
    assert_close(got, exact.numpy(), *_tol("bf16", backend), f"rope {backend} bf16 positions {layout}")


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_strided_positions_and_tables_are_read_in_place(backend):
    """positions as a column of an [B, S, 2] index tensor (strides (2S, 2)), tables a [P, R/2] slice of a wider
    cache, x a transposed view."""
    B, S, H, D, P = 2, 6, 3, 16, 10
    x, theta, _ = _pos_problem(B, S, H, D, 12, P, None, None, "bshd", seed=12)
    ids = torch.randint(0, P, (B, S, 2), generator=torch.Generator().manual_seed(13))
    pos = ids[..., 1]
    wide = torch.cat((theta, theta), -1)
    c, s = torch.cos(wide)[:, :6], torch.sin(wide)[:, :6]
    xt = x.transpose(1, 2).contiguous().transpose(1, 2)
    assert not (pos.is_contiguous() or c.is_contiguous() or xt.is_contiguous())
    got = run_on("rope", xt, c, s, pos, backend=backend, has_positions=True, rotary_dim=12)
    torch.testing.assert_close(got, _complex_rope(x, _gathered(theta, pos), "bshd", False, 12), rtol=1e-12,
                               atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("bad", [7, -1, 2 ** 31 - 1], ids=["P", "negative", "int32-max"])
def test_position_out_of_range_is_an_error_never_an_out_of_bounds_read(backend, bad):
    x, theta, pos = _pos_problem(2, 5, 2, 8, 8, 7, None, 2, "bshd", pdt=torch.int32)
    c, s = torch.cos(theta), torch.sin(theta)
    pos = pos.clone()
    pos[1, 3] = bad
    with pytest.raises(bc.InvalidProblemError, match=r"rope: argument 'positions': expected positions in \[0, 7\)"):
        run_on("rope", x, c, s, pos, backend=backend, has_positions=True)
        bc.check_errors()          # on the GPU the value check is deferred (PlanPreference.check_values)
    if backend == Backend.TRITON:   # unchecked: that row's rotated dims are NaN, every other value is right
        desc = bc.Descriptor.like("rope", x, c, s, pos, has_positions=True)
        plan = bc.Plan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,), check_values="off"))
        got = plan.run(*[t.to(TDEV) for t in (x, c, s, pos)]).cpu()
        assert torch.isnan(got[1, 3]).all()
        good = pos.clone()
        good[1, 3] = 0
        want = _complex_rope(x, _gathered(theta, good), "bshd", False, 8)
        keep = torch.ones(x.shape[:2], dtype=torch.bool)
        keep[1, 3] = False
        torch.testing.assert_close(got[keep], want[keep], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("layout", ["bshd", "bhsd"])
def test_positions_gradient_is_one_inverse_launch_matching_torch_autograd(backend, layout):
    x, theta, pos = _pos_problem(2, 4, 2, 10, 6, 9, 2, 2, layout, seed=14)
    c, s = torch.cos(theta), torch.sin(theta)
    gy = torch.randn(x.shape, generator=torch.Generator().manual_seed(15), dtype=torch.float64)
    for inverse in (False, True):
        attrs = dict(layout=layout, interleaved=True, has_positions=True, inverse=inverse)
        desc = bc.Descriptor.like("rope", x, c, s, pos, **attrs)
        bw = bc.BackwardPlan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,)))
        assert len(bw.skus) == 1 and bw.saves == ("cos", "sin", "positions"), bw   # no negated copy of sin
        r = bw.run(gy.to(TDEV), cos=c.to(TDEV), sin=s.to(TDEV), positions=pos.to(TDEV))
        assert all(t is None for t in r[1:])
        xt = x.clone().requires_grad_()
        peer = bc.get_spec("rope").torch_peer(xt, c, s, pos, rotary_dim=6, **attrs)
        (want,) = torch.autograd.grad(peer, (xt,), gy)
        torch.testing.assert_close(r[0].cpu(), want, rtol=1e-12, atol=1e-12)


def test_backward_rule_composes_rope_alone():
    """The rule is rope with inverse flipped (no neg of the sin table): the traced backward plan has one sub-plan,
    the same for the plain and the positions form."""
    for desc in (bc.Descriptor.make("rope", ((2, 7, 3, 8), "f32"), ((7, 4), "f32"), ((7, 4), "f32")),
                 bc.Descriptor.make("rope", ((2, 7, 3, 8), "f32"), ((9, 4), "f32"), ((9, 4), "f32"), ((2, 7), "i64"),
                                    has_positions=True, inverse=True)):
        bw = bc.BackwardPlan.select(desc, "cpu")
        assert len(bw.skus) == 1 and "rope" in str(bw.skus[0]), bw
