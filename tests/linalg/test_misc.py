"""linalg_misc (matrix_norm, cond, pinv, matrix_rank, matrix_exp, matrix_power, vander, cross, vecdot, lstsq):
the GPU compositions (backends/nvidia/linalg_misc.py, registered for CUDA) run on CPU tensors through their runs
against the NumPy reference on every spec sample, real and complex, forward and backward -- with torch's CPU
factorizations standing in for cuSOLVER's (``FACTORS``; cuSOLVER's are the spectral ops' own, tested there); and
what the generic suite cannot express: gradients torch cannot take (cond's norm-based p), hermitian pinv's
unfolded gradient, lstsq's residuals for rank-deficient input, matrix_power of a singular matrix."""
from __future__ import annotations

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.dtypes import DType
from baracuda._core.oracle import reference_f64
from baracuda._core.spec import Descriptor, TensorSpec, get_spec

torch = pytest.importorskip("torch")
import baracuda.torch as bt  # noqa: E402
from baracuda.backends.nvidia import linalg_misc as gpu  # noqa: E402

RNG = np.random.default_rng(1999)
OPS = ("matrix_norm", "cond", "pinv", "matrix_rank", "matrix_exp", "matrix_power", "vander", "cross", "vecdot", "lstsq")


@pytest.fixture
def cpu_factors(monkeypatch):
    monkeypatch.setitem(gpu.FACTORS, "svd", lambda a: torch.linalg.svd(a, full_matrices=False))
    monkeypatch.setitem(gpu.FACTORS, "eigh", lambda a: torch.linalg.eigh(a, UPLO="L"))
    monkeypatch.setitem(gpu.FACTORS, "qr", lambda a: torch.linalg.qr(a))


def _complex(x):
    x = np.asarray(x)
    return np.asarray(x + 0.5j * RNG.standard_normal(x.shape)) if x.dtype.kind == "f" else x


def _run_gpu(op, arrays, attrs):
    specs = tuple(TensorSpec(np.shape(a), DType.c128 if np.iscomplexobj(a) else DType.f64) for a in arrays)
    desc = Descriptor(op, specs, tuple(sorted(attrs.items())))
    outs = [torch.empty(tuple(o.shape), dtype=getattr(torch, {"f64": "float64", "c128": "complex128", "i64": "int64"}[str(o.dtype)]))
            for o in desc.outputs]
    gpu.RUNS[op](desc, [torch.tensor(np.array(a)) for a in arrays], outs)
    return desc, [o.numpy() for o in outs]


@pytest.mark.parametrize("op", [o for f in OPS for o in (f, f + "_backward") if o in gpu.RUNS])
def test_gpu_composition_matches_the_reference(op, cpu_factors):
    spec = get_spec(op)
    for cplx in (False, True):
        for smp in spec.samples(np.random.default_rng(7)):
            arrays = [_complex(a) if cplx else np.asarray(a, dtype=np.float64) for a in smp.inputs]
            if cplx and op.endswith("_backward"):
                continue   # (the backward samples' saved outputs come from real inputs; complex runs below)
            if op == "matrix_rank" and cplx and smp.name == "rank2":
                continue   # (a complex perturbation of the rank-2 sample has full rank: the cutoff is the test)
            if smp.attrs.get("hermitian") and cplx:
                arrays = [a + np.conj(np.swapaxes(a, -1, -2)) for a in arrays]
            desc, got = _run_gpu(op, arrays, smp.attrs)
            want = reference_f64(desc, arrays)
            for g, w in zip(got, want):
                # float64 throughout; n <= 5 with well-separated singular values: ~1e-13 observed
                np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-9, err_msg=f"{op}[{smp.name}] complex={cplx}")


@pytest.mark.parametrize("op,attrs,shape", [("matrix_norm", {"ord": "nuc"}, (2, 3, 4)), ("matrix_norm", {"ord": -1.0}, (3, 3)),
                                            ("cond", {"p": None}, (3, 4)), ("pinv", {}, (4, 3)),
                                            ("matrix_exp", {}, (2, 3, 3)), ("matrix_power", {"n": -3}, (3, 3)),
                                            ("vander", {"N": 4}, (3,))])
def test_gpu_backward_of_complex_inputs_matches_the_reference(op, attrs, shape, cpu_factors):
    a = RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)
    if op == "matrix_power":
        a = a + 3 * np.eye(shape[-1])
    desc = Descriptor.make(op, (shape, "c128"), **attrs)
    outs = reference_f64(desc, [a])
    o = desc.outputs[0]
    g = np.asarray(RNG.standard_normal(o.shape) + (1j * RNG.standard_normal(o.shape) if o.dtype.is_complex else 0))
    saved = [np.asarray(outs[0])] if op in ("matrix_norm", "cond", "pinv") else []
    _, (got,) = _run_gpu(op + "_backward", [a, *saved, g], attrs)
    want = reference_f64(Descriptor(op + "_backward", tuple(TensorSpec(np.shape(x), DType.c128 if np.iscomplexobj(x)
                                                                         else DType.f64) for x in [a, *saved, g]),
                                    tuple(sorted(desc.attr_dict.items()))), [a, *saved, g])[0]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)


def _fd(f, x, eps=1e-6):
    out = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        d = np.zeros_like(x)
        d[idx] = eps
        out[idx] = (f(x + d) - f(x - d)) / (2 * eps)
    return out


@pytest.mark.parametrize("p", ["fro", 1.0, float("inf"), "nuc"])
def test_cond_gradient_of_norm_based_p_matches_finite_differences(p):
    # torch 2.13 raises for these (its inverse is modified in place); the formula is the product rule through A^-1
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    x = torch.tensor(a, requires_grad=True)
    bt.linalg.cond(x, p).backward()
    want = _fd(lambda m: float(bt.linalg.cond(torch.tensor(m), p)), a)
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6, atol=1e-6)


def test_pinv_hermitian_gradient_is_torchs():
    a = RNG.standard_normal((3, 3))
    ours, theirs = torch.tensor(a, requires_grad=True), torch.tensor(a, requires_grad=True)
    g = torch.tensor(RNG.standard_normal((3, 3)))
    (bt.linalg.pinv(ours, hermitian=True) * g).sum().backward()
    (torch.linalg.pinv(theirs, hermitian=True) * g).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-9, atol=1e-9)


def test_lstsq_empties_residuals_of_rank_deficient_input_like_torch():
    # its own generator: the module's RNG state depends on which of this file's tests ran before on the worker
    rng = np.random.default_rng(113)
    a = rng.standard_normal((5, 3))
    a[:, 2] = a[:, 1]
    b = rng.standard_normal((5, 2))
    min_norm = np.linalg.lstsq(a, b, rcond=None)[0]          # the independent float64 minimum-norm solution
    for driver in ("gelsd", "gelss", "gelsy"):   # (torch's gels raises for a rank-deficient A)
        ours = bt.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        theirs = torch.linalg.lstsq(torch.tensor(a), torch.tensor(b), driver=driver)
        assert type(ours) is type(theirs)
        assert ours.residuals.shape == theirs.residuals.shape, driver
        assert ours.rank.shape == theirs.rank.shape and ours.singular_values.shape == theirs.singular_values.shape
        assert int(ours.rank) == 2, driver
        np.testing.assert_allclose(ours.solution.numpy(), min_norm, rtol=1e-9, atol=1e-12, err_msg=driver)
        torch.testing.assert_close(ours.solution, theirs.solution, msg=lambda m: f"{driver}: {m}")


def test_matrix_power_of_a_singular_matrix_raises_and_zero_is_the_identity():
    with pytest.raises(RuntimeError, match="matrix_power: the input is not invertible"):
        bt.linalg.matrix_power(torch.zeros(3, 3, dtype=torch.float64), -1)
    torch.testing.assert_close(bt.linalg.matrix_power(torch.randn(2, 3, 3), 0), torch.eye(3).expand(2, 3, 3))


def test_matrix_exp_of_a_large_norm_matrix_matches_torch():
    a = torch.tensor(RNG.standard_normal((2, 4, 4)) * 20)     # scaling and squaring: ~7 squarings
    torch.testing.assert_close(bt.linalg.matrix_exp(a), torch.linalg.matrix_exp(a), rtol=1e-9, atol=0)


def test_errors_name_op_argument_and_what_was_given():
    with pytest.raises(bc.InvalidProblemError, match=r"matrix_norm: argument 'ord'"):
        bt.linalg.matrix_norm(torch.randn(3, 3), ord=3)
    with pytest.raises(bc.InvalidProblemError, match=r"cross: argument 'x'"):
        bt.linalg.cross(torch.randn(2, 4), torch.randn(2, 4))
    with pytest.raises(bc.UnsupportedError, match=r"pinv: argument 'atol'"):
        bt.linalg.pinv(torch.randn(2, 3, 3), atol=torch.tensor([0.1, 0.2]))   # (per-matrix tolerances)
