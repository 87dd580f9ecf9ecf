"""The GPU FFT backends' host logic on the CPU: the shared layout pipeline and the cuBLAS four-step DFT executor on CPU
torch tensors (torch.matmul runs there too), and the cuFFT executor's plan / decomposition logic against a stand-in
for nvmath.fft that computes with numpy.fft and asserts the layout contract nvmath documents (at most 3 trailing
axes of a contiguous operand; R2C / C2R parity).  Every result is checked against the float64 reference."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import baracuda as bc
from baracuda.backends.nvidia import cufft, fft_gemm
from baracuda.backends.nvidia.fft_layout import direct, transform
from baracuda.backends.reference.fft import fft_nd as reference
from baracuda.ops.fft import params
from baracuda.testing import assert_close

torch = pytest.importorskip("torch")

# (op, input shape, dtype, attrs): every kind, pad / cut, each norm, > 3 axes, a prime above the direct GEMM size,
# a four-step length, the weighted r2c, the halved c2r and the out= resize of fft_nd
CASES = [
    ("fft", (3, 131), "c128", {"norm": "ortho"}),
    ("ifft", (2, 256), "c64", {"n": 250}),
    ("fft", (5, 3), "f64", {"n": 7, "dim": 0, "norm": "forward"}),
    ("rfft2", (2, 3, 5), "f32", {"s": (4, 3), "dim": (0, 2)}),
    ("irfftn", (2, 3, 4), "c128", {"s": (2, 5), "dim": (2, 0), "norm": "forward"}),
    ("hfft", (8,), "c64", {}),
    ("ihfft2", (3, 4), "f64", {"norm": "ortho"}),
    ("fftn", (2, 3, 2, 5, 2), "c128", {}),
    ("irfftn", (2, 3, 2, 4, 3), "c128", {}),
    ("rfftn", (2, 3, 2, 4, 3), "f64", {"norm": "ortho"}),
    ("fft_nd", (2, 7), "f64", {"kind": "r2c", "dim": (1,), "s": (6,), "doubled": True, "out": (5,)}),
    ("fft_nd", (2, 4, 3), "c128", {"kind": "c2c", "dim": (2, 0), "s": (3, 3), "out": (4, 2), "scale": "sqrt_n"}),
    # the halved c2r (rfft's gradient): even and odd lengths, a padded half spectrum, two axes, the Hermitian form
    ("fft_nd", (3, 4), "c128", {"kind": "c2r", "dim": (0, 1), "s": (3, 6), "halved": True, "out": (2, 7)}),
    ("fft_nd", (2, 3, 2), "c64", {"kind": "c2r", "dim": (2,), "s": (5,), "halved": True, "forward": True}),
    ("fft_nd", (3, 4, 2, 3), "c128", {"kind": "c2r", "dim": (1, 0, 3), "s": (4, 3, 4), "halved": True}),
]


def _case(rng, op, shape, dt, attrs):
    desc = bc.Descriptor.make(op, (shape, dt), **attrs)
    x = rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dt in ("c64", "c128") else 0)
    x = x.astype(bc.as_dtype(dt).numpy)
    return desc, x


def _tol(dt):
    # f32 / c64: the four-step GEMMs round each level (eps * sqrt(n) per level, n <= 256 here)
    return (2e-5, 2e-5) if dt in ("f32", "c64") else (1e-11, 1e-11)


def _check(desc, x, dt, execute):
    p = params(desc)
    want = reference(p, x.astype(np.complex128 if np.iscomplexobj(x) else np.float64))
    out = torch.empty(desc.outputs[0].shape, dtype=desc.outputs[0].dtype.torch)
    transform(p, torch.from_numpy(x), out, execute)
    assert_close(out.numpy(), want, *_tol(dt), f"{desc} (layout path)")
    res = direct(p, torch.from_numpy(x), execute)
    if res is not None:
        assert res.is_contiguous()
        assert_close(res.numpy(), want, *_tol(dt), f"{desc} (fresh-result path)")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_gemm_path_matches_the_reference(rng, case):
    desc, x = _case(rng, *case)
    _check(desc, x, case[2], fft_gemm.execute)


def test_gemm_dft_of_long_and_prime_lengths(rng):
    for n in (1000, 1031, 2 * 3 * 5 * 7 * 11):     # four-step, a prime (one dense GEMM), five factors
        x = rng.standard_normal((2, n)) + 1j * rng.standard_normal((2, n))
        for fwd in (True, False):
            y = fft_gemm.dft_last(torch.from_numpy(x), fwd).numpy()
            want = np.fft.fft(x) if fwd else np.fft.ifft(x) * n
            assert_close(y, want, 1e-11, 1e-11, f"dft n={n} forward={fwd}")


def test_gemm_path_refuses_a_large_prime_with_its_reason():
    desc = bc.Descriptor.make("fft", ((2, 4111), "c64"))
    why = fft_gemm._supports(desc)
    assert why is not None and "prime factor 4111 > 4096" in why
    assert fft_gemm._supports(bc.Descriptor.make("fft", ((2, 4096 * 3), "c64"))) is None


# -- cuFFT's executor against a stand-in for nvmath.fft -------------------------------------------------------------
class _FakeFFT:
    made: list = []

    def __init__(self, t, *, axes, options, stream):
        r = t.dim()
        assert 1 <= len(axes) <= 3 and list(axes) == list(range(r - len(axes), r)), axes   # trailing axes only
        assert t.is_contiguous()
        self.kind, self.axes, self.opt, self.operand = options.fft_type, tuple(axes), options, t
        self.shape, self.strides = t.shape, t.stride()
        self.resets = 0
        _FakeFFT.made.append(self)

    def plan(self, stream):
        self.planned = True

    def reset_operand(self, t, stream):
        assert t.shape == self.shape and t.stride() == self.strides and t.dtype == self.operand.dtype
        self.operand, self.resets = t, self.resets + 1

    def execute(self, direction, stream):
        x = self.operand.numpy()
        if self.kind == "C2C":
            y = np.fft.fftn(x, axes=self.axes) if direction == "forward" else np.fft.ifftn(x, axes=self.axes,
                                                                                           norm="forward")
        elif self.kind == "R2C":
            assert direction is None and not np.iscomplexobj(x)
            y = np.fft.rfftn(x, axes=self.axes)
        else:
            assert direction is None
            n = 2 * (x.shape[-1] - 1) + (self.opt.last_axis_parity == "odd")
            s = [x.shape[a] for a in self.axes[:-1]] + [n]
            y = np.fft.irfftn(x, s=s, axes=self.axes, norm="forward")
        single = self.operand.dtype in (torch.float32, torch.complex64)
        real_out = self.kind == "C2R"
        dt = (np.float32 if single else np.float64) if real_out else (np.complex64 if single else np.complex128)
        y = torch.from_numpy(np.ascontiguousarray(y).astype(dt))
        if self.opt.inplace:
            self.operand.copy_(y)
            return self.operand
        return y

    def release_operand(self):
        self.operand = self.operand.new_empty(0)   # (reset_operand must come before the next execute)

    def free(self):
        pass


@pytest.fixture
def fake_nvmath(monkeypatch):
    from dataclasses import dataclass

    @dataclass
    class FFTOptions:
        fft_type: str = None
        inplace: bool = False
        last_axis_parity: str = "even"
        result_layout: str = "optimized"

    fft_mod = types.ModuleType("nvmath.fft")
    fft_mod.FFT, fft_mod.FFTOptions = _FakeFFT, FFTOptions
    root = types.ModuleType("nvmath")
    root.fft = fft_mod
    monkeypatch.setitem(sys.modules, "nvmath", root)
    monkeypatch.setitem(sys.modules, "nvmath.fft", fft_mod)
    monkeypatch.setattr(cufft, "_stream", lambda: None)
    monkeypatch.setattr(cufft, "_PLANS", type(cufft._PLANS)())
    _FakeFFT.made = []
    return _FakeFFT


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}-{c[1]}-{c[2]}")
def test_cufft_executor_plans_and_results(rng, fake_nvmath, case):
    desc, x = _case(rng, *case)
    _check(desc, x, case[2], cufft.execute)
    made = len(fake_nvmath.made)
    _check(desc, x, case[2], cufft.execute)            # the same problem again: every plan reused, operand reset
    assert len(fake_nvmath.made) == made and all(f.resets >= 1 for f in fake_nvmath.made)
    p = params(desc)
    assert all(len(f.axes) <= 3 for f in fake_nvmath.made)
    if len(p.dim) > 3:
        assert len({f.axes for f in fake_nvmath.made}) >= 1 and len(fake_nvmath.made) >= 2


def test_cufft_module_imports_without_nvmath_and_says_why():
    from baracuda.backends import nvmath_import_error

    if "nvmath" in sys.modules and sys.modules["nvmath"] is not None:
        pytest.skip("nvmath-python is installed here")
    assert "nvmath-python is not importable" in nvmath_import_error("fft")
    ex = bc.explain(bc.Descriptor.make("rfft2", ((64, 32, 32), "f32")), "cpu")
    rows = {r[0]: r for r in ex.rows}
    assert rows["cufft"][2] == "refused" and "cuFFT needs a CUDA device" in rows["cufft"][3]
    assert rows["cublas"][2] == "refused" and rows["reference"][2] == "chosen"
    assert cufft._route(bc.Descriptor.make("fftn", ((2, 2, 2, 2, 2), "c64")), None).endswith("C2C x2 plans")


@pytest.mark.parametrize("op", ["stft", "istft"])
def test_stft_istft_gpu_glue_on_the_gemm_executor(op):
    """The GPU stft / istft runs (torch glue + fft_layout + the GEMM executor), on CPU tensors, vs the reference."""
    from baracuda._core.registry import implementations
    from baracuda.testing import draw_samples, reference_f64

    impl = next(i for i in implementations(op) if i.backend == bc.Backend.CUBLAS)
    for s in draw_samples(bc.get_spec(op)):
        desc = bc.Descriptor.like(op, *s.inputs, **s.attrs)
        want = reference_f64(desc, list(s.inputs))[0]
        out = torch.empty(desc.outputs[0].shape, dtype=desc.outputs[0].dtype.torch)
        impl.run(desc, [torch.from_numpy(np.asarray(x)) for x in s.inputs], [out], None)
        assert_close(out.numpy(), want, 1e-11, 1e-11, f"{op}[{s.name}]")
