"""baracuda.torch.lerp / clamp / clip / clamp_min / clamp_max: a number or a tensor operand, routed by kind."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

import baracuda as bc  # noqa: E402
import baracuda.torch as bt  # noqa: E402
from baracuda.testing import test_device as _test_device  # noqa: E402

DEVICE = "cuda" if _test_device().type == "cuda" else "cpu"
F64 = dict(dtype=torch.float64, device=DEVICE)


def _same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def _fw_bw(fn_ours, fn_torch, *xs):
    """Forward and the gradient of every floating input against torch (float64)."""
    a = [x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in xs]
    b = [x.detach().clone().requires_grad_(x.is_floating_point()) if isinstance(x, torch.Tensor) else x for x in xs]
    ya, yb = fn_ours(*a), fn_torch(*b)
    _same(ya, yb)
    g = torch.randn_like(yb)
    (ya * g).sum().backward()
    (yb * g).sum().backward()
    for x, y in zip(a, b):
        if isinstance(x, torch.Tensor) and x.requires_grad:
            torch.testing.assert_close(x.grad, y.grad, rtol=1e-12, atol=1e-12)


def test_lerp_number_and_tensor_weight_with_grads():
    a, b = torch.randn(3, 5, **F64), torch.randn(5, **F64)
    _fw_bw(lambda x, y: bt.lerp(x, y, 0.3), lambda x, y: torch.lerp(x, y, 0.3), a, b)
    w = torch.rand(3, 1, **F64)
    _fw_bw(bt.lerp, torch.lerp, a, b, w)                        # broadcasting over all three operands
    _fw_bw(lambda x, y, z: bt.lerp(x, end=y, weight=z), lambda x, y, z: torch.lerp(x, end=y, weight=z), a, b, w)


def test_lerp_zero_dim_weight_takes_the_input_dtype():
    a, b = torch.randn(4, device=DEVICE), torch.randn(4, device=DEVICE)
    w = torch.tensor(0.25, **F64)   # torch treats a 0-d weight as a scalar: any dtype
    _same(bt.lerp(a, b, w), torch.lerp(a, b, w))
    with pytest.raises(TypeError, match="expected dtype f32"):   # a dimensioned one must match (torch: too)
        bt.lerp(a, b, torch.rand(4, **F64))


@pytest.mark.parametrize("bounds", ["both", "min", "max"])
def test_clamp_tensor_bounds_match_torch(bounds):
    x = torch.randn(3, 5, **F64) * 2
    lo, hi = torch.randn(5, **F64) - 0.5, torch.randn(3, 1, **F64) + 0.5
    kw = {"both": dict(min=lo, max=hi), "min": dict(min=lo), "max": dict(max=hi)}[bounds]
    for ours, theirs in ((bt.clamp, torch.clamp), (bt.clip, torch.clip)):
        _same(ours(x, **kw), theirs(x, **kw))
    _fw_bw(lambda *t: bt.clamp(t[0], **dict(zip(kw, t[1:]))),   # gradients to x and to each tensor bound
           lambda *t: torch.clamp(t[0], **dict(zip(kw, t[1:]))), x, *kw.values())


def test_clamp_promotion_and_number_bounds():
    i = torch.arange(-3, 4, device=DEVICE)
    for kw in (dict(min=torch.tensor(1.5, device=DEVICE)), dict(min=torch.full((7,), -1.25, device=DEVICE),
                                                               max=torch.tensor(2, device=DEVICE)),
               dict(min=-1, max=2), dict(max=0.5)):
        _same(bt.clamp(i, **kw), torch.clamp(i, **kw))
    x = torch.randn(6, device=DEVICE)
    for t in (torch.tensor(0.1, **F64), 0.1, torch.zeros(6, dtype=torch.int32, device=DEVICE)):
        _same(bt.clamp_min(x, t), torch.clamp_min(x, t))
        _same(bt.clamp_max(x, t), torch.clamp_max(x, t))


def test_clamp_errors_like_torch():
    x = torch.randn(3, device=DEVICE)
    for call in (lambda f: f(x), lambda f: f(x, None, None), lambda f: f(x, min=None)):
        with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
            call(bt.clamp)
        with pytest.raises(RuntimeError, match="At least one of 'min' or 'max' must not be None"):
            call(torch.clamp)
    with pytest.raises(TypeError, match="invalid combination of arguments"):   # a tensor and a number
        bt.clamp(x, torch.zeros(3, device=DEVICE), 1.0)
    with pytest.raises(TypeError):
        torch.clamp(x, torch.zeros(3, device=DEVICE), 1.0)


def test_out_argument():
    x = torch.randn(3, 5, **F64)
    lo = torch.zeros(5, **F64)
    for ours, theirs, args in ((bt.clamp, torch.clamp, (x, lo, lo + 1)), (bt.clamp, torch.clamp, (x, -0.5, 0.5)),
                               (bt.clamp_min, torch.clamp_min, (x, lo)), (bt.lerp, torch.lerp, (x, lo, 0.75))):
        o1, o2 = torch.empty(0, **F64), torch.empty(0, **F64)
        assert ours(*args, out=o1) is o1
        theirs(*args, out=o2)
        _same(o1, o2)
    o = torch.empty(0, dtype=torch.int64, device=DEVICE)
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        bt.clamp(torch.arange(4, device=DEVICE), min=torch.tensor(1.0, device=DEVICE), out=o)
    with pytest.raises(RuntimeError, match="don't support automatic differentiation"):
        bt.clamp(x.clone().requires_grad_(), min=lo, out=torch.empty(3, 5, **F64))


def test_published_names():
    for name, op in (("lerp", "lerp_tensor"), ("clamp", "clamp_tensor"), ("clip", "clamp_tensor"),
                     ("clamp_min", "clamp_min"), ("clamp_max", "clamp_max")):
        assert bt.PUBLISHED[name] == op and name in bt.__all__
    assert "min T" in bt.clamp.__doc__ and bt.clamp.__name__ == "clamp"


def test_number_bound_keeps_double_precision():
    x = torch.randn(64, **F64)
    _same(bt.clamp_min(x, 0.1), torch.clamp_min(x, 0.1))   # 0.1 is not first rounded to f32
    _same(bt.clamp_max(x, -0.3), torch.clamp_max(x, -0.3))


def test_python_float_operand_keeps_double_precision_in_ew_dropins():
    x = torch.randn(64, **F64)
    _same(bt.div(x, 0.1), torch.div(x, 0.1))


@pytest.mark.parametrize("exponent", [2, 3, 0.5, -1.5])
def test_pow_python_exponent_forward_and_backward(exponent):
    """``bt.pow(x, 2)`` once ran forward and failed in backward (the int exponent became an i64 0-d operand whose
    gradient the backward could not form); a Python exponent is now the attribute of ``pow_scalar``."""
    x = torch.rand(3, 4, **F64) + 0.25
    _fw_bw(lambda a: bt.pow(a, exponent), lambda a: torch.pow(a, exponent), x)


def test_pow_number_base_tensor_exponent_and_mode():
    x = torch.rand(5, **F64) + 0.25
    _fw_bw(lambda a: bt.pow(2, a), lambda a: torch.pow(2, a), x)
    with bt.mode() as m:
        _fw_bw(lambda a: a ** 2, lambda a: torch.pow(a, 2), x)
    assert m.routed


def test_pow_integer_tensors_like_torch():
    xi = torch.arange(-3, 4, device=DEVICE)
    _same(bt.pow(xi, 3), torch.pow(xi, 3))
    _same(bt.pow(xi.abs(), 0.5), torch.pow(xi.abs(), 0.5))
    with pytest.raises(Exception, match="exponent"):
        bt.pow(xi, -1)


@pytest.mark.parametrize("fn", ["max", "min"])
def test_max_min_with_a_tensor_other_are_elementwise(fn):
    ours, theirs = getattr(bt, fn), getattr(torch, fn)
    a, b = torch.randn(3, 5, **F64), torch.randn(5, **F64)
    b[1] = a[0, 1]                                                                  # a tie: torch splits the gradient
    _fw_bw(ours, theirs, a, b)
    _fw_bw(lambda x, y: ours(x, other=y), lambda x, y: theirs(x, other=y), a, b)
    i = torch.randint(-5, 5, (4,), device=DEVICE)
    f = torch.randn(3, 1, device=DEVICE)
    _same(ours(i, f), theirs(i, f))                                                  # promotion and broadcast
    o1, o2 = torch.empty(0, **F64), torch.empty(0, **F64)
    assert ours(a, b, out=o1) is o1
    theirs(a, b, out=o2)
    _same(o1, o2)
    # the reduction forms are unchanged: torch.return_types with indices
    for args, kw in (((a,), {}), ((a, 1), {}), ((a,), {"dim": 0, "keepdim": True})):
        got, want = ours(*args, **kw), theirs(*args, **kw)
        assert type(got) is type(want)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert torch.equal(g, w)
    with bt.mode():                                                                  # Tensor.max(other) routes too
        _same(a.max(b) if fn == "max" else a.min(b), theirs(a, b))
    assert bt.PUBLISHED[fn] == fn


def test_repeated_positional_calls_take_the_remembered_route_with_their_own_values():
    """A full positional call's route is remembered per kinds of its arguments: the next call of those kinds runs it
    with its own values (an int then a float exponent, another bound), and kinds whose route converts an operand
    (a number base, a 0-d weight cast to the input's dtype) keep the full path; every call agrees with torch."""
    x = torch.rand(4, 6, **F64) + 0.5
    lo, hi = torch.full((6,), 0.7, **F64), torch.full((4, 1), 1.2, **F64)
    for _ in range(2):
        for e in (2, 3, 0.5, -1.5):
            _same(bt.pow(x, e), torch.pow(x, e))
        _same(bt.pow(2.0, x), torch.pow(2.0, x))
        _same(bt.pow(x, x), torch.pow(x, x))
        _same(bt.clamp(x, 0.8, 1.1), torch.clamp(x, 0.8, 1.1))
        _same(bt.clamp(x, lo, hi), torch.clamp(x, lo, hi))
        _same(bt.clamp(x, None, hi), torch.clamp(x, None, hi))
        w0 = torch.tensor(0.25, dtype=torch.float32, device=DEVICE)     # a 0-d weight takes the input's dtype
        _same(bt.lerp(x, x.flip(0), w0), torch.lerp(x, x.flip(0), w0))
        _same(bt.lerp(x, x.flip(0), 0.75), torch.lerp(x, x.flip(0), 0.75))
    xi = torch.arange(1, 7, device=DEVICE)
    _same(bt.pow(xi, 2), torch.pow(xi, 2))       # an int tensor with an int exponent, then a float one
    _same(bt.pow(xi, 2.5), torch.pow(xi, 2.5))
    with pytest.raises(RuntimeError):
        bt.clamp(x, None, None)


def test_pow_with_bool_operands_follows_torch():
    """torch.pow with a bool number or tensor (the pow ops take no bool): torch's values and dtypes -- x ** True is
    x, True ** x is 1 ** x, b ** 2 int64, b ** 2.0 the default float, b ** True bool, x_f32 ** b f32, int ** b
    int64 -- also with out= and under bt.mode() (x.pow(True), x ** b); bool ** bool tensors raise as in torch."""
    x = torch.rand(3, 4, device=DEVICE) + 0.5
    b = torch.rand(3, 4, device=DEVICE) > 0.5
    i = torch.arange(1, 13, device=DEVICE).reshape(3, 4)
    cases = [(True, x), (False, x), (b, True), (b, False), (b, 2), (b, 2.0), (i, True), (x, True), (x, False),
             (True, i), (x, b), (b, x), (i, b)]
    for a, e in cases:
        want = torch.pow(a, e)
        got = bt.pow(a, e)
        assert got.dtype == want.dtype and got.shape == want.shape, (type(a), type(e))
        assert torch.equal(got, want), (a, e)
    out = torch.empty(3, 4, device=DEVICE)
    assert bt.pow(x, True, out=out) is out and torch.equal(out, x)
    with bt.mode():
        assert torch.equal(x.pow(True), x) and torch.equal(x ** b, torch.pow(x, b.to(x.dtype)))
    with pytest.raises((RuntimeError, bc.BaracudaError)):
        bt.pow(b, b)
    xg = x.clone().requires_grad_()
    bt.pow(xg, b).sum().backward()      # (torch's own backward raises here: it subtracts 1 from the bool exponent)
    torch.testing.assert_close(xg.grad, torch.where(b, 1.0, 0.0))


def test_clamp_and_lerp_with_bool_operands_follow_torch():
    """A bool bound or weight is 1 or 0 and a bool input takes torch's result dtype (clamp(b, 0, 1): int64,
    clamp(b, 0.5): the default float); an all-bool clamp raises as torch's does."""
    x = torch.rand(3, 4, device=DEVICE) * 3
    b = torch.rand(3, 4, device=DEVICE) > 0.5
    i = torch.arange(-5, 7, device=DEVICE).reshape(3, 4)
    for fn, args in (("clamp", (x, True)), ("clamp", (x, False, True)), ("clamp", (b, 0, 1)), ("clamp", (b, 0.5)),
                     ("clamp", (i, True)), ("clip", (b, 0, 1)), ("lerp", (x, x * 2, True)),
                     ("lerp", (x, x * 2, False))):
        want, got = getattr(torch, fn)(*args), getattr(bt, fn)(*args)
        assert got.dtype == want.dtype and torch.equal(got, want), (fn, args)
    with pytest.raises((RuntimeError, bc.BaracudaError)):
        bt.clamp(b, False, True)
