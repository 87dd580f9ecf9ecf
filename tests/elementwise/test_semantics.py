"""Elementwise semantics beyond the generic suite: torch's type promotion (incl. 0-d priority and weak Python
scalars), integer wrap-around and division, special values (NaN, +-inf, +-0) against torch, gated ops, the
drop-in adapters.  Every check runs on the reference backend and on Triton where it can run here."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda.testing import backends_for, forced_plan, test_device

DEV = test_device()
NAN, INF = float("nan"), float("inf")


def _backends(op):
    return backends_for(op, DEV)


def _run(op, backend, *xs, **attrs):
    desc = bc.Descriptor.like(op, *xs, **attrs)
    plan = forced_plan(desc, DEV, backend)
    assert not isinstance(plan, str), plan
    return plan.run(*[x.to(DEV.type) if DEV.type == "cuda" else x for x in xs]).cpu()


def _same(got, want, what):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != torch {want.dtype}"
    if got.dtype.is_floating_point:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0, equal_nan=True, msg=what)
        # signed zeros must match too
        z = want == 0
        assert torch.equal(torch.signbit(got[z]), torch.signbit(want[z])), f"{what}: sign of zero differs"
    else:
        assert torch.equal(got, want), f"{what}: {got} != {want}"


# -- promotion -----------------------------------------------------------------------------------------
PROMO = [  # (op, a dtype, a shape, b dtype, b shape)
    ("add", torch.int32, (3,), torch.int64, (3,)), ("add", torch.uint8, (3,), torch.int8, (3,)),
    ("add", torch.bool, (3,), torch.bool, (3,)), ("mul", torch.bool, (3,), torch.int16, (3,)),
    ("add", torch.bfloat16, (3,), torch.float16, (3,)), ("add", torch.int32, (3,), torch.float16, (3,)),
    ("add", torch.bfloat16, (3,), torch.float64, ()), ("add", torch.int32, (3,), torch.float64, ()),
    ("add", torch.int8, (3,), torch.int64, ()), ("div", torch.int32, (3,), torch.int32, (3,)),
    ("lt", torch.int32, (3,), torch.float32, (3,)), ("maximum", torch.uint8, (3,), torch.bool, (3,)),
    ("atan2", torch.int16, (3,), torch.int16, (3,)),
]


@pytest.mark.parametrize("op,da,sa,db,sb", PROMO)
def test_promotion_matches_torch(op, da, sa, db, sb):
    a = (torch.arange(1, 4).reshape(sa or ()) if sa else torch.tensor(2)).to(da)
    b = (torch.arange(2, 5).reshape(sb) if sb else torch.tensor(3)).to(db)
    want = getattr(torch, op)(a, b)
    for be in _backends(op):
        _same(_run(op, be, a, b), want, f"{op}({da}{list(sa)}, {db}{list(sb)}) {be}")


@pytest.mark.parametrize("op", ["exp", "sqrt", "sigmoid", "reciprocal", "erf"])
@pytest.mark.parametrize("dt", [torch.int32, torch.uint8, torch.bool])
def test_float_ops_on_integers_give_f32(op, dt):
    x = torch.tensor([0, 1, 3, 7]).to(dt)
    for be in _backends(op):
        got = _run(op, be, x)
        assert got.dtype == torch.float32
        torch.testing.assert_close(got, getattr(torch, op)(x), rtol=1e-6, atol=1e-6)


# -- integers --------------------------------------------------------------------------------------------
INT_CASES = [
    ("add", torch.int8, [127, -128, 100], [1, -1, 100]), ("mul", torch.int16, [300, -300, 2 ** 14], [300, 200, 4]),
    ("sub", torch.uint8, [0, 5, 255], [1, 10, 255]), ("neg", torch.int8, [-128, 5, 0], None),
    ("abs", torch.int8, [-128, -5, 7], None), ("square", torch.int32, [46341, -3, 65536], None),
    ("floor_divide", torch.int32, [7, -7, 7, -7, 0], [2, 2, -2, -2, 3]),
    ("remainder", torch.int32, [7, -7, 7, -7, 0], [2, 2, -2, -2, 3]),
    ("fmod", torch.int64, [7, -7, 7, -7, 0], [2, 2, -2, -2, 3]),
    ("pow", torch.int32, [2, 3, -2, 1, -1, 5], [31, 21, 3, -4, -3, 0]),
    ("pow", torch.int8, [3, 2, -3], [5, 7, 3]),
    ("bitwise_left_shift", torch.int32, [1, 3, -1, 5], [31, 2, 40, 0]),
    ("bitwise_right_shift", torch.int8, [-128, 64, -1, 77], [7, 3, 9, 20]),
    ("bitwise_xor", torch.int16, [0x0F0F, -1, 5], [0x00FF, 7, 5]),
    ("bitwise_not", torch.uint8, [0, 255, 17], None), ("sign", torch.int64, [-5, 0, 9], None),
    ("maximum", torch.int64, [2 ** 62, -3, 4], [-(2 ** 62), 5, 4]),
]


@pytest.mark.parametrize("op,dt,a,b", INT_CASES, ids=lambda v: str(v) if isinstance(v, (str, torch.dtype)) else None)
def test_integer_semantics(op, dt, a, b):
    xs = [torch.tensor(a, dtype=dt)] + ([torch.tensor(b, dtype=dt)] if b is not None else [])
    want = getattr(torch, op)(*xs)
    for be in _backends(op):
        _same(_run(op, be, *xs), want, f"{op} {dt} {be}")


@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.int8, torch.uint8])
@pytest.mark.parametrize("value", [1, 3, -1, 1.5, -1.5, 2.9, 300, 1e30])
def test_addcmul_integers_keep_their_dtype(dt, value):
    # torch: the operands' dtype whatever value is; value converted to it by the checked scalar conversion (a
    # fraction truncates, -1 wraps into uint8, a float below 0 or out of range is an overflow error)
    a, b, c = (torch.randint(-100, 100, (4, 5)).to(dt) for _ in range(3))
    try:
        want = torch.addcmul(a, b, c, value=value)
    except RuntimeError as e:
        assert "without overflow" in str(e)
        with pytest.raises(bc.InvalidProblemError, match="addcmul: argument 'value': expected a value that converts"):
            bc.Descriptor.like("addcmul", a, b, c, value=value)
        return
    for be in _backends("addcmul"):
        _same(_run("addcmul", be, a, b, c, value=value), want, f"addcmul {dt} value={value} {be}")
    import baracuda.torch as bt

    _same(bt.addcmul(a, b, c, value=value), want, "drop-in")
    _same(bt.addcmul(a, b, c), torch.addcmul(a, b, c), "drop-in, default value")


@pytest.mark.parametrize("alpha", [True, False, 1, 2, 0])
def test_add_bool_alpha_on_bool_operands(alpha):
    import baracuda.torch as bt

    a, b = torch.rand(4, 6) > 0.5, torch.rand(4, 6) > 0.5
    want = torch.add(a, b, alpha=alpha)
    for be in _backends("add"):
        _same(_run("add", be, a, b, alpha=alpha), want, f"add bool alpha={alpha} {be}")
    _same(bt.add(a, b, alpha=alpha), want, "drop-in")


@pytest.mark.parametrize("dt", [torch.float32, torch.int64])
def test_bool_alpha_is_for_bool_results_only(dt):
    x = torch.ones(3, dtype=dt)
    with pytest.raises(RuntimeError, match="Boolean alpha only supported for Boolean results"):
        torch.add(x, x, alpha=True)
    with pytest.raises(bc.InvalidProblemError, match="add: argument 'alpha': expected a number \\(a bool alpha is for"):
        bc.Descriptor.like("add", x, x, alpha=True)
    b = torch.ones(3, dtype=torch.bool)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point number"):
        torch.add(b, b, alpha=0.5)
    with pytest.raises(bc.InvalidProblemError, match="add: argument 'alpha': expected an int or a bool for integral"):
        bc.Descriptor.like("add", b, b, alpha=0.5)


@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.uint8, torch.bool])
@pytest.mark.parametrize("alpha", [2.0, 1.0, -3.0, 1j])
def test_integral_tensors_refuse_a_floating_or_complex_alpha_as_torch(op, dt, alpha):
    """torch: "For integral input tensors, argument alpha must not be a floating point number." -- even an integral
    float (2.0) or a complex; an int alpha is taken (and computes as torch)."""
    x = _rand_operand(dt, (4, 3), 21)
    y = _rand_operand(dt, (3,), 22)
    if op == "sub" and dt == torch.bool:    # refused whatever alpha, by torch and here
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
            torch.sub(x, y, alpha=alpha)
        with pytest.raises(bc.UnsupportedError, match="sub: argument 'a' has dtype bool"):
            bt.sub(x, y, alpha=alpha)
        return
    with pytest.raises(RuntimeError, match="For integral input tensors, argument alpha must not be a floating point"):
        getattr(torch, op)(x, y, alpha=alpha)
    with pytest.raises(bc.InvalidProblemError, match=f"{op}: argument 'alpha': expected an int or a bool for integral "
                                                     "input tensors"):
        getattr(bt, op)(x, y, alpha=alpha)
    k = int(alpha.real)
    want = getattr(torch, op)(x, y, alpha=k)
    for be in _backends(op):
        _same(_run(op, be, x, y, alpha=k), want, f"{op}({dt}, alpha={k}) {be}")
    _same(getattr(bt, op)(x, y, alpha=k), want, f"bt.{op}({dt}, alpha={k})")


@pytest.mark.parametrize("mode", ["trunc", "floor"])
def test_integer_div_rounding(mode):
    a = torch.tensor([7, -7, 7, -7, -128, 0], dtype=torch.int8)
    b = torch.tensor([2, 2, -2, -2, -1, 5], dtype=torch.int8)
    want = torch.div(a, b, rounding_mode=mode)
    for be in _backends("div"):
        _same(_run("div", be, a, b, rounding_mode=mode), want, f"div {mode} {be}")


@pytest.mark.parametrize("op,attrs", [("floor_divide", {}), ("remainder", {}), ("fmod", {}),
                                      ("div", {"rounding_mode": "trunc"})])
def test_integer_division_by_zero_raises_on_reference(op, attrs):
    a, b = torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 0], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        getattr(torch, op)(a, b, **attrs)
    with pytest.raises(ZeroDivisionError, match="integer division by zero"):
        _run(op, Backend.REFERENCE, a, b, **attrs)


# -- bool / integer operands of float-valued and integer-preserving ops (torch's promotion) ----------------------
def _rand_operand(dt, shape, seed):
    """Random operands of ``dt``: bool a coin flip per element, integers in [-9, 9] ([0, 18] for u8), never all
    zero."""
    g = torch.Generator().manual_seed(seed)
    if dt == torch.bool:
        x = torch.rand(shape, generator=g) > 0.5
        x.view(-1)[0] = True
        return x
    lo = 0 if dt == torch.uint8 else -9
    return torch.randint(lo, lo + 19, shape, generator=g).to(dt)


BOOL_INT_BINARY = [  # (op, a dtype, b dtype): bool promotes like an integer, float-valued ops give f32
    (op, da, db) for op in ("atan2", "copysign", "div", "fmax", "fmin", "ldexp", "xlogy")
    for da, db in ((torch.bool, torch.bool), (torch.bool, torch.int32), (torch.int64, torch.bool),
                   (torch.bool, torch.float64), (torch.uint8, torch.bool))]


@pytest.mark.parametrize("op,da,db", BOOL_INT_BINARY, ids=str)
def test_bool_operands_of_binary_ops_match_torch(op, da, db):
    a, b = _rand_operand(da, (4, 6), 1), _rand_operand(db, (6,), 2)
    want = getattr(torch, op)(a, b)
    for be in _backends(op):
        _same(_run(op, be, a, b), want, f"{op}({da}, {db}) {be}")


@pytest.mark.parametrize("dt", [torch.float32, torch.float64, torch.bfloat16])
def test_ldexp_bool_exponent(dt):
    """ldexp(float, bool) is a * 2^b with b in {0, 1}, as torch's CUDA kernel and its decomposition compute it
    (torch's CPU kernel refuses a bool exponent of a floating mantissa: a dispatch gap, not a rule)."""
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(4, 6, generator=g, dtype=torch.float64) * 3).to(dt)
    b = _rand_operand(torch.bool, (6,), 8)
    want = (a.double() * torch.pow(2.0, b.double())).to(dt)   # exact: a power-of-two scaling
    for be in _backends("ldexp"):
        _same(_run("ldexp", be, a, b), want, f"ldexp({dt}, bool) {be}")


@pytest.mark.parametrize("op", ["deg2rad", "rad2deg", "square", "logit"])
@pytest.mark.parametrize("dt", [torch.bool, torch.int64, torch.uint8, torch.int8])
def test_bool_and_integer_operands_of_unary_ops_match_torch(op, dt):
    x = _rand_operand(dt, (5, 7), 3)
    want = getattr(torch, op)(x)   # square(bool) is i64 (pow(x, 2)), the others f32
    for be in _backends(op):
        _same(_run(op, be, x), want, f"{op}({dt}) {be}")


def test_abs_and_softsign_of_bool_follow_torch_cuda():
    """abs(bool) is the bool itself and softsign(bool) is f32 x / (1 + |x|) (True -> 0.5), as torch's CUDA kernels
    (its CUDA OpInfo declares bool); torch's CPU kernels (2.13) refuse bool ("abs_cpu" not implemented), so the
    expectation is torch on the same values as uint8, which its CPU kernels take."""
    x = _rand_operand(torch.bool, (5, 7), 11)
    assert x.any() and not x.all()
    for be in _backends("abs"):
        _same(_run("abs", be, x), torch.abs(x.to(torch.uint8)).bool(), f"abs(bool) {be}")
    for be in _backends("softsign"):
        _same(_run("softsign", be, x), torch.nn.functional.softsign(x.to(torch.uint8)), f"softsign(bool) {be}")
    assert bt.abs(x).dtype == torch.bool and torch.equal(bt.abs(x), x)
    _same(bt.nn.functional.softsign(x), torch.where(x, 0.5, 0.0).float(), "bt softsign(bool)")


def test_logit_eps_on_integers_matches_torch():
    x = _rand_operand(torch.int32, (9,), 4)
    for be in _backends("logit"):
        _same(_run("logit", be, x, eps=0.25), torch.logit(x, 0.25), f"logit(i32, eps) {be}")


@pytest.mark.parametrize("op,attrs", [("softsign", {}), ("tanhshrink", {}), ("relu6", {}),
                                      ("hardtanh", {}), ("hardtanh", {"min_val": -2.5, "max_val": 3.75}),
                                      ("threshold", {"threshold": 0.5, "value": -2.0}),
                                      ("threshold", {"threshold": -1.5, "value": 9.75})], ids=str)
@pytest.mark.parametrize("dt", [torch.int64, torch.int32, torch.int16, torch.int8])
def test_activations_on_integers_match_torch(op, attrs, dt):
    """softsign/tanhshrink give f32; relu6/hardtanh/threshold keep the integer dtype and compare with their
    numbers truncated to it (threshold -1.5 replaces -1)."""
    import torch.nn.functional as F

    x = _rand_operand(dt, (6, 8), 5)
    want = getattr(F, op)(x, *attrs.values())
    for be in _backends(op):
        _same(_run(op, be, x, **attrs), want, f"{op}({dt}, {attrs}) {be}")


def test_activations_on_uint8_match_torch():
    import torch.nn.functional as F

    x = _rand_operand(torch.uint8, (6, 8), 6)
    for op, attrs in (("relu6", {}), ("hardtanh", {"min_val": -0.5, "max_val": 7.5}),
                      ("threshold", {"threshold": 4.5, "value": 200.0}), ("softsign", {})):
        want = getattr(F, op)(x, *attrs.values())
        for be in _backends(op):
            _same(_run(op, be, x, **attrs), want, f"{op}(u8, {attrs}) {be}")


@pytest.mark.parametrize("call,op,err,match", [
    (lambda t, F, a: t.div(a, a, rounding_mode="floor"), "div", bc.UnsupportedError,
     "rounding_mode='floor' is not defined for bool operands"),
    (lambda t, F, a: t.div(a, a, rounding_mode="trunc"), "div", bc.UnsupportedError,
     "rounding_mode='trunc' is not defined for bool operands"),
    (lambda t, F, a: F.threshold(a.to(torch.uint8), 1.0, -3.0), "threshold", bc.InvalidProblemError,
     "argument 'value': expected a value representable in u8"),
    (lambda t, F, a: F.threshold(a.to(torch.int8), 127.5, 0.0), "threshold", bc.InvalidProblemError,
     "argument 'threshold': expected a value representable in i8"),
    (lambda t, F, a: F.hardtanh(a.to(torch.uint8), -1.0, 1.0), "hardtanh", bc.InvalidProblemError,
     "argument 'min_val': expected non-negative limits"),
    (lambda t, F, a: F.hardtanh(a.to(torch.int8), -200.0, 1.0), "hardtanh", bc.InvalidProblemError,
     "argument 'min_val': expected a value representable in i8"),
    (lambda t, F, a: F.relu6(a), "relu6", bc.UnsupportedError, "argument 'x' has dtype bool"),
], ids=lambda v: v if isinstance(v, str) and " " not in v else None)
def test_bool_and_integer_refusals_match_torch(call, op, err, match):
    """What torch refuses for bool/integer operands, the drop-in refuses too, naming the op and the argument."""
    import torch.nn.functional as F

    import baracuda.torch as bt

    a = torch.tensor([True, False, True])
    with pytest.raises((RuntimeError, NotImplementedError)):
        call(torch, F, a)
    with pytest.raises(err, match=f"{op}: {match}"):
        call(bt, bt.nn.functional, a)


# -- special values ---------------------------------------------------------------------------------------
SPECIAL = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.5, 1e-30,
                        3.0, -3.0, 6.0, 1e30], dtype=torch.float64)
UNARY_SPECIAL = ["exp", "log", "sqrt", "rsqrt", "reciprocal", "abs", "sign", "neg", "floor", "ceil", "round", "trunc",
                 "frac", "sigmoid", "tanh", "expm1", "log1p", "sin", "atan", "asinh", "erf", "erfc", "isnan", "isinf",
                 "isfinite", "signbit", "nan_to_num", "relu", "relu6", "hardswish", "hardsigmoid", "silu", "softsign",
                 "logsigmoid", "softplus", "square", "exp2", "log2"]


def _peer(op):
    import torch.nn.functional as F

    return getattr(torch, op, None) or getattr(F, op)


@pytest.mark.parametrize("op", UNARY_SPECIAL)
@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
def test_unary_special_values(op, dt):
    x = SPECIAL.to(dt)
    want = _peer(op)(x)
    for be in _backends(op):
        got = _run(op, be, x)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=2e-6, atol=1e-30, equal_nan=True, msg=f"{op} {dt} {be}")
        z = (want == 0) & ~torch.isnan(want) if want.dtype.is_floating_point else None
        if z is not None and z.any() and op not in ("erfc",):
            assert torch.equal(torch.signbit(got[z]), torch.signbit(want[z])), f"{op} {be}: sign of zero"


BINARY_SPECIAL = ["add", "mul", "div", "maximum", "minimum", "fmax", "fmin", "atan2", "hypot", "copysign", "remainder",
                  "fmod", "floor_divide", "logaddexp", "xlogy", "pow", "eq", "lt"]


@pytest.mark.parametrize("op", BINARY_SPECIAL)
def test_binary_special_values(op):
    a = SPECIAL[:, None].expand(15, 15).contiguous()
    b = SPECIAL[None, :].expand(15, 15).contiguous()
    want = getattr(torch, op)(a, b)
    for be in _backends(op):
        got = _run(op, be, a, b)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=0, equal_nan=True, msg=f"{op} {be}")


def test_round_half_to_even():
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 2.4999], dtype=torch.float32)
    for be in _backends("round"):
        _same(_run("round", be, x), torch.round(x), f"round {be}")


# -- gated ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["swiglu", "geglu", "reglu", "glu"])
def test_gated_matches_torch_fw_bw(op):
    import torch.nn.functional as F

    x = torch.randn(3, 4, 10, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 4, 5, dtype=torch.float64)
    a, b = x.chunk(2, -1)
    want = {"swiglu": lambda: F.silu(a) * b, "geglu": lambda: F.gelu(a) * b, "reglu": lambda: F.relu(a) * b,
            "glu": lambda: F.glu(x, -1)}[op]()
    (dx,) = torch.autograd.grad(want, x, g)
    for be in _backends(op):
        got = _run(op, be, x.detach())
        torch.testing.assert_close(got, want.detach(), rtol=1e-10, atol=1e-12)
        d = bc.Descriptor.like(op, x.detach())
        bw = bc.BackwardPlan.select(d, DEV, bc.PlanPreference(prefer=(be,)))
        (gx,) = bw.run(g.to(DEV.type), x=x.detach().to(DEV.type))   # CUDA plans take CUDA tensors
        torch.testing.assert_close(gx.cpu(), dx, rtol=1e-10, atol=1e-12)


def test_glu_on_inner_dim():
    x = torch.randn(4, 6, 3, dtype=torch.float64)
    for be in _backends("glu"):
        torch.testing.assert_close(_run("glu", be, x, dim=1), torch.nn.functional.glu(x, 1))


# -- drop-in adapters --------------------------------------------------------------------------------------
def _dropin(op, *args, **kwargs):
    spec = bc.get_spec(op)
    ins, attrs = spec.dropin(*args, **kwargs)
    return bc.Plan.select(bc.Descriptor.like(op, *ins, **attrs), "cpu").run(*ins)


@pytest.mark.parametrize("op,args,kwargs", [
    ("add", (torch.ones(3, dtype=torch.bfloat16), 2.5), {}),
    ("add", (torch.arange(3, dtype=torch.int32), 2.5), {}),
    ("add", (torch.arange(3, dtype=torch.int8), 300), {}),
    ("mul", (torch.tensor([True, False]), 2), {}),
    ("sub", (torch.arange(3, dtype=torch.int32), torch.tensor(2, dtype=torch.int64)), {"alpha": 3}),
    ("div", (torch.arange(3, dtype=torch.int32), 2), {"rounding_mode": "floor"}),
    ("add", (torch.tensor(1.0, dtype=torch.bfloat16), 1.5), {}),
    ("pow", (torch.arange(4, dtype=torch.float32), 2), {}),
    ("lt", (torch.arange(3, dtype=torch.int32), 1.5), {}),
    ("where", (torch.tensor([True, False]), torch.ones(2, dtype=torch.float16), 0.0), {}),
])
def test_dropin_weak_scalars(op, args, kwargs):
    if op == "add" and args[0].dtype == torch.int8:
        want = torch.add(args[0], torch.tensor(300, dtype=torch.int64))
    else:
        want = getattr(torch, op)(*args, **kwargs)
    got = _dropin(op, *args, **kwargs)
    assert got.dtype == want.dtype, f"{op}{args}: {got.dtype} != {want.dtype}"
    torch.testing.assert_close(got.to(torch.float64), want.to(torch.float64))


def test_dropin_rejects_out():
    with pytest.raises(bc.UnsupportedError, match="argument 'out'"):
        bc.get_spec("exp").dropin(torch.ones(2), out=torch.empty(2))


def test_dropin_activation_kwargs():
    x = torch.randn(5, dtype=torch.float64)
    import torch.nn.functional as F

    torch.testing.assert_close(_dropin("gelu", x, approximate="tanh"), F.gelu(x, approximate="tanh"))
    torch.testing.assert_close(_dropin("leaky_relu", x, 0.2), F.leaky_relu(x, 0.2))
    torch.testing.assert_close(_dropin("softplus", x, beta=2.0, threshold=1.0), F.softplus(x, 2.0, 1.0))


@pytest.mark.parametrize("op", ["floor", "ceil", "trunc", "round", "sign"])
@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16])
def test_piecewise_constant_ops_have_torchs_zero_gradient(op, dt):
    import baracuda.torch as bt

    # random values, integers (the jumps) and signed zeros: torch's gradient is an exact zero everywhere
    x = torch.cat([torch.randn(40, dtype=torch.float64) * 3, torch.tensor([2.0, -1.0, 0.0, -0.0, 0.5])]).to(dt)
    g = torch.randn(x.shape, dtype=torch.float64).to(dt) + 2.0
    xt = x.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(getattr(torch, op)(xt), xt, g)
    xb = x.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(getattr(bt, op)(xb), xb, g)
    assert got.dtype == want.dtype == dt and got.shape == want.shape
    assert torch.equal(got, want), f"{op} {dt}: {got}"
    for be in _backends("zeros_like"):   # the rule's fill on each backend (no saved tensors)
        bw = bc.BackwardPlan.select(bc.Descriptor.like(op, x), DEV, bc.PlanPreference(prefer=(be,)))
        assert bw.saves == () and bw.sku.backend == be
        (gg,) = bw.run(g.to(DEV.type))
        assert torch.equal(torch.as_tensor(gg).cpu(), want), f"{op} {be}"


@pytest.mark.parametrize("db", [torch.float64, torch.float32])
def test_copysign_gives_the_sign_operand_torchs_zero_gradient(db):
    """torch's copysign gradient of ``other`` is zeros_like(other) (a zero tensor of its shape and dtype, not None);
    ``input``'s is g * sign(a) * sign(out), zero where a == 0."""
    gen = torch.Generator().manual_seed(5)
    a = torch.cat([torch.randn(3, 3, dtype=torch.float64, generator=gen) * 2, torch.zeros(3, 1, dtype=torch.float64)], 1)
    b = torch.randn(4, dtype=torch.float64, generator=gen).to(db)
    g = torch.randn(3, 4, dtype=torch.float64, generator=gen) + 2.0
    at, bt_ = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    want = torch.autograd.grad(torch.copysign(at, bt_), (at, bt_), g)
    ab, bb = a.clone().requires_grad_(True), b.clone().requires_grad_(True)
    got = torch.autograd.grad(bt.copysign(ab, bb), (ab, bb), g)
    for w, o in zip(want, got):
        assert (o.dtype, o.shape) == (w.dtype, w.shape) and torch.equal(o, w), (o, w)
    assert torch.equal(got[1], torch.zeros(4, dtype=db))
    out = torch.copysign(a, b)
    for be in _backends("copysign"):
        bw = bc.BackwardPlan.select(bc.Descriptor.like("copysign", a, b), DEV, bc.PlanPreference(prefer=(be,)))
        ga, gb = bw.run(g.to(DEV.type), a=a.to(DEV.type), b=b.to(DEV.type), out=out.to(DEV.type))
        assert torch.equal(torch.as_tensor(ga).cpu(), want[0]) and torch.equal(torch.as_tensor(gb).cpu(), want[1]), be


GAMMA_SPECIAL = torch.tensor([-3.0, -2.0, -1.0, -0.0, 0.0, 1.0, -0.5, -2.5, -7.2, 0.3, 1e-8, 7.9, 8.0, 9.99, 123.4,
                              1e10, -1e10, 1e300, INF, -INF, NAN], dtype=torch.float64)


@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
def test_digamma_special_values_match_torch(dt):
    # psi(+-0) = -+inf, NaN at the negative integers (poles) and -inf, as torch
    x = GAMMA_SPECIAL.to(dt)
    want = torch.digamma(x)
    for be in _backends("digamma"):
        got = _run("digamma", be, x)
        torch.testing.assert_close(got, want, rtol=1e-13 if dt == torch.float64 else 2e-6, atol=0, equal_nan=True,
                                   msg=f"digamma {dt} {be}")


@pytest.mark.parametrize("dt", [torch.float64, torch.float32])
def test_digamma_gradient_is_trigamma(dt):
    import baracuda.torch as bt

    mpmath = pytest.importorskip("mpmath")
    x = torch.cat([torch.randn(200, dtype=torch.float64) * 6, torch.rand(50, dtype=torch.float64) * 60]).to(dt)
    g = (torch.rand(x.shape, dtype=torch.float64) + 0.5).to(dt)
    # the exact polygamma(1, x) (mpmath) times g; torch's rule is g * polygamma(1, x), whose series is accurate to
    # ~5e-10 in float64 and ~4e-4 in float32 (near the poles): baracuda is held to the exact value
    exact = torch.tensor([float(mpmath.polygamma(1, mpmath.mpf(float(v)))) for v in x.double()], dtype=torch.float64)
    want = (g.double() * exact).to(dt)
    xt = x.clone().requires_grad_(True)
    (peer,) = torch.autograd.grad(torch.digamma(xt), xt, g)
    torch.testing.assert_close(peer, g * torch.polygamma(1, x), rtol=0, atol=0)   # torch's rule, written out
    if dt == torch.float64:
        torch.testing.assert_close(peer, want, rtol=1e-9, atol=0)
    tol = dict(rtol=1e-13, atol=0) if dt == torch.float64 else dict(rtol=1e-5, atol=0)
    xb = x.clone().requires_grad_(True)
    (got,) = torch.autograd.grad(bt.digamma(xb), xb, g)
    torch.testing.assert_close(got, want, **tol)
    for be in _backends("digamma_backward"):
        torch.testing.assert_close(_run("digamma_backward", be, g, x), want, **tol, msg=f"{be}")
    # float64 finite differences of the reference digamma
    xd = torch.tensor([0.3, 1.7, 5.5, 12.25, -2.5, -0.75], dtype=torch.float64)
    h = 1e-6
    fd = (_run("digamma", Backend.REFERENCE, xd + h) - _run("digamma", Backend.REFERENCE, xd - h)) / (2 * h)
    torch.testing.assert_close(_run("digamma_backward", Backend.REFERENCE, torch.ones_like(xd), xd), fd,
                               rtol=1e-6, atol=0)


def test_trigamma_poles_are_inf():
    # torch's polygamma(1, x) at the poles is a rounding artifact of sin(pi * x) (6.6e32 at -1 in f64, 1.3e15 in
    # f32); baracuda takes sin(pi x) on x mod 2, exactly 0 there: +inf, the limit from both sides
    x = torch.tensor([0.0, -0.0, -1.0, -2.0, -7.0], dtype=torch.float64)
    for be in _backends("digamma_backward"):
        got = _run("digamma_backward", be, torch.ones_like(x), x)
        assert torch.equal(got, torch.full_like(x, INF)), f"{be}: {got}"


SHRINK_CASES = [("hardshrink", {"lambd": 0.5}), ("hardshrink", {"lambd": -0.5}), ("hardshrink", {"lambd": 0.0}),
                ("softshrink", {"lambd": 0.5}), ("softshrink", {"lambd": 0.0}),
                ("threshold", {"threshold": 0.5, "value": -2.0}), ("threshold", {"threshold": NAN, "value": 3.0}),
                ("threshold", {"threshold": -1.0, "value": NAN})]


@pytest.mark.parametrize("op,attrs", SHRINK_CASES)
@pytest.mark.parametrize("dt", [torch.float64, torch.float32, torch.bfloat16])
def test_shrink_and_threshold_nan_and_lambda_like_torch(op, attrs, dt):
    import torch.nn.functional as F

    # NaN stays NaN (no comparison holds there); a negative hardshrink lambd empties the zero band; the gradient
    # of the shrinks is zero at a NaN, threshold's passes it (torch's x <= threshold test)
    x = torch.cat([SPECIAL, torch.tensor([-0.5, 0.5, -1.0, 1.0, 0.25, -0.25], dtype=torch.float64),
                   torch.randn(30, dtype=torch.float64)]).to(dt)
    g = (torch.rand(x.shape, dtype=torch.float64) + 0.5).to(dt)
    xt = x.clone().requires_grad_(True)
    y = getattr(F, op)(xt, *attrs.values())
    (dx,) = torch.autograd.grad(y, xt, g)
    for be in _backends(op):
        got = _run(op, be, x, **attrs)
        torch.testing.assert_close(got, y.detach(), rtol=0, atol=0, equal_nan=True, msg=f"{op} {attrs} {be}")
        gbw = _run(f"{op}_backward", be, g, x, **attrs)
        torch.testing.assert_close(gbw, dx, rtol=0, atol=0, equal_nan=True, msg=f"{op} grad {attrs} {be}")
