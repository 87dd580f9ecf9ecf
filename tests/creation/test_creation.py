"""Creation ops beyond the generic tests: the drop-ins against torch (signatures, dtype inference, lengths,
strides, devices, out=, requires_grad, errors), bt.mode() routing factory calls, the custom op under tracers,
the Triton kernels against the reference on every dtype and on edge values."""
from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import baracuda as bc
import baracuda.torch as bt
from baracuda._core.sku import Backend
from baracuda._core.tensors import to_torch
from baracuda.testing import forced_plan, test_device

DEVICE = test_device()
DEV = "cuda" if DEVICE.type == "cuda" else "cpu"
X = torch.randn(4, 6, generator=torch.Generator().manual_seed(0)).to(DEV)
X4 = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(1)).to(DEV)


def _check(name, args, kw, rtol=0.0, atol=0.0):
    """bt.<name>(*args, **kw) returns what torch.<name> returns: type, dtype, shape, strides, device, leaf status
    and (except empty) values."""
    want = getattr(torch, name)(*args, **kw)
    got = getattr(bt, name)(*args, **kw)
    assert type(got) is torch.Tensor
    assert (got.dtype, got.shape, got.device) == (want.dtype, want.shape, want.device), (got, want)
    assert got.stride() == want.stride(), (got.stride(), want.stride())
    assert got.requires_grad == want.requires_grad and got.is_leaf and got._base is None
    if not name.startswith("empty"):
        if want.dtype.is_floating_point or want.dtype.is_complex:
            torch.testing.assert_close(got, want, rtol=rtol, atol=atol, equal_nan=True)
        else:
            assert torch.equal(got, want), (got, want)
    return got


CONSTANT_CASES = [
    ("zeros", (2, 3), {}), ("zeros", ((2, 3),), {}), ("zeros", ([2, 3],), {}), ("zeros", (torch.Size([2, 3]),), {}),
    ("zeros", ((),), {}), ("zeros", (0,), {}), ("zeros", (2, 0, 3), {}), ("zeros", (), {"size": (4,)}),
    ("zeros", (np.int64(3),), {}), ("zeros", (torch.tensor(3),), {}), ("zeros", (2, True), {}),
    ("zeros", (3,), {"dtype": torch.complex128}), ("zeros", (3,), {"dtype": torch.float8_e5m2}),
    ("ones", (3,), {"dtype": torch.int8}), ("ones", (2,), {"dtype": bool}), ("ones", (2,), {"dtype": complex}),
    ("ones", (2, 2), {"dtype": torch.bfloat16, "requires_grad": True}), ("ones", (5,), {"dtype": torch.uint32}),
    ("full", ((2, 3), 7), {}), ("full", ((2,), True), {}), ("full", ((2,), 2.5), {}), ("full", ((2,), 1 + 2j), {}),
    ("full", ((), -1), {"dtype": torch.uint8}), ("full", ((3,), 1.5), {"dtype": torch.int32}),
    ("full", ((3,), -2.7), {"dtype": torch.int64}), ("full", ((2,), float("inf")), {}),
    ("full", ((2,), float("nan")), {"dtype": torch.float16}), ("full", ((2,), 2 ** 62 + 1), {}),
    ("full", ((2,), -65504.0), {"dtype": torch.float16}), ("full", ((2,), 0.1), {"dtype": torch.bfloat16}),
    ("full", ((2,), 448.0), {"dtype": torch.float8_e4m3fn}), ("full", ((2, 2), 0.5), {"dtype": torch.bool}),
    ("full", ((2,), 1 + 0j), {"dtype": torch.float32}), ("full", ((2,), 3 - 1j), {"dtype": torch.complex128}),
    ("full", ((2,), np.float32(1.5)), {}), ("full", (), {"size": [2, 1], "fill_value": 3}),
    ("full", ((2,), 2 ** 32 - 1), {"dtype": torch.uint32}), ("full", ((2,), 1.5), {"requires_grad": True}),
    ("empty", (2, 3), {}), ("empty", ((4,),), {"dtype": torch.int16}),
    ("empty", (2, 3, 4, 5), {"memory_format": torch.channels_last}),
    ("empty", (2, 3, 0, 5), {"memory_format": torch.channels_last}),
    ("empty", (2, 3, 4, 5, 6), {"memory_format": torch.channels_last_3d}),
    ("eye", (3,), {}), ("eye", (2, 3), {}), ("eye", (), {"n": 2, "m": 3}), ("eye", (0,), {}), ("eye", (3, 0), {}),
    ("eye", (4,), {"dtype": torch.bool}), ("eye", (3,), {"dtype": torch.complex64}),
    ("eye", (3, 5), {"dtype": torch.complex128}), ("eye", (3,), {"dtype": torch.float8_e4m3fn}),
]


@pytest.mark.parametrize("name,args,kw", CONSTANT_CASES, ids=lambda v: repr(v)[:40] if not callable(v) else "")
def test_constant_dropins_match_torch(name, args, kw):
    _check(name, args, dict(kw, device=DEV))


_DTYPE_ARGS = {"zeros": ((2, 3),), "ones": ((4,),), "empty": ((3, 2),), "full": ((2, 3), 2.0), "eye": (3, 4),
               "arange": (-2, 9, 3), "linspace": (-3, 9, 7), "logspace": (0, 2, 5), "zeros_like": (X,),
               "ones_like": (X,), "empty_like": (X.t(),), "full_like": (X, 3)}


@pytest.mark.parametrize("name", list(_DTYPE_ARGS))
def test_every_dtype_of_the_matrix(name):
    """Each dtype the spec declares, through the drop-in, against torch (u8 takes arange's negative start
    wrapped, as torch)."""
    for dt in bc.get_spec(name).dtypes:
        tol = 1e-2 if dt in (bc.DType.f16, bc.DType.bf16) else 1e-6 if dt in (bc.DType.f32, bc.DType.c64) else 0.0
        kw = {"dtype": dt.torch} if name.endswith("_like") else {"dtype": dt.torch, "device": DEV}
        _check(name, _DTYPE_ARGS[name], kw, rtol=tol, atol=tol)


ARANGE_CASES = [
    ((5,), {}), ((1, 10), {}), ((1, 10, 3), {}), ((10, 1, -3), {}), ((0, 1, 0.1), {}), ((0.0, 1.0, 0.1), {}),
    ((-1, 1, 0.1), {}), ((0.5, 5), {"dtype": torch.int64}), ((0, 5, 1.5), {"dtype": torch.int64}),
    ((0, 5, 1.5), {"dtype": torch.int32}), ((0, 5, 0.5), {"dtype": torch.int32}), ((-3, 3), {"dtype": torch.uint8}),
    ((0, 300), {"dtype": torch.uint8}), ((1.5, 9.25, 2), {"dtype": torch.float16}), ((), {"end": 5}),
    ((), {"start": 1, "end": 5}), ((1,), {"end": 5, "step": 2}), ((0, 5000), {"dtype": torch.float16}),
    ((0, 300, 7), {"dtype": torch.bfloat16}), ((2 ** 62, 2 ** 62 + 5), {}), ((0, 10 ** 18, 10 ** 17), {}),
    ((np.int64(4),), {}), ((torch.tensor(5),), {}), ((True,), {}), ((0.0, 2.0 ** 62 + 5.0, 2.0 ** 61), {}),
    ((-2.5, 2.5, 0.25), {"dtype": torch.float64}), ((3, 3), {}), ((0, 1, 0.3), {"requires_grad": True}),
    ((-7, 8, 3), {"dtype": torch.int8}), ((5, -4, -2), {"dtype": torch.int16}),
]


@pytest.mark.parametrize("args,kw", ARANGE_CASES, ids=lambda v: repr(v)[:40])
def test_arange_matches_torch(args, kw):
    """Lengths exactly torch's (the int64 formula, ceil in double otherwise), values within an ulp of the dtype
    (torch's f16 / bf16 arange computes in f32 and its vectorized CPU loop rounds each lane differently)."""
    want = torch.arange(*args, **kw)
    tol = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1.2e-7}.get(want.dtype, 0.0)
    _check("arange", args, dict(kw, device=DEV), rtol=tol, atol=tol)


def test_arange_float_step_rounds_like_torch():
    """arange(0, 1, 0.1): ten elements (ceil(1 / 0.1) in double), the last 0.9 (0.1 * 9 in double, then f32)."""
    r = bt.arange(0, 1, 0.1, device=DEV)
    assert r.shape == (10,) and r.dtype == torch.float32
    want = torch.tensor([0.1 * i for i in range(10)], dtype=torch.float64).float()
    assert torch.equal(r.cpu(), want)
    assert bt.arange(0, 1.0000001, 0.1, device=DEV).shape == torch.arange(0, 1.0000001, 0.1).shape == (11,)
    assert bt.arange(1, 2.5, 0.5, dtype=torch.float64, device=DEV).tolist() == [1.0, 1.5, 2.0]


SPACE_CASES = [
    ("linspace", (0, 1, 5), {}), ("linspace", (0, 10, 4), {"dtype": torch.int64}),
    ("linspace", (0, -10, 4), {"dtype": torch.int64}), ("linspace", (0.7, 10.9, 4), {"dtype": torch.int64}),
    ("linspace", (0, 1, 0), {}), ("linspace", (0, 1, 1), {}), ("linspace", (0, 1j, 3), {}),
    ("linspace", (1 + 1j, -2 + 3j, 5), {"dtype": torch.complex128}), ("linspace", (0, float("inf"), 4), {}),
    ("linspace", (-5, 5, 11), {"dtype": torch.float16}), ("linspace", (0, 1), {"steps": 3}),
    ("linspace", (), {"start": 0, "end": 1, "steps": 3}), ("linspace", (3, 40, 50), {"dtype": torch.uint8}),
    ("linspace", (-2.5, 7.25, 1000), {"dtype": torch.float64}), ("linspace", (2, -1, 7), {"dtype": torch.int8}),
    ("linspace", (torch.tensor(0.0), torch.tensor(2.0), 5), {}), ("linspace", (0, 1, 9), {"requires_grad": True}),
    ("linspace", (-1, 1, 33), {"dtype": torch.bfloat16}),
    ("logspace", (0, 2, 3), {}), ("logspace", (0, 2, 3), {"dtype": torch.int64}), ("logspace", (0, 2, 3, 2), {}),
    ("logspace", (0, 2, 3), {"base": 2}), ("logspace", (0, 3, 4), {"base": -2.0, "dtype": torch.int64}),
    ("logspace", (0, 3, 4), {"base": -2.0}), ("logspace", (0, 1j, 3), {}), ("logspace", (0.5, 2, 1), {"dtype": torch.int64}),
    ("logspace", (-1, 1, 5), {"base": 0.5, "dtype": torch.float64}), ("logspace", (0, 1, 0), {}),
    ("logspace", (1 + 1j, 2 - 1j, 4), {"base": -3.0, "dtype": torch.complex128}),
    ("logspace", (-3, 3, 13), {"dtype": torch.float16}),
]


@pytest.mark.parametrize("name,args,kw", SPACE_CASES, ids=lambda v: repr(v)[:40] if not callable(v) else "")
def test_linspace_logspace_match_torch(name, args, kw):
    """Values computed in f64 and rounded once; torch computes linspace in the output dtype (f32 step and products
    for float32, half arithmetic for f16), so floating results agree within a few ulps of that dtype; integer
    results (the same doubles, truncated) exactly."""
    want = getattr(torch, name)(*args, **kw)
    real = torch.empty(0, dtype=want.dtype).real.dtype if want.dtype.is_complex else want.dtype
    tol = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2, torch.float32: 1e-6, torch.float64: 1e-13}.get(real, 0.0)
    _check(name, args, dict(kw, device=DEV), rtol=tol, atol=tol)


def test_linspace_is_symmetric_like_torch():
    """The second half counts back from end (torch's form): the last element is end exactly, and with f64 bounds
    both halves are the float64 values start + i * step and end - (n - 1 - i) * step."""
    n, a, b = 7, -1.3, 2.9
    got = bt.linspace(a, b, n, dtype=torch.float64, device=DEV).cpu().numpy()
    step = (b - a) / (n - 1)
    want = [a + i * step if i < n // 2 else b - (n - 1 - i) * step for i in range(n)]
    assert got.tolist() == want and got[-1] == b


LIKE_INPUTS = {
    "contiguous": lambda: X, "transposed": lambda: X.t(), "sliced": lambda: X[:, ::2], "t-sliced": lambda: X.t()[:, ::2],
    "sliced-t": lambda: X[::2].t(), "expanded": lambda: X[:1].expand(5, 6), "permuted": lambda: X4.permute(0, 2, 3, 1),
    "permuted-sliced": lambda: X4.permute(0, 2, 3, 1)[:, ::2], "channels-last": lambda: X4.contiguous(
        memory_format=torch.channels_last), "row": lambda: X[:1].t(), "empty-cols": lambda: X[:, :0],
    "empty-t": lambda: X[:0].t(), "scalar": lambda: X[0, 0], "ints": lambda: X.long(), "bools": lambda: X > 0,
}


@pytest.mark.parametrize("layout", list(LIKE_INPUTS))
@pytest.mark.parametrize("name", ["zeros_like", "ones_like", "full_like", "empty_like"])
def test_like_dropins_keep_torchs_strides(name, layout):
    x = LIKE_INPUTS[layout]()
    args = (x, 3) if name == "full_like" else (x,)
    _check(name, args, {})
    _check(name, args, {"memory_format": torch.contiguous_format})


@pytest.mark.parametrize("kw", [{"dtype": torch.int32}, {"dtype": torch.complex64}, {"dtype": float},
                                {"memory_format": torch.channels_last}, {"requires_grad": True},
                                {"device": "cpu"}, {"layout": torch.strided}, {"pin_memory": False}],
                         ids=lambda k: repr(k)[:30])
def test_like_keywords(kw):
    _check("zeros_like", (X4,), kw)
    _check("full_like", (X4, 2.5), kw)


@pytest.mark.parametrize("value,dtype", [(7, None), (2.7, torch.int64), (5, torch.bool), (-1, torch.uint8),
                                         (1 + 1j, torch.complex64), (True, torch.float16), (-0.0, None)])
def test_full_like_values(value, dtype):
    x = X.long() if dtype is torch.int64 else X
    _check("full_like", (x, value), {} if dtype is None else {"dtype": dtype})
    _check("full_like", (x,), {"fill_value": value} if dtype is None else {"fill_value": value, "dtype": dtype})


def test_like_of_a_tensor_requiring_grad_is_a_new_leaf():
    """Only the input's shape is read: no autograd edge to it (bt.mode does not fall through for a parameter)."""
    p = torch.nn.Parameter(torch.randn(3, 2, device=DEV))
    for f in (bt.zeros_like, bt.ones_like, bt.empty_like, lambda t: bt.full_like(t, 2.0)):
        r = f(p)
        assert not r.requires_grad and r.grad_fn is None
    with bt.mode() as m:
        r = torch.zeros_like(p) + p
    assert m.routed["torch.zeros_like"] == 1 and not m.fell_through
    r.sum().backward()
    assert torch.equal(p.grad, torch.ones_like(p))


def test_requires_grad_makes_a_leaf():
    for r in (bt.zeros(2, 3, requires_grad=True, device=DEV), bt.arange(0.0, 3.0, requires_grad=True, device=DEV),
              bt.full_like(X, 1.5, requires_grad=True)):
        assert r.requires_grad and r.is_leaf and r.grad_fn is None
        (r * 2).sum().backward()
        assert torch.equal(r.grad, torch.full_like(r, 2))
    with pytest.raises(RuntimeError, match="floating point"):      # torch's own error
        bt.zeros(2, dtype=torch.int64, requires_grad=True, device=DEV)


def test_out_argument():
    o = torch.empty(2, dtype=torch.int64, device=DEV)
    r = bt.zeros(3, out=o)
    assert r is o and o.shape == (3,) and o.dtype == torch.int64 and not o.any()
    o = torch.empty(5, device=DEV)
    assert bt.arange(3.5, out=o) is o and o.tolist() == [0.0, 1.0, 2.0, 3.0]
    o = torch.empty(2, dtype=torch.int64, device=DEV)
    assert bt.full((2,), 3.5, out=o).tolist() == [3, 3]            # out's dtype, as torch
    o = torch.empty(3, device=DEV)
    assert bt.linspace(0, 1, 3, out=o) is o and o.tolist() == [0.0, 0.5, 1.0]
    assert bt.eye(2, out=o) is o and o.shape == (2, 2)
    with pytest.raises(bc.DTypeMismatchError, match="argument 'out'"):
        bt.zeros(3, out=torch.empty(3, device=DEV), dtype=torch.float64)
    o = torch.empty(3, device=DEV)
    assert bt.ones(3, out=o, requires_grad=True).requires_grad


def test_default_dtype_and_device():
    prev = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        for args, want in [(("zeros", 2), torch.float64), (("full", (2,), 1.5), torch.float64),
                           (("full", (2,), 1j), torch.complex128), (("full", (2,), 1), torch.int64),
                           (("arange", 0.0, 1.0), torch.float64), (("arange", 3), torch.int64),
                           (("linspace", 0, 1, 3), torch.float64), (("logspace", 0, 1j, 3), torch.complex128),
                           (("eye", 2), torch.float64)]:
            got = getattr(bt, args[0])(*args[1:])
            assert got.dtype == want == getattr(torch, args[0])(*args[1:]).dtype, args
    finally:
        torch.set_default_dtype(prev)
    with torch.device(DEV):     # torch's default-device context: the drop-ins read torch.get_default_device()
        assert bt.zeros(2).device == torch.zeros(2).device
    torch.set_default_device("meta")
    try:
        with pytest.raises(bc.UnsupportedError, match="device meta"):
            bt.zeros(2)
        with bt.mode() as m:    # falls through to torch, which makes the meta tensor
            assert torch.zeros(2).device.type == "meta"
        assert m.fell_through["torch.zeros"] == 1
    finally:
        torch.set_default_device(None)


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu"), None] + (["cuda", 0, "cuda:0"] if DEV == "cuda" else []),
                         ids=repr)
def test_device_spellings(device):
    for name, args in [("zeros", (2,)), ("arange", (3,)), ("eye", (2,)), ("linspace", (0, 1, 3))]:
        _check(name, args, {"device": device})
    _check("zeros_like", (X,), {"device": device})


ERROR_CASES = [
    ("full", ((2,), 300), {"dtype": torch.uint8}), ("full", ((2,), 70000.0), {"dtype": torch.float16}),
    ("full", ((2,), float("nan")), {"dtype": torch.int32}), ("full", ((2,), 1 + 2j), {"dtype": torch.float32}),
    ("full", ((2,), float("inf")), {"dtype": torch.float8_e4m3fn}), ("full", ((2,), -0.5), {"dtype": torch.uint8}),
    ("full", (2, 1.0), {}), ("full", ((2,), "a"), {}), ("full", ((2,), torch.tensor([1.0])), {}),
    ("zeros", (-1,), {}), ("zeros", (2.0,), {}), ("zeros", ((2,), 3), {}), ("zeros", (2,), {"dtype": "float32"}),
    ("arange", (0, 1, 0), {}), ("arange", (1, 0), {}), ("arange", (0, float("inf")), {}), ("arange", (1j,), {}),
    ("arange", (0, 5, 0.5), {"dtype": torch.int64}), ("arange", (10 ** 19,), {}), ("arange", (0.0, 1e30, 1e-30), {}),
    ("arange", (3,), {"dtype": torch.bool}), ("arange", (1, 5, 2, torch.float64), {}),
    ("linspace", (0, 1, -1), {}), ("linspace", (0, 1, 3.0), {}), ("linspace", (0, 1), {}),
    ("linspace", (0, 300, 4), {"dtype": torch.uint8}), ("linspace", (0, 1, 3), {"dtype": torch.bool}),
    ("logspace", (0, 1, 3), {"base": 1j}), ("eye", (-1,), {}), ("eye", (2, -1), {}), ("eye", (2.0,), {}),
    ("eye", (2, None), {}), ("empty", (2, 3), {"memory_format": torch.channels_last}),
    ("empty", (2,), {"memory_format": torch.preserve_format}), ("zeros_like", (X, 3), {}),
    ("full_like", (X,), {}), ("full_like", (X, 300), {"dtype": torch.uint8}),
]


@pytest.mark.parametrize("name,args,kw", ERROR_CASES, ids=lambda v: repr(v)[:40] if not callable(v) else "")
def test_errors_where_torch_errors(name, args, kw):
    """What torch refuses the drop-in refuses (a baracuda error or torch's TypeError); under bt.mode() the call
    falls through and torch raises its own error."""
    if name == "arange" and kw.get("dtype") == torch.int64 and tuple(map(int, torch.__version__.split(".")[:2])) < (2, 13):
        pytest.skip("torch 2.11 dies of SIGFPE on arange(0, 5, 0.5, dtype=int64) (the step truncates to 0)")
    with pytest.raises(Exception) as torch_err:
        getattr(torch, name)(*args, **kw)
    with pytest.raises((bc.BaracudaError, TypeError)):
        getattr(bt, name)(*args, **kw)
    with bt.mode() as m:
        with pytest.raises(torch_err.type):
            getattr(torch, name)(*args, **kw)
    # (arguments torch's parser rejects never reach the mode: a TypeError before any __torch_function__)
    assert not m.routed and m.fell_through[f"torch.{name}"] == (torch_err.type is not TypeError)


def test_unsupported_arguments_fall_through_under_mode():
    with bt.mode() as m:
        a = torch.zeros(2, device="meta")
        b = torch.zeros(2, 2, layout=torch.sparse_coo)
        c = torch.empty(2, dtype=torch.uint16)
        d = torch.zeros(2, 3)
        e = torch.full((2,), np.bool_(True))      # (torch: a float32 tensor, its own reading of NumPy's bool)
    assert a.device.type == "meta" and b.layout == torch.sparse_coo and c.dtype == torch.uint16
    assert m.routed == {"torch.zeros": 1} and m.fell_through == {"torch.zeros": 2, "torch.empty": 1, "torch.full": 1}
    assert torch.equal(d, torch.zeros(2, 3)) and torch.equal(e, torch.full((2,), np.bool_(True)))


def test_mode_routes_factory_calls():
    """Factory calls have no tensor argument; the TorchFunctionMode sees them (types = ()) and routes them."""
    with bt.mode(strict=True) as m:
        t = [torch.zeros(2, 3, device=DEV), torch.ones(4, dtype=torch.int32, device=DEV),
             torch.full((2, 2), float("-inf"), device=DEV), torch.empty(3, device=DEV),
             torch.arange(6, device=DEV), torch.linspace(0, 1, 5, device=DEV), torch.logspace(0, 1, 3, device=DEV),
             torch.eye(3, device=DEV), torch.zeros_like(X), torch.ones_like(X), torch.full_like(X, 2),
             torch.empty_like(X)]
    names = ["zeros", "ones", "full", "empty", "arange", "linspace", "logspace", "eye", "zeros_like", "ones_like",
             "full_like", "empty_like"]
    assert m.routed == {f"torch.{n}": 1 for n in names}
    assert t[4].tolist() == list(range(6)) and torch.equal(t[2], torch.full((2, 2), float("-inf"), device=DEV))


def test_causal_mask_pattern_under_mode():
    """A transformer's causal mask: full of the dtype's minimum, triu, arange positions."""
    L = 5
    with bt.mode() as m:
        mask = torch.full((L, L), torch.finfo(torch.float16).min, dtype=torch.float16, device=DEV).triu(1)
        pos = torch.arange(L, device=DEV).unsqueeze(0)
    want = torch.full((L, L), torch.finfo(torch.float16).min, dtype=torch.float16, device=DEV).triu(1)
    assert torch.equal(mask, want) and pos.tolist() == [list(range(L))]
    assert m.routed["torch.full"] == 1 and m.routed["torch.arange"] == 1


def test_under_tracers_the_create_custom_op():
    """With a dispatch mode, make_fx or Dynamo active a creation call goes through baracuda::create (the device as
    its argument): the same values, fake tensors under a fake mode, one node in a traced graph."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    with FakeTensorMode():
        f = bt.arange(2, 11, 3, device=DEV)
        assert f.shape == (3,) and f.dtype == torch.int64 and f.device.type == DEV
    g = make_fx(lambda x: bt.full((2,), 2.5, device=DEV) + x)(torch.ones(2, device=DEV))
    assert "baracuda.create" in g.code
    assert torch.equal(g(torch.ones(2, device=DEV)), torch.full((2,), 3.5, device=DEV))
    torch._dynamo.reset()
    c = torch.compile(lambda x: bt.linspace(0, 1, 5, device=DEV) * x + bt.zeros_like(x), fullgraph=True,
                      backend="aot_eager")
    assert torch.equal(c(torch.full((5,), 2.0, device=DEV)), torch.linspace(0, 2, 5, device=DEV))
    # no device argument: the default device (torch.get_default_device() is not traceable; the factory reads it
    # off a traced empty tensor)
    torch._dynamo.reset()
    with torch.device(DEV):
        c = torch.compile(lambda x: bt.arange(5) * x + bt.ones(5, dtype=torch.float64), fullgraph=True,
                          backend="aot_eager")
        got = c(torch.full((5,), 2.0, device=DEV, dtype=torch.float64))
    assert got.device.type == DEV and torch.equal(got.cpu(), torch.arange(5) * 2.0 + 1.0)


class _NoLookups(dict):
    """A dtype cache that fails any lookup: what must not be consulted while Dynamo traces."""

    def __getitem__(self, key):
        raise AssertionError(f"dtype cache looked up with {key!r}")


def test_dtype_attributes_encode_by_name_never_through_the_dtype_cache(monkeypatch):
    """Dynamo (torch 2.11) cannot hash a NumPy dtype: the custom op's attribute encoding of a torch dtype (run while
    tracing) looks it up by torch's name in a string-keyed table, and NumPy dtypes never become keys of the
    converted-dtype cache a traced dtype lookup would read."""
    from baracuda._core import dtypes
    from baracuda.torch._schema import decode_attrs, encode_attrs

    for x in (np.dtype("float32"), np.dtype("int16"), np.float64, "bf16", torch.float16):
        dtypes.as_dtype(x)
    assert not [k for k in dtypes._SEEN if isinstance(k, np.dtype)]
    assert dtypes.as_dtype(np.dtype("float32")) is bc.DType.f32       # (still converted: by _BY_NUMPY)
    monkeypatch.setattr(dtypes, "_SEEN", _NoLookups())
    attrs = {"start": 0, "end": 1, "steps": 5, "dtype": torch.float16, "other": (torch.int8, torch.bfloat16)}
    dec = decode_attrs.__wrapped__(encode_attrs(attrs))
    assert dec["dtype"] is bc.DType.f16 and dec["other"] == (bc.DType.i8, bc.DType.bf16)
    with pytest.raises(TypeError, match="unknown dtype name 'uint16'"):
        encode_attrs({"dtype": torch.uint16})


def test_compiled_creation_with_a_dtype_after_numpy_dtypes_were_converted():
    """torch.compile(fullgraph=True) of a creation call with dtype= after NumPy dtypes went through as_dtype."""
    from baracuda._core.dtypes import as_dtype

    as_dtype(np.dtype("float64"))
    torch._dynamo.reset()
    c = torch.compile(lambda x: bt.linspace(0, 1, 5, dtype=torch.float64, device=DEV) * x + bt.zeros_like(x),
                      fullgraph=True, backend="aot_eager")
    x = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(2)).to(DEV) + 0.5
    torch.testing.assert_close(c(x), torch.linspace(0, 1, 5, dtype=torch.float64, device=DEV) * x, rtol=1e-15, atol=0)


# -- the kernels -----------------------------------------------------------------------------------------------
BACKENDS = [Backend.REFERENCE, Backend.TRITON]


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@pytest.mark.parametrize("value,dtype", [(-0.0, "f32"), (float("nan"), "bf16"), (float("-inf"), "f16"),
                                         (-2 ** 63, "i64"), (2 ** 32 - 1, "u32"), (-1, "u8"), (57344.0, "f8e5m2"),
                                         (-448.0, "f8e4m3"), (1e-320, "f64"), (complex(-0.0, float("inf")), "c64"),
                                         (complex(1.5, -2.25), "c128"), (True, "bool"), (-129.5, "i16")])
def test_full_bit_patterns(backend, value, dtype):
    """Every dtype's edge values (signed zero, NaN, infinities, subnormals, extremes) land bit-exact, as torch."""
    d = bc.Descriptor.make("full", shape=(3, 5), value=value, dtype=dtype)
    p = forced_plan(d, DEVICE, backend)
    got = to_torch(p.run()).cpu()
    want = torch.full((3, 5), value, dtype=d.outputs[0].dtype.torch)
    words = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64, 16: torch.int64}[want.element_size()]
    flat = (lambda t: torch.view_as_real(t) if t.is_complex() else t)
    assert torch.equal(flat(got).contiguous().view(words), flat(want).contiguous().view(words))


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_kernels_write_strided_out(backend):
    """Plan.run(out=) of a strided view (every other row of a buffer): the values land in the view, the other
    rows are untouched."""
    if backend == Backend.REFERENCE and DEV == "cuda":
        pytest.skip("the reference backend writes host arrays")
    for op, attrs in [("full", {"shape": (3, 4), "value": 2.5}), ("arange", {"end": 12.0}),
                      ("linspace", {"start": 0, "end": 1, "steps": 12}), ("eye", {"n": 3, "m": 4}),
                      ("ones", {"shape": (5,)})]:
        d = bc.Descriptor.make(op, **attrs, dtype="f32")
        p = forced_plan(d, DEVICE, backend)
        shape = d.outputs[0].shape
        buf = torch.full((2 * shape[0],) + shape[1:], -7.0, device=DEV)
        out = buf[::2]
        p.run(out=out.numpy() if backend == Backend.REFERENCE else out)
        want = p.run()
        assert torch.equal(out.cpu(), torch.as_tensor(np.asarray(want.cpu() if DEV == "cuda" else want))), op
        assert buf[1::2].eq(-7).all(), op


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_zero_operand_plans_on_this_device(backend):
    """The Plan API: no operands, so the device's array type (NumPy on the CPU, torch on CUDA), zero-size too."""
    for attrs in ({"shape": (0, 3), "value": 1.0}, {"shape": (2,), "value": 1.0}):
        out = forced_plan(bc.Descriptor.make("full", **attrs), DEVICE, backend).run()
        assert isinstance(out, torch.Tensor) == (DEV == "cuda")
        assert tuple(out.shape) == attrs["shape"]


def test_integer_linspace_truncates_like_torch():
    """Integer linspace / logspace truncate the double toward zero (torch's CPU kernel), also negative values."""
    for args in [(-10, 10, 7), (10, -10, 8), (-1, 1, 5), (0, 100, 3)]:
        want = torch.linspace(*args, dtype=torch.int32)
        got = bt.linspace(*args, dtype=torch.int32, device=DEV).cpu()
        assert torch.equal(got, want), (args, got, want)
    vals = [math.trunc(3 ** (-1 + 2 * i / 4)) for i in range(5)]
    assert bt.logspace(-1, 1, 5, base=3, dtype=torch.int64, device=DEV).tolist() == vals


@pytest.mark.parametrize("value,dtype", [(-1, torch.uint8), (2.7, torch.int32), (-2.7, torch.int64), (True, torch.float32),
                                         (0.5, torch.bool), (65504.0, torch.float16), (2 ** 62 + 1, torch.int64),
                                         (-0.0, torch.float64)])
def test_fill_converts_the_value_like_torch(value, dtype):
    """torch.fill (layout's fill op) shares the creation ops' scalar conversion (creation.to_scalar)."""
    x = torch.zeros(3, dtype=dtype, device=DEV)
    want, got = torch.fill(x, value), bt.fill(x, value)
    assert got.dtype == want.dtype and torch.equal(got, want)
    assert torch.equal(got.view(torch.int64) if dtype is torch.float64 else got,
                       want.view(torch.int64) if dtype is torch.float64 else want)     # (-0.0 keeps its sign)


# -- integer linspace / logspace: torch's CPU kernel and torch's CUDA kernel ---------------------------------------
def _torch_cpu_int_space(op, s, e, n, base=10.0):
    """NumPy re-implementation of torch's CPU kernel (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp and
    RangeFactories.cpp): a double step, start + step * i for i < n // 2, else end - step * (n - 1 - i), in double;
    logspace: pow(base, that) in double; converted toward zero."""
    if n == 1:
        v = np.array([float(s)])
    else:
        step = (float(e) - float(s)) / (n - 1)
        v = np.array([s + step * i if i < n // 2 else e - step * (n - 1 - i) for i in range(n)], np.float64)
    if op == "logspace":
        v = np.power(base, v)
    return np.trunc(v).astype(np.int64)


def _f32_round(q: Fraction) -> np.float32:
    """The exact rational q rounded once to float32 (to nearest, ties to even)."""
    c = np.float32(float(q))
    cands = [np.nextafter(c, np.float32(-np.inf)), c, np.nextafter(c, np.float32(np.inf))]
    best = min(cands, key=lambda x: (abs(Fraction(float(x)) - q), int(np.asarray(x).view(np.int32)) & 1))
    return np.float32(best)


def _torch_cuda_int_space(op, s, e, n, base=10.0):
    """NumPy re-implementation of torch's CUDA kernel (aten/src/ATen/native/cuda/RangeFactories.cu, integral
    types): float step = (float(end) - float(start)) / (steps - 1) (logspace: float(end - start) / (steps - 1));
    value i = start + step * i for i < steps / 2, else end - step * (steps - i - 1), in float with nvcc's fused
    multiply-add (emulated exactly with fractions: one rounding to float32); logspace: powf(float(base), value);
    converted toward zero."""
    f32 = np.float32
    if n == 1:
        return np.array([math.trunc(s if op == "linspace" else base ** s)], np.int64)
    diff = f32(f32(e) - f32(s)) if op == "linspace" else f32(e - s)
    step = f32(diff / f32(n - 1))
    out = []
    for i in range(n):
        if i < n // 2:
            q = Fraction(float(f32(s))) + Fraction(float(step)) * Fraction(float(f32(i)))
        else:
            q = Fraction(float(f32(e))) - Fraction(float(step)) * Fraction(float(f32(n - 1 - i)))
        v = _f32_round(q)
        if op == "logspace":       # powf correctly rounded (CUDA's is within 2 ulp of it)
            v = _f32_round(Fraction(float(np.power(float(f32(base)), float(v)))))
        out.append(math.trunc(float(v)))
    return np.array(out, np.int64)


def _int_space_cases(seed, count=40):
    rng = np.random.default_rng(seed)
    cases = [("linspace", 16777217, 16777219, 3, "i64"), ("linspace", 0, 3, 5, "i64"), ("linspace", 0, 10, 4, "i32"),
             ("linspace", 2 ** 40 + 3, -2 ** 35 + 1, 9, "i64"), ("linspace", 3, 40, 50, "u8"),
             ("linspace", 2, -1, 7, "i8"), ("linspace", -100, 99, 1, "i16"), ("logspace", 0, 3, 5, "i64"),
             ("logspace", 1, 4, 7, "i32"), ("logspace", 0, 9, 13, "i64")]
    for _ in range(count):
        lo, hi = sorted(int(v) for v in rng.integers(-2 ** 30, 2 ** 30, 2))
        cases.append(("linspace", int(rng.integers(-2 ** 30, 2 ** 30)), int(rng.integers(-2 ** 30, 2 ** 30)),
                      int(rng.integers(2, 300)), "i64"))
        cases.append(("linspace", int(rng.integers(-99, 99)), int(rng.integers(-99, 99)), int(rng.integers(2, 60)),
                      "i32"))
        cases.append(("logspace", int(rng.integers(-2, 4)), int(rng.integers(0, 6)), int(rng.integers(2, 20)), "i64"))
    return cases


def _ours(op, s, e, n, dt, kernel, backend, base=None):
    extra = {} if base is None else {"base": base}
    d = bc.Descriptor.make(op, start=s, end=e, steps=n, dtype=dt, kernel=kernel, **extra)
    p = forced_plan(d, DEVICE, backend)
    assert not isinstance(p, str), p
    return to_torch(p.run()).cpu().numpy().astype(np.int64)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_integer_linspace_logspace_follow_torchs_cpu_kernel(backend):
    """kernel='cpu' (a CPU drop-in's): torch's CPU arithmetic (double), against its NumPy re-implementation of the
    kernel's scalar loop, and against torch itself on the fixed cases (torch's vectorized loop computes a chunk of
    8 / 16 lanes as trunc(first) + j * step: a lane that crosses the halfway point or truncates differently can
    differ by 1 from the scalar formula, e.g. linspace(-71, 63, 57, dtype=int32)[28] is -3, not -4 -- and the chunk
    width is the CPU's vector width, so that is left out here)."""
    for k, (op, s, e, n, dt) in enumerate(_int_space_cases(1, 15)):
        want = _torch_cpu_int_space(op, s, e, n).astype(bc.as_dtype(dt).numpy).astype(np.int64)
        got = _ours(op, s, e, n, dt, "cpu", backend)
        assert np.array_equal(got, want), (op, s, e, n, dt, got, want)
        if k < 10:
            t = getattr(torch, op)(s, e, n, dtype=bc.as_dtype(dt).torch).numpy().astype(np.int64)
            assert np.array_equal(got, t), (op, s, e, n, dt, got, t)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
def test_integer_linspace_logspace_follow_torchs_cuda_kernel(backend):
    """kernel='cuda' (a CUDA drop-in's): torch's CUDA arithmetic (float32 step and values, one FMA rounding, powf),
    against its NumPy re-implementation; it differs from the CPU kernel's (16777217 is no float32)."""
    differ = 0
    for op, s, e, n, dt in _int_space_cases(2, 15):
        want = _torch_cuda_int_space(op, s, e, n).astype(bc.as_dtype(dt).numpy).astype(np.int64)
        got = _ours(op, s, e, n, dt, "cuda", backend)
        assert np.array_equal(got, want), (op, s, e, n, dt, got, want)
        differ += not np.array_equal(got, _ours(op, s, e, n, dt, "cpu", backend))
    assert differ >= 3       # (the two kernels really differ: large bounds, float32 steps)
    assert list(_ours("linspace", 16777217, 16777219, 3, "i64", "cuda", backend)) == [16777216, 16777218, 16777220]


def test_space_dropins_pick_the_kernel_of_their_device():
    """The drop-ins ask for the arithmetic of the device the result is made on; floating results share one
    descriptor whatever the kernel (their values are the float64 ones either way)."""
    from baracuda.ops import _factory as F

    for op in ("linspace", "logspace"):
        fn = F.space_dropin(op)
        assert fn(0, 3, 5, dtype=torch.int64, device="cuda:0")[1]["kernel"] == "cuda"
        assert fn(0, 3, 5, dtype=torch.int64, device="cpu")[1]["kernel"] == "cpu"
    d = bc.Descriptor.make("linspace", start=0, end=1, steps=5, dtype="f32", kernel="cuda")
    assert d == bc.Descriptor.make("linspace", start=0, end=1, steps=5, dtype="f32")
    with pytest.raises(bc.InvalidProblemError, match="linspace: argument 'kernel'"):
        bc.Descriptor.make("linspace", start=0, end=1, steps=5, kernel="tpu")
    if DEV == "cpu":
        torch.testing.assert_close(bt.linspace(16777217, 16777219, 3, dtype=torch.int64),
                                   torch.linspace(16777217, 16777219, 3, dtype=torch.int64), rtol=0, atol=0)
