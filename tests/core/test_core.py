"""The core API on the CPU: dtypes, promotion, preferences, errors, Plan argument checks, selection and
explain, array types in and out, zero-size and broadcast (stride-0) inputs.  Uses elementwise ops."""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest

import baracuda as bc
from baracuda import (BufferTooSmallError, DType, DTypeMismatchError, InvalidProblemError, UnsupportedError,
                      WorkspaceTooSmallError)
from baracuda._core.dtypes import from_dlpack_code
from baracuda._core.errors import BaracudaError
from baracuda._core.registry import Impl
from baracuda._core.sku import Backend, MathPrecision, PrecisionGuarantee

torch = pytest.importorskip("torch")

REF = bc.PlanPreference(prefer=("reference",))
UNPACKED = [d for d in DType if not d.is_packed]


# -- dtypes --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dt", list(DType), ids=str)
def test_dtype_names_round_trip(dt):
    assert bc.as_dtype(dt.short) is dt
    assert bc.as_dtype(dt.name) is dt
    assert str(dt) == dt.short


@pytest.mark.parametrize("dt", UNPACKED, ids=str)
def test_dtype_numpy_torch_dlpack_round_trip(dt):
    assert bc.as_dtype(dt.numpy) is dt
    assert bc.as_dtype(dt.torch) is dt
    assert from_dlpack_code(*dt.dlpack) is dt
    assert np.dtype(dt.numpy).itemsize == dt.itemsize


@pytest.mark.parametrize("dt", [d for d in DType if d.is_packed], ids=str)
def test_packed_dtypes_have_no_torch_or_dlpack(dt):
    with pytest.raises(TypeError, match=dt.short):
        dt.torch
    with pytest.raises(TypeError, match="packed"):
        dt.dlpack
    assert dt.numpy == np.dtype(np.uint8) and dt.itemsize == 1


def test_dtype_errors_name_what_was_given():
    with pytest.raises(TypeError, match="'nope'"):
        bc.as_dtype("nope")
    with pytest.raises(TypeError, match="DLPack type"):
        from_dlpack_code(99, 8)


def test_dlpack_array_round_trip():
    """An object that only speaks DLPack goes in zero-copy and comes back as a torch tensor."""

    class OnlyDLPack:
        def __init__(self, a):
            self._a = a

        def __dlpack__(self, **kw):
            return self._a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self._a.__dlpack_device__()

    x = np.linspace(-1, 1, 6, dtype=np.float32)
    d = bc.Descriptor.like("exp", OnlyDLPack(x))
    assert d.inputs[0] == bc.TensorSpec((6,), DType.f32)
    out = bc.Plan.select(d, "cpu", REF).run(OnlyDLPack(x))
    assert isinstance(out, torch.Tensor)
    np.testing.assert_allclose(out.numpy(), np.exp(x), rtol=1e-6)


# -- promotion -------------------------------------------------------------------------------------------
def _torch_promotions():
    """(a, b, torch's result) for every pair of dtypes torch promotes (it refuses e.g. fp8 mixes)."""
    out = []
    for a, b in itertools.product(UNPACKED, UNPACKED):
        try:
            out.append((a, b, torch.result_type(torch.empty(1, dtype=a.torch), torch.empty(1, dtype=b.torch))))
        except RuntimeError:
            pass
    return out


@pytest.mark.parametrize("a,b,want", _torch_promotions(), ids=lambda d: str(d).replace("torch.", ""))
def test_result_type_matches_torch(a, b, want):
    assert bc.result_type(a, b).torch == want


def test_result_type_cases():
    assert bc.result_type(DType.f16, DType.bf16) is DType.f32
    assert bc.result_type(DType.u8, DType.i8) is DType.i16
    assert bc.result_type(DType.bool, DType.i32, DType.f16) is DType.f16
    assert bc.result_type(DType.c64, DType.f64) is DType.c128
    with pytest.raises(ValueError, match="at least one"):
        bc.result_type()


# -- preferences ----------------------------------------------------------------------------------------
def test_plan_preference_validation():
    p = bc.PlanPreference(prefer=("triton",), forbid=["reference"])
    assert p.prefer == (Backend.TRITON,) and p.forbid == (Backend.REFERENCE,)
    assert hash(p) == hash(bc.PlanPreference(prefer=(Backend.TRITON,), forbid=(Backend.REFERENCE,)))
    with pytest.raises(ValueError, match="both preferred and forbidden"):
        bc.PlanPreference(prefer=("triton",), forbid=("triton",))
    with pytest.raises(ValueError, match="max_workspace_bytes must be >= 0, got -1"):
        bc.PlanPreference(max_workspace_bytes=-1)
    with pytest.raises(ValueError, match="nope"):
        bc.PlanPreference(prefer=("nope",))


# -- errors -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("exc,args,builtin,parts", [
    (InvalidProblemError, ("myop", "x", "shape (2, 3)", (4,)), ValueError, ["myop", "'x'", "shape (2, 3)", "(4,)"]),
    (DTypeMismatchError, ("myop", "b", "f32", "f16"), TypeError, ["myop", "'b'", "expected dtype f32", "got f16"]),
    (BufferTooSmallError, ("myop", "out[0]", 12, 6), ValueError, ["myop", "'out[0]'", "needs 12", "got 6"]),
    (WorkspaceTooSmallError, ("myop", 64, 8), ValueError, ["myop", "needs 64 bytes", "got 8"]),
    (UnsupportedError, ("myop", "nothing runs it", {"triton": "too big"}), NotImplementedError,
     ["myop", "nothing runs it", "triton: too big"]),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_error_messages_name_op_arg_expected_got(exc, args, builtin, parts):
    e = exc(*args)
    assert isinstance(e, BaracudaError) and isinstance(e, builtin)
    for p in parts:
        assert p in str(e), (p, str(e))


def test_descriptor_validation_names_the_argument():
    with pytest.raises(InvalidProblemError, match=r"add: argument 'b': expected a shape broadcastable"):
        bc.Descriptor.make("add", ((3, 4), "f32"), ((5,), "f32"))
    with pytest.raises(InvalidProblemError, match="exp: argument 'x': expected a \\(shape, dtype\\) pair"):
        bc.Descriptor.make("exp", "not a pair")
    with pytest.raises(UnsupportedError, match="unknown op"):
        bc.Descriptor.make("no_such_op", ((3,), "f32"))
    a = bc.Descriptor.make("add", ((3, 4), "f32"), ((4,), "f32"))
    b = bc.Descriptor.like("add", np.zeros((3, 4), np.float32), np.zeros(4, np.float32))
    assert a == b and hash(a) == hash(b) and a.outputs == (bc.TensorSpec((3, 4), DType.f32),)


# -- Plan.run argument checks ----------------------------------------------------------------------------
@pytest.fixture
def add_plan():
    d = bc.Descriptor.make("add", ((3, 5), "f32"), ((3, 5), "f32"))
    return bc.Plan.select(d, "cpu", REF)


def _ab(rng):
    return rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)


def test_run_out_is_written_and_returned(add_plan, rng):
    a, b = _ab(rng)
    out = np.full((3, 5), np.nan, np.float32)
    res = add_plan.run(a, b, out=out)
    assert res is out
    np.testing.assert_allclose(out, a + b, rtol=1e-6)


@pytest.mark.parametrize("tdt", ["float32", "bfloat16"])
@pytest.mark.parametrize("dev", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA device"))])
def test_reference_writes_a_torch_out_where_it_lives(dev, tdt, rng):
    """The reference backend computes on host copies of device tensors: an ``out=`` on the GPU gets the result
    copied back (it once stayed unwritten), one on the CPU is written through its NumPy view; also in place."""
    x = torch.from_numpy(rng.standard_normal((3, 4))).to(dev, getattr(torch, tdt))
    p = bc.Plan.select(bc.Descriptor.like("relu", x), dev, REF)
    out = torch.full_like(x, float("nan"))
    assert p.run(x, out=out) is out and torch.equal(out, torch.relu(x))
    want = torch.relu(x)
    assert p.run(x, out=x) is x and torch.equal(x, want)


def test_run_out_errors(add_plan, rng):
    a, b = _ab(rng)
    with pytest.raises(InvalidProblemError, match=r"add: argument 'out\[0\]': expected shape \(3, 5\), got \(5, 3\)"):
        add_plan.run(a, b, out=np.empty((5, 3), np.float32))
    with pytest.raises(BufferTooSmallError, match=r"buffer 'out\[0\]' too small: needs 15 elements, got 6"):
        add_plan.run(a, b, out=np.empty((2, 3), np.float32))
    with pytest.raises(DTypeMismatchError, match=r"'out\[0\]': expected dtype f32, got f64"):
        add_plan.run(a, b, out=np.empty((3, 5), np.float64))
    with pytest.raises(InvalidProblemError, match="'out': expected 1 arrays"):
        add_plan.run(a, b, out=[np.empty((3, 5), np.float32)] * 2)


def test_run_input_errors(add_plan, rng):
    a, b = _ab(rng)
    with pytest.raises(InvalidProblemError, match=r"'b': expected shape \(3, 5\), got \(5,\)"):
        add_plan.run(a, b[0])
    with pytest.raises(DTypeMismatchError, match="'a': expected dtype f32, got f64"):
        add_plan.run(a.astype(np.float64), b)
    with pytest.raises(DTypeMismatchError, match="'b': expected dtype f32, got float16"):
        add_plan.run(torch.from_numpy(a), torch.from_numpy(b).half())
    with pytest.raises(InvalidProblemError, match="'inputs': expected 2 arrays, got 1"):
        add_plan.run(a)


def test_can_implement(add_plan, rng):
    a, b = _ab(rng)
    assert add_plan.can_implement(a, b)
    assert add_plan.can_implement(a, b, out=np.empty((3, 5), np.float32))
    with pytest.raises(InvalidProblemError):
        add_plan.can_implement(a, b.T)


def _workspace_plan():
    """A plan whose implementation declares 64 bytes of workspace (built directly, not registered)."""
    seen = []

    def run(desc, inputs, outputs, ws):
        seen.append(ws.nbytes)
        outputs[0][...] = np.exp(inputs[0].astype(np.float64))

    impl = Impl(op="exp", backend=Backend.REFERENCE, run=run, devices=frozenset({"cpu"}), array_api="numpy",
                precision=lambda d, p: PrecisionGuarantee(MathPrecision.F64, DType.f64), workspace=lambda d: 64)
    d = bc.Descriptor.make("exp", ((4,), "f32"))
    return bc.Plan(d, bc.as_device("cpu"), bc.PlanPreference(), impl), seen


def test_workspace_checks():
    plan, seen = _workspace_plan()
    x = np.linspace(0, 1, 4, dtype=np.float32)
    assert plan.workspace_size == 64
    with pytest.raises(WorkspaceTooSmallError, match="exp: workspace too small: needs 64 bytes, got 8"):
        plan.run(x, workspace=np.empty(8, np.uint8))
    with pytest.raises(WorkspaceTooSmallError, match="needs 64 bytes, got 0"):
        plan.can_implement(x)
    assert plan.can_implement(x, workspace=np.empty(64, np.uint8))
    np.testing.assert_allclose(plan.run(x, workspace=np.empty(100, np.uint8)), np.exp(x), rtol=1e-6)
    plan.run(x)  # allocated by the plan when not given
    assert seen == [100, 64]


def test_max_workspace_refuses(monkeypatch):
    d = bc.Descriptor.make("exp", ((4,), "f32"))
    ex = bc.explain(d, "cpu", bc.PlanPreference(max_workspace_bytes=0))
    assert ex.chosen is not None  # elementwise ops need no workspace


# -- selection, preferences, explain ---------------------------------------------------------------------
def test_explain_lists_refusals_with_reasons():
    d = bc.Descriptor.make("relu", ((8,), "f32"))
    ex = bc.explain(d, "cpu", bc.PlanPreference(forbid=("triton",)))
    rows = {r[0]: r for r in ex.rows}
    assert rows["reference"][2] == "chosen"
    assert rows["triton"][2] == "refused" and "forbidden" in rows["triton"][3]
    text = str(ex)
    assert "refused" in text and "chosen" in text and "relu" in text


def test_triton_refused_on_cpu_without_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    d = bc.Descriptor.make("exp", ((8,), "f32"))
    rows = {r[0]: r for r in bc.explain(d, "cpu").rows}
    if "triton" in rows:
        assert rows["triton"][2] == "refused" and "TRITON_INTERPRET" in rows["triton"][3]
    with pytest.raises(UnsupportedError) as ei:
        bc.Plan.select(d, "cpu", bc.PlanPreference(forbid=("reference",)))
    assert "reference: forbidden" in str(ei.value)
    assert set(ei.value.refusals) >= {"reference"}


def test_prefer_and_forbid_are_honoured():
    d = bc.Descriptor.make("mul", ((4, 4), "f32"), ((4,), "f32"))
    assert bc.Plan.select(d, "cpu", REF).sku.backend is Backend.REFERENCE
    assert bc.Plan.select(d, "cpu", bc.PlanPreference(forbid=("triton",))).sku.backend is Backend.REFERENCE
    from baracuda._core.device import triton_interpreting

    if triton_interpreting():
        p = bc.Plan.select(d, "cpu", bc.PlanPreference(prefer=("triton",)))
        assert p.sku.backend is Backend.TRITON
        p = bc.Plan.select(d, "cpu", bc.PlanPreference(forbid=("reference",)))
        assert p.sku.backend is Backend.TRITON


def test_sku_and_precision_are_one_line():
    p = bc.Plan.select(bc.Descriptor.make("exp", ((4,), "bf16")), "cpu", REF)
    s = str(p.sku)
    assert "\n" not in s and "exp" in s and "bf16" in s and "reference" in s
    assert p.precision.deterministic and p.precision.accumulator is DType.f64


# -- arrays in, arrays out ------------------------------------------------------------------------------
def test_numpy_in_numpy_out(rng):
    x = rng.standard_normal(7).astype(np.float32)
    p = bc.Plan.select(bc.Descriptor.like("exp", x), "cpu", REF)
    y = p.run(x)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)


def test_bf16_numpy_in_bf16_numpy_out(rng):
    x = rng.standard_normal(7).astype(ml_dtypes.bfloat16)
    y = bc.Plan.select(bc.Descriptor.like("neg", x), "cpu", REF).run(x)
    assert isinstance(y, np.ndarray) and y.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(y.astype(np.float32), -x.astype(np.float32))


@pytest.mark.parametrize("tdt", ["float32", "bfloat16", "float16"])
def test_torch_in_torch_out(tdt, rng):
    x = torch.from_numpy(rng.standard_normal((3, 4))).to(getattr(torch, tdt))
    p = bc.Plan.select(bc.Descriptor.like("relu", x), "cpu", REF)
    y = p.run(x)
    assert isinstance(y, torch.Tensor) and y.dtype == x.dtype and y.shape == x.shape
    assert torch.equal(y, torch.relu(x))


def test_zero_size(rng):
    a = np.empty((0, 4), np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    d = bc.Descriptor.like("add", a, b)
    assert d.outputs[0].shape == (0, 4)
    for backend in _cpu_backends("add"):
        out = bc.Plan.select(d, "cpu", bc.PlanPreference(prefer=(backend,))).run(a, b)
        assert out.shape == (0, 4)


def _cpu_backends(op):
    from baracuda.testing import backends_for

    return backends_for(op, bc.as_device("cpu"))


@pytest.mark.parametrize("backend", _cpu_backends("exp"), ids=str)
def test_broadcast_stride0_inputs(backend, rng):
    """np.broadcast_to views (stride 0, read-only) are valid inputs, for every backend that runs here."""
    row = rng.standard_normal(4).astype(np.float32)
    x = np.broadcast_to(row, (3, 4))
    assert x.strides[0] == 0
    pref = bc.PlanPreference(prefer=(backend,))
    y = bc.Plan.select(bc.Descriptor.like("exp", x), "cpu", pref).run(x)
    np.testing.assert_allclose(np.asarray(y), np.exp(np.broadcast_to(row, (3, 4))), rtol=1e-5)
    col = np.broadcast_to(rng.standard_normal((3, 1)).astype(np.float32), (3, 4))
    z = bc.Plan.select(bc.Descriptor.like("add", x, col), "cpu", pref).run(x, col)
    np.testing.assert_allclose(np.asarray(z), x + col, rtol=1e-6)
    tx = torch.from_numpy(row.copy()).expand(3, 4)
    assert tx.stride(0) == 0
    ty = bc.Plan.select(bc.Descriptor.like("exp", tx), "cpu", pref).run(tx)
    assert isinstance(ty, torch.Tensor)
    np.testing.assert_allclose(ty.numpy(), np.exp(x), rtol=1e-5)


# -- backward plan --------------------------------------------------------------------------------------
def test_backward_plan_argument_checks(rng):
    d = bc.Descriptor.make("mul", ((3, 4), "f64"), ((3, 4), "f64"))
    bw = bc.Plan.select(d, "cpu", REF).backward()
    assert set(bw.saves) == {"a", "b"}
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    g = rng.standard_normal((3, 4))
    ga, gb = bw.run(g, a=a, b=b)
    np.testing.assert_allclose(ga, g * b)
    np.testing.assert_allclose(gb, g * a)
    with pytest.raises(InvalidProblemError, match="saved tensor"):
        bw.run(g, a=a)
    with pytest.raises(InvalidProblemError, match=r"grads\[0\]"):
        bw.run(g[:2], a=a, b=b)
    with pytest.raises(UnsupportedError, match="not differentiable"):
        bc.BackwardPlan.select(bc.Descriptor.make("relu_backward", ((3,), "f32"), ((3,), "f32")), "cpu")


def test_non_capturable_plan_refuses_capture(monkeypatch):
    """Impl.capturable=False (CTC's Triton plans read the lengths on the host): under a CUDA-graph capture the
    plan raises UnsupportedError naming the op instead of failing inside CUDA (capture simulated here)."""
    import torch

    from baracuda._core.plan import _refuse_capture

    calls = []
    run = _refuse_capture("ctc_loss", lambda *a: calls.append(a))
    run(None, (), (), None)                      # not capturing: runs
    assert len(calls) == 1
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: True)
    with pytest.raises(bc.UnsupportedError, match=r"ctc_loss: inside a CUDA-graph capture.*plan.capturable is False"):
        run(None, (), (), None)
    assert len(calls) == 1
    from baracuda.backends.triton.loss import ctc as loss_ctc  # noqa: F401  (registers the impls)
    from baracuda._core.registry import implementations
    assert [i.capturable for i in implementations("ctc_loss") if i.backend == bc.Backend.TRITON] == [False]


def test_check_values_modes():
    PlanPreference = bc.PlanPreference
    assert PlanPreference().check_values == "deferred"
    assert PlanPreference(check_values=True).check_values == "sync"
    assert PlanPreference(check_values=False).check_values == "off"
    assert PlanPreference(check_values="off") == PlanPreference(check_values=False)
    with pytest.raises(ValueError, match="check_values must be one of"):
        PlanPreference(check_values="later")


def test_deferred_checks_queue(monkeypatch):
    """The deferred queue (_core/checks.py) with stand-in events: poll settles only what has landed, oldest
    first, raises the first error and keeps the later ones for the next poll; check_errors waits for the rest;
    the slots and events are recycled.  (On the GPU tests/loss_ce/test_fused_grad.py runs the real thing.)"""
    import torch

    from baracuda._core import checks

    class Ev:
        def __init__(self, done):
            self.done, self.waited = done, False

        def query(self):
            return self.done

        def synchronize(self):
            self.done = self.waited = True

    monkeypatch.setattr(checks, "PENDING", type(checks.PENDING)())
    monkeypatch.setattr(checks, "_SLOTS", {})
    monkeypatch.setattr(checks, "_EVENTS", [])

    def entry(done, bad, name):
        return (Ev(done), torch.tensor([1.0 if bad else 0.0]), lambda _: InvalidProblemError(name, "x", "ok", "bad"))

    evs = [entry(True, False, "a"), entry(True, True, "b"), entry(True, True, "c"), entry(False, True, "d"),
           entry(True, False, "e")]
    checks.PENDING.extend(evs)
    with pytest.raises(InvalidProblemError, match="^b: ") as e:
        checks.poll()
    assert "deferred value check" in "".join(e.value.__notes__)
    assert [x[0] for x in checks.PENDING] == [evs[2][0], evs[3][0], evs[4][0]]
    with pytest.raises(InvalidProblemError, match="^c: "):
        checks.poll()
    checks.poll()                                  # d is still in flight: nothing settles past it
    assert len(checks.PENDING) == 2 and not evs[3][0].waited
    with pytest.raises(InvalidProblemError, match="^d: "):
        checks.check_errors()
    assert evs[3][0].waited
    checks.check_errors()
    assert not checks.PENDING
    assert len(checks._EVENTS) == 5 and len(checks._SLOTS[torch.float32]) == 5


# -- no array operands: the plan's device decides; callers of another kind get theirs ----------------------
@pytest.mark.parametrize("backend", _cpu_backends("full"), ids=str)
@pytest.mark.parametrize("shape", [(2, 3), (0, 3)], ids=["filled", "zero-size"])
def test_zero_operand_plan_returns_the_devices_array_type(backend, shape):
    """A plan with no operands has no caller kind to follow: a CPU plan returns NumPy (whichever backend runs it,
    zero-size or not); the torch launcher of the same plan returns tensors."""
    d = bc.Descriptor.make("full", shape=shape, value=2.5, dtype="f32")
    p = bc.Plan.select(d, "cpu", bc.PlanPreference(prefer=(backend,)))
    out = p.run()
    assert type(out) is np.ndarray and out.shape == shape and out.dtype == np.float32
    np.testing.assert_array_equal(out, np.full(shape, 2.5, np.float32))
    got = p.launcher()([])
    assert len(got) == 1 and type(got[0]) is torch.Tensor and tuple(got[0].shape) == shape
    assert torch.equal(got[0], torch.full(shape, 2.5))


@pytest.mark.parametrize("backend", _cpu_backends("cat"), ids=str)
@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_backward_zero_operand_sub_op_takes_the_gradients_kind(backend, kind, rng):
    """cat's backward makes the skipped legacy empty's gradient with ``full`` (no operands): it comes back as the
    array type of the gradients the backward plan runs on, like the other inputs' gradients."""
    d = bc.Descriptor.make("cat", ((0,), "f32"), ((2, 3), "f32"), dim=-2)
    bw = bc.BackwardPlan.select(d, "cpu", bc.PlanPreference(prefer=(backend,)))
    g = rng.standard_normal((2, 3)).astype(np.float32)
    if kind == "torch":
        g = torch.from_numpy(g)
    g_empty, g_k = bw.run(g)
    assert type(g_empty) is type(g) and type(g_k) is type(g)
    assert tuple(g_empty.shape) == (0,) and np.asarray(g_k).tolist() == np.asarray(g).tolist()
