"""Generic tests, generated from the op specs: every op x backend x dtype this machine can run.

forward vs the float64 reference (on the same rounded inputs) and vs the torch peer; non-contiguous (on the CPU:
every sample in one dtype per op and backend, the last sample in the others; see _strided_dtype) and broadcast
inputs; zero-size; plan reuse and determinism where the precision promises it (in test_forward, on the plan of its
last non-empty sample); gradients vs float64 finite differences and torch.autograd; error inputs.
"""
from __future__ import annotations

import numpy as np
import pytest

import baracuda as bc
from baracuda._core.registry import implementations
from baracuda._core.sku import Backend
from baracuda._core.tensors import ArrayKind, kind_of
from baracuda.ops.elementwise import real_of
from baracuda.ops.linalg_common import LinAlgError
from baracuda.testing import (assert_close, sample_arrays, backends_for, cast, finite_difference_grads,
                              forced_plan, noncontig, reference_f64, samples_for, to_f64)
from baracuda.testing import test_device as _test_device

DEVICE = _test_device()
SPECS = sorted(bc.all_specs(), key=lambda s: s.name)


def _declared(op, backend, dt) -> bool:
    """Whether ``backend`` declares ``dt`` for ``op`` (an Impl's ``dtypes``; None: every dtype of the spec).  A dtype
    it leaves out is refused with its ``dtypes_note`` (cuBLAS and the integer GEMMs); tests/<family> check that."""
    return all(i.dtypes is None or dt in i.dtypes for i in implementations(op) if i.backend == backend)


def _cases():
    for spec in SPECS:
        for backend in backends_for(spec.name, DEVICE):
            for dt in spec.dtypes:
                if _declared(spec.name, backend, dt):
                    yield pytest.param(spec, backend, dt, id=f"{spec.name}-{backend}-{dt}")


CASES = list(_cases())


def _to_device(x):
    return _tensor(x) if DEVICE.type == "cuda" else x


def _tensor(x):
    """A torch tensor on the test device."""
    from baracuda._core.tensors import to_torch

    return to_torch(x, DEVICE)


def _desc(spec, sample, dt):
    # float operands take the dtype under test; complex ones (complex_samples, for a complex dtype) too; an op with
    # no operands (a creation op) takes it as its dtype attribute unless the sample sets one
    arrays, attrs = sample_arrays(spec, sample, dt)
    return bc.Descriptor.like(spec.name, *arrays, **attrs), arrays


def _check_out(spec, got, want, rtol, atol, what):
    """got vs the reference's want; an op whose values are unspecified (empty): the shape and dtype only."""
    if spec.values_unspecified:
        assert tuple(got.shape) == tuple(np.shape(want)), f"{what}: shape {tuple(got.shape)} != {np.shape(want)}"
        assert bc.as_dtype(got.dtype) == bc.as_dtype(np.asarray(want).dtype), f"{what}: dtype {got.dtype}"
        return
    assert_close(got, want, rtol, atol, what)


def _samples(spec, dt):
    """The samples ``dt`` is tested on (complex dtypes: complex operands).  Samples the op refuses with ``dt``
    as torch does are left out (the refusals are error cases of their specs): a combination of dtypes and
    attributes torch does not implement (UnsupportedError: div's rounding modes on complex or bool operands, an einsum torch.einsum refuses for int32 operands),
    and for a complex, integer or bool ``dt`` an attribute value
    the dtype cannot hold (InvalidProblemError: hardtanh's negative limits on u8); a floating ``dt`` raises on
    an invalid attribute value (a sample's values are valid for the float dtypes)."""
    skip = (bc.UnsupportedError,) if dt.is_floating else (bc.UnsupportedError, bc.InvalidProblemError)
    out = []
    for s in samples_for(spec, dt):
        try:
            _desc(spec, s, dt)
        except skip:
            continue
        out.append(s)
    return out


def _gout(rng, t):
    """A random output gradient: real for real outputs, complex for complex ones, None for integer/bool."""
    if t.dtype.is_complex:
        return np.asarray(rng.standard_normal(t.shape) + 1j * rng.standard_normal(t.shape))
    return rng.standard_normal(t.shape) if t.dtype.is_floating else None


def _gouts(rng, desc):
    """Random gradients of every output but the trailing ones the spec saves for its backward only
    (``OpSpec.saved_outputs``: solve's LU and pivots)."""
    keep = len(desc.outputs) - desc.spec.saved_outputs
    return [_gout(rng, t) if i < keep else None for i, t in enumerate(desc.outputs)]


def _grad_dtypes(spec):
    """f64 (the f64 check as before), and complex128 where the op takes complex inputs."""
    return [d for d in (bc.DType.f64, bc.DType.c128) if d in spec.dtypes] or [bc.DType.f64]


def _plan_or_skip(desc, backend):
    p = forced_plan(desc, DEVICE, backend)
    return p


def _strided_dtype(spec, backend):
    """The dtype whose every sample is also run on non-contiguous copies, on the CPU (the other dtypes: their last
    sample): f32 where the backend declares it, else its first dtype.  Strides are handled the same way whatever
    the dtype, and the interpreter's runs were most of the CPU suite's time; on a GPU every sample of every dtype
    runs both ways (vector widths there depend on the dtype)."""
    dts = [d for d in spec.dtypes if _declared(spec.name, backend, d)]
    return bc.DType.f32 if bc.DType.f32 in dts else dts[0] if dts else None


@pytest.mark.parametrize("spec,backend,dt", CASES)
def test_forward(spec, backend, dt):
    rtol, atol = spec.tol(dt)
    ran = 0
    samples = _samples(spec, dt)
    every = DEVICE.type == "cuda" or dt == _strided_dtype(spec, backend)
    last = None     # (desc, arrays, plan, contiguous outputs) of the last sample with no empty operand
    for i, sample in enumerate(samples):
        desc, arrays = _desc(spec, sample, dt)
        plan = _plan_or_skip(desc, backend)
        if isinstance(plan, str):
            continue
        assert plan.sku.backend == backend
        ref = reference_f64(desc, arrays)
        for layout in ("contig", "noncontig") if every or i == len(samples) - 1 else ("contig",):
            xs = [_to_device(a) for a in arrays]
            if layout == "noncontig":
                xs = [noncontig(x) for x in xs]
            out = plan.run(*xs)
            outs = out if isinstance(out, tuple) else (out,)
            if layout == "contig" and all(np.asarray(x).size for x in arrays):
                last = (desc, arrays, plan, outs)
            for j, (o, r) in enumerate(zip(outs, ref)):
                assert tuple(o.shape) == desc.outputs[j].shape
                if backend == Backend.CURAND:   # cuRAND's stream: the distribution's support, not the reference's values
                    _check_random_support(spec.name, desc, o)
                    continue
                _check_out(spec, o, r, rtol, atol, f"{spec.name}[{sample.name}] {backend} {dt} {layout} out{j}")
        ran += 1
    assert ran or not samples, f"{spec.name}: {backend} refused every sample for {dt}"
    if last is not None:
        _reuse_and_determinism(spec, backend, dt, *last)


def _check_random_support(name, desc, out):
    """A generator whose stream is not the reference's (cuRAND): every value inside the distribution's support."""
    v = np.asarray(out.double().cpu() if hasattr(out, "cpu") else out, dtype=np.float64)
    a = desc.attr_dict
    assert np.isfinite(v).all(), f"{name}: non-finite values"
    if name in ("uniform", "randint"):
        assert ((v >= a["low"]) & (v <= a["high"])).all(), f"{name}: values outside [{a['low']}, {a['high']}]"
    elif name == "exponential":
        assert (v >= 0).all(), f"{name}: negative values"
    elif name == "bernoulli":
        assert np.isin(v, (0.0, 1.0)).all(), f"{name}: values other than 0 and 1"


def _torch_peer_tol(dt, rtol, atol):
    # the peer rounds intermediate results differently (e.g. bf16 ops in torch round once per op);
    # allow two roundings of the output dtype
    return 2 * rtol, 2 * atol


# peer results known to be wrong in torch: (op, predicate on the sample's arrays, why); the reference and every
# backend are still checked on those samples (test_forward), only the peer comparison is skipped
_PEER_BUGS = [
    ("multilabel_margin_loss", lambda arrays: any(np.asarray(a).size == 0 for a in arrays),
     "torch (2.11 on the H100, 2.13 on the CPU) returns uninitialized memory (6.2e223, 1.7e238, sometimes 0) for "
     "an empty batch with reduction='sum'; the sum of no terms is 0"),
    ("ldexp", lambda arrays: np.asarray(arrays[0]).dtype.kind == "f" and np.asarray(arrays[1]).dtype == np.bool_,
     "torch's CPU kernel (2.11, 2.13) has no bool exponent for a floating mantissa (\"not implemented for 'Bool'\"); "
     "its CUDA kernel and its decomposition compute a * 2^b (tests/elementwise: test_ldexp_bool_exponent)"),
]


def _peer_bug(spec, arrays):
    return next((why for op, pred, why in _PEER_BUGS if op == spec.name and pred(arrays)), None)


@pytest.mark.parametrize("spec", [s for s in SPECS if s.torch_peer is not None], ids=lambda s: s.name)
def test_torch_peer(spec):
    """The reference agrees with PyTorch (the semantic peer) in float64 on every sample."""
    torch = pytest.importorskip("torch")
    dt = bc.DType.f64 if bc.DType.f64 in spec.dtypes else spec.dtypes[0]   # integer-only ops: their widest type
    # complex128 too for public ops (backward helpers take a complex g even for real outputs: their complex
    # values are checked through the complex autograd tests instead)
    dts = [dt] + [bc.DType.c128] * (bc.DType.c128 in spec.dtypes and dt != bc.DType.c128
                                    and spec.torch_name is not None)
    for dt in dts:
        for sample in _samples(spec, dt):
            desc, arrays = _desc(spec, sample, dt)
            ref = reference_f64(desc, arrays)
            if _peer_bug(spec, arrays):
                continue
            peer = spec.torch_peer(*[torch.from_numpy(np.asarray(a)) for a in arrays], **desc.attr_dict)
            peers = peer if isinstance(peer, (tuple, list)) else (peer,)
            for j, (p, r) in enumerate(zip(peers, ref)):
                if spec.values_unspecified:
                    assert tuple(p.shape) == tuple(np.shape(r)), f"{spec.name}[{sample.name}] torch peer shape"
                    continue
                assert_close(p.resolve_conj().numpy(), r, 1e-9, 1e-9, f"{spec.name}[{sample.name}] {dt} torch peer out{j}")


def _reuse_and_determinism(spec, backend, dt, desc, arrays, plan, first):
    """The plan of a sample that test_forward ran (``first``: its contiguous outputs, fresh buffers), run again
    on other values of the same shapes (checked against the reference, cuRAND's against its support: nothing from
    the first run leaks into the second), then on the first inputs once more: bit for bit ``first`` where the
    plan's precision promises determinism."""
    rng = np.random.default_rng(7)
    other = [cast(rng.standard_normal(np.shape(a)), a.dtype) if a.dtype.kind == "f" else
             cast(rng.standard_normal(np.shape(a)) + 1j * rng.standard_normal(np.shape(a)), a.dtype) if a.dtype.kind == "c"
             else a for a in arrays]
    if spec.name == "log" or spec.name.startswith("div"):
        other = [cast(np.abs(np.asarray(o, np.float64)) + 0.5, a.dtype) if a.dtype.kind == "f" else o for o, a in zip(other, arrays)]
    try:
        reference_f64(desc, other)
        # linear algebra: random matrices are outside most ops' domains (positive-definite, well-conditioned, an
        # _ex op's factor of a failed minor is unspecified) even where the reference does not raise
        valid = spec.family != "linalg"
    except LinAlgError:
        valid = False
    if not valid:         # the sample, doubled (the same domain, other values)
        other = [cast(2.0 * np.asarray(a), a.dtype) if a.dtype.kind in "fc" else a for a in arrays]
    o2 = plan.run(*[_to_device(a) for a in other])
    o1b = plan.run(*[_to_device(a) for a in arrays])
    o2, o1b = [(o if isinstance(o, tuple) else (o,)) for o in (o2, o1b)]
    rtol, atol = spec.tol(dt)
    for a, r in zip(o2, reference_f64(desc, other)):
        if backend == Backend.CURAND:
            _check_random_support(spec.name, desc, a)
        else:
            _check_out(spec, a, r, rtol, atol, f"{spec.name} second run with new inputs")
    if plan.precision.deterministic and not spec.values_unspecified:
        for a, b in zip(first, o1b):
            assert np.array_equal(to_f64(a), to_f64(b), equal_nan=True), f"{spec.name}: not deterministic"


GRAD_SPECS = [s for s in SPECS if s.is_differentiable]


def _grad_samples(spec, dt=bc.DType.f64):
    """The first three gradient samples with no empty operand, and the first one with an empty operand beside a
    non-empty one (its gradient: zero-size, or zero where torch's is: cat's skipped legacy empty, a broadcast
    operand of an empty product)."""
    out, empty = [], []
    for s in _samples(spec, dt):
        sizes = [np.asarray(x).size for x in s.inputs]
        if s.grad and all(n <= 64 for n in sizes):
            if all(sizes):
                out.append(s)
            elif any(sizes):
                empty.append(s)
    return out[:3] + empty[:1]


@pytest.mark.parametrize("spec,dt", [(s, d) for s in GRAD_SPECS if s.grad_is_derivative for d in _grad_dtypes(s)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_grad_finite_differences(spec, dt):
    """Backward plan (reference backend, f64 / c128) vs central finite differences of the forward (complex
    inputs: dL/dx + i dL/dy of L = sum Re(conj(g) out), torch's convention)."""
    rng = np.random.default_rng(3)
    for sample in _grad_samples(spec, dt):
        desc, arrays = _desc(spec, sample, dt)
        bw = bc.BackwardPlan.select(desc, "cpu")
        gouts = _gouts(rng, desc)
        outs = reference_f64(desc, arrays)
        saved = _saved(bw, desc, arrays, outs)
        got = bw.run(*gouts, **saved)
        want = finite_difference_grads(desc, arrays, gouts)
        for i, (g, w) in enumerate(zip(got, want)):
            if w is None:
                continue
            assert g is not None, f"{spec.name}: no gradient for input {i}"
            assert_close(g, w, 1e-6, 1e-6, f"{spec.name}[{sample.name}] d/d{spec.arg_names[i]} vs finite differences")


def _saved(bw, desc, arrays, outs):
    names = desc.spec.arg_names
    saved = {}
    for n in bw.saves:
        if n in names:
            saved[n] = arrays[names.index(n)]
        elif n == "out":
            saved[n] = outs[0]
        else:
            saved[n] = outs[int(n[3:])]
    return saved


@pytest.mark.parametrize("spec,dt", [(s, d) for s in GRAD_SPECS if s.torch_peer is not None for d in _grad_dtypes(s)],
                         ids=lambda v: getattr(v, "name", str(v)))
def test_grad_vs_torch_autograd(spec, dt):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    for sample in _grad_samples(spec, dt):
        desc, arrays = _desc(spec, sample, dt)
        bw = bc.BackwardPlan.select(desc, "cpu")
        gouts = _gouts(rng, desc)
        # (a differentiable input gets a gradient where it is floating: cross_entropy's probability targets, not
        # its class indices)
        wants = [i in spec.differentiable and np.asarray(a).dtype.kind in "fc" for i, a in enumerate(arrays)]
        ts = [torch.tensor(np.asarray(a), requires_grad=w) for w, a in zip(wants, arrays)]
        peer = spec.torch_peer(*ts, **desc.attr_dict)
        peers = peer if isinstance(peer, (tuple, list)) else (peer,)
        # (outputs torch's graph does not connect: batch_norm's running statistics, not updated by an empty batch)
        pg = [(p, torch.from_numpy(np.asarray(g))) for p, g in zip(peers, gouts) if g is not None and p.requires_grad]
        try:   # grad_outputs: for complex outputs torch's gradient of L = sum Re(conj(g) out)
            want = torch.autograd.grad([p for p, _ in pg], [t for t in ts if t.requires_grad],
                                       [g for _, g in pg], allow_unused=True)
        except (NotImplementedError, RuntimeError) as e:   # the peer, not us: older torch lacks some derivatives
            if "not implemented" not in str(e):
                raise
            pytest.skip(f"torch {torch.__version__} has no derivative for the peer: {e}")
        outs = reference_f64(desc, arrays)
        got = [g for w, g in zip(wants, bw.run(*gouts, **_saved(bw, desc, arrays, outs))) if w]
        for i, (g, w) in enumerate(zip(got, want)):
            if w is None:
                continue
            assert_close(g, w.clone().numpy(), 1e-9, 1e-9,   # clone: torch's ZeroTensor (sgn) has no numpy()
                         f"{spec.name}[{sample.name}] grad {i} vs torch.autograd")


@pytest.mark.parametrize("spec,backend,dt", [c for c in CASES if c.values[0].is_differentiable
                                             and c.values[1] != Backend.REFERENCE], )
def test_backward_backend(spec, backend, dt):
    """The backward plan on a GPU backend (or Triton under the interpreter) vs the f64 reference backward."""
    rng = np.random.default_rng(11)
    gtol = spec.grad_tol(dt) if spec.grad_tol else tuple(2 * t for t in spec.tol(dt))
    for sample in _grad_samples(spec, dt):
        desc, arrays = _desc(spec, sample, dt)
        if isinstance(forced_plan(desc, DEVICE, backend), str):
            continue
        bw = bc.BackwardPlan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,)))
        # output gradients in each output's own dtype, as autograd hands them (BackwardPlan.run checks it: abs of
        # c64 is f32, float_power of f32 is f64, acos of an int64 is f32, to_dtype's is its target dtype), with
        # values the input's precision holds (the float64 reference below then sees the same numbers)
        exact = dt.is_floating or dt.is_complex
        gouts = [None if g is None else cast(cast(g, (dt if t.dtype.is_complex else real_of(dt)) if exact
                                                  else t.dtype), t.dtype)
                 for g, t in zip(_gouts(rng, desc), desc.outputs)]
        fwd = bc.Plan.select(desc, DEVICE, bc.PlanPreference(prefer=(backend,)))
        # torch tensors on the test device (as the drop-ins' autograd runs it): every gradient comes back as one,
        # also those a rule makes with a zero-operand op (cat's skipped empty input)
        xs = [_tensor(a) for a in arrays]
        outs = fwd.run(*xs)
        outs = outs if isinstance(outs, tuple) else (outs,)
        got = bw.run(*[_tensor(g) if g is not None else None for g in gouts], **_saved(bw, desc, xs, outs))
        for i, g in enumerate(got):
            assert g is None or (kind_of(g) is ArrayKind.TORCH and g.device == xs[0].device), \
                f"{spec.name}[{sample.name}] {backend} grad {i}: a {type(g).__name__}, not a tensor on {xs[0].device}"
        d64, a64 = _desc(spec, sample, bc.DType.c128 if dt.is_complex else bc.DType.f64)
        a64 = [cast(x, dt).astype(np.complex128 if dt.is_complex else np.float64)
               if np.asarray(x).dtype.kind in "fc" else x for x in sample.inputs]
        d64 = bc.Descriptor.like(spec.name, *a64, **sample.attrs)
        bw64 = bc.BackwardPlan.select(d64, "cpu")
        g64 = [g.astype(np.complex128 if g.dtype.kind == "c" else np.float64) if g is not None else None for g in gouts]
        want = bw64.run(*g64, **_saved(bw64, d64, a64, reference_f64(d64, a64)))
        for i, (g, w) in enumerate(zip(got, want)):
            if w is None or not (desc.inputs[i].dtype.is_floating or desc.inputs[i].dtype.is_complex):
                continue
            assert_close(g, w, *gtol, f"{spec.name}[{sample.name}] {backend} {dt} grad {i}")


@pytest.mark.parametrize("spec", [s for s in SPECS if s.errors is not None], ids=lambda s: s.name)
def test_error_inputs(spec):
    cases = list(spec.errors())
    assert cases, f"{spec.name}: no error inputs"
    for case in cases:
        with pytest.raises(case.exc, match=case.match):
            desc = bc.Descriptor.make(spec.name, *case.inputs, **case.attrs)
            bc.Plan.select(desc, "cpu")
