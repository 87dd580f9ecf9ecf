"""The cuRAND backend's host logic without a GPU: availability and refusal reasons (nvmath-python is not installed
here), the plan's order (Triton first, cuRAND when preferred), and each op's run on CPU tensors against a stand-in
for ``nvmath.bindings.curand`` that follows cuRAND's host-API contract (a Philox generator restarted by seed and
offset; uniforms in (0, 1]; normals only in even counts) and records the calls: one generator per (thread, device,
stream), reseeded at 2 x offset every call, so the same (seed, offset) repeats and successive calls at
offset + consumed draw from disjoint word windows."""
from __future__ import annotations

import ctypes
import enum
import sys
import types

import numpy as np
import pytest
import torch

import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda.backends import nvmath_import_error
from baracuda.backends.nvidia import curand
from baracuda.backends.reference.random import philox4
from baracuda.ops.random import consumed


def test_curand_is_a_backend_refused_with_its_reason_here():
    assert Backend("curand") is Backend.CURAND
    d = bc.Descriptor.make("uniform", shape=(4,), seed=1)
    text = str(bc.explain(d, "cpu", bc.PlanPreference()))
    assert "curand" in text and "cuRAND needs a CUDA device" in text
    try:
        import nvmath.bindings.curand  # noqa: F401
    except ImportError:
        assert "nvmath-python is not importable" in nvmath_import_error("curand")


@pytest.mark.parametrize("op", curand.CURAND_OPS)
def test_triton_is_preferred_and_curand_is_selectable(op):
    cuda = types.SimpleNamespace(type="cuda")
    d = bc.Descriptor.make(op, ((3, 4), "f32"), seed=1) if op == "bernoulli" else \
        bc.Descriptor.make(op, shape=(3, 4), seed=1, **({"high": 5} if op == "randint" else {}))
    impls = {i.backend: i for i in implementations(op)}
    assert impls[Backend.TRITON].prio(d, cuda) > impls[Backend.CURAND].prio(d, cuda)
    assert "not the Triton stream's numbers" in impls[Backend.CURAND].route_of(d, None)
    st = bc.Descriptor.make(op, *(((3, 4), "f32"),) * (op == "bernoulli"), ((2,), "i64"),
                            **({"shape": (3, 4)} if op != "bernoulli" else {}), **({"high": 5} if op == "randint" else {}))
    assert "state" in impls[Backend.CURAND].supports(st)


class _Rng(enum.IntEnum):
    PSEUDO_XORWOW = 101
    PSEUDO_PHILOX4_32_10 = 161


class _Ordering(enum.IntEnum):
    PSEUDO_DEFAULT = 101


class _StandIn:
    """cuRAND's host-API contract on NumPy: word k of generator (seed, offset) = a Philox word of (seed, offset + k)
    (cuRAND's own order differs; the contract is what baracuda relies on)."""

    RngType, Ordering = _Rng, _Ordering

    def __init__(self):
        self.gens, self.calls = {}, []

    def get_version(self):
        return 11000

    def create_generator(self, kind):
        h = len(self.gens) + 1
        self.gens[h] = {"kind": kind, "seed": None, "offset": 0}
        return h

    def set_generator_ordering(self, g, o):
        self.gens[g]["ordering"] = o

    def set_stream(self, g, s):
        self.gens[g]["stream"] = s

    def set_pseudo_random_generator_seed(self, g, seed):
        self.gens[g]["seed"] = seed
        self.gens[g]["offset"] = 0

    def set_generator_offset(self, g, off):
        self.gens[g]["offset"] = off

    def _words(self, g, n):
        st = self.gens[g]
        w = philox4(st["seed"], np.arange(st["offset"], st["offset"] + n, dtype=np.uint64))[0]
        self.calls.append((g, st["offset"], n))
        st["offset"] += n
        return w

    @staticmethod
    def _out(ptr, n, ctype):
        return np.ctypeslib.as_array((ctype * n).from_address(ptr))

    def generate(self, g, ptr, n):
        self._out(ptr, n, ctypes.c_uint32)[:] = self._words(g, n)

    def generate_uniform(self, g, ptr, n):      # (0, 1]; word 0xFFFFFFFF gives exactly 1
        w = self._words(g, n).astype(np.float64)
        self._out(ptr, n, ctypes.c_float)[:] = np.where(w == 2 ** 32 - 1, 1.0, (w + 1) * 2.0 ** -32)

    def generate_uniform_double(self, g, ptr, n):
        w = self._words(g, 2 * n).astype(np.float64)
        self._out(ptr, n, ctypes.c_double)[:] = (w[::2] + 1) * 2.0 ** -32

    def generate_normal(self, g, ptr, n, mean, std):
        assert n % 2 == 0, "cuRAND: normal counts must be even"
        w = (self._words(g, n).astype(np.float64) + 1) * 2.0 ** -32
        r = np.sqrt(-2 * np.log(w[::2]))
        z = np.stack([r * np.cos(2 * np.pi * w[1::2]), r * np.sin(2 * np.pi * w[1::2])], 1).reshape(-1)
        self._out(ptr, n, ctypes.c_float)[:] = mean + std * z


@pytest.fixture
def lib(monkeypatch):
    fake = _StandIn()
    bindings = types.ModuleType("nvmath.bindings")
    mod = types.ModuleType("nvmath.bindings.curand")
    for name in dir(fake):
        if not name.startswith("_"):
            setattr(mod, name, getattr(fake, name))
    bindings.curand = mod
    monkeypatch.setitem(sys.modules, "nvmath", types.ModuleType("nvmath"))
    monkeypatch.setitem(sys.modules, "nvmath.bindings", bindings)
    monkeypatch.setitem(sys.modules, "nvmath.bindings.curand", mod)
    monkeypatch.setattr(curand, "_stream", lambda device: 7)
    monkeypatch.setattr(curand, "_TLS", types.SimpleNamespace())
    monkeypatch.setattr(torch.cuda, "device", lambda i: __import__("contextlib").nullcontext())
    return fake


def _run(op, *xs, **attrs):
    d = bc.Descriptor.like(op, *xs, **attrs) if xs else bc.Descriptor.make(op, **attrs)
    out = torch.empty(d.outputs[0].shape, dtype=d.outputs[0].dtype.torch)
    curand._bind(d)(d, list(xs), [out], None)
    return d, (out.float() if out.dtype == torch.bfloat16 else out).numpy()


def test_same_seed_and_offset_repeat_and_offsets_advance_by_consumed(lib):
    d, a = _run("uniform", shape=(1000,), seed=5, offset=12, low=-1.0, high=2.0)
    _run("normal", shape=(3,), seed=9)                       # another draw in between changes nothing
    _, b = _run("uniform", shape=(1000,), seed=5, offset=12, low=-1.0, high=2.0)
    np.testing.assert_array_equal(a, b)
    assert a.min() >= -1.0 and a.max() < 2.0
    _, c = _run("uniform", shape=(1000,), seed=5, offset=12 + consumed(d), low=-1.0, high=2.0)
    assert not np.isin(a, c).all()
    gens = {g for g, _, _ in lib.calls}
    assert len(gens) == 1 and lib.gens[gens.pop()]["kind"] == _Rng.PSEUDO_PHILOX4_32_10
    windows = [(off, off + n) for _, off, n in lib.calls]
    assert windows[0] == (24, 1024) and windows[-1][0] == 2 * (12 + 1000)     # 2 words an element of offset


def test_uniform_maps_curands_one_to_low():
    d = bc.Descriptor.make("uniform", shape=(4,), seed=1, low=3.0, high=5.0)
    buf = torch.tensor([1.0, 0.5, 0.25, 2.0 ** -32], dtype=torch.float32)      # cuRAND's (0, 1]
    got = curand._finish("uniform", buf, d, None)
    np.testing.assert_allclose(got.numpy(), [3.0, 4.0, 3.5, 3.0 + 2.0 ** -31], rtol=0, atol=1e-6)


def test_normal_of_odd_length_generates_an_even_count(lib):
    _, z = _run("normal", shape=(5, 3), seed=2, mean=1.0, std=2.0, dtype=bc.DType.bf16)
    assert lib.calls[-1][2] == 16 and z.shape == (5, 3) and np.isfinite(z.astype(np.float32)).all()


def test_randint_exponential_bernoulli_transforms(lib):
    _, r = _run("randint", shape=(4000,), seed=3, low=-3, high=2 ** 32 - 3)
    w = philox4(3, np.arange(4000, dtype=np.uint64))[0].astype(np.uint64)
    np.testing.assert_array_equal(r, -3 + ((w * np.uint64(2 ** 32)) >> np.uint64(32)).astype(np.int64))
    _, r = _run("randint", shape=(4000,), seed=3, low=0, high=7)
    np.testing.assert_array_equal(r, ((w * np.uint64(7)) >> np.uint64(32)).astype(np.int64))
    _, e = _run("exponential", shape=(4000,), seed=4, lambd=2.0)
    assert (e >= 0).all() and abs(e.mean() - 0.5) < 0.03
    x = torch.full((4000,), 0.3, dtype=torch.float32)
    _, y = _run("bernoulli", x, seed=6)
    assert set(np.unique(y)) <= {0.0, 1.0} and abs(y.mean() - 0.3) < 0.03
