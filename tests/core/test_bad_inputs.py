"""Bad inputs, generated from the op specs: every registered op's valid problem (its first sample that the reference
backend runs on the CPU) mutated by hypothesis -- wrong Python types for operands, attributes, ``out=`` and
``workspace=``; wrong dtypes, shapes and ranks; zero-size extents; meta tensors and mixed devices; wrong or missing
saved tensors and gradients for ``BackwardPlan.run``; the drop-ins' call path (``baracuda.torch._call.call``, where
every drop-in ends).

What may escape is baracuda's own error (``BaracudaError``: ``ArgumentTypeError`` is a TypeError,
``DeviceMismatchError`` a RuntimeError, ``InvalidProblemError`` a ValueError, ...) naming the op and the argument --
never a bare Python / NumPy / torch exception (AttributeError, IndexError, KeyError, NumPy's AxisError, a TypeError
without the op) -- and a mutated problem that is accepted must give the reference's result, never uninitialized
memory.  CPU only, reference backend: ``BARACUDA_BAD_INPUT_EXAMPLES`` (default 6) examples per op, derandomized so CI
sees the same examples every run; raise it to search wider.
"""
from __future__ import annotations

import functools
import os
import re

import numpy as np
import pytest

import baracuda as bc
from baracuda import (ArgumentTypeError, BaracudaError, DeviceMismatchError, DType, DTypeMismatchError,
                      InvalidProblemError)
from baracuda._core.sku import Backend
from baracuda._core.tensors import given as given_text, to_torch
from baracuda.testing import assert_close, cast, noncontig, reference_f64, sample_arrays, samples_for

torch = pytest.importorskip("torch")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from baracuda.torch import _call  # noqa: E402

REF = bc.PlanPreference(prefer=(Backend.REFERENCE,))
SPECS = sorted(bc.all_specs(), key=lambda s: s.name)
EXAMPLES = int(os.environ.get("BARACUDA_BAD_INPUT_EXAMPLES", "6"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(HealthCheck))

# what is not an array: each must be refused as an operand, an out= or a workspace (NumPy scalars and Python numbers
# included: the Plan API takes arrays; a 0-d operand is a 0-d array)
NOT_ARRAYS = [None, [1.0, 2.0], [[1.0]], 1.0, 3, True, np.float32(1.0), np.int64(2), "x", {"a": 1}, object()]
# values of the wrong Python type for each attribute kind (None is not one: optional attributes take it)
WRONG_TYPE = {
    "int": ["1", 1.5, [1], object()], "axis": ["1", 1.5, [0], object()],
    "float": ["1.0", [1.0], object(), True], "number": ["1.0", [1.0], object(), True],
    "bool": ["True", 1, 0.0, object()], "str": [1, 1.0, ["a"], object()],
    "axes": ["0", 1.5, [0.5], object()], "ints": ["1", 1.5, [1.5], object()], "shape": ["2", 1.5, [2.5], object()],
    "dtype": ["f99", 3, 1.5, object()],
}
ALL_DTYPES = [d for d in DType if not d.is_packed]


# -- the known cases, one by one ---------------------------------------------------------------------------------
@pytest.fixture
def add_plan():
    return bc.Plan.select(bc.Descriptor.make("add", ((2, 3), "f32"), ((3,), "f32")), "cpu", REF)


@pytest.mark.parametrize("bad", [[1.0, 2.0, 3.0], None, np.float32(1.0), 1.0], ids=["list", "None", "np-scalar",
                                                                                       "number"])
def test_plan_run_names_op_and_argument_for_non_arrays(add_plan, bad):
    a, b = np.ones((2, 3), np.float32), np.ones(3, np.float32)
    for kwargs, arg, args in (({}, "b", (a, bad)), ({"out": bad}, "out[0]", (a, b)),
                              ({"workspace": bad}, "workspace", (a, b))):
        if (bad is None and kwargs) or (isinstance(bad, list) and "out" in kwargs):
            continue          # out=None / workspace=None: allocate; out=[...]: one array per output
        with pytest.raises(TypeError, match=rf"^add: argument '{re.escape(arg)}': expected an array .*, got "
                                            rf"{re.escape(given_text(bad))}$") as e:
            add_plan.run(*args, **kwargs)
        assert isinstance(e.value, ArgumentTypeError)


def test_plan_run_refuses_a_meta_tensor(add_plan):
    with pytest.raises(RuntimeError, match=r"add: argument 'a': expected an array on cpu, got one on meta \(a meta "
                                           r"tensor has no data") as e:
        add_plan.run(torch.ones(2, 3, device="meta"), np.ones(3, np.float32))
    assert isinstance(e.value, DeviceMismatchError)


@pytest.mark.parametrize("fn, args, torch_raises", [
    ("add", lambda m: (torch.ones(3), m((3,))), True),
    ("cat", lambda m: ([torch.ones(3), m((3,))],), True),
    ("matmul", lambda m: (torch.ones(3, 3), m((3, 3))), False),
    ("bmm", lambda m: (torch.ones(2, 3, 3), m((2, 3, 3))), False),
])
def test_drop_ins_refuse_mixed_devices(fn, args, torch_raises):
    """A CPU tensor beside a meta one: a RuntimeError naming the devices, as torch's add and cat raise (its matmul
    and bmm return a meta tensor); the drop-ins did return uninitialized CPU memory (the custom op's fake kernel
    ran)."""
    import baracuda.torch as bt

    xs = args(lambda shape: torch.empty(shape, device="meta"))
    if torch_raises:
        with pytest.raises(RuntimeError):
            getattr(torch, fn)(*xs)
    with pytest.raises(RuntimeError, match=rf"^{fn}: argument '.*': expected a tensor on (cpu|meta) .*got one on "
                                           r"(meta|cpu)") as e:
        getattr(bt, fn)(*xs)
    assert isinstance(e.value, DeviceMismatchError)
    # on meta alone the shape rule answers (torch's meta semantics)
    meta = [x.to("meta") if isinstance(x, torch.Tensor) else [t.to("meta") for t in x] for x in xs]
    got, want = getattr(bt, fn)(*meta), getattr(torch, fn)(*meta)
    assert got.device.type == "meta" and got.shape == want.shape and got.dtype == want.dtype


@pytest.mark.parametrize("call, op, arg", [
    (lambda bt, x: bt.add([1.0, 2.0], x), "add", "input"),
    (lambda bt, x: bt.add(x, None), "add", "other"),
    (lambda bt, x: bt.exp([1.0]), "exp", "input"),
    (lambda bt, x: bt.matmul(x, [[1.0]]), "matmul", "b"),
    (lambda bt, x: bt.cat([[1.0], [2.0]]), "cat", "tensors[0]"),
    (lambda bt, x: bt.nn.functional.layer_norm(x, (4,), [1.0] * 4), "layer_norm", "weight"),
    (lambda bt, x: bt.nn.functional.cross_entropy(x, [0, 1, 2]), "cross_entropy", "target"),
    (lambda bt, x: bt.sum(x, 1.0), "sum", "dim"),
    (lambda bt, x: bt.sum(x, (1.5,)), "sum", "dim"),
    (lambda bt, x: bt.nn.functional.softmax(x, "1"), "softmax", "dim"),
])
def test_drop_ins_name_op_and_argument_for_wrong_types(call, op, arg):
    """Wrong Python types: a TypeError (as torch's) naming the op and the argument, never an AttributeError or a
    bare TypeError ('unhashable type', "'float' object is not iterable"), and never a float dim truncated."""
    import baracuda.torch as bt

    with pytest.raises(TypeError, match=rf"^{op}: argument '{re.escape(arg)}': expected ") as e:
        call(bt, torch.randn(3, 4))
    assert isinstance(e.value, ArgumentTypeError)


@pytest.mark.parametrize("op, attrs, arg", [("softmax", {"dim": "1"}, "dim"), ("softmax", {"dim": 1.0}, "dim"),
                                            ("layer_norm", {"normalized_shape": (4.5,)}, "normalized_shape"),
                                            ("sum", {"keepdim": 1}, "keepdim")])
def test_descriptor_make_wrong_attribute_types(op, attrs, arg):
    with pytest.raises(TypeError, match=rf"^{op}: argument '{arg}': expected .*, got") as e:
        bc.Descriptor.make(op, ((3, 4), "f32"), **attrs)
    assert isinstance(e.value, ArgumentTypeError) and isinstance(e.value, InvalidProblemError)


def test_backward_plan_checks_saved_tensors_and_says_how_to_pass_them():
    p = bc.Plan.select(bc.Descriptor.make("softmax", ((3, 5), "f32"), dim=-1), "cpu", REF)
    bw = p.backward()
    rng = np.random.default_rng(2)
    x, g = rng.standard_normal((3, 5)).astype(np.float32), rng.standard_normal((3, 5)).astype(np.float32)
    y = p.run(x)
    (dx,) = bw.run(g, out=y)
    want = y * (g - (g * y).sum(-1, keepdims=True))
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidProblemError, match=re.escape("softmax_backward: argument 'out': expected the saved "
                       "tensor 'out' (the forward's output, f32[3, 5]): run(grad, out=<the forward's output>)")):
        bw.run(g)
    with pytest.raises(InvalidProblemError, match=r"argument 'x': expected only the saved tensors \['out'\]"):
        bw.run(g, out=y, x=x)
    with pytest.raises(InvalidProblemError, match=r"argument 'out': expected shape \(3, 5\).*got \(2, 3, 5\)"):
        bw.run(g, out=np.stack([y, y]))                 # was: a (2, 3, 5) "gradient" for an f32[3, 5] plan
    with pytest.raises(DTypeMismatchError, match=r"argument 'grads\[0\]': expected dtype f32 .*got f64"):
        bw.run(g.astype(np.float64), out=y)
    with pytest.raises(DeviceMismatchError, match=r"argument 'out': expected an array on cpu, got one on meta"):
        bw.run(g, out=torch.empty(3, 5, device="meta"))
    with pytest.raises(ArgumentTypeError, match=r"argument 'grads\[0\]': expected an array"):
        bw.run(g.tolist(), out=y)


def test_autograd_replays_the_backward_without_rechecking(monkeypatch):
    """The drop-ins' autograd passes the forward's own tensors: it takes BackwardPlan.replay, not run's checks."""
    import baracuda.torch as bt

    def no_run(self, *a, **k):
        raise AssertionError("BackwardPlan.run called on the autograd path")
    monkeypatch.setattr(bc.BackwardPlan, "run", no_run)
    x = torch.randn(3, 5, dtype=torch.float64, requires_grad=True)
    g = torch.randn(3, 5, dtype=torch.float64)
    (got,) = torch.autograd.grad(bt.softmax(x, -1), x, g)
    (want,) = torch.autograd.grad(torch.softmax(x, -1), x, g)
    torch.testing.assert_close(got, want)


def test_deferred_check_slot_is_pinned_host_memory_whatever_the_default_device(monkeypatch):
    """Under torch.set_default_device("cuda") the deferred value check's pinned slot was allocated on the GPU
    ("Only dense CPU tensors can be pinned").  Here the default device is 'meta' (a factory without device= lands
    there) and pinning is simulated where no GPU gives a pinned allocator."""
    from baracuda._core import checks

    calls = []
    real_empty = torch.empty

    def empty(*a, **k):
        calls.append(dict(k))
        if not torch.cuda.is_available():
            k["pin_memory"] = False
        return real_empty(*a, **k)
    monkeypatch.setattr(torch, "empty", empty)
    with torch.device("meta"):
        slot = checks._pinned_slot(torch, torch.int32)
    assert slot.device.type == "cpu" and calls == [{"dtype": torch.int32, "device": "cpu", "pin_memory": True}]
    if torch.cuda.is_available():
        assert slot.is_pinned()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a deferred device-side check needs a GPU")
def test_deferred_value_check_under_a_cuda_default_device():
    """A class index out of range under set_default_device('cuda'): the deferred check raises the op's error."""
    import baracuda.torch as bt

    torch.set_default_device("cuda")
    try:
        x, t = torch.randn(4, 5), torch.tensor([0, 1, 7, 2])
        bt.nn.functional.cross_entropy(x, t)
        with pytest.raises(InvalidProblemError, match="cross_entropy"):
            bc.check_errors()
    finally:
        torch.set_default_device(None)


def test_to_torch_of_an_empty_array_stays_on_the_host():
    from baracuda._core.tensors import to_torch as _to_torch

    with torch.device("meta"):
        assert _to_torch(np.empty((0, 3), np.float32)).device.type == "cpu"


# -- the valid problem of each op ---------------------------------------------------------------------------------
class Case:
    """An op's valid problem on the CPU reference backend: descriptor, arrays, plan, outputs; backward plan, output
    gradients and saved tensors (None where the op has no backward)."""

    def __init__(self, spec, attrs, desc, arrays, plan):
        self.spec, self.attrs, self.desc, self.arrays, self.plan = spec, attrs, desc, arrays, plan
        self.op = spec.name
        outs = plan.run(*arrays)
        self.outs = list(outs) if isinstance(outs, tuple) else [outs]
        self.ref = reference_f64(desc, arrays)
        self.bw = self.grads = self.saved = None
        if spec.is_differentiable:
            self.bw = plan.backward()
            rng = np.random.default_rng(0)
            self.grads = [cast(rng.standard_normal(t.shape), t.dtype) if t.dtype.is_floating else None
                          for t in desc.outputs]
            names = spec.arg_names
            self.saved = {n: (arrays[names.index(n)] if n in names else
                              self.outs[0 if n == "out" else int(n[3:])]) for n in self.bw.saves}
            self.bw.run(*self.grads, **self.saved)      # the valid call runs

    def arg(self, i: int) -> str:
        return self.spec.arg_name(i)


def _dtype_under_test(spec) -> DType:
    return next((d for d in (DType.f32, DType.f64) if d in spec.dtypes), spec.dtypes[0])


@functools.lru_cache(maxsize=None)
def case_of(name: str) -> Case | None:
    """The first sample (preferring one with no empty operand) the reference backend plans on the CPU."""
    spec = bc.get_spec(name)
    dt = _dtype_under_test(spec)
    found = []
    for s in samples_for(spec, dt):
        arrays, attrs = sample_arrays(spec, s, dt)
        try:
            desc = bc.Descriptor.like(name, *arrays, **attrs)
            plan = bc.Plan.select(desc, "cpu", REF)
        except bc.UnsupportedError:
            continue
        found.append((all(a.size for a in arrays), attrs, desc, arrays, plan))
        if found[-1][0]:
            break
    if not found:
        return None
    _, attrs, desc, arrays, plan = max(found, key=lambda f: f[0])
    return Case(spec, attrs, desc, arrays, plan)


# -- what may escape ----------------------------------------------------------------------------------------------
def raises(exc, op: str, arg: str | None, fn, *more: str):
    """``fn()`` raises ``exc`` (a BaracudaError) whose message names ``op`` and ``arg`` (and each of ``more``)."""
    try:
        res = fn()
    except BaracudaError as e:
        msg = str(e)
        assert isinstance(e, exc), f"{op}: expected {exc.__name__}, got {type(e).__name__}: {msg}"
        assert op in msg, f"{op}: the error does not name the op: {msg}"
        if arg is not None:
            assert f"'{arg}'" in msg, f"{op}: the error does not name the argument {arg!r}: {msg}"
        for m in more:
            assert m in msg, f"{op}: the error does not say {m!r}: {msg}"
        return e
    raise AssertionError(f"{op}: expected {exc.__name__} naming {arg!r}, got a result: {_brief(res)}")


def ours_or_result(op: str, fn):
    """``fn()``'s result, or None where it raised baracuda's own error; any other exception fails the test."""
    try:
        return fn()
    except BaracudaError as e:
        assert str(e).strip(), f"{op}: an empty error message"
        return None


def _brief(res) -> str:
    return repr(getattr(res, "shape", res))[:80]


def _other_dtype(data, want: DType) -> DType:
    return data.draw(st.sampled_from([d for d in ALL_DTYPES if d != want]), label="dtype")


def _bad_shape(data, shape: tuple) -> tuple:
    """A different shape: one more leading dim, one dim fewer, or one extent changed."""
    ways = ["prepend"] + (["drop", "grow"] if shape else [])
    way = data.draw(st.sampled_from(ways), label="shape change")
    if way == "prepend":
        return (2,) + shape
    if way == "drop":
        return shape[1:]
    k = data.draw(st.integers(0, len(shape) - 1), label="dim")
    return shape[:k] + (shape[k] + 1,) + shape[k + 1:]


def _meta(t) -> "torch.Tensor":
    return torch.empty(t.shape, dtype=t.dtype.torch, device="meta")


def _random_array(rng, t):
    """Valid-looking values for a spec: normal floats, small non-negative ints (indices), random bools."""
    if t.dtype.is_floating or t.dtype.is_complex:
        return cast(rng.standard_normal(t.shape), t.dtype)
    if t.dtype == DType.bool:
        return rng.standard_normal(t.shape) > 0
    return rng.integers(0, 2, t.shape).astype(t.dtype.numpy)


def _check_result(c: Case, desc, res, what: str):
    outs = list(res) if isinstance(res, tuple) else [res]
    assert len(outs) == len(desc.outputs), f"{c.op} {what}: {len(outs)} outputs, expected {len(desc.outputs)}"
    for o, t in zip(outs, desc.outputs):
        assert tuple(o.shape) == t.shape, f"{c.op} {what}: output shape {tuple(o.shape)}, expected {t.shape}"
        assert bc.as_dtype(o.dtype) == t.dtype, f"{c.op} {what}: output dtype {o.dtype}, expected {t.dtype}"
    return outs


def _check_values(c: Case, outs, what: str):
    if c.spec.values_unspecified:
        return
    rtol, atol = c.spec.tol(c.desc.inputs[0].dtype if c.desc.inputs else c.desc.outputs[0].dtype)
    for j, (o, r) in enumerate(zip(outs, c.ref)):
        assert_close(o, r, rtol, atol, f"{c.op} {what} out{j}")


# -- Plan.run -----------------------------------------------------------------------------------------------------
def _bad_operand(c, data, make, exc, match):
    """Plan.run with one operand (drawn) replaced by ``make(i, xs[i])``: ``exc`` naming the op and that operand."""
    if not c.arrays:
        return
    i = data.draw(st.integers(0, len(c.arrays) - 1), label="operand")
    xs = list(c.arrays)
    xs[i] = make(i, xs[i])
    raises(exc, c.op, c.arg(i), lambda: c.plan.run(*xs), match)


def m_operand_type(c, data):
    _bad_operand(c, data, lambda i, x: data.draw(st.sampled_from(NOT_ARRAYS), label="value"), ArgumentTypeError,
                 "expected an array")


def m_operand_meta(c, data):
    _bad_operand(c, data, lambda i, x: _meta(c.desc.inputs[i]), DeviceMismatchError, "meta")


def m_operand_dtype(c, data):
    def make(i, x):
        if data.draw(st.booleans(), label="no baracuda dtype"):
            return np.zeros(np.shape(x), dtype=data.draw(st.sampled_from([np.uint16, object, "U3"])))
        return cast(np.asarray(x), _other_dtype(data, c.desc.inputs[i].dtype))
    _bad_operand(c, data, make, DTypeMismatchError, "expected dtype")


def m_operand_shape(c, data):
    def make(i, x):
        t = c.desc.inputs[i]
        return cast(np.ones(_bad_shape(data, t.shape)), t.dtype)
    _bad_operand(c, data, make, InvalidProblemError, "expected shape")


def m_operand_count(c, data):
    xs = list(c.arrays)
    xs = xs[:-1] if xs and data.draw(st.booleans(), label="fewer") else xs + [np.ones(3, np.float32)]
    raises(InvalidProblemError, c.op, "inputs", lambda: c.plan.run(*xs))


def m_out_type(c, data):
    bad = data.draw(st.sampled_from([v for v in NOT_ARRAYS if v is not None]), label="out")
    e = raises(InvalidProblemError, c.op, None, lambda: c.plan.run(*c.arrays, out=bad))
    assert "'out" in str(e), str(e)


def m_out_meta(c, data):
    j = data.draw(st.integers(0, len(c.outs) - 1), label="output")
    outs = [np.empty_like(o) for o in c.outs]
    outs[j] = _meta(c.desc.outputs[j])
    raises(DeviceMismatchError, c.op, f"out[{j}]", lambda: c.plan.run(*c.arrays, out=outs), "meta")


def m_out_dtype_or_shape(c, data):
    j = data.draw(st.integers(0, len(c.outs) - 1), label="output")
    t = c.desc.outputs[j]
    outs = [np.empty_like(o) for o in c.outs]
    if data.draw(st.booleans(), label="dtype"):
        outs[j] = np.empty(t.shape, _other_dtype(data, t.dtype).numpy)
        raises(DTypeMismatchError, c.op, f"out[{j}]", lambda: c.plan.run(*c.arrays, out=outs))
    else:
        outs[j] = np.empty(_bad_shape(data, t.shape), t.dtype.numpy)
        e = raises(BaracudaError, c.op, None, lambda: c.plan.run(*c.arrays, out=outs))   # too small, or wrong shape
        assert f"out[{j}]" in str(e), str(e)


def m_out_given(c, data):
    """A valid out= (contiguous or a strided view): written in place and returned, with the reference's values."""
    strided = data.draw(st.booleans(), label="strided out")
    outs = [noncontig(to_torch(np.array(o, order="C"))) if strided and np.ndim(o) else np.empty_like(o)
            for o in c.outs]
    res = c.plan.run(*c.arrays, out=outs if len(outs) > 1 else outs[0])
    got = list(res) if isinstance(res, tuple) else [res]
    assert all(g is o for g, o in zip(got, outs)), f"{c.op}: out= is not what run returns"
    _check_values(c, outs, "out=" + ("strided" if strided else "contiguous"))


def m_strided_operands(c, data):
    """Strided torch views of the operands give the reference's values."""
    xs = [noncontig(to_torch(np.array(a, order="C"))) if np.ndim(a) and a.dtype.kind != "V" else a
          for a in c.arrays]
    _check_values(c, _check_result(c, c.desc, c.plan.run(*xs), "strided operands"), "strided operands")


def m_workspace(c, data):
    how = data.draw(st.sampled_from(["type", "meta", "strided"]), label="workspace")
    if how == "type":
        raises(ArgumentTypeError, c.op, "workspace",
               lambda: c.plan.run(*c.arrays, workspace=data.draw(st.sampled_from(NOT_ARRAYS[1:]))))
    elif how == "meta":
        raises(DeviceMismatchError, c.op, "workspace",
               lambda: c.plan.run(*c.arrays, workspace=torch.empty(64, dtype=torch.uint8, device="meta")))
    else:
        ws = np.empty(2 * max(c.plan.workspace_size, 8), np.uint8)[::2]
        raises(InvalidProblemError, c.op, "workspace", lambda: c.plan.run(*c.arrays, workspace=ws), "contiguous")


# -- Descriptor.make ----------------------------------------------------------------------------------------------
def _run_if_valid(c, desc_fn, what):
    """A descriptor the mutation may make: baracuda's error, or a plan whose result has the promised shapes and
    dtypes (its values are the reference backend's own)."""
    desc = ours_or_result(c.op, desc_fn)
    if desc is None:
        return
    plan = ours_or_result(c.op, lambda: bc.Plan.select(desc, "cpu", REF))
    if plan is None:
        return
    rng = np.random.default_rng(1)
    xs = [_random_array(rng, t) for t in desc.inputs]
    res = ours_or_result(c.op, lambda: plan.run(*xs))
    if res is not None:
        _check_result(c, desc, res, what)


def m_attr_type(c, data):
    attrs = [a for a in (c.spec.attrs or ()) if a.kind in WRONG_TYPE]
    if not attrs:
        return
    a = data.draw(st.sampled_from(attrs), label="attribute")
    v = data.draw(st.sampled_from(WRONG_TYPE[a.kind]), label="value")
    given = {**c.attrs, a.name: v}
    specs = [(t.shape, t.dtype) for t in c.desc.inputs]
    raises(InvalidProblemError, c.op, a.label or a.name, lambda: bc.Descriptor.make(c.op, *specs, **given))


def m_attr_unknown(c, data):
    if c.spec.attrs is None:
        return
    specs = [(t.shape, t.dtype) for t in c.desc.inputs]
    raises(InvalidProblemError, c.op, "bogus_attr",
           lambda: bc.Descriptor.make(c.op, *specs, **c.attrs, bogus_attr=1))


def m_make_operand_type(c, data):
    if not c.desc.inputs:
        return
    i = data.draw(st.integers(0, len(c.desc.inputs) - 1), label="operand")
    specs = [(t.shape, t.dtype) for t in c.desc.inputs]
    specs[i] = data.draw(st.sampled_from([None, 3, "f32", ("a", "f32"), ((2.5,), "f32"), ((2,), "f99"),
                                          ((2,), object())]), label="spec")
    raises(ArgumentTypeError, c.op, c.arg(i), lambda: bc.Descriptor.make(c.op, *specs, **c.attrs))


def m_desc_dtype(c, data):
    if not c.desc.inputs:
        return
    i = data.draw(st.integers(0, len(c.desc.inputs) - 1), label="operand")
    specs = [(t.shape, t.dtype) for t in c.desc.inputs]
    specs[i] = (specs[i][0], data.draw(st.sampled_from(ALL_DTYPES), label="dtype"))
    _run_if_valid(c, lambda: bc.Descriptor.make(c.op, *specs, **c.attrs), f"{c.arg(i)} as {specs[i][1]}")


def m_desc_shape(c, data):
    """Another rank, a zero-size extent or another extent for one operand."""
    if not c.desc.inputs:
        return
    i = data.draw(st.integers(0, len(c.desc.inputs) - 1), label="operand")
    specs = [(t.shape, t.dtype) for t in c.desc.inputs]
    shape = specs[i][0]
    if shape and data.draw(st.booleans(), label="zero-size"):
        k = data.draw(st.integers(0, len(shape) - 1), label="dim")
        shape = shape[:k] + (0,) + shape[k + 1:]
    else:
        shape = _bad_shape(data, shape)
    specs[i] = (shape, specs[i][1])
    _run_if_valid(c, lambda: bc.Descriptor.make(c.op, *specs, **c.attrs), f"{c.arg(i)} of shape {shape}")


# -- BackwardPlan.run ---------------------------------------------------------------------------------------------
def m_bw_saved(c, data):
    if c.bw is None or not c.bw.saves:
        return
    n = data.draw(st.sampled_from(c.bw.saves), label="saved")
    t = c.bw._spec_for(n)
    how = data.draw(st.sampled_from(["missing", "type", "meta", "shape", "dtype"]), label="how")
    saved = dict(c.saved)
    run = lambda: c.bw.run(*c.grads, **saved)   # noqa: E731
    if how == "missing":
        del saved[n]
        raises(InvalidProblemError, c.op, n, run, "run(", f"{n}=")    # says how to pass it
    elif how == "type":
        saved[n] = data.draw(st.sampled_from(NOT_ARRAYS))
        raises(ArgumentTypeError, c.op, n, run)
    elif how == "meta":
        saved[n] = _meta(t)
        raises(DeviceMismatchError, c.op, n, run, "meta")
    elif how == "shape":
        saved[n] = cast(np.ones(_bad_shape(data, t.shape)), t.dtype)
        raises(InvalidProblemError, c.op, n, run, "expected shape")
    else:
        saved[n] = cast(np.asarray(saved[n]), _other_dtype(data, t.dtype))
        raises(DTypeMismatchError, c.op, n, run)


def m_bw_unknown_saved(c, data):
    if c.bw is None:
        return
    raises(InvalidProblemError, c.op, "bogus", lambda: c.bw.run(*c.grads, **c.saved, bogus=np.ones(2)), "run(")


def m_bw_grad(c, data):
    if c.bw is None:
        return
    js = [j for j, g in enumerate(c.grads) if g is not None]
    how = data.draw(st.sampled_from(["count", "type", "meta", "shape", "dtype"]), label="how")
    grads = list(c.grads)
    run = lambda: c.bw.run(*grads, **c.saved)   # noqa: E731
    if how == "count" or not js:
        grads = grads[:-1] if data.draw(st.booleans(), label="fewer") else grads + [grads[0]]
        raises(InvalidProblemError, c.op, "grads", run)
        return
    j = data.draw(st.sampled_from(js), label="grad")
    t = c.desc.outputs[j]
    if how == "type":
        grads[j] = data.draw(st.sampled_from(NOT_ARRAYS[1:]))
        raises(ArgumentTypeError, c.op, f"grads[{j}]", run)
    elif how == "meta":
        grads[j] = _meta(t)
        raises(DeviceMismatchError, c.op, f"grads[{j}]", run, "meta")
    elif how == "shape":
        grads[j] = cast(np.ones(_bad_shape(data, t.shape)), t.dtype)
        raises(InvalidProblemError, c.op, f"grads[{j}]", run, "expected shape")
    else:
        grads[j] = cast(np.asarray(grads[j]), _other_dtype(data, t.dtype))
        raises(DTypeMismatchError, c.op, f"grads[{j}]", run)


# -- the drop-ins' call path --------------------------------------------------------------------------------------
def _tensors(c):
    return [to_torch(np.array(a, order="C")) for a in c.arrays]


def m_call_mixed_devices(c, data):
    """One operand on the meta device beside CPU ones: torch's kind of error (a RuntimeError naming the devices),
    not the fake kernel's uninitialized output."""
    if len(c.arrays) < 2 or any(t.dtype.torch is None for t in c.desc.inputs):
        return
    i = data.draw(st.integers(0, len(c.arrays) - 1), label="operand")
    xs = _tensors(c)
    xs[i] = _meta(c.desc.inputs[i])
    first = 1 if i == 0 else 0
    e = raises(DeviceMismatchError, c.op, None, lambda: _call.call(c.op, xs, dict(c.attrs)), "meta", "cpu")
    assert f"'{c.arg(i)}'" in str(e) or f"'{c.arg(first)}'" in str(e), str(e)
    assert isinstance(e, RuntimeError)


def m_call_non_tensor(c, data):
    if not c.arrays:
        return
    i = data.draw(st.integers(0, len(c.arrays) - 1), label="operand")
    xs = _tensors(c)
    xs[i] = data.draw(st.sampled_from(NOT_ARRAYS), label="value")
    raises(ArgumentTypeError, c.op, c.arg(i), lambda: _call.call(c.op, xs, dict(c.attrs)))


def m_call_valid(c, data):
    """The call path on the valid CPU tensors (every drop-in ends here) gives the reference's values."""
    if any(t.dtype.torch is None for t in c.desc.inputs):
        return
    res = _call.call(c.op, _tensors(c), dict(c.attrs))
    _check_values(c, _check_result(c, c.desc, res, "call"), "call")


MUTATIONS = [m_operand_type, m_operand_meta, m_operand_dtype, m_operand_shape, m_operand_count, m_out_type,
             m_out_meta, m_out_dtype_or_shape, m_out_given, m_strided_operands, m_workspace, m_attr_type,
             m_attr_unknown, m_make_operand_type, m_desc_dtype, m_desc_shape, m_bw_saved, m_bw_unknown_saved,
             m_bw_grad, m_call_mixed_devices, m_call_non_tensor, m_call_valid]


@pytest.mark.parametrize("name", [s.name for s in SPECS])
@SETTINGS
@given(data=st.data())
def test_bad_inputs_get_baracudas_errors(name, data):
    c = case_of(name)
    if c is None:
        pytest.skip(f"{name}: no sample the reference backend plans on the CPU")
    mutate = data.draw(st.sampled_from(MUTATIONS), label="mutation")
    mutate(c, data)


def test_backward_with_absent_output_gradients_replays_a_tape(monkeypatch):
    """batch_norm's statistics get no gradient in a training step: the backward runs the tape traced for that pattern
    of absent gradients (the rule is traced once per pattern, not re-run per call), with the rule's values."""
    import baracuda.torch as bt
    from baracuda._core import plan as P

    x = torch.randn(4, 3, 5, dtype=torch.float64, requires_grad=True)
    w = torch.rand(3, dtype=torch.float64, requires_grad=True)
    rm, rv = torch.zeros(3, dtype=torch.float64), torch.ones(3, dtype=torch.float64)
    g = torch.randn(4, 3, 5, dtype=torch.float64)

    def grads():
        y = bt.nn.functional.batch_norm(x, rm.clone(), rv.clone(), w, None, training=True)
        return torch.autograd.grad(y, (x, w), g)

    grads()                                  # (traces the pattern's tape)
    replays = []
    orig = P.BackwardPlan.replay
    monkeypatch.setattr(P.BackwardPlan, "replay", lambda self, *a: replays.append(1) or orig(self, *a))
    got = grads()
    assert not replays, "the rule ran again: no tape for this pattern of absent gradients"
    xr, wr = x.detach().requires_grad_(), w.detach().requires_grad_()
    want = torch.autograd.grad(torch.nn.functional.batch_norm(xr, rm.clone(), rv.clone(), wr, None, training=True),
                               (xr, wr), g)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
