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
    assert d.attr_dict == {"layout": "bshd", "interleaved": False, "rotary_dim": 64}
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
