"""Complex64/128 in the elementwise family, beyond the generic suite (which runs every complex row forward,
backward, on every backend, through ``complex_samples``): torch's promotion table with complex operands and
Python complex scalars, special values (signed zeros, branch cuts, NaN/inf) against torch, overflow safety of
|z|, gradients of mixed real/complex calls against torch.autograd, layouts (conj views, transposes,
broadcasts) and refusals.  Every check runs on the reference backend and on Triton where it can run here."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda.ops.elementwise import ew_result_type, weak_scalar_dtype
from baracuda.testing import backends_for, forced_plan, test_device

DEV = test_device()
INF, NAN = float("inf"), float("nan")
_TORCH_DT = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.uint8,
             torch.bool, torch.complex64, torch.complex128]


def _run(op, backend, *xs, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    plan = forced_plan(desc, DEV, backend)
    assert not isinstance(plan, str), plan
    return plan.run(*[x.to(DEV.type) if DEV.type == "cuda" else x for x in xs]).cpu()


def _cplx(re, im, dtype=torch.complex128):
    return torch.complex(torch.tensor(re, dtype=torch.float64), torch.tensor(im, dtype=torch.float64)).to(dtype)


def _same(got, want, what, rtol=1e-6, zero_signs=True, atol=0.0):
    """Equal dtypes; values close part by part; NaN where torch has NaN; signs of zero parts as torch's."""
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    if not (got.is_floating_point() or got.is_complex()):
        assert torch.equal(got, want), f"{what}: {got} != {want}"
        return
    g, w = (torch.view_as_real(t) if t.is_complex() else t for t in (got, want))
    torch.testing.assert_close(g, w, rtol=rtol, atol=atol, equal_nan=True, msg=what)
    if zero_signs:
        z = w == 0
        assert torch.equal(torch.signbit(g[z]), torch.signbit(w[z])), f"{what}: sign of a zero part differs"


# -- promotion ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("da,db", [(a, b) for a in _TORCH_DT for b in _TORCH_DT
                                   if torch.complex64 in (a, b) or torch.complex128 in (a, b)])
@pytest.mark.parametrize("shapes", [((3,), (3,)), ((3,), ()), ((), (3,)), ((), ())])
def test_promotion_table(da, db, shapes):
    """ew_result_type (dimensioned > 0-d priority, complex keeps a float tensor's precision) == torch.result_type."""
    a, b = torch.ones(shapes[0], dtype=da), torch.ones(shapes[1], dtype=db)
    want = torch.result_type(a, b)
    specs = [bc.TensorSpec(tuple(t.shape), bc.as_dtype(t.dtype)) for t in (a, b)]
    if want == torch.complex32:   # f16 with a complex 0-d operand: baracuda has no complex32
        with pytest.raises(bc.UnsupportedError, match="complex32"):
            ew_result_type(specs, "add")
        return
    assert ew_result_type(specs, "add") == bc.as_dtype(want)


@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16, torch.int64, torch.bool,
                                torch.complex64, torch.complex128])
@pytest.mark.parametrize("dim", [True, False])
def test_python_complex_scalar(dt, dim):
    """tensor + Python complex: torch's wrapped-number rule (c64 by default, c128 next to f64)."""
    t = torch.ones((3,) if dim else (), dtype=dt)
    want = torch.result_type(t, 2 - 1j)
    sd = weak_scalar_dtype(2 - 1j, [bc.as_dtype(dt)], dim)
    specs = [bc.TensorSpec(tuple(t.shape), bc.as_dtype(dt)), bc.TensorSpec((), sd)]
    assert ew_result_type(specs, "add") == bc.as_dtype(want)


@pytest.mark.parametrize("op,da,db", [
    *[(op, da, db) for op in ("add", "mul", "sub", "div", "eq", "pow")
      for da, db in ((torch.complex64, torch.float64), (torch.float32, torch.complex128), (torch.int64, torch.complex64),
                     (torch.complex64, torch.complex128))],
    ("add", torch.bool, torch.complex128), ("mul", torch.bool, torch.complex64), ("eq", torch.bool, torch.complex64)])
def test_mixed_dtypes_run_like_torch(op, da, db):
    """Real operands of a complex op are read as they are (im = 0 in registers) and promoted like torch."""
    g = torch.Generator().manual_seed(0)
    a = (torch.randn(4, 3, generator=g, dtype=torch.complex128) + 1.5).to(da)
    b = (torch.randn(3, generator=g, dtype=torch.complex128) + 1.5).to(db)
    want = getattr(torch, op)(a, b)
    for be in backends_for(op, DEV):
        _same(_run(op, be, a, b), want, f"{op}({da}, {db}) {be}", rtol=2e-5 if torch.complex64 in (want.dtype,)
              else 1e-12, zero_signs=False)


def test_dropin_python_complex_scalar():
    x = torch.randn(5, dtype=torch.float64)
    ins, attrs = bc.get_spec("add").dropin(x, 2 + 1j)
    for be in backends_for("add", DEV):
        _same(_run("add", be, *ins, **attrs), x + (2 + 1j), f"add(f64, 2+1j) {be}")
    ins, attrs = bc.get_spec("mul").dropin(x.float(), 1j)
    for be in backends_for("mul", DEV):
        _same(_run("mul", be, *ins, **attrs), x.float() * 1j, f"mul(f32, 1j) {be}")


# -- special values ----------------------------------------------------------------------------------------
_FIN = [0.0, -0.0, 0.5, -1.5, 2.0]
_ALLV = _FIN + [INF, -INF, NAN]


def _grid(vals):
    re, im = zip(*itertools.product(vals, vals))
    return _cplx(list(re), list(im))


# ops whose result on every finite input (signed zeros included) matches torch's
_FINITE_OPS = ["abs", "sgn", "sqrt", "rsqrt", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos",
               "tan", "sinh", "cosh", "tanh", "asin", "acos", "atan", "asinh", "acosh", "atanh", "sigmoid",
               "reciprocal", "square", "angle", "neg", "conj", "real", "imag", "isnan", "isinf", "isfinite"]
# ops whose result matches torch's also where a part is +-inf or NaN (C99 Annex G / torch's own rules)
_NONFINITE_OPS = ["abs", "sgn", "sqrt", "rsqrt", "exp", "exp2", "log", "log2", "log10", "sigmoid", "reciprocal",
                  "square", "angle", "neg", "conj", "real", "imag", "isnan", "isinf", "isfinite"]


def _peer(op, x):
    y = getattr(torch, op)(x)
    return y.resolve_conj().resolve_neg()


@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("op", _FINITE_OPS)
def test_finite_grid_and_signed_zeros(op, dt):
    """Every (re, im) in {0, -0, 0.5, -1.5, 2}^2: on the real/imaginary axes (the branch cuts of sqrt, log,
    asin, acos, atanh, acosh (re < 1), asinh and atan (|im| > 1)) the side is chosen by the sign of the zero."""
    if op in ("reciprocal", "rsqrt", "log", "log2", "log10", "sgn", "angle") or op.startswith("a"):
        x = _grid(_FIN).to(dt)
        x = x[(x != 0) | (op in ("sgn", "angle", "abs"))]     # the poles / log(0) are special values, below
        x = x[(x != 1) & (x != -1)] if op in ("atanh",) else x
    else:
        x = _grid(_FIN).to(dt)
    want = _peer(op, x)
    for be in backends_for(op, DEV):
        _same(_run(op, be, x), want, f"{op} {dt} {be}", rtol=4e-6 if dt == torch.complex64 else 1e-12,
              zero_signs=False)


@pytest.mark.parametrize("op", _NONFINITE_OPS)
def test_nan_inf_cases(op):
    x = _grid(_ALLV).to(torch.complex64)
    want = _peer(op, x)
    for be in backends_for(op, DEV):
        _same(_run(op, be, x), want, f"{op} c64 {be}", rtol=4e-6, zero_signs=False)


_CUTS = {   # op -> points on its branch cut (both signs of the zero part are tested)
    "sqrt": [(-2.0, 0.0), (-0.5, 0.0)], "log": [(-2.0, 0.0), (-0.5, 0.0)], "log1p": [(-3.0, 0.0)],
    "rsqrt": [(-2.0, 0.0)], "asin": [(1.5, 0.0), (-2.0, 0.0)], "acos": [(1.5, 0.0), (-2.0, 0.0)],
    "atanh": [(1.5, 0.0), (-2.0, 0.0)], "acosh": [(0.5, 0.0), (-2.0, 0.0)],
    "asinh": [(0.0, 1.5), (0.0, -2.0)], "atan": [(0.0, 1.5), (0.0, -2.0)],
}


@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
@pytest.mark.parametrize("op", sorted(_CUTS))
def test_branch_cuts(op, dt):
    """On the cut the zero part's sign picks the side: sqrt(-4 + 0i) = 2i, sqrt(-4 - 0i) = -2i, as torch."""
    pts = _CUTS[op]
    re, im = [], []
    for a, b in pts:
        for s in (1.0, -1.0):
            if b == 0.0:
                re.append(a), im.append(s * 0.0)
            else:
                re.append(s * 0.0), im.append(b)
    x = _cplx(re, im, dt)
    want = _peer(op, x)
    for be in backends_for(op, DEV):
        _same(_run(op, be, x), want, f"{op} cut {dt} {be}", rtol=4e-6 if dt == torch.complex64 else 1e-12)


def test_abs_does_not_overflow():
    """|z| is hypot-like: |1e30 + 1e30i| in c64 is 1.414e30 (re^2 + im^2 would overflow f32 at 3.4e38)."""
    x = _cplx([1e30, -2e38, 1e-30], [1e30, 2e38, -1e-30], torch.complex64)
    want = torch.abs(x.to(torch.complex128)).float()
    assert torch.isfinite(want[:2]).all()
    for be in backends_for("abs", DEV):
        got = _run("abs", be, x)
        assert torch.isfinite(got).all(), f"abs {be}: {got}"
        torch.testing.assert_close(got, want, rtol=2e-7, atol=0)
    for be in backends_for("sqrt", DEV):   # sqrt halves before adding |x| + |z|: finite as well
        got = _run("sqrt", be, x[:2])
        torch.testing.assert_close(got, torch.sqrt(x[:2].to(torch.complex128)).to(torch.complex64), rtol=1e-6, atol=0)


def test_division_by_zero_is_not_finite():
    a = _cplx([1.0, 0.0, 2.0], [1.0, 0.0, -1.0], torch.complex128)
    z = torch.zeros(3, dtype=torch.complex128)
    for be in backends_for("div", DEV):
        got = _run("div", be, a, z)
        assert not torch.isfinite(got).any(), f"div by 0 {be}: {got}"


# -- layouts -------------------------------------------------------------------------------------------------
def test_conj_view_transpose_and_broadcast():
    g = torch.Generator().manual_seed(1)
    a = torch.randn(5, 4, generator=g, dtype=torch.complex64)
    b = torch.randn(4, generator=g, dtype=torch.complex64)
    for be in backends_for("mul", DEV):
        # Triton reads a conj view (conj bit resolved first); NumPy arrays have no conj bit
        ac = a.conj() if be == bc.Backend.TRITON else a.conj().resolve_conj()
        _same(_run("mul", be, ac, b), a.conj() * b, f"mul(conj view) {be}", rtol=2e-6, atol=1e-6, zero_signs=False)
        _same(_run("mul", be, a.t(), b[:, None]), a.t() * b[:, None], f"mul(transposed) {be}", rtol=2e-6,
              atol=1e-6, zero_signs=False)
    for be in backends_for("exp", DEV):
        _same(_run("exp", be, a[:, ::2]), torch.exp(a[:, ::2]), f"exp(strided) {be}", rtol=2e-6, atol=1e-6,
              zero_signs=False)


# -- gradients: mixed real/complex calls and the real-valued ops, against torch.autograd (complex128) ------
def _grads(op, xs, gout, attrs=None):
    ts = [x.detach().clone().requires_grad_(x.is_floating_point() or x.is_complex()) for x in xs]
    desc = bc.Descriptor.like(op, *[t.detach() for t in ts], **(attrs or {}))
    y = bc.get_spec(op).torch_peer(*ts, **desc.attr_dict)
    want = torch.autograd.grad(y, [t for t in ts if t.requires_grad], gout)
    return desc, want


@pytest.mark.parametrize("op,make", [
    ("mul", lambda g: (torch.randn(3, 4, generator=g, dtype=torch.float64),
                       torch.randn(4, generator=g, dtype=torch.complex128))),
    ("div", lambda g: (torch.randn(4, generator=g, dtype=torch.complex128),
                       torch.randn(3, 4, generator=g, dtype=torch.float64) + 3.0)),
    ("add", lambda g: (torch.randn(3, 1, generator=g, dtype=torch.complex128),
                       torch.randn(4, generator=g, dtype=torch.float64))),
    ("pow", lambda g: (torch.randn(3, generator=g, dtype=torch.complex128) + 2.0,
                       torch.rand(3, generator=g, dtype=torch.float64) + 0.5)),
    ("addcmul", lambda g: (torch.randn(3, generator=g, dtype=torch.complex128),
                           torch.randn(2, 3, generator=g, dtype=torch.float64),
                           torch.randn(3, generator=g, dtype=torch.complex128))),
    ("abs", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.complex128),)),
    ("angle", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.complex128),)),
    ("real", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.complex128),)),
    ("imag", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.complex128),)),
    ("sgn", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.complex128),)),
    ("polar", lambda g: (torch.rand(2, 3, generator=g, dtype=torch.float64) + 0.5,
                         torch.randn(3, generator=g, dtype=torch.float64))),
    ("complex", lambda g: (torch.randn(2, 3, generator=g, dtype=torch.float64),
                           torch.randn(1, 3, generator=g, dtype=torch.float64))),
])
def test_grads_vs_autograd(op, make):
    """A real input of a complex op gets the real part of its gradient; broadcast complex gradients are
    summed back (real and imaginary parts); real-valued outputs of complex inputs take a real g."""
    g = torch.Generator().manual_seed(2)
    xs = make(g)
    desc = bc.Descriptor.like(op, *xs)
    out = desc.outputs[0]
    gout = torch.randn(out.shape, generator=g, dtype=out.dtype.torch)
    _, want = _grads(op, xs, gout)
    backends = [bc.Backend.REFERENCE] + [b for b in backends_for(op, DEV) if b != bc.Backend.REFERENCE]
    for be in backends:
        bw = bc.BackwardPlan.select(desc, DEV if be != bc.Backend.REFERENCE else "cpu", bc.PlanPreference(prefer=(be,)))
        names = desc.spec.arg_names
        saved = {}
        fwd = bc.Plan.select(desc, DEV if be != bc.Backend.REFERENCE else "cpu", bc.PlanPreference(prefer=(be,)))
        ins = [x.to(DEV.type) if be != bc.Backend.REFERENCE else x.numpy() for x in xs]
        for n in bw.saves:
            saved[n] = fwd.run(*ins) if n == "out" else ins[names.index(n)]
        got = bw.run(gout.to(DEV.type) if be != bc.Backend.REFERENCE else gout.numpy(), **saved)
        got = [r for r in got if r is not None]
        assert len(got) == len(want), f"{op} {be}: {len(got)} gradients, torch has {len(want)}"
        for i, (r, w) in enumerate(zip(got, want)):
            r = torch.as_tensor(np.asarray(r)) if not isinstance(r, torch.Tensor) else r.cpu()
            assert r.dtype == w.dtype, f"{op} {be} grad {i}: dtype {r.dtype} != torch {w.dtype}"
            torch.testing.assert_close(r, w, rtol=1e-9, atol=1e-12, msg=f"{op} {be} grad {i}")


# -- refusals ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op,n", [("maximum", 2), ("minimum", 2), ("lt", 2), ("ge", 2), ("remainder", 2),
                                  ("fmod", 2), ("floor_divide", 2), ("atan2", 2), ("hypot", 2), ("copysign", 2),
                                  ("floor", 1), ("ceil", 1), ("round", 1), ("trunc", 1), ("sign", 1), ("relu", 1),
                                  ("erf", 1), ("signbit", 1), ("clamp", 1), ("frac", 1), ("logit", 1), ("gelu", 1)])
def test_refused_like_torch(op, n):
    """Ops torch does not define for complex refuse c64 with the op, the argument and the dtypes named."""
    attrs = {"min": 0.0} if op == "clamp" else {}
    ins = [((3,), "c64")] + [((3,), "c64")] * (n - 1)
    with pytest.raises(bc.UnsupportedError, match=rf"{op}: argument '\w+' has dtype c64; the op is defined for"):
        bc.Descriptor.make(op, *ins, **attrs)


def test_refusals_specific():
    with pytest.raises(bc.UnsupportedError, match=r"div: rounding_mode='floor' is not defined for complex"):
        bc.Descriptor.make("div", ((3,), "c64"), ((3,), "c64"), rounding_mode="floor")
    with pytest.raises(bc.UnsupportedError, match=r"add: f16 with a complex scalar promotes to complex32"):
        bc.Descriptor.make("add", ((3,), "f16"), ((), "c64"))
    with pytest.raises(bc.UnsupportedError, match=r"imag: argument 'x' has dtype f32"):
        bc.Descriptor.make("imag", ((3,), "f32"))
    with pytest.raises(bc.UnsupportedError, match=r"complex: argument 'a' has dtype c64"):
        bc.Descriptor.make("complex", ((3,), "c64"), ((3,), "c64"))
    with pytest.raises(bc.DTypeMismatchError, match=r"polar: argument 'b': expected dtype f32"):
        bc.Descriptor.make("polar", ((3,), "f32"), ((3,), "f64"))
    with pytest.raises(bc.DTypeMismatchError, match=r"isclose: argument 'b': expected dtype c64"):
        bc.Descriptor.make("isclose", ((3,), "c64"), ((3,), "c128"))
    with pytest.raises(bc.InvalidProblemError, match=r"add: argument 'alpha': expected a real number for non-complex "
                                                     r"input tensors .*the result is f32\), got 1j"):
        bc.Descriptor.make("add", ((3,), "f32"), ((3,), "f32"), alpha=1j)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("alpha", [1j, 2 - 0.5j, -1.5, 3])
@pytest.mark.parametrize("dt", [torch.complex64, torch.complex128])
def test_complex_alpha_of_add_and_sub_matches_torch(op, alpha, dt):
    """torch takes a complex alpha for complex tensors: a + alpha * b (complex product), gradient of b g * conj(alpha)."""
    gen = torch.Generator().manual_seed(9)
    a = torch.randn(3, 5, dtype=dt, generator=gen)
    b = torch.randn(5, dtype=dt, generator=gen)
    want = getattr(torch, op)(a, b, alpha=alpha)
    tol = dict(rtol=1e-6, atol=1e-6) if dt == torch.complex64 else dict(rtol=1e-14, atol=1e-14)
    for be in backends_for(op, DEV):
        torch.testing.assert_close(_run(op, be, a, b, alpha=alpha), want, **tol, msg=f"{op} alpha={alpha} {be}")
    g = torch.randn(3, 5, dtype=dt, generator=gen)
    at, bt_ = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    wa, wb = torch.autograd.grad(getattr(torch, op)(at, bt_, alpha=alpha), (at, bt_), g)
    for be in backends_for(op, DEV):
        bw = bc.BackwardPlan.select(bc.Descriptor.like(op, a, b, alpha=alpha), DEV, bc.PlanPreference(prefer=(be,)))
        ga, gb = bw.run(g.to(DEV.type))
        torch.testing.assert_close(torch.as_tensor(ga).cpu(), wa, **tol)
        torch.testing.assert_close(torch.as_tensor(gb).cpu(), wb, **tol, msg=f"{op} alpha={alpha} {be} grad b")


@pytest.mark.parametrize("fn", ["add", "sub", "mul", "div", "exp", "sin", "tanh", "sqrt", "abs", "reciprocal"])
def test_dropin_autograd_gives_complex_inputs_their_gradients(fn):
    """The drop-ins hand autograd the gradient of complex inputs (torch's convention: grad * conj(df/dz)); they
    were dropped as if complex inputs took no gradient (x.grad stayed None)."""
    import baracuda.torch as bt
    g = torch.Generator().manual_seed(3)
    n = 2 if fn in ("add", "sub", "mul", "div") else 1
    xs = [torch.randn(4, 3, dtype=torch.complex128, generator=g).to(DEV.type).requires_grad_() for _ in range(n)]
    ours, theirs = getattr(bt, fn)(*xs), getattr(torch, fn)(*xs)
    cot = torch.randn(theirs.shape, dtype=theirs.dtype, generator=g).to(DEV.type)
    got = torch.autograd.grad(ours, xs, cot)
    want = torch.autograd.grad(theirs, xs, cot)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)
